// SPDX-License-Identifier: MIT
/*
 * test_domain.c - domains: tree shapes per CPU count, the kernel's
 * low-bits grouping, topology grouping against sysfs fixtures
 * (tests/fixtures, made by tests/fixtures/generate.sh), the errors of
 * sysfs parsing, and the system domain (TALLY_SYSFS_ROOT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

static unsigned int order_pow(unsigned int nr)
{
	unsigned int p = 1;

	while (p < nr)
		p *= 2;
	return p;
}

TEST(shapes_of_the_documented_cpu_counts)
{
	static const struct {
		unsigned int nr, levels, arity[TALLY_MAX_LEVELS], items;
	} table[] = {
		{ 1, 1, { 1 }, 1 },
		{ 2, 1, { 1 }, 2 },
		{ 3, 1, { 1 }, 4 },
		{ 5, 1, { 1 }, 8 },
		{ 8, 1, { 1 }, 8 },
		{ 9, 1, { 2 }, 8 },
		{ 16, 1, { 2 }, 8 },
		{ 17, 3, { 4, 4, 2 }, 11 },
		{ 64, 3, { 4, 4, 4 }, 21 },
		{ 256, 3, { 8, 8, 4 }, 37 },
		{ 384, 3, { 8, 8, 8 }, 73 },
		{ 512, 3, { 8, 8, 8 }, 73 },
		{ 4095, 4, { 8, 8, 8, 8 }, 585 },
		{ 4096, 4, { 8, 8, 8, 8 }, 585 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		struct tally_domain *d = util_domain(table[i].nr);
		unsigned int arity[TALLY_MAX_LEVELS];

		CHECK_EQ_LONG(tally_domain_shape(d, arity), table[i].levels);
		for (unsigned int l = 0; l < TALLY_MAX_LEVELS; l++)
			if (!CHECK_EQ_LONG(arity[l], table[i].arity[l]))
				harness_log("%u CPUs, level %u", table[i].nr,
					    l + 1);
		CHECK_EQ_ULONG(tally_counter_items_size(d),
			       64 * table[i].items);
		tally_domain_destroy(d);
	}
}

/*
 * Levels of powers of two up to 16, the top level's items (2^order /
 * product of the arities) a root from 17 CPUs up and at most 8 below;
 * arity 1 only for the single level of up to 8 CPUs (a top item per CPU).
 */
TEST(every_cpu_count_up_to_4096_gets_a_valid_shape)
{
	for (unsigned int nr = 1; nr <= TALLY_SIMULATED_MAX_CPUS; nr++) {
		struct tally_domain *d = util_domain(nr);
		unsigned int arity[TALLY_MAX_LEVELS];
		unsigned int levels = tally_domain_shape(d, arity);
		unsigned long prod = 1, items = 0, pow = order_pow(nr), top;
		bool ok = CHECK_EQ_LONG(tally_domain_nr_cpus(d), nr) &&
			  CHECK(tally_domain_is_simulated(d)) &&
			  CHECK_EQ_LONG(tally_domain_grouping(d),
					TALLY_GROUP_LOW_BITS) &&
			  CHECK(levels >= 1 && levels <= TALLY_MAX_LEVELS);

		for (unsigned int l = 0; ok && l < levels; l++) {
			ok = CHECK(arity[l] <= 16) &&
			     CHECK(!(arity[l] & (arity[l] - 1))) &&
			     CHECK(arity[l] >= 2 || (levels == 1 && nr <= 8));
			prod *= arity[l];
			items += pow / prod;
		}
		top = nr > 16 ? 1 : pow < 8 ? pow : 8;
		ok = ok && CHECK_EQ_ULONG(pow % prod, 0) &&
		     CHECK_EQ_ULONG(pow / prod, top) &&
		     CHECK_EQ_ULONG(tally_counter_items_size(d), 64 * items);
		tally_domain_destroy(d);
		if (!ok) {
			harness_log("%u CPUs", nr);
			break;
		}
	}
}

/*
 * The kernel's rule: CPUs a and b share the level-l item iff
 * a % n == b % n, n being the number of level-l items.  Checked as a
 * bijection between residues and items.
 */
