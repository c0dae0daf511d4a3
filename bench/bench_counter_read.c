// SPDX-License-Identifier: MIT
/*
 * bench_counter_read.c - `tally bench counter`, sections thread_cached and
 * read: what reading a counter costs, and how far a cheap read is off.
 *
 *   thread_cached  the per-thread cached counter at 64 threads: every
 *              worker adds, then parks with its cache unflushed while one
 *              reader times the fast read (the shared total) and the full
 *              read (every cache); the fast read's error over the trials,
 *              with its bound.  Every trial checks that nothing was lost.
 *   read       approximate and precise sums of tally and of the classic
 *              per-CPU counter on simulated domains of 2 to 4096 CPUs,
 *              every CPU's slot populated so that a precise sum reads
 *              real data; all reads' repetitions interleaved.
 *
 * Simulated domains (also the accuracy section's) let one machine show
 * what a read costs on 4096 CPUs.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_counter.h"
#include "parallel.h"
#include "rand.h"

#define TC_THREADS 64		/* threads of the thread_cached test */

static const unsigned int read_cpus[] = { 2, 64, 384, 4096 };

/* ---- simulated domains: tally and the classic counter side by side ---- */

int sim_create(struct sim_counters *s, unsigned int nr_cpus)
{
	int err;

	err = tally_domain_create_simulated(&s->d, nr_cpus,
					    TALLY_GROUP_LOW_BITS);
	if (err)
		goto fail;
	err = tally_counter_init(&s->t, s->d, BENCH_TALLY_BATCH);
	if (err)
		goto fail_domain;
	s->pc = pcpu_counter_create(s->d, 0);
	if (s->pc)
		return 0;
	err = -ENOMEM;
	tally_counter_destroy(&s->t);
fail_domain:
	tally_domain_destroy(s->d);
fail:
	fprintf(stderr, "tally: cannot build %u-CPU counters: %s\n", nr_cpus,
		strerror(-err));
	return -1;
}

void sim_destroy(struct sim_counters *s)
{
	pcpu_counter_destroy(s->pc);
	tally_counter_destroy(&s->t);
	tally_domain_destroy(s->d);
}

/* ---- reads: ns per call ------------------------------------------------- */

struct read_job {
	long (*read)(void *obj);
	void *obj;
	long sink;
};

static double read_run(void *arg, unsigned long n)
{
	struct read_job *j = arg;
	uint64_t start = bench_now_ns();
	long sink = 0;

	for (unsigned long i = 0; i < n; i++)
		sink += j->read(j->obj);
	__atomic_store_n(&j->sink, sink, __ATOMIC_RELAXED);
	return (double)(bench_now_ns() - start) / (double)n;
}

/* Median ns per call of @read on @obj; NaN after a failure. */
static double time_read(const struct bench_plan *plan, long (*read)(void *),
			void *obj)
{
	struct read_job job = { .read = read, .obj = obj };
	struct bench_result res;

	if (bench_measure(read_run, &job, plan, &res))
		return NAN;
	return res.median;
}

static long read_tally_approx(void *obj)
{
	return tally_counter_approximate_sum(obj);
}

static long read_tally_precise(void *obj)
{
	return tally_counter_precise_sum(obj);
}

static long read_pcc_approx(void *obj)
{
	return pcpu_counter_read(obj);
}

static long read_pcc_precise(void *obj)
{
	return pcpu_counter_sum(obj);
}

static long read_tc_fast(void *obj)
{
	return thread_cached_read_fast(obj);
}

static long read_tc_full(void *obj)
{
	return thread_cached_read_full(obj);
}

/* ---- thread_cached at 64 threads --------------------------------------- */

struct tc_job {
	struct thread_cached *c;
	const struct bench_plan *plan;
	pthread_barrier_t added;	/* workers done adding, not flushed */
	pthread_barrier_t read;		/* the reader is done */
	unsigned long adds[TC_THREADS];
	long total;
	long fast;			/* fast read while caches are full */
	long full;			/* full read at the same time */
	bool time_reads;
	double fast_ns;
	double full_ns;
};

