// SPDX-License-Identifier: MIT
/*
 * counter.c - hierarchical per-CPU counters (slow paths and reads).
 *
 * Invariant (at quiescence): for every CPU slot and every item,
 *
 *	value - carried_up  is in  [0, step - step_below]
 *
 * with step = batch for slots and batch * a_1 * ... * a_l for a level-l
 * item (step_below = 0 for slots), because a carry is exactly the
 * multiples of step that the value crossed (tally_counter_carry()).  The
 * top level's items keep everything they receive, so
 *
 *	precise = sum(slots) + bias = sum(top) + bias + sum(remainders)
 *
 * and approximate = sum(top) + bias is below precise by at most the sum
 * of the largest remainders (counter.h gives the formula and a table).
 *
 * The top level (domain.c) is one root from 17 CPUs up, and up to 16 CPUs
 * at most 8 items: one per CPU up to 8 CPUs, one per pair of neighbours
 * at 9 to 16.  A root on a small machine is one line that every CPU
 * carries into once per batch of adds: at 2 CPUs its bouncing was most of
 * the add's cost.  A private top item is written only by its CPU's carries
 * (atomically: a migrated thread may carry from another CPU), the read
 * sums at most 8 lines that change once per batch, and the bound is the
 * slots' share alone, below the tree's.
 *
 * Costs: add O(1) (one rseq add-return, plus one atomic per level crossed
 * once per batch); approximate sum O(1), the top level's 1 to 8 loads;
 * precise sum O(nr_cpus); compare O(1) unless the ranges overlap.
 *
 * fork(): live counters are in a registry (init and destroy take its lock,
 * held across fork); the child recomputes every counter's items from its
 * slots, because a parent's thread caught between its slot add and its
 * carry is gone.  Since the items of a quiet counter are the carries of
 * the slots' values from 0, this restores the invariant exactly.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/counter.h>
#include "runtime/contract.h"
#include "counter_internal.h"
#include "runtime/fork.h"
#include "runtime/domain_internal.h"
#include "runtime/inject.h"

/* Most counters of one tally_counter_init_many(). */
#define MAX_MANY (TALLY_PERCPU_UNIT / sizeof(long))

static bool valid_batch(unsigned long batch)
{
	return batch >= 2 && !(batch & (batch - 1));
}

static unsigned long add_saturated(unsigned long a, unsigned long b)
{
	return a + b < a ? ULONG_MAX : a + b;
}

static unsigned long mul_saturated(unsigned long a, unsigned long b)
{
	unsigned long r;

	return __builtin_mul_overflow(a, b, &r) ? ULONG_MAX : r;
}

/* The largest precise - approximate for @d and @batch (counter.h). */
static unsigned long under_bound(const struct tally_domain *d,
				 unsigned long batch)
{
	unsigned long under = mul_saturated(d->nr_cpus, batch - 1);
	unsigned long step_below = batch;

	/* The top level keeps all it receives: no remainder there. */
	for (unsigned int l = 0; l + 1 < d->nr_levels; l++) {
		unsigned long rem = mul_saturated(step_below, d->arity[l] - 1);

		under = add_saturated(under, mul_saturated(d->used[l], rem));
		step_below = mul_saturated(step_below, d->arity[l]);
	}
	return under;
}

int tally_counter_accuracy(const struct tally_domain *d, unsigned long batch,
			   unsigned long *under, unsigned long *over)
{
	if (!under || !over || !valid_batch(batch))
		return -EINVAL;
	d = tally_domain_resolve((struct tally_domain *)d);
	if (!d)
		return -ENODEV;
	*under = under_bound(d, batch);
	*over = 0;
	return 0;
}

size_t tally_counter_items_size(const struct tally_domain *d)
{
	d = tally_domain_resolve((struct tally_domain *)d);
	return d ? d->nr_items * sizeof(struct tally_counter_item) : 0;
}

static void setup(struct tally_counter *c, struct tally_domain *d,
		  long *level0, struct tally_counter_item *items,
		  unsigned long batch, unsigned int flags)
{
	c->level0 = level0;
	c->batch = batch;
	c->items = items;
	c->domain = d;
	c->bias = 0;
	c->under = under_bound(d, batch);
	c->flags = flags | (d->simulated ? TALLY_COUNTER_SIMULATED : 0);
	c->nr_top = d->nr_items - d->offset[d->nr_levels - 1];
}

/* --- registry of live counters, for fork --------------------------------- */

static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_counter *counters;

static void register_counters(struct tally_counter *c, size_t nr)
{
	pthread_mutex_lock(&counters_lock);
	for (size_t i = 0; i < nr; i++) {
		c[i].prev = NULL;
		c[i].next = counters;
		if (counters)
			counters->prev = &c[i];
		counters = &c[i];
	}
	pthread_mutex_unlock(&counters_lock);
}

