// SPDX-License-Identifier: MIT
/*
 * stats_update.c - the update path of the statistics tree.
 *
 * tally_stats_mod(G, i, delta) on CPU c, no lock and no allocation:
 *
 *   1. one rseq sequence: if G holds c's hint cache, it adds hint =
 *      min(|delta|, threshold + 1) to G's cached count on c, in the line
 *      of G's stats on c (the tree's line for c is only read), unless
 *      that would reach a quarter batch (then the count goes to the overs
 *      of G's chain, a load each while they are past the flush point, and
 *      the update takes the other way); otherwise it adds the hint to the
 *      per-CPU threshold count of G and of each ancestor (the chain: byte
 *      offsets kept in G, the same on every CPU, so no pointer chasing)
 *      and G takes the cache if it also made c's previous two updates
 *      that missed it (steal()); then it commits delta to G's stat[i] on
 *      c.
 *      A run of updates of one group costs the same at any depth;
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
 * stays out of over, and less than a quarter batch per CPU in its hint
 * cache, which groups count against their threshold (flush_at); the cap
 * keeps every count far from overflow (one capped hint already crosses
 * the threshold, which is all a read needs).
 *
 * Cost: a run of updates of one group on a CPU: two plain adds in one
 * sequence and a queued-flag load, at any depth; once per quarter batch
 * a load per chain level.  Updates that alternate between groups: O(depth)
 * plain adds in the same sequence after a look at the CPU's cache.  The claim
 * and push (two atomics) once per group and CPU between flushes; one
 * atomic exchange per chain level per batch.  With membarrier() (the
 * default) no fence either; without it a full fence per update.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/inject.h"
#include "stats_internal.h"

#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif

/*
 * Push (g, cpu) on the CPU's list, once until a pop and a flush make it
 * idle again.  Counted in pushing from before the claim to after the push,
 * so that a flusher that could miss the claim finds it without the push
 * (stats_flush.c: adopt_claimed()).
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
	stats_count_leave(pushing);
}

/*
 * Move the counts of the chain that reached the batch on @cpu, the CPU
 * the update committed on.  The exchange is atomic because the thread may
 * run elsewhere now; racing with an rseq add on that CPU it can only count
 * a hint twice, which at worst flushes early.
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
		/* Past flush_at the group flushes anyway: skip the atomic. */
		if (moved > 0 &&
		    __atomic_load_n(over, __ATOMIC_RELAXED) <= (long)t->flush_at)
			__atomic_add_fetch(over, moved, __ATOMIC_RELAXED);
	}
}

/* @n of @g's hint goes straight to the overs of its chain. */
static void charge_overs(struct tally_stats_group *g, long n)
{
	const struct tally_stats_tree *t = g->tree;

	for (unsigned int i = 0; i < g->nr_chain; i++) {
		long *over = stats_chain_over(g)[i];

		/* Past flush_at the group flushes anyway: a load only. */
		if (__atomic_load_n(over, __ATOMIC_RELAXED) <= (long)t->flush_at)
			__atomic_add_fetch(over, n, __ATOMIC_RELAXED);
	}
}

/*
 * After the commit on the CPU whose copies are @unit bytes from CPU 0's:
 * queue (g, cpu) if a flush made it idle.
 */
static inline void after_commit(struct tally_stats_group *g, size_t unit,
				bool fence)
{
	struct stats_pcpu *pc = (struct stats_pcpu *)((char *)g->pcpu + unit);
	unsigned int cpu = (unsigned int)(unit >> TALLY_PERCPU_UNIT_SHIFT);

	/* Orders the stat store before the queued load (no membarrier). */
	if (fence)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect(__atomic_load_n(&pc->queued, __ATOMIC_SEQ_CST) ==
				     QUEUE_IDLE,
			     0))
		queue_update(g, pc, cpu);
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
static inline long hint_of(const struct tally_stats_group *g, long delta)
{
	unsigned long m = delta < 0 ? -(unsigned long)delta
				    : (unsigned long)delta;

	return (long)(m < g->hint_cap ? m : g->hint_cap);
}

/* --- the hint cache ------------------------------------------------------ */

