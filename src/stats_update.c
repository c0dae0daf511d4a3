// SPDX-License-Identifier: MIT
/*
 * stats_update.c - the update path of the statistics tree.
 *
 * tally_stats_mod(G, i, delta) on CPU c, no lock and no allocation:
 *
 *   1. if G holds c's hint cache (G was updated twice in a row on c) and
 *      it has room, one rseq sequence adds hint = min(|delta|, threshold
 *      + 1) to it and commits delta to G's stat[i] on c: two lines, the
 *      tree's for c and G's, so a run of updates of one group costs the
 *      same at any depth; a cache that would reach a quarter batch goes to
 *      the overs of G's chain first (a load each while they are past the
 *      flush point);
 *   1'. otherwise one rseq sequence adds the hint to the per-CPU
 *      threshold count of G and of each ancestor (the chain: byte offsets
 *      kept in G, the same on every CPU, so no pointer chasing), then
 *      commits delta;
 *   2. if (G, c) is idle, claims it (idle -> listed) and pushes it on c's
 *      lock-free list; c's pushing count covers the claim and the push;
 *   3. once a count reaches the batch, it moves to its group's over with
 *      an atomic exchange on c's slot, c being the CPU of step 1' even if
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
 * plain adds in one sequence after a look at the CPU's cache.  The claim
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
 * Each CPU of a tree caches the threshold hint of one group, the last that
 * took the cache (struct stats_hcache): while consecutive updates on a CPU
 * go to that group, the hint is added to the cache, in the CPU's line of
 * the tree, instead of to a count per chain level, one line each.  Neither
 * the group nor its ancestors see it until the cache would reach cache_cap
 * (a quarter batch): then the update empties it into the chain's overs.
 * A group flushes past flush_at, its threshold less cache_cap - 1 per CPU:
 * the read bound still holds.
 *
 * A cache holding nothing is taken by a group updated twice in a row on
 * the CPU (not by every group of a spread of updates, each taking it from
 * the last before it was used).  Only updates of the cached group add to
 * it, and only they empty it, so no update ever touches another group
 * than its own.  A group is evicted when it is destroyed
 * (stats_hcache_evict()).  Without rseq (fallback mode, simulated CPUs)
 * no group takes the cache.
 */
enum hc_result { HC_DONE, HC_FULL, HC_UNREGISTERED };

/*
 * The sequence of an update, on the current CPU c, with c's cache at r11:
 *
 *   - @g holds the cache: hint added to it unless that fills it (then
 *     out to "full", no store);
 *   - otherwise: hint added to each count of the chain, ORed into acc;
 *     if the cache holds nothing, @g takes it when it made the CPU's last
 *     update that missed it too (prev), else becomes prev;
 *
 * then the commit of @v to @stat.  The stores before the commit are redone
 * if the sequence restarts: a hint may be counted twice (a flush a little
 * early), a cache taken twice by the same group.
 */
/* Each count of the chain (r8: offsets, r10: this CPU's copy of pcpu). */
#define HC_LEVELS_							\
	"movl %c[o_nr](%[g]), %%ecx\n\t"				\
	"11:\n\t"							\
	"movq (%%r8), %%r9\n\t"					\
	"movq (%%r10,%%r9), %%r11\n\t"				\
	"addq %[hint], %%r11\n\t"					\
	"movq %%r11, (%%r10,%%r9)\n\t"				\
	"orq %%r11, %[acc]\n\t"					\
	"addq $8, %%r8\n\t"						\
	"decl %%ecx\n\t"						\
	"jnz 11b\n\t"

/*
 * The rseq area's operands, addressed from %fs: no register for the
 * area's address.
 */
#define HC_AREA_OPERANDS_(off)						\
	[rseq_off] "r" (off),						\
	[rseq_cs] "m" (*(__seg_fs uint64_t *)((off) + TALLY_RSEQ_CS_OFFSET)), \
	[cpu_id] "m" (*(__seg_fs uint32_t *)((off) +			\
					       TALLY_RSEQ_CPU_ID_OFFSET)) \
	TALLY_RSEQ_DELAY_OPERAND_

