// SPDX-License-Identifier: MIT
/*
 * export.c - statistics in the Prometheus 0.0.4 and OpenMetrics 1.0 text
 * formats (tally/export.h).
 *
 * An exporter is a list of sources, each with its families (metric name,
 * kind, the metadata lines already rendered in both formats),
 * and the set of every metric name its families claim (a counter "x"
 * claims x, x_total and x_created; a gauge its name), kept sorted: adding
 * a source whose names meet a claimed one fails, so no export can hold a
 * duplicate series whatever the trees hold.
 *
 * An export, per source: one flush decision of the tree's root, then one
 * walk of the tree (depth-first, siblings by name, under the tree's
 * structure lock for reading) copies each group's escaped path and its
 * local and hierarchical values into the snapshot; the lock is dropped
 * and the families are written from the snapshot one after the other.
 * Everything is rendered into one buffer owned by the exporter, which the
 * three outputs (FILE, caller's buffer, textfile) then copy out: one
 * renderer serves them all, and a caller's buffer that is too small still
 * gets the exact length.  The buffers are kept from one export to the
 * next: a steady exporter allocates only the walk's stack.
 *
 * Costs: add O(stats log names); an export O(groups x stats) to format,
 * plus the flush and O(groups log fanout) for the sorted walk; the tree's
 * structure lock is held for the walk only (no formatting under it).
 * Memory: the snapshot holds 2 x nr_stats longs and the escaped path per
 * group, the text about (name + path + labels + 12) bytes per sample.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tally/export.h>
#include <tally/memcg.h>
#include "stats/stats_internal.h"

#define DEFAULT_PREFIX "tally"

/* A growing byte buffer; a failed growth sets @failed, later writes drop. */
struct buf {
	char *p;
	size_t len, cap;
	bool failed;
};

enum family_kind {
	FAMILY_HIER,		/* stat's hierarchical values, per group */
	FAMILY_LOCAL,		/* stat's local values, per group */
	FAMILY_ACCURACY,	/* the source's bound, one sample */
};

/*
 * The columns of a memory-group source, one family each: usage, peak and
 * limits (gauges in bytes), then memory.events and memory.events.local
 * (counters).
 */
enum {
	MEMCG_COL_CURRENT,
	MEMCG_COL_PEAK,
	MEMCG_COL_MIN,
	MEMCG_COL_LOW,
	MEMCG_COL_HIGH,
	MEMCG_COL_MAX,
	MEMCG_COL_EVENTS,
	MEMCG_COL_EVENTS_LOCAL = MEMCG_COL_EVENTS + TALLY_MEMCG_NR_EVENTS,
	MEMCG_NR_COLS = MEMCG_COL_EVENTS_LOCAL + TALLY_MEMCG_NR_EVENTS,
};

/*
 * A family: one sample per row of the snapshot (column @col of the row's
 * values), or one sample of the source's bound.
 */
struct family {
	bool per_row;
	unsigned int col;
	bool counter;
	bool limit;		/* TALLY_MEMCG_UNLIMITED is written +Inf */
	char *sample;		/* sample name: NAME, or NAME_total */
	size_t sample_len;
	char *meta[2];		/* HELP, TYPE (and UNIT) lines, per format */
};

/*
 * A source: a statistics tree, or a memory tree (@memcg set; @tree is
 * then the statistics tree of its memory.stat, which has the same groups).
 * Its snapshot is rows (groups) of nr_cols values (a statistics tree: the
 * stats' local values, then the hierarchical ones; a memory tree: the
 * MEMCG_COL_* columns) over the same rows and renderer.
 */
struct source {
	struct tally_stats_tree *tree;
	struct tally_memcg_tree *memcg;
	enum tally_flush_mode mode;
	unsigned long bound;	/* the accuracy family's value */
	unsigned int nr_cols;
	struct family *families;
	unsigned int nr_families;
};

/* A group of the snapshot: its escaped path in the exporter's paths. */
struct row {
	size_t path_off, path_len;
};

struct tally_exporter {
	enum tally_export_format format;
	bool pid;
	char *const_labels;	/* ",name=\"value\"..." without pid */
	struct source *sources;
	unsigned int nr_sources;
	char **names;		/* every claimed metric name, sorted */
	size_t nr_names;

