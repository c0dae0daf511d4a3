/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_RAND_H
#define TALLY_BENCH_RAND_H

/*
 * rand.h - a deterministic generator, so that every run of a benchmark
 * does the same work.
 */

#include <stdint.h>

/**
 * bench_rand() - the next number of a fast deterministic generator
 *	(splitmix64), for reproducible workloads.
 * @state: the generator's state; any seed.
 */
uint64_t bench_rand(uint64_t *state);

#endif /* TALLY_BENCH_RAND_H */
