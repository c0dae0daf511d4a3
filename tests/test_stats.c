// SPDX-License-Identifier: MIT
/*
 * test_stats.c - the statistics tree, one thread at a time (plus a fork and
 * the periodic flusher thread): the API and its errors, a brute-force
 * oracle of random trees for every design and domain, the if-needed read
 * bound, periodic and ratelimited flushing on a fake clock, and destroying
 * groups without losing their stats.
 *
 * The oracle keeps, per group, the sum of every update (the exact local
 * value) and derives the exact hierarchical value from the subtree,
 * destroyed descendants included.  It also keeps what each group showed at
 * the last flush that covered it; tally_stats_tree_info() tells which
 * reads flushed, so every read, whatever its mode, must return exactly
 * the value the oracle predicts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tally/stats.h>

#include "harness.h"
#include "util.h"
#include "../bench/stats_designs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NS 3	/* stats of the test schema */

static const struct tally_stat_desc schema[NS] = {
	{ "bytes", TALLY_STAT_STATE },
	{ "faults", TALLY_STAT_EVENT },
	{ "pages", TALLY_STAT_STATE },
};

static const enum bench_stats_design designs[] = {
	BENCH_STATS_TALLY, BENCH_STATS_LINUX61, BENCH_STATS_RFC2023,
	BENCH_STATS_LINUX68,
};

/* A fake clock the tests move by hand. */
struct fake_clock {
	uint64_t now;
};

static uint64_t fake_now(void *arg)
{
	return __atomic_load_n(&((struct fake_clock *)arg)->now,
			       __ATOMIC_RELAXED);
}

static void fake_set(struct fake_clock *c, uint64_t ns)
{
	__atomic_store_n(&c->now, ns, __ATOMIC_RELAXED);
}

/* A tree on a simulated domain of @nr_cpus CPUs (0: the system domain). */
struct fixture {
	struct tally_domain *dom;
	struct tally_stats_tree *t;
	struct tally_stats_group *root;
	unsigned int nr_cpus;
};

static bool fixture_init(struct fixture *f, enum bench_stats_design design,
			 unsigned int nr_cpus, unsigned long batch,
			 struct fake_clock *clk, uint64_t period_ns)
{
	struct tally_stats_options o = { 0 };
	int err;

	memset(f, 0, sizeof(*f));
	if (nr_cpus)
		f->dom = util_domain(nr_cpus);
	o.domain = f->dom;
	o.batch = batch;
	o.period_ns = period_ns;
	if (clk) {
		o.clock = fake_now;
		o.clock_arg = clk;
	}
	err = bench_stats_tree_create(&f->t, schema, NS, &o, design);
	if (!CHECK_EQ_LONG(err, 0)) {
		tally_domain_destroy(f->dom);
		return false;
	}
	f->root = tally_stats_root(f->t);
	f->nr_cpus = tally_domain_nr_cpus(f->dom ? f->dom
						 : tally_domain_system());
	return true;
}

static void fixture_fini(struct fixture *f)
{
	tally_stats_tree_destroy(f->t);
	tally_domain_destroy(f->dom);
}

/* An update on @cpu (simulated) or on the current CPU (system domain). */
static int mod(const struct fixture *f, struct tally_stats_group *g,
	       unsigned int cpu, unsigned int stat, long delta)
{
	if (f->dom)
		return tally_stats_mod_cpu(g, cpu % f->nr_cpus, stat, delta);
	return tally_stats_mod(g, stat, delta);
}

static long read_hier(struct tally_stats_group *g, unsigned int stat,
		      enum tally_flush_mode mode)
{
	long hier = 0x7eadbeef;

	CHECK_EQ_LONG(tally_stats_read(g, stat, mode, &hier, NULL), 0);
	return hier;
}

static long read_local(struct tally_stats_group *g, unsigned int stat,
		       enum tally_flush_mode mode)
{
	long local = 0x7eadbeef;

	CHECK_EQ_LONG(tally_stats_read(g, stat, mode, NULL, &local), 0);
	return local;
}


static struct tally_stats_group *child(struct tally_stats_group *parent,
				       const char *name)
{
	return util_child(parent, name);
}

/* Create @parent/a and @parent/a/b; true when both exist. */
static bool chain_ab(struct tally_stats_group *parent,
		     struct tally_stats_group **a, struct tally_stats_group **b)
{
	*a = child(parent, "a");
	*b = *a ? child(*a, "b") : NULL;
	return *a && *b;
}

/* ---- schemas and options ------------------------------------------------ */

static int create_with(const struct tally_stat_desc *s, unsigned int nr,
		       const struct tally_stats_options *o)
{
	struct tally_stats_tree *t = NULL;
	int err = tally_stats_tree_create(&t, s, nr, o);

	if (err)
		CHECK(t == NULL);
	tally_stats_tree_destroy(t);
	return err;
}

TEST(schema_with_bad_names_kinds_or_sizes_is_rejected)
{
	static const char *const bad_names[] = {
		"", "two words", "tab\there", "new\nline", "cr\r", "vt\v",
		"ff\f", " lead", "trail ",
	};
	struct tally_stat_desc s[2] = { { "ok", TALLY_STAT_STATE },
					{ NULL, TALLY_STAT_EVENT } };
	struct tally_stat_desc *big;
	struct tally_stats_tree *t;
	char (*names)[16];

	for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
		s[1].name = bad_names[i];
		if (!CHECK_EQ_LONG(create_with(s, 2, NULL), -EINVAL))
			harness_log("accepted stat name \"%s\"", bad_names[i]);
	}
	s[1].name = NULL;
	CHECK_EQ_LONG(create_with(s, 2, NULL), -EINVAL);
	s[1].name = "ok";
	CHECK_EQ_LONG(create_with(s, 2, NULL), -EINVAL);	/* duplicate */
	s[1].name = "other";
	s[1].kind = (enum tally_stat_kind)2;
	CHECK_EQ_LONG(create_with(s, 2, NULL), -EINVAL);
	s[1].kind = (enum tally_stat_kind)-1;
	CHECK_EQ_LONG(create_with(s, 2, NULL), -EINVAL);
	s[1].kind = TALLY_STAT_EVENT;
	CHECK_EQ_LONG(create_with(s, 2, NULL), 0);
	CHECK_EQ_LONG(create_with(s, 0, NULL), -EINVAL);
	CHECK_EQ_LONG(create_with(NULL, 2, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_tree_create(NULL, s, 2, NULL), -EINVAL);

	/* TALLY_STATS_MAX stats are fine, one more is not. */
	big = calloc(TALLY_STATS_MAX + 1, sizeof(*big));
	names = calloc(TALLY_STATS_MAX + 1, sizeof(*names));
	REQUIRE(big && names);
	for (unsigned int i = 0; i <= TALLY_STATS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "stat_%u", i);
		big[i].name = names[i];
		big[i].kind = i % 2 ? TALLY_STAT_EVENT : TALLY_STAT_STATE;
	}
	CHECK_EQ_LONG(create_with(big, TALLY_STATS_MAX + 1, NULL), -EINVAL);
	t = NULL;
	if (CHECK_EQ_LONG(tally_stats_tree_create(&t, big, TALLY_STATS_MAX,
						  NULL), 0)) {
		CHECK_EQ_ULONG(tally_stats_nr_stats(t), TALLY_STATS_MAX);
		CHECK_EQ_LONG(tally_stats_stat_index(t, "stat_255"), 255);
		CHECK_EQ_LONG(tally_stats_stat_index(t, "stat_256"), -ENOENT);
		tally_stats_tree_destroy(t);
	}
	free(big);
	free(names);
}

