// SPDX-License-Identifier: MIT
/*
 * baseline_rseq_add.c - a bare per-CPU add, no tree, no batch.
 *
 * tally_percpu_add(): one rseq critical section whose commit is an add to
 * the current CPU's slot.  Every per-CPU counter built on this runtime
 * does at least this much, so it is the floor tally's add is held to.
 */
#include "baselines.h"

static void *rseq_add_create(void)
{
	return tally_percpu_alloc(NULL, sizeof(long), 0);
}

static void rseq_add_destroy(void *ctr)
{
	tally_percpu_free(NULL, ctr);
}

static void rseq_add_add(void *ctr, long inc)
{
	tally_percpu_add(ctr, inc);
}

static void rseq_add_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, rseq_add_add);
}

static long rseq_add_sum(void *ctr)
{
	return bench_percpu_sum(ctr, tally_domain_system());
}

const struct bench_impl bench_impl_rseq_add = {
	.name = "rseq_add",
	.what = "bare rseq per-CPU add (floor)",
	.create = rseq_add_create,
	.destroy = rseq_add_destroy,
	.run = rseq_add_run,
	.sum = rseq_add_sum,
};
