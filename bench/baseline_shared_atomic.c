// SPDX-License-Identifier: MIT
/*
 * baseline_shared_atomic.c - one atomic long shared by every thread.
 *
 * The simplest exact counter: each add is a locked add on one cache line,
 * which bounces between the cores that update it.
 */
#include <stdlib.h>

#include "baselines.h"

struct shared_atomic {
	long value;
} __attribute__((aligned(64)));

static void *shared_atomic_create(void)
{
	/* Its own cache line: calloc() only aligns to 16 bytes. */
	struct shared_atomic *c = aligned_alloc(64, sizeof(*c));

	if (c)
		c->value = 0;
	return c;
}

static void shared_atomic_destroy(void *ctr)
{
	free(ctr);
}

static void shared_atomic_add(void *ctr, long inc)
{
	struct shared_atomic *c = ctr;

	__atomic_fetch_add(&c->value, inc, __ATOMIC_RELAXED);
}

static void shared_atomic_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, shared_atomic_add);
}

static long shared_atomic_sum(void *ctr)
{
	struct shared_atomic *c = ctr;

	return __atomic_load_n(&c->value, __ATOMIC_RELAXED);
}

const struct bench_impl bench_impl_shared_atomic = {
	.name = "shared_atomic",
	.what = "one shared atomic (lock add)",
	.create = shared_atomic_create,
	.destroy = shared_atomic_destroy,
	.run = shared_atomic_run,
	.sum = shared_atomic_sum,
};
