// SPDX-License-Identifier: MIT
/*
 * baseline_tls_increment.c - a thread-local ++, the physical floor.
 *
 * Each thread increments its own thread-local long; an empty asm that
 * takes the variable as a memory operand makes every iteration load,
 * add and store it, as every other implementation's add does with its
 * counter, instead of letting the compiler fold the loop into one add.
 * The thread adds its count to a shared total when its run ends.
 */
#include <stdlib.h>

#include "baselines.h"

struct tls_total {
	long value;
} __attribute__((aligned(64)));

static __thread long tls_count __attribute__((tls_model("initial-exec")));

static void *tls_create(void)
{
	/* Its own cache line: calloc() only aligns to 16 bytes. */
	struct tls_total *c = aligned_alloc(64, sizeof(*c));

	if (c)
		c->value = 0;
	return c;
}

static void tls_destroy(void *ctr)
{
	free(ctr);
}

static void tls_add(void *ctr, long inc)
{
	tls_count += inc;
	__asm__ __volatile__("" : "+m" (tls_count));
}

static void tls_run(void *ctr, unsigned long n)
{
	struct tls_total *t = ctr;

	bench_add_loop(ctr, n, tls_add);
	__atomic_fetch_add(&t->value, tls_count, __ATOMIC_RELAXED);
	tls_count = 0;
}

static long tls_sum(void *ctr)
{
	struct tls_total *t = ctr;

	return __atomic_load_n(&t->value, __ATOMIC_RELAXED);
}

const struct bench_impl bench_impl_tls_increment = {
	.name = "tls_increment",
	.what = "thread-local ++ (physical floor)",
	.create = tls_create,
	.destroy = tls_destroy,
	.run = tls_run,
	.sum = tls_sum,
};
