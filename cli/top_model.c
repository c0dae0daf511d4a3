// SPDX-License-Identifier: MIT
/*
 * top_model.c - `tally top`'s model: the samples of an exposition sorted
 * into sections (a memory tree, a statistics tree per prefix), each a tree
 * of groups with a value per group and column (build_model()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "top.h"

static const char *const mem_suffix[MEM_NR_FIXED] = {
	"_memory_current_bytes", "_memory_peak_bytes", "_memory_min_bytes",
	"_memory_low_bytes", "_memory_high_bytes", "_memory_max_bytes",
};

void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nr_secs; i++) {
		struct section *s = &m->secs[i];

		for (size_t k = 0; k < s->nr_nodes; k++)
			free(s->nodes[k].kids);
		free(s->nodes);
		free(s->cols);
		index_free(&s->col_index);
		index_free(&s->node_index);
		free(s->vals);
	}
	free(m->secs);
	index_free(&m->by_prefix[0]);
	index_free(&m->by_prefix[1]);
	*m = (struct model){ 0 };
}

double node_value(const struct section *s, size_t node, size_t col)
{
	const struct value *v = s->vals + s->nodes[node].first_val;
	size_t lo = 0, hi = s->nodes[node].nr_vals;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].col < col)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nodes[node].nr_vals && v[lo].col == col ? v[lo].v : NAN;
}

/* find_node()'s answers besides a node's index. */
#define NODE_BAD_PATH SIZE_MAX
#define NODE_NO_MEMORY (SIZE_MAX - 1)
#define NODE_TOO_DEEP (SIZE_MAX - 2)

/* A new node of @s: @path's first @n bytes; its index or NODE_NO_MEMORY. */
static size_t add_node(struct section *s, const char *path, size_t n,
		       uint64_t hash, size_t parent, unsigned int depth,
		       size_t name_at)
{
	struct node *nodes = grow_array(s->nodes, &s->cap_nodes,
					s->nr_nodes + 1, sizeof(*nodes));

	if (!nodes)
		return NODE_NO_MEMORY;
	s->nodes = nodes;
	if (!index_put(&s->node_index, path, n, hash, s->nr_nodes))
		return NODE_NO_MEMORY;
	nodes[s->nr_nodes] = (struct node){
		.path = path,
		.path_len = n,
		.name = path + name_at,
		.name_len = n - name_at,
		.parent = parent,
		.depth = depth,
	};
	return s->nr_nodes++;
}

/*
 * The node of @path, created with its ancestors when new: its index, or
 * NODE_BAD_PATH with *@why set, NODE_TOO_DEEP (deeper than MAX_DEPTH),
 * NODE_NO_MEMORY.  One pass hashes every ancestor's path (a prefix of
 * @path); the lookups go up from @path to the first that exists.
 */
static size_t find_node(struct section *s, const char *path, size_t n,
			const char **why)
{
	size_t end[MAX_DEPTH + 1], k = SIZE_MAX;
	uint64_t hash[MAX_DEPTH + 1], h = name_hash_start();
	unsigned int depth = 0, d;

	if (n == 0 || path[0] != '/') {
		*why = "a group path that does not start with '/'";
		return NODE_BAD_PATH;
	}
	if (n > 1 && (path[n - 1] == '/' || memmem(path, n, "//", 2))) {
		*why = "a group path with an empty name";
		return NODE_BAD_PATH;
	}
	/* end[d]: the length of the path of the ancestor at depth d. */
	h = name_hash_more(h, path, 1);
	end[0] = 1;
	hash[0] = name_hash_end(h, 1);
	for (size_t i = 1, from = 1; n > 1; i++) {
		if (i < n && path[i] != '/')
			continue;
		if (++depth > MAX_DEPTH)
			return NODE_TOO_DEEP;
		h = name_hash_more(h, path + from, i - from);
		end[depth] = i;
		hash[depth] = name_hash_end(h, i);
		if (i == n)
			break;
		from = i;
	}
	for (d = depth + 1; d-- > 0;) {
		k = index_find(&s->node_index, path, end[d], hash[d]);
		if (k != SIZE_MAX)
			break;
	}
	/* d: the deepest that exists (k), or UINT_MAX when none does. */
	for (d++; d <= depth; d++) {
		k = add_node(s, path, end[d], hash[d], k, d,
			     d == 0 ? 0 : d == 1 ? 1 : end[d - 1] + 1);
		if (k == NODE_NO_MEMORY)
			return k;
	}
	return k;
}