TEST(options_with_a_bad_batch_are_rejected)
{
	static const unsigned long bad_batches[] = { 3, 6, 12, 100, 65 };
	static const unsigned long good_batches[] = { 2, 4, 64, 1024 };
	struct tally_stats_options o = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(bad_batches); i++) {
		o.batch = bad_batches[i];
		if (!CHECK_EQ_LONG(create_with(schema, NS, &o), -EINVAL))
			harness_log("accepted batch %lu", bad_batches[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(good_batches); i++) {
		o.batch = good_batches[i];
		CHECK_EQ_LONG(create_with(schema, NS, &o), 0);
	}
	CHECK_EQ_LONG(create_with(schema, NS, NULL), 0);
}

/*
 * batch x nr_cpus is the threshold every per-CPU count is compared with:
 * past LONG_MAX / 8 the counts could overflow and if-needed reads stop
 * flushing, so such a batch is refused rather than accepted.
 */
TEST(batch_whose_threshold_could_overflow_is_rejected)
{
	struct tally_domain *d = util_domain(64);
	struct tally_stats_options o = { .domain = d };
	/* 64 CPUs: the largest batch is 2^60 / 2^6 / 2 = 2^53. */
	static const unsigned long bad[] = { 1ul << 54, 1ul << 61, 1ul << 63 };

	o.batch = 1ul << 53;
	CHECK_EQ_LONG(create_with(schema, NS, &o), 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		o.batch = bad[i];
		if (!CHECK_EQ_LONG(create_with(schema, NS, &o), -EINVAL))
			harness_log("accepted batch %#lx", bad[i]);
	}
	tally_domain_destroy(d);
}

TEST(stat_index_count_and_root_are_as_documented)
{
	struct fixture f;

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 0, 0, NULL, 0));
	CHECK_EQ_ULONG(tally_stats_nr_stats(f.t), NS);
	CHECK_EQ_ULONG(tally_stats_nr_stats(NULL), 0);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, "bytes"), 0);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, "faults"), 1);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, "pages"), 2);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, "page"), -ENOENT);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, ""), -ENOENT);
	CHECK_EQ_LONG(tally_stats_stat_index(f.t, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_stat_index(NULL, "bytes"), -EINVAL);
	CHECK(tally_stats_root(NULL) == NULL);
	CHECK(strcmp(tally_stats_group_name(f.root), "") == 0);
	CHECK(tally_stats_group_parent(f.root) == NULL);
	fixture_fini(&f);
}

TEST(null_arguments_are_rejected_with_einval)
{
	struct tally_stats_info info;
	struct tally_stats_group *g;
	long v[NS];
	char buf[64];

	CHECK_EQ_LONG(tally_stats_group_create(NULL, "a", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_destroy(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(NULL, "a", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_path(NULL, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod(NULL, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(NULL, 0, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_read(NULL, 0, TALLY_FLUSH_FORCE, v, v),
		      -EINVAL);
	CHECK_EQ_LONG(tally_stats_snapshot(NULL, TALLY_FLUSH_FORCE, v, v),
		      -EINVAL);
	CHECK_EQ_LONG(tally_stats_render(NULL, TALLY_FLUSH_FORCE, buf,
					 sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_stats_flush(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_periodic_start(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_periodic_stop(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_periodic_tick(NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_tree_info(NULL, &info), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_for_each_child(NULL, NULL, NULL),
		      -EINVAL);
	tally_stats_tree_destroy(NULL);	/* allowed */
}

/* ---- groups -------------------------------------------------------------- */

TEST(group_names_must_be_non_empty_short_and_slash_free)
{
	char longest[TALLY_STATS_NAME_MAX + 2];
	struct tally_stats_group *a, *b, *g;
	struct fixture f;
	char path[2 * TALLY_STATS_NAME_MAX + 8];

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 2, 0, NULL, 0));
	memset(longest, 'x', sizeof(longest));
	longest[TALLY_STATS_NAME_MAX + 1] = '\0';	/* one too long */
	g = (void *)1;
	CHECK_EQ_LONG(tally_stats_group_create(f.root, "", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_create(f.root, NULL, &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_create(f.root, "a/b", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_create(f.root, "/", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_create(f.root, longest, &g), -EINVAL);
	CHECK(g == (void *)1);		/* untouched on failure */

	longest[TALLY_STATS_NAME_MAX] = '\0';		/* the longest */
	a = child(f.root, longest);
	REQUIRE(a);
	CHECK(!strcmp(tally_stats_group_name(a), longest));
	CHECK_EQ_LONG(tally_stats_group_create(f.root, longest, &g), -EEXIST);
	/* The same name under another parent is another group. */
	b = child(a, longest);
	REQUIRE(b);
	CHECK(tally_stats_group_parent(b) == a);
	CHECK_EQ_LONG(tally_stats_group_path(b, path, sizeof(path)),
		      2 * TALLY_STATS_NAME_MAX + 1);
	CHECK_EQ_LONG(tally_stats_group_create(a, longest, NULL), -EEXIST);
	/* out may be NULL. */
	CHECK_EQ_LONG(tally_stats_group_create(a, "c", NULL), 0);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "c", &g), -ENOENT);
	CHECK_EQ_LONG(util_stats_info(f.t).groups, 4);
	fixture_fini(&f);
}

TEST(find_resolves_paths_and_rejects_empty_components)
{
	struct tally_stats_group *a, *b, *c, *g;
	struct fixture f;

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 0, 0, NULL, 0));
	a = child(f.root, "a");
	b = child(a, "b");
	c = child(b, "c");
	REQUIRE(a && b && c);
	CHECK(child(f.root, "b") != NULL);

	g = NULL;
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "", &g), 0);
	CHECK(g == f.root);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a", &g), 0);
	CHECK(g == a);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/b", &g), 0);
	CHECK(g == b);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/b/c", &g), 0);
	CHECK(g == c);

	g = (void *)1;
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "nope", &g), -ENOENT);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/nope", &g), -ENOENT);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/b/c/d", &g), -ENOENT);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "b/b", &g), -ENOENT);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a//b", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "/a", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/b/", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "/", &g), -EINVAL);
	/* An empty component is an error whether or not the rest exists. */
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "nope//b", &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "nope/", &g), -EINVAL);
	CHECK(g == (void *)1);		/* untouched on failure */
	CHECK_EQ_LONG(tally_stats_group_find(f.t, NULL, &g), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a", NULL), -EINVAL);
	fixture_fini(&f);
}

struct child_list {
	char names[16][16];
	unsigned int nr;
	int stop_at;		/* return 7 at this visit (1-based), or 0 */
};

