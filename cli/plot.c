// SPDX-License-Identifier: MIT
/*
 * plot.c - `tally plot RESULT.json [-o DIR]`: pictures of a benchmark's
 * JSON, drawn by gnuplot.
 *
 * Each benchmark has a few plot specs: which array of the JSON, which keys
 * are x, y and the series, and which keys split the rows into separate
 * plots.  For every plot the command writes NAME.dat (the numbers and
 * every text of the picture), NAME.gp (a gnuplot script that reads them
 * and writes NAME.png and NAME.svg) and NAME.txt (the title, caption,
 * machine and load the index shows), and runs gnuplot on the script, so a
 * user can edit it and run it again.  When every picture was made,
 * DIR/index.html and DIR/index.md show every picture of DIR with its
 * caption, so that several results plotted into one folder share an
 * index; a run that fails leaves the index as it was.
 *
 * No text of the JSON reaches gnuplot's command parser.  A gnuplot script
 * is a program: in a double-quoted string gnuplot runs `backquoted`
 * commands and expands backslash escapes, and a quote or a newline in a
 * label would end the string and start a command (system("...") is one).
 * Quoting can be made right (single quotes, quotes doubled, newlines
 * removed), but it is a rule every future line of this file would have to
 * follow, and a gnuplot version that expands more inside strings would
 * break it.  So the labels, the categories, the tick labels and the title
 * are data: they are written to NAME.dat, as quoted fields of data lines
 * (where '"' and '\' are replaced, and control characters become spaces),
 * and the script reads them there with `title columnheader`, xtic(1) and
 * strcol(1).  gnuplot's data reader never executes anything.  The script
 * itself holds only this file's constant text (single-quoted, see
 * gp_quoted()), numbers this file formats, and file names made of those
 * (name_part(): an unknown string of the JSON becomes a hash of it), in
 * [A-Za-z0-9._-], characters that have no meaning inside a single-quoted
 * gnuplot string.  gnuplot runs with execvp(), in DIR, with no shell.  The index is HTML: every text in it is escaped (html_text()),
 * and the index.md text is escaped for Markdown as well.
 *
 * Exit status: 0 pictures made; 1 a file could not be written or gnuplot
 * failed; 2 bad usage or a JSON that is malformed or of no known
 * benchmark; 3 gnuplot is missing: the data and scripts are written, the
 * message says what to install.  Every message starts with "tally: ";
 * gnuplot's own messages are passed on as "tally: gnuplot: ...".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tool/args.h"
#include "../tool/schema.h"
#include "json_read.h"
#include "plot.h"

#define MAX_SERIES 64
#define MAX_Y 4
#define MAX_SPLIT 2
#define MAX_SERIES_KEYS 2
#define MAX_CATS 32
#define MAX_FILE (64 << 20)
#define LABEL_LEN 80
#define TEXT_LEN 512

enum plot_kind {
	PLOT_XY,	/* numeric x; a line per (series, y key) */
	PLOT_BARS,	/* categories = y keys (or a member object's keys) */
	PLOT_ROWS,	/* categories = the rows (named by the series key) */
};

/**
 * struct split_key - a key whose values make separate plots.
 * @key: the JSON key.
 * @pre: text before its value in the title ("period ").
 * @post: text after it (" ms").
 */
struct split_key {
	const char *key;
	const char *pre;
	const char *post;
};

/**
 * struct plot_spec - one kind of picture of a benchmark's JSON.
 * @benchmark: the JSON's "benchmark" value.
 * @name: file stem (split values are appended).
 * @section: the array of rows.
 * @kind: %PLOT_XY, %PLOT_BARS or %PLOT_ROWS.
 * @x: the x key (XY): an integer quantity, ticked at its values.
 * @y: y keys: lines (XY), categories (BARS) or bars (ROWS).
 * @bars_object: for BARS, a member object whose keys are the categories.
 * @series: the keys naming a row's series (its category for ROWS): rows
 *	with equal values of all of them are one series.
 * @split: keys whose values make separate plots.
 * @title: the plot's title (the split values follow).
 * @xlabel: x axis label: quantity and unit.
 * @ylabel: y axis label: quantity and unit.
 * @caption: what the picture shows, for the index.
 * @logx: logarithmic x axis.
 * @logy: logarithmic y axis.
 * @stale: a second panel: the share of stale forced reads per series
 *	("stale_reads" of "checks"), beside the latency.
 */
struct plot_spec {
	const char *benchmark;
	const char *name;
	const char *section;
	enum plot_kind kind;
	const char *x;
	const char *y[MAX_Y];
	const char *bars_object;
	const char *series[MAX_SERIES_KEYS];
	struct split_key split[MAX_SPLIT];
	const char *title;
	const char *xlabel;
	const char *ylabel;
	const char *caption;
	bool logx, logy;
	bool stale;
};

#define READERS_SPLIT { { "readers", "", " readers" }, \
			{ "period_ms", "period ", " ms" } }

