/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_CHARGE_DESIGNS_H
#define TALLY_BENCH_CHARGE_DESIGNS_H

/*
 * charge_designs.h - the memory-charging designs that `tally bench charge`
 * compares, behind one small interface: tally's memory groups
 * (tally/memcg.h), the Linux kernel's memcg (a hierarchical page counter
 * refilled from a per-CPU stock), ClickHouse's MemoryTracker (per-thread
 * untracked bytes, then one atomic per level) and the bare page counter
 * (one atomic per level on every charge).
 *
 * Every design is built on the same tree shape: a root without a limit
 * and a chain of @depth groups under it, each with the same max; threads
 * charge the deepest group, or, with leaves, the leaf groups under it in
 * turn (more groups than a CPU's stock caches: tally's slots evict, the
 * kernel's one-group stock drains, ClickHouse flushes a thread's untracked
 * bytes when it moves to another group, as a thread leaving a query does).  The timed loop (charge_pairs_loop()) is
 * inlined into each design's pairs() with its own charge and uncharge, so
 * no timing has an indirect call in it.
 */

#include <stdbool.h>
#include <tally/domain.h>

/** The kernel's MEMCG_CHARGE_BATCH: 64 pages of 4 KiB. */
#define CHARGE_KERNEL_BATCH (64l * 4096)
/** ClickHouse's default max_untracked_memory: 4 MiB. */
#define CHARGE_CLICKHOUSE_UNTRACKED (4l << 20)
/** Deepest chain. */
#define CHARGE_MAX_DEPTH 8

/**
 * struct charge_setup - the tree every design builds.
 * @domain: NULL for this machine's CPUs, or a simulated domain (charges
 *	then name their CPU).
 * @depth: groups in the chain under the root, 1 to %CHARGE_MAX_DEPTH.
 * @max: the max of every group of the chain (the root has none).
 * @tally_flags: the flags of tally's charges.
 * @leaves: 0, or the number of groups without a limit under the deepest
 *	one; charges then go to the leaf struct charge_thread names.
 */
struct charge_setup {
	struct tally_domain *domain;
	unsigned int depth;
	long max;
	unsigned int tally_flags;
	unsigned int leaves;
};

/**
 * struct charge_thread - what a design keeps per thread.
 * @untracked: ClickHouse's thread-local untracked bytes (others: unused).
 * @untracked_leaf: the leaf they belong to (ClickHouse).
 * @leaf: the leaf the next charge or uncharge goes to, below @nr_leaves
 *	(0 without leaves: the deepest group).
 * @nr_leaves: the setup's leaves, set by the caller.
 */
struct charge_thread {
	long untracked;
	unsigned int untracked_leaf;
	unsigned int leaf;
	unsigned int nr_leaves;
};

/** The CPU argument of a charge on this machine (the current CPU). */
#define CHARGE_THIS_CPU (-1)

/**
 * struct charge_design - one design under test.
 * @name: its name in the table and the JSON ("design").
 * @what: a few words describing it, for the legend (lines after the
 *	first indented by 15 columns).
 * @create: build the tree of @s; NULL with errno set on failure.
 * @destroy: free what @create built.
 * @charge: charge @bytes to the deepest group from thread @t, on CPU
 *	@cpu of a simulated domain or %CHARGE_THIS_CPU: 0 or -ENOMEM.
 * @uncharge: give back @bytes charged by @charge.
 * @thread_exit: what the thread's end does (ClickHouse flushes its
 *	untracked bytes); the thread charges nothing after it.
 * @usage: the design's own view of the deepest group's usage, as its
 *	cheap read gives it (no drain).
 * @drained_usage: the usage once every per-CPU or per-thread cache is
 *	given back (at quiescence, after every thread_exit): the exact usage.
 * @pairs: the timed loop on this machine, @n charge + uncharge pairs of
 *	@size bytes in waves of @wave bytes (see charge_pairs_loop()).
 *	Return: the charges refused.
 */
