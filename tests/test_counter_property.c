// SPDX-License-Identifier: MIT
/*
 * test_counter_property.c - the counter against independent oracles.
 *
 *  - tally_counter_carry() against the kernel's bit rule, written out
 *    here literally, and against floor division;
 *  - random adds on simulated domains of 1 to 4096 CPUs against a model
 *    of the kernel's tree (slots, items chosen by the low bits of the CPU
 *    number, the bit rule, a root or up to 8 top items): after every add
 *    the precise sum equals the exact sum, the approximate sum equals the
 *    sum of the model's top level, and
 *    precise - under <= approximate <= precise + over;
 *  - a worst case that drives every slot and item to its largest
 *    remainder: the bound is reached, and never exceeded after.
 */
#include <limits.h>
#include <stdlib.h>

#include "harness.h"
#include "util.h"

/*
 * The kernel's rule, literally: clear the low bits of the magnitude of
 * @inc (sign-magnitude), then add one more batch, with the sign of @inc,
 * when bit @batch of (masked inc ^ orig ^ res) is set.  Unsigned so that
 * LONG_MIN's magnitude and wrapping slots are defined.
 */
static unsigned long kernel_carry(unsigned long orig, unsigned long res,
				  long inc, unsigned long batch)
{
	unsigned long low = batch - 1, masked;

	if (inc < 0) {
		masked = -(-(unsigned long)inc & ~low);
		if ((masked ^ orig ^ res) & batch)
			masked -= batch;
	} else {
		masked = (unsigned long)inc & ~low;
		if ((masked ^ orig ^ res) & batch)
			masked += batch;
	}
	return masked;
}

/* Multiples of @batch crossed from @orig to @orig + @inc, no wrapping. */
static __int128 floor_carry(long orig, long inc, unsigned long batch)
{
	__int128 b = (__int128)batch, o = orig, r = (__int128)orig + inc;
	__int128 fo = o >= 0 ? o / b : -((-o + b - 1) / b);
	__int128 fr = r >= 0 ? r / b : -((-r + b - 1) / b);

	return (fr - fo) * b;
}

static long interesting_long(struct rng *r, unsigned long batch)
{
	static const long fixed[] = { 0, 1, -1, 2, -2, LONG_MAX, LONG_MIN,
				      LONG_MAX - 1, LONG_MIN + 1 };
	/* Twice and 64 times the batch, or every value when that wraps. */
	unsigned long two = batch < 1ul << 62 ? 2 * batch : ULONG_MAX;
	unsigned long many = batch < 1ul << 57 ? 64 * batch : ULONG_MAX;
	unsigned long k = rng_below(r, 5) - 2;

	switch (rng_below(r, 6)) {
	case 0:
		return fixed[rng_below(r, ARRAY_SIZE(fixed))];
	case 1:		/* next to a multiple of the batch */
		return (long)(k * batch + rng_below(r, 3) - 1);
	case 2:		/* next to the limits */
		if (rng_below(r, 2))
			return LONG_MAX - (long)(rng_below(r, two) >> 1);
		return LONG_MIN + (long)(rng_below(r, two) >> 1);
	case 3:		/* below one batch, either sign */
		k = rng_below(r, 2) ? 1 : -1ul;
		return (long)(rng_below(r, batch) * k);
	case 4:
		return (long)(rng_below(r, many) - many / 2);
	default:
		return (long)rng_next(r);
	}
}

TEST(carry_equals_kernel_bit_rule_for_random_and_boundary_values)
{
	struct rng r = rng_seed(0);
	long n = harness_scale(200000);

	for (unsigned int shift = 1; shift < 64; shift++) {
		unsigned long batch = 1ul << shift;

		for (long i = 0; i < n / 63; i++) {
			long orig = interesting_long(&r, batch);
			long inc = interesting_long(&r, batch);
			unsigned long res = (unsigned long)orig +
					    (unsigned long)inc;
			unsigned long want = kernel_carry((unsigned long)orig,
							  res, inc, batch);

			if (!CHECK_EQ_ULONG(tally_counter_carry(
						    (unsigned long)orig, res,
						    batch),
					    want)) {
				harness_log("orig %ld inc %ld batch %lu", orig,
					    inc, batch);
				return;
			}
		}
	}
}

/* Where no wrapping happens, the carry is the multiples crossed. */
TEST(carry_is_the_multiples_of_batch_crossed_when_nothing_wraps)
{
	struct rng r = rng_seed(1);

	for (long i = 0; i < harness_scale(200000); i++) {
		unsigned long batch = 1ul << (1 + rng_below(&r, 62));
		long orig = interesting_long(&r, batch);
		long inc = interesting_long(&r, batch), res;
		__int128 want;

		if (__builtin_add_overflow(orig, inc, &res))
			continue;
		want = floor_carry(orig, inc, batch);
		if (want > LONG_MAX || want < LONG_MIN)
			continue;
		if (!CHECK_EQ_LONG(tally_counter_carry((unsigned long)orig,
						       (unsigned long)res,
						       batch),
				   (long)want)) {
			harness_log("orig %ld inc %ld batch %lu", orig, inc,
				    batch);
			break;
		}
	}
}