static int collect_child(struct tally_stats_group *g, const char *name,
			 void *arg)
{
	struct child_list *l = arg;

	CHECK(!strcmp(tally_stats_group_name(g), name));
	if (l->nr < ARRAY_SIZE(l->names))
		snprintf(l->names[l->nr], sizeof(l->names[0]), "%s", name);
	l->nr++;
	return (int)l->nr == l->stop_at ? 7 : 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The children of @g, sorted and joined with ',' into @out. */
static void children_of(struct tally_stats_group *g, char *out, size_t len)
{
	struct child_list l = { .nr = 0 };

	CHECK_EQ_LONG(tally_stats_group_for_each_child(g, collect_child, &l),
		      0);
	qsort(l.names, l.nr, sizeof(l.names[0]), cmp_name);
	out[0] = '\0';
	for (unsigned int i = 0; i < l.nr; i++) {
		strncat(out, l.names[i], len - strlen(out) - 1);
		if (i + 1 < l.nr)
			strncat(out, ",", len - strlen(out) - 1);
	}
}

TEST(for_each_child_lists_exactly_the_live_children)
{
	struct tally_stats_group *a, *x, *y, *z, *g;
	struct child_list l = { .nr = 0, .stop_at = 2 };
	struct fixture f;
	char list[256];

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 1, 0, NULL, 0));
	children_of(f.root, list, sizeof(list));
	CHECK(!strcmp(list, ""));
	a = child(f.root, "a");
	x = child(a, "x");
	y = child(a, "y");
	z = child(a, "z");
	g = child(x, "deep");
	REQUIRE(a && x && y && z && g);
	children_of(f.root, list, sizeof(list));
	CHECK(!strcmp(list, "a"));
	children_of(a, list, sizeof(list));
	CHECK(!strcmp(list, "x,y,z"));
	children_of(g, list, sizeof(list));
	CHECK(!strcmp(list, ""));

	/* A non-zero return stops the walk and is returned. */
	CHECK_EQ_LONG(tally_stats_group_for_each_child(a, collect_child, &l),
		      7);
	CHECK_EQ_LONG(l.nr, 2);
	CHECK_EQ_LONG(tally_stats_group_for_each_child(a, NULL, NULL),
		      -EINVAL);

	CHECK_EQ_LONG(tally_stats_group_destroy(y), 0);
	children_of(a, list, sizeof(list));
	CHECK(!strcmp(list, "x,z"));
	CHECK_EQ_LONG(tally_stats_group_destroy(z), 0);
	children_of(a, list, sizeof(list));
	CHECK(!strcmp(list, "x"));
	/* A destroyed name can be used again. */
	y = child(a, "y");
	children_of(a, list, sizeof(list));
	CHECK(!strcmp(list, "x,y"));
	CHECK_EQ_LONG(tally_stats_group_destroy(g), 0);
	CHECK_EQ_LONG(tally_stats_group_destroy(x), 0);
	children_of(a, list, sizeof(list));
	CHECK(!strcmp(list, "y"));
	CHECK_EQ_LONG(util_stats_info(f.t).groups, 3);
	fixture_fini(&f);
}

TEST(destroy_refuses_the_root_and_groups_with_children)
{
	struct tally_stats_group *a, *b, *g;
	struct fixture f;

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 2, 0, NULL, 0));
	REQUIRE(chain_ab(f.root, &a, &b));
	CHECK_EQ_LONG(tally_stats_group_destroy(f.root), -EINVAL);
	CHECK_EQ_LONG(tally_stats_group_destroy(a), -EBUSY);
	/* a is untouched by the refusal. */
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a/b", &g), 0);
	CHECK_EQ_LONG(mod(&f, a, 1, 0, 5), 0);
	CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE), 5);
	CHECK_EQ_LONG(tally_stats_group_destroy(b), 0);
	CHECK_EQ_LONG(tally_stats_group_destroy(a), 0);
	CHECK_EQ_LONG(tally_stats_group_find(f.t, "a", &g), -ENOENT);
	CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE), 5);
	CHECK_EQ_LONG(read_local(f.root, 0, TALLY_FLUSH_FORCE), 0);
	CHECK_EQ_LONG(util_stats_info(f.t).groups, 1);
	fixture_fini(&f);
}

TEST(group_path_is_the_slash_joined_names_from_the_root)
{
	struct tally_stats_group *a, *b, *c;
	struct fixture f;
	char buf[32];

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 1, 0, NULL, 0));
	a = child(f.root, "alpha");
	b = child(a, "b");
	c = child(b, "gamma");
	REQUIRE(a && b && c);
	CHECK_EQ_LONG(tally_stats_group_path(f.root, buf, sizeof(buf)), 0);
	CHECK(!strcmp(buf, ""));
	CHECK_EQ_LONG(tally_stats_group_path(a, buf, sizeof(buf)), 5);
	CHECK(!strcmp(buf, "alpha"));
	CHECK_EQ_LONG(tally_stats_group_path(c, buf, sizeof(buf)), 13);
	CHECK(!strcmp(buf, "alpha/b/gamma"));
	/* Exactly long enough (with the NUL), then one byte short. */
	CHECK_EQ_LONG(tally_stats_group_path(c, buf, 14), 13);
	CHECK(!strcmp(buf, "alpha/b/gamma"));
	CHECK_EQ_LONG(tally_stats_group_path(c, buf, 13), -ENOSPC);
	CHECK_EQ_LONG(tally_stats_group_path(f.root, buf, 1), 0);
	/* No room even for the NUL: too short, as documented. */
	CHECK_EQ_LONG(tally_stats_group_path(c, buf, 0), -ENOSPC);
	CHECK_EQ_LONG(tally_stats_group_path(f.root, NULL, 0), -ENOSPC);
	CHECK_EQ_LONG(tally_stats_group_path(c, NULL, 10), -EINVAL);
	fixture_fini(&f);
}

/* ---- updates and reads --------------------------------------------------- */

