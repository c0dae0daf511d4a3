// SPDX-License-Identifier: MIT
/*
 * mm.c - a task's memory counters (tally/mm.h).
 *
 * Five hierarchical counters from one tally_counter_init_many(): a CPU's
 * five slots sit in one cache line, so an add dirties one line and a
 * precise read of several items loads each CPU's line once.
 *
 *	per CPU:  [ file | anon | swap | shmem | pgtables ]   one line
 *	items:    5 x tally_counter_items_size(d)              caller's or ours
 *
 * Invariant: magic == TALLY_MM_MAGIC exactly while the counters are live;
 * init sets it last, destroy clears it first, so a second destroy or a
 * read after destroy is refused instead of touching freed memory.
 *
 * Costs: add = the counter's add; approximate read = one root load per
 * item; precise read = one pass over the CPUs for all items asked.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <tally/mm.h>
#include "counter/counter_internal.h"
#include "mm_internal.h"

static const char *const item_names[TALLY_MM_NR_ITEMS] = {
	[TALLY_MM_FILE] = "TALLY_MM_FILE",
	[TALLY_MM_ANON] = "TALLY_MM_ANON",
	[TALLY_MM_SWAP] = "TALLY_MM_SWAP",
	[TALLY_MM_SHMEM] = "TALLY_MM_SHMEM",
	[TALLY_MM_PGTABLES] = "TALLY_MM_PGTABLES",
};

const char *tally_mm_item_name(enum tally_mm_item item)
{
	return (unsigned int)item < TALLY_MM_NR_ITEMS ? item_names[item] : NULL;
}

size_t tally_mm_items_size(const struct tally_domain *d)
{
	return TALLY_MM_NR_ITEMS * tally_counter_items_size(d);
}

int tally_mm_init(struct tally_mm *mm, struct tally_domain *d,
		  unsigned long batch, void *items)
{
	int err;

	if (!mm)
		return -EINVAL;
	if (mm_is_live(mm))
		return -EBUSY;	/* re-registering would corrupt the registry */
	mm->magic = 0;
	err = tally_counter_init_many(mm->counters, items, TALLY_MM_NR_ITEMS, d,
				      batch ? batch : TALLY_MM_DEFAULT_BATCH);
	if (err)
		return err;
	mm->magic = TALLY_MM_MAGIC;
	return 0;
}

static bool valid_mask(unsigned int mask)
{
	return mask && !(mask & ~TALLY_MM_ALL);
}

int tally_mm_destroy(struct tally_mm *mm)
{
	long sums[TALLY_MM_NR_ITEMS];
	int ret = 0;

	if (!mm_is_live(mm))
		return -EINVAL;
	mm->magic = 0;
	tally_counter_precise_sum_many(mm->counters, TALLY_MM_NR_ITEMS, sums);
	for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++) {
		if (!sums[i])
			continue;
		ret = -ENOTEMPTY;
#ifdef TALLY_DEBUG
		fprintf(stderr,
			"tally: Bad rss-counter state mm:%p type:%s val:%ld\n",
			(void *)mm, item_names[i], sums[i]);
#endif
	}
	tally_counter_destroy_many(mm->counters, TALLY_MM_NR_ITEMS);
	return ret;
}

int tally_mm_add_cpu(struct tally_mm *mm, unsigned int cpu,
		     enum tally_mm_item item, long delta)
{
	if (!mm_is_live(mm) || (unsigned int)item >= TALLY_MM_NR_ITEMS)
		return -EINVAL;
	return tally_counter_add_cpu(&mm->counters[item], cpu, delta);
}

void mm_range_add(struct tally_mm_range *acc, const struct tally_counter *c,
		  long weight)
{
	long approx, min, max;

	counter_approximate_range(c, &approx, &min, &max);
	acc->value = mm_add_weighted(acc->value, approx, weight);
	acc->min = mm_add_weighted(acc->min, min, weight);
	acc->max = mm_add_weighted(acc->max, max, weight);
}

int tally_mm_approximate(const struct tally_mm *mm, unsigned int mask,
			 struct tally_mm_range *out)
{
	struct tally_mm_range r = { 0, 0, 0 };

	if (!mm_is_live(mm) || !out || !valid_mask(mask))
		return -EINVAL;
	for (unsigned int i = 0; i < TALLY_MM_NR_ITEMS; i++)
		if (mask & TALLY_MM_BIT(i))
			mm_range_add(&r, &mm->counters[i], 1);
	*out = r;
	return 0;
}

long tally_mm_precise(const struct tally_mm *mm, unsigned int mask)
{
	long sums[TALLY_MM_NR_ITEMS];
	unsigned int nr;
	long total = 0;

	if (!mm_is_live(mm) || !valid_mask(mask))
		return -EINVAL;
	/* Only the items up to the highest one asked for are summed. */
	nr = 32 - (unsigned int)__builtin_clz(mask) - 16;
	tally_counter_precise_sum_many(mm->counters, nr, sums);
	for (unsigned int i = 0; i < nr; i++)
		if (mask & TALLY_MM_BIT(i))
			total = mm_add_weighted(total, sums[i], 1);
	return total;
}
