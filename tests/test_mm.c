// SPDX-License-Identifier: MIT
/*
 * test_mm.c - a task's memory counters (tally/mm.h): errors, reads against
 * an exact model on simulated domains, clamping, saturation, the "Bad
 * rss-counter state" report, concurrent adds on the system domain, fork.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/mm.h>

#include "harness.h"
#include "util.h"

static const unsigned int cpu_counts[] = { 1, 2, 3, 64, 384, 4096 };

TEST(init_rejects_null_bad_batch_and_misaligned_items_and_destroy_refuses)
{
	struct tally_domain *d = util_domain(4);
	struct tally_mm mm;
	char *items = aligned_alloc(64, tally_mm_items_size(d) + 64);

	REQUIRE(items);
	CHECK_EQ_LONG(tally_mm_init(NULL, d, 0, NULL), -EINVAL);
	memset(&mm, 0x5a, sizeof(mm));
	CHECK_EQ_LONG(tally_mm_init(&mm, d, 3, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add(&mm, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_init(&mm, d, 64, items + 8), -EINVAL);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), -EINVAL);
	CHECK_EQ_LONG(tally_mm_destroy(NULL), -EINVAL);
	free(items);
	tally_domain_destroy(d);
}

TEST(bad_items_masks_and_destroyed_counters_are_refused_without_effect)
{
	struct tally_domain *d = util_domain(8);
	struct tally_mm mm;
	struct tally_mm_range r = { 7, 7, 7 };

	REQUIRE(tally_mm_init(&mm, d, 0, NULL) == 0);
	CHECK_EQ_LONG(tally_mm_add(NULL, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add(&mm, TALLY_MM_NR_ITEMS, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add(&mm, (enum tally_mm_item)-1, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add_cpu(&mm, 8, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add_cpu(&mm, 0, TALLY_MM_NR_ITEMS, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add_cpu(NULL, 0, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_approximate(&mm, 0, &r), -EINVAL);
	CHECK_EQ_LONG(tally_mm_approximate(&mm, TALLY_MM_BIT(TALLY_MM_ANON) |
					   TALLY_MM_BIT(TALLY_MM_NR_ITEMS), &r),
		      -EINVAL);
	/* An item number where a mask belongs is refused, not misread. */
	CHECK_EQ_LONG(tally_mm_approximate(&mm, TALLY_MM_ANON, &r), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_SWAP), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_BIT(TALLY_MM_FILE) |
				       TALLY_MM_SHMEM), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_RSS | TALLY_MM_PGTABLES),
		      -EINVAL);
	CHECK_EQ_LONG(tally_mm_approximate(&mm, TALLY_MM_RSS, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_mm_approximate(NULL, TALLY_MM_RSS, &r), -EINVAL);
	CHECK_EQ_LONG(r.value, 7);
	CHECK_EQ_LONG(tally_mm_precise(&mm, 0), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, ~0u), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(NULL, TALLY_MM_RSS), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_ALL), 0);
	CHECK(tally_mm_item_name(TALLY_MM_NR_ITEMS) == NULL);
	CHECK(!strcmp(tally_mm_item_name(TALLY_MM_SHMEM), "TALLY_MM_SHMEM"));

	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add(&mm, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_add_cpu(&mm, 0, TALLY_MM_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_RSS), -EINVAL);
	CHECK_EQ_LONG(tally_mm_approximate(&mm, TALLY_MM_RSS, &r), -EINVAL);
	tally_domain_destroy(d);
}

TEST(init_of_live_counters_is_refused_and_leaves_them_working)
{
	struct tally_domain *d = util_domain(4);
	struct tally_mm mm;
	pid_t pid;

	REQUIRE(tally_mm_init(&mm, d, 32, NULL) == 0);
	tally_mm_add_cpu(&mm, 1, TALLY_MM_ANON, 100);
	CHECK_EQ_LONG(tally_mm_init(&mm, d, 32, NULL), -EBUSY);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_ALL), 100);
	/* The counter registry is intact: a fork's child handler walks it. */
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_ALL), 100);
		harness_child_exit();
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	tally_mm_add_cpu(&mm, 2, TALLY_MM_ANON, -100);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	CHECK_EQ_LONG(tally_mm_init(&mm, d, 32, NULL), 0);	/* reusable */
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_domain_destroy(d);
}

