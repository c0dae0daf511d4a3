// SPDX-License-Identifier: MIT
/*
 * bench_charge.c - `tally bench charge`: charging and uncharging memory
 * against a chain of groups with limits, in four designs side by side
 * (charge_designs.h): tally's memory groups, the kernel's memcg, ClickHouse's
 * MemoryTracker and the bare page counter.
 *
 * Three phases, each on fresh trees of every design:
 *
 *   cost      ns per charge + uncharge pair of 4 KiB, per thread, at each
 *             thread count x chain depth x fill; the designs' repetitions
 *             interleaved (bench_measure_set()), the median reported.
 *             Every level of the chain has max = 64 MiB.  Fill "far": the
 *             chain starts empty; fill "95": it is first charged with 95%
 *             of max (60.8 MiB), leaving 3.2 MiB.  Each thread swings its
 *             working set from 0 to 3.2 MiB / threads and back (charge
 *             the pieces, then uncharge them): at 95% the threads
 *             together reach max exactly, so nothing need be refused, but
 *             every byte a design keeps in a cache (stock, untracked)
 *             pushes its counters over: refills are refused, stocks are
 *             drained.  A refused charge still counts as a pair.
 *   accuracy  the same cells, untimed, with an exact oracle: each thread
 *             charges random sizes (64 B to 16 KiB) and uncharges random
 *             ones of its own, aiming at twice the room left (6.4 MiB /
 *             threads each), so real refusals happen at 95%.  Then, with
 *             every thread stopped holding its charges, the design's
 *             usage is compared with the exact one.
 *   error     the usage error at quiescence at 16, 64 and 256 threads
 *             without a limit, on this machine's CPUs and on simulated
 *             domains of 64 and 384 CPUs (each charge and uncharge on a
 *             random CPU, as threads migrate).
 *
 * The oracle (accuracy and error phases) is sound: it never blames a
 * design wrongly.
 *   committed  an upper bound of the usage: raised by n before a charge
 *              is called, lowered after a refused charge returns or after
 *              an uncharge returns.  It and a count of the raises that
 *              took it above max share one word changed by compare-and-
 *              swap, so a refusal is "false" only when committed (with
 *              the charge's own n) was at most max when the call started
 *              and no raise took it above max until the call returned:
 *              then the exact usage plus n stayed within max throughout.
 *   held       a lower bound of the usage: raised after a charge returned
 *              success, lowered before an uncharge is called; the largest
 *              held - max seen when it is raised is the overshoot.
 *              At quiescence held is the exact usage.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "charge_designs.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PAGE 4096l
#define PAIR_BYTES PAGE
#define LIMIT (64l << 20)
#define FILL95 (LIMIT / 100 * 95 / PAGE * PAGE)
#define ROOM (LIMIT - FILL95)
#define MAX_THREADS 64
#define MAX_LIST 8
#define HELD_CAP 4096		/* charges a thread holds at most */
#define ERROR_WAVE (1l << 20)	/* working set per thread, error phase */
#define SEED 0x6d656d6367ull

static const struct charge_design *const designs[] = {
	&charge_design_tally, &charge_design_kernel,
	&charge_design_clickhouse, &charge_design_page_counter,
};
#define NR_DESIGNS ARRAY_SIZE(designs)
#define TALLY 0
#define PAGE_COUNTER 3

enum fill { FILL_FAR, FILL_95, NR_FILLS };
static const char *const fill_names[NR_FILLS] = { "far", "95" };

static const unsigned int error_threads[] = { 16, 64, 256 };
static const unsigned int error_cpus[] = { 0, 64, 384 };	/* 0: system */

struct run {
	unsigned int threads[MAX_LIST], nr_threads;
	unsigned int depths[MAX_LIST], nr_depths;
	unsigned int fills;		/* mask of enum fill */
	unsigned int reps;
	unsigned int pin;		/* BENCH_PIN or 0 */
	unsigned int tally_flags;
	long wave;			/* cost phase, per thread; 0: default */
	bool quick;
	unsigned long acc_ops, error_ops;
	struct bench_plan plan;
	const char *json_path;
	struct bench_json json;
	FILE *out;
};

