// SPDX-License-Identifier: MIT
/*
 * test_counter_stress.c - counters on the system domain under real
 * concurrency: 16 threads on the machine's CPUs (2 here) adding random
 * increments through rseq (or the fallback), migrating with
 * sched_setaffinity, interrupted by SIGUSR1 whose handler adds too,
 * exiting and being replaced; then fork, with and without threads.
 *
 * Oracle: every thread sums what it added, the handler what it added;
 * once all are done each counter's precise sum must equal the total, its
 * approximate sum the top level recomputed from the slots
 * (util_expected_top(): no carry lost or counted twice), and the gap
 * must be within the bound.  Each run lasts about a second.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define NR_WORKERS 16

struct stress;

struct worker {
	struct stress *s;
	pthread_t thread;
	bool alive;		/* under s->lock: may be signalled */
	bool started;		/* joinable */
	uint64_t seed;
};

struct stress {
	struct tally_counter *c;
	size_t nr;
	unsigned long *expected;	/* per counter, atomic */
	bool migrate, signals, churn, positive;
	double end;
	pthread_mutex_t lock;
	struct worker w[NR_WORKERS];
	uint64_t next_seed;
	unsigned long handled;		/* signals handled, atomic */
};

/* When the run ends; run_stress() may push it back (see there). */
static double end_of(struct stress *s)
{
	double end;

	__atomic_load(&s->end, &end, __ATOMIC_RELAXED);
	return end;
}

/* The run the signal handler adds to. */
static struct stress *signalled;

static void on_sigusr1(int sig)
{
	static __thread unsigned long calls;
	struct stress *s = __atomic_load_n(&signalled, __ATOMIC_ACQUIRE);
	int saved_errno = errno;
	size_t k = calls % s->nr;
	long inc = (long)(calls % 7) - 3 + (long)(calls % 5) * 64;

	(void)sig;
	calls++;
	tally_counter_add(&s->c[k], inc);
	__atomic_fetch_add(&s->expected[k], (unsigned long)inc,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->handled, 1, __ATOMIC_RELAXED);
	errno = saved_errno;
}

static long stress_inc(struct rng *r, bool positive)
{
	uint64_t kind = rng_below(r, 100);
	long v;

	if (kind < 70)
		v = (long)rng_below(r, 41);
	else if (kind < 90)
		v = (long)rng_below(r, 2048);
	else if (kind < 99)
		v = (1l << 20) + (long)rng_below(r, 1000);
	else
		v = (1l << 40) + (long)rng_below(r, 1000);
	return positive || rng_below(r, 2) ? v : -v;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;
	struct rng r = rng_seed(w->seed);
	unsigned long *local = calloc(s->nr, sizeof(*local));
	long iters = s->churn ? 1 + (long)rng_below(&r, 20000) : LONG_MAX;
	sigset_t block;

	if (!CHECK(local))
		return NULL;
	for (long i = 0; i < iters; i++) {
		size_t k = rng_below(&r, s->nr);
		long inc = stress_inc(&r, s->positive);

		if (i % 1024 == 0 && harness_now() > end_of(s))
			break;
		if (s->migrate && rng_below(&r, 256) == 0)
			util_pin_random(&r);
		tally_counter_add(&s->c[k], inc);
		local[k] += (unsigned long)inc;
	}
	/* No handler may run once this thread is off the signal list. */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	pthread_mutex_lock(&s->lock);
	w->alive = false;
	pthread_mutex_unlock(&s->lock);
	for (size_t k = 0; k < s->nr; k++)
		__atomic_fetch_add(&s->expected[k], local[k], __ATOMIC_RELAXED);
	free(local);
	return NULL;
}

/* Called with s->lock held. */
static void start_worker(struct stress *s, struct worker *w)
{
	w->s = s;
	w->seed = s->next_seed++;
	w->alive = true;
	w->started = pthread_create(&w->thread, NULL, worker_main, w) == 0;
	w->alive = w->started;
	CHECK(w->started);
}

