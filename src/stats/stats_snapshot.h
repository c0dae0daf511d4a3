/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_SNAPSHOT_H
#define TALLY_STATS_SNAPSHOT_H

/*
 * stats_snapshot.h - the snapshot interface through which the exporter
 * reads a tree of groups without its private structs: a sorted walk that
 * gives each group's name, depth and values to a row callback.  The
 * statistics tree serves it here, memory groups in memcg/memcg_snapshot.h.
 *
 * Owns nothing: rows belong to the caller.  Lock: the walk holds the
 * tree's structure lock (topo_lock) for reading, so no group is created
 * or destroyed meanwhile; the row callback must take no lock of the tree.
 * Lifetime: a name passed to the callback is valid during the call only.
 */

#include <stdbool.h>
#include <stddef.h>

struct tally_stats_tree;

/*
 * One group of a walk, in names.h's sorted order (a parent before its
 * children, siblings by name): its name (@len bytes, "" for the root) and
 * depth (the root's is 0).  Returns where the group's values go (as many
 * as the walk says), or NULL to end the walk with -ENOMEM.
 */
typedef long *(*snapshot_row_fn)(void *arg, const char *name, size_t len,
				 unsigned int depth);

/* The name of stat @i of @t's schema, and whether it counts events. */
const char *stats_stat_name(const struct tally_stats_tree *t, unsigned int i);
bool stats_stat_is_event(const struct tally_stats_tree *t, unsigned int i);

/*
 * Visit every group of @t: 2 x nr_stats values per row, the local values
 * then the hierarchical ones, as flushed (no flush: the caller decides
 * one before).  Returns 0, the walk's -ENOMEM, or the callback's.
 */
int stats_snapshot_walk(struct tally_stats_tree *t, snapshot_row_fn row,
			void *arg);

#endif /* TALLY_STATS_SNAPSHOT_H */
