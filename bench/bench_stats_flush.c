// SPDX-License-Identifier: MIT
/*
 * bench_stats_flush.c - `tally bench stats` section 3, flush: us per
 * forced flush of the root after updates, tally design.
 *
 * The trees run on simulated domains, so that the flush engine's cost at
 * 64 and 384 CPUs can be measured on any machine: 1,000 groups (25 x 40)
 * with 4 updates each on 64 CPUs, 2,000 groups (50 x 40) with 8 updates
 * each on 384 CPUs, each update on a random CPU.  The best of 30 is
 * reported: what the engine costs, not what sharing the machine adds.
 */
#include <stdlib.h>
#include <string.h>

#include <tally/domain.h>
#include "bench_stats.h"
#include "rand.h"

static const struct flush_shape {
	unsigned int cpus, groups, updates;
} flush_shapes[] = {
	{ 64, 1000, 4 },
	{ 384, 2000, 8 },
};
#define FLUSH_FANOUT 40
#define FLUSH_REPS 30

/*
 * Best of FLUSH_REPS forced root flushes of @sh's tree, each after every
 * leaf got its updates on random CPUs.  Return: us, or -1.
 */
static double flush_best(const struct flush_shape *sh)
{
	unsigned int mids = (sh->groups + FLUSH_FANOUT - 1) / FLUSH_FANOUT;
	struct tally_stats_group **g = calloc(sh->groups + mids, sizeof(*g));
	struct tally_stats_options o = { 0 };
	struct tally_stats_tree *t = NULL;
	struct tally_domain *d = NULL;
	uint64_t rng = SEED, best = UINT64_MAX;
	int err = g ? 0 : -ENOMEM;

	if (!err)
		err = tally_domain_create_simulated(&d, sh->cpus,
						    TALLY_GROUP_LOW_BITS);
	o.domain = d;
	if (!err)
		err = tally_stats_tree_create(&t, bench_stats_schema, NR_STATS,
					      &o);
	for (unsigned int i = 0; !err && i < mids + sh->groups; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%u", i);
		err = tally_stats_group_create(i < mids ? tally_stats_root(t) :
					       g[(i - mids) / FLUSH_FANOUT],
					       name, &g[i]);
	}
	for (unsigned int rep = 0; !err && rep < FLUSH_REPS; rep++) {
		uint64_t start;

		for (unsigned int i = mids; i < mids + sh->groups; i++)
			for (unsigned int k = 0; k < sh->updates; k++) {
				uint64_t x = bench_rand(&rng);

				tally_stats_mod_cpu(g[i], below(x, sh->cpus),
						    below(x >> 32, NR_STATS),
						    1);
			}
		start = bench_now_ns();
		tally_stats_flush(tally_stats_root(t));
		if (bench_now_ns() - start < best)
			best = bench_now_ns() - start;
	}
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
	free(g);
	if (err) {
		fprintf(stderr, "tally: cannot build the flush tree: %s\n",
			strerror(-err));
		return -1;
	}
	return (double)best / NS_PER_US;
}

int bench_flush(struct run *r)
{
	struct bench_json *w = &r->json;

	fprintf(r->out,
		"\n3. flush: us per forced flush of the root after every leaf got\n"
		"   its updates on random CPUs (%s design, simulated CPUs, groups\n"
		"   %u to a parent), best of %u\n",
		design_name(0), FLUSH_FANOUT, FLUSH_REPS);
	fprintf(r->out, "%6s %8s %8s %10s\n", "CPUs", "groups", "updates",
		"us/flush");
	bench_json_begin(w, "flush", '[', false);
	for (unsigned int i = 0; i < ARRAY_SIZE(flush_shapes); i++) {
		const struct flush_shape *sh = &flush_shapes[i];
		double us_per = flush_best(sh);

		if (us_per < 0) {
			bench_json_end(w);
			return -1;
		}
		fprintf(r->out, "%6u %8u %8u %10.1f\n", sh->cpus, sh->groups,
			sh->updates, us_per);
		bench_json_begin(w, NULL, '{', true);
		bench_json_int(w, "cpus", sh->cpus);
		bench_json_int(w, "groups", sh->groups);
		bench_json_int(w, "updates_per_group", sh->updates);
		bench_json_double(w, "us_per_flush", us_per);
		bench_json_end(w);
	}
	bench_json_end(w);
	return 0;
}