TEST(precise_sum_many_equals_each_precise_sum_and_refuses_bad_input)
{
	struct tally_domain *d = util_domain(384), *other = util_domain(2);
	struct tally_counter c[3], lone;
	long sums[3] = { 7, 7, 7 };
	struct rng r = rng_seed(0);

	REQUIRE(tally_counter_init_many(c, NULL, 3, d, 32) == 0);
	REQUIRE(tally_counter_init(&lone, other, 32) == 0);
	for (int i = 0; i < 3000; i++)
		tally_counter_add_cpu(&c[rng_below(&r, 3)],
				      (unsigned int)rng_below(&r, 384),
				      (long)rng_below(&r, 2000) - 900);
	tally_counter_set(&c[1], -5);	/* the bias counts too */
	REQUIRE(tally_counter_precise_sum_many(c, 3, sums) == 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_LONG(sums[i], tally_counter_precise_sum(&c[i]));
	CHECK_EQ_LONG(sums[1], -5);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(NULL, 1, sums), -EINVAL);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(c, 1, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(c, 0, sums), -EINVAL);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(c, 1u << 20, sums),
		      -EINVAL);
	{
		struct tally_counter mixed[2];

		REQUIRE(tally_counter_init(&mixed[0], d, 32) == 0);
		REQUIRE(tally_counter_init(&mixed[1], other, 32) == 0);
		CHECK_EQ_LONG(tally_counter_precise_sum_many(mixed, 2, sums),
			      -EINVAL);
		tally_counter_destroy(&mixed[0]);
		tally_counter_destroy(&mixed[1]);
	}
	CHECK_EQ_LONG(sums[1], -5);	/* untouched by the refusals */
	tally_counter_destroy(&lone);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(&lone, 1, sums), -EINVAL);
	tally_counter_destroy_many(c, 3);
	CHECK_EQ_LONG(tally_counter_precise_sum_many(c, 3, sums), -EINVAL);
	tally_domain_destroy(d);
	tally_domain_destroy(other);
}

/* Exact model of one task: each item's precise value. */
struct model {
	long item[TALLY_MM_NR_ITEMS];
};

static long model_sum(const struct model *m, unsigned int mask)
{
	long sum = 0;

	for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++)
		if ((mask & TALLY_MM_BIT(i)) && m->item[i] > 0)
			sum += m->item[i];
	return sum;
}

/* Every mask's precise read equals the model; approximate reads hold it. */
static bool reads_match(const struct tally_mm *mm, const struct model *m)
{
	for (unsigned int bits = 1; bits < 1u << TALLY_MM_NR_ITEMS; bits++) {
		unsigned int mask = bits << 16;	/* as TALLY_MM_BIT() ors */
		struct tally_mm_range r;
		long exact = model_sum(m, mask);

		if (!CHECK_EQ_LONG(tally_mm_precise(mm, mask), exact) ||
		    !CHECK_EQ_LONG(tally_mm_approximate(mm, mask, &r), 0) ||
		    !CHECK_LE_LONG(r.min, exact) ||
		    !CHECK_LE_LONG(exact, r.max) ||
		    !CHECK_LE_LONG(r.min, r.value) ||
		    !CHECK_LE_LONG(r.value, r.max) || !CHECK(r.min >= 0)) {
			harness_log("mask %#x", mask);
			return false;
		}
	}
	return true;
}

TEST(reads_equal_a_clamped_model_and_intervals_hold_it_on_any_cpu_count)
{
	for (size_t k = 0; k < ARRAY_SIZE(cpu_counts); k++) {
		unsigned int nr = cpu_counts[k];
		struct tally_domain *d = util_domain(nr);
		struct rng r = rng_seed(k);
		struct model m = { { 0 } };
		struct tally_mm mm;
		long steps = harness_scale(3000);

		REQUIRE(tally_mm_init(&mm, d, 64, NULL) == 0);
		for (long s = 0; s < steps; s++) {
			unsigned int item = (unsigned int)rng_below(&r, 5);
			unsigned int cpu = (unsigned int)rng_below(&r, nr);
			/* Mostly allocations; frees that may go below 0. */
			long delta = (long)rng_below(&r, 5000) -
				     (rng_below(&r, 3) ? 1500 : 4000);

			if (!CHECK_EQ_LONG(tally_mm_add_cpu(&mm, cpu, item,
							    delta), 0))
				break;
			m.item[item] += delta;
			if ((s % 97 == 0 || s == steps - 1) &&
			    !reads_match(&mm, &m)) {
				harness_log("%u CPUs, step %ld", nr, s);
				break;
			}
		}
		/* Undo: a task that returned everything destroys cleanly. */
		for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++)
			tally_mm_add_cpu(&mm, 0, i, -m.item[i]);
		CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
		tally_domain_destroy(d);
	}
}

