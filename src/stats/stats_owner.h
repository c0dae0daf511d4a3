/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_OWNER_H
#define TALLY_STATS_OWNER_H

/*
 * stats_owner.h - what a concept built on the statistics tree (memory
 * groups) needs beyond tally/stats.h: a group's destroy in two steps.
 *
 * A memory group owns one statistics group (created with
 * tally_stats_group_create() under the memory group's parent's) and ends
 * it in two steps: detach when the memory group is destroyed (its name is
 * free at once, walks, finds and the tree's info no longer see it, and it
 * still takes updates), finish when the memory group itself is freed,
 * once no update can reach it (a grace period after its last reference).
 * In between, fold moves what it holds into its ancestors' values: at the
 * destroy, and once more when the updates in flight then have ended.
 *
 * Locks: both take the tree's topo_lock for writing (finish only in debug
 * builds, to keep the group poisoned); finish flushes (flush_lock).
 * Lifetime: after finish the group is gone; in between it belongs to its
 * owner alone, which must finish it before the tree is destroyed.
 */

struct tally_stats_group;

/*
 * Unlink and unhash @g: 0, -EINVAL (NULL, the root, detached already) or
 * -EBUSY (it has children).  Its values stay in its ancestors'.
 */
int stats_group_detach(struct tally_stats_group *g);

/*
 * Flush a detached @g into its ancestors' values (what any CPU's hint
 * cache holds of it too); it still takes updates.  Never fails, issues
 * no barrier.  @quiesced: every update of @g happened before the call and
 * none follows; @g is then left linked on no CPU (stats_group_finish()
 * needs no flush of its own).
 */
void stats_group_fold(struct tally_stats_group *g, bool quiesced);

/*
 * Flush a detached @g into its ancestors and free it; never fails.
 * @children_finished: every group created under @g has finished already
 * (memory groups: a child holds a reference on its parent until then);
 * the flush, and its barrier, is then skipped when an earlier one left
 * nothing of @g on any CPU (stats_group_clean()).
 */
void stats_group_finish(struct tally_stats_group *g, bool children_finished);

#endif /* TALLY_STATS_OWNER_H */
