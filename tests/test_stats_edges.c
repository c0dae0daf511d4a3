// SPDX-License-Identifier: MIT
/*
 * test_stats_edges.c - the statistics tree at its edges, one thread: bad
 * arguments and failed allocations that must leave the caller's pointer
 * alone, a zero-length path buffer, updates of 0, deltas near +-2^63, a
 * flat tree of 20,000 groups, the memory a group costs on a 4096-CPU
 * domain, and (plain builds) no allocation on the flush path.
 *
 * The allocation tests replace malloc and its relatives with wrappers
 * around glibc's own (__libc_malloc...) that count the calls of one thread
 * and can fail the n-th of them.  Sanitizers replace malloc themselves:
 * under ASan or TSan those tests are not built.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/stats.h>

#include "harness.h"
#include "util.h"
#include "../bench/stats_designs.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 1
#endif

static const struct tally_stat_desc schema[] = {
	{ "bytes", TALLY_STAT_STATE },
	{ "faults", TALLY_STAT_EVENT },
	{ "pages", TALLY_STAT_STATE },
};
#define NS ((unsigned int)ARRAY_SIZE(schema))

static struct tally_stats_tree *tree_on(struct tally_domain *d,
					enum bench_stats_design design)
{
	struct tally_stats_options o = { .domain = d };
	struct tally_stats_tree *t = NULL;

	if (!CHECK_EQ_LONG(bench_stats_tree_create(&t, schema, NS, &o, design),
			   0))
		return NULL;
	return t;
}


static long read_hier(struct tally_stats_group *g, unsigned int stat,
		      enum tally_flush_mode mode)
{
	long hier = 0x7eadbeef;

	CHECK_EQ_LONG(tally_stats_read(g, stat, mode, &hier, NULL), 0);
	return hier;
}

/* An update on @cpu of a simulated domain, or on this CPU. */
static int mod_on(struct tally_stats_group *g, bool simulated,
		  unsigned int cpu, unsigned int stat, long delta)
{
	if (simulated)
		return tally_stats_mod_cpu(g, cpu, stat, delta);
	return tally_stats_mod(g, stat, delta);
}

/* ---- failures leave the caller's pointer alone ---------------------------- */

#define SENTINEL ((struct tally_stats_tree *)0x5e47)

TEST(failed_tree_create_leaves_out_untouched_and_destroy_null_is_safe)
{
	static const struct tally_stat_desc dup[] = {
		{ "x", TALLY_STAT_STATE }, { "x", TALLY_STAT_EVENT },
	};
	static const struct tally_stat_desc unnamed[] = {
		{ NULL, TALLY_STAT_STATE },
	};
	static const struct tally_stat_desc spaced[] = {
		{ "a b", TALLY_STAT_STATE },
	};
	struct tally_stats_options bad_batch = { .batch = 3 };
	struct tally_stats_options one_batch = { .batch = 1 };
	struct {
		const struct tally_stat_desc *schema;
		unsigned int nr;
		const struct tally_stats_options *opts;
	} cases[] = {
		{ NULL, 1, NULL },
		{ schema, 0, NULL },
		{ schema, TALLY_STATS_MAX + 1, NULL },
		{ dup, 2, NULL },
		{ unnamed, 1, NULL },
		{ spaced, 1, NULL },
		{ schema, NS, &bad_batch },
		{ schema, NS, &one_batch },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct tally_stats_tree *t = SENTINEL;

		if (!CHECK_EQ_LONG(tally_stats_tree_create(&t, cases[i].schema,
							   cases[i].nr,
							   cases[i].opts),
				   -EINVAL) ||
		    !CHECK(t == SENTINEL)) {
			harness_log("case %zu", i);
			return;
		}
	}
	CHECK_EQ_LONG(tally_stats_tree_create(NULL, schema, NS, NULL),
		      -EINVAL);
	tally_stats_tree_destroy(NULL);
}

