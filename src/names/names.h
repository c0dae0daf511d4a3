/* SPDX-License-Identifier: MIT */
#ifndef TALLY_NAMES_H
#define TALLY_NAMES_H

/*
 * names.h - a tree of named nodes: the identity that groups of the
 * statistics tree and memory groups share (names, paths, lookups).
 *
 * Owns: a node's name (a copy) and its link to its parent's node, and a
 * table of every node of a tree keyed by (parent, name).  It does not own
 * the nodes (a group embeds one) nor a group's list of children (its
 * owner keeps that, with its own rules for lock-free readers): the sorted
 * walk asks the owner for the children.
 *
 * Invariant: within a table, no two nodes have the same parent and name;
 * a node is in the table from names_insert() to names_remove(); a root
 * (no parent) is never in it.  Names are 1 to a caller's maximum bytes
 * without '/'; a root's is empty.
 *
 * Lock: none of its own.  The caller serialises with its tree's structure
 * lock: written (insert, remove, reserve) under it for writing, read
 * (child, find, path, walks) under it for reading at least.
 *
 * Lifetime: a node's name lives from name_node_init() to name_node_fini();
 * the table's buckets from names_init() to names_fini().  Nothing here
 * frees a node.
 *
 * Costs: child lookup O(1) on average (the table doubles when full);
 * find O(path length); path O(depth); the sorted walk O(n log fanout)
 * for n nodes plus one allocation (its stack).
 */

#include <stdbool.h>
#include <stddef.h>

struct name_node {
	struct name_node *up;		/* the parent's node; NULL: a root */
	struct name_node *hash_next;	/* the table's chain */
	char *name;			/* a copy; "" for a root */
	size_t len;
};

struct name_table {
	struct name_node **buckets;
	size_t nr_buckets;		/* a power of two */
	size_t nr_hashed;		/* nodes in the table */
};

/* Whether @name is 1 to @max bytes without '/' (false for NULL). */
bool names_valid(const char *name, size_t max);

/* Copy @len bytes of @name into @n, under @up: 0 or -ENOMEM. */
int name_node_init(struct name_node *n, struct name_node *up,
		   const char *name, size_t len);
void name_node_fini(struct name_node *n);

int names_init(struct name_table *t);
/* Frees the buckets, not the nodes still in them. */
void names_fini(struct name_table *t);

/* @up's child called @name (@len bytes), or NULL. */
struct name_node *names_child(const struct name_table *t,
			      const struct name_node *up, const char *name,
			      size_t len);
/* Room for one more node: 0 or -ENOMEM (the table unchanged). */
int names_reserve(struct name_table *t);
/* Add @n, whose name its parent has no other child of; after a reserve. */
void names_insert(struct name_table *t, struct name_node *n);
void names_remove(struct name_table *t, struct name_node *n);

/*
 * The node of @path ("a/b", "" for @root) under @root: 0, -EINVAL for an
 * empty component ("/a", "a/", "a//b": checked before the walk, so even
 * when an earlier name is missing), -ENOENT for a missing name.
 */
int names_find(const struct name_table *t, struct name_node *root,
	       const char *path, struct name_node **out);

/*
 * The path of @n from its root ("" for a root) into @buf (@len bytes):
 * its length, or -ENOSPC (nothing written) when it does not fit with its
 * NUL.
 */
int names_path(const struct name_node *n, char *buf, size_t len);

/* Call @fn on every node of the table; @fn may free the node. */
void names_for_each(const struct name_table *t,
		    void (*fn)(struct name_node *n, void *arg), void *arg);

/*
 * Visit @root's tree depth-first, a parent before its children, siblings
 * in byte order of their names (a name before its extensions), with the
 * depth (@root's is 0).  @child gives a node's first child (@prev NULL)
 * or the child after @prev; @nr_nodes bounds the nodes met (the table's
 * nodes and the root).  A non-zero return of @fn stops the walk and is
 * returned.  Returns 0, @fn's value or -ENOMEM (the walk's stack).
 */
int names_walk_sorted(struct name_node *root, size_t nr_nodes,
		      struct name_node *(*child)(struct name_node *n,
						 struct name_node *prev),
		      int (*fn)(struct name_node *n, unsigned int depth,
				void *arg),
		      void *arg);

#endif /* TALLY_NAMES_H */
