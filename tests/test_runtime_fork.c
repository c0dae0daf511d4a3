// SPDX-License-Identifier: MIT
/*
 * test_runtime_fork.c - fork() while other threads are inside the runtime:
 * allocating and freeing per-CPU memory, creating and destroying counters
 * and domains, or carrying into a counter's tree.
 *
 * And fork() while every layer is busy at once (counters, statistics
 * trees with their periodic flusher, memory groups with stocks, limits and
 * reclaim callbacks, grace-period readers and retires): the library's one
 * fork registry (runtime/fork.h) must take every lock of every layer in
 * one order that no path contradicts.
 *
 * Oracle: the child, which has only the forking thread, must be able to
 * allocate, build and destroy counters with exact sums (a lock left held
 * by a vanished thread would hang it: an alarm turns the hang into a
 * failure), and every counter it inherits must hold the tree items a quiet
 * counter holds (util_expected_top()); with every layer busy, every object
 * it inherits must give exact results and every new one too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/stats.h>

#include "harness.h"
#include "util.h"

/* Seconds a forked child may take before its alarm fails the test. */
#define CHILD_TIMEOUT HARNESS_HANG_S

struct churn {
	struct tally_domain *sim;
	bool stop;
	pthread_rwlock_t gate;	/* ASan: write-held across each fork */
};

/*
 * gcc 12's ASan allocator is not fork-safe: a child forked while another
 * thread is inside malloc() hangs in its first malloc().  Under ASan the
 * churning threads therefore pause at each fork (between two loops), so
 * the test still runs every path but no longer races fork with tally's
 * locks; the other builds run it in full.
 */
#ifdef __SANITIZE_ADDRESS__
#define CHURN_GATE 1
#else
#define CHURN_GATE 0
#endif

static void churn_enter(struct churn *s)
{
	if (CHURN_GATE)
		pthread_rwlock_rdlock(&s->gate);
}

static void churn_leave(struct churn *s)
{
	if (CHURN_GATE)
		pthread_rwlock_unlock(&s->gate);
}

static void *churn_counters(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct tally_counter c[3];

		churn_enter(s);
		if (!tally_counter_init(&c[0], NULL, 32))
			tally_counter_destroy(&c[0]);
		if (!tally_counter_init_many(c, NULL, 3, s->sim, 8))
			tally_counter_destroy_many(c, 3);
		churn_leave(s);
	}
	return NULL;
}

static void *churn_percpu(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		void *p, *q;

		churn_enter(s);
		p = tally_percpu_alloc(s->sim, 64, 64);
		q = tally_percpu_alloc(NULL, 24, 0);
		tally_percpu_free(s->sim, p);
		tally_percpu_free(NULL, q);
		churn_leave(s);
	}
	return NULL;
}

static void *churn_domains(void *arg)
{
	struct churn *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct tally_domain *d;

		churn_enter(s);
		if (!tally_domain_create_simulated(&d, 3,
						   TALLY_GROUP_LOW_BITS)) {
			tally_percpu_free(d, tally_percpu_alloc(d, 8, 0));
			tally_domain_destroy(d);
		}
		churn_leave(s);
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
	/* A writer-first gate, or the churn would starve fork. */
	struct churn s = {
		.sim = util_domain(7),
		.gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP,
	};
	pthread_t threads[ARRAY_SIZE(fns)];
	long forks = harness_scale(200);

	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		REQUIRE(pthread_create(&threads[i], NULL, fns[i], &s) == 0);
	for (long i = 0; i < forks && !harness_test_failed(); i++) {
		pid_t pid;

		fflush(NULL);
		if (CHURN_GATE)
			pthread_rwlock_wrlock(&s.gate);
		pid = fork();
		if (pid == 0) {
			child_uses_the_runtime(s.sim);
			harness_child_exit();
		}
		if (CHURN_GATE)
			pthread_rwlock_unlock(&s.gate);
		if (!CHECK_EQ_LONG(harness_wait_child(pid), 0))
			harness_log("fork %ld of %ld", i, forks);
	}
	__atomic_store_n(&s.stop, true, __ATOMIC_RELAXED);
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		pthread_join(threads[i], NULL);
	tally_domain_destroy(s.sim);
}

