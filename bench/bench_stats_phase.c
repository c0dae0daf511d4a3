// SPDX-License-Identifier: MIT
/*
 * bench_stats_phase.c - what the sections of `tally bench stats` share:
 * the stats schema and the designs compared, two-level trees, and a
 * "phase": writers, checkers and readers running on one tree for a while.
 *
 * A phase is how the readers, unrelated and quiet sections measure: the
 * same threads (writers updating random stats of random leaves in a tight
 * loop, checkers adding 1 and reading it back with a forced read every
 * millisecond to catch stale reads, readers reading snapshots on absolute
 * deadlines or after a random pause) under the tree's periodic flusher,
 * as the kernel has one.  Every thread waits on one start signal, so that
 * none runs alone; threads get small stacks, so that 10,000 readers fit,
 * and a phase whose readers cannot all be created runs with those that
 * were (counted in readers_started).  Latencies are taken around the read
 * call with CLOCK_MONOTONIC, into one histogram per thread.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_stats.h"
#include "rand.h"

#define STACK_SIZE (64 * 1024)
#define PAUSE_MIN_NS 200000ull		/* unrelated and quiet readers */
#define PAUSE_SPAN_NS 800000ull

const struct tally_stat_desc bench_stats_schema[NR_STATS] = {
	{ "anon", TALLY_STAT_STATE },	  { "file", TALLY_STAT_STATE },
	{ "kernel", TALLY_STAT_STATE },	  { "sock", TALLY_STAT_STATE },
	{ "pgfault", TALLY_STAT_EVENT },  { "pgmajfault", TALLY_STAT_EVENT },
	{ "check0", TALLY_STAT_EVENT },	  { "check1", TALLY_STAT_EVENT },
};

const enum bench_stats_design bench_stats_designs[NR_DESIGNS] = {
	BENCH_STATS_TALLY, BENCH_STATS_LINUX61, BENCH_STATS_RFC2023,
	BENCH_STATS_LINUX68,
};

/* ---- trees -------------------------------------------------------------- */

struct tally_stats_tree *tree_new(unsigned int d)
{
	struct tally_stats_tree *t;
	int err = bench_stats_tree_create(&t, bench_stats_schema,
					  NR_STATS, NULL,
					  bench_stats_designs[d]);

	if (err) {
		fprintf(stderr, "tally: cannot create a %s stats tree: %s\n",
			design_name(d), strerror(-err));
		return NULL;
	}
	return t;
}

void tree_set_destroy(struct tree_set *s)
{
	tally_stats_tree_destroy(s->tree);
	free(s->groups);
	memset(s, 0, sizeof(*s));
}

int tree_set_build(struct tree_set *s, unsigned int d,
		   unsigned int fan_a, unsigned int fan_b)
{
	int err = 0;

	memset(s, 0, sizeof(*s));
	s->nr_leaves = fan_a * fan_b;
	s->nr_groups = 1 + fan_a + s->nr_leaves;
	s->groups = calloc(s->nr_groups, sizeof(*s->groups));
	s->tree = tree_new(d);
	if (!s->groups || !s->tree) {
		tree_set_destroy(s);
		return -1;
	}
	s->leaves = s->groups + 1 + fan_a;
	s->groups[0] = tally_stats_root(s->tree);
	for (unsigned int i = 0; i < fan_a && !err; i++) {
		char name[16];

		snprintf(name, sizeof(name), "a%u", i);
		err = tally_stats_group_create(s->groups[0], name,
					       &s->groups[1 + i]);
		for (unsigned int j = 0; j < fan_b && !err; j++) {
			snprintf(name, sizeof(name), "b%u", j);
			err = tally_stats_group_create(
				s->groups[1 + i], name,
				&s->leaves[i * fan_b + j]);
		}
	}
	if (err) {
		fprintf(stderr, "tally: cannot build a %u x %u tree: %s\n",
			fan_a, fan_b, strerror(-err));
		tree_set_destroy(s);
		return -1;
	}
	return 0;
}

int build_chain(struct tally_stats_tree *t, struct tally_stats_group **chain,
		unsigned int depth)
{
	chain[0] = tally_stats_root(t);
	for (unsigned int k = 1; k <= depth; k++) {
		char name[8];
		int err;

		snprintf(name, sizeof(name), "l%u", k);
		err = tally_stats_group_create(chain[k - 1], name, &chain[k]);
		if (err) {
			fprintf(stderr, "tally: cannot create group %s: %s\n",
				name, strerror(-err));
			return -1;
		}
	}
	return 0;
}

int build_big_trees(struct run *r)
{
	int err = 0;

	/* All four first: the allocator reuses nothing freed meanwhile. */
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		if (!r->big[d].tree)
			err = tree_set_build(&r->big[d], d, BIG_A, BIG_B);
	return err;
}

