// SPDX-License-Identifier: MIT
/*
 * test_stats_faults.c - the statistics tree when the machine gets in the
 * way: a thread migrated between an update's commit and its threshold
 * bookkeeping, membarrier() failing (and the TALLY_MEMBARRIER=off switch),
 * an updater preempted between claiming a group and pushing it (and a
 * quiet leaf read meanwhile), a flush held between its passes.
 *
 * Most tests need the hook points of src/runtime/inject.h and are built only with
 * -DTALLY_INJECT.  A hook that blocks uses a struct blocker: armed once, it
 * stops the first thread that reaches the point until the test releases
 * it, so that every later pass goes on.  Tests that change process-wide
 * state (the fenced update path is a one-way switch) run in a fresh copy
 * of the test binary (harness_rerun()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/stats.h>

#include "harness.h"
#include "runtime/inject.h"
#include "stats/stats_internal.h"
#include "util.h"
#include "../bench/stats_designs.h"

static const struct tally_stat_desc schema[] = {
	{ "events", TALLY_STAT_EVENT },
	{ "level", TALLY_STAT_STATE },
};
#define NS ((unsigned int)ARRAY_SIZE(schema))

/*
 * A flush of a few CPUs holds the engine's lock once, from its first CPU
 * to its last: the tests that stop a flush between two CPUs' passes
 * (TALLY_INJECT_FLUSH_BETWEEN_PASSES) make it take the lock per CPU, as
 * a flush of more than STATS_CPUS_PER_HOLD CPUs does.
 */
static void one_cpu_per_hold(struct tally_stats_tree *t)
{
	t->cpus_per_hold = 1;
}

static struct tally_stats_tree *tree_with(const struct tally_stats_options *o)
{
	struct tally_stats_tree *t = NULL;

	if (!CHECK_EQ_LONG(tally_stats_tree_create(&t, schema, NS, o), 0))
		return NULL;
	one_cpu_per_hold(t);
	return t;
}


static void start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(th, NULL, fn, arg);

	if (err) {
		fprintf(stderr, "pthread_create: %s\n", strerror(err));
		abort();
	}
}

/* ---- freshness under concurrent updates --------------------------------- */

/*
 * Writers add 1 to the "events" stat of a leaf, each publishing how many
 * of its updates completed; readers sum what was published, then force a
 * read of the leaf's parent: it must show at least that sum (and at most
 * what was started).  The system domain: rseq updates, real barriers.
 */
#define NR_WRITERS 3
#define NR_READERS 2

struct fresh {
	struct tally_stats_tree *t;
	struct tally_stats_group *parent, *leaf;
	long done[NR_WRITERS] __attribute__((aligned(64)));
	long reads;
	long stale, above;
	int stop;
};

struct fresh_arg {
	struct fresh *f;
	int id;
};

/* What the writers published: the updates of theirs that completed. */
static long published(const long *done)
{
	long sum = 0;

	for (int i = 0; i < NR_WRITERS; i++)
		sum += __atomic_load_n(&done[i], __ATOMIC_ACQUIRE);
	return sum;
}