/* --- every layer at once ------------------------------------------------ */

#define KB 1024l
#define BUSY_MAX (48 * KB)	/* the busy group's max */
/*
 * Groups each churning thread creates and destroys, at most: debug
 * builds keep every destroyed statistics group until its tree is
 * destroyed, and each child destroys the trees it inherits.
 */
#define CHURN_MAX 2000

static const struct tally_stat_desc schema[] = {
	{ "events", TALLY_STAT_EVENT },
};

/* What the threads keep busy, and the churn's stop flag and ASan gate. */
struct layers {
	struct churn churn;
	struct tally_counter shared;		/* every thread adds to it */
	struct tally_stats_tree *st;		/* its periodic flusher runs */
	struct tally_stats_group *leaf;
	struct tally_memcg_tree *mt;		/* stocks: a fixed batch */
	struct tally_memcg *busy;		/* near its max, reclaiming */
	long reclaims;
};

/* A reclaim callback that frees nothing: charges then fail over max. */
static long reclaim_nothing(struct tally_memcg *g, long bytes, void *arg)
{
	struct layers *l = arg;

	(void)g;
	(void)bytes;
	__atomic_add_fetch(&l->reclaims, 1, __ATOMIC_RELAXED);
	return 0;
}

static void *busy_counters(void *arg)
{
	struct layers *l = arg;

	while (!__atomic_load_n(&l->churn.stop, __ATOMIC_RELAXED)) {
		struct tally_counter c;

		churn_enter(&l->churn);
		tally_counter_add(&l->shared, 1);
		if (!tally_counter_init(&c, NULL, 8)) {
			tally_counter_add(&c, 3);
			tally_counter_destroy(&c);
		}
		churn_leave(&l->churn);
	}
	return NULL;
}

/* Groups come and go under the root; the leaf is updated and read. */
static void *busy_stats(void *arg)
{
	struct layers *l = arg;
	long n = 0;

	while (!__atomic_load_n(&l->churn.stop, __ATOMIC_RELAXED)) {
		struct tally_stats_group *g;
		char name[32];
		long hier;

		churn_enter(&l->churn);
		snprintf(name, sizeof(name), "g%ld", n);
		if (n++ < CHURN_MAX &&
		    !tally_stats_group_create(tally_stats_root(l->st), name,
					      &g)) {
			tally_stats_mod(g, 0, 2);
			tally_stats_read(g, 0, TALLY_FLUSH_FORCE, &hier, NULL);
			tally_stats_group_destroy(g);
		}
		tally_stats_mod(l->leaf, 0, 1);
		tally_stats_read(l->leaf, 0, TALLY_FLUSH_FORCE, &hier, NULL);
		churn_leave(&l->churn);
	}
	return NULL;
}

/* Charges through the stocks, near max: refusals drain and reclaim. */
static void *busy_charges(void *arg)
{
	struct layers *l = arg;
	long n = 0;

	while (!__atomic_load_n(&l->churn.stop, __ATOMIC_RELAXED)) {
		long bytes = 4096 * (1 + n++ % 5), held = 0;

		churn_enter(&l->churn);
		for (int i = 0; i < 3; i++)
			if (tally_memcg_charge(l->busy, bytes, 0) >= 0)
				held += bytes;
		tally_memcg_uncharge(l->busy, held);
		tally_memcg_stat_mod(l->busy, TALLY_MEMCG_ANON, 1);
		tally_memcg_stat_mod(l->busy, TALLY_MEMCG_ANON, -1);
		churn_leave(&l->churn);
	}
	return NULL;
}

