// SPDX-License-Identifier: MIT
/*
 * metrics.c - `tally metrics --demo`: build a small statistics tree, run
 * two threads of activity on it, and print its export (tally/export.h),
 * so that a user sees the format and can point a scraper (or
 * node_exporter's textfile collector, with -o) at it.
 *
 * The activity is fixed, so the values are too: a forced export after the
 * threads joined shows every update.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tally/export.h>

#include "../tool/args.h"
#include "cli.h"

#define ROUNDS 1000

enum { ANON, FILE_PAGES, PGFAULT, PGMAJFAULT, NR_DEMO_STATS };

static const struct tally_stat_desc demo_schema[NR_DEMO_STATS] = {
	[ANON] = { "anon", TALLY_STAT_STATE },
	[FILE_PAGES] = { "file", TALLY_STAT_STATE },
	[PGFAULT] = { "pgfault", TALLY_STAT_EVENT },
	[PGMAJFAULT] = { "pgmajfault", TALLY_STAT_EVENT },
};
static const char *const demo_units[NR_DEMO_STATS] = { "bytes", "bytes" };

struct metrics_args {
	bool demo, pid;
	enum tally_export_format format;
	const char *output;
	struct tally_export_label labels[TALLY_EXPORT_MAX_LABELS];
	unsigned int nr_labels;
};

struct demo {
	struct tally_stats_group *web, *db, *batch;
	int err;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally metrics --demo [--format prometheus|openmetrics] [-o FILE]\n"
		"                     [--label NAME=VALUE]... [--pid]\n"
		"\n"
		"Build a small statistics tree (tenant-a/web, tenant-a/db, tenant-b/batch),\n"
		"run two threads of activity on it and print its export: the text a\n"
		"program gets from tally/export.h.\n"
		"\n"
		"  --demo             the demonstration tree (the only source for now)\n"
		"  --format FORMAT    prometheus (text format 0.0.4, the default) or\n"
		"                     openmetrics (OpenMetrics 1.0)\n"
		"  -o, --output FILE  replace FILE atomically instead of printing (for\n"
		"                     node_exporter's textfile collector: a *.prom file\n"
		"                     in its directory, prometheus format)\n"
		"  --label NAME=VALUE add the label NAME=\"VALUE\" to every sample (up to\n"
		"                     16; not instance nor job, which Prometheus sets\n"
		"                     when it scrapes)\n"
		"  --pid              add the label pid=\"N\" (this process) to every sample\n"
		"  -h, --help         show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	static const char *const formats[] = { "prometheus", "openmetrics" };
	struct metrics_args *a = ctx;
	unsigned int i;

	switch (opt) {
	case 'd':
		a->demo = true;
		break;
	case 'f':
		if (tool_opt_choice(arg, formats, 2, &i))
			return -1;
		a->format = i ? TALLY_EXPORT_OPENMETRICS
			      : TALLY_EXPORT_PROMETHEUS;
		break;
	case 'o':
		a->output = arg;
		break;
	case 'l': {
		char *eq = strchr(arg, '=');

		if (!eq || eq == arg)
			return tool_bad_value(arg, "NAME=VALUE");
		if (a->nr_labels == TALLY_EXPORT_MAX_LABELS)
			return tool_bad_value(arg, "at most 16 labels");
		*eq = '\0';
		if (!strcmp(arg, "instance") || !strcmp(arg, "job")) {
			*eq = '=';
			return tool_bad_value(arg, "instance and job are set "
					      "by Prometheus when it scrapes: "
					      "use another label name");
		}
		a->labels[a->nr_labels++] =
			(struct tally_export_label){ arg, eq + 1 };
		break;
	}
	case 'p':
		a->pid = true;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for a bad command line. */
