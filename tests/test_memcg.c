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
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "harness.h"
#include "util.h"

#define KB 1024l
#define MB (1024l * 1024)

static bool set_limit(struct tally_memcg *g, enum tally_memcg_limit which,
		      long bytes)
{
	return CHECK_EQ_LONG(tally_memcg_set_limit(g, which, bytes), 0);
}

static long drained(struct tally_memcg *g)
{
	return util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN);
}

/* @g counts @local events @ev of its own and @hier with its subtree. */
static bool events_are(const struct tally_memcg *g, enum tally_memcg_event ev,
		       long local, long hier)
{
	long h[TALLY_MEMCG_NR_EVENTS], l[TALLY_MEMCG_NR_EVENTS];

	if (!CHECK_EQ_LONG(tally_memcg_events(g, h, l), 0))
		return false;
	if (CHECK_EQ_LONG(l[ev], local) & CHECK_EQ_LONG(h[ev], hier))
		return true;
	harness_log("%s events of a group", tally_memcg_event_name(ev));
	return false;
}

/* root - p - c, without limits: the shape most tests start from. */
static bool chain_new(struct tally_memcg_tree *t, struct tally_memcg **p,
		      struct tally_memcg **c)
{
	*p = t ? util_memcg_group(tally_memcg_root(t), "p") : NULL;
	*c = *p ? util_memcg_group(*p, "c") : NULL;
	return *c != NULL;
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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
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

	a = util_memcg_group(root, "a");
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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *root, *a, *b, *out;
	char path[64];

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = util_memcg_group(root, "a");
	REQUIRE(a);
	b = util_memcg_group(a, "b");
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
	CHECK_EQ_LONG(tally_memcg_path(b, path, 0), -ENOSPC);
	CHECK_EQ_LONG(tally_memcg_path(root, path, 0), -ENOSPC);
	CHECK_EQ_LONG(tally_memcg_path(b, path, 4), 3);
	CHECK_EQ_LONG(tally_memcg_path(NULL, path, sizeof(path)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_path(b, NULL, sizeof(path)), -EINVAL);

	CHECK_EQ_LONG(tally_memcg_destroy(b), 0);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b", &out), -ENOENT);
	tally_memcg_tree_destroy(t);
}

TEST(destroy_refuses_null_root_parents_and_a_second_destroy)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *root, *a, *b;
	struct tally_memcg_info info;

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = util_memcg_group(root, "a");
	b = util_memcg_group(a, "b");
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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *root, *a;
	struct tally_memcg_limits l;

	REQUIRE(t);
	root = tally_memcg_root(t);
	a = util_memcg_group(root, "a");
	REQUIRE(a);
	REQUIRE(tally_memcg_get_limits(a, &l) == 0);
	CHECK_EQ_LONG(l.min, 0);
	CHECK_EQ_LONG(l.low, 0);
	CHECK_EQ_LONG(l.high, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(l.max, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(tally_memcg_get_limits(NULL, &l), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_get_limits(a, NULL), -EINVAL);

	CHECK_EQ_LONG(tally_memcg_set_limit(NULL, TALLY_MEMCG_MAX, MB), -EINVAL);
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
	/* The root takes a limit too: a process-wide max. */
	CHECK(set_limit(root, TALLY_MEMCG_MAX, 2 * MB));
	REQUIRE(tally_memcg_get_limits(root, &l) == 0);
	CHECK_EQ_LONG(l.max, 2 * MB);
	CHECK(set_limit(root, TALLY_MEMCG_MAX, TALLY_MEMCG_UNLIMITED));

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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0), *st = util_memcg_tree(d, 0);
	struct tally_memcg *a, *sa;
	const long bad[] = { 0, -1, LONG_MIN, LONG_MAX / 4 + 1, LONG_MAX };

	REQUIRE(t && st);
	a = util_memcg_group(tally_memcg_root(t), "a");
	sa = util_memcg_group(tally_memcg_root(st), "a");
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
	CHECK_EQ_LONG(tally_memcg_charge(a, 1, 0x8), -EINVAL);
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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *p, *c;

	REQUIRE(chain_new(t, &p, &c));
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

/*
 * One byte more than @g holds: a stock may absorb it (then the next drain
 * clamps the usage at 0 and counts an underflow) or it reaches the page
 * counter and is refused.  Either way the drained usage stays 0.
 */
static void uncharge_one_byte_too_many(struct tally_memcg_tree *t,
				       struct tally_memcg *g)
{
	struct tally_memcg_info before, after;
	int ret;

	REQUIRE(tally_memcg_tree_info(t, &before) == 0);
	ret = tally_memcg_uncharge(g, 1);
	CHECK(ret == 0 || ret == -ERANGE);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	CHECK_EQ_LONG(drained(g), 0);
	REQUIRE(tally_memcg_tree_info(t, &after) == 0);
	CHECK_EQ_ULONG(after.underflows - before.underflows, ret == 0);
}

TEST(over_uncharge_is_refused_erange_with_nothing_changed)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 4096);
	struct tally_memcg *a, *b;

	REQUIRE(t);
	a = util_memcg_group(tally_memcg_root(t), "a");
	b = util_memcg_group(a, "b");
	REQUIRE(a && b);
	uncharge_one_byte_too_many(t, b);
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
	uncharge_one_byte_too_many(t, a);
	/* Bigger than two batches: it cannot hide in a stock. */
	CHECK_EQ_LONG(tally_memcg_uncharge(a, 3 * 4096), -ERANGE);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	tally_memcg_tree_destroy(t);
}

TEST(reads_stats_events_and_callbacks_refuse_null_and_unknown_values)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a;
	struct tally_memcg_range r = { 7, 7, 7 };
	struct tally_memcg_throttle th;
	struct tally_memcg_oom_policy pol = { 0 };
	struct tally_memcg_task task = { 0 };
	struct tally_mm mm;
	long hier = 7, emin, elow, ev[TALLY_MEMCG_NR_EVENTS];

	REQUIRE(t);
	a = util_memcg_group(tally_memcg_root(t), "a");
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
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a;
	char buf[4096];
	int full;

	REQUIRE(t);
	a = util_memcg_group(tally_memcg_root(t), "a");
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

/* ------------------------------------------------------------------ */
/* 2. high, max, reclaim, OOM policies, events                        */
/* ------------------------------------------------------------------ */

/*
 * A tree on the system domain with a batch of 1 byte: each stock holds at
 * most 2 bytes, so a page-sized charge always reaches the page counters
 * and the counters are exact to a few bytes.
 */
static struct tally_memcg_tree *exact_tree(void)
{
	return util_memcg_tree(NULL, 1);
}

TEST(over_high_charges_return_over_high_and_count_high_events_exactly)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *root, *p, *c, *sib;
	const long high = 64 * KB + 2048;	/* room for the stocks' bytes */
	int ret;

	REQUIRE(chain_new(t, &p, &c));
	root = tally_memcg_root(t);
	sib = util_memcg_group(p, "sib");
	REQUIRE(sib);
	REQUIRE(set_limit(c, TALLY_MEMCG_HIGH, high));
	for (int i = 0; i < 16; i++)
		CHECK_EQ_LONG(tally_memcg_charge(c, 4096, 0), 0);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_HIGH, true), 0);
	for (int i = 1; i <= 3; i++) {
		CHECK_EQ_LONG(tally_memcg_charge(c, 4096, 0),
			      TALLY_MEMCG_OVER_HIGH);
		events_are(c, TALLY_MEMCG_EVENT_HIGH, i, i);
		events_are(p, TALLY_MEMCG_EVENT_HIGH, 0, i);
		events_are(root, TALLY_MEMCG_EVENT_HIGH, 0, i);
	}
	/* A sibling's charge is not above anyone's high. */
	CHECK_EQ_LONG(tally_memcg_charge(sib, 4096, 0), 0);
	/* The parent above its own high too: one event at each level. */
	REQUIRE(set_limit(p, TALLY_MEMCG_HIGH, 32 * KB));
	ret = tally_memcg_charge(c, 4096, 0);
	CHECK_EQ_LONG(ret, TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_HIGH, true), 4);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, true), 1);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false), 5);
	CHECK_EQ_LONG(util_memcg_event(root, TALLY_MEMCG_EVENT_HIGH, false), 5);
	CHECK_EQ_LONG(tally_memcg_charge(sib, 4096, 0), TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(util_memcg_event(sib, TALLY_MEMCG_EVENT_HIGH, true), 0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, true), 2);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false), 6);
	/* Over high is not over max: no other event. */
	CHECK_EQ_LONG(util_memcg_event(root, TALLY_MEMCG_EVENT_MAX, false), 0);
	CHECK_EQ_LONG(util_memcg_event(root, TALLY_MEMCG_EVENT_OOM, false), 0);
	CHECK_EQ_LONG(drained(p), 22 * 4096);

	/* Destroy moves the local events to the parent, the sums stay. */
	CHECK_EQ_LONG(tally_memcg_destroy(c), 0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, true), 6);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false), 6);
	CHECK_EQ_LONG(util_memcg_event(root, TALLY_MEMCG_EVENT_HIGH, false), 6);
	CHECK_EQ_LONG(drained(p), 22 * 4096);
	tally_memcg_tree_destroy(t);
}

