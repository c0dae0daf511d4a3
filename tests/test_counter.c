// SPDX-License-Identifier: MIT
/*
 * test_counter.c - the counter API: errors, boundaries, sums, set, clamps,
 * accuracy, comparisons, init_many / destroy_many.
 *
 * Most tests use simulated domains, whose adds name their CPU, so every
 * slot value, and hence every sum, is known exactly.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

/* CPU counts the API tests go through: 1, odd, not powers of two, large. */
static const unsigned int cpu_counts[] = { 1, 2, 3, 5, 384, 4095 };
static const unsigned long batches[] = { 2, 32, 1ul << 20 };

/* A counter at 0 on a new simulated domain of @nr CPUs. */
static struct tally_domain *sim_counter(struct tally_counter *c,
					unsigned int nr, unsigned long batch)
{
	struct tally_domain *d = util_domain(nr);

	if (tally_counter_init(c, d, batch)) {
		tally_domain_destroy(d);
		abort();
	}
	return d;
}

static void sim_destroy(struct tally_counter *c, struct tally_domain *d)
{
	tally_counter_destroy(c);
	tally_domain_destroy(d);
}

TEST(init_accepts_only_powers_of_two_batches_of_at_least_two)
{
	static const unsigned long bad[] = { 0, 1, 3, 6, 33, 1000,
					     (1ul << 63) + 1, ULONG_MAX };
	static const unsigned long good[] = { 2, 4, 32, 1ul << 20, 1ul << 63 };
	struct tally_domain *d = util_domain(3);
	struct tally_counter c;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK_EQ_LONG(tally_counter_init(&c, d, bad[i]), -EINVAL);
		CHECK_EQ_LONG(tally_counter_init_many(&c, NULL, 1, d, bad[i]),
			      -EINVAL);
	}
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (!CHECK_EQ_LONG(tally_counter_init(&c, d, good[i]), 0))
			continue;
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 0);
		tally_counter_destroy(&c);
	}
	tally_domain_destroy(d);
}

TEST(null_arguments_of_int_returning_functions_give_einval)
{
	struct tally_domain *d = util_domain(4);
	struct tally_counter c;
	unsigned long u;

	CHECK_EQ_LONG(tally_counter_init(NULL, d, 32), -EINVAL);
	CHECK_EQ_LONG(tally_counter_init_many(NULL, NULL, 1, d, 32), -EINVAL);
	CHECK_EQ_LONG(tally_counter_add_cpu(NULL, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_counter_accuracy(d, 32, NULL, &u), -EINVAL);
	CHECK_EQ_LONG(tally_counter_accuracy(d, 32, &u, NULL), -EINVAL);
	REQUIRE(tally_counter_init(&c, d, 32) == 0);
	sim_destroy(&c, d);
}

/* The counter the NULL-compare children compare with. */
static struct tally_counter compared;

static void approximate_compare_null_first(void)
{
	tally_counter_approximate_compare(NULL, &compared);
}

static void approximate_compare_null_second(void)
{
	tally_counter_approximate_compare(&compared, NULL);
}

static void approximate_compare_value_null(void)
{
	tally_counter_approximate_compare_value(NULL, 0);
}

static void precise_compare_null_first(void)
{
	tally_counter_precise_compare(NULL, &compared);
}

static void precise_compare_null_second(void)
{
	tally_counter_precise_compare(&compared, NULL);
}

static void precise_compare_value_null(void)
{
	tally_counter_precise_compare_value(NULL, 0);
}

static void approximate_sum_null(void)
{
	tally_counter_approximate_sum(NULL);
}

static void precise_sum_positive_null(void)
{
	tally_counter_precise_sum_positive(NULL);
}

static void set_null(void)
{
	tally_counter_set(NULL, 1);
}

static void accuracy_range_null(void)
{
	unsigned long under = 0, over = 0;

	tally_counter_approximate_accuracy_range(NULL, &under, &over);
}

static void min_max_null(void)
{
	long min, max;

	tally_counter_approximate_min_max(NULL, &min, &max);
}

static void domain_nr_cpus_null(void)
{
	tally_domain_nr_cpus(NULL);
}

static void domain_shape_null(void)
{
	tally_domain_shape(NULL, NULL);
}

static void domain_is_simulated_null(void)
{
	tally_domain_is_simulated(NULL);
}

static void domain_grouping_null(void)
{
	tally_domain_grouping(NULL);
}

/*
 * A compare returns -1, 0 or 1 in one int, a read a value, a domain getter
 * a count or a flag: an error code there would read as a value.  NULL is
 * a contract violation that aborts with a message naming the function.
 */
TEST(reads_compares_and_domain_getters_given_null_abort_with_a_message)
{
	static void (*const calls[])(void) = {
		approximate_compare_null_first, approximate_compare_null_second,
		approximate_compare_value_null, precise_compare_null_first,
		precise_compare_null_second, precise_compare_value_null,
		approximate_sum_null, precise_sum_positive_null, set_null,
		accuracy_range_null, min_max_null, domain_nr_cpus_null,
		domain_shape_null, domain_is_simulated_null,
		domain_grouping_null,
	};
	struct tally_domain *d = util_domain(4);
	char text[512];

	REQUIRE(tally_counter_init(&compared, d, 32) == 0);
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
		int status = util_run_capturing_stderr(calls[i], text,
						       sizeof(text));

		if (!CHECK_EQ_LONG(status, 128 + SIGABRT) ||
		    !CHECK(strstr(text, "tally: tally_") &&
			   strstr(text, "() called with a NULL")))
			harness_log("call %zu: stderr \"%s\"", i, text);
	}
	sim_destroy(&compared, d);
}

