// SPDX-License-Identifier: MIT
/*
 * stats.c - the hierarchical statistics tree (rstat with memcg flushing).
 *
 * Data of group G, for nr_stats stats:
 *
 *   per CPU, hot   stat[i]    written by updates on that CPU (rseq)
 *                  count      |delta| not yet moved to G->over (a hint)
 *                  queued     idle, listed (claimed by an update, on the
 *                             CPU's list or being pushed) or linked (popped
 *                             into the CPU's updated tree)
 *   per CPU, cold  prev[i]    stat[i] as the last flush saw it
 *                  children / sibling / linked: the CPU's updated tree
 *   per group      local[i], hier[i]   flushed values (readers load them)
 *                  pending[i]          children's flushed totals not yet
 *                                      added to hier[i]
 *                  over                threshold count (atomic)
 *
 * Update (tally_stats_mod): one rseq sequence adds |delta| to the count of
 * G and of each ancestor (the chain, flat in G: no pointer chasing) and
 * commits delta to stat[i].  If G is idle on that CPU, the update claims it
 * (idle -> listed) and pushes it on the CPU's lock-free list; the CPU's
 * pushing count covers the claim and the push.  A count that reached the
 * batch is moved to its group's over, unless that is already past the
 * threshold.
 *
 * Flush of G, two passes over the CPUs, each CPU under flush_lock alone:
 *   1. wait for the CPU's pushes in progress, pop its list into its updated
 *      tree (listed -> linked, linking ancestors), make the linked nodes of
 *      G's updated subtree idle and zero their over;
 *   -- one membarrier(): every update whose queued check saw listed or
 *      linked before that has its stat store visible now;
 *   2. pop again, visit G's updated subtree children first: delta =
 *      stat - prev; local += delta; hier += delta + pending; the parent's
 *      pending += the same; then unlink the nodes still idle.
 *
 * Only a pop ends listed and only pass 1 ends linked: a node is never
 * pushed twice, and one being pushed is never made idle.  An update that
 * saw listed relies on a push that may not be done; the wait of pass 1
 * makes it done before the pop.
 *
 * Invariant: a (group, CPU) with a stat not yet in prev is queued (on the
 * list or linked in the updated tree, ancestors linked too), or a flush
 * between its passes will read it; a group with a non-zero pending is
 * linked on some CPU.  So a flush that starts after an update completed
 * reads it: the freshness guarantee.  Cost of a flush: O(nr_cpus) list
 * pops plus O(updated groups x nr_stats); of an update, O(depth) plain
 * adds in one sequence, plus one atomic per batch.
 *
 * Flush decisions (design option): TALLY shares flushes between readers of
 * a group and its ancestors (coordinate_flush()); the baselines follow
 * Linux 6.1, the seed-001 patch and Linux 6.8.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tally/percpu.h>
#include <tally/stats.h>
#include "domain_internal.h"

#define DEFAULT_BATCH 64ul
#define DEFAULT_PERIOD_NS 2000000000ull
#define GROUP_MAGIC 0x7a11c0de5ca1ab1eul
#define GROUP_DEAD 0xdeadca75deadca75ul

/* stats_pcpu.queued */
enum { QUEUE_IDLE, QUEUE_LISTED, QUEUE_LINKED };

/* Per (group, CPU), written by updates on that CPU. */
struct stats_pcpu {
	long count;
	int queued;
	struct stats_pcpu *next;		/* update list link */
	struct tally_stats_group *group;
	long stat[];
};

/* Per (group, CPU), touched by flushers only, under flush_lock. */
struct stats_fpcpu {
	struct tally_stats_group *children;	/* updated children */
	struct tally_stats_group *sibling;	/* next updated sibling */
	bool linked;
	long prev[];
};

struct tally_stats_group {
	/* Read by every update. */
	struct tally_stats_tree *tree;
	struct stats_pcpu *pcpu;
	unsigned int nr_stats;
	unsigned int nr_chain;
	unsigned long batch;
	bool simulated;
	bool fence;
	unsigned long magic;

	/* Flush side. */
	struct stats_fpcpu *fpcpu;
	long *local, *hier, *pending;
	long over __attribute__((aligned(64)));

	/* Structure, under topo_lock. */
	char *name;
	struct tally_stats_group *parent, *first_child, *next_sibling;
	bool dying;

	/* Flush sharing (TALLY design), under coord_lock. */
	bool fl_active, fl_pending;
	uint64_t fl_active_stamp, fl_done_stamp;
	pthread_cond_t fl_cond;

	/*
	 * Threshold chain, self first, then each ancestor: the per-CPU counts
	 * as byte offsets from pcpu (the same on every CPU), and the overs.
	 */
	long *chain_offs;
	long **chain_over;
};

struct tally_stats_tree {
	struct tally_domain *domain;
	enum tally_stats_design design;
	unsigned long batch, threshold;
	uint64_t period_ns;
	uint64_t (*clock)(void *arg);
	void *clock_arg;
	unsigned int nr_stats;
	char **names;
	unsigned char *is_event;
	bool simulated, fence;

	struct stats_pcpu **lists;		/* per CPU: update list head */
	long *pushing;				/* per CPU: claims being pushed */
	long *global_count;			/* per CPU (global threshold) */
	long global_over;

	struct tally_stats_group *root;
	pthread_rwlock_t topo_lock;
	pthread_mutex_t flush_lock;		/* one CPU's work at a time */
	pthread_mutex_t coord_lock;		/* flush sharing */
	uint64_t flush_clock;

	/* Baselines. */
	pthread_mutex_t subtree_mutex;
	int flush_ongoing;			/* linux61 */
	bool root_flush_ongoing;		/* seed001, under coord_lock */
	uint64_t root_flush_gen, root_flush_done;
	unsigned int root_waiters;
	pthread_cond_t root_flush_cond;

	uint64_t last_root_flush;

	pthread_mutex_t periodic_lock;
	pthread_cond_t periodic_cond;
	pthread_t periodic_thread;
	bool periodic_running, periodic_stop;

	struct tally_stats_info info;		/* atomics */
	struct tally_stats_tree *next_tree;	/* registry, for fork */
#ifdef TALLY_DEBUG
	struct tally_stats_group *graveyard;
#endif
};

