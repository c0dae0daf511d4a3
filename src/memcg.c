// SPDX-License-Identifier: MIT
/*
 * memcg.c - memory groups: hierarchical page counters fed by per-CPU
 * stocks, limits, reclaim, OOM policies and events.
 *
 * Invariant, for every live group G at every moment:
 *
 *   G->usage = charges of G's subtree - uncharges
 *            + stocks of G's subtree (bytes reserved, not yet used)
 *            + refills in flight under G (taken from the counters, not yet
 *              in a stock: between two steps of charge_slow())
 *
 * and G->usage <= G->max, because a level is raised only by a
 * compare-and-swap that checks it (NOFAIL charges excepted).  Exact usage
 * (what callers hold) is therefore <= max too.
 *
 *   charge(G, n)  stock of G on this CPU >= n?  take it    (rseq, ~2 ns)
 *                 else CAS every level by n + batch, put the batch in the
 *                 stock                                      (1 CAS/level)
 *                 else CAS every level by n                  (1 CAS/level)
 *                 else refuse_or_reclaim(): drain, retry, reclaim, OOM
 *   uncharge(G,n) stock + n <= 2 batches?  give it back       (rseq)
 *                 else subtract n from every level          (1 op/level)
 *   drain(H)      set stop on H's subtree, membarrier(RSEQ), exchange
 *                 every (group, CPU) slot with 0 (atomic stocks: with a
 *                 closed mark, reopened after), give the sum back to the
 *                 counters: O(groups x CPUs), rare
 *
 * A refusal must not be caused by reservations: the refusing charge sets
 * "pressure" on the level H that refused it (batch refills under H stop:
 * charges there go to the counters byte for byte), drains H's subtree and
 * retries; refills that had passed the pressure check before are counted
 * in "refilling" and waited for (sleeping, 10 ms at most) before the
 * charge is refused.
 *
 * Groups are never freed before their tree: a destroyed group becomes a
 * "zombie" whose charges go to its live ancestor, so any handle a caller
 * kept stays valid, and the tree can be walked without a lock (sibling
 * links only ever point to older groups, so a walk ends even while groups
 * are unlinked).  Locks, in their order: kill_lock (one OOM kill at a
 * time, held across the kill callback), oom_lock (task lists, OOM
 * candidates' room), drain_lock (drains, destroy), structure (create,
 * destroy, find, attach).  Callbacks run with no other tally lock held.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/oom.h>

#include "inject.h"
#include "memcg_internal.h"
#include "memcg_stock.h"
#include "percpu_internal.h"

#define REFILL_WAIT_NS (10l * 1000 * 1000)
#define RECLAIM_ROUNDS 4
#define MAX_OOM_TIMEOUT_NS (60l * 1000 * 1000 * 1000)

static const char *const stat_names[TALLY_MEMCG_NR_STATS] = {
	[TALLY_MEMCG_ANON] = "anon",
	[TALLY_MEMCG_FILE] = "file",
	[TALLY_MEMCG_KERNEL] = "kernel",
	[TALLY_MEMCG_KERNEL_STACK] = "kernel_stack",
	[TALLY_MEMCG_PAGETABLES] = "pagetables",
	[TALLY_MEMCG_SOCK] = "sock",
	[TALLY_MEMCG_SHMEM] = "shmem",
	[TALLY_MEMCG_FILE_MAPPED] = "file_mapped",
	[TALLY_MEMCG_FILE_DIRTY] = "file_dirty",
	[TALLY_MEMCG_FILE_WRITEBACK] = "file_writeback",
	[TALLY_MEMCG_SLAB_RECLAIMABLE] = "slab_reclaimable",
	[TALLY_MEMCG_SLAB_UNRECLAIMABLE] = "slab_unreclaimable",
	[TALLY_MEMCG_PGFAULT] = "pgfault",
	[TALLY_MEMCG_PGMAJFAULT] = "pgmajfault",
};

static const char *const event_names[TALLY_MEMCG_NR_EVENTS] = {
	[TALLY_MEMCG_EVENT_LOW] = "low",
	[TALLY_MEMCG_EVENT_HIGH] = "high",
	[TALLY_MEMCG_EVENT_MAX] = "max",
	[TALLY_MEMCG_EVENT_OOM] = "oom",
	[TALLY_MEMCG_EVENT_OOM_KILL] = "oom_kill",
};

const char *tally_memcg_stat_name(enum tally_memcg_stat item)
{
	return (unsigned int)item < TALLY_MEMCG_NR_STATS ? stat_names[item]
							 : NULL;
}

const char *tally_memcg_event_name(enum tally_memcg_event ev)
{
	return (unsigned int)ev < TALLY_MEMCG_NR_EVENTS ? event_names[ev]
						       : NULL;
}

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define INC(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)

/* ---- trees registry and fork ---------------------------------------- */

static pthread_mutex_t trees_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_memcg_tree *trees;

static void fork_prepare(void)
{
	pthread_mutex_lock(&trees_lock);
	for (struct tally_memcg_tree *t = trees; t; t = t->next_tree) {
		pthread_mutex_lock(&t->kill_lock);
		pthread_mutex_lock(&t->oom_lock);
		pthread_mutex_lock(&t->drain_lock);
		pthread_rwlock_wrlock(&t->structure);
	}
}

static void fork_parent(void)
{
	for (struct tally_memcg_tree *t = trees; t; t = t->next_tree) {
		pthread_rwlock_unlock(&t->structure);
		pthread_mutex_unlock(&t->drain_lock);
		pthread_mutex_unlock(&t->oom_lock);
		pthread_mutex_unlock(&t->kill_lock);
	}
	pthread_mutex_unlock(&trees_lock);
}