TEST(init_many_rejects_zero_too_many_and_misaligned_items)
{
	struct tally_domain *d = util_domain(5);
	size_t max = TALLY_PERCPU_UNIT / sizeof(long);
	size_t isz = tally_counter_items_size(d);
	struct tally_counter *c = calloc(max + 1, sizeof(*c));
	char *items = aligned_alloc(64, 2 * isz + 64);

	REQUIRE(c && items);
	CHECK_EQ_LONG(tally_counter_init_many(c, NULL, 0, d, 32), -EINVAL);
	CHECK_EQ_LONG(tally_counter_init_many(c, NULL, max + 1, d, 32),
		      -EINVAL);
	for (size_t off = 1; off < 64; off *= 2)
		CHECK_EQ_LONG(tally_counter_init_many(c, items + off, 2, d, 32),
			      -EINVAL);
	/* The largest count fits one per-CPU unit. */
	if (CHECK_EQ_LONG(tally_counter_init_many(c, NULL, max, d, 32), 0)) {
		CHECK_EQ_LONG(tally_counter_add_cpu(&c[max - 1], 4, 9), 0);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c[max - 1]), 9);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c[0]), 0);
		tally_counter_destroy_many(c, max);
	}
	free(items);
	free(c);
	tally_domain_destroy(d);
}

TEST(add_cpu_rejects_cpus_out_of_range_and_system_counters)
{
	for (size_t i = 0; i < ARRAY_SIZE(cpu_counts); i++) {
		unsigned int nr = cpu_counts[i];
		struct tally_counter c;
		struct tally_domain *d = sim_counter(&c, nr, 32);

		CHECK_EQ_LONG(tally_counter_add_cpu(&c, nr, 1), -EINVAL);
		CHECK_EQ_LONG(tally_counter_add_cpu(&c, UINT_MAX, 1), -EINVAL);
		CHECK_EQ_LONG(tally_counter_add_cpu(&c, nr - 1, 1), 0);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 1);
		sim_destroy(&c, d);
	}
	{
		struct tally_counter c;

		REQUIRE(tally_counter_init(&c, NULL, 32) == 0);
		CHECK_EQ_LONG(tally_counter_add_cpu(&c, 0, 1), -EINVAL);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 0);
		tally_counter_destroy(&c);
	}
}

TEST(new_counter_reads_zero_with_range_zero_to_under)
{
	for (size_t i = 0; i < ARRAY_SIZE(cpu_counts); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(batches); j++) {
			struct tally_counter c;
			struct tally_domain *d =
				sim_counter(&c, cpu_counts[i], batches[j]);
			unsigned long under, over;
			long min, max;

			CHECK_EQ_LONG(tally_counter_precise_sum(&c), 0);
			CHECK_EQ_LONG(tally_counter_approximate_sum(&c), 0);
			CHECK_EQ_LONG(tally_counter_accuracy(d, batches[j],
							     &under, &over), 0);
			CHECK_EQ_ULONG(util_under(&c), under);
			CHECK_EQ_ULONG(over, 0);
			tally_counter_approximate_min_max(&c, &min, &max);
			CHECK_EQ_LONG(min, 0);
			CHECK_EQ_ULONG(max, under);
			sim_destroy(&c, d);
		}
	}
}