TEST(high_delay_is_zero_under_high_grows_with_the_overage_up_to_2s)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *g;
	struct tally_memcg_throttle th;
	long prev = 0, charged = 0;
	const long high = MB;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(set_limit(g, TALLY_MEMCG_HIGH, high));
	REQUIRE(tally_memcg_charge(g, high - 64 * KB, 0) == 0);
	charged = high - 64 * KB;
	REQUIRE(tally_memcg_high_delay(g, 4096, &th) == 0);
	CHECK_EQ_LONG(th.over, 0);
	CHECK(th.group == NULL);
	CHECK_EQ_LONG(th.delay_ns, 0);
	/* Overages from 4 KiB to 15 MiB (16 times high). */
	for (long over = 4 * KB; over <= 15 * MB; over *= 2) {
		long more = high + over - charged;

		REQUIRE(tally_memcg_charge(g, more, 0) == TALLY_MEMCG_OVER_HIGH);
		charged += more;
		REQUIRE(tally_memcg_high_delay(g, 64 * 4096, &th) == 0);
		/* Page counters: the stocks' few bytes at most. */
		CHECK(th.over >= over && th.over <= over + 2048);
		CHECK(th.group == g);
		CHECK(th.delay_ns >= prev);
		CHECK(th.delay_ns >= 0 && th.delay_ns <= 2000000000l);
		if (!CHECK(th.delay_ns >= prev))
			harness_log("over %ld delay %ld < %ld", over,
				    th.delay_ns, prev);
		prev = th.delay_ns;
		/* A bigger charge is throttled at least as long. */
		{
			struct tally_memcg_throttle big;

			REQUIRE(tally_memcg_high_delay(g, 1024 * 4096, &big)
				== 0);
			CHECK(big.delay_ns >= th.delay_ns);
			CHECK(big.delay_ns <= 2000000000l);
		}
	}
	CHECK(prev > 0);	/* 16 times over high is worth sleeping */
	/* Far over: the clamp. */
	REQUIRE(tally_memcg_charge(g, 256 * MB, 0) == TALLY_MEMCG_OVER_HIGH);
	charged += 256 * MB;
	REQUIRE(tally_memcg_high_delay(g, 1024 * 4096, &th) == 0);
	CHECK_EQ_LONG(th.delay_ns, 2000000000l);
	/* The largest sizes do not overflow the scaling. */
	REQUIRE(tally_memcg_high_delay(g, LONG_MAX, &th) == 0);
	CHECK_EQ_LONG(th.delay_ns, 2000000000l);
	REQUIRE(tally_memcg_high_delay(g, 1, &th) == 0);
	CHECK(th.delay_ns >= 0 && th.delay_ns <= 2000000000l);
	/* Under high again: no delay. */
	REQUIRE(tally_memcg_uncharge(g, charged) == 0);
	REQUIRE(tally_memcg_high_delay(g, 4096, &th) == 0);
	CHECK_EQ_LONG(th.delay_ns, 0);
	CHECK_EQ_LONG(th.over, 0);
	tally_memcg_tree_destroy(t);
}

/* What a reclaim callback did; one per tree, filled by reclaim_fn(). */
struct reclaim_log {
	struct tally_memcg *who[64];
	long asked[64];
	int nr;
	struct tally_memcg *frees[4];	/* the groups whose callback frees */
	long held[4];			/* what each of those still holds */
	long floor[4];			/* below which it must not be asked */
	int nr_frees;
	bool below_floor;
};

static long reclaim_fn(struct tally_memcg *g, long bytes, void *arg)
{
	struct reclaim_log *log = arg;
	long freed = 0;

	if (log->nr < (int)ARRAY_SIZE(log->who)) {
		log->who[log->nr] = g;
		log->asked[log->nr] = bytes;
		log->nr++;
	}
	for (int i = 0; i < log->nr_frees; i++) {
		if (log->frees[i] != g)
			continue;
		if (bytes > log->held[i] - log->floor[i])
			log->below_floor = true;
		freed = bytes < log->held[i] ? bytes : log->held[i];
		if (freed && tally_memcg_uncharge(g, freed) == 0)
			log->held[i] -= freed;
		else
			freed = 0;
	}
	return freed;
}

static int log_first(const struct reclaim_log *log, struct tally_memcg *g)
{
	for (int i = 0; i < log->nr; i++)
		if (log->who[i] == g)
			return i;
	return -1;
}

TEST(reclaim_callback_that_uncharges_lets_a_max_hitting_charge_succeed)
{
	struct tally_memcg_tree *t = exact_tree();
	struct reclaim_log log = { .nr = 0 };
	struct tally_memcg *g, *other;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	other = util_memcg_group(tally_memcg_root(t), "other");
	REQUIRE(g && other);
	REQUIRE(set_limit(g, TALLY_MEMCG_MAX, MB));
	REQUIRE(tally_memcg_charge(g, MB, 0) == 0);
	log.frees[0] = g;
	log.held[0] = MB;
	log.nr_frees = 1;
	REQUIRE(tally_memcg_set_reclaim(g, reclaim_fn, &log) == 0);
	REQUIRE(tally_memcg_set_reclaim(other, reclaim_fn, &log) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 256 * KB, 0), 0);
	CHECK(log.nr >= 1);
	CHECK_EQ_LONG(log_first(&log, other), -1);	/* not in the subtree */
	CHECK(log.held[0] <= MB - 256 * KB);
	CHECK_EQ_LONG(drained(g), log.held[0] + 256 * KB);
	CHECK_LE_LONG(drained(g), MB);
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_OOM, false), 0);
	/* NORECLAIM: the callback is not asked, the charge fails. */
	if (drained(g) < MB)
		REQUIRE(tally_memcg_charge(g, MB - drained(g), 0) == 0);
	log.nr = 0;
	CHECK_EQ_LONG(tally_memcg_charge(g, 4096, TALLY_MEMCG_NORECLAIM),
		      -ENOMEM);
	CHECK_EQ_LONG(log.nr, 0);
	CHECK_EQ_LONG(drained(g), MB);
	/* Removed, the callback is no longer asked. */
	REQUIRE(tally_memcg_set_reclaim(g, NULL, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 4096, 0), -ENOMEM);
	CHECK_EQ_LONG(log.nr, 0);
	tally_memcg_tree_destroy(t);
}

/*
 * p (max 1 MiB, low 1 MiB, min 256 KiB) holds a (low 512 KiB, min 256 KiB,
 * using 512 KiB: all protected) and b (no protection, 400 KiB).  A charge
 * of 200 KiB to b hits p's max.
 */
struct prot_setup {
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *a, *b;
	struct reclaim_log log;
};

static bool prot_setup(struct prot_setup *s)
{
	memset(s, 0, sizeof(*s));
	s->t = exact_tree();
	if (!s->t)
		return false;
	s->p = util_memcg_group(tally_memcg_root(s->t), "p");
	s->a = s->p ? util_memcg_group(s->p, "a") : NULL;
	s->b = s->p ? util_memcg_group(s->p, "b") : NULL;
	return s->a && s->b && set_limit(s->p, TALLY_MEMCG_MAX, MB) &&
	       set_limit(s->p, TALLY_MEMCG_LOW, MB) &&
	       set_limit(s->p, TALLY_MEMCG_MIN, 256 * KB) &&
	       set_limit(s->a, TALLY_MEMCG_LOW, 512 * KB) &&
	       set_limit(s->a, TALLY_MEMCG_MIN, 256 * KB) &&
	       CHECK_EQ_LONG(tally_memcg_charge(s->a, 512 * KB, 0), 0) &&
	       CHECK_EQ_LONG(tally_memcg_charge(s->b, 400 * KB, 0), 0) &&
	       CHECK_EQ_LONG(tally_memcg_set_reclaim(s->a, reclaim_fn,
						     &s->log), 0) &&
	       CHECK_EQ_LONG(tally_memcg_set_reclaim(s->b, reclaim_fn,
						     &s->log), 0);
}

TEST(reclaim_asks_unprotected_groups_first_and_leaves_protected_ones)
{
	struct prot_setup s;
	long emin, elow;

	REQUIRE(prot_setup(&s));
	CHECK_EQ_LONG(tally_memcg_protection(s.a, &emin, &elow), 0);
	CHECK_EQ_LONG(emin, 256 * KB);
	CHECK_EQ_LONG(elow, 512 * KB);
	s.log.frees[0] = s.b;
	s.log.held[0] = 400 * KB;
	s.log.nr_frees = 1;
	CHECK_EQ_LONG(tally_memcg_charge(s.b, 200 * KB, 0), 0);
	CHECK(log_first(&s.log, s.b) == 0);
	CHECK_EQ_LONG(log_first(&s.log, s.a), -1);	/* b's sufficed */
	CHECK_EQ_LONG(util_memcg_event(s.a, TALLY_MEMCG_EVENT_LOW, true), 0);
	CHECK_EQ_LONG(drained(s.a), 512 * KB);
	CHECK_EQ_LONG(drained(s.p), 512 * KB + s.log.held[0] + 200 * KB);
	tally_memcg_tree_destroy(s.t);
}

