// SPDX-License-Identifier: MIT
/*
 * names.c - a tree of named nodes (names.h): name checks, the table of
 * children by (parent, name), lookups by path, paths, the sorted walk.
 *
 * Owns the node names and the table's buckets; no lock (the caller's
 * structure lock covers every call, names.h says how); nothing here
 * outlives the nodes it is given.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

#define INITIAL_BUCKETS 64u

bool names_valid(const char *name, size_t max)
{
	size_t n;

	if (!name)
		return false;
	n = strnlen(name, max + 1);
	return n >= 1 && n <= max && !memchr(name, '/', n);
}

int name_node_init(struct name_node *n, struct name_node *up,
		   const char *name, size_t len)
{
	n->up = up;
	n->hash_next = NULL;
	n->name = strndup(name, len);
	n->len = len;
	return n->name ? 0 : -ENOMEM;
}

void name_node_fini(struct name_node *n)
{
	free(n->name);
	n->name = NULL;
}

/* FNV-1a over the name, mixed with the parent's address. */
static size_t name_hash(const struct name_node *up, const char *name,
			size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uintptr_t)up;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	return (size_t)(h ^ (h >> 29));
}

static struct name_node **bucket_of(const struct name_table *t,
				    const struct name_node *up,
				    const char *name, size_t len)
{
	return &t->buckets[name_hash(up, name, len) & (t->nr_buckets - 1)];
}

int names_init(struct name_table *t)
{
	t->buckets = calloc(INITIAL_BUCKETS, sizeof(*t->buckets));
	t->nr_buckets = t->buckets ? INITIAL_BUCKETS : 0;
	t->nr_hashed = 0;
	return t->buckets ? 0 : -ENOMEM;
}

void names_fini(struct name_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->nr_buckets = 0;
}

struct name_node *names_child(const struct name_table *t,
			      const struct name_node *up, const char *name,
			      size_t len)
{
	struct name_node *c = *bucket_of(t, up, name, len);

	for (; c; c = c->hash_next)
		if (c->up == up && c->len == len && !memcmp(c->name, name, len))
			return c;
	return NULL;
}

/* Double the table when it is full. */
int names_reserve(struct name_table *t)
{
	struct name_node **old = t->buckets;
	size_t nr = t->nr_buckets;
	struct name_node **buckets;

	if (t->nr_hashed < nr)
		return 0;
	buckets = calloc(2 * nr, sizeof(*buckets));
	if (!buckets)
		return -ENOMEM;
	t->buckets = buckets;
	t->nr_buckets = 2 * nr;
	for (size_t i = 0; i < nr; i++) {
		struct name_node *n = old[i], *next;

		for (; n; n = next) {
			struct name_node **b = bucket_of(t, n->up, n->name,
							 n->len);

			next = n->hash_next;
			n->hash_next = *b;
			*b = n;
		}
	}
	free(old);
	return 0;
}

void names_insert(struct name_table *t, struct name_node *n)
{
	struct name_node **b = bucket_of(t, n->up, n->name, n->len);

	n->hash_next = *b;
	*b = n;
	t->nr_hashed++;
}

void names_remove(struct name_table *t, struct name_node *n)
{
	struct name_node **link = bucket_of(t, n->up, n->name, n->len);

	while (*link != n)
		link = &(*link)->hash_next;
	*link = n->hash_next;
	t->nr_hashed--;
}

int names_find(const struct name_table *t, struct name_node *root,
	       const char *path, struct name_node **out)
{
	struct name_node *n = root;

	if (*path && (path[0] == '/' || path[strlen(path) - 1] == '/' ||
		      strstr(path, "//")))
		return -EINVAL;
	while (*path) {
		const char *end = strchr(path, '/');
		size_t len = end ? (size_t)(end - path) : strlen(path);

		n = names_child(t, n, path, len);
		if (!n)
			return -ENOENT;
		path += len + (end ? 1 : 0);
	}
	*out = n;
	return 0;
}

int names_path(const struct name_node *n, char *buf, size_t len)
{
	size_t need = 0, pos;

	for (const struct name_node *a = n; a->up; a = a->up)
		need += a->len + (a->up->up ? 1 : 0);
	if (need >= len)
		return -ENOSPC;
	buf[need] = '\0';
	pos = need;
	for (const struct name_node *a = n; a->up; a = a->up) {
		pos -= a->len;
		memcpy(buf + pos, a->name, a->len);
		if (a->up->up)
			buf[--pos] = '/';
	}
	return (int)need;
}

void names_for_each(const struct name_table *t,
		    void (*fn)(struct name_node *n, void *arg), void *arg)
{
	for (size_t i = 0; i < t->nr_buckets; i++) {
		struct name_node *n = t->buckets[i], *next;

		for (; n; n = next) {
			next = n->hash_next;
			fn(n, arg);
		}
	}
}

/* A node met by the sorted walk, with its depth. */
struct walk_entry {
	struct name_node *n;
	unsigned int depth;
};

/* Descending by name: the stack pops siblings in ascending order. */
static int name_desc(const void *a, const void *b)
{
	const struct walk_entry *x = a, *y = b;
	size_t n = x->n->len < y->n->len ? x->n->len : y->n->len;
	int c = memcmp(y->n->name, x->n->name, n);

	if (c)
		return c;
	return (y->n->len > x->n->len) - (y->n->len < x->n->len);
}

/*
 * Every node is pushed once, so the stack never holds more than
 * @nr_nodes, which the caller's lock keeps from growing.
 */
int names_walk_sorted(struct name_node *root, size_t nr_nodes,
		      struct name_node *(*child)(struct name_node *n,
						 struct name_node *prev),
		      int (*fn)(struct name_node *n, unsigned int depth,
				void *arg),
		      void *arg)
{
	struct walk_entry *stack = malloc(nr_nodes * sizeof(*stack));
	size_t top = 0;
	int ret = 0;

	if (!stack)
		return -ENOMEM;
	stack[top++] = (struct walk_entry){ root, 0 };
	while (top && !ret) {
		struct walk_entry e = stack[--top];
		size_t base = top;

		ret = fn(e.n, e.depth, arg);
		for (struct name_node *c = child(e.n, NULL); c;
		     c = child(e.n, c))
			stack[top++] = (struct walk_entry){ c, e.depth + 1 };
		qsort(stack + base, top - base, sizeof(*stack), name_desc);
	}
	free(stack);
	return ret;
}
