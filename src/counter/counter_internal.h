/* SPDX-License-Identifier: MIT */
#ifndef TALLY_COUNTER_INTERNAL_H
#define TALLY_COUNTER_INTERNAL_H

/*
 * counter_internal.h - what the library's scans over many counters (the
 * victim selection of oom.c) need of counter.c beyond the public API.
 */

#include <tally/counter.h>

/*
 * Start loading what tally_counter_approximate_sum() reads of @c beyond
 * the counter itself, so that a scan overlaps its cache misses.
 */
void counter_prefetch(const struct tally_counter *c);

/*
 * The approximate sum of @c and the interval that holds its precise sum
 * (as tally_counter_approximate_min_max() gives it), from one load of
 * the root.
 */
void counter_approximate_range(const struct tally_counter *c, long *approx,
			       long *min, long *max);

#endif /* TALLY_COUNTER_INTERNAL_H */