static void tc_thread(void *arg, unsigned int index)
{
	struct tc_job *j = arg;

	if (index < TC_THREADS) {
		for (unsigned long i = 0; i < j->adds[index]; i++)
			thread_cached_add(j->c, BENCH_INC);
		pthread_barrier_wait(&j->added);
		pthread_barrier_wait(&j->read);
		thread_cached_detach(j->c);	/* the thread's exit flush */
		return;
	}
	/* The reader: every worker is parked with its cache unflushed. */
	pthread_barrier_wait(&j->added);
	j->fast = thread_cached_read_fast(j->c);
	j->full = thread_cached_read_full(j->c);
	if (j->time_reads) {
		j->fast_ns = time_read(j->plan, read_tc_fast, j->c);
		j->full_ns = time_read(j->plan, read_tc_full, j->c);
	}
	pthread_barrier_wait(&j->read);
}

/* One trial; the fast read's error is returned in *error. */
static int tc_trial(struct tc_job *j, uint64_t *rng, long *error)
{
	long flushed;
	int err;

	j->c = thread_cached_create();
	if (!j->c) {
		fprintf(stderr, "tally: out of memory\n");
		return -1;
	}
	j->total = 0;
	for (unsigned int i = 0; i < TC_THREADS; i++) {
		j->adds[i] = 1 + bench_rand(rng) % 100000;
		j->total += (long)j->adds[i] * BENCH_INC;
	}
	pthread_barrier_init(&j->added, NULL, TC_THREADS + 1);
	pthread_barrier_init(&j->read, NULL, TC_THREADS + 1);
	err = bench_run_parallel(TC_THREADS + 1, tc_thread, j, NULL, 0);
	pthread_barrier_destroy(&j->added);
	pthread_barrier_destroy(&j->read);
	flushed = thread_cached_read_fast(j->c);
	thread_cached_destroy(j->c);
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			TC_THREADS + 1, strerror(-err));
		return -1;
	}
	if (j->full != j->total || flushed != j->total) {
		fprintf(stderr,
			"tally: thread_cached lost updates: full read %ld, after flush %ld, expected %ld\n",
			j->full, flushed, j->total);
		return -1;
	}
	if (j->time_reads && (isnan(j->fast_ns) || isnan(j->full_ns)))
		return -1;
	*error = j->total - j->fast;
	return 0;
}

int bench_thread_cached(struct run *r)
{
	struct tc_job *j = calloc(1, sizeof(*j));
	struct bench_json *w = &r->json;
	uint64_t rng = SEED;
	long max_error = 0, bound = (THREAD_CACHED_FLUSH - 1l) * TC_THREADS;
	double sum_error = 0;

	if (!j) {
		fprintf(stderr, "tally: out of memory\n");
		return -1;
	}
	j->plan = &r->read_plan;
	for (unsigned int trial = 0; trial < r->tc_trials; trial++) {
		long error;

		j->time_reads = trial == 0;
		if (tc_trial(j, &rng, &error)) {
			free(j);
			return -1;
		}
		sum_error += (double)error;
		if (error > max_error)
			max_error = error;
	}
	fprintf(r->out,
		"\nthread_cached at %d threads (1 to 100000 adds each, %u trials):\n"
		"  fast read (shared total) %.2f ns, full read (walks %d caches) %.0f ns\n"
		"  fast read error: max %ld, mean %.0f, bound %ld (%d x %d threads)\n",
		TC_THREADS, r->tc_trials, j->fast_ns, TC_THREADS, j->full_ns,
		max_error, sum_error / r->tc_trials, bound,
		THREAD_CACHED_FLUSH - 1, TC_THREADS);
	bench_json_begin(w, "thread_cached", '{', false);
	bench_json_int(w, "threads", TC_THREADS);
	bench_json_int(w, "flush_every", THREAD_CACHED_FLUSH);
	bench_json_int(w, "trials", r->tc_trials);
	bench_json_double(w, "read_fast_ns", j->fast_ns);
	bench_json_double(w, "read_full_ns", j->full_ns);
	bench_json_int(w, "max_error", max_error);
	bench_json_double(w, "mean_error", sum_error / r->tc_trials);
	bench_json_int(w, "bound", bound);
	bench_json_end(w);
	free(j);
	return 0;
}

