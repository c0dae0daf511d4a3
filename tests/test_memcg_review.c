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
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/mm.h>

#include "harness.h"
#include "util.h"

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
	CHECK_EQ_LONG(harness_run_child(kill_callback_detaches_child), 0);
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

/* ---- reads of a group racing with its destroy ------------------------ */

static struct tally_memcg *race_group;
static int race_stop;

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static void *read_while_destroyed(void *arg)
{
	char buf[4096];

	(void)arg;
	while (!LOAD(&race_stop)) {
		struct tally_memcg *g = LOAD(&race_group);
		long hier;
		int r;

		r = tally_memcg_render(g, TALLY_MEMCG_FILE_ALL, true, buf,
				       sizeof(buf));
		if (!CHECK(r > 0 || r == -EINVAL))
			break;
		r = tally_memcg_stat_read(g, TALLY_MEMCG_ANON,
					  TALLY_FLUSH_FORCE, &hier, NULL);
		if (!CHECK(r == 0 || r == -EINVAL))
			break;
	}
	return NULL;
}

static void reads_racing_destroy_child(void)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	pthread_t th[2];
	double end = harness_now() + 0.5 * (double)harness_scale(2);
	char name[32];
	int n = 0;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g0", &g) == 0);
	STORE(&race_group, g);
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, read_while_destroyed,
				       NULL) == 0);
	while (harness_now() < end) {
		struct tally_memcg *old = LOAD(&race_group);

		snprintf(name, sizeof(name), "g%d", ++n);
		if (!CHECK(tally_memcg_create(tally_memcg_root(t), name,
					      &g) == 0))
			break;
		tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, 4096);
		STORE(&race_group, g);
		CHECK_EQ_LONG(tally_memcg_destroy(old), 0);
	}
	STORE(&race_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	tally_memcg_tree_destroy(t);
}

/*
 * A destroyed group's handle stays valid and its reads return -EINVAL:
 * render and stat_read racing with destroy must not touch the freed
 * statistics group.
 */
TEST(stat_read_and_render_racing_destroy_do_not_crash)
{
	CHECK_EQ_LONG(harness_run_child(reads_racing_destroy_child), 0);
}

/* ---- no system domain ------------------------------------------------ */

/*
 * Without the system's CPUs (no sysfs), creating a tree on the system
 * domain fails with -ENODEV, as every other tally constructor does, not
 * -EINVAL (which says the caller passed something wrong).
 */
TEST(tree_create_without_system_cpus_is_enodev)
{
	static const char *const env[] = { "TALLY_SYSFS_ROOT=/nonexistent",
					   NULL };
	struct tally_memcg_tree *t = (struct tally_memcg_tree *)1;

	if (!harness_is_child()) {
		CHECK_EQ_LONG(RERUN_THIS_TEST(env), 0);
		return;
	}
	CHECK_EQ_LONG(tally_memcg_tree_create(&t, NULL), -ENODEV);
	CHECK(t == NULL);
}

/* ---- NOFAIL charges at the end of the range ------------------------ */

/*
 * NOFAIL charges pass max, but a usage past LONG_MAX wraps negative: reads
 * then report a negative usage and later charges pass any max.  The fifth
 * charge of TALLY_MEMCG_BYTES_MAX (LONG_MAX / 4) must be refused.
 */
TEST(nofail_charges_never_wrap_the_usage)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_memcg_range r;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_LONG(tally_memcg_charge(g, TALLY_MEMCG_BYTES_MAX,
						 TALLY_MEMCG_NOFAIL), 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, TALLY_MEMCG_BYTES_MAX,
					 TALLY_MEMCG_NOFAIL), -E2BIG);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_APPROX, &r) == 0);
	CHECK_EQ_LONG(r.value, 4 * TALLY_MEMCG_BYTES_MAX);
	CHECK_EQ_LONG(tally_memcg_charge(g, 1l << 40, 0), -ENOMEM);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_LONG(tally_memcg_uncharge(g, TALLY_MEMCG_BYTES_MAX), 0);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK_EQ_LONG(r.value, 0);
	tally_memcg_tree_destroy(t);
}

#ifdef TALLY_INJECT
#include "runtime/inject.h"

/* ---- set_limit(max) against a charge between its read and its CAS ---- */

static struct tally_memcg *hook_group;
static int hook_armed;
static long hook_ret;

static int set_max_zero_once(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (hook_armed) {
		hook_armed = 0;
		hook_ret = tally_memcg_set_limit(hook_group, TALLY_MEMCG_MAX, 0);
	}
	return 0;
}

