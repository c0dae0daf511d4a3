/* SPDX-License-Identifier: MIT */
#ifndef TALLY_EXPORT_INTERNAL_H
#define TALLY_EXPORT_INTERNAL_H

/*
 * export_internal.h - what the files of the exporter share.
 *
 *   export.c          the exporter object: create, sources, outputs
 *   export_family.c   metric families: names, metadata, the claimed set
 *   export_render.c   the snapshot of a source and the text writers
 *   export_text.c     label escaping and name checks
 *
 * The exporter reads the trees only through the snapshot interface
 * (stats/stats_snapshot.h, memcg/memcg_snapshot.h) and the public API.
 * No lock of its own: an exporter is used by one thread at a time
 * (tally/export.h); its buffers live from create to destroy.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tally/export.h>
#include <tally/memcg.h>
#include <tally/stats.h>

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
 * A source: a statistics tree (@tree) or a memory tree (@memcg).  Its
 * snapshot is rows (groups) of nr_cols values (a statistics tree: the
 * stats' local values, then the hierarchical ones; a memory tree: the
 * MEMCG_COL_* columns of memcg/memcg_snapshot.h) over the same rows and
 * renderer.
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
	size_t row_cols;	/* values per row of the source walked */
	long *values;		/* per row: the source's nr_cols values */
	size_t cap_values;
	size_t *depth_row;	/* last row met at each depth */
	size_t cap_depth;
};

/* --- buffers (hot: inline) ---------------------------------------------- */

static inline bool buf_reserve(struct buf *b, size_t n)
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

static inline void buf_mem(struct buf *b, const void *s, size_t n)
{
	if (n && buf_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

static inline void buf_str(struct buf *b, const char *s)
{
	buf_mem(b, s, strlen(s));
}

/* Decimal digits of @v into @p (20 bytes at most); returns the count. */
static inline size_t fmt_ulong(char *p, unsigned long v)
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

static inline size_t fmt_value(char *p, long v, bool is_unsigned)
{
	if (is_unsigned || v >= 0)
		return fmt_ulong(p, (unsigned long)v);
	*p = '-';
	return 1 + fmt_ulong(p + 1, -(unsigned long)v);
}

/* --- export_text.c ------------------------------------------------------ */

void export_buf_escaped(struct buf *b, const char *s, size_t n, bool quote);
bool export_is_name_char(char c, bool first);
bool export_valid_identifier(const char *s, size_t max);
bool export_valid_unit(const char *u);
bool export_ends_with(const char *s, size_t n, const char *suffix);

/* --- export_family.c ---------------------------------------------------- */

void export_free_families(struct family *f, unsigned int nr);
/* The family of @kind for stat @stat of @t (the bound for ACCURACY). */
int export_build_family(struct family *f, const char *prefix, enum family_kind kind,
		 unsigned int stat, const struct tally_stats_tree *t,
		 const char *unit);
/* The family of column @col (MEMCG_COL_*) of a memory tree. */
int export_build_memcg_family(struct family *f, const char *prefix,
		       unsigned int col);
int export_claim_names(struct tally_exporter *e, const struct family *f,
		unsigned int nr);

/* --- export_render.c ---------------------------------------------------- */

/*
 * Render every source into e->out in @format; after a failed growth the
 * buffers are usable again, empty.
 */
int export_render_reset(struct tally_exporter *e, enum tally_export_format format);

#endif /* TALLY_EXPORT_INTERNAL_H */
