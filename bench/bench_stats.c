// SPDX-License-Identifier: MIT
/*
 * bench_stats.c - `tally bench stats`: the four flushing designs of the
 * statistics tree (tally, linux61, seed001, linux68) in the same run.
 *
 * A benchmark, not a timed test: it prints a table per section, with the
 * ratios between designs measured in the same run (and JSON with --json).
 * Sections, in order:
 *
 *   update     ns per tally_stats_mod(+1) on a group 1, 2, 4 and 8 levels
 *              below the root, one thread; repetitions interleaved over
 *              the designs, median.  Per-group thresholds (tally, linux68)
 *              add to a count per ancestor, the global threshold (linux61,
 *              seed001) to one count.  Nothing reads: past the first batch
 *              the threshold atomics stay over the threshold and are
 *              skipped, as for a busy group between two flushes.
 *   create     us per tally_stats_group_create() of N groups (1,000,
 *              4,000, 16,000): all children of the root (a flat tree), all
 *              children of the end of a 64-group chain, or a tree of at
 *              most 16 children per group (what the whole tree costs,
 *              apart from siblings); a fresh tree (tally design) per run,
 *              runs interleaved, median.  If the cost per create grows in
 *              proportion to N, creating N groups costs O(N^2).
 *   flush      us per forced flush of the root after updates, on simulated
 *              domains: 1,000 groups (25 x 40) with 4 updates each on 64
 *              CPUs, 2,000 groups (50 x 40) with 8 updates each on 384
 *              CPUs, each update on a random CPU; best of 30 (the flush
 *              engine's cost, not the sharing).
 *   readers    a kernel flushing test scaled to 2 cores.  A 50 x 5 tree;
 *              writers update random stats of random leaves in a tight
 *              loop; R reader threads per CPU sleep until their next period P
 *              (absolute deadlines, random start phase) and read the
 *              snapshot of a random group with TALLY_FLUSH_IF_NEEDED, what
 *              memory.stat readers get.  Faithful rows: 26 per CPU, the
 *              test's 10,000 readers on 384 CPUs, at 10 and 100 ms; one
 *              overload row: 500 per CPU (1,000 readers on 2 CPUs) at
 *              10 ms.
 *              Checker threads each own a stat and a leaf: every
 *              millisecond they add 1, then read the stat back with
 *              TALLY_FLUSH_FORCE from the leaf, its parent or the root; a
 *              value below what they added is a stale read.  The same
 *              writers and checkers also run without readers, to give the
 *              writers' throughput that readers cost.
 *   unrelated  a 100 x 100 tree, writers on every leaf, two readers of
 *              unrelated subtrees (/a17 and /a83) reading with forced
 *              reads (a forced read always flushes, so it shows whether
 *              one reader ends up flushing the other's subtree or the
 *              root), pausing 200 us to 1 ms between reads.
 *   quiet      forced reads of a leaf that gets no updates, paced the same
 *              way, in the busy 100 x 100 tree and in a 10-group tree, the
 *              same writers updating every other leaf.
 *
 * --only runs some of the sections, still in this order.  Sections 4 and
 * 6 (its small tree) build a fresh tree per phase; the four 100 x 100
 * trees are built once, before any of them is freed, and serve sections 5
 * and 6.  Every phase runs the tree's periodic flusher (2 s), as the kernel
 * has one.  Latencies are taken around the read call with CLOCK_MONOTONIC;
 * on 2 cores they include waiting for a CPU.  Threads get small stacks, so
 * that 10,000 readers fit; if some cannot be created the phase runs with
 * those that were and says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tally/domain.h>
#include <tally/stats.h>
#include "bench.h"
#include "latency.h"
#include "../tool/args.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "rand.h"
#include "stats_designs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NR_DESIGNS 4
#define NR_WRITERS 2
#define NR_CHECKERS 2
#define NR_WRITER_STATS 6	/* the checkers' stats follow */
#define NR_STATS (NR_WRITER_STATS + NR_CHECKERS)
#define MAX_READERS 100000
#define STACK_SIZE (64 * 1024)
#define CHECK_PAUSE_NS 1000000ull
#define PAUSE_MIN_NS 200000ull		/* unrelated and quiet readers */
#define PAUSE_SPAN_NS 800000ull
#define SEED 0x7a11e5eedull
#define NS_PER_US 1000.0

static const struct tally_stat_desc schema[NR_STATS] = {
	{ "anon", TALLY_STAT_STATE },	  { "file", TALLY_STAT_STATE },
	{ "kernel", TALLY_STAT_STATE },	  { "sock", TALLY_STAT_STATE },
	{ "pgfault", TALLY_STAT_EVENT },  { "pgmajfault", TALLY_STAT_EVENT },
	{ "check0", TALLY_STAT_EVENT },	  { "check1", TALLY_STAT_EVENT },
};

static const enum bench_stats_design designs[NR_DESIGNS] = {
	BENCH_STATS_TALLY, BENCH_STATS_LINUX61, BENCH_STATS_SEED001,
	BENCH_STATS_LINUX68,
};

static const unsigned int depths[] = { 1, 2, 4, 8 };
#define MAX_DEPTH 8

/*
 * Section 2: N groups created under one parent, the root or the end of a
 * chain, and, to tell the siblings' cost from the whole tree's, in a tree
 * where no group has more than 16 children.
 */
static const unsigned int create_counts[] = { 1000, 4000, 16000 };
#define NR_CREATE_COUNTS ARRAY_SIZE(create_counts)
#define MAX_CREATE 16000
#define CHAIN_DEPTH 64

static const struct create_shape {
	const char *title;
	const char *key;		/* in the JSON */
	unsigned int parent_depth;	/* one parent, this deep */
	unsigned int fanout;		/* or: at most this many children */
} create_shapes[] = {
	{ "root (flat)", "flat", 0, 0 },
	{ "depth 64", "chain", CHAIN_DEPTH, 0 },
	{ "fan-out 16", "fanout", 0, 16 },
};
#define NR_CREATE_SHAPES ARRAY_SIZE(create_shapes)

/*
 * Section 4's rows.  The kernel test ran 10,000 readers on 384 CPUs, 26
 * per CPU: the faithful rows keep that many per CPU this process may run
 * on, at each period; the overload row runs 500 per CPU (what 1,000
 * readers are on 2 CPUs) at the first period.
 */
#define DEFAULT_READERS_PER_CPU 26
#define DEFAULT_OVERLOAD_PER_CPU 500
#define MAX_PERIODS 4
#define MAX_ROWS (MAX_PERIODS + 1)
static const unsigned int default_periods_ms[] = { 10, 100 };

struct readers_row {
	unsigned int readers;		/* in all */
	unsigned int per_cpu;
	unsigned int period_ms;
	bool overload;
};