/*
 * On one CPU the slot carries straight into the top item, so the
 * approximate sum is exactly the precise sum rounded down to a multiple
 * of the batch.
 */
TEST(one_cpu_approximation_is_precise_sum_rounded_down_to_batch)
{
	for (size_t j = 0; j < ARRAY_SIZE(batches); j++) {
		unsigned long batch = batches[j], sum = 0;
		struct tally_counter c;
		struct tally_domain *d = sim_counter(&c, 1, batch);
		struct rng r = rng_seed(j);

		for (long i = 0; i < harness_scale(20000); i++) {
			long inc = (long)rng_below(&r, 4 * batch) -
				   (long)(2 * batch);

			if (i % 1000 == 999)
				inc = (long)rng_next(&r);
			tally_counter_add_cpu(&c, 0, inc);
			sum += (unsigned long)inc;
			if (!CHECK_EQ_ULONG(tally_counter_precise_sum(&c),
					    sum) ||
			    !CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
					    sum & ~(batch - 1)))
				break;
		}
		sim_destroy(&c, d);
	}
}

TEST(adds_of_both_signs_on_every_cpu_sum_exactly)
{
	static const long incs[] = { 1, -1, 31, -33, 1000, -1000000, 1l << 40,
				     -(1l << 40), 2, -2, 7 };

	for (size_t i = 0; i < ARRAY_SIZE(cpu_counts); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(batches); j++) {
			unsigned int nr = cpu_counts[i];
			unsigned long b = batches[j];
			struct tally_counter c;
			struct tally_domain *d = sim_counter(&c, nr, b);
			unsigned long under = util_under(&c);
			long sum = 0;

			for (unsigned int cpu = 0; cpu < nr; cpu++) {
				long inc = incs[cpu % ARRAY_SIZE(incs)];

				CHECK_EQ_LONG(tally_counter_add_cpu(&c, cpu,
								    inc), 0);
				sum += inc;
			}
			CHECK_EQ_LONG(tally_counter_precise_sum(&c), sum);
			CHECK_LE_ULONG(util_gap(&c), under);
			CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
				       util_expected_top(&c));
			sim_destroy(&c, d);
		}
	}
}

TEST(sums_reach_long_max_and_long_min_exactly)
{
	for (size_t j = 0; j < ARRAY_SIZE(batches); j++) {
		unsigned long batch = batches[j];
		struct tally_counter c;
		struct tally_domain *d = sim_counter(&c, 3, batch);
		unsigned long under = util_under(&c);

		tally_counter_add_cpu(&c, 0, LONG_MAX);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), LONG_MAX);
		CHECK_LE_ULONG(util_gap(&c), under);
		tally_counter_add_cpu(&c, 2, LONG_MIN);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), -1);
		tally_counter_add_cpu(&c, 1, LONG_MIN + 1);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), LONG_MIN);
		CHECK_LE_ULONG(util_gap(&c), under);
		CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
			       util_expected_top(&c));
		sim_destroy(&c, d);
	}
}

/* A slot may wrap past LONG_MAX; the sums come back once it is undone. */
TEST(slots_wrapping_past_long_max_keep_sums_exact)
{
	for (size_t j = 0; j < ARRAY_SIZE(batches); j++) {
		struct tally_counter c;
		struct tally_domain *d = sim_counter(&c, 5, batches[j]);
		unsigned long under = util_under(&c);

		for (int k = 0; k < 3; k++)
			tally_counter_add_cpu(&c, 0, LONG_MAX);
		CHECK_EQ_LONG(util_slot(&c, 0), LONG_MAX - 2);
		for (int k = 0; k < 3; k++)
			tally_counter_add_cpu(&c, 4, -LONG_MAX);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 0);
		CHECK_LE_ULONG(util_gap(&c), under);
		CHECK_LE_LONG(tally_counter_approximate_sum(&c), 0);
		CHECK_LE_LONG(-(long)under, tally_counter_approximate_sum(&c));
		sim_destroy(&c, d);
	}
}

TEST(set_makes_precise_sum_the_value_and_keeps_the_bound)
{
	static const long values[] = { 0, -1, 12345, -987654321, LONG_MAX,
				       LONG_MIN, LONG_MAX - 10, LONG_MIN + 10 };

	for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
		struct tally_counter c;
		struct tally_domain *d = sim_counter(&c, 5, 32);
		unsigned long under = util_under(&c);
		long v = values[i];

		for (unsigned int cpu = 0; cpu < 5; cpu++)
			tally_counter_add_cpu(&c, cpu, 31 + 17 * cpu);
		tally_counter_set(&c, v);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), v);
		CHECK_LE_ULONG(util_gap(&c), under);
		/* Adds go on from the value set. */
		tally_counter_add_cpu(&c, 2, v < 0 ? 10 : -10);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c),
			      v < 0 ? v + 10 : v - 10);
		CHECK_LE_ULONG(util_gap(&c), under);
		sim_destroy(&c, d);
	}
}

