// SPDX-License-Identifier: MIT
/*
 * top_render.c - `tally top`'s frames: each section's tree drawn as text
 * in the width given, siblings sorted, values in K, M, G, names shown
 * safely (render_model()).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"

static const char *const mem_header[MEM_NR_FIXED] = {
	"CURRENT", "PEAK", "MIN", "LOW", "HIGH", "MAX",
};

/* A value in @width columns: bytes in K, M, G... (1024s), counts whole. */
static void fmt_value(char *out, size_t size, double v, bool bytes,
		      bool limit)
{
	static const char units[] = "BKMGTPE";
	int u = 0;

	if (isnan(v)) {
		snprintf(out, size, "-");
	} else if (limit && v >= UNLIMITED_FROM) {
		snprintf(out, size, "max");
	} else if (isinf(v)) {
		snprintf(out, size, v > 0 ? "inf" : "-inf");
	} else if (bytes) {
		double a = fabs(v);

		while (a >= 1024 && u < 6) {
			a /= 1024;
			u++;
		}
		if (u == 0)
			snprintf(out, size, "%s%.0f%s", v < 0 ? "-" : "", a,
				 a ? "B" : "");
		else if (a < 10000)
			snprintf(out, size, "%s%.1f%c", v < 0 ? "-" : "", a,
				 units[u]);
		else	/* past E: the digits would not fit */
			snprintf(out, size, "%s%.3g%c", v < 0 ? "-" : "", a,
				 units[u]);
	} else if (v == floor(v) && fabs(v) < 1e8) {
		snprintf(out, size, "%.0f", v);
	} else {
		snprintf(out, size, "%.3g", v);
	}
}

struct view {
	const struct top_args *a;	/* --sort, --depth */
	size_t width;		/* columns of a line */
	size_t name_cols;
	const struct section *sec;
	size_t *shown;		/* stat columns shown, best first */
	size_t nr_shown;
	struct text *out;
};

/* The sort key's value of a group: usage, or the first stat shown. */
static double usage_of(const struct view *v, size_t node)
{
	double x;

	if (v->sec->memory)
		x = node_value(v->sec, node, MEM_CURRENT);
	else if (v->nr_shown)
		x = node_value(v->sec, node, v->shown[0]);
	else
		return -INFINITY;
	return isnan(x) ? -INFINITY : x;
}

