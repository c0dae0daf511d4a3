// SPDX-License-Identifier: MIT
/*
 * baseline_percpu_atomic.c - per-CPU slots updated with atomics.
 *
 * The CPU number comes from the rseq area (a plain TLS load), then a
 * locked add on that CPU's slot.  No restartable sequence is needed since
 * the add is atomic: a thread whose CPU number went stale after a
 * migration still adds exactly, only to another CPU's slot.  The slots
 * are tally's per-CPU memory, so no two CPUs share a cache line.  This is
 * what per-CPU counting costs without rseq commits.
 */
#include "baselines.h"

static void *percpu_atomic_create(void)
{
	return tally_percpu_alloc(NULL, sizeof(long), 0);
}

static void percpu_atomic_destroy(void *ctr)
{
	tally_percpu_free(NULL, ctr);
}

static void percpu_atomic_add(void *ctr, long inc)
{
	long *slot = tally_percpu_ptr(ctr, bench_rseq_cpu());

	__atomic_fetch_add(slot, inc, __ATOMIC_RELAXED);
}

static void percpu_atomic_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, percpu_atomic_add);
}

static long percpu_atomic_sum(void *ctr)
{
	return bench_percpu_sum(ctr, tally_domain_system());
}

const struct bench_impl bench_impl_percpu_atomic = {
	.name = "percpu_atomic",
	.what = "per-CPU slots, rseq cpu_id + lock add",
	.create = percpu_atomic_create,
	.destroy = percpu_atomic_destroy,
	.run = percpu_atomic_run,
	.sum = percpu_atomic_sum,
};