void memcg_init_tree_locks(struct tally_memcg_tree *t)
{
	pthread_rwlockattr_t attr;

	pthread_mutex_init(&t->kill_lock, NULL);
	pthread_cond_init(&t->kill_done, NULL);
	pthread_mutex_init(&t->oom_lock, NULL);
	pthread_mutex_init(&t->drain_lock, NULL);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->structure, &attr);
	pthread_rwlockattr_destroy(&attr);
}

static void fork_child(void)
{
	/*
	 * Lock words may count waiters the child does not have: build them
	 * anew.  Refills and refusals other threads had in flight never
	 * finish here: forget them (a refill's bytes stay counted, as if
	 * the thread that took them still held them).
	 */
	for (struct tally_memcg_tree *t = trees; t; t = t->next_tree) {
		memcg_init_tree_locks(t);
		for (struct tally_memcg *g = t->all; g; g = g->next_all) {
			STORE(&g->refilling, 0);
			STORE(&g->pressure, 0);
		}
	}
	tally_mutex_reset(&trees_lock);
}

static void install_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void memcg_register_tree(struct tally_memcg_tree *t)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install_fork_handlers);
	pthread_mutex_lock(&trees_lock);
	t->next_tree = trees;
	trees = t;
	pthread_mutex_unlock(&trees_lock);
}

void memcg_unregister_tree(struct tally_memcg_tree *t)
{
	pthread_mutex_lock(&trees_lock);
	for (struct tally_memcg_tree **link = &trees; *link;
	     link = &(*link)->next_tree) {
		if (*link == t) {
			*link = t->next_tree;
			break;
		}
	}
	pthread_mutex_unlock(&trees_lock);
}

/* ---- the stock mode --------------------------------------------------- */

/*
 * rseq stocks need membarrier(PRIVATE_EXPEDITED_RSEQ) for drains; the
 * registration is per process and asked once.
 */
static int rseq_barrier_ok;