static void *fresh_writer(void *arg)
{
	struct fresh_arg *a = arg;
	struct fresh *f = a->f;
	long n = 0;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		tally_stats_mod(f->leaf, 0, 1);
		__atomic_store_n(&f->done[a->id], ++n, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *fresh_reader(void *arg)
{
	struct fresh *f = ((struct fresh_arg *)arg)->f;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		long before = published(f->done), v = -1;

		tally_stats_read(f->parent, 0, TALLY_FLUSH_FORCE, &v, NULL);
		if (v < before)
			__atomic_add_fetch(&f->stale, 1, __ATOMIC_RELAXED);
		if (v > published(f->done) + NR_WRITERS)
			__atomic_add_fetch(&f->above, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&f->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static long reads_of(struct fresh *f)
{
	return __atomic_load_n(&f->reads, __ATOMIC_RELAXED);
}

/* Let the readers do @n more forced reads. */
static void fresh_wait_reads(struct fresh *f, long n)
{
	long until = reads_of(f) + n;

	while (reads_of(f) < until)
		usleep(1000);
}

/*
 * Let the readers go on until the tree reports fenced updates, for at most
 * @secs: a failing membarrier() switches at the next barrier, which
 * flushes issue once per 10 ms at most.
 */
static void fresh_wait_fenced(struct fresh *f, double secs)
{
	double until = harness_now() + secs;

	while (!util_stats_info(f->t).fenced && harness_now() < until)
		usleep(1000);
}

/*
 * Run writers and readers for @reads forced reads; when @midway is set,
 * call it (and let as many reads again follow, and the switch to fenced
 * updates happen).  Checks that no read was stale and that the final
 * value is exact.
 */
static void fresh_run(long reads, void (*midway)(void))
{
	struct fresh_arg wa[NR_WRITERS], ra[NR_READERS];
	pthread_t wth[NR_WRITERS], rth[NR_READERS];
	struct fresh *f = calloc(1, sizeof(*f));
	struct tally_stats_group *root;
	long v = -1;

	if (!CHECK(f))
		return;
	f->t = tree_with(NULL);
	if (!f->t) {
		free(f);
		return;
	}
	root = tally_stats_root(f->t);
	CHECK_EQ_LONG(tally_stats_group_create(root, "p", &f->parent), 0);
	CHECK_EQ_LONG(tally_stats_group_create(f->parent, "leaf", &f->leaf),
		      0);
	if (harness_test_failed())
		goto out;
	for (int i = 0; i < NR_WRITERS; i++) {
		wa[i] = (struct fresh_arg){ f, i };
		start(&wth[i], fresh_writer, &wa[i]);
	}
	for (int i = 0; i < NR_READERS; i++) {
		ra[i] = (struct fresh_arg){ f, i };
		start(&rth[i], fresh_reader, &ra[i]);
	}
	fresh_wait_reads(f, reads);
	if (midway) {
		midway();
		fresh_wait_reads(f, reads);
		fresh_wait_fenced(f, HARNESS_HANG_S);
	}
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(wth[i], NULL);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(rth[i], NULL);
	CHECK_EQ_LONG(f->stale, 0);
	CHECK_EQ_LONG(f->above, 0);
	CHECK_EQ_LONG(tally_stats_read(root, 0, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_EQ_LONG(v, published(f->done));
	CHECK(util_stats_info(f->t).fenced != 0);
	if (harness_test_failed())
		harness_log("%ld forced reads, %ld stale, %ld above, "
			    "%ld updates", f->reads, f->stale, f->above,
			    published(f->done));
out:
	tally_stats_tree_destroy(f->t);
	free(f);
}

/*
 * TALLY_MEMBARRIER=off, read at the first tree of the process, makes the
 * updates fenced from the start; forced reads stay fresh.
 */
TEST(membarrier_off_in_the_environment_makes_updates_fenced)
{
	static const char *const env[] = { "TALLY_MEMBARRIER=off", NULL };
	struct tally_stats_tree *t;

	if (!harness_is_child()) {
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	t = tree_with(NULL);
	REQUIRE(t);
	CHECK(util_stats_info(t).fenced != 0);
	tally_stats_tree_destroy(t);
	fresh_run(harness_scale(2000), NULL);
}

#ifdef TALLY_INJECT

/* ---- a blocking hook ------------------------------------------------------ */

struct blocker {
	int armed;
	sem_t entered, release;
};

static void blocker_init(struct blocker *b)
{
	b->armed = 1;
	sem_init(&b->entered, 0, 0);
	sem_init(&b->release, 0, 0);
}

static void blocker_fini(struct blocker *b)
{
	sem_destroy(&b->entered);
	sem_destroy(&b->release);
}

/* The first thread to reach the point waits there for the release. */
static int block_once(enum tally_inject_point point, void *arg)
{
	struct blocker *b = arg;

	(void)point;
	if (__atomic_exchange_n(&b->armed, 0, __ATOMIC_ACQ_REL)) {
		sem_post(&b->entered);
		while (sem_wait(&b->release))
			;
	}
	return 0;
}

/* Wait up to @secs for a thread to reach the blocker. */
static bool blocker_wait(struct blocker *b, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	while (sem_timedwait(&b->entered, &until))
		if (errno != EINTR)
			return false;
	return true;
}

/*
 * Start @fn(@arg) in *@th, to be stopped by @b at @point: true once it
 * is there; otherwise the point is cleared and the thread released and
 * joined.
 */
static bool start_stopped(pthread_t *th, void *(*fn)(void *), void *arg,
			  struct blocker *b, enum tally_inject_point point)
{
	blocker_init(b);
	tally_inject_set(point, block_once, b);
	start(th, fn, arg);
	if (CHECK(blocker_wait(b, HARNESS_HANG_S)))
		return true;
	harness_log("the thread never reached injection point %d",
		    (int)point);
	tally_inject_set(point, NULL, NULL);
	sem_post(&b->release);
	pthread_join(*th, NULL);
	return false;
}

/* ---- migration between commit and threshold bookkeeping --------------- */

static int migrate_away(enum tally_inject_point point, void *arg)
{
	int cpu = sched_getcpu();
	unsigned int i = 0;

	(void)point;
	(void)arg;
	while (util_allowed_cpu(i) == (unsigned int)cpu)
		i++;
	util_pin((int)util_allowed_cpu(i));
	return 0;
}

struct migrate_run {
	struct tally_stats_tree *t;
	struct tally_stats_group *g;
	long updates, done;
};

static void *migrating_updater(void *arg)
{
	struct migrate_run *m = arg;
	unsigned long bound = tally_stats_read_bound(m->t);

	for (long i = 1; i <= m->updates; i++) {
		long v = -1;

		/*
		 * First half: every update commits on the first CPU and does
		 * its bookkeeping on the other; then they alternate.
		 */
		if (i < m->updates / 2 || i == m->updates / 2)
			util_pin((int)util_allowed_cpu(0));
		tally_stats_mod(m->g, 0, 1);
		m->done = i;
		tally_stats_read(m->g, 0, TALLY_FLUSH_IF_NEEDED, &v, NULL);
		if (!CHECK_LE_LONG(i - v, (long)bound)) {
			harness_log("after %ld updates: if-needed read %ld",
				    i, v);
			break;
		}
	}
	return NULL;
}

/*
 * Every update is migrated to another CPU right after its commit: the
 * threshold count it left on the old CPU must still reach the group, or
 * the if-needed read never flushes.
 */
TEST(migration_after_commit_keeps_if_needed_reads_within_the_bound)
{
	struct migrate_run m = { .updates = harness_scale(20000) };
	pthread_t th;
	long v = -1;

	if (util_nr_allowed() < 2) {
		harness_info("one allowed CPU, nothing to migrate to: not run");
		return;
	}
	m.t = tree_with(NULL);
	REQUIRE(m.t);
	REQUIRE(tally_stats_group_create(tally_stats_root(m.t), "g", &m.g) ==
		0);
	tally_inject_set(TALLY_INJECT_STATS_AFTER_COMMIT, migrate_away, NULL);
	start(&th, migrating_updater, &m);
	pthread_join(th, NULL);
	tally_inject_set(TALLY_INJECT_STATS_AFTER_COMMIT, NULL, NULL);
	CHECK_EQ_LONG(tally_stats_read(m.g, 0, TALLY_FLUSH_FORCE, &v, NULL), 0);
	CHECK_EQ_LONG(v, m.done);
	tally_stats_tree_destroy(m.t);
}

/*
 * Updates made on a CPU that a flush has already passed are not folded by
 * that flush: their threshold counts must survive it (the flush used to
 * zero a group's over at every CPU's pass, wiping them), or a later
 * if-needed read misses them, far past tally_stats_read_bound().
 */
static struct tally_stats_group *late_leaf;
static long late_updates;

static int update_behind_the_flush(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (late_updates)
		return 0;
	for (int i = 0; i < 1000; i++)	/* on CPU 0, already passed */
		if (!tally_stats_mod_cpu(late_leaf, 0, 0, 1))
			late_updates++;
	return 0;
}

TEST(updates_behind_a_flush_keep_if_needed_reads_within_the_bound)
{
	static const struct tally_stat_desc one[] = {
		{ "events", TALLY_STAT_EVENT },
	};
	struct tally_domain *d = util_domain(2);
	struct tally_stats_options o = { .domain = d, .batch = 2 };
	struct tally_stats_tree *t;
	long v = -1, total;

	REQUIRE(tally_stats_tree_create(&t, one, 1, &o) == 0);
	one_cpu_per_hold(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "leaf",
					 &late_leaf) == 0);
	/* Updated on both CPUs, so that the flush passes both. */
	tally_stats_mod_cpu(late_leaf, 0, 0, 1);
	tally_stats_mod_cpu(late_leaf, 1, 0, 1);
	late_updates = 0;
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES,
			 update_behind_the_flush, NULL);
	CHECK_EQ_LONG(tally_stats_flush(tally_stats_root(t)), 0);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	REQUIRE(late_updates == 1000);
	total = 2 + late_updates;
	CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
				       TALLY_FLUSH_IF_NEEDED, &v, NULL), 0);
	CHECK_LE_LONG(total - v, (long)tally_stats_read_bound(t));
	CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
				       TALLY_FLUSH_FORCE, &v, NULL), 0);
	CHECK_EQ_LONG(v, total);
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
}

/* ---- membarrier failures ---------------------------------------------- */

static int fail_private, fail_global;

static int membarrier_fails(enum tally_inject_point point, void *arg)
{
	return __atomic_load_n((int *)arg, __ATOMIC_RELAXED) ? ENOMEM : 0;
}

static void private_starts_failing(void)
{
	__atomic_store_n(&fail_private, 1, __ATOMIC_RELAXED);
}

/*
 * In a fresh process (the switch to fenced updates is for good), with
 * TALLY_MEMBARRIER unset: membarrier(PRIVATE_EXPEDITED) starts failing
 * while writers update and readers force reads; membarrier(GLOBAL) fails
 * too when @global_fails, leaving mprotect() to make the switch safe.
 * No forced read may be stale, before, during or after the switch.
 */
static void membarrier_failure_run(const char *test, bool global_fails)
{
	static const char *const env[] = { "TALLY_MEMBARRIER=", NULL };

	if (!harness_is_child()) {
		CHECK_EQ_LONG(harness_rerun(test, env), 0);
		return;
	}
	fail_global = global_fails;
	tally_inject_set(TALLY_INJECT_MEMBARRIER, membarrier_fails,
			 &fail_private);
	tally_inject_set(TALLY_INJECT_MEMBARRIER_GLOBAL, membarrier_fails,
			 &fail_global);
	fresh_run(harness_scale(1000), private_starts_failing);
	/* A tree created after the switch is fenced too. */
	fresh_run(harness_scale(500), NULL);
	tally_inject_set(TALLY_INJECT_MEMBARRIER, NULL, NULL);
	tally_inject_set(TALLY_INJECT_MEMBARRIER_GLOBAL, NULL, NULL);
}

TEST(failed_membarrier_switches_to_fenced_updates_via_global_membarrier)
{
	membarrier_failure_run(__func__ + sizeof("test_") - 1, false);
}

TEST(failed_membarriers_switch_to_fenced_updates_via_mprotect)
{
	membarrier_failure_run(__func__ + sizeof("test_") - 1, true);
}

/* ---- an updater preempted in its push ------------------------------------ */

struct push_run {
	struct tally_stats_group *g;
	bool simulated;
	int released;		/* the stopped updater was let go */
	long value;
	bool released_before_return;
	int returned;
};

static void *blocked_updater(void *arg)
{
	struct push_run *p = arg;

	if (p->simulated)
		tally_stats_mod_cpu(p->g, 3, 0, 5);
	else
		tally_stats_mod(p->g, 0, 5);
	return NULL;
}

static void *forced_parent_reader(void *arg)
{
	struct push_run *p = arg;

	p->value = -1;
	tally_stats_read(tally_stats_group_parent(p->g), 0, TALLY_FLUSH_FORCE,
			 &p->value, NULL);
	p->released_before_return =
		__atomic_load_n(&p->released, __ATOMIC_ACQUIRE);
	__atomic_store_n(&p->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * An updater stops between claiming its group on a CPU and pushing it,
 * for good as far as the test goes.  A second update of the group on the
 * same CPU sees the claim, relies on that push and returns.  A forced
 * read of the parent must not wait for the stopped thread: it returns
 * both updates while that thread is still stopped (the first one's
 * stat was stored before its claim).  Once let go, the late push must
 * not count anything twice.  In the simulated domain both updates are on
 * CPU 3; on the system's CPUs the second one may land elsewhere.
 */
static void stopped_push_run(struct tally_domain *d)
{
	struct tally_stats_options o = { .domain = d };
	struct push_run p = { .simulated = d != NULL };
	struct tally_stats_tree *t = tree_with(&o);
	struct tally_stats_group *a;
	struct blocker b;
	pthread_t up, rd;
	long value = -1;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &p.g) == 0);
	if (!start_stopped(&up, blocked_updater, &p, &b,
			   TALLY_INJECT_STATS_IN_PUSH))
		goto out;
	if (p.simulated)
		CHECK_EQ_LONG(tally_stats_mod_cpu(p.g, 3, 0, 7), 0);
	else
		CHECK_EQ_LONG(tally_stats_mod(p.g, 0, 7), 0);
	start(&rd, forced_parent_reader, &p);
	for (double end = harness_now() + HARNESS_HANG_S;
	     !__atomic_load_n(&p.returned, __ATOMIC_ACQUIRE) &&
	     harness_now() < end;)
		usleep(1000);
	__atomic_store_n(&p.released, 1, __ATOMIC_RELEASE);
	sem_post(&b.release);
	pthread_join(rd, NULL);
	pthread_join(up, NULL);
	tally_inject_set(TALLY_INJECT_STATS_IN_PUSH, NULL, NULL);
	if (!CHECK(!p.released_before_return))
		harness_log("the read waited for the stopped updater");
	CHECK_EQ_LONG(p.value, 12);
	/* The late push is popped and folded again: nothing twice. */
	CHECK_EQ_LONG(tally_stats_read(a, 0, TALLY_FLUSH_FORCE, &value, NULL),
		      0);
	CHECK_EQ_LONG(value, 12);
	if (p.simulated)
		CHECK_EQ_LONG(tally_stats_mod_cpu(p.g, 3, 0, 1), 0);
	else
		CHECK_EQ_LONG(tally_stats_mod(p.g, 0, 1), 0);
	CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
				       TALLY_FLUSH_FORCE, &value, NULL),
		      0);
	CHECK_EQ_LONG(value, 13);
	CHECK_CMP_ULONG(util_stats_info(t).adoptions, >=, 1);