/* Linux 6.1 and seed 001 count updates against one global threshold. */
static bool uses_global_threshold(const struct tally_stats_tree *t)
{
	return t->design == TALLY_DESIGN_LINUX61 ||
	       t->design == TALLY_DESIGN_SEED001;
}

static uint64_t default_clock(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(const struct tally_stats_tree *t)
{
	return t->clock(t->clock_arg);
}

static void count_info(uint64_t *field, uint64_t n)
{
	__atomic_add_fetch(field, n, __ATOMIC_RELAXED);
}

static struct stats_pcpu *pcpu_of(const struct tally_stats_group *g,
				  unsigned int cpu)
{
	return tally_percpu_ptr(g->pcpu, cpu);
}

static struct stats_fpcpu *fpcpu_of(const struct tally_stats_group *g,
				    unsigned int cpu)
{
	return tally_percpu_ptr(g->fpcpu, cpu);
}

static long load_long(const long *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void store_long(long *p, long v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Wrapping add of a flushed value (readers load it concurrently). */
static void add_long(long *p, long v)
{
	store_long(p, (long)((unsigned long)load_long(p) + (unsigned long)v));
}

/* --- update side --------------------------------------------------------- */

/*
 * Push (g, cpu) on the CPU's list, once until a pop and a flush make it
 * idle again.  Counted in pushing from before the claim to after the push.
 */
static void queue_update(struct tally_stats_tree *t, struct stats_pcpu *pc,
			 unsigned int cpu)
{
	struct stats_pcpu **head = tally_percpu_ptr(t->lists, cpu);
	long *pushing = tally_percpu_ptr(t->pushing, cpu);
	struct stats_pcpu *old;
	int expected = QUEUE_IDLE;

	__atomic_add_fetch(pushing, 1, __ATOMIC_SEQ_CST);
	if (__atomic_compare_exchange_n(&pc->queued, &expected, QUEUE_LISTED,
					false, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED)) {
		old = __atomic_load_n(head, __ATOMIC_RELAXED);
		do {
			pc->next = old;
		} while (!__atomic_compare_exchange_n(head, &old, pc, true,
						      __ATOMIC_RELEASE,
						      __ATOMIC_RELAXED));
	}
	__atomic_sub_fetch(pushing, 1, __ATOMIC_RELEASE);
}

/* The per-CPU threshold count of chain level @i (0 is g itself). */
static long *chain_count(const struct tally_stats_group *g, unsigned int i)
{
	return (long *)((char *)g->pcpu + g->chain_offs[i]);
}

/* Move the counts of the chain that reached the batch on @cpu. */
static void move_counts(struct tally_stats_group *g, unsigned int cpu)
{
	const struct tally_stats_tree *t = g->tree;

	for (unsigned int i = 0; i < g->nr_chain; i++) {
		long *count = chain_count(g, i);
		long *over = g->chain_over[i];
		long moved;

		if (tally_percpu_read_cpu(count, cpu) < (long)g->batch)
			continue;
		if (g->simulated)
			moved = __atomic_exchange_n(
				(long *)tally_percpu_ptr(count, cpu), 0,
				__ATOMIC_RELAXED);
		else
			moved = tally_percpu_xchg(count, 0);
		/* Past the threshold the group flushes anyway: skip the atomic. */
		if (moved > 0 &&
		    __atomic_load_n(over, __ATOMIC_RELAXED) <= (long)t->threshold)
			__atomic_add_fetch(over, moved, __ATOMIC_RELAXED);
	}
}

static void after_update(struct tally_stats_group *g, unsigned int cpu,
			 unsigned long acc)
{
	struct stats_pcpu *pc = pcpu_of(g, cpu);

	if (g->fence)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pc->queued, __ATOMIC_SEQ_CST) == QUEUE_IDLE)
		queue_update(g->tree, pc, cpu);
	if (__builtin_expect(acc >= g->batch, 0))
		move_counts(g, cpu);
}

static int check_update(const struct tally_stats_group *g, unsigned int stat,
			long delta)
{
	if (!g || stat >= g->nr_stats)
		return -EINVAL;
#ifdef TALLY_DEBUG
	if (g->magic != GROUP_MAGIC) {
		fprintf(stderr, "tally: update of a destroyed stats group %p\n",
			(const void *)g);
		abort();
	}
#endif
	if (delta < 0 && g->tree->is_event[stat])
		return -EINVAL;
	return 0;
}

static unsigned long magnitude(long delta)
{
	return delta < 0 ? -(unsigned long)delta : (unsigned long)delta;
}

int tally_stats_mod(struct tally_stats_group *g, unsigned int stat, long delta)
{
	unsigned long acc;
	unsigned int cpu;
	int err = check_update(g, stat, delta);

	if (__builtin_expect(err || g->simulated, 0))
		return err ? err : -EINVAL;
	acc = tally_percpu_add_hints((long *)g->pcpu, g->chain_offs,
				     g->nr_chain, (long)magnitude(delta),
				     &g->pcpu->stat[stat], delta, &cpu);
	after_update(g, cpu, acc);
	return 0;
}

int tally_stats_mod_cpu(struct tally_stats_group *g, unsigned int cpu,
			unsigned int stat, long delta)
{
	unsigned long acc = 0;
	int err = check_update(g, stat, delta);

	if (err)
		return err;
	if (!g->simulated || cpu >= g->tree->domain->nr_cpus)
		return -EINVAL;
	for (unsigned int i = 0; i < g->nr_chain; i++)
		acc |= (unsigned long)tally_percpu_add_return_cpu(
			chain_count(g, i), cpu, (long)magnitude(delta));
	/* Sequentially consistent: pairs with the flusher's clear of queued. */
	__atomic_add_fetch((long *)tally_percpu_ptr(&g->pcpu->stat[stat], cpu),
			   delta, __ATOMIC_SEQ_CST);
	after_update(g, cpu, acc);
	return 0;
}

/* --- flush core ---------------------------------------------------------- */

struct flush_work {
	struct tally_stats_group **v;
	size_t len, cap;
};

static bool work_push(struct flush_work *w, struct tally_stats_group *g)
{
	if (w->len == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		void *v = realloc(w->v, cap * sizeof(*w->v));

		if (!v)
			return false;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->len++] = g;
	return true;
}

/* Link @g and its unlinked ancestors into @cpu's updated tree. */
static void link_updated(struct tally_stats_group *g, unsigned int cpu)
{
	for (; g; g = g->parent) {
		struct stats_fpcpu *fp = fpcpu_of(g, cpu);

		if (fp->linked)
			return;
		fp->linked = true;
		if (g->parent) {
			struct stats_fpcpu *pfp = fpcpu_of(g->parent, cpu);

			fp->sibling = pfp->children;
			pfp->children = g;
		}
	}
}

static void pop_updates(struct tally_stats_tree *t, unsigned int cpu)
{
	struct stats_pcpu **head = tally_percpu_ptr(t->lists, cpu);
	struct stats_pcpu *pc = __atomic_exchange_n(head, NULL,
						    __ATOMIC_ACQUIRE);

	while (pc) {
		struct stats_pcpu *next = pc->next;

		__atomic_store_n(&pc->queued, QUEUE_LINKED, __ATOMIC_SEQ_CST);
		link_updated(pc->group, cpu);
		pc = next;
	}
}

/*
 * Breadth-first list of @g's updated subtree on @cpu into @w (reset).  A
 * reversed breadth-first order puts every group after its descendants.
 * Returns false when out of memory (the caller retries the CPU later).
 */
static bool collect_subtree(struct tally_stats_group *g, unsigned int cpu,
			    struct flush_work *w)
{
	w->len = 0;
	if (!fpcpu_of(g, cpu)->linked)
		return true;
	if (!work_push(w, g))
		return false;
	for (size_t i = 0; i < w->len; i++) {
		struct tally_stats_group *ch = fpcpu_of(w->v[i], cpu)->children;

		for (; ch; ch = fpcpu_of(ch, cpu)->sibling)
			if (!work_push(w, ch))
				return false;
	}
	return true;
}

/* Pass 1 on one CPU: G's updated subtree made idle, thresholds cleared. */
static bool flush_mark_cpu(struct tally_stats_tree *t,
			   struct tally_stats_group *g, unsigned int cpu,
			   struct flush_work *w)
{
	long *pushing = tally_percpu_ptr(t->pushing, cpu);
	bool ok;

	/* Claims seen by updates that completed before us are pushed. */
	while (__atomic_load_n(pushing, __ATOMIC_ACQUIRE))
		sched_yield();
	pthread_mutex_lock(&t->flush_lock);
	pop_updates(t, cpu);
	ok = collect_subtree(g, cpu, w);
	for (size_t i = 0; i < w->len; i++) {
		int linked = QUEUE_LINKED;

		/* Not a listed one: it is (being) pushed again. */
		__atomic_compare_exchange_n(&pcpu_of(w->v[i], cpu)->queued,
					    &linked, QUEUE_IDLE, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
		__atomic_store_n(&w->v[i]->over, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&t->flush_lock);
	return ok;
}

/* Fold (g, cpu)'s per-CPU delta and pending into g and its parent. */
static bool fold_group(struct tally_stats_group *g, unsigned int cpu)
{
	struct stats_pcpu *pc = pcpu_of(g, cpu);
	struct stats_fpcpu *fp = fpcpu_of(g, cpu);
	struct tally_stats_group *p = g->parent;
	bool moved = false;

	for (unsigned int i = 0; i < g->nr_stats; i++) {
		long v = __atomic_load_n(&pc->stat[i], __ATOMIC_RELAXED);
		long delta = (long)((unsigned long)v -
				    (unsigned long)fp->prev[i]);
		long total = (long)((unsigned long)delta +
				    (unsigned long)g->pending[i]);

		fp->prev[i] = v;
		g->pending[i] = 0;
		if (delta)
			add_long(&g->local[i], delta);
		if (!total)
			continue;
		add_long(&g->hier[i], total);
		if (p) {
			p->pending[i] = (long)((unsigned long)p->pending[i] +
					       (unsigned long)total);
			moved = true;
		}
	}
	return moved;
}

/*
 * Pass 2 on one CPU: fold G's updated subtree children first, then unlink
 * every group that nobody re-queued since pass 1 and that keeps no linked
 * child.  A re-queued group stays linked: its new update may not be
 * visible yet, so the next flush reads it again.
 */
static bool flush_fold_cpu(struct tally_stats_tree *t,
			   struct tally_stats_group *g, unsigned int cpu,
			   struct flush_work *w)
{
	bool ok, moved_up = false;

	pthread_mutex_lock(&t->flush_lock);
	pop_updates(t, cpu);
	ok = collect_subtree(g, cpu, w);
	count_info(&t->info.groups_flushed, w->len);
	for (size_t k = w->len; k-- > 0;) {
		struct tally_stats_group *n = w->v[k];
		struct stats_fpcpu *fp = fpcpu_of(n, cpu);
		struct tally_stats_group **link = &fp->children;

		if (fold_group(n, cpu) && n == g)
			moved_up = true;
		/* Children come earlier in this order: drop the unlinked. */
		while (*link) {
			struct stats_fpcpu *cfp = fpcpu_of(*link, cpu);

			if (cfp->linked) {
				link = &cfp->sibling;
			} else {
				*link = cfp->sibling;
				cfp->sibling = NULL;
			}
		}
		if (!fp->children &&
		    __atomic_load_n(&pcpu_of(n, cpu)->queued,
				    __ATOMIC_SEQ_CST) == QUEUE_IDLE)
			fp->linked = false;
	}
	if (w->len && !fpcpu_of(g, cpu)->linked && g->parent) {
		struct tally_stats_group **link = &fpcpu_of(g->parent, cpu)->children;

		while (*link && *link != g)
			link = &fpcpu_of(*link, cpu)->sibling;
		if (*link)
			*link = fpcpu_of(g, cpu)->sibling;
		fpcpu_of(g, cpu)->sibling = NULL;
	}
	/* The parent's pending must be folded by a later flush: link it. */
	if (moved_up)
		link_updated(g->parent, cpu);
	pthread_mutex_unlock(&t->flush_lock);
	return ok;
}

/* Make every update whose queued check preceded pass 1 visible. */
static void flush_barrier(const struct tally_stats_tree *t)
{
	if (t->simulated || t->fence)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

/*
 * Flush @g's subtree on every CPU.  Memory for the visit list is the only
 * thing that can fail; a CPU that could not be visited whole is retried
 * until it is (nothing is ever dropped: unvisited groups stay linked).
 */
static void flush_subtree(struct tally_stats_tree *t,
			  struct tally_stats_group *g)
{
	unsigned int nr = t->domain->nr_cpus;
	struct flush_work w = { 0 };
	uint64_t start = now_ns(t);

	__atomic_store_n(&g->over, 0, __ATOMIC_RELAXED);
	if (!g->parent)
		__atomic_store_n(&t->global_over, 0, __ATOMIC_RELAXED);
	for (unsigned int cpu = 0; cpu < nr; cpu++)
		while (!flush_mark_cpu(t, g, cpu, &w))
			sched_yield();
	flush_barrier(t);
	for (unsigned int cpu = 0; cpu < nr; cpu++)
		while (!flush_fold_cpu(t, g, cpu, &w))
			sched_yield();
	free(w.v);
	count_info(&t->info.flushes, 1);
	if (!g->parent) {
		count_info(&t->info.root_flushes, 1);
		__atomic_store_n(&t->last_root_flush, start, __ATOMIC_RELAXED);
	}
}

/* --- flush decisions ----------------------------------------------------- */

static bool over_threshold(const struct tally_stats_group *g)
{
	const struct tally_stats_tree *t = g->tree;
	const long *over = uses_global_threshold(t) ? &t->global_over : &g->over;

	return __atomic_load_n(over, __ATOMIC_RELAXED) > (long)t->threshold;
}

/* Run a flush of @a for the sharing protocol; coord_lock held. */
static void run_shared_flush(struct tally_stats_tree *t,
			     struct tally_stats_group *a)
{
	uint64_t stamp = ++t->flush_clock;

	a->fl_pending = false;
	a->fl_active = true;
	a->fl_active_stamp = stamp;
	pthread_mutex_unlock(&t->coord_lock);
	flush_subtree(t, a);
	pthread_mutex_lock(&t->coord_lock);
	a->fl_done_stamp = stamp;
	a->fl_active = false;
	pthread_cond_broadcast(&a->fl_cond);
}

/*
 * TALLY design: return once a flush that covers @g (of @g or an ancestor)
 * has started after this call (or, when not @fresh, was running at it) and
 * completed.  Flushes carry increasing
 * stamps; @arrival is the last stamp given before we came.  A reader joins
 * a covering flush that started after it or is queued to start, and
 * otherwise runs a flush of @g itself, or queues one behind the flush of
 * @g in progress.  It never flushes more than @g's subtree, waits for at
 * most two flushes of it, and never returns stale.
 */
static void coordinate_flush(struct tally_stats_tree *t,
			     struct tally_stats_group *g, bool fresh)
{
	uint64_t arrival;
	bool waited = false;

	pthread_mutex_lock(&t->coord_lock);
	arrival = t->flush_clock;
	/* Not fresh: a covering flush already running serves too. */
	for (struct tally_stats_group *a = g; !fresh && a; a = a->parent)
		if (a->fl_active && a->fl_active_stamp <= arrival)
			arrival = a->fl_active_stamp - 1;
	for (;;) {
		struct tally_stats_group *a, *join = NULL;

		for (a = g; a; a = a->parent) {
			if (a->fl_done_stamp > arrival)
				goto fresh;
			if (!join && ((a->fl_active &&
				       a->fl_active_stamp > arrival) ||
				      a->fl_pending))
				join = a;
		}
		if (join && join->fl_pending && !join->fl_active) {
			run_shared_flush(t, join);
		} else if (join) {
			waited = true;
			pthread_cond_wait(&join->fl_cond, &t->coord_lock);
		} else if (!g->fl_active) {
			run_shared_flush(t, g);
		} else {
			g->fl_pending = true;
			waited = true;
			pthread_cond_wait(&g->fl_cond, &t->coord_lock);
		}
	}
fresh:
	pthread_mutex_unlock(&t->coord_lock);
	if (waited)
		count_info(&t->info.shared_waits, 1);
}

/* Linux 6.1: flush the root; if someone is flushing, skip. */
static void linux61_flush(struct tally_stats_tree *t)
{
	if (__atomic_load_n(&t->flush_ongoing, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&t->flush_ongoing, 1, __ATOMIC_ACQUIRE)) {
		count_info(&t->info.skipped, 1);
		return;
	}
	flush_subtree(t, t->root);
	__atomic_store_n(&t->flush_ongoing, 0, __ATOMIC_RELEASE);
}

/*
 * Seed 001: the subtree alone when nobody flushes; otherwise one coalesced
 * root flush that the others wait for, at most nr_cpus of them.
 */
static void seed001_flush(struct tally_stats_tree *t,
			  struct tally_stats_group *g)
{
	uint64_t gen;

	pthread_mutex_lock(&t->coord_lock);
	if (!t->root_flush_ongoing) {
		pthread_mutex_unlock(&t->coord_lock);
		if (g->parent && !pthread_mutex_trylock(&t->subtree_mutex)) {
			flush_subtree(t, g);
			pthread_mutex_unlock(&t->subtree_mutex);
			return;
		}
		pthread_mutex_lock(&t->coord_lock);
		if (!t->root_flush_ongoing) {
			t->root_flush_ongoing = true;
			gen = ++t->root_flush_gen;
			pthread_mutex_unlock(&t->coord_lock);
			flush_subtree(t, t->root);
			pthread_mutex_lock(&t->coord_lock);
			t->root_flush_done = gen;
			t->root_flush_ongoing = false;
			pthread_cond_broadcast(&t->root_flush_cond);
			pthread_mutex_unlock(&t->coord_lock);
			return;
		}
	}
	if (t->root_waiters >= t->domain->nr_cpus) {
		pthread_mutex_unlock(&t->coord_lock);
		count_info(&t->info.skipped, 1);
		return;
	}
	gen = t->root_flush_gen;
	t->root_waiters++;
	while (t->root_flush_done < gen)
		pthread_cond_wait(&t->root_flush_cond, &t->coord_lock);
	t->root_waiters--;
	pthread_mutex_unlock(&t->coord_lock);
	count_info(&t->info.shared_waits, 1);
}

/* Linux 6.8: each flusher flushes its own subtree, one at a time. */
static void linux68_flush(struct tally_stats_tree *t,
			  struct tally_stats_group *g)
{
	pthread_mutex_lock(&t->subtree_mutex);
	flush_subtree(t, g);
	pthread_mutex_unlock(&t->subtree_mutex);
}

/*
 * Flush for @g as the tree's design does.  @fresh: the flush must start
 * after this call (forced reads); otherwise (if-needed reads, whose promise
 * is the bound, not freshness) the TALLY design also takes a covering
 * flush already running.
 */
static void design_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;

	switch (t->design) {
	case TALLY_DESIGN_LINUX61:
		linux61_flush(t);
		break;
	case TALLY_DESIGN_SEED001:
		seed001_flush(t, g);
		break;
	case TALLY_DESIGN_LINUX68:
		linux68_flush(t, g);
		break;
	default:
		coordinate_flush(t, g, fresh);
		break;
	}
}

static bool ratelimit_late(const struct tally_stats_tree *t)
{
	uint64_t last = __atomic_load_n(&t->last_root_flush, __ATOMIC_RELAXED);

	return now_ns(t) - last > 2 * t->period_ns;
}

static int flush_for_read(struct tally_stats_group *g,
			  enum tally_flush_mode mode)
{
	switch (mode) {
	case TALLY_FLUSH_IF_NEEDED:
		if (over_threshold(g))
			design_flush(g, false);
		return 0;
	case TALLY_FLUSH_FORCE:
		design_flush(g, true);
		return 0;
	case TALLY_FLUSH_RATELIMITED:
		if (ratelimit_late(g->tree))
			design_flush(g, true);
		return 0;
	case TALLY_FLUSH_NONE:
		return 0;
	}
	return -EINVAL;
}

int tally_stats_flush(struct tally_stats_group *g)
{
	if (!g)
		return -EINVAL;
	design_flush(g, true);
	return 0;
}

/* --- reads --------------------------------------------------------------- */

int tally_stats_read(struct tally_stats_group *g, unsigned int stat,
		     enum tally_flush_mode mode, long *hier, long *local)
{
	int err;

	if (!g || stat >= g->nr_stats)
		return -EINVAL;
	err = flush_for_read(g, mode);
	if (err)
		return err;
	if (hier)
		*hier = load_long(&g->hier[stat]);
	if (local)
		*local = load_long(&g->local[stat]);
	return 0;
}

int tally_stats_snapshot(struct tally_stats_group *g,
			 enum tally_flush_mode mode, long *hier, long *local)
{
	int err;

	if (!g)
		return -EINVAL;
	err = flush_for_read(g, mode);
	if (err)
		return err;
	for (unsigned int i = 0; i < g->nr_stats; i++) {
		if (hier)
			hier[i] = load_long(&g->hier[i]);
		if (local)
			local[i] = load_long(&g->local[i]);
	}
	return 0;
}

int tally_stats_render(struct tally_stats_group *g, enum tally_flush_mode mode,
		       char *buf, size_t len)
{
	long *hier;
	size_t used = 0;
	int err;

	if (!g || !buf)
		return -EINVAL;
	hier = calloc(g->nr_stats, sizeof(*hier));
	if (!hier)
		return -ENOMEM;
	err = tally_stats_snapshot(g, mode, hier, NULL);
	for (unsigned int i = 0; !err && i < g->nr_stats; i++) {
		int n = snprintf(buf + used, len - used, "%s %ld\n",
				 g->tree->names[i], hier[i]);

		if (n < 0 || (size_t)n >= len - used)
			err = -ENOSPC;
		else
			used += (size_t)n;
	}
	free(hier);
	return err ? err : (int)used;
}

unsigned long tally_stats_read_bound(const struct tally_stats_tree *t)
{
	return t->threshold + t->domain->nr_cpus * (t->batch - 1);
}

/* --- groups -------------------------------------------------------------- */

static bool valid_name(const char *name)
{
	size_t n;

	if (!name)
		return false;
	n = strlen(name);
	return n >= 1 && n <= TALLY_STATS_NAME_MAX && !strchr(name, '/');
}

static void group_free(struct tally_stats_group *g)
{
	struct tally_domain *d = g->tree->domain;

	tally_percpu_free(d, g->pcpu);
	tally_percpu_free(d, g->fpcpu);
	pthread_cond_destroy(&g->fl_cond);
	free(g->chain_offs);
	free(g->local);
	free(g->name);
	free(g);
}

static unsigned int depth_of(const struct tally_stats_group *g)
{
	unsigned int depth = 0;

	for (; g; g = g->parent)
		depth++;
	return depth;
}

/* Fill the threshold chain: one shared count, or the group's ancestry. */
static void set_chain(struct tally_stats_tree *t, struct tally_stats_group *g)
{
	unsigned int i = 0;

	if (uses_global_threshold(t)) {
		g->chain_offs[0] = (char *)t->global_count - (char *)g->pcpu;
		g->chain_over[0] = &t->global_over;
		return;
	}
	for (struct tally_stats_group *a = g; a; a = a->parent, i++) {
		g->chain_offs[i] = (char *)&a->pcpu->count - (char *)g->pcpu;
		g->chain_over[i] = &a->over;
	}
}

static struct tally_stats_group *group_new(struct tally_stats_tree *t,
					   struct tally_stats_group *parent,
					   const char *name)
{
	unsigned int nr_chain = uses_global_threshold(t) ? 1
							 : depth_of(parent) + 1;
	struct tally_stats_group *g;
	size_t n = t->nr_stats;

	/* over has a cache line of its own: the group needs that alignment. */
	g = aligned_alloc(64, (sizeof(*g) + 63) & ~(size_t)63);
	if (!g)
		return NULL;
	memset(g, 0, sizeof(*g));
	g->chain_offs = calloc(nr_chain, sizeof(long) + sizeof(long *));
	g->tree = t;
	g->parent = parent;
	g->nr_stats = t->nr_stats;
	g->nr_chain = nr_chain;
	g->batch = t->batch;
	g->simulated = t->simulated;
	g->fence = t->fence;
	g->name = strdup(name);
	g->local = calloc(3 * n, sizeof(long));
	g->pcpu = tally_percpu_alloc(t->domain,
				     sizeof(struct stats_pcpu) + n * sizeof(long),
				     64);
	g->fpcpu = tally_percpu_alloc(t->domain,
				      sizeof(struct stats_fpcpu) +
					      n * sizeof(long),
				      8);
	pthread_cond_init(&g->fl_cond, NULL);
	if (!g->chain_offs || !g->name || !g->local || !g->pcpu || !g->fpcpu) {
		group_free(g);
		return NULL;
	}
	g->chain_over = (long **)(g->chain_offs + nr_chain);
	g->hier = g->local + n;
	g->pending = g->local + 2 * n;
	for (unsigned int cpu = 0; cpu < t->domain->nr_cpus; cpu++)
		pcpu_of(g, cpu)->group = g;
	set_chain(t, g);
	g->magic = GROUP_MAGIC;
	return g;
}

static struct tally_stats_group *find_child(struct tally_stats_group *p,
					    const char *name, size_t len)
{
	struct tally_stats_group *c;

	for (c = p->first_child; c; c = c->next_sibling)
		if (strlen(c->name) == len && !memcmp(c->name, name, len))
			return c;
	return NULL;
}

int tally_stats_group_create(struct tally_stats_group *parent,
			     const char *name, struct tally_stats_group **out)
{
	struct tally_stats_tree *t;
	struct tally_stats_group *g;
	int err = 0;

	if (!parent || !valid_name(name))
		return -EINVAL;
	t = parent->tree;
	g = group_new(t, parent, name);
	if (!g)
		return -ENOMEM;
	pthread_rwlock_wrlock(&t->topo_lock);
	if (parent->dying)
		err = -EINVAL;
	else if (find_child(parent, name, strlen(name)))
		err = -EEXIST;
	if (!err) {
		g->next_sibling = parent->first_child;
		parent->first_child = g;
		count_info(&t->info.groups, 1);
	}
	pthread_rwlock_unlock(&t->topo_lock);
	if (err) {
		group_free(g);
		return err;
	}
	if (out)
		*out = g;
	return 0;
}

int tally_stats_group_destroy(struct tally_stats_group *g)
{
	struct tally_stats_tree *t;
	struct tally_stats_group **link;

	if (!g || !g->parent)
		return -EINVAL;
	t = g->tree;
	pthread_rwlock_wrlock(&t->topo_lock);
	if (g->first_child || g->dying) {
		pthread_rwlock_unlock(&t->topo_lock);
		return g->dying ? -EINVAL : -EBUSY;
	}
	g->dying = true;
	for (link = &g->parent->first_child; *link != g;
	     link = &(*link)->next_sibling)
		;
	*link = g->next_sibling;
	count_info(&t->info.groups, (uint64_t)-1);
	pthread_rwlock_unlock(&t->topo_lock);

	/*
	 * Fold the last deltas into the parent's pending (and link the parent
	 * so that a later flush adds them to its hierarchical values).  After
	 * this, g is linked on no CPU and no flusher holds it: each pass keeps
	 * group pointers only while it holds flush_lock, taken once more here.
	 */
	flush_subtree(t, g);
	pthread_mutex_lock(&t->flush_lock);
	pthread_mutex_unlock(&t->flush_lock);
	/* Wait out readers that share a flush of g (they walk g's fl_*). */
	pthread_mutex_lock(&t->coord_lock);
	while (g->fl_active)
		pthread_cond_wait(&g->fl_cond, &t->coord_lock);
	pthread_mutex_unlock(&t->coord_lock);
#ifdef TALLY_DEBUG
	g->magic = GROUP_DEAD;
	pthread_mutex_lock(&t->coord_lock);
	g->next_sibling = t->graveyard;
	t->graveyard = g;
	pthread_mutex_unlock(&t->coord_lock);
#else
	g->magic = GROUP_DEAD;
	group_free(g);
#endif
	return 0;
}

int tally_stats_group_find(struct tally_stats_tree *t, const char *path,
			   struct tally_stats_group **out)
{
	struct tally_stats_group *g;
	int err = 0;

	if (!t || !path || !out)
		return -EINVAL;
	/*
	 * "/a", "a/" and "a//b" have an empty component: an error even when
	 * an earlier name is missing, so checked before the walk.
	 */
	if (*path && (path[0] == '/' || path[strlen(path) - 1] == '/' ||
		      strstr(path, "//")))
		return -EINVAL;
	pthread_rwlock_rdlock(&t->topo_lock);
	g = t->root;
	while (*path && !err) {
		const char *end = strchr(path, '/');
		size_t len = end ? (size_t)(end - path) : strlen(path);

		g = find_child(g, path, len);
		if (!g)
			err = -ENOENT;
		path += len + (end ? 1 : 0);
	}
	pthread_rwlock_unlock(&t->topo_lock);
	if (!err)
		*out = g;
	return err;
}

int tally_stats_group_for_each_child(struct tally_stats_group *g,
				     int (*fn)(struct tally_stats_group *child,
					       const char *name, void *arg),
				     void *arg)
{
	int ret = 0;

	if (!g || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&g->tree->topo_lock);
	for (struct tally_stats_group *c = g->first_child; c && !ret;
	     c = c->next_sibling)
		ret = fn(c, c->name, arg);
	pthread_rwlock_unlock(&g->tree->topo_lock);
	return ret;
}

const char *tally_stats_group_name(const struct tally_stats_group *g)
{
	return g->name;
}

struct tally_stats_group *
tally_stats_group_parent(const struct tally_stats_group *g)
{
	return g->parent;
}

int tally_stats_group_path(const struct tally_stats_group *g, char *buf,
			   size_t len)
{
	size_t need = 0, pos;

	if (!g || !buf || !len)
		return -EINVAL;
	for (const struct tally_stats_group *a = g; a->parent; a = a->parent)
		need += strlen(a->name) + (a->parent->parent ? 1 : 0);
	if (need >= len)
		return -ENOSPC;
	buf[need] = '\0';
	pos = need;
	for (const struct tally_stats_group *a = g; a->parent; a = a->parent) {
		size_t n = strlen(a->name);

		pos -= n;
		memcpy(buf + pos, a->name, n);
		if (a->parent->parent)
			buf[--pos] = '/';
	}
	return (int)need;
}

/* --- periodic flusher ---------------------------------------------------- */

int tally_stats_periodic_tick(struct tally_stats_tree *t)
{
	uint64_t last;

	if (!t)
		return -EINVAL;
	last = __atomic_load_n(&t->last_root_flush, __ATOMIC_RELAXED);
	if (now_ns(t) - last < t->period_ns)
		return 0;
	/* Thresholds are ignored: the periodic flush bounds staleness. */
	design_flush(t->root, true);
	return 1;
}

static void *periodic_main(void *arg)
{
	struct tally_stats_tree *t = arg;

	pthread_mutex_lock(&t->periodic_lock);
	while (!t->periodic_stop) {
		struct timespec until;
		uint64_t ns;

		pthread_mutex_unlock(&t->periodic_lock);
		tally_stats_periodic_tick(t);
		pthread_mutex_lock(&t->periodic_lock);
		clock_gettime(CLOCK_MONOTONIC, &until);
		ns = (uint64_t)until.tv_nsec + t->period_ns;
		until.tv_sec += (time_t)(ns / 1000000000ull);
		until.tv_nsec = (long)(ns % 1000000000ull);
		while (!t->periodic_stop &&
		       pthread_cond_timedwait(&t->periodic_cond,
					      &t->periodic_lock,
					      &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->periodic_lock);
	return NULL;
}

int tally_stats_periodic_start(struct tally_stats_tree *t)
{
	int err = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->periodic_lock);
	if (t->periodic_running) {
		err = -EALREADY;
	} else {
		t->periodic_stop = false;
		err = -pthread_create(&t->periodic_thread, NULL, periodic_main,
				      t);
		t->periodic_running = !err;
	}
	pthread_mutex_unlock(&t->periodic_lock);
	return err;
}

int tally_stats_periodic_stop(struct tally_stats_tree *t)
{
	bool running;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->periodic_lock);
	running = t->periodic_running;
	t->periodic_stop = true;
	t->periodic_running = false;
	pthread_cond_broadcast(&t->periodic_cond);
	pthread_mutex_unlock(&t->periodic_lock);
	if (running)
		pthread_join(t->periodic_thread, NULL);
	return 0;
}

/* periodic_main() waits until a CLOCK_MONOTONIC time. */
static void init_monotonic_cond(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

/* --- fork --------------------------------------------------------------- */

/*
 * fork() copies one thread.  Around it, every tree's locks are taken so
 * that the child gets them free and its structures consistent.  One state
 * needs repair: a thread caught between claiming a group (listed) and
 * pushing it never pushes it in the child, where the CPU's pushing count
 * would then never drop and flushes would wait for ever.  The child
 * rebuilds such a CPU's list from the groups marked listed.  Flushes that
 * other threads were running, and the periodic thread, do not exist in the
 * child either: their marks are cleared (a half-done flush leaves groups
 * linked, which the next flush visits).
 */
static pthread_mutex_t trees_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_stats_tree *trees;

static void relist(struct stats_pcpu **head, struct tally_stats_group *g,
		   unsigned int cpu)
{
	for (; g; g = g->next_sibling) {
		struct stats_pcpu *pc = pcpu_of(g, cpu);

		if (pc->queued == QUEUE_LISTED) {
			pc->next = *head;
			*head = pc;
		}
		relist(head, g->first_child, cpu);
	}
}

/* Forget the flushes that were running in threads the child lacks. */
static void forget_flushes(struct tally_stats_group *g)
{
	for (; g; g = g->next_sibling) {
		g->fl_active = false;
		g->fl_pending = false;
		/* Its waiters were threads of the parent: start it afresh. */
		pthread_cond_init(&g->fl_cond, NULL);
		forget_flushes(g->first_child);
	}
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&trees_lock);
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		/* Read-locked: excludes changes, and unlocks in the child. */
		pthread_rwlock_rdlock(&t->topo_lock);
		pthread_mutex_lock(&t->coord_lock);
		pthread_mutex_lock(&t->subtree_mutex);
		pthread_mutex_lock(&t->flush_lock);
		pthread_mutex_lock(&t->periodic_lock);
	}
}

static void fork_unlock(void)
{
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		pthread_mutex_unlock(&t->periodic_lock);
		pthread_mutex_unlock(&t->flush_lock);
		pthread_mutex_unlock(&t->subtree_mutex);
		pthread_mutex_unlock(&t->coord_lock);
		pthread_rwlock_unlock(&t->topo_lock);
	}
	pthread_mutex_unlock(&trees_lock);
}

static void fork_child(void)
{
	for (struct tally_stats_tree *t = trees; t; t = t->next_tree) {
		for (unsigned int cpu = 0; cpu < t->domain->nr_cpus; cpu++) {
			long *pushing = tally_percpu_ptr(t->pushing, cpu);
			struct stats_pcpu **head =
				tally_percpu_ptr(t->lists, cpu);

			if (!*pushing)
				continue;
			*pushing = 0;
			*head = NULL;
			relist(head, t->root, cpu);
		}
		t->periodic_running = false;
		forget_flushes(t->root);
		t->flush_ongoing = 0;
		t->root_flush_ongoing = false;
		t->root_waiters = 0;
		t->root_flush_done = t->root_flush_gen;
		pthread_cond_init(&t->root_flush_cond, NULL);
		init_monotonic_cond(&t->periodic_cond);
	}
	fork_unlock();
}

static void install_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_unlock, fork_child);
}

