/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_LATENCY_H
#define TALLY_BENCH_LATENCY_H

/*
 * latency.h - latency histograms for the benchmarks: each thread records
 * into its own histogram, the histograms are merged afterwards, and the
 * merged one gives percentiles and exact counts per decade.
 *
 * Two views of the same samples:
 *   - log-linear buckets, 16 per power of two (relative width 1/16), for
 *     percentiles: a percentile is the middle of its bucket, clamped to the
 *     smallest and largest sample, so within about 3% of the true value;
 *   - exact counts per decade of nanoseconds ([10^k, 10^(k+1)) ns), for
 *     reports in bands such as "100 us to 1 ms".
 */

#include <stdint.h>

/** Sub-buckets per power of two, as a shift. */
#define LAT_SUB_SHIFT 4
/** Samples at or above 2^LAT_TOP_BIT ns (about 18 minutes) share a bucket. */
#define LAT_TOP_BIT 40
/** Number of log-linear buckets. */
#define LAT_BUCKETS ((LAT_TOP_BIT - LAT_SUB_SHIFT + 2) << LAT_SUB_SHIFT)
/** Decades counted exactly: [1, 10) ns up to [10^12, inf) ns. */
#define LAT_DECADES 13

/**
 * struct lat_hist - the samples of one thread, or several merged.
 * @count: number of samples.
 * @sum: their sum in ns.
 * @min: the smallest (UINT64_MAX while empty).
 * @max: the largest.
 * @decade: exact counts: decade[k] holds samples in [10^k, 10^(k+1)) ns
 *	(decade[0] also holds 0, the last decade everything above).
 * @bucket: log-linear bucket counts.
 */
struct lat_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint64_t decade[LAT_DECADES];
	uint32_t bucket[LAT_BUCKETS];
};

/** lat_hist_reset() - empty @h. */
void lat_hist_reset(struct lat_hist *h);

/**
 * lat_hist_record() - add one sample.
 * @h: the histogram (one writer at a time).
 * @ns: the sample in nanoseconds.
 */
void lat_hist_record(struct lat_hist *h, uint64_t ns);

/**
 * lat_hist_merge() - add the samples of @src to @dst.
 * @dst: the destination.
 * @src: the source, unchanged.
 */
void lat_hist_merge(struct lat_hist *dst, const struct lat_hist *src);

/**
 * lat_hist_percentile() - the value below which a fraction @q of the
 *	samples fall.
 * @h: the histogram.
 * @q: 0 to 1 (0.5 for the median, 0.999 for p99.9).
 *
 * Return: nanoseconds, within the bucket resolution; 0 when empty.
 */
double lat_hist_percentile(const struct lat_hist *h, double q);

/**
 * lat_hist_count_below() - exact number of samples below 10^@pow10 ns.
 * @h: the histogram.
 * @pow10: 0 to %LAT_DECADES (which counts every sample).
 *
 * Return: the count.
 */
uint64_t lat_hist_count_below(const struct lat_hist *h, unsigned int pow10);

#endif /* TALLY_BENCH_LATENCY_H */
