// SPDX-License-Identifier: MIT
/*
 * test_memcg_hostile.c - memory groups (tally/memcg.h) held to their
 * promises by a hostile reader: bad tasks handed to the OOM killer,
 * callbacks parked in the middle of a call while their group or policy
 * changes.  A test that would hang runs in a forked child with an alarm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/mm.h>

#include "harness.h"
#include "util.h"

/* ---- a task with flags tally_oom_select() refuses -------------------- */

static struct tally_memcg_task *killed;

static void record_victim(struct tally_memcg *oom_group,
			  struct tally_memcg_task *victim, void *arg)
{
	(void)oom_group;
	(void)arg;
	killed = victim;
	tally_memcg_task_detach(victim);
}

/*
 * The flags of a task are %TALLY_OOM_UNKILLABLE and %TALLY_OOM_PREFER;
 * bad input gets -EINVAL.  A task attached with an unknown flag made
 * every later selection of its subtree fail as a whole (tally_oom_select()
 * refuses the array), so the good task beside it was never chosen.
 */
TEST(attach_refuses_unknown_task_flags_and_the_good_task_is_still_killed)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_mm mm_good, mm_bad;
	struct tally_memcg_task good = { 0 }, bad = { 0 };
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      record_victim, NULL };

	REQUIRE(tally_mm_init(&mm_good, NULL, 0, NULL) == 0);
	REQUIRE(tally_mm_init(&mm_bad, NULL, 0, NULL) == 0);
	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4096) == 0);
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	good.mm = &mm_good;
	bad.mm = &mm_bad;
	bad.flags = 0x80;
	CHECK_EQ_LONG(tally_memcg_task_attach(g, &bad), -EINVAL);
	CHECK(bad.group_ == NULL);
	bad.flags = TALLY_OOM_UNKILLABLE | TALLY_OOM_PREFER;
	CHECK_EQ_LONG(tally_memcg_task_attach(g, &bad), 0);
	bad.flags = 0x80;	/* the caller's field, changed later */
	CHECK_EQ_LONG(tally_memcg_task_attach(g, &good), 0);
	killed = NULL;
	CHECK_EQ_LONG(tally_memcg_charge(g, 8192, 0), -ENOMEM);
	CHECK(killed == &good);
	tally_memcg_task_detach(&bad);
	tally_memcg_task_detach(&good);
	tally_memcg_put(g);
	tally_memcg_tree_destroy(t);
	tally_mm_destroy(&mm_good);
	tally_mm_destroy(&mm_bad);
}