TEST(reclaim_takes_from_low_protected_groups_last_never_below_min)
{
	struct prot_setup s;
	int first_a;

	REQUIRE(prot_setup(&s));
	/* b frees nothing: a is asked, within its low, above its min. */
	s.log.frees[0] = s.a;
	s.log.held[0] = 512 * KB;
	s.log.floor[0] = 256 * KB;
	s.log.nr_frees = 1;
	CHECK_EQ_LONG(tally_memcg_charge(s.b, 200 * KB, 0), 0);
	first_a = log_first(&s.log, s.a);
	if (!CHECK(first_a > 0))
		for (int i = 0; i < s.log.nr; i++)
			harness_log("call %d: %s asked %ld", i,
				    s.log.who[i] == s.a ? "a" : "b",
				    s.log.asked[i]);
	CHECK(log_first(&s.log, s.b) == 0);
	/* Every call to b (unprotected) came before the first to a. */
	for (int i = first_a < 0 ? s.log.nr : first_a; i < s.log.nr; i++)
		CHECK(s.log.who[i] != s.b);
	CHECK(!s.log.below_floor);
	for (int i = 0; i < s.log.nr; i++)
		CHECK(s.log.asked[i] > 0);
	CHECK(s.log.held[0] >= 256 * KB);
	/* One low event per reclaim of a within its low protection. */
	{
		long calls = 0;

		for (int i = 0; i < s.log.nr; i++)
			calls += s.log.who[i] == s.a;
		CHECK_EQ_LONG(util_memcg_event(s.a, TALLY_MEMCG_EVENT_LOW,
					       true), calls);
		CHECK_EQ_LONG(util_memcg_event(s.p, TALLY_MEMCG_EVENT_LOW,
					       false), calls);
	}
	CHECK_EQ_LONG(util_memcg_event(s.b, TALLY_MEMCG_EVENT_LOW, false), 0);
	CHECK_EQ_LONG(drained(s.a), s.log.held[0]);
	CHECK_EQ_LONG(drained(s.p), s.log.held[0] + 600 * KB);

	/*
	 * With a at its min and b holding all else, nothing can be asked
	 * of a without going below its effective min: the charge fails.
	 */
	if (s.log.held[0] > 256 * KB) {
		CHECK_EQ_LONG(tally_memcg_uncharge(s.a,
						   s.log.held[0] - 256 * KB), 0);
		s.log.held[0] = 256 * KB;
	}
	if (drained(s.p) < MB)
		CHECK_EQ_LONG(tally_memcg_charge(s.b, MB - drained(s.p), 0), 0);
	s.log.nr = 0;
	CHECK_EQ_LONG(tally_memcg_charge(s.b, 4096, 0), -ENOMEM);
	CHECK(!s.log.below_floor);
	CHECK_EQ_LONG(drained(s.a), 256 * KB);
	tally_memcg_tree_destroy(s.t);
}

TEST(high_charges_only_count_events_and_reclaim_high_asks_the_callback)
{
	struct tally_memcg_tree *t = exact_tree();
	struct reclaim_log log = { .nr = 0 };
	struct tally_memcg *g;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(set_limit(g, TALLY_MEMCG_HIGH, 64 * KB));
	REQUIRE(tally_memcg_set_reclaim(g, reclaim_fn, &log) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 32 * KB, 0), 0);
	CHECK_EQ_LONG(log.nr, 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 64 * KB, 0), TALLY_MEMCG_OVER_HIGH);
	/* The charge itself reclaims nothing: the caller chooses when. */
	CHECK_EQ_LONG(log.nr, 0);
	CHECK_EQ_LONG(tally_memcg_reclaim_high(g), 0);	/* frees nothing */
	CHECK(log.nr >= 1 && log.who[0] == g && log.asked[0] > 0);
	CHECK_EQ_LONG(tally_memcg_reclaim_high(NULL), -EINVAL);
	CHECK_EQ_LONG(drained(g), 96 * KB);
	/* NORECLAIM: the high event, no reclaim; NOFAIL too. */
	log.nr = 0;
	CHECK_EQ_LONG(tally_memcg_charge(g, 32 * KB, TALLY_MEMCG_NORECLAIM),
		      TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(tally_memcg_charge(g, 4 * KB, TALLY_MEMCG_NOFAIL |
					 TALLY_MEMCG_NORECLAIM),
		      TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(log.nr, 0);
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_HIGH, true), 3);
	tally_memcg_tree_destroy(t);
}

TEST(refused_charges_count_one_max_and_one_oom_event_on_the_level_hit)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *root, *p, *c;

	REQUIRE(chain_new(t, &p, &c));
	root = tally_memcg_root(t);
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 64 * KB));
	CHECK_EQ_LONG(tally_memcg_charge(c, 60 * KB, 0), 0);
	for (long i = 1; i <= 3; i++) {
		CHECK_EQ_LONG(tally_memcg_charge(c, 8 * KB, 0), -ENOMEM);
		events_are(p, TALLY_MEMCG_EVENT_MAX, i, i);
		events_are(p, TALLY_MEMCG_EVENT_OOM, i, i);
		events_are(root, TALLY_MEMCG_EVENT_MAX, 0, i);
		events_are(root, TALLY_MEMCG_EVENT_OOM, 0, i);
		/* c's own max was not hit. */
		events_are(c, TALLY_MEMCG_EVENT_MAX, 0, 0);
		events_are(c, TALLY_MEMCG_EVENT_OOM, 0, 0);
	}
	/* NORECLAIM runs no OOM policy: a max event, no oom event. */
	CHECK_EQ_LONG(tally_memcg_charge(c, 8 * KB, TALLY_MEMCG_NORECLAIM),
		      -ENOMEM);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_MAX, true), 4);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, true), 3);
	/* A charge that fits counts nothing. */
	CHECK_EQ_LONG(tally_memcg_charge(c, 4 * KB, 0), 0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_MAX, true), 4);
	CHECK_EQ_LONG(drained(p), 64 * KB);
	{
		struct tally_memcg_info info;

		REQUIRE(tally_memcg_tree_info(t, &info) == 0);
		CHECK_EQ_ULONG(info.refusals, 4);
		CHECK(info.drains >= 1);
		CHECK(info.refills >= 1);
	}
	tally_memcg_tree_destroy(t);
}

/*
 * Uncharge @bytes from @g after @delay_us, and, with @after_oom, only
 * once @g counted an oom event: the charge that hit its max is then in
 * its policy, however late a loaded machine ran either thread.
 */
struct delayed_uncharge {
	struct tally_memcg *g;
	long bytes;
	long delay_us;
	bool after_oom;
};

static void *delayed_uncharge_main(void *arg)
{
	struct delayed_uncharge *du = arg;
	double end = harness_now() + HARNESS_HANG_S;

	usleep((useconds_t)du->delay_us);
	while (du->after_oom && harness_now() < end &&
	       util_memcg_event(du->g, TALLY_MEMCG_EVENT_OOM, true) < 1)
		usleep(1000);
	CHECK_EQ_LONG(tally_memcg_uncharge(du->g, du->bytes), 0);
	return NULL;
}

/* The longest wait a policy may have: as long as another thread may take. */
#define LONGEST_WAIT_NS 60000000000l

TEST(oom_wait_succeeds_when_another_thread_uncharges_and_is_bounded)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_WAIT, .timeout_ns = LONGEST_WAIT_NS,
	};
	struct delayed_uncharge du;
	struct tally_memcg *g;
	pthread_t th;
	double t0, dt;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(set_limit(g, TALLY_MEMCG_MAX, 64 * KB));
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	REQUIRE(tally_memcg_charge(g, 64 * KB, 0) == 0);
	/*
	 * The group is full: the charge can only succeed with the room of
	 * the uncharge, which comes after its oom event (it waited).
	 */
	du = (struct delayed_uncharge){ g, 16 * KB, 0, true };
	REQUIRE(pthread_create(&th, NULL, delayed_uncharge_main, &du) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 8 * KB, 0), 0);
	pthread_join(th, NULL);
	CHECK_EQ_LONG(drained(g), 56 * KB);
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_OOM, true), 1);

	/*
	 * Nobody uncharges: it fails once the timeout passed (how long after
	 * depends on the machine's load: only a hang is an error).
	 */
	pol.timeout_ns = 200000000l;
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	t0 = harness_now();
	CHECK_EQ_LONG(tally_memcg_charge(g, 16 * KB, 0), -ENOMEM);
	dt = harness_now() - t0;
	if (!CHECK(dt >= 0.19 && dt < HARNESS_HANG_S))
		harness_log("waited %.3f s with a 0.2 s timeout", dt);
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_OOM, true), 2);
	CHECK_EQ_LONG(drained(g), 56 * KB);
	/* NORECLAIM runs no policy: it neither waits nor counts oom. */
	CHECK_EQ_LONG(tally_memcg_charge(g, 16 * KB, TALLY_MEMCG_NORECLAIM),
		      -ENOMEM);
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_OOM, true), 2);
	tally_memcg_tree_destroy(t);
}

/* A task for the OOM kill tests: its mm, its charge and its group. */
struct oom_task {
	struct tally_memcg_task task;
	struct tally_mm mm;
	struct tally_memcg *g;
	long charged;
};

struct kill_log {
	struct tally_memcg *oom_group;
	struct tally_memcg_task *victims[8];
	int nr;
};

static void kill_fn(struct tally_memcg *oom_group,
		    struct tally_memcg_task *victim, void *arg)
{
	struct kill_log *log = arg;
	struct oom_task *ot = victim->owner;

	log->oom_group = oom_group;
	if (log->nr < (int)ARRAY_SIZE(log->victims))
		log->victims[log->nr++] = victim;
	/* Cancel it: its memory goes back at once. */
	if (ot->charged && tally_memcg_uncharge(ot->g, ot->charged) == 0)
		ot->charged = 0;
}

static bool oom_task_init(struct oom_task *ot, struct tally_memcg *g,
			  long anon, long charge, int score_adj,
			  unsigned int flags)
{
	memset(ot, 0, sizeof(*ot));
	if (!CHECK_EQ_LONG(tally_mm_init(&ot->mm, NULL, 0, NULL), 0))
		return false;
	tally_mm_add(&ot->mm, TALLY_MM_ANON, anon);
	ot->task.mm = &ot->mm;
	ot->task.score_adj = score_adj;
	ot->task.flags = flags;
	ot->task.owner = ot;
	ot->g = g;
	if (charge && !CHECK_EQ_LONG(tally_memcg_charge(g, charge, 0), 0))
		return false;
	ot->charged = charge;
	return CHECK_EQ_LONG(tally_memcg_task_attach(g, &ot->task), 0);
}