TEST(set_near_limits_then_adds_reach_limits_exactly)
{
	struct tally_counter c;
	struct tally_domain *d = sim_counter(&c, 3, 2);

	tally_counter_set(&c, LONG_MAX - 10);
	for (int i = 0; i < 10; i++)
		tally_counter_add_cpu(&c, (unsigned int)i % 3, 1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), LONG_MAX);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, LONG_MAX), 0);
	tally_counter_set(&c, LONG_MIN + 10);
	for (int i = 0; i < 10; i++)
		tally_counter_add_cpu(&c, (unsigned int)i % 3, -1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), LONG_MIN);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, LONG_MIN), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, LONG_MIN + 1),
		      -1);
	sim_destroy(&c, d);
}

TEST(positive_variants_clamp_negative_sums_at_zero)
{
	struct tally_counter c;
	struct tally_domain *d = sim_counter(&c, 2, 32);

	/* Slot 0 at -1 carried -32: approximate -32, precise -1. */
	tally_counter_add_cpu(&c, 0, -1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), -1);
	CHECK_EQ_LONG(tally_counter_approximate_sum(&c), -32);
	CHECK_EQ_LONG(tally_counter_precise_sum_positive(&c), 0);
	CHECK_EQ_LONG(tally_counter_approximate_sum_positive(&c), 0);
	/* Precise 1, approximate still -32. */
	tally_counter_add_cpu(&c, 1, 2);
	CHECK_EQ_LONG(tally_counter_precise_sum_positive(&c), 1);
	CHECK_EQ_LONG(tally_counter_approximate_sum_positive(&c), 0);
	tally_counter_add_cpu(&c, 1, 63);
	CHECK_EQ_LONG(tally_counter_approximate_sum(&c), 32);
	CHECK_EQ_LONG(tally_counter_approximate_sum_positive(&c), 32);
	CHECK_EQ_LONG(tally_counter_precise_sum_positive(&c), 64);
	sim_destroy(&c, d);
	/* With every slot at 0 both sums are the value set. */
	d = sim_counter(&c, 2, 32);
	tally_counter_set(&c, LONG_MIN);
	CHECK_EQ_LONG(tally_counter_precise_sum_positive(&c), 0);
	CHECK_EQ_LONG(tally_counter_approximate_sum_positive(&c), 0);
	tally_counter_set(&c, LONG_MAX);
	CHECK_EQ_LONG(tally_counter_precise_sum_positive(&c), LONG_MAX);
	CHECK_EQ_LONG(tally_counter_approximate_sum_positive(&c), LONG_MAX);
	sim_destroy(&c, d);
}

TEST(accuracy_matches_the_documented_table)
{
	static const struct {
		unsigned int nr;
		unsigned long under;
	} table[] = {
		{ 2, 62 },	   { 4, 124 },	     { 8, 248 },
		{ 16, 496 },	   { 17, 2063 },     { 64, 5056 },
		{ 256, 22272 },	   { 384, 40576 },   { 4096, 471040 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		struct tally_domain *d = util_domain(table[i].nr);
		unsigned long under = 1, over = 1;

		CHECK_EQ_LONG(tally_counter_accuracy(d, 32, &under, &over), 0);
		CHECK_EQ_ULONG(under, table[i].under);
		CHECK_EQ_ULONG(over, 0);
		tally_domain_destroy(d);
	}
}

TEST(accuracy_lies_between_the_slots_share_and_the_kernel_formula)
{
	static const unsigned int nrs[] = { 1, 2, 3, 7, 16, 100, 384, 1000,
					    4095, 4096 };

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		struct tally_domain *d = util_domain(nrs[i]);
		unsigned int levels = tally_domain_shape(d, NULL);
		unsigned long order_pow = 1;

		while (order_pow < nrs[i])
			order_pow *= 2;
		for (unsigned long batch = 2; batch <= 1ul << 20; batch <<= 3) {
			unsigned long under, over;

			CHECK_EQ_LONG(tally_counter_accuracy(d, batch, &under,
							     &over), 0);
			CHECK_LE_ULONG(nrs[i] * (batch - 1), under);
			CHECK_LE_ULONG(under, batch * levels * order_pow);
		}
		CHECK_EQ_LONG(tally_counter_accuracy(d, 3, &order_pow,
						     &order_pow), -EINVAL);
		CHECK_EQ_LONG(tally_counter_accuracy(d, 0, &order_pow,
						     &order_pow), -EINVAL);
		tally_domain_destroy(d);
	}
}