/* ---- read: approximate and precise sums -------------------------------- */

/* The reads timed at each CPU count. */
static const struct {
	const char *impl;
	const char *op;
	long (*read)(void *obj);
	bool classic;		/* reads the classic counter */
} read_ops[] = {
	{ "tally", "approximate_sum", read_tally_approx, false },
	{ "tally", "precise_sum", read_tally_precise, false },
	{ "percpu_counter", "approximate_sum", read_pcc_approx, true },
	{ "percpu_counter", "precise_sum", read_pcc_precise, true },
};

#define NR_READ_CPUS ARRAY_SIZE(read_cpus)
#define NR_READ_OPS ARRAY_SIZE(read_ops)

/* Every CPU's slot gets a value, so that precise sums read real data. */
static void populate(struct sim_counters *s, unsigned int nr_cpus)
{
	uint64_t rng = SEED;

	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++) {
		long v = 1 + (long)(bench_rand(&rng) % 1000);

		tally_counter_add_cpu(&s->t, cpu, v);
		pcpu_counter_add_cpu(s->pc, cpu, v);
	}
}

static void print_reads(struct run *r, const struct bench_result *res)
{
	struct bench_json *w = &r->json;

	fprintf(r->out,
		"\nread: ns per call on simulated domains, every CPU's slot populated\n"
		"%6s %18s %14s %22s %12s\n", "cpus", "approximate_sum",
		"precise_sum", "percpu_counter read", "sum");
	bench_json_begin(w, "read", '[', false);
	for (unsigned int i = 0; i < NR_READ_CPUS; i++) {
		const struct bench_result *x = &res[i * NR_READ_OPS];

		fprintf(r->out, "%6u %18.2f %14.1f %22.2f %12.1f\n",
			read_cpus[i], x[0].median, x[1].median, x[2].median,
			x[3].median);
		for (unsigned int o = 0; o < NR_READ_OPS; o++) {
			bench_json_begin(w, NULL, '{', true);
			bench_json_string(w, "impl", read_ops[o].impl);
			bench_json_string(w, "op", read_ops[o].op);
			bench_json_int(w, "cpus", read_cpus[i]);
			bench_json_double(w, "ns_per_op", x[o].median);
			bench_json_end(w);
		}
	}
	bench_json_end(w);
}

/* All CPU counts and reads, repetitions interleaved. */
int bench_read(struct run *r)
{
	struct sim_counters sim[NR_READ_CPUS];
	struct read_job jobs[NR_READ_CPUS * NR_READ_OPS];
	struct bench_job set[NR_READ_CPUS * NR_READ_OPS];
	struct bench_result res[NR_READ_CPUS * NR_READ_OPS];
	unsigned int built;
	int err = 0;

	for (built = 0; built < NR_READ_CPUS; built++) {
		if (sim_create(&sim[built], read_cpus[built])) {
			err = -1;
			break;
		}
		populate(&sim[built], read_cpus[built]);
	}
	for (unsigned int j = 0; j < NR_READ_CPUS * NR_READ_OPS && !err; j++) {
		struct sim_counters *s = &sim[j / NR_READ_OPS];
		unsigned int o = j % NR_READ_OPS;

		jobs[j].read = read_ops[o].read;
		jobs[j].obj = read_ops[o].classic ? (void *)s->pc : &s->t;
		set[j].run = read_run;
		set[j].arg = &jobs[j];
	}
	if (!err)
		err = bench_measure_set(set, NR_READ_CPUS * NR_READ_OPS,
					&r->read_plan, res);
	while (built--)
		sim_destroy(&sim[built]);
	if (err)
		return -1;
	print_reads(r, res);
	return 0;
}
