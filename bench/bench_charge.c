// SPDX-License-Identifier: MIT
/*
 * bench_charge.c - `tally bench charge`: charging and uncharging memory
 * against a chain of groups with limits, in four designs side by side
 * (charge_designs.h): tally's memory groups, the kernel's memcg, ClickHouse's
 * MemoryTracker and the bare page counter.
 *
 * Three phases, each on fresh trees of every design:
 *
 *   cost      ns per charge + uncharge pair of 4 KiB, per thread, at each
 *             thread count x chain depth x leaf groups x fill
 *             (bench_charge_cost.c);
 *   accuracy  the same cells, untimed, against an exact oracle: refusals,
 *             false refusals, overshoot and the usage error at quiescence
 *             (bench_charge_oracle.c);
 *   error     the usage error at quiescence at 16, 64 and 256 threads
 *             without a limit, on this machine's CPUs and on simulated
 *             domains (bench_charge_oracle.c).
 *
 * This file parses the options, runs the cells in order, each cell's cost
 * then its accuracy, prints a row per cell as it comes, and ends with the
 * error phase and a legend of the columns.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "charge_designs.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"
#include "bench_charge.h"

const char *const fill_names[NR_FILLS] = { "far", "95" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench charge [--json FILE] [--threads LIST] [--depth LIST]\n"
		"                          [--groups LIST] [--fill LIST] [--reps N]\n"
		"                          [--tally-flags FLAGS] [--wave KIB] [--no-pin]\n"
		"                          [--quick]\n"
		"\n"
		"Charge and uncharge memory against a chain of groups with a max on every\n"
		"level, in four designs side by side: tally's memory groups, the Linux\n"
		"kernel's memcg (page counter + per-CPU stock), ClickHouse's MemoryTracker\n"
		"(per-thread untracked bytes) and the bare page counter (one atomic per\n"
		"level).  Prints ns per charge + uncharge pair with ratios, false refusals\n"
		"and overshoot against an exact oracle, and the usage error at quiescence.\n"
		"\n"
		"  --json FILE         also write the figures as JSON to FILE; \"-\" means\n"
		"                      standard output (the tables then go to standard error)\n"
		"  --threads LIST      thread counts of the cost and accuracy phases, 1 to 64\n"
		"                      (default 1,2,4; --quick: 1,2)\n"
		"  --depth LIST        chain depths, 1 to 8 (default 1,4)\n"
		"  --groups LIST       groups per CPU under the chain, 0 to 64 (default 0,16):\n"
		"                      0 charges the chain's deepest group; N charges N x CPUs\n"
		"                      groups under it in turn (more than a stock caches)\n"
		"  --fill LIST         far, 95 (default both): the chain starts empty, or\n"
		"                      charged to 95%% of max\n"
		"  --reps N            repetitions per figure, the median reported, 1 to 32\n"
		"                      (default 5; --quick: 3)\n"
		"  --wave KIB          working set of each thread in the cost phase, 4 to\n"
		"                      65536 KiB (default: the room left at 95%% / threads)\n"
		"  --tally-flags F     flags of tally's charges: noreclaim (default) or none\n"
		"  --no-pin            do not pin thread i to the i-th allowed CPU\n"
		"  --quick             short runs: a quick look, noisier figures\n"
		"  -h, --help          show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	static const char *const flag_names[] = { "none", "noreclaim" };
	struct run *r = ctx;
	unsigned long one;
	unsigned int i;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_LIST, 1, MAX_THREADS,
				     &r->nr_threads);
	case 'd':
		return tool_opt_list(arg, r->depths, MAX_LIST, 1,
				     CHARGE_MAX_DEPTH, &r->nr_depths);
	case 'g':
		return tool_opt_list(arg, r->groups, MAX_LIST, 0, 64,
				     &r->nr_groups);
	case 'f':
		return tool_opt_names(arg, fill_names, NR_FILLS, &r->fills);
	case 'r':
		if (tool_opt_uint(arg, 1, BENCH_MAX_REPS, &one))
			return -1;
		r->reps = (unsigned int)one;
		break;
	case 'F':
		if (tool_opt_choice(arg, flag_names, 2, &i))
			return -1;
		r->tally_flags = i ? TALLY_MEMCG_NORECLAIM : 0;
		break;
	case 'w':
		if (tool_opt_uint(arg, 4, 65536, &one))
			return -1;
		r->wave = (long)one << 10;
		break;
	case 'P':
		r->pin = 0;
		break;
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
		{ "threads", required_argument, NULL, 't' },
		{ "depth", required_argument, NULL, 'd' },
		{ "groups", required_argument, NULL, 'g' },
		{ "fill", required_argument, NULL, 'f' },
		{ "reps", required_argument, NULL, 'r' },
		{ "tally-flags", required_argument, NULL, 'F' },
		{ "wave", required_argument, NULL, 'w' },
		{ "no-pin", no_argument, NULL, 'P' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench charge", usage, "", longopts, option, false
	};
	int err;

	r->pin = BENCH_PIN;
	r->tally_flags = TALLY_MEMCG_NORECLAIM;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->nr_threads) {
		static const unsigned int def[] = { 1, 2, 4 };

		r->nr_threads = r->quick ? 2 : 3;
		memcpy(r->threads, def, sizeof(def));
	}
	if (!r->nr_depths) {
		r->nr_depths = 2;
		r->depths[0] = 1;
		r->depths[1] = 4;
	}
	if (!r->nr_groups) {
		r->nr_groups = 2;
		r->groups[0] = 0;
		r->groups[1] = 16;
	}
	if (!r->fills)
		r->fills = (1u << NR_FILLS) - 1;
	if (!r->reps)
		r->reps = r->quick ? 3 : 5;
	r->plan.target_ns = r->quick ? 2000000 : 50000000;
	r->plan.reps = r->reps;
	r->plan.min_n = 1024;
	r->acc_ops = r->quick ? 2000 : 50000;
	r->error_ops = r->quick ? 200 : 2000;
	return 0;
}

static void print_legend(struct run *r)
{
	fprintf(r->out,
		"\nlegend\n"
		"  chain     a root without limit and DEPTH groups under it, max %ld MiB on\n"
		"            each; threads charge the deepest group; every level counts.\n"
		"  groups    0: as above; N: N x CPUs groups without a limit under the\n"
		"            deepest one, each charge of a thread to the next of them in\n"
		"            turn (more groups than a CPU's stock caches: tally evicts a\n"
		"            slot, the kernel drains its stock, ClickHouse flushes the\n"
		"            thread's untracked bytes to the group it leaves).\n"
		"  fill      far: the chain starts empty; 95: it starts with %.1f MiB charged,\n"
		"            %.1f MiB left.  Cost phase: each thread charges 4 KiB pieces up\n"
		"            to (room left) / threads, then uncharges them, again and again:\n"
		"            at 95 the threads together just reach max, so every byte a\n"
		"            design caches makes its refills fail and its stocks drain.\n"
		"            A pair refused still counts (timed_refusals in the JSON).\n"
		"  ns        wall time per pair per thread, the designs' repetitions\n"
		"            interleaved; %s.\n"
		"  refused   charges refused in the accuracy phase (each thread aims at\n"
		"            twice its share of the room left: real refusals at 95).\n"
		"  false     refusals when, from the call to its return, the committed\n"
		"            bytes (every charge held or in flight, its own included: an\n"
		"            upper bound of the usage) never exceeded max: the exact usage\n"
		"            plus the charge fitted throughout.  Counted only when that is\n"
		"            proven, so the oracle never blames a design wrongly.\n"
		"  cost_refused\n"
		"            charges refused in the cost phase, all of them false: the\n"
		"            fill plus every thread's working set fits under max.\n"
		"  overshoot the largest (bytes held - max), bytes held being raised only\n"
		"            after a charge succeeded and lowered before its uncharge (a\n"
		"            lower bound of the usage): a proven excess over max.\n"
		"  usage_err |the design's cheap usage read - exact| with the threads\n"
		"            stopped, their charges held (tally: READ_APPROX value; kernel,\n"
		"            page_counter: the page counter; clickhouse: the tracked amount).\n",
		LIMIT >> 20, (double)FILL95 / (1 << 20), (double)ROOM / (1 << 20),
		r->pin ? "thread i pinned to CPU i mod CPUs" : "threads not pinned");
	if (r->wave)
		fprintf(r->out, "  --wave    this run: every thread's working set in the cost phase\n"
			"            is %ld KiB instead.\n", r->wave >> 10);
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, "  %-12s %s\n", bench_charge_designs[i]->name,
			bench_charge_designs[i]->what);
	fprintf(r->out,
		"  tally's charges use %s.\n"
		"  kernel: the stock is one long per CPU\n"
		"  (group number | bytes) exchanged by rseq (tally_percpu_xchg); a failed\n"
		"  try-charge drains this CPU's stock and retries once (the kernel drains\n"
		"  the others asynchronously, without waiting); uncharges refill the stock\n"
		"  (the kernel's kernel-memory path).  On simulated CPUs every design's\n"
		"  per-CPU state is exchanged atomically on a random CPU per call.\n",
		r->tally_flags ? "TALLY_MEMCG_NORECLAIM" : "no flags");
}

static void json_settings(struct run *r)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "max_bytes", LIMIT);
	bench_json_int(w, "fill95_bytes", FILL95);
	bench_json_int(w, "pair_bytes", PAIR_BYTES);
	bench_json_int(w, "wave_bytes", r->wave);	/* 0: room / threads */
	bench_json_int(w, "reps", r->reps);
	bench_json_bool(w, "pinned", r->pin != 0);
	bench_json_bool(w, "quick", r->quick);
	bench_json_string(w, "tally_flags",
			  r->tally_flags ? "noreclaim" : "none");
	bench_json_int(w, "kernel_batch_bytes", CHARGE_KERNEL_BATCH);
	bench_json_int(w, "clickhouse_untracked_bytes",
		       CHARGE_CLICKHOUSE_UNTRACKED);
	bench_json_int(w, "accuracy_ops_per_thread", (long long)r->acc_ops);
	bench_json_int(w, "error_ops_per_thread", (long long)r->error_ops);
	bench_json_end(w);
}

