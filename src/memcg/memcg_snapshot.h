/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_SNAPSHOT_H
#define TALLY_MEMCG_SNAPSHOT_H

/*
 * memcg_snapshot.h - memory groups' side of the snapshot interface
 * (stats/stats_snapshot.h): a sorted walk of a memory tree's live groups
 * that gives each one's name, depth and MEMCG_COL_* values to the row
 * callback.
 *
 * Owns nothing: rows belong to the caller.  Lock: the walk holds the
 * tree's structure lock for reading (no group is created or destroyed
 * meanwhile); the row callback must take no lock of the tree.  Lifetime:
 * a name passed to the callback is valid during the call only.
 */

#include <tally/memcg.h>
#include "stats/stats_snapshot.h"

/*
 * The columns of a row: usage, peak and limits (bytes;
 * TALLY_MEMCG_UNLIMITED for none), then memory.events and
 * memory.events.local.
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
 * Visit every live group of @t, MEMCG_NR_COLS values per row.  Returns 0,
 * the walk's -ENOMEM, or the callback's.
 */
int memcg_snapshot_walk(struct tally_memcg_tree *t, snapshot_row_fn row,
			void *arg);

#endif /* TALLY_MEMCG_SNAPSHOT_H */
