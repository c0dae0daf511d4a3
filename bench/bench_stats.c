// SPDX-License-Identifier: MIT
/*
 * bench_stats.c - `tally bench stats`: the four flushing designs of the
 * statistics tree (tally, linux61, rfc2023, linux68) in the same run.
 *
 * A benchmark, not a timed test: it prints a table per section, with the
 * ratios between designs measured in the same run (and JSON with --json).
 * This file parses the options and runs the sections, in order, each in
 * its own file, which says what it measures and how:
 *
 *   update     ns per update by depth           bench_stats_update.c
 *   create     us per group create as N grows   bench_stats_create.c
 *   flush      us per forced root flush         bench_stats_flush.c
 *   readers    readers under load               bench_stats_readers.c
 *   unrelated  readers of unrelated subtrees    bench_stats_unrelated.c
 *   quiet      a quiet group in a busy tree     bench_stats_quiet.c
 *
 * The trees and the phases of writers, checkers and readers that sections
 * 4 to 6 run are bench_stats_phase.c's.  --only runs some of the
 * sections, still in this order.  Sections 4 and 6 (its small tree)
 * build a fresh tree per phase; the four 100 x 100 trees are built once,
 * before any of them is freed, and serve sections 5 and 6.  Every phase
 * runs the tree's periodic flusher (2 s), as the kernel has one.  Threads
 * get small stacks, so that 10,000 readers fit; the thread limit is
 * raised to the hard one for them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tally/domain.h>
#include <tally/stats.h>
#include "bench.h"
#include "latency.h"
#include "../tool/args.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "rand.h"
#include "stats_designs.h"
#include "bench_stats.h"

#define MAX_READERS 100000

/*
 * Section 4's rows.  The kernel test ran 10,000 readers on 384 CPUs, 26
 * per CPU: the faithful rows keep that many per CPU this process may run
 * on, at each period; the overload row runs 500 per CPU (what 1,000
 * readers are on 2 CPUs) at the first period.
 */
#define DEFAULT_READERS_PER_CPU 26
#define DEFAULT_OVERLOAD_PER_CPU 500
static const unsigned int default_periods_ms[] = { 10, 100 };

/* The sections, in the order they run; --only picks some by name. */
static const struct section {
	const char *name;
	const char *help;
	int (*run)(struct run *r);
} sections[] = {
	{ "update", "ns per update, groups 1 to 8 levels deep", bench_update },
	{ "create", "us per group create, 1000 to 16000 groups", bench_create },
	{ "flush", "us per forced root flush, 64 and 384 simulated CPUs",
	  bench_flush },
	{ "readers", "readers under load: latency, stale reads",
	  bench_readers },
	{ "unrelated", "two readers of unrelated subtrees", bench_unrelated },
	{ "quiet", "reads of a quiet group in a busy tree", bench_quiet },
};
#define NR_SECTIONS ARRAY_SIZE(sections)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench stats [--json FILE] [--only LIST]\n"
		"                         [--readers-per-cpu N] [--overload-per-cpu N]\n"
		"                         [--periods LIST] [--duration-scale X | --quick]\n"
		"\n"
		"Compare the statistics tree's flushing designs (tally, linux61,\n"
		"rfc2023, linux68): update cost by depth, group creation cost as the\n"
		"tree grows (tally design), readers under load (stale reads, latency,\n"
		"writer throughput), readers of unrelated subtrees and a quiet group in\n"
		"a busy tree.  Prints tables and ratios.\n"
		"\n"
		"  --json FILE           also write the figures as JSON to FILE; \"-\"\n"
		"                        means standard output (tables go to standard error)\n"
		"  --only LIST           run only these sections (comma-separated, run in\n"
		"                        the order below; default: all):\n");
	for (unsigned int i = 0; i < NR_SECTIONS; i++)
		fprintf(f, "                          %-10s %s\n", sections[i].name,
			sections[i].help);
	fprintf(f,
		"                        e.g. --only update,create compares the update and\n"
		"                        create costs of two builds in about 20 s\n"
		"  --readers-per-cpu N   reader threads per CPU of the readers section's\n"
		"                        faithful rows (default 26: the 2023 proposal's 10,000\n"
		"                        readers on 384 CPUs)\n"
		"  --overload-per-cpu N  reader threads per CPU of its overload row, run at\n"
		"                        the first period (default 500; 0: no such row)\n"
		"  --periods LIST        the readers' periods in ms, a faithful row each\n"
		"                        (default 10,100; at most 4)\n"
		"  --duration-scale X    multiply every phase's duration by X (0.01 to 100)\n"
		"  --quick               short runs (about 30 s): a quick look, noisier\n"
		"  -h, --help            show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	const char *names[NR_SECTIONS];
	struct run *r = ctx;
	unsigned long nr;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 'o':
		for (unsigned int i = 0; i < NR_SECTIONS; i++)
			names[i] = sections[i].name;
		return tool_opt_names(arg, names, NR_SECTIONS, &r->only);
	case 'r':
		if (tool_opt_uint(arg, 1, MAX_READERS, &nr))
			return -1;
		r->readers_per_cpu = (unsigned int)nr;
		break;
	case 'v':
		if (tool_opt_uint(arg, 0, MAX_READERS, &nr))
			return -1;
		r->overload_per_cpu = (unsigned int)nr;
		break;
	case 'p':
		return tool_opt_list(arg, r->periods_ms, MAX_PERIODS, 1, 10000,
				     &r->nr_periods);
	case 's':
		return tool_opt_number(arg, 0.01, 100, NULL, &r->scale);
	case 'q':
		r->quick = true;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for bad options (usage printed). */
static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "only", required_argument, NULL, 'o' },
		{ "readers-per-cpu", required_argument, NULL, 'r' },
		{ "overload-per-cpu", required_argument, NULL, 'v' },
		{ "periods", required_argument, NULL, 'p' },
		{ "duration-scale", required_argument, NULL, 's' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench stats", usage, "", longopts, option, false
	};
	int err;

	r->readers_per_cpu = DEFAULT_READERS_PER_CPU;
	r->overload_per_cpu = DEFAULT_OVERLOAD_PER_CPU;
	r->nr_periods = ARRAY_SIZE(default_periods_ms);
	memcpy(r->periods_ms, default_periods_ms, sizeof(default_periods_ms));
	r->scale = 0;	/* not given */
	r->only = (1u << NR_SECTIONS) - 1;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->scale)
		r->scale = r->quick ? 0.1 : 1;
	return 0;
}