out:
	blocker_fini(&b);
	tally_stats_tree_destroy(t);
}

TEST(forced_read_folds_a_claim_whose_updater_is_stopped_before_its_push)
{
	struct tally_domain *d = util_domain(8);

	stopped_push_run(NULL);
	stopped_push_run(d);
	tally_domain_destroy(d);
}

/* ---- a holder of the engine's lock stopped on the waiter's CPU ---------- */

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct held_run {
	struct tally_stats_group *g;
	int cpu;
	int released;		/* the stopped holder was let go */
	long value;
	bool released_before_return;
	double wall, cpu_s;
};

static void *pinned_flusher(void *arg)
{
	struct held_run *h = arg;

	util_pin(h->cpu);
	CHECK_EQ_LONG(tally_stats_flush(h->g), 0);
	return NULL;
}

static void *pinned_reader(void *arg)
{
	struct held_run *h = arg;
	double wall, cpu;

	util_pin(h->cpu);
	wall = harness_now();
	cpu = thread_cpu_seconds();
	h->value = -1;
	tally_stats_read(h->g, 0, TALLY_FLUSH_FORCE, &h->value, NULL);
	h->released_before_return =
		__atomic_load_n(&h->released, __ATOMIC_ACQUIRE);
	h->cpu_s = thread_cpu_seconds() - cpu;
	h->wall = harness_now() - wall;
	return NULL;
}

