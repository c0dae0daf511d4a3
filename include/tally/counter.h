/* SPDX-License-Identifier: MIT */
#ifndef TALLY_COUNTER_H
#define TALLY_COUNTER_H

/*
 * tally/counter.h - hierarchical per-CPU counters.
 *
 * An add touches only the current CPU's slot (an rseq add-return, no
 * atomic).  Whenever that slot crosses a multiple of the batch, the crossed
 * amount (the "carry") is added atomically to the leaf item shared by a
 * few neighbouring CPUs; that item carries on to its parent when it crosses
 * a multiple of batch x arity, and so on.  From 17 CPUs up the top level
 * is one root item, and the approximate sum is one load:
 *
 *   level 3 (root)                [        R        ]     approximate sum
 *   level 2                  [   i   ]           [   j   ]
 *   level 1                [ a ]   [ b ]       [ c ]   [ d ]
 *   level 0 (per CPU)     c0  c1  c2  c3      c4  c5  c6  c7
 *
 * Up to 16 CPUs there is no root, whose cache line every CPU's carries
 * would share: the tree is one level of at most 8 items, each on its own
 * line, and the approximate sum adds them (at most 8 loads).  Up to 8 CPUs
 * each CPU has its own item; from 9 to 16 two neighbouring CPUs share one
 * (SMT siblings when the topology is known, tally_domain_shape()):
 *
 *   level 1 (top, summed)   [ a ] [ b ] [ c ] [ d ]        up to 8 CPUs
 *   level 0 (per CPU)        c0    c1    c2    c3
 *
 * The precise sum adds every CPU's slot.
 *
 * Accuracy.  At quiescence (no add in flight):
 *
 *	precise - under <= approximate <= precise + over
 *
 * Every slot and item keeps the remainder it has not carried, always in
 * [0, step - step_below] where step is batch at level 0 and batch times the
 * arities up to that level above it, so the approximation never exceeds
 * the precise sum (over = 0) and
 *
 *	under = nr_cpus * (batch - 1)
 *	      + sum over levels l = 1 .. L-1 of
 *		items_l * batch * a_1 * ... * a_(l-1) * (a_l - 1)
 *
 * where items_l counts the level-l items that have at least one CPU; the
 * top level L keeps all it receives and adds nothing.  Up to 16 CPUs L is
 * 1 and under is the slots' share nr_cpus * (batch - 1) alone.  The
 * kernel's simpler formula batch * L * 2^order is an upper bound of it.
 * While adds are in flight the difference can exceed the bound.
 *
 *	CPUs   shape (top items)   batch   under (tally)   kernel formula
 *	   2   {1}       (2)          32              62               64
 *	   4   {1}       (4)          32             124              128
 *	   8   {1}       (8)          32             248              256
 *	  16   {2}       (8)          32             496              512
 *	  17   {4,4,2}   (1)          32            2063             3072
 *	  64   {4,4,4}   (1)          32            5056             6144
 *	 256   {8,8,4}   (1)          32           22272            24576
 *	 384   {8,8,8}   (1)          32           40576            49152
 *	4096   {8,8,8,8} (1)          32          471040           524288
 *
 *
 * tally_counter_accuracy() computes the bound for any domain and batch.
 *
 * NULL.  The functions that return an int return -EINVAL for a NULL
 * counter.  The reads (sums, min/max, accuracy range), set() and the
 * compares answer a value, where an error code would read as one: a NULL
 * counter breaks their contract, and they write "tally: FN() called with
 * a NULL counter" to stderr and abort(), in every build.
 *
 * fork().  A thread of the parent that had added to its CPU's slot but not
 * yet carried into the tree does not exist in the child.  So every live
 * counter is registered, and the child recomputes each counter's tree
 * items from its slots (the items of a quiet counter are a function of
 * the slots alone): the child's counters are exact and within the bound,
 * as if every add had completed.  This costs the child O(counters x
 * nr_cpus) in fork().  Counter init and destroy take one lock, held
 * across fork.  Being registered by address, an initialized counter must
 * not be moved or copied.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <tally/domain.h>
#include <tally/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/** struct tally_counter_item - one cache-line-aligned tree item. */
struct tally_counter_item {
	long value;
} __attribute__((aligned(64)));