static void unregister_counters(struct tally_counter *c, size_t nr)
{
	pthread_mutex_lock(&counters_lock);
	for (size_t i = 0; i < nr; i++) {
		if (c[i].prev)
			c[i].prev->next = c[i].next;
		else
			counters = c[i].next;
		if (c[i].next)
			c[i].next->prev = c[i].prev;
	}
	pthread_mutex_unlock(&counters_lock);
}

/* Modulo 2^64, like the carries. */
static void item_add(struct tally_counter_item *item, unsigned long v)
{
	item->value = (long)((unsigned long)item->value + v);
}

/*
 * The items of a quiet counter: each slot carries the multiples of the
 * batch its value crossed since 0 into its leaf item, each item the
 * multiples of its own step into its parent; the top level keeps it all.
 */
static void rebuild_items(struct tally_counter *c)
{
	const struct tally_domain *d = c->domain;
	struct tally_counter_item *item = c->items;
	unsigned long step = c->batch;

	for (unsigned int i = 0; i < d->nr_items; i++)
		item[i].value = 0;
	for (unsigned int cpu = 0; cpu < d->nr_cpus; cpu++)
		item_add(&item[tally_domain_item(d, cpu, 0)],
			 (unsigned long)tally_percpu_read_cpu(c->level0, cpu) &
				 ~(step - 1));
	for (unsigned int l = 0; l + 1 < d->nr_levels; l++) {
		unsigned int nr = (1u << d->order) >> d->shift[l];
		unsigned int up = d->shift[l + 1] - d->shift[l];

		step *= d->arity[l];
		for (unsigned int i = 0; i < nr; i++)
			item_add(&item[d->offset[l + 1] + (i >> up)],
				 (unsigned long)item[d->offset[l] + i].value &
					 ~(step - 1));
	}
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&counters_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&counters_lock);
}

/* The forking thread is the only one left: nothing moves the counters. */
static void fork_child(void)
{
	for (struct tally_counter *c = counters; c; c = c->next)
		rebuild_items(c);
	tally_mutex_reset(&counters_lock);
}

__attribute__((constructor)) static void install_fork_handlers(void)
{
	tally_fork_register(TALLY_FORK_COUNTER, fork_prepare, fork_parent,
			    fork_child);
}

int tally_counter_init_many(struct tally_counter *c, void *items, size_t nr,
			    struct tally_domain *d, unsigned long batch)
{
	size_t items_size;
	unsigned int owns = TALLY_COUNTER_OWNS_PERCPU;
	long *level0;

	/* A failed init leaves counters that destroy ignores. */
	if (c && nr)
		memset(c, 0, (nr <= MAX_MANY ? nr : 1) * sizeof(*c));
	if (!c || !nr || nr > MAX_MANY || !valid_batch(batch) ||
	    ((uintptr_t)items & 63))
		return -EINVAL;
	d = tally_domain_resolve(d);
	if (!d)
		return -ENODEV;
	items_size = d->nr_items * sizeof(struct tally_counter_item);
	if (!items) {
		items = aligned_alloc(64, nr * items_size);
		if (!items)
			return -ENOMEM;
		owns |= TALLY_COUNTER_OWNS_ITEMS;
	}
	level0 = tally_percpu_alloc(d, nr * sizeof(long), 0);
	if (!level0) {
		if (owns & TALLY_COUNTER_OWNS_ITEMS)
			free(items);
		return -ENOMEM;
	}
	memset(items, 0, nr * items_size);
	for (size_t i = 0; i < nr; i++)
		setup(&c[i], d, level0 + i,
		      (struct tally_counter_item *)((char *)items +
						    i * items_size),
		      batch, i ? 0 : owns);
	register_counters(c, nr);
	return 0;
}

int tally_counter_init(struct tally_counter *c, struct tally_domain *d,
		       unsigned long batch)
{
	return tally_counter_init_many(c, NULL, 1, d, batch);
}

void tally_counter_destroy_many(struct tally_counter *c, size_t nr)
{
	if (!c || !nr || !c->level0)
		return;
	unregister_counters(c, nr);
	if (c->flags & TALLY_COUNTER_OWNS_PERCPU)
		tally_percpu_free(c->domain, c->level0);
	if (c->flags & TALLY_COUNTER_OWNS_ITEMS)
		free(c->items);
	memset(c, 0, nr * sizeof(*c));
}

void tally_counter_destroy(struct tally_counter *c)
{
	tally_counter_destroy_many(c, 1);
}