	/* Reused by every export. */
	struct buf out;		/* the text */
	struct buf labels;	/* the constant labels of this export */
	struct buf paths;	/* escaped group paths */
	struct row *rows;
	size_t nr_rows, cap_rows;
	long *values;		/* per row: the source's nr_cols values */
	size_t cap_values;
	size_t *depth_row;	/* last row met at each depth */
	size_t cap_depth;
};

/* --- buffers and escaping ----------------------------------------------- */

static bool buf_reserve(struct buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->failed)
		return false;
	if (n <= b->cap - b->len)
		return true;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2)
			goto fail;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p)
		goto fail;
	b->p = p;
	b->cap = cap;
	return true;
fail:
	b->failed = true;
	return false;
}

static void buf_mem(struct buf *b, const void *s, size_t n)
{
	if (n && buf_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

static void buf_str(struct buf *b, const char *s)
{
	buf_mem(b, s, strlen(s));
}

/* Decimal digits of @v into @p (20 bytes at most); returns the count. */
static size_t fmt_ulong(char *p, unsigned long v)
{
	char tmp[20];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

static size_t fmt_value(char *p, long v, bool is_unsigned)
{
	if (is_unsigned || v >= 0)
		return fmt_ulong(p, (unsigned long)v);
	*p = '-';
	return 1 + fmt_ulong(p + 1, -(unsigned long)v);
}

/*
 * Length of the valid UTF-8 sequence at @s (@n bytes left), 0 when the
 * byte starts none: RFC 3629, no overlong form, no surrogate, at most
 * U+10FFFF, the whole sequence within @n.
 */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	unsigned int cp, min;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

#define REPLACEMENT "\xef\xbf\xbd"	/* U+FFFD */

/*
 * @s escaped: backslash and newline always, the double quote when @quote
 * (label values, OpenMetrics HELP).  Invalid UTF-8 bytes become U+FFFD
 * and the byte's two hex digits, a U+FFFD of @s becomes U+FFFD and '~':
 * the text decodes back to @s, so distinct names never give one label.
 */
static void buf_escaped(struct buf *b, const char *s, size_t n, bool quote)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t run = i, len;

		/* Bytes that pass as they are, copied in one go. */
		while (run < n && u[run] >= 0x20 && u[run] < 0x80 &&
		       u[run] != '\\' && !(quote && u[run] == '"'))
			run++;
		buf_mem(b, s + i, run - i);
		i = run;
		if (i == n)
			break;
		if (u[i] == '\\') {
			buf_mem(b, "\\\\", 2);
			i++;
		} else if (u[i] == '\n') {
			buf_mem(b, "\\n", 2);
			i++;
		} else if (u[i] == '"') {
			buf_mem(b, "\\\"", 2);
			i++;
		} else if ((len = utf8_valid(u + i, n - i)) == 3 &&
			   !memcmp(s + i, REPLACEMENT, 3)) {
			buf_mem(b, REPLACEMENT "~", 4);
			i += 3;
		} else if (len > 0) {
			buf_mem(b, s + i, len);
			i += len;
		} else {
			char esc[5] = REPLACEMENT;

			esc[3] = hex[u[i] >> 4];
			esc[4] = hex[u[i] & 15];
			buf_mem(b, esc, 5);
			i++;
		}
	}
}

/* --- names and options -------------------------------------------------- */

static bool is_name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

/* [a-zA-Z_][a-zA-Z0-9_]*, not "__..." (reserved by Prometheus). */
static bool valid_identifier(const char *s, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, max + 1);
	if (n == 0 || n > max || (s[0] == '_' && s[1] == '_'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_name_char(s[i], i == 0))
			return false;
	return true;
}

static bool valid_unit(const char *u)
{
	if (!u)
		return false;
	for (const char *p = u; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return false;
	return strlen(u) <= TALLY_EXPORT_PREFIX_MAX;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

static int check_labels(const struct tally_export_options *o)
{
	if (o->nr_labels > TALLY_EXPORT_MAX_LABELS ||
	    (o->nr_labels && !o->labels))
		return -EINVAL;
	for (unsigned int i = 0; i < o->nr_labels; i++) {
		const char *name = o->labels[i].name;

		/* instance and job are the target's labels, set by
		 * Prometheus at scrape time: one in the exposition would be
		 * renamed exported_instance or exported_job. */
		if (!valid_identifier(name, TALLY_EXPORT_PREFIX_MAX) ||
		    !o->labels[i].value || !strcmp(name, "group") ||
		    !strcmp(name, "instance") || !strcmp(name, "job") ||
		    (o->pid && !strcmp(name, "pid")))
			return -EINVAL;
		for (unsigned int j = 0; j < i; j++)
			if (!strcmp(o->labels[j].name, name))
				return -EINVAL;
	}
	return 0;
}

int tally_exporter_create(struct tally_exporter **out,
			  const struct tally_export_options *opts)
{
	static const struct tally_export_options defaults;
	const struct tally_export_options *o = opts ? opts : &defaults;
	struct tally_exporter *e;
	struct buf labels = { 0 };
	int err;

	if (!out || (o->format != TALLY_EXPORT_PROMETHEUS &&
		     o->format != TALLY_EXPORT_OPENMETRICS))
		return -EINVAL;
	err = check_labels(o);
	if (err)
		return err;
	for (unsigned int i = 0; i < o->nr_labels; i++) {
		buf_mem(&labels, ",", 1);
		buf_str(&labels, o->labels[i].name);
		buf_mem(&labels, "=\"", 2);
		buf_escaped(&labels, o->labels[i].value,
			    strlen(o->labels[i].value), true);
		buf_mem(&labels, "\"", 1);
	}
	buf_mem(&labels, "", 1);
	e = calloc(1, sizeof(*e));
	if (!e || labels.failed) {
		free(e);
		free(labels.p);
		return -ENOMEM;
	}
	e->format = o->format;
	e->pid = o->pid;
	e->const_labels = labels.p;
	*out = e;
	return 0;
}

static void free_families(struct family *f, unsigned int nr)
{
	for (unsigned int i = 0; f && i < nr; i++) {
		free(f[i].sample);
		free(f[i].meta[TALLY_EXPORT_PROMETHEUS]);
		free(f[i].meta[TALLY_EXPORT_OPENMETRICS]);
	}
	free(f);
}

void tally_exporter_destroy(struct tally_exporter *e)
{
	if (!e)
		return;
	for (unsigned int i = 0; i < e->nr_sources; i++)
		free_families(e->sources[i].families,
			      e->sources[i].nr_families);
	free(e->sources);
	for (size_t i = 0; i < e->nr_names; i++)
		free(e->names[i]);
	free(e->names);
	free(e->const_labels);
	free(e->out.p);
	free(e->labels.p);
	free(e->paths.p);
	free(e->rows);
	free(e->values);
	free(e->depth_row);
	free(e);
}

/* --- families ----------------------------------------------------------- */

static const char *const scope_word[] = {
	[FAMILY_HIER] = "hier",
	[FAMILY_LOCAL] = "local",
	[FAMILY_ACCURACY] = "accuracy",
};

/*
 * The family name of the stat called @stat in @kind's scope ("bound" for
 * the accuracy family): PREFIX_SCOPE_SANITISED, an event's trailing
 * "_total" dropped, "_UNIT" appended unless it ends the name already.
 */
static void family_name(struct buf *b, const char *prefix,
			enum family_kind kind, const char *stat, bool event,
			const char *unit)
{
	size_t start;

	buf_str(b, prefix);
	buf_mem(b, "_", 1);
	buf_str(b, scope_word[kind]);
	buf_mem(b, "_", 1);
	start = b->len;
	buf_str(b, stat);
	if (b->failed)
		return;
	for (size_t i = start; i < b->len; i++)
		if (!is_name_char(b->p[i], false))
			b->p[i] = '_';
	if (event && ends_with(b->p, b->len, "_total"))
		b->len -= strlen("_total");
	if (unit && *unit) {
		char suffix[TALLY_EXPORT_PREFIX_MAX + 2] = "_";

		strcat(suffix, unit);
		if (!ends_with(b->p, b->len, suffix))
			buf_str(b, suffix);
	}
}

/* The metadata lines of a family called @name (@n bytes). */
static void family_meta(struct buf *b, enum tally_export_format format,
			const char *name, size_t n, bool counter,
			const char *unit, const char *help_head,
			const char *stat, const char *help_tail)
{
	bool om = format == TALLY_EXPORT_OPENMETRICS;
	const char *type = counter ? "counter" : "gauge";

	if (om) {
		buf_str(b, "# TYPE ");
		buf_mem(b, name, n);
		buf_mem(b, " ", 1);
		buf_str(b, type);
		if (unit && *unit) {
			buf_str(b, "\n# UNIT ");
			buf_mem(b, name, n);
			buf_mem(b, " ", 1);
			buf_str(b, unit);
		}
		buf_mem(b, "\n", 1);
	}
	buf_str(b, "# HELP ");
	buf_mem(b, name, n);
	if (!om && counter)
		buf_str(b, "_total");
	buf_mem(b, " ", 1);
	buf_str(b, help_head);
	buf_escaped(b, stat, strlen(stat), om);
	buf_str(b, help_tail);
	buf_mem(b, "\n", 1);
	if (!om) {
		buf_str(b, "# TYPE ");
		buf_mem(b, name, n);
		if (counter)
			buf_str(b, "_total");
		buf_mem(b, " ", 1);
		buf_str(b, type);
		buf_mem(b, "\n", 1);
	}
}

static int finish_family(struct family *f, struct buf *name_buf,
			 const char *unit, const char *help_head,
			 const char *subject, const char *help_tail);

static int build_family(struct family *f, const char *prefix,
			enum family_kind kind,
			unsigned int stat, const struct tally_stats_tree *t,
			const char *unit)
{
	static const char *const help_head[] = {
		[FAMILY_HIER] = "Hierarchical ",
		[FAMILY_LOCAL] = "Local ",
		[FAMILY_ACCURACY] = "Largest total |change| of the updates "
				    "that happen before this export that the ",
	};
	static const char *const help_tail[] = {
		[FAMILY_HIER] = ": the group and its descendants (a sum over "
				"groups counts a value once per ancestor).",
		[FAMILY_LOCAL] = ": the group alone (sums over groups add "
				 "up).",
		[FAMILY_ACCURACY] = "values of a group's subtree may miss, "
				    "over all stats (0: none).",
	};
	bool accuracy = kind == FAMILY_ACCURACY;
	const char *stat_name = accuracy ? "bound" : t->names[stat];
	struct buf name = { 0 };

	f->per_row = !accuracy;
	f->col = accuracy ? 0 : (kind == FAMILY_HIER ? t->nr_stats : 0) + stat;
	f->counter = !accuracy && t->is_event[stat];
	family_name(&name, prefix, kind, stat_name, f->counter, unit);
	return finish_family(f, &name, unit, help_head[kind],
			     accuracy ? "" : stat_name, help_tail[kind]);
}

/*
 * The metadata (in both formats) and sample name of @f, whose name is in
 * @name and whose kind and column are set; frees @name's buffer on
 * failure.
 */
static int finish_family(struct family *f, struct buf *name_buf,
			 const char *unit, const char *help_head,
			 const char *subject, const char *help_tail)
{
	struct buf name = *name_buf, prom = { 0 }, om = { 0 };

	family_meta(&prom, TALLY_EXPORT_PROMETHEUS, name.p, name.len,
		    f->counter, unit, help_head, subject, help_tail);
	family_meta(&om, TALLY_EXPORT_OPENMETRICS, name.p, name.len,
		    f->counter, unit, help_head, subject, help_tail);
	if (f->counter)
		buf_str(&name, "_total");
	buf_mem(&prom, "", 1);
	buf_mem(&om, "", 1);
	buf_mem(&name, "", 1);
	if (name.failed || prom.failed || om.failed) {
		free(name.p);
		free(prom.p);
		free(om.p);
		return -ENOMEM;
	}
	f->sample = name.p;
	f->sample_len = name.len - 1;
	f->meta[TALLY_EXPORT_PROMETHEUS] = prom.p;
	f->meta[TALLY_EXPORT_OPENMETRICS] = om.p;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Add the names @nr families claim to the exporter's set: -EEXIST, the
 * set unchanged, when one is claimed already (or twice among them).
 */
static int claim_names(struct tally_exporter *e, const struct family *f,
		       unsigned int nr)
{
	static const char *const counter_suffixes[] = { "", "_total",
							"_created" };
	size_t old = e->nr_names, added = 0, size;
	char **fresh = malloc(3 * (size_t)nr * sizeof(*fresh));
	char **all = NULL;
	int err = fresh ? 0 : -ENOMEM;

	for (unsigned int i = 0; i < nr && !err; i++) {
		size_t base = f[i].sample_len -
			      (f[i].counter ? strlen("_total") : 0);

		/* Prometheus keeps these suffixes for counters, histograms
		 * and summaries: a gauge named so fails its checkers. */
		if (!f[i].counter &&
		    (ends_with(f[i].sample, f[i].sample_len, "_total") ||
		     ends_with(f[i].sample, f[i].sample_len, "_count") ||
		     ends_with(f[i].sample, f[i].sample_len, "_sum") ||
		     ends_with(f[i].sample, f[i].sample_len, "_bucket"))) {
			err = -EINVAL;
			break;
		}

		for (unsigned int k = 0; k < (f[i].counter ? 3u : 1u); k++) {
			const char *sfx = counter_suffixes[k];
			char *n = malloc(base + strlen(sfx) + 1);

			if (!n) {
				err = -ENOMEM;
				break;
			}
			memcpy(n, f[i].sample, base);
			strcpy(n + base, sfx);
			fresh[added++] = n;
		}
	}
	size = (old + added) * sizeof(*all);
	if (!err && !(all = malloc(size)))
		err = -ENOMEM;
	if (!err) {
		if (old)
			memcpy(all, e->names, old * sizeof(*all));
		memcpy(all + old, fresh, added * sizeof(*all));
		qsort(all, old + added, sizeof(*all), cmp_names);
		for (size_t i = 1; i < old + added && !err; i++)
			if (!strcmp(all[i - 1], all[i]))
				err = -EEXIST;
	}
	if (err) {
		for (size_t i = 0; i < added; i++)
			free(fresh[i]);
		free(all);
	} else {
		free(e->names);
		e->names = all;
		e->nr_names = old + added;
	}
	free(fresh);
	return err;
}

/*
 * Append @src, whose @built families are built (all of them unless @err),
 * claiming their names; on failure they are freed and nothing changes.
 */
static int add_source(struct tally_exporter *e, int err, struct family *fams,
		      unsigned int built, const struct source *src)
{
	struct source *sources;

	/* Grown first: once the names are claimed nothing can fail. */
	sources = err ? NULL : realloc(e->sources, (e->nr_sources + 1) *
							  sizeof(*sources));
	if (!err && !sources)
		err = -ENOMEM;
	if (!err) {
		e->sources = sources;
		err = claim_names(e, fams, src->nr_families);
	}
	if (err) {
		free_families(fams, built);
		return err;
	}
	e->sources[e->nr_sources++] = *src;
	return 0;
}

static int check_stats_options(const struct tally_stats_tree *t,
			       const struct tally_export_stats_options *o,
			       const char *prefix)
{
	if (!valid_identifier(prefix, TALLY_EXPORT_PREFIX_MAX) ||
	    (o->mode != TALLY_FLUSH_IF_NEEDED && o->mode != TALLY_FLUSH_FORCE))
		return -EINVAL;
	for (unsigned int i = 0; o->units && i < t->nr_stats; i++)
		if (o->units[i] && !valid_unit(o->units[i]))
			return -EINVAL;
	return 0;
}

int tally_exporter_add_stats(struct tally_exporter *e,
			     struct tally_stats_tree *t,
			     const struct tally_export_stats_options *opts)
{
	static const struct tally_export_stats_options defaults;
	const struct tally_export_stats_options *o = opts ? opts : &defaults;
	const char *prefix = o->prefix ? o->prefix : DEFAULT_PREFIX;
	unsigned int nr, built = 0;
	struct family *fams;
	int err;

	if (!e || !t)
		return -EINVAL;
	err = check_stats_options(t, o, prefix);
	if (err)
		return err;
	nr = 2 * t->nr_stats + 1;
	fams = calloc(nr, sizeof(*fams));
	if (!fams)
		return -ENOMEM;
	for (unsigned int i = 0; !err && i < t->nr_stats; i++) {
		const char *unit = o->units ? o->units[i] : NULL;

		err = build_family(&fams[built], prefix,
				   FAMILY_HIER, i, t, unit);
		built += !err;
		if (!err)
			err = build_family(&fams[built], prefix,
					   FAMILY_LOCAL, i, t, unit);
		built += !err;
	}
	if (!err)
		err = build_family(&fams[built], prefix,
				   FAMILY_ACCURACY, t->nr_stats, t, NULL);
	built += !err;
	return add_source(e, err, fams, built, &(struct source){
		.tree = t,
		.mode = o->mode,
		.bound = o->mode == TALLY_FLUSH_FORCE
				 ? 0
				 : tally_stats_read_bound(t),
		.nr_cols = 2 * t->nr_stats,
		.families = fams,
		.nr_families = nr,
	});
}

static const struct memcg_family {
	const char *name;
	const char *help;
} memcg_families[] = {
	[MEMCG_COL_CURRENT] = { "memory_current",
		"memory.current: the usage of the group and its descendants "
		"(stocks subtracted)." },
	[MEMCG_COL_PEAK] = { "memory_peak",
		"memory.peak: the highest usage, stocks included." },
	[MEMCG_COL_MIN] = { "memory_min",
		"memory.min: hard protection (+Inf: all of the usage)." },
	[MEMCG_COL_LOW] = { "memory_low",
		"memory.low: best-effort protection (+Inf: all of the "
		"usage)." },
	[MEMCG_COL_HIGH] = { "memory_high",
		"memory.high: throttling limit (+Inf: none)." },
	[MEMCG_COL_MAX] = { "memory_max",
		"memory.max: hard limit (+Inf: none)." },
};

/* The family of column @col of a memory tree. */
static int build_memcg_family(struct family *f, const char *prefix,
			      unsigned int col)
{
	struct buf name = { 0 };
	bool local = col >= MEMCG_COL_EVENTS_LOCAL;
	const char *event;

	f->per_row = true;
	f->col = col;
	f->counter = col >= MEMCG_COL_EVENTS;
	f->limit = col >= MEMCG_COL_MIN && col <= MEMCG_COL_MAX;
	buf_str(&name, prefix);
	buf_mem(&name, "_", 1);
	if (!f->counter) {
		buf_str(&name, memcg_families[col].name);
		buf_str(&name, "_bytes");
		return finish_family(f, &name, "bytes",
				     memcg_families[col].help, "", "");
	}
	event = tally_memcg_event_name(col - (local ? MEMCG_COL_EVENTS_LOCAL
						   : MEMCG_COL_EVENTS));
	buf_str(&name, local ? "memory_events_local_" : "memory_events_");
	buf_str(&name, event);
	return finish_family(f, &name, NULL,
			     local ? "memory.events.local: " :
				     "memory.events: ",
			     event, local ? " events of the group alone." :
				" events of the group and its descendants.");
}

int tally_exporter_add_memcg(struct tally_exporter *e,
			     struct tally_memcg_tree *t,
			     const struct tally_export_memcg_options *opts)
{
	const char *prefix = opts && opts->prefix ? opts->prefix
						  : DEFAULT_PREFIX;
	unsigned int built = 0;
	struct family *fams;
	int err = 0;

	if (!e || !t || !valid_identifier(prefix, TALLY_EXPORT_PREFIX_MAX))
		return -EINVAL;
	fams = calloc(MEMCG_NR_COLS, sizeof(*fams));
	if (!fams)
		return -ENOMEM;
	for (unsigned int col = 0; !err && col < MEMCG_NR_COLS; col++) {
		err = build_memcg_family(&fams[built], prefix, col);
		built += !err;
	}
	return add_source(e, err, fams, built, &(struct source){
		.tree = tally_memcg_stats_tree(t),
		.memcg = t,
		.nr_cols = MEMCG_NR_COLS,
		.families = fams,
		.nr_families = MEMCG_NR_COLS,
	});
}

/* --- snapshot ----------------------------------------------------------- */

/*
 * @p (of *@cap elements of @size bytes) with room for @need: @p itself,
 * a larger copy (*@cap updated), or NULL, @p still valid.
 */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;

	if (need <= *cap)
		return p;
	while (n < need)
		n *= 2;
	p = realloc(p, n * size);
	if (p)
		*cap = n;
	return p;
}

/*
 * stats_walk_sorted() callback: one row per group.  A path is its
 * parent's (the last row met one level up) plus '/' and the escaped
 * name; the root's is empty and written "/".
 */
static long *add_row(struct tally_exporter *e, struct tally_stats_group *g,
		     unsigned int depth, size_t nv)
{
	size_t r = e->nr_rows;
	struct row *row = grow(e->rows, &e->cap_rows, r + 1, sizeof(*row));
	long *v;
	size_t *d;

	if (row)
		e->rows = row;
	v = row ? grow(e->values, &e->cap_values, (r + 1) * nv, sizeof(*v))
		: NULL;
	if (v)
		e->values = v;
	d = v ? grow(e->depth_row, &e->cap_depth, (size_t)depth + 1,
		     sizeof(*d))
	      : NULL;
	if (!d)
		return NULL;
	e->depth_row = d;
	row = &e->rows[r];
	row->path_off = e->paths.len;
	if (depth) {
		const struct row *up = &e->rows[e->depth_row[depth - 1]];

		/* Escaping at most quintuples a byte: no move while
		 * copying the parent's path. */
		if (!buf_reserve(&e->paths, up->path_len + 1 +
						    5 * g->name_len))
			return NULL;
		buf_mem(&e->paths, e->paths.p + up->path_off, up->path_len);
		buf_mem(&e->paths, "/", 1);
		buf_escaped(&e->paths, g->name, g->name_len, true);
	}
	row->path_len = e->paths.len - row->path_off;
	e->depth_row[depth] = r;
	e->nr_rows++;
	return e->values + r * nv;
}

static int snapshot_group(struct tally_stats_group *g, unsigned int depth,
			  void *arg)
{
	size_t nv = 2 * (size_t)g->nr_stats;
	long *v = add_row(arg, g, depth, nv);

	if (!v)
		return -ENOMEM;
	tally_stats_snapshot(g, TALLY_FLUSH_NONE, v + nv / 2, v);
	return 0;
}

/*
 * The memory group a group of its memory.stat tree serves: its handle
 * stays valid for the tree's life, so reading it under the statistics
 * tree's lock is safe even while it is being destroyed.
 */
static int snapshot_memcg_group(struct tally_stats_group *g,
				unsigned int depth, void *arg)
{
	struct tally_memcg *m = g->owner;
	long *v = add_row(arg, g, depth, MEMCG_NR_COLS);
	struct tally_memcg_range usage;
	struct tally_memcg_limits lim;

	if (!v)
		return -ENOMEM;
	/* The page counter, as the peak: stock reservations count. */
	tally_memcg_usage(m, TALLY_MEMCG_READ_APPROX, &usage);
	tally_memcg_get_limits(m, &lim);
	v[MEMCG_COL_CURRENT] = usage.value;
	v[MEMCG_COL_PEAK] = tally_memcg_peak(m, false);
	v[MEMCG_COL_MIN] = lim.min;
	v[MEMCG_COL_LOW] = lim.low;
	v[MEMCG_COL_HIGH] = lim.high;
	v[MEMCG_COL_MAX] = lim.max;
	tally_memcg_events(m, v + MEMCG_COL_EVENTS, v + MEMCG_COL_EVENTS_LOCAL);
	return 0;
}

/* Flush as the source asks, then copy the tree into the snapshot. */
static int snapshot(struct tally_exporter *e, const struct source *s)
{
	struct tally_stats_tree *t = s->tree;

	e->nr_rows = 0;
	e->paths.len = 0;
	if (s->memcg)
		return stats_walk_sorted(t, snapshot_memcg_group, e);
	if (s->mode == TALLY_FLUSH_FORCE) {
		tally_stats_flush(t->root);
	} else {
		tally_stats_snapshot(t->root, TALLY_FLUSH_IF_NEEDED, NULL,
				     NULL);
	}
	return stats_walk_sorted(t, snapshot_group, e);
}

/* --- rendering ---------------------------------------------------------- */

static void render_family(struct tally_exporter *e, const struct source *s,
			  const struct family *f,
			  enum tally_export_format format)
{
	size_t nv = s->nr_cols, col = f->col;
	size_t fixed = f->sample_len + sizeof("{group=\"/\"} \n") +
		       e->labels.len + 21;
	struct buf *o = &e->out;
	char *p;

	buf_str(o, f->meta[format]);
	if (!f->per_row) {
		if (!buf_reserve(o, fixed))
			return;
		p = o->p + o->len;
		memcpy(p, f->sample, f->sample_len);
		p += f->sample_len;
		if (e->labels.len) {
			*p++ = '{';
			memcpy(p, e->labels.p + 1, e->labels.len - 1);
			p += e->labels.len - 1;
			*p++ = '}';
		}
		*p++ = ' ';
		p += fmt_ulong(p, s->bound);
		*p++ = '\n';
		o->len = (size_t)(p - o->p);
		return;
	}
	for (size_t r = 0; r < e->nr_rows; r++) {
		const struct row *row = &e->rows[r];

		if (!buf_reserve(o, fixed + row->path_len))
			return;
		p = o->p + o->len;
		memcpy(p, f->sample, f->sample_len);
		p += f->sample_len;
		memcpy(p, "{group=\"", 8);
		p += 8;
		if (row->path_len) {
			memcpy(p, e->paths.p + row->path_off, row->path_len);
			p += row->path_len;
		} else {
			*p++ = '/';
		}
		*p++ = '"';
		if (e->labels.len)
			memcpy(p, e->labels.p, e->labels.len);
		p += e->labels.len;
		*p++ = '}';
		*p++ = ' ';
		if (f->limit && e->values[r * nv + col] == TALLY_MEMCG_UNLIMITED)
			p = mempcpy(p, "+Inf", 4);
		else
			p += fmt_value(p, e->values[r * nv + col],
				       f->counter);
		*p++ = '\n';
		o->len = (size_t)(p - o->p);
	}
}

/* Render every source into e->out, in @format. */
static int render(struct tally_exporter *e, enum tally_export_format format)
{
	e->out.len = 0;
	e->labels.len = 0;
	buf_str(&e->labels, e->const_labels);
	if (e->pid) {
		char digits[24];

		buf_str(&e->labels, ",pid=\"");
		buf_mem(&e->labels, digits,
			fmt_ulong(digits, (unsigned long)getpid()));
		buf_mem(&e->labels, "\"", 1);
	}
	for (unsigned int i = 0; i < e->nr_sources; i++) {
		const struct source *s = &e->sources[i];
		int err = snapshot(e, s);

		if (err || e->paths.failed)
			return err ? err : -ENOMEM;
		for (unsigned int k = 0; k < s->nr_families; k++)
			render_family(e, s, &s->families[k], format);
	}
	if (format == TALLY_EXPORT_OPENMETRICS)
		buf_str(&e->out, "# EOF\n");
	return e->out.failed || e->labels.failed ? -ENOMEM : 0;
}

/* After a failed growth the buffers are usable again, empty. */
static int render_reset(struct tally_exporter *e,
			enum tally_export_format format)
{
	int err = render(e, format);

	e->out.failed = e->labels.failed = e->paths.failed = false;
	return err;
}

/* --- outputs ------------------------------------------------------------ */

long tally_export_buffer_as(struct tally_exporter *e,
			    enum tally_export_format format, char *buf,
			    size_t len)
{
	int err;

	if (!e || (!buf && len) || (format != TALLY_EXPORT_PROMETHEUS &&
				    format != TALLY_EXPORT_OPENMETRICS))
		return -EINVAL;
	err = render_reset(e, format);
	if (err) {
		if (len)
			buf[0] = '\0';
		return err;
	}
	if (e->out.len < len) {
		if (e->out.len)
			memcpy(buf, e->out.p, e->out.len);
		buf[e->out.len] = '\0';
	} else if (len) {
		buf[0] = '\0';
	}
	return (long)e->out.len;
}

long tally_export_buffer(struct tally_exporter *e, char *buf, size_t len)
{
	if (!e)
		return -EINVAL;
	return tally_export_buffer_as(e, e->format, buf, len);
}

int tally_export_file(struct tally_exporter *e, FILE *f)
{
	int err;

	if (!e || !f)
		return -EINVAL;
	err = render_reset(e, e->format);
	if (err)
		return err;
	if ((e->out.len && fwrite(e->out.p, 1, e->out.len, f) != e->out.len) ||
	    fflush(f))
		return -EIO;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync() the directory of a path whose first @dirlen bytes name it. */
static int sync_dir(const char *path, size_t dirlen)
{
	char *dir = dirlen ? strndup(path, dirlen) : strdup(".");
	int fd, err = 0;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return err;
}

int tally_export_textfile(struct tally_exporter *e, const char *path)
{
	const char *slash;
	size_t dirlen, n;
	struct stat st;
	char *tmp;
	int fd, err;

	if (!e || !path || !*path || path[strlen(path) - 1] == '/')
		return -EINVAL;
	/* Only a regular file is replaced: never a device, FIFO or socket. */
	if (!lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return -EEXIST;
	err = render_reset(e, e->format);
	if (err)
		return err;
	slash = strrchr(path, '/');
	dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	n = strlen(path);
	tmp = malloc(n + sizeof(".") + sizeof(".XXXXXX"));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, dirlen);
	tmp[dirlen] = '.';
	memcpy(tmp + dirlen + 1, path + dirlen, n - dirlen);
	strcpy(tmp + n + 1, ".XXXXXX");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	if (fchmod(fd, 0644))
		err = -errno;
	if (!err)
		err = write_all(fd, e->out.p, e->out.len);
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err ? err : sync_dir(path, dirlen);
}
