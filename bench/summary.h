/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_SUMMARY_H
#define TALLY_BENCH_SUMMARY_H

/*
 * summary.h - the figures reported for a repeated measurement: the median
 * of its repetitions, with the fastest and the slowest.  (Latency
 * distributions of many single operations are latency.h's.)
 */

#include <stddef.h>

/** Largest number of repetitions of one measurement. */
#define BENCH_MAX_REPS 32

/**
 * bench_median() - the median of @n values (the mean of the two middle ones
 *	when @n is even); @v is left unchanged.
 * @v: the values.
 * @n: their number, at most %BENCH_MAX_REPS; 0 gives 0.
 */
double bench_median(const double *v, size_t n);

/**
 * struct bench_result - the figures of repetitions (bench_summarize(),
 *	bench_measure()).
 * @median: median over the repetitions of the ns per operation.
 * @min: fastest repetition.
 * @max: slowest repetition.
 * @n: operations per repetition (per thread for threaded runs).
 */
struct bench_result {
	double median;
	double min;
	double max;
	unsigned long n;
};

/**
 * bench_summarize() - median, fastest and slowest of repetitions.
 * @v: ns per operation of each repetition.
 * @reps: their number, 1 to %BENCH_MAX_REPS.
 * @n: operations per repetition, copied to @res.
 * @res: filled with the figures.
 */
void bench_summarize(const double *v, unsigned int reps, unsigned long n,
		     struct bench_result *res);

#endif /* TALLY_BENCH_SUMMARY_H */