TEST(accuracy_range_accumulates_into_the_callers_variables)
{
	struct tally_counter a, b;
	struct tally_domain *da = sim_counter(&a, 64, 32);
	struct tally_domain *db = sim_counter(&b, 3, 1ul << 20);
	unsigned long ua, ub, over;
	unsigned long under = 5;

	tally_counter_accuracy(da, 32, &ua, &over);
	tally_counter_accuracy(db, 1ul << 20, &ub, &over);
	over = 7;
	tally_counter_approximate_accuracy_range(&a, &under, &over);
	CHECK_EQ_ULONG(under, 5 + ua);
	CHECK_EQ_ULONG(over, 7);
	tally_counter_approximate_accuracy_range(&b, &under, &over);
	tally_counter_approximate_accuracy_range(&a, &under, &over);
	CHECK_EQ_ULONG(under, 5 + 2 * ua + ub);
	CHECK_EQ_ULONG(over, 7);
	/* Saturates instead of wrapping. */
	under = ULONG_MAX - 1;
	tally_counter_approximate_accuracy_range(&a, &under, &over);
	CHECK_EQ_ULONG(under, ULONG_MAX);
	sim_destroy(&a, da);
	sim_destroy(&b, db);
}

TEST(min_max_range_subtracts_over_adds_under_and_saturates)
{
	long min, max;

	tally_counter_approximate_min_max_range(10, 3, 4, &min, &max);
	CHECK_EQ_LONG(min, 6);
	CHECK_EQ_LONG(max, 13);
	tally_counter_approximate_min_max_range(-10, 0, 0, &min, &max);
	CHECK_EQ_LONG(min, -10);
	CHECK_EQ_LONG(max, -10);
	/* Exactly reaching the limits is not saturation... */
	tally_counter_approximate_min_max_range(LONG_MIN + 5, 5, 5, &min, &max);
	CHECK_EQ_LONG(min, LONG_MIN);
	CHECK_EQ_LONG(max, LONG_MIN + 10);
	tally_counter_approximate_min_max_range(-1, (unsigned long)LONG_MAX + 1,
						0, &min, &max);
	CHECK_EQ_LONG(max, LONG_MAX);
	/* ...going past them is. */
	tally_counter_approximate_min_max_range(LONG_MIN + 5, 0, 6, &min, &max);
	CHECK_EQ_LONG(min, LONG_MIN);
	tally_counter_approximate_min_max_range(LONG_MAX - 5, 6, 0, &min, &max);
	CHECK_EQ_LONG(max, LONG_MAX);
	CHECK_EQ_LONG(min, LONG_MAX - 5);
	tally_counter_approximate_min_max_range(0, ULONG_MAX, ULONG_MAX, &min,
						&max);
	CHECK_EQ_LONG(min, LONG_MIN);
	CHECK_EQ_LONG(max, LONG_MAX);
	tally_counter_approximate_min_max_range(LONG_MAX, ULONG_MAX, 0, &min,
						&max);
	CHECK_EQ_LONG(min, LONG_MAX);
	CHECK_EQ_LONG(max, LONG_MAX);
}

/*
 * The precise sum is approx + (0 .. under) modulo 2^64.  Next to
 * LONG_MIN the approximation can wrap to just below LONG_MAX while the
 * precise sum is a fine negative value: the range must still hold it.
 */