/* Index of column @name in @s, added when new; SIZE_MAX: no memory. */
static size_t find_column(struct section *s, const char *name, size_t n)
{
	uint64_t h = name_hash(name, n);
	size_t k = index_find(&s->col_index, name, n, h);
	struct column *c;

	if (k != SIZE_MAX)
		return k;
	c = grow_array(s->cols, &s->cap_cols, s->nr_cols + 1, sizeof(*c));
	if (!c)
		return SIZE_MAX;
	s->cols = c;
	if (!index_put(&s->col_index, name, n, h, s->nr_cols))
		return SIZE_MAX;
	c[s->nr_cols] = (struct column){
		.name = name, .len = n,
		.bytes = ends_with(name, n, "_bytes"),
	};
	return s->nr_cols++;
}

/* The section of @prefix and kind, added when new; NULL: no memory. */
static struct section *find_section(struct model *m, bool memory,
				    const char *prefix, size_t n)
{
	struct name_index *ix = &m->by_prefix[memory];
	uint64_t h = name_hash(prefix, n);
	size_t k = index_find(ix, prefix, n, h);
	struct section *s;

	if (k != SIZE_MAX)
		return &m->secs[k];
	s = grow_array(m->secs, &m->cap_secs, m->nr_secs + 1, sizeof(*s));
	if (!s)
		return NULL;
	m->secs = s;
	if (!index_put(ix, prefix, n, h, m->nr_secs))
		return NULL;
	s += m->nr_secs++;
	*s = (struct section){ .memory = memory, .prefix = prefix,
			       .prefix_len = n, .bound = NAN };
	return s;
}

/* A prefix of a name that a statistics tree may have, and its hash. */
struct cand {
	size_t len;
	uint64_t hash;
};

/* What build_model() keeps while it sorts the samples. */
struct builder {
	struct model *m;
	struct name_index bounds;	/* accuracy bounds by prefix */
	struct cand *cands;		/* stats_prefix()'s candidates */
	size_t cap_cands;
};

/*
 * The longest prefix of @n (of @len bytes) that is an accuracy bound's and
 * that "_hier_" or "_local_" and more follow: its length, or 0, or
 * SIZE_MAX when memory runs out.  One pass hashes every candidate; they
 * are looked up from the longest, so that one comparison of bytes finds
 * the answer.
 */
static size_t stats_prefix(struct builder *b, const char *n, size_t len)
{
	uint64_t h = name_hash_start();
	size_t nr = 0;

	if (!b->bounds.nr)
		return 0;
	for (size_t i = 1; i + 6 < len; i++) {
		h = name_hash_more(h, n + i - 1, 1);
		if (n[i] != '_' || (memcmp(n + i, "_hier_", 6) &&
				    (i + 7 >= len ||
				     memcmp(n + i, "_local_", 7))))
			continue;
		if (!(b->cands = grow_array(b->cands, &b->cap_cands, nr + 1,
					    sizeof(*b->cands))))
			return SIZE_MAX;
		b->cands[nr++] = (struct cand){ i, name_hash_end(h, i) };
	}
	while (nr--)
		if (index_find(&b->bounds, n, b->cands[nr].len,
			       b->cands[nr].hash) != SIZE_MAX)
			return b->cands[nr].len;
	return 0;
}

/*
 * Where @s belongs: its section and column (a memory section's fixed
 * columns first), or NULL for a sample no tree shows (*@nomem false) or
 * when memory runs out (*@nomem true).
 */
static struct section *classify(struct builder *b, const struct sample *s,
				size_t *col, bool *nomem)
{
	const char *n = s->name, *w;
	size_t len = s->name_len, plen;
	struct section *sec;
	bool event;

	*nomem = false;
	/* A statistics tree of a known prefix (the longest that fits). */
	plen = stats_prefix(b, n, len);
	if (plen == SIZE_MAX) {
		*nomem = true;
		return NULL;
	}
	if (plen) {
		w = n + plen + 1;
		if (*w == 'l')
			return NULL;	/* the local values */
		w += 5;
		goto stat;
	}
	for (size_t c = 0; c < MEM_NR_FIXED; c++)
		if (ends_with(n, len, mem_suffix[c]) &&
		    len > strlen(mem_suffix[c])) {
			sec = find_section(b->m, true, n,
					   len - strlen(mem_suffix[c]));
			*nomem = !sec;
			*col = c;
			return sec;
		}
	w = memmem(n, len, "_memory_events_", 15);
	if (w && w > n && ends_with(n, len, "_total") &&
	    (size_t)(n + len - w) > 15 + 6) {
		const char *ev = w + 15;
		size_t evlen = (size_t)(n + len - ev) - 6;

		if (evlen > 6 && !memcmp(ev, "local_", 6))
			return NULL;
		sec = find_section(b->m, true, n, (size_t)(w - n));
		*nomem = !sec;
		if (!sec)
			return NULL;
		*col = find_column(sec, ev, evlen);
		*nomem = *col == SIZE_MAX;
		*col += MEM_NR_FIXED;
		return *nomem ? NULL : sec;
	}
	w = memmem(n, len, "_hier_", 6);
	if (!w || w == n || w + 6 == n + len)
		return NULL;
	plen = (size_t)(w - n);
	w += 6;
stat:
	sec = find_section(b->m, false, n, plen);
	*nomem = !sec;
	if (!sec)
		return NULL;
	len = (size_t)(n + len - w);
	event = ends_with(w, len, "_total") && len > 6;
	*col = find_column(sec, w, len - (event ? 6 : 0));
	*nomem = *col == SIZE_MAX;
	if (*nomem)
		return NULL;
	sec->cols[*col].event |= event;
	return sec;
}