TEST(oom_kill_reports_the_worst_task_of_the_subtree_and_counts_oom_kill)
{
	struct tally_memcg_tree *t = exact_tree();
	struct kill_log log = { 0 };
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_KILL, .timeout_ns = 1000000000l,
		.kill = kill_fn, .arg = &log,
	};
	struct tally_memcg *root, *p, *a, *b, *q;
	struct oom_task ot[6];

	REQUIRE(t);
	root = tally_memcg_root(t);
	p = util_memcg_group(root, "p");
	a = util_memcg_group(p, "a");
	b = util_memcg_group(p, "b");
	q = util_memcg_group(root, "q");
	REQUIRE(p && a && b && q);
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 256 * KB));
	REQUIRE(tally_memcg_set_oom_policy(p, &pol) == 0);
	/*
	 * Badness is the mm's RSS, plus score_adj thousandths of p's max:
	 * ot[1] 300 KiB; ot[4] 50 KiB + 1000/1000 of 256 KiB = 306 KiB, the
	 * worst; ot[2] and ot[3] are bigger but not eligible, ot[5] is
	 * outside p.
	 */
	REQUIRE(oom_task_init(&ot[0], a, 100 * KB, 100 * KB, 0, 0));
	REQUIRE(oom_task_init(&ot[1], b, 300 * KB, 100 * KB, 0, 0));
	REQUIRE(oom_task_init(&ot[2], a, 500 * KB, 0, -1000, 0));
	REQUIRE(oom_task_init(&ot[3], b, MB, 0, 0, TALLY_OOM_UNKILLABLE));
	REQUIRE(oom_task_init(&ot[4], a, 50 * KB, 50 * KB, 1000, 0));
	REQUIRE(oom_task_init(&ot[5], q, 8 * MB, 0, 1000, 0));

	CHECK_EQ_LONG(tally_memcg_charge(a, 40 * KB, 0), 0);
	REQUIRE(CHECK_EQ_LONG(log.nr, 1));
	CHECK(log.victims[0] == &ot[4].task);
	CHECK(log.oom_group == p);
	CHECK_EQ_LONG(util_memcg_event(a, TALLY_MEMCG_EVENT_OOM_KILL, true), 1);
	CHECK_EQ_LONG(util_memcg_event(a, TALLY_MEMCG_EVENT_OOM_KILL, false),
		      1);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM_KILL, true), 0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM_KILL, false),
		      1);
	CHECK_EQ_LONG(util_memcg_event(root, TALLY_MEMCG_EVENT_OOM_KILL,
				       false), 1);
	CHECK_EQ_LONG(util_memcg_event(b, TALLY_MEMCG_EVENT_OOM_KILL, false),
		      0);
	CHECK_EQ_LONG(util_memcg_event(q, TALLY_MEMCG_EVENT_OOM_KILL, false),
		      0);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, true), 1);
	CHECK_EQ_LONG(drained(p), 240 * KB);

	/* The caller detaches its victim; the next worst is in b. */
	CHECK_EQ_LONG(tally_memcg_task_detach(&ot[4].task), 0);
	CHECK_EQ_LONG(tally_memcg_charge(a, 100 * KB, 0), 0);
	REQUIRE(CHECK_EQ_LONG(log.nr, 2));
	CHECK(log.victims[1] == &ot[1].task);
	CHECK_EQ_LONG(util_memcg_event(b, TALLY_MEMCG_EVENT_OOM_KILL, true), 1);
	CHECK_EQ_LONG(util_memcg_event(a, TALLY_MEMCG_EVENT_OOM_KILL, true), 1);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM_KILL, false),
		      2);
	CHECK_EQ_LONG(drained(p), 240 * KB);

	/* Nothing eligible left whose kill frees memory: bounded failure. */
	CHECK_EQ_LONG(tally_memcg_task_detach(&ot[1].task), 0);
	CHECK_EQ_LONG(tally_memcg_task_detach(&ot[0].task), 0);
	pol.timeout_ns = 100000000l;
	REQUIRE(tally_memcg_set_oom_policy(p, &pol) == 0);
	{
		double t0 = harness_now();

		CHECK_EQ_LONG(tally_memcg_charge(a, 100 * KB, 0), -ENOMEM);
		CHECK(harness_now() - t0 < HARNESS_HANG_S);
	}
	CHECK_EQ_LONG(log.nr, 2);	/* ot[2], ot[3] are never chosen */
	CHECK_EQ_LONG(drained(p), 240 * KB);
	for (int i = 2; i < 6; i++) {
		if (i == 4)
			continue;
		CHECK_EQ_LONG(tally_memcg_task_detach(&ot[i].task), 0);
	}
	for (int i = 0; i < 6; i++) {
		if (ot[i].charged)
			CHECK_EQ_LONG(tally_memcg_uncharge(ot[i].g,
							   ot[i].charged), 0);
		tally_mm_add(&ot[i].mm, TALLY_MM_ANON,
			     -tally_mm_precise(&ot[i].mm, TALLY_MM_ALL));
		CHECK_EQ_LONG(tally_mm_destroy(&ot[i].mm), 0);
	}
	CHECK_EQ_LONG(drained(root), 140 * KB);	/* the test's own charges */
	tally_memcg_tree_destroy(t);
}

static uint64_t fd_count(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t v = 0;

	if (poll(&pfd, 1, timeout_ms) != 1 || !(pfd.revents & POLLIN))
		return 0;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

TEST(events_fd_becomes_readable_after_an_event_and_reads_the_count)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *p, *c, *sib;
	int fd, fd_sib;

	REQUIRE(chain_new(t, &p, &c));
	sib = util_memcg_group(tally_memcg_root(t), "sib");
	REQUIRE(sib);
	fd = tally_memcg_events_fd(p);
	fd_sib = tally_memcg_events_fd(sib);
	REQUIRE(fd >= 0 && fd_sib >= 0);
	CHECK(fd != fd_sib);
	CHECK_EQ_LONG(tally_memcg_events_fd(p), fd);
	CHECK_EQ_LONG(fd_count(fd, 0), 0);
	REQUIRE(set_limit(c, TALLY_MEMCG_HIGH, 4 * KB));
	for (int i = 0; i < 3; i++)
		CHECK_EQ_LONG(tally_memcg_charge(c, 8 * KB, 0),
			      TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(fd_count(fd, 2000), 3);
	CHECK_EQ_LONG(fd_count(fd, 0), 0);	/* the read cleared it */
	CHECK_EQ_LONG(fd_count(fd_sib, 0), 0);
	/* max and oom of c: two events more. */
	REQUIRE(set_limit(c, TALLY_MEMCG_MAX, 32 * KB));
	CHECK_EQ_LONG(tally_memcg_charge(c, 16 * KB, 0), -ENOMEM);
	CHECK_EQ_LONG(fd_count(fd, 2000),
		      util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false) +
		      util_memcg_event(p, TALLY_MEMCG_EVENT_MAX, false) +
		      util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, false) - 3);
	CHECK_EQ_LONG(fd_count(fd_sib, 0), 0);
	/* A destroyed group's descriptor stays open, without events. */
	CHECK_EQ_LONG(tally_memcg_destroy(sib), 0);
	CHECK(fcntl(fd_sib, F_GETFD) == FD_CLOEXEC);
	CHECK_EQ_LONG(tally_memcg_events_fd(sib), -EINVAL);
	tally_memcg_tree_destroy(t);
	errno = 0;
	CHECK(fcntl(fd_sib, F_GETFD) == -1 && errno == EBADF);
	errno = 0;
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
}

/* ------------------------------------------------------------------ */
/* 3. Rendering                                                       */
/* ------------------------------------------------------------------ */

/*
 * The value of "@name value" in @text (a line of its own), with @prefix
 * allowed before the name; false when absent, twice present or not a
 * number ("max" reads as TALLY_MEMCG_UNLIMITED).
 */
static bool text_value(const char *text, const char *prefix, const char *name,
		       long *out)
{
	int found = 0;

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		size_t pl = strlen(prefix), nl = strlen(name);
		const char *v = NULL;

		if (n > pl + nl && !strncmp(line, prefix, pl) &&
		    !strncmp(line + pl, name, nl) && line[pl + nl] == ' ')
			v = line + pl + nl + 1;
		else if (n > nl && !strncmp(line, name, nl) && line[nl] == ' ')
			v = line + nl + 1;
		if (v) {
			char *num_end;

			found++;
			if (!strncmp(v, "max", 3) && v + 3 == line + n) {
				*out = TALLY_MEMCG_UNLIMITED;
			} else {
				*out = strtol(v, &num_end, 10);
				if (num_end != line + n || num_end == v)
					return false;
			}
		}
		line += n + (end != NULL);
	}
	return found == 1;
}

/*
 * Parse @json with Python's json module and flatten it to lines of
 * "a.b.c value" in @out; false when it does not parse.
 */
static bool json_flatten(const char *json, char *out, size_t len)
{
	static const char script[] =
		"import json, sys\n"
		"def walk(p, v):\n"
		"    if isinstance(v, dict):\n"
		"        for k, x in v.items(): walk(p + [k], x)\n"
		"    elif isinstance(v, list):\n"
		"        for i, x in enumerate(v): walk(p + [str(i)], x)\n"
		"    elif isinstance(v, bool) or isinstance(v, float):\n"
		"        print('.'.join(p), 'not-an-integer')\n"
		"    else:\n"
		"        print('.'.join(p), v)\n"
		"walk([], json.load(sys.stdin))\n";
	char in_path[] = "/tmp/tally-memcg-json-XXXXXX";
	char py_path[] = "/tmp/tally-memcg-py-XXXXXX";
	char cmd[256];
	int in = mkstemp(in_path), py = mkstemp(py_path);
	size_t got = 0, n;
	FILE *f;
	bool ok = false;

	if (in < 0 || py < 0)
		goto out;
	if (write(in, json, strlen(json)) != (ssize_t)strlen(json) ||
	    write(py, script, sizeof(script) - 1) != sizeof(script) - 1)
		goto out;
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s < %s", py_path,
		 in_path);
	f = popen(cmd, "r");
	if (!f)
		goto out;
	while (got + 1 < len && (n = fread(out + got, 1, len - 1 - got, f)))
		got += n;
	out[got] = '\0';
	ok = pclose(f) == 0;
