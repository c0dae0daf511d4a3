// SPDX-License-Identifier: MIT
/*
 * test_memcg.c - memory groups (tally/memcg.h): every documented error,
 * the limits and their events (high with its throttling delay, max with
 * reclaim callbacks and the three OOM policies), memory.events against
 * memory.events.local, the event descriptor, the rendered files (text and
 * JSON, the JSON parsed by Python) and a fork with charges in flight.
 *
 * The exact-oracle runs (random streams, threads, protection math) are in
 * test_memcg_oracle.c.  Here the trees mostly use a batch of 1 byte: a
 * stock then holds at most 2 bytes per CPU, so every page-sized charge
 * reaches the page counters, where high and max are checked, and the
 * event counts are exact and predictable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "harness.h"
#include "util.h"

#define KB 1024l
#define MB (1024l * 1024)

static struct tally_memcg_tree *tree_new(struct tally_domain *d, long batch)
{
	struct tally_memcg_options o = { .domain = d, .batch = batch };
	struct tally_memcg_tree *t = NULL;

	if (!CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), 0))
		return NULL;
	return t;
}

static struct tally_memcg *group_new(struct tally_memcg *parent,
				     const char *name)
{
	struct tally_memcg *g = NULL;

	if (!CHECK_EQ_LONG(tally_memcg_create(parent, name, &g), 0)) {
		harness_log("create %s", name);
		return NULL;
	}
	return g;
}

static bool set_limit(struct tally_memcg *g, enum tally_memcg_limit which,
		      long bytes)
{
	return CHECK_EQ_LONG(tally_memcg_set_limit(g, which, bytes), 0);
}

static long drained(struct tally_memcg *g)
{
	return util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN);
}

/* ------------------------------------------------------------------ */
/* 1. The API and its errors                                          */
/* ------------------------------------------------------------------ */

TEST(tree_create_refuses_null_out_and_bad_batch_and_leaves_out_null)
{
	struct tally_memcg_options o = { 0 };
	struct tally_memcg_tree *t = (struct tally_memcg_tree *)&o;
	const long bad[] = { -1, LONG_MIN, (1l << 30) + 1, LONG_MAX };

	CHECK_EQ_LONG(tally_memcg_tree_create(NULL, NULL), -EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		o.batch = bad[i];
		t = (struct tally_memcg_tree *)&o;
		CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), -EINVAL);
		CHECK(t == NULL);
	}
	/* The bounds themselves are accepted. */
	o.batch = 1;
	REQUIRE(tally_memcg_tree_create(&t, &o) == 0);
	tally_memcg_tree_destroy(t);
	o.batch = 1l << 30;
	REQUIRE(tally_memcg_tree_create(&t, &o) == 0);
	tally_memcg_tree_destroy(t);
	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	CHECK(tally_memcg_root(t) != NULL);
	CHECK(tally_memcg_stats_tree(t) != NULL);
	tally_memcg_tree_destroy(t);
	tally_memcg_tree_destroy(NULL);
	CHECK(tally_memcg_root(NULL) == NULL);
	CHECK(tally_memcg_stats_tree(NULL) == NULL);
}

