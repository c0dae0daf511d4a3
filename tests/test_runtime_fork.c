// SPDX-License-Identifier: MIT
/*
 * test_runtime_fork.c - fork() while other threads are inside the runtime:
 * allocating and freeing per-CPU memory, creating and destroying counters
 * and domains, or carrying into a counter's tree.
 *
 * Oracle: the child, which has only the forking thread, must be able to
 * allocate, build and destroy counters with exact sums (a lock left held
 * by a vanished thread would hang it: an alarm turns the hang into a
 * failure), and every counter it inherits must hold the tree items a quiet
 * counter holds (util_expected_root()).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

/* Seconds a forked child may take before its alarm fails the test. */
#define CHILD_TIMEOUT 30

struct churn {
	struct tally_domain *sim;
	bool stop;
};

static void *churn_counters(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct tally_counter c[3];

		if (!tally_counter_init(&c[0], NULL, 32))
			tally_counter_destroy(&c[0]);
		if (!tally_counter_init_many(c, NULL, 3, s->sim, 8))
			tally_counter_destroy_many(c, 3);
	}
	return NULL;
}

static void *churn_percpu(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		void *p = tally_percpu_alloc(s->sim, 64, 64);
		void *q = tally_percpu_alloc(NULL, 24, 0);

		tally_percpu_free(s->sim, p);
		tally_percpu_free(NULL, q);
	}
	return NULL;
}

static void *churn_domains(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct tally_domain *d;

		if (tally_domain_create_simulated(&d, 3, TALLY_GROUP_LOW_BITS))
			continue;
		tally_percpu_free(d, tally_percpu_alloc(d, 8, 0));
		tally_domain_destroy(d);
	}
	return NULL;
}

/* What a child does first: allocate, count and free on both domains. */
static void child_uses_the_runtime(struct tally_domain *sim)
{
	struct tally_counter c, s;
	void *p;

	alarm(CHILD_TIMEOUT);
	p = tally_percpu_alloc(NULL, 8, 0);
	CHECK(p);
	tally_percpu_free(NULL, p);
	if (CHECK_EQ_LONG(tally_counter_init(&c, NULL, 4), 0)) {
		for (long i = 1; i <= 100; i++)
			tally_counter_add(&c, i);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 5050);
		tally_counter_destroy(&c);
	}
	if (CHECK_EQ_LONG(tally_counter_init(&s, sim, 4), 0)) {
		for (unsigned int cpu = 0; cpu < 7; cpu++)
			tally_counter_add_cpu(&s, cpu, 10 + cpu);
		CHECK_EQ_LONG(tally_counter_precise_sum(&s), 91);
		tally_counter_destroy(&s);
	}
}

TEST(children_forked_during_allocations_can_allocate)
{
	static void *(*const fns[])(void *) = { churn_counters, churn_percpu,
						churn_domains };
	struct churn s = { .sim = util_domain(7) };
	pthread_t threads[ARRAY_SIZE(fns)];
	long forks = harness_scale(200);

	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		REQUIRE(pthread_create(&threads[i], NULL, fns[i], &s) == 0);
	for (long i = 0; i < forks && !harness_test_failed(); i++) {
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			child_uses_the_runtime(s.sim);
			harness_child_exit();
		}
		if (!CHECK_EQ_LONG(harness_wait_child(pid), 0))
			harness_log("fork %ld of %ld", i, forks);
	}
	__atomic_store_n(&s.stop, true, __ATOMIC_RELAXED);
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		pthread_join(threads[i], NULL);
	tally_domain_destroy(s.sim);
}