static const struct plot_spec specs[] = {
	{ "counter", "counter_add", "add", PLOT_XY, "threads",
	  { "ns_per_op" }, NULL, { "impl" }, { { NULL } },
	  "Counter add", "threads adding at once", "time per add (ns)",
	  "Median time of one add to a shared counter, by the number of "
	  "threads adding at once, for tally and the other counter designs. "
	  "Lower is better.",
	  true, true, false },
	{ "counter", "counter_read", "read", PLOT_XY, "cpus",
	  { "ns_per_op" }, NULL, { "impl", "op" }, { { NULL } },
	  "Counter read", "CPUs (simulated)", "time per read (ns)",
	  "Median time of one read of a counter whose every CPU slot holds a "
	  "value, by the number of CPUs, for tally and the kernel-style "
	  "percpu_counter: a line for each one's approximate sum and each "
	  "one's precise sum (a walk of every CPU). Lower is better.",
	  true, true, false },
	{ "counter", "counter_accuracy", "accuracy", PLOT_XY, "cpus",
	  { "max_error", "bound" }, NULL, { "impl" }, { { NULL } },
	  "Counter error of a CPU-hopping updater", "CPUs (simulated)",
	  "|approximate - precise sum| (counts)",
	  "Largest difference between a counter's approximate and precise "
	  "sums seen while one thread adds from CPU to CPU, with the bound "
	  "each design documents for it, by the number of CPUs.",
	  true, true, false },
	{ "stats", "stats_update", "update", PLOT_XY, "depth",
	  { "ns_per_op" }, NULL, { "design" }, { { NULL } },
	  "Statistics tree update", "depth of the updated group (levels)",
	  "time per update (ns)",
	  "Median time of one update of a statistic, by the depth of the "
	  "group updated, for each flushing design. Lower is better.",
	  false, false, false },
	{ "stats", "stats_read_latency", "readers", PLOT_BARS, NULL,
	  { NULL }, "buckets", { "design" }, READERS_SPLIT,
	  "Reader latency", "time one read took", "reads (count)",
	  "Left: how many readers' reads (TALLY_FLUSH_IF_NEEDED) took how "
	  "long, per design, while writers update the tree. Right: the share "
	  "of the checkers' forced reads that missed an update made before "
	  "them (stale); a design that is fast but stale is wrong.",
	  false, true, true },
	{ "stats", "stats_read_percentiles", "readers", PLOT_BARS, NULL,
	  { "p50_us", "p99_us", "p999_us" }, NULL, { "design" },
	  READERS_SPLIT,
	  "Reader latency percentiles", "percentile",
	  "read latency (µs)",
	  "Left: the median, 99th and 99.9th percentile of the readers' read "
	  "latency (TALLY_FLUSH_IF_NEEDED), per design, while writers update "
	  "the tree. Right: the share of the checkers' forced reads that "
	  "missed an update made before them (stale); a design that is fast "
	  "but stale is wrong.",
	  false, true, true },
	{ "oom", "oom_select", "select", PLOT_XY, "tasks",
	  { "median_us" }, NULL, { "method" },
	  { { "cpus", "", " CPUs (simulated)" } },
	  "Victim selection", "tasks", "time per selection (µs)",
	  "Median time to choose an out-of-memory victim among the tasks, by "
	  "their number: the precise scan (every task summed over every CPU) "
	  "against tally's two-pass selection. Lower is better.",
	  true, true, false },
	{ "export", "export_cost", "rows", PLOT_ROWS, NULL,
	  { "us_median" }, NULL, { "row" }, { { NULL } },
	  "Export of a statistics tree", "", "time (µs)",
	  "Median time of each way to export a statistics tree: the "
	  "Prometheus and OpenMetrics text, with and without a flush of every "
	  "group, per-group forced reads formatted with snprintf(), and the "
	  "atomic textfile write. Lower is better.",
	  false, true, false },
	{ "charge", "charge_cost", "charge", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, { "design" },
	  { { "depth", "depth ", "" }, { "fill", "", "" } },
	  "Charge + uncharge", "threads charging at once",
	  "time per charge + uncharge pair (ns)",
	  "Median time of a charge and its uncharge against a chain of groups "
	  "with a max on every level, by the number of threads charging at "
	  "once, for tally's memory groups, the kernel's memcg, ClickHouse's "
	  "MemoryTracker and the bare page counter. Lower is better.",
	  false, true, false },
	{ "malloc", "malloc_cost", "malloc", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, { "design" }, { { NULL } },
	  "malloc + free, accounted or not", "threads allocating at once",
	  "time per malloc + free pair (ns)",
	  "Median time of a malloc and its free (16 B to 64 KiB, a share "
	  "freed by another thread) with glibc's malloc, jemalloc alone, "
	  "jemalloc with tally's accounting, and jemalloc with a "
	  "ClickHouse-style per-thread tracker. Lower is better.",
	  false, false, false },
};

#define NR_SPECS (sizeof(specs) / sizeof(specs[0]))

/*
 * The words of the JSON (keys and values) as a reader names them; a value
 * not listed here is shown as it is (a design's or method's name).
 */
static const char *const human[][2] = {
	{ "lt_100us", "< 100 µs" },
	{ "100us_1ms", "100 µs - 1 ms" },
	{ "1_10ms", "1 - 10 ms" },
	{ "10_100ms", "10 - 100 ms" },
	{ "ge_100ms", "≥ 100 ms" },
	{ "p50_us", "p50 (median)" },
	{ "p99_us", "p99" },
	{ "p999_us", "p99.9" },
	{ "max_error", "largest error" },
	{ "bound", "documented bound" },
	{ "us_median", "median" },
	{ "approximate_sum", "approximate sum" },
	{ "precise_sum", "precise sum" },
	{ "two_pass", "two-pass" },
	{ "precise", "precise scan" },
	{ "far", "chain far below max" },
	{ "95", "chain at 95% of max" },
	{ "prometheus", "Prometheus text" },
	{ "openmetrics", "OpenMetrics text" },
	{ "updates_then_prometheus", "updates, then Prometheus text" },
	{ "updates", "updates alone" },
	{ "per_group_reads", "forced read of every group" },
	{ "textfile", "textfile write" },
	{ "kernel", "kernel memcg" },
	{ "clickhouse", "ClickHouse MemoryTracker" },
	{ "page_counter", "bare page counter" },
};

static const char *human_label(const char *raw)
{
	for (size_t i = 0; i < sizeof(human) / sizeof(human[0]); i++)
		if (!strcmp(human[i][0], raw))
			return human[i][1];
	return raw;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally plot RESULT.json [-o DIR]\n"
		"\n"
		"Draw the figures of a benchmark's JSON (tally bench NAME --json FILE)\n"
		"with gnuplot: for each plot DIR/NAME.png and NAME.svg, with the data\n"
		"(NAME.dat), the gnuplot script (NAME.gp) and the caption (NAME.txt)\n"
		"beside them; then, when every picture was made, DIR/index.html and\n"
		"DIR/index.md show every picture in DIR with its caption, machine and\n"
		"load.\n"
		"\n"
		"  -o, --output DIR  where to write (default: the JSON file's directory)\n"
		"  -h, --help        show this help\n"
		"\n"
		"Exit status: 0 done, 1 a file or gnuplot failed, 2 bad usage or input,\n"
		"3 gnuplot missing (data and scripts written).\n");
}