TEST(create_refuses_null_bad_and_duplicate_names_without_storing_a_group)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *root, *a, *sentinel = (struct tally_memcg *)&t;
	struct tally_memcg *out;
	char longest[TALLY_MEMCG_NAME_MAX + 2];
	const char *bad[] = { "", "a/b", "/", "x/", "/x" };

	REQUIRE(t);
	root = tally_memcg_root(t);
	REQUIRE(root);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		out = sentinel;
		CHECK_EQ_LONG(tally_memcg_create(root, bad[i], &out), -EINVAL);
		if (!CHECK(out == sentinel || out == NULL))
			harness_log("name \"%s\"", bad[i]);
	}
	out = sentinel;
	CHECK_EQ_LONG(tally_memcg_create(NULL, "a", &out), -EINVAL);
	CHECK(out == sentinel || out == NULL);
	CHECK_EQ_LONG(tally_memcg_create(root, NULL, &out), -EINVAL);
	memset(longest, 'n', sizeof(longest));
	longest[TALLY_MEMCG_NAME_MAX + 1] = '\0';
	CHECK_EQ_LONG(tally_memcg_create(root, longest, &out), -EINVAL);
	longest[TALLY_MEMCG_NAME_MAX] = '\0';
	CHECK_EQ_LONG(tally_memcg_create(root, longest, NULL), 0);

	a = group_new(root, "a");
	REQUIRE(a);
	out = sentinel;
	CHECK_EQ_LONG(tally_memcg_create(root, "a", &out), -EEXIST);
	CHECK(out == sentinel || out == NULL);
	/* The same name under another parent is another group. */
	CHECK_EQ_LONG(tally_memcg_create(a, "a", NULL), 0);
	CHECK_EQ_LONG(tally_memcg_find(t, longest, &out), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(out), 0);
	/* A destroyed parent takes no children. */
	CHECK_EQ_LONG(tally_memcg_create(root, "d", &out), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(out), 0);
	{
		struct tally_memcg *dead = out, *child = sentinel;

		CHECK_EQ_LONG(tally_memcg_create(dead, "c", &child), -EINVAL);
		CHECK(child == sentinel || child == NULL);
	}
	tally_memcg_tree_destroy(t);
}

TEST(find_resolves_paths_and_refuses_empty_components_and_unknown_names)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *root, *a, *b, *out;
	char path[64];

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = group_new(root, "a");
	REQUIRE(a);
	b = group_new(a, "b");
	REQUIRE(b);
	CHECK_EQ_LONG(tally_memcg_find(t, "", &out), 0);
	CHECK(out == root);
	CHECK_EQ_LONG(tally_memcg_find(t, "a", &out), 0);
	CHECK(out == a);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b", &out), 0);
	CHECK(out == b);
	CHECK_EQ_LONG(tally_memcg_find(NULL, "a", &out), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, NULL, &out), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, "a", NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, "a//b", &out), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/", &out), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, "/a", &out), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_find(t, "nope", &out), -ENOENT);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/nope", &out), -ENOENT);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b/c", &out), -ENOENT);
	CHECK_EQ_LONG(tally_memcg_find(t, "b", &out), -ENOENT);

	CHECK_EQ_LONG(tally_memcg_path(b, path, sizeof(path)), 3);
	CHECK(!strcmp(path, "a/b"));
	CHECK_EQ_LONG(tally_memcg_path(root, path, sizeof(path)), 0);
	CHECK(!strcmp(path, ""));
	CHECK_EQ_LONG(tally_memcg_path(b, path, 3), -ENOSPC);
	CHECK_EQ_LONG(tally_memcg_path(b, path, 4), 3);
	CHECK_EQ_LONG(tally_memcg_path(NULL, path, sizeof(path)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_path(b, NULL, sizeof(path)), -EINVAL);

	CHECK_EQ_LONG(tally_memcg_destroy(b), 0);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b", &out), -ENOENT);
	tally_memcg_tree_destroy(t);
}

TEST(destroy_refuses_null_root_parents_and_a_second_destroy)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *root, *a, *b;
	struct tally_memcg_info info;

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = group_new(root, "a");
	b = group_new(a, "b");
	REQUIRE(a && b);
	CHECK_EQ_LONG(tally_memcg_destroy(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_destroy(root), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_destroy(a), -EBUSY);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 3);
	CHECK_EQ_ULONG(info.zombies, 0);
	CHECK_EQ_LONG(tally_memcg_destroy(b), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(b), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_destroy(a), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(a), -EINVAL);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 1);
	CHECK_EQ_ULONG(info.zombies, 2);
	CHECK_EQ_LONG(tally_memcg_tree_info(NULL, &info), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_tree_info(t, NULL), -EINVAL);
	/* Limits and callbacks of a destroyed group are refused. */
	CHECK_EQ_LONG(tally_memcg_set_limit(a, TALLY_MEMCG_MAX, MB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(a, NULL, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_events_fd(a), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, NULL, NULL),
		      -EINVAL);
	{
		char buf[256] = "x";

		CHECK_EQ_LONG(tally_memcg_render(a, TALLY_MEMCG_FILE_STAT,
						 false, buf, sizeof(buf)),
			      -EINVAL);
	}
	tally_memcg_tree_destroy(t);
}

