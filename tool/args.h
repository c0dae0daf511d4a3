/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TOOL_ARGS_H
#define TALLY_TOOL_ARGS_H

/*
 * args.h - the command line of every command of the tally tool (cli/ and
 * the benchmarks of bench/): one getopt_long() loop with -h/--help, and
 * the values of options (numbers in a range, lists, names, seconds), each
 * refused with one message of one form:
 *
 *	tally: COMMAND: bad value of --OPTION: 'VALUE' (what is expected)
 *	tally: COMMAND: bad option '--OPTION': unknown | needs a value | ...
 *	tally: COMMAND: unexpected argument 'ARG'
 *
 * followed by the command's usage on standard error.
 *
 * The tool_opt_*() functions are called from a command's option handler,
 * while tool_parse_options() runs it: they know the command and the
 * option being parsed, and name them in their message.  tool_usage_error()
 * also works after tool_parse_options() returned, for a check across
 * options.  The tool is single-threaded when it parses its command line.
 */

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/**
 * struct tool_command - the command line of one command.
 * @name: the command as messages name it, without "tally" ("info",
 *	"bench stats").
 * @usage: prints the command's usage to a stream: on standard output for
 *	-h/--help, on standard error after a bad command line.
 * @shortopts: getopt_long()'s short options besides "h" ("o:"), or "".
 * @longopts: getopt_long()'s table, ending with a zeroed entry;
 *	{ "help", no_argument, NULL, 'h' } is handled here.
 * @option: handles one option: its getopt value and argument (NULL for
 *	an option without one); 0, or -1 after a message (tool_opt_*(),
 *	tool_bad_value(), tool_usage_error()).
 * @in_order: options end at the first operand (`tally run PROGRAM -x`:
 *	-x is the program's), instead of being taken from anywhere.
 */
struct tool_command {
	const char *name;
	void (*usage)(FILE *f);
	const char *shortopts;
	const struct option *longopts;
	int (*option)(int opt, char *arg, void *ctx);
	bool in_order;
};

/**
 * tool_parse_options() - parse a command's options with getopt_long().
 * @cmd: the command.
 * @argc: argument count, argv[0] the command's own name.
 * @argv: the arguments; operands are moved after the options (unless
 *	@cmd->in_order).
 * @ctx: passed to @cmd->option.
 * @operands: set to the index in @argv of the first operand (@argc when
 *	there is none); NULL when the command takes no operand (one is then
 *	an "unexpected argument").
 *
 * Context: the tool's main thread, one command line at a time.
 * Return: 0, 1 after -h/--help (usage printed on standard output), -1 for
 * a bad command line (message and usage printed on standard error).
 */
int tool_parse_options(const struct tool_command *cmd, int argc, char **argv,
		       void *ctx, int *operands);

/**
 * tool_usage_error() - report a bad command line of the current command:
 *	"tally: COMMAND: " and the formatted text, then the usage.
 * @fmt: printf() format of what is wrong.
 *
 * Context: inside or after tool_parse_options().
 * Return: -1, what an option handler or parser returns for a bad command
 * line.
 */
int tool_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/**
 * tool_bad_value() - report a bad value of the option being parsed.
 * @arg: the value given.
 * @expected: what the option takes ("a power of two from 2 to 2^30").
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: -1.
 */
int tool_bad_value(const char *arg, const char *expected);

/**
 * tool_parse_number() - parse a decimal number in [@lo, @hi].
 * @s: the text: digits with an optional fraction and exponent ("0.5",
 *	"2", "1e-2"); no sign, hexadecimal, infinity or NaN.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 * @out: the value, untouched on failure.
 *
 * Context: any.
 * Return: true, or false for anything else (no message).
 */
bool tool_parse_number(const char *s, double lo, double hi, double *out);

/**
 * tool_opt_uint() - the value of the current option: a whole number.
 * @arg: the text: decimal digits only.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 * @out: the value, untouched on failure.
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: 0, or -1 after tool_bad_value().
 */
int tool_opt_uint(const char *arg, unsigned long lo, unsigned long hi,
		  unsigned long *out);

/**
 * tool_opt_list() - the value of the current option: a comma-separated
 *	list of whole numbers ("1,2,4").
 * @arg: the text.
 * @out: array receiving the values (partly written on failure).
 * @max: capacity of @out, at least 1.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 * @nr: the number of values, untouched on failure.
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: 0, or -1 after tool_bad_value() for an empty list, an empty or
 * malformed number, one out of [@lo, @hi] or more than @max of them.
 */
int tool_opt_list(const char *arg, unsigned int *out, unsigned int max,
		  unsigned int lo, unsigned int hi, unsigned int *nr);

/**
 * tool_opt_names() - the value of the current option: a comma-separated
 *	list of names ("update,create").
 * @arg: the text.
 * @names: the accepted names.
 * @nr: their number, at most 32.
 * @mask: set to the names given, bit i for @names[i]; untouched on
 *	failure.
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: 0, or -1 after tool_bad_value() for an empty list, an empty or
 * unknown name.
 */
int tool_opt_names(const char *arg, const char *const *names,
		   unsigned int nr, unsigned int *mask);

/**
 * tool_opt_choice() - the value of the current option: one of @names.
 * @arg: the text.
 * @names: the accepted names.
 * @nr: their number.
 * @index: set to the index of the name given; untouched on failure.
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: 0, or -1 after tool_bad_value().
 */
int tool_opt_choice(const char *arg, const char *const *names,
		    unsigned int nr, unsigned int *index);

/**
 * tool_opt_number() - the value of the current option: a decimal number
 *	(tool_parse_number()).
 * @arg: the text.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 * @unit: what the number counts, in the message ("seconds"), or NULL.
 * @out: the value, untouched on failure.
 *
 * Context: inside an option handler run by tool_parse_options().
 * Return: 0, or -1 after tool_bad_value().
 */
int tool_opt_number(const char *arg, double lo, double hi, const char *unit,
		    double *out);

#endif /* TALLY_TOOL_ARGS_H */
