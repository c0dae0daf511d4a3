/* SPDX-License-Identifier: MIT */
#ifndef TALLY_INJECT_H
#define TALLY_INJECT_H

/*
 * inject.h - fault injection for the tests, after librseq's RSEQ_INJECT.
 *
 * A build with -DTALLY_INJECT (the test builds `build/inject` and
 * `build/asan`) runs a hook at the points where a preemption, a migration,
 * a signal or a failing system call matters; other builds compile the
 * points away.  A test sets a hook, provokes the race it wants (migrates
 * the thread, blocks it, sends it a signal) and checks the promise still
 * holds.  Hooks run in the thread that reaches the point, with no tally
 * lock held unless the point says so.
 *
 * Hooks return 0 to let the code go on; at a point marked "fallible" a
 * positive errno makes the guarded system call fail with that error.
 */

#include <stdbool.h>

enum tally_inject_point {
	/* tally_stats_mod(): the rseq sequence committed, nothing after. */
	TALLY_INJECT_STATS_AFTER_COMMIT,
	/* tally_stats_mod(): the group is claimed (listed), not yet pushed. */
	TALLY_INJECT_STATS_IN_PUSH,
	/*
	 * A flush half way, no lock held: a settled flush (destroy) between
	 * pass 1 and its barrier, others after their first CPU.
	 */
	TALLY_INJECT_FLUSH_BETWEEN_PASSES,
	/* A flush has just taken the statistics tree's flush_lock (held). */
	TALLY_INJECT_STATS_ENGINE_HELD,
	/*
	 * Statistics tree, TALLY design: a reader's shared flush of its
	 * group is done, not yet published to the readers who share it; no
	 * lock held.
	 */
	TALLY_INJECT_STATS_FLUSH_DONE,
	/* Fallible: the flush's membarrier(PRIVATE_EXPEDITED) call. */
	TALLY_INJECT_MEMBARRIER,
	/* Fallible: the fallback membarrier(GLOBAL) call. */
	TALLY_INJECT_MEMBARRIER_GLOBAL,
	/* tally_counter_add(): level 0 updated, its carry not yet made. */
	TALLY_INJECT_COUNTER_BEFORE_CARRY,
	/* Fallible: tally's own rseq registration of a thread. */
	TALLY_INJECT_RSEQ_REGISTER,
	/* Memory groups: a level's max and usage read, before its CAS. */
	TALLY_INJECT_MEMCG_BEFORE_CAS,
	/*
	 * Memory groups: a refused charge drained its subtree and is about
	 * to retry (drain lock held).
	 */
	TALLY_INJECT_MEMCG_DRAINED,
	/*
	 * Memory groups: a drain closed the stocks of its subtree and
	 * passed its barrier, before emptying them (drain lock held).
	 */
	TALLY_INJECT_MEMCG_DRAIN_STOPPED,
	/*
	 * Memory groups, atomic stocks (simulated domain, no rseq): the
	 * stop flag read clear (last check) and the slot read, before the
	 * slot's compare-and-swap.
	 */
	TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS,
	/*
	 * Memory groups: a destroyed group's nearest live ancestor was
	 * looked up (a stat update or a charge of a zombie handle), before
	 * it is used; no lock held.
	 */
	TALLY_INJECT_MEMCG_RESOLVED,
	/*
	 * Memory groups: a reclaim callback and its argument are about to be
	 * called (counted in flight); no lock held.
	 */
	TALLY_INJECT_MEMCG_BEFORE_CALLBACK,
	/*
	 * Memory groups: a charge still refused ran into a group whose OOM
	 * policy is a kill, and is about to choose a victim; no lock held.
	 */
	TALLY_INJECT_MEMCG_BEFORE_KILL,
	/*
	 * Memory groups: a refill's eviction emptied another group's slot,
	 * whose bytes are not back in that group's counters yet (inside the
	 * refill's transfer); no lock held.
	 */
	TALLY_INJECT_MEMCG_EVICTED,
	/*
	 * A bounded wait (runtime/backoff.h) is about to nap: what it waits
	 * for has not happened yet; the waiter's locks are held.
	 */
	TALLY_INJECT_BACKOFF_NAP,
	/*
	 * Memory groups: a transfer (memcg_transfer.c) began, before it
	 * checks the pressure; no lock held.
	 */
	TALLY_INJECT_MEMCG_TRANSFER_BEGUN,
	/*
	 * Memory groups: a transfer moved its bytes and is about to end
	 * (still counted in the tree's grace domain); no lock held.
	 */
	TALLY_INJECT_MEMCG_TRANSFER_ENDING,
	/*
	 * Memory groups: a settle pressed its subtree, before it waits for
	 * the transfers that began before; no lock held.
	 */
	TALLY_INJECT_MEMCG_SETTLE_PRESSED,
	/*
	 * Memory groups: a refill's batch is in the counters, not yet in a
	 * slot (inside its transfer); no lock held.
	 */
	TALLY_INJECT_MEMCG_REFILLED,
	/*
	 * Memory groups: an uncharge took a batch out of its slot, not yet
	 * out of the counters (inside its transfer); no lock held.
	 */
	TALLY_INJECT_MEMCG_CARRIED,
	TALLY_INJECT_NR_POINTS
};

typedef int (*tally_inject_fn)(enum tally_inject_point point, void *arg);

#ifdef TALLY_INJECT

/* Set (or clear, with NULL) the hook of @point.  Not thread-safe. */
void tally_inject_set(enum tally_inject_point point, tally_inject_fn fn,
		      void *arg);

/* Run the hook of @point if one is set; its result, or 0. */
int tally_inject_run(enum tally_inject_point point);

extern tally_inject_fn tally_inject_hooks[TALLY_INJECT_NR_POINTS];

/* Run the hook of @point, if any: 0, or the errno it injects. */
static inline int tally_inject(enum tally_inject_point point)
{
	if (__builtin_expect(tally_inject_hooks[point] != 0, 0))
		return tally_inject_run(point);
	return 0;
}

#else

static inline int tally_inject(enum tally_inject_point point)
{
	(void)point;
	return 0;
}

#endif /* TALLY_INJECT */

/*
 * The rseq sequences (tally/percpu_x86_64.h) also hold, in TALLY_INJECT
 * builds, a delay of tally_inject_rseq_delay iterations between their
 * read of cpu_id and their commit, and count their aborts in
 * tally_inject_rseq_aborts; both are declared there.
 */

#endif /* TALLY_INJECT_H */
