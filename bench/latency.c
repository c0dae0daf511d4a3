// SPDX-License-Identifier: MIT
/*
 * latency.c - latency histograms (latency.h).
 *
 * Bucket of a sample v: below 2^LAT_SUB_SHIFT, v itself; otherwise, with
 * h the index of v's highest set bit, the group h - LAT_SUB_SHIFT + 1 of
 * 2^LAT_SUB_SHIFT buckets, picked by the LAT_SUB_SHIFT bits below the
 * highest one.  Bucket i >= 2^LAT_SUB_SHIFT so covers
 * [(S + m) << (e - 1), (S + m + 1) << (e - 1)) with S = 2^LAT_SUB_SHIFT,
 * e = i / S and m = i % S.
 */
#include <math.h>
#include <string.h>

#include "latency.h"

#define SUB (1u << LAT_SUB_SHIFT)

static unsigned int bucket_of(uint64_t v)
{
	unsigned int h;

	if (v < SUB)
		return (unsigned int)v;
	h = 63u - (unsigned int)__builtin_clzll(v);
	if (h > LAT_TOP_BIT)
		return LAT_BUCKETS - 1;
	return ((h - LAT_SUB_SHIFT + 1) << LAT_SUB_SHIFT) +
	       (unsigned int)((v >> (h - LAT_SUB_SHIFT)) & (SUB - 1));
}

/* The middle of bucket @i. */
static double bucket_middle(unsigned int i)
{
	unsigned int e = i >> LAT_SUB_SHIFT, m = i & (SUB - 1);
	double width;

	if (!e)
		return i;
	width = ldexp(1, (int)e - 1);
	return (SUB + m) * width + (width - 1) / 2;
}

void lat_hist_reset(struct lat_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void lat_hist_record(struct lat_hist *h, uint64_t ns)
{
	unsigned int k = 0;

	for (uint64_t edge = 10; k < LAT_DECADES - 1 && ns >= edge; edge *= 10)
		k++;
	h->decade[k]++;
	h->bucket[bucket_of(ns)]++;
	h->count++;
	h->sum += ns;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
}

void lat_hist_merge(struct lat_hist *dst, const struct lat_hist *src)
{
	for (unsigned int k = 0; k < LAT_DECADES; k++)
		dst->decade[k] += src->decade[k];
	for (unsigned int i = 0; i < LAT_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

double lat_hist_percentile(const struct lat_hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (unsigned int i = 0; i < LAT_BUCKETS - 1; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			return fmin(fmax(bucket_middle(i), (double)h->min),
				    (double)h->max);
	}
	return (double)h->max;
}

uint64_t lat_hist_count_below(const struct lat_hist *h, unsigned int pow10)
{
	uint64_t n = 0;

	for (unsigned int k = 0; k < pow10 && k < LAT_DECADES; k++)
		n += h->decade[k];
	return n;
}
