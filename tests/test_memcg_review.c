// SPDX-License-Identifier: MIT
/*
 * test_memcg_review.c - memory groups (tally/memcg.h) held to the promises
 * of their header: callbacks that call back into tally, arithmetic at the
 * ends of the ranges, and races between limits, drains and destroys.
 * Each test is a reproducer of a defect found in review; a test that
 * would hang runs in a forked child with an alarm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/mm.h>

#include "harness.h"
#include "util.h"

/* Run @fn in a child that has @secs seconds; true when it exited 0. */
static int run_with_alarm(void (*fn)(void), unsigned int secs)
{
	pid_t pid = fork();

	if (pid == 0) {
		alarm(secs);
		fn();
		harness_child_exit();
	}
	return harness_wait_child(pid);
}

/* ---- the kill callback is called with oom_lock held ------------------ */

static int kill_calls;

static void detach_victim(struct tally_memcg *oom_group,
			  struct tally_memcg_task *victim, void *arg)
{
	(void)oom_group;
	(void)arg;
	kill_calls++;
	/* "The victim stays attached until the caller detaches it." */
	CHECK_EQ_LONG(tally_memcg_task_detach(victim), 0);
}

static void kill_callback_detaches_child(void)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_mm mm;
	struct tally_memcg_task task = { 0 };
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      detach_victim, NULL };

	REQUIRE(tally_mm_init(&mm, tally_domain_system(), 0, NULL) == 0);
	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4096) == 0);
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	task.mm = &mm;
	REQUIRE(tally_memcg_task_attach(g, &task) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 8192, 0), -ENOMEM);
	CHECK_EQ_LONG(kill_calls, 1);
	CHECK(task.group_ == NULL);
	tally_memcg_tree_destroy(t);
	tally_mm_destroy(&mm);
}

/*
 * The header: the kill callback is "called in the charging thread with no
 * tally lock held".  A callback that detaches its victim (as the header
 * invites) must not deadlock.
 */
TEST(kill_callback_may_detach_its_victim_without_deadlock)
{
	CHECK_EQ_LONG(run_with_alarm(kill_callback_detaches_child, 10), 0);
}

/* ---- high delay at the ends of the range ----------------------------- */

/*
 * A group 2^44 bytes above a high of 1 byte (a NOFAIL charge: exactly
 * what was asked, no stock refill) is as far above high as a group can
 * be: the delay is the 2 s maximum, not 0.
 */
TEST(high_delay_of_a_huge_overage_is_the_maximum_not_zero)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_memcg_throttle th;
	long big = 1l << 44;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_HIGH, 1) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, big + 1, TALLY_MEMCG_NOFAIL),
		      TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(tally_memcg_high_delay(g, 4096, &th), 0);
	CHECK(th.group == g);
	CHECK_EQ_LONG(th.delay_ns, 2000000000l);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, big + 1), 0);
	tally_memcg_tree_destroy(t);
}

/*
 * A high of 0 and a large (valid) charge size: the delay is clamped at
 * 2 s, it does not overflow into a negative (then 0) delay.
 */
TEST(high_delay_of_a_large_charge_does_not_overflow)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_memcg_throttle th;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_HIGH, 0) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 1l << 40, TALLY_MEMCG_NORECLAIM),
		      TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(tally_memcg_high_delay(g, TALLY_MEMCG_BYTES_MAX, &th),
		      0);
	CHECK_EQ_LONG(th.delay_ns, 2000000000l);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 1l << 40), 0);
	tally_memcg_tree_destroy(t);
}