/* Tree shapes. */
#define READERS_A 50
#define READERS_B 5
#define BIG_A 100
#define BIG_B 100
#define SMALL_A 3
#define SMALL_B 2
#define UNRELATED_1 17		/* /a17 */
#define UNRELATED_2 83		/* /a83 */
#define BIG_QUIET (50 * BIG_B + 50)	/* leaf a50/b50 */
#define SMALL_QUIET (1 * SMALL_B + 1)	/* leaf a1/b1 */

/* Phase durations at --duration-scale 1, in ms. */
#define READERS_MS 5000
#define UNRELATED_MS 5000
#define QUIET_MS 3000

/*
 * A two-level tree: the root, fan_a groups "aI", each with fan_b leaves
 * "bJ".  @groups lists every group, the root first, then the aI, then the
 * leaves: leaf (i, j) is leaves[i * fan_b + j].
 */
struct tree_set {
	struct tally_stats_tree *tree;
	struct tally_stats_group **groups;
	struct tally_stats_group **leaves;
	unsigned int nr_groups;
	unsigned int nr_leaves;
};

/* Figures of one phase. */
struct phase_result {
	double elapsed_s;
	uint64_t writer_ops;
	uint64_t checks;
	uint64_t stale;
	unsigned int readers_started;
	struct tally_stats_info info;
	uint64_t skipped;		/* reads that skipped a needed flush */
	struct lat_hist forced;		/* the checkers' reads */
};

struct readers_result {
	struct lat_hist hist;
	struct phase_result with;
};

struct unrelated_result {
	struct lat_hist hist[2];
	struct tally_stats_info info;
};

/* One invocation: options, outputs and the figures of the sections. */
struct run {
	const char *json_path;
	unsigned int readers_per_cpu, overload_per_cpu;
	unsigned int periods_ms[MAX_PERIODS], nr_periods;
	unsigned int nr_cpus;		/* the CPUs this process may run on */
	struct readers_row rows[MAX_ROWS];
	unsigned int nr_rows;
	double scale;
	bool quick;
	unsigned int only;		/* bit i: sections[i] runs */
	struct bench_plan update_plan;
	unsigned int create_reps;
	FILE *out;
	struct bench_json json;
	struct readers_result rd[NR_DESIGNS][MAX_ROWS];
	struct phase_result alone[NR_DESIGNS];
	struct unrelated_result un[NR_DESIGNS];
	struct lat_hist quiet[NR_DESIGNS][2];	/* busy, small */
	struct tree_set big[NR_DESIGNS];	/* sections 5 and 6 */
};

static int bench_update(struct run *r);
static int bench_create(struct run *r);
static int bench_flush(struct run *r);
static int bench_readers(struct run *r);
static int bench_unrelated(struct run *r);
static int bench_quiet(struct run *r);

/* The sections, in the order they run; --only picks some by name. */
static const struct section {
	const char *name;
	const char *help;
	int (*run)(struct run *r);
} sections[] = {
	{ "update", "ns per update, groups 1 to 8 levels deep", bench_update },
	{ "create", "us per group create, 1000 to 16000 groups", bench_create },
	{ "flush", "us per forced root flush, 64 and 384 simulated CPUs",
	  bench_flush },
	{ "readers", "readers under load: latency, stale reads",
	  bench_readers },
	{ "unrelated", "two readers of unrelated subtrees", bench_unrelated },
	{ "quiet", "reads of a quiet group in a busy tree", bench_quiet },
};
#define NR_SECTIONS ARRAY_SIZE(sections)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench stats [--json FILE] [--only LIST]\n"
		"                         [--readers-per-cpu N] [--overload-per-cpu N]\n"
		"                         [--periods LIST] [--duration-scale X | --quick]\n"
		"\n"
		"Compare the statistics tree's flushing designs (tally, linux61,\n"
		"seed001, linux68): update cost by depth, group creation cost as the\n"
		"tree grows (tally design), readers under load (stale reads, latency,\n"
		"writer throughput), readers of unrelated subtrees and a quiet group in\n"
		"a busy tree.  Prints tables and ratios.\n"
		"\n"
		"  --json FILE           also write the figures as JSON to FILE; \"-\"\n"
		"                        means standard output (tables go to standard error)\n"
		"  --only LIST           run only these sections (comma-separated, run in\n"
		"                        the order below; default: all):\n");
	for (unsigned int i = 0; i < NR_SECTIONS; i++)
		fprintf(f, "                          %-10s %s\n", sections[i].name,
			sections[i].help);
	fprintf(f,
		"                        e.g. --only update,create compares the update and\n"
		"                        create costs of two builds in about 20 s\n"
		"  --readers-per-cpu N   reader threads per CPU of the readers section's\n"
		"                        faithful rows (default 26: seed 001's 10,000\n"
		"                        readers on 384 CPUs)\n"
		"  --overload-per-cpu N  reader threads per CPU of its overload row, run at\n"
		"                        the first period (default 500; 0: no such row)\n"
		"  --periods LIST        the readers' periods in ms, a faithful row each\n"
		"                        (default 10,100; at most 4)\n"
		"  --duration-scale X    multiply every phase's duration by X (0.01 to 100)\n"
		"  --quick               short runs (about 30 s): a quick look, noisier\n"
		"  -h, --help            show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	const char *names[NR_SECTIONS];
	struct run *r = ctx;
	unsigned long nr;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 'o':
		for (unsigned int i = 0; i < NR_SECTIONS; i++)
			names[i] = sections[i].name;
		return tool_opt_names(arg, names, NR_SECTIONS, &r->only);
	case 'r':
		if (tool_opt_uint(arg, 1, MAX_READERS, &nr))
			return -1;
		r->readers_per_cpu = (unsigned int)nr;
		break;
	case 'v':
		if (tool_opt_uint(arg, 0, MAX_READERS, &nr))
			return -1;
		r->overload_per_cpu = (unsigned int)nr;
		break;
	case 'p':
		return tool_opt_list(arg, r->periods_ms, MAX_PERIODS, 1, 10000,
				     &r->nr_periods);
	case 's':
		return tool_opt_number(arg, 0.01, 100, NULL, &r->scale);
	case 'q':
		r->quick = true;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for bad options (usage printed). */
static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "only", required_argument, NULL, 'o' },
		{ "readers-per-cpu", required_argument, NULL, 'r' },
		{ "overload-per-cpu", required_argument, NULL, 'v' },
		{ "periods", required_argument, NULL, 'p' },
		{ "duration-scale", required_argument, NULL, 's' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench stats", usage, "", longopts, option, false
	};
	int err;

	r->readers_per_cpu = DEFAULT_READERS_PER_CPU;
	r->overload_per_cpu = DEFAULT_OVERLOAD_PER_CPU;
	r->nr_periods = ARRAY_SIZE(default_periods_ms);
	memcpy(r->periods_ms, default_periods_ms, sizeof(default_periods_ms));
	r->scale = 0;	/* not given */
	r->only = (1u << NR_SECTIONS) - 1;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->scale)
		r->scale = r->quick ? 0.1 : 1;
	return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static uint64_t scaled_ns(const struct run *r, unsigned int ms)
{
	return (uint64_t)(r->scale * ms * 1e6);
}