static void register_rseq_barrier(void)
{
	const char *env = getenv("TALLY_MEMBARRIER");

	if (env && !strcmp(env, "off"))
		return;
	if (tally_rseq_mode() == TALLY_RSEQ_FALLBACK)
		return;
	rseq_barrier_ok = !syscall(__NR_membarrier,
			MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

bool memcg_rseq_stocks_possible(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, register_rseq_barrier);
	return rseq_barrier_ok;
}

/* ---- chains of page counters ----------------------------------------- */

/* The live group a destroyed one hands its work to. */
static struct tally_memcg *resolve(struct tally_memcg *g)
{
	while (ACQUIRE(&g->dead))
		g = g->parent;
	return g;
}

static void raise_peak(struct tally_memcg *g, long usage)
{
	long peak = LOAD(&g->peak);

	while (usage > peak &&
	       !__atomic_compare_exchange_n(&g->peak, &peak, usage, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void counters_sub(struct tally_memcg *from, struct tally_memcg *upto,
			 long n)
{
	for (struct tally_memcg *g = from; g != upto; g = g->parent)
		__atomic_sub_fetch(&g->usage, n, __ATOMIC_RELAXED);
}

/*
 * Raise every level from @g up by @n, each only if it stays within its
 * max (within LONG_MAX when @force: a NOFAIL charge).  On failure, undo
 * the levels below and return the level that refused.
 *
 * The max read before the CAS may be stale: tally_memcg_set_limit() may
 * have published a lower one and checked the usage in between.  Both
 * sides write, then read the other's word (seq_cst), so one sees the
 * other: after the CAS the max is read again, and a level that no longer
 * fits is undone and retried against the new max (or the setter sees the
 * usage and restores the old max).
 */
static struct tally_memcg *counters_add(struct tally_memcg *g, long n,
					bool force)
{
	for (struct tally_memcg *l = g; l; l = l->parent) {
		long max, usage;

retry:
		max = force ? LONG_MAX : LOAD(&l->max);
		usage = LOAD(&l->usage);
		(void)tally_inject(TALLY_INJECT_MEMCG_BEFORE_CAS);
		do {
			if (usage > max - n) {
				counters_sub(g, l, n);
				return l;
			}
		} while (!__atomic_compare_exchange_n(&l->usage, &usage,
						      usage + n, true,
						      __ATOMIC_SEQ_CST,
						      __ATOMIC_RELAXED));
		if (!force &&
		    usage > __atomic_load_n(&l->max, __ATOMIC_SEQ_CST) - n) {
			__atomic_sub_fetch(&l->usage, n, __ATOMIC_RELAXED);
			goto retry;
		}
		raise_peak(l, usage + n);
	}
	return NULL;
}

static struct tally_memcg *counters_try_add(struct tally_memcg *g, long n)
{
	return counters_add(g, n, false);
}

/* -ERANGE, with nothing changed, when @g's own level holds less than @n. */
static int counters_uncharge(struct tally_memcg *g, long n)
{
	long usage = LOAD(&g->usage);

	do {
		if (usage < n)
			return -ERANGE;
	} while (!__atomic_compare_exchange_n(&g->usage, &usage, usage - n,
					      true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	counters_sub(g->parent, NULL, n);
	return 0;
}

/*
 * A drain's uncharge of what the stocks held.  A caller that uncharged
 * more than it charged may have left more there than @g's counter holds:
 * clamp at 0 rather than refuse, so that the stocks' legitimate bytes are
 * not kept counted for ever.
 */
static void counters_give_back(struct tally_memcg *g, long n)
{
	long usage = LOAD(&g->usage), take;

	do {
		take = usage < n ? usage : n;
	} while (!__atomic_compare_exchange_n(&g->usage, &usage, usage - take,
					      true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	if (take < n)
		INC(&g->tree->underflows);
	counters_sub(g->parent, NULL, take);
}

static bool chain_under_pressure(const struct tally_memcg *g)
{
	for (; g; g = g->parent)
		if (LOAD(&g->pressure))
			return true;
	return false;
}

/* ---- events ----------------------------------------------------------- */

static void notify(struct tally_memcg *g)
{
	int fd = ACQUIRE(&g->evfd);
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the count is at its maximum, still readable. */
	}
}

/*
 * Add @count local events to @g, or to its live ancestor if it is
 * destroyed meanwhile.  Destroy sets dead, then takes the local counts
 * (exchange) for the parent; we add, then look at dead.  One of us sees
 * the other, and each count is moved by exactly one exchange.
 */
void memcg_add_local_events(struct tally_memcg *g, enum tally_memcg_event ev,
			    long count)
{
	while (count) {
		g = resolve(g);
		__atomic_add_fetch(&g->events_local[ev], count,
				   __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST))
			return;
		count = __atomic_exchange_n(&g->events_local[ev], 0,
					    __ATOMIC_SEQ_CST);
	}
}

void memcg_event(struct tally_memcg *g, enum tally_memcg_event ev)
{
	g = resolve(g);
	memcg_add_local_events(g, ev, 1);
	for (struct tally_memcg *l = g; l; l = l->parent) {
		INC(&l->events[ev]);
		notify(l);
	}
}

/* ---- stocks ----------------------------------------------------------- */

/*
 * Take @n from @g's stock on @cpu (current CPU when @cpu is NO_CPU).  The
 * stock pointer is loaded once: destroy may free it and store NULL, which
 * the sequences never dereference since they read stop first.
 */
static bool stock_take(struct tally_memcg *g, unsigned int cpu, long n)
{
	long *stock = LOAD(&g->fast.stock);

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_take_(stock, n, &g->fast.stop);

		if (r >= 0 || !tally_rseq_thread_ready())
			return r > 0;
		return tally_percpu_take_(stock, n, &g->fast.stop) > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return stock_take_atomic(stock, cpu, n, &g->fast.stop);
}

static bool stock_give(struct tally_memcg *g, unsigned int cpu, long n,
		       long cap)
{
	long *stock = LOAD(&g->fast.stock);

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_give_(stock, n, cap, &g->fast.stop);

		if (r >= 0 || !tally_rseq_thread_ready())
			return r > 0;
		return tally_percpu_give_(stock, n, cap, &g->fast.stop) > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return stock_give_atomic(stock, cpu, n, cap, &g->fast.stop);
}

/*
 * Visit @h's live subtree in pre-order without a lock (see the file
 * comment); @fn returns non-zero to stop.
 */
long memcg_walk(struct tally_memcg *h,
		long (*fn)(struct tally_memcg *g, void *arg), void *arg)
{
	struct tally_memcg *g = h;
	long acc = 0;

	for (;;) {
		struct tally_memcg *next;

		acc += fn(g, arg);
		next = ACQUIRE(&g->first_child);
		if (next) {
			g = next;
			continue;
		}
		while (g != h && !(next = ACQUIRE(&g->next_sibling)))
			g = g->parent;
		if (g == h)
			return acc;
		g = next;
	}
}

static long set_stop(struct tally_memcg *g, void *arg)
{
	if (g->fast.stock)
		__atomic_store_n(&g->fast.stop, 1, __ATOMIC_SEQ_CST);
	(void)arg;
	return LOAD(&g->refilling);
}

static long empty_stock(struct tally_memcg *g, void *arg)
{
	unsigned int nr_cpus = g->tree->nr_cpus;
	long sum = 0;

	(void)arg;
	/*
	 * Only the stocks this drain closed: a group created since set_stop()
	 * has an open stock that sequences on other CPUs may be writing.
	 */
	if (!g->fast.stock || !LOAD(&g->fast.stop))
		return 0;
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++) {
		long *slot = tally_percpu_ptr(g->fast.stock, cpu);
		long old;

		if (g->tree->rseq) {
			if (LOAD(slot))
				sum += __atomic_exchange_n(slot, 0,
							   __ATOMIC_RELAXED);
			continue;
		}
		old = __atomic_exchange_n(slot, STOCK_CLOSED, __ATOMIC_RELAXED);
		if (old != STOCK_CLOSED)
			sum += old;
	}
	if (sum)
		counters_give_back(g, sum);
	return 0;
}

/* Open the stocks again after a drain; a destroyed group's stay closed. */
static long clear_stop(struct tally_memcg *g, void *arg)
{
	(void)arg;
	if (LOAD(&g->dead) || !g->fast.stock)
		return 0;
	if (!g->tree->rseq) {
		for (unsigned int cpu = 0; cpu < g->tree->nr_cpus; cpu++) {
			long closed = STOCK_CLOSED;

			__atomic_compare_exchange_n(
				(long *)tally_percpu_ptr(g->fast.stock, cpu),
				&closed, 0, false, __ATOMIC_RELAXED,
				__ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&g->fast.stop, 0, __ATOMIC_RELEASE);
	return 0;
}

static void rseq_barrier(struct tally_memcg_tree *t)
{
	if (t->rseq && syscall(__NR_membarrier,
			       MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0)) {
		/* Registered at creation: failing now is a broken kernel. */
		static const char msg[] =
			"tally: membarrier(PRIVATE_EXPEDITED_RSEQ) failed\n";

		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to say */
		}
		abort();
	}
}

/*
 * Give every stock of @h's subtree back to the counters and leave them
 * closed (charges and uncharges go to the counters) until reopen_stocks().
 * Caller holds drain_lock.  Returns the refills in flight seen under @h.
 */
static long drain_closed(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;
	long refilling = memcg_walk(h, set_stop, NULL);

	rseq_barrier(t);
	(void)tally_inject(TALLY_INJECT_MEMCG_DRAIN_STOPPED);
	memcg_walk(h, empty_stock, NULL);
	INC(&t->drains);
	return refilling;
}

static void reopen_stocks(struct tally_memcg *h)
{
	memcg_walk(h, clear_stop, NULL);
}

/*
 * Give every stock of @h's subtree back to the counters.  Caller holds
 * drain_lock.  Returns the refills in flight seen under @h.
 */
long memcg_drain_locked(struct tally_memcg *h)
{
	long refilling = drain_closed(h);

	reopen_stocks(h);
	return refilling;
}

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000l, ns % 1000000000l };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000l + ts.tv_nsec;
}

/*
 * Drain and retry until the charge fits, or no reservation can be what
 * stands in the way.  Returns NULL when charged, else the level refusing.
 */
static struct tally_memcg *drain_and_retry(struct tally_memcg *g, long n,
					   struct tally_memcg *h)
{
	struct tally_memcg_tree *t = g->tree;
	long waited = 0, nap = 20000;
	struct tally_memcg *refuser;

	__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		long refilling;

		/*
		 * Retry before reopening the stocks: an uncharge that
		 * returned in between is in the counters, not in a stock.
		 */
		pthread_mutex_lock(&t->drain_lock);
		refilling = drain_closed(h);
		(void)tally_inject(TALLY_INJECT_MEMCG_DRAINED);
		refuser = counters_try_add(g, n);
		reopen_stocks(h);
		pthread_mutex_unlock(&t->drain_lock);
		if (!refuser)
			break;
		if (refuser != h && refuser->depth < h->depth) {
			/* A level above: its subtree holds stocks too. */
			__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
			h = refuser;
			__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (!refilling || waited >= REFILL_WAIT_NS)
			break;
		INC(&t->drain_waits);
		sleep_ns(nap);
		waited += nap;
		nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
	}
	__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	return refuser;
}

/* ---- protection and reclaim ------------------------------------------ */

static long mul_div(long a, long b, long c)
{
	return (long)((__int128)a * b / c);
}

/* The kernel's effective_protection(), without recursive protection. */
static long effective_protection(long usage, long setting,
				 long parent_effective, long siblings)
{
	long protected = usage < setting ? usage : setting;

	if (siblings > parent_effective)
		return mul_div(protected, parent_effective, siblings);
	return protected;
}

static long siblings_protected(const struct tally_memcg *parent, int low)
{
	long sum = 0;

	for (struct tally_memcg *c = ACQUIRE(&parent->first_child); c;
	     c = ACQUIRE(&c->next_sibling)) {
		long usage = LOAD(&c->usage);
		long setting = low ? LOAD(&c->low) : LOAD(&c->min);

		if (LOAD(&c->dead))
			continue;
		sum += usage < setting ? usage : setting;
	}
	return sum;
}

/*
 * Effective min and low of @g for reclaim from @root, computed top-down
 * along the chain (the kernel caches them in the counters; we recompute).
 */
void memcg_protection(struct tally_memcg *root, struct tally_memcg *g,
		      long *emin, long *elow)
{
	struct tally_memcg *chain[TALLY_MEMCG_MAX_DEPTH + 1];
	unsigned int n = 0;
	long pmin = 0, plow = 0;

	for (struct tally_memcg *l = g; l != root; l = l->parent)
		chain[n++] = l;
	*emin = *elow = 0;
	while (n--) {
		struct tally_memcg *l = chain[n];
		long usage = LOAD(&l->usage);

		if (!usage) {
			pmin = plow = 0;
		} else if (l->parent == root) {
			pmin = LOAD(&l->min);
			plow = LOAD(&l->low);
		} else {
			pmin = effective_protection(usage, LOAD(&l->min), pmin,
					siblings_protected(l->parent, 0));
			plow = effective_protection(usage, LOAD(&l->low), plow,
					siblings_protected(l->parent, 1));
		}
	}
	*emin = pmin;
	*elow = plow;
}

struct reclaim_pass {
	struct tally_memcg *root;
	long want;		/* bytes still wanted */
	int below_low;		/* second pass: dip under low, not min */
};

static long local_usage(struct tally_memcg *g)
{
	long usage = LOAD(&g->usage);

	for (struct tally_memcg *c = ACQUIRE(&g->first_child); c;
	     c = ACQUIRE(&c->next_sibling))
		if (!LOAD(&c->dead))
			usage -= LOAD(&c->usage);
	return usage > 0 ? usage : 0;
}

static long reclaim_one(struct tally_memcg *g, void *arg)
{
	struct reclaim_pass *p = arg;
	tally_memcg_reclaim_fn fn = ACQUIRE(&g->reclaim);
	long emin, elow, usage, floor, ask, freed;

	if (p->want <= 0 || !fn || LOAD(&g->dead))
		return 0;
	usage = LOAD(&g->usage);
	memcg_protection(p->root, g, &emin, &elow);
	floor = p->below_low ? emin : (elow > emin ? elow : emin);
	if (usage <= floor)
		return 0;
	ask = usage - floor;
	if (ask > local_usage(g))
		ask = local_usage(g);
	if (ask > p->want)
		ask = p->want;
	if (ask <= 0)
		return 0;
	if (p->below_low && usage <= elow)
		memcg_event(g, TALLY_MEMCG_EVENT_LOW);
	freed = fn(g, ask, LOAD(&g->reclaim_arg));
	/* What it says it freed: its uncharges may sit in stocks yet. */
	p->want -= freed < 0 ? 0 : freed > ask ? ask : freed;
	return 0;
}

/*
 * Ask the callbacks of @h's subtree for @want bytes: unprotected memory
 * first, then memory under low (never under min).  A thread that is
 * already reclaiming does not reclaim again from its callbacks' charges.
 */
static __thread int in_reclaim;

static bool reclaim(struct tally_memcg *h, long want)
{
	struct reclaim_pass p = { h, want, 0 };

	if (in_reclaim || want <= 0)
		return false;
	in_reclaim = 1;
	memcg_walk(h, reclaim_one, &p);
	if (p.want > 0) {
		p.below_low = 1;
		memcg_walk(h, reclaim_one, &p);
	}
	in_reclaim = 0;
	return p.want < want;
}

/* Over-high check after a charge reached the counters. */
static int check_high(struct tally_memcg *g, unsigned int flags)
{
	int over = 0;

	for (struct tally_memcg *l = g; l; l = l->parent) {
		long high = LOAD(&l->high);
		long usage = LOAD(&l->usage);

		if (usage <= high)
			continue;
		memcg_event(l, TALLY_MEMCG_EVENT_HIGH);
		if (!(flags & TALLY_MEMCG_NORECLAIM))
			reclaim(l, usage - high);
		if (LOAD(&l->usage) > high)
			over = TALLY_MEMCG_OVER_HIGH;
	}
	return over;
}

/* ---- OOM -------------------------------------------------------------- */

struct collect {
	struct tally_memcg_tree *t;
	size_t nr;
};

static long collect_tasks(struct tally_memcg *g, void *arg)
{
	struct collect *c = arg;

	for (struct tally_memcg_task *task = g->tasks; task;
	     task = task->next_) {
		struct tally_oom_candidate *cand;

		if (c->nr == c->t->cand_room)
			break;
		cand = &c->t->cands[c->nr];
		memset(cand, 0, sizeof(*cand));
		cand->mm = task->mm;
		cand->score_adj = task->score_adj;
		cand->flags = task->flags;
		c->t->cand_tasks[c->nr++] = task;
	}
	return 0;
}

/*
 * Choose a task of @h's subtree and report it: KILLED, NO_VICTIM, or
 * KILL_BUSY when another kill of the tree is running (then wait for what
 * it frees, as the kernel does when its OOM lock is taken).  One kill at
 * a time: kill_lock is held across the callback, oom_lock is not, so the
 * callback may detach tasks (the victim too) and destroy groups; a detach
 * of the victim by another thread waits for the callback (kill_done).
 */
enum { KILLED, NO_VICTIM, KILL_BUSY };

static int oom_kill(struct tally_memcg *h, const struct memcg_oom *pol)
{
	struct tally_memcg_tree *t = h->tree;
	struct tally_oom_options opts = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;
	struct collect c = { t, 0 };
	struct tally_memcg_task *victim = NULL;

	if (pthread_mutex_trylock(&t->kill_lock))
		return KILL_BUSY;
	pthread_mutex_lock(&t->oom_lock);
	pthread_rwlock_rdlock(&t->structure);
	memcg_walk(h, collect_tasks, &c);
	pthread_rwlock_unlock(&t->structure);
	opts.total = LOAD(&h->max) == TALLY_MEMCG_UNLIMITED ?
			0 : (unsigned long)LOAD(&h->max);
	if (c.nr && !tally_oom_select(t->cands, c.nr, &opts, &res))
		victim = t->cand_tasks[res.index];
	if (victim) {
		t->killing = victim;
		t->killer = pthread_self();
		memcg_event(victim->group_, TALLY_MEMCG_EVENT_OOM_KILL);
	}
	pthread_mutex_unlock(&t->oom_lock);
	if (victim) {
		pol->kill(h, victim, pol->arg);
		pthread_mutex_lock(&t->oom_lock);
		t->killing = NULL;
		pthread_cond_broadcast(&t->kill_done);
		pthread_mutex_unlock(&t->oom_lock);
	}
	pthread_mutex_unlock(&t->kill_lock);
	return victim ? KILLED : NO_VICTIM;
}

/*
 * Caller holds oom_lock: wait until no other thread's kill callback has
 * @task (NULL: any task of @g) as its victim.
 */
void memcg_wait_kill(struct tally_memcg_tree *t, struct tally_memcg_task *task,
		     struct tally_memcg *g)
{
	while (t->killing && !pthread_equal(t->killer, pthread_self()) &&
	       (task ? t->killing == task : t->killing->group_ == g))
		pthread_cond_wait(&t->kill_done, &t->oom_lock);
}

/* Retry with drains, at least once, until @deadline; NULL once charged. */
static struct tally_memcg *wait_for_room(struct tally_memcg *g, long n,
					 struct tally_memcg *h, long deadline)
{
	long nap = 50000;

	for (;;) {
		h = drain_and_retry(g, n, h);
		if (!h || now_ns() >= deadline)
			return h;
		sleep_ns(nap);
		nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
	}
}

/* What a charge of @n lacks under @h's max (usage + n - max, saturated). */
static long excess(const struct tally_memcg *h, long n)
{
	__int128 e = (__int128)LOAD(&h->usage) + n - LOAD(&h->max);

	return e > LONG_MAX ? LONG_MAX : (long)e;
}

static int refuse_or_reclaim(struct tally_memcg *g, long n,
			     struct tally_memcg *h, unsigned int flags)
{
	struct memcg_oom pol;

	h = drain_and_retry(g, n, h);
	if (!h)
		return check_high(g, flags);
	memcg_event(h, TALLY_MEMCG_EVENT_MAX);
	if (!(flags & TALLY_MEMCG_NORECLAIM)) {
		for (int round = 0; h && round < RECLAIM_ROUNDS; round++) {
			if (!reclaim(h, excess(h, n)))
				break;
			h = drain_and_retry(g, n, h);
		}
		if (!h)
			return check_high(g, flags);
		memcg_event(h, TALLY_MEMCG_EVENT_OOM);
		pthread_mutex_lock(&g->tree->oom_lock);
		pol = h->oom;
		pthread_mutex_unlock(&g->tree->oom_lock);
		if (pol.mode == TALLY_MEMCG_OOM_KILL &&
		    oom_kill(h, &pol) == NO_VICTIM)
			pol.mode = TALLY_MEMCG_OOM_FAIL;
		if (pol.mode != TALLY_MEMCG_OOM_FAIL)
			h = wait_for_room(g, n, h, now_ns() + pol.timeout_ns);
		if (!h)
			return check_high(g, flags);
	}
	INC(&g->tree->refusals);
	return -ENOMEM;
}

/* ---- charge and uncharge --------------------------------------------- */

static bool larger_than_a_max(const struct tally_memcg *g, long n)
{
	for (; g; g = g->parent)
		if (n > LOAD(&g->max))
			return true;
	return false;
}

/* The stock could not serve @n: go to the counters, refilling the stock. */
static int charge_slow(struct tally_memcg *g, unsigned int cpu, long n,
		       unsigned int flags)
{
	struct tally_memcg_tree *t = g->tree;
	struct tally_memcg *refuser;
	long batch = t->batch;

	g = resolve(g);
	/* On the counter's line, which the refill writes anyway. */
	INC(&g->refills);
	if (flags & TALLY_MEMCG_NOFAIL) {
		if (larger_than_a_max(g, n))
			return -E2BIG;
		if (counters_try_add(g, n) && counters_add(g, n, true))
			return -E2BIG;
		return check_high(g, flags);
	}
	__atomic_add_fetch(&g->refilling, 1, __ATOMIC_SEQ_CST);
	if (LOAD(&g->fast.stock) && !chain_under_pressure(g) &&
	    !counters_try_add(g, n + batch)) {
		if (!stock_give(g, cpu, batch, g->fast.stock_cap))
			counters_sub(g, NULL, batch);
		__atomic_sub_fetch(&g->refilling, 1, __ATOMIC_RELEASE);
		return check_high(g, flags);
	}
	__atomic_sub_fetch(&g->refilling, 1, __ATOMIC_RELEASE);
	refuser = counters_try_add(g, n);
	if (!refuser)
		return check_high(g, flags);
	return refuse_or_reclaim(g, n, refuser, flags);
}

static int charge(struct tally_memcg *g, unsigned int cpu, long bytes,
		  unsigned int flags)
{
	if (bytes < 1 || bytes > TALLY_MEMCG_BYTES_MAX ||
	    (flags & ~(TALLY_MEMCG_NOFAIL | TALLY_MEMCG_NORECLAIM)))
		return -EINVAL;
	/* Any charge the stock covers fits under every max. */
	if (stock_take(g, cpu, bytes))
		return 0;
	return charge_slow(g, cpu, bytes, flags);
}

int tally_memcg_charge_slow_(struct tally_memcg *g, long bytes,
			     unsigned int flags)
{
	if (!g || g->tree->simulated)
		return -EINVAL;
	return charge(g, NO_CPU, bytes, flags);
}

int tally_memcg_charge_cpu(struct tally_memcg *g, unsigned int cpu,
			   long bytes, unsigned int flags)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus)
		return -EINVAL;
	return charge(g, cpu, bytes, flags);
}

/*
 * The stock is full (or closed): give the bytes back to the counters, and
 * a batch of the stock with them when it has one, so that the next 2
 * batches of uncharges on this CPU are served by the stock again (the
 * kernel's drain_stock() on a full stock): one counter operation per
 * batch, not one per uncharge.
 */
static int uncharge(struct tally_memcg *g, unsigned int cpu, long bytes)
{
	long batch = g->tree->batch;
	int err;

	if (bytes < 1 || bytes > TALLY_MEMCG_BYTES_MAX)
		return -EINVAL;
	if (stock_give(g, cpu, bytes, g->fast.stock_cap))
		return 0;
	if (!stock_take(g, cpu, batch))
		return counters_uncharge(resolve(g), bytes);
	err = counters_uncharge(resolve(g), bytes + batch);
	if (err && !stock_give(g, cpu, batch, g->fast.stock_cap))
		counters_give_back(resolve(g), batch);
	return err;
}

int tally_memcg_uncharge_slow_(struct tally_memcg *g, long bytes)
{
	if (!g || g->tree->simulated)
		return -EINVAL;
	return uncharge(g, NO_CPU, bytes);
}

int tally_memcg_uncharge_cpu(struct tally_memcg *g, unsigned int cpu,
			     long bytes)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus)
		return -EINVAL;
	return uncharge(g, cpu, bytes);
}