TEST(bad_updates_are_rejected_and_record_nothing)
{
	struct tally_stats_group *a, *s;
	struct fixture sys, sim;

	REQUIRE(fixture_init(&sys, BENCH_STATS_TALLY, 0, 0, NULL, 0));
	if (!fixture_init(&sim, BENCH_STATS_TALLY, 4, 0, NULL, 0)) {
		fixture_fini(&sys);
		return;
	}
	a = child(sys.root, "a");
	s = child(sim.root, "s");
	REQUIRE(a && s);

	CHECK_EQ_LONG(tally_stats_mod(a, NS, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod(a, 1000, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod(a, 1, -1), -EINVAL);	/* event */
	CHECK_EQ_LONG(tally_stats_mod(a, 1, -100000), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(a, 0, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod(a, 1, 0), 0);
	CHECK_EQ_LONG(tally_stats_mod(a, 0, -3), 0);		/* state */

	CHECK_EQ_LONG(tally_stats_mod(s, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 4, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 1u << 20, 0, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 3, NS, 1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 3, 1, -1), -EINVAL);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 3, 1, 2), 0);
	CHECK_EQ_LONG(tally_stats_mod_cpu(s, 3, 2, -2), 0);

	/* Nothing of the refused updates was recorded. */
	CHECK_EQ_LONG(read_hier(a, 0, TALLY_FLUSH_FORCE), -3);
	CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), 0);
	CHECK_EQ_LONG(read_hier(a, 2, TALLY_FLUSH_FORCE), 0);
	CHECK_EQ_LONG(read_hier(s, 0, TALLY_FLUSH_FORCE), 0);
	CHECK_EQ_LONG(read_hier(s, 1, TALLY_FLUSH_FORCE), 2);
	CHECK_EQ_LONG(read_hier(s, 2, TALLY_FLUSH_FORCE), -2);
	CHECK_EQ_LONG(read_hier(sim.root, 1, TALLY_FLUSH_FORCE), 2);

	/* Reads of unknown stats or modes. */
	CHECK_EQ_LONG(tally_stats_read(s, NS, TALLY_FLUSH_FORCE, NULL, NULL),
		      -EINVAL);
	CHECK_EQ_LONG(tally_stats_read(s, 0, (enum tally_flush_mode)4, NULL,
				       NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_snapshot(s, (enum tally_flush_mode)-1,
					   NULL, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_stats_read(s, 0, TALLY_FLUSH_NONE, NULL, NULL), 0);
	fixture_fini(&sim);
	fixture_fini(&sys);
}

TEST(render_prints_one_name_value_line_per_stat)
{
	struct tally_stats_group *a, *b;
	struct fixture f;
	const char *want = "bytes -7\nfaults 12\npages 0\n";
	char buf[64];
	size_t n = strlen(want);

	REQUIRE(fixture_init(&f, BENCH_STATS_TALLY, 3, 0, NULL, 0));
	REQUIRE(chain_ab(f.root, &a, &b));
	mod(&f, a, 0, 0, -10);
	mod(&f, b, 2, 0, 3);
	mod(&f, b, 1, 1, 12);
	mod(&f, b, 1, 2, 4);
	mod(&f, a, 1, 2, -4);
	memset(buf, 'z', sizeof(buf));
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_FORCE, buf,
					 sizeof(buf)), (long)n);
	if (!CHECK(!strcmp(buf, want)))
		harness_log("rendered \"%s\"", buf);
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_NONE, buf, n + 1),
		      (long)n);
	CHECK(!strcmp(buf, want));
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_NONE, buf, n),
		      -ENOSPC);
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_NONE, buf, 3),
		      -ENOSPC);
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_NONE, buf, 0),
		      -ENOSPC);
	CHECK_EQ_LONG(tally_stats_render(a, TALLY_FLUSH_NONE, NULL, 10),
		      -EINVAL);
	CHECK_EQ_LONG(tally_stats_render(f.root, TALLY_FLUSH_FORCE, buf,
					 sizeof(buf)), (long)n);
	CHECK(!strcmp(buf, want));
	CHECK_EQ_LONG(tally_stats_render(b, TALLY_FLUSH_NONE, buf,
					 sizeof(buf)), 26);
	CHECK(!strcmp(buf, "bytes 3\nfaults 12\npages 4\n"));
	fixture_fini(&f);
}

TEST(none_reads_never_flush)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct tally_stats_group *a, *b;
		struct tally_stats_info before;
		long hier[NS], local[NS];
		struct fixture f;

		if (!fixture_init(&f, designs[d], d % 2 ? 0 : 4, 0, NULL, 0))
			continue;
		a = child(f.root, "a");
		b = child(a, "b");
		if (!a || !b)
			break;
		mod(&f, b, 1, 0, 11);
		mod(&f, a, 2, 0, 5);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE), 16);
		/* Freshly flushed; each update stays invisible to NONE. */
		before = util_stats_info(f.t);
		for (int i = 1; i <= 300; i++) {
			mod(&f, b, (unsigned int)i, 0, 1000);
			mod(&f, b, (unsigned int)i, 1, 1000);
			if (!CHECK_EQ_LONG(read_hier(b, 0, TALLY_FLUSH_NONE),
					   11) ||
			    !CHECK_EQ_LONG(read_local(a, 0, TALLY_FLUSH_NONE),
					   5) ||
			    !CHECK_EQ_LONG(read_hier(f.root, 1,
						     TALLY_FLUSH_NONE), 0))
				break;
		}
		CHECK_EQ_LONG(tally_stats_snapshot(a, TALLY_FLUSH_NONE, hier,
						   local), 0);
		CHECK_EQ_LONG(hier[0], 16);
		CHECK_EQ_LONG(hier[1], 0);
		CHECK_EQ_LONG(local[0], 5);
		CHECK_EQ_LONG(util_stats_info(f.t).flushes, before.flushes);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE),
			      16 + 300 * 1000);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_NONE), 300 * 1000);
		if (harness_test_failed())
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
		fixture_fini(&f);
	}
}

/* ---- the oracle ---------------------------------------------------------- */

#define MAXG 40

/*
 * A slot of the model: a live group, or a free slot.  A destroyed group's
 * hierarchical value moves into dead[] of its parent, so that the parent's
 * hierarchical value stays the sum of its subtree, destroyed groups
 * included, and the slot can hold a new group.
 */
struct mgroup {
	struct tally_stats_group *g;
	int parent;
	bool alive;
	unsigned int nr_children;	/* alive */
	long local[NS];			/* sum of every update */
	long dead[NS];			/* of destroyed descendants */
	long seen_hier[NS], seen_local[NS];	/* at the last covering flush */
};

struct model {
	struct fixture f;
	enum bench_stats_design design;
	struct mgroup m[MAXG];
	int nr;				/* slots used */
	unsigned long bound;
};

static bool in_subtree(const struct model *md, int top, int j)
{
	for (; j >= 0; j = md->m[j].parent)
		if (j == top)
			return true;
	return false;
}

/* The exact hierarchical values of every live group. */
static void exact_all(const struct model *md, long (*hier)[NS])
{
	memset(hier, 0, sizeof(long) * NS * (size_t)md->nr);
	for (int j = 0; j < md->nr; j++) {
		if (!md->m[j].alive)
			continue;
		for (int a = j; a >= 0; a = md->m[a].parent)
			for (unsigned int s = 0; s < NS; s++)
				hier[a][s] += md->m[j].local[s] +
					      md->m[j].dead[s];
	}
}

static long exact_hier(const struct model *md, int i, unsigned int s)
{
	long sum = 0;

	for (int j = 0; j < md->nr; j++)
		if (md->m[j].alive && in_subtree(md, i, j))
			sum += md->m[j].local[s] + md->m[j].dead[s];
	return sum;
}

/* A flush of @top's subtree: every live group in it shows the truth. */
static void model_flush(struct model *md, int top)
{
	long hier[MAXG][NS];

	exact_all(md, hier);
	for (int j = 0; j < md->nr; j++) {
		if (!md->m[j].alive || !in_subtree(md, top, j))
			continue;
		for (unsigned int s = 0; s < NS; s++) {
			md->m[j].seen_hier[s] = hier[j][s];
			md->m[j].seen_local[s] = md->m[j].local[s];
		}
	}
}

static int random_alive(struct model *md, struct rng *r)
{
	for (;;) {
		int i = (int)rng_below(r, (uint64_t)md->nr);

		if (md->m[i].alive)
			return i;
	}
}

static long random_delta(struct rng *r, unsigned int stat)
{
	uint64_t k = rng_below(r, 100);
	long v;

	if (k < 80)
		v = (long)rng_below(r, 21);
	else if (k < 95)
		v = (long)rng_below(r, 200);
	else
		v = (long)rng_below(r, 5000);
	if (!schema[stat].kind && rng_below(r, 2))
		v = -v;
	return v;
}

static const char *mode_name(enum tally_flush_mode m)
{
	static const char *const n[] = { "if_needed", "force", "ratelimited",
					 "none" };
	return n[m];
}

/*
 * Read group @i in @mode (one stat, or a snapshot) and check the values
 * against the model; returns false on the first mismatch.
 */
static bool model_read(struct model *md, int i, enum tally_flush_mode mode,
		       struct rng *r)
{
	struct tally_stats_info before = util_stats_info(md->f.t), after;
	struct mgroup *mg = &md->m[i];
	long hier[NS], local[NS];
	unsigned int first = 0, end = NS;
	bool ok = true;