/* The low half of @x scaled to a number below @n. */
static unsigned int below(uint64_t x, unsigned int n)
{
	return (unsigned int)(((x & 0xffffffffu) * n) >> 32);
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static double us(double ns)
{
	return ns / NS_PER_US;
}

static const char *design_name(unsigned int d)
{
	return bench_stats_design_name(designs[d]);
}

/* ---- trees -------------------------------------------------------------- */


static struct tally_stats_tree *tree_new(unsigned int d)
{
	struct tally_stats_tree *t;
	int err = bench_stats_tree_create(&t, schema, NR_STATS, NULL,
					  designs[d]);

	if (err) {
		fprintf(stderr, "tally: cannot create a %s stats tree: %s\n",
			design_name(d), strerror(-err));
		return NULL;
	}
	return t;
}

/* Also after a failed build: @s is left empty, safe to destroy again. */
static void tree_set_destroy(struct tree_set *s)
{
	tally_stats_tree_destroy(s->tree);
	free(s->groups);
	memset(s, 0, sizeof(*s));
}

static int tree_set_build(struct tree_set *s, unsigned int d,
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

/* ---- phases: writers, checkers and readers on one tree ------------------- */

enum role { ROLE_WRITER, ROLE_CHECKER, ROLE_READER };

/*
 * What a phase runs.  Readers read targets[their index] when @fixed,
 * otherwise a random target each time; with a @period_ns they keep
 * absolute deadlines, otherwise they pause 200 us to 1 ms between reads.
 */
struct phase {
	struct tally_stats_group **leaves;	/* the writers' */
	unsigned int nr_leaves;
	struct tally_stats_group *check_leaf[NR_CHECKERS];
	unsigned int checkers;
	struct tally_stats_group **targets;	/* the readers' */
	unsigned int nr_targets;
	unsigned int readers;
	bool fixed;
	enum tally_flush_mode mode;
	uint64_t period_ns;
	uint64_t duration_ns;
	struct lat_hist *hist;			/* one per reader */
	struct lat_hist check_hist[NR_CHECKERS];	/* forced reads */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
	int stop;
	uint64_t start_ns;
};

/* A cache line each: a writer's generator must not bounce. */
struct worker {
	struct phase *ph;
	pthread_t tid;
	enum role role;
	unsigned int index;		/* within its role */
	uint64_t rng;
	uint64_t ops;			/* updates, or checks */
	uint64_t stale;
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

/*
 * Run @ph on @tree for its duration; fill @res.  Reader i's latencies go
 * to ph->hist[i] (allocated here; the caller frees it).
 */
static int phase_run(struct phase *ph, struct tally_stats_tree *tree,
		     struct phase_result *res)
{
	unsigned int nr = NR_WRITERS + ph->checkers + ph->readers, created;
	struct worker *w = aligned_alloc(64, nr * sizeof(*w));
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
	res->elapsed_s = (double)(end - ph->start_ns) / 1e9;
	if (created > NR_WRITERS + ph->checkers)
		res->readers_started = created - NR_WRITERS - ph->checkers;
	lat_hist_reset(&res->forced);
	for (unsigned int i = 0; i < created; i++) {
		if (w[i].role == ROLE_WRITER) {
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

/* ---- 1. update cost by depth --------------------------------------------- */

static double update_rep(void *arg, unsigned long n)
{
	struct tally_stats_group *g = arg;
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++)
		tally_stats_mod(g, 0, 1);
	return (double)(bench_now_ns() - start) / (double)n;
}

static bool per_group_threshold(unsigned int d)
{
	return !bench_stats_global_threshold(designs[d]);
}

/* A chain l1/l2/.../l@depth below the root: chain[k] is k levels deep. */
static int build_chain(struct tally_stats_tree *t,
		       struct tally_stats_group **chain, unsigned int depth)
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

static void update_report(struct run *r,
			  struct bench_result res[][ARRAY_SIZE(depths)])
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-14s", "design");
	for (unsigned int i = 0; i < ARRAY_SIZE(depths); i++)
		fprintf(r->out, "  depth %u", depths[i]);
	fprintf(r->out, "  threshold\n");
	bench_json_begin(w, "update", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		const char *kind = per_group_threshold(d) ? "per_group" :
							    "global";

		fprintf(r->out, "%-14s", design_name(d));
		for (unsigned int i = 0; i < ARRAY_SIZE(depths); i++) {
			const struct bench_result *x = &res[d][i];

			fprintf(r->out, " %8.2f", x->median);
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(d));
			bench_json_int(w, "depth", depths[i]);
			bench_json_double(w, "ns_per_op", x->median);
			bench_json_double(w, "ns_per_op_min", x->min);
			bench_json_double(w, "ns_per_op_max", x->max);
			bench_json_string(w, "threshold", kind);
			bench_json_int(w, "ops_per_rep", (long long)x->n);
			bench_json_end(w);
		}
		fprintf(r->out, "  %s\n", kind);
	}
	bench_json_end(w);
	fprintf(r->out, "%-14s", "tally/linux61");
	for (unsigned int i = 0; i < ARRAY_SIZE(depths); i++)
		fprintf(r->out, " %7.2fx", res[0][i].median / res[1][i].median);
	fputc('\n', r->out);
}

/*
 * Every design at every depth; the repetitions are interleaved (one of
 * each per round), so that noise from the machine hits all of them.
 */
static int bench_update(struct run *r)
{
	double v[NR_DESIGNS][ARRAY_SIZE(depths)][BENCH_MAX_REPS];
	struct bench_result res[NR_DESIGNS][ARRAY_SIZE(depths)];
	struct tally_stats_group *chain[NR_DESIGNS][MAX_DEPTH + 1];
	struct tally_stats_tree *t[NR_DESIGNS] = { NULL };
	unsigned long n[NR_DESIGNS][ARRAY_SIZE(depths)];
	unsigned int reps = r->update_plan.reps;
	int err = 0;

	fprintf(r->out,
		"\n1. update: ns per tally_stats_mod(+1) on a group d levels below the root,\n"
		"   one thread, median of %u interleaved runs of ~%llu ms\n",
		reps, (unsigned long long)(r->update_plan.target_ns / 1000000));
	fflush(r->out);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++) {
		t[d] = tree_new(d);
		err = t[d] ? build_chain(t[d], chain[d], MAX_DEPTH) : -1;
	}
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++) {
		for (unsigned int i = 0; i < ARRAY_SIZE(depths) && !err; i++) {
			n[d][i] = bench_calibrate(update_rep,
						  chain[d][depths[i]],
						  &r->update_plan);
			err = n[d][i] ? 0 : -1;
		}
	}
	for (unsigned int rep = 0; rep < reps && !err; rep++)
		for (unsigned int d = 0; d < NR_DESIGNS; d++)
			for (unsigned int i = 0; i < ARRAY_SIZE(depths); i++)
				v[d][i][rep] = update_rep(chain[d][depths[i]],
							  n[d][i]);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		for (unsigned int i = 0; i < ARRAY_SIZE(depths) && !err; i++)
			bench_summarize(v[d][i], reps, n[d][i], &res[d][i]);
		tally_stats_tree_destroy(t[d]);
	}
	if (!err)
		update_report(r, res);
	return err;
}