TEST(group_path_into_a_zero_length_buffer_is_enospc)
{
	struct tally_stats_tree *t = tree_on(NULL, BENCH_STATS_TALLY);
	struct tally_stats_group *a = NULL;
	char buf[8] = "xxxxxxx";

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	CHECK_EQ_LONG(tally_stats_group_path(a, buf, 0), -ENOSPC);
	/* Even the root's empty path needs its NUL. */
	CHECK_EQ_LONG(tally_stats_group_path(tally_stats_root(t), buf, 0),
		      -ENOSPC);
	CHECK_EQ_LONG(buf[0], 'x');
	CHECK_EQ_LONG(tally_stats_group_path(a, buf, 1), -ENOSPC);
	CHECK_EQ_LONG(tally_stats_group_path(a, buf, 2), 1);
	CHECK(!strcmp(buf, "a"));
	tally_stats_tree_destroy(t);
}

/* ---- updates of 0 ----------------------------------------------------------- */

/*
 * Flush @g until a flush visits no (group, CPU) pair, for at most 2 s:
 * groups made idle stay on the flush path until a barrier settles them
 * (one at most every 10 ms).  Returns what the last flush visited.
 */
static uint64_t settled_flush_visits(struct tally_stats_tree *t,
				     struct tally_stats_group *g)
{
	uint64_t n = 0;

	for (int i = 0; i < 1000; i++) {
		uint64_t before = util_stats_info(t).groups_flushed;

		CHECK_EQ_LONG(tally_stats_flush(g), 0);
		n = util_stats_info(t).groups_flushed - before;
		if (!n)
			break;
		usleep(2000);
	}
	return n;
}

/*
 * A zero delta changes nothing: it must not queue the group, so the next
 * flush visits no more (group, CPU) pairs than a flush with nothing to do.
 * A non-zero delta does queue it (the counter-check that the measure
 * sees queued groups at all).
 */
