/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_INTERNAL_H
#define TALLY_STATS_INTERNAL_H

/*
 * stats_internal.h - what the files of the statistics tree share.
 *
 * One concept per file, and each lock belongs to one file:
 *
 *   stats_update.c    updates: one rseq sequence, no lock, no allocation
 *   stats_flush.c     the flush engine: two passes                flush_lock
 *   stats_barrier.c   the process's barriers that let groups
 *                     leave the flush path                        (atomics)
 *   stats_read.c      reads; the TALLY design's shared, fresh
 *                     flushes                                     (atomics)
 *   stats_group.c     group lifetime, names, paths                topo_lock
 *   stats_periodic.c  the periodic flusher                        periodic_lock
 *   stats_fork.c      fork(): every lock, in the order above      trees.lock
 *   stats_tree.c      trees, schemas, info
 *   stats_snapshot.c  the exporter's rows (stats_snapshot.h)
 *
 * A tree's design (struct stats_design_ops, stats_design.h) decides
 * which flush a read needs and how readers share it: the TALLY design
 * (stats_read.c) for the library's trees; the comparison designs of
 * `tally bench stats` (bench/stats_designs.c) through the same hook.
 *
 * Lock order (fork_prepare takes them in this order, tree by tree):
 * the registry's lock, topo_lock, the design's locks (none for
 * TALLY), flush_lock, periodic_lock; then the lower layers' locks
 * (counters, grace periods, the per-CPU allocator: runtime/fork.h).
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <tally/percpu.h>
#include <tally/stats.h>
#include "names/names.h"
#include "runtime/domain_internal.h"
#include "stats_design.h"
#include "stats_owner.h"

#define STATS_CACHELINE 64
#define STATS_GROUP_MAGIC 0x7a11c0de5ca1ab1eul
#define STATS_GROUP_DEAD 0xdeadca75deadca75ul

/* stats_pcpu.queued: where a (group, CPU) is on its way to a flush. */
enum {
	QUEUE_IDLE,	/* nothing to flush, or a flush will read it anyway */
	QUEUE_LISTED,	/* claimed by an update: on the CPU's list, or being
			 * pushed on it */
	QUEUE_LINKED,	/* popped into the CPU's updated tree */
};

/*
 * Per (group, CPU), written by updates on that CPU.  A group's creation
 * writes none of it: a CPU that never runs keeps its pages untouched.
 */
struct stats_pcpu {
	long count;			/* threshold hint not yet in over */
	long cacc;			/* hint cached while the group holds
					 * the CPU's cache (stats_update.c) */
	int queued;
	/*
	 * In the CPU's updated tree: written by flushers under flush_lock,
	 * loaded by quiet reads (stats_group_clean()) in the line they load
	 * queued from.
	 */
	bool linked;
	struct stats_pcpu *next;	/* the CPU's update list */
	struct tally_stats_group *group;	/* set by the pushing update */
	long stat[];
};

/*
 * Per (tree, CPU): the hint cache (stats_update.c).  @last names the group
 * whose cached count (stats_pcpu.cacc) on the CPU its chain has not seen
 * yet; @prev, the group of the CPU's last updates that missed the cache
 * (@runs of them in a row after its first), is only a hint of who should
 * take it; @stealing counts the takers moving a previous holder's count
 * (futex, STATS_PUSH_WAITERS when a destroy waits).
 */
struct stats_hcache {
	struct tally_stats_group *last;
	struct tally_stats_group *prev;
	unsigned int runs;
	unsigned int stealing;
	/*
	 * Reads of a clean leaf on the CPU (stats_read.c), which count as
	 * flushes in tally_stats_tree_info(): in the line the CPU's updates
	 * keep hot, so that such a read touches none of the tree's shared
	 * lines and no cold one of its own.
	 */
	long clean_reads;
};

/* stats_hcache.last of a cache a destroyed group was evicted from. */
#define STATS_HCACHE_EVICTED ((struct tally_stats_group *)1)