TEST(negative_items_read_as_zero_without_hiding_the_others)
{
	struct tally_domain *d = util_domain(16);
	struct tally_mm mm;
	struct tally_mm_range r;

	REQUIRE(tally_mm_init(&mm, d, 32, NULL) == 0);
	tally_mm_add_cpu(&mm, 3, TALLY_MM_ANON, -100000);
	tally_mm_add_cpu(&mm, 5, TALLY_MM_FILE, 4096);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_BIT(TALLY_MM_ANON)), 0);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_RSS), 4096);
	REQUIRE(tally_mm_approximate(&mm, TALLY_MM_BIT(TALLY_MM_ANON), &r) ==
		0);
	CHECK_EQ_LONG(r.value, 0);
	CHECK_EQ_LONG(r.min, 0);
	tally_mm_add_cpu(&mm, 3, TALLY_MM_ANON, 100000);
	tally_mm_add_cpu(&mm, 5, TALLY_MM_FILE, -4096);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_domain_destroy(d);
}

TEST(sums_of_items_saturate_at_long_max)
{
	struct tally_domain *d = util_domain(2);
	struct tally_mm mm;
	struct tally_mm_range r;

	REQUIRE(tally_mm_init(&mm, d, 2, NULL) == 0);
	tally_mm_add_cpu(&mm, 0, TALLY_MM_ANON, LONG_MAX / 2 + 10);
	tally_mm_add_cpu(&mm, 1, TALLY_MM_FILE, LONG_MAX / 2 + 10);
	CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_RSS), LONG_MAX);
	REQUIRE(tally_mm_approximate(&mm, TALLY_MM_RSS, &r) == 0);
	CHECK_EQ_LONG(r.max, LONG_MAX);
	CHECK_LE_LONG(r.min, r.value);
	tally_mm_add_cpu(&mm, 0, TALLY_MM_ANON, -(LONG_MAX / 2 + 10));
	tally_mm_add_cpu(&mm, 1, TALLY_MM_FILE, -(LONG_MAX / 2 + 10));
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_domain_destroy(d);
}

TEST(default_batch_gives_the_counters_bound_per_item)
{
	unsigned long under, over;
	struct tally_domain *d = util_domain(256);
	struct tally_mm mm;
	struct tally_mm_range r;

	REQUIRE(tally_mm_init(&mm, d, 0, NULL) == 0);
	REQUIRE(tally_counter_accuracy(d, TALLY_MM_DEFAULT_BATCH, &under,
				       &over) == 0);
	REQUIRE(tally_mm_approximate(&mm, TALLY_MM_BADNESS, &r) == 0);
	CHECK_EQ_LONG(r.min, 0);
	CHECK_EQ_ULONG((unsigned long)r.max, 5 * under);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_domain_destroy(d);
}

/* A task structure with its counters' tree items in its own tail. */
struct task {
	int id;
	struct tally_mm mm;
	_Alignas(64) unsigned char items[];
};

TEST(items_may_live_in_the_callers_task_structure)
{
	struct tally_domain *d = util_domain(64);
	size_t size = sizeof(struct task) + tally_mm_items_size(d);
	struct task *t = aligned_alloc(64, (size + 63) & ~(size_t)63);
	struct tally_mm_range r;

	REQUIRE(t);
	CHECK_EQ_ULONG(tally_mm_items_size(d),
		       5 * tally_counter_items_size(d));
	REQUIRE(tally_mm_init(&t->mm, d, 32, t->items) == 0);
	for (unsigned int cpu = 0; cpu < 64; cpu++)
		tally_mm_add_cpu(&t->mm, cpu, TALLY_MM_SHMEM, 1000);
	CHECK_EQ_LONG(tally_mm_precise(&t->mm, TALLY_MM_RSS), 64000);
	REQUIRE(tally_mm_approximate(&t->mm, TALLY_MM_RSS, &r) == 0);
	CHECK(r.min <= 64000 && 64000 <= r.max);
	CHECK(r.value > 0);	/* the carries reached the caller's items */
	tally_mm_add_cpu(&t->mm, 7, TALLY_MM_SHMEM, -64000);
	CHECK_EQ_LONG(tally_mm_destroy(&t->mm), 0);
	free(t);
	tally_domain_destroy(d);
}