/**
 * struct tally_counter - a hierarchical per-CPU counter.
 *
 * Fields are private: use the functions below.
 */
struct tally_counter {
	long *level0;				/* per-CPU slot */
	unsigned long batch;			/* power of two >= 2 */
	struct tally_counter_item *items;	/* levels 1..L, top last */
	struct tally_domain *domain;
	long bias;				/* added to both sums (set) */
	unsigned long under;			/* accuracy bound, see above */
	unsigned int flags;
	unsigned int nr_top;			/* top level's items (last) */
	/* Registry of live counters, for fork. */
	struct tally_counter *prev, *next;
};

/* Internal flag bits of struct tally_counter. */
#define TALLY_COUNTER_SIMULATED 0x1u
#define TALLY_COUNTER_OWNS_ITEMS 0x2u
#define TALLY_COUNTER_OWNS_PERCPU 0x4u

/**
 * tally_counter_init() - set up one counter at 0.
 * @c: the counter.
 * @d: its domain; NULL means the system domain.
 * @batch: power of two >= 2: how far a CPU's slot may move before it
 *	carries into the tree (the kernel uses 32 for RSS).
 *
 * On failure @c is zeroed (when not NULL): tally_counter_destroy() on it
 * does nothing.
 *
 * Context: MT-safe on distinct counters; not async-signal-safe: takes the
 * counter registry's mutex and the per-CPU pool's, allocates (malloc(),
 * mmap()), and with a NULL @d may build the system domain.
 *
 * Return: 0, -EINVAL for a NULL @c or a bad batch, -ENOMEM, or -ENODEV when
 * @d is NULL and the system domain cannot be built (see
 * tally_domain_system()).
 */
int tally_counter_init(struct tally_counter *c, struct tally_domain *d,
		       unsigned long batch);

/**
 * tally_counter_items_size() - bytes of item memory one counter needs.
 * @d: the domain; NULL means the system domain.
 *
 * Context: MT-safe; async-signal-safe when @d is not NULL (the first use of the
 * system domain builds it: pthread_once(), allocation, /sys read with stdio).
 *
 * Return: the size (a multiple of 64), or 0 when @d is NULL and the system's
 * CPUs cannot be read.
 */
size_t tally_counter_items_size(const struct tally_domain *d);

/**
 * tally_counter_init_many() - set up @nr counters with one per-CPU
 *	allocation.
 * @c: array of @nr counters.
 * @items: 64-byte aligned memory of @nr * tally_counter_items_size(@d)
 *	bytes owned by the caller, or NULL to let tally allocate it.
 * @nr: number of counters, 1 to %TALLY_PERCPU_UNIT / sizeof(long).
 * @d: their domain; NULL means the system domain.
 * @batch: as for tally_counter_init().
 *
 * The @nr level-0 slots of one CPU are adjacent: updating counter i and
 * counter j on one CPU touches one cache line.  Free with
 * tally_counter_destroy_many() on the same array.  On failure the counters
 * are zeroed (only @c[0] when @nr is out of range): destroying them with
 * the same @nr does nothing.
 *
 * Context: MT-safe on distinct counters; not async-signal-safe: takes the
 * counter registry's mutex and the per-CPU pool's, allocates (malloc(),
 * mmap()), and with a NULL @d may build the system domain.
 *
 * Return: 0, -EINVAL for NULL @c, @nr out of range, misaligned @items or a
 * bad batch, -ENOMEM, -ENODEV as for tally_counter_init().
 */
int tally_counter_init_many(struct tally_counter *c, void *items, size_t nr,
			    struct tally_domain *d, unsigned long batch);

