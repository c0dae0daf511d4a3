// SPDX-License-Identifier: MIT
/*
 * bench_counter.c - `tally bench counter`: tally's counter against the
 * baselines of baselines.h.
 *
 * A benchmark, not a timed test: it prints tables, with the ratios between
 * implementations measured in the same run (and JSON with --json).
 * Sections, in order:
 *
 *   add        ns per add of +1 per thread, for every implementation at
 *              each thread count; threads (pinned unless --no-pin) start
 *              together on a barrier and time their own loop; median of
 *              repetitions interleaved across implementations; the total
 *              is checked after every repetition.
 *   thread_cached  the per-thread cached counter at 64 threads: its read
 *              costs and the error of its fast read.
 *   read       approximate and precise sums of tally (and of the classic
 *              counter) on simulated domains of 2 to 4096 CPUs.
 *   accuracy   one updater hopping over simulated CPUs, +k on one CPU then
 *              -k on another: the largest |approximate - precise| of tally
 *              (batch 32) and of the classic counter (batch max(32, 2N)),
 *              with tally's bound.  The required pattern picks both CPUs at
 *              random; the "drain" variant always subtracts on CPU 0.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/counter.h>
#include "baselines.h"
#include "bench.h"
#include "../tool/args.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_THREADS 256
#define MAX_THREAD_COUNTS 16
#define TC_THREADS 64		/* threads of the thread_cached test */
#define HOP_MAX_K 64		/* pages per mmap when hopping */
#define HOP_STEP_CPUS 384	/* hop_steps applies up to this many CPUs */
#define SEED 0x7a11e5eedull

enum impl_id {
	IMPL_TALLY,
	IMPL_SHARED_ATOMIC,
	IMPL_PERCPU_COUNTER,
	IMPL_PERCPU_ATOMIC,
	IMPL_STRIPED_CELLS,
	IMPL_THREAD_CACHED,
	IMPL_RSEQ_ADD,
	IMPL_TLS_INCREMENT,
	NR_IMPLS
};

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

static const unsigned int read_cpus[] = { 2, 64, 384, 4096 };
static const unsigned int hop_cpus[] = { 64, 384, 4096 };

enum hop_pattern {
	HOP_RANDOM,	/* required: -k on a random CPU */
	HOP_DRAIN,	/* variant: -k always on CPU 0 */
	NR_PATTERNS
};

static const char *const hop_key[NR_PATTERNS] = {
	[HOP_RANDOM] = "accuracy",
	[HOP_DRAIN] = "accuracy_drain",
};

static const char *const hop_title[NR_PATTERNS] = {
	[HOP_RANDOM] = "+k on a random CPU, then -k on another random CPU",
	[HOP_DRAIN] = "drain variant: +k on a random CPU, then -k on CPU 0",
};

struct hop_result {
	unsigned long steps;
	long tally_max;
	unsigned long tally_bound;
	long pcc_max;
	long pcc_batch;
	unsigned long pcc_bound;
};

/* One invocation: options, outputs and figures. */
struct run {
	const char *json_path;
	unsigned int threads[MAX_THREAD_COUNTS];
	unsigned int nr_threads;
	bool quick;
	bool pin;
	struct bench_plan add_plan;
	struct bench_plan read_plan;
	unsigned long hop_steps;
	unsigned int tc_trials;
	FILE *out;
	struct bench_json json;
	double add_ns[NR_IMPLS][MAX_THREAD_COUNTS];
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench counter [--json FILE] [--threads LIST] [--quick] [--no-pin]\n"
		"\n"
		"Compare tally's counter with the baselines: ns per add per thread,\n"
		"read costs at 2 to 4096 simulated CPUs, and the error of an updater\n"
		"hopping across CPUs.  Prints tables and ratios.\n"
		"\n"
		"  --json FILE     also write the figures as JSON to FILE; \"-\" means\n"
		"                  standard output (the table then goes to standard error)\n"
		"  --threads LIST  comma-separated thread counts (default 1,2,4)\n"
		"  --quick         short runs: a quick look, noisier figures\n"
		"  --no-pin        let the scheduler place the add threads (default: thread\n"
		"                  i runs on the i-th allowed CPU, as in will-it-scale)\n"
		"  -h, --help      show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_THREAD_COUNTS, 1,
				     MAX_THREADS, &r->nr_threads);
	case 'q':
		r->quick = true;
		break;
	case 'p':
		r->pin = false;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for bad options (usage printed). */