/* ---- 2. group creation as the tree grows -------------------------------- */

/* A group name per child, made before the clock starts. */
typedef char child_name[8];

/*
 * One run: a fresh tree, then @n groups created in the shape @sh, timed.
 * @groups has room for @n + 1 pointers.  Return: us per create, or -1.
 */
static double create_rep(const struct create_shape *sh, unsigned int n,
			 const child_name *names,
			 struct tally_stats_group **groups)
{
	struct tally_stats_group *chain[CHAIN_DEPTH + 1];
	struct tally_stats_tree *t = tree_new(0);
	struct tally_stats_group *parent;
	uint64_t start, end;
	int err = 0;

	if (!t)
		return -1;
	if (build_chain(t, chain, sh->parent_depth)) {
		tally_stats_tree_destroy(t);
		return -1;
	}
	/* groups[0] is the root; group i goes to groups[i + 1]. */
	groups[0] = chain[0];
	parent = chain[sh->parent_depth];
	start = bench_now_ns();
	for (unsigned int i = 0; i < n && !err; i++) {
		if (sh->fanout)
			parent = groups[i / sh->fanout];
		err = tally_stats_group_create(parent, names[i],
					       &groups[i + 1]);
	}
	end = bench_now_ns();
	tally_stats_tree_destroy(t);
	if (err) {
		fprintf(stderr, "tally: cannot create %u groups: %s\n", n,
			strerror(-err));
		return -1;
	}
	return (double)(end - start) / n / NS_PER_US;
}

static void create_report(struct run *r,
			  struct bench_result res[][NR_CREATE_COUNTS])
{
	const unsigned int lo = create_counts[0],
			   hi = create_counts[NR_CREATE_COUNTS - 1];
	struct bench_json *w = &r->json;
	char head[16];

	fprintf(r->out, "%-14s", "groups");
	for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++) {
		snprintf(head, sizeof(head), "N=%u", create_counts[c]);
		fprintf(r->out, " %9s", head);
	}
	snprintf(head, sizeof(head), "%u/%u", hi, lo);
	fprintf(r->out, " %11s\n", head);
	bench_json_begin(w, "create", '[', false);
	for (unsigned int k = 0; k < NR_CREATE_SHAPES; k++) {
		const struct create_shape *sh = &create_shapes[k];

		fprintf(r->out, "%-14s", sh->title);
		for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++) {
			const struct bench_result *x = &res[k][c];

			fprintf(r->out, " %9.2f", x->median);
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(0));
			bench_json_string(w, "shape", sh->key);
			bench_json_int(w, "parent_depth", sh->parent_depth);
			bench_json_int(w, "fanout", sh->fanout);
			bench_json_int(w, "groups", create_counts[c]);
			bench_json_double(w, "us_per_create", x->median);
			bench_json_double(w, "us_per_create_min", x->min);
			bench_json_double(w, "us_per_create_max", x->max);
			bench_json_end(w);
		}
		fprintf(r->out, " %10.2fx\n",
			res[k][NR_CREATE_COUNTS - 1].median / res[k][0].median);
	}
	bench_json_end(w);
	fprintf(r->out,
		"(%u/%u: us per create at N=%u / at N=%u: about 1 when a create\n"
		" costs the same whatever the tree's size, about %u when it scans\n"
		" every group already there)\n", hi, lo, hi, lo, hi / lo);
}

/* Every shape and group count, the runs interleaved. */
static int bench_create(struct run *r)
{
	double v[NR_CREATE_SHAPES][NR_CREATE_COUNTS][BENCH_MAX_REPS];
	struct bench_result res[NR_CREATE_SHAPES][NR_CREATE_COUNTS];
	child_name *names = malloc(MAX_CREATE * sizeof(*names));
	struct tally_stats_group **groups =
		malloc((MAX_CREATE + 1) * sizeof(*groups));
	unsigned int reps = r->create_reps;
	int err = names && groups ? 0 : -1;

	fprintf(r->out,
		"\n2. create: us per tally_stats_group_create() of N groups: all children\n"
		"   of the root, all children of a group %u levels deep, or a tree where\n"
		"   no group has more than 16 children; a fresh tree (%s design) per\n"
		"   run, median of %u interleaved runs\n",
		CHAIN_DEPTH, design_name(0), reps);
	fflush(r->out);
	if (err)
		fprintf(stderr, "tally: out of memory\n");
	for (unsigned int i = 0; i < MAX_CREATE && !err; i++)
		snprintf(names[i], sizeof(names[i]), "c%u", i);
	for (unsigned int rep = 0; rep < reps && !err; rep++)
		for (unsigned int k = 0; k < NR_CREATE_SHAPES && !err; k++)
			for (unsigned int c = 0; c < NR_CREATE_COUNTS && !err;
			     c++) {
				v[k][c][rep] = create_rep(&create_shapes[k],
							  create_counts[c],
							  names, groups);
				err = v[k][c][rep] < 0 ? -1 : 0;
			}
	free(names);
	free(groups);
	if (err)
		return err;
	for (unsigned int k = 0; k < NR_CREATE_SHAPES; k++)
		for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++)
			bench_summarize(v[k][c], reps, create_counts[c],
					&res[k][c]);
	create_report(r, res);
	return 0;
}

/* ---- 3. flush cost -------------------------------------------------------- */

static const struct flush_shape {
	unsigned int cpus, groups, updates;
} flush_shapes[] = {
	{ 64, 1000, 4 },
	{ 384, 2000, 8 },
};
#define FLUSH_FANOUT 40
#define FLUSH_REPS 30

/*
 * Best of FLUSH_REPS forced root flushes of @sh's tree, each after every
 * leaf got its updates on random CPUs.  Return: us, or -1.
 */
