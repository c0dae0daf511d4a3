/* SPDX-License-Identifier: MIT */
#ifndef TALLY_FORK_H
#define TALLY_FORK_H

/*
 * fork.h - the library's one fork registry (fork.c has the design).
 *
 * Every layer that owns a lock registers one set of fork handlers under
 * its rank; the registry runs them all from one pthread_atfork(): the
 * prepare handlers in rank order, the parent and child handlers in the
 * reverse order.
 */

#include <pthread.h>
#include <stddef.h>

/*
 * The ranks, in lock order: a lock of a rank may be held while a lock of
 * a later rank is taken, never the reverse.  Prepare handlers run from
 * the first rank to the last (outer locks first, as every path takes
 * them), parent and child handlers from the last to the first (the lower
 * layers are whole again before a higher layer's child repair, which may
 * use them).  Why each rank sits where it does:
 *
 *  MEMCG    memory-group trees: oom_lock, drain_lock, structure, then
 *           the callbacks' lock (one for all trees, a leaf).  A
 *           group's creation holds structure while it creates the
 *           group's statistics group (stats topo_lock) and its counters;
 *           its free retires through the grace periods.
 *  STATS    statistics trees: trees_lock, then per tree topo_lock, the
 *           design's locks (coord_lock), flush_lock, periodic_lock.
 *           Creations allocate per-CPU memory under topo_lock; flushes
 *           take no lock of another layer but the allocator's.
 *  COUNTER  the registry of live counters (counters_lock): a leaf, taken
 *           after the counter's per-CPU memory is allocated.
 *  GRACE    the retire list (gp.lock): a leaf; retired callbacks run
 *           after it is released.
 *  PERCPU   the per-CPU allocator: pools_lock, then each pool's lock.
 *           Every layer allocates under its own locks, so it comes last.
 *
 * Outside the registry, and outside this order: the jemalloc integration
 * (libtally_jemalloc) keeps its own handler, registered by
 * tally_jemalloc_install() after this registry and after jemalloc's
 * own, so that its lock (held while it calls into memory groups and
 * jemalloc) is taken before all of them.  The allocator's handlers
 * (jemalloc registers one) run after this registry's, which makes sure
 * the allocator is set up before it registers (fork.c).
 */
enum tally_fork_rank {
	TALLY_FORK_MEMCG,
	TALLY_FORK_STATS,
	TALLY_FORK_COUNTER,
	TALLY_FORK_GRACE,
	TALLY_FORK_PERCPU,
	TALLY_FORK_NR_RANKS
};

/*
 * Register @prepare, @parent and @child (any may be NULL) for @rank, once
 * per rank (a second, different registration aborts: two layers claimed
 * one rank).  The first registration installs the registry's handler
 * (pthread_once).  Layers register from a constructor, so that every
 * rank is in place before any of its locks can be held.
 */
void tally_fork_register(enum tally_fork_rank rank, void (*prepare)(void),
			 void (*parent)(void), void (*child)(void));

/*
 * In a fork child, a mutex its thread took in a prepare handler: unlock
 * it (so that tools tracking owners, like TSan, see it released), then
 * initialise it afresh, free of any waiter the parent had.
 */
void tally_mutex_reset(pthread_mutex_t *lock);

/*
 * The live objects of one kind (pools, trees) that a layer's fork
 * handlers visit: a list under its own lock, which a prepare handler
 * takes before the objects' locks and keeps across the fork, so that no
 * object joins or leaves meanwhile.
 */
struct tally_fork_node {
	struct tally_fork_node *next, *prev;
};

struct tally_fork_list {
	pthread_mutex_t lock;
	struct tally_fork_node *head;
};

#define TALLY_FORK_LIST_INIT { PTHREAD_MUTEX_INITIALIZER, NULL }

/* The object of type @type whose member @member is the node @node. */
#define tally_fork_entry(node, type, member) \
	((type *)(void *)((char *)(node) - offsetof(type, member)))

/* Visit every object of @list; in fork handlers, or under @list->lock. */
#define tally_fork_for_each(pos, list, type, member) \
	for (struct tally_fork_node *pos##_n = (list)->head; \
	     pos##_n && ((pos) = tally_fork_entry(pos##_n, type, member), 1); \
	     pos##_n = pos##_n->next)

/* Add @node to, or remove it from, @list (taking its lock). */
void tally_fork_list_add(struct tally_fork_list *list,
			 struct tally_fork_node *node);
void tally_fork_list_del(struct tally_fork_list *list,
			 struct tally_fork_node *node);

#endif /* TALLY_FORK_H */