static void zero_delta_run(struct tally_domain *d)
{
	struct tally_stats_tree *t = tree_on(d, BENCH_STATS_TALLY);
	unsigned int nr = d ? tally_domain_nr_cpus(d) : 1;
	struct tally_stats_group *root, *a = NULL, *b = NULL;
	uint64_t before, idle, zero;

	if (!t)
		return;
	root = tally_stats_root(t);
	REQUIRE(tally_stats_group_create(root, "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &b) == 0);
	/* Leave every CPU idle, then measure a flush with nothing to do. */
	for (unsigned int cpu = 0; cpu < nr; cpu++)
		mod_on(b, d, cpu, 0, 1);
	idle = settled_flush_visits(t, root);

	before = util_stats_info(t).groups_flushed;
	for (int i = 0; i < 100; i++)
		for (unsigned int cpu = 0; cpu < nr; cpu++) {
			CHECK_EQ_LONG(mod_on(b, d, cpu, i % NS, 0), 0);
			CHECK_EQ_LONG(mod_on(a, d, cpu, 1, 0), 0);
		}
	CHECK_EQ_LONG(read_hier(root, 0, TALLY_FLUSH_FORCE), (long)nr);
	zero = util_stats_info(t).groups_flushed - before;
	CHECK_EQ_ULONG(zero, idle);

	before = util_stats_info(t).groups_flushed;
	mod_on(b, d, nr - 1, 2, 5);
	CHECK_EQ_LONG(read_hier(root, 2, TALLY_FLUSH_FORCE), 5);
	CHECK_CMP_ULONG(util_stats_info(t).groups_flushed - before, >, idle);
	tally_stats_tree_destroy(t);
}

TEST(zero_delta_does_not_queue_the_group)
{
	struct tally_domain *d = util_domain(8);

	zero_delta_run(d);
	tally_domain_destroy(d);
	/* The system domain (rseq update path). */
	zero_delta_run(NULL);
}

/* ---- barriers -------------------------------------------------------------- */

/*
 * Flushes take no barrier of their own: 2,000 forced reads, each after an
 * update, issue at most one membarrier() per 10 ms (plus one for the
 * first), not one per flush; and the groups they made
 * idle still leave the flush path (a settled flush visits nothing).
 */
TEST(forced_reads_share_rate_limited_barriers_and_groups_leave_the_flush_path)
{
	struct tally_stats_tree *t = tree_on(NULL, BENCH_STATS_TALLY);
	struct tally_stats_group *a = NULL, *b = NULL;
	long n = harness_scale(2000), v = -1;
	struct tally_stats_info info;
	double start, secs;

	REQUIRE(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	REQUIRE(tally_stats_group_create(a, "b", &b) == 0);
	start = harness_now();
	for (long i = 0; i < n; i++) {
		CHECK_EQ_LONG(tally_stats_mod(b, 0, 1), 0);
		CHECK_EQ_LONG(tally_stats_read(i % 2 ? a : b, 0,
					       TALLY_FLUSH_FORCE, &v, NULL),
			      0);
		CHECK_EQ_LONG(v, i + 1);
	}
	secs = harness_now() - start;
	info = util_stats_info(t);
	CHECK_CMP_ULONG(info.flushes, >=, (unsigned long)n);
	if (!CHECK_CMP_ULONG(info.barriers, <=,
			     (unsigned long)(secs / 0.010) + 2))
		harness_log("%lu barriers for %lu flushes in %.3f s",
			    (unsigned long)info.barriers,
			    (unsigned long)info.flushes, secs);
	CHECK_EQ_ULONG(settled_flush_visits(t, tally_stats_root(t)), 0);
	CHECK_EQ_LONG(read_hier(tally_stats_root(t), 0, TALLY_FLUSH_NONE), n);
	tally_stats_tree_destroy(t);
}

/* ---- deltas near +-2^63 --------------------------------------------------- */

/* |a - b| modulo 2^64: values wrap as documented. */
static unsigned long wrap_distance(unsigned long a, unsigned long b)
{
	unsigned long d = a - b;

	return d < -d ? d : -d;
}

/*
 * Huge deltas must count toward the thresholds as huge, never wrap them
 * into something small or negative that disables flushing: after each
 * update an if-needed read of the group and of its ancestors is within
 * the bound of the truth (modulo 2^64).  Ordinary updates follow, spread
 * over the CPUs, long enough to cross the threshold many times.
 */
static void huge_delta_run(struct tally_domain *d)
{
	static const long huge[] = {
		LONG_MIN, LONG_MAX, -2, LONG_MAX, LONG_MIN, LONG_MIN, 1,
		LONG_MAX, LONG_MAX, -LONG_MAX, 3, LONG_MIN + 1, LONG_MIN,
	};
	struct tally_stats_tree *t = tree_on(d, BENCH_STATS_TALLY);
	unsigned int nr = d ? tally_domain_nr_cpus(d) : 1;
	struct tally_stats_group *g[3];
	unsigned long truth = 0, bound;
	long steps;

	if (!t)
		return;
	bound = tally_stats_read_bound(t);
	steps = (long)ARRAY_SIZE(huge) + 4 * (long)bound;
	g[0] = tally_stats_root(t);
	REQUIRE(tally_stats_group_create(g[0], "a", &g[1]) == 0);
	REQUIRE(tally_stats_group_create(g[1], "b", &g[2]) == 0);
	for (long s = 0; s < steps; s++) {
		long delta = s < (long)ARRAY_SIZE(huge) ? huge[s]
							: (s % 3 ? 1 : -1);

		/* The huge ones again, halfway through the ordinary ones. */
		if (s == steps / 2)
			delta = LONG_MIN;
		CHECK_EQ_LONG(mod_on(g[2], d, (unsigned int)s % nr, 0, delta),
			      0);
		truth += (unsigned long)delta;
		for (int i = 0; i < 3; i++) {
			long v = read_hier(g[i], 0, TALLY_FLUSH_IF_NEEDED);

			if (!CHECK_LE_ULONG(wrap_distance(truth,
							  (unsigned long)v),
					    bound)) {
				harness_log("%u CPUs, step %ld (delta %ld), "
					    "group %d: read %ld, truth %ld",
					    nr, s, delta, i, v, (long)truth);
				goto out;
			}
		}
	}
	CHECK_EQ_LONG(read_hier(g[0], 0, TALLY_FLUSH_FORCE), (long)truth);
out:
	tally_stats_tree_destroy(t);
}

TEST(huge_deltas_keep_if_needed_reads_within_the_bound)
{
	static const unsigned int cpus[] = { 1, 2, 8, 64 };

	for (size_t c = 0; c < ARRAY_SIZE(cpus) && !harness_test_failed();
	     c++) {
		struct tally_domain *d = util_domain(cpus[c]);

		huge_delta_run(d);
		tally_domain_destroy(d);
	}
	if (!harness_test_failed())
		huge_delta_run(NULL);
}

/* ---- runs of updates of one group, then its destroy ------------------------ */

/*
 * A thread on one CPU makes runs of small updates of a child, each run on
 * a new child that it then destroys.  A run of updates of one group keeps
 * its threshold hint in the CPU's hint cache, out of the ancestors'
 * counts: when the child goes, what the cache held must still reach them,
 * or the parent's if-needed reads miss a run per child, far past the
 * bound.  The children are created where the last one was freed (the
 * same address may come back): none may take the dead one's hint.
 */
TEST(if_needed_reads_stay_within_the_bound_while_children_come_and_go)
{
	struct tally_stats_tree *t = tree_on(NULL, BENCH_STATS_TALLY);
	struct tally_stats_group *a = NULL, *c = NULL;
	unsigned long bound;
	long truth = 0, children = harness_scale(400);

	REQUIRE(t);
	REQUIRE(util_pin((int)util_allowed_cpu(0)) == 0);
	bound = tally_stats_read_bound(t);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	for (long i = 0; i < children && !harness_test_failed(); i++) {
		long v;

		if (!CHECK_EQ_LONG(tally_stats_group_create(a, "c", &c), 0))
			break;
		/* Two to take the cache, then less than a quarter batch. */
		for (int k = 0; k < 16; k++)
			CHECK_EQ_LONG(tally_stats_mod(c, 1, 1), 0);
		truth += 16;
		CHECK_EQ_LONG(tally_stats_group_destroy(c), 0);
		v = read_hier(a, 1, TALLY_FLUSH_IF_NEEDED);
		if (!CHECK_LE_ULONG((unsigned long)(truth - v), bound))
			harness_log("after %ld children: if-needed read %ld "
				    "of %ld", i + 1, v, truth);
		v = read_hier(tally_stats_root(t), 1, TALLY_FLUSH_IF_NEEDED);
		if (!CHECK_LE_ULONG((unsigned long)(truth - v), bound))
			harness_log("after %ld children: root read %ld of %ld",
				    i + 1, v, truth);
	}
	CHECK_EQ_LONG(read_hier(tally_stats_root(t), 1, TALLY_FLUSH_FORCE),
		      truth);
	util_pin(-1);
	tally_stats_tree_destroy(t);
}

/*
 * Runs of updates move from group to group on one CPU: each group takes
 * the CPU's hint cache from the one before, whose cached hint must go to
 * its ancestors then, or the parent's if-needed reads miss most of a run
 * per group, past the bound once there are more groups than the bound
 * holds runs.
 */
TEST(if_needed_reads_stay_within_the_bound_while_runs_move_between_groups)
{
	struct tally_stats_tree *t = tree_on(NULL, BENCH_STATS_TALLY);
	struct tally_stats_group *a = NULL, **x;
	unsigned long bound, nr;
	long truth = 0;

	REQUIRE(t);
	REQUIRE(util_pin((int)util_allowed_cpu(0)) == 0);
	bound = tally_stats_read_bound(t);
	nr = bound / 8 + 1;
	x = calloc(nr, sizeof(*x));
	REQUIRE(x);
	REQUIRE(tally_stats_group_create(tally_stats_root(t), "a", &a) == 0);
	for (unsigned long i = 0; i < nr; i++) {
		char name[24];

		snprintf(name, sizeof(name), "x%lu", i);
		REQUIRE(tally_stats_group_create(a, name, &x[i]) == 0);
	}
	for (unsigned long r = 0; r < 2 * nr && !harness_test_failed(); r++) {
		long v;

		/* Two to take the cache, then less than a quarter batch. */
		for (int k = 0; k < 16; k++)
			CHECK_EQ_LONG(tally_stats_mod(x[r % nr], 1, 1), 0);
		truth += 16;
		v = read_hier(a, 1, TALLY_FLUSH_IF_NEEDED);
		if (!CHECK_LE_ULONG((unsigned long)(truth - v), bound))
			harness_log("after %lu runs: if-needed read %ld of %ld",
				    r + 1, v, truth);
	}
	CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), truth);
	util_pin(-1);
	free(x);
	tally_stats_tree_destroy(t);
}

/* ---- a flat tree -------------------------------------------------------- */

/* 20,000 children of one group (fewer under the slower sanitizer runs). */
TEST(flat_tree_of_many_children_is_created_and_found_by_path)
{
	const int N = (int)harness_scale(20000);
	struct tally_stats_tree *t = tree_on(NULL, BENCH_STATS_TALLY);
	struct tally_stats_group **g = calloc((size_t)N, sizeof(*g));
	struct tally_stats_group *root, *found;
	long seen = 0;
	char name[32];

	REQUIRE(t && g);
	root = tally_stats_root(t);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		if (!CHECK_EQ_LONG(tally_stats_group_create(root, name, &g[i]),
				   0)) {
			harness_log("child %d", i);
			goto out;
		}
	}
	CHECK_EQ_ULONG(util_stats_info(t).groups, N + 1);
	CHECK_EQ_LONG(tally_stats_group_for_each_child(root, util_count_child,
						       &seen), 0);
	CHECK_EQ_LONG(seen, N);
	for (int i = N; i-- > 0;) {
		found = NULL;
		snprintf(name, sizeof(name), "c%d", i);
		if (!CHECK_EQ_LONG(tally_stats_group_find(t, name, &found), 0) ||
		    !CHECK(found == g[i])) {
			harness_log("child %d", i);
			goto out;
		}
	}
	snprintf(name, sizeof(name), "c%d", N);
	CHECK_EQ_LONG(tally_stats_group_find(t, name, &found), -ENOENT);
	snprintf(name, sizeof(name), "c%d", N / 2);
	CHECK_EQ_LONG(tally_stats_group_create(root, name, NULL), -EEXIST);
	for (int i = 0; i < N; i += 7)
		tally_stats_mod(g[i], 0, 1);
	CHECK_EQ_LONG(read_hier(root, 0, TALLY_FLUSH_FORCE), (N + 6) / 7);
	/* Half destroyed: the others are still found, the dead are not. */
	for (int i = 0; i < N; i += 2) {
		CHECK_EQ_LONG(tally_stats_group_destroy(g[i]), 0);
		g[i] = NULL;
	}
	for (int i = 0; i < N; i++) {
		int want = i % 2 ? 0 : -ENOENT;

		snprintf(name, sizeof(name), "c%d", i);
		if (!CHECK_EQ_LONG(tally_stats_group_find(t, name, &found),
				   want)) {
			harness_log("child %d", i);
			break;
		}
		if (!want && !CHECK(found == g[i]))
			break;
	}
	CHECK_EQ_LONG(read_hier(root, 0, TALLY_FLUSH_FORCE), (N + 6) / 7);
out:
	tally_stats_tree_destroy(t);
	free(g);
}

