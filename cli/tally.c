// SPDX-License-Identifier: MIT
/*
 * tally.c - the tally command-line tool.
 *
 *   tally bench counter [options]	the counter benchmark
 *   tally bench stats [options]	the statistics tree benchmark
 *   tally version			print the version
 *   tally --help			list the commands
 *
 * Commands and benchmarks are rows of tables of {name, function, help},
 * walked by one dispatcher: a new benchmark is one row in bench_commands[]
 * and its entry point in bench/bench.h.
 */
#include <stdio.h>
#include <string.h>

#include "../bench/bench.h"

#ifndef TALLY_VERSION
#error "TALLY_VERSION comes from the Makefile"
#endif

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
	{ "version", cmd_version, "print the version" },
	{ NULL, NULL, NULL },
};

static const struct command bench_commands[] = {
	{ "counter", tally_bench_counter,
	  "counter adds, reads and accuracy against the baselines" },
	{ "stats", tally_bench_stats,
	  "statistics tree: the four flushing designs side by side" },
	{ "export", tally_bench_export,
	  "Prometheus/OpenMetrics export of a 1,000 x 10 tree" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f, const char *prefix, const struct command *table)
{
	fprintf(f, "usage: %s COMMAND [options]\n\ncommands:\n", prefix);
	for (const struct command *c = table; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\n'%s COMMAND --help' describes a command's options.\n",
		prefix);
}

/*
 * Run the command of @table named by argv[1], with argv[1..] as its
 * arguments.  @prefix is the command line so far, for the usage text.
 */
static int dispatch(const char *prefix, const struct command *table,
		    int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr, prefix, table);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout, prefix, table);
		return 0;
	}
	for (const struct command *c = table; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n", prefix, argv[1]);
	usage(stderr, prefix, table);
	return 2;
}

static int cmd_bench(int argc, char **argv)
{
	return dispatch("tally bench", bench_commands, argc, argv);
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1) {
		fprintf(stderr, "usage: tally version\n");
		return 2;
	}
	printf("tally %s\n", TALLY_VERSION);
	return 0;
}

int main(int argc, char **argv)
{
	return dispatch("tally", commands, argc, argv);
}
