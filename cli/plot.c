// SPDX-License-Identifier: MIT
/*
 * plot.c - `tally plot RESULT.json [-o DIR]`: pictures of a benchmark's
 * JSON, drawn by gnuplot.
 *
 * Each benchmark has a few plot specs: which array of the JSON, which keys
 * are x, y and the series, and which keys split the rows into separate
 * plots.  For every plot the command writes NAME.dat (the numbers),
 * NAME.gp (a gnuplot script that reads them and writes NAME.png and
 * NAME.svg) and runs gnuplot on it, so a user can edit the script and run
 * it again.  Then DIR/index.html and DIR/index.md show every picture in
 * DIR, so that several results plotted into one folder share an index.
 *
 * Exit status: 0 pictures made; 1 a file could not be written or gnuplot
 * failed; 2 bad usage or a JSON that is malformed or of no known
 * benchmark; 3 gnuplot is missing: the data and scripts are written, the
 * message says what to install.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../bench/machine.h"
#include "json_read.h"
#include "plot.h"

#define MAX_SERIES 64
#define MAX_Y 4
#define MAX_SPLIT 2
#define MAX_FILE (64 << 20)

enum plot_kind {
	PLOT_XY,	/* numeric x; a line per (series, y key) */
	PLOT_BARS,	/* categories = y keys (or a member object's keys) */
	PLOT_ROWS,	/* categories = the rows (named by the series key) */
};

/**
 * struct plot_spec - one kind of picture of a benchmark's JSON.
 * @benchmark: the JSON's "benchmark" value.
 * @name: file stem (split values are appended).
 * @section: the array of rows.
 * @kind: %PLOT_XY, %PLOT_BARS or %PLOT_ROWS.
 * @x: the x key (XY).
 * @y: y keys: lines (XY), categories (BARS) or bars (ROWS).
 * @bars_object: for BARS, a member object whose keys are the categories.
 * @series: the key naming a row's series (its category for ROWS).
 * @split: keys whose values make separate plots.
 * @title: the plot's title.
 * @xlabel: x axis label.
 * @ylabel: y axis label.
 * @logx: logarithmic x axis.
 * @logy: logarithmic y axis.
 */
struct plot_spec {
	const char *benchmark;
	const char *name;
	const char *section;
	enum plot_kind kind;
	const char *x;
	const char *y[MAX_Y];
	const char *bars_object;
	const char *series;
	const char *split[MAX_SPLIT];
	const char *title;
	const char *xlabel;
	const char *ylabel;
	bool logx, logy;
};

static const struct plot_spec specs[] = {
	{ "counter", "counter_add", "add", PLOT_XY, "threads",
	  { "ns_per_op" }, NULL, "impl", { NULL },
	  "Counter add cost per thread", "threads", "ns per add",
	  true, true },
	{ "counter", "counter_read", "read", PLOT_XY, "cpus",
	  { "ns_per_op" }, NULL, "op", { NULL },
	  "Counter read cost", "CPUs (simulated)", "ns per read", true, true },
	{ "counter", "counter_accuracy", "accuracy", PLOT_XY, "cpus",
	  { "max_error", "bound" }, NULL, "impl", { NULL },
	  "Counter error of a CPU-hopping updater", "CPUs (simulated)",
	  "largest |approximate - precise|", true, true },
	{ "stats", "stats_update", "update", PLOT_XY, "depth",
	  { "ns_per_op" }, NULL, "design", { NULL },
	  "Statistics tree update cost", "group depth", "ns per update",
	  false, false },
	{ "stats", "stats_read_latency", "readers", PLOT_BARS, NULL,
	  { NULL }, "buckets", "design", { "readers", "period_ms" },
	  "Reader latency histogram", "latency band", "reads", false, true },
	{ "stats", "stats_read_percentiles", "readers", PLOT_BARS, NULL,
	  { "p50_us", "p99_us", "p999_us" }, NULL, "design",
	  { "readers", "period_ms" }, "Reader latency percentiles",
	  "percentile", "microseconds", false, true },
	{ "oom", "oom_select", "select", PLOT_XY, "tasks",
	  { "median_us" }, NULL, "method", { "cpus" },
	  "Victim selection time", "tasks", "microseconds per selection",
	  true, true },
	{ "export", "export_cost", "rows", PLOT_ROWS, NULL,
	  { "us_median" }, NULL, "row", { NULL },
	  "Export of a statistics tree", "", "microseconds", false, true },
	{ "charge", "charge_cost", "charge", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, "design", { "depth", "fill" },
	  "Charge + uncharge cost", "threads", "ns per pair", false, true },
	{ "malloc", "malloc_cost", "malloc", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, "design", { NULL },
	  "malloc + free cost, accounted or not", "threads", "ns per pair",
	  false, false },
};

