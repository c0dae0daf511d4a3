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
		free(s->hash);
		free(s->vals);
	}
	free(m->secs);
	*m = (struct model){ 0 };
}

static size_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return (size_t)h;
}

size_t nr_value_cols(const struct section *s)
{
	return (s->memory ? MEM_NR_FIXED : 0) + s->nr_cols;
}

/* The slot of @path in @s's hash: its node's, or an empty one. */
static size_t *hash_slot(struct section *s, const char *path, size_t n)
{
	size_t mask = s->hash_size - 1;

	for (size_t i = hash_bytes(path, n) & mask;; i = (i + 1) & mask) {
		size_t k = s->hash[i];

		if (k == SIZE_MAX || (s->nodes[k].path_len == n &&
				      !memcmp(s->nodes[k].path, path, n)))
			return &s->hash[i];
	}
}

static bool hash_grow(struct section *s)
{
	size_t size = s->hash_size ? s->hash_size * 2 : 64;
	size_t *h = malloc(size * sizeof(*h));

	if (!h)
		return false;
	memset(h, 0xff, size * sizeof(*h));
	free(s->hash);
	s->hash = h;
	s->hash_size = size;
	for (size_t k = 0; k < s->nr_nodes; k++)
		*hash_slot(s, s->nodes[k].path, s->nodes[k].path_len) = k;
	return true;
}

/* find_node()'s answers besides a node's index. */
#define NODE_BAD_PATH SIZE_MAX
#define NODE_NO_MEMORY (SIZE_MAX - 1)
#define NODE_TOO_DEEP (SIZE_MAX - 2)

/*
 * The node of @path, at @depth (its number of names), created with its
 * ancestors when new; its index or NODE_NO_MEMORY.
 */
static size_t add_node(struct section *s, const char *path, size_t n,
		       unsigned int depth)
{
	size_t *slot, parent = SIZE_MAX, k;
	const char *slash = path;
	struct node *nodes;

	if (s->hash_size && *(slot = hash_slot(s, path, n)) != SIZE_MAX)
		return *slot;
	if (depth) {
		slash = path + n - 1;
		while (*slash != '/')
			slash--;
		parent = add_node(s, path, slash == path ? 1 :
				  (size_t)(slash - path), depth - 1);
		if (parent == NODE_NO_MEMORY)
			return parent;
	}
	/* At most half full, counting the ancestors just added. */
	if (2 * (s->nr_nodes + 1) > s->hash_size && !hash_grow(s))
		return NODE_NO_MEMORY;
	slot = hash_slot(s, path, n);
	nodes = grow_array(s->nodes, &s->cap_nodes, s->nr_nodes + 1,
			   sizeof(*nodes));
	if (!nodes)
		return NODE_NO_MEMORY;
	s->nodes = nodes;
	k = s->nr_nodes++;
	nodes[k] = (struct node){
		.path = path,
		.path_len = n,
		.name = depth ? slash + 1 : path,
		.name_len = depth ? (size_t)(path + n - slash - 1) : 1,
		.parent = parent,
		.depth = depth,
	};
	*slot = k;
	return k;
}

/*
 * The node of @path, created with its ancestors when new: its index, or
 * NODE_BAD_PATH with *@why set, NODE_TOO_DEEP (deeper than MAX_DEPTH),
 * NODE_NO_MEMORY.
 */
static size_t find_node(struct section *s, const char *path, size_t n,
			const char **why)
{
	unsigned int depth = 0;

	if (n == 0 || path[0] != '/') {
		*why = "a group path that does not start with '/'";
		return NODE_BAD_PATH;
	}
	if (n > 1 && (path[n - 1] == '/' || memmem(path, n, "//", 2))) {
		*why = "a group path with an empty name";
		return NODE_BAD_PATH;
	}
	for (const char *p = path; n > 1 && p; p = memchr(p + 1, '/',
						       n - (size_t)(p + 1 - path)))
		if (++depth > MAX_DEPTH)
			return NODE_TOO_DEEP;
	return add_node(s, path, n, depth);
}