/*
 * The memory section whose memory.stat @s is, or NULL: one exported
 * under the same prefix as "P_hier_STAT", or under "P_memory_stat"
 * (tally/export.h's ways), with the same groups
 * (tally_memcg_stats_tree() has the memory tree's).  Its states are then
 * bytes, its events counts (enum tally_memcg_stat).  When both prefixes
 * name a memory section with those groups, the later found is taken.
 */
static const struct section *memory_of(const struct model *m,
				       const struct section *s)
{
	const struct section *best = NULL;
	size_t n = s->prefix_len;

	for (int i = 0; i < 2; i++) {
		size_t k, plen = i ? n - 12 : n;
		const struct section *mem;
		bool same = true;

		if (i && (n <= 12 || memcmp(s->prefix + plen, "_memory_stat",
					    12)))
			break;
		k = index_find(&m->by_prefix[1], s->prefix, plen,
			       name_hash(s->prefix, plen));
		if (k == SIZE_MAX)
			continue;
		mem = &m->secs[k];
		if (s->nr_nodes != mem->nr_nodes)
			continue;
		for (size_t g = 0; same && g < s->nr_nodes; g++)
			same = index_find(&mem->node_index, s->nodes[g].path,
					  s->nodes[g].path_len,
					  name_hash(s->nodes[g].path,
						    s->nodes[g].path_len)) !=
			       SIZE_MAX;
		if (same && (!best || mem > best))
			best = mem;
	}
	return best;
}

/* Where each kept sample goes, between the two passes of build_model(). */
struct cell {
	size_t sec;		/* index in the model's sections */
	size_t node, col;
	double value;
	size_t line;
};