TEST(set_limit_refuses_bad_input_and_a_max_below_the_drained_usage)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *root, *a;
	struct tally_memcg_limits l;

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = group_new(root, "a");
	REQUIRE(a);
	REQUIRE(tally_memcg_get_limits(a, &l) == 0);
	CHECK_EQ_LONG(l.min, 0);
	CHECK_EQ_LONG(l.low, 0);
	CHECK_EQ_LONG(l.high, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(l.max, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(tally_memcg_get_limits(NULL, &l), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_get_limits(a, NULL), -EINVAL);

	CHECK_EQ_LONG(tally_memcg_set_limit(NULL, TALLY_MEMCG_MAX, MB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_limit(root, TALLY_MEMCG_MAX, MB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_limit(root, TALLY_MEMCG_MIN, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_limit(a, (enum tally_memcg_limit)4, MB),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_limit(a, (enum tally_memcg_limit)-1, MB),
		      -EINVAL);
	for (int w = TALLY_MEMCG_MIN; w <= TALLY_MEMCG_MAX; w++) {
		CHECK_EQ_LONG(tally_memcg_set_limit(a, w, -1), -EINVAL);
		CHECK_EQ_LONG(tally_memcg_set_limit(a, w, LONG_MIN), -EINVAL);
	}
	/* The limits are independent: no order between them is refused. */
	CHECK(set_limit(a, TALLY_MEMCG_MIN, 3 * MB));
	CHECK(set_limit(a, TALLY_MEMCG_LOW, 2 * MB));
	CHECK(set_limit(a, TALLY_MEMCG_HIGH, 4 * MB));
	CHECK(set_limit(a, TALLY_MEMCG_MAX, MB));
	REQUIRE(tally_memcg_get_limits(a, &l) == 0);
	CHECK_EQ_LONG(l.min, 3 * MB);
	CHECK_EQ_LONG(l.low, 2 * MB);
	CHECK_EQ_LONG(l.high, 4 * MB);
	CHECK_EQ_LONG(l.max, MB);
	REQUIRE(tally_memcg_get_limits(root, &l) == 0);
	CHECK_EQ_LONG(l.max, TALLY_MEMCG_UNLIMITED);

	/*
	 * 10000 bytes charged: the page counter holds a stock refill more,
	 * but max is checked against the usage after a drain.
	 */
	CHECK(set_limit(a, TALLY_MEMCG_MAX, TALLY_MEMCG_UNLIMITED));
	REQUIRE(tally_memcg_charge(a, 10000, 0) == 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(a, TALLY_MEMCG_MAX, 9999), -EBUSY);
	REQUIRE(tally_memcg_get_limits(a, &l) == 0);
	CHECK_EQ_LONG(l.max, TALLY_MEMCG_UNLIMITED);	/* unchanged */
	CHECK_EQ_LONG(tally_memcg_set_limit(a, TALLY_MEMCG_MAX, 10000), 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(a, TALLY_MEMCG_MAX, 0), -EBUSY);
	CHECK_EQ_LONG(drained(a), 10000);
	/* Exactly at max: one more byte is refused, uncharged it fits. */
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, 0), -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_uncharge(a, 1), 0);
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, 0), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(a, 10000), 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(a, TALLY_MEMCG_MAX, 0), 0);
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, 0), -ENOMEM);
	CHECK_EQ_LONG(drained(a), 0);
	tally_memcg_tree_destroy(t);
}