/* Per (group, CPU), touched by flushers only, under flush_lock. */
struct stats_fpcpu {
	struct tally_stats_group *children;	/* updated children */
	struct tally_stats_group *sibling;	/* next updated sibling */
	unsigned long marked;		/* barrier ticket of the idle mark */
	long prev[];			/* stat[] as the last flush saw it */
};

/* TALLY design: one group's shared flush (stats_read.c), atomics. */
/*
 * A flush of at most this many CPUs holds flush_lock once; a larger one
 * takes it for this many CPUs at a time (stats_flush.c).
 */
#define STATS_CPUS_PER_HOLD 64

struct stats_share {
	uint64_t active;		/* stamp of the shared flush running,
					 * 0: none */
	uint64_t progress;		/* its CPUs passed: waiters watch it */
	uint64_t done_stamp;		/* highest of the flushes done,
					 * takeovers too */
	/*
	 * Stamp of the last shared flush done: they run one at a time, in
	 * the order of their stamps, so it tells whether a given one is
	 * done, where done_stamp cannot.
	 */
	uint64_t active_done;
	unsigned int running;		/* flushes of the group, takeovers
					 * too (futex: retire waits for 0) */
	uint32_t seq;			/* bumped by each flush done (futex) */
	uint32_t sleepers;		/* readers napping on seq */
};

struct tally_stats_group {
	/*
	 * Read-mostly, written only by creation, one line: what every
	 * update reads, and what flushes need to find the rest (a flush
	 * right after updates finds this line in the cache).
	 */
	struct tally_stats_tree *tree;
	struct stats_pcpu *pcpu;
	/*
	 * Threshold chain, self first, then each ancestor: the per-CPU
	 * counts as byte offsets from pcpu (the same on every CPU), then
	 * (stats_chain_over()) the overs they move to.
	 */
	long *chain_offs;
	struct stats_hcache *hcache;	/* the tree's, per CPU */
	/* Counts move to over from the batch; the hint cache holds less
	 * than cache_cap (the tree's). */
	unsigned long batch, cache_cap;
	unsigned long hint_cap;		/* largest hint one update adds */
	unsigned int nr_chain;
	unsigned short nr_stats;
	bool simulated;

	/*
	 * What reads and flushes look at: over, written by updates once per
	 * move; the flushed values; the flush side's per-CPU part.
	 */
	long over __attribute__((aligned(STATS_CACHELINE)));
	struct stats_fpcpu *fpcpu;	/* flush side, under flush_lock */

	/* Structure, under the tree's topo_lock. */
	struct tally_stats_group *parent __attribute__((aligned(STATS_CACHELINE)));
	struct tally_stats_group *first_child;
	struct tally_stats_group *next_sibling, *prev_sibling;
	/*
	 * The children not finished yet, detached ones included: what a
	 * flush's adopt_claimed() walks, loading the links without the lock
	 * (a detached memory group's stats still take updates).
	 */
	struct tally_stats_group *walk_first;
	struct tally_stats_group *walk_next, *walk_prev;
	bool walk_orphan;	/* its parent left the walk first */
	struct name_node node;		/* name, in the tree's table */
	unsigned long magic;
	bool dying;

	/* Flush sharing (TALLY design). */
	struct stats_share share __attribute__((aligned(STATS_CACHELINE)));
};

_Static_assert(offsetof(struct tally_stats_group, simulated) <
		       STATS_CACHELINE,
	       "the fields every update reads fit one cache line");
_Static_assert(offsetof(struct tally_stats_group, over) == STATS_CACHELINE,
	       "over starts its own cache line");
_Static_assert(offsetof(struct tally_stats_group, parent) ==
		       2 * STATS_CACHELINE,
	       "what reads look at has a cache line of its own");
_Static_assert(offsetof(struct tally_stats_group, share) %
			       STATS_CACHELINE == 0,
	       "flush sharing has cache lines of its own");