static void register_tree(struct tally_stats_tree *t)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install_fork_handlers);
	pthread_mutex_lock(&trees_lock);
	t->next_tree = trees;
	trees = t;
	pthread_mutex_unlock(&trees_lock);
}

static void unregister_tree(struct tally_stats_tree *t)
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

/* --- trees --------------------------------------------------------------- */

static bool membarrier_ready(void)
{
	static int state;	/* 0 unknown, 1 ready, -1 unavailable */
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

	if (!s) {
		s = syscall(__NR_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) ? -1
									     : 1;
		__atomic_store_n(&state, s, __ATOMIC_RELEASE);
	}
	return s > 0;
}

static int copy_schema(struct tally_stats_tree *t,
		       const struct tally_stat_desc *schema, unsigned int nr)
{
	t->names = calloc(nr, sizeof(*t->names));
	t->is_event = calloc(nr, 1);
	if (!t->names || !t->is_event)
		return -ENOMEM;
	for (unsigned int i = 0; i < nr; i++) {
		const char *name = schema[i].name;

		if (!name || !*name || strpbrk(name, " \t\n\r\v\f") ||
		    (schema[i].kind != TALLY_STAT_STATE &&
		     schema[i].kind != TALLY_STAT_EVENT))
			return -EINVAL;
		for (unsigned int j = 0; j < i; j++)
			if (!strcmp(t->names[j], name))
				return -EINVAL;
		t->names[i] = strdup(name);
		if (!t->names[i])
			return -ENOMEM;
		t->is_event[i] = schema[i].kind == TALLY_STAT_EVENT;
	}
	return 0;
}