out:
	if (in >= 0)
		close(in);
	if (py >= 0)
		close(py);
	unlink(in_path);
	unlink(py_path);
	if (!ok)
		harness_log("not JSON: %s", json);
	return ok;
}

/*
 * The value of the flattened key whose last component is @name (or
 * "memory.@name"), among keys that contain @within and not @without
 * (either may be NULL); exactly one must match.
 */
static bool json_value(const char *flat, const char *name, const char *within,
		       const char *without, long *out)
{
	char line[256];
	int found = 0;

	for (const char *p = flat; *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char *sp, *last;

		if (n >= sizeof(line))
			return false;
		memcpy(line, p, n);
		line[n] = '\0';
		p += n + (end != NULL);
		sp = strrchr(line, ' ');
		if (!sp)
			return false;
		*sp = '\0';
		last = strrchr(line, '.');
		/* "memory.current" as a last component has a dot of its own */
		if (last && last - line >= 6 && !strncmp(last - 6, "memory", 6))
			last -= 6;
		else
			last = last ? last + 1 : line;
		if (strcmp(last, name) && (strncmp(last, "memory.", 7) ||
					   strcmp(last + 7, name)))
			continue;
		if ((within && !strstr(line, within)) ||
		    (without && strstr(line, without)))
			continue;
		found++;
		if (!strcmp(sp + 1, "max"))
			*out = TALLY_MEMCG_UNLIMITED;
		else
			*out = strtol(sp + 1, &last, 10);
	}
	return found == 1;
}

struct render_fixture {
	struct tally_memcg_tree *t;
	struct tally_memcg *g, *h;
};

static bool render_fixture(struct render_fixture *f)
{
	f->t = exact_tree();
	if (!f->t)
		return false;
	f->g = util_memcg_group(tally_memcg_root(f->t), "g");
	f->h = f->g ? util_memcg_group(f->g, "h") : NULL;
	return f->h && set_limit(f->g, TALLY_MEMCG_MAX, MB) &&
	       set_limit(f->g, TALLY_MEMCG_LOW, 64 * KB) &&
	       set_limit(f->h, TALLY_MEMCG_HIGH, 4 * KB) &&
	       !tally_memcg_stat_mod(f->h, TALLY_MEMCG_ANON, 12288) &&
	       !tally_memcg_stat_mod(f->g, TALLY_MEMCG_FILE, 8192) &&
	       !tally_memcg_stat_mod(f->g, TALLY_MEMCG_SHMEM, 4096) &&
	       !tally_memcg_stat_mod(f->h, TALLY_MEMCG_PGFAULT, 5) &&
	       CHECK_EQ_LONG(tally_memcg_charge(f->g, 100000, 0), 0) &&
	       CHECK_EQ_LONG(tally_memcg_charge(f->h, 50000, 0),
			     TALLY_MEMCG_OVER_HIGH) &&
	       CHECK_EQ_LONG(tally_memcg_charge(f->g, 2 * MB, 0), -ENOMEM) &&
	       !tally_memcg_drain(tally_memcg_root(f->t));
}

static long stat_hier(struct tally_memcg *g, int item)
{
	long v = LONG_MIN;

	CHECK_EQ_LONG(tally_memcg_stat_read(g, item, TALLY_FLUSH_FORCE, &v,
					    NULL), 0);
	return v;
}

TEST(render_text_files_hold_every_item_with_the_values_of_forced_reads)
{
	struct render_fixture f;
	struct tally_memcg_limits l;
	char buf[8192];
	long v, hier[TALLY_MEMCG_NR_EVENTS], local[TALLY_MEMCG_NR_EVENTS];
	const char *lim[] = { "current", "min", "low", "high", "max", "peak" };
	long want[6];

	REQUIRE(render_fixture(&f));
	REQUIRE(tally_memcg_render(f.g, TALLY_MEMCG_FILE_STAT, false, buf,
				   sizeof(buf)) > 0);
	for (int i = 0; i < TALLY_MEMCG_NR_STATS; i++) {
		const char *name = tally_memcg_stat_name(i);

		if (!CHECK(name && text_value(buf, "", name, &v)) ||
		    !CHECK_EQ_LONG(v, stat_hier(f.g, i)))
			harness_log("memory.stat item %s in:\n%s", name, buf);
	}
	CHECK(text_value(buf, "", "anon", &v) && v == 12288);
	CHECK(text_value(buf, "", "file", &v) && v == 8192);
	CHECK(text_value(buf, "", "pgfault", &v) && v == 5);

	REQUIRE(tally_memcg_events(f.g, hier, local) == 0);
	CHECK_EQ_LONG(hier[TALLY_MEMCG_EVENT_HIGH], 1);
	CHECK_EQ_LONG(local[TALLY_MEMCG_EVENT_HIGH], 0);
	CHECK_EQ_LONG(local[TALLY_MEMCG_EVENT_MAX], 1);
	for (int local_file = 0; local_file < 2; local_file++) {
		long *want_ev = local_file ? local : hier;

		REQUIRE(tally_memcg_render(f.g, local_file ?
					   TALLY_MEMCG_FILE_EVENTS_LOCAL :
					   TALLY_MEMCG_FILE_EVENTS, false,
					   buf, sizeof(buf)) > 0);
		for (int e = 0; e < TALLY_MEMCG_NR_EVENTS; e++) {
			const char *name = tally_memcg_event_name(e);

			if (!CHECK(name && text_value(buf, "", name, &v)) ||
			    !CHECK_EQ_LONG(v, want_ev[e]))
				harness_log("event %s in:\n%s", name, buf);
		}
	}

	REQUIRE(tally_memcg_get_limits(f.g, &l) == 0);
	want[0] = drained(f.g);
	want[1] = l.min;
	want[2] = l.low;
	want[3] = l.high;
	want[4] = l.max;
	want[5] = tally_memcg_peak(f.g, false);
	CHECK_EQ_LONG(want[0], 150000);
	CHECK_EQ_LONG(want[3], TALLY_MEMCG_UNLIMITED);
	REQUIRE(tally_memcg_render(f.g, TALLY_MEMCG_FILE_LIMITS, false, buf,
				   sizeof(buf)) > 0);
	for (int i = 0; i < 6; i++)
		if (!CHECK(text_value(buf, "memory.", lim[i], &v)) ||
		    !CHECK_EQ_LONG(v, want[i]))
			harness_log("limit %s in:\n%s", lim[i], buf);
	/* "max" is the word for unlimited, not a number. */
	CHECK(strstr(buf, "high max") != NULL);
	CHECK(strstr(buf, "9223372036854775807") == NULL);
	tally_memcg_tree_destroy(f.t);
}

TEST(render_json_parses_and_holds_the_values_of_forced_reads)
{
	struct render_fixture f;
	char buf[8192], flat[16384];
	long v, hier[TALLY_MEMCG_NR_EVENTS], local[TALLY_MEMCG_NR_EVENTS];
	struct tally_memcg_limits l;

	REQUIRE(render_fixture(&f));
	REQUIRE(tally_memcg_events(f.g, hier, local) == 0);
	REQUIRE(tally_memcg_get_limits(f.g, &l) == 0);
	for (int file = TALLY_MEMCG_FILE_STAT; file <= TALLY_MEMCG_FILE_ALL;
	     file++) {
		bool all = file == TALLY_MEMCG_FILE_ALL;

		/* FILE_ALL is JSON whatever the flag says. */
		for (int json = all ? 0 : 1; json < 2; json++) {
			REQUIRE(tally_memcg_render(f.g, file, json, buf,
						   sizeof(buf)) > 0);
			if (!CHECK(json_flatten(buf, flat, sizeof(flat))))
				continue;
			if (file == TALLY_MEMCG_FILE_STAT || all)
				for (int i = 0; i < TALLY_MEMCG_NR_STATS; i++)
					if (!CHECK(json_value(
						    flat, tally_memcg_stat_name(i),
						    NULL, NULL, &v)) ||
					    !CHECK_EQ_LONG(v, stat_hier(f.g, i)))
						harness_log("%s in %s",
							    tally_memcg_stat_name(i),
							    buf);
			for (int e = 0; e < TALLY_MEMCG_NR_EVENTS; e++) {
				const char *n = tally_memcg_event_name(e);
				bool ok = true;

				if (file == TALLY_MEMCG_FILE_EVENTS)
					ok = json_value(flat, n, NULL, NULL,
							&v) && v == hier[e];
				else if (file == TALLY_MEMCG_FILE_EVENTS_LOCAL)
					ok = json_value(flat, n, NULL, NULL,
							&v) && v == local[e];
				else if (all)
					ok = json_value(flat, n, "events",
							"local", &v) &&
					     v == hier[e] &&
					     json_value(flat, n, "local", NULL,
							&v) && v == local[e];
				if (!CHECK(ok))
					harness_log("event %s in %s", n, buf);
			}
			if (file == TALLY_MEMCG_FILE_LIMITS || all) {
				CHECK(json_value(flat, "current", NULL, NULL,
						 &v) && v == 150000);
				CHECK(json_value(flat, "low", NULL, "events",
						 &v) && v == l.low);
				CHECK(json_value(flat, "max", NULL, "events",
						 &v) && v == l.max);
				CHECK(json_value(flat, "high", NULL, "events",
						 &v) && v == TALLY_MEMCG_UNLIMITED);
				CHECK(json_value(flat, "peak", NULL, NULL,
						 &v) &&
				      v == tally_memcg_peak(f.g, false));
			}
			if (harness_test_failed()) {
				harness_log("file %d json %d:\n%s", file,
					    json, buf);
				break;
			}
		}
	}
	tally_memcg_tree_destroy(f.t);
}

/* ------------------------------------------------------------------ */
/* 4. fork                                                            */
/* ------------------------------------------------------------------ */

struct fork_charger {
	struct tally_memcg *g;
	int stop;
	unsigned long pairs;
};

