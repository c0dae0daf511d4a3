// SPDX-License-Identifier: MIT
/*
 * bench_oom.c - `tally bench oom`: choosing a victim among N tasks on a
 * simulated domain of C CPUs, the precise scan (every task's counters
 * summed over every CPU, the kernel without a 2-pass selection) against
 * the 2-pass selection (tally/oom.h), on the same tasks in the same run.
 *
 * Tasks: resident sizes drawn like a real machine's - 90% small (1 to
 * 64 MiB), 9% medium (64 MiB to 1 GiB), 1% large (1 to 8 GiB), log-uniform
 * within each class - split 60% anon, 30% file, 5% shmem, 5% swap, page
 * tables 1/512 of the total, each item spread over random CPUs by adds of
 * whole 4 KiB pages (so slots hold random remainders, as after real
 * faults).  Default batch: 32 pages (TALLY_MM_DEFAULT_BATCH).
 *
 * Trials: before each, a tenth of the tasks (at random) take a new size
 * drawn from the same distribution, as if processes had ended and others
 * started: sizes, remainders and the ranking change from trial to trial
 * while the distribution stays the same.  Then each method selects, in
 * alternating order, after a 128 MiB buffer is written to push the tasks
 * out of the caches, as an OOM event finds them; their victims are
 * compared.  Median and p99 (nearest rank) of
 * the trials: 101 trials where a precise scan reads at most a million
 * slots, 31 up to four million, 9 beyond.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tally/oom.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "rand.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_CONFIGS 16
#define MAX_TRIALS 1001
#define PAGE 4096l
#define EVICT_BYTES (128ul << 20)
#define SEED 0x0cc1a5e5ull

/* The default rows: tasks x CPUs. */
static const struct config {
	unsigned int tasks, cpus;
} default_configs[] = {
	{ 40, 256 }, { 10000, 256 }, { 1000, 64 }, { 10000, 64 },
	{ 1000, 4096 }, { 10000, 4096 },
};

struct run {
	struct config configs[MAX_CONFIGS];
	unsigned int nr_configs;
	unsigned int trials;
	unsigned int max_precise;
	bool quick;
	const char *json_path;
	struct bench_json json;
	FILE *out;
	unsigned char *evict;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench oom [--json FILE] [--tasks LIST --cpus LIST] [--trials N]\n"
		"                       [--max-precise N] [--quick]\n"
		"\n"
		"Choose an out-of-memory victim among N tasks on C simulated CPUs: the\n"
		"precise scan (every task summed over every CPU) against tally's 2-pass\n"
		"selection, on the same tasks, a tenth of them resized between trials,\n"
		"with cold caches.  Prints times, ratios, precise sums, whether both\n"
		"chose the same task, and the memory per task.\n"
		"\n"
		"  --json FILE        also write the figures as JSON to FILE; \"-\" means\n"
		"                     standard output (the tables then go to standard error)\n"
		"  --tasks LIST       task counts (with --cpus: every pair; default: 40 and\n"
		"                     10000 at 256 CPUs, 1000 and 10000 at 64 and 4096)\n"
		"  --cpus LIST        simulated CPU counts, 1 to 4096\n"
		"  --trials N         selections per method and row (default 101, 31 where\n"
		"                     tasks x CPUs passes 1 million, 9 past 4 million;\n"
		"                     --quick: 5); p99 is the nearest rank, so below 100\n"
		"                     trials it is the slowest trial\n"
		"  --max-precise N    the 2-pass budget of precise sums (default 16; \"all\":\n"
		"                     no limit, every choice proven)\n"
		"  --quick            fewer trials: a quick look\n"
		"  -h, --help         show this help\n");
}


/* The option lists, kept until the pairs are made. */
struct options {
	struct run *r;
	unsigned int tasks[MAX_CONFIGS], cpus[MAX_CONFIGS];
	unsigned int nr_tasks, nr_cpus;
};

