/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CLI_H
#define TALLY_CLI_H

/*
 * cli.h - the commands of the tally tool besides the benchmarks.
 *
 * Each takes its arguments with argv[0] its own name, prints its usage on
 * --help (standard output, status 0) and on a bad command line (standard
 * error, status 2), and starts every message on standard error with
 * "tally: ".  Exit statuses, for every command of the tool:
 */

/** Exit status: done. */
#define CLI_EXIT_OK 0
/** Exit status: a system or library call failed (the message says which). */
#define CLI_EXIT_FAILED 1
/** Exit status: bad command line (unknown command or option, bad value). */
#define CLI_EXIT_USAGE 2

/**
 * tally_cmd_info() - `tally info`: how tally runs on this machine.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status.
 */
int tally_cmd_info(int argc, char **argv);

/**
 * tally_cmd_metrics() - `tally metrics --demo`: a demonstration tree's
 *	export.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status.
 */
int tally_cmd_metrics(int argc, char **argv);

/**
 * tally_cmd_top() - `tally top URL|FILE`: a running program's memory
 *	groups and statistics groups, refreshed.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the exit status (3: the source is not a valid exposition).
 */
int tally_cmd_top(int argc, char **argv);

/**
 * tally_cmd_run() - `tally run`: a program with every allocation of its
 *	process charged to one memory group.
 * @argc: argument count, including argv[0].
 * @argv: the arguments.
 *
 * Return: the program's exit status (128 + N for signal N), or 2 (bad
 * command line), 125 (tally failed), 126 (cannot run the program), 127
 * (program not found).
 */
int tally_cmd_run(int argc, char **argv);

#endif /* TALLY_CLI_H */