/* By section, group, column, then in sample order. */
static int cmp_cell(const void *a, const void *b)
{
	const struct cell *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/*
 * The values and children lists of @s from its @cells (sorted by
 * cmp_cell()): 0, -1 when memory runs out, 1 (@err set) when a group has
 * two samples in one column; the one reported is the earliest line that
 * repeats a series.
 */
static int finish_section(struct section *s, const struct cell *cells,
			  size_t nr, const char *src, char *err)
{
	size_t *count, repeat = SIZE_MAX, nr_vals = 0;

	for (size_t i = 1; i < nr; i++)
		if (cells[i].node == cells[i - 1].node &&
		    cells[i].col == cells[i - 1].col &&
		    (repeat == SIZE_MAX || cells[i].line < cells[repeat].line))
			repeat = i;
	if (repeat != SIZE_MAX) {
		const struct node *g = &s->nodes[cells[repeat].node];
		struct text t = { 0 };

		put_safe(&t, g->path, g->path_len, 60);
		errorf(err, src, strlen(src), "line %zu: a second sample of "
		       "group %s in one family (other labels apart): tally "
		       "top shows one program at a time", cells[repeat].line,
		       t.p ? t.p : "");
		text_free(&t);
		return 1;
	}
	s->vals = malloc((nr ? nr : 1) * sizeof(*s->vals));
	count = calloc(s->nr_nodes ? s->nr_nodes : 1, sizeof(*count));
	if (!s->vals || !count) {
		free(count);
		return -1;
	}
	for (size_t i = 0; i < nr; i++) {
		struct node *g = &s->nodes[cells[i].node];
		double v = cells[i].value;

		if (!g->nr_vals)
			g->first_val = nr_vals;
		g->nr_vals++;
		s->vals[nr_vals++] = (struct value){ cells[i].col, v };
		if (!s->memory || cells[i].col >= MEM_NR_FIXED) {
			struct column *c = &s->cols[cells[i].col -
						    (s->memory ? MEM_NR_FIXED
							       : 0)];

			c->nonzero |= v != 0 && !isnan(v);
			if (g->parent == SIZE_MAX)
				c->root = v;
		}
	}
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (s->nodes[k].parent != SIZE_MAX)
			count[s->nodes[k].parent]++;
	for (size_t k = 0; k < s->nr_nodes; k++) {
		if (count[k] && !(s->nodes[k].kids =
				  malloc(count[k] * sizeof(size_t)))) {
			free(count);
			return -1;
		}
	}
	for (size_t k = 0; k < s->nr_nodes; k++) {
		size_t p = s->nodes[k].parent;

		if (p != SIZE_MAX)
			s->nodes[p].kids[s->nodes[p].nr_kids++] = k;
	}
	free(count);
	return 0;
}

/* Stopped by a quit signal: the refresh ends, its work dropped. */
static int interrupted(const char *src, char *err)
{
	errorf(err, src, strlen(src), "interrupted");
	return CLI_EXIT_FAILED;
}

/*
 * The sections of @x.  Returns 0, TOP_EXIT_BAD_INPUT (a bad group path,
 * a repeated series) or CLI_EXIT_FAILED (no memory, or a quit signal),
 * with @err set.  Time linear in the samples' bytes (names and paths are
 * hashed once), but for the sort of the samples (n log n).
 */
int build_model(const struct exposition *x, struct model *m,
		const char *src, char *err)
{
	struct cell *cells = malloc((x->nr ? x->nr : 1) * sizeof(*cells));
	struct builder b = { .m = m };
	size_t nr = 0, slen = strlen(src);
	int ret = 0;

	*m = (struct model){ 0 };
	if (!cells)
		goto nomem;
	for (size_t i = 0; i < x->nr_b; i++)
		if (!index_put(&b.bounds, x->b[i].prefix, x->b[i].len,
			       name_hash(x->b[i].prefix, x->b[i].len), i))
			goto nomem;
	for (size_t i = 0; i < x->nr; i++) {
		const struct sample *s = &x->s[i];
		const char *why = NULL;
		size_t col = 0, node;
		bool nomem;
		struct section *sec;

		if (quit_asked) {
			ret = interrupted(src, err);
			goto out;
		}
		sec = classify(&b, s, &col, &nomem);
		if (nomem)
			goto nomem;
		if (!sec)
			continue;
		node = find_node(sec, s->group, s->group_len, &why);
		if (node == NODE_NO_MEMORY)
			goto nomem;
		if (node == NODE_TOO_DEEP) {
			m->too_deep++;
			continue;
		}
		if (node == NODE_BAD_PATH) {
			errorf(err, src, slen, "line %zu: %s", s->line, why);
			ret = TOP_EXIT_BAD_INPUT;
			goto out;
		}
		cells[nr++] = (struct cell){ (size_t)(sec - m->secs), node,
					     col, s->value, s->line };
	}
	/* The last bound of a prefix, as the samples' order has it. */
	for (size_t i = 0; i < m->nr_secs; i++) {
		struct section *s = &m->secs[i];
		size_t k;

		if (s->memory)
			continue;
		k = index_find(&b.bounds, s->prefix, s->prefix_len,
			       name_hash(s->prefix, s->prefix_len));
		if (k != SIZE_MAX)
			s->bound = x->b[k].value;
	}
	qsort(cells, nr, sizeof(*cells), cmp_cell);
	for (size_t i = 0, j = 0; i < m->nr_secs; i++) {
		size_t k = j;
		int r;

		if (quit_asked) {
			ret = interrupted(src, err);
			goto out;
		}
		while (k < nr && cells[k].sec == i)
			k++;
		r = finish_section(&m->secs[i], cells + j, k - j, src, err);
		if (r < 0)
			goto nomem;
		if (r > 0) {
			ret = TOP_EXIT_BAD_INPUT;
			goto out;
		}
		j = k;
	}
	/* Each memory section lists its memory.stat ones, in order. */
	for (size_t i = 0; i < m->nr_secs; i++) {
		struct section *s = &m->secs[i], *mem;

		if (s->memory || !(s->memory_of = memory_of(m, s)))
			continue;
		mem = &m->secs[s->memory_of - m->secs];
		mem->stats[mem->nr_stats++] = s;
	}
out:
	free(cells);
	index_free(&b.bounds);
	free(b.cands);
	if (ret)
		model_free(m);
	return ret;
nomem:
	free(cells);
	index_free(&b.bounds);
	free(b.cands);
	model_free(m);
	errorf(err, src, slen, "%s", strerror(ENOMEM));
	return CLI_EXIT_FAILED;
}