static void *signaller_main(void *arg)
{
	struct stress *s = arg;
	struct rng r = rng_seed(~0ull);
	const struct timespec pause = { 0, 20000 };

	while (harness_now() < end_of(s)) {
		struct worker *w = &s->w[rng_below(&r, NR_WORKERS)];

		pthread_mutex_lock(&s->lock);
		if (w->alive)
			pthread_kill(w->thread, SIGUSR1);
		pthread_mutex_unlock(&s->lock);
		if (rng_below(&r, 8) == 0)
			nanosleep(&pause, NULL);
	}
	return NULL;
}

/*
 * Run the workers on @s for about @ms milliseconds (scaled).  With
 * signals, the run goes on (up to HARNESS_HANG_S more) until one was
 * handled: a sanitizer or a loaded machine can delay delivery past the
 * planned end.
 */
static void run_stress(struct stress *s, long ms)
{
	struct sigaction sa, old_sa;
	pthread_t signaller;
	const struct timespec tick = { 0, 1000000 };
	int extended = 0;

	/* The oracle starts from where the counters are. */
	s->expected = calloc(s->nr, sizeof(*s->expected));
	for (size_t k = 0; k < s->nr; k++)
		s->expected[k] = (unsigned long)tally_counter_precise_sum(
			&s->c[k]);
	pthread_mutex_init(&s->lock, NULL);
	s->end = harness_now() + (double)harness_scale(ms) / 1000;
	if (s->signals) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigusr1;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		__atomic_store_n(&signalled, s, __ATOMIC_RELEASE);
		sigaction(SIGUSR1, &sa, &old_sa);
	}
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < NR_WORKERS; i++)
		start_worker(s, &s->w[i]);
	pthread_mutex_unlock(&s->lock);
	if (s->signals)
		pthread_create(&signaller, NULL, signaller_main, s);
	while (harness_now() < end_of(s)) {
		for (int i = 0; i < NR_WORKERS; i++) {
			struct worker *w = &s->w[i];
			bool done;

			pthread_mutex_lock(&s->lock);
			done = w->started && !w->alive;
			pthread_mutex_unlock(&s->lock);
			if (!done)
				continue;
			pthread_join(w->thread, NULL);
			pthread_mutex_lock(&s->lock);
			start_worker(s, w);
			pthread_mutex_unlock(&s->lock);
		}
		nanosleep(&tick, NULL);
		if (s->signals && extended < HARNESS_HANG_S * 10 &&
		    !__atomic_load_n(&s->handled, __ATOMIC_RELAXED) &&
		    harness_now() > end_of(s) - 0.05) {
			double end = end_of(s) + 0.1;

			__atomic_store(&s->end, &end, __ATOMIC_RELAXED);
			extended++;
		}
	}
	if (s->signals)
		pthread_join(signaller, NULL);
	for (int i = 0; i < NR_WORKERS; i++)
		if (s->w[i].started)
			pthread_join(s->w[i].thread, NULL);
	if (s->signals) {
		sigaction(SIGUSR1, &old_sa, NULL);
		harness_info("%lu signal handlers added",
			     __atomic_load_n(&s->handled, __ATOMIC_RELAXED));
	}
	pthread_mutex_destroy(&s->lock);
}

/* Every counter of a finished run against the oracle. */
static void check_stress(struct stress *s)
{
	for (size_t k = 0; k < s->nr; k++) {
		const struct tally_counter *c = &s->c[k];

		if (!CHECK_EQ_ULONG(tally_counter_precise_sum(c),
				    s->expected[k]) ||
		    !CHECK_EQ_ULONG(tally_counter_approximate_sum(c),
				    util_expected_top(c)) ||
		    !CHECK_LE_ULONG(util_gap(c), util_under(c))) {
			harness_log("counter %zu of %zu", k, s->nr);
			break;
		}
	}
	free(s->expected);
}

TEST(adds_from_16_threads_on_the_machines_cpus_sum_exactly)
{
	struct tally_counter c;
	struct stress s = { .c = &c, .nr = 1 };

	REQUIRE(tally_counter_init(&c, NULL, 32) == 0);
	run_stress(&s, 600);
	check_stress(&s);
	tally_counter_destroy(&c);
}

