// SPDX-License-Identifier: MIT
/*
 * info.c - `tally info`: how tally runs on this machine (or on a simulated
 * domain of --cpus CPUs): the rseq mode, the possible and online CPUs, the
 * counter tree's shape and CPU grouping, membarrier(), the accuracy
 * bounds of a counter and of a statistics tree's reads for a batch, and
 * how memory groups take their per-CPU stocks.
 *
 * Every figure comes from the library's public calls (tally_domain_shape(),
 * tally_counter_accuracy(), tally_stats_read_bound(), ...): what the tool
 * prints is what a program linked with tally gets.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tally/counter.h>
#include <tally/domain.h>
#include <tally/memcg.h>
#include <tally/percpu.h>
#include <tally/stats.h>
#include <tally/version.h>

#include "../tool/args.h"
#include "../tool/machine.h"
#include "cli.h"

#define COUNTER_BATCH 32ul	/* the kernel's RSS counters */
#define STATS_BATCH 64ul	/* the stats tree's default */
#define MAX_BATCH (1ul << 30)
#define SHOWN_CPUS 16u

struct info_args {
	unsigned long batch;	/* 0: each default */
	unsigned int cpus;	/* 0: this machine */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally info [--batch N] [--cpus N]\n"
		"\n"
		"How tally runs on this machine: the rseq mode, the possible and online\n"
		"CPUs, the counter tree's shape and CPU grouping, membarrier(), the\n"
		"accuracy bounds of a counter and of a statistics tree's if-needed reads,\n"
		"and how memory groups take their per-CPU stocks.\n"
		"\n"
		"  --batch N   the batch of the bounds, a power of two from 2 to 2^30\n"
		"              (default: 32 for counters, as the kernel's RSS counters,\n"
		"              64 for statistics trees, their default)\n"
		"  --cpus N    the tree and bounds of a simulated domain of N CPUs (1 to\n"
		"              4096, low-bits grouping) instead of this machine's\n"
		"  -h, --help  show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	struct info_args *a = ctx;
	unsigned long v;

