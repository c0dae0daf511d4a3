// SPDX-License-Identifier: MIT
/*
 * bench_stats_quiet.c - `tally bench stats` section 6, a quiet group in a
 * busy tree, in every design.
 *
 * Forced reads of a leaf that gets no updates, pausing 200 us to 1 ms,
 * while the writers update every other leaf: in the busy 100 x 100 tree
 * (shared with section 5) and in a small 3 x 2 tree built per phase.  A
 * design whose forced read of a quiet group costs what the busy tree
 * holds shows a p99 ratio busy/small far above 1.
 */
#include <stdlib.h>

#include "bench_stats.h"

#define SMALL_A 3
#define SMALL_B 2
#define BIG_QUIET (50 * BIG_B + 50)	/* leaf a50/b50 */
#define SMALL_QUIET (1 * SMALL_B + 1)	/* leaf a1/b1 */

static const struct {
	unsigned int fan_a, fan_b, quiet;
} quiet_tree[2] = {
	{ BIG_A, BIG_B, BIG_QUIET },
	{ SMALL_A, SMALL_B, SMALL_QUIET },
};

static int quiet_phase(struct run *r, unsigned int d, unsigned int k)
{
	struct phase ph = {
		.nr_targets = 1,
		.readers = 1,
		.fixed = true,
		.mode = TALLY_FLUSH_FORCE,
		.duration_ns = scaled_ns(r, QUIET_MS),
	};
	struct tree_set small, *s = &r->big[d];
	struct phase_result res;
	int err = -1;

	if (k) {
		if (tree_set_build(&small, d, SMALL_A, SMALL_B))
			return -1;
		s = &small;
	}
	ph.targets = &s->leaves[quiet_tree[k].quiet];
	/* The writers update every leaf but the quiet one. */
	ph.nr_leaves = s->nr_leaves - 1;
	ph.leaves = malloc(ph.nr_leaves * sizeof(*ph.leaves));
	if (ph.leaves) {
		for (unsigned int i = 0, j = 0; i < s->nr_leaves; i++)
			if (s->leaves + i != ph.targets)
				ph.leaves[j++] = s->leaves[i];
		/* Section 4 may have updated it: quiet from now on. */
		tally_stats_flush(ph.targets[0]);
		err = phase_run(&ph, s->tree, &res);
	}
	if (!err && !res.readers_started)
		err = -1;
	if (!err)
		r->quiet[d][k] = ph.hist[0];
	else
		fprintf(stderr, "tally: the quiet-group phase failed\n");
	free(ph.hist);
	free(ph.leaves);
	if (k)
		tree_set_destroy(&small);
	return err;
}

static unsigned int tree_groups(unsigned int k)
{
	return 1 + quiet_tree[k].fan_a * (1 + quiet_tree[k].fan_b);
}

static double quiet_ratio(const struct run *r, unsigned int d)
{
	return lat_hist_percentile(&r->quiet[d][0], 0.99) /
	       lat_hist_percentile(&r->quiet[d][1], 0.99);
}

static void quiet_report(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-8s %8s %9s %9s %8s %9s %9s %10s\n", "design",
		"groups", "p50 us", "p99 us", "groups", "p50 us", "p99 us",
		"p99 ratio");
	bench_json_begin(w, "quiet", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		fprintf(r->out, "%-8s", design_name(d));
		for (unsigned int k = 0; k < 2; k++) {
			const struct lat_hist *h = &r->quiet[d][k];

			fprintf(r->out, " %8u %9.1f %9.1f", tree_groups(k),
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)));
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "design", design_name(d));
			bench_json_int(w, "groups", tree_groups(k));
			bench_json_string(w, "read_mode", "force");
			lat_json(w, h);
			bench_json_end(w);
		}
		fprintf(r->out, " %9.2fx\n", quiet_ratio(r, d));
	}
	bench_json_end(w);
}

int bench_quiet(struct run *r)
{
	int err;

	fprintf(r->out,
		"\n6. quiet group: reads of a leaf without updates with TALLY_FLUSH_FORCE,\n"
		"   pausing 200 us to 1 ms, while %u writers update every other leaf, in\n"
		"   a busy 100 x 100 tree and in a 3 x 2 tree; %.1f s each; ratio busy/small\n",
		NR_WRITERS, (double)scaled_ns(r, QUIET_MS) / 1e9);
	fflush(r->out);
	err = build_big_trees(r);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		for (unsigned int k = 0; k < 2 && !err; k++)
			err = quiet_phase(r, d, k);
	if (!err)
		quiet_report(r);
	return err;
}