#define HC_CS_							\
	__asm__ __volatile__ goto(					\
		TALLY_RSEQ_CS_BEGIN_("%%r9")				\
		"shlq %[shift], %%rax\n\t"				\
		"xorl %k[acc], %k[acc]\n\t"				\
		"movq %c[o_hc](%[g]), %%r11\n\t"			\
		"addq %%rax, %%r11\n\t"					\
		"cmpq %[g], (%%r11)\n\t"				\
		"jne 10f\n\t"						\
		"movq 8(%%r11), %%r9\n\t"				\
		"addq %[hint], %%r9\n\t"				\
		"cmpq %c[o_cap](%[g]), %%r9\n\t"			\
		"jae %l[full]\n\t"					\
		"movq %%r9, 8(%%r11)\n\t"				\
		"jmp 20f\n\t"						\
		"10:\n\t"						\
		"movq %c[o_pcpu](%[g]), %%r10\n\t"			\
		"addq %%rax, %%r10\n\t"					\
		"movq %c[o_chain](%[g]), %%r8\n\t"			\
		HC_LEVELS_						\
		"cmpq $0, %c[o_cap](%[g])\n\t"				\
		"je 20f\n\t"						\
		"movq %c[o_hc](%[g]), %%r11\n\t"			\
		"addq %%rax, %%r11\n\t"					\
		"cmpq $0, 8(%%r11)\n\t"					\
		"jne 20f\n\t"						\
		"cmpq %[g], 16(%%r11)\n\t"				\
		"je 15f\n\t"						\
		"movq %[g], 16(%%r11)\n\t"				\
		"jmp 20f\n\t"						\
		"15:\n\t"						\
		"movq %[g], (%%r11)\n\t"				\
		"20:\n\t"						\
		"addq %[v], (%[stat],%%rax)\n\t"			\
		"2:\n\t"						\
		: [c] "=&a" (c), [acc] "=&r" (acc)			\
		: HC_AREA_OPERANDS_(off),				\
		  [g] "r" (g), [hint] "r" (hint), [stat] "r" (stat),	\
		  [v] "r" (v),						\
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT),		\
		  [o_hc] "i" (offsetof(struct tally_stats_group, hcache)), \
		  [o_cap] "i" (offsetof(struct tally_stats_group, cache_cap)), \
		  [o_pcpu] "i" (offsetof(struct tally_stats_group, pcpu)), \
		  [o_chain] "i" (offsetof(struct tally_stats_group, chain_offs)), \
		  [o_nr] "i" (offsetof(struct tally_stats_group, nr_chain)) \
		: "rcx", "r8", "r9", "r10", "r11", "memory", "cc"	\
		: aborted, unregistered, full)

/*
 * The update of @stat (a per-CPU pointer into @g's stats) by @v with
 * @hint, in one sequence: through the cache or the chain (see above).
 * Sets *@unit to the CPU's distance from CPU 0's copies and *@acc to the
 * OR of the chain's counts it added to (0 through the cache).
 */
static inline enum hc_result hc_update(const struct tally_stats_group *g,
				       long hint, long *stat, long v,
				       size_t *unit, unsigned long *acc_out)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned long c, acc;

retry:
	HC_CS_;
	*unit = c;
	*acc_out = acc;
	return HC_DONE;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
full:
	return HC_FULL;
unregistered:
	return HC_UNREGISTERED;
}

/* Empty @g's cache on the current CPU: what it held (0 if not @g's). */
static long hcache_take(struct stats_hcache *hc,
			const struct tally_stats_group *g)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long acc;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"shlq %[shift], %%rax\n\t"
		"addq %[hc], %%rax\n\t"
		"cmpq %[g], (%%rax)\n\t"
		"jne %l[other]\n\t"
		"movq 8(%%rax), %[acc]\n\t"
		"movq $0, 8(%%rax)\n\t"
		"2:\n\t"
		: [acc] "=&r" (acc)
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [hc] "r" (hc), [g] "r" (g),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "memory", "cc"
		: aborted, unregistered, other);
	return acc;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
other:
	return 0;
}

/*
 * Before @g is freed: no CPU's cache may name it, and what they held for
 * it goes to its chain's overs (atomics: the counts belong to the CPUs'
 * sequences).  Nothing updates @g any more, so only an update of another
 * group that finds a cache empty may write one meanwhile: it takes the
 * cache (a store of last), which cannot have been @g's if it held
 * something.
 */
void stats_hcache_evict(struct tally_stats_group *g)
{
	struct tally_stats_tree *t = g->tree;

	for (unsigned int cpu = 0; cpu < t->domain->nr_cpus; cpu++) {
		struct stats_hcache *hc = tally_percpu_ptr(t->hcache, cpu);
		struct tally_stats_group *last = g;
		long acc;

		if (__atomic_load_n(&hc->last, __ATOMIC_RELAXED) != g ||
		    !__atomic_compare_exchange_n(&hc->last, &last,
						 STATS_HCACHE_EVICTED, false,
						 __ATOMIC_SEQ_CST,
						 __ATOMIC_RELAXED))
			continue;
		acc = __atomic_load_n(&hc->acc, __ATOMIC_SEQ_CST);
		/* Taken since: then it held nothing of @g's. */
		if (!acc || __atomic_load_n(&hc->last, __ATOMIC_SEQ_CST) !=
				    STATS_HCACHE_EVICTED)
			continue;
		charge_overs(g, acc);
		__atomic_store_n(&hc->acc, 0, __ATOMIC_SEQ_CST);
	}
}

/* --- updates ------------------------------------------------------------- */

/* After the sequence committed on the CPU @unit bytes from CPU 0's. */
static inline void after_update(struct tally_stats_group *g, size_t unit,
				unsigned long acc)
{
	tally_inject(TALLY_INJECT_STATS_AFTER_COMMIT);
	after_commit(g, unit, stats_updates_fence());
	if (__builtin_expect(acc >= g->batch, 0))
		move_counts(g, (unsigned int)(unit >> TALLY_PERCPU_UNIT_SHIFT));
}

/*
 * The update when @g's cache is full on this CPU, or this thread has no
 * rseq area yet.  Full: what the cache held goes to the overs of the
 * chain (once per quarter batch: a load each while they are past
 * flush_at), and the update to the chain; the next finds the cache empty.
 * No rseq area: the chain, whose slow path registers the thread or takes
 * the fallback.
 */
static __attribute__((noinline)) int
mod_slow(struct tally_stats_group *g, unsigned int stat, long delta,
	 long hint, enum hc_result why)
{
	unsigned long acc;
	unsigned int cpu;

	if (why == HC_FULL) {
		long held = hcache_take(g->hcache, g);

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