/*
 * The header: "charges racing with it either fit under the new max or
 * fail", and usage never exceeds max.  A charge that read the old max
 * (unlimited) and the usage, then is overtaken by set_limit(max, 0),
 * must not raise the usage above 0.
 */
TEST(set_max_racing_a_charge_never_leaves_usage_above_the_new_max)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_memcg_range r;
	struct tally_memcg_limits lim;
	int ret;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	hook_group = g;
	hook_armed = 1;
	hook_ret = 1;
	tally_inject_set(TALLY_INJECT_MEMCG_BEFORE_CAS, set_max_zero_once,
			 NULL);
	ret = tally_memcg_charge(g, 4096, TALLY_MEMCG_NORECLAIM);
	tally_inject_set(TALLY_INJECT_MEMCG_BEFORE_CAS, NULL, NULL);
	CHECK_EQ_LONG(hook_ret, 0);
	REQUIRE(tally_memcg_get_limits(g, &lim) == 0);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_APPROX, &r) == 0);
	if (lim.max == 0) {
		CHECK_EQ_LONG(ret, -ENOMEM);
		CHECK_LE_LONG(r.value, lim.max);
	}
	if (ret == 0)
		tally_memcg_uncharge(g, 4096);
	tally_memcg_tree_destroy(t);
}

/* ---- atomic stocks: an uncharge overtaken by destroy ----------------- */

static int destroy_once(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (hook_armed) {
		hook_armed = 0;
		hook_ret = tally_memcg_destroy(hook_group);
	}
	return 0;
}

/*
 * The header: charges and uncharges in flight on a destroyed group "are
 * not lost: they land in @g before or in the parent after".  With atomic
 * stocks (a simulated domain), an uncharge that found its group's slot
 * and read it, then is overtaken by destroy, must not add its bytes to the
 * slot the destroy emptied: the parent must read 0 once all is uncharged.
 */
TEST(atomic_stock_uncharge_overtaken_by_destroy_is_not_lost)
{
	struct tally_domain *d = util_domain(2);
	struct tally_memcg_options o = { .domain = d };
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *g;
	struct tally_memcg_range r;

	REQUIRE(tally_memcg_tree_create(&t, &o) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "p", &p) == 0);
	REQUIRE(tally_memcg_create(p, "g", &g) == 0);
	/* A refill: g gets a slot on CPU 0, which the uncharge finds. */
	REQUIRE(tally_memcg_charge_cpu(g, 0, 100, 0) == 0);
	hook_group = g;
	hook_armed = 1;
	hook_ret = 1;
	tally_inject_set(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS, destroy_once,
			 NULL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g, 0, 100), 0);
	tally_inject_set(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS, NULL, NULL);
	CHECK_EQ_LONG(hook_ret, 0);
	REQUIRE(tally_memcg_usage(p, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK_EQ_LONG(r.value, 0);
	REQUIRE(tally_memcg_usage(tally_memcg_root(t), TALLY_MEMCG_READ_DRAIN,
				  &r) == 0);
	CHECK_EQ_LONG(r.value, 0);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}
/* ---- an uncharge that returned just before the refusal ---------------- */

static int hook_calls;

static int uncharge_after_drain(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (++hook_calls == 1)
		hook_ret = tally_memcg_uncharge(hook_group, 4096);
	return 0;
}

/*
 * The header: a charge fails only when usage + charge > max after the
 * drain, usage counting only the uncharges that returned.  Here the
 * charge's retry after its drain is preceded by an uncharge of 4096
 * that returns: 60 KiB + 4 KiB fit the 64 KiB max,
 * so the charge must succeed; the bytes must not wait in a stock the
 * drain has just reopened.
 */
TEST(uncharge_returned_before_the_retry_after_drain_is_not_a_refusal)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_memcg_range r;
	int ret;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 65536) == 0);
	/* NOFAIL: exactly the bytes, no stock. */
	REQUIRE(tally_memcg_charge(g, 4096, TALLY_MEMCG_NOFAIL) == 0);
	REQUIRE(tally_memcg_charge(g, 61440, TALLY_MEMCG_NOFAIL) == 0);
	hook_group = g;
	hook_calls = 0;
	hook_ret = 1;
	tally_inject_set(TALLY_INJECT_MEMCG_DRAINED, uncharge_after_drain,
			 NULL);
	ret = tally_memcg_charge(g, 4096, TALLY_MEMCG_NORECLAIM);
	tally_inject_set(TALLY_INJECT_MEMCG_DRAINED, NULL, NULL);
	CHECK_EQ_LONG(hook_calls, 1);
	CHECK_EQ_LONG(hook_ret, 0);
	CHECK_EQ_LONG(ret, 0);
	if (ret == 0)
		CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 61440), 0);
	REQUIRE(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r) == 0);
	CHECK_EQ_LONG(r.value, 0);
	tally_memcg_tree_destroy(t);
}
/* ---- a group created while a drain of its parent is in flight --------- */

