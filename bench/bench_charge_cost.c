// SPDX-License-Identifier: MIT
/*
 * bench_charge_cost.c - `tally bench charge`, the cost phase: ns per
 * charge + uncharge pair of 4 KiB, per thread, at each thread count x
 * chain depth x fill, every design on a fresh tree.
 *
 * Every level of the chain has max = 64 MiB.  Fill "far": the chain
 * starts empty; fill "95": it is first charged with 95% of max
 * (60.8 MiB), leaving 3.2 MiB.  Each thread swings its working set from 0
 * to 3.2 MiB / threads and back (charge the pieces, then uncharge them):
 * at 95% the threads together reach max exactly, so nothing need be
 * refused, but every byte a design keeps in a cache (stock, untracked)
 * pushes its counters over: refills are refused, stocks are drained.  A
 * refused charge still counts as a pair.  The designs' repetitions are
 * interleaved (bench_measure_set()) so that the ratios between them hold
 * on a noisy machine; the median is reported.  After each phase the tree
 * is drained and must read 0: a design that drifts fails the benchmark.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_charge.h"
#include "parallel.h"

const struct charge_design *const bench_charge_designs[NR_DESIGNS] = {
	&charge_design_tally, &charge_design_kernel,
	&charge_design_clickhouse, &charge_design_page_counter,
};

/* ---- a design's tree with its pre-charge ------------------------------- */

int tree_make(struct tree *t, const struct charge_design *d,
	      const struct charge_setup *s, long pre)
{
	memset(t, 0, sizeof(*t));
	t->d = d;
	t->cpu = s->domain ? 0 : CHARGE_THIS_CPU;
	t->obj = d->create(s);
	if (!t->obj) {
		fprintf(stderr, "tally: cannot build the %s tree: %s\n",
			d->name, strerror(errno));
		return -1;
	}
	if (pre && d->charge(t->obj, &t->main, t->cpu, pre)) {
		fprintf(stderr, "tally: %s refused the %ld-byte fill\n",
			d->name, pre);
		d->destroy(t->obj);
		return -1;
	}
	t->pre = pre;
	return 0;
}

int tree_free(struct tree *t)
{
	long left;

	if (t->pre)
		t->d->uncharge(t->obj, &t->main, t->cpu, t->pre);
	t->d->thread_exit(t->obj, &t->main);
	left = t->d->drained_usage(t->obj);
	t->d->destroy(t->obj);
	if (left) {
		fprintf(stderr,
			"tally: %s drifted: usage %ld after every charge was uncharged\n",
			t->d->name, left);
		return -1;
	}
	return 0;
}

/* ---- cost ------------------------------------------------------------- */

struct cost_job {
	struct tree tree;
	unsigned int threads;
	unsigned int leaves;
	unsigned int flags;
	long wave;
	unsigned long n;
	unsigned long refused;
	uint64_t elapsed_ns[MAX_THREADS];
};

static void cost_thread(void *arg, unsigned int index)
{
	struct cost_job *j = arg;
	const struct charge_design *d = j->tree.d;
	struct charge_thread th = { .nr_leaves = j->leaves };
	unsigned long refused;

	refused = d->pairs(j->tree.obj, &th, j->n, PAIR_BYTES, j->wave);
	d->thread_exit(j->tree.obj, &th);
	__atomic_add_fetch(&j->refused, refused, __ATOMIC_RELAXED);
}

static double cost_run(void *arg, unsigned long n)
{
	struct cost_job *j = arg;
	int err;

	j->n = n;
	err = bench_run_parallel(j->threads, cost_thread, j, j->elapsed_ns,
				 j->flags);
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
		return -1;
	}
	return bench_per_op_ns(j->elapsed_ns, j->threads, n);
}

void setup_of(const struct run *r, const struct cell *c,
	      struct charge_setup *s)
{
	s->domain = NULL;
	s->depth = c->depth;
	s->max = LIMIT;
	s->tally_flags = r->tally_flags;
	s->leaves = c->groups * tally_domain_nr_cpus(tally_domain_system());
}

int measure_cost(struct run *r, struct cell *c)
{
	struct cost_job *jobs = calloc(NR_DESIGNS, sizeof(*jobs));
	struct bench_job set[NR_DESIGNS];
	struct charge_setup s;
	unsigned int made = 0;
	int err = 0;

	if (!jobs) {
		fprintf(stderr, "tally: out of memory\n");
		return -1;
	}
	setup_of(r, c, &s);
	for (; made < NR_DESIGNS && !err; made++) {
		struct cost_job *j = &jobs[made];

		err = tree_make(&j->tree, bench_charge_designs[made], &s,
				c->fill == FILL_95 ? FILL95 : 0);
		if (err)
			break;
		j->threads = c->threads;
		j->leaves = s.leaves;
		j->flags = r->pin;
		j->wave = r->wave ? r->wave :
			  ROOM / c->threads / PAIR_BYTES * PAIR_BYTES;
		set[made] = (struct bench_job){ cost_run, j };
	}
	if (!err)
		err = bench_measure_set(set, NR_DESIGNS, &r->plan, c->res);
	for (unsigned int i = 0; i < made; i++) {
		c->timed_refused[i] = jobs[i].refused;
		if (tree_free(&jobs[i].tree))
			err = -1;
	}
	free(jobs);
	return err;
}

/* ---- output ------------------------------------------------------------ */

void print_cost_header(struct run *r)
{
	fprintf(r->out, "\nns per charge + uncharge pair of 4 KiB, per thread "
		"(median of %u; (x) = / the cheapest of the row)\n", r->reps);
	fprintf(r->out, "%5s %6s %4s %7s", "depth", "groups", "fill",
		"threads");
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %17s", bench_charge_designs[i]->name);
	fprintf(r->out, " %19s\n", "tally/page_counter");
}

static double cheapest(const struct cell *c)
{
	double best = c->res[0].median;

	for (unsigned int i = 1; i < NR_DESIGNS; i++)
		if (c->res[i].median < best)
			best = c->res[i].median;
	return best;
}

void print_cost_row(struct run *r, const struct cell *c)
{
	double best = cheapest(c);

	fprintf(r->out, "%5u %6u %4s %7u", c->depth, c->groups,
		fill_names[c->fill], c->threads);
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %9.1f (%4.1fx)", c->res[i].median,
			c->res[i].median / best);
	fprintf(r->out, " %19.2f\n",
		c->res[TALLY].median / c->res[PAGE_COUNTER].median);
}

void json_cell(struct run *r, const struct cell *c)
{
	double best = cheapest(c);

	for (unsigned int i = 0; i < NR_DESIGNS; i++) {
		struct bench_json *w = &r->json;

		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", bench_charge_designs[i]->name);
		bench_json_int(w, "threads", c->threads);
		bench_json_int(w, "depth", c->depth);
		bench_json_int(w, "groups_per_cpu", c->groups);
		bench_json_string(w, "fill", fill_names[c->fill]);
		bench_json_double(w, "ns_per_pair", c->res[i].median);
		bench_json_double(w, "ns_min", c->res[i].min);
		bench_json_double(w, "ns_max", c->res[i].max);
		bench_json_double(w, "ratio_to_cheapest",
				  c->res[i].median / best);
		bench_json_int(w, "timed_refusals", (long long)c->timed_refused[i]);
		bench_json_int(w, "refusals", (long long)c->refused[i]);
		bench_json_int(w, "false_refusals",
			       (long long)c->false_refused[i]);
		bench_json_int(w, "max_overshoot", c->overshoot[i]);
		bench_json_int(w, "max_error", c->error[i]);
		bench_json_end(w);
	}
}
