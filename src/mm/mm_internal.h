/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MM_INTERNAL_H
#define TALLY_MM_INTERNAL_H

/*
 * mm_internal.h - the clamped, weighted, saturating sums that tally_mm's
 * reads and tally_oom_select()'s usage share.
 */

#include <tally/mm.h>

/* @a + @b for @a, @b >= 0, saturated at LONG_MAX. */
static inline long mm_add_saturated(long a, long b)
{
	long r;

	return __builtin_add_overflow(a, b, &r) ? LONG_MAX : r;
}

/* @acc + @weight * max(@v, 0) for @acc, @weight >= 0, saturated. */
static inline long mm_add_weighted(long acc, long v, long weight)
{
	long r;

	if (v <= 0)
		return acc;
	if (__builtin_mul_overflow(v, weight, &r))
		return LONG_MAX;
	return mm_add_saturated(acc, r);
}

/*
 * Add the approximate read of @c, clamped at 0 and times @weight, to
 * @acc: its value and the interval that holds its precise sum.
 */
void mm_range_add(struct tally_mm_range *acc, const struct tally_counter *c,
		  long weight);

/* A live tally_mm: initialized and not destroyed. */
static inline bool mm_is_live(const struct tally_mm *mm)
{
	return mm && mm->magic == TALLY_MM_MAGIC;
}

#endif /* TALLY_MM_INTERNAL_H */