static struct tally_memcg *hammer_group;
static long hammer_ops;
static int hammer_quit;

/* Charge and uncharge 64 bytes on the fast path of hammer_group. */
static void *hammer(void *arg)
{
	(void)arg;
	util_pin((int)util_allowed_cpu(1));
	while (!LOAD(&hammer_quit)) {
		struct tally_memcg *g = LOAD(&hammer_group);

		if (g && tally_memcg_charge(g, 64, 0) == 0)
			tally_memcg_uncharge(g, 64);
		__atomic_add_fetch(&hammer_ops, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static int create_and_hammer(enum tally_inject_point point, void *arg)
{
	struct tally_memcg *n;
	char name[32];
	long ops;

	(void)point;
	if (!hook_armed)
		return 0;
	hook_armed = 0;
	snprintf(name, sizeof(name), "n%d", ++hook_calls);
	if (tally_memcg_create(hook_group, name, &n))
		return 0;
	*(struct tally_memcg **)arg = n;
	ops = LOAD(&hammer_ops);
	STORE(&hammer_group, n);
	while (LOAD(&hammer_ops) < ops + 2000)
		;
	return 0;
}

/*
 * A drain closes the stocks of the groups it finds, then empties the
 * groups it finds again: a group created in between is emptied (an
 * exchange) while its stock is open to restartable sequences on another
 * CPU, whose plain store can overwrite the exchange.  Bytes then sit in a
 * stock uncounted, and the next drain gives them back twice (an
 * underflow).  Everything charged is uncharged here: the usage must come
 * back to 0 without underflows.
 */
TEST(group_created_during_a_drain_keeps_its_stock_counted)
{
	struct tally_memcg_options o = { .batch = 4096 };
	struct tally_memcg_tree *t;
	struct tally_memcg *h, *n = NULL;
	struct tally_memcg_range r;
	struct tally_memcg_info info;
	pthread_t th;
	long rounds = harness_scale(300);

	if (util_nr_allowed() < 2) {
		harness_log("needs 2 CPUs");
		return;
	}
	REQUIRE(tally_memcg_tree_create(&t, &o) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "h", &h) == 0);
	hook_group = h;
	hook_calls = 0;
	STORE(&hammer_quit, 0);
	STORE(&hammer_group, NULL);
	REQUIRE(pthread_create(&th, NULL, hammer, NULL) == 0);
	util_pin((int)util_allowed_cpu(0));
	tally_inject_set(TALLY_INJECT_MEMCG_DRAIN_STOPPED, create_and_hammer,
			 &n);
	for (long i = 0; i < rounds; i++) {
		n = NULL;
		hook_armed = 1;
		tally_memcg_drain(h);
		STORE(&hammer_group, NULL);
		/* Let the hammer leave n before it goes. */
		for (long ops = LOAD(&hammer_ops); LOAD(&hammer_ops) < ops + 3;)
			;
		if (n)
			CHECK_EQ_LONG(tally_memcg_destroy(n), 0);
	}
	tally_inject_set(TALLY_INJECT_MEMCG_DRAIN_STOPPED, NULL, NULL);
	STORE(&hammer_quit, 1);
	pthread_join(th, NULL);
	util_pin(-1);
	REQUIRE(tally_memcg_usage(tally_memcg_root(t), TALLY_MEMCG_READ_DRAIN,
				  &r) == 0);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_LONG(r.value, 0);
	CHECK_EQ_ULONG(info.underflows, 0);
	tally_memcg_tree_destroy(t);
}


/* ---- look up, then use: an ancestor destroyed in the window ---------- */

/*
 * A hook runs in the thread that just resolved a destroyed group's live
 * ancestor, and destroys that ancestor and puts it before the thread goes
 * on.  The grace period must keep what the thread uses allocated (ASan),
 * and nothing it adds may be lost.
 */
static struct tally_memcg *victim;
static int hook_done;

/* Destroy and put the resolved ancestor, once. */
static int destroy_resolved(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (victim && !hook_done) {
		hook_done = 1;
		CHECK_EQ_LONG(tally_memcg_destroy(victim), 0);
		tally_memcg_put(victim);
		victim = NULL;
	}
	return 0;
}

/* root -> a -> b, b destroyed; its handle kept. */
static struct tally_memcg_tree *zombie_chain(struct tally_memcg **a,
					     struct tally_memcg **b)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);

	if (!t)
		return NULL;
	*a = util_memcg_group(tally_memcg_root(t), "a");
	*b = util_memcg_group(*a, "b");
	if (!*a || !*b || !CHECK_EQ_LONG(tally_memcg_destroy(*b), 0)) {
		tally_memcg_tree_destroy(t);
		return NULL;
	}
	return t;
}

