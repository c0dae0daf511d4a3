/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_H
#define TALLY_BENCH_H

/*
 * bench.h - entry points of the benchmarks behind `tally bench NAME`.
 *
 * Each takes the arguments after "bench": argv[0] is the benchmark's name,
 * the options follow.  It prints its own usage on --help (to standard
 * output, exit status 0) and on bad options (to standard error, 2).
 */

/**
 * tally_bench_counter() - `tally bench counter`: counter adds, reads and
 *	accuracy against the baselines.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (a counter lost
 * updates, no memory), 2 for bad options.
 */
int tally_bench_counter(int argc, char **argv);

/**
 * tally_bench_stats() - `tally bench stats`: the statistics tree's flushing
 *	designs (tally, linux61, rfc2023, linux68) side by side.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (no memory, no
 * threads), 2 for bad options.
 */
int tally_bench_stats(int argc, char **argv);

/**
 * tally_bench_oom() - `tally bench oom`: victim selection among N tasks,
 *	precise scan against the 2-pass selection.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (no memory),
 * 2 for bad options.
 */
int tally_bench_oom(int argc, char **argv);

/**
 * tally_bench_export() - `tally bench export`: what exporting a statistics
 *	tree in the Prometheus and OpenMetrics formats costs.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (no memory, an
 * export or the textfile failed), 2 for bad options.
 */
int tally_bench_export(int argc, char **argv);

/**
 * tally_bench_charge() - `tally bench charge`: charging memory against a
 *	chain of groups with limits, tally's memory groups against the
 *	kernel's, ClickHouse's and the bare page counter's designs.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (no memory, no
 * threads, a design refused its fill or drifted), 2 for bad options.
 */
int tally_bench_charge(int argc, char **argv);

/**
 * tally_bench_churn() - `tally bench churn`: a memory group per query
 *	(create, charge, destroy, uncharge, put) at a steady rate; resident
 *	memory and descriptors must stay flat.
 * @argc: argument count, argv[0] being "churn".
 * @argv: the arguments.
 *
 * Return: 0, 1 on failure, 2 on a bad command line.
 */
int tally_bench_churn(int argc, char **argv);

/**
 * tally_bench_scale() - `tally bench scale`: memory groups as trees and
 *	machines grow: stock memory, a refusal's drain, charges beside
 *	groups above high.
 * @argc: argument count, argv[0] being "scale".
 * @argv: the arguments.
 *
 * Return: 0, 1 on failure, 2 on a bad command line.
 */
int tally_bench_scale(int argc, char **argv);

/**
 * tally_bench_malloc() - `tally bench malloc`: a malloc-heavy workload with
 *	glibc, jemalloc, jemalloc with tally's accounting and jemalloc with
 *	a ClickHouse-style per-thread tracker.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status: 0, 1 when the benchmark failed (jemalloc or
 * libtally_jemalloc missing, no memory, no threads), 2 for bad options.
 */
int tally_bench_malloc(int argc, char **argv);

#endif /* TALLY_BENCH_H */