#define NR_SPECS (sizeof(specs) / sizeof(specs[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally plot RESULT.json [-o DIR]\n"
		"\n"
		"Draw the figures of a benchmark's JSON (tally bench NAME --json FILE)\n"
		"with gnuplot: for each plot DIR/NAME.png and NAME.svg, with the data\n"
		"(NAME.dat) and the gnuplot script (NAME.gp) beside them; then\n"
		"DIR/index.html and DIR/index.md show every picture in DIR.\n"
		"\n"
		"  -o, --output DIR  where to write (default: the JSON file's directory)\n"
		"  -h, --help        show this help\n"
		"\n"
		"Exit status: 0 done, 1 a file or gnuplot failed, 2 bad usage or input,\n"
		"3 gnuplot missing (data and scripts written).\n");
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return NULL;
	do {
		if (len + 4096 + 1 > cap) {
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
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n);
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	if (strlen(buf) != len) {	/* a NUL byte: not JSON text */
		free(buf);
		errno = EILSEQ;
		return NULL;
	}
	return buf;
}

/* Quotes, backslashes and controls never reach a gnuplot string. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || *s == '\'' ||
		    (unsigned char)*s < 0x20)
			*s = '_';
}

/* A value as plot text: strings as they are (sanitized), numbers %g. */
static void value_text(const struct json_value *v, char *out, size_t len)
{

	if (!v) {
		snprintf(out, len, "?");
	} else if (v->type == JSON_NUMBER) {
		snprintf(out, len, "%g", v->number);
	} else if (v->type == JSON_STRING) {
		snprintf(out, len, "%s", v->string);
	} else if (v->type == JSON_BOOL) {
		snprintf(out, len, "%s", v->boolean ? "true" : "false");
	} else {
		snprintf(out, len, "?");
	}
	sanitize(out);
}

/* @s made safe as part of a file name. */
static void file_part(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
			*s = '_';
}

static bool is_number(const struct json_value *v)
{
	return v && v->type == JSON_NUMBER;
}

/* One bar's value; zero cannot go on a log axis, so it is left out. */
static size_t put_bar(FILE *dat, const struct plot_spec *s,
		      const struct json_value *v)
{
	if (is_number(v) && (v->number > 0 || !s->logy)) {
		fprintf(dat, " %.17g", v->number);
		return 1;
	}
	fprintf(dat, " NaN");
	return 0;
}

/* Equal JSON scalars (the raw values: labels may be cut or sanitized). */
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
	for (int k = 0; k < MAX_SPLIT && s->split[k]; k++)
		if (!same_value(json_get(a, s->split[k]),
				json_get(b, s->split[k])))
			return false;
	return true;
}

struct output {
	const char *dir;
	bool gnuplot_missing;
	bool failed;
	unsigned int plots;
};

static FILE *open_out(struct output *o, const char *name, const char *ext)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", o->dir, name, ext);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tally: cannot write %s: %s\n", path,
			strerror(errno));
		o->failed = true;
	}
	return f;
}

static int close_out(struct output *o, FILE *f, const char *name)
{
	if (fclose(f)) {
		fprintf(stderr, "tally: cannot write %s/%s: %s\n", o->dir, name,
			strerror(errno));
		o->failed = true;
		return -1;
	}
	return 0;
}

/**
 * struct series_set - the series of one plot, in order of appearance.
 * @key: each series' raw value of the series key (what rows match).
 * @label: its title: sanitized, cut to fit, made unique.
 * @n: how many.
 */
struct series_set {
	const struct json_value *key[MAX_SERIES];
	char label[MAX_SERIES][80];
	size_t n;
};