/* The figures of one cell (threads x depth x fill), per design. */
struct cell {
	unsigned int threads, depth;
	enum fill fill;
	struct bench_result res[NR_DESIGNS];
	unsigned long timed_refused[NR_DESIGNS];
	unsigned long refused[NR_DESIGNS], false_refused[NR_DESIGNS];
	long overshoot[NR_DESIGNS], error[NR_DESIGNS];
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench charge [--json FILE] [--threads LIST] [--depth LIST]\n"
		"                          [--fill LIST] [--reps N] [--tally-flags FLAGS]\n"
		"                          [--wave KIB] [--no-pin] [--quick]\n"
		"\n"
		"Charge and uncharge memory against a chain of groups with a max on every\n"
		"level, in four designs side by side: tally's memory groups, the Linux\n"
		"kernel's memcg (page counter + per-CPU stock), ClickHouse's MemoryTracker\n"
		"(per-thread untracked bytes) and the bare page counter (one atomic per\n"
		"level).  Prints ns per charge + uncharge pair with ratios, false refusals\n"
		"and overshoot against an exact oracle, and the usage error at quiescence.\n"
		"\n"
		"  --json FILE         also write the figures as JSON to FILE; \"-\" means\n"
		"                      standard output (the tables then go to standard error)\n"
		"  --threads LIST      thread counts of the cost and accuracy phases, 1 to 64\n"
		"                      (default 1,2,4; --quick: 1,2)\n"
		"  --depth LIST        chain depths, 1 to 8 (default 1,4)\n"
		"  --fill LIST         far, 95 (default both): the chain starts empty, or\n"
		"                      charged to 95%% of max\n"
		"  --reps N            repetitions per figure, the median reported, 1 to 32\n"
		"                      (default 5; --quick: 3)\n"
		"  --wave KIB          working set of each thread in the cost phase, 4 to\n"
		"                      65536 KiB (default: the room left at 95%% / threads)\n"
		"  --tally-flags F     flags of tally's charges: noreclaim (default) or none\n"
		"  --no-pin            do not pin thread i to the i-th allowed CPU\n"
		"  --quick             short runs: a quick look, noisier figures\n"
		"  -h, --help          show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	static const char *const flag_names[] = { "none", "noreclaim" };
	struct run *r = ctx;
	unsigned long one;
	unsigned int i;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_LIST, 1, MAX_THREADS,
				     &r->nr_threads);
	case 'd':
		return tool_opt_list(arg, r->depths, MAX_LIST, 1,
				     CHARGE_MAX_DEPTH, &r->nr_depths);
	case 'f':
		return tool_opt_names(arg, fill_names, NR_FILLS, &r->fills);
	case 'r':
		if (tool_opt_uint(arg, 1, BENCH_MAX_REPS, &one))
			return -1;
		r->reps = (unsigned int)one;
		break;
	case 'F':
		if (tool_opt_choice(arg, flag_names, 2, &i))
			return -1;
		r->tally_flags = i ? TALLY_MEMCG_NORECLAIM : 0;
		break;
	case 'w':
		if (tool_opt_uint(arg, 4, 65536, &one))
			return -1;
		r->wave = (long)one << 10;
		break;
	case 'P':
		r->pin = 0;
		break;
	case 'q':
		r->quick = true;
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
		{ "depth", required_argument, NULL, 'd' },
		{ "fill", required_argument, NULL, 'f' },
		{ "reps", required_argument, NULL, 'r' },
		{ "tally-flags", required_argument, NULL, 'F' },
		{ "wave", required_argument, NULL, 'w' },
		{ "no-pin", no_argument, NULL, 'P' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench charge", usage, "", longopts, option, false
	};
	int err;

	r->pin = BENCH_PIN;
	r->tally_flags = TALLY_MEMCG_NORECLAIM;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->nr_threads) {
		static const unsigned int def[] = { 1, 2, 4 };

		r->nr_threads = r->quick ? 2 : 3;
		memcpy(r->threads, def, sizeof(def));
	}
	if (!r->nr_depths) {
		r->nr_depths = 2;
		r->depths[0] = 1;
		r->depths[1] = 4;
	}
	if (!r->fills)
		r->fills = (1u << NR_FILLS) - 1;
	if (!r->reps)
		r->reps = r->quick ? 3 : 5;
	r->plan.target_ns = r->quick ? 2000000 : 50000000;
	r->plan.reps = r->reps;
	r->plan.min_n = 1024;
	r->acc_ops = r->quick ? 2000 : 50000;
	r->error_ops = r->quick ? 200 : 2000;
	return 0;
}