	switch (opt) {
	case 'b':
		if (tool_opt_uint(arg, 2, MAX_BATCH, &v))
			return -1;
		if (v & (v - 1))
			return tool_bad_value(arg, "a power of two from 2 to 2^30");
		a->batch = v;
		break;
	case 'c':
		if (tool_opt_uint(arg, 1, TALLY_SIMULATED_MAX_CPUS, &v))
			return -1;
		a->cpus = (unsigned int)v;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for a bad command line. */
static int parse(struct info_args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	static const struct tool_command cmd = {
		"info", usage, "", longopts, option, false
	};

	return tool_parse_options(&cmd, argc, argv, a, NULL);
}

/* The first line of /sys/devices/system/cpu/@name, or "unknown". */
static void cpu_list(const char *name, char *buf, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/%s", name);
	f = fopen(path, "r");
	if (!f || !fgets(buf, (int)len, f))
		snprintf(buf, len, "unknown");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static void print_cpus(void)
{
	char possible[256], online[256];

	cpu_list("possible", possible, sizeof(possible));
	cpu_list("online", online, sizeof(online));
	printf("CPUs:             possible %s, online %s (%ld online)\n",
	       possible, online, sysconf(_SC_NPROCESSORS_ONLN));
}

static void print_tree(const struct tally_domain *d)
{
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned int levels = tally_domain_shape(d, arity);
	unsigned int nr = tally_domain_nr_cpus(d);

	printf("per-CPU slots:    %u\n", nr);
	printf("counter tree:     %u level%s above the CPUs, arity {", levels,
	       levels == 1 ? "" : "s");
	for (unsigned int l = 0; l < levels; l++)
		printf("%s%u", l ? "," : "", arity[l]);
	printf("} (leaf level first)\n");
	printf("CPU grouping:     %s; leaf positions:",
	       tally_domain_grouping(d) == TALLY_GROUP_TOPOLOGY
		       ? "topology (NUMA node, cache, cluster, core)"
		       : "low bits (the kernel's rule)");
	for (unsigned int c = 0; c < nr && c < SHOWN_CPUS; c++)
		printf(" cpu%u=%d", c, tally_domain_cpu_position(d, c));
	printf("%s\n", nr > SHOWN_CPUS ? " ..." : "");
}

static const struct tally_stat_desc one_stat[] = {
	{ "x", TALLY_STAT_STATE },
};

/* The kernel's offer, and what a tree on the system domain does. */
static void print_membarrier(void)
{
	long mask = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	bool expedited = mask > 0 && (mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	struct tally_stats_tree *t = NULL;
	struct tally_stats_info info;
	bool known = !tally_stats_tree_create(&t, one_stat, 1, NULL) &&
		     !tally_stats_tree_info(t, &info);

	printf("membarrier:       kernel %s PRIVATE_EXPEDITED; statistics "
	       "trees %s\n",
	       mask < 0 ? "has no membarrier(), so no"
			: expedited ? "offers" : "does not offer",
	       !known ? "unknown (no tree could be created)"
	       : info.fenced ? "fence each update (no usable membarrier() or "
			       "TALLY_MEMBARRIER=off)"
			     : "flush with one membarrier() (updates need "
			       "no fence)");
	tally_stats_tree_destroy(t);
}

/* How memory groups take their stocks on @d, and what a read may miss. */
static void print_memcg(struct tally_domain *d)
{
	struct tally_memcg_options o = { .domain = d };
	struct tally_memcg_tree *t = NULL;
	struct tally_memcg_info info;
	unsigned int cpus = tally_domain_nr_cpus(d ? d : tally_domain_system());
	long fit = TALLY_MEMCG_STOCK_BUDGET / (2l * cpus) /
		   TALLY_MEMCG_DEFAULT_BATCH * TALLY_MEMCG_DEFAULT_BATCH;
	const long most =
		TALLY_MEMCG_MAX_BATCH_FACTOR * TALLY_MEMCG_DEFAULT_BATCH;
	/* The default max_batch of a tree on these CPUs (memcg.h). */
	const long max_batch = fit < TALLY_MEMCG_DEFAULT_BATCH ?
		TALLY_MEMCG_DEFAULT_BATCH : fit > most ? most : fit;

	if (tally_memcg_tree_create(&t, &o) ||
	    tally_memcg_tree_info(t, &info)) {
		printf("memory groups:    unknown (no tree could be created)\n");
		tally_memcg_tree_destroy(t);
		return;
	}
	printf("memory groups:    stocks taken %s, %lu bytes per tree (8 "
	       "slots per CPU, whatever the number of groups); an approximate "
	       "usage read is at most %ld bytes above the exact usage per "
	       "group of the subtree, up to 8 groups (2 x max batch %ld x %u "
	       "CPUs; at quiescence)\n",
	       info.rseq ? "by rseq (drains restart them with "
			   "membarrier(PRIVATE_EXPEDITED_RSEQ))"
			 : "with compare-and-swap (simulated domain, no rseq, "
			   "or no membarrier())",
	       info.stock_bytes, 2 * max_batch * (long)cpus, max_batch, cpus);
	tally_memcg_tree_destroy(t);
}

/* The bounds on domain @d (NULL: the system's): 0 or a negative errno. */
static int print_bounds(struct tally_domain *d, const struct info_args *a)
{
	unsigned long cb = a->batch ? a->batch : COUNTER_BATCH;
	struct tally_stats_options o = {
		.domain = d,
		.batch = a->batch ? a->batch : STATS_BATCH,
	};
	struct tally_stats_tree *t = NULL;
	unsigned long under, over;
	int err = tally_counter_accuracy(d, cb, &under, &over);

	if (err)
		return err;
	printf("counter accuracy: batch %lu: the approximate sum is at most "
	       "%lu below and %lu above the precise sum (at quiescence)\n",
	       cb, under, over);
	err = tally_stats_tree_create(&t, one_stat, 1, &o);
	if (!err)
		printf("stats read bound: batch %lu: an if-needed read misses "
		       "updates of |delta| adding up to at most %lu\n",
		       o.batch, tally_stats_read_bound(t));
	else if (err == -EINVAL)
		printf("stats read bound: batch %lu: too large for this many "
		       "CPUs (batch x CPUs over LONG_MAX / 8)\n", o.batch);
	tally_stats_tree_destroy(t);
	return err == -EINVAL ? 0 : err;
}

int tally_cmd_info(int argc, char **argv)
{
	struct info_args a = { 0 };
	struct tally_domain *d = NULL;
	int err = parse(&a, argc, argv);

	if (err)
		return err > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	printf("tally %s\n", tally_version());
	printf("rseq:             %s%s\n", tool_rseq_mode_name(),
	       tally_rseq_mode() == TALLY_RSEQ_FALLBACK
		       ? " (no rseq: atomic adds on sched_getcpu()'s slot)"
		       : "");
	print_cpus();
	if (a.cpus) {
		err = tally_domain_create_simulated(&d, a.cpus,
						    TALLY_GROUP_LOW_BITS);
		if (err) {
			fprintf(stderr, "tally: info: simulated domain: %s\n",
				strerror(-err));
			return CLI_EXIT_FAILED;
		}
		printf("simulated domain of %u CPUs:\n", a.cpus);
	} else if (!tally_domain_system()) {
		fprintf(stderr, "tally: info: the system's CPUs cannot be "
				"read: %s\n", strerror(errno));
		return CLI_EXIT_FAILED;
	}
	print_tree(d ? d : tally_domain_system());
	err = print_bounds(d, &a);
	print_membarrier();
	print_memcg(d);
	tally_domain_destroy(d);
	if (err) {
		fprintf(stderr, "tally: info: %s\n", strerror(-err));
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}