/*
 * A flush stops while it holds the flush engine's lock, on the CPU where
 * a forced read of the same leaf then runs (both pinned there), as a
 * holder preempted by that reader would be.  The reader gives its CPU
 * back a few times, then sleeps: it must not spin while the holder does
 * not run (it uses under a fifth of its wall time on its CPU), and once
 * the holder goes on it returns every update made before it.
 */
TEST(flush_behind_a_stopped_holder_on_its_cpu_sleeps_then_reads_fresh)
{
	struct tally_stats_tree *t = tree_with(NULL);
	struct held_run h = { .cpu = (int)util_allowed_cpu(0) };
	struct tally_stats_group *a;
	struct blocker b;
	pthread_t fl, rd;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &h.g) == 0);
	CHECK_EQ_LONG(tally_stats_mod(h.g, 0, 1), 0);
	if (!start_stopped(&fl, pinned_flusher, &h, &b,
			   TALLY_INJECT_STATS_ENGINE_HELD))
		goto out;
	CHECK_EQ_LONG(tally_stats_mod(h.g, 0, 2), 0);
	start(&rd, pinned_reader, &h);
	usleep(500000);
	__atomic_store_n(&h.released, 1, __ATOMIC_RELEASE);
	sem_post(&b.release);
	pthread_join(rd, NULL);
	pthread_join(fl, NULL);
	tally_inject_set(TALLY_INJECT_STATS_ENGINE_HELD, NULL, NULL);
	CHECK(h.released_before_return);
	CHECK_EQ_LONG(h.value, 3);
	if (!CHECK(h.cpu_s < h.wall / 5))
		harness_log("the reader used %.3f s of CPU in %.3f s", h.cpu_s,
			    h.wall);