static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "quick", no_argument, NULL, 'q' },
		{ "no-pin", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench counter", usage, "", longopts, option, false
	};

	r->threads[0] = 1;
	r->threads[1] = 2;
	r->threads[2] = 4;
	r->nr_threads = 3;
	r->pin = true;
	return tool_parse_options(&cmd, argc, argv, r, NULL);
}

/* ---- add: ns per add per thread --------------------------------------- */

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
	uint64_t sum_ns = 0;
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
	for (unsigned int i = 0; i < j->threads; i++)
		sum_ns += j->elapsed_ns[i];
	return (double)sum_ns / j->threads / (double)n;
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

static int bench_add(struct run *r)
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

/* ---- simulated domains: tally and the classic counter side by side ---- */

struct sim_counters {
	struct tally_domain *d;
	struct tally_counter t;		/* batch BENCH_TALLY_BATCH */
	struct pcpu_counter *pc;	/* the kernel's default batch */
};

static int sim_create(struct sim_counters *s, unsigned int nr_cpus)
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

static void sim_destroy(struct sim_counters *s)
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

static int bench_thread_cached(struct run *r)
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
static int bench_read(struct run *r)
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

/* ---- accuracy: one updater hopping across CPUs ------------------------- */

struct hop_state {
	struct sim_counters s;
	long total;
	long tally_max;
	long pcc_max;
};

static long max_long(long a, long b)
{
	return a > b ? a : b;
}

/* One update on both counters, then the errors against the truth. */
static void hop_step(struct hop_state *h, unsigned int cpu, long inc)
{
	tally_counter_add_cpu(&h->s.t, cpu, inc);
	pcpu_counter_add_cpu(h->s.pc, cpu, inc);
	h->total += inc;
	h->tally_max = max_long(h->tally_max,
				labs(tally_counter_approximate_sum(&h->s.t) -
				     h->total));
	h->pcc_max = max_long(h->pcc_max,
			      labs(pcpu_counter_read(h->s.pc) - h->total));
}

/* The precise sums must equal the truth: nothing lost. */
static int hop_exact(struct hop_state *h, unsigned int nr_cpus)
{
	long ts = tally_counter_precise_sum(&h->s.t);
	long ps = pcpu_counter_sum(h->s.pc);

	if (ts == h->total && ps == h->total)
		return 0;
	fprintf(stderr,
		"tally: hopping at %u CPUs: precise sums %ld (tally), %ld (percpu_counter), expected %ld\n",
		nr_cpus, ts, ps, h->total);
	return -1;
}

static int hop_run(unsigned int nr_cpus, enum hop_pattern pattern,
		   unsigned long steps, struct hop_result *res)
{
	struct hop_state h = { .total = 0 };
	unsigned long over;
	uint64_t rng = SEED ^ nr_cpus;
	int err = 0;

	if (sim_create(&h.s, nr_cpus))
		return -1;
	for (unsigned long i = 0; i < steps && !err; i++) {
		unsigned int cpu = (unsigned int)(bench_rand(&rng) % nr_cpus);
		long k = 1 + (long)(bench_rand(&rng) % HOP_MAX_K);

		hop_step(&h, cpu, k);
		cpu = pattern == HOP_RANDOM ?
			(unsigned int)(bench_rand(&rng) % nr_cpus) : 0;
		hop_step(&h, cpu, -k);
		if (!(i & 0xffff) || i + 1 == steps)
			err = hop_exact(&h, nr_cpus);
	}
	res->steps = steps;
	res->tally_max = h.tally_max;
	tally_counter_accuracy(h.s.d, BENCH_TALLY_BATCH, &res->tally_bound,
			       &over);
	res->pcc_max = h.pcc_max;
	res->pcc_batch = pcpu_counter_batch(h.s.pc);
	res->pcc_bound = (unsigned long)nr_cpus * (res->pcc_batch - 1);
	sim_destroy(&h.s);
	return err;
}

static void hop_entry(struct bench_json *w, const char *impl,
		      enum hop_pattern pattern, unsigned int cpus, long error,
		      unsigned long bound, long batch, unsigned long steps)
{
	bench_json_begin(w, NULL, '{', true);
	bench_json_string(w, "impl", impl);
	bench_json_int(w, "cpus", cpus);
	bench_json_int(w, "max_error", error);
	bench_json_int(w, "bound", (long long)bound);
	bench_json_int(w, "batch", batch);
	bench_json_int(w, "steps", (long long)steps);
	bench_json_string(w, "pattern",
			  pattern == HOP_RANDOM ? "random" : "drain");
	bench_json_end(w);
}