/* ---- memory ------------------------------------------------------------- */

/*
 * A group's per-CPU copies cost memory only on the CPUs that update it:
 * creating 200 groups on a 4096-CPU domain and updating them on 2 CPUs
 * must not write (and so map) a page in every CPU's unit - 4096 pages or
 * more.  Half of that is generous slack for the malloc'd group
 * structures and the 2 CPUs' pages (transparent huge pages for every
 * mapping would exceed it; they are "madvise" on the usual distributions).
 */
TEST(groups_cost_memory_only_on_the_cpus_that_update_them)
{
	enum { NR_CPUS = 4096, NR_GROUPS = 200 };
	struct tally_domain *d = util_domain(NR_CPUS);
	struct tally_stats_tree *t = tree_on(d, BENCH_STATS_TALLY);
	struct tally_stats_group *g[NR_GROUPS];
	long before, after, mid;
	long want = 0;

	REQUIRE(t);
	/* Warm the tree: its first flush, the first group of its chunk. */
	CHECK_EQ_LONG(tally_stats_flush(tally_stats_root(t)), 0);
	before = util_resident_pages();
	REQUIRE(before > 0);
	for (int i = 0; i < NR_GROUPS; i++) {
		char name[16];
		struct tally_stats_group *parent =
			i < 10 ? tally_stats_root(t) : g[i % 10];

		snprintf(name, sizeof(name), "g%d", i);
		REQUIRE(tally_stats_group_create(parent, name, &g[i]) == 0);
	}
	mid = util_resident_pages();
	for (int i = 0; i < NR_GROUPS; i++)
		for (unsigned int k = 0; k < 2; k++) {
			/* CPUs far apart: each has its own unit. */
			tally_stats_mod_cpu(g[i], k * (NR_CPUS - 1), 0, i);
			want += i;
		}
	CHECK_EQ_LONG(read_hier(tally_stats_root(t), 0, TALLY_FLUSH_FORCE),
		      want);
	after = util_resident_pages();
	if (!CHECK_CMP_LONG(after - before, <, NR_CPUS / 2))
		harness_log("%ld pages more after creating %d groups, %ld "
			    "after updating them on 2 of %d CPUs",
			    mid - before, NR_GROUPS, after - before, NR_CPUS);
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
}

