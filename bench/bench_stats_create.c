// SPDX-License-Identifier: MIT
/*
 * bench_stats_create.c - `tally bench stats` section 2, create: us per
 * tally_stats_group_create() as the tree grows, tally design.
 *
 * N groups (1,000, 4,000, 16,000) are created in three shapes: all
 * children of the root (a flat tree), all children of the end of a
 * 64-group chain, or a tree of at most 16 children per group (what the
 * whole tree costs, apart from siblings).  Each run builds a fresh tree
 * and times only the creates (the names are made before the clock
 * starts); the runs of every shape and N are interleaved and the median
 * is reported.  If the cost per create grows in proportion to N, creating
 * N groups costs O(N^2): the last column, us at the largest N / us at the
 * smallest, shows it.
 */
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"

/*
 * N groups created under one parent, the root or the end of a chain, and,
 * to tell the siblings' cost from the whole tree's, in a tree where no
 * group has more than 16 children.
 */
static const unsigned int create_counts[] = { 1000, 4000, 16000 };
#define NR_CREATE_COUNTS ARRAY_SIZE(create_counts)
#define MAX_CREATE 16000
#define CHAIN_DEPTH 64

static const struct create_shape {
	const char *title;
	const char *key;		/* in the JSON */
	unsigned int parent_depth;	/* one parent, this deep */
	unsigned int fanout;		/* or: at most this many children */
} create_shapes[] = {
	{ "root (flat)", "flat", 0, 0 },
	{ "depth 64", "chain", CHAIN_DEPTH, 0 },
	{ "fan-out 16", "fanout", 0, 16 },
};
#define NR_CREATE_SHAPES ARRAY_SIZE(create_shapes)

/* A group name per child, made before the clock starts. */
typedef char child_name[8];

/*
 * One run: a fresh tree, then @n groups created in the shape @sh, timed.
 * @groups has room for @n + 1 pointers.  Return: us per create, or -1.
 */
static double create_rep(const struct create_shape *sh, unsigned int n,
			 const child_name *names,
			 struct tally_stats_group **groups)
{
	struct tally_stats_group *chain[CHAIN_DEPTH + 1];
	struct tally_stats_tree *t = tree_new(0);
	struct tally_stats_group *parent;
	uint64_t start, end;
	int err = 0;

	if (!t)
		return -1;
	if (build_chain(t, chain, sh->parent_depth)) {
		tally_stats_tree_destroy(t);
		return -1;
	}
	/* groups[0] is the root; group i goes to groups[i + 1]. */
	groups[0] = chain[0];
	parent = chain[sh->parent_depth];
	start = bench_now_ns();
	for (unsigned int i = 0; i < n && !err; i++) {
		if (sh->fanout)
			parent = groups[i / sh->fanout];
		err = tally_stats_group_create(parent, names[i],
					       &groups[i + 1]);
	}
	end = bench_now_ns();
	tally_stats_tree_destroy(t);
	if (err) {
		fprintf(stderr, "tally: cannot create %u groups: %s\n", n,
			strerror(-err));
		return -1;
	}
	return (double)(end - start) / n / NS_PER_US;
}

static void create_report(struct run *r,
			  struct bench_result res[][NR_CREATE_COUNTS])
{
	const unsigned int lo = create_counts[0],
			   hi = create_counts[NR_CREATE_COUNTS - 1];
	struct bench_json *w = &r->json;
	char head[16];

	fprintf(r->out, "%-14s", "groups");
	for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++) {
		snprintf(head, sizeof(head), "N=%u", create_counts[c]);
		fprintf(r->out, " %9s", head);
	}
	snprintf(head, sizeof(head), "%u/%u", hi, lo);
	fprintf(r->out, " %11s\n", head);
	bench_json_begin(w, "create", '[', false);
	for (unsigned int k = 0; k < NR_CREATE_SHAPES; k++) {
		const struct create_shape *sh = &create_shapes[k];

		fprintf(r->out, "%-14s", sh->title);
		for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++) {
			const struct bench_result *x = &res[k][c];

			fprintf(r->out, " %9.2f", x->median);
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(0));
			bench_json_string(w, "shape", sh->key);
			bench_json_int(w, "parent_depth", sh->parent_depth);
			bench_json_int(w, "fanout", sh->fanout);
			bench_json_int(w, "groups", create_counts[c]);
			bench_json_double(w, "us_per_create", x->median);
			bench_json_double(w, "us_per_create_min", x->min);
			bench_json_double(w, "us_per_create_max", x->max);
			bench_json_end(w);
		}
		fprintf(r->out, " %10.2fx\n",
			res[k][NR_CREATE_COUNTS - 1].median / res[k][0].median);
	}
	bench_json_end(w);
	fprintf(r->out,
		"(%u/%u: us per create at N=%u / at N=%u: about 1 when a create\n"
		" costs the same whatever the tree's size, about %u when it scans\n"
		" every group already there)\n", hi, lo, hi, lo, hi / lo);
}

/* Every shape and group count, the runs interleaved. */
int bench_create(struct run *r)
{
	double v[NR_CREATE_SHAPES][NR_CREATE_COUNTS][BENCH_MAX_REPS];
	struct bench_result res[NR_CREATE_SHAPES][NR_CREATE_COUNTS];
	child_name *names = malloc(MAX_CREATE * sizeof(*names));
	struct tally_stats_group **groups =
		malloc((MAX_CREATE + 1) * sizeof(*groups));
	unsigned int reps = r->create_reps;
	int err = names && groups ? 0 : -1;

	fprintf(r->out,
		"\n2. create: us per tally_stats_group_create() of N groups: all children\n"
		"   of the root, all children of a group %u levels deep, or a tree where\n"
		"   no group has more than 16 children; a fresh tree (%s design) per\n"
		"   run, median of %u interleaved runs\n",
		CHAIN_DEPTH, design_name(0), reps);
	fflush(r->out);
	if (err)
		fprintf(stderr, "tally: out of memory\n");
	for (unsigned int i = 0; i < MAX_CREATE && !err; i++)
		snprintf(names[i], sizeof(names[i]), "c%u", i);
	for (unsigned int rep = 0; rep < reps && !err; rep++)
		for (unsigned int k = 0; k < NR_CREATE_SHAPES && !err; k++)
			for (unsigned int c = 0; c < NR_CREATE_COUNTS && !err;
			     c++) {
				v[k][c][rep] = create_rep(&create_shapes[k],
							  create_counts[c],
							  names, groups);
				err = v[k][c][rep] < 0 ? -1 : 0;
			}
	free(names);
	free(groups);
	if (err)
		return err;
	for (unsigned int k = 0; k < NR_CREATE_SHAPES; k++)
		for (unsigned int c = 0; c < NR_CREATE_COUNTS; c++)
			bench_summarize(v[k][c], reps, create_counts[c],
					&res[k][c]);
	create_report(r, res);
	return 0;
}
