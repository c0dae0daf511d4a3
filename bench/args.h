/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_ARGS_H
#define TALLY_BENCH_ARGS_H

/*
 * args.h - command-line helpers the benchmarks share: option values that
 * are lists (of numbers, of names), and the message for a bad command line.
 */

#include <getopt.h>
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

/**
 * bench_bad_value() - report a bad value of an option.
 * @cmd: the command ("tally info").
 * @opt: the option ("--batch").
 * @arg: the value given.
 * @usage: prints the command's usage to a stream.
 *
 * Return: -1, as bench_bad_usage().
 */
int bench_bad_value(const char *cmd, const char *opt, const char *arg,
		    void (*usage)(FILE *f));

/**
 * bench_parse_options() - the getopt_long() loop of a command.
 * @argc: argument count, argv[0] the command's own name.
 * @argv: the arguments.
 * @cmd: the command ("tally info"), for messages.
 * @shortopts: getopt_long()'s short options; "h" is added.
 * @longopts: getopt_long()'s table; { "help", no_argument, NULL, 'h' }
 *	is handled here (print @usage on standard output).
 * @usage: prints the command's usage to a stream.
 * @option: handles one option (its getopt value and argument): 0, or -1
 *	after bench_bad_value().
 * @ctx: passed to @option.
 *
 * An unknown option, a missing value or an argument left over is reported
 * with bench_bad_usage().
 *
 * Return: 0, 1 after --help, -1 for a bad command line (message and usage
 * printed on standard error).
 */
int bench_parse_options(int argc, char **argv, const char *cmd,
			const char *shortopts, const struct option *longopts,
			void (*usage)(FILE *f),
			int (*option)(int opt, char *arg, void *ctx),
			void *ctx);

#endif /* TALLY_BENCH_ARGS_H */