TEST(adds_stay_exact_through_migrations_signals_and_thread_churn)
{
	struct tally_counter c;
	struct stress s = { .c = &c, .nr = 1, .migrate = true,
			    .signals = true, .churn = true };

	/* Batch 2: nearly every add carries up the tree. */
	REQUIRE(tally_counter_init(&c, NULL, 2) == 0);
	run_stress(&s, 1500);
	check_stress(&s);
	tally_counter_destroy(&c);
}

/*
 * On this machine's system domain each CPU may have a top item of its
 * own.  A copy of this binary whose system domain is read from a 32-CPU
 * fixture puts the real CPUs under shared leaf and middle items and a
 * root, which concurrent carries then update.
 */
TEST(carries_into_shared_tree_items_stay_exact_under_concurrency)
{
	struct tally_counter c;
	struct stress s = { .c = &c, .nr = 1, .migrate = true,
			    .signals = true, .churn = true };

	if (!harness_is_child()) {
		char var[PATH_MAX + 32];
		const char *env[] = { var, NULL };

		snprintf(var, sizeof(var), "TALLY_SYSFS_ROOT=%s",
			 util_fixture("two-socket-32"));
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	REQUIRE(tally_domain_shape(tally_domain_system(), NULL) == 3);
	REQUIRE(tally_counter_init(&c, NULL, 2) == 0);
	run_stress(&s, 1000);
	check_stress(&s);
	tally_counter_destroy(&c);
}

TEST(init_many_counters_updated_concurrently_are_each_exact)
{
	enum { NR = 64 };
	size_t isz = tally_counter_items_size(NULL);
	void *items = aligned_alloc(64, NR * isz);
	struct tally_counter c[NR];
	struct stress s = { .c = c, .nr = NR, .migrate = true,
			    .signals = true, .churn = true };

	REQUIRE(items);
	REQUIRE(tally_counter_init_many(c, items, NR, NULL, 4) == 0);
	run_stress(&s, 1000);
	check_stress(&s);
	tally_counter_destroy_many(c, NR);
	free(items);
}

struct reader {
	const struct tally_counter *c;
	double end;
	long reads;
};

/* Reads each reader makes at least, however late a loaded machine runs it. */
#define MIN_READS 100

/*
 * Only positive adds: every slot and item only grows, so successive
 * reads never go back, and an approximation read before a precise sum
 * never exceeds it.
 */
static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	long last_approx = 0, last_precise = 0;

	while (rd->reads < MIN_READS || harness_now() < rd->end) {
		long approx = tally_counter_approximate_sum(rd->c);
		long precise = tally_counter_precise_sum(rd->c);

		if (!CHECK_LE_LONG(last_approx, approx) ||
		    !CHECK_LE_LONG(last_precise, precise) ||
		    !CHECK_LE_LONG(approx, precise) ||
		    !CHECK_LE_LONG(precise,
				   tally_counter_precise_sum_positive(rd->c)))
			break;
		last_approx = approx;
		last_precise = precise;
		rd->reads++;
	}
	return NULL;
}

TEST(concurrent_reads_of_a_growing_counter_never_go_back)
{
	struct tally_counter c;
	struct stress s = { .c = &c, .nr = 1, .migrate = true,
			    .positive = true };
	struct reader rd[2];
	pthread_t t[2];

	REQUIRE(tally_counter_init(&c, NULL, 4) == 0);
	for (int i = 0; i < 2; i++) {
		rd[i] = (struct reader){
			&c, harness_now() + (double)harness_scale(800) / 1000,
			0
		};
		pthread_create(&t[i], NULL, reader_main, &rd[i]);
	}
	run_stress(&s, 800);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK(rd[i].reads >= MIN_READS);
	}
	check_stress(&s);
	tally_counter_destroy(&c);
}

struct sim_adder {
	struct tally_counter *c;
	unsigned int nr_cpus;
	long n;
	uint64_t seed;
	unsigned long sum;
};