/* ---- phases: writers, checkers and readers on one tree ------------------- */

enum role { ROLE_WRITER, ROLE_CHECKER, ROLE_READER };

/* A cache line each: a writer's generator must not bounce. */
struct worker {
	struct phase *ph;
	pthread_t tid;
	enum role role;
	unsigned int index;		/* within its role */
	uint64_t rng;
	uint64_t ops;			/* updates, or checks */
	uint64_t stale;
	struct lat_hist late;		/* a reader's wake-ups past its deadline */
} __attribute__((aligned(64)));

static bool stopped(struct phase *ph)
{
	return __atomic_load_n(&ph->stop, __ATOMIC_RELAXED);
}

static void writer_loop(struct worker *w)
{
	struct phase *ph = w->ph;
	uint64_t ops = 0, rng = w->rng;

	while (!stopped(ph)) {
		uint64_t x = bench_rand(&rng);

		tally_stats_mod(ph->leaves[below(x, ph->nr_leaves)],
				below(x >> 32, NR_WRITER_STATS), 1);
		ops++;
	}
	w->ops = ops;
}

/*
 * Add 1 to our own stat of our own leaf, then read it back with a forced
 * read of the leaf (half the time), its parent or the root: every one of
 * them must include all we added.
 */
static void checker_loop(struct worker *w)
{
	struct phase *ph = w->ph;
	struct tally_stats_group *leaf = ph->check_leaf[w->index];
	unsigned int stat = NR_WRITER_STATS + w->index;
	struct tally_stats_group *read_at[4] = {
		leaf, tally_stats_group_parent(leaf), leaf, leaf,
	};
	struct lat_hist *h = &ph->check_hist[w->index];
	long added = 0, seen;

	while (tally_stats_group_parent(read_at[3]))
		read_at[3] = tally_stats_group_parent(read_at[3]);
	while (!stopped(ph)) {
		uint64_t t0;

		tally_stats_mod(leaf, stat, 1);
		added++;
		t0 = bench_now_ns();
		tally_stats_read(read_at[w->ops % 4], stat, TALLY_FLUSH_FORCE,
				 &seen, NULL);
		lat_hist_record(h, bench_now_ns() - t0);
		w->ops++;
		if (seen < added)
			w->stale++;
		sleep_until(bench_now_ns() + CHECK_PAUSE_NS);
	}
}