static void destroy_leaky_task(void)
{
	struct tally_domain *d = util_domain(4);
	struct tally_mm mm;

	if (tally_mm_init(&mm, d, 32, NULL))
		abort();
	tally_mm_add_cpu(&mm, 1, TALLY_MM_ANON, 4096);
	tally_mm_add_cpu(&mm, 2, TALLY_MM_SWAP, -8192);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), -ENOTEMPTY);
	/* Freed anyway: a second destroy is refused. */
	CHECK_EQ_LONG(tally_mm_destroy(&mm), -EINVAL);
	tally_domain_destroy(d);
}

TEST(destroying_a_task_with_memory_left_reports_bad_rss_counter_state)
{
	char text[1024];

	CHECK_EQ_LONG(util_run_capturing_stderr(destroy_leaky_task, text,
						sizeof(text)), 0);
#ifdef TALLY_DEBUG
	CHECK(strstr(text, "tally: Bad rss-counter state mm:0x") != NULL);
	CHECK(strstr(text, "type:TALLY_MM_ANON val:4096\n") != NULL);
	CHECK(strstr(text, "type:TALLY_MM_SWAP val:-8192\n") != NULL);
	CHECK(strstr(text, "TALLY_MM_FILE") == NULL);
#else
	CHECK_EQ_LONG((long)strlen(text), 0);	/* release builds are quiet */
#endif
	if (harness_test_failed())
		harness_log("stderr: %s", text);
}

/* --- concurrency on the system domain ------------------------------------ */

struct adder {
	struct tally_mm *mm;
	long iterations;
	long net[TALLY_MM_NR_ITEMS];
	uint64_t stream;
};

static void *add_randomly(void *arg)
{
	struct adder *a = arg;
	struct rng r = rng_seed(a->stream);

	for (long i = 0; i < a->iterations; i++) {
		unsigned int item = (unsigned int)rng_below(&r, 5);
		long delta = (long)rng_below(&r, 9000) - 4000;

		if (i % 512 == 0)
			util_pin_random(&r);	/* migrate */
		if (tally_mm_add(a->mm, item, delta))
			abort();
		a->net[item] += delta;
	}
	return NULL;
}

TEST(concurrent_adds_from_more_threads_than_cpus_sum_exactly)
{
	enum { THREADS = 8 };
	struct adder a[THREADS];
	pthread_t tid[THREADS];
	struct model m = { { 0 } };
	struct tally_mm mm;

	REQUIRE(tally_mm_init(&mm, NULL, 0, NULL) == 0);
	for (int t = 0; t < THREADS; t++) {
		a[t] = (struct adder){ &mm, harness_scale(200000), { 0 },
				       (uint64_t)t + 1 };
		REQUIRE(pthread_create(&tid[t], NULL, add_randomly, &a[t]) ==
			0);
	}
	for (int t = 0; t < THREADS; t++) {
		pthread_join(tid[t], NULL);
		for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++)
			m.item[i] += a[t].net[i];
	}
	reads_match(&mm, &m);
	for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++)
		tally_mm_add(&mm, i, -m.item[i]);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
}

TEST(a_forked_child_inherits_exact_counters_and_keeps_counting)
{
	const unsigned int anon = TALLY_MM_BIT(TALLY_MM_ANON);
	struct tally_mm mm;
	pid_t pid;

	REQUIRE(tally_mm_init(&mm, NULL, 0, NULL) == 0);
	for (int i = 0; i < 1000; i++)
		tally_mm_add(&mm, TALLY_MM_ANON, 4096);
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct tally_mm_range r;

		CHECK_EQ_LONG(tally_mm_precise(&mm, anon), 4096000);
		CHECK_EQ_LONG(tally_mm_add(&mm, TALLY_MM_ANON, -4096000), 0);
		CHECK_EQ_LONG(tally_mm_precise(&mm, TALLY_MM_ALL), 0);
		CHECK_EQ_LONG(tally_mm_approximate(&mm, anon, &r), 0);
		CHECK(r.min == 0);
		CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
		harness_child_exit();
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	CHECK_EQ_LONG(tally_mm_precise(&mm, anon), 4096000);
	tally_mm_add(&mm, TALLY_MM_ANON, -4096000);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
}