__attribute__((format(printf, 1, 2)))
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("tally: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The whole file, NUL-terminated; *len its length.  NULL: errno says. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n;

	*len = 0;
	if (!f)
		return NULL;
	do {
		if (*len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			if (cap > MAX_FILE ||
			    !(nb = realloc(buf, cap))) {
				free(buf);
				fclose(f);
				errno = EFBIG;
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + *len, 1, cap - *len - 1, f);
		*len += n;
	} while (n);
	if (ferror(f)) {
		int err = errno;

		free(buf);
		fclose(f);
		errno = err ? err : EIO;
		return NULL;
	}
	fclose(f);
	buf[*len] = '\0';
	return buf;
}

/* Length of the UTF-8 character starting with byte @c (1 if not a lead). */
static size_t utf8_len(unsigned char c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/*
 * @in as one line of text of at most @len - 1 bytes, cut between UTF-8
 * characters (the JSON reader accepts valid UTF-8 only): control
 * characters (a newline would end the line) become spaces.  For a field
 * of a data file ("...", @data), where '"' would end the field and
 * gnuplot treats '\\' inconsistently, those become ' and /.
 */
static void line_text(char *out, size_t len, const char *in, bool data)
{
	size_t o = 0;

	while (*in) {
		unsigned char c = (unsigned char)*in;
		size_t n = utf8_len(c);

		if (o + n >= len)
			break;
		if (data && c == '"') {
			out[o++] = '\'';
		} else if (data && c == '\\') {
			out[o++] = '/';
		} else if (c < 0x20 || c == 0x7f) {
			out[o++] = ' ';
		} else {
			memcpy(out + o, in, n);
			o += n;
			in += n;
			continue;
		}
		in++;
	}
	out[o] = '\0';
}

static void data_text(char *out, size_t len, const char *in)
{
	line_text(out, len, in, true);
}

/* A JSON scalar as a reader names it, made data text. */
static void value_label(const struct json_value *v, char *out, size_t len)
{
	char num[32];
	const char *s = "?";

	if (v && v->type == JSON_NUMBER) {
		snprintf(num, sizeof(num), "%g", v->number);
		s = num;
	} else if (v && v->type == JSON_STRING) {
		s = human_label(v->string);
	} else if (v && v->type == JSON_BOOL) {
		s = v->boolean ? "true" : "false";
	}
	data_text(out, len, s);
}

/* @s made safe as part of a file name: [A-Za-z0-9._-], '_' for others. */
static void file_part(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
			*s = '_';
}

/*
 * A split value as part of a file name, which the script names: a number
 * as this file prints it, a string this file knows (human[]) in this
 * file's own spelling, any other string as a hash of it ("h" and 8 hex
 * digits), so that no byte of the JSON is copied into a name.
 */
static void name_part(const struct json_value *v, char *out, size_t len)
{
	if (v && v->type == JSON_NUMBER) {
		snprintf(out, len, "%g", v->number);
	} else if (v && v->type == JSON_STRING) {
		uint32_t h = 2166136261u;	/* FNV-1a */
		size_t i;

		for (i = 0; i < sizeof(human) / sizeof(human[0]); i++)
			if (!strcmp(human[i][0], v->string))
				break;
		if (i < sizeof(human) / sizeof(human[0])) {
			snprintf(out, len, "%s", human[i][0]);
		} else {
			for (const char *c = v->string; *c; c++)
				h = (h ^ (unsigned char)*c) * 16777619u;
			snprintf(out, len, "h%08x", (unsigned int)h);
		}
	} else {
		snprintf(out, len, "none");
	}
	file_part(out);
}

/* Is @s a name file_part() could have made (and not "." or "..")? */
static bool is_file_part(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' ||
		      *s == '_'))
			return false;
	return true;
}

/*
 * @s as a single-quoted gnuplot string: inside single quotes gnuplot
 * expands nothing (no backquote, no escape, no macro), and a quote is
 * written twice.  Used for this file's own text and file names only.
 */
static void gp_quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('\'', f);
}

static bool is_number(const struct json_value *v)
{
	return v && v->type == JSON_NUMBER;
}


/* Equal JSON scalars (the raw values: labels may be cut or replaced). */
static bool same_value(const struct json_value *a, const struct json_value *b)
{
	if (!a || !b)
		return a == b;
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_NUMBER:
		return a->number == b->number;
	case JSON_STRING:
		return !strcmp(a->string, b->string);
	case JSON_BOOL:
		return a->boolean == b->boolean;
	case JSON_NULL:
		return true;
	default:
		return a == b;
	}
}

/* Do rows @a and @b have the same values of the split keys? */
static bool same_split(const struct plot_spec *s, const struct json_value *a,
		       const struct json_value *b)
{
	for (int k = 0; k < MAX_SPLIT && s->split[k].key; k++)
		if (!same_value(json_get(a, s->split[k].key),
				json_get(b, s->split[k].key)))
			return false;
	return true;
}

/**
 * struct output - where and how the run goes.
 * @dir: the output directory.
 * @doc: the benchmark's JSON.
 * @gnuplot_missing: gnuplot is not installed: no picture is drawn.
 * @failed: a file or gnuplot failed: the run stops, no index.
 * @plots: plots made.
 */
struct output {
	const char *dir;
	const struct json_value *doc;
	bool gnuplot_missing;
	bool failed;
	unsigned int plots;
};

/* DIR/NAME.EXT into @path; false (said) when it does not fit. */
static bool out_path(struct output *o, char *path, size_t len,
		     const char *name, const char *ext)
{
	if ((size_t)snprintf(path, len, "%s/%s.%s", o->dir, name, ext) < len)
		return true;
	say("%s/%s.%s: path too long", o->dir, name, ext);
	o->failed = true;
	return false;
}

static FILE *open_out(struct output *o, const char *name, const char *ext)
{
	char path[4096];
	FILE *f;

	if (!out_path(o, path, sizeof(path), name, ext))
		return NULL;
	f = fopen(path, "w");
	if (!f) {
		say("cannot write %s: %s", path, strerror(errno));
		o->failed = true;
	}
	return f;
}