void tally_counter_propagate(struct tally_counter *c, unsigned int cpu,
			     long carry)
{
	const struct tally_domain *d = c->domain;
	unsigned int l, top = d->nr_levels - 1;
	unsigned long step = c->batch;
	long *item;

	(void)tally_inject(TALLY_INJECT_COUNTER_BEFORE_CARRY);
	for (l = 0; l < top; l++) {
		unsigned long res;

		item = &c->items[tally_domain_item(d, cpu, l)].value;
		res = __atomic_add_fetch((unsigned long *)item,
					 (unsigned long)carry,
					 __ATOMIC_RELAXED);
		step *= d->arity[l];
		carry = tally_counter_carry(res - (unsigned long)carry, res,
					    step);
		if (!carry)
			return;
	}
	item = &c->items[tally_domain_item(d, cpu, top)].value;
	__atomic_add_fetch((unsigned long *)item, (unsigned long)carry,
			   __ATOMIC_RELAXED);
}

/* One update of simulated CPU @cpu (checked by the callers). */
static void add_on_cpu(struct tally_counter *c, unsigned int cpu, long inc)
{
	long res = tally_percpu_add_return_cpu(c->level0, cpu, inc);
	long carry = tally_counter_carry((unsigned long)res -
						 (unsigned long)inc,
					 (unsigned long)res, c->batch);

	if (carry)
		tally_counter_propagate(c, cpu, carry);
}

int tally_counter_add_cpu(struct tally_counter *c, unsigned int cpu, long inc)
{
	if (!c || !(c->flags & TALLY_COUNTER_SIMULATED) ||
	    cpu >= c->domain->nr_cpus)
		return -EINVAL;
	add_on_cpu(c, cpu, inc);
	return 0;
}

void tally_counter_add_simulated(struct tally_counter *c, long inc)
{
	add_on_cpu(c, tally_current_cpu() % c->domain->nr_cpus, inc);
}

static long load_bias(const struct tally_counter *c)
{
	return __atomic_load_n(&c->bias, __ATOMIC_RELAXED);
}

/*
 * The reads answer a value and the compares -1, 0 or 1, where an error
 * code would read as a value: a NULL counter breaks their contract and
 * aborts with a message, in every build.
 */
static void require_counter(const struct tally_counter *c, const char *fn)
{
	if (__builtin_expect(!c, 0))
		contract_null_abort(fn, "counter");
}

/* The top level, last of the items: 1, or up to 8 up to 16 CPUs. */
static const struct tally_counter_item *top_items(const struct tally_counter *c)
{
	return c->items + c->domain->nr_items - c->nr_top;
}

long tally_counter_approximate_sum(const struct tally_counter *c)
{
	const struct tally_counter_item *top;
	unsigned long sum;
	unsigned int nr;

	require_counter(c, __func__);
	nr = c->nr_top;
	top = top_items(c);
	sum = (unsigned long)load_bias(c) +
	      (unsigned long)__atomic_load_n(&top[0].value, __ATOMIC_RELAXED);

	for (unsigned int i = 1; i < nr; i++)
		sum += (unsigned long)__atomic_load_n(&top[i].value,
						      __ATOMIC_RELAXED);
	return (long)sum;
}

void counter_prefetch(const struct tally_counter *c)
{
	const struct tally_counter_item *top = top_items(c);

	for (unsigned int i = 0; i < c->nr_top; i++)
		__builtin_prefetch(&top[i]);
}

long tally_counter_approximate_sum_positive(const struct tally_counter *c)
{
	long v = tally_counter_approximate_sum(c);

	return v > 0 ? v : 0;
}

/*
 * Sums of the slots of @nr counters of one domain, without their bias,
 * CPU by CPU: the slots of counters from one init_many share each CPU's
 * line, so that line is loaded once for all of them.
 */
static void slot_sums(const struct tally_counter *c, size_t nr,
		      unsigned long *sums)
{
	for (size_t i = 0; i < nr; i++)
		sums[i] = 0;
	for (unsigned int cpu = 0; cpu < c->domain->nr_cpus; cpu++)
		for (size_t i = 0; i < nr; i++)
			sums[i] += (unsigned long)
				tally_percpu_read_cpu(c[i].level0, cpu);
}

static unsigned long slot_sum(const struct tally_counter *c)
{
	unsigned long sum;

	slot_sums(c, 1, &sum);
	return sum;
}

long tally_counter_precise_sum(const struct tally_counter *c)
{
	require_counter(c, __func__);
	return (long)(slot_sum(c) + (unsigned long)load_bias(c));
}

int tally_counter_precise_sum_many(const struct tally_counter *c, size_t nr,
				   long *sums)
{
	if (!c || !sums || !nr || nr > MAX_MANY)
		return -EINVAL;
	for (size_t i = 0; i < nr; i++)
		if (!c[i].level0 || c[i].domain != c->domain)
			return -EINVAL;
	slot_sums(c, nr, (unsigned long *)sums);
	for (size_t i = 0; i < nr; i++)
		sums[i] = (long)((unsigned long)sums[i] +
				 (unsigned long)load_bias(&c[i]));
	return 0;
}