/**
 * tally_counter_destroy() - free a counter from tally_counter_init().
 * @c: the counter; a counter whose init failed, or that was already
 *	destroyed, is ignored.
 *
 * Context: MT-safe on distinct counters (no other call on them may run); not
 * async-signal-safe: takes the counter registry's mutex and the per-CPU pool's,
 * frees memory.
 */
void tally_counter_destroy(struct tally_counter *c);

/**
 * tally_counter_destroy_many() - free counters from tally_counter_init_many().
 * @c: the array given to tally_counter_init_many().
 * @nr: its length.
 *
 * Context: MT-safe on distinct counters (no other call on them may run); not
 * async-signal-safe: takes the counter registry's mutex and the per-CPU pool's,
 * frees memory.
 */
void tally_counter_destroy_many(struct tally_counter *c, size_t nr);

/**
 * tally_counter_propagate() - internal: carry @carry from CPU @cpu's slot
 *	into the tree (tally_counter_add()'s slow path).
 * @c: the counter.
 * @cpu: the CPU whose slot crossed a multiple of the batch.
 * @carry: the multiples of the batch it crossed.
 *
 * Context: MT-safe, async-signal-safe: relaxed atomic adds, no lock, no
 * allocation, never waits.
 */
void tally_counter_propagate(struct tally_counter *c, unsigned int cpu,
			     long carry);

/**
 * tally_counter_add_simulated() - internal: tally_counter_add() on a
 *	simulated domain, on the current CPU modulo the domain's count.
 * @c: a counter on a simulated domain.
 * @inc: the increment.
 *
 * Context: MT-safe, async-signal-safe: relaxed atomic adds, no lock, no
 * allocation, never waits.
 */
void tally_counter_add_simulated(struct tally_counter *c, long inc);

/**
 * tally_counter_carry() - internal: the carry of a slot's move.
 * @orig: the value before.
 * @res: the value after.
 * @batch: the step, a power of two.
 *
 * The carry of a move from @orig to @res: the multiples of @batch crossed.
 * It equals the kernel's bit rule (low bits of |inc| cleared, plus one
 * batch when (inc ^ orig ^ res) & batch) and is computed without branches.
 * Unsigned arithmetic: a slot may wrap past LONG_MAX without harm.
 *
 * Context: MT-safe, async-signal-safe: arithmetic only.
 *
 * Return: the carry (a multiple of @batch, any sign).
 */
static inline long tally_counter_carry(unsigned long orig, unsigned long res,
				       unsigned long batch)
{
	return (long)((res & ~(batch - 1)) - (orig & ~(batch - 1)));
}

/**
 * tally_counter_add() - add @inc (any sign) on the current CPU.
 * @c: an initialized counter.
 * @inc: the increment.
 *
 * A few nanoseconds: an rseq add-return and, once per batch, an atomic add
 * per tree level crossed.  On a simulated domain the current CPU number is
 * taken modulo the domain's CPU count (use tally_counter_add_cpu() there).
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence, which a signal
 * restarts; no lock, no allocation, never waits.  Adds made by a signal handler
 * count once, like the others.
 */
static inline void tally_counter_add(struct tally_counter *c, long inc)
{
	unsigned long orig;
	unsigned int cpu;
	long res;

	if (__builtin_expect(c->flags & TALLY_COUNTER_SIMULATED, 0)) {
		tally_counter_add_simulated(c, inc);
		return;
	}
	res = tally_percpu_add_return(c->level0, inc, &cpu);
	orig = (unsigned long)res - (unsigned long)inc;
	/* A multiple of the batch was crossed iff a bit >= batch changed. */
	if (__builtin_expect((orig ^ (unsigned long)res) >= c->batch, 0))
		tally_counter_propagate(c, cpu,
					tally_counter_carry(orig, (unsigned long)res,
							    c->batch));
}