static int close_out(struct output *o, FILE *f, const char *name,
		     const char *ext)
{
	bool err = ferror(f);

	if (fclose(f) || err) {
		say("cannot write %s/%s.%s: %s", o->dir, name, ext,
		    strerror(errno ? errno : EIO));
		o->failed = true;
		return -1;
	}
	return 0;
}

/**
 * struct series_set - the series of one plot, in order of appearance.
 * @first: each series' first row (its values of the series keys are
 *	what the other rows match).
 * @label: its label: data text, cut to fit, made unique.
 * @n: how many.
 */
struct series_set {
	const struct json_value *first[MAX_SERIES];
	char label[MAX_SERIES][LABEL_LEN];
	size_t n;
};

/* Does @row belong to series @k of @set? */
static bool in_series(const struct plot_spec *s, const struct series_set *set,
		      size_t k, const struct json_value *row)
{
	for (int i = 0; i < MAX_SERIES_KEYS && s->series[i]; i++)
		if (!same_value(json_get(row, s->series[i]),
				json_get(set->first[k], s->series[i])))
			return false;
	return true;
}

/* The label of @row's series: its series values, named, space-separated. */
static void series_label(const struct plot_spec *s,
			 const struct json_value *row, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < MAX_SERIES_KEYS && s->series[i]; i++) {
		char part[LABEL_LEN];

		value_label(json_get(row, s->series[i]), part, sizeof(part));
		if (used + 1 + strlen(part) >= len)
			break;
		used += (size_t)snprintf(out + used, len - used, "%s%s",
					 i ? " " : "", part);
	}
}

/* The series of the rows of @first's split; more than MAX_SERIES: said. */
static void collect_series(const struct plot_spec *s,
			   const struct json_value *rows,
			   const struct json_value *first, const char *name,
			   struct series_set *set)
{
	bool dropped = false;

	set->n = 0;
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		size_t k;

		if (row->type != JSON_OBJECT || !same_split(s, first, row))
			continue;
		for (k = 0; k < set->n && !in_series(s, set, k, row); k++)
			;
		if (k < set->n)
			continue;
		if (set->n == MAX_SERIES) {
			dropped = true;
			continue;
		}
		set->first[k] = row;
		series_label(s, row, set->label[k], LABEL_LEN - 16);
		for (size_t j = 0; j < k; j++)
			if (!strcmp(set->label[j], set->label[k])) {
				size_t len = strlen(set->label[k]);

				snprintf(set->label[k] + len, 16, " #%zu",
					 k + 1);
				break;
			}
		set->n++;
	}
	if (dropped)
		say("%s: more than %d series; the others are left out", name,
		    MAX_SERIES);
}

/* Block 0 of every NAME.dat: the title, read by the script. */
static void put_title_block(FILE *dat, const char *title)
{
	fprintf(dat,
		"# Made by tally plot. Block 0: the title; then the data, each\n"
		"# block's first line its column titles.\n\"%s\"\n\n\n",
		title);
}

/**
 * struct shape - what the script needs to know of the data.
 * @n: lines (XY) or bars per category (BARS, ROWS).
 * @points: points or bars drawn.
 * @x: smallest and largest x (XY).
 * @y: smallest and largest y drawn.
 */
struct shape {
	size_t n;
	size_t points;
	double x[2];
	double y[2];
};

static void shape_add(double v[2], size_t points, double value)
{
	if (!points || value < v[0])
		v[0] = value;
	if (!points || value > v[1])
		v[1] = value;
}

/*
 * A range around @v, when all values are equal (gnuplot would warn and
 * widen it itself): an octave each side on a log axis, else 1.
 */
static void fixed_range(FILE *gp, const char *axis, const double v[2],
			bool log)
{
	if (v[0] != v[1] || (log && v[0] <= 0))
		return;
	if (log)
		fprintf(gp, "set %srange [%.17g:%.17g]\n", axis, v[0] / 2,
			v[0] * 2);
	else
		fprintf(gp, "set %srange [%.17g:%.17g]\n", axis, v[0] - 1,
			v[0] + 1);
}

/*
 * How the script draws one picture (both terminals run it): @body writes
 * the settings and plot commands of NAME.
 */
typedef void (*body_fn)(FILE *gp, const struct plot_spec *s,
			const char *name, const struct shape *sh);

/* Settings every picture starts with (the body runs twice: reset all). */
static void common_settings(FILE *gp, const struct plot_spec *s,
			    const char *title_var)
{
	fprintf(gp, "set encoding utf8\n");
	if (title_var)
		fprintf(gp, "set title %s noenhanced\n", title_var);
	fprintf(gp, "set xlabel ");
	gp_quoted(gp, s->xlabel);
	fprintf(gp, "\nset ylabel ");
	gp_quoted(gp, s->ylabel);
	fprintf(gp, "\nset key outside right top noenhanced\nset grid\n");
	if (s->logx)
		fprintf(gp, "set logscale x 2\n");
	if (s->logy)
		fprintf(gp, "set logscale y\n");
}

static void write_script(struct output *o, const struct plot_spec *s,
			 const char *name, const struct shape *sh,
			 body_fn body)
{
	static const char *const terms[][2] = {
		{ "pngcairo", "png" },
		{ "svg", "svg" },
	};
	FILE *gp = open_out(o, name, "gp");
	char file[300];

	if (!gp)
		return;
	fprintf(gp,
		"# Made by tally plot; edit and run again: gnuplot %s.gp\n"
		"# Every text of the benchmark's JSON is in %s.dat: read there,\n"
		"# never written into this script.\n"
		"stats ", name, name);
	snprintf(file, sizeof(file), "%s.dat", name);
	gp_quoted(gp, file);
	fprintf(gp, " index 0 using (title_text = strcol(1), 0) nooutput\n");
	for (size_t t = 0; t < 2; t++) {
		fprintf(gp, "set terminal %s size %d,540%s noenhanced",
			terms[t][0], s->stale ? 1280 : 960,
			t ? " dynamic" : "");
		snprintf(file, sizeof(file), "%s.%s", name, terms[t][1]);
		fprintf(gp, "\nset output ");
		gp_quoted(gp, file);
		fprintf(gp, "\nreset\n");
		body(gp, s, name, sh);
		fprintf(gp, "unset output\n");
	}
	close_out(o, gp, name, "gp");
}