TEST(min_max_of_a_counter_holds_the_precise_sum_next_to_the_limits)
{
	struct tally_counter c;
	struct tally_domain *d = sim_counter(&c, 3, 32);
	long min, max, approx;

	tally_counter_add_cpu(&c, 1, 1000);
	approx = tally_counter_approximate_sum(&c);
	tally_counter_approximate_min_max(&c, &min, &max);
	CHECK_EQ_LONG(min, approx);
	CHECK_EQ_LONG(max, approx + (long)util_under(&c));

	tally_counter_add_cpu(&c, 0, LONG_MAX - 1000);
	tally_counter_approximate_min_max(&c, &min, &max);
	CHECK_LE_LONG(min, LONG_MAX);
	CHECK_EQ_LONG(max, LONG_MAX);

	/*
	 * The slots and items keep remainders well above 5: a precise sum of
	 * LONG_MIN + 5 has an approximation wrapped to just below LONG_MAX.
	 */
	tally_counter_add_cpu(&c, 2, -1);
	tally_counter_set(&c, LONG_MIN + 5);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), LONG_MIN + 5);
	CHECK_LE_LONG(LONG_MAX - (long)util_under(&c),
		      tally_counter_approximate_sum(&c));
	tally_counter_approximate_min_max(&c, &min, &max);
	CHECK_EQ_LONG(min, LONG_MIN);
	CHECK_LE_LONG(LONG_MIN + 5, max);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, 0), -1);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, LONG_MIN + 5),
		      0);
	CHECK(tally_counter_approximate_compare_value(&c, 0) != 1);
	sim_destroy(&c, d);
}

/*
 * a's range is [0, under]; b is set to values around it.  Ranges that
 * touch cannot decide (0); a gap of one decides, with -1 meaning a < b.
 */
TEST(approximate_compare_decides_only_on_disjoint_ranges_with_right_sign)
{
	struct tally_counter a, b;
	struct tally_domain *d = sim_counter(&a, 7, 32);
	unsigned long under;
	long umax;

	REQUIRE(tally_counter_init(&b, d, 32) == 0);
	under = util_under(&a);
	umax = (long)under;
	tally_counter_set(&b, umax);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), 0);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&b, &a), 0);
	/* b's range [under + 1, 2 under + 1]. */
	tally_counter_set(&b, umax + 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), -1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&b, &a), 1);
	/* b's range [-under, 0] touches a's. */
	tally_counter_set(&b, -umax);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), 0);
	tally_counter_set(&b, -umax - 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&b, &a), -1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &a), 0);
	/*
	 * At the limits: b's range [LONG_MAX - under, LONG_MAX] still
	 * decides; one more and b's precise sum may have wrapped.
	 */
	tally_counter_set(&a, LONG_MIN);
	tally_counter_set(&b, LONG_MAX - umax);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), -1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&b, &a), 1);
	tally_counter_set(&b, LONG_MAX - umax + 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare(&a, &b), -1);
	CHECK_EQ_LONG(tally_counter_precise_compare(&b, &a), 1);
	tally_counter_destroy(&b);
	sim_destroy(&a, d);
}

TEST(approximate_compare_value_boundaries_and_signs)
{
	struct tally_counter c;
	struct tally_domain *d = sim_counter(&c, 5, 32);
	long approx, under;

	for (unsigned int cpu = 0; cpu < 5; cpu++)
		tally_counter_add_cpu(&c, cpu, 100 + cpu);
	approx = tally_counter_approximate_sum(&c);
	under = (long)util_under(&c);
	/* The precise sum is in [approx, approx + under]. */
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, approx - 1),
		      1);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, approx), 0);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c,
							      approx + under),
		      0);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(
			      &c, approx + under + 1),
		      -1);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MIN), 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MAX),
		      -1);
	sim_destroy(&c, d);
	/* With every slot at 0 the approximation is the value set. */
	d = sim_counter(&c, 5, 32);
	tally_counter_set(&c, LONG_MAX - under);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MAX), 0);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(
			      &c, LONG_MAX - under - 1),
		      1);
	/* One more and the precise sum might have wrapped: undecided. */
	tally_counter_set(&c, LONG_MAX - under + 1);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MIN), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&c, LONG_MIN), 1);
	tally_counter_set(&c, LONG_MIN);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MIN), 0);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(
			      &c, LONG_MIN + under),
		      0);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(
			      &c, LONG_MIN + under + 1),
		      -1);
	CHECK_EQ_LONG(tally_counter_approximate_compare_value(&c, LONG_MAX),
		      -1);
	sim_destroy(&c, d);
}

/* Equal approximations, different precise sums: the precise sums decide. */
TEST(precise_compare_decides_by_precise_sums_when_ranges_overlap)
{
	struct tally_counter a, b;
	struct tally_domain *d = sim_counter(&a, 3, 32);

	REQUIRE(tally_counter_init(&b, d, 32) == 0);
	tally_counter_add_cpu(&a, 0, 1);
	tally_counter_add_cpu(&b, 2, 2);
	CHECK_EQ_LONG(tally_counter_approximate_compare(&a, &b), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare(&a, &b), -1);
	CHECK_EQ_LONG(tally_counter_precise_compare(&b, &a), 1);
	tally_counter_add_cpu(&a, 1, 1);
	CHECK_EQ_LONG(tally_counter_precise_compare(&a, &b), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare(&b, &a), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare(&a, &a), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&a, 2), 0);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&a, 3), -1);
	CHECK_EQ_LONG(tally_counter_precise_compare_value(&a, 1), 1);
	tally_counter_destroy(&b);
	sim_destroy(&a, d);
}