TEST(low_bits_grouping_shares_items_iff_cpus_agree_modulo_item_count)
{
	static const unsigned int nrs[] = { 2, 3, 5, 7, 16, 100, 384, 1000,
					    4095, 4096 };

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		unsigned int nr = nrs[i], pow = order_pow(nr);
		struct tally_domain *d = util_domain(nr);
		unsigned int levels = tally_domain_shape(d, NULL);
		int *item_of_residue = malloc(pow * sizeof(int));
		int *residue_of_item = malloc(pow * sizeof(int));
		unsigned char *seen = calloc(pow, 1);
		bool ok = CHECK(item_of_residue && residue_of_item && seen);

		for (unsigned int cpu = 0; ok && cpu < nr; cpu++) {
			int pos = tally_domain_cpu_position(d, cpu);

			ok = CHECK(pos >= 0 && (unsigned int)pos < pow) &&
			     CHECK(!seen[pos]);
			if (ok)
				seen[pos] = 1;
		}
		for (unsigned int l = 0; ok && l < levels; l++) {
			unsigned int n = pow / (unsigned int)util_span(d, l);

			memset(item_of_residue, -1, pow * sizeof(int));
			memset(residue_of_item, -1, pow * sizeof(int));
			for (unsigned int cpu = 0; ok && cpu < nr; cpu++) {
				int item = (int)util_item_of(d, cpu, l);
				int res = (int)(cpu % n);

				if (item_of_residue[res] < 0)
					item_of_residue[res] = item;
				if (residue_of_item[item] < 0)
					residue_of_item[item] = res;
				ok = CHECK_EQ_LONG(item_of_residue[res],
						   item) &&
				     CHECK_EQ_LONG(residue_of_item[item], res);
				if (!ok)
					harness_log("%u CPUs, level %u, cpu %u",
						    nr, l + 1, cpu);
			}
		}
		free(item_of_residue);
		free(residue_of_item);
		free(seen);
		tally_domain_destroy(d);
	}
}

TEST(simulated_domains_reject_bad_counts_groupings_and_null)
{
	struct tally_domain *d = NULL;

	CHECK_EQ_LONG(tally_domain_create_simulated(&d, 0,
						    TALLY_GROUP_LOW_BITS),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_simulated(
			      &d, TALLY_SIMULATED_MAX_CPUS + 1,
			      TALLY_GROUP_LOW_BITS),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_simulated(&d, 4,
						    TALLY_GROUP_TOPOLOGY),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_simulated(&d, 4,
						    (enum tally_grouping)7),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_simulated(NULL, 4,
						    TALLY_GROUP_LOW_BITS),
		      -EINVAL);
	CHECK(d == NULL);
	d = util_domain(5);
	CHECK_EQ_LONG(tally_domain_cpu_position(d, 5), -EINVAL);
	CHECK_EQ_LONG(tally_domain_cpu_position(d, UINT_MAX), -EINVAL);
	CHECK_EQ_LONG(tally_domain_cpu_position(NULL, 0), -EINVAL);
	CHECK(tally_domain_cpu_position(d, 4) >= 0);
	tally_domain_destroy(d);
	tally_domain_destroy(NULL);
}

static struct tally_domain *from_fixture(const char *name,
					 enum tally_grouping grouping)
{
	struct tally_domain *d = NULL;

	CHECK_EQ_LONG(tally_domain_create_from_sysfs(&d, util_fixture(name),
						     grouping),
		      0);
	return d;
}

/* Positions of CPUs 0 .. nr - 1 are exactly 0 .. nr - 1 in some order. */
static bool positions_are_a_permutation(const struct tally_domain *d)
{
	unsigned int nr = tally_domain_nr_cpus(d);
	bool ok = true;

	for (unsigned int a = 0; ok && a < nr; a++) {
		int pa = tally_domain_cpu_position(d, a);

		ok = CHECK(pa >= 0 && (unsigned int)pa < nr);
		for (unsigned int b = a + 1; ok && b < nr; b++)
			ok = CHECK(pa != tally_domain_cpu_position(d, b));
	}
	return ok;
}

/* A fixture machine: which CPUs exist and which caches they share. */
struct machine {
	const char *fixture;
	unsigned int nr_cpus;		/* slots: highest CPU + 1 */
	unsigned int (*l2)(unsigned int cpu);	/* an id per L2 */
	unsigned int (*llc)(unsigned int cpu);	/* an id per L3 */
	unsigned long llc_size;		/* CPUs per L3 */
	bool (*present)(unsigned int cpu);
};