TEST(charge_refuses_bad_sizes_flags_and_the_wrong_domain_kind)
{
	struct tally_domain *d = util_domain(4);
	struct tally_memcg_tree *t = tree_new(NULL, 0), *st = tree_new(d, 0);
	struct tally_memcg *a, *sa;
	const long bad[] = { 0, -1, LONG_MIN, LONG_MAX / 4 + 1, LONG_MAX };

	REQUIRE(t && st);
	a = group_new(tally_memcg_root(t), "a");
	sa = group_new(tally_memcg_root(st), "a");
	REQUIRE(a && sa);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK_EQ_LONG(tally_memcg_charge(a, bad[i], 0), -EINVAL);
		CHECK_EQ_LONG(tally_memcg_uncharge(a, bad[i]), -EINVAL);
		CHECK_EQ_LONG(tally_memcg_charge_cpu(sa, 0, bad[i], 0), -EINVAL);
		CHECK_EQ_LONG(tally_memcg_uncharge_cpu(sa, 0, bad[i]), -EINVAL);
	}
	CHECK_EQ_LONG(tally_memcg_charge(NULL, 1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(NULL, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(NULL, 0, 1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(NULL, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, 0x4), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, ~0u), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(sa, 0, 1, 0x80000000u), -EINVAL);
	/* Each kind of tree has its own calls. */
	CHECK_EQ_LONG(tally_memcg_charge(sa, 1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(sa, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(a, 0, 1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(a, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(sa, TALLY_MEMCG_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod_cpu(sa, 4, TALLY_MEMCG_ANON, 1),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(sa, 4, 1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(sa, 4, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(sa, UINT_MAX, 1, 0), -EINVAL);
	/* None of the refusals charged anything. */
	CHECK_EQ_LONG(drained(a), 0);
	CHECK_EQ_LONG(drained(sa), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(st)), 0);

	/* The largest charge is accepted on an unlimited chain, exactly. */
	CHECK_EQ_LONG(tally_memcg_charge(a, LONG_MAX / 4, 0), 0);
	CHECK_EQ_LONG(drained(a), LONG_MAX / 4);
	CHECK_EQ_LONG(tally_memcg_uncharge(a, LONG_MAX / 4), 0);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(sa, 3, LONG_MAX / 4,
					     TALLY_MEMCG_NOFAIL), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(sa, 1, LONG_MAX / 4), 0);
	CHECK_EQ_LONG(drained(a), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(st)), 0);
	tally_memcg_tree_destroy(t);
	tally_memcg_tree_destroy(st);
	tally_domain_destroy(d);
}

TEST(nofail_charge_larger_than_a_max_of_the_chain_is_refused_e2big_unchanged)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *p, *c;

	REQUIRE(t);
	p = group_new(tally_memcg_root(t), "p");
	c = group_new(p, "c");
	REQUIRE(p && c);
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 64 * KB));
	CHECK_EQ_LONG(tally_memcg_charge(c, 64 * KB + 1, TALLY_MEMCG_NOFAIL),
		      -E2BIG);
	CHECK_EQ_LONG(tally_memcg_charge(p, 2 * MB, TALLY_MEMCG_NOFAIL),
		      -E2BIG);
	CHECK_EQ_LONG(drained(c), 0);
	CHECK_EQ_LONG(drained(p), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, false), 0);

	/* No larger than max, NOFAIL goes over it: the only way over. */
	CHECK_EQ_LONG(tally_memcg_charge(c, 40 * KB, 0), 0);
	CHECK_EQ_LONG(tally_memcg_charge(c, 40 * KB, 0), -ENOMEM);
	CHECK(tally_memcg_charge(c, 40 * KB, TALLY_MEMCG_NOFAIL) >= 0);
	CHECK_EQ_LONG(drained(p), 80 * KB);
	CHECK_EQ_LONG(drained(c), 80 * KB);
	CHECK_EQ_LONG(tally_memcg_charge(c, 1, 0), -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_charge(c, 64 * KB, TALLY_MEMCG_NOFAIL |
					 TALLY_MEMCG_NORECLAIM), 0);
	CHECK_EQ_LONG(drained(p), 144 * KB);
	CHECK_EQ_LONG(tally_memcg_uncharge(c, 144 * KB), 0);
	CHECK_EQ_LONG(drained(p), 0);
	CHECK_EQ_LONG(tally_memcg_charge(c, 64 * KB, 0), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(c, 64 * KB), 0);
	tally_memcg_tree_destroy(t);
}

TEST(over_uncharge_is_refused_erange_with_nothing_changed)
{
	struct tally_memcg_tree *t = tree_new(NULL, 4096);
	struct tally_memcg *a, *b;

	REQUIRE(t);
	a = group_new(tally_memcg_root(t), "a");
	b = group_new(a, "b");
	REQUIRE(a && b);
	/* Nothing was ever charged: not even one byte can go back. */
	CHECK_EQ_LONG(tally_memcg_uncharge(b, 1), -ERANGE);
	CHECK_EQ_LONG(drained(b), 0);
	CHECK_EQ_LONG(drained(a), 0);
	CHECK_EQ_LONG(tally_memcg_charge(b, 10000, 0), 0);
	REQUIRE(tally_memcg_drain(tally_memcg_root(t)) == 0);
	/* More than the usage and than two batches of a stock. */
	CHECK_EQ_LONG(tally_memcg_uncharge(b, 10000 + 3 * 4096), -ERANGE);
	CHECK_EQ_LONG(drained(b), 10000);
	CHECK_EQ_LONG(drained(a), 10000);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 10000);
	CHECK_EQ_LONG(tally_memcg_uncharge(b, 10000), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(a, 1), -ERANGE);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	tally_memcg_tree_destroy(t);
}