/*
 * Memory groups created, charged, destroyed while held (their free waits
 * for a grace period), and the readers that walk them in grace sections.
 */
static void *busy_groups(void *arg)
{
	struct layers *l = arg;
	long n = 0;

	while (!__atomic_load_n(&l->churn.stop, __ATOMIC_RELAXED)) {
		struct tally_memcg *g;
		struct tally_memcg_info info;
		long emin, elow;
		char name[32];

		churn_enter(&l->churn);
		snprintf(name, sizeof(name), "m%ld", n);
		if (n++ < CHURN_MAX &&
		    !tally_memcg_create(tally_memcg_root(l->mt), name, &g)) {
			if (!tally_memcg_charge(g, 8 * KB, 0))
				tally_memcg_uncharge(g, 8 * KB);
			tally_memcg_destroy(g);
			tally_memcg_protection(g, &emin, &elow);
			tally_memcg_put(g);
		}
		tally_memcg_tree_info(l->mt, &info);
		tally_memcg_protection(l->busy, &emin, &elow);
		churn_leave(&l->churn);
	}
	return NULL;
}

/* What the child checks: each layer's inherited objects, and new ones. */
static void child_uses_every_layer(struct layers *l)
{
	struct tally_counter c;
	struct tally_stats_group *g;
	struct tally_memcg *m;
	struct tally_memcg_info info;
	long before, hier, local;

	alarm(CHILD_TIMEOUT);
	/* Counters: the shared one counts on exactly, a new one too. */
	before = tally_counter_precise_sum(&l->shared);
	for (int i = 0; i < 1000; i++)
		tally_counter_add(&l->shared, 1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&l->shared), before + 1000);
	if (CHECK_EQ_LONG(tally_counter_init(&c, NULL, 4), 0)) {
		tally_counter_add(&c, 77);
		CHECK_EQ_LONG(tally_counter_precise_sum(&c), 77);
		tally_counter_destroy(&c);
	}
	/* Statistics: forced reads are exact, on the leaf and a new group. */
	REQUIRE(tally_stats_read(l->leaf, 0, TALLY_FLUSH_FORCE, &before,
				 NULL) == 0);
	tally_stats_mod(l->leaf, 0, 5);
	CHECK_EQ_LONG(tally_stats_read(l->leaf, 0, TALLY_FLUSH_FORCE, &hier,
				       NULL), 0);
	CHECK_EQ_LONG(hier, before + 5);
	if (CHECK_EQ_LONG(tally_stats_group_create(tally_stats_root(l->st),
						   "child", &g), 0)) {
		tally_stats_mod(g, 0, 9);
		CHECK_EQ_LONG(tally_stats_read(g, 0, TALLY_FLUSH_FORCE, &hier,
					       &local), 0);
		CHECK_EQ_LONG(hier, 9);
		CHECK_EQ_LONG(local, 9);
		CHECK_EQ_LONG(tally_stats_group_destroy(g), 0);
	}
	/* Memory groups: a new group charges to its max and no further. */
	if (CHECK_EQ_LONG(tally_memcg_create(tally_memcg_root(l->mt), "child",
					     &m), 0)) {
		CHECK_EQ_LONG(tally_memcg_set_limit(m, TALLY_MEMCG_MAX,
						    64 * KB), 0);
		for (int i = 0; i < 4; i++)
			CHECK_EQ_LONG(tally_memcg_charge(m, 16 * KB, 0), 0);
		CHECK_EQ_LONG(tally_memcg_charge(m, 16 * KB, 0), -ENOMEM);
		CHECK_EQ_LONG(util_memcg_usage(m, TALLY_MEMCG_READ_DRAIN),
			      64 * KB);
		CHECK_EQ_LONG(tally_memcg_uncharge(m, 64 * KB), 0);
		CHECK_EQ_LONG(tally_memcg_destroy(m), 0);
		tally_memcg_put(m);
	}
	/*
	 * The inherited busy group, drained, keeps what the parent's charger
	 * held at the fork, and takes exactly the room left under its max.
	 */
	CHECK_EQ_LONG(tally_memcg_drain(tally_memcg_root(l->mt)), 0);
	before = util_memcg_usage(l->busy, TALLY_MEMCG_READ_DRAIN);
	CHECK(before >= 0 && before <= BUSY_MAX);
	if (before < BUSY_MAX)
		CHECK_EQ_LONG(tally_memcg_charge(l->busy, BUSY_MAX - before,
						 0), 0);
	CHECK_EQ_LONG(tally_memcg_charge(l->busy, 4096, 0), -ENOMEM);
	if (before < BUSY_MAX)
		CHECK_EQ_LONG(tally_memcg_uncharge(l->busy, BUSY_MAX - before),
			      0);
	CHECK_EQ_LONG(util_memcg_usage(l->busy, TALLY_MEMCG_READ_DRAIN),
		      before);
	CHECK_EQ_LONG(tally_memcg_tree_info(l->mt, &info), 0);
	/* Destroying the trees runs what waits for a grace period. */
	tally_memcg_tree_destroy(l->mt);
	tally_stats_tree_destroy(l->st);
	tally_counter_destroy(&l->shared);
}