static int sign(long a, long b)
{
	return (a > b) - (a < b);
}

/*
 * Random states of a wide-range counter (1000 CPUs, batch 1024) and a
 * narrow one (3 CPUs, batch 2), compared both ways round: the precise
 * comparisons always give the sign of the precise difference, and the
 * approximate ones give it or 0, never the opposite.
 */
TEST(compares_of_wide_and_narrow_ranges_agree_with_precise_sums)
{
	struct tally_counter w, n;
	struct tally_domain *dw = sim_counter(&w, 1000, 1024);
	struct tally_domain *dn = sim_counter(&n, 3, 2);
	struct rng r = rng_seed(0);

	for (long i = 0; i < harness_scale(3000); i++) {
		long pw, pn, v;
		int exact, approx;

		tally_counter_add_cpu(&w, (unsigned int)rng_below(&r, 1000),
				      (long)rng_below(&r, 4096) - 2000);
		tally_counter_add_cpu(&n, (unsigned int)rng_below(&r, 3),
				      (long)rng_below(&r, 8192) - 4000);
		pw = tally_counter_precise_sum(&w);
		pn = tally_counter_precise_sum(&n);
		exact = sign(pw, pn);
		if (!CHECK_EQ_LONG(tally_counter_precise_compare(&w, &n),
				   exact) ||
		    !CHECK_EQ_LONG(tally_counter_precise_compare(&n, &w),
				   -exact))
			break;
		approx = tally_counter_approximate_compare(&w, &n);
		if (!CHECK(approx == 0 || approx == exact) ||
		    !CHECK_EQ_LONG(tally_counter_approximate_compare(&n, &w),
				   -approx))
			break;
		v = pw + (long)rng_below(&r, 2001) - 1000;
		if (!CHECK_EQ_LONG(tally_counter_precise_compare_value(&w, v),
				   sign(pw, v)))
			break;
		approx = tally_counter_approximate_compare_value(&w, v);
		if (!CHECK(approx == 0 || approx == sign(pw, v)))
			break;
	}
	sim_destroy(&w, dw);
	sim_destroy(&n, dn);
}

TEST(init_many_uses_caller_items_and_gives_independent_counters)
{
	enum { NR = 9 };
	struct tally_domain *d = util_domain(384);
	size_t isz = tally_counter_items_size(d);
	unsigned char *items = aligned_alloc(64, NR * isz);
	struct tally_counter c[NR];

	REQUIRE(items);
	memset(items, 0xa5, NR * isz);
	REQUIRE(tally_counter_init_many(c, items, NR, d, 32) == 0);
	for (size_t i = 0; i < NR; i++) {
		CHECK_EQ_LONG(tally_counter_precise_sum(&c[i]), 0);
		CHECK_EQ_LONG(tally_counter_approximate_sum(&c[i]), 0);
	}
	for (size_t i = 0; i < NR; i++)
		for (unsigned int cpu = 0; cpu < 384; cpu++)
			tally_counter_add_cpu(&c[i], cpu, (long)(i * 1000 + 1));
	for (size_t i = 0; i < NR; i++) {
		long root;

		CHECK_EQ_LONG(tally_counter_precise_sum(&c[i]),
			      384 * (long)(i * 1000 + 1));
		/* The root is the last cache line of counter i's items. */
		memcpy(&root, items + (i + 1) * isz - 64, sizeof(root));
		CHECK_EQ_LONG(tally_counter_approximate_sum(&c[i]), root);
		CHECK_EQ_ULONG(root, util_expected_top(&c[i]));
	}
	/* Counter i's slot of a CPU sits right after counter i - 1's. */
	for (size_t i = 1; i < NR; i++)
		CHECK((char *)c[i].level0 - (char *)c[i - 1].level0 ==
		      sizeof(long));
	tally_counter_destroy_many(c, NR);
	/* The caller's memory is the caller's to free. */
	free(items);
	tally_domain_destroy(d);
}