static void xy_body(FILE *gp, const struct plot_spec *s, const char *name,
		    const struct shape *sh)
{
	char file[300];

	common_settings(gp, s, "title_text");
	fixed_range(gp, "x", sh->x, s->logx);
	fixed_range(gp, "y", sh->y, s->logy);
	snprintf(file, sizeof(file), "%s.dat", name);
	/*
	 * Ticks at the measured x values, labelled from the data (a tick
	 * on the border would be dropped: room on both sides).
	 */
	fprintf(gp, "set offsets graph 0.04, graph 0.04, 0, 0\n");
	fprintf(gp, "plot for [i=1:%zu] ", sh->n);
	gp_quoted(gp, file);
	fprintf(gp,
		" index i using 1:2:xticlabels(1) with linespoints title columnheader(1)\n");
}

/* Each write_*() returns the number of points it wrote (0: no picture). */
static size_t write_xy(struct output *o, const struct plot_spec *s,
		       const struct json_value *rows,
		       const struct json_value *first, const char *name,
		       const char *title)
{
	struct series_set set;
	struct shape sh = { 0 };
	size_t nr_y = 0;
	FILE *dat;

	collect_series(s, rows, first, name, &set);
	while (nr_y < MAX_Y && s->y[nr_y])
		nr_y++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	for (size_t k = 0; k < set.n; k++) {
		for (size_t y = 0; y < nr_y; y++) {
			unsigned int points = 0;

			/* The line's title, then its points. */
			fprintf(dat, "\"%s%s%s\"\n", set.label[k],
				nr_y > 1 ? " " : "",
				nr_y > 1 ? human_label(s->y[y]) : "");
			for (size_t r = 0; r < rows->n; r++) {
				const struct json_value *row = &rows->items[r];
				const struct json_value *xv = json_get(row, s->x);
				const struct json_value *yv =
					json_get(row, s->y[y]);

				if (!same_split(s, first, row) ||
				    !in_series(s, &set, k, row) ||
				    !is_number(xv) || !is_number(yv))
					continue;
				fprintf(dat, "%.17g %.17g\n", xv->number,
					yv->number);
				shape_add(sh.x, sh.points, xv->number);
				shape_add(sh.y, sh.points, yv->number);
				sh.points++;
				points++;
			}
			if (!points)
				fprintf(dat, "NaN NaN\n");
			fprintf(dat, "\n\n");
			sh.n++;
		}
	}
	if (close_out(o, dat, name, "dat"))
		return 0;
	if (sh.points)
		write_script(o, s, name, &sh, xy_body);
	return sh.points;
}

/* One bar's value; zero cannot go on a log axis, so it is left out. */
static void put_bar(FILE *dat, const struct plot_spec *s,
		    const struct json_value *v, struct shape *sh)
{
	if (is_number(v) && (v->number > 0 || !s->logy)) {
		fprintf(dat, " %.17g", v->number);
		shape_add(sh->y, sh->points, v->number);
		sh->points++;
	} else {
		fprintf(dat, " NaN");
	}
}

static void bars_settings(FILE *gp, const struct plot_spec *s,
			  const struct shape *sh, const char *title_var)
{
	common_settings(gp, s, title_var);
	fprintf(gp,
		"set style data histograms\nset style histogram clustered gap 1\n"
		"set style fill solid 0.8 border -1\nset boxwidth 0.9\n");
	fprintf(gp, "set xtics rotate by -30\n");
	/* Counts on a log axis: a bar of 1 read must show. */
	if (s->bars_object && s->logy && sh->y[0] == sh->y[1])
		fprintf(gp, "set yrange [0.5:%.17g]\n", 2 * sh->y[1]);
	else if (s->bars_object && s->logy)
		fprintf(gp, "set yrange [0.5:*]\n");
	else
		fixed_range(gp, "y", sh->y, s->logy);
}

/*
 * Stale reads, right of the latency: block 2 of NAME.dat, a bar per
 * series (@n), each in its series' colour, its value written above it.
 */
static void stale_panel(FILE *gp, const char *file, size_t n)
{
	fprintf(gp,
		"set origin 0.6,0\nset size 0.4,0.94\n"
		"unset logscale y\nset yrange [0:100]\nset xrange [-0.6:%zu.6]\n"
		"set boxwidth 0.6\nset title 'stale forced reads'\n"
		"set xlabel 'design'\nset ylabel 'stale reads (%% of forced reads)'\n"
		"plot ", n ? n - 1 : 0);
	gp_quoted(gp, file);
	fprintf(gp, " index 2 using 0:2:($0 + 1):xtic(1) with boxes lc variable "
		"notitle, '' index 2 using 0:2:(sprintf('%%.1f%%%%', $2)) with "
		"labels offset 0,0.8 notitle\n");
}

/*
 * A clustered bar chart: block 1 of NAME.dat has the categories in column
 * 1, @nr_bars bars from column 2 on, their titles in its first line.
 */
static void bars_body(FILE *gp, const struct plot_spec *s, const char *name,
		      const struct shape *sh)
{
	size_t nr_bars = sh->n;
	char file[300];

	snprintf(file, sizeof(file), "%s.dat", name);
	if (s->stale) {
		fprintf(gp, "set multiplot title title_text noenhanced\n");
		bars_settings(gp, s, sh, NULL);
		fprintf(gp, "set title 'read latency'\n"
			"set origin 0,0\nset size 0.6,0.94\n");
	} else {
		bars_settings(gp, s, sh, "title_text");
	}
	fprintf(gp, "plot for [i=2:%zu] ", nr_bars + 1);
	gp_quoted(gp, file);
	fprintf(gp, " index 1 using i:xtic(1) title columnheader(i)\n");
	if (s->stale) {
		stale_panel(gp, file, nr_bars);
		fprintf(gp, "unset multiplot\n");
	}
}