	if (rng_below(r, 2)) {
		first = (unsigned int)rng_below(r, NS);
		end = first + 1;
		ok &= CHECK_EQ_LONG(tally_stats_read(mg->g, first, mode,
						     &hier[first],
						     &local[first]), 0);
	} else {
		ok &= CHECK_EQ_LONG(tally_stats_snapshot(mg->g, mode, hier,
							 local), 0);
	}
	after = util_stats_info(md->f.t);
	if (mode == TALLY_FLUSH_NONE)
		ok &= CHECK_EQ_LONG(after.flushes, before.flushes);
	if (mode == TALLY_FLUSH_FORCE)
		ok &= CHECK_EQ_LONG(after.flushes, before.flushes + 1);
	ok &= CHECK_EQ_LONG(bench_stats_skipped(md->f.t), 0);
	if (after.flushes != before.flushes)
		model_flush(md, after.root_flushes != before.root_flushes ? 0
									   : i);
	for (unsigned int s = first; s < end; s++) {
		long truth = exact_hier(md, i, s);

		ok &= CHECK_EQ_LONG(hier[s], mg->seen_hier[s]);
		ok &= CHECK_EQ_LONG(local[s], mg->seen_local[s]);
		if (mode == TALLY_FLUSH_FORCE) {
			ok &= CHECK_EQ_LONG(hier[s], truth);
			ok &= CHECK_EQ_LONG(local[s], mg->local[s]);
		}
		if (mode == TALLY_FLUSH_IF_NEEDED &&
		    (md->design == BENCH_STATS_TALLY ||
		     md->design == BENCH_STATS_LINUX68)) {
			long gap = hier[s] - truth;

			ok &= CHECK_LE_ULONG(gap < 0 ? -gap : gap, md->bound);
		}
	}
	if (!ok)
		harness_log("%s read of group %d (stat %u..%u) failed",
			    mode_name(mode), i, first, end - 1);
	return ok;
}

static void run_oracle(enum bench_stats_design design, unsigned int nr_cpus,
		       unsigned long batch, long steps, uint64_t stream)
{
	struct model *md = calloc(1, sizeof(*md));
	struct rng r = rng_seed(stream);
	unsigned long creates = 0, destroys = 0, flushes_seen = 0;

	if (!CHECK(md))
		return;
	if (!fixture_init(&md->f, design, nr_cpus, batch, NULL, 0)) {
		free(md);
		return;
	}
	md->design = design;
	md->bound = tally_stats_read_bound(md->f.t);
	md->m[0].g = md->f.root;
	md->m[0].parent = -1;
	md->m[0].alive = true;
	md->nr = 1;

	for (long step = 0; step < steps && !harness_test_failed(); step++) {
		uint64_t op = rng_below(&r, 100);

		if (op < 10) {
			/* Create a child of a random live group. */
			int p = random_alive(md, &r), i;
			struct mgroup *mg;
			char name[24];

			for (i = 1; i < md->nr && md->m[i].alive; i++)
				;
			if (i == MAXG)
				continue;
			mg = &md->m[i];
			memset(mg, 0, sizeof(*mg));
			snprintf(name, sizeof(name), "g%lu", creates);
			if (!CHECK_EQ_LONG(tally_stats_group_create(md->m[p].g,
								    name,
								    &mg->g), 0))
				break;
			mg->parent = p;
			mg->alive = true;
			md->m[p].nr_children++;
			if (i == md->nr)
				md->nr++;
			creates++;
		} else if (op < 16) {
			/* Destroy a random live leaf (never the root). */
			int i = random_alive(md, &r);
			struct mgroup *mg = &md->m[i];

			if (!i)
				continue;
			if (mg->nr_children) {
				CHECK_EQ_LONG(tally_stats_group_destroy(mg->g),
					      -EBUSY);
				continue;
			}
			if (!CHECK_EQ_LONG(tally_stats_group_destroy(mg->g), 0))
				break;
			for (unsigned int st = 0; st < NS; st++)
				md->m[mg->parent].dead[st] +=
					mg->local[st] + mg->dead[st];
			mg->alive = false;
			mg->g = NULL;
			md->m[mg->parent].nr_children--;
			destroys++;
		} else if (op < 70) {
			int i = random_alive(md, &r);
			unsigned int s = (unsigned int)rng_below(&r, NS);
			long delta = random_delta(&r, s);
			unsigned int cpu = (unsigned int)rng_next(&r);

			if (!CHECK_EQ_LONG(mod(&md->f, md->m[i].g, cpu, s,
					       delta), 0))
				break;
			md->m[i].local[s] += delta;
		} else {
			int i = random_alive(md, &r);
			enum tally_flush_mode mode =
				(enum tally_flush_mode)rng_below(&r, 4);
			uint64_t before = util_stats_info(md->f.t).flushes;

			if (!model_read(md, i, mode, &r))
				break;
			flushes_seen += util_stats_info(md->f.t).flushes != before;
		}
	}
	/* At the end, a forced read of every group is exact. */
	for (int i = 0; i < md->nr && !harness_test_failed(); i++)
		if (md->m[i].alive)
			model_read(md, i, TALLY_FLUSH_FORCE, &r);
	harness_info("design %s, %u CPUs, batch %lu: %ld steps, %lu creates, "
		     "%lu destroys, %lu reads that flushed",
		     bench_stats_design_name(design), md->f.nr_cpus,
		     batch ? batch : 64, steps, creates, destroys,
		     flushes_seen);
	fixture_fini(&md->f);
	free(md);
}

TEST(oracle_random_trees_every_design_and_domain)
{
	static const unsigned int cpus[] = { 0, 1, 3, 64 };
	static const unsigned long batches[] = { 0, 4, 2 };
	uint64_t stream = 0;

	for (size_t d = 0; d < ARRAY_SIZE(designs); d++)
		for (size_t c = 0; c < ARRAY_SIZE(cpus); c++)
			for (size_t b = 0; b < ARRAY_SIZE(batches); b++) {
				run_oracle(designs[d], cpus[c], batches[b],
					   harness_scale(12000), stream++);
				if (harness_test_failed())
					return;
			}
}

/* ---- the if-needed bound ------------------------------------------------- */

TEST(read_bound_is_threshold_plus_what_cpus_hold_back)
{
	static const unsigned int cpus[] = { 1, 3, 8, 64 };
	static const unsigned long batches[] = { 2, 4, 64, 256 };

	for (size_t c = 0; c < ARRAY_SIZE(cpus); c++)
		for (size_t b = 0; b < ARRAY_SIZE(batches); b++) {
			struct fixture f;
			unsigned long n = cpus[c], k = batches[b];

			if (!fixture_init(&f, BENCH_STATS_TALLY, cpus[c],
					  batches[b], NULL, 0))
				return;
			CHECK_EQ_ULONG(tally_stats_read_bound(f.t),
				       k * n + n * (k - 1));
			fixture_fini(&f);
		}
	/* The default batch is 64, on the system domain too. */
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct fixture f;
		unsigned long n;

		if (!fixture_init(&f, designs[d], 0, 0, NULL, 0))
			return;
		n = f.nr_cpus;
		CHECK_EQ_ULONG(tally_stats_read_bound(f.t), 64 * n + 63 * n);
		fixture_fini(&f);
	}
}

/*
 * 8 CPUs, batch 4: threshold 32, bound 56.  Every CPU moves one batch to
 * the threshold count (32, not over) and holds 3 back: 56 unflushed
 * units, the most an if-needed read may miss.  One more unit passes the
 * threshold and the read flushes.
 */