static double flush_best(const struct flush_shape *sh)
{
	unsigned int mids = (sh->groups + FLUSH_FANOUT - 1) / FLUSH_FANOUT;
	struct tally_stats_group **g = calloc(sh->groups + mids, sizeof(*g));
	struct tally_stats_options o = { 0 };
	struct tally_stats_tree *t = NULL;
	struct tally_domain *d = NULL;
	uint64_t rng = SEED, best = UINT64_MAX;
	int err = g ? 0 : -ENOMEM;

	if (!err)
		err = tally_domain_create_simulated(&d, sh->cpus,
						    TALLY_GROUP_LOW_BITS);
	o.domain = d;
	if (!err)
		err = tally_stats_tree_create(&t, schema, NR_STATS, &o);
	for (unsigned int i = 0; !err && i < mids + sh->groups; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%u", i);
		err = tally_stats_group_create(i < mids ? tally_stats_root(t) :
					       g[(i - mids) / FLUSH_FANOUT],
					       name, &g[i]);
	}
	for (unsigned int rep = 0; !err && rep < FLUSH_REPS; rep++) {
		uint64_t start;

		for (unsigned int i = mids; i < mids + sh->groups; i++)
			for (unsigned int k = 0; k < sh->updates; k++) {
				uint64_t x = bench_rand(&rng);

				tally_stats_mod_cpu(g[i], below(x, sh->cpus),
						    below(x >> 32, NR_STATS),
						    1);
			}
		start = bench_now_ns();
		tally_stats_flush(tally_stats_root(t));
		if (bench_now_ns() - start < best)
			best = bench_now_ns() - start;
	}
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
	free(g);
	if (err) {
		fprintf(stderr, "tally: cannot build the flush tree: %s\n",
			strerror(-err));
		return -1;
	}
	return (double)best / NS_PER_US;
}

static int bench_flush(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out,
		"\n3. flush: us per forced flush of the root after every leaf got\n"
		"   its updates on random CPUs (%s design, simulated CPUs, groups\n"
		"   %u to a parent), best of %u\n",
		design_name(0), FLUSH_FANOUT, FLUSH_REPS);
	fprintf(r->out, "%6s %8s %8s %10s\n", "CPUs", "groups", "updates",
		"us/flush");
	bench_json_begin(w, "flush", '[', false);
	for (unsigned int i = 0; i < ARRAY_SIZE(flush_shapes); i++) {
		const struct flush_shape *sh = &flush_shapes[i];
		double us_per = flush_best(sh);

		if (us_per < 0) {
			bench_json_end(w);
			return -1;
		}
		fprintf(r->out, "%6u %8u %8u %10.1f\n", sh->cpus, sh->groups,
			sh->updates, us_per);
		bench_json_begin(w, NULL, '{', true);
		bench_json_int(w, "cpus", sh->cpus);
		bench_json_int(w, "groups", sh->groups);
		bench_json_int(w, "updates_per_group", sh->updates);
		bench_json_double(w, "us_per_flush", us_per);
		bench_json_end(w);
	}
	bench_json_end(w);
	return 0;
}

/* ---- 4. readers under load ----------------------------------------------- */

/*
 * One phase on a fresh 50 x 5 tree: the writers, the checkers and
 * @readers readers with period @period_ms.  Their latencies are merged
 * into @hist.
 */
static int readers_phase(struct run *r, unsigned int d, unsigned int readers,
			 unsigned int period_ms, struct phase_result *res,
			 struct lat_hist *hist)
{
	struct phase ph = {
		.checkers = NR_CHECKERS,
		.readers = readers,
		.mode = TALLY_FLUSH_IF_NEEDED,
		.period_ns = period_ms * 1000000ull,
		.duration_ns = scaled_ns(r, READERS_MS),
	};
	struct tree_set s;
	int err;

	if (tree_set_build(&s, d, READERS_A, READERS_B))
		return -1;
	ph.leaves = s.leaves;
	ph.nr_leaves = s.nr_leaves;
	ph.targets = s.groups;
	ph.nr_targets = s.nr_groups;
	for (unsigned int c = 0; c < NR_CHECKERS; c++)
		ph.check_leaf[c] = s.leaves[c * s.nr_leaves / NR_CHECKERS];
	err = phase_run(&ph, s.tree, res);
	if (!err && hist) {
		lat_hist_reset(hist);
		for (unsigned int i = 0; i < res->readers_started; i++)
			lat_hist_merge(hist, &ph.hist[i]);
	}
	free(ph.hist);
	tree_set_destroy(&s);
	return err;
}

/* Bands of the readers' latencies: [10^k, 10^(k+1)) ns boundaries. */
static const unsigned int band_pow10[] = { 0, 5, 6, 7, 8, LAT_DECADES };
static const char *const band_key[] = { "lt_100us", "100us_1ms", "1_10ms",
					"10_100ms", "ge_100ms" };
#define NR_BANDS ARRAY_SIZE(band_key)

static uint64_t band_count(const struct lat_hist *h, unsigned int b)
{
	return lat_hist_count_below(h, band_pow10[b + 1]) -
	       lat_hist_count_below(h, band_pow10[b]);
}

static double writer_rate(const struct phase_result *p)
{
	return p->elapsed_s > 0 ? (double)p->writer_ops / p->elapsed_s : NAN;
}

static void readers_json(struct run *r, unsigned int d, unsigned int p)
{
	const struct readers_row *row = &r->rows[p];
	const struct readers_result *x = &r->rd[d][p];
	const struct lat_hist *h = &x->hist;
	struct bench_json *w = &r->json;

	bench_json_begin(w, NULL, '{', true);
	bench_json_string(w, "design", design_name(d));
	bench_json_string(w, "load", row->overload ? "overload" : "faithful");
	bench_json_int(w, "readers", row->readers);
	bench_json_int(w, "readers_per_cpu", row->per_cpu);
	bench_json_int(w, "readers_started", x->with.readers_started);
	bench_json_int(w, "period_ms", row->period_ms);
	bench_json_string(w, "read_mode", "if_needed");
	bench_json_int(w, "reads", (long long)h->count);
	bench_json_begin(w, "buckets", '{', true);
	for (unsigned int b = 0; b < NR_BANDS; b++)
		bench_json_int(w, band_key[b], (long long)band_count(h, b));
	bench_json_end(w);
	bench_json_double(w, "p50_us", us(lat_hist_percentile(h, 0.5)));
	bench_json_double(w, "p99_us", us(lat_hist_percentile(h, 0.99)));
	bench_json_double(w, "p999_us", us(lat_hist_percentile(h, 0.999)));
	bench_json_double(w, "max_us", us((double)h->max));
	bench_json_int(w, "stale_reads", (long long)x->with.stale);
	bench_json_int(w, "checks", (long long)x->with.checks);
	bench_json_double(w, "forced_read_p50_us",
			  us(lat_hist_percentile(&x->with.forced, 0.5)));
	bench_json_double(w, "forced_read_p99_us",
			  us(lat_hist_percentile(&x->with.forced, 0.99)));
	bench_json_int(w, "stale_reads_no_readers",
		       (long long)r->alone[d].stale);
	bench_json_double(w, "writer_ops_per_s", writer_rate(&x->with));
	bench_json_double(w, "writer_ops_per_s_no_readers",
			  writer_rate(&r->alone[d]));
	bench_json_double(w, "writer_ratio_to_no_readers",
			  writer_rate(&x->with) / writer_rate(&r->alone[d]));
	bench_json_int(w, "flushes", (long long)x->with.info.flushes);
	bench_json_int(w, "root_flushes", (long long)x->with.info.root_flushes);
	bench_json_int(w, "shared_waits", (long long)x->with.info.shared_waits);
	bench_json_int(w, "skipped_flushes", (long long)x->with.skipped);
	bench_json_double(w, "seconds", x->with.elapsed_s);
	bench_json_end(w);
}