/*
 * Topology grouping of @m: positions are a permutation, present CPUs come
 * first, CPUs sharing an L2 share their leaf item, leaf items never mix
 * two L3s, and two CPUs have positions in the same block of one L3's size
 * (the items of a level spanning one L3, when the tree has one) exactly
 * when they share the L3.
 */
static void check_topology(const struct machine *m)
{
	struct tally_domain *d = NULL;
	unsigned int nr_present = 0;

	REQUIRE(tally_domain_create_from_sysfs(&d, util_fixture(m->fixture),
					       TALLY_GROUP_TOPOLOGY) == 0);
	CHECK_EQ_LONG(tally_domain_nr_cpus(d), m->nr_cpus);
	CHECK(tally_domain_is_simulated(d));
	CHECK_EQ_LONG(tally_domain_grouping(d), TALLY_GROUP_TOPOLOGY);
	positions_are_a_permutation(d);
	for (unsigned int cpu = 0; cpu < m->nr_cpus; cpu++)
		nr_present += m->present(cpu);
	for (unsigned int a = 0; a < m->nr_cpus; a++) {
		if (!m->present(a)) {
			CHECK(tally_domain_cpu_position(d, a) >=
			      (int)nr_present);
			continue;
		}
		CHECK(tally_domain_cpu_position(d, a) < (int)nr_present);
		for (unsigned int b = 0; b < m->nr_cpus; b++) {
			bool same_l2, same_llc, same_leaf, same_llc_item;

			if (!m->present(b))
				continue;
			same_l2 = m->l2(a) == m->l2(b);
			same_llc = m->llc(a) == m->llc(b);
			same_leaf = util_item_of(d, a, 0) ==
				    util_item_of(d, b, 0);
			same_llc_item =
				(unsigned long)tally_domain_cpu_position(d, a) /
					m->llc_size ==
				(unsigned long)tally_domain_cpu_position(d, b) /
					m->llc_size;
			if (!CHECK(!same_l2 || same_leaf) ||
			    !CHECK(!same_leaf || same_llc) ||
			    !CHECK(same_llc == same_llc_item)) {
				harness_log("%s: cpus %u and %u", m->fixture, a,
					    b);
				goto out;
			}
		}
	}
out:
	tally_domain_destroy(d);
}

static bool all_present(unsigned int cpu)
{
	return true;
}

/* two-socket-32: SMT siblings N and N + 16, package (= node) N % 16 / 8. */
static unsigned int two_socket_core(unsigned int cpu)
{
	return cpu % 16;
}

static unsigned int two_socket_package(unsigned int cpu)
{
	return cpu % 16 / 8;
}

TEST(topology_grouping_puts_cache_sharers_together_on_two_sockets)
{
	const struct machine m = { "two-socket-32", 32, two_socket_core,
				   two_socket_package, 16, all_present };

	check_topology(&m);
}

/* interleaved-16: package (= node) cpu % 2, one L2 per CPU. */
static unsigned int own_l2(unsigned int cpu)
{
	return cpu;
}

static unsigned int odd_or_even(unsigned int cpu)
{
	return cpu % 2;
}

TEST(topology_grouping_follows_packages_numbered_round_robin)
{
	const struct machine m = { "interleaved-16", 16, own_l2, odd_or_even,
				   8, all_present };

	check_topology(&m);
}

/* sparse-0-3-8-11: CPUs 4-7 absent, L2 per pair, node (= L3) cpu / 8. */
static bool sparse_present(unsigned int cpu)
{
	return cpu < 4 || cpu >= 8;
}

static unsigned int pair(unsigned int cpu)
{
	return cpu / 2;
}

static unsigned int eight(unsigned int cpu)
{
	return cpu / 8;
}

TEST(topology_grouping_of_a_sparse_possible_list_puts_absent_cpus_last)
{
	const struct machine m = { "sparse-0-3-8-11", 12, pair, eight, 4,
				   sparse_present };

	check_topology(&m);
}

/* The same machine grouped by low bits mixes packages, as the kernel. */
TEST(low_bits_grouping_of_the_two_socket_fixture_ignores_packages)
{
	struct tally_domain *d = from_fixture("two-socket-32",
					      TALLY_GROUP_LOW_BITS);

	REQUIRE(d);
	CHECK_EQ_LONG(tally_domain_grouping(d), TALLY_GROUP_LOW_BITS);
	/* 8 leaf items: cpu 0 (package 0) and 8 (package 1) share one. */
	CHECK_EQ_LONG(util_item_of(d, 0, 0), util_item_of(d, 8, 0));
	CHECK(util_item_of(d, 0, 0) != util_item_of(d, 1, 0));
	tally_domain_destroy(d);
}