int tally_bench_charge(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct cell *cells;
	struct bench_machine m;
	unsigned int nr = 0;
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
	cells = calloc(MAX_LIST * MAX_LIST * MAX_LIST * NR_FILLS,
		       sizeof(*cells));
	if (!cells || bench_json_open(&r->json, r->json_path)) {
		if (!cells)
			fprintf(stderr, "tally: out of memory\n");
		free(cells);
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "tally bench charge%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "charge");
	bench_machine_json(&r->json, &m);
	json_settings(r);
	print_cost_header(r);
	bench_json_begin(&r->json, "charge", '[', false);
	for (unsigned int cell = 0;
	     cell < r->nr_depths * r->nr_groups * NR_FILLS * r->nr_threads &&
	     !err; cell++) {
		unsigned int t = cell % r->nr_threads;
		unsigned int f = cell / r->nr_threads % NR_FILLS;
		unsigned int g = cell / r->nr_threads / NR_FILLS % r->nr_groups;
		unsigned int d = cell / r->nr_threads / NR_FILLS / r->nr_groups;
		struct cell *c = &cells[nr];

		if (!(r->fills & (1u << f)))
			continue;
		c->threads = r->threads[t];
		c->depth = r->depths[d];
		c->groups = r->groups[g];
		c->fill = (enum fill)f;
		err = measure_cost(r, c);
		if (!err)
			err = measure_accuracy(r, c);
		if (err)
			break;
		print_cost_row(r, c);
		json_cell(r, c);
		fflush(r->out);
		nr++;
	}
	bench_json_end(&r->json);
	if (!err)
		print_accuracy(r, cells, nr);
	if (!err)
		err = measure_error(r);
	if (!err) {
		double load;

		print_legend(r);
		/* The machine line has the load at the start; this, at the end. */
		if (getloadavg(&load, 1) == 1)
			fprintf(r->out, "load average (1 min) at the end: %.2f\n",
				load);
	}
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(cells);
	free(r);
	return err ? 1 : 0;
}