/* Does @row belong to series @k of @set? */
static bool in_series(const struct plot_spec *s, const struct series_set *set,
		      size_t k, const struct json_value *row)
{
	return same_value(json_get(row, s->series), set->key[k]);
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

		if (!same_split(s, first, row))
			continue;
		for (k = 0; k < set->n && !in_series(s, set, k, row); k++)
			;
		if (k < set->n)
			continue;
		if (set->n == MAX_SERIES) {
			dropped = true;
			continue;
		}
		set->key[k] = json_get(row, s->series);
		value_text(set->key[k], set->label[k], 64);
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
		fprintf(stderr,
			"tally plot: %s: more than %d series; the others are left out\n",
			name, MAX_SERIES);
}

static void script_header(FILE *gp, const struct plot_spec *s,
			  const char *name, const char *title)
{
	fprintf(gp,
		"# Made by tally plot; edit and run again: gnuplot %s.gp\n"
		"set title \"%s\" noenhanced\n"
		"set xlabel \"%s\"\nset ylabel \"%s\"\n"
		"set key outside right top noenhanced\n"
		"set grid\n",
		name, title, s->xlabel, s->ylabel);
	if (s->logx)
		fprintf(gp, "set logscale x 2\n");
	if (s->logy)
		fprintf(gp, "set logscale y\n");
}

/* Terminal lines: PNG, then the same plot as SVG. */
static void script_outputs(FILE *gp, const char *name, const char *plot_cmd)
{
	fprintf(gp,
		"set terminal pngcairo size 960,540 noenhanced\n"
		"set output '%s.png'\n%s\n"
		"set terminal svg size 960,540 dynamic noenhanced\n"
		"set output '%s.svg'\nreplot\nunset output\n",
		name, plot_cmd, name);
}

/* Each write_*() returns the number of points it wrote (0: no picture). */
static size_t write_xy(struct output *o, const struct plot_spec *s,
		       const struct json_value *rows,
		       const struct json_value *first, const char *name,
		       const char *title)
{
	struct series_set set;
	char cmd[8192];
	size_t nr_y = 0, block = 0, used = 0, total = 0;
	FILE *dat, *gp;

	collect_series(s, rows, first, name, &set);
	while (nr_y < MAX_Y && s->y[nr_y])
		nr_y++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	used += (size_t)snprintf(cmd, sizeof(cmd), "plot");
	for (size_t k = 0; k < set.n; k++) {
		for (size_t y = 0; y < nr_y; y++) {
			unsigned int points = 0;

			fprintf(dat, "# %s %s\n", set.label[k], s->y[y]);
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
				points++;
			}
			if (!points)
				fprintf(dat, "NaN NaN\n");
			total += points;
			fprintf(dat, "\n\n");
			if (used < sizeof(cmd))
				used += (size_t)snprintf(cmd + used,
					sizeof(cmd) - used,
					"%s '%s.dat' index %zu with linespoints title \"%s%s%s\"",
					block ? ", \\\n    " : " ", name, block,
					set.label[k], nr_y > 1 ? " " : "",
					nr_y > 1 ? s->y[y] : "");
			block++;
		}
	}
	if (close_out(o, dat, name))
		return 0;
	gp = open_out(o, name, "gp");
	if (!gp)
		return 0;
	script_header(gp, s, name, title);
	script_outputs(gp, name, cmd);
	close_out(o, gp, name);
	return total;
}

/*
 * The script of a clustered bar chart of NAME.dat: categories in column
 * 1, @nr_bars bars from column 2 on, their titles in the header line.
 */
static void write_bar_script(struct output *o, const struct plot_spec *s,
			     const char *name, const char *title,
			     size_t nr_bars, const char *xtics)
{
	char cmd[512];
	FILE *gp = open_out(o, name, "gp");

	if (!gp)
		return;
	script_header(gp, s, name, title);
	fprintf(gp,
		"set style data histograms\nset style histogram clustered gap 1\n"
		"set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
		"set xtics noenhanced%s\n", xtics);
	snprintf(cmd, sizeof(cmd),
		 "plot for [i=2:%zu] '%s.dat' using i:xtic(1) title columnheader(i)",
		 nr_bars + 1, name);
	script_outputs(gp, name, cmd);
	close_out(o, gp, name);
}

