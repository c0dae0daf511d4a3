// SPDX-License-Identifier: MIT
/*
 * export_render.c - an export: per source, one flush decision, then one
 * sorted walk of the tree through the snapshot interface copies each
 * group's escaped path and values into the exporter's rows; the tree's
 * lock is dropped and the families are written from the rows, in the
 * Prometheus or OpenMetrics text format, into the exporter's buffer.
 *
 * Owns the exporter's reused buffers (rows, values, paths, text) between
 * create and destroy; no lock of its own (the walk holds the tree's
 * structure lock for reading, and nothing here is formatted under it).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "export_internal.h"
#include "stats/stats_snapshot.h"
#include "memcg/memcg_snapshot.h"

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
 * The snapshot interface's row callback (stats/stats_snapshot.h): one row
 * per group, of e->row_cols values.  A path is its parent's (the last row
 * met one level up) plus '/' and the escaped name; the root's is empty
 * and written "/".
 */
static long *add_row(void *arg, const char *name, size_t len,
		     unsigned int depth)
{
	struct tally_exporter *e = arg;
	size_t r = e->nr_rows, nv = e->row_cols;
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
		if (!buf_reserve(&e->paths, up->path_len + 1 + 5 * len))
			return NULL;
		buf_mem(&e->paths, e->paths.p + up->path_off, up->path_len);
		buf_mem(&e->paths, "/", 1);
		export_buf_escaped(&e->paths, name, len, true);
	}
	row->path_len = e->paths.len - row->path_off;
	e->depth_row[depth] = r;
	e->nr_rows++;
	return e->values + r * nv;
}

/* Flush as the source asks, then copy the tree into the snapshot. */
static int snapshot(struct tally_exporter *e, const struct source *s)
{
	struct tally_stats_tree *t = s->tree;

	e->nr_rows = 0;
	e->paths.len = 0;
	e->row_cols = s->nr_cols;
	if (s->memcg)
		return memcg_snapshot_walk(s->memcg, add_row, e);
	if (s->mode == TALLY_FLUSH_FORCE) {
		tally_stats_flush(tally_stats_root(t));
	} else {
		tally_stats_snapshot(tally_stats_root(t),
				     TALLY_FLUSH_IF_NEEDED, NULL, NULL);
	}
	return stats_snapshot_walk(t, add_row, e);
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
int export_render_reset(struct tally_exporter *e,
			enum tally_export_format format)
{
	int err = render(e, format);

	e->out.failed = e->labels.failed = e->paths.failed = false;
	return err;
}