/* Index of column @name in @s, added when new; SIZE_MAX: no memory. */
static size_t find_column(struct section *s, const char *name, size_t n,
			  size_t hint)
{
	struct column *c;

	if (hint < s->nr_cols && s->cols[hint].len == n &&
	    !memcmp(s->cols[hint].name, name, n))
		return hint;
	for (size_t i = 0; i < s->nr_cols; i++)
		if (s->cols[i].len == n && !memcmp(s->cols[i].name, name, n))
			return i;
	c = grow_array(s->cols, &s->cap_cols, s->nr_cols + 1, sizeof(*c));
	if (!c)
		return SIZE_MAX;
	s->cols = c;
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
	struct section *s;

	for (size_t i = 0; i < m->nr_secs; i++)
		if (m->secs[i].memory == memory &&
		    m->secs[i].prefix_len == n &&
		    !memcmp(m->secs[i].prefix, prefix, n))
			return &m->secs[i];
	s = realloc(m->secs, (m->nr_secs + 1) * sizeof(*s));
	if (!s)
		return NULL;
	m->secs = s;
	s += m->nr_secs++;
	*s = (struct section){ .memory = memory, .prefix = prefix,
			       .prefix_len = n, .bound = NAN };
	return s;
}

/* Does @name start with @prefix and then @word? */
static bool starts(const char *name, size_t n, const char *prefix,
		   size_t plen, const char *word)
{
	size_t wlen = strlen(word);

	return n > plen + wlen && !memcmp(name, prefix, plen) &&
	       !memcmp(name + plen, word, wlen);
}

/*
 * Where @s belongs: its section and column (a memory section's fixed
 * columns first), or NULL for a sample no tree shows.  @x gives the
 * prefixes of statistics trees (their accuracy bounds).
 */
