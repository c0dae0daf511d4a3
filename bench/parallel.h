/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_PARALLEL_H
#define TALLY_BENCH_PARALLEL_H

/*
 * parallel.h - benchmark threads that start together (on a barrier),
 * optionally pinned one per CPU, each timing its own work.
 */

#include <stdint.h>

/**
 * typedef bench_thread_fn - the body of one of bench_run_parallel()'s
 *	threads.
 * @arg: the caller's context.
 * @index: the thread's number, 0 to nr - 1.
 */
typedef void (*bench_thread_fn)(void *arg, unsigned int index);

/** bench_run_parallel() flag: pin thread i to the i-th allowed CPU. */
#define BENCH_PIN 0x1u

/**
 * bench_run_parallel() - run @fn on @nr threads that start together.
 * @nr: number of threads (at least 1).
 * @fn: the body.
 * @arg: passed to @fn.
 * @elapsed_ns: if not NULL, array of @nr set to each thread's wall time
 *	of @fn (CLOCK_MONOTONIC, from the moment the barrier released it).
 * @flags: 0 or %BENCH_PIN: before the start, thread i binds itself to the
 *	CPU (i modulo their number) of the caller's allowed CPUs, as
 *	will-it-scale does; threads beyond the CPU count share CPUs.
 *
 * All threads are created first and released by a barrier, so none
 * starts its work before the last is ready.  Returns once all have ended.
 *
 * Return: 0, or a negative errno when a thread cannot be created (the
 * created ones are released without running @fn and joined).
 */
int bench_run_parallel(unsigned int nr, bench_thread_fn fn, void *arg,
		       uint64_t *elapsed_ns, unsigned int flags);

#endif /* TALLY_BENCH_PARALLEL_H */