/* "26/cpu 10ms": the row's load and period. */
static const char *row_title(const struct readers_row *row, char *buf,
			     size_t len)
{
	snprintf(buf, len, "%u/cpu %ums", row->per_cpu, row->period_ms);
	return buf;
}

static void readers_report(struct run *r)
{
	static const char *const band_title[NR_BANDS] = {
		"<100us", "100us-1ms", "1-10ms", "10-100ms", ">=100ms"
	};
	char title[32];

	fprintf(r->out, "%-13s %-8s %8s", "readers", "design", "reads");
	for (unsigned int b = 0; b < NR_BANDS; b++)
		fprintf(r->out, " %9s", band_title[b]);
	fprintf(r->out, " %9s %9s %9s %9s %7s\n", "p50 us", "p99 us",
		"p99.9 us", "max us", "p99 x");
	for (unsigned int p = 0; p < r->nr_rows; p++) {
		double tally_p99 = lat_hist_percentile(&r->rd[0][p].hist, 0.99);

		row_title(&r->rows[p], title, sizeof(title));
		for (unsigned int d = 0; d < NR_DESIGNS; d++) {
			const struct lat_hist *h = &r->rd[d][p].hist;
			double all = h->count ? (double)h->count : 1;

			fprintf(r->out, "%-13s %-8s %8llu", title,
				design_name(d), (unsigned long long)h->count);
			for (unsigned int b = 0; b < NR_BANDS; b++)
				fprintf(r->out, " %8.2f%%",
					100.0 * (double)band_count(h, b) / all);
			fprintf(r->out, " %9.1f %9.1f %9.1f %9.1f %6.2fx\n",
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)),
				us(lat_hist_percentile(h, 0.999)),
				us((double)h->max),
				lat_hist_percentile(h, 0.99) / tally_p99);
		}
	}
	fprintf(r->out, "(p99 x: p99 / tally's p99 in the same row)\n");
	fprintf(r->out, "\n%-13s %-8s %13s %9s %9s %8s %6s %8s %9s %9s %6s\n",
		"readers", "design", "stale/checks", "forced", "forced",
		"flushes", "root", "skipped", "writers", "no", "ratio");
	fprintf(r->out, "%-13s %-8s %13s %9s %9s %8s %6s %8s %9s %9s\n", "",
		"", "", "p50 us", "p99 us", "", "", "", "Mops/s", "readers");
	for (unsigned int p = 0; p < r->nr_rows; p++) {
		row_title(&r->rows[p], title, sizeof(title));
		for (unsigned int d = 0; d < NR_DESIGNS; d++) {
			const struct phase_result *x = &r->rd[d][p].with;
			double alone = writer_rate(&r->alone[d]);
			char sc[32];

			snprintf(sc, sizeof(sc), "%llu/%llu",
				 (unsigned long long)x->stale,
				 (unsigned long long)x->checks);
			fprintf(r->out,
				"%-13s %-8s %13s %9.1f %9.1f %8llu %6llu %8llu %9.1f %9.1f %6.2f\n",
				title, design_name(d), sc,
				us(lat_hist_percentile(&x->forced, 0.5)),
				us(lat_hist_percentile(&x->forced, 0.99)),
				(unsigned long long)x->info.flushes,
				(unsigned long long)x->info.root_flushes,
				(unsigned long long)x->skipped,
				writer_rate(x) / 1e6, alone / 1e6,
				writer_rate(x) / alone);
		}
	}
	fprintf(r->out,
		"(forced: the checkers' forced reads; ratio: writer throughput with\n"
		" readers / without readers, same design: with fewer CPUs than\n"
		" threads, the readers' CPU time is taken from the writers)\n");
	for (unsigned int d = 0; d < NR_DESIGNS; d++)
		if (r->alone[d].stale)
			fprintf(r->out, "(%s, no readers: %llu/%llu stale)\n",
				design_name(d),
				(unsigned long long)r->alone[d].stale,
				(unsigned long long)r->alone[d].checks);
}

static int bench_readers(struct run *r)
{
	struct bench_json *w = &r->json;
	int err = 0;

	fprintf(r->out,
		"\n4. readers under load: 50 x 5 tree (%u groups), %u writers (tight loop,\n"
		"   random leaves), %u checkers (+1 then a forced read of leaf, parent or\n"
		"   root, every %llu ms), R readers per CPU (%u CPUs) each reading a random\n"
		"   group's snapshot every P ms with TALLY_FLUSH_IF_NEEDED: %u per CPU as\n"
		"   in seed 001's test (10,000 readers on 384 CPUs) at each period",
		1 + READERS_A + READERS_A * READERS_B, NR_WRITERS, NR_CHECKERS,
		CHECK_PAUSE_NS / 1000000, r->nr_cpus, r->readers_per_cpu);
	if (r->overload_per_cpu)
		fprintf(r->out, ",\n   and an overload row, %u per CPU at %u ms",
			r->overload_per_cpu, r->periods_ms[0]);
	fprintf(r->out,
		"; %.1f s per phase, and the writers and\n"
		"   checkers alone for the 'no readers' throughput\n",
		(double)scaled_ns(r, READERS_MS) / 1e9);
	fflush(r->out);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		err = readers_phase(r, d, 0, 0, &r->alone[d], NULL);
	for (unsigned int p = 0; p < r->nr_rows && !err; p++)
		for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
			err = readers_phase(r, d, r->rows[p].readers,
					    r->rows[p].period_ms,
					    &r->rd[d][p].with,
					    &r->rd[d][p].hist);
	if (err)
		return err;
	for (unsigned int p = 0; p < r->nr_rows; p++)
		if (r->rd[0][p].with.readers_started < r->rows[p].readers)
			fprintf(r->out,
				"(only %u of %u reader threads could be created)\n",
				r->rd[0][p].with.readers_started,
				r->rows[p].readers);
	readers_report(r);
	bench_json_begin(w, "readers", '[', false);
	for (unsigned int p = 0; p < r->nr_rows; p++)
		for (unsigned int d = 0; d < NR_DESIGNS; d++)
			readers_json(r, d, p);
	bench_json_end(w);
	return 0;
}