static void *fork_charger_main(void *arg)
{
	struct fork_charger *fc = arg;

	while (!__atomic_load_n(&fc->stop, __ATOMIC_RELAXED)) {
		int ret = tally_memcg_charge(fc->g, 4096 + 4096 *
					     (long)(fc->pairs % 7), 0);

		if (ret >= 0)
			CHECK_EQ_LONG(tally_memcg_uncharge(
				fc->g, 4096 + 4096 * (long)(fc->pairs % 7)), 0);
		else
			CHECK_EQ_LONG(ret, -ENOMEM);
		__atomic_add_fetch(&fc->pairs, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

TEST(fork_child_charges_drains_and_destroys_an_inherited_tree)
{
	enum { CHARGERS = 3 };
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 16 * KB);
	struct fork_charger fc[CHARGERS];
	struct tally_memcg *busy;
	pthread_t th[CHARGERS];
	long forks = harness_scale(30);

	REQUIRE(t);
	busy = util_memcg_group(tally_memcg_root(t), "busy");
	REQUIRE(busy);
	/* Near max: the threads take the drain lock on refusals. */
	REQUIRE(set_limit(busy, TALLY_MEMCG_MAX, 64 * KB));
	for (int i = 0; i < CHARGERS; i++) {
		fc[i] = (struct fork_charger){ busy, 0, 0 };
		REQUIRE(pthread_create(&th[i], NULL, fork_charger_main,
				       &fc[i]) == 0);
	}
	for (long k = 0; k < forks; k++) {
		pid_t pid;

		fflush(NULL);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			struct tally_memcg *mine;

			alarm(HARNESS_HANG_S);	/* a deadlock fails the test */
			mine = util_memcg_group(tally_memcg_root(t), "child");
			if (mine) {
				CHECK(set_limit(mine, TALLY_MEMCG_MAX, 64 * KB));
				for (int i = 0; i < 6; i++)
					CHECK_EQ_LONG(tally_memcg_charge(
						mine, 10000, 0), 0);
				CHECK_EQ_LONG(tally_memcg_charge(mine, 10000, 0),
					      -ENOMEM);
				CHECK_EQ_LONG(drained(mine), 60000);
				CHECK_EQ_LONG(tally_memcg_uncharge(mine, 60000),
					      0);
				CHECK_EQ_LONG(tally_memcg_drain(
						      tally_memcg_root(t)), 0);
				CHECK_EQ_LONG(drained(mine), 0);
				CHECK_EQ_LONG(tally_memcg_destroy(mine), 0);
			}
			/* The parent's threads' group is usable here. */
			CHECK(drained(busy) <= 64 * KB);
			{
				int ret = tally_memcg_charge(
					busy, 4096, TALLY_MEMCG_NORECLAIM);

				CHECK(ret == 0 || ret == -ENOMEM);
			}
			tally_memcg_tree_destroy(t);
			harness_child_exit();
		}
		CHECK_EQ_LONG(harness_wait_child(pid), 0);
	}
	/*
	 * Every charger made progress across the forks: on a loaded machine
	 * one may not have run yet, so give it the time to (a hang, not a
	 * rate, fails the check).
	 */
	for (int i = 0; i < CHARGERS; i++) {
		double end = harness_now() + HARNESS_HANG_S;

		while (!__atomic_load_n(&fc[i].pairs, __ATOMIC_RELAXED) &&
		       harness_now() < end)
			sched_yield();
	}
	for (int i = 0; i < CHARGERS; i++) {
		__atomic_store_n(&fc[i].stop, 1, __ATOMIC_RELAXED);
		pthread_join(th[i], NULL);
		CHECK(fc[i].pairs > 0);
	}
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	tally_memcg_tree_destroy(t);
}

/* ------------------------------------------------------------------ */
/* 5. Smaller promises                                                */
/* ------------------------------------------------------------------ */

TEST(create_refuses_a_chain_deeper_than_max_depth)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g, *out = NULL;
	char path[4 * (TALLY_MEMCG_MAX_DEPTH + 1)];

	REQUIRE(t);
	g = tally_memcg_root(t);
	for (unsigned int depth = 1; depth <= TALLY_MEMCG_MAX_DEPTH; depth++)
		REQUIRE(tally_memcg_create(g, "d", &g) == 0);
	CHECK_EQ_LONG(tally_memcg_create(g, "d", &out), -EINVAL);
	CHECK(out == NULL || out == g);
	CHECK_EQ_LONG(tally_memcg_path(g, path, sizeof(path)),
		      2 * TALLY_MEMCG_MAX_DEPTH - 1);
	CHECK_EQ_LONG(tally_memcg_find(t, path, &out), 0);
	CHECK(out == g);
	/* The deepest group charges its whole chain. */
	CHECK_EQ_LONG(tally_memcg_charge(g, 12345, 0), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 12345);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 12345), 0);
	CHECK_EQ_LONG(drained(tally_memcg_root(t)), 0);
	tally_memcg_tree_destroy(t);
}

TEST(peak_holds_the_highest_page_counter_and_reset_lowers_it)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *g;
	long peak;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	CHECK_EQ_LONG(tally_memcg_peak(g, false), 0);
	REQUIRE(tally_memcg_charge(g, 300 * KB, 0) == 0);
	REQUIRE(tally_memcg_uncharge(g, 200 * KB) == 0);
	peak = tally_memcg_peak(g, false);
	/* The page counter: the stocks' few bytes at most above. */
	CHECK(peak >= 300 * KB && peak <= 300 * KB + 2048);
	CHECK_EQ_LONG(tally_memcg_peak(g, true), peak);
	REQUIRE(tally_memcg_drain(g) == 0);
	peak = tally_memcg_peak(g, false);
	CHECK(peak >= 100 * KB && peak <= 100 * KB + 2048);
	REQUIRE(tally_memcg_uncharge(g, 100 * KB) == 0);
	CHECK(tally_memcg_peak(g, false) >= 100 * KB);
	CHECK(tally_memcg_peak(tally_memcg_root(t), false) >= 300 * KB);
	tally_memcg_tree_destroy(t);
}

TEST(high_delay_names_the_level_furthest_above_high_relatively)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *p, *c;
	struct tally_memcg_throttle th;

	REQUIRE(chain_new(t, &p, &c));
	/* c: 1.2 MiB over 1 MiB (20%); p: 1.2 MiB over 800 KiB (50%). */
	REQUIRE(set_limit(c, TALLY_MEMCG_HIGH, MB));
	REQUIRE(set_limit(p, TALLY_MEMCG_HIGH, 800 * KB));
	REQUIRE(tally_memcg_charge(c, 1228800, 0) == TALLY_MEMCG_OVER_HIGH);
	REQUIRE(tally_memcg_high_delay(c, 4096, &th) == 0);
	CHECK(th.group == p);
	/* over is the largest absolute overage of the chain: p's 400 KiB. */
	CHECK(th.over >= 1228800 - 800 * KB && th.over <= 1228800 - 800 * KB
	      + 2048);
	/* Lifted, c is the only one above. */
	REQUIRE(set_limit(p, TALLY_MEMCG_HIGH, TALLY_MEMCG_UNLIMITED));
	REQUIRE(tally_memcg_high_delay(c, 4096, &th) == 0);
	CHECK(th.group == c);
	CHECK(th.over >= 1228800 - MB && th.over <= 1228800 - MB + 2048);
	/* Asked about p, c's overage is not p's. */
	REQUIRE(tally_memcg_high_delay(p, 4096, &th) == 0);
	CHECK(th.group == NULL);
	CHECK_EQ_LONG(th.over, 0);
	CHECK_EQ_LONG(th.delay_ns, 0);
	tally_memcg_tree_destroy(t);
}

TEST(stats_of_a_destroyed_group_stay_in_its_ancestors_and_later_go_to_them)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *p, *c;
	long hier, local;

	REQUIRE(chain_new(t, &p, &c));
	CHECK_EQ_LONG(tally_memcg_stat_mod(c, TALLY_MEMCG_ANON, 4096), 0);
	CHECK_EQ_LONG(tally_memcg_stat_mod(c, TALLY_MEMCG_PGFAULT, 3), 0);
	CHECK_EQ_LONG(tally_memcg_stat_mod(p, TALLY_MEMCG_ANON, 100), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(c), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(p, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local), 0);
	CHECK_EQ_LONG(hier, 4196);
	CHECK_EQ_LONG(local, 100);
	CHECK_EQ_LONG(tally_memcg_stat_read(p, TALLY_MEMCG_PGFAULT,
					    TALLY_FLUSH_FORCE, &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 3);
	/* Later updates through the handle land in the parent. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(c, TALLY_MEMCG_ANON, -4096), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(p, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local), 0);
	CHECK_EQ_LONG(hier, 100);
	CHECK_EQ_LONG(local, 100 - 4096);
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 100);
	tally_memcg_tree_destroy(t);
}

/*
 * A query's group: created, charged, its stats updated, destroyed, the
 * charge uncharged through the dead handle, put.  Nothing racing: the
 * destroy's grace period ends at once, its fold finds every update, and
 * neither it nor the free needs a process-wide barrier.
 */
TEST(destroying_quiet_groups_loses_no_stat_and_issues_no_barrier)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *p, *q, *held = NULL;
	struct tally_memcg_info info;
	uint64_t barriers;
	long hier, local, want = 0;

	REQUIRE(chain_new(t, &p, &q));
	barriers = util_stats_info(tally_memcg_stats_tree(t)).barriers;
	for (int i = 0; i < 1000; i++) {
		char name[16];

		snprintf(name, sizeof(name), "q%d", i);
		REQUIRE(tally_memcg_create(p, name, &q) == 0);
		CHECK_EQ_LONG(tally_memcg_charge(q, 4 * 4096, 0), 0);
		CHECK_EQ_LONG(tally_memcg_stat_mod(q, TALLY_MEMCG_ANON, i), 0);
		want += i;
		CHECK_EQ_LONG(tally_memcg_destroy(q), 0);
		tally_memcg_uncharge(q, 4 * 4096);
		/* Every tenth kept a while: its stats wait for no put. */
		if (held)
			tally_memcg_put(held);
		held = i % 10 ? NULL : q;
		if (!held)
			tally_memcg_put(q);
	}
	tally_memcg_put(held);
	CHECK_EQ_LONG(util_stats_info(tally_memcg_stats_tree(t)).barriers,
		      (long)barriers);
	CHECK_EQ_LONG(tally_memcg_stat_read(p, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local), 0);
	CHECK_EQ_LONG(hier, want);
	CHECK_EQ_LONG(local, 0);	/* its children's, not its own */
	CHECK_EQ_LONG(tally_memcg_tree_info(t, &info), 0);
	CHECK_EQ_LONG(info.zombies, 0);
	tally_memcg_tree_destroy(t);
}

