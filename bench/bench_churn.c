// SPDX-License-Identifier: MIT
/*
 * bench_churn.c - `tally bench churn`: a memory group per query, the way
 * a service uses them for months.  Every thread runs queries; a query
 * creates a group under a tenant, charges it (4 charges of 4 KiB), destroys
 * it while its memory is still charged, then uncharges through the
 * destroyed group's handle and puts the handle.  Reported per row (domain
 * x threads): queries per second, the process's resident memory and open
 * descriptors after the first checkpoint and at the end (they must not
 * grow with the number of queries), the groups the tree still holds, and
 * the root's drained usage at the end (must be 0: nothing lost).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/domain.h>
#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "parallel.h"

#define MAX_ROWS 8
#define CHARGE 4096l
#define CHARGES 4

struct run {
	unsigned int threads[MAX_ROWS], nr_threads;
	unsigned int cpus[MAX_ROWS], nr_cpus;	/* 0: the system domain */
	unsigned long queries, checkpoint;
	const char *json_path;
	struct bench_json json;
	FILE *out;
};

struct job {
	struct tally_memcg *tenant;
	unsigned int simulated_cpus;
	unsigned long per_thread;
	unsigned long checkpoint;	/* per thread */
	int failed;
	/* Threads meet here at the checkpoint; the first one measures. */
	unsigned int arrived;
	unsigned int leaving;
	long rss_kib_checkpoint;
	long fds_checkpoint;
	unsigned int nr;
};

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3;	/* ".", ".." and the directory itself */
}

static int charge(struct job *j, struct tally_memcg *g, unsigned int cpu)
{
	return j->simulated_cpus ? tally_memcg_charge_cpu(g, cpu, CHARGE, 0) :
				   tally_memcg_charge(g, CHARGE, 0);
}

static int uncharge(struct job *j, struct tally_memcg *g, unsigned int cpu)
{
	return j->simulated_cpus ? tally_memcg_uncharge_cpu(g, cpu, CHARGE) :
				   tally_memcg_uncharge(g, CHARGE);
}

/* One query: create, charge, destroy, uncharge, put. */
static int query(struct job *j, unsigned int index, unsigned long i)
{
	unsigned int cpu = j->simulated_cpus ?
		(unsigned int)((index * 7919ul + i) % j->simulated_cpus) : 0;
	struct tally_memcg *g;
	char name[32];
	int err;

	snprintf(name, sizeof(name), "q%u.%lu", index, i);
	err = tally_memcg_create(j->tenant, name, &g);
	if (err)
		return err;
	for (int c = 0; c < CHARGES && !err; c++)
		err = charge(j, g, cpu);
	if (!err)
		err = tally_memcg_destroy(g);
	for (int c = 0; c < CHARGES && !err; c++)
		err = uncharge(j, g, cpu);
	tally_memcg_put(g);
	return err < 0 ? err : 0;
}