static size_t write_bars(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows,
			 const struct json_value *first, const char *name,
			 const char *title)
{
	struct series_set set;
	const struct json_value *cats_of = NULL;
	const char *cats[32];
	size_t nr_cats = 0, total = 0;
	FILE *dat;

	collect_series(s, rows, first, name, &set);
	/* Categories: the y keys, or the member names of bars_object. */
	if (s->bars_object) {
		cats_of = json_get(first, s->bars_object);
		if (!cats_of || cats_of->type != JSON_OBJECT)
			return 0;
		for (size_t i = 0; i < cats_of->n && nr_cats < 32; i++)
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
	fprintf(dat, "category");
	for (size_t k = 0; k < set.n; k++)
		fprintf(dat, " \"%s\"", set.label[k]);
	fprintf(dat, "\n");
	for (size_t c = 0; c < nr_cats; c++) {
		char cat[64];

		snprintf(cat, sizeof(cat), "%s", cats[c]);
		sanitize(cat);
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
			total += put_bar(dat, s, v);
		}
		fprintf(dat, "\n");
	}
	if (close_out(o, dat, name))
		return 0;
	write_bar_script(o, s, name, title, set.n, "");
	return total;
}

/* One bar group per row (the first of each category), a bar per y key. */
static size_t write_rows(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows, const char *name,
			 const char *title)
{
	size_t nr_y = 0, total = 0;
	FILE *dat;

	while (nr_y < MAX_Y && s->y[nr_y])
		nr_y++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	fprintf(dat, "category");
	for (size_t y = 0; y < nr_y; y++)
		fprintf(dat, " \"%s\"", s->y[y]);
	fprintf(dat, "\n");
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char cat[64];

		value_text(json_get(row, s->series), cat, sizeof(cat));
		fprintf(dat, "\"%s\"", cat);
		for (size_t y = 0; y < nr_y; y++)
			total += put_bar(dat, s, json_get(row, s->y[y]));
		fprintf(dat, "\n");
	}
	if (close_out(o, dat, name))
		return 0;
	write_bar_script(o, s, name, title, nr_y, " rotate by -30");
	return total;
}

/* Run gnuplot on DIR/NAME.gp, in DIR (the script names files relative). */
static void run_gnuplot(struct output *o, const char *name)
{
	char script[512];
	pid_t pid;
	int status;

	if (o->gnuplot_missing)
		return;
	snprintf(script, sizeof(script), "%s.gp", name);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (chdir(o->dir))
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		fprintf(stderr, "tally: cannot run gnuplot: %s\n",
			strerror(errno));
		o->failed = true;
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		o->gnuplot_missing = true;
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "tally: gnuplot failed on %s/%s\n", o->dir,
			script);
		o->failed = true;
	}
}

static void plot_spec(struct output *o, const struct plot_spec *s,
		      const struct json_value *doc)
{
	const struct json_value *rows = json_get(doc, s->section);

	if (!rows || rows->type != JSON_ARRAY)
		return;
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char name[256], title[256];
		size_t p, points;

		if (row->type != JSON_OBJECT)
			continue;
		/* One plot per split: made at the split's first row. */
		for (p = 0; p < r && !same_split(s, &rows->items[p], row); p++)
			;
		if (p < r)
			continue;
		snprintf(name, sizeof(name), "%s", s->name);
		snprintf(title, sizeof(title), "%s", s->title);
		for (int k = 0; k < MAX_SPLIT && s->split[k]; k++) {
			char v[64];
			size_t n = strlen(name), t = strlen(title);

			value_text(json_get(row, s->split[k]), v, sizeof(v));
			snprintf(title + t, sizeof(title) - t, "%s%s %s",
				 k ? ", " : ": ", s->split[k], v);
			file_part(v);
			snprintf(name + n, sizeof(name) - n, "_%s%s",
				 s->split[k], v);
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
			fprintf(stderr,
				"tally plot: %s: no number to plot; no picture\n",
				name);
			continue;
		}
		run_gnuplot(o, name);
		o->plots++;
	}
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DIR/index.html and DIR/index.md: every NAME.svg of DIR, by name. */
static void write_index(struct output *o)
{
	char *names[1024];
	size_t n = 0;
	struct dirent *e;
	DIR *dir = opendir(o->dir);
	FILE *html, *md;

	if (!dir) {
		o->failed = true;
		return;
	}
	while ((e = readdir(dir)) && n < 1024) {
		size_t len = strlen(e->d_name);

		if (len > 4 && !strcmp(e->d_name + len - 3, ".gp"))
			names[n++] = strndup(e->d_name, len - 3);
	}
	closedir(dir);
	qsort(names, n, sizeof(names[0]), compare_names);
	html = open_out(o, "index", "html");
	md = open_out(o, "index", "md");
	if (html)
		fprintf(html, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
			"<title>tally plots</title></head><body>\n"
			"<h1>tally plots</h1>\n");
	if (md)
		fprintf(md, "# tally plots\n\n");
	for (size_t i = 0; i < n; i++) {
		if (names[i]) {
			file_part(names[i]);
			if (html)
				fprintf(html,
					"<h2>%s</h2>\n<p><img src=\"%s.svg\" alt=\"%s\"> "
					"<a href=\"%s.png\">PNG</a> <a href=\"%s.dat\">data</a> "
					"<a href=\"%s.gp\">script</a></p>\n",
					names[i], names[i], names[i], names[i],
					names[i], names[i]);
			if (md)
				fprintf(md, "## %s\n\n![%s](%s.svg)\n\n", names[i],
					names[i], names[i]);
		}
		free(names[i]);
	}
	if (html) {
		fprintf(html, "</body></html>\n");
		close_out(o, html, "index.html");
	}
	if (md)
		close_out(o, md, "index.md");
}