TEST(the_oom_policy_of_the_level_whose_max_was_hit_is_the_one_run)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg_oom_policy wait = {
		.mode = TALLY_MEMCG_OOM_WAIT, .timeout_ns = LONGEST_WAIT_NS,
	};
	struct tally_memcg *p, *c;
	double t0;

	REQUIRE(chain_new(t, &p, &c));
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 64 * KB));
	REQUIRE(tally_memcg_set_oom_policy(c, &wait) == 0);
	REQUIRE(tally_memcg_charge(c, 60 * KB, 0) == 0);
	/*
	 * p's max is hit: p's policy (FAIL) runs, c's wait does not (it
	 * would take 60 s, more than any load makes of the failure).
	 */
	t0 = harness_now();
	CHECK_EQ_LONG(tally_memcg_charge(c, 8 * KB, 0), -ENOMEM);
	CHECK(harness_now() - t0 < LONGEST_WAIT_NS / 2e9);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, true), 1);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_OOM, true), 0);
	/* c's own max hit: c waits, and gives up after its timeout. */
	wait.timeout_ns = 100000000l;
	REQUIRE(tally_memcg_set_oom_policy(c, &wait) == 0);
	REQUIRE(set_limit(c, TALLY_MEMCG_MAX, 60 * KB));
	t0 = harness_now();
	CHECK_EQ_LONG(tally_memcg_charge(c, 2 * KB, 0), -ENOMEM);
	CHECK(harness_now() - t0 >= 0.09);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_OOM, true), 1);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_OOM, false), 2);
	tally_memcg_tree_destroy(t);
}

TEST(oom_kill_chooses_a_prefer_flagged_task_first)
{
	struct tally_memcg_tree *t = exact_tree();
	struct kill_log log = { 0 };
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_KILL, .timeout_ns = 500000000l,
		.kill = kill_fn, .arg = &log,
	};
	struct tally_memcg *p;
	struct oom_task big, small;

	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	REQUIRE(p);
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 128 * KB));
	REQUIRE(tally_memcg_set_oom_policy(p, &pol) == 0);
	REQUIRE(oom_task_init(&big, p, 4 * MB, 64 * KB, 0, 0));
	REQUIRE(oom_task_init(&small, p, 4 * KB, 32 * KB, 0, TALLY_OOM_PREFER));
	CHECK_EQ_LONG(tally_memcg_charge(p, 64 * KB, 0), 0);
	REQUIRE(CHECK_EQ_LONG(log.nr, 1));
	CHECK(log.victims[0] == &small.task);
	CHECK_EQ_LONG(drained(p), 128 * KB);
	CHECK_EQ_LONG(tally_memcg_task_detach(&small.task), 0);
	CHECK_EQ_LONG(tally_memcg_task_detach(&big.task), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(p, 64 * KB + big.charged), 0);
	tally_mm_add(&big.mm, TALLY_MM_ANON, -4 * MB);
	tally_mm_add(&small.mm, TALLY_MM_ANON, -4 * KB);
	CHECK_EQ_LONG(tally_mm_destroy(&big.mm), 0);
	CHECK_EQ_LONG(tally_mm_destroy(&small.mm), 0);
	CHECK_EQ_LONG(drained(p), 0);
	tally_memcg_tree_destroy(t);
}

TEST(render_of_the_root_says_max_for_its_limits)
{
	struct tally_memcg_tree *t = exact_tree();
	char buf[4096];
	long v;

	REQUIRE(t);
	REQUIRE(tally_memcg_charge(tally_memcg_root(t), 5000, 0) == 0);
	REQUIRE(tally_memcg_render(tally_memcg_root(t), TALLY_MEMCG_FILE_LIMITS,
				   false, buf, sizeof(buf)) > 0);
	CHECK(text_value(buf, "memory.", "max", &v) &&
	      v == TALLY_MEMCG_UNLIMITED);
	/* The page counter: the 5000 bytes and the stock's batch. */
	CHECK(text_value(buf, "memory.", "current", &v) &&
	      v == util_memcg_usage(tally_memcg_root(t),
				    TALLY_MEMCG_READ_APPROX) && v >= 5000);
	CHECK(text_value(buf, "memory.", "min", &v) && v == 0);
	CHECK(strstr(buf, "max max") != NULL);
	REQUIRE(tally_memcg_uncharge(tally_memcg_root(t), 5000) == 0);
	tally_memcg_tree_destroy(t);
}

/* Free a victim's charge from another thread, a little later. */
struct late_kill {
	struct kill_log log;
	struct delayed_uncharge du;
	pthread_t th;
	bool started;
};

static void late_kill_fn(struct tally_memcg *oom_group,
			 struct tally_memcg_task *victim, void *arg)
{
	struct late_kill *lk = arg;
	struct oom_task *ot = victim->owner;

	lk->log.oom_group = oom_group;
	if (lk->log.nr < (int)ARRAY_SIZE(lk->log.victims))
		lk->log.victims[lk->log.nr++] = victim;
	if (lk->started)
		return;
	lk->du = (struct delayed_uncharge){ ot->g, ot->charged, 50000, false };
	ot->charged = 0;
	lk->started = pthread_create(&lk->th, NULL, delayed_uncharge_main,
				     &lk->du) == 0;
}

TEST(oom_kill_waits_for_the_victims_memory_and_picks_among_many_tasks)
{
	enum { TASKS = 300 };
	struct tally_memcg_tree *t = exact_tree();
	struct late_kill lk = { .started = false };
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_KILL, .timeout_ns = LONGEST_WAIT_NS,
		.kill = late_kill_fn, .arg = &lk,
	};
	struct oom_task *ot = calloc(TASKS, sizeof(*ot));
	struct tally_memcg *p, *kids[3];
	double t0, dt;

	REQUIRE(t && ot);
	p = util_memcg_group(tally_memcg_root(t), "p");
	REQUIRE(p);
	for (int i = 0; i < 3; i++) {
		char name[8] = "k0";

		name[1] = (char)('0' + i);
		kids[i] = util_memcg_group(p, name);
		REQUIRE(kids[i]);
	}
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, MB));
	REQUIRE(tally_memcg_set_oom_policy(p, &pol) == 0);
	/* Badness grows with the index but for the worst, number 137. */
	for (int i = 0; i < TASKS; i++)
		REQUIRE(oom_task_init(&ot[i], kids[i % 3], 4096 * (1 + i) +
				      (i == 137 ? 64 * MB : 0), 2048, 0, 0));
	REQUIRE(tally_memcg_charge(p, MB - TASKS * 2048, 0) == 0);
	t0 = harness_now();
	CHECK_EQ_LONG(tally_memcg_charge(kids[0], 1024, 0), 0);
	dt = harness_now() - t0;
	REQUIRE(CHECK_EQ_LONG(lk.log.nr, 1));
	CHECK(lk.log.victims[0] == &ot[137].task);
	CHECK(dt >= 0.045);	/* it waited for the uncharge */
	if (lk.started)
		pthread_join(lk.th, NULL);
	CHECK_EQ_LONG(util_memcg_event(kids[137 % 3],
				       TALLY_MEMCG_EVENT_OOM_KILL, true), 1);
	CHECK_EQ_LONG(drained(p), MB - 2048 + 1024);
	for (int i = 0; i < TASKS; i++) {
		CHECK_EQ_LONG(tally_memcg_task_detach(&ot[i].task), 0);
		if (ot[i].charged)
			CHECK_EQ_LONG(tally_memcg_uncharge(ot[i].g,
							   ot[i].charged), 0);
		tally_mm_add(&ot[i].mm, TALLY_MM_ANON,
			     -tally_mm_precise(&ot[i].mm, TALLY_MM_ALL));
		CHECK_EQ_LONG(tally_mm_destroy(&ot[i].mm), 0);
	}
	CHECK_EQ_LONG(drained(p), MB - TASKS * 2048 + 1024);
	tally_memcg_tree_destroy(t);
	free(ot);
}

/* A kill callback that does what a caller would: detach, destroy. */
static void detaching_kill_fn(struct tally_memcg *oom_group,
			      struct tally_memcg_task *victim, void *arg)
{
	struct oom_task *ot = victim->owner;
	int *done = arg;

	(void)oom_group;
	CHECK_EQ_LONG(tally_memcg_task_detach(victim), 0);
	if (ot->charged && tally_memcg_uncharge(ot->g, ot->charged) == 0)
		ot->charged = 0;
	CHECK_EQ_LONG(tally_memcg_destroy(ot->g), 0);
	*done = 1;
}