/*
 * Each CPU of a tree lends its hint cache to one group at a time, the one
 * its stats_hcache.last names: while that group's updates run on the CPU,
 * their hint goes to the group's own cached count there (stats_pcpu.cacc,
 * in the line that takes the update's delta) instead of to a count per
 * chain level, one line each; neither the group nor its ancestors see it
 * until it would reach cache_cap (a quarter batch): then the update moves
 * it to the chain's overs.  A group flushes past flush_at, its threshold
 * less cache_cap - 1 per CPU: the read bound still holds, since at most
 * one group per CPU holds a cached count that its chain has not seen.
 *
 * A group updated three times in a row on a CPU without the cache takes
 * it (not every group of a spread of updates, each taking it from the
 * last before it was used).  Taking it ends the previous group's cached
 * count on that CPU: the taker moves it to that group's chain (steal()).
 * Only sequences on the CPU that find their group named add to or empty a
 * cached count, and the taker's sequence runs on the CPU too: once it
 * named itself, the count it takes over is still.  The previous group
 * stays alive meanwhile: the taker counts itself in the cache's stealing
 * count, which a destroy waits for (stats_hcache_evict()), and nothing
 * else does.  Without rseq (fallback mode, simulated CPUs) no group takes
 * the cache.
 */
enum hc_result { HC_DONE, HC_FULL, HC_UNREGISTERED };

/* Set in the OR of the counts: the group should take the CPU's cache. */
#define HC_TAKE (1ul << 63)
/*
 * Misses of the cache in a row by one group, after its first, before it
 * takes it: with 2 (3 in a row), updates spread over n groups take it
 * about once per n^2 updates, not once per n.
 */
#define HC_RUNS_ "2"

/*
 * The sequence of an update on the current CPU c (r11: c's cache, r10:
 * c's copy of @g's pcpu):
 *
 *   - @g holds the cache: hint added to @g's cached count unless that
 *     fills it (then out to "full", no store);
 *   - otherwise: hint added to each count of the chain, ORed into acc;
 *     if @g also made the CPU's last updates that missed the cache (prev,
 *     runs), HC_TAKE is set in acc, else @g becomes prev;
 *
 * then the commit of @v to @stat.  The stores before the commit are redone
 * if the sequence restarts: a hint may be counted twice (a flush a little
 * early).
 */
#define HC_LEVELS_							\
	"movl %c[o_nr](%[g]), %%edx\n\t"				\
	"11:\n\t"							\
	"movq (%%r8), %%r9\n\t"					\
	"movq (%%r10,%%r9), %%r11\n\t"				\
	"addq %[hint], %%r11\n\t"					\
	"movq %%r11, (%%r10,%%r9)\n\t"				\
	"orq %%r11, %[acc]\n\t"					\
	"addq $8, %%r8\n\t"						\
	"decl %%edx\n\t"						\
	"jnz 11b\n\t"

/*
 * The update of @stat (a per-CPU pointer into @g's stats) by @v with
 * @hint, in one sequence: through the cache or the chain (see above).
 * Sets *@unit to the CPU's distance from CPU 0's copies and *@acc to the
 * OR of the chain's counts it added to, with HC_TAKE (0 through the
 * cache).
 */
static inline enum hc_result hc_update(const struct tally_stats_group *g,
				       long hint, long *stat, long v,
				       size_t *unit, unsigned long *acc_out)
{
	unsigned long c, acc;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_UNIT_
		    "xorl %k[acc], %k[acc]\n\t"
		    "movq %c[o_pcpu](%[g]), %%r10\n\t"
		    "addq %%rax, %%r10\n\t"
		    "movq %c[o_hc](%[g]), %%r11\n\t"
		    "addq %%rax, %%r11\n\t"
		    "cmpq %[g], (%%r11)\n\t"
		    "jne 10f\n\t"
		    "movq %c[o_cacc](%%r10), %%r9\n\t"
		    "addq %[hint], %%r9\n\t"
		    "cmpq %c[o_cap](%[g]), %%r9\n\t"
		    "jae %l[full]\n\t"
		    "movq %%r9, %c[o_cacc](%%r10)\n\t"
		    "jmp 20f\n\t"
		    "10:\n\t"
		    "movq %c[o_chain](%[g]), %%r8\n\t"
		    HC_LEVELS_
		    "cmpq $0, %c[o_cap](%[g])\n\t"
		    "je 20f\n\t"
		    "movq %c[o_hc](%[g]), %%r11\n\t"
		    "addq %%rax, %%r11\n\t"
		    "cmpq %[g], %c[o_prev](%%r11)\n\t"
		    "je 15f\n\t"
		    "movq %[g], %c[o_prev](%%r11)\n\t"
		    "movl $0, %c[o_runs](%%r11)\n\t"
		    "jmp 20f\n\t"
		    "15:\n\t"
		    "addl $1, %c[o_runs](%%r11)\n\t"
		    "cmpl $" HC_RUNS_ ", %c[o_runs](%%r11)\n\t"
		    "jb 20f\n\t"
		    "btsq $63, %[acc]\n\t"
		    "20:\n\t",
		    "addq %[v], (%[stat],%%rax)",
		    ([c] "=&a" (c), [acc] "=&r" (acc)),
		    ([g] "r" (g), [hint] "r" (hint), [stat] "r" (stat),
		     [v] "r" (v),
		     [o_hc] "i" (offsetof(struct tally_stats_group, hcache)),
		     [o_cap] "i" (offsetof(struct tally_stats_group, cache_cap)),
		     [o_pcpu] "i" (offsetof(struct tally_stats_group, pcpu)),
		     [o_chain] "i" (offsetof(struct tally_stats_group,
					     chain_offs)),
		     [o_nr] "i" (offsetof(struct tally_stats_group, nr_chain)),
		     [o_cacc] "i" (offsetof(struct stats_pcpu, cacc)),
		     [o_prev] "i" (offsetof(struct stats_hcache, prev)),
		     [o_runs] "i" (offsetof(struct stats_hcache, runs))),
		    ("rdx", "r8", "r9", "r10", "r11"),
		    (unregistered, full));
	*unit = c;
	*acc_out = acc;
	return HC_DONE;