TEST(stat_update_of_a_zombie_survives_its_ancestor_destroyed_in_the_window)
{
	struct tally_memcg *a, *b;
	struct tally_memcg_tree *t = zombie_chain(&a, &b);
	long hier = 0;

	REQUIRE(t);
	victim = a;
	hook_done = 0;
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, destroy_resolved, NULL);
	/* Resolves to a; a is destroyed and put before the update lands. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(b, TALLY_MEMCG_ANON, 4096), 0);
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, NULL, NULL);
	CHECK(hook_done);
	/* The update reached the root's hierarchical value. */
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 4096);
	/* Later updates of b go to the root. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(b, TALLY_MEMCG_ANON, -4096), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 0);
	tally_memcg_put(b);
	tally_memcg_tree_destroy(t);
}

TEST(charge_of_a_zombie_survives_its_ancestor_destroyed_in_the_window)
{
	const unsigned int flags[] = { 0, TALLY_MEMCG_NOFAIL,
				       TALLY_MEMCG_NOBLOCK };

	for (unsigned int f = 0; f < 3; f++) {
		struct tally_memcg *a, *b;
		struct tally_memcg_tree *t = zombie_chain(&a, &b);
		struct tally_memcg *root;

		REQUIRE(t);
		root = tally_memcg_root(t);
		victim = a;
		hook_done = 0;
		tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, destroy_resolved,
				 NULL);
		CHECK_EQ_LONG(tally_memcg_charge(b, 10000, flags[f]), 0);
		tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, NULL, NULL);
		CHECK(hook_done);
		CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN),
			      10000);
		/* The uncharge through the zombie reaches the root too. */
		CHECK_EQ_LONG(tally_memcg_uncharge(b, 10000), 0);
		CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN),
			      0);
		tally_memcg_put(b);
		tally_memcg_tree_destroy(t);
	}
}

/*
 * A destroyed group's statistics group still takes the updates of the
 * threads that resolved the group before its destroy.  T1 resolves b,
 * destroys it there, then updates it on CPU 3 and stops between its
 * claim and its push.  T2, which resolved b before the destroy, updates
 * it on CPU 3 after that claim and returns without a push.  A forced read
 * of b's parent must return both while T1 is still stopped: the flush
 * finds the claim in the detached group itself.
 */
struct stopped_push {
	struct tally_memcg *a, *b;
	int resolved;		/* RESOLVED hook calls */
	sem_t t2_resolved, t2_go, t1_in_push, t1_go;
	long value;
	int returned;
};

static struct stopped_push *stopped;

static int park_t2_then_destroy(enum tally_inject_point point, void *arg)
{
	struct stopped_push *s = stopped;

	(void)point;
	(void)arg;
	if (__atomic_add_fetch(&s->resolved, 1, __ATOMIC_ACQ_REL) == 1) {
		sem_post(&s->t2_resolved);
		while (sem_wait(&s->t2_go))
			;
	} else {
		CHECK_EQ_LONG(tally_memcg_destroy(s->b), 0);
	}
	return 0;
}

static int park_in_push(enum tally_inject_point point, void *arg)
{
	struct stopped_push *s = stopped;

	(void)point;
	(void)arg;
	sem_post(&s->t1_in_push);
	while (sem_wait(&s->t1_go))
		;
	return 0;
}

struct b_update {
	struct stopped_push *s;
	long delta;
};

static void *update_b_on_cpu3(void *arg)
{
	struct b_update *u = arg;

	CHECK_EQ_LONG(tally_memcg_stat_mod_cpu(u->s->b, 3, TALLY_MEMCG_ANON,
					       u->delta),
		      0);
	return NULL;
}