TEST(children_forked_while_every_layer_is_busy_use_every_object)
{
	static void *(*const fns[])(void *) = {
		busy_counters, busy_stats, busy_charges, busy_groups,
		churn_percpu,
	};
	struct tally_stats_options so = { .period_ns = 1000000 };
	struct layers l = {
		.churn = {
			.sim = util_domain(5),
			.gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP,
		},
	};
	pthread_t threads[ARRAY_SIZE(fns)];
	long forks = harness_scale(100);

	REQUIRE(tally_counter_init(&l.shared, NULL, 16) == 0);
	REQUIRE(tally_stats_tree_create(&l.st, schema, 1, &so) == 0);
	REQUIRE(tally_stats_group_create(tally_stats_root(l.st), "leaf",
					 &l.leaf) == 0);
	REQUIRE(tally_stats_periodic_start(l.st) == 0);
	l.mt = util_memcg_tree(NULL, 16 * KB);
	REQUIRE(l.mt);
	REQUIRE(tally_memcg_create(tally_memcg_root(l.mt), "busy",
				   &l.busy) == 0);
	REQUIRE(tally_memcg_set_limit(l.busy, TALLY_MEMCG_MAX, BUSY_MAX) == 0);
	REQUIRE(tally_memcg_set_reclaim(l.busy, reclaim_nothing, &l) == 0);
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		REQUIRE(pthread_create(&threads[i], NULL, fns[i],
				       i + 1 < ARRAY_SIZE(fns) ?
					       (void *)&l : (void *)&l.churn) ==
			0);
	for (long i = 0; i < forks && !harness_test_failed(); i++) {
		pid_t pid;

		fflush(NULL);
		if (CHURN_GATE)
			pthread_rwlock_wrlock(&l.churn.gate);
		pid = fork();
		if (pid == 0) {
			child_uses_every_layer(&l);
			harness_child_exit();
		}
		if (CHURN_GATE)
			pthread_rwlock_unlock(&l.churn.gate);
		if (!CHECK_EQ_LONG(harness_wait_child(pid), 0))
			harness_log("fork %ld of %ld", i, forks);
	}
	__atomic_store_n(&l.churn.stop, true, __ATOMIC_RELAXED);
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
		pthread_join(threads[i], NULL);
	/* The parent's objects are whole too. */
	harness_info("%ld forks; the parent's chargers reclaimed %ld times",
		     forks, __atomic_load_n(&l.reclaims, __ATOMIC_RELAXED));
	CHECK_EQ_LONG(util_memcg_usage(l.busy, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_put(l.busy);
	tally_memcg_tree_destroy(l.mt);
	tally_stats_tree_destroy(l.st);
	tally_counter_destroy(&l.shared);
	tally_domain_destroy(l.churn.sim);
}

#ifdef TALLY_INJECT
#include "runtime/inject.h"

/* The carry hook holds every thread that reaches it until released. */
static int arrived;
static bool released;

static int hold_before_carry(enum tally_inject_point point, void *arg)
{
	__atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
		usleep(100);
	return 0;
}

struct carrier {
	struct tally_counter *c;
	int cpu;		/* simulated CPU, or -1 for the system's */
};

/* One add that crosses far more than the counter's bound. */
static void *add_a_lot(void *arg)
{
	struct carrier *k = arg;

	if (k->cpu < 0)
		tally_counter_add(k->c, 1l << 40);
	else
		tally_counter_add_cpu(k->c, (unsigned int)k->cpu, 1l << 40);
	return NULL;
}

static void check_quiet_tree(const struct tally_counter *c, long precise)
{
	CHECK_EQ_LONG(tally_counter_precise_sum(c), precise);
	CHECK_EQ_ULONG(tally_counter_approximate_sum(c),
		       util_expected_top(c));
	CHECK_LE_ULONG(util_gap(c), util_under(c));
}

/*
 * Two threads stopped between their level-0 add and its carry (a system
 * counter, and one of init_many with caller items on a simulated domain)
 * while the process forks: the child, which lacks them, must find each
 * counter's tree as a quiet counter's, within the bound.
 */
TEST(child_forked_during_a_carry_finds_counters_within_bound)
{
	static struct tally_counter_item items[2][64]
		__attribute__((aligned(64)));
	struct tally_domain *sim = util_domain(8);
	struct tally_counter sys, many[2];
	struct carrier k[] = { { &sys, -1 }, { &many[1], 5 } };
	pthread_t threads[ARRAY_SIZE(k)];
	double deadline;
	pid_t pid;

	REQUIRE(tally_counter_items_size(sim) <= sizeof(items[0]));
	REQUIRE(tally_counter_init(&sys, NULL, 32) == 0);
	REQUIRE(tally_counter_init_many(many, items, 2, sim, 32) == 0);
	tally_counter_add(&sys, 3);
	tally_counter_add_cpu(&many[1], 2, 7);
	arrived = 0;
	released = false;
	tally_inject_set(TALLY_INJECT_COUNTER_BEFORE_CARRY, hold_before_carry,
			 NULL);
	for (size_t i = 0; i < ARRAY_SIZE(k); i++)
		REQUIRE(pthread_create(&threads[i], NULL, add_a_lot, &k[i]) ==
			0);
	deadline = harness_now() + CHILD_TIMEOUT;
	while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < (int)ARRAY_SIZE(k))
		if (!CHECK(harness_now() < deadline))
			break;
		else
			usleep(100);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		alarm(CHILD_TIMEOUT);
		tally_inject_set(TALLY_INJECT_COUNTER_BEFORE_CARRY, NULL, NULL);
		check_quiet_tree(&sys, 3 + (1l << 40));
		check_quiet_tree(&many[1], 7 + (1l << 40));
		check_quiet_tree(&many[0], 0);
		tally_counter_add(&sys, -(1l << 40));
		check_quiet_tree(&sys, 3);
		harness_child_exit();
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	__atomic_store_n(&released, true, __ATOMIC_RELEASE);
	for (size_t i = 0; i < ARRAY_SIZE(k); i++)
		pthread_join(threads[i], NULL);
	tally_inject_set(TALLY_INJECT_COUNTER_BEFORE_CARRY, NULL, NULL);
	check_quiet_tree(&sys, 3 + (1l << 40));
	check_quiet_tree(&many[1], 7 + (1l << 40));
	tally_counter_destroy_many(many, 2);
	tally_counter_destroy(&sys);
	tally_domain_destroy(sim);
}
#endif /* TALLY_INJECT */