static void free_groups(struct tally_stats_group *g)
{
	while (g) {
		struct tally_stats_group *next = g->next_sibling;

		free_groups(g->first_child);
		group_free(g);
		g = next;
	}
}

void tally_stats_tree_destroy(struct tally_stats_tree *t)
{
	if (!t)
		return;
	unregister_tree(t);
	tally_stats_periodic_stop(t);
	free_groups(t->root);
#ifdef TALLY_DEBUG
	for (struct tally_stats_group *g = t->graveyard, *next; g; g = next) {
		next = g->next_sibling;
		group_free(g);
	}
#endif
	if (t->domain) {
		tally_percpu_free(t->domain, t->lists);
		tally_percpu_free(t->domain, t->pushing);
		tally_percpu_free(t->domain, t->global_count);
	}
	for (unsigned int i = 0; t->names && i < t->nr_stats; i++)
		free(t->names[i]);
	free(t->names);
	free(t->is_event);
	pthread_rwlock_destroy(&t->topo_lock);
	pthread_mutex_destroy(&t->flush_lock);
	pthread_mutex_destroy(&t->coord_lock);
	pthread_mutex_destroy(&t->subtree_mutex);
	pthread_cond_destroy(&t->root_flush_cond);
	pthread_mutex_destroy(&t->periodic_lock);
	pthread_cond_destroy(&t->periodic_cond);
	free(t);
}

