// SPDX-License-Identifier: MIT
/*
 * bench_stats_update.c - `tally bench stats` section 1, update: ns per
 * tally_stats_mod(+1) on a group 1, 2, 4 and 8 levels below the root, one
 * thread, in every design.
 *
 * Per-group thresholds (tally, linux68) add to a count per ancestor, the
 * global threshold (linux61, rfc2023) to one count, so the cost by depth
 * tells the designs apart.  Nothing reads: past the first batch the
 * threshold atomics stay over the threshold and are skipped, as for a
 * busy group between two flushes.  The repetitions of every design and
 * depth are interleaved (bench_measure_set()), so that noise from the
 * machine hits all of them alike; the median is reported, with the
 * ratio of tally to linux61 at each depth.
 *
 * A last column, "spread", is what the readers section's writers do:
 * tally_stats_mod(+1) of a random stat of a random leaf of the 50 x 5
 * tree, one thread.  No two updates in a row share a leaf, so no group
 * keeps the hint cache: each update pays every level of its chain (three
 * here) where a global threshold pays one count.
 */
#include <stdio.h>
#include <string.h>

#include "bench_stats.h"
#include "rand.h"

static const unsigned int depths[] = { 1, 2, 4, 8 };
#define NR_DEPTHS ARRAY_SIZE(depths)
#define NR_COLUMNS (NR_DEPTHS + 1)	/* the depths, then "spread" */
#define SPREAD NR_DEPTHS
#define MAX_DEPTH 8

static double update_rep(void *arg, unsigned long n)
{
	struct tally_stats_group *g = arg;
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++)
		tally_stats_mod(g, 0, 1);
	return (double)(bench_now_ns() - start) / (double)n;
}

/* Updates of random stats of random leaves, as the readers' writers. */
static double spread_rep(void *arg, unsigned long n)
{
	const struct tree_set *s = arg;
	uint64_t rng = SEED, start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++) {
		uint64_t x = bench_rand(&rng);

		tally_stats_mod(s->leaves[below(x, s->nr_leaves)],
				below(x >> 32, NR_WRITER_STATS), 1);
	}
	return (double)(bench_now_ns() - start) / (double)n;
}

static bool per_group_threshold(unsigned int d)
{
	return !bench_stats_global_threshold(bench_stats_designs[d]);
}

static void update_report(struct run *r,
			  struct bench_result res[][NR_COLUMNS])
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-14s", "design");
	for (unsigned int i = 0; i < NR_DEPTHS; i++)
		fprintf(r->out, "  depth %u", depths[i]);
	fprintf(r->out, "    spread  threshold\n");
	bench_json_begin(w, "update", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		const char *kind = per_group_threshold(d) ? "per_group" :
							    "global";

		fprintf(r->out, "%-14s", design_name(d));
		for (unsigned int i = 0; i < NR_COLUMNS; i++)
			fprintf(r->out, " %8.2f", res[d][i].median);
		fprintf(r->out, "  %s\n", kind);
		for (unsigned int i = 0; i < NR_DEPTHS; i++) {
			const struct bench_result *x = &res[d][i];

			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(d));
			bench_json_int(w, "depth", depths[i]);
			bench_json_double(w, "ns_per_op", x->median);
			bench_json_double(w, "ns_per_op_min", x->min);
			bench_json_double(w, "ns_per_op_max", x->max);
			bench_json_string(w, "threshold", kind);
			bench_json_int(w, "ops_per_rep", (long long)x->n);
			bench_json_end(w);
		}
	}
	bench_json_end(w);
	bench_json_begin(w, "update_spread", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		const struct bench_result *x = &res[d][SPREAD];

		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", design_name(d));
		bench_json_int(w, "leaves", READERS_A * READERS_B);
		bench_json_int(w, "leaf_depth", 2);
		bench_json_double(w, "ns_per_op", x->median);
		bench_json_double(w, "ns_per_op_min", x->min);
		bench_json_double(w, "ns_per_op_max", x->max);
		bench_json_double(w, "ratio_to_tally", x->median /
						       res[0][SPREAD].median);
		bench_json_string(w, "threshold", per_group_threshold(d) ?
							  "per_group" :
							  "global");
		bench_json_end(w);
	}
	bench_json_end(w);
	fprintf(r->out, "%-14s", "tally/linux61");
	for (unsigned int i = 0; i < NR_COLUMNS; i++)
		fprintf(r->out, " %7.2fx", res[0][i].median / res[1][i].median);
	fprintf(r->out,
		"\n(spread: a random stat of a random leaf of the readers' %u x %u tree,\n"
		" as their writers do: every update pays each level of its chain)\n",
		READERS_A, READERS_B);
}

/*
 * Every design at every depth, and spread; the repetitions are
 * interleaved (one of each per round), so that noise from the machine
 * hits all of them.
 */
int bench_update(struct run *r)
{
	struct bench_result res[NR_DESIGNS][NR_COLUMNS];
	struct bench_job jobs[NR_DESIGNS][NR_COLUMNS];
	struct tally_stats_group *chain[NR_DESIGNS][MAX_DEPTH + 1];
	struct tally_stats_tree *t[NR_DESIGNS] = { NULL };
	struct tree_set spread[NR_DESIGNS];
	int err = 0;

	memset(spread, 0, sizeof(spread));
	fprintf(r->out,
		"\n1. update: ns per tally_stats_mod(+1) on a group d levels below the root,\n"
		"   and spread over random leaves, one thread, median of %u interleaved\n"
		"   runs of ~%llu ms\n",
		r->update_plan.reps,
		(unsigned long long)(r->update_plan.target_ns / 1000000));
	fflush(r->out);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++) {
		t[d] = tree_new(d);
		err = t[d] ? build_chain(t[d], chain[d], MAX_DEPTH) : -1;
		if (!err)
			err = tree_set_build(&spread[d], d, READERS_A,
					     READERS_B);
		for (unsigned int i = 0; i < NR_DEPTHS && !err; i++)
			jobs[d][i] = (struct bench_job){ update_rep,
							 chain[d][depths[i]] };
		jobs[d][SPREAD] = (struct bench_job){ spread_rep, &spread[d] };
	}
	if (!err)
		err = bench_measure_set(&jobs[0][0], NR_DESIGNS * NR_COLUMNS,
					&r->update_plan, &res[0][0]);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		tally_stats_tree_destroy(t[d]);
		tree_set_destroy(&spread[d]);
	}
	if (!err)
		update_report(r, res);
	return err;
}