/* ---- reads ------------------------------------------------------------ */

static long stock_sum(struct tally_memcg *g, void *arg)
{
	long *stock = LOAD(&g->fast.stock);
	long sum = 0;

	(void)arg;
	if (!stock)
		return 0;
	for (unsigned int cpu = 0; cpu < g->tree->nr_cpus; cpu++) {
		long v = tally_percpu_read_cpu(stock, cpu);

		if (v != STOCK_CLOSED)
			sum += v;
	}
	return sum;
}

static long count_stocked(struct tally_memcg *g, void *arg)
{
	(void)arg;
	return LOAD(&g->fast.stock) != NULL;
}

int tally_memcg_usage(struct tally_memcg *g, enum tally_memcg_read_mode mode,
		      struct tally_memcg_range *out)
{
	long usage, v;

	if (!g || !out || (unsigned int)mode > TALLY_MEMCG_READ_DRAIN)
		return -EINVAL;
	if (LOAD(&g->dead)) {
		*out = (struct tally_memcg_range){ 0, 0, 0 };
		return 0;
	}
	switch (mode) {
	case TALLY_MEMCG_READ_APPROX: {
		long groups = memcg_walk(g, count_stocked, NULL);
		__int128 slack = (__int128)groups * g->tree->nr_cpus *
				 2 * g->tree->batch;

		usage = LOAD(&g->usage);
		out->value = usage;
		out->max = usage;
		out->min = slack >= usage ? 0 : usage - (long)slack;
		return 0;
	}
	case TALLY_MEMCG_READ_PRECISE:
		usage = LOAD(&g->usage);
		v = usage - memcg_walk(g, stock_sum, NULL);
		break;
	default:
		pthread_mutex_lock(&g->tree->drain_lock);
		memcg_drain_locked(g);
		v = LOAD(&g->usage);
		pthread_mutex_unlock(&g->tree->drain_lock);
		break;
	}
	if (v < 0)
		v = 0;
	*out = (struct tally_memcg_range){ v, v, v };
	return 0;
}

