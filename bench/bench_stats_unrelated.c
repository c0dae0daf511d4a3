// SPDX-License-Identifier: MIT
/*
 * bench_stats_unrelated.c - `tally bench stats` section 5, readers of
 * unrelated subtrees, in every design.
 *
 * A 100 x 100 tree, writers on every leaf, two readers of unrelated
 * subtrees (/a17 and /a83) reading with forced reads, pausing 200 us to
 * 1 ms between reads.  A forced read always flushes, so the latencies
 * show whether one reader ends up flushing the other's subtree or the
 * root.  The four 100 x 100 trees are built once, before any is freed,
 * and serve section 6 too.
 */
#include <math.h>
#include <stdlib.h>

#include "bench_stats.h"

#define UNRELATED_1 17		/* /a17 */
#define UNRELATED_2 83		/* /a83 */

static const unsigned int unrelated_a[2] = { UNRELATED_1, UNRELATED_2 };

/* The worse of the two readers' @q percentiles. */
static double worse(const struct unrelated_result *u, double q)
{
	return fmax(lat_hist_percentile(&u->hist[0], q),
		    lat_hist_percentile(&u->hist[1], q));
}

static int unrelated_phase(struct run *r, unsigned int d)
{
	struct tally_stats_group *targets[2];
	struct phase ph = {
		.targets = targets,
		.nr_targets = 2,
		.readers = 2,
		.fixed = true,
		.mode = TALLY_FLUSH_FORCE,
		.duration_ns = scaled_ns(r, UNRELATED_MS),
	};
	struct unrelated_result *u = &r->un[d];
	struct tree_set *s = &r->big[d];
	struct phase_result res;
	int err;

	ph.leaves = s->leaves;
	ph.nr_leaves = s->nr_leaves;
	for (unsigned int i = 0; i < 2; i++)
		targets[i] = s->groups[1 + unrelated_a[i]];
	err = phase_run(&ph, s->tree, &res);
	if (!err && res.readers_started < 2) {
		fprintf(stderr, "tally: cannot start the readers\n");
		err = -1;
	}
	if (!err) {
		u->hist[0] = ph.hist[0];
		u->hist[1] = ph.hist[1];
		u->info = res.info;
	}
	free(ph.hist);
	return err;
}

static void unrelated_report(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out, "%-8s %11s %11s %11s %11s %11s %7s %8s %6s\n",
		"design", "/a17 p50us", "p99us", "/a83 p50us", "p99us",
		"worse p99", "x", "flushes", "root");
	bench_json_begin(w, "unrelated", '[', false);
	for (unsigned int d = 0; d < NR_DESIGNS; d++) {
		const struct unrelated_result *u = &r->un[d];

		fprintf(r->out, "%-8s", design_name(d));
		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", design_name(d));
		bench_json_double(w, "p50_us", us(worse(u, 0.5)));
		bench_json_double(w, "p99_us", us(worse(u, 0.99)));
		bench_json_string(w, "read_mode", "force");
		bench_json_begin(w, "readers", '[', true);
		for (unsigned int i = 0; i < 2; i++) {
			const struct lat_hist *h = &u->hist[i];
			char name[8];

			snprintf(name, sizeof(name), "a%u", unrelated_a[i]);
			fprintf(r->out, " %11.1f %11.1f",
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)));
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "group", name);
			lat_json(w, h);
			bench_json_end(w);
		}
		bench_json_end(w);
		bench_json_int(w, "flushes", (long long)u->info.flushes);
		bench_json_int(w, "root_flushes",
			       (long long)u->info.root_flushes);
		bench_json_end(w);
		fprintf(r->out, " %11.1f %6.2fx %8llu %6llu\n",
			us(worse(u, 0.99)),
			worse(u, 0.99) / worse(&r->un[0], 0.99),
			(unsigned long long)u->info.flushes,
			(unsigned long long)u->info.root_flushes);
	}
	bench_json_end(w);
}

int bench_unrelated(struct run *r)
{
	int err = 0;

	fprintf(r->out,
		"\n5. unrelated readers: 100 x 100 tree (%u groups), %u writers on every\n"
		"   leaf; two readers read /a%u and /a%u with TALLY_FLUSH_FORCE, pausing\n"
		"   200 us to 1 ms between reads; %.1f s; 'worse p99' is the worse\n"
		"   reader's, x that / tally's\n",
		1 + BIG_A + BIG_A * BIG_B, NR_WRITERS, UNRELATED_1, UNRELATED_2,
		(double)scaled_ns(r, UNRELATED_MS) / 1e9);
	fflush(r->out);
	err = build_big_trees(r);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		err = unrelated_phase(r, d);
	if (!err)
		unrelated_report(r);
	return err;
}