/* ---- 5. readers of unrelated subtrees ------------------------------------ */

static const unsigned int unrelated_a[2] = { UNRELATED_1, UNRELATED_2 };

/* The worse of the two readers' @q percentiles. */
static double worse(const struct unrelated_result *u, double q)
{
	return fmax(lat_hist_percentile(&u->hist[0], q),
		    lat_hist_percentile(&u->hist[1], q));
}

static int unrelated_phase(struct run *r, unsigned int d)
{
	struct tally_stats_group *targets[2];
	struct phase ph = {
		.targets = targets,
		.nr_targets = 2,
		.readers = 2,
		.fixed = true,
		.mode = TALLY_FLUSH_FORCE,
		.duration_ns = scaled_ns(r, UNRELATED_MS),
	};
	struct unrelated_result *u = &r->un[d];
	struct tree_set *s = &r->big[d];
	struct phase_result res;
	int err;

	ph.leaves = s->leaves;
	ph.nr_leaves = s->nr_leaves;
	for (unsigned int i = 0; i < 2; i++)
		targets[i] = s->groups[1 + unrelated_a[i]];
	err = phase_run(&ph, s->tree, &res);
	if (!err && res.readers_started < 2) {
		fprintf(stderr, "tally: cannot start the readers\n");
		err = -1;
	}
	if (!err) {
		u->hist[0] = ph.hist[0];
		u->hist[1] = ph.hist[1];
		u->info = res.info;
	}
	free(ph.hist);
	return err;
}

static void unrelated_report(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-8s %11s %11s %11s %11s %11s %7s %8s %6s\n",
		"design", "/a17 p50us", "p99us", "/a83 p50us", "p99us",
		"worse p99", "x", "flushes", "root");
	bench_json_begin(w, "unrelated", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		const struct unrelated_result *u = &r->un[d];

		fprintf(r->out, "%-8s", design_name(d));
		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", design_name(d));
		bench_json_double(w, "p50_us", us(worse(u, 0.5)));
		bench_json_double(w, "p99_us", us(worse(u, 0.99)));
		bench_json_string(w, "read_mode", "force");
		bench_json_begin(w, "readers", '[', true);
		for (unsigned int i = 0; i < 2; i++) {
			const struct lat_hist *h = &u->hist[i];
			char name[8];

			snprintf(name, sizeof(name), "a%u", unrelated_a[i]);
			fprintf(r->out, " %11.1f %11.1f",
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)));
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "group", name);
			bench_json_int(w, "reads", (long long)h->count);
			bench_json_double(w, "p50_us",
					  us(lat_hist_percentile(h, 0.5)));
			bench_json_double(w, "p99_us",
					  us(lat_hist_percentile(h, 0.99)));
			bench_json_double(w, "max_us", us((double)h->max));
			bench_json_end(w);
		}
		bench_json_end(w);
		bench_json_int(w, "flushes", (long long)u->info.flushes);
		bench_json_int(w, "root_flushes",
			       (long long)u->info.root_flushes);
		bench_json_end(w);
		fprintf(r->out, " %11.1f %6.2fx %8llu %6llu\n",
			us(worse(u, 0.99)),
			worse(u, 0.99) / worse(&r->un[0], 0.99),
			(unsigned long long)u->info.flushes,
			(unsigned long long)u->info.root_flushes);
	}
	bench_json_end(w);
}

/* The 100 x 100 trees of sections 5 and 6, built by the first to run. */
static int build_big_trees(struct run *r)
{
	int err = 0;

	/* All four first: the allocator reuses nothing freed meanwhile. */
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		if (!r->big[d].tree)
			err = tree_set_build(&r->big[d], d, BIG_A, BIG_B);
	return err;
}

static int bench_unrelated(struct run *r)
{
	int err = 0;

	fprintf(r->out,
		"\n5. unrelated readers: 100 x 100 tree (%u groups), %u writers on every\n"
		"   leaf; two readers read /a%u and /a%u with TALLY_FLUSH_FORCE, pausing\n"
		"   200 us to 1 ms between reads; %.1f s; 'worse p99' is the worse\n"
		"   reader's, x that / tally's\n",
		1 + BIG_A + BIG_A * BIG_B, NR_WRITERS, UNRELATED_1, UNRELATED_2,
		(double)scaled_ns(r, UNRELATED_MS) / 1e9);
	fflush(r->out);
	err = build_big_trees(r);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		err = unrelated_phase(r, d);
	if (!err)
		unrelated_report(r);
	return err;
}

/* ---- 6. a quiet group in a busy tree ------------------------------------- */

static const struct {
	unsigned int fan_a, fan_b, quiet;
} quiet_tree[2] = {
	{ BIG_A, BIG_B, BIG_QUIET },
	{ SMALL_A, SMALL_B, SMALL_QUIET },
};

static int quiet_phase(struct run *r, unsigned int d, unsigned int k)
{
	struct phase ph = {
		.nr_targets = 1,
		.readers = 1,
		.fixed = true,
		.mode = TALLY_FLUSH_FORCE,
		.duration_ns = scaled_ns(r, QUIET_MS),
	};
	struct tree_set small, *s = &r->big[d];
	struct phase_result res;
	int err = -1;

	if (k) {
		if (tree_set_build(&small, d, SMALL_A, SMALL_B))
			return -1;
		s = &small;
	}
	ph.targets = &s->leaves[quiet_tree[k].quiet];
	/* The writers update every leaf but the quiet one. */
	ph.nr_leaves = s->nr_leaves - 1;
	ph.leaves = malloc(ph.nr_leaves * sizeof(*ph.leaves));
	if (ph.leaves) {
		for (unsigned int i = 0, j = 0; i < s->nr_leaves; i++)
			if (s->leaves + i != ph.targets)
				ph.leaves[j++] = s->leaves[i];
		/* Section 4 may have updated it: quiet from now on. */
		tally_stats_flush(ph.targets[0]);
		err = phase_run(&ph, s->tree, &res);
	}
	if (!err && !res.readers_started)
		err = -1;
	if (!err)
		r->quiet[d][k] = ph.hist[0];
	else
		fprintf(stderr, "tally: the quiet-group phase failed\n");
	free(ph.hist);
	free(ph.leaves);
	if (k)
		tree_set_destroy(&small);
	return err;
}