TEST(if_needed_read_misses_at_most_the_bound_then_flushes)
{
	static const enum bench_stats_design d2[] = { BENCH_STATS_TALLY,
						      BENCH_STATS_LINUX68 };

	for (size_t d = 0; d < ARRAY_SIZE(d2); d++) {
		struct tally_stats_group *a, *b;
		struct fixture f;
		uint64_t flushes;

		if (!fixture_init(&f, d2[d], 8, 4, NULL, 0))
			return;
		REQUIRE(tally_stats_read_bound(f.t) == 56);
		REQUIRE(chain_ab(f.root, &a, &b));
		for (unsigned int cpu = 0; cpu < 8; cpu++)
			mod(&f, b, cpu, 1, 4);
		for (unsigned int cpu = 0; cpu < 8; cpu++)
			for (int i = 0; i < 3; i++)
				mod(&f, b, cpu, i % 2 ? 1 : 0, i % 2 ? 1 : -1);
		flushes = util_stats_info(f.t).flushes;
		/* 56 units pending: a, b and the root do not flush. */
		CHECK_EQ_LONG(read_hier(b, 1, TALLY_FLUSH_IF_NEEDED), 0);
		CHECK_EQ_LONG(read_hier(a, 0, TALLY_FLUSH_IF_NEEDED), 0);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_IF_NEEDED), 0);
		CHECK_EQ_LONG(util_stats_info(f.t).flushes, flushes);
		/* The 57th unit: a reaches 36 > 32 and flushes. */
		mod(&f, b, 5, 1, 1);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_IF_NEEDED),
			      32 + 8 + 1);
		CHECK_EQ_LONG(read_hier(a, 0, TALLY_FLUSH_NONE), -16);
		CHECK_EQ_LONG(util_stats_info(f.t).flushes, flushes + 1);
		/* The flush of a covered b too; the root still needs one. */
		CHECK_EQ_LONG(read_hier(b, 1, TALLY_FLUSH_NONE), 41);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_IF_NEEDED), 41);
		fixture_fini(&f);
	}
}

/*
 * Random small updates on a tree: an if-needed read that does not flush
 * misses at most the volume (sum of |delta|) updated in the group's
 * subtree since a flush last covered the group, and that volume is never
 * more than the bound: past it, the read flushes.
 */
#define NB 6
static const int bound_parent[NB] = { -1, 0, 1, 1, 0, 4 };

static bool bound_below(int top, int j)
{
	for (; j >= 0; j = bound_parent[j])
		if (j == top)
			return true;
	return false;
}

struct bound_run {
	struct fixture f;
	struct tally_stats_group *g[NB];
	long local[NB][NS];		/* sums of the updates */
	unsigned long vol[NB];		/* unflushed volume of the subtree */
	unsigned long bound, flushed, near;
};

/* If-needed snapshot of group @i, checked; false on a failed check. */
static bool bound_read(struct bound_run *b, int i)
{
	uint64_t before = util_stats_info(b->f.t).flushes;
	unsigned long miss = 0;
	long hier[NS];
	bool flushed, ok = true;

	ok &= CHECK_EQ_LONG(tally_stats_snapshot(b->g[i],
						 TALLY_FLUSH_IF_NEEDED, hier,
						 NULL), 0);
	flushed = util_stats_info(b->f.t).flushes != before;
	for (unsigned int st = 0; st < NS; st++) {
		long truth = 0;

		for (int j = 0; j < NB; j++)
			if (bound_below(i, j))
				truth += b->local[j][st];
		if (flushed)
			ok &= CHECK_EQ_LONG(hier[st], truth);
		miss += (unsigned long)labs(truth - hier[st]);
	}
	if (flushed) {
		for (int j = 0; j < NB; j++)
			if (bound_below(i, j))
				b->vol[j] = 0;
		b->flushed++;
		return ok;
	}
	ok &= CHECK_LE_ULONG(b->vol[i], b->bound);
	ok &= CHECK_LE_ULONG(miss, b->vol[i]);
	b->near += b->vol[i] > b->bound / 2;
	return ok;
}

static void bound_random_run(enum bench_stats_design design,
			     unsigned int nr_cpus, uint64_t stream)
{
	struct bound_run *b = calloc(1, sizeof(*b));
	struct rng r = rng_seed(stream);

	if (!CHECK(b) || !fixture_init(&b->f, design, nr_cpus, 4, NULL, 0)) {
		free(b);
		return;
	}
	b->bound = tally_stats_read_bound(b->f.t);
	b->g[0] = b->f.root;
	for (int i = 1; i < NB; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		b->g[i] = child(b->g[bound_parent[i]], name);
	}
	for (long step = 0; step < 20000; step++) {
		int i = (int)rng_below(&r, NB);
		unsigned int st = (unsigned int)rng_below(&r, NS);
		long delta = (long)rng_below(&r, 7);

		if (!schema[st].kind && rng_below(&r, 2))
			delta = -delta;
		mod(&b->f, b->g[i], (unsigned int)rng_below(&r, 64), st, delta);
		b->local[i][st] += delta;
		for (int a = i; a >= 0; a = bound_parent[a])
			b->vol[a] += (unsigned long)labs(delta);
		if (rng_below(&r, 4))
			continue;
		i = (int)rng_below(&r, NB);
		if (!bound_read(b, i)) {
			harness_log("design %s, %u CPUs, step %ld, group %d",
				    bench_stats_design_name(design), nr_cpus,
				    step, i);
			break;
		}
	}
	/* Which sides of the threshold the random reads exercised. */
	harness_info("design %s, %u CPUs: %lu reads flushed, %lu read near "
		     "the bound", bench_stats_design_name(design), nr_cpus,
		     b->flushed, b->near);
	fixture_fini(&b->f);
	free(b);
}

TEST(if_needed_read_stays_within_bound_of_truth)
{
	static const unsigned int cpus[] = { 8, 3, 1 };

	for (size_t c = 0; c < ARRAY_SIZE(cpus); c++) {
		bound_random_run(BENCH_STATS_TALLY, cpus[c], c);
		bound_random_run(BENCH_STATS_LINUX68, cpus[c], 10 + c);
		if (harness_test_failed())
			return;
	}
}

/* ---- periodic and ratelimited flushing ----------------------------------- */

#define T0 1000000000000ull	/* fake clock start */
#define PERIOD 1000000ull	/* 1 ms of fake time */

TEST(periodic_tick_flushes_the_root_once_per_period)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct fake_clock clk = { T0 };
		struct tally_stats_group *a, *b;
		struct fixture f;
		uint64_t roots;

		if (!fixture_init(&f, designs[d], 4, 0, &clk, PERIOD))
			return;
		REQUIRE(chain_ab(f.root, &a, &b));
		roots = util_stats_info(f.t).root_flushes;
		mod(&f, b, 3, 1, 9);
		fake_set(&clk, T0 + PERIOD - 1);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 0);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE), 0);
		CHECK_EQ_LONG(util_stats_info(f.t).root_flushes, roots);

		fake_set(&clk, T0 + PERIOD);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 1);
		CHECK_EQ_LONG(util_stats_info(f.t).root_flushes, roots + 1);
		/* The whole tree was flushed, without any read. */
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE), 9);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_NONE), 9);
		CHECK_EQ_LONG(read_local(b, 1, TALLY_FLUSH_NONE), 9);
		/* Not due again until a period after that flush. */
		mod(&f, a, 0, 1, 1);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 0);
		fake_set(&clk, T0 + 2 * PERIOD - 1);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 0);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE), 9);
		fake_set(&clk, T0 + 2 * PERIOD);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 1);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE), 10);
		/* A forced read of the root also counts as a root flush. */
		fake_set(&clk, T0 + 2 * PERIOD + PERIOD / 2);
		mod(&f, a, 0, 1, 1);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_FORCE), 11);
		fake_set(&clk, T0 + 3 * PERIOD);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 0);
		fake_set(&clk, T0 + 3 * PERIOD + PERIOD / 2);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 1);
		if (harness_test_failed()) {
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
			fixture_fini(&f);
			return;
		}
		fixture_fini(&f);
	}
}