/**
 * tally_counter_add_extern() - tally_counter_add() as a function of the
 *	library.
 * @c: an initialized counter.
 * @inc: the increment.
 *
 * The same fast path compiled into libtally, for callers that cannot
 * compile the header's inline functions (another language's foreign
 * function interface, a dlsym() lookup): one call more than the inline
 * sequence.
 *
 * Context: as tally_counter_add().
 */
void tally_counter_add_extern(struct tally_counter *c, long inc);

/**
 * tally_counter_add_cpu() - add @inc on simulated CPU @cpu.
 * @c: a counter on a simulated domain.
 * @cpu: a CPU below the domain's count.
 * @inc: the increment.
 *
 * Atomic on the slot: threads may share a simulated CPU.
 *
 * Context: MT-safe, async-signal-safe: relaxed atomic adds, no lock, no
 * allocation, never waits.
 *
 * Return: 0, or -EINVAL for a NULL @c, a counter on the system domain or a
 * CPU out of range.
 */
int tally_counter_add_cpu(struct tally_counter *c, unsigned int cpu, long inc);

/**
 * tally_counter_approximate_sum() - the top level's items plus the bias.
 * @c: an initialized counter.
 *
 * One load (the root) from 17 CPUs up, at most 8 below (one line each).
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
long tally_counter_approximate_sum(const struct tally_counter *c);

/**
 * tally_counter_approximate_sum_positive() - as above, clamped at 0.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
long tally_counter_approximate_sum_positive(const struct tally_counter *c);

/**
 * tally_counter_precise_sum() - every CPU's slot plus the bias: O(nr_cpus).
 * @c: an initialized counter.
 *
 * Exact when no add is in flight.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
long tally_counter_precise_sum(const struct tally_counter *c);

/**
 * tally_counter_precise_sum_many() - precise sums of several counters in
 *	one pass over the CPUs.
 * @c: array of @nr initialized counters of one domain (e.g. from one
 *	tally_counter_init_many(), whose slots of a CPU share a cache line:
 *	each CPU's line is then read once, not @nr times).
 * @nr: 1 to %TALLY_PERCPU_UNIT / sizeof(long).
 * @sums: set to each counter's precise sum, as tally_counter_precise_sum()
 *	gives it.
 *
 * O(nr_cpus * @nr) loads.  Exact when no add is in flight.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 *
 * Return: 0, or -EINVAL for NULL @c or @sums, @nr out of range, a
 * destroyed counter or counters of different domains (@sums untouched).
 */
int tally_counter_precise_sum_many(const struct tally_counter *c, size_t nr,
				   long *sums);

/**
 * tally_counter_precise_sum_positive() - as above, clamped at 0.
 *
 * A sum taken while adds run can observe a decrement before the increment
 * it follows; callers that divide by a size want this variant.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
long tally_counter_precise_sum_positive(const struct tally_counter *c);

/**
 * tally_counter_approximate_accuracy_range() - accumulate the bounds.
 * @c: an initialized counter.
 * @under: incremented by how far the approximation may be below the
 *	precise sum.
 * @over: incremented by how far it may be above.
 *
 * Adds into the caller's variables (saturating), so the range of a sum of
 * counters is accumulated by calling this once per counter.
 *
 * Context: MT-safe, async-signal-safe: no lock, no allocation (@under is the
 * caller's, updated without an atomic).
 */
void tally_counter_approximate_accuracy_range(const struct tally_counter *c,
					      unsigned long *under,
					      unsigned long *over);

/**
 * tally_counter_accuracy() - the bounds for a domain and a batch.
 * @d: the domain; NULL means the system domain.
 * @batch: power of two >= 2.
 * @under: set to the largest precise - approximate at quiescence.
 * @over: set to the largest approximate - precise at quiescence.
 *
 * Context: MT-safe; async-signal-safe when @d is not NULL (the first use of the
 * system domain builds it: pthread_once(), allocation, /sys read with stdio).
 *
 * Return: 0, -EINVAL for a bad batch or NULL outputs, -ENODEV when @d is
 * NULL and the system's CPUs cannot be read.
 */