static unsigned int tree_groups(unsigned int k)
{
	return 1 + quiet_tree[k].fan_a * (1 + quiet_tree[k].fan_b);
}

static double quiet_ratio(const struct run *r, unsigned int d)
{
	return lat_hist_percentile(&r->quiet[d][0], 0.99) /
	       lat_hist_percentile(&r->quiet[d][1], 0.99);
}

static void quiet_report(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-8s %8s %9s %9s %8s %9s %9s %10s\n", "design",
		"groups", "p50 us", "p99 us", "groups", "p50 us", "p99 us",
		"p99 ratio");
	bench_json_begin(w, "quiet", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		fprintf(r->out, "%-8s", design_name(d));
		for (unsigned int k = 0; k < 2; k++) {
			const struct lat_hist *h = &r->quiet[d][k];

			fprintf(r->out, " %8u %9.1f %9.1f", tree_groups(k),
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)));
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(d));
			bench_json_int(w, "groups", tree_groups(k));
			bench_json_string(w, "read_mode", "force");
			bench_json_int(w, "reads", (long long)h->count);
			bench_json_double(w, "p50_us",
					  us(lat_hist_percentile(h, 0.5)));
			bench_json_double(w, "p99_us",
					  us(lat_hist_percentile(h, 0.99)));
			bench_json_double(w, "max_us", us((double)h->max));
			bench_json_end(w);
		}
		fprintf(r->out, " %9.2fx\n", quiet_ratio(r, d));
	}
	bench_json_end(w);
}

static int bench_quiet(struct run *r)
{
	int err;

	fprintf(r->out,
		"\n6. quiet group: reads of a leaf without updates with TALLY_FLUSH_FORCE,\n"
		"   pausing 200 us to 1 ms, while %u writers update every other leaf, in\n"
		"   a busy 100 x 100 tree and in a 3 x 2 tree; %.1f s each; ratio busy/small\n",
		NR_WRITERS, (double)scaled_ns(r, QUIET_MS) / 1e9);
	fflush(r->out);
	err = build_big_trees(r);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		for (unsigned int k = 0; k < 2 && !err; k++)
			err = quiet_phase(r, d, k);
	if (!err)
		quiet_report(r);
	return err;
}

/* ---- driver ------------------------------------------------------------- */

/* The CPUs this process may run on, at least 1. */
static unsigned int usable_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned int)n : 1;
}

/*
 * Section 4's rows: the faithful load at each period, then the overload
 * at the first.  Return: 0, or -1 when a row needs more than MAX_READERS.
 */
static int plan_readers_rows(struct run *r)
{
	r->nr_cpus = usable_cpus();
	r->nr_rows = 0;
	for (unsigned int p = 0; p <= r->nr_periods; p++) {
		bool overload = p == r->nr_periods;
		struct readers_row *row = &r->rows[r->nr_rows];

		if (overload && !r->overload_per_cpu)
			break;
		row->overload = overload;
		row->per_cpu = overload ? r->overload_per_cpu :
					  r->readers_per_cpu;
		row->period_ms = r->periods_ms[overload ? 0 : p];
		if (row->per_cpu > MAX_READERS / r->nr_cpus) {
			fprintf(stderr,
				"tally: bench stats: %u readers per CPU on %u CPUs is more than %u threads\n",
				row->per_cpu, r->nr_cpus, MAX_READERS);
			return -1;
		}
		row->readers = row->per_cpu * r->nr_cpus;
		r->nr_rows++;
	}
	return 0;
}

/* Thousands of threads: lift the soft process limit to the hard one. */
static void raise_thread_limit(void)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NPROC, &lim) || lim.rlim_cur == lim.rlim_max)
		return;
	lim.rlim_cur = lim.rlim_max;
	setrlimit(RLIMIT_NPROC, &lim);
}

static void settings_json(struct run *r)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "writers", NR_WRITERS);
	bench_json_int(w, "checkers", NR_CHECKERS);
	bench_json_int(w, "check_pause_us", CHECK_PAUSE_NS / 1000);
	bench_json_int(w, "readers_per_cpu", r->readers_per_cpu);
	bench_json_int(w, "overload_readers_per_cpu", r->overload_per_cpu);
	bench_json_int(w, "cpus", r->nr_cpus);
	bench_json_int(w, "stats", NR_STATS);
	bench_json_string(w, "readers_read_mode", "if_needed");
	bench_json_string(w, "checkers_read_mode", "force");
	bench_json_string(w, "unrelated_read_mode", "force");
	bench_json_string(w, "quiet_read_mode", "force");
	bench_json_bool(w, "periodic_flusher", true);
	bench_json_double(w, "duration_scale", r->scale);
	bench_json_double(w, "readers_phase_s",
			  (double)scaled_ns(r, READERS_MS) / 1e9);
	bench_json_double(w, "unrelated_phase_s",
			  (double)scaled_ns(r, UNRELATED_MS) / 1e9);
	bench_json_double(w, "quiet_phase_s",
			  (double)scaled_ns(r, QUIET_MS) / 1e9);
	bench_json_int(w, "update_reps", r->update_plan.reps);
	bench_json_int(w, "create_reps", r->create_reps);
	bench_json_begin(w, "sections", '[', true);
	for (unsigned int i = 0; i < NR_SECTIONS; i++)
		if (r->only & (1u << i))
			bench_json_string(w, NULL, sections[i].name);
	bench_json_end(w);
	bench_json_bool(w, "quick", r->quick);
	bench_json_end(w);
}

int tally_bench_stats(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct bench_machine m;
	uint64_t start = bench_now_ns();
	int err;

	if (!r) {
		fprintf(stderr, "tally: out of memory\n");
		return 1;
	}
	err = parse_options(r, argc, argv);
	if (!err && plan_readers_rows(r))
		err = -1;
	if (err) {
		free(r);
		return err > 0 ? 0 : 2;
	}
	r->update_plan.target_ns = r->quick ? 10000000 : 40000000;
	r->update_plan.reps = r->quick ? 3 : 5;
	r->update_plan.min_n = 1 << 12;
	r->create_reps = r->quick ? 3 : 5;
	if (bench_json_open(&r->json, r->json_path)) {
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	raise_thread_limit();
	bench_machine_get(&m);
	fprintf(r->out, "tally bench stats%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "stats");
	bench_machine_json(&r->json, &m);
	settings_json(r);
	err = 0;
	for (unsigned int i = 0; i < NR_SECTIONS && !err; i++)
		if (r->only & (1u << i))
			err = sections[i].run(r);
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	for (unsigned int d = 0; d < NR_DESIGNS; d++)
		tree_set_destroy(&r->big[d]);
	fprintf(r->out, "(%.0f s)\n", (double)(bench_now_ns() - start) / 1e9);
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