/* ---- a design's tree with its pre-charge ------------------------------- */

/* A design's tree, the main thread's state, and the fill charged. */
struct tree {
	const struct charge_design *d;
	void *obj;
	struct charge_thread main;
	long pre;
	int cpu;		/* of the main thread's charges */
};

static int tree_make(struct tree *t, const struct charge_design *d,
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

/*
 * Give the fill back, check that nothing drifted (every charge of the
 * phase was uncharged: the drained usage must be 0), free the tree.
 */
static int tree_free(struct tree *t)
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
	struct charge_thread th = { 0 };
	unsigned long refused;

	refused = d->pairs(j->tree.obj, &th, j->n, PAIR_BYTES, j->wave);
	d->thread_exit(j->tree.obj, &th);
	__atomic_add_fetch(&j->refused, refused, __ATOMIC_RELAXED);
}

static double cost_run(void *arg, unsigned long n)
{
	struct cost_job *j = arg;
	uint64_t sum = 0;
	int err;

	j->n = n;
	err = bench_run_parallel(j->threads, cost_thread, j, j->elapsed_ns,
				 j->flags);
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
		return -1;
	}
	for (unsigned int i = 0; i < j->threads; i++)
		sum += j->elapsed_ns[i];
	return (double)sum / j->threads / (double)n;
}

static void setup_of(const struct run *r, const struct cell *c,
		     struct charge_setup *s)
{
	s->domain = NULL;
	s->depth = c->depth;
	s->max = LIMIT;
	s->tally_flags = r->tally_flags;
}

static int measure_cost(struct run *r, struct cell *c)
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

		err = tree_make(&j->tree, designs[made], &s,
				c->fill == FILL_95 ? FILL95 : 0);
		if (err)
			break;
		j->threads = c->threads;
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

/* ---- accuracy and error: the oracle ------------------------------------ */

/*
 * committed in the low bits, raises that took it above max above them
 * (20 bits: a call would have to last a million such raises for the
 * count to wrap back to the value it started with).
 */
#define ORACLE_SHIFT 44
#define ORACLE_MASK ((1ul << ORACLE_SHIFT) - 1)

struct oracle_job {
	struct tree tree;
	unsigned int threads;
	unsigned int nr_cpus;		/* simulated CPUs, 0: this machine */
	long max;
	long wave;
	unsigned long ops;
	unsigned long word;		/* committed | over-max raises */
	long held;
	long overshoot;
	unsigned long refused, false_refused;
	long error;
	int failed;
	pthread_barrier_t stop;
};