static int option(int opt, char *arg, void *ctx)
{
	struct options *p = ctx;
	struct run *r = p->r;
	unsigned long one;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, p->tasks, MAX_CONFIGS, 1, 1000000,
				     &p->nr_tasks);
	case 'c':
		return tool_opt_list(arg, p->cpus, MAX_CONFIGS, 1,
				     TALLY_SIMULATED_MAX_CPUS, &p->nr_cpus);
	case 'n':
		if (tool_opt_uint(arg, 1, MAX_TRIALS, &one))
			return -1;
		r->trials = (unsigned int)one;
		break;
	case 'm':
		if (!strcmp(arg, "all"))
			one = UINT_MAX;
		else if (tool_opt_uint(arg, 0, UINT_MAX - 1, &one))
			return -1;
		r->max_precise = (unsigned int)one;
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
		{ "tasks", required_argument, NULL, 't' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "trials", required_argument, NULL, 'n' },
		{ "max-precise", required_argument, NULL, 'm' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench oom", usage, "", longopts, option, false
	};
	struct options p = { .r = r };
	int err;

	r->max_precise = TALLY_OOM_DEFAULT_MAX_PRECISE;
	err = tool_parse_options(&cmd, argc, argv, &p, NULL);
	if (err)
		return err;
	if (!p.nr_tasks != !p.nr_cpus)
		return tool_usage_error("--tasks and --cpus go together");
	if (!p.nr_tasks) {
		r->nr_configs = ARRAY_SIZE(default_configs);
		memcpy(r->configs, default_configs, sizeof(default_configs));
		return 0;
	}
	if (p.nr_tasks * p.nr_cpus > MAX_CONFIGS)
		return tool_usage_error("more than 16 task x CPU pairs "
					"(--tasks x --cpus)");
	for (unsigned int c = 0; c < p.nr_cpus; c++)
		for (unsigned int t = 0; t < p.nr_tasks; t++)
			r->configs[r->nr_configs++] =
				(struct config){ p.tasks[t], p.cpus[c] };
	return 0;
}

/* ---- the population ------------------------------------------------------ */

struct population {
	struct tally_domain *d;
	struct tally_mm *mm;
	struct tally_oom_candidate *cand;
	long *anon;		/* each task's anonymous bytes, for the churn */
	unsigned int nr;
	uint64_t rng;
};

/* Log-uniform in [lo, hi) bytes, whole pages. */
static long log_uniform(uint64_t *rng, double lo, double hi)
{
	double u = (double)(bench_rand(rng) >> 11) / (double)(1ull << 53);

	return (long)(exp(log(lo) + u * (log(hi) - log(lo))) / PAGE) * PAGE;
}

/* A resident size: 90% 1-64 MiB, 9% 64 MiB-1 GiB, 1% 1-8 GiB. */
static long draw_rss(uint64_t *rng)
{
	static const double mib = 1 << 20;
	unsigned int cls = (unsigned int)(bench_rand(rng) % 100);

	return cls < 90 ? log_uniform(rng, mib, 64 * mib) :
	       cls < 99 ? log_uniform(rng, 64 * mib, 1024 * mib) :
			  log_uniform(rng, 1024 * mib, 8192 * mib);
}

/* Add @bytes to @item of task @t in page-sized pieces on random CPUs. */
static int spread(struct population *p, unsigned int t,
		  enum tally_mm_item item, long bytes)
{
	unsigned int nr = tally_domain_nr_cpus(p->d);
	unsigned int pieces = 1 + (unsigned int)(bench_rand(&p->rng) % 8);

	for (unsigned int i = 0; i < pieces; i++) {
		long part = i + 1 == pieces ? bytes : bytes / pieces / PAGE * PAGE;

		if (tally_mm_add_cpu(&p->mm[t],
				     (unsigned int)(bench_rand(&p->rng) % nr),
				     item, part))
			return -1;
		bytes -= part;
	}
	return 0;
}

static void population_free(struct population *p)
{
	for (unsigned int t = 0; t < p->nr; t++) {
		for (unsigned int k = 0; k < TALLY_MM_NR_ITEMS; k++)
			tally_counter_set(&p->mm[t].counters[k], 0);
		tally_mm_destroy(&p->mm[t]);
	}
	free(p->mm);
	free(p->cand);
	free(p->anon);
	tally_domain_destroy(p->d);
	memset(p, 0, sizeof(*p));
}

static int population_make(struct population *p, const struct config *c)
{
	memset(p, 0, sizeof(*p));
	p->rng = SEED ^ c->tasks ^ ((uint64_t)c->cpus << 32);
	if (tally_domain_create_simulated(&p->d, c->cpus, TALLY_GROUP_LOW_BITS))
		return -1;
	p->mm = calloc(c->tasks, sizeof(*p->mm));
	p->cand = calloc(c->tasks, sizeof(*p->cand));
	p->anon = calloc(c->tasks, sizeof(*p->anon));
	if (!p->mm || !p->cand || !p->anon)
		goto fail;
	for (unsigned int t = 0; t < c->tasks; t++) {
		long rss = draw_rss(&p->rng);

		if (tally_mm_init(&p->mm[t], p->d, 0, NULL))
			goto fail;
		p->nr++;
		p->cand[t].mm = &p->mm[t];
		p->anon[t] = rss / 10 * 6 / PAGE * PAGE;
		if (spread(p, t, TALLY_MM_ANON, p->anon[t]) ||
		    spread(p, t, TALLY_MM_FILE, rss / 10 * 3 / PAGE * PAGE) ||
		    spread(p, t, TALLY_MM_SHMEM, rss / 20 / PAGE * PAGE) ||
		    spread(p, t, TALLY_MM_SWAP, rss / 20 / PAGE * PAGE) ||
		    spread(p, t, TALLY_MM_PGTABLES, rss / 512 / PAGE * PAGE))
			goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "tally: cannot build %u tasks on %u CPUs: out of memory\n",
		c->tasks, c->cpus);
	population_free(p);
	return -1;
}