TEST(ratelimited_read_flushes_only_when_two_periods_late)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct fake_clock clk = { T0 };
		struct tally_stats_group *a, *b;
		struct fixture f;
		uint64_t flushes;

		if (!fixture_init(&f, designs[d], 2, 0, &clk, PERIOD))
			return;
		REQUIRE(chain_ab(f.root, &a, &b));
		mod(&f, b, 1, 0, -4);
		flushes = util_stats_info(f.t).flushes;
		fake_set(&clk, T0 + 2 * PERIOD);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED), 0);
		CHECK_EQ_LONG(read_hier(b, 0, TALLY_FLUSH_RATELIMITED), 0);
		CHECK_EQ_LONG(util_stats_info(f.t).flushes, flushes);
		fake_set(&clk, T0 + 2 * PERIOD + 1);
		/* Late: the read flushes (its group). */
		CHECK_EQ_LONG(read_hier(a, 0, TALLY_FLUSH_RATELIMITED), -4);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED),
			      -4);
		/* A root flush resets the lateness. */
		mod(&f, b, 0, 0, -4);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED),
			      -4);
		fake_set(&clk, T0 + 4 * PERIOD + 1);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED),
			      -4);
		fake_set(&clk, T0 + 4 * PERIOD + 2);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED),
			      -8);
		/* So does the periodic tick. */
		mod(&f, b, 1, 0, -4);
		fake_set(&clk, T0 + 6 * PERIOD);
		CHECK_EQ_LONG(tally_stats_periodic_tick(f.t), 1);
		mod(&f, b, 1, 0, -4);
		fake_set(&clk, T0 + 8 * PERIOD);
		CHECK_EQ_LONG(read_hier(b, 0, TALLY_FLUSH_RATELIMITED), -12);
		fake_set(&clk, T0 + 8 * PERIOD + 1);
		CHECK_EQ_LONG(read_hier(b, 0, TALLY_FLUSH_RATELIMITED), -16);
		if (harness_test_failed()) {
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
			fixture_fini(&f);
			return;
		}
		fixture_fini(&f);
	}
}

/* Poll a NONE read of @g until it shows @want, or a hang. */
static bool eventually_shows(struct tally_stats_group *g, unsigned int stat,
			     long want)
{
	double timeout = HARNESS_HANG_S, end = harness_now() + timeout;
	long v = 0;

	while (harness_now() < end) {
		CHECK_EQ_LONG(tally_stats_read(g, stat, TALLY_FLUSH_NONE, &v,
					       NULL), 0);
		if (v == want)
			return true;
		usleep(1000);
	}
	harness_log("still %ld after %.1f s, want %ld", v, timeout, want);
	return false;
}

/* 2 x period_ns wraps past 2^63: "two periods late" must not. */
TEST(ratelimited_read_with_a_huge_period_does_not_flush_early)
{
	struct fake_clock clk = { T0 };
	struct tally_stats_group *a, *b;
	struct fixture f;

	if (!fixture_init(&f, BENCH_STATS_TALLY, 2, 0, &clk, 1ull << 63))
		return;
	REQUIRE(chain_ab(f.root, &a, &b));
	mod(&f, b, 1, 0, -4);
	fake_set(&clk, T0 + 1000000000ull);
	CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_RATELIMITED), 0);
	fixture_fini(&f);
}

TEST(periodic_thread_flushes_in_the_background)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct tally_stats_group *a;
		struct fixture f;

		if (!fixture_init(&f, designs[d], d % 2 ? 0 : 3, 0, NULL,
				  20000000ull))
			return;
		a = child(f.root, "a");
		REQUIRE(a);
		/* Stop without start is fine. */
		CHECK_EQ_LONG(tally_stats_periodic_stop(f.t), 0);
		CHECK_EQ_LONG(tally_stats_periodic_start(f.t), 0);
		CHECK_EQ_LONG(tally_stats_periodic_start(f.t), -EALREADY);
		mod(&f, a, 2, 1, 5);
		CHECK(eventually_shows(f.root, 1, 5));
		CHECK(eventually_shows(a, 1, 5));
		CHECK_EQ_LONG(tally_stats_periodic_stop(f.t), 0);
		CHECK_EQ_LONG(tally_stats_periodic_stop(f.t), 0);
		/* Stopped: nothing flushes any more. */
		mod(&f, a, 1, 1, 5);
		usleep(60000);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE), 5);
		/* It starts again; the tree is destroyed with it on. */
		CHECK_EQ_LONG(tally_stats_periodic_start(f.t), 0);
		CHECK(eventually_shows(f.root, 1, 10));
		if (harness_test_failed())
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
		fixture_fini(&f);
	}
}