static int parse(struct metrics_args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "demo", no_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "label", required_argument, NULL, 'l' },
		{ "pid", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"metrics", usage, "o:", longopts, option, false
	};
	int err = tool_parse_options(&cmd, argc, argv, a, NULL);

	if (!err && !a->demo)
		return tool_usage_error("--demo is the only source (a program "
					"exports its own trees with "
					"tally/export.h)");
	return err;
}

static void mod(struct demo *d, struct tally_stats_group *g,
		unsigned int stat, long delta)
{
	int err = tally_stats_mod(g, stat, delta);

	if (err)
		__atomic_store_n(&d->err, err, __ATOMIC_RELAXED);
}

/* A web server: anonymous memory and faults, a major one in ten. */
static void *web_thread(void *arg)
{
	struct demo *d = arg;

	for (int i = 0; i < ROUNDS; i++) {
		mod(d, d->web, ANON, 4096);
		mod(d, d->web, PGFAULT, 1);
		if (i % 10 == 0)
			mod(d, d->web, PGMAJFAULT, 1);
	}
	return NULL;
}

/* A database reading files, and a batch job that frees half of it. */
static void *db_batch_thread(void *arg)
{
	struct demo *d = arg;

	for (int i = 0; i < ROUNDS; i++) {
		mod(d, d->db, FILE_PAGES, 8192);
		mod(d, d->db, PGFAULT, 2);
		mod(d, d->batch, ANON, i < ROUNDS / 2 ? 4096 : -2048);
	}
	return NULL;
}

/* The demonstration tree, after its activity; 0 or a negative errno. */
static int build_demo(struct tally_stats_tree **out)
{
	struct tally_stats_group *a, *b;
	struct demo d = { 0 };
	pthread_t th[2];
	int err = tally_stats_tree_create(out, demo_schema, NR_DEMO_STATS,
					  NULL);

	if (err)
		return err;
	err = tally_stats_group_create(tally_stats_root(*out), "tenant-a", &a);
	if (!err)
		err = tally_stats_group_create(tally_stats_root(*out),
					       "tenant-b", &b);
	if (!err)
		err = tally_stats_group_create(a, "web", &d.web);
	if (!err)
		err = tally_stats_group_create(a, "db", &d.db);
	if (!err)
		err = tally_stats_group_create(b, "batch", &d.batch);
	if (!err)
		err = -pthread_create(&th[0], NULL, web_thread, &d);
	if (!err) {
		err = -pthread_create(&th[1], NULL, db_batch_thread, &d);
		if (!err)
			pthread_join(th[1], NULL);
		pthread_join(th[0], NULL);
	}
	return err ? err : d.err;
}

int tally_cmd_metrics(int argc, char **argv)
{
	struct metrics_args a = { 0 };
	struct tally_export_stats_options so = {
		.units = demo_units,
		.mode = TALLY_FLUSH_FORCE,
	};
	struct tally_stats_tree *t = NULL;
	struct tally_exporter *e = NULL;
	const char *step = "the exporter";
	int err = parse(&a, argc, argv);

	if (err)
		return err > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	/* Every -EINVAL of the exporter is a --label name it refuses. */
	err = tally_exporter_create(&e, &(struct tally_export_options){
		.format = a.format,
		.labels = a.labels,
		.nr_labels = a.nr_labels,
		.pid = a.pid,
	});
	if (err == -EINVAL) {
		tool_usage_error("bad --label: a NAME is letters, digits and "
				 "'_', not starting with a digit or '__', at "
				 "most 64 bytes, not group, not pid with "
				 "--pid, not twice");
		return CLI_EXIT_USAGE;
	}
	if (!err) {
		step = "the demo tree";
		err = build_demo(&t);
	}
	if (!err)
		err = tally_exporter_add_stats(e, t, &so);
	if (!err) {
		step = a.output ? a.output : "standard output";
		err = a.output ? tally_export_textfile(e, a.output)
			       : tally_export_file(e, stdout);
	}
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
	if (err) {
		fprintf(stderr, "tally: metrics: %s: %s\n", step,
			strerror(-err));
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}