struct charge_design {
	const char *name;
	const char *what;
	void *(*create)(const struct charge_setup *s);
	void (*destroy)(void *d);
	int (*charge)(void *d, struct charge_thread *t, int cpu, long bytes);
	void (*uncharge)(void *d, struct charge_thread *t, int cpu,
			 long bytes);
	void (*thread_exit)(void *d, struct charge_thread *t);
	long (*usage)(void *d);
	long (*drained_usage)(void *d);
	unsigned long (*pairs)(void *d, struct charge_thread *t,
			       unsigned long n, long size, long wave);
};

extern const struct charge_design charge_design_tally;
extern const struct charge_design charge_design_kernel;
extern const struct charge_design charge_design_clickhouse;
extern const struct charge_design charge_design_page_counter;

/*
 * The timed loop, inlined into each design's pairs() with constant
 * @charge and @uncharge.  A wave charges @wave / @size pieces of @size
 * bytes, then uncharges them: the thread's working set swings from 0 to
 * @wave and back, as a request or a query allocates and frees, so the
 * shared counters see the whole swing (a charge right after its uncharge
 * would stay in every cache).  A refused charge is not uncharged and
 * still counts as a pair.  With leaves, a wave's charges go to the leaves
 * in turn, each one's to the next leaf, and its uncharges in the same
 * order.
 */
static inline __attribute__((always_inline)) unsigned long
charge_pairs_loop(void *d, struct charge_thread *t, unsigned long n,
		  long size, long wave,
		  int (*charge)(void *d, struct charge_thread *t, int cpu,
				long bytes),
		  void (*uncharge)(void *d, struct charge_thread *t, int cpu,
				   long bytes),
		  bool with_leaves)
{
	unsigned long per = wave >= size ? (unsigned long)(wave / size) : 1;
	unsigned long refused = 0;
	unsigned int leaves = with_leaves ? t->nr_leaves : 0;

	while (n) {
		unsigned long k = n < per ? n : per, held = 0;

		t->leaf = 0;
		for (unsigned long i = 0; i < k; i++) {
			if (charge(d, t, CHARGE_THIS_CPU, size)) {
				refused++;
			} else {
				held++;
				if (leaves && ++t->leaf == leaves)
					t->leaf = 0;
			}
		}
		t->leaf = 0;
		for (unsigned long i = 0; i < held; i++) {
			uncharge(d, t, CHARGE_THIS_CPU, size);
			if (leaves && ++t->leaf == leaves)
				t->leaf = 0;
		}
		n -= k;
	}
	return refused;
}

/*
 * A design's entry points from its charge and uncharge written once,
 * inline, with a constant @leaves (PREFIX_charge_to(), _uncharge_to()):
 * the timed loop without leaves is compiled without them, as the rows
 * without leaf groups always were; charge() and uncharge() of the
 * interface (untimed: the fill, the oracle) take either.
 */
#define CHARGE_DESIGN_ENTRIES(prefix)					\
static int prefix##_charge_deepest(void *d, struct charge_thread *t,	\
				   int cpu, long n)			\
{									\
	return prefix##_charge_to(d, t, cpu, n, false);			\
}									\
static void prefix##_uncharge_deepest(void *d, struct charge_thread *t, \
				      int cpu, long n)			\
{									\
	prefix##_uncharge_to(d, t, cpu, n, false);			\
}									\
static int prefix##_charge(void *d, struct charge_thread *t, int cpu,	\
			   long n)					\
{									\
	return prefix##_charge_to(d, t, cpu, n, true);			\
}									\
static void prefix##_uncharge(void *d, struct charge_thread *t, int cpu, \
			      long n)					\
{									\
	prefix##_uncharge_to(d, t, cpu, n, true);			\
}									\
static unsigned long prefix##_pairs(void *d, struct charge_thread *t,	\
				    unsigned long n, long size, long wave) \
{									\
	if (t->nr_leaves)						\
		return charge_pairs_loop(d, t, n, size, wave,		\
					 prefix##_charge,		\
					 prefix##_uncharge, true);	\
	return charge_pairs_loop(d, t, n, size, wave,			\
				 prefix##_charge_deepest,		\
				 prefix##_uncharge_deepest, false);	\
}

#endif /* TALLY_BENCH_CHARGE_DESIGNS_H */
