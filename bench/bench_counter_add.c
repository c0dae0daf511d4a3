// SPDX-License-Identifier: MIT
/*
 * bench_counter_add.c - `tally bench counter`, section add: ns per add of
 * +1 per thread, for every implementation of baselines.h at each thread
 * count.
 *
 * Threads (pinned unless --no-pin) start together on a barrier and time
 * their own loop (bench_run_parallel()), so that thread creation is not
 * timed; each repetition makes a fresh counter and checks its total
 * afterwards, so that an implementation that loses updates fails instead
 * of looking fast.  The repetitions are interleaved across the
 * implementations (bench_measure_set()): the ratios to tally at the same
 * thread count are the figures, and they hold on a noisy machine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_counter.h"
#include "parallel.h"

static const struct bench_impl *const impls[NR_IMPLS] = {
	[IMPL_TALLY] = &bench_impl_tally,
	[IMPL_SHARED_ATOMIC] = &bench_impl_shared_atomic,
	[IMPL_PERCPU_COUNTER] = &bench_impl_percpu_counter,
	[IMPL_PERCPU_ATOMIC] = &bench_impl_percpu_atomic,
	[IMPL_STRIPED_CELLS] = &bench_impl_striped_cells,
	[IMPL_THREAD_CACHED] = &bench_impl_thread_cached,
	[IMPL_RSEQ_ADD] = &bench_impl_rseq_add,
	[IMPL_TLS_INCREMENT] = &bench_impl_tls_increment,
};

struct add_job {
	const struct bench_impl *impl;
	unsigned int threads;
	unsigned int flags;		/* for bench_run_parallel() */
	void *ctr;
	unsigned long n;
	uint64_t elapsed_ns[MAX_THREADS];
};

static void add_thread(void *arg, unsigned int index)
{
	struct add_job *j = arg;

	j->impl->run(j->ctr, j->n);
}

/* One repetition: fresh counter, n adds per thread, total checked. */
static double add_run(void *arg, unsigned long n)
{
	struct add_job *j = arg;
	long expect = (long)(n * j->threads), got = 0;
	int err;

	j->ctr = j->impl->create();
	if (!j->ctr) {
		fprintf(stderr, "tally: cannot create a %s counter: %s\n",
			j->impl->name, strerror(errno));
		return -1;
	}
	j->n = n;
	err = bench_run_parallel(j->threads, add_thread, j, j->elapsed_ns,
				 j->flags);
	if (!err)
		got = j->impl->sum(j->ctr);
	j->impl->destroy(j->ctr);
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
		return -1;
	}
	if (got != expect) {
		fprintf(stderr,
			"tally: %s lost updates with %u threads: sum %ld, expected %ld\n",
			j->impl->name, j->threads, got, expect);
		return -1;
	}
	return bench_per_op_ns(j->elapsed_ns, j->threads, n);
}

/*
 * Every implementation at the @t-th thread count, repetitions interleaved
 * (bench_measure_set()): the ratios between them are the figures.
 */
static int add_at(struct run *r, unsigned int t, struct bench_result *res)
{
	struct add_job *jobs = calloc(NR_IMPLS, sizeof(*jobs));
	struct bench_job set[NR_IMPLS];
	int err;

	if (!jobs) {
		fprintf(stderr, "tally: out of memory\n");
		return -1;
	}
	for (unsigned int i = 0; i < NR_IMPLS; i++) {
		jobs[i].impl = impls[i];
		jobs[i].threads = r->threads[t];
		jobs[i].flags = r->pin ? BENCH_PIN : 0;
		set[i].run = add_run;
		set[i].arg = &jobs[i];
	}
	err = bench_measure_set(set, NR_IMPLS, &r->add_plan, res);
	for (unsigned int i = 0; i < NR_IMPLS && !err; i++)
		r->add_ns[i][t] = res[i].median;
	free(jobs);
	return err;
}

int bench_add(struct run *r)
{
	struct bench_result res[MAX_THREAD_COUNTS][NR_IMPLS];
	struct bench_json *w = &r->json;

	fprintf(r->out,
		"\nadd: ns per add of +%d per thread, median of %u interleaved runs of ~%llu ms,\n"
		"     threads %s; x = ns / tally's ns at the same thread count\n",
		BENCH_INC, r->add_plan.reps,
		(unsigned long long)(r->add_plan.target_ns / 1000000),
		r->pin ? "pinned round-robin to the CPUs" : "not pinned");
	fflush(r->out);
	for (unsigned int t = 0; t < r->nr_threads; t++)
		if (add_at(r, t, res[t]))
			return -1;
	fprintf(r->out, "%-15s", "impl");
	for (unsigned int t = 0; t < r->nr_threads; t++)
		fprintf(r->out, " %9u thr%s", r->threads[t],
			r->threads[t] == 1 ? " " : "s");
	fputc('\n', r->out);
	bench_json_begin(w, "add", '[', false);
	for (unsigned int i = 0; i < NR_IMPLS; i++) {
		fprintf(r->out, "%-15s", impls[i]->name);
		for (unsigned int t = 0; t < r->nr_threads; t++) {
			const struct bench_result *x = &res[t][i];
			double vs = x->median / r->add_ns[IMPL_TALLY][t];

			fprintf(r->out, " %7.2f %5.2fx", x->median, vs);
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "impl", impls[i]->name);
			bench_json_int(w, "threads", r->threads[t]);
			bench_json_double(w, "ns_per_op", x->median);
			bench_json_double(w, "ns_per_op_min", x->min);
			bench_json_double(w, "ns_per_op_max", x->max);
			bench_json_int(w, "adds_per_thread", (long long)x->n);
			bench_json_double(w, "vs_tally", vs);
			bench_json_end(w);
		}
		fprintf(r->out, "  %s\n", impls[i]->what);
	}
	bench_json_end(w);
	return 0;
}
