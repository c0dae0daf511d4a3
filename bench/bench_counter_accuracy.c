// SPDX-License-Identifier: MIT
/*
 * bench_counter_accuracy.c - `tally bench counter`, section accuracy: one
 * updater hopping over simulated CPUs, +k on one CPU then -k on another.
 *
 * After every step it takes the largest |approximate - precise| of tally
 * (batch 32) and of the classic counter (batch max(32, 2N)), and prints
 * them beside tally's bound.  The required pattern picks both CPUs at
 * random; the "drain" variant always subtracts on CPU 0.  The precise
 * sums are checked against the truth along the way: a counter that loses
 * an update fails the benchmark.  Larger domains get more steps, so that
 * each CPU sees as many updates as at 384 CPUs.
 */
#include <stdlib.h>

#include "bench_counter.h"
#include "rand.h"

#define HOP_MAX_K 64		/* pages per mmap when hopping */
#define HOP_STEP_CPUS 384	/* hop_steps applies up to this many CPUs */

static const unsigned int hop_cpus[] = { 64, 384, 4096 };

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

int bench_accuracy(struct run *r, enum hop_pattern pattern)
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
