// SPDX-License-Identifier: MIT
/*
 * measure.c - clock, calibration and interleaved repetitions (measure.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "measure.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bench_per_op_ns(const uint64_t *elapsed_ns, unsigned int threads,
		       unsigned long n)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < threads; i++)
		sum += elapsed_ns[i];
	return (double)sum / threads / (double)n;
}

unsigned long bench_calibrate(bench_run_fn run, void *arg,
			      const struct bench_plan *plan)
{
	unsigned long n = plan->min_n ? plan->min_n : 1;
	double elapsed, scale;

	for (;;) {
		double ns = run(arg, n);

		if (ns < 0)
			return 0;
		elapsed = ns * (double)n;
		if (elapsed * 8 >= (double)plan->target_ns || n >= 1ul << 40)
			break;
		scale = elapsed > 0 ? (double)plan->target_ns / elapsed : 16;
		n = (unsigned long)((double)n * fmin(fmax(scale, 2), 16));
	}
	scale = elapsed > 0 ? (double)plan->target_ns / elapsed : 1;
	n = (unsigned long)fmax((double)n * scale, (double)plan->min_n);
	return n ? n : 1;
}

int bench_measure_set(const struct bench_job *jobs, unsigned int nr,
		      const struct bench_plan *plan, struct bench_result *res)
{
	unsigned int reps = plan->reps;
	double (*v)[BENCH_MAX_REPS] = calloc(nr, sizeof(*v));
	unsigned long *n = calloc(nr, sizeof(*n));
	int err = 0;

	if (reps < 1)
		reps = 1;
	if (reps > BENCH_MAX_REPS)
		reps = BENCH_MAX_REPS;
	if (!v || !n) {
		fprintf(stderr, "tally: out of memory\n");
		err = -1;
	}
	for (unsigned int i = 0; i < nr && !err; i++) {
		n[i] = bench_calibrate(jobs[i].run, jobs[i].arg, plan);
		err = n[i] ? 0 : -1;
	}
	for (unsigned int rep = 0; rep < reps && !err; rep++) {
		for (unsigned int i = 0; i < nr && !err; i++) {
			v[i][rep] = jobs[i].run(jobs[i].arg, n[i]);
			err = v[i][rep] < 0 ? -1 : 0;
		}
	}
	for (unsigned int i = 0; i < nr && !err; i++)
		bench_summarize(v[i], reps, n[i], &res[i]);
	free(v);
	free(n);
	return err;
}

int bench_measure(bench_run_fn run, void *arg, const struct bench_plan *plan,
		  struct bench_result *res)
{
	const struct bench_job job = { .run = run, .arg = arg };

	return bench_measure_set(&job, 1, plan, res);
}
