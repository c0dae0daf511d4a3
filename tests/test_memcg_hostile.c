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

/* Spin-free wait for an int to reach @value (sleeps 100 us at a time). */
static void wait_for(int *word, int value)
{
	while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value)
		usleep(100);
}

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

/* ---- destroy against a reclaim call in flight ------------------------ */

struct parked {
	int entered;
	int release;
	int returned;
	struct tally_memcg *g;
};

static long parked_reclaim(struct tally_memcg *g, long bytes, void *arg)
{
	struct parked *p = arg;

	(void)g;
	(void)bytes;
	__atomic_store_n(&p->entered, 1, __ATOMIC_RELEASE);
	wait_for(&p->release, 1);
	__atomic_store_n(&p->returned, 1, __ATOMIC_RELEASE);
	return 0;
}

static void *charge_into_parked(void *arg)
{
	struct parked *p = arg;

	/* Past the max whatever the callback frees: refused. */
	CHECK_EQ_LONG(tally_memcg_charge(p->g, 8192, 0), -ENOMEM);
	return NULL;
}

static void *release_later(void *arg)
{
	struct parked *p = arg;

	usleep(20000);
	__atomic_store_n(&p->release, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A charge of @park->g parks in a callback of @victim's; destroy @victim
 * meanwhile (the callback is released 20 ms later): destroy must return
 * only after the parked call did.
 */
static void destroy_during_parked_call(struct tally_memcg *victim,
				       struct parked *park)
{
	pthread_t charger, releaser;

	REQUIRE(pthread_create(&charger, NULL, charge_into_parked, park) ==
		0);
	wait_for(&park->entered, 1);
	REQUIRE(pthread_create(&releaser, NULL, release_later, park) == 0);
	CHECK_EQ_LONG(tally_memcg_destroy(victim), 0);
	CHECK_EQ_LONG(__atomic_load_n(&park->returned, __ATOMIC_ACQUIRE), 1);
	pthread_join(releaser, NULL);
	pthread_join(charger, NULL);
}

/*
 * The header of tally_memcg_destroy(): "its reclaim callback is no longer
 * called", and a destroyed group's callback can no longer be removed
 * (tally_memcg_set_reclaim() refuses a destroyed group): destroy is the
 * removal, so once it returns the callback's argument may be freed.  A
 * call parked in the callback when destroy ran went on after it returned.
 */
static void destroy_waits_for_the_reclaim_call_in_flight(void)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *g;
	struct parked park = { 0 };

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "p", &p) == 0);
	REQUIRE(tally_memcg_create(p, "g", &g) == 0);
	REQUIRE(tally_memcg_charge(g, 4096, 0) == 0);
	REQUIRE(tally_memcg_set_limit(p, TALLY_MEMCG_MAX, 4096) == 0);
	REQUIRE(tally_memcg_set_reclaim(g, parked_reclaim, &park) == 0);
	park.g = p;		/* a charge of p asks g's callback */
	destroy_during_parked_call(g, &park);
	tally_memcg_put(g);
	tally_memcg_put(p);
	tally_memcg_tree_destroy(t);
}

TEST(destroy_returns_only_once_no_reclaim_call_of_the_group_runs)
{
	CHECK_EQ_LONG(
		harness_run_child(destroy_waits_for_the_reclaim_call_in_flight),
		0);
}

/* ---- render's errors ------------------------------------------------- */

/*
 * tally_memcg_render(): -EINVAL for an unknown file, -ENOSPC for a short
 * buffer.  An unknown file with a zero length was -ENOSPC, as if a larger
 * buffer would have done.
 */
TEST(render_of_an_unknown_file_is_einval_whatever_the_buffer)
{
	struct tally_memcg_tree *t;
	char buf[256];

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_render(tally_memcg_root(t),
					 (enum tally_memcg_file)99, false, buf,
					 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_render(tally_memcg_root(t),
					 (enum tally_memcg_file)-1, true, buf,
					 sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_render(tally_memcg_root(t),
					 TALLY_MEMCG_FILE_LIMITS, false, buf, 0),
		      -ENOSPC);
	tally_memcg_tree_destroy(t);
}

/* ---- a group whose charge over its max kills ------------------------ */

/* Group g of a new tree, max 4096, @kill its policy, one task attached. */
struct killing {
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_mm mm;
	struct tally_memcg_task task;
};

/* false (checks failed) when a step failed: the test stops there. */
static bool killing_init(struct killing *k, tally_memcg_kill_fn kill,
			 void *arg)
{
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0, kill,
					      arg };

	memset(k, 0, sizeof(*k));
	k->task.mm = &k->mm;
	return CHECK(tally_mm_init(&k->mm, NULL, 0, NULL) == 0) &&
	       CHECK(tally_memcg_tree_create(&k->t, NULL) == 0) &&
	       CHECK(tally_memcg_create(tally_memcg_root(k->t), "g", &k->g) ==
		     0) &&
	       CHECK(tally_memcg_set_limit(k->g, TALLY_MEMCG_MAX, 4096) == 0) &&
	       CHECK(tally_memcg_set_oom_policy(k->g, &pol) == 0) &&
	       CHECK(tally_memcg_task_attach(k->g, &k->task) == 0);
}

