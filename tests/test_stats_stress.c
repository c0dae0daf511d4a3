// SPDX-License-Identifier: MIT
/*
 * test_stats_stress.c - the statistics tree under real concurrency: more
 * threads than the machine's cores updating, reading, creating and
 * destroying groups while the periodic flusher runs, on the system domain
 * (rseq updates, membarrier flushes) and on simulated domains (many
 * threads on one simulated CPU), and from signal handlers that interrupt
 * the updating threads.
 *
 * Oracles: every writer sums what it added per group and stat; once all
 * threads are joined a forced read of every group must equal those sums
 * (destroyed groups' sums counting for their ancestors).  While they run,
 * event stats must never go down, and forced reads (TALLY and LINUX68
 * designs) must reflect every update that completed before the read
 * began: writers publish their counts after each update and readers load
 * them before reading.
 *
 * Runs last a fixed time (TALLY_TEST_SCALE scales it; about a second per
 * test at 1), then until every thread has done some work; a watchdog
 * turns a hang (a flusher spinning on a corrupted update list) into a
 * failure with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/stats.h>

#include "harness.h"
#include "util.h"
#include "../bench/stats_designs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NS 5

static const struct tally_stat_desc schema[NS] = {
	{ "s0", TALLY_STAT_EVENT }, { "s1", TALLY_STAT_STATE },
	{ "s2", TALLY_STAT_EVENT }, { "s3", TALLY_STAT_STATE },
	{ "s4", TALLY_STAT_STATE },
};

static double seconds(double s)
{
	return (double)harness_scale((long)(s * 1000.0)) / 1000.0;
}

static bool stopped(const int *stop)
{
	return __atomic_load_n(stop, __ATOMIC_RELAXED) != 0;
}

/* A tree on a simulated domain of @nr_cpus CPUs (0: the system domain). */
struct tree {
	struct tally_domain *dom;
	struct tally_stats_tree *t;
	struct tally_stats_group *root;
	unsigned int nr_cpus;
};

static bool tree_init(struct tree *tr, enum bench_stats_design design,
		      unsigned int nr_cpus, unsigned long batch,
		      uint64_t period_ns)
{
	struct tally_stats_options o = { 0 };

	memset(tr, 0, sizeof(*tr));
	if (nr_cpus)
		tr->dom = util_domain(nr_cpus);
	o.domain = tr->dom;
	o.batch = batch;
	o.period_ns = period_ns;
	if (!CHECK_EQ_LONG(bench_stats_tree_create(&tr->t, schema, NS, &o,
						   design),
			   0)) {
		tally_domain_destroy(tr->dom);
		return false;
	}
	tr->root = tally_stats_root(tr->t);
	tr->nr_cpus = tally_domain_nr_cpus(tr->dom ? tr->dom
						   : tally_domain_system());
	return true;
}

static void tree_fini(struct tree *tr)
{
	tally_stats_tree_destroy(tr->t);
	tally_domain_destroy(tr->dom);
}

static int mod(const struct tree *tr, struct tally_stats_group *g,
	       struct rng *r, unsigned int stat, long delta)
{
	if (tr->dom)
		return tally_stats_mod_cpu(g, (unsigned int)rng_below(
						      r, tr->nr_cpus),
					   stat, delta);
	return tally_stats_mod(g, stat, delta);
}

static const char *domain_name(const struct tree *tr)
{
	static __thread char buf[32];

	if (!tr->dom)
		return "system";
	snprintf(buf, sizeof(buf), "%u simulated CPUs", tr->nr_cpus);
	return buf;
}

static void start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(th, NULL, fn, arg);

	if (err) {
		fprintf(stderr, "pthread_create: %s\n", strerror(err));
		abort();
	}
}

/*
 * A run that does not end (a flusher spinning on a corrupted list, a
 * reader waiting for a flush that never comes) fails with a message
 * instead of hanging the test run.
 */
struct watchdog {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	double limit;
	const char *what;
};

static void *watchdog_main(void *arg)
{
	struct watchdog *w = arg;
	struct timespec until;
	bool done;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)w->limit;
	pthread_mutex_lock(&w->lock);
	while (!w->done &&
	       pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT)
		;
	done = w->done;
	pthread_mutex_unlock(&w->lock);
	if (!done) {
		printf("  %s: still running after %.0f s: hung\n", w->what,
		       w->limit);
		fflush(NULL);
		abort();
	}
	return NULL;
}

static void watchdog_start(struct watchdog *w, double run_secs,
			   const char *what)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->done = false;
	w->limit = 2 * HARNESS_HANG_S + 20 * run_secs;
	w->what = what;
	start(&w->th, watchdog_main, w);
}