/*
 * Up to 16 CPUs there is no root: a batch added on one CPU lands in the
 * one top item (cache line) of that CPU alone up to 8 CPUs, and of that
 * CPU and CPU +- 8 (the low-bits pairs of a simulated domain) from 9 to
 * 16; the approximate sum is the sum of those lines.
 */
TEST(carries_on_up_to_16_cpus_land_only_in_the_cpus_own_top_item)
{
	static const unsigned int nrs[] = { 1, 2, 3, 5, 8, 9, 12, 16 };

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		struct tally_domain *d = util_domain(nrs[i]);
		size_t isz = tally_counter_items_size(d), nr_lines = isz / 64;
		long *items = aligned_alloc(64, isz), *before = malloc(isz);
		struct tally_counter c;
		unsigned int cpu;
		size_t pow = 1;

		REQUIRE(items && before);
		REQUIRE(tally_counter_init_many(&c, items, 1, d, 32) == 0);
		while (pow < nrs[i])
			pow *= 2;
		/* One line per leaf position, at most 8. */
		CHECK_EQ_ULONG(nr_lines, pow < 8 ? pow : 8);
		for (cpu = 0; cpu < nrs[i]; cpu++) {
			unsigned int own = util_item_of(d, cpu, 0);
			long sum = 0;

			memcpy(before, items, isz);
			tally_counter_add_cpu(&c, cpu, 32);
			for (size_t l = 0; l < nr_lines; l++) {
				const long *line = items + l * 8;
				const long *old = before + l * 8;

				if (!CHECK_EQ_LONG(line[0] - old[0],
						   l == own ? 32 : 0))
					harness_log("%u CPUs, cpu %u, line %zu",
						    nrs[i], cpu, l);
				sum += line[0];
			}
			CHECK_EQ_LONG(tally_counter_approximate_sum(&c), sum);
			CHECK_EQ_LONG(sum, 32 * (long)(cpu + 1));
			for (unsigned int b = 0; b < nrs[i]; b++)
				CHECK_EQ_LONG(util_item_of(d, b, 0) == own,
					      b % 8 == cpu % 8);
		}
		tally_counter_destroy(&c);
		free(before);
		free(items);
		tally_domain_destroy(d);
	}
}

TEST(destroy_many_returns_the_per_cpu_slots_for_reuse)
{
	enum { NR = 16 };
	struct tally_domain *d = util_domain(5);
	struct tally_counter c[NR];
	long *slots, *again;

	REQUIRE(tally_counter_init_many(c, NULL, NR, d, 2) == 0);
	slots = c[0].level0;
	for (size_t i = 0; i < NR; i++)
		for (unsigned int cpu = 0; cpu < 5; cpu++)
			tally_counter_add_cpu(&c[i], cpu, -3);
	tally_counter_destroy_many(c, NR);
	again = tally_percpu_alloc(d, NR * sizeof(long), 0);
	CHECK(again == slots);
	for (unsigned int cpu = 0; again && cpu < 5; cpu++)
		for (size_t i = 0; i < NR; i++)
			CHECK_EQ_LONG(tally_percpu_read_cpu(again + i, cpu), 0);
	tally_percpu_free(d, again);
	tally_domain_destroy(d);
}

TEST(system_domain_counter_adds_on_the_cpu_it_runs_on)
{
	struct tally_domain *sys = tally_domain_system();
	struct tally_counter c;
	long total = 0;

	REQUIRE(sys);
	REQUIRE(tally_counter_init(&c, NULL, 32) == 0);
	CHECK_EQ_ULONG(tally_counter_items_size(NULL),
		       tally_counter_items_size(sys));
	for (unsigned int i = 0; i < util_nr_allowed(); i++) {
		unsigned int cpu = util_allowed_cpu(i);
		long before = util_slot(&c, cpu);

		if (!CHECK_EQ_LONG(util_pin((int)cpu), 0))
			continue;
		tally_counter_add(&c, 5 + cpu);
		total += 5 + cpu;
		CHECK_EQ_LONG(util_slot(&c, cpu) - before, 5 + cpu);
	}
	util_pin(-1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), total);
	CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
		       util_expected_top(&c));
	tally_counter_destroy(&c);
}

TEST(add_on_a_simulated_counter_without_cpu_is_counted)
{
	struct tally_counter c;
	struct tally_domain *d = sim_counter(&c, 3, 2);

	for (int i = 0; i < 100; i++)
		tally_counter_add(&c, i % 2 ? 5 : -2);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), 150);
	CHECK_LE_ULONG(util_gap(&c), util_under(&c));
	sim_destroy(&c, d);
}