/*
 * 16 CPUs have 8 top items of two positions each: on smt-16 (siblings N
 * and N + 8) both groupings give each pair of SMT siblings an item of its
 * own, so a carry never leaves a core.
 */
TEST(sixteen_cpus_share_a_top_item_only_with_their_smt_sibling)
{
	static const enum tally_grouping groupings[] = {
		TALLY_GROUP_TOPOLOGY, TALLY_GROUP_LOW_BITS
	};

	for (size_t i = 0; i < ARRAY_SIZE(groupings); i++) {
		struct tally_domain *d = from_fixture("smt-16", groupings[i]);

		REQUIRE(d);
		CHECK_EQ_LONG(tally_domain_grouping(d), groupings[i]);
		CHECK_EQ_LONG(tally_domain_shape(d, NULL), 1);
		for (unsigned int a = 0; a < 16; a++) {
			unsigned int item = util_item_of(d, a, 0);

			for (unsigned int b = 0; b < 16; b++)
				if (!CHECK_EQ_LONG(item == util_item_of(d, b, 0),
						   a % 8 == b % 8))
					harness_log("grouping %d, cpus %u %u",
						    groupings[i], a, b);
		}
		tally_domain_destroy(d);
	}
}

TEST(topology_grouping_without_topology_files_falls_back_to_low_bits)
{
	struct tally_domain *d = from_fixture("no-topology",
					      TALLY_GROUP_TOPOLOGY);
	struct tally_domain *sim = util_domain(6);

	REQUIRE(d);
	CHECK_EQ_LONG(tally_domain_nr_cpus(d), 6);
	CHECK_EQ_LONG(tally_domain_grouping(d), TALLY_GROUP_LOW_BITS);
	for (unsigned int cpu = 0; cpu < 6; cpu++)
		CHECK_EQ_LONG(tally_domain_cpu_position(d, cpu),
			      tally_domain_cpu_position(sim, cpu));
	tally_domain_destroy(sim);
	tally_domain_destroy(d);
}

TEST(missing_possible_list_gives_enoent_and_null_arguments_einval)
{
	struct tally_domain *d = NULL;

	/* tests/fixtures itself has no cpu/possible. */
	CHECK_EQ_LONG(tally_domain_create_from_sysfs(&d, util_fixture("."),
						     TALLY_GROUP_TOPOLOGY),
		      -ENOENT);
	CHECK_EQ_LONG(tally_domain_create_from_sysfs(
			      &d, "/nonexistent/tally", TALLY_GROUP_LOW_BITS),
		      -ENOENT);
	CHECK_EQ_LONG(tally_domain_create_from_sysfs(
			      NULL, util_fixture("no-topology"),
			      TALLY_GROUP_LOW_BITS),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_from_sysfs(&d, NULL,
						     TALLY_GROUP_LOW_BITS),
		      -EINVAL);
	CHECK_EQ_LONG(tally_domain_create_from_sysfs(
			      &d, util_fixture("no-topology"),
			      (enum tally_grouping)9),
		      -EINVAL);
	CHECK(d == NULL);
}

/* cpu/possible of @root := @text; the domain's CPU count, or -errno. */
static long cpus_of_possible(const char *root, const char *text)
{
	char path[PATH_MAX];
	struct tally_domain *d = NULL;
	FILE *f;
	long r;

	snprintf(path, sizeof(path), "%s/cpu/possible", root);
	f = fopen(path, "w");
	if (!CHECK(f))
		return -EIO;
	fputs(text, f);
	fclose(f);
	r = tally_domain_create_from_sysfs(&d, root, TALLY_GROUP_LOW_BITS);
	if (!r) {
		r = tally_domain_nr_cpus(d);
		tally_domain_destroy(d);
	}
	return r;
}