/* Block 2: each series' stale forced reads, percent of its checks. */
static void put_stale_block(FILE *dat, const struct series_set *set)
{
	fprintf(dat, "\n\n# design, stale forced reads (%%)\n");
	for (size_t k = 0; k < set->n; k++) {
		const struct json_value *st = json_get(set->first[k],
						       "stale_reads");
		const struct json_value *ch = json_get(set->first[k], "checks");

		fprintf(dat, "\"%s\"", set->label[k]);
		if (is_number(st) && is_number(ch) && ch->number > 0)
			fprintf(dat, " %.17g\n", 100 * st->number / ch->number);
		else
			fprintf(dat, " NaN\n");
	}
}

static size_t write_bars(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows,
			 const struct json_value *first, const char *name,
			 const char *title)
{
	struct series_set set;
	const struct json_value *cats_of = NULL;
	const char *cats[MAX_CATS];
	struct shape sh = { 0 };
	size_t nr_cats = 0;
	FILE *dat;

	collect_series(s, rows, first, name, &set);
	/* Categories: the y keys, or the member names of bars_object. */
	if (s->bars_object) {
		cats_of = json_get(first, s->bars_object);
		if (!cats_of || cats_of->type != JSON_OBJECT)
			return 0;
		for (size_t i = 0; i < cats_of->n && nr_cats < MAX_CATS; i++)
			cats[nr_cats++] = cats_of->keys[i];
	} else {
		while (nr_cats < MAX_Y && s->y[nr_cats]) {
			cats[nr_cats] = s->y[nr_cats];
			nr_cats++;
		}
	}
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	fprintf(dat, "\"category\"");
	for (size_t k = 0; k < set.n; k++)
		fprintf(dat, " \"%s\"", set.label[k]);
	fprintf(dat, "\n");
	for (size_t c = 0; c < nr_cats; c++) {
		char cat[LABEL_LEN];

		data_text(cat, sizeof(cat), human_label(cats[c]));
		fprintf(dat, "\"%s\"", cat);
		for (size_t k = 0; k < set.n; k++) {
			const struct json_value *v = NULL;

			for (size_t r = 0; r < rows->n && !v; r++) {
				const struct json_value *row = &rows->items[r];

				if (!same_split(s, first, row) ||
				    !in_series(s, &set, k, row))
					continue;
				v = json_get(s->bars_object ?
					     json_get(row, s->bars_object) : row,
					     cats[c]);
			}
			put_bar(dat, s, v, &sh);
		}
		fprintf(dat, "\n");
	}
	if (s->stale)
		put_stale_block(dat, &set);
	if (close_out(o, dat, name, "dat"))
		return 0;
	sh.n = set.n;
	if (sh.points)
		write_script(o, s, name, &sh, bars_body);
	return sh.points;
}

/* One bar group per row, a bar per y key. */
static size_t write_rows(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows, const char *name,
			 const char *title)
{
	struct shape sh = { 0 };
	FILE *dat;

	while (sh.n < MAX_Y && s->y[sh.n])
		sh.n++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	fprintf(dat, "\"category\"");
	for (size_t y = 0; y < sh.n; y++)
		fprintf(dat, " \"%s\"", human_label(s->y[y]));
	fprintf(dat, "\n");
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char cat[LABEL_LEN];

		series_label(s, row, cat, sizeof(cat));
		fprintf(dat, "\"%s\"", cat);
		for (size_t y = 0; y < sh.n; y++)
			put_bar(dat, s, json_get(row, s->y[y]), &sh);
		fprintf(dat, "\n");
	}
	if (close_out(o, dat, name, "dat"))
		return 0;
	if (sh.points)
		write_script(o, s, name, &sh, bars_body);
	return sh.points;
}

/*
 * A string member of @obj as one line of text ("unknown" if none):
 * control characters become spaces (the index escapes the rest).
 */
static void member_text(const struct json_value *obj, const char *key,
			char *out, size_t len)
{
	const struct json_value *v = json_get(obj, key);

	if (v && v->type == JSON_STRING)
		line_text(out, len, v->string, false);
	else if (is_number(v))
		snprintf(out, len, "%g", v->number);
	else
		snprintf(out, len, "unknown");
}

/*
 * NAME.txt, what the index shows under the picture: title, caption, the
 * machine and the load of the run (plain text, a line each; an empty line
 * when the JSON does not say).
 */
static void write_caption(struct output *o, const struct plot_spec *s,
			  const char *name, const char *title)
{
	const struct json_value *m = json_get(o->doc, "machine");
	const struct json_value *l0 = json_get(m, "loadavg_1min");
	const struct json_value *l1 = json_get(o->doc, "loadavg_1min_end");
	char cpu[160], kernel[160], compiler[160], rseq[32], possible[32],
		online[32];
	FILE *f = open_out(o, name, "txt");

	if (!f)
		return;
	member_text(m, "cpu_model", cpu, sizeof(cpu));
	member_text(m, "kernel", kernel, sizeof(kernel));
	member_text(m, "compiler", compiler, sizeof(compiler));
	member_text(m, "rseq", rseq, sizeof(rseq));
	member_text(m, "possible_cpus", possible, sizeof(possible));
	member_text(m, "online_cpus", online, sizeof(online));
	fprintf(f, "%s\n%s\n", title, s->caption);
	if (m)
		fprintf(f, "%s, %s possible CPUs (%s online), %s, rseq %s, %s\n",
			cpu, possible, online, kernel, rseq, compiler);
	else
		fprintf(f, "\n");
	if (is_number(l0) && l0->number >= 0 && is_number(l1) &&
	    l1->number >= 0)
		fprintf(f, "load average (1 min) %.2f at the start, %.2f at the end\n",
			l0->number, l1->number);
	else if (is_number(l0) && l0->number >= 0)
		fprintf(f, "load average (1 min) %.2f at the start\n",
			l0->number);
	else
		fprintf(f, "\n");
	close_out(o, f, name, "txt");
}