long tally_memcg_peak(struct tally_memcg *g, bool reset)
{
	long peak;

	if (!g)
		return -EINVAL;
	g = resolve(g);
	peak = LOAD(&g->peak);
	if (reset)
		STORE(&g->peak, LOAD(&g->usage));
	return peak;
}

int tally_memcg_drain(struct tally_memcg *g)
{
	if (!g)
		return -EINVAL;
	g = resolve(g);
	pthread_mutex_lock(&g->tree->drain_lock);
	memcg_drain_locked(g);
	pthread_mutex_unlock(&g->tree->drain_lock);
	return 0;
}

int tally_memcg_events(const struct tally_memcg *g, long *hier, long *local)
{
	if (!g)
		return -EINVAL;
	for (int ev = 0; ev < TALLY_MEMCG_NR_EVENTS; ev++) {
		if (hier)
			hier[ev] = LOAD(&g->events[ev]);
		if (local)
			local[ev] = LOAD(&g->events_local[ev]);
	}
	return 0;
}

int tally_memcg_high_delay(struct tally_memcg *g, long bytes,
			   struct tally_memcg_throttle *out)
{
	/* The kernel's fixed point: overage in 1/2^20, delay scaling 2^14. */
	const int precision = 20, scaling = 14;
	const long max_delay_ns = 2000000000l, min_delay_ns = 10000000l;
	/*
	 * Overages at or above 2^40 (2^20 times high) give the 2 s maximum
	 * for any charge size and batch; saturating there keeps every
	 * product below in 128 bits.
	 */
	const long max_overage = 1l << 40;
	long worst = 0;
	__int128 delay;