full:
	return HC_FULL;
unregistered:
	return HC_UNREGISTERED;
}

/* Empty @g's cached count on the current CPU: what it held (0 if not @g's). */
static long hcache_take(const struct tally_stats_group *g)
{
	long acc;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_UNIT_
		    "movq %c[o_hc](%[g]), %%r8\n\t"
		    "cmpq %[g], (%%r8,%%rax)\n\t"
		    "jne %l[other]\n\t"
		    "addq %c[o_pcpu](%[g]), %%rax\n\t"
		    "movq %c[o_cacc](%%rax), %[acc]\n\t",
		    "movq $0, %c[o_cacc](%%rax)",
		    ([acc] "=&r" (acc)),
		    ([g] "r" (g),
		     [o_hc] "i" (offsetof(struct tally_stats_group, hcache)),
		     [o_pcpu] "i" (offsetof(struct tally_stats_group, pcpu)),
		     [o_cacc] "i" (offsetof(struct stats_pcpu, cacc))),
		    ("rax", "r8"),
		    (unregistered, other));
	return acc;
unregistered:
other:
	return 0;
}

/*
 * @g names itself in the current CPU's cache: returns the group it named
 * before (NULL, STATS_HCACHE_EVICTED, @g or another) and sets *@cpu.
 * NULL too if this thread has no rseq area.
 */
static struct tally_stats_group *hcache_name(struct tally_stats_group *g,
					     unsigned int *cpu)
{
	struct tally_stats_group *old;
	unsigned long c;

	TALLY_RSEQ_("movl %%eax, %k[c]\n\t"
		    TALLY_RSEQ_CPU_UNIT_
		    "addq %c[o_hc](%[g]), %%rax\n\t"
		    "movq (%%rax), %[old]\n\t",
		    "movq %[g], (%%rax)",
		    ([old] "=&r" (old), [c] "=&r" (c)),
		    ([g] "r" (g),
		     [o_hc] "i" (offsetof(struct tally_stats_group, hcache))),
		    ("rax"),
		    (unregistered));
	*cpu = (unsigned int)c;
	return old;
unregistered:
	return NULL;
}

/*
 * What @g cached on @cpu, once no sequence may add to it any more (@g is
 * not named there): to the overs of its chain.  Only nonzero counts are
 * written (a CPU that never ran @g keeps its page untouched).
 */
static void hcache_release(struct tally_stats_group *g, unsigned int cpu)
{
	long *cacc = &pcpu_of(g, cpu)->cacc;

	if (__atomic_load_n(cacc, __ATOMIC_RELAXED))
		charge_overs(g, __atomic_exchange_n(cacc, 0,
						    __ATOMIC_RELAXED));
}

/*
 * @g takes the current CPU's cache: what the previous holder cached goes
 * to its chain.  Counted in @cpu's stealing count meanwhile, so that a
 * destroy of the previous holder waits for it.
 */
