// SPDX-License-Identifier: MIT
/*
 * bench_scale.c - `tally bench scale`: what memory groups cost as trees and
 * machines grow, on simulated CPU domains (each charge names its CPU):
 *
 *   memory  bytes of the per-CPU stocks and per group, at 64, 384 and
 *           4096 CPUs with 1,000 and 100,000 groups, every group charged
 *           on a different CPU so that the slots are in use; the process's
 *           resident growth per group is measured, not computed.
 *   drain   a refused charge in a subtree of 10 groups while the tree
 *           holds 10,000 groups whose stocks are filled on 384 CPUs: the
 *           drain and retry a refusal costs, in microseconds (median of
 *           the refusals).
 *   high    a charge that reaches the page counters (a fixed batch of one
 *           page, so each 8 KiB charge does) with 0 and with 20,000
 *           sibling groups above their high: ns per charge + uncharge.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/domain.h>
#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "measure.h"

#define KB 1024l

struct run {
	const char *json_path;
	struct bench_json json;
	FILE *out;
	bool quick;
};

static int simulated_tree(unsigned int cpus, long batch,
			  struct tally_domain **d, struct tally_memcg_tree **t)
{
	struct tally_memcg_options o = { .batch = batch, .max_batch = batch };
	int err = tally_domain_create_simulated(d, cpus, TALLY_GROUP_LOW_BITS);

	if (err)
		return err;
	o.domain = *d;
	err = tally_memcg_tree_create(t, &o);
	if (err)
		tally_domain_destroy(*d);
	return err;
}

/* @nr groups under @parent, named pN, each charged @bytes on a CPU. */
static int make_groups(struct tally_memcg *parent, unsigned long nr,
		       unsigned int cpus, long bytes, struct tally_memcg **out)
{
	for (unsigned long i = 0; i < nr; i++) {
		struct tally_memcg *g;
		char name[32];
		int err;

		snprintf(name, sizeof(name), "p%lu", i);
		err = tally_memcg_create(parent, name, &g);
		if (!err && bytes)
			err = tally_memcg_charge_cpu(g, (unsigned int)(i % cpus),
						     bytes, 0);
		if (err)
			return err;
		if (out)
			out[i] = g;
		else
			tally_memcg_put(g);
	}
	return 0;
}