	if (!g || !out || bytes < 1)
		return -EINVAL;
	*out = (struct tally_memcg_throttle){ 0, NULL, 0 };
	for (struct tally_memcg *l = resolve(g); l; l = l->parent) {
		long usage = LOAD(&l->usage), high = LOAD(&l->high);
		__int128 wide;
		long overage;

		if (usage <= high)
			continue;
		if (usage - high > out->over)
			out->over = usage - high;
		wide = ((__int128)(usage - high) << precision) /
		       (high > 0 ? high : 1);
		overage = wide > max_overage ? max_overage : (long)wide;
		if (overage > worst) {
			worst = overage;
			out->group = l;
		}
	}
	if (!worst)
		return 0;
	/* overage^2 seconds, scaled down; proportional to the charge. */
	delay = (__int128)worst * worst * 1000000000l;
	delay >>= precision + scaling;
	if (delay > (__int128)max_delay_ns * g->tree->batch)
		delay = (__int128)max_delay_ns * g->tree->batch;
	delay = delay * bytes / g->tree->batch;
	if (delay > max_delay_ns)
		delay = max_delay_ns;
	out->delay_ns = delay < min_delay_ns ? 0 : (long)delay;
	return 0;
}

int tally_memcg_tree_info(const struct tally_memcg_tree *t,
			  struct tally_memcg_info *out)
{
	unsigned long refills = 0;