static void killing_fini(struct killing *k)
{
	tally_memcg_task_detach(&k->task);	/* -EINVAL once killed */
	tally_memcg_put(k->g);
	tally_memcg_tree_destroy(k->t);
	tally_mm_destroy(&k->mm);
}

#ifdef TALLY_INJECT
#include "runtime/inject.h"

/* ---- a kill policy replaced while a charge is about to kill ---------- */

struct kill_arg {
	int freed;		/* its owner let it go */
	int calls;
	int calls_after_free;
};

static struct tally_memcg *policy_group;
static struct kill_arg *replaced_arg;
static int replace_armed;
static long replace_ret;

static void counting_kill(struct tally_memcg *oom_group,
			  struct tally_memcg_task *victim, void *arg)
{
	struct kill_arg *a = arg;

	(void)oom_group;
	(void)victim;
	a->calls++;
	if (__atomic_load_n(&a->freed, __ATOMIC_ACQUIRE))
		a->calls_after_free++;
}

/* The owner replaces the kill policy and frees its argument. */
static int replace_policy_once(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (replace_armed) {
		replace_armed = 0;
		replace_ret = tally_memcg_set_oom_policy(policy_group, NULL);
		__atomic_store_n(&replaced_arg->freed, 1, __ATOMIC_RELEASE);
	}
	return 0;
}

/*
 * The header: setting an OOM policy "returns once no call of the previous
 * kill callback for @g is running: its argument may be freed then", and
 * the file comment: once no call "is running or can start".  A refused
 * charge that had read the kill policy before the setter ran called the
 * old callback with the freed argument after the setter returned.
 */
TEST(a_replaced_kill_policy_is_never_called_after_its_setter_returned)
{
	struct kill_arg a = { 0 };
	struct killing k;

	REQUIRE(killing_init(&k, counting_kill, &a));
	/* A kill runs with the policy as it is. */
	CHECK_EQ_LONG(tally_memcg_charge(k.g, 8192, 0), -ENOMEM);
	CHECK_EQ_LONG(a.calls, 1);
	policy_group = k.g;
	replaced_arg = &a;
	replace_armed = 1;
	replace_ret = 1;
	tally_inject_set(TALLY_INJECT_MEMCG_BEFORE_KILL, replace_policy_once,
			 NULL);
	CHECK_EQ_LONG(tally_memcg_charge(k.g, 8192, 0), -ENOMEM);
	tally_inject_set(TALLY_INJECT_MEMCG_BEFORE_KILL, NULL, NULL);
	CHECK_EQ_LONG(replace_ret, 0);
	CHECK_EQ_LONG(a.calls_after_free, 0);
	CHECK_EQ_LONG(a.calls, 1);
	killing_fini(&k);
}
#endif /* TALLY_INJECT */

/* ---- destroy against a kill call in flight --------------------------- */

static void parked_kill(struct tally_memcg *oom_group,
			struct tally_memcg_task *victim, void *arg)
{
	struct parked *p = arg;

	(void)oom_group;
	/* The victim leaves first: destroy no longer finds it. */
	tally_memcg_task_detach(victim);
	__atomic_store_n(&p->entered, 1, __ATOMIC_RELEASE);
	wait_for(&p->release, 1);
	__atomic_store_n(&p->returned, 1, __ATOMIC_RELEASE);
}

/*
 * tally_memcg_destroy() removes the group's OOM policy as
 * tally_memcg_set_oom_policy(NULL) does: it returns once no other
 * thread's call of the kill callback runs.  It waited for a kill whose
 * victim was still in the group, not for one that had detached its victim
 * and went on running, with the argument the caller then freed.
 */
static void destroy_waits_for_the_kill_call_in_flight(void)
{
	struct parked park = { 0 };
	struct killing k;

	REQUIRE(killing_init(&k, parked_kill, &park));
	park.g = k.g;		/* 8192 over a 4096 max: a kill */
	destroy_during_parked_call(k.g, &park);
	killing_fini(&k);
}

TEST(destroy_returns_only_once_no_kill_call_of_the_group_s_policy_runs)
{
	CHECK_EQ_LONG(harness_run_child(destroy_waits_for_the_kill_call_in_flight),
		      0);
}