static void *sim_adder_main(void *arg)
{
	struct sim_adder *a = arg;
	struct rng r = rng_seed(a->seed);

	for (long i = 0; i < a->n; i++) {
		unsigned int cpu = (unsigned int)rng_below(&r, a->nr_cpus);
		long inc = stress_inc(&r, false);

		tally_counter_add_cpu(a->c, cpu, inc);
		a->sum += (unsigned long)inc;
	}
	return NULL;
}

/* Simulated CPUs are shared by threads: their adds are atomic. */
TEST(threads_sharing_simulated_cpus_keep_sums_and_tree_exact)
{
	static const unsigned int nrs[] = { 1, 3, 64, 1000 };

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		struct tally_domain *d = util_domain(nrs[i]);
		struct tally_counter c;
		struct sim_adder a[8];
		pthread_t t[8];
		unsigned long sum = 0;

		REQUIRE(tally_counter_init(&c, d, 2) == 0);
		for (int k = 0; k < 8; k++) {
			a[k] = (struct sim_adder){ &c, nrs[i],
						   harness_scale(100000),
						   (uint64_t)k, 0 };
			pthread_create(&t[k], NULL, sim_adder_main, &a[k]);
		}
		for (int k = 0; k < 8; k++) {
			pthread_join(t[k], NULL);
			sum += a[k].sum;
		}
		CHECK_EQ_ULONG(tally_counter_precise_sum(&c), sum);
		CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
			       util_expected_top(&c));
		CHECK_LE_ULONG(util_gap(&c), util_under(&c));
		tally_counter_destroy(&c);
		tally_domain_destroy(d);
	}
}

/* Add 1 .. n on every allowed CPU in turn; returns the total. */
static long add_on_each_cpu(struct tally_counter *c, long n)
{
	long total = 0;

	for (unsigned int i = 0; i < util_nr_allowed(); i++) {
		util_pin((int)util_allowed_cpu(i));
		for (long v = 1; v <= n; v++) {
			tally_counter_add(c, v);
			total += v;
		}
	}
	util_pin(-1);
	return total;
}

TEST(counters_keep_counting_exactly_in_a_forked_child)
{
	struct tally_counter c, fresh;
	long parent_sum;
	pid_t pid;

	REQUIRE(tally_counter_init(&c, NULL, 2) == 0);
	parent_sum = add_on_each_cpu(&c, 1000);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		long child_sum;

		CHECK_EQ_LONG(tally_counter_precise_sum(&c), parent_sum);
		child_sum = add_on_each_cpu(&c, 3000);
		tally_counter_add(&c, -7);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c),
			      parent_sum + child_sum - 7);
		CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
			       util_expected_top(&c));
		if (CHECK_EQ_LONG(tally_counter_init(&fresh, NULL, 32), 0)) {
			CHECK_EQ_LONG(add_on_each_cpu(&fresh, 500),
				      tally_counter_precise_sum(&fresh));
			tally_counter_destroy(&fresh);
		}
		harness_child_exit();
	}
	CHECK(pid > 0);
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	/* The child's adds went to its own copy of the memory. */
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), parent_sum);
	CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
		       util_expected_top(&c));
	parent_sum += add_on_each_cpu(&c, 10);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), parent_sum);
	tally_counter_destroy(&c);
}

TEST(threads_in_a_forked_child_update_counters_exactly)
{
	struct tally_counter c;
	long parent_sum;
	pid_t pid;

	REQUIRE(tally_counter_init(&c, NULL, 2) == 0);
	parent_sum = add_on_each_cpu(&c, 100);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct tally_counter many[8];
		struct stress s = { .c = many, .nr = 8, .migrate = true,
				    .signals = true, .churn = true };
		struct stress one = { .c = &c, .nr = 1, .migrate = true };

		if (CHECK_EQ_LONG(tally_counter_init_many(many, NULL, 8, NULL,
							  2),
				  0)) {
			run_stress(&s, 500);
			check_stress(&s);
			tally_counter_destroy_many(many, 8);
		}
		run_stress(&one, 300);
		check_stress(&one);
		harness_child_exit();
	}
	CHECK(pid > 0);
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), parent_sum);
	tally_counter_destroy(&c);
}