/* The real time, counting the calls. */
static uint64_t counting_clock(void *arg)
{
	struct timespec ts;

	__atomic_add_fetch((unsigned long *)arg, 1, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A tick (and a flush) per period, not a busy loop of ticks: the clock
 * reads are bounded by the periods that passed, measured around the run
 * (a loaded machine only makes the thread tick less often, never more).
 * The run lasts 3 periods, and on until a tick flushed the root.
 */
TEST(periodic_thread_sleeps_between_periods)
{
	struct tally_stats_options o = { 0 };
	struct tally_stats_tree *t = NULL;
	unsigned long calls = 0, n;
	double start, periods, end;

	o.period_ns = 100000000ull;		/* 100 ms */
	o.clock = counting_clock;
	o.clock_arg = &calls;
	REQUIRE(tally_stats_tree_create(&t, schema, NS, &o) == 0);
	start = harness_now();
	CHECK_EQ_LONG(tally_stats_periodic_start(t), 0);
	usleep(300000);
	end = harness_now() + HARNESS_HANG_S;
	while (!util_stats_info(t).root_flushes && harness_now() < end)
		usleep(10000);
	CHECK_EQ_LONG(tally_stats_periodic_stop(t), 0);
	periods = (harness_now() - start) / 0.1;
	n = __atomic_load_n(&calls, __ATOMIC_RELAXED);
	if (!CHECK_LE_ULONG(n, (unsigned long)(10 * (periods + 1))))
		harness_log("%lu clock reads in %.1f periods", n, periods);
	CHECK_CMP_ULONG(util_stats_info(t).root_flushes, >=, 1);
	tally_stats_tree_destroy(t);
}

/* ---- destroy keeps the stats --------------------------------------------- */

TEST(destroy_moves_unflushed_stats_into_the_ancestors)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct tally_stats_group *a, *b, *leaf, *other;
		struct fixture f;
		long want[NS] = { 0 }, hier[NS], local[NS];

		if (!fixture_init(&f, designs[d], 6, 4, NULL, 0))
			return;
		a = child(f.root, "a");
		b = child(a, "b");
		leaf = child(b, "leaf");
		other = child(a, "other");
		REQUIRE(a && b && leaf && other);
		for (unsigned int cpu = 0; cpu < 6; cpu++) {
			mod(&f, leaf, cpu, 0, 100 + cpu);
			mod(&f, leaf, cpu, 1, 7);
			mod(&f, leaf, cpu, 2, -(long)cpu);
			want[0] += 100 + cpu;
			want[1] += 7;
			want[2] -= cpu;
		}
		/* Some flushed into the leaf alone, some not flushed at all. */
		CHECK_EQ_LONG(read_hier(leaf, 0, TALLY_FLUSH_FORCE), want[0]);
		for (unsigned int cpu = 0; cpu < 6; cpu += 2) {
			mod(&f, leaf, cpu, 0, 1000);
			mod(&f, leaf, cpu, 1, 1);
			want[0] += 1000;
			want[1] += 1;
		}
		mod(&f, other, 1, 0, 5);
		mod(&f, b, 1, 2, 3);
		CHECK_EQ_LONG(tally_stats_group_destroy(leaf), 0);
		/* New groups may reuse the leaf's memory (zeroed). */
		for (int i = 0; i < 8; i++) {
			char name[16];

			snprintf(name, sizeof(name), "new%d", i);
			CHECK(child(f.root, name) != NULL);
		}
		CHECK_EQ_LONG(tally_stats_snapshot(b, TALLY_FLUSH_FORCE, hier,
						   local), 0);
		CHECK_EQ_LONG(hier[0], want[0]);
		CHECK_EQ_LONG(hier[1], want[1]);
		CHECK_EQ_LONG(hier[2], want[2] + 3);
		CHECK_EQ_LONG(local[0], 0);
		CHECK_EQ_LONG(local[2], 3);
		CHECK_EQ_LONG(tally_stats_snapshot(f.root, TALLY_FLUSH_FORCE,
						   hier, local), 0);
		CHECK_EQ_LONG(hier[0], want[0] + 5);
		CHECK_EQ_LONG(hier[1], want[1]);
		CHECK_EQ_LONG(hier[2], want[2] + 3);
		CHECK_EQ_LONG(local[0], 0);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), want[1]);
		/* Then b goes too: a and the root keep everything. */
		mod(&f, b, 4, 1, 2);
		CHECK_EQ_LONG(tally_stats_group_destroy(b), 0);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), want[1] + 2);
		CHECK_EQ_LONG(read_local(a, 1, TALLY_FLUSH_NONE), 0);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE),
			      want[0] + 5);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_NONE),
			      want[1] + 2);
		if (harness_test_failed()) {
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
			fixture_fini(&f);
			return;
		}
		fixture_fini(&f);
	}
}

struct leaf_writer {
	struct tally_stats_group *g;
	long n;
};

static void *leaf_writer_main(void *arg)
{
	struct leaf_writer *w = arg;

	for (long i = 0; i < w->n; i++) {
		CHECK_EQ_LONG(tally_stats_mod(w->g, 1, 1), 0);
		CHECK_EQ_LONG(tally_stats_mod(w->g, 0, i % 2 ? 3 : -1), 0);
		if (i % 1024 == 0)
			sched_yield();
	}
	return NULL;
}

TEST(destroy_after_threads_updated_a_leaf_keeps_their_updates)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct leaf_writer w[4];
		pthread_t th[4];
		struct tally_stats_group *a, *leaf;
		struct fixture f;
		long n = harness_scale(20000);

		if (!fixture_init(&f, designs[d], 0, 0, NULL, 0))
			return;
		a = child(f.root, "a");
		leaf = child(a, "leaf");
		REQUIRE(a && leaf);
		for (int i = 0; i < 4; i++) {
			w[i].g = leaf;
			w[i].n = n;
			REQUIRE(pthread_create(&th[i], NULL, leaf_writer_main,
					       &w[i]) == 0);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		CHECK_EQ_LONG(tally_stats_group_destroy(leaf), 0);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), 4 * n);
		CHECK_EQ_LONG(read_hier(a, 0, TALLY_FLUSH_NONE), 4 * n);
		CHECK_EQ_LONG(read_local(a, 1, TALLY_FLUSH_NONE), 0);
		CHECK_EQ_LONG(read_hier(f.root, 1, TALLY_FLUSH_FORCE), 4 * n);
		if (harness_test_failed()) {
			harness_log("design %s",
				    bench_stats_design_name(designs[d]));
			fixture_fini(&f);
			return;
		}
		fixture_fini(&f);
	}
}

/* ---- processes ----------------------------------------------------------- */

TEST(forked_child_updates_and_reads_exact_values)
{
	for (size_t d = 0; d < ARRAY_SIZE(designs); d++) {
		struct tally_stats_group *a, *b;
		struct fixture f;
		pid_t pid;

		if (!fixture_init(&f, designs[d], 0, 4, NULL, 0))
			return;
		REQUIRE(chain_ab(f.root, &a, &b));
		for (int i = 0; i < 1000; i++)
			tally_stats_mod(b, 1, 1);
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), 1000);
		for (int i = 0; i < 500; i++)
			tally_stats_mod(b, 1, 1);	/* unflushed at fork */
		pid = fork();
		if (pid == 0) {
			struct tally_stats_group *c = child(b, "c");

			for (int i = 0; i < 3000; i++) {
				tally_stats_mod(b, 1, 1);
				tally_stats_mod(c, 0, -2);
			}
			CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), 4500);
			CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE),
				      -6000);
			CHECK_EQ_LONG(tally_stats_group_destroy(c), 0);
			CHECK_EQ_LONG(read_hier(b, 0, TALLY_FLUSH_FORCE),
				      -6000);
			tally_stats_tree_destroy(f.t);
			harness_child_exit();
		}
		CHECK_EQ_LONG(harness_wait_child(pid), 0);
		/* The parent's tree is its own. */
		CHECK_EQ_LONG(read_hier(a, 1, TALLY_FLUSH_FORCE), 1500);
		CHECK_EQ_LONG(read_hier(f.root, 0, TALLY_FLUSH_FORCE), 0);
		fixture_fini(&f);
	}
}

TEST(debug_build_aborts_on_update_of_destroyed_group)
{
#ifndef TALLY_DEBUG
	harness_log("skipped: built without -DTALLY_DEBUG");
#else
	struct tally_stats_group *a, *b;
	struct fixture sys, sim;
	pid_t pid;

	REQUIRE(fixture_init(&sys, BENCH_STATS_TALLY, 0, 0, NULL, 0));
	REQUIRE(fixture_init(&sim, BENCH_STATS_TALLY, 4, 0, NULL, 0));
	a = child(sys.root, "a");
	b = child(sim.root, "b");
	REQUIRE(a && b);
	CHECK_EQ_LONG(tally_stats_group_destroy(a), 0);
	CHECK_EQ_LONG(tally_stats_group_destroy(b), 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* Keep the expected abort's report out of the log. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		tally_stats_mod(a, 0, 1);
		_exit(0);
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 128 + SIGABRT);
	pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		tally_stats_mod_cpu(b, 1, 0, 1);
		_exit(0);
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 128 + SIGABRT);
	fixture_fini(&sim);
	fixture_fini(&sys);
#endif
}
