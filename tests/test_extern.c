// SPDX-License-Identifier: MIT
/*
 * test_extern.c - the out-of-line twins of the inline fast paths
 * (tally_memcg_charge_extern(), tally_memcg_uncharge_extern(),
 * tally_counter_add_extern()): what a foreign function interface calls
 * behaves as the inline functions, on the stock fast path and off it,
 * and mixes with them.
 */
#include <errno.h>

#include <tally/counter.h>
#include <tally/memcg.h>

#include "harness.h"
#include "util.h"

TEST(extern_charges_are_uncharged_inline_and_back_to_zero)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g = util_memcg_group(tally_memcg_root(t), "g");

	/* Many small charges: served by the stock and by refills. */
	for (int i = 0; i < 10000; i++) {
		if (!CHECK_EQ_LONG(tally_memcg_charge_extern(g, 4096, 0), 0))
			break;
	}
	for (int i = 0; i < 10000; i++)
		CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	for (int i = 0; i < 100; i++) {
		CHECK_EQ_LONG(tally_memcg_charge(g, 4096, 0), 0);
		CHECK_EQ_LONG(tally_memcg_uncharge_extern(g, 4096), 0);
	}
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
}

TEST(extern_charge_is_refused_over_max_as_the_inline_one)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g = util_memcg_group(tally_memcg_root(t), "g");
	long ev[TALLY_MEMCG_NR_EVENTS];

	CHECK_EQ_LONG(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 1 << 20), 0);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, 1 << 20, 0), 0);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, 1, 0), -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, 2 << 20, TALLY_MEMCG_NOFAIL),
		      -E2BIG);
	CHECK_EQ_LONG(tally_memcg_events(g, ev, NULL), 0);
	CHECK_EQ_LONG(ev[TALLY_MEMCG_EVENT_MAX], 1);
	CHECK_EQ_LONG(tally_memcg_uncharge_extern(g, 1 << 20), 0);
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
}

TEST(extern_charge_and_uncharge_refuse_bad_input)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *g = util_memcg_group(tally_memcg_root(t), "g");

	/* NULL without a current group, sizes out of range, bad flags. */
	CHECK_EQ_LONG(tally_memcg_charge_extern(NULL, 4096, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, 0, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, -1, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, TALLY_MEMCG_BYTES_MAX + 1,
						0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_extern(g, 4096, 0x80u), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_extern(NULL, 4096), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_extern(g, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_extern(g, TALLY_MEMCG_BYTES_MAX + 1),
		      -EINVAL);
	tally_memcg_tree_destroy(t);
}

TEST(extern_counter_adds_sum_with_inline_ones)
{
	struct tally_counter c;

	REQUIRE(tally_counter_init(&c, NULL, 32) == 0);
	for (int i = 0; i < 100000; i++)
		tally_counter_add_extern(&c, 3);
	for (int i = 0; i < 100000; i++)
		tally_counter_add(&c, -1);
	CHECK_EQ_LONG(tally_counter_precise_sum(&c), 200000);
	tally_counter_destroy(&c);
}