static void churn_thread(void *arg, unsigned int index)
{
	struct job *j = arg;

	for (unsigned long i = 0; i < j->per_thread; i++) {
		if (i == j->checkpoint) {
			/* The last thread to arrive measures; all wait. */
			if (__atomic_add_fetch(&j->arrived, 1, __ATOMIC_ACQ_REL) ==
			    j->nr) {
				j->rss_kib_checkpoint = bench_rss_kib();
				j->fds_checkpoint = open_fds();
				__atomic_store_n(&j->leaving, 1, __ATOMIC_RELEASE);
			}
			while (!__atomic_load_n(&j->leaving, __ATOMIC_ACQUIRE))
				sched_yield();
		}
		if (query(j, index, i)) {
			__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

static void usage(FILE *f)
{
	fputs("usage: tally bench churn [--json FILE] [--threads LIST] [--cpus LIST]\n"
	      "                         [--queries N]\n"
	      "\n"
	      "A memory group per query: create, charge 4 x 4 KiB, destroy, uncharge\n"
	      "through the destroyed group's handle, put.  Queries per second, resident\n"
	      "memory and open descriptors at 1/10 of the queries and at the end.\n"
	      "\n"
	      "  --json FILE     also write the figures as JSON to FILE (\"-\": stdout)\n"
	      "  --threads LIST  thread counts, 1 to 64 (default 2,8)\n"
	      "  --cpus LIST     0 (this machine's CPUs, rseq stocks) or a simulated\n"
	      "                  domain's CPU count, 1 to 4096 (default 0,384)\n"
	      "  --queries N     queries per row, 10 to 100000000 (default 10000000)\n"
	      "  -h, --help      show this help\n", f);
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		return 0;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_ROWS, 1, 64,
				     &r->nr_threads);
	case 'c':
		return tool_opt_list(arg, r->cpus, MAX_ROWS, 0, 4096,
				     &r->nr_cpus);
	case 'q':
		return tool_opt_uint(arg, 10, 100000000ul, &r->queries);
	}
	return 0;
}

static int run_row(struct run *r, unsigned int cpus, unsigned int threads)
{
	struct tally_memcg_options opts = { 0 };
	struct tally_domain *dom = NULL;
	struct tally_memcg_tree *t = NULL;
	struct tally_memcg_range end_usage;
	struct tally_memcg_info info;
	struct job j = { 0 };
	uint64_t ns = 0;
	long rss_end, fds_end;
	int err;

	if (cpus) {
		err = tally_domain_create_simulated(&dom, cpus,
						    TALLY_GROUP_LOW_BITS);
		if (err)
			return err;
		opts.domain = dom;
	}
	err = tally_memcg_tree_create(&t, &opts);
	if (!err)
		err = tally_memcg_create(tally_memcg_root(t), "tenant",
					 &j.tenant);
	if (err)
		goto out;
	j.simulated_cpus = cpus;
	j.nr = threads;
	j.per_thread = r->queries / threads;
	j.checkpoint = j.per_thread / 10;
	err = bench_run_parallel(threads, churn_thread, &j, &ns, 0);
	if (!err && j.failed)
		err = -EIO;
	if (err)
		goto out;
	rss_end = bench_rss_kib();
	fds_end = open_fds();
	tally_memcg_usage(tally_memcg_root(t), TALLY_MEMCG_READ_DRAIN,
			  &end_usage);
	tally_memcg_tree_info(t, &info);
	{
		unsigned long done = j.per_thread * threads;
		double qps = ns ? done * 1e9 / (double)ns : 0;

		fprintf(r->out,
			"%-9s %5u %7u %9lu %10.0f %9ld %9ld %8ld %7ld %6lu %7lu %7ld\n",
			cpus ? "simulated" : "system", cpus, threads, done, qps, j.rss_kib_checkpoint, rss_end,
			j.fds_checkpoint, fds_end, info.groups, info.zombies,
			end_usage.value);
		bench_json_begin(&r->json, NULL, '{', false);
		bench_json_int(&r->json, "cpus", cpus);
		bench_json_bool(&r->json, "simulated", cpus != 0);
		bench_json_int(&r->json, "threads", threads);
		bench_json_int(&r->json, "queries", (long long)done);
		bench_json_double(&r->json, "queries_per_s", qps);
		bench_json_int(&r->json, "checkpoint_queries",
			       (long long)(j.checkpoint * threads));
		bench_json_int(&r->json, "rss_kib_checkpoint",
			       j.rss_kib_checkpoint);
		bench_json_int(&r->json, "rss_kib_end", rss_end);
		bench_json_int(&r->json, "fds_checkpoint", j.fds_checkpoint);
		bench_json_int(&r->json, "fds_end", fds_end);
		bench_json_int(&r->json, "groups_left", (long long)info.groups);
		bench_json_int(&r->json, "zombies_left",
			       (long long)info.zombies);
		bench_json_int(&r->json, "root_usage_end_B", end_usage.value);
		bench_json_end(&r->json);
	}
	if (end_usage.value)
		fprintf(stderr, "tally: churn lost bytes: root usage %ld\n",
			end_usage.value);
	err = end_usage.value ? -EIO : 0;
out:
	tally_memcg_put(j.tenant);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(dom);
	return err;
}

int tally_bench_churn(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "queries", required_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run r = { .threads = { 2, 8 }, .nr_threads = 2,
			 .cpus = { 0, 384 }, .nr_cpus = 2,
			 .queries = 10000000ul };
	static const struct tool_command cmd = {
		"bench churn", usage, "", longopts, option, false
	};
	struct bench_machine m;
	int err;

	err = tool_parse_options(&cmd, argc, argv, &r, NULL);
	if (err)
		return err > 0 ? 0 : 2;
	if (bench_json_open(&r.json, r.json_path))
		return 1;
	r.out = r.json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r.out, "tally bench churn\n");
	bench_machine_print(r.out, &m);
	fprintf(r.out, "a group per query: create, charge 4 x 4 KiB, destroy, "
		"uncharge, put\n");
	fprintf(r.out, "%-9s %5s %7s %9s %10s %9s %9s %8s %7s %6s %7s %7s\n",
		"domain", "cpus", "threads", "queries", "queries/s",
		"rss@1/10", "rss_end", "fds@1/10", "fds_end", "groups",
		"zombies", "root_B");
	fprintf(r.out, "(rss in KiB; groups and zombies left in the tree, root_B "
		"its drained usage at the end: 0 = nothing lost)\n");
	bench_json_begin(&r.json, NULL, '{', false);
	bench_json_identity(&r.json, "churn");
	bench_machine_json(&r.json, &m);
	bench_json_begin(&r.json, "rows", '[', false);
	err = 0;
	for (unsigned int c = 0; c < r.nr_cpus && !err; c++)
		for (unsigned int i = 0; i < r.nr_threads && !err; i++) {
			err = run_row(&r, r.cpus[c], r.threads[i]);
			fflush(r.out);
		}
	bench_json_end(&r.json);
	if (err)
		fprintf(stderr, "tally: benchmark stopped: %s\n",
			strerror(-err));
	bench_json_load_end(&r.json);
	if (bench_json_close(&r.json))
		err = -1;
	return err ? 1 : 0;
}