/* Between trials: a tenth of the tasks take a new anonymous size. */
static void churn(struct population *p)
{
	for (unsigned int i = 0; i < p->nr / 10 + 1; i++) {
		unsigned int t = (unsigned int)(bench_rand(&p->rng) % p->nr);
		long anon = draw_rss(&p->rng) / 10 * 6 / PAGE * PAGE;

		spread(p, t, TALLY_MM_ANON, anon - p->anon[t]);
		p->anon[t] = anon;
	}
}

/* Push the tasks out of the caches. */
static void evict(struct run *r)
{
	for (size_t i = 0; i < EVICT_BYTES; i += 64)
		r->evict[i]++;
}

/* ---- measurement ----------------------------------------------------------- */

enum method { PRECISE, TWO_PASS, NR_METHODS };
static const char *const method_names[NR_METHODS] = { "precise", "two_pass" };

struct row {
	double us[NR_METHODS][MAX_TRIALS];
	unsigned int max_sums[NR_METHODS];
	unsigned int same, exact, trials;
};

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile @q of @n samples (sorts them). */
static double percentile(double *v, unsigned int n, double q)
{
	unsigned int rank = (unsigned int)ceil(q * n);

	qsort(v, n, sizeof(*v), compare_double);
	return v[rank ? rank - 1 : 0];
}

static int select_timed(struct run *r, struct population *p, enum method m,
			struct tally_oom_result *res, double *us)
{
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	uint64_t t0;
	int err;

	o.method = m == PRECISE ? TALLY_OOM_PRECISE : TALLY_OOM_TWO_PASS;
	o.max_precise = r->max_precise;
	t0 = bench_now_ns();
	err = tally_oom_select(p->cand, p->nr, &o, res);
	*us = (double)(bench_now_ns() - t0) / 1e3;
	if (err)
		fprintf(stderr, "tally: tally_oom_select: %s\n", strerror(-err));
	return err;
}

static int measure_row(struct run *r, const struct config *c, struct row *row)
{
	struct population p;
	unsigned int trials = r->trials;

	if (!trials)
		trials = r->quick ? 5 :
			 (unsigned long)c->tasks * c->cpus > 4000000 ? 9 :
			 (unsigned long)c->tasks * c->cpus > 1000000 ? 31 : 101;
	if (population_make(&p, c))
		return -1;
	memset(row, 0, sizeof(*row));
	row->trials = trials;
	for (unsigned int n = 0; n < trials; n++) {
		struct tally_oom_result res[NR_METHODS];

		churn(&p);
		for (unsigned int i = 0; i < NR_METHODS; i++) {
			/* Alternate which method goes first. */
			enum method m = (enum method)((i + n) % NR_METHODS);

			evict(r);
			if (select_timed(r, &p, m, &res[m], &row->us[m][n])) {
				population_free(&p);
				return -1;
			}
			if (res[m].precise_sums > row->max_sums[m])
				row->max_sums[m] = res[m].precise_sums;
		}
		row->same += res[PRECISE].index == res[TWO_PASS].index;
		row->exact += res[TWO_PASS].exact;
	}
	population_free(&p);
	return 0;
}

static size_t bytes_per_task(unsigned int cpus)
{
	struct tally_domain *d;
	size_t bytes;

	if (tally_domain_create_simulated(&d, cpus, TALLY_GROUP_LOW_BITS))
		return 0;
	bytes = sizeof(struct tally_mm) + tally_mm_items_size(d) +
		TALLY_MM_NR_ITEMS * sizeof(long) * cpus;
	tally_domain_destroy(d);
	return bytes;
}

static void print_header(FILE *f)
{
	fprintf(f, "\n%7s %5s  %-9s %12s %12s %8s %9s %6s %7s\n", "tasks",
		"CPUs", "method", "median_us", "p99_us", "speedup",
		"precise", "same", "exact");
}

static void report_row(struct run *r, const struct config *c,
		       struct row *row)
{
	double median[NR_METHODS], p99[NR_METHODS];