static void kill_callback_calls_tally(void)
{
	struct tally_memcg_tree *t = exact_tree();
	int done = 0;
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_KILL, .timeout_ns = 500000000l,
		.kill = detaching_kill_fn, .arg = &done,
	};
	struct tally_memcg *p, *q;
	struct oom_task ot;

	alarm(HARNESS_HANG_S);	/* a deadlock fails the test */
	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	q = p ? util_memcg_group(p, "query") : NULL;
	REQUIRE(q);
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 64 * KB));
	REQUIRE(tally_memcg_set_oom_policy(p, &pol) == 0);
	REQUIRE(oom_task_init(&ot, q, MB, 48 * KB, 0, 0));
	CHECK_EQ_LONG(tally_memcg_charge(p, 32 * KB, 0), 0);
	CHECK_EQ_LONG(done, 1);
	CHECK_EQ_LONG(drained(p), 32 * KB);
	tally_mm_add(&ot.mm, TALLY_MM_ANON, -MB);
	CHECK_EQ_LONG(tally_mm_destroy(&ot.mm), 0);
	tally_memcg_tree_destroy(t);
}

/*
 * The kill callback runs "with no tally lock held" (tally/memcg.h): it may
 * detach its victim (the header says the caller does) and destroy the
 * victim's group.  Run in a child with an alarm: a lock still held makes
 * it hang.
 */
TEST(oom_kill_callback_may_detach_its_victim_and_destroy_its_group)
{
	char text[4096];
	int status = util_run_capturing_stderr(kill_callback_calls_tally, text,
					       sizeof(text));

	if (!CHECK_EQ_LONG(status, 0))
		harness_log("child (status %d, 142 = SIGALRM: hung):\n%s",
			    status, text);
}

struct busy_reclaim {
	struct tally_memcg *other;
	long calls;
};

/* Calls that take every tally lock, then frees what it is asked. */
static long busy_reclaim_fn(struct tally_memcg *g, long bytes, void *arg)
{
	struct busy_reclaim *br = arg;
	struct tally_memcg *tmp;

	br->calls++;
	CHECK_EQ_LONG(tally_memcg_set_limit(br->other, TALLY_MEMCG_MAX, MB), 0);
	CHECK(drained(br->other) >= 0);
	CHECK_EQ_LONG(tally_memcg_create(br->other, "tmp", &tmp), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(tmp), 0);
	/* Charging another group, over its max: refused, no recursion. */
	CHECK_EQ_LONG(tally_memcg_charge(br->other, 2 * MB, 0), -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, bytes), 0);
	return bytes;
}

static void reclaim_callback_calls_tally(void)
{
	struct tally_memcg_tree *t = exact_tree();
	struct busy_reclaim br = { 0 };
	struct tally_memcg *g;

	alarm(HARNESS_HANG_S);	/* a deadlock fails the test */
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	br.other = util_memcg_group(tally_memcg_root(t), "other");
	REQUIRE(g && br.other);
	REQUIRE(set_limit(g, TALLY_MEMCG_MAX, MB));
	REQUIRE(tally_memcg_set_reclaim(g, busy_reclaim_fn, &br) == 0);
	REQUIRE(tally_memcg_charge(g, MB, 0) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 64 * KB, 0), 0);
	CHECK(br.calls >= 1);
	CHECK_EQ_LONG(drained(g), MB);
	tally_memcg_tree_destroy(t);
}

/* Reclaim callbacks run with no tally lock held: they may call tally. */
TEST(reclaim_callback_may_set_limits_drain_create_destroy_and_charge)
{
	char text[4096];
	int status = util_run_capturing_stderr(reclaim_callback_calls_tally,
					       text, sizeof(text));

	if (!CHECK_EQ_LONG(status, 0))
		harness_log("child (status %d, 142 = SIGALRM: hung):\n%s",
			    status, text);
}

/*
 * Without readable system CPUs, a tree on the system domain is refused
 * (-ENODEV) and *out is NULL; a tree on a simulated domain still works.
 */
TEST(tree_create_without_system_cpus_fails_cleanly_or_works)
{
	struct tally_memcg_tree *t = (struct tally_memcg_tree *)&t;
	struct tally_domain *d;
	int ret;

	if (!harness_is_child()) {
		const char *env[] = { "TALLY_SYSFS_ROOT=/nonexistent/tally",
				      NULL };

		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	ret = tally_memcg_tree_create(&t, NULL);
	CHECK(ret == 0 || ret == -ENODEV);
	if (ret)
		CHECK(t == NULL);
	else
		tally_memcg_tree_destroy(t);
	d = util_domain(8);
	t = util_memcg_tree(d, 0);
	if (t) {
		struct tally_memcg *g = util_memcg_group(tally_memcg_root(t), "g");

		CHECK(g && tally_memcg_charge_cpu(g, 7, 4096, 0) == 0);
		CHECK_EQ_LONG(drained(tally_memcg_root(t)), 4096);
		tally_memcg_tree_destroy(t);
	}
	tally_domain_destroy(d);
}

/* Out of descriptors, the event descriptor is -EMFILE, then works. */
static void events_fd_out_of_descriptors(void)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g;
	struct rlimit old, none;
	int fd;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
	none = old;
	none.rlim_cur = 0;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &none) == 0);
	CHECK_EQ_LONG(tally_memcg_events_fd(g), -EMFILE);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
	fd = tally_memcg_events_fd(g);
	CHECK(fd >= 0);
	CHECK_EQ_LONG(tally_memcg_events_fd(g), fd);
	tally_memcg_tree_destroy(t);
}

TEST(events_fd_reports_emfile_and_works_once_descriptors_are_back)
{
	char text[4096];

	if (!CHECK_EQ_LONG(util_run_capturing_stderr(
				   events_fd_out_of_descriptors, text,
				   sizeof(text)), 0))
		harness_log("child:\n%s", text);
}

/* "name value" of @name in rendered limits, or -1. */
static long rendered(const char *text, const char *name)
{
	const char *p = strstr(text, name);

	return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

TEST(current_and_peak_agree_that_stock_reservations_count)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g;
	char text[512];
	long approx;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(tally_memcg_charge(g, 100, 0) == 0);
	approx = util_memcg_usage(g, TALLY_MEMCG_READ_APPROX);
	/* The refill reserved a batch more than the 100 bytes. */
	CHECK(approx >= 100);
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_PRECISE), 100);
	REQUIRE(tally_memcg_render(g, TALLY_MEMCG_FILE_LIMITS, false, text,
				   sizeof(text)) > 0);
	CHECK_EQ_LONG(rendered(text, "memory.current "), approx);
	CHECK_EQ_LONG(rendered(text, "memory.peak "), approx);
	CHECK_EQ_LONG(tally_memcg_peak(g, false), approx);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 100), 0);
	tally_memcg_tree_destroy(t);
}

/* What @g's subtree holds in stocks: the page counter minus the usage. */
static long stocked(struct tally_memcg *g)
{
	return util_memcg_usage(g, TALLY_MEMCG_READ_APPROX) -
	       util_memcg_usage(g, TALLY_MEMCG_READ_PRECISE);
}

TEST(refill_batches_grow_far_from_limits_and_shrink_near_them)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	long cpus = tally_domain_nr_cpus(tally_domain_system());
	long base = TALLY_MEMCG_DEFAULT_BATCH, want;
	/* The default max_batch on these CPUs (memcg.h). */
	long top = TALLY_MEMCG_STOCK_BUDGET / (2 * cpus) / base * base;
	struct tally_memcg *g;

	top = top < base ? base : top > 16 * base ? 16 * base : top;
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	/* Unlimited: the largest batch. */
	REQUIRE(tally_memcg_charge(g, 4096, 0) == 0);
	CHECK_EQ_LONG(stocked(g), top);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	/* 64 MiB of room: room / (4 x CPUs), within [base, top]. */
	REQUIRE(set_limit(g, TALLY_MEMCG_MAX, 64 * MB));
	CHECK_EQ_LONG(stocked(g), 0);	/* setting max drained it */
	REQUIRE(tally_memcg_charge(g, 4096, 0) == 0);
	want = 64 * MB / (4 * cpus) / base * base;
	want = want < base ? base : want > top ? top : want;
	CHECK_EQ_LONG(stocked(g), want);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	/* Near the limit: the smallest batch. */
	REQUIRE(set_limit(g, TALLY_MEMCG_MAX, 2 * MB));
	REQUIRE(tally_memcg_charge(g, 4096, 0) == 0);
	CHECK_EQ_LONG(stocked(g), base);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	CHECK_EQ_LONG(drained(g), 0);
	tally_memcg_tree_destroy(t);
}

TEST(tree_options_refuse_a_max_batch_below_the_batch_or_above_1_gib)
{
	struct tally_memcg_options o = { .batch = 8192, .max_batch = 4096 };
	struct tally_memcg_tree *t = (void *)1;

	CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), -EINVAL);
	CHECK(t == NULL);
	o.max_batch = (1l << 30) + 1;
	CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), -EINVAL);
	o.max_batch = 8192;
	CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), 0);
	tally_memcg_tree_destroy(t);
}

TEST(a_refused_charge_raises_no_peak_below_the_level_that_refused_it)
{
	struct tally_memcg_tree *t = exact_tree();
	struct tally_memcg *p, *c;
	long peak;

	REQUIRE(chain_new(t, &p, &c));
	REQUIRE(set_limit(p, TALLY_MEMCG_MAX, 64 * KB));
	CHECK_EQ_LONG(tally_memcg_charge(c, 60 * KB, 0), 0);
	peak = tally_memcg_peak(c, false);
	CHECK(peak >= 60 * KB && peak <= 64 * KB);
	/* c's own level would take it; p refuses: c's peak stays. */
	CHECK_EQ_LONG(tally_memcg_charge(c, 16 * KB, TALLY_MEMCG_NORECLAIM),
		      -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_peak(c, false), peak);
	CHECK_LE_LONG(tally_memcg_peak(p, false), 64 * KB);
	CHECK_EQ_LONG(tally_memcg_uncharge(c, 60 * KB), 0);
	tally_memcg_tree_destroy(t);
}