TEST(reads_stats_events_and_callbacks_refuse_null_and_unknown_values)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *a;
	struct tally_memcg_range r = { 7, 7, 7 };
	struct tally_memcg_throttle th;
	struct tally_memcg_oom_policy pol = { 0 };
	struct tally_memcg_task task = { 0 };
	struct tally_mm mm;
	long hier = 7, emin, elow, ev[TALLY_MEMCG_NR_EVENTS];

	REQUIRE(t);
	a = group_new(tally_memcg_root(t), "a");
	REQUIRE(a);
	CHECK_EQ_LONG(tally_memcg_usage(NULL, TALLY_MEMCG_READ_APPROX, &r),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_usage(a, (enum tally_memcg_read_mode)3, &r),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_usage(a, TALLY_MEMCG_READ_APPROX, NULL),
		      -EINVAL);
	CHECK_EQ_LONG(r.value, 7);
	CHECK_EQ_LONG(tally_memcg_peak(NULL, false), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_drain(NULL), -EINVAL);

	CHECK_EQ_LONG(tally_memcg_stat_mod(NULL, TALLY_MEMCG_ANON, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(a, TALLY_MEMCG_NR_STATS, 1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(a, (enum tally_memcg_stat)-1, 1),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(a, TALLY_MEMCG_PGFAULT, -1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(a, TALLY_MEMCG_PGMAJFAULT, -5),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod_cpu(a, 0, TALLY_MEMCG_ANON, 1),
		      -EINVAL);	/* system tree, no simulated CPU */
	CHECK_EQ_LONG(tally_memcg_stat_read(NULL, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, NULL),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_NR_STATS,
					    TALLY_FLUSH_FORCE, &hier, NULL),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    (enum tally_flush_mode)99, &hier,
					    NULL), -EINVAL);
	CHECK_EQ_LONG(hier, 7);
	/* Refused updates changed nothing. */
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_PGFAULT,
					    TALLY_FLUSH_FORCE, &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 0);
	CHECK(tally_memcg_stat_name(TALLY_MEMCG_NR_STATS) == NULL);
	CHECK(tally_memcg_stat_name((enum tally_memcg_stat)-1) == NULL);
	CHECK(tally_memcg_stat_name(TALLY_MEMCG_ANON) &&
	      !strcmp(tally_memcg_stat_name(TALLY_MEMCG_ANON), "anon"));
	CHECK(tally_memcg_event_name(TALLY_MEMCG_NR_EVENTS) == NULL);
	CHECK(tally_memcg_event_name(TALLY_MEMCG_EVENT_HIGH) &&
	      !strcmp(tally_memcg_event_name(TALLY_MEMCG_EVENT_HIGH), "high"));
	CHECK(tally_memcg_event_name(TALLY_MEMCG_EVENT_OOM_KILL) &&
	      !strcmp(tally_memcg_event_name(TALLY_MEMCG_EVENT_OOM_KILL),
		      "oom_kill"));
	CHECK_EQ_LONG(tally_memcg_events(NULL, ev, ev), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_events(a, NULL, NULL), 0);
	CHECK_EQ_LONG(tally_memcg_events_fd(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_high_delay(NULL, 1, &th), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_high_delay(a, 0, &th), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_high_delay(a, -4096, &th), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_high_delay(a, 1, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(NULL, NULL, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_protection(NULL, &emin, &elow), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_protection(a, NULL, NULL), 0);

	CHECK_EQ_LONG(tally_memcg_set_oom_policy(NULL, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, NULL), 0);
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(tally_memcg_root(t), NULL), 0);
	pol.mode = (enum tally_memcg_oom_mode)3;
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, &pol), -EINVAL);
	pol.mode = TALLY_MEMCG_OOM_WAIT;
	pol.timeout_ns = -1;
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, &pol), -EINVAL);
	pol.timeout_ns = 60000000001l;
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, &pol), -EINVAL);
	pol.timeout_ns = 60000000000l;
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, &pol), 0);
	pol.mode = TALLY_MEMCG_OOM_KILL;
	pol.timeout_ns = 0;
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(a, &pol), -EINVAL);

	REQUIRE(tally_mm_init(&mm, NULL, 0, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_task_attach(NULL, &task), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_attach(a, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), -EINVAL);  /* no mm */
	task.mm = &mm;
	task.score_adj = 1001;
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), -EINVAL);
	task.score_adj = -1001;
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_detach(&task), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_detach(NULL), -EINVAL);
	task.score_adj = -1000;
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), 0);
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), -EBUSY);
	CHECK_EQ_LONG(tally_memcg_task_attach(tally_memcg_root(t), &task),
		      -EBUSY);
	CHECK_EQ_LONG(tally_memcg_task_detach(&task), 0);
	CHECK_EQ_LONG(tally_memcg_task_detach(&task), -EINVAL);
	/* A destroyed group takes no task; destroy detaches its tasks. */
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(a), 0);
	CHECK_EQ_LONG(tally_memcg_task_detach(&task), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_attach(a, &task), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_task_attach(tally_memcg_root(t), &task), 0);
	CHECK_EQ_LONG(tally_memcg_task_detach(&task), 0);
	/* A destroyed group reads as 0: its charge is its parent's. */
	CHECK_EQ_LONG(util_memcg_usage(a, TALLY_MEMCG_READ_PRECISE), 0);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_memcg_tree_destroy(t);
}