	if (!t || !out)
		return -EINVAL;
	for (const struct tally_memcg *g = ACQUIRE(&t->all); g;
	     g = ACQUIRE(&g->next_all))
		refills += LOAD(&g->refills);
	*out = (struct tally_memcg_info){
		.refills = refills,
		.drains = LOAD(&t->drains),
		.drain_waits = LOAD(&t->drain_waits),
		.refusals = LOAD(&t->refusals),
		.groups = LOAD(&t->nr_groups),
		.zombies = LOAD(&t->nr_zombies),
		.underflows = LOAD(&t->underflows),
		.rseq = t->rseq,
	};
	return 0;
}

/* ---- limits, policies, tasks ---------------------------------------- */

int tally_memcg_set_limit(struct tally_memcg *g, enum tally_memcg_limit which,
			  long bytes)
{
	long *field;
	int err = 0;

	if (!g || !g->parent || LOAD(&g->dead) || bytes < 0)
		return -EINVAL;
	switch (which) {
	case TALLY_MEMCG_MIN:
		field = &g->min;
		break;
	case TALLY_MEMCG_LOW:
		field = &g->low;
		break;
	case TALLY_MEMCG_HIGH:
		field = &g->high;
		break;
	case TALLY_MEMCG_MAX:
		field = &g->max;
		break;
	default:
		return -EINVAL;
	}
	if (which != TALLY_MEMCG_MAX) {
		STORE(field, bytes);
		return 0;
	}
	/*
	 * As the kernel's page_counter_set_max(): publish the new max, then
	 * check the usage; a charge racing with it has either raised the
	 * usage first (we see it and restore the old max) or sees the new
	 * max.  Draining first makes the usage exact.
	 */
	pthread_mutex_lock(&g->tree->drain_lock);
	memcg_drain_locked(g);
	{
		long old = __atomic_exchange_n(field, bytes, __ATOMIC_SEQ_CST);

		if (__atomic_load_n(&g->usage, __ATOMIC_SEQ_CST) > bytes) {
			__atomic_store_n(field, old, __ATOMIC_SEQ_CST);
			err = -EBUSY;
		}
	}
	pthread_mutex_unlock(&g->tree->drain_lock);
	return err;
}

int tally_memcg_get_limits(const struct tally_memcg *g,
			   struct tally_memcg_limits *out)
{
	if (!g || !out)
		return -EINVAL;
	*out = (struct tally_memcg_limits){ LOAD(&g->min), LOAD(&g->low),
					    LOAD(&g->high), LOAD(&g->max) };
	return 0;
}