struct tally_stats_tree {
	/*
	 * Read-mostly.  The first line holds all that a read of a clean
	 * leaf needs of the tree (ops, nr_cpus, simulated, hcache).
	 */
	struct tally_domain *domain;
	const struct stats_design_ops *ops;
	void *design_state;		/* another design's own */
	struct stats_hcache *hcache;	/* per CPU (stats_update.c) */
	/*
	 * threshold: batch x nr_cpus.  A group flushes once over passes
	 * flush_at: the threshold less what the CPUs' hint caches may hold
	 * (cache_cap - 1 each, and no cache on simulated CPUs), so that the
	 * read bound stays threshold + nr_cpus x (batch - 1).
	 */
	unsigned long batch, threshold, flush_at;
	unsigned int nr_cpus;		/* the domain's */
	bool simulated;
	unsigned long cache_cap;
	uint64_t period_ns;
	uint64_t (*clock)(void *arg);
	void *clock_arg;
	unsigned int nr_stats;
	char **names;
	unsigned char *is_event;
	struct tally_stats_group *root;

	/* Per CPU. */
	struct stats_pcpu **lists;	/* update list heads */
	unsigned int *pushing;		/* claims being pushed (futex) */

	/* stats_group.c: structure and the child-name table. */
	pthread_rwlock_t topo_lock __attribute__((aligned(STATS_CACHELINE)));
	struct name_table group_names;	/* the groups' (names/names.h) */

	/* stats_flush.c */
	pthread_mutex_t flush_lock __attribute__((aligned(STATS_CACHELINE)));
	/*
	 * CPUs a flush passes per hold of flush_lock (STATS_CPUS_PER_HOLD;
	 * tests lower it to stop a flush between two CPUs).
	 */
	unsigned int cpus_per_hold;
	uint64_t hold_start;	/* under flush_lock: when its holder took it */
	int holder_cpu;		/* the CPU its last holder took it on */
	/*
	 * Nodes wait for a barrier: loaded after every read's flush, set
	 * rarely; a line of its own, not the one each flush_lock round trip
	 * writes.
	 */
	bool unsettled __attribute__((aligned(STATS_CACHELINE)));

	/* stats_read.c: the flushes' stamps, ratelimited reads. */
	uint64_t flush_clock __attribute__((aligned(STATS_CACHELINE)));
	uint64_t last_root_flush;

	/* stats_periodic.c */
	pthread_mutex_t periodic_lock __attribute__((aligned(STATS_CACHELINE)));
	pthread_cond_t periodic_cond;
	pthread_t periodic_thread;
	bool periodic_running, periodic_stop;

	struct tally_stats_info info;	/* atomics */
	struct tally_fork_node fork_node;	/* stats_fork.c registry */
#ifdef TALLY_DEBUG
	struct tally_stats_group *graveyard;	/* under topo_lock */
#endif
};

_Static_assert(offsetof(struct tally_stats_tree, simulated) <
		       STATS_CACHELINE,
	       "what a read of a clean leaf needs of the tree fits one line");

/* The library's design (stats_read.c). */
extern const struct stats_design_ops stats_design_tally;

/* --- small helpers shared by the files ------------------------------- */

static inline struct stats_pcpu *pcpu_of(const struct tally_stats_group *g,
					 unsigned int cpu)
{
	return (struct stats_pcpu *)tally_percpu_ptr(g->pcpu, cpu);
}

static inline struct stats_fpcpu *fpcpu_of(const struct tally_stats_group *g,
					   unsigned int cpu)
{
	return (struct stats_fpcpu *)tally_percpu_ptr(g->fpcpu, cpu);
}