/* ---- allocation ------------------------------------------------------- */

#ifdef COUNT_ALLOCS

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);
void __libc_free(void *p);

/*
 * Per thread: count the allocator calls while counting is set; when
 * fail_at is positive, the fail_at-th counted allocation fails.
 */
static __thread bool counting;
static __thread unsigned long alloc_calls;
static __thread long fail_at;

/* True when this (counted) allocation must fail. */
static bool alloc_counted(void)
{
	if (!counting)
		return false;
	alloc_calls++;
	return fail_at > 0 && !--fail_at;
}

void *malloc(size_t size)
{
	if (alloc_counted()) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	if (alloc_counted()) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	if (alloc_counted()) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
	if (alloc_counted()) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = memalign(align, size);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void free(void *p)
{
	if (counting)
		alloc_calls++;
	__libc_free(p);
}

static void count_start(long fail)
{
	alloc_calls = 0;
	fail_at = fail;
	counting = true;
}

static unsigned long count_stop(void)
{
	counting = false;
	fail_at = 0;
	return alloc_calls;
}

/*
 * Updates of @groups on many CPUs of @d, then forced reads, snapshots and
 * flushes of several groups: none of them may call the allocator.
 */
static void no_alloc_run(struct tally_domain *d, enum bench_stats_design design)
{
	enum { NR_GROUPS = 300 };
	struct tally_stats_tree *t = tree_on(d, design);
	unsigned int nr = d ? tally_domain_nr_cpus(d) : 1;
	struct tally_stats_group *g[NR_GROUPS];
	struct rng r = rng_seed(nr);
	long total = 0;

	REQUIRE(t);
	g[0] = tally_stats_root(t);
	for (int i = 1; i < NR_GROUPS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		REQUIRE(tally_stats_group_create(g[(i - 1) / 4], name,
						 &g[i]) == 0);
	}
	for (int round = 0; round < 4; round++) {
		long hier[NS], v = 0;
		unsigned long calls;

		/* Every group on many CPUs: long visit lists. */
		for (int i = 0; i < NR_GROUPS; i++)
			for (unsigned int k = 0; k < 16; k++) {
				mod_on(g[i], d, (unsigned int)rng_below(&r, nr),
				       0, 1);
				total++;
			}
		if (round == 0) {	/* warm-up */
			CHECK_EQ_LONG(tally_stats_flush(g[0]), 0);
			continue;
		}
		count_start(0);
		tally_stats_read(g[0], 0, TALLY_FLUSH_FORCE, &v, NULL);
		tally_stats_snapshot(g[1], TALLY_FLUSH_FORCE, hier, NULL);
		tally_stats_flush(g[2]);
		tally_stats_flush(g[0]);
		tally_stats_read(g[NR_GROUPS - 1], 0, TALLY_FLUSH_IF_NEEDED,
				 &v, NULL);
		tally_stats_snapshot(g[0], TALLY_FLUSH_FORCE, hier, NULL);
		calls = count_stop();
		CHECK_EQ_LONG(hier[0], total);
		if (!CHECK_EQ_ULONG(calls, 0)) {
			harness_log("%s, %u CPUs, round %d",
				    bench_stats_design_name(design), nr, round);
			break;
		}
	}
	tally_stats_tree_destroy(t);
}

TEST(flushes_and_reads_never_allocate)
{
	static const enum bench_stats_design designs[] = {
		BENCH_STATS_TALLY, BENCH_STATS_LINUX61,
		BENCH_STATS_RFC2023, BENCH_STATS_LINUX68,
	};
	static const unsigned int cpus[] = { 64, 384 };

	for (size_t c = 0; c < ARRAY_SIZE(cpus); c++) {
		struct tally_domain *d = util_domain(cpus[c]);

		for (size_t k = 0; k < ARRAY_SIZE(designs); k++)
			no_alloc_run(d, designs[k]);
		tally_domain_destroy(d);
	}
	no_alloc_run(NULL, BENCH_STATS_TALLY);
}

/*
 * Fail the 1st, 2nd, ... allocation of a tree or group creation until one
 * succeeds: each failure is -ENOMEM, leaves *out untouched and the tree
 * as it was.
 */
TEST(failed_allocations_in_create_leave_out_untouched)
{
	struct tally_domain *d = util_domain(16);
	struct tally_stats_options o = { .domain = d };
	struct tally_stats_tree *t = NULL;
	struct tally_stats_group *g, *found;
	int err = -1;

	for (long k = 1; err && k < 1000; k++) {
		t = SENTINEL;
		count_start(k);
		err = tally_stats_tree_create(&t, schema, NS, &o);
		count_stop();
		if (err && (!CHECK_EQ_LONG(err, -ENOMEM) ||
			    !CHECK(t == SENTINEL))) {
			harness_log("allocation %ld failed", k);
			break;
		}
	}
	REQUIRE(!err);
	err = -1;
	for (long k = 1; err && k < 1000; k++) {
		g = (struct tally_stats_group *)SENTINEL;
		count_start(k);
		err = tally_stats_group_create(tally_stats_root(t), "kid", &g);
		count_stop();
		if (!err)
			break;
		if (!CHECK_EQ_LONG(err, -ENOMEM) ||
		    !CHECK(g == (struct tally_stats_group *)SENTINEL) ||
		    !CHECK_EQ_LONG(tally_stats_group_find(t, "kid", &found),
				   -ENOENT) ||
		    !CHECK_EQ_ULONG(util_stats_info(t).groups, 1)) {
			harness_log("allocation %ld failed", k);
			break;
		}
	}
	REQUIRE(!err);
	CHECK_EQ_LONG(tally_stats_mod_cpu(g, 15, 0, 9), 0);
	CHECK_EQ_LONG(read_hier(tally_stats_root(t), 0, TALLY_FLUSH_FORCE), 9);
	tally_stats_tree_destroy(t);
	tally_domain_destroy(d);
}

#endif /* COUNT_ALLOCS */