static int cmp_names(const struct node *a, const struct node *b)
{
	size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
	int c = memcmp(a->name, b->name, n);

	return c ? c : (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

static int cmp_kids(const void *pa, const void *pb, void *arg)
{
	const struct view *v = arg;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;

	if (v->a->sort == SORT_USAGE) {
		double ua = usage_of(v, a), ub = usage_of(v, b);

		if (ua != ub)
			return ua > ub ? -1 : 1;
	}
	return cmp_names(&v->sec->nodes[a], &v->sec->nodes[b]);
}

/* End a line: cut to the width, strip trailing blanks, add '\n'. */
static void end_line(const struct view *v, struct text *line)
{
	size_t n = line->p ? fit_columns(line->p, line->len, v->width) : 0;

	while (n && line->p[n - 1] == ' ')
		n--;
	text_mem(v->out, line->p, n);
	text_mem(v->out, "\n", 1);
	line->len = 0;
}

static void cell_right(struct text *line, const char *s, size_t cols)
{
	size_t n = strlen(s);

	text_chars(line, ' ', n < cols ? cols - n + 1 : 1);
	text_str(line, s);
}

static size_t indent_of(const struct node *g)
{
	return 2 * (g->depth < 8 ? g->depth : 8);
}

/* The width of a stat column: its header (cut), at least a value's. */
static size_t stat_cols(const struct column *c)
{
	size_t n = c->len - (c->bytes ? 6 : 0);

	return n < VALUE_COLS ? VALUE_COLS
			      : n > STAT_COLS_MAX ? STAT_COLS_MAX : n;
}

static void render_row(const struct view *v, size_t k, struct text *line)
{
	const struct section *s = v->sec;
	const struct node *g = &s->nodes[k];
	size_t ind = indent_of(g), used;
	char num[32];

	text_chars(line, ' ', ind);
	used = put_safe(line, g->name, g->name_len,
			v->name_cols > ind ? v->name_cols - ind : 1);
	text_chars(line, ' ', v->name_cols > ind + used
				      ? v->name_cols - ind - used : 0);
	if (s->memory) {
		bool any = false;

		for (size_t c = 0; c < MEM_NR_FIXED; c++) {
			fmt_value(num, sizeof(num), node_value(s, k, c), true,
				  c >= MEM_MIN);
			cell_right(line, num, VALUE_COLS);
		}
		text_str(line, "  ");
		/* Its events: its values past the fixed columns. */
		for (size_t i = 0; i < g->nr_vals; i++) {
			const struct value *val = &s->vals[g->first_val + i];
			const struct column *e;
			double x = val->v;

			if (val->col < MEM_NR_FIXED || isnan(x) || x == 0)
				continue;
			e = &s->cols[val->col - MEM_NR_FIXED];
			if (any)
				text_str(line, " ");
			put_safe(line, e->name, e->len, 24);
			fmt_value(num, sizeof(num), x, false, false);
			text_str(line, ":");
			text_str(line, num);
			any = true;
		}
	} else {
		for (size_t i = 0; i < v->nr_shown; i++) {
			const struct column *c = &s->cols[v->shown[i]];

			fmt_value(num, sizeof(num),
				  node_value(s, k, v->shown[i]),
				  c->bytes || (s->memory_of && !c->event),
				  false);
			cell_right(line, num, stat_cols(c));
		}
	}
	end_line(v, line);
}

static void render_tree(struct view *v, size_t k, struct text *line)
{
	const struct node *g = &v->sec->nodes[k];

	if (g->depth > v->a->depth)
		return;
	render_row(v, k, line);
	if (g->nr_kids > 1)
		qsort_r(g->kids, g->nr_kids, sizeof(size_t), cmp_kids, v);
	for (size_t i = 0; i < g->nr_kids; i++)
		render_tree(v, g->kids[i], line);
}

static int cmp_rank(const void *pa, const void *pb, void *arg)
{
	const struct section *s = arg;
	const struct column *a = &s->cols[*(const size_t *)pa];
	const struct column *b = &s->cols[*(const size_t *)pb];
	double ra = isnan(a->root) ? -1 : fabs(a->root);
	double rb = isnan(b->root) ? -1 : fabs(b->root);

	if (ra != rb)
		return ra > rb ? -1 : 1;
	return (*(const size_t *)pa > *(const size_t *)pb) -
	       (*(const size_t *)pa < *(const size_t *)pb);
}

/* The widest name column the visible groups need, within limits. */
static size_t name_columns(const struct view *v)
{
	size_t cols = 5;	/* "GROUP" */

	for (size_t k = 0; k < v->sec->nr_nodes; k++) {
		const struct node *g = &v->sec->nodes[k];
		struct text t = { 0 };
		size_t w;

		if (g->depth > v->a->depth)
			continue;
		w = indent_of(g) + put_safe(&t, g->name, g->name_len,
					    NAME_COLS_MAX);
		text_free(&t);
		if (w > cols)
			cols = w;
	}
	return cols > NAME_COLS_MAX ? NAME_COLS_MAX : cols;
}

static void render_section(struct view *v, const struct section *s)
{
	struct text line = { 0 };
	char num[64];
	size_t zero = 0, no_room = 0, room, root = SIZE_MAX;

	v->sec = s;
	v->nr_shown = 0;
	text_str(v->out, "\n");
	text_str(&line, s->memory ? "memory groups (" :
			s->memory_of ? "memory.stat of those groups (" :
				       "statistics groups (");
	put_safe(&line, s->prefix, s->prefix_len, 60);
	text_str(&line, s->memory ? "_memory_*)" : "_hier_*)");
	if (!isnan(s->bound)) {
		fmt_value(num, sizeof(num), s->bound, false, false);
		text_str(&line, ", accuracy bound ");
		text_str(&line, num);
	}
	v->name_cols = name_columns(v);
	if (!s->memory) {
		/* The stats non-zero somewhere, largest at the root first,
		 * as many as fit. */
		v->shown = malloc((s->nr_cols ? s->nr_cols : 1) *
				  sizeof(size_t));
		if (!v->shown) {
			v->out->failed = true;
			return;
		}
		for (size_t i = 0; i < s->nr_cols; i++)
			if (s->cols[i].nonzero)
				v->shown[v->nr_shown++] = i;
		zero = s->nr_cols - v->nr_shown;
		qsort_r(v->shown, v->nr_shown, sizeof(size_t), cmp_rank,
			(void *)s);
		room = v->width > v->name_cols ? v->width - v->name_cols : 0;
		for (size_t i = 0; i < v->nr_shown; i++) {
			size_t w = stat_cols(&s->cols[v->shown[i]]) + 1;

			if (w > room) {
				no_room = v->nr_shown - i;
				v->nr_shown = i;
				break;
			}
			room -= w;
		}
	}
	end_line(v, &line);
	text_str(&line, "GROUP");
	text_chars(&line, ' ', v->name_cols - 5);
	if (s->memory) {
		for (size_t c = 0; c < MEM_NR_FIXED; c++)
			cell_right(&line, mem_header[c], VALUE_COLS);
		text_str(&line, "  EVENTS");
	} else {
		for (size_t i = 0; i < v->nr_shown; i++) {
			const struct column *c = &s->cols[v->shown[i]];
			size_t w = stat_cols(c), n = c->len - (c->bytes ? 6 : 0);
			struct text h = { 0 };
			size_t used;

			used = put_safe(&h, c->name, n, w);
			text_chars(&line, ' ', 1 + (w > used ? w - used : 0));
			text_mem(&line, h.p, h.len);
			text_free(&h);
		}
	}
	end_line(v, &line);
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (s->nodes[k].parent == SIZE_MAX)
			root = k;
	if (root != SIZE_MAX)
		render_tree(v, root, &line);
	/* The stats left out, under the tree: short enough to be read. */
	if (zero || no_room) {
		snprintf(num, sizeof(num), "(hidden: %zu zero everywhere",
			 zero);
		text_str(&line, zero ? num : "(hidden:");
		snprintf(num, sizeof(num), "%s %zu past the width", zero ?
			 "," : "", no_room);
		text_str(&line, no_room ? num : "");
		text_str(&line, ")");
		end_line(v, &line);
	}
	text_free(&line);
	free(v->shown);
	v->shown = NULL;
}

/* A note after an empty line, cut to the width like every line. */
static void note(const struct view *v, const char *s)
{
	struct text line = { 0 };

	text_str(v->out, "\n");
	text_str(&line, s);
	end_line(v, &line);
	text_free(&line);
}

/* One frame of @m into @out. */
void render_model(const struct model *m, const struct top_args *a,
			 size_t width, struct text *out)
{
	struct view v = { .a = a, .width = width, .out = out };
	bool any = false;

	/* Memory groups first, each followed by its memory.stat, then
	 * the other statistics groups, each as found. */
	for (size_t i = 0; i < m->nr_secs; i++) {
		if (!m->secs[i].memory)
			continue;
		render_section(&v, &m->secs[i]);
		for (size_t k = 0; k < m->secs[i].nr_stats; k++)
			render_section(&v, m->secs[i].stats[k]);
		any = true;
	}
	for (size_t i = 0; i < m->nr_secs; i++) {
		if (m->secs[i].memory || m->secs[i].memory_of)
			continue;
		render_section(&v, &m->secs[i]);
		any = true;
	}
	if (!any)
		note(&v, "no memory groups or statistics groups: no sample of "
			 "tally's families with a group label");
	if (m->too_deep) {
		char line[96];

		snprintf(line, sizeof(line), "(%zu samples of groups deeper "
			 "than %u levels not shown)", m->too_deep, MAX_DEPTH);
		note(&v, line);
	}
}
