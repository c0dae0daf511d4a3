// SPDX-License-Identifier: MIT
/*
 * summary.c - median, fastest and slowest of repetitions (summary.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

static int compare_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

double bench_median(const double *v, size_t n)
{
	double s[BENCH_MAX_REPS];

	if (!n)
		return 0;
	if (n > BENCH_MAX_REPS)
		n = BENCH_MAX_REPS;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), compare_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

void bench_summarize(const double *v, unsigned int reps, unsigned long n,
		     struct bench_result *res)
{
	if (reps > BENCH_MAX_REPS)
		reps = BENCH_MAX_REPS;
	res->median = bench_median(v, reps);
	res->min = v[0];
	res->max = v[0];
	for (unsigned int i = 1; i < reps; i++) {
		res->min = fmin(res->min, v[i]);
		res->max = fmax(res->max, v[i]);
	}
	res->n = n;
}