static struct section *classify(struct model *m, const struct exposition *x,
				const struct sample *s, size_t *col,
				size_t *hint, bool *nomem)
{
	const char *n = s->name, *w;
	size_t len = s->name_len, best = 0, plen;
	const struct bound *stats = NULL;
	struct section *sec;
	bool event;

	*nomem = false;
	/* A statistics tree of a known prefix (the longest that fits). */
	for (size_t i = 0; i < x->nr_b; i++)
		if (x->b[i].len >= best &&
		    (starts(n, len, x->b[i].prefix, x->b[i].len, "_hier_") ||
		     starts(n, len, x->b[i].prefix, x->b[i].len, "_local_"))) {
			stats = &x->b[i];
			best = x->b[i].len;
		}
	if (stats) {
		plen = stats->len;
		w = n + plen + 1;
		if (*w == 'l')
			return NULL;	/* the local values */
		w += 5;
		goto stat;
	}
	for (size_t c = 0; c < MEM_NR_FIXED; c++)
		if (ends_with(n, len, mem_suffix[c]) &&
		    len > strlen(mem_suffix[c])) {
			sec = find_section(m, true, n,
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
		sec = find_section(m, true, n, (size_t)(w - n));
		*nomem = !sec;
		if (!sec)
			return NULL;
		*col = find_column(sec, ev, evlen, *hint);
		*nomem = *col == SIZE_MAX;
		*hint = *col;
		*col += MEM_NR_FIXED;
		return *nomem ? NULL : sec;
	}
	w = memmem(n, len, "_hier_", 6);
	if (!w || w == n || w + 6 == n + len)
		return NULL;
	plen = (size_t)(w - n);
	w += 6;
stat:
	sec = find_section(m, false, n, plen);
	*nomem = !sec;
	if (!sec)
		return NULL;
	len = (size_t)(n + len - w);
	event = ends_with(w, len, "_total") && len > 6;
	*col = find_column(sec, w, len - (event ? 6 : 0), *hint);
	*nomem = *col == SIZE_MAX;
	*hint = *col;
	if (*nomem)
		return NULL;
	sec->cols[*col].event |= event;
	return sec;
}

/*
 * Is @s the memory.stat of @mem: exported under the same prefix as
 * "P_hier_STAT", or under "P_memory_stat" (tally/export.h's ways), with
 * the same groups (tally_memcg_stats_tree() has the memory tree's)?  Its
 * states are then bytes, its events counts (enum tally_memcg_stat).
 */
static bool is_memory_stat(const struct section *s, struct section *mem)
{
	size_t n = mem->prefix_len;

	if (s->prefix_len < n || memcmp(s->prefix, mem->prefix, n) ||
	    !(s->prefix_len == n ||
	      (s->prefix_len == n + 12 &&
	       !memcmp(s->prefix + n, "_memory_stat", 12))) ||
	    s->nr_nodes != mem->nr_nodes)
		return false;
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (*hash_slot(mem, s->nodes[k].path, s->nodes[k].path_len) ==
		    SIZE_MAX)
			return false;
	return true;
}

/* Where each kept sample goes, between the two passes of build_model(). */
struct cell {
	size_t sec;		/* index in the model's sections */
	size_t node, col;
	double value;
	size_t line;
};

/* By section, in sample order within one (qsort is not stable). */
static int cmp_cell_section(const void *a, const void *b)
{
	const struct cell *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/* Children lists of every node, and the values matrix from @cells. */
static int finish_section(struct section *s, struct cell *cells, size_t nr,
			  const char *src, char *err)
{
	size_t nc = nr_value_cols(s), *count;

	s->vals = malloc((s->nr_nodes * nc + 1) * sizeof(*s->vals));
	count = calloc(s->nr_nodes, sizeof(*count));
	if (!s->vals || !count) {
		free(count);
		return -1;
	}
	for (size_t i = 0; i < s->nr_nodes * nc; i++)
		s->vals[i] = NAN;
	for (size_t i = 0; i < nr; i++) {
		double *v = &s->vals[cells[i].node * nc + cells[i].col];

		if (!isnan(*v)) {
			const struct node *g = &s->nodes[cells[i].node];

			struct text t = { 0 };

			put_safe(&t, g->path, g->path_len, 60);
			errorf(err, src, strlen(src), "line %zu: a second "
			       "sample of group %s in one family (other "
			       "labels apart): tally top shows one program "
			       "at a time", cells[i].line, t.p ? t.p : "");
			text_free(&t);
			free(count);
			return 1;
		}
		*v = cells[i].value;
		if (!s->memory || cells[i].col >= MEM_NR_FIXED) {
			struct column *c = &s->cols[cells[i].col -
						    (s->memory ? MEM_NR_FIXED
							       : 0)];

			c->nonzero |= *v != 0 && !isnan(*v);
			if (s->nodes[cells[i].node].parent == SIZE_MAX)
				c->root = *v;
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

/*
 * The sections of @x.  Returns 0, TOP_EXIT_BAD_INPUT (a bad group path,
 * a repeated series) or CLI_EXIT_FAILED (no memory), with @err set.
 */
int build_model(const struct exposition *x, struct model *m,
		const char *src, char *err)
{
	struct cell *cells = malloc((x->nr ? x->nr : 1) * sizeof(*cells));
	size_t nr = 0, hint = 0, slen = strlen(src);
	int ret = 0;

	*m = (struct model){ 0 };
	if (!cells)
		goto nomem;
	for (size_t i = 0; i < x->nr; i++) {
		const struct sample *s = &x->s[i];
		const char *why = NULL;
		size_t col = 0, node;
		bool nomem;
		struct section *sec = classify(m, x, s, &col, &hint, &nomem);

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
	/* Sections may move while the array grows: cells hold indexes. */
	for (size_t i = 0; i < m->nr_secs; i++)
		for (size_t b = 0; b < x->nr_b; b++)
			if (!m->secs[i].memory &&
			    x->b[b].len == m->secs[i].prefix_len &&
			    !memcmp(x->b[b].prefix, m->secs[i].prefix,
				    x->b[b].len))
				m->secs[i].bound = x->b[b].value;
	for (size_t i = 0; i < m->nr_secs; i++)
		for (size_t k = 0; k < m->nr_secs; k++)
			if (!m->secs[i].memory && m->secs[k].memory &&
			    is_memory_stat(&m->secs[i], &m->secs[k]))
				m->secs[i].memory_of = &m->secs[k];
	qsort(cells, nr, sizeof(*cells), cmp_cell_section);
	for (size_t i = 0, j = 0; i < m->nr_secs; i++) {
		size_t k = j;
		int r;

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
out:
	free(cells);
	if (ret)
		model_free(m);
	return ret;
nomem:
	free(cells);
	model_free(m);
	errorf(err, src, slen, "%s", strerror(ENOMEM));
	return CLI_EXIT_FAILED;
}