/*
 * Run gnuplot on DIR/NAME.gp, in DIR (the script names files relative),
 * its messages passed on with "tally: gnuplot: " in front.
 */
static void run_gnuplot(struct output *o, const char *name)
{
	char script[300], line[1024];
	int fds[2], status;
	FILE *err;
	pid_t pid;

	if (o->gnuplot_missing)
		return;
	snprintf(script, sizeof(script), "%s.gp", name);
	fflush(NULL);
	if (pipe(fds)) {
		say("cannot run gnuplot: %s", strerror(errno));
		o->failed = true;
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (dup2(fds[1], STDERR_FILENO) < 0 ||
		    dup2(fds[1], STDOUT_FILENO) < 0 || chdir(o->dir))
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(fds[1]);
	err = pid < 0 ? NULL : fdopen(fds[0], "r");
	if (!err)
		close(fds[0]);
	while (err && fgets(line, sizeof(line), err)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0])
			say("gnuplot: %s", line);
	}
	if (err)
		fclose(err);
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		say("cannot run gnuplot: %s", strerror(errno));
		o->failed = true;
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		o->gnuplot_missing = true;
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		say("gnuplot failed on %s/%s", o->dir, script);
		o->failed = true;
	}
}

static void plot_spec(struct output *o, const struct plot_spec *s)
{
	const struct json_value *rows = json_get(o->doc, s->section);

	if (!rows || rows->type != JSON_ARRAY)
		return;
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char name[256], title[TEXT_LEN];
		size_t p, points;

		if (row->type != JSON_OBJECT)
			continue;
		/* One plot per split: made at the split's first row. */
		for (p = 0; p < r && (rows->items[p].type != JSON_OBJECT ||
				      !same_split(s, &rows->items[p], row));
		     p++)
			;
		if (p < r)
			continue;
		snprintf(name, sizeof(name), "%s", s->name);
		snprintf(title, sizeof(title), "%s", s->title);
		for (int k = 0; k < MAX_SPLIT && s->split[k].key; k++) {
			const struct json_value *v = json_get(row,
							      s->split[k].key);
			char label[LABEL_LEN], part[64];
			size_t n = strlen(name), t = strlen(title);

			value_label(v, label, sizeof(label));
			snprintf(title + t, sizeof(title) - t, "%s%s%s%s",
				 k ? ", " : ": ", s->split[k].pre, label,
				 s->split[k].post);
			name_part(v, part, sizeof(part));
			snprintf(name + n, sizeof(name) - n, "_%s%s",
				 s->split[k].key, part);
		}
		if (s->kind == PLOT_XY)
			points = write_xy(o, s, rows, row, name, title);
		else if (s->kind == PLOT_BARS)
			points = write_bars(o, s, rows, row, name, title);
		else
			points = write_rows(o, s, rows, name, title);
		if (o->failed)
			return;
		if (!points) {
			say("%s: no number to plot; no picture", name);
			continue;
		}
		write_caption(o, s, name, title);
		if (o->failed)
			return;
		run_gnuplot(o, name);
		if (o->failed)
			return;
		o->plots++;
	}
}

/* @s as HTML text (also fit for a quoted attribute). */
static void html_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

/*
 * @s as Markdown text: the characters Markdown acts on inline are
 * backslash-escaped, and <, > and & are entities (no raw HTML).
 */
static void md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<' || *s == '>' || *s == '&') {
			char c[2] = { *s, '\0' };

			html_text(f, c);
		} else {
			if (strchr("\\`*_[]#!|~", *s))
				fputc('\\', f);
			fputc(*s, f);
		}
	}
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is there a non-empty DIR/NAME.EXT? */
static bool have_file(struct output *o, const char *name, const char *ext)
{
	char path[4096];
	struct stat st;

	return (size_t)snprintf(path, sizeof(path), "%s/%s.%s", o->dir, name,
				ext) < sizeof(path) &&
	       !stat(path, &st) && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* NAME.txt's lines: title, caption, machine, load ("" when missing). */
static void read_caption(struct output *o, const char *name,
			 char lines[4][TEXT_LEN])
{
	char path[4096];
	FILE *f;

	for (int i = 0; i < 4; i++)
		lines[i][0] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s.txt", o->dir, name) >=
	    sizeof(path) || !(f = fopen(path, "r")))
		return;
	for (int i = 0; i < 4 && fgets(lines[i], TEXT_LEN, f); i++)
		lines[i][strcspn(lines[i], "\n")] = '\0';
	fclose(f);
}

static void index_entry(FILE *html, FILE *md, const char *name,
			char cap[4][TEXT_LEN])
{
	const char *title = cap[0][0] ? cap[0] : name;

	fprintf(html, "<figure id=\"%s\">\n<img src=\"%s.svg\" alt=\"", name,
		name);
	html_text(html, title);
	fprintf(html, "\">\n<figcaption><b>");
	html_text(html, title);
	fprintf(html, ".</b> ");
	html_text(html, cap[1]);
	fprintf(html, "<br>\n");
	if (cap[2][0]) {
		fprintf(html, "Measured on ");
		html_text(html, cap[2]);
	} else {
		fprintf(html, "Machine not recorded");
	}
	fprintf(html, "; %s", cap[3][0] ? "" : "load not recorded");
	html_text(html, cap[3]);
	fprintf(html, ".");
	fprintf(html,
		"<br>\n<a href=\"%s.png\">PNG</a> &middot; <a href=\"%s.dat\">data</a>"
		" &middot; <a href=\"%s.gp\">gnuplot script</a></figcaption>\n"
		"</figure>\n", name, name, name);

	fprintf(md, "## ");
	md_text(md, title);
	fprintf(md, "\n\n![");
	md_text(md, title);
	fprintf(md, "](%s.svg)\n\n", name);
	md_text(md, cap[1]);
	fprintf(md, "\n\n");
	if (cap[2][0]) {
		fprintf(md, "Measured on ");
		md_text(md, cap[2]);
	} else {
		fprintf(md, "Machine not recorded");
	}
	fprintf(md, "; %s", cap[3][0] ? "" : "load not recorded");
	md_text(md, cap[3]);
	fprintf(md, ".");
	fprintf(md, " [PNG](%s.png), [data](%s.dat), [script](%s.gp)\n\n",
		name, name, name);
}

