/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_STATS_H
#define TALLY_BENCH_STATS_H

/*
 * bench_stats.h - private to `tally bench stats`: one invocation's settings
 * and figures (struct run), the trees and phases the sections share
 * (bench_stats_phase.c), and the sections themselves, one file each
 * (bench_stats_update.c to bench_stats_quiet.c), driven by bench_stats.c.
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <tally/stats.h>
#include "json.h"
#include "latency.h"
#include "measure.h"
#include "stats_designs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NR_DESIGNS 4
#define NR_WRITERS 2
#define NR_CHECKERS 2
#define NR_WRITER_STATS 6	/* the checkers' stats follow */
#define NR_STATS (NR_WRITER_STATS + NR_CHECKERS)
#define CHECK_PAUSE_NS 1000000ull
#define SEED 0x7a11e5eedull
#define NS_PER_US 1000.0

/* The stats of every tree: the writers' six, then one per checker. */
extern const struct tally_stat_desc bench_stats_schema[NR_STATS];
/* The designs compared, tally's first: design d is designs[d]. */
extern const enum bench_stats_design bench_stats_designs[NR_DESIGNS];

/* Section 4's rows: at most a faithful row per period and an overload row. */
#define MAX_PERIODS 4
#define MAX_ROWS (MAX_PERIODS + 1)

struct readers_row {
	unsigned int readers;		/* in all */
	unsigned int per_cpu;
	unsigned int period_ms;
	bool overload;
};

/* The busy tree of sections 5 and 6: 100 x 100. */
#define BIG_A 100
#define BIG_B 100

/* Phase durations at --duration-scale 1, in ms. */
/* The readers section's 50 x 5 tree (also the update section's spread). */
#define READERS_A 50
#define READERS_B 5
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
	/*
	 * How late readers woke for their periods: the wait for a CPU that
	 * any sleep costs during the phase, a read's sleeps included.
	 */
	struct lat_hist wake_late;
	/* The process's context switches during the phase (getrusage()). */
	uint64_t voluntary_switches, involuntary_switches;
	/* linux68's waits for its flush mutex, and their time. */
	uint64_t design_lock_waits, design_lock_wait_ns;
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

/*
 * The sections, in the order they run.  Each prints its table to r->out
 * and its figures to r->json.  Return: 0, or -1 (the message printed).
 */
int bench_update(struct run *r);
int bench_create(struct run *r);
int bench_flush(struct run *r);
int bench_readers(struct run *r);
int bench_unrelated(struct run *r);
int bench_quiet(struct run *r);

/* ---- helpers ------------------------------------------------------------ */

static inline uint64_t scaled_ns(const struct run *r, unsigned int ms)
{
	return (uint64_t)(r->scale * ms * 1e6);
}

/* The low half of @x scaled to a number below @n. */
static inline unsigned int below(uint64_t x, unsigned int n)
{
	return (unsigned int)(((x & 0xffffffffu) * n) >> 32);
}

static inline void sleep_until(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static inline double us(double ns)
{
	return ns / NS_PER_US;
}

static inline const char *design_name(unsigned int d)
{
	return bench_stats_design_name(bench_stats_designs[d]);
}

/* ---- trees (bench_stats_phase.c) ----------------------------------------- */

/* A fresh tree of design @d (an index into bench_stats_designs), or NULL. */
struct tally_stats_tree *tree_new(unsigned int d);

/* Also after a failed build: @s is left empty, safe to destroy again. */
void tree_set_destroy(struct tree_set *s);

/* A fan_a x fan_b tree of design @d.  Return: 0, or -1 (message printed). */
int tree_set_build(struct tree_set *s, unsigned int d, unsigned int fan_a,
		   unsigned int fan_b);

/* A chain l1/l2/.../l@depth below the root: chain[k] is k levels deep. */
int build_chain(struct tally_stats_tree *t, struct tally_stats_group **chain,
		unsigned int depth);

/* The 100 x 100 trees of sections 5 and 6, built by the first to run. */
int build_big_trees(struct run *r);

/* ---- phases: writers, checkers and readers on one tree ------------------- */

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

/*
 * Run @ph on @tree for its duration; fill @res.  Reader i's latencies go
 * to ph->hist[i] (allocated here; the caller frees it).
 */
int phase_run(struct phase *ph, struct tally_stats_tree *tree,
	      struct phase_result *res);

/*
 * The JSON members of one reader's latencies: "reads", "p50_us",
 * "p99_us" and "max_us".
 */
void lat_json(struct bench_json *w, const struct lat_hist *h);

#endif /* TALLY_BENCH_STATS_H */
