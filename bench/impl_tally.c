// SPDX-License-Identifier: MIT
/*
 * impl_tally.c - tally's hierarchical counter as a bench_impl.
 *
 * One tally_counter on the system domain with the kernel's RSS batch
 * (32): the inline tally_counter_add() is what the loop times.
 */
#include <errno.h>
#include <stdlib.h>

#include <tally/counter.h>
#include "baselines.h"

static void *tally_create(void)
{
	struct tally_counter *c = malloc(sizeof(*c));
	int err;

	if (!c)
		return NULL;
	err = tally_counter_init(c, NULL, BENCH_TALLY_BATCH);
	if (err) {
		free(c);
		errno = -err;
		return NULL;
	}
	return c;
}

static void tally_destroy(void *ctr)
{
	tally_counter_destroy(ctr);
	free(ctr);
}

static void tally_add(void *ctr, long inc)
{
	tally_counter_add(ctr, inc);
}

static void tally_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, tally_add);
}

static long tally_sum(void *ctr)
{
	return tally_counter_precise_sum(ctr);
}

const struct bench_impl bench_impl_tally = {
	.name = "tally",
	.what = "hierarchical per-CPU counter, batch 32",
	.create = tally_create,
	.destroy = tally_destroy,
	.run = tally_run,
	.sum = tally_sum,
};