int tally_plot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct output o = { NULL, false, false, 0 };
	const struct json_value *bench, *schema;
	struct json_value *doc;
	char err[256], *text, *dir_of_json = NULL;
	int opt;

	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			o.dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "tally plot: bad option or missing value: '%s'\n",
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "tally plot: one RESULT.json expected\n");
		usage(stderr);
		return 2;
	}
	text = read_file(argv[optind]);
	if (!text) {
		fprintf(stderr, "tally plot: cannot read %s: %s\n", argv[optind],
			strerror(errno));
		return 2;
	}
	if (json_parse(text, &doc, err, sizeof(err))) {
		fprintf(stderr, "tally plot: %s: not JSON: %s\n", argv[optind],
			err);
		free(text);
		return 2;
	}
	free(text);
	schema = json_get(doc, "schema_version");
	if (schema && (schema->type != JSON_NUMBER ||
		       schema->number > BENCH_JSON_SCHEMA)) {
		fprintf(stderr,
			"tally plot: %s: JSON layout %g is newer than this tool's (%d)\n",
			argv[optind], schema && schema->type == JSON_NUMBER ?
			schema->number : -1.0, BENCH_JSON_SCHEMA);
		json_free(doc);
		return 2;
	}
	bench = json_get(doc, "benchmark");
	if (!bench || bench->type != JSON_STRING) {
		fprintf(stderr,
			"tally plot: %s: no \"benchmark\" name: not the JSON of tally bench\n",
			argv[optind]);
		json_free(doc);
		return 2;
	}
	if (!o.dir) {
		char *slash;

		dir_of_json = strdup(argv[optind]);
		slash = dir_of_json ? strrchr(dir_of_json, '/') : NULL;
		if (slash)
			*slash = '\0';
		o.dir = slash ? dir_of_json : ".";
	}
	if (mkdir(o.dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "tally plot: cannot create %s: %s\n", o.dir,
			strerror(errno));
		json_free(doc);
		free(dir_of_json);
		return 1;
	}
	for (size_t i = 0; i < NR_SPECS && !o.failed; i++)
		if (!strcmp(specs[i].benchmark, bench->string))
			plot_spec(&o, &specs[i], doc);
	if (!o.failed && !o.plots)
		fprintf(stderr, "tally plot: %s: nothing to plot for benchmark '%s'\n",
			argv[optind], bench->string);
	if (!o.failed)
		write_index(&o);
	json_free(doc);
	if (o.failed) {
		free(dir_of_json);
		return 1;
	}
	if (o.gnuplot_missing) {
		fprintf(stderr,
			"tally plot: gnuplot not found: data and scripts are in %s; install\n"
			"gnuplot (Debian: apt-get install -y gnuplot-nox) and run 'gnuplot NAME.gp' there\n",
			o.dir);
		free(dir_of_json);
		return 3;
	}
	if (o.plots)
		printf("%u plots in %s (index.html, index.md)\n", o.plots,
		       o.dir);
	free(dir_of_json);
	return o.plots ? 0 : 2;
}