/* Write DIR/index.EXT from its temporary file: the whole file or none. */
static void commit_index(struct output *o, FILE *f, const char *ext)
{
	char tmp[4096], path[4096];

	out_path(o, tmp, sizeof(tmp), ".index", ext);
	if (close_out(o, f, ".index", ext) ||
	    !out_path(o, path, sizeof(path), "index", ext))
		return;
	if (rename(tmp, path)) {
		say("cannot write %s: %s", path, strerror(errno));
		o->failed = true;
	}
}

/*
 * DIR/index.html and DIR/index.md: every picture of DIR (NAME.svg with
 * its NAME.gp), by name, with its caption.  Each is written to a
 * temporary file and renamed: the index is complete or as it was.
 */
static void write_index(struct output *o)
{
	char *names[1024];
	size_t n = 0;
	struct dirent *e;
	DIR *dir = opendir(o->dir);
	FILE *html, *md;

	if (!dir) {
		say("cannot read %s: %s", o->dir, strerror(errno));
		o->failed = true;
		return;
	}
	while ((e = readdir(dir)) && n < 1024) {
		size_t len = strlen(e->d_name);
		char *stem;

		if (len <= 3 || strcmp(e->d_name + len - 3, ".gp"))
			continue;
		stem = strndup(e->d_name, len - 3);
		if (stem && is_file_part(stem) && have_file(o, stem, "svg"))
			names[n++] = stem;
		else
			free(stem);
	}
	closedir(dir);
	qsort(names, n, sizeof(names[0]), compare_names);
	html = open_out(o, ".index", "html");
	md = html ? open_out(o, ".index", "md") : NULL;
	if (html && md) {
		fprintf(html,
			"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
			"<title>tally plots</title>\n<style>figure { margin: 2em 0; } "
			"figcaption { max-width: 60em; } img { max-width: 100%%; }"
			"</style></head><body>\n<h1>tally plots</h1>\n");
		fprintf(md, "# tally plots\n\n");
		for (size_t i = 0; i < n; i++) {
			char cap[4][TEXT_LEN];

			read_caption(o, names[i], cap);
			index_entry(html, md, names[i], cap);
		}
		fprintf(html, "</body></html>\n");
		commit_index(o, html, "html");
		if (!o->failed)
			commit_index(o, md, "md");
		else
			fclose(md);
	} else {
		char tmp[4096];

		if (html)
			fclose(html);
		if (out_path(o, tmp, sizeof(tmp), ".index", "html"))
			unlink(tmp);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

/* -o, --output: the directory (@ctx). */
static int option(int opt, char *arg, void *ctx)
{
	*(const char **)ctx = arg;
	return 0;
}

int tally_plot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct output o = { NULL, NULL, false, false, 0 };
	const struct json_value *bench, *schema;
	struct json_value *doc;
	char err[256], *text, *dir_of_json = NULL;
	const char *path;
	size_t len;
	static const struct tool_command cmd = {
		"plot", usage, "o:", longopts, option, false
	};
	int first, st;

	st = tool_parse_options(&cmd, argc, argv, &o.dir, &first);
	if (st)
		return st > 0 ? 0 : 2;
	if (first + 1 != argc) {
		tool_usage_error("one RESULT.json expected");
		return 2;
	}
	path = argv[first];
	text = read_file(path, &len);
	if (!text) {
		say("cannot read %s: %s", path, strerror(errno));
		return 2;
	}
	if (json_parse(text, len, &doc, err, sizeof(err))) {
		say("%s: not JSON %s", path, err);
		free(text);
		return 2;
	}
	free(text);
	o.doc = doc;
	schema = json_get(doc, "schema_version");
	if (schema && (schema->type != JSON_NUMBER ||
		       schema->number > TOOL_BENCH_JSON_SCHEMA)) {
		say("%s: JSON layout %g is newer than this tool's (%d)", path,
		    schema->type == JSON_NUMBER ? schema->number : -1.0,
		    TOOL_BENCH_JSON_SCHEMA);
		json_free(doc);
		return 2;
	}
	bench = json_get(doc, "benchmark");
	if (!bench || bench->type != JSON_STRING) {
		say("%s: no \"benchmark\" name: not the JSON of tally bench",
		    path);
		json_free(doc);
		return 2;
	}
	if (!o.dir) {
		char *slash;

		dir_of_json = strdup(path);
		slash = dir_of_json ? strrchr(dir_of_json, '/') : NULL;
		if (slash)
			*slash = '\0';
		o.dir = slash ? dir_of_json : ".";
		if (slash && !*o.dir)
			o.dir = "/";
	}
	if (mkdir(o.dir, 0755) && errno != EEXIST) {
		say("cannot create %s: %s", o.dir, strerror(errno));
		json_free(doc);
		free(dir_of_json);
		return 1;
	}
	for (size_t i = 0; i < NR_SPECS && !o.failed; i++)
		if (!strcmp(specs[i].benchmark, bench->string))
			plot_spec(&o, &specs[i]);
	if (!o.failed && !o.plots) {
		char name[LABEL_LEN];

		data_text(name, sizeof(name), bench->string);
		say("%s: nothing to plot for benchmark '%s'", path, name);
	}
	/* An index only of a run that made every picture. */
	if (!o.failed && !o.gnuplot_missing && o.plots)
		write_index(&o);
	json_free(doc);
	if (o.failed) {
		free(dir_of_json);
		return 1;
	}
	if (o.gnuplot_missing) {
		say("gnuplot not found: data and scripts are in %s", o.dir);
		say("install gnuplot (Debian: apt-get install -y gnuplot-nox) and run 'gnuplot NAME.gp' there");
		free(dir_of_json);
		return 3;
	}
	if (o.plots)
		printf("%u plots in %s (index.html, index.md)\n", o.plots,
		       o.dir);
	free(dir_of_json);
	return o.plots ? 0 : 2;
}