TEST(render_into_a_short_buffer_is_refused_enospc_with_an_empty_string)
{
	struct tally_memcg_tree *t = tree_new(NULL, 0);
	struct tally_memcg *a;
	char buf[4096];
	int full;

	REQUIRE(t);
	a = group_new(tally_memcg_root(t), "a");
	REQUIRE(a);
	CHECK_EQ_LONG(tally_memcg_render(NULL, TALLY_MEMCG_FILE_STAT, false,
					 buf, sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_render(a, (enum tally_memcg_file)5, false,
					 buf, sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_render(a, TALLY_MEMCG_FILE_STAT, false,
					 NULL, sizeof(buf)), -EINVAL);
	for (int f = TALLY_MEMCG_FILE_STAT; f <= TALLY_MEMCG_FILE_ALL; f++) {
		for (int json = 0; json < 2; json++) {
			full = tally_memcg_render(a, f, json, buf, sizeof(buf));
			if (!CHECK(full > 0 && (size_t)full < sizeof(buf)) ||
			    !CHECK_EQ_LONG(strlen(buf), full)) {
				harness_log("file %d json %d", f, json);
				continue;
			}
			/* Every length up to the NUL's is short. */
			for (size_t len = 1; len <= (size_t)full; len++) {
				memset(buf, 'x', sizeof(buf));
				if (!CHECK_EQ_LONG(tally_memcg_render(
						a, f, json, buf, len), -ENOSPC) ||
				    !CHECK_EQ_LONG(buf[0], '\0')) {
					harness_log("file %d json %d len %zu",
						    f, json, len);
					break;
				}
			}
			CHECK_EQ_LONG(tally_memcg_render(a, f, json, buf,
							 (size_t)full + 1),
				      full);
		}
	}
	tally_memcg_tree_destroy(t);
}