/* A flushed value: written under flush_lock, loaded by readers anywhere. */
static inline long stats_load(const long *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/*
 * A group's flushed values follow it in its allocation, at a fixed offset:
 * a read finds them without loading a pointer first (in a busy tree, one
 * more cache miss before the values' own).
 */
#define STATS_GROUP_SIZE                                                     \
	((sizeof(struct tally_stats_group) + STATS_CACHELINE - 1) &          \
	 ~(size_t)(STATS_CACHELINE - 1))

/* Hierarchical values of @g (subtree), first. */
static inline long *stats_hier(const struct tally_stats_group *g)
{
	return (long *)((char *)g + STATS_GROUP_SIZE);
}

/* Values of @g's own updates. */
static inline long *stats_local(const struct tally_stats_group *g)
{
	return stats_hier(g) + g->nr_stats;
}

/* Children's flushed totals not yet added to stats_hier(). */
static inline long *stats_pending(const struct tally_stats_group *g)
{
	return stats_hier(g) + 2 * g->nr_stats;
}

/* The overs of the threshold chain, after its offsets. */
static inline long **stats_chain_over(const struct tally_stats_group *g)
{
	return (long **)(g->chain_offs + g->nr_chain);
}

static inline uint64_t stats_now(const struct tally_stats_tree *t)
{
	return t->clock(t->clock_arg);
}

/* CLOCK_MONOTONIC in ns: for waits, whatever clock the tree was given. */
static inline uint64_t stats_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void stats_count_info(uint64_t *field, uint64_t n)
{
	__atomic_add_fetch(field, n, __ATOMIC_RELAXED);
}

/* A read of a clean leaf (stats_group_clean()): a flush that visited nothing. */
static inline void stats_count_clean_read(struct tally_stats_tree *t)
{
	if (t->simulated)
		stats_count_info(&t->info.flushes, 1);
	else
		tally_percpu_add(&t->hcache->clean_reads, 1);
}

/*
 * The group after @n in a walk of @g's subtree, parents first, detached
 * groups not finished yet included; NULL after the last.  Safe without
 * topo_lock while flush_lock is held (stats_group_finish() quiesces after
 * leaving the walk).
 */
struct tally_stats_group *stats_walk_next(struct tally_stats_group *g,
					  struct tally_stats_group *n);

/*
 * Visit every group of @t, the root and detached groups not finished yet
 * included (topology must be stable).
 */
void stats_for_each_group(struct tally_stats_tree *t,
			  void (*fn)(struct tally_stats_group *g, void *arg),
			  void *arg);

/* --- stats_update.c ----------------------------------------------------- */

/*
 * Before @g is freed, once nothing updates it: no CPU's hint cache names
 * it, and what they held for it is in its chain's overs.
 */
void stats_hcache_evict(struct tally_stats_group *g);
/* In a child of fork(): @g's cached count on @cpu, if a taker left it. */
void stats_hcache_fork_child(struct tally_stats_group *g, unsigned int cpu);

/* --- stats_barrier.c, stats_flush.c ----------------------------------- */

#define STATS_PUSH_WAITERS 0x80000000u

/* Set up the process's barrier mode before the first system-domain tree. */
void stats_barrier_setup(void);
/* 0 while flushes use membarrier(); updates fence otherwise. */
extern int stats_barrier_state;
/* Whether updates on the system domain must fence (no membarrier). */
static inline bool stats_updates_fence(void)
{
	return __atomic_load_n(&stats_barrier_state, __ATOMIC_RELAXED) != 0;
}
/*
 * Flush @g's subtree on every CPU; never fails, never allocates.  With
 * @settle (destroy) it takes a barrier between its passes, so that it
 * leaves no node of the subtree linked that nobody re-queued.
 */
void stats_flush_subtree(struct tally_stats_tree *t,
			 struct tally_stats_group *g, bool settle);
/*
 * The same for a @g whose every update happened before the call and that
 * takes none after (a destroyed memory group, a grace period after its
 * destroy): it leaves @g itself linked on no CPU without a barrier, as
 * no update can have missed its node (its descendants' nodes, if any
 * are linked, are marked as by a plain flush).
 */
void stats_flush_quiesced(struct tally_stats_tree *t,
			  struct tally_stats_group *g);
/*
 * The same, unsettled, adding 1 to *@progress (if not NULL) at each lock
 * round trip it completes: what those waiting for it watch.
 */
void stats_flush_counted(struct tally_stats_tree *t,
			 struct tally_stats_group *g, uint64_t *progress);
/*
 * After a flush, outside the design's locks: issue the barrier that lets
 * nodes leave the flush path, if some wait for one and the process issued
 * none for SETTLE_NS.
 */
void stats_flush_settle(struct tally_stats_tree *t);
/*
 * Return once @pushing (a cache's count of takers, or a group's running
 * flushes) is 0: a short spin,
 * then futex sleeps until the last one wakes it (stats_count_leave()).
 */
void stats_wait_for_pushes(unsigned int *pushing);
/* Wake what sleeps in stats_wait_for_pushes(@pushing). */
void stats_wake_waiters(unsigned int *pushing);
/* Leave the count @pushing: the last one out wakes its waiters. */
static inline void stats_count_leave(unsigned int *pushing)
{
	if (__atomic_sub_fetch(pushing, 1, __ATOMIC_SEQ_CST) ==
	    STATS_PUSH_WAITERS)
		stats_wake_waiters(pushing);
}
/*
 * Whether a flush of @g would fold nothing, without a lock: @g is a leaf,
 * idle and unlinked on every CPU.  O(nr_cpus) loads of @g's own lines.
 */
bool stats_group_clean(const struct tally_stats_group *g);
void stats_flush_init(struct tally_stats_tree *t);
void stats_flush_fini(struct tally_stats_tree *t);
/* Return once no flush pass that started before still runs. */
void stats_flush_quiesce(struct tally_stats_tree *t);
void stats_flush_fork_prepare(struct tally_stats_tree *t);
void stats_flush_fork_parent(struct tally_stats_tree *t);
void stats_flush_fork_child(struct tally_stats_tree *t);
/*
 * In a fork child, after stats_flush_fork_child(): forget the pushes and
 * cache takes the parent's threads left in flight on @cpu.  Returns what
 * stats_fork.c must repair over every group: STATS_FORK_RELIST, rebuild
 * @cpu's list with stats_flush_fork_relist(); STATS_FORK_CACHES, move
 * the counts left in hint caches (stats_hcache_fork_child()).
 */
enum { STATS_FORK_RELIST = 1, STATS_FORK_CACHES = 2 };
unsigned int stats_flush_fork_forget_cpu(struct tally_stats_tree *t,
					 unsigned int cpu);
void stats_flush_fork_relist(struct tally_stats_group *g, unsigned int cpu);

/* --- stats_read.c ------------------------------------------------------- */

/*
 * Flush @g as the tree's design decides (@fresh: see ops->flush), then
 * settle (stats_flush_settle()).  Returns false when the design skipped.
 */
bool stats_design_flush(struct tally_stats_group *g, bool fresh);

/* --- stats_group.c ------------------------------------------------------ */

struct tally_stats_group *stats_group_new(struct tally_stats_tree *t,
					  struct tally_stats_group *parent,
					  const char *name, size_t len);
void stats_group_free(struct tally_stats_group *g);
int stats_groups_init(struct tally_stats_tree *t);
void stats_groups_fini(struct tally_stats_tree *t);
void stats_group_fork_prepare(struct tally_stats_tree *t);
void stats_group_fork_parent(struct tally_stats_tree *t);
void stats_group_fork_child(struct tally_stats_tree *t);

/* The group whose name node is @n. */
static inline struct tally_stats_group *stats_group_of(struct name_node *n)
{
	return (struct tally_stats_group *)((char *)n -
		offsetof(struct tally_stats_group, node));
}

/* --- stats_periodic.c --------------------------------------------------- */

void stats_periodic_init(struct tally_stats_tree *t);
void stats_periodic_fini(struct tally_stats_tree *t);
void stats_periodic_fork_prepare(struct tally_stats_tree *t);
void stats_periodic_fork_parent(struct tally_stats_tree *t);
void stats_periodic_fork_child(struct tally_stats_tree *t);

/* --- stats_fork.c ------------------------------------------------------- */

void stats_register_tree(struct tally_stats_tree *t);
void stats_unregister_tree(struct tally_stats_tree *t);

#endif /* TALLY_STATS_INTERNAL_H */
