// SPDX-License-Identifier: MIT
/*
 * test_cxx.cc - the public headers from C++: every header of
 * include/tally/ in one C++17 translation unit (layout.h includes them),
 * built with -Wall -Wextra -pedantic -Werror and linked against
 * build/libtally.a as a C++ program links it, running the inline fast
 * paths (a counter add, a task's memory add, a memory group's charge and
 * uncharge) and a statistics update from C++ threads.  Every result is
 * checked against an exact read, in whichever rseq mode the runner sets
 * (scripts/check-cxx.sh runs it in each).
 *
 * The harness is C: its header is included with C linkage.
 */
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "layout.h"

extern "C" {
#include "harness.h"
}

namespace {

const int threads = 4;

/* Start @fn(i) in @threads C++ threads and join them. */
template <typename Fn> void in_threads(Fn fn)
{
	std::vector<std::thread> pool;

	for (int i = 0; i < threads; i++)
		pool.emplace_back(fn, i);
	for (std::thread &t : pool)
		t.join();
}

/* Names of LAYOUT_TYPES, for the messages. */
#define LAYOUT_NAME(type) #type,
const char *const layout_name[] = { LAYOUT_TYPES(LAYOUT_NAME) };
#define LAYOUT_SIZE(type) sizeof(type),
const size_t layout_cxx_size[] = { LAYOUT_TYPES(LAYOUT_SIZE) };
#define LAYOUT_ALIGN(type) alignof(type),
const size_t layout_cxx_align[] = { LAYOUT_TYPES(LAYOUT_ALIGN) };

} // namespace

TEST(every_public_type_has_the_same_size_and_alignment_in_cxx_as_in_c)
{
	for (size_t i = 0; i < ARRAY_SIZE(layout_name); i++) {
		if (!CHECK(layout_cxx_size[i] == layout_c_size[i] &&
			   layout_cxx_align[i] == layout_c_align[i]))
			harness_log("%s: C++ size %zu align %zu, C size %zu "
				    "align %zu", layout_name[i],
				    layout_cxx_size[i], layout_cxx_align[i],
				    layout_c_size[i], layout_c_align[i]);
	}
}

TEST(the_library_linked_is_the_version_of_the_headers)
{
	CHECK(std::strcmp(tally_version(), TALLY_VERSION_STRING) == 0);
}

TEST(counter_adds_from_cxx_threads_sum_exactly)
{
	const long adds = harness_scale(100000);
	struct tally_counter c;
	long lo, hi;

	REQUIRE(tally_counter_init(&c, nullptr, 32) == 0);
	in_threads([&](int) {
		for (long i = 0; i < adds; i++)
			tally_counter_add(&c, 1);	/* inline: rseq */
	});
	CHECK(tally_counter_precise_sum(&c) == threads * adds);
	tally_counter_approximate_min_max(&c, &lo, &hi);
	CHECK(lo <= threads * adds && threads * adds <= hi);
	tally_counter_destroy(&c);
}

TEST(task_memory_adds_from_cxx_threads_sum_exactly)
{
	const long pages = harness_scale(10000);
	struct tally_mm mm;
	struct tally_mm_range r;

	REQUIRE(tally_mm_init(&mm, nullptr, 0, nullptr) == 0);
	in_threads([&](int) {
		for (long i = 0; i < pages; i++)
			if (tally_mm_add(&mm, TALLY_MM_ANON, 4096) != 0)
				break;
	});
	CHECK(tally_mm_precise(&mm, TALLY_MM_BIT(TALLY_MM_ANON)) ==
	      threads * pages * 4096);
	REQUIRE(tally_mm_approximate(&mm, TALLY_MM_RSS, &r) == 0);
	CHECK(r.min <= threads * pages * 4096 &&
	      threads * pages * 4096 <= r.max);
	in_threads([&](int) {
		for (long i = 0; i < pages; i++)
			if (tally_mm_add(&mm, TALLY_MM_ANON, -4096) != 0)
				break;
	});
	CHECK(tally_mm_precise(&mm, TALLY_MM_ALL) == 0);
	CHECK(tally_mm_destroy(&mm) == 0);	/* -ENOTEMPTY if not 0 */
}

TEST(stats_updates_from_cxx_threads_are_read_back_exactly)
{
	const long updates = harness_scale(100000);
	static const struct tally_stat_desc schema[] = {
		{ "bytes", TALLY_STAT_STATE },
	};
	struct tally_stats_tree *tree;
	struct tally_stats_group *g;
	long hier = -1, local = -1;

	REQUIRE(tally_stats_tree_create(&tree, schema, 1, nullptr) == 0);
	REQUIRE(tally_stats_group_create(tally_stats_root(tree), "cxx",
					 &g) == 0);
	in_threads([&](int) {
		for (long i = 0; i < updates; i++)
			if (tally_stats_mod(g, 0, 3) != 0)
				break;
	});
	CHECK(tally_stats_read(g, 0, TALLY_FLUSH_FORCE, &hier, &local) == 0);
	CHECK(hier == threads * updates * 3 && local == hier);
	CHECK(tally_stats_read(tally_stats_root(tree), 0, TALLY_FLUSH_FORCE,
			       &hier, nullptr) == 0);
	CHECK(hier == threads * updates * 3);
	tally_stats_tree_destroy(tree);
}

TEST(memcg_charges_from_cxx_threads_are_exact_and_fully_uncharged)
{
	const long charges = harness_scale(10000);
	struct tally_memcg_tree *tree;
	struct tally_memcg *g;
	struct tally_memcg_range r;
	std::vector<long> failed(threads);

	REQUIRE(tally_memcg_tree_create(&tree, nullptr) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(tree), "cxx", &g) == 0);
	in_threads([&](int t) {
		for (long i = 0; i < charges; i++)
			if (tally_memcg_charge(g, 4096, 0) != 0)
				failed[t]++;
	});
	for (int t = 0; t < threads; t++)
		CHECK(failed[t] == 0);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_PRECISE, &r) == 0);
	CHECK(r.value == threads * charges * 4096);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_APPROX, &r) == 0);
	CHECK(r.min <= threads * charges * 4096 &&
	      threads * charges * 4096 <= r.max);
	in_threads([&](int t) {
		for (long i = 0; i < charges; i++)
			if (tally_memcg_uncharge(g, 4096) != 0)
				failed[t]++;
	});
	for (int t = 0; t < threads; t++)
		CHECK(failed[t] == 0);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK(r.value == 0);
	CHECK(tally_memcg_destroy(g) == 0);
	tally_memcg_put(g);
	tally_memcg_tree_destroy(tree);
}

TEST(memcg_charges_from_cxx_stop_exactly_at_max)
{
	const long max = 1l << 20;
	struct tally_memcg_tree *tree;
	struct tally_memcg *g;
	struct tally_memcg_range r;
	long charged = 0;
	int ret;

	REQUIRE(tally_memcg_tree_create(&tree, nullptr) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(tree), "cxx", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, max) == 0);
	while ((ret = tally_memcg_charge(g, 4096, TALLY_MEMCG_NORECLAIM)) ==
	       0 && charged < 2 * max)
		charged += 4096;
	CHECK(ret == -ENOMEM);
	CHECK(charged == max);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK(r.value == max);
	for (; charged > 0; charged -= 4096)
		if (!CHECK(tally_memcg_uncharge(g, 4096) == 0))
			break;
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK(r.value == 0);
	CHECK(tally_memcg_destroy(g) == 0);
	tally_memcg_put(g);
	tally_memcg_tree_destroy(tree);
}