out:
	blocker_fini(&b);
	tally_stats_tree_destroy(t);
}

/*
 * A forced read of a leaf that no update reached since it was last
 * flushed has nothing to fold: it returns its values without flushing,
 * so it does not wait for an updater of another group caught in its push
 * (a flush would).  It still sees every update made before it.
 */
struct quiet_run {
	struct tally_stats_group *quiet;
	long value;
	sem_t done;
};

static void *quiet_reader(void *arg)
{
	struct quiet_run *q = arg;

	CHECK_EQ_LONG(tally_stats_read(q->quiet, 0, TALLY_FLUSH_FORCE,
				       &q->value, NULL),
		      0);
	sem_post(&q->done);
	return NULL;
}

TEST(forced_read_of_a_quiet_leaf_does_not_wait_for_updaters_of_others)
{
	struct push_run p = { .simulated = false };
	struct quiet_run q = { .value = -1 };
	struct tally_stats_tree *t = tree_with(NULL);
	struct tally_stats_group *a;
	struct timespec until;
	struct blocker b;
	pthread_t up, rd;
	bool returned = false;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "busy", &p.g) == 0);
	REQUIRE(tally_stats_group_create(a, "quiet", &q.quiet) == 0);
	CHECK_EQ_LONG(tally_stats_mod(q.quiet, 0, 7), 0);
	/*
	 * Flushed, then flushed again after a barrier (at most one per
	 * 10 ms): the leaf leaves the flush path.
	 */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_LONG(tally_stats_flush(q.quiet), 0);
		usleep(25000);
	}
	sem_init(&q.done, 0, 0);
	if (!start_stopped(&up, blocked_updater, &p, &b,
			   TALLY_INJECT_STATS_IN_PUSH))
		goto out;
	start(&rd, quiet_reader, &q);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HARNESS_HANG_S;
	while (!(returned = !sem_timedwait(&q.done, &until)) && errno == EINTR)
		;
	CHECK(returned);
	sem_post(&b.release);
	pthread_join(rd, NULL);
	pthread_join(up, NULL);
	tally_inject_set(TALLY_INJECT_STATS_IN_PUSH, NULL, NULL);
	CHECK_EQ_LONG(q.value, 7);
out:
	blocker_fini(&b);
	sem_destroy(&q.done);
	tally_stats_tree_destroy(t);
}

/* ---- a flush held between its passes ------------------------------------- */

struct fake_clock {
	uint64_t now;
};

static uint64_t fake_now(void *arg)
{
	return __atomic_load_n(&((struct fake_clock *)arg)->now,
			       __ATOMIC_RELAXED);
}

static void *flusher(void *arg)
{
	CHECK_EQ_LONG(tally_stats_flush(arg), 0);
	return NULL;
}

/*
 * Linux 6.1 design: a periodic tick that finds another flush running
 * skips its own and must say so (0), not claim it flushed (1).
 */
TEST(linux61_periodic_tick_that_skips_the_flush_returns_0)
{
	enum { PERIOD = 1000000 };
	struct fake_clock clk = { 1000000000000ull };
	struct tally_stats_options o = {
		.period_ns = PERIOD,
		.clock = fake_now,
		.clock_arg = &clk,
	};
	struct tally_stats_tree *t = NULL;
	struct tally_stats_group *root;
	uint64_t skipped;
	struct blocker b;
	pthread_t th;
	long v = -1;

	REQUIRE(bench_stats_tree_create(&t, schema, NS, &o,
					BENCH_STATS_LINUX61) == 0);
	one_cpu_per_hold(t);
	root = tally_stats_root(t);
	tally_stats_mod(root, 1, 3);
	blocker_init(&b);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, block_once, &b);
	start(&th, flusher, root);
	if (CHECK(blocker_wait(&b, HARNESS_HANG_S))) {
		__atomic_store_n(&clk.now, clk.now + 10 * PERIOD,
				 __ATOMIC_RELAXED);
		skipped = bench_stats_skipped(t);
		CHECK_EQ_LONG(tally_stats_periodic_tick(t), 0);
		CHECK_EQ_ULONG(bench_stats_skipped(t), skipped + 1);
		sem_post(&b.release);
	}
	pthread_join(th, NULL);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	/* Nothing in the way now: the tick is due and flushes. */
	CHECK_EQ_LONG(tally_stats_periodic_tick(t), 1);
	CHECK_EQ_LONG(tally_stats_read(root, 1, TALLY_FLUSH_NONE, &v, NULL), 0);
	CHECK_EQ_LONG(v, 3);
	blocker_fini(&b);
	tally_stats_tree_destroy(t);
}