static void *read_parent(void *arg)
{
	struct stopped_push *s = arg;

	CHECK_EQ_LONG(tally_memcg_stat_read(s->a, TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &s->value, NULL),
		      0);
	__atomic_store_n(&s->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool sem_wait_s(sem_t *sem, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	while (sem_timedwait(sem, &until))
		if (errno != EINTR)
			return false;
	return true;
}

/* A forced read of a in a child forked now: 12, or the child fails. */
static void read_parent_in_a_child(struct stopped_push *s)
{
	int status = -1;
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		long value = -1;

		tally_memcg_stat_read(s->a, TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
				      &value, NULL);
		_exit(value == 12 ? 0 : 1);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		harness_log("the child's forced read missed the updates");
}

/*
 * @in_child: the forced read runs in a child forked while T1 is stopped
 * (the child has no T1: its flushes find the claim among the groups
 * marked listed), else in a thread of this process.
 */
static void stopped_zombie_push_run(bool in_child)
{
	struct tally_domain *d = util_domain(8);
	struct tally_memcg_tree *t = util_memcg_tree(d, 0);
	struct stopped_push s = { .value = -1 };
	struct b_update u1 = { &s, 5 }, u2 = { &s, 7 };
	pthread_t t1, t2, rd;
	long value = -1;

	REQUIRE(t);
	s.a = util_memcg_group(tally_memcg_root(t), "a");
	s.b = util_memcg_group(s.a, "b");
	REQUIRE(s.a && s.b);
	sem_init(&s.t2_resolved, 0, 0);
	sem_init(&s.t2_go, 0, 0);
	sem_init(&s.t1_in_push, 0, 0);
	sem_init(&s.t1_go, 0, 0);
	stopped = &s;
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, park_t2_then_destroy,
			 NULL);
	tally_inject_set(TALLY_INJECT_STATS_IN_PUSH, park_in_push, NULL);
	REQUIRE(!pthread_create(&t2, NULL, update_b_on_cpu3, &u2));
	REQUIRE(sem_wait_s(&s.t2_resolved, HARNESS_HANG_S));
	REQUIRE(!pthread_create(&t1, NULL, update_b_on_cpu3, &u1));
	REQUIRE(sem_wait_s(&s.t1_in_push, HARNESS_HANG_S));
	tally_inject_set(TALLY_INJECT_STATS_IN_PUSH, NULL, NULL);
	sem_post(&s.t2_go);
	pthread_join(t2, NULL);
	if (in_child) {
		read_parent_in_a_child(&s);
	} else {
		REQUIRE(!pthread_create(&rd, NULL, read_parent, &s));
		for (double end = harness_now() + HARNESS_HANG_S;
		     !__atomic_load_n(&s.returned, __ATOMIC_ACQUIRE) &&
		     harness_now() < end;)
			usleep(1000);
		if (!CHECK(__atomic_load_n(&s.returned, __ATOMIC_ACQUIRE)))
			harness_log("the read waited for the stopped updater");
	}
	sem_post(&s.t1_go);
	pthread_join(t1, NULL);
	if (!in_child) {
		pthread_join(rd, NULL);
		CHECK_EQ_LONG(s.value, 12);
	}
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, NULL, NULL);
	CHECK_EQ_LONG(tally_memcg_stat_read(s.a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &value, NULL),
		      0);
	CHECK_EQ_LONG(value, 12);
	tally_memcg_put(s.b);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
	sem_destroy(&s.t2_resolved);
	sem_destroy(&s.t2_go);
	sem_destroy(&s.t1_in_push);
	sem_destroy(&s.t1_go);
}

TEST(forced_read_folds_a_destroyed_groups_update_stopped_before_its_push)
{
	stopped_zombie_push_run(false);
}

TEST(fork_child_folds_a_destroyed_groups_update_stopped_before_its_push)
{
	stopped_zombie_push_run(true);
}

#ifdef TALLY_DEBUG
/* Debug builds: a handle used after its last put aborts, with a message. */
TEST(a_handle_used_after_its_last_put_aborts_in_debug_builds)
{
	int calls;

	for (calls = 0; calls < 3; calls++) {
		int status = 0;
		pid_t pid = fork();

		REQUIRE(pid >= 0);
		if (pid == 0) {
			struct tally_memcg_tree *t = NULL;
			struct tally_memcg *g = NULL;

			/* Quiet: the abort's message is the point, not noise. */
			if (!freopen("/dev/null", "w", stderr))
				_exit(3);
			if (tally_memcg_tree_create(&t, NULL) ||
			    tally_memcg_create(tally_memcg_root(t), "q", &g) ||
			    tally_memcg_destroy(g))
				_exit(2);
			tally_memcg_put(g);	/* the last reference */
			if (calls == 0 && !tally_memcg_charge(g, 1 << 20, 0))
				_exit(4);	/* charged a freed group */
			else if (calls == 1)
				tally_memcg_destroy(g);
			else
				tally_memcg_put(g);
			_exit(0);
		}
		REQUIRE(waitpid(pid, &status, 0) == pid);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	}
}
#endif /* TALLY_DEBUG */

#endif /* TALLY_INJECT */