int tally_stats_tree_create(struct tally_stats_tree **out,
			    const struct tally_stat_desc *schema,
			    unsigned int nr_stats,
			    const struct tally_stats_options *opts)
{
	struct tally_stats_options o = { 0 };
	struct tally_stats_tree *t;
	int err;

	if (opts)
		o = *opts;
	if (!out || !schema || !nr_stats || nr_stats > TALLY_STATS_MAX ||
	    (unsigned int)o.design > TALLY_DESIGN_LINUX68 ||
	    (o.batch && (o.batch < 2 || (o.batch & (o.batch - 1)))))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_rwlock_init(&t->topo_lock, NULL);
	pthread_mutex_init(&t->flush_lock, NULL);
	pthread_mutex_init(&t->coord_lock, NULL);
	pthread_mutex_init(&t->subtree_mutex, NULL);
	pthread_cond_init(&t->root_flush_cond, NULL);
	pthread_mutex_init(&t->periodic_lock, NULL);
	init_monotonic_cond(&t->periodic_cond);
	t->nr_stats = nr_stats;
	err = copy_schema(t, schema, nr_stats);
	if (err)
		goto fail;
	t->domain = tally_domain_resolve(o.domain);
	if (!t->domain) {
		err = -ENODEV;
		goto fail;
	}
	t->design = o.design;
	t->batch = o.batch ? o.batch : DEFAULT_BATCH;
	t->threshold = t->batch * t->domain->nr_cpus;
	t->period_ns = o.period_ns ? o.period_ns : DEFAULT_PERIOD_NS;
	t->clock = o.clock ? o.clock : default_clock;
	t->clock_arg = o.clock_arg;
	t->simulated = t->domain->simulated;
	t->fence = !t->simulated && !membarrier_ready();
	t->lists = tally_percpu_alloc(t->domain, sizeof(*t->lists), 0);
	t->pushing = tally_percpu_alloc(t->domain, sizeof(long), 0);
	t->global_count = tally_percpu_alloc(t->domain, sizeof(long), 0);
	if (!t->lists || !t->pushing || !t->global_count) {
		err = -ENOMEM;
		goto fail;
	}
	t->root = group_new(t, NULL, "");
	if (!t->root) {
		err = -ENOMEM;
		goto fail;
	}
	t->info.groups = 1;
	t->last_root_flush = now_ns(t);
	register_tree(t);
	*out = t;
	return 0;
fail:
	tally_stats_tree_destroy(t);
	return err;
}