static void watchdog_stop(struct watchdog *w)
{
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

/*
 * Let a run go on for @secs, and then until @done(@arg) says its threads
 * did what its checks need (on a loaded machine they may have had little
 * time), up to a hang.
 */
static void run_for(double secs, bool (*done)(void *arg), void *arg)
{
	double end;

	usleep((useconds_t)(secs * 1e6));
	end = harness_now() + HARNESS_HANG_S;
	while (harness_now() < end && !done(arg))
		usleep(1000);
}

/* ---- freshness ----------------------------------------------------------- */

#define NR_FRESH_WRITERS 3	/* on the watched group */
#define NR_FRESH_OTHERS 3	/* on other groups and stats */
#define NR_FRESH_READERS 4

struct fresh {
	struct tree tr;
	struct tally_stats_group *chain[4];	/* root, a, b, g */
	struct tally_stats_group *others[8];
	bool snapshot;
	int stop;
	struct {
		long done;		/* published after each update */
		pthread_t th;
	} w[NR_FRESH_WRITERS];
	unsigned long reads, violations, above;
	unsigned long live_reads;	/* so far */
	double max_read;	/* slowest forced read, seconds */
	pthread_mutex_t lock;
};

static long published(struct fresh *f)
{
	long sum = 0;

	for (int i = 0; i < NR_FRESH_WRITERS; i++)
		sum += __atomic_load_n(&f->w[i].done, __ATOMIC_ACQUIRE);
	return sum;
}

struct fresh_arg {
	struct fresh *f;
	int id;
};

static void *fresh_writer(void *p)
{
	struct fresh_arg *a = p;
	struct fresh *f = a->f;
	struct rng r = rng_seed(100 + (uint64_t)a->id);
	long n = 0;

	while (!stopped(&f->stop)) {
		if (!CHECK_EQ_LONG(mod(&f->tr, f->chain[3], &r, 0, 1), 0))
			break;
		__atomic_store_n(&f->w[a->id].done, ++n, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *fresh_other(void *p)
{
	struct fresh_arg *a = p;
	struct fresh *f = a->f;
	struct rng r = rng_seed(200 + (uint64_t)a->id);

	while (!stopped(&f->stop)) {
		uint64_t k = rng_below(&r, 12);
		struct tally_stats_group *g = k < 8 ? f->others[k]
						    : f->chain[k - 8];
		unsigned int s = 1 + (unsigned int)rng_below(&r, NS - 1);

		mod(&f->tr, g, &r, s, (long)rng_below(&r, 100));
	}
	return NULL;
}

static void *fresh_reader(void *p)
{
	struct fresh_arg *a = p;
	struct fresh *f = a->f;
	struct rng r = rng_seed(300 + (uint64_t)a->id);
	unsigned long reads = 0, violations = 0, above = 0;
	double max_read = 0;

	while (!stopped(&f->stop)) {
		struct tally_stats_group *g = f->chain[rng_below(&r, 4)];
		long before = published(f), v = -1, snap[NS];
		double t0 = harness_now(), dt;

		if (f->snapshot) {
			CHECK_EQ_LONG(tally_stats_snapshot(g, TALLY_FLUSH_FORCE,
							   snap, NULL), 0);
			v = snap[0];
		} else {
			CHECK_EQ_LONG(tally_stats_read(g, 0, TALLY_FLUSH_FORCE,
						       &v, NULL), 0);
		}
		reads++;
		__atomic_add_fetch(&f->live_reads, 1, __ATOMIC_RELAXED);
		dt = harness_now() - t0;
		if (dt > max_read)
			max_read = dt;
		if (v < before) {
			if (violations++ < 3)
				harness_log("stale forced read: %ld < %ld "
					    "completed before it",
					    v, before);
		}
		/* Nor more than what was done (each writer may be one
		 * update ahead of what it published). */
		if (v > published(f) + NR_FRESH_WRITERS)
			above++;
	}
	__atomic_add_fetch(&f->reads, reads, __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->violations, violations, __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->above, above, __ATOMIC_RELAXED);
	pthread_mutex_lock(&f->lock);
	if (max_read > f->max_read)
		f->max_read = max_read;
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* What run_fresh() checks: 50 forced reads among 1000 updates. */
static bool fresh_done(void *arg)
{
	struct fresh *f = arg;

	return __atomic_load_n(&f->live_reads, __ATOMIC_RELAXED) >= 50 &&
	       published(f) > 1000;
}

static void run_fresh(enum bench_stats_design design, unsigned int nr_cpus,
		      bool snapshot, double secs)
{
	struct fresh_arg wa[NR_FRESH_WRITERS], oa[NR_FRESH_OTHERS],
		ra[NR_FRESH_READERS];
	pthread_t oth[NR_FRESH_OTHERS], rth[NR_FRESH_READERS];
	struct fresh *f = calloc(1, sizeof(*f));
	struct watchdog wd;
	long total;

	if (!CHECK(f))
		return;
	f->snapshot = snapshot;
	pthread_mutex_init(&f->lock, NULL);
	if (!tree_init(&f->tr, design, nr_cpus, 0, 1000000)) {
		free(f);
		return;
	}
	f->chain[0] = f->tr.root;
	for (int i = 1; i < 4; i++)
		CHECK_EQ_LONG(tally_stats_group_create(f->chain[i - 1],
						       i == 3 ? "g" : "x",
						       &f->chain[i]), 0);
	for (int i = 0; i < 8; i++) {
		char name[16];

		snprintf(name, sizeof(name), "o%d", i);
		CHECK_EQ_LONG(tally_stats_group_create(f->chain[i % 3], name,
						       &f->others[i]), 0);
	}
	if (harness_test_failed())
		goto out;
	watchdog_start(&wd, secs, "freshness run");
	CHECK_EQ_LONG(tally_stats_periodic_start(f->tr.t), 0);
	for (int i = 0; i < NR_FRESH_WRITERS; i++) {
		wa[i] = (struct fresh_arg){ f, i };
		start(&f->w[i].th, fresh_writer, &wa[i]);
	}
	for (int i = 0; i < NR_FRESH_OTHERS; i++) {
		oa[i] = (struct fresh_arg){ f, i };
		start(&oth[i], fresh_other, &oa[i]);
	}
	for (int i = 0; i < NR_FRESH_READERS; i++) {
		ra[i] = (struct fresh_arg){ f, i };
		start(&rth[i], fresh_reader, &ra[i]);
	}
	run_for(secs, fresh_done, f);
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NR_FRESH_WRITERS; i++)
		pthread_join(f->w[i].th, NULL);
	for (int i = 0; i < NR_FRESH_OTHERS; i++)
		pthread_join(oth[i], NULL);
	for (int i = 0; i < NR_FRESH_READERS; i++)
		pthread_join(rth[i], NULL);
	CHECK_EQ_LONG(tally_stats_periodic_stop(f->tr.t), 0);
	watchdog_stop(&wd);

	total = published(f);
	CHECK_EQ_ULONG(f->violations, 0);
	CHECK_EQ_ULONG(f->above, 0);
	for (int i = 0; i < 4; i++) {
		long v = -1;

		CHECK_EQ_LONG(tally_stats_read(f->chain[i], 0,
					       TALLY_FLUSH_FORCE, &v, NULL), 0);
		CHECK_EQ_LONG(v, total);
	}
	harness_info("%s, %s, %s: %lu forced reads (slowest %.1f ms), %ld "
		     "updates of the group", bench_stats_design_name(design),
		     domain_name(&f->tr), snapshot ? "snapshot" : "read",
		     f->reads, f->max_read * 1e3, total);
out:
	tree_fini(&f->tr);
	free(f);
}

static const enum bench_stats_design fresh_designs[] = {
	BENCH_STATS_TALLY, BENCH_STATS_LINUX68,
};

TEST(forced_read_sees_every_update_completed_before_it)
{
	static const unsigned int cpus[] = { 0, 2, 16 };

	for (size_t d = 0; d < ARRAY_SIZE(fresh_designs); d++)
		for (size_t c = 0; c < ARRAY_SIZE(cpus); c++)
			if (!harness_test_failed())
				run_fresh(fresh_designs[d], cpus[c], false,
					  seconds(0.25));
}

TEST(forced_snapshot_sees_every_update_completed_before_it)
{
	static const unsigned int cpus[] = { 0, 2 };

	for (size_t d = 0; d < ARRAY_SIZE(fresh_designs); d++)
		for (size_t c = 0; c < ARRAY_SIZE(cpus); c++)
			if (!harness_test_failed())
				run_fresh(fresh_designs[d], cpus[c], true,
					  seconds(0.2));
}

/* ---- shared flushes ------------------------------------------------------ */

#define NR_SHARE_READERS 8

struct share {
	struct tree tr;
	struct tally_stats_group *g, *kids[4], *other;
	int stop;
	long reads_per_reader;
	double deadline;		/* after 5 reads, stop at this time */
	double hang;			/* ... or this one, none shared yet */
	uint64_t shared_before;		/* shared waits before the run */
	long reads;			/* done, atomic */
	long totals[2][6][NS];	/* per writer: g, kids, other */
};

struct share_arg {
	struct share *s;
	int id;
};

static void *share_writer(void *p)
{
	struct share_arg *a = p;
	struct share *s = a->s;
	struct rng r = rng_seed(400 + (uint64_t)a->id);

	while (!stopped(&s->stop)) {
		int k = (int)rng_below(&r, 6);
		struct tally_stats_group *g = k == 0 ? s->g
					      : k == 5 ? s->other
						       : s->kids[k - 1];
		unsigned int st = (unsigned int)rng_below(&r, NS);
		long delta = (long)rng_below(&r, 10);

		if (!schema[st].kind && rng_below(&r, 2))
			delta = -delta;
		mod(&s->tr, g, &r, st, delta);
		s->totals[a->id][k][st] += delta;
	}
	return NULL;
}

/* Did a reader wait for another's flush since the run began? */
static bool shared(struct share *s)
{
	struct tally_stats_info info;

	return tally_stats_tree_info(s->tr.t, &info) ||
	       info.shared_waits > s->shared_before;
}

static void *share_reader(void *p)
{
	struct share_arg *a = p;
	struct share *s = a->s;

	long i;

	/*
	 * At least 5 reads, up to reads_per_reader until the deadline, and
	 * on until a reader waited for another's flush: on a loaded machine
	 * the readers may not overlap before the deadline.
	 */
	for (i = 0; i < 5 || (i < s->reads_per_reader &&
			      harness_now() < s->deadline) ||
		    (!shared(s) && harness_now() < s->hang); i++) {
		long v;

		CHECK_EQ_LONG(tally_stats_read(s->g, (unsigned int)(i % NS),
					       TALLY_FLUSH_FORCE, &v, NULL), 0);
	}
	__atomic_add_fetch(&s->reads, i, __ATOMIC_RELAXED);
	return NULL;
}

TEST(concurrent_forced_reads_sharing_flushes_stay_exact)
{
	struct share_arg wa[2], ra[NR_SHARE_READERS];
	pthread_t wth[2], rth[NR_SHARE_READERS];
	struct tally_stats_info before, after;
	struct share *s = calloc(1, sizeof(*s));
	long reads, want[NS] = { 0 }, hier[NS], local[NS];
	struct watchdog wd;

	REQUIRE(s);
	if (!tree_init(&s->tr, BENCH_STATS_TALLY, 1024, 0, 0)) {
		free(s);
		return;
	}
	CHECK_EQ_LONG(tally_stats_group_create(s->tr.root, "g", &s->g), 0);
	CHECK_EQ_LONG(tally_stats_group_create(s->tr.root, "other", &s->other),
		      0);
	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "k%d", i);
		CHECK_EQ_LONG(tally_stats_group_create(s->g, name,
						       &s->kids[i]), 0);
	}
	s->reads_per_reader = harness_scale(200) < 50 ? 50
						       : harness_scale(200);
	s->deadline = harness_now() +
		      (seconds(0.5) < 0.2 ? 0.2 : seconds(0.5));
	s->hang = s->deadline + HARNESS_HANG_S;
	before.flushes = 0;
	CHECK_EQ_LONG(tally_stats_tree_info(s->tr.t, &before), 0);
	s->shared_before = before.shared_waits;
	watchdog_start(&wd, 1, "shared flushes");
	for (int i = 0; i < 2; i++) {
		wa[i] = (struct share_arg){ s, i };
		start(&wth[i], share_writer, &wa[i]);
	}
	for (int i = 0; i < NR_SHARE_READERS; i++) {
		ra[i] = (struct share_arg){ s, i };
		start(&rth[i], share_reader, &ra[i]);
	}
	for (int i = 0; i < NR_SHARE_READERS; i++)
		pthread_join(rth[i], NULL);
	CHECK_EQ_LONG(tally_stats_tree_info(s->tr.t, &after), 0);
	reads = s->reads;
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(wth[i], NULL);
	watchdog_stop(&wd);

	/*
	 * How many reads shared another's flush depends on the readers
	 * overlapping, which the scheduler decides; a reader whose shared
	 * flush stalls (its flusher preempted) runs its own, a takeover.
	 */
	CHECK_EQ_ULONG(after.root_flushes, 0);
	harness_info("%ld forced reads: %lu flushes, %lu shared waits, %lu "
		     "takeovers", reads,
		     (unsigned long)(after.flushes - before.flushes),
		     (unsigned long)(after.shared_waits - before.shared_waits),
		     (unsigned long)(after.takeovers - before.takeovers));

	for (int w = 0; w < 2; w++)
		for (int k = 0; k < 5; k++)
			for (int st = 0; st < NS; st++)
				want[st] += s->totals[w][k][st];
	CHECK_EQ_LONG(tally_stats_snapshot(s->g, TALLY_FLUSH_FORCE, hier,
					   local), 0);
	for (int st = 0; st < NS; st++) {
		CHECK_EQ_LONG(hier[st], want[st]);
		CHECK_EQ_LONG(local[st], s->totals[0][0][st] +
						 s->totals[1][0][st]);
	}
	CHECK_EQ_LONG(tally_stats_snapshot(s->tr.root, TALLY_FLUSH_FORCE, hier,
					   NULL), 0);
	for (int st = 0; st < NS; st++)
		CHECK_EQ_LONG(hier[st], want[st] + s->totals[0][5][st] +
						s->totals[1][5][st]);
	tree_fini(&s->tr);
	free(s);
}

/* ---- everything at once -------------------------------------------------- */

#define NR_TOP 10
#define NR_PER_TOP 4
#define NG (1 + NR_TOP + NR_TOP * NR_PER_TOP)	/* 51 groups */
#define NR_WRITERS 8
#define NR_READERS 3
#define NR_CHURNERS 2

struct stress {
	struct tree tr;
	enum bench_stats_design design;
	struct tally_stats_group *g[NG];
	int parent[NG];
	char path[NG][32];
	int stop;
	long wtot[NR_WRITERS][NG][NS];	/* each row written by its writer */
	long ctot[NR_CHURNERS][NG][NS];	/* churned leaves, by their parent */
	unsigned long reads, churned, decreases;
	unsigned long live_reads, live_churned;	/* so far */
};

struct stress_arg {
	struct stress *s;
	int id;
};

static long random_delta(struct rng *r, unsigned int stat)
{
	long v = rng_below(r, 10) ? (long)rng_below(r, 20)
				  : (long)rng_below(r, 3000);

	if (!schema[stat].kind && rng_below(r, 2))
		v = -v;
	return v;
}

static void *stress_writer(void *p)
{
	struct stress_arg *a = p;
	struct stress *s = a->s;
	struct rng r = rng_seed(500 + (uint64_t)a->id);
	long (*tot)[NS] = s->wtot[a->id];

	while (!stopped(&s->stop)) {
		for (int k = 0; k < 64; k++) {
			int i = (int)rng_below(&r, NG);
			unsigned int st = (unsigned int)rng_below(&r, NS);
			long delta = random_delta(&r, st);

			if (!CHECK_EQ_LONG(mod(&s->tr, s->g[i], &r, st, delta),
					   0))
				return NULL;
			tot[i][st] += delta;
		}
		if (rng_below(&r, 16) == 0)
			sched_yield();
	}
	return NULL;
}

static void *stress_reader(void *p)
{
	struct stress_arg *a = p;
	struct stress *s = a->s;
	struct rng r = rng_seed(600 + (uint64_t)a->id);
	long (*last)[NS] = calloc(NG, sizeof(*last));
	long (*last_local)[NS] = calloc(NG, sizeof(*last_local));
	unsigned long reads = 0, decreases = 0;
	char buf[256];

	if (!CHECK(last && last_local))
		goto out;
	while (!stopped(&s->stop)) {
		int i = (int)rng_below(&r, NG);
		enum tally_flush_mode mode =
			(enum tally_flush_mode)rng_below(&r, 4);
		long hier[NS], local[NS];
		struct tally_stats_group *g = NULL;
		long n = 0;

		switch (rng_below(&r, 8)) {
		case 0:
			CHECK_CMP_LONG(tally_stats_render(s->g[i], mode, buf,
							  sizeof(buf)), >, 0);
			continue;
		case 1:
			CHECK_EQ_LONG(tally_stats_group_find(s->tr.t,
							     s->path[i], &g),
				      0);
			CHECK(g == s->g[i]);
			CHECK_EQ_LONG(tally_stats_group_for_each_child(
					      s->g[i], util_count_child, &n), 0);
			continue;
		default:
			break;
		}
		CHECK_EQ_LONG(tally_stats_snapshot(s->g[i], mode, hier, local),
			      0);
		reads++;
		__atomic_add_fetch(&s->live_reads, 1, __ATOMIC_RELAXED);
		/* Event stats only go up, whatever the mode and design. */
		for (unsigned int st = 0; st < NS; st++) {
			if (!schema[st].kind)
				continue;
			if (hier[st] < last[i][st] ||
			    local[st] < last_local[i][st]) {
				if (decreases++ < 3)
					harness_log("group %d stat %u went "
						    "down: %ld -> %ld (local "
						    "%ld -> %ld)",
						    i, st, last[i][st],
						    hier[st],
						    last_local[i][st],
						    local[st]);
			}
			last[i][st] = hier[st];
			last_local[i][st] = local[st];
		}
	}
out:
	free(last);
	free(last_local);
	__atomic_add_fetch(&s->reads, reads, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->decreases, decreases, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Create a private leaf (sometimes with a child of its own), update it,
 * check it, destroy it: its totals belong to the parent's subtree.
 */
static void *stress_churner(void *p)
{
	struct stress_arg *a = p;
	struct stress *s = a->s;
	struct rng r = rng_seed(700 + (uint64_t)a->id);
	long (*tot)[NS] = s->ctot[a->id];
	bool fresh = s->design == BENCH_STATS_TALLY ||
		     s->design == BENCH_STATS_LINUX68;
	unsigned long n = 0;

	while (!stopped(&s->stop)) {
		int pi = (int)rng_below(&r, NG);
		struct tally_stats_group *leaf = NULL, *sub = NULL;
		long mine[NS] = { 0 }, sub_local[NS] = { 0 };
		long hier[NS], local[NS];
		char name[32];
		int nr = (int)rng_below(&r, 200);

		snprintf(name, sizeof(name), "churn%d.%lu", a->id, n++);
		__atomic_add_fetch(&s->live_churned, 1, __ATOMIC_RELAXED);
		if (!CHECK_EQ_LONG(tally_stats_group_create(s->g[pi], name,
							    &leaf), 0))
			break;
		if (rng_below(&r, 3) == 0 &&
		    !CHECK_EQ_LONG(tally_stats_group_create(leaf, "sub", &sub),
				   0))
			break;
		for (int k = 0; k < nr; k++) {
			unsigned int st = (unsigned int)rng_below(&r, NS);
			long delta = random_delta(&r, st);
			bool to_sub = sub && rng_below(&r, 2);

			CHECK_EQ_LONG(mod(&s->tr, to_sub ? sub : leaf, &r, st,
					  delta), 0);
			mine[st] += delta;
			if (to_sub)
				sub_local[st] += delta;
		}
		if (fresh && rng_below(&r, 2)) {
			/* Nobody else updates the leaf: exact. */
			CHECK_EQ_LONG(tally_stats_snapshot(leaf,
							   TALLY_FLUSH_FORCE,
							   hier, local), 0);
			for (unsigned int st = 0; st < NS; st++) {
				CHECK_EQ_LONG(hier[st], mine[st]);
				CHECK_EQ_LONG(local[st],
					      mine[st] - sub_local[st]);
			}
		}
		if (sub) {
			CHECK_EQ_LONG(tally_stats_group_destroy(leaf), -EBUSY);
			CHECK_EQ_LONG(tally_stats_group_destroy(sub), 0);
		}
		if (fresh && rng_below(&r, 2)) {
			CHECK_EQ_LONG(tally_stats_snapshot(leaf,
							   TALLY_FLUSH_FORCE,
							   hier, NULL), 0);
			for (unsigned int st = 0; st < NS; st++)
				CHECK_EQ_LONG(hier[st], mine[st]);
		}
		CHECK_EQ_LONG(tally_stats_group_destroy(leaf), 0);
		for (unsigned int st = 0; st < NS; st++)
			tot[pi][st] += mine[st];
		if (harness_test_failed())
			break;
	}
	__atomic_add_fetch(&s->churned, n, __ATOMIC_RELAXED);
	return NULL;
}

static bool below(const struct stress *s, int top, int i)
{
	for (; i >= 0; i = s->parent[i])
		if (i == top)
			return true;
	return false;
}

/* What run_stress() checks: reads of every reader, churned groups. */
static bool stress_done(void *arg)
{
	struct stress *s = arg;

	return __atomic_load_n(&s->live_reads, __ATOMIC_RELAXED) >=
		       10 * NR_READERS &&
	       __atomic_load_n(&s->live_churned, __ATOMIC_RELAXED) >=
		       3 * NR_CHURNERS;
}

static void run_stress(enum bench_stats_design design, unsigned int nr_cpus,
		       unsigned long batch, double secs)
{
	struct stress_arg wa[NR_WRITERS], ra[NR_READERS], ca[NR_CHURNERS];
	pthread_t wth[NR_WRITERS], rth[NR_READERS], cth[NR_CHURNERS];
	struct stress *s = calloc(1, sizeof(*s));
	struct tally_stats_info info;
	struct watchdog wd;
	int n = 1;

	if (!CHECK(s))
		return;
	s->design = design;
	if (!tree_init(&s->tr, design, nr_cpus, batch, 1000000)) {
		free(s);
		return;
	}
	s->g[0] = s->tr.root;
	s->parent[0] = -1;
	for (int top = 0; top < NR_TOP; top++) {
		int ti = n++;

		snprintf(s->path[ti], sizeof(s->path[ti]), "t%d", top);
		s->parent[ti] = 0;
		CHECK_EQ_LONG(tally_stats_group_create(s->tr.root, s->path[ti],
						       &s->g[ti]), 0);
		for (int k = 0; k < NR_PER_TOP; k++) {
			int ki = n++;
			char name[16];

			snprintf(name, sizeof(name), "k%d", k);
			snprintf(s->path[ki], sizeof(s->path[ki]), "t%d/k%d",
				 top, k);
			s->parent[ki] = ti;
			CHECK_EQ_LONG(tally_stats_group_create(s->g[ti], name,
							       &s->g[ki]), 0);
		}
	}
	if (harness_test_failed())
		goto out;
	watchdog_start(&wd, secs, "stress run");
	CHECK_EQ_LONG(tally_stats_periodic_start(s->tr.t), 0);
	for (int i = 0; i < NR_WRITERS; i++) {
		wa[i] = (struct stress_arg){ s, i };
		start(&wth[i], stress_writer, &wa[i]);
	}
	for (int i = 0; i < NR_READERS; i++) {
		ra[i] = (struct stress_arg){ s, i };
		start(&rth[i], stress_reader, &ra[i]);
	}
	for (int i = 0; i < NR_CHURNERS; i++) {
		ca[i] = (struct stress_arg){ s, i };
		start(&cth[i], stress_churner, &ca[i]);
	}
	run_for(secs, stress_done, s);
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(wth[i], NULL);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(rth[i], NULL);
	for (int i = 0; i < NR_CHURNERS; i++)
		pthread_join(cth[i], NULL);
	CHECK_EQ_LONG(tally_stats_periodic_stop(s->tr.t), 0);
	watchdog_stop(&wd);

	CHECK_EQ_ULONG(s->decreases, 0);
	/* Exact sums, root first (its flush covers everybody). */
	for (int i = 0; i < NG; i++) {
		long hier[NS], local[NS];

		CHECK_EQ_LONG(tally_stats_snapshot(s->g[i], TALLY_FLUSH_FORCE,
						   hier, local), 0);
		for (unsigned int st = 0; st < NS; st++) {
			long want_local = 0, want_hier = 0;

			for (int j = 0; j < NG; j++) {
				long sum = 0;

				for (int w = 0; w < NR_WRITERS; w++)
					sum += s->wtot[w][j][st];
				if (j == i)
					want_local = sum;
				for (int c = 0; c < NR_CHURNERS; c++)
					sum += s->ctot[c][j][st];
				if (below(s, i, j))
					want_hier += sum;
			}
			if (!CHECK_EQ_LONG(hier[st], want_hier) ||
			    !CHECK_EQ_LONG(local[st], want_local)) {
				harness_log("group %s stat %u", s->path[i], st);
				i = NG;
				break;
			}
		}
	}
	CHECK_EQ_LONG(tally_stats_tree_info(s->tr.t, &info), 0);
	CHECK_EQ_ULONG(info.groups, NG);
	harness_info("%s, %s: %lu reads, %lu churned groups, %lu flushes "
		     "(%lu root), %lu shared waits, %lu skipped",
		     bench_stats_design_name(design), domain_name(&s->tr),
		     s->reads, s->churned, (unsigned long)info.flushes,
		     (unsigned long)info.root_flushes,
		     (unsigned long)info.shared_waits,
		     (unsigned long)bench_stats_skipped(s->tr.t));
out:
	tree_fini(&s->tr);
	free(s);
}

TEST(concurrent_stress_tally_design_is_exact_after_join)
{
	run_stress(BENCH_STATS_TALLY, 0, 0, seconds(0.4));
	if (!harness_test_failed())
		run_stress(BENCH_STATS_TALLY, 16, 4, seconds(0.4));
}

TEST(concurrent_stress_linux61_design_is_exact_after_join)
{
	run_stress(BENCH_STATS_LINUX61, 0, 0, seconds(0.3));
	if (!harness_test_failed())
		run_stress(BENCH_STATS_LINUX61, 16, 4, seconds(0.3));
}

TEST(concurrent_stress_rfc2023_design_is_exact_after_join)
{
	run_stress(BENCH_STATS_RFC2023, 0, 0, seconds(0.3));
	if (!harness_test_failed())
		run_stress(BENCH_STATS_RFC2023, 16, 4, seconds(0.3));
}

TEST(concurrent_stress_linux68_design_is_exact_after_join)
{
	run_stress(BENCH_STATS_LINUX68, 0, 0, seconds(0.4));
	if (!harness_test_failed())
		run_stress(BENCH_STATS_LINUX68, 16, 4, seconds(0.4));
}

/* ---- destroying a parent while its last child goes ----------------------- */

struct pair_destroy {
	struct tally_stats_group *parent, *leaf;
	pthread_barrier_t go;
	int leaf_err, parent_err;
	int leaf_done;		/* atomic */
	bool overlapped;	/* the parent went while the leaf was going */
};

static void *destroy_leaf_main(void *arg)
{
	struct pair_destroy *p = arg;

	pthread_barrier_wait(&p->go);
	p->leaf_err = tally_stats_group_destroy(p->leaf);
	__atomic_store_n(&p->leaf_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *destroy_parent_main(void *arg)
{
	struct pair_destroy *p = arg;
	int err;

	pthread_barrier_wait(&p->go);
	while ((err = tally_stats_group_destroy(p->parent)) == -EBUSY)
		;
	p->overlapped = !__atomic_load_n(&p->leaf_done, __ATOMIC_ACQUIRE);
	p->parent_err = err;
	return NULL;
}

/*
 * Thread A destroys a leaf while thread B retries destroying its parent
 * until that stops failing with -EBUSY.  Whatever the interleaving, the
 * leaf's stats must reach the root, and no freed group may be touched
 * (ASan).
 */
TEST(concurrent_destroy_of_leaf_and_parent_keeps_stats)
{
	for (size_t d = 0; d < ARRAY_SIZE(fresh_designs); d++) {
		struct tree tr;
		struct rng r = rng_seed(800 + d);
		long want = 0, got = -1, overlaps = 0;
		long rounds = harness_scale(200);

		if (!tree_init(&tr, fresh_designs[d], 64, 0, 0))
			return;
		for (long i = 0; i < rounds && !harness_test_failed(); i++) {
			struct pair_destroy p = { 0 };
			pthread_t a, b;

			if (!CHECK_EQ_LONG(tally_stats_group_create(
						   tr.root, "p", &p.parent), 0) ||
			    !CHECK_EQ_LONG(tally_stats_group_create(
						   p.parent, "l", &p.leaf), 0))
				break;
			for (unsigned int cpu = 0; cpu < 64; cpu += 3) {
				long v = 1 + (long)rng_below(&r, 100);

				tally_stats_mod_cpu(p.leaf, cpu, 0, v);
				want += v;
			}
			pthread_barrier_init(&p.go, NULL, 2);
			start(&a, destroy_leaf_main, &p);
			start(&b, destroy_parent_main, &p);
			pthread_join(a, NULL);
			pthread_join(b, NULL);
			pthread_barrier_destroy(&p.go);
			CHECK_EQ_LONG(p.leaf_err, 0);
			CHECK_EQ_LONG(p.parent_err, 0);
			overlaps += p.overlapped;
			CHECK_EQ_LONG(tally_stats_read(tr.root, 0,
						       TALLY_FLUSH_FORCE, &got,
						       NULL), 0);
			if (!CHECK_EQ_LONG(got, want))
				harness_log("%s, round %ld",
					    bench_stats_design_name(
						    fresh_designs[d]), i);
		}
		if (harness_test_failed() || getenv("TALLY_TEST_VERBOSE"))
			harness_log("%s: %ld of %ld parents destroyed before "
				    "their leaf's destroy returned",
				    bench_stats_design_name(fresh_designs[d]),
				    overlaps, rounds);
		tree_fini(&tr);
		if (harness_test_failed())
			return;
	}
}

/*
 * fork() while other threads update: one of them may be caught between
 * claiming a group and pushing it, and the periodic flusher exists only in
 * the parent.  The child must still flush (no wait for a push that never
 * comes), stop the periodic flusher, and count exactly what it adds.
 */
struct fork_writer {
	struct tally_stats_group **leaves;
	size_t nr;
	int stop;
};

static void *fork_writer_main(void *arg)
{
	struct fork_writer *fw = arg;
	unsigned long i = 0;

	while (!__atomic_load_n(&fw->stop, __ATOMIC_RELAXED)) {
		tally_stats_mod(fw->leaves[i % fw->nr], 0, 1);
		/* Forced reads make groups idle, so updates push often. */
		if (!(++i % 64))
			tally_stats_flush(fw->leaves[i % fw->nr]);
	}
	return NULL;
}

TEST(fork_during_updates_leaves_child_flushes_working)
{
	enum { FORK_LEAVES = 16, FORK_WRITERS = 4 };
	struct tally_stats_group *leaves[FORK_LEAVES];
	struct fork_writer fw = { leaves, FORK_LEAVES, 0 };
	struct tally_stats_options opts = { .period_ns = 1000000 };
	pthread_t th[FORK_WRITERS];
	struct tally_stats_tree *t;
	long forks = harness_scale(40);

	REQUIRE(tally_stats_tree_create(&t, schema, NS, &opts) == 0);
	for (int i = 0; i < FORK_LEAVES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "l%d", i);
		REQUIRE(tally_stats_group_create(tally_stats_root(t), name,
						 &leaves[i]) == 0);
	}
	REQUIRE(tally_stats_periodic_start(t) == 0);
	for (int i = 0; i < FORK_WRITERS; i++)
		REQUIRE(pthread_create(&th[i], NULL, fork_writer_main, &fw) == 0);
	for (long k = 0; k < forks; k++) {
		pid_t pid = fork();

		if (pid == 0) {
			struct tally_stats_group *mine;
			long before, after;

			alarm(HARNESS_HANG_S);	/* a hang fails the test */
			CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
						       TALLY_FLUSH_FORCE,
						       &before, NULL), 0);
			CHECK_EQ_LONG(tally_stats_group_create(
					      tally_stats_root(t), "child",
					      &mine), 0);
			for (int i = 0; i < 1000; i++)
				tally_stats_mod(mine, 0, 1);
			tally_stats_mod(leaves[k % FORK_LEAVES], 0, 7);
			CHECK_EQ_LONG(tally_stats_read(tally_stats_root(t), 0,
						       TALLY_FLUSH_FORCE,
						       &after, NULL), 0);
			/*
			 * A parent writer caught between its per-CPU add and
			 * its claim left a +1 that no list names: it shows
			 * once the child's own update of that leaf lists it
			 * (documented: "may or may not appear").  At most
			 * one per writer.
			 */
			CHECK(after - before >= 1007 &&
			      after - before <= 1007 + FORK_WRITERS);
			CHECK_EQ_LONG(tally_stats_periodic_stop(t), 0);
			tally_stats_tree_destroy(t);
			harness_child_exit();
		}
		CHECK_EQ_LONG(harness_wait_child(pid), 0);
	}
	__atomic_store_n(&fw.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < FORK_WRITERS; i++)
		pthread_join(th[i], NULL);
	tally_stats_tree_destroy(t);
}

/*
 * Updates from signal handlers (tally_stats_mod() is async-signal-safe):
 * threads update a group while another thread signals them and the main
 * thread flushes, so that handlers land inside the interrupted thread's
 * rseq sequence, its claim of the group, or its push on the CPU's list;
 * each handler updates the same group and a child of it.  After the join
 * a forced read must hold every thread's and every handler's deltas.
 */
enum { SIG_WRITERS = 2 };

struct sig_run {
	struct tally_stats_group *g, *child;
	pthread_t th[SIG_WRITERS];
	long added[SIG_WRITERS];
	unsigned long handled;
	int stop_writers, stop_signals;
};

static struct sig_run *sig_run;

static void on_update_signal(int sig)
{
	struct sig_run *s = __atomic_load_n(&sig_run, __ATOMIC_ACQUIRE);
	int saved_errno = errno;

	(void)sig;
	if (tally_stats_mod(s->g, 0, 2) == 0 &&
	    tally_stats_mod(s->child, 1, 5) == 0)
		__atomic_add_fetch(&s->handled, 1, __ATOMIC_RELAXED);
	errno = saved_errno;
}

/* @arg: where the writer leaves its count of updates. */
static void *sig_writer_main(void *arg)
{
	struct sig_run *s = __atomic_load_n(&sig_run, __ATOMIC_ACQUIRE);
	long added = 0;

	while (!stopped(&s->stop_writers)) {
		if (tally_stats_mod(s->g, 0, 1) == 0 &&
		    tally_stats_mod(s->g, 1, -1) == 0)
			added++;
	}
	*(long *)arg = added;
	return NULL;
}

static void *sig_signaller_main(void *arg)
{
	struct sig_run *s = arg;
	const struct timespec pause = { 0, 20000 };

	for (unsigned long i = 0; !stopped(&s->stop_signals); i++) {
		pthread_kill(s->th[i % SIG_WRITERS], SIGUSR1);
		if (i % 8 == 0)
			nanosleep(&pause, NULL);
	}
	return NULL;
}

TEST(updates_from_signal_handlers_are_counted_exactly)
{
	struct sig_run s = { 0 };
	struct sigaction sa, old_sa;
	struct tally_stats_tree *t;
	pthread_t signaller;
	double end = harness_now() + seconds(0.5);
	long events = 0, state = 0, hier, local;

	REQUIRE(tally_stats_tree_create(&t, schema, NS, NULL) == 0);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "g", &s.g) == 0);
	REQUIRE(tally_stats_group_create(s.g, "child", &s.child) == 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_update_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	__atomic_store_n(&sig_run, &s, __ATOMIC_RELEASE);
	REQUIRE(sigaction(SIGUSR1, &sa, &old_sa) == 0);
	for (int i = 0; i < SIG_WRITERS; i++)
		pthread_create(&s.th[i], NULL, sig_writer_main, &s.added[i]);
	pthread_create(&signaller, NULL, sig_signaller_main, &s);
	/* Flushes make the group idle again: the next update claims it. */
	while (harness_now() < end ||
	       (!__atomic_load_n(&s.handled, __ATOMIC_RELAXED) &&
		harness_now() < end + HARNESS_HANG_S))
		tally_stats_flush(s.g);
	__atomic_store_n(&s.stop_signals, 1, __ATOMIC_RELAXED);
	pthread_join(signaller, NULL);
	__atomic_store_n(&s.stop_writers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < SIG_WRITERS; i++) {
		pthread_join(s.th[i], NULL);
		events += s.added[i];
		state -= s.added[i];
	}
	sigaction(SIGUSR1, &old_sa, NULL);
	harness_info("%lu signal handlers updated the group", s.handled);
	events += 2 * (long)s.handled;
	state += 5 * (long)s.handled;
	CHECK(tally_stats_read(s.g, 0, TALLY_FLUSH_FORCE, &hier, &local) == 0);
	CHECK_EQ_LONG(hier, events);
	CHECK_EQ_LONG(local, events);
	CHECK(tally_stats_read(s.g, 1, TALLY_FLUSH_FORCE, &hier, NULL) == 0);
	CHECK_EQ_LONG(hier, state);
	CHECK(tally_stats_read(s.child, 1, TALLY_FLUSH_FORCE, &hier, NULL) == 0);
	CHECK_EQ_LONG(hier, 5 * (long)s.handled);
	tally_stats_tree_destroy(t);
}
