/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_MEASURE_H
#define TALLY_BENCH_MEASURE_H

/*
 * measure.h - "ns per operation" of a benchmark's loop: the clock, a
 * calibrated repetition length, and repetitions interleaved across the
 * operations compared, summarized by summary.h.
 *
 * Usage: bench_measure(run, arg, &plan, &res), or bench_measure_set() for
 * operations whose ratios are the figures.
 */

#include <stdint.h>

#include "summary.h"

/** bench_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/**
 * bench_per_op_ns() - nanoseconds per operation of a threaded repetition:
 *	the mean over the threads of each one's time per operation.
 * @elapsed_ns: each thread's time for its @n operations.
 * @threads: their number, at least 1.
 * @n: operations per thread.
 *
 * Return: the sum of @elapsed_ns / @threads / @n.
 */
double bench_per_op_ns(const uint64_t *elapsed_ns, unsigned int threads,
		       unsigned long n);

/**
 * struct bench_plan - how long and how often to repeat a measurement.
 * @target_ns: wanted duration of one repetition.
 * @reps: repetitions (1 to %BENCH_MAX_REPS); the median is reported.
 * @min_n: smallest operation count per repetition (at least 1).
 */
struct bench_plan {
	uint64_t target_ns;
	unsigned int reps;
	unsigned long min_n;
};

/**
 * typedef bench_run_fn - one repetition of a measurement.
 * @arg: the caller's context.
 * @n: how many operations to do (per thread for threaded runs).
 *
 * Return: nanoseconds per operation (the elapsed time of the repetition
 * is taken to be that times @n), or a negative value on failure, which
 * stops the measurement.
 */
typedef double (*bench_run_fn)(void *arg, unsigned long n);

/**
 * bench_calibrate() - choose the operation count of one repetition.
 * @run: the repetition.
 * @arg: passed to @run.
 * @plan: the wanted duration.
 *
 * Grows n from @plan->min_n until a run lasts an eighth of
 * @plan->target_ns, then scales it to the target; these runs also warm up
 * caches and page tables.
 *
 * Return: the count, or 0 when @run failed (its message is printed).
 */
unsigned long bench_calibrate(bench_run_fn run, void *arg,
			      const struct bench_plan *plan);

/**
 * struct bench_job - one measurement of a set.
 * @run: its repetition.
 * @arg: passed to @run.
 */
struct bench_job {
	bench_run_fn run;
	void *arg;
};

/**
 * bench_measure_set() - measure several operations, repetitions
 *	interleaved.
 * @jobs: the measurements.
 * @nr: their number.
 * @plan: duration and repetitions of each.
 * @res: array of @nr results.
 *
 * Each job is calibrated alone, then the repetitions run in rounds, one of
 * each job per round: a slow period of the machine (other work, a noisy
 * neighbour) then hits every job alike, and their ratios stay meaningful.
 *
 * Return: 0, or -1 when a run failed (its message is already printed).
 */
int bench_measure_set(const struct bench_job *jobs, unsigned int nr,
		      const struct bench_plan *plan, struct bench_result *res);

/**
 * bench_measure() - calibrate, repeat and summarize one measurement.
 * @run: the repetition.
 * @arg: passed to @run.
 * @plan: duration and repetitions.
 * @res: filled with the figures.
 *
 * Return: 0, or -1 when @run failed (its message is already printed).
 */
int bench_measure(bench_run_fn run, void *arg, const struct bench_plan *plan,
		  struct bench_result *res);

#endif /* TALLY_BENCH_MEASURE_H */