int tally_memcg_set_reclaim(struct tally_memcg *g, tally_memcg_reclaim_fn fn,
			    void *arg)
{
	if (!g || LOAD(&g->dead))
		return -EINVAL;
	pthread_rwlock_wrlock(&g->tree->structure);
	STORE(&g->reclaim, NULL);
	STORE(&g->reclaim_arg, arg);
	RELEASE(&g->reclaim, fn);
	pthread_rwlock_unlock(&g->tree->structure);
	return 0;
}

int tally_memcg_protection(struct tally_memcg *g, long *emin, long *elow)
{
	long m, l;

	if (!g)
		return -EINVAL;
	g = resolve(g);
	memcg_protection(g->tree->root, g, &m, &l);
	if (emin)
		*emin = m;
	if (elow)
		*elow = l;
	return 0;
}

int tally_memcg_set_oom_policy(struct tally_memcg *g,
			       const struct tally_memcg_oom_policy *policy)
{
	struct memcg_oom pol = { TALLY_MEMCG_OOM_FAIL, 0, NULL, NULL };

	if (!g || LOAD(&g->dead))
		return -EINVAL;
	if (policy) {
		if ((unsigned int)policy->mode > TALLY_MEMCG_OOM_KILL ||
		    policy->timeout_ns < 0 ||
		    policy->timeout_ns > MAX_OOM_TIMEOUT_NS ||
		    (policy->mode == TALLY_MEMCG_OOM_KILL && !policy->kill))
			return -EINVAL;
		pol = (struct memcg_oom){ policy->mode, policy->timeout_ns,
					  policy->kill, policy->arg };
	}
	pthread_mutex_lock(&g->tree->oom_lock);
	g->oom = pol;
	pthread_mutex_unlock(&g->tree->oom_lock);
	return 0;
}

int tally_memcg_task_attach(struct tally_memcg *g,
			    struct tally_memcg_task *task)
{
	struct tally_memcg_tree *t;
	int err = 0;

	if (!g || !task || !task->mm ||
	    task->score_adj < TALLY_OOM_SCORE_ADJ_MIN ||
	    task->score_adj > TALLY_OOM_SCORE_ADJ_MAX)
		return -EINVAL;
	t = g->tree;
	pthread_mutex_lock(&t->oom_lock);
	pthread_rwlock_wrlock(&t->structure);
	if (LOAD(&g->dead)) {
		err = -EINVAL;
	} else if (task->group_) {
		err = -EBUSY;
	} else if (t->nr_tasks == t->cand_room) {
		size_t room = t->cand_room ? 2 * t->cand_room : 16;
		struct tally_oom_candidate *cands =
			realloc(t->cands, room * sizeof(*cands));

		if (cands)
			t->cands = cands;
		if (cands) {
			struct tally_memcg_task **tasks =
				realloc(t->cand_tasks, room * sizeof(*tasks));

			if (tasks) {
				t->cand_tasks = tasks;
				t->cand_room = room;
			}
		}
		if (t->cand_room != room)
			err = -ENOMEM;
	}
	if (!err) {
		task->group_ = g;
		task->prev_ = NULL;
		task->next_ = g->tasks;
		if (g->tasks)
			g->tasks->prev_ = task;
		g->tasks = task;
		t->nr_tasks++;
	}
	pthread_rwlock_unlock(&t->structure);
	pthread_mutex_unlock(&t->oom_lock);
	return err;
}

/* Caller holds oom_lock and the structure lock for writing. */
void memcg_unlink_task(struct tally_memcg_task *task)
{
	struct tally_memcg *g = task->group_;

	if (task->prev_)
		task->prev_->next_ = task->next_;
	else
		g->tasks = task->next_;
	if (task->next_)
		task->next_->prev_ = task->prev_;
	task->group_ = NULL;
	task->next_ = task->prev_ = NULL;
	g->tree->nr_tasks--;
}

int tally_memcg_task_detach(struct tally_memcg_task *task)
{
	struct tally_memcg_tree *t;

	if (!task || !task->group_)
		return -EINVAL;
	t = task->group_->tree;
	pthread_mutex_lock(&t->oom_lock);
	memcg_wait_kill(t, task, NULL);
	pthread_rwlock_wrlock(&t->structure);
	if (task->group_)
		memcg_unlink_task(task);
	pthread_rwlock_unlock(&t->structure);
	pthread_mutex_unlock(&t->oom_lock);
	return 0;
}

/* ---- stats ------------------------------------------------------------ */

int tally_memcg_stat_mod(struct tally_memcg *g, enum tally_memcg_stat item,
			 long delta)
{
	if (!g || g->tree->simulated || (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	return tally_stats_mod(resolve(g)->stats, item, delta);
}

int tally_memcg_stat_mod_cpu(struct tally_memcg *g, unsigned int cpu,
			     enum tally_memcg_stat item, long delta)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus ||
	    (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	return tally_stats_mod_cpu(resolve(g)->stats, cpu, item, delta);
}

int tally_memcg_stat_read(struct tally_memcg *g, enum tally_memcg_stat item,
			  enum tally_flush_mode mode, long *hier, long *local)
{
	int err = -EINVAL;

	if (!g || (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	/* Destroy frees the statistics group under the lock for writing. */
	pthread_rwlock_rdlock(&g->tree->structure);
	if (!LOAD(&g->dead))
		err = tally_stats_read(g->stats, item, mode, hier, local);
	pthread_rwlock_unlock(&g->tree->structure);
	return err;
}

struct tally_stats_tree *tally_memcg_stats_tree(struct tally_memcg_tree *t)
{
	return t ? t->stats : NULL;
}

int tally_memcg_events_fd(struct tally_memcg *g)
{
	int fd;

	if (!g || LOAD(&g->dead))
		return -EINVAL;
	pthread_rwlock_wrlock(&g->tree->structure);
	fd = LOAD(&g->evfd);
	if (fd < 0) {
		fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		else
			RELEASE(&g->evfd, fd);
	}
	pthread_rwlock_unlock(&g->tree->structure);
	return fd;
}