int tally_counter_accuracy(const struct tally_domain *d, unsigned long batch,
			   unsigned long *under, unsigned long *over);

/**
 * tally_counter_approximate_min_max_range() - the interval that must hold
 *	the precise value.
 * @approx: an approximate sum (or a sum of several).
 * @under: the accumulated under bound.
 * @over: the accumulated over bound.
 * @min: set to approx - over (saturated at LONG_MIN).
 * @max: set to approx + under (saturated at LONG_MAX).
 *
 * Context: MT-safe, async-signal-safe: arithmetic only.
 */
void tally_counter_approximate_min_max_range(long approx, unsigned long under,
					     unsigned long over, long *min,
					     long *max);

/**
 * tally_counter_approximate_min_max() - [min, max] holding the precise sum.
 * @c: an initialized counter.
 * @min: set to the smallest value the precise sum can have.
 * @max: set to the largest.
 *
 * Sums are modulo 2^64: when approximate + under passes LONG_MAX the
 * precise sum may be just above LONG_MIN (its approximation wrapped), so
 * [LONG_MIN, LONG_MAX] is returned and the comparisons cannot decide
 * from the approximation alone.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
void tally_counter_approximate_min_max(const struct tally_counter *c,
				       long *min, long *max);

/**
 * tally_counter_approximate_compare() - compare two counters from their
 *	approximations alone.
 * @a: first counter.
 * @b: second counter.
 *
 * Neither counter may be NULL (see tally_counter_precise_compare()).
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no
 * allocation (a NULL counter makes it write() its message and abort()).
 *
 * Return: -1 when @a is surely below @b, 1 when surely above, 0 when their
 * ranges overlap and the approximations cannot decide.
 */
int tally_counter_approximate_compare(const struct tally_counter *a,
				      const struct tally_counter *b);

/**
 * tally_counter_approximate_compare_value() - compare a counter with @v.
 * @c: the counter.
 * @v: the value.
 *
 * @c may not be NULL (see tally_counter_precise_compare()).
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no
 * allocation (a NULL counter makes it write() its message and abort()).
 *
 * Return: -1 when the counter is surely below @v, 1 when surely above, 0
 * when undecided.
 */
int tally_counter_approximate_compare_value(const struct tally_counter *c,
					    long v);

/**
 * tally_counter_precise_compare() - compare two counters exactly.
 * @a: first counter.
 * @b: second counter.
 *
 * Uses the approximations first and takes precise sums only when they
 * cannot decide, starting with the counter whose range is wider.
 *
 * The four compare functions answer in the sign of one int, where an error
 * code would read as "below": they have no error return.  A NULL counter
 * breaks their contract: they print a message on stderr and abort(), in
 * every build.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no
 * allocation (a NULL counter makes it write() its message and abort()).
 *
 * Return: -1, 0 or 1 as @a's precise sum is below, equal to or above @b's.
 */
int tally_counter_precise_compare(const struct tally_counter *a,
				  const struct tally_counter *b);

/**
 * tally_counter_precise_compare_value() - compare a counter with @v exactly.
 * @c: the counter.
 * @v: the value.
 *
 * @c may not be NULL (see tally_counter_precise_compare()).
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no
 * allocation (a NULL counter makes it write() its message and abort()).
 *
 * Return: -1, 0 or 1 as the precise sum is below, equal to or above @v.
 */
int tally_counter_precise_compare_value(const struct tally_counter *c, long v);

/**
 * tally_counter_set() - make the counter read @v.
 * @c: an initialized counter.
 * @v: the new value.
 *
 * Adjusts the bias so that the precise sum is @v; the tree is untouched,
 * so the accuracy bounds still hold.  Adds that run concurrently may be
 * absorbed into the bias: call it when the counter is quiet.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads and one relaxed store, no
 * lock, no allocation (concurrent adds may be absorbed, see above).
 */
void tally_counter_set(struct tally_counter *c, long v);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_COUNTER_H */