struct tally_stats_group *tally_stats_root(struct tally_stats_tree *t)
{
	return t ? t->root : NULL;
}

unsigned int tally_stats_nr_stats(const struct tally_stats_tree *t)
{
	return t ? t->nr_stats : 0;
}

int tally_stats_stat_index(const struct tally_stats_tree *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	for (unsigned int i = 0; i < t->nr_stats; i++)
		if (!strcmp(t->names[i], name))
			return (int)i;
	return -ENOENT;
}

int tally_stats_tree_info(const struct tally_stats_tree *t,
			  struct tally_stats_info *info)
{
	if (!t || !info)
		return -EINVAL;
	info->flushes = __atomic_load_n(&t->info.flushes, __ATOMIC_RELAXED);
	info->root_flushes =
		__atomic_load_n(&t->info.root_flushes, __ATOMIC_RELAXED);
	info->groups_flushed =
		__atomic_load_n(&t->info.groups_flushed, __ATOMIC_RELAXED);
	info->shared_waits =
		__atomic_load_n(&t->info.shared_waits, __ATOMIC_RELAXED);
	info->skipped = __atomic_load_n(&t->info.skipped, __ATOMIC_RELAXED);
	info->groups = __atomic_load_n(&t->info.groups, __ATOMIC_RELAXED);
	return 0;
}

const char *tally_stats_design_name(enum tally_stats_design design)
{
	static const char *const names[] = { "tally", "linux61", "seed001",
					     "linux68" };

	return (unsigned int)design < 4 ? names[design] : "unknown";
}
