/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_ARGS_H
#define TALLY_BENCH_ARGS_H

/*
 * args.h - command-line helpers the benchmarks share: option values that
 * are lists (of numbers, of names), and the message for a bad command line.
 */

#include <stdio.h>

/**
 * bench_parse_list() - parse a comma-separated list of integers.
 * @s: the text, such as "1,2,4".
 * @out: array receiving the values.
 * @max: capacity of @out.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 *
 * Return: the number of values, or -1 for an empty list, a value out of
 * [@lo, @hi], a malformed number or more than @max values.
 */
int bench_parse_list(const char *s, unsigned int *out, unsigned int max,
		     unsigned int lo, unsigned int hi);


/**
 * bench_parse_names() - parse a comma-separated list of names.
 * @s: the text, such as "update,create".
 * @names: the accepted names.
 * @nr: their number, at most 32.
 * @mask: set to the names given: bit i for @names[i].
 *
 * Return: 0, or -1 for an empty list, an empty or unknown name (@mask is
 * then unchanged).
 */
int bench_parse_names(const char *s, const char *const *names,
		      unsigned int nr, unsigned int *mask);

/**
 * bench_bad_usage() - report a bad command line of a benchmark.
 * @cmd: the command ("tally bench stats").
 * @what: what is wrong ("bad option or missing value", ...).
 * @arg: the offending argument.
 * @usage: prints the command's usage to a stream.
 *
 * Return: -1, what the option parsers return for a bad command line.
 */
int bench_bad_usage(const char *cmd, const char *what, const char *arg,
		    void (*usage)(FILE *f));

#endif /* TALLY_BENCH_ARGS_H */
