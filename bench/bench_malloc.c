// SPDX-License-Identifier: MIT
/*
 * bench_malloc.c - `tally bench malloc`: what accounting every allocation
 * costs in a malloc-heavy workload, four ways in one run:
 *
 *   glibc       glibc's malloc() and free() (the tool's own allocator);
 *   jemalloc    jemalloc alone: mallocx() and dallocx(), threads on its
 *               automatic arenas;
 *   tally       jemalloc with tally's accounting (tally/jemalloc.h):
 *               the threads are in one memory group, the group's arenas
 *               charge it a page at a time through their extent hooks;
 *   switch      the same with two groups, each thread switching group
 *               (tally_jemalloc_set_current()) before every request of
 *               16 allocations, as a server running each request in its
 *               tenant's group does;
 *   tracker     jemalloc with a ClickHouse-style MemoryTracker: each
 *               thread adds every allocation's size to a thread-local
 *               "untracked" count and moves it to a shared atomic when it
 *               passes 4 MiB either way.
 *
 * How jemalloc is loaded beside glibc's malloc is bench_malloc_jemalloc.c's;
 * the workload, its timing and the accounting error are
 * bench_malloc_workload.c's.  This file parses the options, sets up
 * tally's accounting and prints a row per thread count.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"
#include "bench_malloc.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench malloc [--json FILE] [--threads LIST] [--reps N]\n"
		"                          [--keep-tcache] [--no-pin] [--quick]\n"
		"\n"
		"A malloc-heavy workload (16 B to 64 KiB, a quarter of the frees\n"
		"cross-thread) with glibc malloc, jemalloc alone, jemalloc with tally's\n"
		"accounting (tally/jemalloc.h) in one group, the same switching between\n"
		"two groups before every request of 16 allocations, and jemalloc with a\n"
		"ClickHouse-style per-thread tracker.  Prints ns per malloc + free pair\n"
		"with the ratio to jemalloc alone, the cost of one switch, and each\n"
		"design's accounting error against the exact live bytes at quiescence;\n"
		"then the cost of setting the group a thread is in again.\n"
		"Needs libtally_jemalloc.so beside the tool (or installed) and jemalloc.\n"
		"\n"
		"  --json FILE      also write the figures as JSON to FILE; \"-\" means\n"
		"                   standard output (the tables then go to standard error)\n"
		"  --threads LIST   thread counts, 1 to %d (default 2,4)\n"
		"  --reps N         repetitions per figure, the median reported, 1 to 32\n"
		"                   (default 7; --quick: 3)\n"
		"  --keep-tcache    tally's integration keeps a thread's cache when it\n"
		"                   switches group (keep_tcache: faster, less exact)\n"
		"  --no-pin         do not pin thread i to the i-th allowed CPU\n"
		"  --quick          short runs: a quick look, noisier figures\n"
		"  -h, --help       show this help\n", MAX_THREADS);
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;
	unsigned long one;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_LIST, 1, MAX_THREADS,
				     &r->nr_threads);
	case 'r':
		if (tool_opt_uint(arg, 1, BENCH_MAX_REPS, &one))
			return -1;
		r->reps = (unsigned int)one;
		break;
	case 'K':
		r->keep_tcache = true;
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

static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },
		{ "keep-tcache", no_argument, NULL, 'K' },
		{ "no-pin", no_argument, NULL, 'P' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench malloc", usage, "", longopts, option, false
	};
	int err;

	r->pin = BENCH_PIN;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->nr_threads) {
		r->nr_threads = 2;
		r->threads[0] = 2;
		r->threads[1] = 4;
	}
	if (!r->reps)
		r->reps = r->quick ? 3 : 7;
	r->plan.target_ns = r->quick ? 20000000 : 200000000;
	r->plan.reps = r->reps;
	r->plan.min_n = 4096;
	return 0;
}

int tally_bench_malloc(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct tally_memcg_tree *tree;
	struct tally_jemalloc_options opts = { 0 };
	struct bench_machine m;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
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
	if (load_jemalloc(argc, argv) || bench_json_open(&r->json,
							 r->json_path)) {
		free(r);
		return 1;
	}
	/* As many arenas for the group as jemalloc has automatic ones. */
	opts.arenas_per_group = (unsigned int)(ncpu < 1 ? 4 : ncpu > 16 ?
					       64 : 4 * ncpu);
	opts.keep_tcache = r->keep_tcache;
	err = je.tree_create(&tree, NULL);
	if (!err)
		err = je.create(je.root(tree), "bench", &r->group);
	if (!err)
		err = je.create(je.root(tree), "tenant-a", &r->tenants[0]);
	if (!err)
		err = je.create(je.root(tree), "tenant-b", &r->tenants[1]);
	if (!err)
		err = je.init(&opts);
	if (err) {
		fprintf(stderr, "tally: %s: cannot set up tally's accounting: "
			"%s\n", CMD, strerror(-err));
		bench_json_close(&r->json);
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "%s%s\n", CMD, r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "malloc");
	bench_machine_json(&r->json, &m);
	bench_json_begin(&r->json, "settings", '{', false);
	bench_json_int(&r->json, "slots_per_thread", SLOTS);
	bench_json_int(&r->json, "min_size", 16);
	bench_json_int(&r->json, "max_size", 65536);
	bench_json_double(&r->json, "cross_thread_share", 0.25);
	bench_json_int(&r->json, "tracker_untracked_bytes", UNTRACKED_MAX);
	bench_json_int(&r->json, "tally_arenas", opts.arenas_per_group);
	bench_json_bool(&r->json, "keep_tcache", opts.keep_tcache);
	bench_json_int(&r->json, "allocations_per_request", REQUEST_ALLOCS);
	bench_json_int(&r->json, "reps", r->reps);
	bench_json_bool(&r->json, "quick", r->quick);
	bench_json_end(&r->json);
	print_header(r);
	bench_json_begin(&r->json, "malloc", '[', false);
	for (unsigned int t = 0; t < r->nr_threads && !err; t++) {
		err = measure(r, r->threads[t]);
		fflush(r->out);
	}
	bench_json_end(&r->json);
	if (!err) {
		print_rebind_header(r);
		bench_json_begin(&r->json, "rebind", '[', false);
		for (unsigned int t = 0; t < r->nr_threads && !err; t++)
			err = measure_rebind(r, r->threads[t]);
		bench_json_end(&r->json);
	}
	if (!err) {
		double load;

		fprintf(r->out, "\ntally charges pages, exactly jemalloc's "
			"active + dirty pages of the group's arenas:\n"
			"against the live bytes that adds jemalloc's overhead "
			"(size classes, slabs, caches)\nand the dirty pages "
			"until they are purged; the tracker counts the bytes "
			"asked for,\nbut misses what each thread has not "
			"flushed (up to %ld MiB a thread).\n",
			UNTRACKED_MAX >> 20);
		if (getloadavg(&load, 1) == 1)
			fprintf(r->out, "load average (1 min) at the end: "
				"%.2f\n", load);
	} else {
		fprintf(stderr, "tally: benchmark stopped\n");
	}
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