static void reader_loop(struct worker *w, struct lat_hist *h)
{
	struct phase *ph = w->ph;
	uint64_t next;
	long hier[NR_STATS];

	next = ph->start_ns + (ph->period_ns ? bench_rand(&w->rng) %
						       ph->period_ns : 0);
	lat_hist_reset(h);
	lat_hist_reset(&w->late);
	for (;;) {
		struct tally_stats_group *g;
		uint64_t t0, t1;

		sleep_until(next);
		if (stopped(ph))
			break;
		g = ph->targets[ph->fixed ? w->index :
					    below(bench_rand(&w->rng),
						  ph->nr_targets)];
		t0 = bench_now_ns();
		if (ph->period_ns)
			lat_hist_record(&w->late, t0 > next ? t0 - next : 0);
		tally_stats_snapshot(g, ph->mode, hier, NULL);
		t1 = bench_now_ns();
		lat_hist_record(h, t1 - t0);
		if (!ph->period_ns) {
			next = t1 + PAUSE_MIN_NS +
			       bench_rand(&w->rng) % PAUSE_SPAN_NS;
			continue;
		}
		/* A reader that fell behind skips the deadlines it missed. */
		next += ph->period_ns;
		if (next < t1)
			next += (t1 - next) / ph->period_ns * ph->period_ns +
				ph->period_ns;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct phase *ph = w->ph;

	pthread_mutex_lock(&ph->lock);
	while (!ph->go)
		pthread_cond_wait(&ph->cond, &ph->lock);
	pthread_mutex_unlock(&ph->lock);
	if (stopped(ph))
		return NULL;
	switch (w->role) {
	case ROLE_WRITER:
		writer_loop(w);
		break;
	case ROLE_CHECKER:
		checker_loop(w);
		break;
	case ROLE_READER:
		reader_loop(w, &ph->hist[w->index]);
		break;
	}
	return NULL;
}

static void phase_release(struct phase *ph, bool abort)
{
	pthread_mutex_lock(&ph->lock);
	ph->start_ns = bench_now_ns();
	ph->go = true;
	if (abort)
		__atomic_store_n(&ph->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&ph->cond);
	pthread_mutex_unlock(&ph->lock);
}

/* Create the threads of @ph; only readers may be missing (counted). */
static int phase_spawn(struct phase *ph, struct worker *w, unsigned int nr,
		       unsigned int *created)
{
	pthread_attr_t attr;
	int err = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	for (*created = 0; *created < nr; (*created)++) {
		struct worker *x = &w[*created];

		err = pthread_create(&x->tid, &attr, worker_main, x);
		if (err)
			break;
	}
	pthread_attr_destroy(&attr);
	if (err && w[*created].role == ROLE_READER)
		return 0;
	return -err;
}

int phase_run(struct phase *ph, struct tally_stats_tree *tree,
	      struct phase_result *res)
{
	unsigned int nr = NR_WRITERS + ph->checkers + ph->readers, created;
	struct worker *w = aligned_alloc(64, nr * sizeof(*w));
	struct rusage before, after;
	uint64_t end;
	int err;

	memset(res, 0, sizeof(*res));
	ph->hist = calloc(ph->readers ? ph->readers : 1, sizeof(*ph->hist));
	if (!w || !ph->hist) {
		free(w);
		free(ph->hist);
		ph->hist = NULL;
		fprintf(stderr, "tally: out of memory\n");
		return -1;
	}
	pthread_mutex_init(&ph->lock, NULL);
	pthread_cond_init(&ph->cond, NULL);
	ph->go = false;
	ph->stop = 0;
	memset(w, 0, nr * sizeof(*w));
	for (unsigned int c = 0; c < NR_CHECKERS; c++)
		lat_hist_reset(&ph->check_hist[c]);
	for (unsigned int i = 0; i < nr; i++) {
		w[i].ph = ph;
		w[i].rng = SEED + i;
		if (i < NR_WRITERS) {
			w[i].role = ROLE_WRITER;
			w[i].index = i;
		} else if (i < NR_WRITERS + ph->checkers) {
			w[i].role = ROLE_CHECKER;
			w[i].index = i - NR_WRITERS;
		} else {
			w[i].role = ROLE_READER;
			w[i].index = i - NR_WRITERS - ph->checkers;
		}
	}
	getrusage(RUSAGE_SELF, &before);
	err = tally_stats_periodic_start(tree);
	if (!err)
		err = phase_spawn(ph, w, nr, &created);
	else
		created = 0;
	phase_release(ph, err != 0);
	if (!err) {
		sleep_until(ph->start_ns + ph->duration_ns);
		__atomic_store_n(&ph->stop, 1, __ATOMIC_RELAXED);
	}
	end = bench_now_ns();
	for (unsigned int i = 0; i < created; i++)
		pthread_join(w[i].tid, NULL);
	tally_stats_periodic_stop(tree);
	getrusage(RUSAGE_SELF, &after);
	res->voluntary_switches = (uint64_t)(after.ru_nvcsw - before.ru_nvcsw);
	res->involuntary_switches =
		(uint64_t)(after.ru_nivcsw - before.ru_nivcsw);
	res->elapsed_s = (double)(end - ph->start_ns) / 1e9;
	if (created > NR_WRITERS + ph->checkers)
		res->readers_started = created - NR_WRITERS - ph->checkers;
	lat_hist_reset(&res->forced);
	lat_hist_reset(&res->wake_late);
	for (unsigned int i = 0; i < created; i++) {
		if (w[i].role == ROLE_READER) {
			lat_hist_merge(&res->wake_late, &w[i].late);
		} else if (w[i].role == ROLE_WRITER) {
			res->writer_ops += w[i].ops;
		} else if (w[i].role == ROLE_CHECKER) {
			res->checks += w[i].ops;
			res->stale += w[i].stale;
			lat_hist_merge(&res->forced,
				       &ph->check_hist[w[i].index]);
		}
	}
	tally_stats_tree_info(tree, &res->info);
	res->skipped = bench_stats_skipped(tree);
	res->design_lock_waits =
		bench_stats_design_lock_waits(tree, &res->design_lock_wait_ns);
	pthread_cond_destroy(&ph->cond);
	pthread_mutex_destroy(&ph->lock);
	free(w);
	if (err) {
		fprintf(stderr, "tally: cannot start the phase's threads: %s\n",
			strerror(-err));
		free(ph->hist);
		ph->hist = NULL;
		return -1;
	}
	return 0;
}

void lat_json(struct bench_json *w, const struct lat_hist *h)
{
	bench_json_int(w, "reads", (long long)h->count);
	bench_json_double(w, "p50_us", us(lat_hist_percentile(h, 0.5)));
	bench_json_double(w, "p99_us", us(lat_hist_percentile(h, 0.99)));
	bench_json_double(w, "max_us", us((double)h->max));
}