/* ---- driver ------------------------------------------------------------- */

/* The CPUs this process may run on, at least 1. */
static unsigned int usable_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned int)n : 1;
}

/*
 * Section 4's rows: the faithful load at each period, then the overload
 * at the first.  Return: 0, or -1 when a row needs more than MAX_READERS.
 */
static int plan_readers_rows(struct run *r)
{
	r->nr_cpus = usable_cpus();
	r->nr_rows = 0;
	for (unsigned int p = 0; p <= r->nr_periods; p++) {
		bool overload = p == r->nr_periods;
		struct readers_row *row = &r->rows[r->nr_rows];

		if (overload && !r->overload_per_cpu)
			break;
		row->overload = overload;
		row->per_cpu = overload ? r->overload_per_cpu :
					  r->readers_per_cpu;
		row->period_ms = r->periods_ms[overload ? 0 : p];
		if (row->per_cpu > MAX_READERS / r->nr_cpus) {
			fprintf(stderr,
				"tally: bench stats: %u readers per CPU on %u CPUs is more than %u threads\n",
				row->per_cpu, r->nr_cpus, MAX_READERS);
			return -1;
		}
		row->readers = row->per_cpu * r->nr_cpus;
		r->nr_rows++;
	}
	return 0;
}

/* Thousands of threads: lift the soft process limit to the hard one. */
static void raise_thread_limit(void)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NPROC, &lim) || lim.rlim_cur == lim.rlim_max)
		return;
	lim.rlim_cur = lim.rlim_max;
	setrlimit(RLIMIT_NPROC, &lim);
}

static void settings_json(struct run *r)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "writers", NR_WRITERS);
	bench_json_int(w, "checkers", NR_CHECKERS);
	bench_json_int(w, "check_pause_us", CHECK_PAUSE_NS / 1000);
	bench_json_int(w, "readers_per_cpu", r->readers_per_cpu);
	bench_json_int(w, "overload_readers_per_cpu", r->overload_per_cpu);
	bench_json_int(w, "cpus", r->nr_cpus);
	bench_json_int(w, "stats", NR_STATS);
	bench_json_string(w, "readers_read_mode", "if_needed");
	bench_json_string(w, "checkers_read_mode", "force");
	bench_json_string(w, "unrelated_read_mode", "force");
	bench_json_string(w, "quiet_read_mode", "force");
	bench_json_bool(w, "periodic_flusher", true);
	bench_json_double(w, "duration_scale", r->scale);
	bench_json_double(w, "readers_phase_s",
			  (double)scaled_ns(r, READERS_MS) / 1e9);
	bench_json_double(w, "unrelated_phase_s",
			  (double)scaled_ns(r, UNRELATED_MS) / 1e9);
	bench_json_double(w, "quiet_phase_s",
			  (double)scaled_ns(r, QUIET_MS) / 1e9);
	bench_json_int(w, "update_reps", r->update_plan.reps);
	bench_json_int(w, "create_reps", r->create_reps);
	bench_json_begin(w, "sections", '[', true);
	for (unsigned int i = 0; i < NR_SECTIONS; i++)
		if (r->only & (1u << i))
			bench_json_string(w, NULL, sections[i].name);
	bench_json_end(w);
	bench_json_bool(w, "quick", r->quick);
	bench_json_end(w);
}

int tally_bench_stats(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct bench_machine m;
	uint64_t start = bench_now_ns();
	int err;

	if (!r) {
		fprintf(stderr, "tally: out of memory\n");
		return 1;
	}
	err = parse_options(r, argc, argv);
	if (!err && plan_readers_rows(r))
		err = -1;
	if (err) {
		free(r);
		return err > 0 ? 0 : 2;
	}
	r->update_plan.target_ns = r->quick ? 10000000 : 40000000;
	r->update_plan.reps = r->quick ? 3 : 5;
	r->update_plan.min_n = 1 << 12;
	r->create_reps = r->quick ? 3 : 5;
	if (bench_json_open(&r->json, r->json_path)) {
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	raise_thread_limit();
	bench_machine_get(&m);
	fprintf(r->out, "tally bench stats%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "stats");
	bench_machine_json(&r->json, &m);
	settings_json(r);
	err = 0;
	for (unsigned int i = 0; i < NR_SECTIONS && !err; i++)
		if (r->only & (1u << i))
			err = sections[i].run(r);
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	for (unsigned int d = 0; d < NR_DESIGNS; d++)
		tree_set_destroy(&r->big[d]);
	fprintf(r->out, "(%.0f s)\n", (double)(bench_now_ns() - start) / 1e9);
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