/*
 * Steps at @nr_cpus CPUs: the base count up to HOP_STEP_CPUS CPUs, more
 * beyond, so that each CPU sees as many updates as at HOP_STEP_CPUS.
 */
static unsigned long hop_steps(const struct run *r, unsigned int nr_cpus)
{
	return r->hop_steps * ((nr_cpus + HOP_STEP_CPUS - 1) / HOP_STEP_CPUS);
}

static int bench_accuracy(struct run *r, enum hop_pattern pattern)
{
	struct bench_json *w = &r->json;

	fprintf(r->out,
		"\n%s: one updater hopping over simulated CPUs,\n"
		"  %s (k in [1, %d]);\n"
		"  largest |approximate - precise| after any step; bounds hold at quiescence\n"
		"%6s %9s %13s %12s %22s %12s %9s\n",
		hop_key[pattern], hop_title[pattern], HOP_MAX_K, "cpus",
		"steps", "tally (b=32)", "tally bound", "percpu_counter (batch)",
		"its bound", "pcc/tally");
	bench_json_begin(w, hop_key[pattern], '[', false);
	for (unsigned int i = 0; i < ARRAY_SIZE(hop_cpus); i++) {
		struct hop_result h;

		if (hop_run(hop_cpus[i], pattern, hop_steps(r, hop_cpus[i]),
			    &h))
			return -1;
		fprintf(r->out,
			"%6u %9lu %13ld %12lu %14ld (%5ld) %12lu %8.2fx\n",
			hop_cpus[i], h.steps, h.tally_max, h.tally_bound,
			h.pcc_max, h.pcc_batch, h.pcc_bound,
			(double)h.pcc_max / (double)h.tally_max);
		hop_entry(w, "tally", pattern, hop_cpus[i], h.tally_max,
			  h.tally_bound, BENCH_TALLY_BATCH, h.steps);
		hop_entry(w, "percpu_counter", pattern, hop_cpus[i], h.pcc_max,
			  h.pcc_bound, h.pcc_batch, h.steps);
	}
	bench_json_end(w);
	return 0;
}

/* ---- driver ------------------------------------------------------------- */

static void settings_json(struct run *r, unsigned int cpus)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "inc", BENCH_INC);
	bench_json_int(w, "tally_batch", BENCH_TALLY_BATCH);
	bench_json_int(w, "percpu_counter_batch",
		       pcpu_counter_default_batch(cpus));
	bench_json_int(w, "reps", r->add_plan.reps);
	bench_json_double(w, "rep_ms", (double)r->add_plan.target_ns / 1e6);
	bench_json_begin(w, "threads", '[', true);
	for (unsigned int t = 0; t < r->nr_threads; t++)
		bench_json_int(w, NULL, r->threads[t]);
	bench_json_end(w);
	bench_json_int(w, "hop_steps_per_384_cpus", (long long)r->hop_steps);
	bench_json_int(w, "seed", (long long)SEED);
	bench_json_bool(w, "quick", r->quick);
	bench_json_bool(w, "pinned", r->pin);
	bench_json_end(w);
}

static void set_plans(struct run *r)
{
	r->add_plan.target_ns = r->quick ? 10000000 : 100000000;
	r->add_plan.reps = r->quick ? 3 : 7;
	r->add_plan.min_n = 1 << 12;
	r->read_plan.target_ns = r->quick ? 2000000 : 20000000;
	r->read_plan.reps = r->add_plan.reps;
	r->read_plan.min_n = 16;
	r->hop_steps = r->quick ? 200000 : 2000000;
	r->tc_trials = r->quick ? 3 : 10;
}

int tally_bench_counter(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct bench_machine m;
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
	set_plans(r);
	if (bench_json_open(&r->json, r->json_path)) {
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "tally bench counter%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "counter");
	bench_machine_json(&r->json, &m);
	settings_json(r, m.possible_cpus);
	err = bench_add(r);
	if (!err)
		err = bench_thread_cached(r);
	if (!err)
		err = bench_read(r);
	for (unsigned int p = 0; p < NR_PATTERNS && !err; p++)
		err = bench_accuracy(r, p);
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