static int phase_memory(struct run *r)
{
	static const unsigned int cpus[] = { 64, 384, 4096 };
	static const unsigned long groups[] = { 1000, 100000 };

	fprintf(r->out, "\nmemory: stocks per tree, bytes per group\n");
	fprintf(r->out, "%6s %8s %14s %14s %16s %16s\n", "cpus", "groups",
		"stock_bytes", "stock_per_cpu", "group_struct_B",
		"rss_per_group_B");
	bench_json_begin(&r->json, "memory", '[', false);
	for (unsigned int c = 0; c < 3; c++)
		for (unsigned int k = 0; k < 2; k++) {
			struct tally_domain *d;
			struct tally_memcg_tree *t;
			struct tally_memcg_info info;
			unsigned long nr = groups[k];
			long before, after;
			int err;

			if (r->quick && nr > 1000)
				continue;
			err = simulated_tree(cpus[c], 64 * KB, &d, &t);
			if (err)
				return err;
			before = bench_rss_kib();
			err = make_groups(tally_memcg_root(t), nr, cpus[c],
					  4 * KB, NULL);
			after = bench_rss_kib();
			tally_memcg_tree_info(t, &info);
			tally_memcg_tree_destroy(t);
			tally_domain_destroy(d);
			if (err)
				return err;
			fprintf(r->out, "%6u %8lu %14lu %14lu %16lu %16.0f\n",
				cpus[c], nr, info.stock_bytes,
				info.stock_bytes / cpus[c], info.group_bytes,
				(after - before) * 1024.0 / nr);
			bench_json_begin(&r->json, NULL, '{', false);
			bench_json_int(&r->json, "cpus", cpus[c]);
			bench_json_int(&r->json, "groups", (long long)nr);
			bench_json_int(&r->json, "stock_bytes",
				       (long long)info.stock_bytes);
			bench_json_int(&r->json, "stock_bytes_per_cpu",
				       (long long)(info.stock_bytes / cpus[c]));
			bench_json_int(&r->json, "group_struct_bytes",
				       (long long)info.group_bytes);
			bench_json_double(&r->json, "rss_bytes_per_group",
					  (after - before) * 1024.0 / nr);
			bench_json_end(&r->json);
		}
	bench_json_end(&r->json);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int phase_drain(struct run *r)
{
	const unsigned int cpus = 384;
	const unsigned long others = r->quick ? 1000 : 9990;
	struct tally_memcg *small, *sub[10], *rest;
	struct tally_domain *d;
	struct tally_memcg_tree *t;
	double us[64];
	int err, nr = r->quick ? 9 : 31;

	err = simulated_tree(cpus, 64 * KB, &d, &t);
	if (err)
		return err;
	err = tally_memcg_create(tally_memcg_root(t), "small", &small);
	if (!err)
		err = tally_memcg_create(tally_memcg_root(t), "rest", &rest);
	if (!err)
		err = make_groups(rest, others, cpus, 4 * KB, NULL);
	if (!err)
		err = make_groups(small, 10, cpus, 4 * KB, sub);
	if (!err)
		err = tally_memcg_set_limit(small, TALLY_MEMCG_MAX, 1024 * KB);
	/* Fill the subtree to its max, a page at a time on every CPU. */
	for (unsigned int i = 0; !err; i++)
		if (tally_memcg_charge_cpu(sub[i % 10], i % cpus, 4 * KB,
					   TALLY_MEMCG_NORECLAIM))
			break;
	for (int i = 0; i < nr && !err; i++) {
		uint64_t t0 = bench_now_ns();
		int ret = tally_memcg_charge_cpu(sub[i % 10],
						 (unsigned int)i % cpus,
						 64 * KB,
						 TALLY_MEMCG_NORECLAIM);

		us[i] = (bench_now_ns() - t0) / 1e3;
		if (ret != -ENOMEM)
			err = -EIO;
	}
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
	if (err)
		return err;
	qsort(us, (size_t)nr, sizeof(us[0]), cmp_double);
	fprintf(r->out, "\ndrain: a refusal in a subtree of 10 groups, tree of "
		"%lu groups, %u CPUs\n%12s %12s\n%12.1f %12.1f\n",
		others + 13, cpus, "median_us", "max_us", us[nr / 2],
		us[nr - 1]);
	bench_json_begin(&r->json, "drain", '{', false);
	bench_json_int(&r->json, "cpus", cpus);
	bench_json_int(&r->json, "groups", (long long)(others + 13));
	bench_json_int(&r->json, "subtree_groups", 10);
	bench_json_double(&r->json, "refusal_us_median", us[nr / 2]);
	bench_json_double(&r->json, "refusal_us_max", us[nr - 1]);
	bench_json_end(&r->json);
	return 0;
}

struct high_job {
	struct tally_memcg *g;
};

static double high_run(void *arg, unsigned long n)
{
	struct high_job *j = arg;
	uint64_t t0 = bench_now_ns();

	for (unsigned long i = 0; i < n; i++) {
		if (tally_memcg_charge_cpu(j->g, 0, 8 * KB, 0) < 0)
			return -1;
		tally_memcg_uncharge_cpu(j->g, 0, 8 * KB);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static int phase_high(struct run *r)
{
	const unsigned long siblings[] = { 0, r->quick ? 2000 : 20000 };
	double ns[2];

	for (int k = 0; k < 2; k++) {
		struct bench_plan plan = { 100000000ull, 5, 1000 };
		struct bench_result res;
		struct tally_domain *d;
		struct tally_memcg_tree *t;
		struct tally_memcg *parent, *me;
		struct high_job j;
		int err;

		err = simulated_tree(4, 4 * KB, &d, &t);
		if (err)
			return err;
		err = tally_memcg_create(tally_memcg_root(t), "parent", &parent);
		if (!err)
			err = tally_memcg_create(parent, "me", &me);
		for (unsigned long i = 0; i < siblings[k] && !err; i++) {
			struct tally_memcg *s;
			char name[32];

			snprintf(name, sizeof(name), "s%lu", i);
			err = tally_memcg_create(parent, name, &s);
			if (!err)
				err = tally_memcg_set_limit(s, TALLY_MEMCG_HIGH,
							    0);
			if (!err)
				err = tally_memcg_charge_cpu(s, 1, 4 * KB,
						TALLY_MEMCG_NORECLAIM) < 0;
			tally_memcg_put(s);
		}
		/* The parent above its high too: every charge notes it. */
		if (!err)
			err = tally_memcg_set_limit(parent, TALLY_MEMCG_HIGH, 0);
		j.g = me;
		if (!err)
			err = bench_measure(high_run, &j, &plan, &res);
		tally_memcg_tree_destroy(t);
		tally_domain_destroy(d);
		if (err)
			return err;
		ns[k] = res.median;
	}
	fprintf(r->out, "\nhigh: charge + uncharge of 8 KiB reaching the "
		"counters, parent above high\n%18s %18s %8s\n%18.1f %18.1f "
		"%8.2f\n", "0 siblings (ns)", "siblings above high", "ratio",
		ns[0], ns[1], ns[1] / ns[0]);
	bench_json_begin(&r->json, "high", '{', false);
	bench_json_int(&r->json, "siblings_over_high", (long long)siblings[1]);
	bench_json_double(&r->json, "ns_no_siblings", ns[0]);
	bench_json_double(&r->json, "ns_siblings_over_high", ns[1]);
	bench_json_end(&r->json);
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: tally bench scale [--json FILE] [--quick]\n"
	      "\n"
	      "Memory groups as trees and machines grow, on simulated CPUs: stock\n"
	      "memory per CPU and per group (64 to 4096 CPUs, 1,000 and 100,000\n"
	      "groups), the cost of a refusal's drain in a 10,000-group tree on 384\n"
	      "CPUs, and a charge's cost with 20,000 siblings above high.\n"
	      "\n"
	      "  --json FILE   also write the figures as JSON to FILE (\"-\": stdout)\n"
	      "  --quick       smaller trees: a quick look\n"
	      "  -h, --help    show this help\n", f);
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		return 0;
	case 'q':
		r->quick = true;
		return 0;
	}
	return 0;
}

int tally_bench_scale(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench scale", usage, "", longopts, option, false
	};
	struct run r = { 0 };
	struct bench_machine m;
	int err;

	err = tool_parse_options(&cmd, argc, argv, &r, NULL);
	if (err)
		return err > 0 ? 0 : 2;
	if (bench_json_open(&r.json, r.json_path))
		return 1;
	r.out = r.json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r.out, "tally bench scale%s\n", r.quick ? " (quick)" : "");
	bench_machine_print(r.out, &m);
	bench_json_begin(&r.json, NULL, '{', false);
	bench_json_identity(&r.json, "scale");
	bench_machine_json(&r.json, &m);
	err = phase_memory(&r);
	if (!err)
		err = phase_drain(&r);
	if (!err)
		err = phase_high(&r);
	if (err)
		fprintf(stderr, "tally: benchmark stopped: %s\n",
			strerror(err < 0 ? -err : EIO));
	bench_json_load_end(&r.json);
	if (bench_json_close(&r.json))
		err = -1;
	return err ? 1 : 0;
}