TEST(possible_lists_parse_or_give_einval_when_malformed)
{
	static const char *const bad[] = {
		"",	 "\n",	  "x",	    "0-",      "-1",	 "3-1",
		"0,,1",	 "0 1",	  "0-3;5",  "1-2-3",   "4096",	 "0-4096",
		",0",	 "0-3,x", "0x1",    "0-99999999999999999999",
	};
	static const struct {
		const char *text;
		long nr;
	} good[] = {
		{ "0\n", 1 },	     { "5", 6 },	{ "0-1\n", 2 },
		{ "0-3,8-11\n", 12 }, { "0-4095\n", 4096 }, { "7,0-2", 8 },
	};
	char root[] = "/tmp/tally-test-XXXXXX";
	char dir[PATH_MAX], file[PATH_MAX + 16];

	REQUIRE(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/cpu", root);
	snprintf(file, sizeof(file), "%s/possible", dir);
	REQUIRE(mkdir(dir, 0700) == 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (!CHECK_EQ_LONG(cpus_of_possible(root, bad[i]), -EINVAL))
			harness_log("possible list \"%s\"", bad[i]);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		if (!CHECK_EQ_LONG(cpus_of_possible(root, good[i].text),
				   good[i].nr))
			harness_log("possible list \"%s\"", good[i].text);
	unlink(file);
	rmdir(dir);
	rmdir(root);
}

TEST(system_domain_covers_the_allowed_cpus_and_is_never_destroyed)
{
	struct tally_domain *sys = tally_domain_system();
	unsigned int last = util_allowed_cpu(util_nr_allowed() - 1);
	void *p;

	REQUIRE(sys);
	CHECK(!tally_domain_is_simulated(sys));
	CHECK(tally_domain_nr_cpus(sys) > last);
	positions_are_a_permutation(sys);
	tally_domain_destroy(sys);
	CHECK(tally_domain_system() == sys);
	/* Still usable: a per-CPU allocation on it works. */
	p = tally_percpu_alloc(sys, 8, 0);
	CHECK(p);
	tally_percpu_free(sys, p);
}

/*
 * TALLY_SYSFS_ROOT is read once, when the system domain is first built:
 * checked in a fresh copy of this binary.
 */
TEST(system_domain_is_read_from_tally_sysfs_root_once)
{
	const char *root = util_fixture("two-socket-32");
	struct tally_domain *sys, *fixture;
	struct tally_counter c;
	long sum = 0;

	if (!harness_is_child()) {
		char var[PATH_MAX + 32];
		const char *env[] = { var, NULL };

		snprintf(var, sizeof(var), "TALLY_SYSFS_ROOT=%s", root);
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	sys = tally_domain_system();
	REQUIRE(sys);
	CHECK_EQ_LONG(tally_domain_nr_cpus(sys), 32);
	CHECK(!tally_domain_is_simulated(sys));
	CHECK_EQ_LONG(tally_domain_grouping(sys), TALLY_GROUP_TOPOLOGY);
	fixture = from_fixture("two-socket-32", TALLY_GROUP_TOPOLOGY);
	REQUIRE(fixture);
	for (unsigned int cpu = 0; cpu < 32; cpu++)
		CHECK_EQ_LONG(tally_domain_cpu_position(sys, cpu),
			      tally_domain_cpu_position(fixture, cpu));
	tally_domain_destroy(fixture);
	/* Later changes are not seen. */
	setenv("TALLY_SYSFS_ROOT", util_fixture("no-topology"), 1);
	CHECK(tally_domain_system() == sys);
	CHECK_EQ_LONG(tally_domain_nr_cpus(tally_domain_system()), 32);
	/* Real updates work on it (this machine's CPUs are below 32). */
	REQUIRE(tally_counter_init(&c, NULL, 2) == 0);
	for (long i = 0; i < 1000; i++) {
		tally_counter_add(&c, i - 300);
		sum += i - 300;
	}
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), sum);
	tally_counter_destroy(&c);
}

TEST(without_a_possible_list_system_counters_fail_with_enodev)
{
	struct tally_counter c[2];
	unsigned long under, over;

	if (!harness_is_child()) {
		const char *env[] = { "TALLY_SYSFS_ROOT=/nonexistent/tally",
				      NULL };

		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	errno = 0;
	CHECK(tally_domain_system() == NULL);
	CHECK_EQ_LONG(errno, ENOENT);
	CHECK_EQ_LONG(tally_counter_init(&c[0], NULL, 32), -ENODEV);
	CHECK_EQ_LONG(tally_counter_init_many(c, NULL, 2, NULL, 32), -ENODEV);
	CHECK_EQ_LONG(tally_counter_accuracy(NULL, 32, &under, &over),
		      -ENODEV);
	CHECK_EQ_ULONG(tally_counter_items_size(NULL), 0);
	errno = 0;
	CHECK(tally_percpu_alloc(NULL, 8, 0) == NULL);
	CHECK_EQ_LONG(errno, EINVAL);
}

/*
 * Counters left as garbage (like a stack variable) whose init failed:
 * destroying them must be harmless.  -ENODEV comes from a sysfs root
 * without a possible list (checked in a fresh copy of this binary),
 * -EINVAL from bad arguments.
 */
TEST(destroy_after_a_failed_init_is_harmless)
{
	struct tally_counter c[3];

	if (!harness_is_child()) {
		char root[] = "/tmp/tally-empty-XXXXXX";
		char var[64];
		const char *env[] = { var, NULL };

		REQUIRE(mkdtemp(root));
		snprintf(var, sizeof(var), "TALLY_SYSFS_ROOT=%s", root);
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		rmdir(root);
		memset(c, 0xa5, sizeof(c));
		CHECK_EQ_LONG(tally_counter_init(&c[0], NULL, 3), -EINVAL);
		tally_counter_destroy(&c[0]);
		memset(c, 0xa5, sizeof(c));
		CHECK_EQ_LONG(tally_counter_init_many(c, NULL, 3, NULL, 0),
			      -EINVAL);
		tally_counter_destroy_many(c, 3);
		memset(c, 0xa5, sizeof(c));
		CHECK_EQ_LONG(tally_counter_init_many(c, NULL, (size_t)-1,
						      NULL, 32),
			      -EINVAL);
		tally_counter_destroy_many(c, (size_t)-1);
		return;
	}
	memset(c, 0xa5, sizeof(c));
	CHECK_EQ_LONG(tally_counter_init(&c[0], NULL, 32), -ENODEV);
	tally_counter_destroy(&c[0]);
	memset(c, 0xa5, sizeof(c));
	CHECK_EQ_LONG(tally_counter_init_many(c, NULL, 3, NULL, 32), -ENODEV);
	tally_counter_destroy_many(c, 3);
	/* Twice is harmless too. */
	tally_counter_destroy_many(c, 3);
}

/* Make /sys/devices/system/cpu an empty directory for this process. */
static bool hide_sysfs_cpus(void)
{
	if (unshare(CLONE_NEWNS) &&
	    unshare(CLONE_NEWUSER | CLONE_NEWNS))
		return false;
	return !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) &&
	       !mount("tally", "/sys/devices/system/cpu", "tmpfs", 0, NULL);
}

/*
 * A fixture claiming one CPU while the real sysfs cannot be read: the
 * system domain must still have a slot for every CPU the thread can run
 * on, or adds would write past the per-CPU memory.  Checked in a fresh
 * copy of this binary with the real list hidden by a private mount (when
 * the process may not mount, the real list still floors the count).
 */
TEST(system_domain_has_a_slot_for_every_cpu_whatever_sysfs_claims)
{
	unsigned int last = util_allowed_cpu(util_nr_allowed() - 1);
	struct tally_counter c;
	long sum = 0;

	if (!harness_is_child()) {
		char root[] = "/tmp/tally-one-cpu-XXXXXX";
		char dir[64], file[80], var[64];
		const char *env[] = { var, NULL };
		FILE *f;

		REQUIRE(mkdtemp(root));
		snprintf(dir, sizeof(dir), "%s/cpu", root);
		snprintf(file, sizeof(file), "%s/possible", dir);
		REQUIRE(mkdir(dir, 0700) == 0);
		f = fopen(file, "w");
		REQUIRE(f);
		fputs("0\n", f);
		fclose(f);
		snprintf(var, sizeof(var), "TALLY_SYSFS_ROOT=%s", root);
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		unlink(file);
		rmdir(dir);
		rmdir(root);
		return;
	}
	if (!hide_sysfs_cpus())
		harness_log("cannot hide /sys/devices/system/cpu: %s",
			    strerror(errno));
	REQUIRE(tally_domain_system());
	REQUIRE(tally_domain_nr_cpus(tally_domain_system()) > last);
	REQUIRE(tally_counter_init(&c, NULL, 4) == 0);
	for (unsigned int i = 0; i < util_nr_allowed(); i++) {
		util_pin((int)util_allowed_cpu(i));
		for (long k = 0; k < 1000; k++) {
			tally_counter_add(&c, k);
			sum += k;
		}
	}
	util_pin(-1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), sum);
	CHECK_EQ_ULONG(tally_counter_approximate_sum(&c),
		       util_expected_top(&c));
	tally_counter_destroy(&c);
}