static __attribute__((noinline)) void steal(struct tally_stats_group *g,
					    unsigned int cpu)
{
	struct stats_hcache *hc = tally_percpu_ptr(g->hcache, cpu);
	struct tally_stats_group *old;
	unsigned int at = 0;

	__atomic_add_fetch(&hc->stealing, 1, __ATOMIC_SEQ_CST);
#ifdef __SANITIZE_THREAD__
	/* The sequence's store names g, its load the holder: a hand-off
	 * (of what each group's creation wrote) TSan cannot see in asm. */
	__tsan_release(g->hcache);
#endif
	old = hcache_name(g, &at);
#ifdef __SANITIZE_THREAD__
	__tsan_acquire(g->hcache);
#endif
	if (old && old != g && old != STATS_HCACHE_EVICTED)
		hcache_release(old, at);
	stats_count_leave(&hc->stealing);
}

/*
 * Before @g is freed, once nothing updates it: no CPU's cache names it,
 * no taker still moves its cached count, and what it cached went to its
 * chain.
 */
void stats_hcache_evict(struct tally_stats_group *g)
{
	struct tally_stats_tree *t = g->tree;
	unsigned int nr = t->domain->nr_cpus;

	if (!g->cache_cap)
		return;
	for (unsigned int cpu = 0; cpu < nr; cpu++) {
		struct stats_hcache *hc = tally_percpu_ptr(t->hcache, cpu);
		struct tally_stats_group *last = g;

		if (__atomic_load_n(&hc->last, __ATOMIC_RELAXED) == g)
			__atomic_compare_exchange_n(&hc->last, &last,
						    STATS_HCACHE_EVICTED, false,
						    __ATOMIC_SEQ_CST,
						    __ATOMIC_RELAXED);
	}
	for (unsigned int cpu = 0; cpu < nr; cpu++) {
		struct stats_hcache *hc = tally_percpu_ptr(t->hcache, cpu);

		stats_wait_for_pushes(&hc->stealing);
		hcache_release(g, cpu);
	}
}

void stats_hcache_fork_child(struct tally_stats_group *g, unsigned int cpu)
{
	const struct stats_hcache *hc = tally_percpu_ptr(g->tree->hcache, cpu);

	if (g->cache_cap && hc->last != g)
		hcache_release(g, cpu);
}

/* --- updates ------------------------------------------------------------- */

/* After the sequence committed on the CPU @unit bytes from CPU 0's. */
static inline void after_update(struct tally_stats_group *g, size_t unit,
				unsigned long acc)
{
	unsigned int cpu = (unsigned int)(unit >> TALLY_PERCPU_UNIT_SHIFT);

	tally_inject(TALLY_INJECT_STATS_AFTER_COMMIT);
	after_commit(g, unit, stats_updates_fence());
	if (__builtin_expect(acc >= g->batch, 0)) {
		if ((acc & ~HC_TAKE) >= g->batch)
			move_counts(g, cpu);
		if (acc & HC_TAKE)
			steal(g, cpu);
	}
}

/*
 * The update when @g's cached count is full on this CPU, or this thread
 * has no rseq area yet.  Full: the count goes to the overs of the chain
 * (once per quarter batch: a load each while they are past flush_at),
 * and the update to the chain; the next one caches again.  No rseq area:
 * the chain, whose slow path registers the thread or takes the fallback.
 */
static __attribute__((noinline)) int
mod_slow(struct tally_stats_group *g, unsigned int stat, long delta,
	 long hint, enum hc_result why)
{
	unsigned long acc;
	unsigned int cpu;

	if (why == HC_FULL) {
		long held = hcache_take(g);

		if (held)
			charge_overs(g, held);
	}
	acc = tally_percpu_add_hints((long *)g->pcpu, g->chain_offs,
				     g->nr_chain, hint, &g->pcpu->stat[stat],
				     delta, &cpu);
	after_update(g, (size_t)cpu << TALLY_PERCPU_UNIT_SHIFT, acc);
	return 0;
}

int tally_stats_mod(struct tally_stats_group *g, unsigned int stat, long delta)
{
	enum hc_result why;
	unsigned long acc;
	size_t unit;
	long hint;
	int err = check_update(g, stat, delta);

	if (__builtin_expect(err || g->simulated || !delta, 0))
		return err ? err : g->simulated ? -EINVAL : 0;
	hint = hint_of(g, delta);
	why = hc_update(g, hint, &g->pcpu->stat[stat], delta, &unit, &acc);
	if (__builtin_expect(why != HC_DONE, 0))
		return mod_slow(g, stat, delta, hint, why);
	after_update(g, unit, acc);
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
	after_commit(g, (size_t)cpu << TALLY_PERCPU_UNIT_SHIFT, false);
	if (acc >= g->batch)
		move_counts(g, cpu);
	return 0;
}
