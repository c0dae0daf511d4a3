// SPDX-License-Identifier: MIT
/*
 * stats_fork.c - statistics trees across fork().
 *
 * fork() copies one thread.  Around it, every lock of every tree is taken,
 * tree by tree, in the order of stats_internal.h (topology, the design's
 * locks, flush, periodic); the parent unlocks them and the child
 * re-initialises them, since a lock word may count waiters the child does
 * not have.  The child then repairs what the missing threads left half
 * done: claims never pushed and hint caches half taken (the flush side
 * forgets them, this file walks the groups to repair them, so that the
 * flush engine needs no group walk), shared flushes and their
 * waiters (the design), the periodic thread (stats_periodic.c).  These
 * handlers have rank TALLY_FORK_STATS in the library's fork registry
 * (runtime/fork.h): after the memory groups' locks, which are held while
 * a memory group creates its statistics group, and before the counters',
 * grace periods' and per-CPU allocator's, which creation and destroy take
 * under topo_lock.
 *
 * A child may use every tree it inherited, from its one thread or from
 * threads it starts: values, groups and the update lists are the parent's
 * at the fork.  Its periodic flusher is stopped.
 *
 * The registry's lock (trees.lock) is taken first.
 */
#include <pthread.h>

#include "runtime/fork.h"
#include "stats_internal.h"

static struct tally_fork_list trees = TALLY_FORK_LIST_INIT;

static void relist(struct tally_stats_group *g, void *arg)
{
	stats_flush_fork_relist(g, *(unsigned int *)arg);
}

/* A taker of a cache in a parent thread may have left @g's count. */
static void release_cached(struct tally_stats_group *g, void *arg)
{
	(void)arg;
	for (unsigned int cpu = 0; cpu < g->tree->domain->nr_cpus; cpu++)
		stats_hcache_fork_child(g, cpu);
}

/*
 * What the parent's threads left between an update's claim and its push,
 * or inside a take of a hint cache: each CPU's list is rebuilt from the
 * groups marked listed; every group's cached counts on CPUs whose cache
 * names another group go to their chains.
 */
static void repair_updates(struct tally_stats_tree *t)
{
	unsigned int caught = 0;

	for (unsigned int cpu = 0; cpu < t->domain->nr_cpus; cpu++) {
		unsigned int repair = stats_flush_fork_forget_cpu(t, cpu);

		caught |= repair;
		if (repair & STATS_FORK_RELIST)
			stats_for_each_group(t, relist, &cpu);
	}
	if (caught & STATS_FORK_CACHES)
		stats_for_each_group(t, release_cached, NULL);
}

static void fork_prepare(void)
{
	struct tally_stats_tree *t;

	pthread_mutex_lock(&trees.lock);
	tally_fork_for_each(t, &trees, struct tally_stats_tree, fork_node) {
		stats_group_fork_prepare(t);
		if (t->ops->fork_prepare)
			t->ops->fork_prepare(t);
		stats_flush_fork_prepare(t);
		stats_periodic_fork_prepare(t);
	}
}

static void fork_parent(void)
{
	struct tally_stats_tree *t;

	tally_fork_for_each(t, &trees, struct tally_stats_tree, fork_node) {
		stats_periodic_fork_parent(t);
		stats_flush_fork_parent(t);
		if (t->ops->fork_parent)
			t->ops->fork_parent(t);
		stats_group_fork_parent(t);
	}
	pthread_mutex_unlock(&trees.lock);
}

static void fork_child(void)
{
	struct tally_stats_tree *t;

	tally_fork_for_each(t, &trees, struct tally_stats_tree, fork_node) {
		stats_group_fork_child(t);
		if (t->ops->fork_child)
			t->ops->fork_child(t);
		stats_flush_fork_child(t);
		repair_updates(t);
		stats_periodic_fork_child(t);
	}
	tally_mutex_reset(&trees.lock);
}

__attribute__((constructor)) static void install_fork_handlers(void)
{
	tally_fork_register(TALLY_FORK_STATS, fork_prepare, fork_parent,
			    fork_child);
}

void stats_register_tree(struct tally_stats_tree *t)
{
	tally_fork_list_add(&trees, &t->fork_node);
}

void stats_unregister_tree(struct tally_stats_tree *t)
{
	tally_fork_list_del(&trees, &t->fork_node);
}
