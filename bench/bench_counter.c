// SPDX-License-Identifier: MIT
/*
 * bench_counter.c - `tally bench counter`: tally's counter against the
 * baselines of baselines.h.
 *
 * A benchmark, not a timed test: it prints tables, with the ratios between
 * implementations measured in the same run (and JSON with --json).  This
 * file parses the options and runs the sections, in order, each in a file
 * that says what it measures and how:
 *
 *   add        ns per add per thread, every implementation at each thread
 *              count (bench_counter_add.c);
 *   thread_cached  the per-thread cached counter at 64 threads: its read
 *              costs and the error of its fast read (bench_counter_read.c);
 *   read       approximate and precise sums on simulated domains of 2 to
 *              4096 CPUs (bench_counter_read.c);
 *   accuracy   one updater hopping over simulated CPUs: the largest
 *              |approximate - precise| of tally and of the classic counter,
 *              with tally's bound, in two patterns
 *              (bench_counter_accuracy.c).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/counter.h>
#include "baselines.h"
#include "bench.h"
#include "../tool/args.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"
#include "bench_counter.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench counter [--json FILE] [--threads LIST] [--quick] [--no-pin]\n"
		"\n"
		"Compare tally's counter with the baselines: ns per add per thread,\n"
		"read costs at 2 to 4096 simulated CPUs, and the error of an updater\n"
		"hopping across CPUs.  Prints tables and ratios.\n"
		"\n"
		"  --json FILE     also write the figures as JSON to FILE; \"-\" means\n"
		"                  standard output (the table then goes to standard error)\n"
		"  --threads LIST  comma-separated thread counts (default 1,2,4)\n"
		"  --quick         short runs: a quick look, noisier figures\n"
		"  --no-pin        let the scheduler place the add threads (default: thread\n"
		"                  i runs on the i-th allowed CPU, as in will-it-scale)\n"
		"  -h, --help      show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_THREAD_COUNTS, 1,
				     MAX_THREADS, &r->nr_threads);
	case 'q':
		r->quick = true;
		break;
	case 'p':
		r->pin = false;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for bad options (usage printed). */
static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "quick", no_argument, NULL, 'q' },
		{ "no-pin", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench counter", usage, "", longopts, option, false
	};

	r->threads[0] = 1;
	r->threads[1] = 2;
	r->threads[2] = 4;
	r->nr_threads = 3;
	r->pin = true;
	return tool_parse_options(&cmd, argc, argv, r, NULL);
}

/* ---- driver ------------------------------------------------------------- */

static void settings_json(struct run *r, unsigned int cpus)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "inc", BENCH_INC);
	bench_json_int(w, "tally_batch", BENCH_TALLY_BATCH);
	bench_json_int(w, "percpu_counter_batch",
		       pcpu_counter_default_batch(cpus));
	bench_json_int(w, "reps", r->add_plan.reps);
	bench_json_double(w, "rep_ms", (double)r->add_plan.target_ns / 1e6);
	bench_json_begin(w, "threads", '[', true);
	for (unsigned int t = 0; t < r->nr_threads; t++)
		bench_json_int(w, NULL, r->threads[t]);
	bench_json_end(w);
	bench_json_int(w, "hop_steps_per_384_cpus", (long long)r->hop_steps);
	bench_json_int(w, "seed", (long long)SEED);
	bench_json_bool(w, "quick", r->quick);
	bench_json_bool(w, "pinned", r->pin);
	bench_json_end(w);
}

static void set_plans(struct run *r)
{
	r->add_plan.target_ns = r->quick ? 10000000 : 100000000;
	r->add_plan.reps = r->quick ? 3 : 7;
	r->add_plan.min_n = 1 << 12;
	r->read_plan.target_ns = r->quick ? 2000000 : 20000000;
	r->read_plan.reps = r->add_plan.reps;
	r->read_plan.min_n = 16;
	r->hop_steps = r->quick ? 200000 : 2000000;
	r->tc_trials = r->quick ? 3 : 10;
}

int tally_bench_counter(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct bench_machine m;
	int err;

	if (!r) {
		fprintf(stderr, "tally: out of memory\n");
		return 1;
	}
	err = parse_options(r, argc, argv);
	if (err) {
		free(r);
		return err > 0 ? 0 : 2;
	}
	set_plans(r);
	if (bench_json_open(&r->json, r->json_path)) {
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "tally bench counter%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "counter");
	bench_machine_json(&r->json, &m);
	settings_json(r, m.possible_cpus);
	err = bench_add(r);
	if (!err)
		err = bench_thread_cached(r);
	if (!err)
		err = bench_read(r);
	for (unsigned int p = 0; p < NR_PATTERNS && !err; p++)
		err = bench_accuracy(r, p);
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
