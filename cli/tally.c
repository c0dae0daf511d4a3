// SPDX-License-Identifier: MIT
/*
 * tally.c - the tally command-line tool.
 *
 *   tally bench counter [options]	the counter benchmark
 *   tally bench stats [options]	the statistics tree benchmark
 *   tally bench oom [options]		the victim selection benchmark
 *   tally bench export [options]	the export benchmark
 *   tally bench charge [options]	the memory charging benchmark
 *   tally bench malloc [options]	the allocation accounting benchmark
 *   tally plot RESULT.json [-o DIR]	plots of a benchmark's JSON
 *   tally info [options]		how tally runs on this machine
 *   tally metrics --demo [options]	a demonstration tree's export
 *   tally top URL|FILE [options]	a running program's groups, live
 *   tally run [options] -- PROGRAM	a program under a memory limit
 *   tally version, --version, -V	print the version
 *   tally --help, help [COMMAND]	list the commands, or describe one
 *
 * Every message on standard error starts with "tally: "; exit statuses
 * are those of cli.h (0 done, 1 failed, 2 bad command line; tally plot
 * adds 3, gnuplot missing; tally top 3, not a valid exposition).
 * adds 3, gnuplot missing; tally run exits with its program's status, or
 * 125, 126, 127 as env(1) does).
 *
 * Commands and benchmarks are rows of tables of {name, function, help},
 * walked by one dispatcher: a new benchmark is one row in bench_commands[]
 * and its entry point in bench/bench.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <tally/version.h>

#include "../bench/bench.h"
#include "cli.h"
#include "plot.h"


/**
 * struct command - one subcommand.
 * @name: the word that selects it.
 * @run: its entry point; argv[0] is @name.  Returns the exit status.
 * @help: one line for the command list.
 */
struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static int cmd_bench(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
	{ "bench", cmd_bench, "run a benchmark (tally bench --help)" },
	{ "plot", tally_plot, "draw a benchmark's JSON with gnuplot" },
	{ "info", tally_cmd_info,
	  "rseq, CPUs, counter tree shape, membarrier, accuracy bounds" },
	{ "metrics", tally_cmd_metrics,
	  "print a demonstration tree's Prometheus/OpenMetrics export" },
	{ "top", tally_cmd_top,
	  "a running program's memory and statistics groups, live" },
	{ "run", tally_cmd_run,
	  "run a program with its allocations charged to a memory group" },
	{ "version", cmd_version, "print the version (also --version, -V)" },
	{ NULL, NULL, NULL },
};

static const struct command bench_commands[] = {
	{ "counter", tally_bench_counter,
	  "counter adds, reads and accuracy against the baselines" },
	{ "stats", tally_bench_stats,
	  "statistics tree: the four flushing designs side by side" },
	{ "oom", tally_bench_oom,
	  "victim selection: precise scan vs 2-pass over N tasks" },
	{ "export", tally_bench_export,
	  "Prometheus/OpenMetrics export of a 1,000 x 10 tree" },
	{ "charge", tally_bench_charge,
	  "memory charging: tally vs kernel, ClickHouse, page counter" },
	{ "churn", tally_bench_churn,
	  "a memory group per query: rate, memory and descriptors flat" },
	{ "scale", tally_bench_scale,
	  "memory groups at 64-4096 CPUs: stock memory, drains, high" },
	{ "malloc", tally_bench_malloc,
	  "malloc-heavy workload: glibc, jemalloc, +tally, +tracker" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f, const char *prefix, const struct command *table)
{
	fprintf(f, "usage: %s COMMAND [options]\n\ncommands:\n", prefix);
	for (const struct command *c = table; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\n'%s COMMAND --help' or '%s help COMMAND' describes a "
		"command.\n", prefix, prefix);
	fprintf(f, "Exit status: %d done, %d failed (the message on standard "
		"error says why),\n%d bad command line.\n", CLI_EXIT_OK,
		CLI_EXIT_FAILED, CLI_EXIT_USAGE);
}

/* @prefix without its leading "tally ", for messages that start "tally: ". */
static const char *context(const char *prefix)
{
	return strncmp(prefix, "tally ", 6) ? "" : prefix + 6;
}

/*
 * Run the command of @table named by argv[1], with argv[1..] as its
 * arguments.  @prefix is the command line so far, for the usage text.
 */
static int dispatch(const char *prefix, const struct command *table,
		    int argc, char **argv)
{
	char help[] = "--help";
	bool asks_help = argc > 2 && !strcmp(argv[1], "help");

	if (argc < 2) {
		fprintf(stderr, "tally: %s%sno command given\n",
			context(prefix), *context(prefix) ? ": " : "");
		usage(stderr, prefix, table);
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    (!strcmp(argv[1], "help") && argc == 2)) {
		usage(stdout, prefix, table);
		return CLI_EXIT_OK;
	}
	for (const struct command *c = table; c->name; c++) {
		/* "help COMMAND" is "COMMAND --help". */
		if (asks_help && !strcmp(argv[2], c->name))
			return c->run(2, (char *[]){ argv[2], help, NULL });
		if (!asks_help && !strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	}
	fprintf(stderr, "tally: %s%sunknown command '%s'\n", context(prefix),
		*context(prefix) ? ": " : "", argv[asks_help ? 2 : 1]);
	usage(stderr, prefix, table);
	return CLI_EXIT_USAGE;
}

static int cmd_bench(int argc, char **argv)
{
	return dispatch("tally bench", bench_commands, argc, argv);
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: tally version\n\nPrint the version of tally.\n");
		return CLI_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "tally: version: unexpected argument '%s'\n"
				"usage: tally version\n", argv[1]);
		return CLI_EXIT_USAGE;
	}
	printf("tally %s\n", tally_version());
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	if (argc > 1 &&
	    (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")))
		return cmd_version(argc - 1, argv + 1);
	return dispatch("tally", commands, argc, argv);
}
