// SPDX-License-Identifier: MIT
/*
 * test_memcg_transfer.c - bytes on their way between the page counters
 * and the stocks never make a refusal, a new max or a fork child wrong,
 * and no user callback holds back a tree's frees.
 *
 * The transfer tests park a thread inside a transfer at an injection
 * point (an eviction that emptied a slot, a refill about to install its
 * slot) and act from other threads while it is parked: a charge that fits
 * once the parked bytes are back, a lower max, a destroy, a fork.  A
 * thread that must wait for the parked one says so through the bounded
 * wait's own injection point (TALLY_INJECT_BACKOFF_NAP); only then is
 * the parked thread let go, so every run takes the same order whatever
 * the machine and its load.  Without that wait (the code before the
 * transfer primitive) the acting thread finishes while the bytes are
 * still parked, and the test sees the false refusal, the false -EBUSY or
 * the child's counters off by the parked batch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/domain.h>
#include <tally/memcg.h>

#include "harness.h"
#include "util.h"
#include "memcg/memcg_internal.h"
#include "memcg_scene.h"

#define KB 1024l
#define PARENT_MAX SCENE_PARENT_MAX
#define OTHERS SCENE_OTHERS

static void wait_for(int *word, int value)
{
	while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value)
		usleep(100);
}

#ifdef TALLY_INJECT
#include "runtime/inject.h"

/* Until one of two words is set. */
static void wait_for_either(int *a, int *b)
{
	while (!__atomic_load_n(a, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(b, __ATOMIC_ACQUIRE))
		usleep(100);
}

/*
 * The parking: the worker thread, once armed, stops at its next pass of
 * @park_point until released; any other thread that naps in a bounded
 * wait sets the flag it registered (its_nap).
 */
static enum tally_inject_point park_point;
static pthread_t parked_thread;
static int park_armed, parked, released;
static __thread int *its_nap;

static int park_here(enum tally_inject_point point, void *arg)
{
	(void)arg;
	if (point == park_point && park_armed &&
	    pthread_equal(pthread_self(), parked_thread)) {
		park_armed = 0;
		__atomic_store_n(&parked, 1, __ATOMIC_RELEASE);
		wait_for(&released, 1);
	}
	return 0;
}

static int note_nap(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (its_nap)
		__atomic_store_n(its_nap, 1, __ATOMIC_RELEASE);
	return 0;
}

static void park_setup(enum tally_inject_point point)
{
	park_point = point;
	park_armed = parked = released = 0;
	tally_inject_set(point, park_here, NULL);
	tally_inject_set(TALLY_INJECT_BACKOFF_NAP, note_nap, NULL);
}

static void park_teardown(void)
{
	tally_inject_set(park_point, NULL, NULL);
	tally_inject_set(TALLY_INJECT_BACKOFF_NAP, NULL, NULL);
}

static int scene_charge(struct scene *s, struct tally_memcg *g, long n)
{
	if (s->domain)
		return tally_memcg_charge_cpu(g, (unsigned int)s->cpu, n, 0);
	return tally_memcg_charge(g, n, 0);
}

/* The worker: 4 KiB on A, then on each other group: the last evicts A. */
static void *charge_nine_groups(void *arg)
{
	struct scene *s = arg;

	parked_thread = pthread_self();
	if (!s->domain)
		util_pin((int)util_allowed_cpu(0));
	if (!CHECK_EQ_LONG(scene_charge(s, s->a, 4 * KB), 0))
		return NULL;
	for (int i = 0; i < OTHERS; i++) {
		if (i == OTHERS - 1)
			park_armed = 1;
		CHECK_EQ_LONG(scene_charge(s, s->other[i], 4 * KB), 0);
	}
	return NULL;
}

/* What a thread does while the worker is parked, and what it returned. */
struct actor {
	struct scene *s;
	int (*act)(struct actor *a);
	int result, done, napped;
	pthread_t th;
};

static void *run_actor(void *arg)
{
	struct actor *a = arg;

	its_nap = &a->napped;
	a->result = a->act(a);
	its_nap = NULL;
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start @a and return once it finished or waits for the parked bytes. */
static void actor_start(struct actor *a)
{
	REQUIRE(pthread_create(&a->th, NULL, run_actor, a) == 0);
	wait_for_either(&a->done, &a->napped);
}

/*
 * Park the worker at @point inside its ninth refill, run @acts one after
 * the other while it is parked (each until it ended or waits), then let
 * it go.
 */
static void with_worker_parked(struct scene *s, enum tally_inject_point point,
			       struct actor *acts, int nr)
{
	pthread_t worker;

	park_setup(point);
	REQUIRE(pthread_create(&worker, NULL, charge_nine_groups, s) == 0);
	wait_for(&parked, 1);
	for (int i = 0; i < nr; i++)
		actor_start(&acts[i]);
	for (int i = 0; i < nr; i++)
		harness_log("  actor %d: %s", i,
			    LOAD(&acts[i].napped) ? "waited for the parked bytes"
						  : "did not wait");
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	pthread_join(worker, NULL);
	for (int i = 0; i < nr; i++)
		pthread_join(acts[i].th, NULL);
	park_teardown();
}

/* Held by the worker under P: 4 KiB on A.  The rest fits under P's max. */
#define FITS (PARENT_MAX - 4 * KB - 4 * KB)

static int charge_what_fits_anywhere(struct actor *a)
{
	if (a->s->domain)
		return tally_memcg_charge_cpu(a->s->p, 1, FITS, 0);
	return tally_memcg_charge(a->s->p, FITS, 0);
}

static struct scene *fork_scene;

/*
 * A scene in which @act runs while the worker's eviction of A's slot is
 * parked; it succeeds (0).  P's drained usage after, or -1.
 */
static long act_during_an_eviction(bool simulated, int (*act)(struct actor *))
{
	struct actor a = { .act = act };
	struct scene s;
	long usage;

	if (!scene_init(&s, simulated))
		return -1;
	a.s = fork_scene = &s;
	with_worker_parked(&s, TALLY_INJECT_MEMCG_EVICTED, &a, 1);
	CHECK_EQ_LONG(a.result, 0);
	usage = util_memcg_usage(s.p, TALLY_MEMCG_READ_DRAIN);
	scene_fini(&s);
	return usage;
}

static void evicted_bytes_never_refuse(bool simulated)
{
	CHECK_EQ_LONG(act_during_an_eviction(simulated,
					     charge_what_fits_anywhere),
		      4 * KB + FITS);
}

/*
 * A charge of P that fits once every stock is drained is not refused
 * while a refill of another group evicts A's slot and carries its bytes
 * back to A's counters: it waits for that transfer.
 */
TEST(a_charge_that_fits_is_not_refused_while_an_eviction_carries_bytes_back)
{
	evicted_bytes_never_refuse(false);
}

TEST(a_charge_that_fits_is_not_refused_while_an_eviction_carries_bytes_back_on_a_simulated_domain)
{
	evicted_bytes_never_refuse(true);
}

static int lower_max_to_what_is_held(struct actor *a)
{
	return tally_memcg_set_limit(a->s->p, TALLY_MEMCG_MAX, 4 * KB);
}

/*
 * Setting P's max to what P's subtree holds succeeds while an eviction
 * carries A's slot back: the settled usage counts no byte in transit.
 */
TEST(a_max_that_holds_every_charge_is_set_while_an_eviction_carries_bytes_back)
{
	CHECK_EQ_LONG(act_during_an_eviction(false, lower_max_to_what_is_held),
		      4 * KB);
}

static int destroy_a(struct actor *a)
{
	return tally_memcg_destroy(a->s->a);
}

/*
 * The worker's first refill, of A, parked with A's batch in the counters
 * and not yet in a slot (atomic stocks: before the install's
 * compare-and-swap).  A is destroyed meanwhile, then P is charged what
 * fits: the destroy waits for the transfer on A, and so does the charge,
 * which is not refused.
 */
static void *refill_a(void *arg)
{
	struct scene *s = arg;

	parked_thread = pthread_self();
	park_armed = 1;
	CHECK_EQ_LONG(scene_charge(s, s->a, 4 * KB), 0);
	return NULL;
}

TEST(a_transfer_on_a_group_destroyed_mid_flight_never_makes_a_refusal_false)
{
	struct actor acts[2] = { { .act = destroy_a },
				 { .act = charge_what_fits_anywhere } };
	struct scene s;
	pthread_t worker;

	REQUIRE(scene_init(&s, true));
	acts[0].s = acts[1].s = &s;
	park_setup(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS);
	REQUIRE(pthread_create(&worker, NULL, refill_a, &s) == 0);
	wait_for(&parked, 1);
	for (int i = 0; i < 2; i++)
		actor_start(&acts[i]);
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	pthread_join(worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(acts[i].th, NULL);
	park_teardown();
	CHECK_EQ_LONG(acts[0].result, 0);
	CHECK_EQ_LONG(acts[1].result, 0);
	CHECK_EQ_LONG(util_memcg_usage(s.p, TALLY_MEMCG_READ_DRAIN),
		      4 * KB + FITS);
	scene_fini(&s);
}

/*
 * fork() while an eviction carries A's bytes back: the child's counters
 * hold exactly what its charges hold (nothing of a transfer that no
 * thread of the child will finish).
 */
static int fork_and_check_the_child(struct actor *a)
{
	pid_t pid = fork();

	(void)a;
	if (pid == 0) {
		long held = 4 * KB;	/* A's; the others are beside P */
		struct tally_memcg_range r;
		int ok = !tally_memcg_usage(fork_scene->p,
					    TALLY_MEMCG_READ_DRAIN, &r) &&
			 r.value == held;

		if (!ok)
			fprintf(stderr, "child: P's usage %ld, charged %ld\n",
				r.value, held);
		_exit(ok ? 0 : 1);
	}
	return pid < 0 ? -errno : harness_wait_child(pid);
}

TEST(a_fork_child_s_counters_hold_exactly_its_charges_after_an_eviction_in_flight)
{
	CHECK_EQ_LONG(act_during_an_eviction(false, fork_and_check_the_child),
		      4 * KB);
}
#endif /* TALLY_INJECT */

/* ---- user callbacks and grace periods --------------------------------- */

struct parked_callback {
	int entered, release;
};

static long park_in_reclaim(struct tally_memcg *g, long bytes, void *arg)
{
	struct parked_callback *p = arg;

	(void)g;
	(void)bytes;
	__atomic_store_n(&p->entered, 1, __ATOMIC_RELEASE);
	wait_for(&p->release, 1);
	return 0;
}

struct over_max {
	struct tally_memcg *g;
	int result;
};

static void *charge_over_max(void *arg)
{
	struct over_max *o = arg;

	o->result = tally_memcg_charge(o->g, 64 * KB, 0);
	return NULL;
}

/* Create, destroy and put @n groups of @t; then what is still retired. */
static unsigned long churn(struct tally_memcg_tree *t, int n)
{
	for (int i = 0; i < n; i++) {
		struct tally_memcg *g =
			util_memcg_group(tally_memcg_root(t), "churned");

		if (!g)
			break;
		CHECK_EQ_LONG(tally_memcg_charge(g, 4 * KB, 0), 0);
		CHECK_EQ_LONG(tally_memcg_destroy(g), 0);
		tally_memcg_uncharge(g, 4 * KB);
		tally_memcg_put(g);
	}
	return grace_pending(&t->grace);
}

/*
 * A reclaim callback that runs (here: parked) for as long as it likes
 * holds back no grace period: groups created, destroyed and put meanwhile
 * on its own tree and on another are freed (at most the last two polls'
 * retires wait for the next).
 */
TEST(a_running_reclaim_callback_holds_back_no_tree_s_frees)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 4 * KB);
	struct tally_memcg_tree *other = util_memcg_tree(NULL, 4 * KB);
	struct parked_callback p = { 0 };
	struct over_max o = { 0 };
	pthread_t th;

	REQUIRE(t && other);
	o.g = util_memcg_group(tally_memcg_root(t), "full");
	REQUIRE(o.g);
	REQUIRE(tally_memcg_set_limit(o.g, TALLY_MEMCG_MAX, 16 * KB) == 0);
	REQUIRE(tally_memcg_set_reclaim(o.g, park_in_reclaim, &p) == 0);
	/* Something to reclaim: the callback is asked. */
	REQUIRE(tally_memcg_charge(o.g, 8 * KB, 0) == 0);
	REQUIRE(pthread_create(&th, NULL, charge_over_max, &o) == 0);
	wait_for(&p.entered, 1);
	CHECK_LE_ULONG(churn(other, 1000), 4);
	CHECK_LE_ULONG(churn(t, 1000), 4);
	__atomic_store_n(&p.release, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	CHECK_EQ_LONG(o.result, -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(o.g, NULL, NULL), 0);
	tally_memcg_uncharge(o.g, 8 * KB);
	tally_memcg_put(o.g);
	tally_memcg_tree_destroy(other);
	tally_memcg_tree_destroy(t);
}

/*
 * A reclaim callback that destroys and puts its own group's siblings, and
 * its own group: the walk that called it goes on from there, and asks
 * every group that was there throughout once.
 */
struct sibling_killer {
	struct tally_memcg *victims[4];
	int asked[6];
	struct tally_memcg *groups[6];
};

static long destroy_siblings(struct tally_memcg *g, long bytes, void *arg)
{
	struct sibling_killer *k = arg;

	(void)bytes;
	for (int i = 0; i < 6; i++)
		if (k->groups[i] == g)
			k->asked[i]++;
	for (int i = 0; i < 4; i++) {
		if (!k->victims[i])
			continue;
		CHECK_EQ_LONG(tally_memcg_destroy(k->victims[i]), 0);
		tally_memcg_put(k->victims[i]);
		k->victims[i] = NULL;
	}
	return 0;
}

TEST(a_reclaim_walk_goes_on_after_its_callback_destroyed_the_groups_around_it)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 4 * KB);
	struct sibling_killer k = { 0 };
	struct tally_memcg *top;

	REQUIRE(t);
	top = util_memcg_group(tally_memcg_root(t), "top");
	REQUIRE(top);
	/* Children are listed newest first: c5, c4, ..., c0. */
	for (int i = 0; i < 6; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		k.groups[i] = util_memcg_group(top, name);
		REQUIRE(k.groups[i]);
		REQUIRE(tally_memcg_charge(k.groups[i], 8 * KB, 0) == 0);
		REQUIRE(tally_memcg_set_reclaim(k.groups[i], destroy_siblings,
						&k) == 0);
	}
	/* The first asked (c5) destroys c4 and c3 after it, c5 itself, c2. */
	k.victims[0] = k.groups[4];
	k.victims[1] = k.groups[3];
	k.victims[2] = k.groups[5];
	k.victims[3] = k.groups[2];
	for (int i = 2; i < 6; i++)
		tally_memcg_get(k.groups[i]);	/* the victims' handles */
	REQUIRE(tally_memcg_set_limit(top, TALLY_MEMCG_MAX, 48 * KB) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(k.groups[0], 64 * KB, 0), -ENOMEM);
	CHECK_EQ_LONG(k.asked[5], 1);
	CHECK_EQ_LONG(k.asked[4], 0);
	CHECK_EQ_LONG(k.asked[3], 0);
	CHECK_EQ_LONG(k.asked[2], 0);
	/* c1 and c0 were there throughout: asked in each of the two passes. */
	CHECK(k.asked[1] >= 1);
	CHECK(k.asked[0] >= 1);
	for (int i = 0; i < 6; i++)
		tally_memcg_put(k.groups[i]);
	tally_memcg_put(top);
	tally_memcg_tree_destroy(t);
}
