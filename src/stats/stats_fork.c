// SPDX-License-Identifier: MIT
/*
 * stats_fork.c - statistics trees across fork().
 *
 * fork() copies one thread.  Around it, every lock of every tree is taken,
 * tree by tree, in the order of stats_internal.h (topology, the design's
 * locks, flush, periodic); the parent unlocks them and the child
 * re-initialises them, since a lock word may count waiters the child does
 * not have.  The child then repairs what the missing threads left half
 * done: claims never pushed (stats_flush.c), shared flushes and their
 * waiters (the design), the periodic thread (stats_periodic.c).  The
 * per-CPU allocator registers its handlers before the first tree, so its
 * locks are taken after ours, the order create and destroy use.
 *
 * A child may use every tree it inherited, from its one thread or from
 * threads it starts: values, groups and the update lists are the parent's
 * at the fork.  Its periodic flusher is stopped.
 *
 * trees_lock guards the registry; it is taken first.
 */
#include <pthread.h>

#include "stats_internal.h"

static pthread_mutex_t trees_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_stats_tree *trees;

static void fork_prepare(void)
{
	pthread_mutex_lock(&trees_lock);
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		stats_group_fork_prepare(t);
		t->ops->fork_prepare(t);
		stats_flush_fork_prepare(t);
		stats_periodic_fork_prepare(t);
	}
}

static void fork_parent(void)
{
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		stats_periodic_fork_parent(t);
		stats_flush_fork_parent(t);
		t->ops->fork_parent(t);
		stats_group_fork_parent(t);
	}
	pthread_mutex_unlock(&trees_lock);
}

static void fork_child(void)
{
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		stats_group_fork_child(t);
		t->ops->fork_child(t);
		stats_flush_fork_child(t);
		stats_periodic_fork_child(t);
	}
	tally_mutex_reset(&trees_lock);
}

static void install_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void stats_register_tree(struct tally_stats_tree *t)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install_fork_handlers);
	pthread_mutex_lock(&trees_lock);
	t->next_tree = trees;
	trees = t;
	pthread_mutex_unlock(&trees_lock);
}

void stats_unregister_tree(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&trees_lock);
	for (struct tally_stats_tree **link = &trees; *link;
	     link = &(*link)->next_tree) {
		if (*link == t) {
			*link = t->next_tree;
			break;
		}
	}
	pthread_mutex_unlock(&trees_lock);
}