/* Raise committed by @n; returns it, with the raise count in @raises. */
static unsigned long oracle_commit(struct oracle_job *j, long n,
				   unsigned long *raises)
{
	unsigned long old = __atomic_load_n(&j->word, __ATOMIC_SEQ_CST), new;

	do {
		unsigned long c = (old & ORACLE_MASK) + (unsigned long)n;

		new = old + (unsigned long)n;
		if (c > (unsigned long)j->max)
			new += 1ul << ORACLE_SHIFT;
	} while (!__atomic_compare_exchange_n(&j->word, &old, new, false,
					      __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	*raises = new >> ORACLE_SHIFT;
	return new & ORACLE_MASK;
}

static void atomic_max(long *p, long v)
{
	long old = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (v > old && !__atomic_compare_exchange_n(p, &old, v, false,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

struct holder {
	long bytes[HELD_CAP];
	unsigned int nr;
	long total;
	uint64_t rng;
	struct charge_thread th;
	long overshoot;
	unsigned long refused, false_refused;
};

static int oracle_cpu(struct oracle_job *j, struct holder *h)
{
	return j->nr_cpus ? (int)(bench_rand(&h->rng) % j->nr_cpus) :
			    CHARGE_THIS_CPU;
}

/* One charge of a random size under the oracle. */
static int oracle_charge(struct oracle_job *j, struct holder *h)
{
	const struct charge_design *d = j->tree.d;
	long n = (long)(1 + bench_rand(&h->rng) % 256) * 64;
	unsigned long raises, after;
	unsigned long committed = oracle_commit(j, n, &raises);
	int err = d->charge(j->tree.obj, &h->th, oracle_cpu(j, h), n);

	if (!err) {
		long held = __atomic_add_fetch(&j->held, n, __ATOMIC_SEQ_CST);

		if (held - j->max > h->overshoot)
			h->overshoot = held - j->max;
		h->bytes[h->nr++] = n;
		h->total += n;
		return 0;
	}
	if (err != -ENOMEM) {
		fprintf(stderr, "tally: %s charge: %s\n", d->name,
			strerror(-err));
		return -1;
	}
	after = __atomic_load_n(&j->word, __ATOMIC_SEQ_CST) >> ORACLE_SHIFT;
	h->refused++;
	if (committed <= (unsigned long)j->max && after == raises)
		h->false_refused++;
	__atomic_sub_fetch(&j->word, (unsigned long)n, __ATOMIC_SEQ_CST);
	return 0;
}

/* Uncharge the @i-th charge the thread holds. */
static void oracle_uncharge(struct oracle_job *j, struct holder *h,
			    unsigned int i)
{
	long n = h->bytes[i];

	h->bytes[i] = h->bytes[--h->nr];
	h->total -= n;
	__atomic_sub_fetch(&j->held, n, __ATOMIC_SEQ_CST);
	j->tree.d->uncharge(j->tree.obj, &h->th, oracle_cpu(j, h), n);
	__atomic_sub_fetch(&j->word, (unsigned long)n, __ATOMIC_SEQ_CST);
}

static void oracle_thread(void *arg, unsigned int index)
{
	struct oracle_job *j = arg;
	struct holder *h = calloc(1, sizeof(*h));
	int failed = !h;

	if (h)
		h->rng = SEED ^ ((uint64_t)index * 0x9e3779b97f4a7c15ull);
	for (unsigned long op = 0; op < j->ops && !failed; op++) {
		uint64_t coin = bench_rand(&h->rng);

		/* Three charges in four while below the aim: it gets there. */
		if (!h->nr || (h->total < j->wave && h->nr < HELD_CAP &&
			       (coin & 3)))
			failed = oracle_charge(j, h);
		else
			oracle_uncharge(j, h, (unsigned int)((coin >> 2) %
							     h->nr));
	}
	if (failed)
		__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	/* Quiescence: every thread stopped, holding its charges. */
	pthread_barrier_wait(&j->stop);
	if (!index) {
		long usage = j->tree.d->usage(j->tree.obj);
		long exact = __atomic_load_n(&j->held, __ATOMIC_SEQ_CST);

		j->error = usage > exact ? usage - exact : exact - usage;
	}
	pthread_barrier_wait(&j->stop);
	if (!h)
		return;
	while (h->nr)
		oracle_uncharge(j, h, h->nr - 1);
	j->tree.d->thread_exit(j->tree.obj, &h->th);
	atomic_max(&j->overshoot, h->overshoot);
	__atomic_add_fetch(&j->refused, h->refused, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->false_refused, h->false_refused,
			   __ATOMIC_RELAXED);
	free(h);
}

/* Run the oracle phase on a fresh tree of @d built from @s. */
static int oracle_run(struct oracle_job *j, const struct charge_design *d,
		      const struct charge_setup *s, long pre)
{
	int err;

	if (tree_make(&j->tree, d, s, pre))
		return -1;
	j->max = s->max;
	j->word = (unsigned long)pre;
	j->held = pre;
	j->overshoot = pre - s->max;
	if (pthread_barrier_init(&j->stop, NULL, j->threads)) {
		tree_free(&j->tree);
		return -1;
	}
	err = bench_run_parallel(j->threads, oracle_thread, j, NULL, 0);
	pthread_barrier_destroy(&j->stop);
	if (err)
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
	if (tree_free(&j->tree) || j->failed)
		err = -1;
	return err;
}

static int measure_accuracy(struct run *r, struct cell *c)
{
	struct charge_setup s;

	setup_of(r, c, &s);
	for (unsigned int i = 0; i < NR_DESIGNS; i++) {
		struct oracle_job *j = calloc(1, sizeof(*j));
		int err;

		if (!j) {
			fprintf(stderr, "tally: out of memory\n");
			return -1;
		}
		j->threads = c->threads;
		j->wave = 2 * ROOM / c->threads;
		j->ops = r->acc_ops;
		err = oracle_run(j, designs[i], &s,
				 c->fill == FILL_95 ? FILL95 : 0);
		c->refused[i] = j->refused;
		c->false_refused[i] = j->false_refused;
		c->overshoot[i] = j->overshoot > 0 ? j->overshoot : 0;
		c->error[i] = j->error;
		free(j);
		if (err)
			return -1;
	}
	return 0;
}

/* ---- output ------------------------------------------------------------ */

static void print_cost_header(struct run *r)
{
	fprintf(r->out, "\nns per charge + uncharge pair of 4 KiB, per thread "
		"(median of %u; (x) = / the cheapest of the row)\n", r->reps);
	fprintf(r->out, "%5s %4s %7s", "depth", "fill", "threads");
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %17s", designs[i]->name);
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

static void print_cost_row(struct run *r, const struct cell *c)
{
	double best = cheapest(c);

	fprintf(r->out, "%5u %4s %7u", c->depth, fill_names[c->fill],
		c->threads);
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %9.1f (%4.1fx)", c->res[i].median,
			c->res[i].median / best);
	fprintf(r->out, " %19.2f\n",
		c->res[TALLY].median / c->res[PAGE_COUNTER].median);
}

static void print_accuracy(struct run *r, const struct cell *cells,
			   unsigned int nr)
{
	fprintf(r->out, "\naccuracy against the exact oracle (%lu random "
		"charges/uncharges per thread, 64 B-16 KiB)\n", r->acc_ops);
	fprintf(r->out, "%5s %4s %7s  %-12s %9s %9s %14s %14s %12s\n",
		"depth", "fill", "threads", "design", "refused", "false",
		"overshoot_B", "usage_err_B", "cost_refused");
	for (unsigned int k = 0; k < nr; k++) {
		const struct cell *c = &cells[k];

		for (unsigned int i = 0; i < NR_DESIGNS; i++)
			fprintf(r->out, "%5u %4s %7u  %-12s %9lu %9lu %14ld %14ld %12lu\n",
				c->depth, fill_names[c->fill], c->threads,
				designs[i]->name, c->refused[i],
				c->false_refused[i], c->overshoot[i],
				c->error[i], c->timed_refused[i]);
	}
}

static void json_cell(struct run *r, const struct cell *c)
{
	double best = cheapest(c);

	for (unsigned int i = 0; i < NR_DESIGNS; i++) {
		struct bench_json *w = &r->json;

		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", designs[i]->name);
		bench_json_int(w, "threads", c->threads);
		bench_json_int(w, "depth", c->depth);
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

/* ---- the error phase ---------------------------------------------------- */

static int measure_error(struct run *r)
{
	int err = 0;

	fprintf(r->out, "\nusage error at quiescence, bytes: |the design's "
		"cheap read - exact|, no limit, depth 1, %lu random "
		"charges/uncharges per thread, charges held\n", r->error_ops);
	fprintf(r->out, "%-9s %5s %7s", "CPUs", "", "threads");
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %13s", designs[i]->name);
	fprintf(r->out, "\n");
	bench_json_begin(&r->json, "usage_error", '[', false);
	for (unsigned int c = 0; c < ARRAY_SIZE(error_cpus) && !err; c++) {
		struct tally_domain *dom = NULL;
		struct charge_setup s = {
			.depth = 1,
			.max = TALLY_MEMCG_UNLIMITED,
			.tally_flags = r->tally_flags,
		};
		unsigned int cpus = error_cpus[c];

		if (cpus && tally_domain_create_simulated(&dom, cpus,
							  TALLY_GROUP_LOW_BITS)) {
			fprintf(stderr, "tally: cannot simulate %u CPUs\n", cpus);
			err = -1;
			break;
		}
		s.domain = dom;
		if (!cpus)
			cpus = tally_domain_nr_cpus(tally_domain_system());
		for (unsigned int t = 0; t < ARRAY_SIZE(error_threads) && !err;
		     t++) {
			long e[NR_DESIGNS];

			for (unsigned int i = 0; i < NR_DESIGNS && !err; i++) {
				struct oracle_job *j = calloc(1, sizeof(*j));

				if (!j) {
					err = -1;
					break;
				}
				j->threads = error_threads[t];
				j->nr_cpus = dom ? cpus : 0;
				j->wave = ERROR_WAVE;
				j->ops = r->error_ops;
				err = oracle_run(j, designs[i], &s, 0);
				e[i] = j->error;
				free(j);
			}
			if (err)
				break;
			fprintf(r->out, "%-9u %5s %7u", cpus,
				dom ? "sim" : "this", error_threads[t]);
			for (unsigned int i = 0; i < NR_DESIGNS; i++) {
				fprintf(r->out, " %13ld", e[i]);
				bench_json_begin(&r->json, NULL, '{', true);
				bench_json_string(&r->json, "design",
						  designs[i]->name);
				bench_json_string(&r->json, "domain",
						  dom ? "simulated" : "system");
				bench_json_int(&r->json, "cpus", cpus);
				bench_json_int(&r->json, "threads",
					       error_threads[t]);
				bench_json_int(&r->json, "max_error", e[i]);
				bench_json_end(&r->json);
			}
			fprintf(r->out, "\n");
			fflush(r->out);
		}
		tally_domain_destroy(dom);
	}
	bench_json_end(&r->json);
	return err;
}

static void print_legend(struct run *r)
{
	fprintf(r->out,
		"\nlegend\n"
		"  chain     a root without limit and DEPTH groups under it, max %ld MiB on\n"
		"            each; threads charge the deepest group; every level counts.\n"
		"  fill      far: the chain starts empty; 95: it starts with %.1f MiB charged,\n"
		"            %.1f MiB left.  Cost phase: each thread charges 4 KiB pieces up\n"
		"            to (room left) / threads, then uncharges them, again and again:\n"
		"            at 95 the threads together just reach max, so every byte a\n"
		"            design caches makes its refills fail and its stocks drain.\n"
		"            A pair refused still counts (timed_refusals in the JSON).\n"
		"  ns        wall time per pair per thread, the designs' repetitions\n"
		"            interleaved; %s.\n"
		"  refused   charges refused in the accuracy phase (each thread aims at\n"
		"            twice its share of the room left: real refusals at 95).\n"
		"  false     refusals when, from the call to its return, the committed\n"
		"            bytes (every charge held or in flight, its own included: an\n"
		"            upper bound of the usage) never exceeded max: the exact usage\n"
		"            plus the charge fitted throughout.  Counted only when that is\n"
		"            proven, so the oracle never blames a design wrongly.\n"
		"  cost_refused\n"
		"            charges refused in the cost phase, all of them false: the\n"
		"            fill plus every thread's working set fits under max.\n"
		"  overshoot the largest (bytes held - max), bytes held being raised only\n"
		"            after a charge succeeded and lowered before its uncharge (a\n"
		"            lower bound of the usage): a proven excess over max.\n"
		"  usage_err |the design's cheap usage read - exact| with the threads\n"
		"            stopped, their charges held (tally: READ_APPROX value; kernel,\n"
		"            page_counter: the page counter; clickhouse: the tracked amount).\n",
		LIMIT >> 20, (double)FILL95 / (1 << 20), (double)ROOM / (1 << 20),
		r->pin ? "thread i pinned to CPU i mod CPUs" : "threads not pinned");
	if (r->wave)
		fprintf(r->out, "  --wave    this run: every thread's working set in the cost phase\n"
			"            is %ld KiB instead.\n", r->wave >> 10);
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, "  %-12s %s\n", designs[i]->name,
			designs[i]->what);
	fprintf(r->out,
		"  tally's charges use %s.\n"
		"  kernel: the stock is one long per CPU\n"
		"  (group number | bytes) exchanged by rseq (tally_percpu_xchg); a failed\n"
		"  try-charge drains this CPU's stock and retries once (the kernel drains\n"
		"  the others asynchronously, without waiting); uncharges refill the stock\n"
		"  (the kernel's kernel-memory path).  On simulated CPUs every design's\n"
		"  per-CPU state is exchanged atomically on a random CPU per call.\n",
		r->tally_flags ? "TALLY_MEMCG_NORECLAIM" : "no flags");
}

static void json_settings(struct run *r)
{
	struct bench_json *w = &r->json;

	bench_json_begin(w, "settings", '{', false);
	bench_json_int(w, "max_bytes", LIMIT);
	bench_json_int(w, "fill95_bytes", FILL95);
	bench_json_int(w, "pair_bytes", PAIR_BYTES);
	bench_json_int(w, "wave_bytes", r->wave);	/* 0: room / threads */
	bench_json_int(w, "reps", r->reps);
	bench_json_bool(w, "pinned", r->pin != 0);
	bench_json_bool(w, "quick", r->quick);
	bench_json_string(w, "tally_flags",
			  r->tally_flags ? "noreclaim" : "none");
	bench_json_int(w, "kernel_batch_bytes", CHARGE_KERNEL_BATCH);
	bench_json_int(w, "clickhouse_untracked_bytes",
		       CHARGE_CLICKHOUSE_UNTRACKED);
	bench_json_int(w, "accuracy_ops_per_thread", (long long)r->acc_ops);
	bench_json_int(w, "error_ops_per_thread", (long long)r->error_ops);
	bench_json_end(w);
}

int tally_bench_charge(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct cell *cells;
	struct bench_machine m;
	unsigned int nr = 0;
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
	cells = calloc(MAX_LIST * MAX_LIST * NR_FILLS, sizeof(*cells));
	if (!cells || bench_json_open(&r->json, r->json_path)) {
		if (!cells)
			fprintf(stderr, "tally: out of memory\n");
		free(cells);
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "tally bench charge%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "charge");
	bench_machine_json(&r->json, &m);
	json_settings(r);
	print_cost_header(r);
	bench_json_begin(&r->json, "charge", '[', false);
	for (unsigned int d = 0; d < r->nr_depths && !err; d++) {
		for (unsigned int f = 0; f < NR_FILLS && !err; f++) {
			if (!(r->fills & (1u << f)))
				continue;
			for (unsigned int t = 0; t < r->nr_threads && !err; t++) {
				struct cell *c = &cells[nr];

				c->threads = r->threads[t];
				c->depth = r->depths[d];
				c->fill = (enum fill)f;
				err = measure_cost(r, c);
				if (!err)
					err = measure_accuracy(r, c);
				if (err)
					break;
				print_cost_row(r, c);
				json_cell(r, c);
				fflush(r->out);
				nr++;
			}
		}
	}
	bench_json_end(&r->json);
	if (!err)
		print_accuracy(r, cells, nr);
	if (!err)
		err = measure_error(r);
	if (!err) {
		double load;

		print_legend(r);
		/* The machine line has the load at the start; this, at the end. */
		if (getloadavg(&load, 1) == 1)
			fprintf(r->out, "load average (1 min) at the end: %.2f\n",
				load);
	}
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(cells);
	free(r);
	return err ? 1 : 0;
}
