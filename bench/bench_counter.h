/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_COUNTER_H
#define TALLY_BENCH_COUNTER_H

/*
 * bench_counter.h - private to `tally bench counter`: one invocation's
 * settings and figures (struct run), the simulated domains the read and
 * accuracy sections share, and the sections: add (bench_counter_add.c),
 * thread_cached and read (bench_counter_read.c), accuracy
 * (bench_counter_accuracy.c), driven by bench_counter.c.
 */

#include <stdbool.h>
#include <stdio.h>

#include <tally/counter.h>
#include "baselines.h"
#include "json.h"
#include "measure.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_THREADS 256
#define MAX_THREAD_COUNTS 16
#define SEED 0x7a11e5eedull

enum impl_id {
	IMPL_TALLY,
	IMPL_SHARED_ATOMIC,
	IMPL_PERCPU_COUNTER,
	IMPL_PERCPU_ATOMIC,
	IMPL_STRIPED_CELLS,
	IMPL_THREAD_CACHED,
	IMPL_RSEQ_ADD,
	IMPL_TLS_INCREMENT,
	NR_IMPLS
};

enum hop_pattern {
	HOP_RANDOM,	/* required: -k on a random CPU */
	HOP_DRAIN,	/* variant: -k always on CPU 0 */
	NR_PATTERNS
};

/* One invocation: options, outputs and figures. */
struct run {
	const char *json_path;
	unsigned int threads[MAX_THREAD_COUNTS];
	unsigned int nr_threads;
	bool quick;
	bool pin;
	struct bench_plan add_plan;
	struct bench_plan read_plan;
	unsigned long hop_steps;
	unsigned int tc_trials;
	FILE *out;
	struct bench_json json;
	double add_ns[NR_IMPLS][MAX_THREAD_COUNTS];
};

/* A simulated domain with tally's counter and the classic one on it. */
struct sim_counters {
	struct tally_domain *d;
	struct tally_counter t;		/* batch BENCH_TALLY_BATCH */
	struct pcpu_counter *pc;	/* the kernel's default batch */
};

/* Return: 0, or -1 (the message printed). */
int sim_create(struct sim_counters *s, unsigned int nr_cpus);
void sim_destroy(struct sim_counters *s);

/*
 * The sections, in the order they run.  Each prints its table to r->out
 * and its figures to r->json.  Return: 0, or -1 (the message printed).
 */
int bench_add(struct run *r);
int bench_thread_cached(struct run *r);
int bench_read(struct run *r);
int bench_accuracy(struct run *r, enum hop_pattern pattern);

#endif /* TALLY_BENCH_COUNTER_H */
