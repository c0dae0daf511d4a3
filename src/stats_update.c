// SPDX-License-Identifier: MIT
/*
 * stats_update.c - the update path of the statistics tree.
 *
 * tally_stats_mod(G, i, delta) on CPU c, no lock and no allocation:
 *
 *   1. one rseq sequence adds hint = min(|delta|, threshold + 1) to the
 *      per-CPU threshold count of G and of each ancestor (the chain: byte
 *      offsets kept in G, the same on every CPU, so no pointer chasing),
 *      then commits delta to G's stat[i] on c;
 *   2. if (G, c) is idle, claims it (idle -> listed) and pushes it on c's
 *      lock-free list; c's pushing count covers the claim and the push;
 *   3. once a count reaches the batch, it moves to its group's over with
 *      an atomic exchange on c's slot, c being the CPU of step 1 even if
 *      the thread migrated since.
 *
 * Invariant kept for the flush (stats_flush.c): a committed delta not yet
 * folded belongs to a (group, CPU) that is listed or linked, or that a
 * flush between its two passes reads.  Invariant kept for if-needed reads:
 * of the |delta| an update adds, at most batch - 1 per CPU and chain level
 * stays out of over; the cap keeps every count far from overflow (one
 * capped hint already crosses the threshold, which is all a read needs).
 *
 * Cost: O(depth) plain adds in one sequence, a queued-flag load; the claim
 * and push (two atomics) once per group and CPU between flushes; one
 * atomic exchange per chain level per batch.  With membarrier() (the
 * default) no fence either; without it a full fence per update.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject.h"
#include "stats_internal.h"

/* Wake flushers blocked on @pushing once its count fell to 0. */
static void wake_flushers(unsigned int *pushing)
{
	unsigned int waiters = STATS_PUSH_WAITERS;

	/* A later pusher that got in first wakes them when it is done. */
	if (__atomic_compare_exchange_n(pushing, &waiters, 0, false,
					__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		syscall(SYS_futex, pushing, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
			NULL, 0);
}

/*
 * Push (g, cpu) on the CPU's list, once until a pop and a flush make it
 * idle again.  Counted in pushing from before the claim to after the push,
 * so that a flusher waits for the push of a claim it could miss.
 */
static void queue_update(struct tally_stats_group *g, struct stats_pcpu *pc,
			 unsigned int cpu)
{
	struct tally_stats_tree *t = g->tree;
	struct stats_pcpu **head = tally_percpu_ptr(t->lists, cpu);
	unsigned int *pushing = tally_percpu_ptr(t->pushing, cpu);
	struct stats_pcpu *old;
	int expected = QUEUE_IDLE;

	__atomic_add_fetch(pushing, 1, __ATOMIC_SEQ_CST);
	/* Before the first claim: a child of fork() relists claimed groups. */
	if (!__atomic_load_n(&pc->group, __ATOMIC_RELAXED))
		__atomic_store_n(&pc->group, g, __ATOMIC_RELAXED);
	if (__atomic_compare_exchange_n(&pc->queued, &expected, QUEUE_LISTED,
					false, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED)) {
		tally_inject(TALLY_INJECT_STATS_IN_PUSH);
		old = __atomic_load_n(head, __ATOMIC_RELAXED);
		do {
			pc->next = old;
		} while (!__atomic_compare_exchange_n(head, &old, pc, true,
						      __ATOMIC_RELEASE,
						      __ATOMIC_RELAXED));
	}
	if (__atomic_sub_fetch(pushing, 1, __ATOMIC_SEQ_CST) ==
	    STATS_PUSH_WAITERS)
		wake_flushers(pushing);
}

/*
 * Move the counts of the chain that reached the batch on @cpu, the CPU the
 * update committed on.  The exchange is atomic because the thread may run
 * elsewhere now; racing with an rseq add on that CPU it can only count a
 * hint twice, which at worst flushes early.
 */
static void move_counts(struct tally_stats_group *g, unsigned int cpu)
{
	const struct tally_stats_tree *t = g->tree;

	for (unsigned int i = 0; i < g->nr_chain; i++) {
		long *count = tally_percpu_ptr((char *)g->pcpu +
						       g->chain_offs[i],
					       cpu);
		long *over = stats_chain_over(g)[i];
		long moved;

		if (__atomic_load_n(count, __ATOMIC_RELAXED) < (long)g->batch)
			continue;
		moved = __atomic_exchange_n(count, 0, __ATOMIC_RELAXED);
		/* Past the threshold the group flushes anyway: skip the atomic. */
		if (moved > 0 &&
		    __atomic_load_n(over, __ATOMIC_RELAXED) <= (long)t->threshold)
			__atomic_add_fetch(over, moved, __ATOMIC_RELAXED);
	}
}

static void after_update(struct tally_stats_group *g, unsigned int cpu,
			 unsigned long acc, bool fence)
{
	struct stats_pcpu *pc = pcpu_of(g, cpu);

	/* Orders the stat store before the queued load (no membarrier). */
	if (fence)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pc->queued, __ATOMIC_SEQ_CST) == QUEUE_IDLE)
		queue_update(g, pc, cpu);
	if (__builtin_expect(acc >= g->batch, 0))
		move_counts(g, cpu);
}

static int check_update(const struct tally_stats_group *g, unsigned int stat,
			long delta)
{
	if (!g || stat >= g->nr_stats)
		return -EINVAL;
#ifdef TALLY_DEBUG
	if (g->magic != STATS_GROUP_MAGIC) {
		fprintf(stderr, "tally: update of a destroyed stats group %p\n",
			(const void *)g);
		abort();
	}
#endif
	if (delta < 0 && g->tree->is_event[stat])
		return -EINVAL;
	return 0;
}

/* min(|delta|, cap), without overflow for LONG_MIN. */
static long hint_of(const struct tally_stats_group *g, long delta)
{
	unsigned long m = delta < 0 ? -(unsigned long)delta
				    : (unsigned long)delta;

	return (long)(m < g->hint_cap ? m : g->hint_cap);
}

int tally_stats_mod(struct tally_stats_group *g, unsigned int stat, long delta)
{
	unsigned long acc;
	unsigned int cpu;
	int err = check_update(g, stat, delta);

	if (__builtin_expect(err || g->simulated || !delta, 0))
		return err ? err : g->simulated ? -EINVAL : 0;
	acc = tally_percpu_add_hints((long *)g->pcpu, g->chain_offs,
				     g->nr_chain, hint_of(g, delta),
				     &g->pcpu->stat[stat], delta, &cpu);
	tally_inject(TALLY_INJECT_STATS_AFTER_COMMIT);
	after_update(g, cpu, acc, stats_updates_fence());
	return 0;
}

int tally_stats_mod_cpu(struct tally_stats_group *g, unsigned int cpu,
			unsigned int stat, long delta)
{
	unsigned long acc = 0;
	long hint;
	int err = check_update(g, stat, delta);

	if (err)
		return err;
	if (!g->simulated || cpu >= g->tree->domain->nr_cpus)
		return -EINVAL;
	if (!delta)
		return 0;
	hint = hint_of(g, delta);
	for (unsigned int i = 0; i < g->nr_chain; i++)
		acc |= (unsigned long)tally_percpu_add_return_cpu(
			(long *)((char *)g->pcpu + g->chain_offs[i]), cpu,
			hint);
	/* Sequentially consistent: pairs with the flusher's clear of queued. */
	__atomic_add_fetch((long *)tally_percpu_ptr(&g->pcpu->stat[stat], cpu),
			   delta, __ATOMIC_SEQ_CST);
	after_update(g, cpu, acc, false);
	return 0;
}