/* Moves across LONG_MAX and LONG_MIN, spelled out. */
TEST(carry_across_the_long_limits_wraps_like_the_kernel_rule)
{
	static const struct {
		long orig, inc;
		unsigned long batch;
		long carry;
	} cases[] = {
		{ LONG_MAX, 1, 2, 2 },
		{ LONG_MAX - 1, 1, 2, 0 },
		{ LONG_MIN, -1, 2, -2 },
		{ LONG_MIN + 1, -1, 2, 0 },
		{ LONG_MAX - 31, 32, 32, 32 },
		{ LONG_MAX, LONG_MAX, 32, LONG_MIN },
		{ -1, LONG_MIN, 1ul << 62, LONG_MIN },
		{ 0, LONG_MIN, 1ul << 63, LONG_MIN },
		{ LONG_MIN, LONG_MIN, 1ul << 63, LONG_MIN },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unsigned long orig = (unsigned long)cases[i].orig;
		unsigned long res = orig + (unsigned long)cases[i].inc;

		CHECK_EQ_LONG(tally_counter_carry(orig, res, cases[i].batch),
			      cases[i].carry);
		CHECK_EQ_LONG(kernel_carry(orig, res, cases[i].inc,
					   cases[i].batch),
			      cases[i].carry);
	}
}

/*
 * The kernel's tree: one slot per CPU; at level l (leaf items first) the
 * item of CPU c is c modulo the number of level-l items; each carry is
 * computed with the bit rule, the step growing by the level's arity.  The
 * top level has 2^order / (product of the arities) items: one root, or on
 * small domains up to 8, that keep what they receive.
 */
struct model {
	unsigned int nr_cpus, levels;
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned int nr_items[TALLY_MAX_LEVELS];
	unsigned long batch;
	unsigned long *slot;
	unsigned long *item[TALLY_MAX_LEVELS];
	unsigned long sum;	/* of every increment */
};

static void model_init(struct model *m, const struct tally_domain *d,
		       unsigned long batch)
{
	unsigned long pow = 1;

	m->nr_cpus = tally_domain_nr_cpus(d);
	m->levels = tally_domain_shape(d, m->arity);
	m->batch = batch;
	m->sum = 0;
	while (pow < m->nr_cpus)
		pow *= 2;
	m->slot = calloc(m->nr_cpus, sizeof(*m->slot));
	for (unsigned int l = 0; l < m->levels; l++) {
		pow /= m->arity[l];
		m->nr_items[l] = (unsigned int)pow;
		m->item[l] = calloc(pow, sizeof(*m->item[l]));
	}
}

static void model_free(struct model *m)
{
	free(m->slot);
	for (unsigned int l = 0; l < m->levels; l++)
		free(m->item[l]);
}

static void model_add(struct model *m, unsigned int cpu, long inc)
{
	unsigned long orig = m->slot[cpu], step = m->batch;
	long carry;

	m->sum += (unsigned long)inc;
	m->slot[cpu] += (unsigned long)inc;
	carry = (long)kernel_carry(orig, m->slot[cpu], inc, step);
	for (unsigned int l = 0; carry && l < m->levels; l++) {
		unsigned long *it = &m->item[l][cpu % m->nr_items[l]];

		orig = *it;
		*it += (unsigned long)carry;
		step *= m->arity[l];
		carry = (long)kernel_carry(orig, *it, carry, step);
	}
}

static unsigned long model_top(const struct model *m)
{
	unsigned long sum = 0;

	for (unsigned int i = 0; i < m->nr_items[m->levels - 1]; i++)
		sum += m->item[m->levels - 1][i];
	return sum;
}

static long random_inc(struct rng *r, unsigned long batch)
{
	long b = (long)batch;

	switch (rng_below(r, 16)) {
	case 0:		/* huge, either sign */
		return (long)rng_next(r) >> rng_below(r, 24);
	case 1:
	case 2:		/* a few batches */
		return (long)rng_below(r, 8 * batch) - 4 * b;
	case 3:
		return rng_below(r, 2) ? b : -b;
	default:	/* small, either sign */
		return (long)rng_below(r, 2 * batch + 1) - b;
	}
}

/* One random walk; false when a check failed. */
static bool random_walk(unsigned int nr, unsigned long batch, long steps,
			struct rng *r)
{
	struct tally_domain *d = util_domain(nr);
	struct tally_counter c;
	struct model m;
	unsigned long under, over, bias = 0;
	bool ok = true;