struct create_run {
	struct tally_stats_group *parent, *out;
	int err;
	sem_t done;
};

static void *destroyer(void *arg)
{
	struct create_run *c = arg;

	c->err = tally_stats_group_destroy(c->parent);
	return NULL;
}

static void *creator(void *arg)
{
	struct create_run *c = arg;

	c->err = tally_stats_group_create(c->parent, "late", &c->out);
	sem_post(&c->done);
	return NULL;
}

/*
 * A group created under a parent whose destroy is in progress (held in
 * its flush) is refused with -EINVAL, at once: the parent is on its way
 * out, and a create that waited for the destroy would find it freed.
 */
TEST(create_under_a_parent_being_destroyed_is_einval)
{
	struct tally_stats_tree *t = tree_with(NULL);
	struct create_run d = { 0 }, c = { 0 };
	struct tally_stats_group *found;
	struct timespec until;
	struct blocker b;
	pthread_t dth, cth;
	bool created;
	long v = -1;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "p", &d.parent) ==
		0);
	tally_stats_mod(d.parent, 0, 2);
	c.parent = d.parent;
	c.out = (struct tally_stats_group *)&c;
	sem_init(&c.done, 0, 0);
	blocker_init(&b);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, block_once, &b);
	start(&dth, destroyer, &d);
	if (!CHECK(blocker_wait(&b, HARNESS_HANG_S))) {
		harness_log("the destroy never flushed the group");
		goto join;
	}
	start(&cth, creator, &c);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HARNESS_HANG_S;
	created = !sem_timedwait(&c.done, &until);
	if (!CHECK(created))
		harness_log("the create waited for the destroy");
	sem_post(&b.release);
	pthread_join(cth, NULL);
	CHECK_EQ_LONG(c.err, -EINVAL);
	CHECK(c.out == (struct tally_stats_group *)&c);
join:
	pthread_join(dth, NULL);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	CHECK_EQ_LONG(d.err, 0);
	CHECK_EQ_LONG(tally_stats_group_find(t, "p", &found), -ENOENT);
	CHECK_EQ_ULONG(util_stats_info(t).groups, 1);
	/* The destroyed group's update stays in the root. */
	CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
				       TALLY_FLUSH_FORCE, &v, NULL), 0);
	CHECK_EQ_LONG(v, 2);
	blocker_fini(&b);
	sem_destroy(&c.done);
	tally_stats_tree_destroy(t);
}

/* ---- a reader's flush stopped half way ---------------------------------- */

struct takeover_run {
	struct tally_stats_group *g;
	long value;
	int returned;
};

static void *forced_reader(void *arg)
{
	struct takeover_run *r = arg;

	tally_stats_read(r->g, 0, TALLY_FLUSH_FORCE, &r->value, NULL);
	__atomic_store_n(&r->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Wait up to @secs for @r to return. */
static bool returned_within(struct takeover_run *r, double secs)
{
	double until = harness_now() + secs;

	while (!__atomic_load_n(&r->returned, __ATOMIC_ACQUIRE)) {
		if (harness_now() > until)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * A reader's flush of a group stops half way (after its first CPU), as a
 * flusher that is preempted or SIGSTOPped there would.  A second forced
 * read of the group, of an update made after that flush began, must not
 * wait for it: the reader takes the flush over (runs one of its own) and
 * returns the update while the first flusher is still stopped.  Before
 * takeovers, it waited for the stopped flusher (here: until the test gave
 * up).
 */
TEST(reader_takes_over_a_flush_whose_flusher_is_stopped)
{
	struct tally_stats_tree *t = tree_with(NULL);
	struct takeover_run first = { 0 }, second = { 0 };
	struct tally_stats_group *a;
	struct blocker b;
	pthread_t th1, th2;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &first.g) == 0);
	second.g = first.g;
	tally_stats_mod(first.g, 0, 1);
	if (!start_stopped(&th1, forced_reader, &first, &b,
			   TALLY_INJECT_FLUSH_BETWEEN_PASSES))
		goto out;
	tally_stats_mod(first.g, 0, 2);
	start(&th2, forced_reader, &second);
	if (!CHECK(returned_within(&second, HARNESS_HANG_S)))
		harness_log("the second reader waited for the stopped flush");
	CHECK(!__atomic_load_n(&first.returned, __ATOMIC_ACQUIRE));
	sem_post(&b.release);
	pthread_join(th2, NULL);
	pthread_join(th1, NULL);
	CHECK_EQ_LONG(second.value, 3);
	CHECK_CMP_LONG(first.value, >=, 1);
	CHECK_CMP_ULONG(util_stats_info(t).takeovers, >=, 1);
out:
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	blocker_fini(&b);
	tally_stats_tree_destroy(t);
}

/*
 * A reader's flush of a leaf is done, and its flusher stops before it
 * tells the readers who share the flush (preempted or SIGSTOPped there).
 * No reader may wait for it: a forced read of the same leaf and one of an
 * unrelated leaf each return every update made before them while it stays
 * stopped.  (A flusher that published under a tree-wide lock held that
 * lock there, and both reads waited until the test gave up.)
 */
TEST(readers_never_wait_for_a_flusher_stopped_before_publishing)
{
	struct tally_stats_tree *t = tree_with(NULL);
	struct takeover_run first = { 0 }, same = { 0 }, other = { 0 };
	struct tally_stats_group *a;
	struct blocker b;
	pthread_t th1, th2, th3;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &first.g) == 0);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "c", &other.g) ==
		0);
	same.g = first.g;
	tally_stats_mod(first.g, 0, 1);
	if (!start_stopped(&th1, forced_reader, &first, &b,
			   TALLY_INJECT_STATS_FLUSH_DONE))
		goto out;
	tally_stats_mod(first.g, 0, 2);
	tally_stats_mod(other.g, 0, 5);
	start(&th2, forced_reader, &same);
	start(&th3, forced_reader, &other);
	if (!CHECK(returned_within(&other, HARNESS_HANG_S)))
		harness_log("a reader of another leaf waited for the flusher");
	if (!CHECK(returned_within(&same, HARNESS_HANG_S)))
		harness_log("a reader of the leaf waited for the flusher");
	CHECK(!__atomic_load_n(&first.returned, __ATOMIC_ACQUIRE));
	sem_post(&b.release);
	pthread_join(th3, NULL);
	pthread_join(th2, NULL);
	pthread_join(th1, NULL);
	CHECK_EQ_LONG(same.value, 3);
	CHECK_EQ_LONG(other.value, 5);
	CHECK_CMP_LONG(first.value, >=, 1);
