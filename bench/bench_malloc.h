/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_MALLOC_H
#define TALLY_BENCH_MALLOC_H

/*
 * bench_malloc.h - private to `tally bench malloc`: one invocation's
 * settings (struct run), jemalloc and the libtally behind
 * libtally_jemalloc as loaded by bench_malloc_jemalloc.c, and the
 * workload of bench_malloc_workload.c, driven by bench_malloc.c.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include "json.h"
#include "measure.h"

#define CMD "tally bench malloc"
#define SLOTS 1024u
#define MAX_THREADS 16
#define MAX_LIST 8
#define UNTRACKED_MAX (4l << 20)
/* Allocations per request of the switch design: a switch before each. */
#define REQUEST_ALLOCS 16

enum design { GLIBC, JEMALLOC, TALLY, SWITCH, TRACKER, NR_DESIGNS };

/* jemalloc and the libtally behind libtally_jemalloc, from dlopen(). */
struct bench_jemalloc {
	void *(*mallocx)(size_t, int);
	void (*dallocx)(void *, int);
	int (*tree_create)(struct tally_memcg_tree **,
			   const struct tally_memcg_options *);
	struct tally_memcg *(*root)(struct tally_memcg_tree *);
	int (*create)(struct tally_memcg *, const char *,
		      struct tally_memcg **);
	int (*usage)(struct tally_memcg *, enum tally_memcg_read_mode,
		     struct tally_memcg_range *);
	int (*init)(const struct tally_jemalloc_options *);
	struct tally_memcg *(*set_current)(struct tally_memcg *);
	int (*stats)(struct tally_memcg *, struct tally_jemalloc_stats *);
	int (*flush)(void);
	int (*purge)(struct tally_memcg *);
};
extern struct bench_jemalloc je;

struct run {
	unsigned int threads[MAX_LIST], nr_threads;
	unsigned int reps;
	unsigned int pin;
	bool quick;
	bool keep_tcache;
	struct bench_plan plan;
	const char *json_path;
	struct bench_json json;
	FILE *out;
	struct tally_memcg *group;	/* tally's */
	struct tally_memcg *tenants[2];	/* the switch design's */
};

/*
 * load_jemalloc() - fill je from libtally_jemalloc.so beside the tool
 *	(or in the library directory); may run the tool again with a larger
 *	static TLS surplus, with the same @argc and @argv.
 *
 * Return: 0, or -1 (the message printed).
 */
int load_jemalloc(int argc, char **argv);

/* The table's header. */
void print_header(struct run *r);

/*
 * measure() - every design at @threads threads, repetitions interleaved:
 *	a row of the table, the error at quiescence and the JSON.
 *
 * Return: 0, or -1 (the message printed).
 */
int measure(struct run *r, unsigned int threads);

/* The rebind table's header. */
void print_rebind_header(struct run *r);

/*
 * measure_rebind() - tally_jemalloc_set_current() of the group each of
 *	@threads threads is in: a row of the rebind table and its JSON.
 *
 * Return: 0, or -1 (the message printed).
 */
int measure_rebind(struct run *r, unsigned int threads);

#endif /* TALLY_BENCH_MALLOC_H */