	for (unsigned int m = 0; m < NR_METHODS; m++) {
		median[m] = percentile(row->us[m], row->trials, 0.5);
		p99[m] = percentile(row->us[m], row->trials, 0.99);
	}
	for (unsigned int m = 0; m < NR_METHODS; m++) {
		char speedup[16] = "1.0x", same[16] = "-", exact[16] = "-";

		if (m == TWO_PASS) {
			snprintf(speedup, sizeof(speedup), "%.1fx",
				 median[PRECISE] / median[TWO_PASS]);
			snprintf(same, sizeof(same), "%u/%u", row->same,
				 row->trials);
			snprintf(exact, sizeof(exact), "%u/%u", row->exact,
				 row->trials);
		}
		fprintf(r->out, "%7u %5u  %-9s %12.1f %12.1f %8s %9u %6s %7s\n",
			c->tasks, c->cpus, method_names[m], median[m], p99[m],
			speedup, row->max_sums[m], same, exact);
		bench_json_begin(&r->json, NULL, '{', true);
		bench_json_int(&r->json, "tasks", c->tasks);
		bench_json_int(&r->json, "cpus", c->cpus);
		bench_json_string(&r->json, "method", method_names[m]);
		bench_json_double(&r->json, "median_us", median[m]);
		bench_json_double(&r->json, "p99_us", p99[m]);
		bench_json_int(&r->json, "precise_sums", row->max_sums[m]);
		bench_json_int(&r->json, "trials", row->trials);
		if (m == TWO_PASS) {
			/* The precise scan is the reference it is compared to. */
			bench_json_bool(&r->json, "same_victim",
					row->same == row->trials);
			bench_json_int(&r->json, "same_victim_trials",
				       row->same);
			bench_json_int(&r->json, "exact_trials", row->exact);
		}
		bench_json_end(&r->json);
	}
}

static void report_memory(struct run *r)
{
	unsigned int seen[MAX_CONFIGS], nr = 0;

	fprintf(r->out, "\nmemory per task (struct + tree items + per-CPU slots)\n");
	fprintf(r->out, "%5s %12s\n", "CPUs", "bytes");
	bench_json_begin(&r->json, "memory", '[', false);
	for (unsigned int i = 0; i < r->nr_configs; i++) {
		unsigned int cpus = r->configs[i].cpus, k;

		for (k = 0; k < nr && seen[k] != cpus; k++)
			;
		if (k < nr)
			continue;
		seen[nr++] = cpus;
		fprintf(r->out, "%5u %12zu\n", cpus, bytes_per_task(cpus));
		bench_json_begin(&r->json, NULL, '{', true);
		bench_json_int(&r->json, "cpus", cpus);
		bench_json_int(&r->json, "bytes_per_task",
			       (long long)bytes_per_task(cpus));
		bench_json_end(&r->json);
	}
	bench_json_end(&r->json);
}

int tally_bench_oom(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct row *row = calloc(1, sizeof(*row));
	struct bench_machine m;
	int err = 0;

	if (!r || !row) {
		fprintf(stderr, "tally: out of memory\n");
		free(r);
		free(row);
		return 1;
	}
	err = parse_options(r, argc, argv);
	if (err) {
		free(r);
		free(row);
		return err > 0 ? 0 : 2;
	}
	r->evict = calloc(1, EVICT_BYTES);
	if (!r->evict || bench_json_open(&r->json, r->json_path)) {
		free(r->evict);
		free(r);
		free(row);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "tally bench oom%s\n", r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	fprintf(r->out,
		"victim selection, precise scan vs 2-pass (budget %u precise sums); "
		"time per selection in us, caches cold\n",
		r->max_precise);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "oom");
	bench_machine_json(&r->json, &m);
	bench_json_begin(&r->json, "settings", '{', false);
	bench_json_int(&r->json, "batch_bytes", (long long)TALLY_MM_DEFAULT_BATCH);
	bench_json_int(&r->json, "max_precise", r->max_precise);
	bench_json_string(&r->json, "churn",
			  "a tenth of the tasks redrawn before each trial");
	bench_json_int(&r->json, "evict_bytes", (long long)EVICT_BYTES);
	bench_json_string(&r->json, "distribution",
			  "90% 1-64 MiB, 9% 64 MiB-1 GiB, 1% 1-8 GiB, log-uniform");
	bench_json_end(&r->json);
	print_header(r->out);
	bench_json_begin(&r->json, "select", '[', false);
	for (unsigned int i = 0; i < r->nr_configs && !err; i++) {
		err = measure_row(r, &r->configs[i], row);
		if (!err)
			report_row(r, &r->configs[i], row);
		fflush(r->out);
	}
	bench_json_end(&r->json);
	if (!err)
		report_memory(r);
	if (err)
		fprintf(stderr, "tally: benchmark stopped\n");
	bench_json_load_end(&r->json);
	if (bench_json_close(&r->json))
		err = -1;
	free(r->evict);
	free(r);
	free(row);
	return err ? 1 : 0;
}