	if (!CHECK_EQ_LONG(tally_counter_init(&c, d, batch), 0)) {
		tally_domain_destroy(d);
		return false;
	}
	tally_counter_accuracy(d, batch, &under, &over);
	model_init(&m, d, batch);
	for (long i = 0; ok && i < steps; i++) {
		/* Half the adds on a few hot CPUs, so carries climb. */
		unsigned long hot = rng_below(r, 2) ? nr : 1 + nr / 16;
		unsigned int cpu = (unsigned int)rng_below(r, hot);
		long inc = random_inc(r, batch);
		unsigned long precise, approx;

		if (rng_below(r, 1000) == 0) {
			long v = (long)rng_next(r) >> 8;

			tally_counter_set(&c, v);
			bias = (unsigned long)v - (m.sum - bias);
			m.sum = (unsigned long)v;
		}
		ok &= CHECK_EQ_LONG(tally_counter_add_cpu(&c, cpu, inc), 0);
		model_add(&m, cpu, inc);
		precise = (unsigned long)tally_counter_precise_sum(&c);
		approx = (unsigned long)tally_counter_approximate_sum(&c);
		ok = ok && CHECK_EQ_ULONG(precise, m.sum) &&
		     CHECK_EQ_ULONG(approx, model_top(&m) + bias) &&
		     CHECK_LE_ULONG(precise - approx, under) &&
		     CHECK_EQ_ULONG(over, 0);
	}
	if (!ok)
		harness_log("%u CPUs, batch %lu", nr, batch);
	model_free(&m);
	tally_counter_destroy(&c);
	tally_domain_destroy(d);
	return ok;
}

TEST(random_adds_match_exact_sum_and_kernel_tree_model_on_1_to_4096_cpus)
{
	static const unsigned int nrs[] = { 1,	 2,   3,    4,	  5,	7,
					    8,	 9,   16,   17,	  64,	100,
					    384, 1000, 4095, 4096 };
	static const unsigned long batches[] = { 2, 32, 1ul << 20 };
	struct rng r = rng_seed(2);

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		/* Precise sums cost O(nr): fewer steps on large domains. */
		long steps = harness_scale(nrs[i] > 1000 ? 4000 : 20000);

		for (size_t j = 0; j < ARRAY_SIZE(batches); j++)
			if (!random_walk(nrs[i], batches[j], steps, &r))
				return;
	}
}

/*
 * Give every slot the remainder batch - 1 and every item below the top
 * level the remainder step - step_below, by adding on one CPU below each
 * item the step of the level below, arity - 1 times: precise - approximate
 * is then exactly the bound.  Then random adds never take it past.
 */
static void worst_case(unsigned int nr, unsigned long batch, struct rng *r)
{
	struct tally_domain *d = util_domain(nr);
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned int levels = tally_domain_shape(d, arity);
	struct tally_counter c;
	unsigned long under, over, step = batch;
	unsigned char *done = calloc(nr, 1);

	if (!CHECK_EQ_LONG(tally_counter_init(&c, d, batch), 0) ||
	    !CHECK(done)) {
		free(done);
		tally_domain_destroy(d);
		return;
	}
	tally_counter_accuracy(d, batch, &under, &over);
	for (unsigned int cpu = 0; cpu < nr; cpu++)
		tally_counter_add_cpu(&c, cpu, (long)batch - 1);
	for (unsigned int l = 0; l + 1 < levels; l++) {
		/* done[item] marks the level-l items already filled. */
		for (unsigned int i = 0; i < nr; i++)
			done[i] = 0;
		for (unsigned int cpu = 0; cpu < nr; cpu++) {
			unsigned int item = util_item_of(d, cpu, l);

			if (done[item])
				continue;
			done[item] = 1;
			for (unsigned int k = 0; k + 1 < arity[l]; k++)
				tally_counter_add_cpu(&c, cpu, (long)step);
		}
		step *= arity[l];
	}
	CHECK_EQ_ULONG(util_gap(&c), under);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(
			      &c, tally_counter_approximate_sum(&c) +
					  (long)under),
		      0);
	for (long i = 0; i < harness_scale(2000); i++) {
		tally_counter_add_cpu(&c, (unsigned int)rng_below(r, nr),
				      random_inc(r, batch));
		if (!CHECK_LE_ULONG(util_gap(&c), under))
			break;
	}
	free(done);
	tally_counter_destroy(&c);
	tally_domain_destroy(d);
}

TEST(worst_case_remainders_reach_the_bound_exactly_and_never_pass_it)
{
	static const unsigned int nrs[] = { 1,	 2,   3,   4,	8,   9,
					    16,	 17,  100, 384, 512, 4096 };
	struct rng r = rng_seed(3);

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		worst_case(nrs[i], 2, &r);
		worst_case(nrs[i], 32, &r);
		worst_case(nrs[i], 1ul << 20, &r);
	}
}