out:
	tally_inject_set(TALLY_INJECT_STATS_FLUSH_DONE, NULL, NULL);
	blocker_fini(&b);
	tally_stats_tree_destroy(t);
}

/* ---- if-needed reads under a stopped flush ---------------------------- */

struct stopped_flush {
	struct tally_stats_group *g;
	struct blocker b;
	pthread_t th;
};

static void *stopped_flusher(void *arg)
{
	CHECK_EQ_LONG(tally_stats_flush(((struct stopped_flush *)arg)->g), 0);
	return NULL;
}

/* A flush of @g started in a thread and stopped after its first CPU. */
static bool stop_a_flush(struct stopped_flush *s, struct tally_stats_group *g)
{
	s->g = g;
	blocker_init(&s->b);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, block_once, &s->b);
	start(&s->th, stopped_flusher, s);
	if (CHECK(blocker_wait(&s->b, HARNESS_HANG_S)))
		return true;
	harness_log("the flush never reached its first CPU's end");
	return false;
}

static void resume_the_flush(struct stopped_flush *s)
{
	sem_post(&s->b.release);
	pthread_join(s->th, NULL);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	blocker_fini(&s->b);
}

/*
 * A flush of the leaf (@own) or of the root is stopped half way (its
 * flusher preempted or SIGSTOPped); the leaf is flushed meanwhile (its own
 * stopped flush taken over), then updated far past its threshold.  An
 * if-needed read of the leaf must flush (or wait for a flush that folds
 * the updates): the value it returns is within tally_stats_read_bound()
 * of the truth.  A flush of the leaf that completed before the read
 * began, before the updates, does not serve it, whatever flush is still
 * running.
 */