long tally_counter_precise_sum_positive(const struct tally_counter *c)
{
	long v = tally_counter_precise_sum(c);

	return v > 0 ? v : 0;
}

void tally_counter_set(struct tally_counter *c, long v)
{
	require_counter(c, __func__);
	__atomic_store_n(&c->bias, (long)((unsigned long)v - slot_sum(c)),
			 __ATOMIC_RELAXED);
}

void tally_counter_approximate_accuracy_range(const struct tally_counter *c,
					      unsigned long *under,
					      unsigned long *over)
{
	require_counter(c, __func__);
	*under = add_saturated(*under, c->under);
	(void)over;	/* the approximation never exceeds the precise sum */
}

void tally_counter_approximate_min_max_range(long approx, unsigned long under,
					     unsigned long over, long *min,
					     long *max)
{
	/* Distances to the limits fit an unsigned long: saturate on them. */
	unsigned long room_below = (unsigned long)approx - (unsigned long)LONG_MIN;
	unsigned long room_above = (unsigned long)LONG_MAX - (unsigned long)approx;

	*min = over > room_below ? LONG_MIN
				 : (long)((unsigned long)approx - over);
	*max = under > room_above ? LONG_MAX
				  : (long)((unsigned long)approx + under);
}

void counter_approximate_range(const struct tally_counter *c, long *approx,
			       long *min, long *max)
{
	*approx = tally_counter_approximate_sum(c);
	/*
	 * The precise sum is approx + (0 .. under) modulo 2^64.  Past
	 * LONG_MAX it may have wrapped: a precise sum just above LONG_MIN
	 * has an approximation just below LONG_MAX.  Only the whole range
	 * holds it then.
	 */
	if (c->under > (unsigned long)LONG_MAX - (unsigned long)*approx) {
		*min = LONG_MIN;
		*max = LONG_MAX;
		return;
	}
	tally_counter_approximate_min_max_range(*approx, c->under, 0, min, max);
}

void tally_counter_approximate_min_max(const struct tally_counter *c,
				       long *min, long *max)
{
	long approx;

	require_counter(c, __func__);
	counter_approximate_range(c, &approx, min, max);
}

/* -1 / 1 when [amin, amax] lies wholly below / above [bmin, bmax], else 0. */
static int compare_ranges(long amin, long amax, long bmin, long bmax)
{
	if (amax < bmin)
		return -1;
	if (amin > bmax)
		return 1;
	return 0;
}

int tally_counter_approximate_compare(const struct tally_counter *a,
				      const struct tally_counter *b)
{
	long amin, amax, bmin, bmax;

	require_counter(a, __func__);
	require_counter(b, __func__);
	tally_counter_approximate_min_max(a, &amin, &amax);
	tally_counter_approximate_min_max(b, &bmin, &bmax);
	return compare_ranges(amin, amax, bmin, bmax);
}

int tally_counter_approximate_compare_value(const struct tally_counter *c,
					    long v)
{
	long min, max;

	require_counter(c, __func__);
	tally_counter_approximate_min_max(c, &min, &max);
	return compare_ranges(min, max, v, v);
}

static int compare_long(long a, long b)
{
	return (a > b) - (a < b);
}

int tally_counter_precise_compare(const struct tally_counter *a,
				  const struct tally_counter *b)
{
	long amin, amax, bmin, bmax, wide_sum;
	int r;

	require_counter(a, __func__);
	require_counter(b, __func__);
	tally_counter_approximate_min_max(a, &amin, &amax);
	tally_counter_approximate_min_max(b, &bmin, &bmax);
	r = compare_ranges(amin, amax, bmin, bmax);
	if (r)
		return r;
	/*
	 * Sum the wider range first: its precise value is the more likely
	 * to fall outside the other's range and decide alone.
	 */
	if ((unsigned long)amax - (unsigned long)amin >=
	    (unsigned long)bmax - (unsigned long)bmin) {
		wide_sum = tally_counter_precise_sum(a);
		r = compare_ranges(wide_sum, wide_sum, bmin, bmax);
		return r ? r : compare_long(wide_sum,
					    tally_counter_precise_sum(b));
	}
	wide_sum = tally_counter_precise_sum(b);
	r = compare_ranges(amin, amax, wide_sum, wide_sum);
	return r ? r : compare_long(tally_counter_precise_sum(a), wide_sum);
}

int tally_counter_precise_compare_value(const struct tally_counter *c, long v)
{
	int r;

	require_counter(c, __func__);
	r = tally_counter_approximate_compare_value(c, v);
	if (r)
		return r;
	return compare_long(tally_counter_precise_sum(c), v);
}