static void if_needed_read_under_a_stopped_flush(bool own)
{
	struct tally_domain *d = util_domain(2);
	struct tally_stats_options o = { .domain = d, .batch = 2 };
	struct tally_stats_tree *t = tree_with(&o);
	struct tally_stats_group *leaf;
	struct stopped_flush s;
	long v = -1;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "leaf", &leaf) ==
		0);
	CHECK_EQ_LONG(tally_stats_mod_cpu(leaf, 1, 0, 1), 0);
	if (stop_a_flush(&s, own ? leaf : tally_stats_root(t))) {
		/* Own: a nap without progress, then its own flush. */
		CHECK_EQ_LONG(tally_stats_flush(leaf), 0);
		if (own)
			CHECK_CMP_ULONG(util_stats_info(t).takeovers, >=, 1);
		CHECK_EQ_LONG(tally_stats_mod_cpu(leaf, 0, 0, 1000000), 0);
		CHECK_EQ_LONG(tally_stats_read(leaf, 0, TALLY_FLUSH_IF_NEEDED,
					       &v, NULL),
			      0);
		if (!CHECK_LE_LONG(1000001 - v,
				   (long)tally_stats_read_bound(t)))
			harness_log("if-needed read %ld of 1000001, the %s "
				    "flush stopped", v, own ? "leaf's" : "root");
	}
	resume_the_flush(&s);
	CHECK_EQ_LONG(tally_stats_read(leaf, 0, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_EQ_LONG(v, 1000001);
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
}

TEST(if_needed_read_under_a_stopped_ancestor_flush_stays_within_the_bound)
{
	if_needed_read_under_a_stopped_flush(false);
}

TEST(if_needed_read_after_a_takeover_of_a_stopped_flush_stays_within_the_bound)
{
	if_needed_read_under_a_stopped_flush(true);
}

/* ---- quiet reads of a leaf among flushes ------------------------------ */

/*
 * Writers update a leaf on CPUs of their own, each publishing how many of
 * its updates completed, pausing now and then so that flushes of the
 * root and of the leaf's parent fold and unlink it (it is then quiet:
 * stats_group_clean()); every flush is held a moment after its first CPU.
 * A reader sums what was published, then forces a read of the leaf: it
 * must show at least that sum, whether it flushed or found the leaf
 * quiet.
 */
struct quiet_fresh {
	struct tally_stats_group *root, *parent, *leaf;
	bool simulated;
	long done[NR_WRITERS] __attribute__((aligned(64)));
	long reads, quiet, stale;
	int stop;
};

struct quiet_fresh_arg {
	struct quiet_fresh *q;
	unsigned int id;
};

static void *quiet_fresh_writer(void *arg)
{
	struct quiet_fresh_arg *a = arg;
	struct quiet_fresh *q = a->q;
	long n = 0;

	while (!__atomic_load_n(&q->stop, __ATOMIC_RELAXED)) {
		if (q->simulated)
			tally_stats_mod_cpu(q->leaf, (a->id + (unsigned int)n) %
							     2,
					    0, 1);
		else
			tally_stats_mod(q->leaf, 0, 1);
		__atomic_store_n(&q->done[a->id], ++n, __ATOMIC_RELEASE);
		/* Quiet spells: a barrier (10 ms apart at most) settles the
		 * leaf on the system domain, a flush at once on simulated
		 * CPUs. */
		if (q->simulated ? !(n % 16) : !(n % 256)) {
			if (q->simulated)
				sched_yield();
			else
				usleep(20000);
		}
	}
	return NULL;
}

static void *quiet_fresh_flusher(void *arg)
{
	struct quiet_fresh *q = arg;

	for (unsigned int i = 0; !__atomic_load_n(&q->stop, __ATOMIC_RELAXED);
	     i++)
		tally_stats_flush(i % 2 ? q->root : q->parent);
	return NULL;
}

static void *quiet_fresh_reader(void *arg)
{
	struct quiet_fresh *q = arg;

	while (!__atomic_load_n(&q->stop, __ATOMIC_RELAXED)) {
		long before = published(q->done), v = -1;

		if (stats_group_clean(q->leaf))
			__atomic_add_fetch(&q->quiet, 1, __ATOMIC_RELAXED);
		tally_stats_read(q->leaf, 0, TALLY_FLUSH_FORCE, &v, NULL);
		if (v < before)
			__atomic_add_fetch(&q->stale, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&q->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int yield_between_passes(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	sched_yield();
	return 0;
}

static void quiet_fresh_run(struct tally_domain *d)
{
	struct tally_stats_options o = { .domain = d, .batch = 4 };
	struct tally_stats_tree *t = tree_with(&o);
	struct quiet_fresh *q = calloc(1, sizeof(*q));
	struct quiet_fresh_arg wa[NR_WRITERS];
	pthread_t wth[NR_WRITERS], fth, rth;
	long reads = harness_scale(20000), v = -1;

	REQUIRE(t && q);
	q->simulated = d != NULL;
	q->root = tally_stats_root(t);
	REQUIRE(tally_stats_group_create(q->root, "p", &q->parent) == 0);
	REQUIRE(tally_stats_group_create(q->parent, "leaf", &q->leaf) == 0);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES,
			 yield_between_passes, NULL);
	for (unsigned int i = 0; i < NR_WRITERS; i++) {
		wa[i] = (struct quiet_fresh_arg){ q, i };
		start(&wth[i], quiet_fresh_writer, &wa[i]);
	}
	start(&fth, quiet_fresh_flusher, q);
	start(&rth, quiet_fresh_reader, q);
	for (double until = harness_now() + HARNESS_HANG_S;
	     (__atomic_load_n(&q->reads, __ATOMIC_RELAXED) < reads ||
	      __atomic_load_n(&q->quiet, __ATOMIC_RELAXED) < reads / 100 ||
	      published(q->done) < reads) &&
	     harness_now() < until;)
		usleep(1000);
	__atomic_store_n(&q->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(wth[i], NULL);
	pthread_join(fth, NULL);
	pthread_join(rth, NULL);
	tally_inject_set(TALLY_INJECT_FLUSH_BETWEEN_PASSES, NULL, NULL);
	CHECK_EQ_LONG(q->stale, 0);
	CHECK_EQ_LONG(tally_stats_read(q->leaf, 0, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_EQ_LONG(v, published(q->done));
	/* How often the quiet path was taken (none: nothing proven of it). */
	harness_info("%s: %ld forced reads, %ld of a quiet leaf, %ld stale, "
		     "%ld updates", q->simulated ? "simulated CPUs" : "system",
		     q->reads, q->quiet, q->stale, published(q->done));
	free(q);
	tally_stats_tree_destroy(t);
}

TEST(forced_read_of_a_quiet_leaf_sees_every_update_before_it_among_flushes)
{
	struct tally_domain *d = util_domain(2);

	quiet_fresh_run(NULL);
	quiet_fresh_run(d);
	tally_domain_destroy(d);
}

#endif /* TALLY_INJECT */
