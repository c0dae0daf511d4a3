// SPDX-License-Identifier: MIT
/*
 * test_memcg_callbacks.c - the protocol of reclaim and kill callbacks
 * (tally/memcg.h): set, replace and remove while calls run, from inside
 * the callbacks themselves, across groups and threads, and across fork().
 *
 * Each test parks a callback in a thread of its own, acts from another
 * thread (waiting until that thread sleeps in tally's wait when the test
 * needs it to be there), then releases the callback.  A test that would
 * hang on a wait that never ends runs in a forked child with an alarm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/mm.h>

#include "harness.h"
#include "memcg/memcg_internal.h"

#define GET(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define PUT(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* Sleep 100 us at a time until *@word reads @value. */
static void wait_for(int *word, int value)
{
	while (GET(word) != value)
		usleep(100);
}

/* The scheduler state of thread @tid of this process ('S': sleeping). */
static char thread_state(pid_t tid)
{
	char path[64], buf[512], *close;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	close = strrchr(buf, ')');	/* the name may hold spaces */
	return close && close[1] == ' ' ? close[2] : '?';
}

/*
 * A callback parked in thread @th: it records its calls, parks on its
 * first one until @release, then runs @action (set @acting first: from
 * there on the thread's only sleep is a wait of tally's).
 */
struct park {
	struct tally_memcg *g;		/* the group whose callback it is */
	void (*action)(struct park *p);
	struct park *other;		/* what the action acts on */
	int calls;
	int entered;
	int release;
	int acting;
	int returned;
	long ret;			/* the action's result */
	int other_returned;		/* other->returned when it returned */
	pid_t tid;
	pthread_t th;
};

static void park_call(struct park *p)
{
	if (__atomic_fetch_add(&p->calls, 1, __ATOMIC_ACQ_REL))
		return;
	PUT(&p->entered, 1);
	wait_for(&p->release, 1);
	if (p->action) {
		PUT(&p->acting, 1);
		p->action(p);
	}
	PUT(&p->returned, 1);
}

static long parked_reclaim(struct tally_memcg *g, long bytes, void *arg)
{
	(void)g;
	(void)bytes;
	park_call(arg);
	return 0;
}

static void parked_kill(struct tally_memcg *oom_group,
			struct tally_memcg_task *victim, void *arg)
{
	(void)oom_group;
	(void)victim;
	park_call(arg);
}

/* Charge @p->g past its max: its reclaim callback or its kill runs. */
static void *charger(void *arg)
{
	struct park *p = arg;

	PUT(&p->tid, (pid_t)syscall(SYS_gettid));
	/* Past the max whatever the callback frees: refused. */
	CHECK_EQ_LONG(tally_memcg_charge(p->g, 8192, 0), -ENOMEM);
	return NULL;
}

static bool park_start(struct park *p)
{
	if (!CHECK(pthread_create(&p->th, NULL, charger, p) == 0))
		return false;
	wait_for(&p->entered, 1);
	return true;
}

/* Release @p and wait until its action sleeps in a wait of tally's. */
static void park_release_until_it_waits(struct park *p)
{
	PUT(&p->release, 1);
	wait_for(&p->acting, 1);
	while (!GET(&p->returned) && thread_state(GET(&p->tid)) != 'S')
		usleep(100);
}

static void park_finish(struct park *p)
{
	PUT(&p->release, 1);
	pthread_join(p->th, NULL);
}

/* A group @name of @t, max 4096 and charged to it, @p's reclaim callback. */
static struct tally_memcg *reclaiming_group(struct tally_memcg_tree *t,
					    const char *name, struct park *p)
{
	struct tally_memcg *g;

	if (!CHECK(tally_memcg_create(tally_memcg_root(t), name, &g) == 0))
		return NULL;
	p->g = g;
	if (!CHECK(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4096) == 0) ||
	    !CHECK(tally_memcg_charge(g, 4096, 0) >= 0) ||
	    !CHECK(tally_memcg_set_reclaim(g, parked_reclaim, p) == 0))
		return NULL;
	return g;
}

static long never_called_calls;

static long never_called(struct tally_memcg *g, long bytes, void *arg)
{
	(void)g;
	(void)bytes;
	(void)arg;
	__atomic_add_fetch(&never_called_calls, 1, __ATOMIC_RELAXED);
	return 0;
}

static void destroy_own_group(struct park *p)
{
	p->ret = tally_memcg_destroy(p->g);
}

static long set_never_called(struct tally_memcg *g)
{
	return tally_memcg_set_reclaim(g, never_called, NULL);
}

/* A setter's thread: @set on @p->g while @p's callback is parked. */
struct setter {
	struct park *p;
	long (*set)(struct tally_memcg *g);
	long ret;
	int done;
	int call_returned;	/* the parked call had returned by then */
	pid_t tid;
};

static void *setter_thread(void *arg)
{
	struct setter *s = arg;

	PUT(&s->tid, (pid_t)syscall(SYS_gettid));
	s->ret = s->set(s->p->g);
	s->call_returned = GET(&s->p->returned);
	PUT(&s->done, 1);
	return NULL;
}

/* Wait until @s sleeps in its set (or returned). */
static void setter_waits(struct setter *s)
{
	while (!GET(&s->tid))
		usleep(100);
	while (!GET(&s->done) && thread_state(GET(&s->tid)) != 'S')
		usleep(100);
}

/* ---- a callback destroys its own group while another thread sets it -- */

/*
 * @p's callback, parked, destroys its own group once released while @s
 * sets that group's callback from another thread: both return, the
 * setter only once the call has (0, or -EINVAL after the destroy).
 */
static void set_while_the_call_destroys_its_group(struct park *p,
						  struct setter *s)
{
	pthread_t setter;

	REQUIRE(park_start(p));
	REQUIRE(pthread_create(&setter, NULL, setter_thread, s) == 0);
	setter_waits(s);
	park_finish(p);
	pthread_join(setter, NULL);
	CHECK_EQ_LONG(p->ret, 0);
	CHECK(s->ret == 0 || s->ret == -EINVAL);
	CHECK_EQ_LONG(s->call_returned, 1);
}

/*
 * tally_memcg_set_reclaim() waits for the call of the old callback; that
 * call destroys the group, whose removal of the callback must not wait
 * for the setter.  Both waited for ever: the setter for the call, the
 * destroy for the setter's turn.
 */
static void destroy_in_callback_against_a_setter(void)
{
	struct tally_memcg_tree *t;
	struct park p = { .action = destroy_own_group, .ret = 1 };
	struct setter s = { .p = &p, .set = set_never_called, .ret = 1 };

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(reclaiming_group(t, "g", &p));
	set_while_the_call_destroys_its_group(&p, &s);
	CHECK_EQ_LONG(never_called_calls, 0);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(p.g, NULL, NULL), -EINVAL);
	tally_memcg_put(p.g);
	tally_memcg_tree_destroy(t);
}

TEST(a_reclaim_callback_destroying_its_group_while_another_thread_sets_it_never_hangs)
{
	CHECK_EQ_LONG(harness_run_child(destroy_in_callback_against_a_setter),
		      0);
}

/* ---- a kill callback destroys its group while its policy is set ------ */

struct killing {
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_mm mm;
	struct tally_memcg_task task;
};

static bool killing_init(struct killing *k, struct park *p)
{
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      parked_kill, p };

	memset(k, 0, sizeof(*k));
	k->task.mm = &k->mm;
	if (!CHECK(tally_mm_init(&k->mm, NULL, 0, NULL) == 0) ||
	    !CHECK(tally_memcg_tree_create(&k->t, NULL) == 0) ||
	    !CHECK(tally_memcg_create(tally_memcg_root(k->t), "g", &k->g) == 0))
		return false;
	p->g = k->g;
	return CHECK(tally_memcg_set_limit(k->g, TALLY_MEMCG_MAX, 4096) == 0) &&
	       CHECK(tally_memcg_set_oom_policy(k->g, &pol) == 0) &&
	       CHECK(tally_memcg_task_attach(k->g, &k->task) == 0);
}

static void killing_fini(struct killing *k)
{
	tally_memcg_task_detach(&k->task);	/* -EINVAL once detached */
	tally_memcg_put(k->g);
	tally_memcg_tree_destroy(k->t);
	tally_mm_destroy(&k->mm);
}

static void never_killing(struct tally_memcg *oom_group,
			  struct tally_memcg_task *victim, void *arg)
{
	(void)oom_group;
	(void)victim;
	(void)arg;
}

static long set_never_killing(struct tally_memcg *g)
{
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      never_killing, NULL };

	return tally_memcg_set_oom_policy(g, &pol);
}

/*
 * Destroy removes the group's OOM policy, including one set by a setter
 * that was waiting for the running kill callback when that callback
 * destroyed the group: the setter stored its policy after the destroy,
 * on the destroyed group (white-box: the group's mode), where no set to
 * NULL could remove it (-EINVAL).
 */
static void set_policy_against_a_destroying_kill(void)
{
	struct park p = { .action = destroy_own_group, .ret = 1 };
	struct setter s = { .p = &p, .set = set_never_killing, .ret = 1 };
	struct killing k;

	REQUIRE(killing_init(&k, &p));
	set_while_the_call_destroys_its_group(&p, &s);
	CHECK_EQ_LONG(k.g->oom.mode, TALLY_MEMCG_OOM_FAIL);
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(k.g, NULL), -EINVAL);
	killing_fini(&k);
}

TEST(a_policy_set_while_its_kill_callback_destroys_the_group_goes_with_it)
{
	CHECK_EQ_LONG(harness_run_child(set_policy_against_a_destroying_kill),
		      0);
}

/* ---- a callback sets its own group's callback ------------------------ */

static long own_policy_ret = 1;

static void set_own_policy(struct tally_memcg *oom_group,
			   struct tally_memcg_task *victim, void *arg)
{
	(void)victim;
	(*(int *)arg)++;
	own_policy_ret = tally_memcg_set_oom_policy(oom_group, NULL);
}

/*
 * A set returns once no call of the old callback runs; the kill callback
 * that sets its own group's policy is such a call, in the setter's own
 * thread: -EDEADLK, and nothing changed (the next kill calls it again).
 */
static void kill_sets_its_own_policy(void)
{
	struct killing k;
	struct park unused = { 0 };
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      set_own_policy, NULL };
	int calls = 0;

	REQUIRE(killing_init(&k, &unused));
	pol.arg = &calls;
	REQUIRE(tally_memcg_set_oom_policy(k.g, &pol) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(k.g, 8192, 0), -ENOMEM);
	CHECK_EQ_LONG(own_policy_ret, -EDEADLK);
	own_policy_ret = 1;
	CHECK_EQ_LONG(tally_memcg_charge(k.g, 8192, 0), -ENOMEM);
	CHECK_EQ_LONG(own_policy_ret, -EDEADLK);
	CHECK_EQ_LONG(calls, 2);
	CHECK_EQ_LONG(tally_memcg_set_oom_policy(k.g, NULL), 0);
	killing_fini(&k);
}

TEST(a_kill_callback_setting_its_own_groups_policy_is_edeadlk_and_changes_nothing)
{
	CHECK_EQ_LONG(harness_run_child(kill_sets_its_own_policy), 0);
}

/* ---- a callback destroys its own group ------------------------------- */

static long destroy_self_ret = 1;

static long destroy_self(struct tally_memcg *g, long bytes, void *arg)
{
	(void)bytes;
	(*(int *)arg)++;
	destroy_self_ret = tally_memcg_destroy(g);
	return 0;
}

/*
 * A callback may destroy its own group: destroy waits for other threads'
 * calls only.  The group is gone (its name is free, its charge is its
 * parent's) and its callback is never called again.
 */
static void reclaim_destroys_its_group(void)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *g, *found;
	int calls = 0;

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "p", &p) == 0);
	REQUIRE(tally_memcg_create(p, "g", &g) == 0);
	REQUIRE(tally_memcg_set_limit(p, TALLY_MEMCG_MAX, 4096) == 0);
	REQUIRE(tally_memcg_charge(g, 4096, 0) >= 0);
	REQUIRE(tally_memcg_set_reclaim(g, destroy_self, &calls) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(p, 4096, 0), -ENOMEM);
	CHECK_EQ_LONG(destroy_self_ret, 0);
	CHECK_EQ_LONG(calls, 1);
	CHECK_EQ_LONG(tally_memcg_find(t, "p/g", &found), -ENOENT);
	CHECK_EQ_LONG(tally_memcg_charge(p, 4096, 0), -ENOMEM);
	CHECK_EQ_LONG(calls, 1);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);	/* p's now */
	CHECK_EQ_LONG(tally_memcg_charge(p, 4096, 0) >= 0, 1);
	tally_memcg_put(g);
	tally_memcg_put(p);
	tally_memcg_tree_destroy(t);
}

TEST(a_reclaim_callback_may_destroy_its_own_group)
{
	CHECK_EQ_LONG(harness_run_child(reclaim_destroys_its_group), 0);
}

/* ---- callbacks of two threads acting on each other's group ----------- */

static void clear_other(struct park *p)
{
	p->ret = tally_memcg_set_reclaim(p->other->g, NULL, NULL);
	p->other_returned = GET(&p->other->returned);
}

static void destroy_other(struct park *p)
{
	p->ret = tally_memcg_destroy(p->other->g);
	p->other_returned = GET(&p->other->returned);
}

/*
 * Groups x and y of a new tree, callbacks @a and @b parked in threads of
 * their own; @a's action acts on y from inside x's callback first (and
 * waits for @b's call), then @b's acts on x from inside y's callback and
 * would wait for @a's: that wait could never end.
 */
static struct tally_memcg_tree *cycle(struct park *a, struct park *b)
{
	struct tally_memcg_tree *t;

	if (!CHECK(tally_memcg_tree_create(&t, NULL) == 0))
		return NULL;
	if (!reclaiming_group(t, "x", a) || !reclaiming_group(t, "y", b) ||
	    !park_start(a) || !park_start(b))
		return t;
	a->other = b;
	b->other = a;
	park_release_until_it_waits(a);
	park_finish(b);
	pthread_join(a->th, NULL);
	return t;
}

/*
 * Two callbacks that each clear the other's group's callback: the second
 * to wait would close a cycle of waits; it gets -EDEADLK, nothing
 * changed, and the first goes on once the second's call returned.
 */
static void two_callbacks_clear_each_other(void)
{
	struct park a = { .action = clear_other, .ret = 1 };
	struct park b = { .action = clear_other, .ret = 1 };
	struct tally_memcg_tree *t = cycle(&a, &b);
	int calls;

	REQUIRE(t);
	CHECK_EQ_LONG(a.ret, 0);
	CHECK_EQ_LONG(a.other_returned, 1);
	CHECK_EQ_LONG(b.ret, -EDEADLK);
	/* b's set changed nothing: x's callback is still called. */
	calls = GET(&a.calls);
	CHECK_EQ_LONG(tally_memcg_charge(a.g, 8192, 0), -ENOMEM);
	CHECK_CMP_LONG(GET(&a.calls), >, calls);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(a.g, NULL, NULL), 0);
	tally_memcg_put(a.g);
	tally_memcg_put(b.g);
	tally_memcg_tree_destroy(t);
}

TEST(two_callbacks_clearing_each_others_callback_one_gets_edeadlk_never_hangs)
{
	CHECK_EQ_LONG(harness_run_child(two_callbacks_clear_each_other), 0);
}

/*
 * The same cycle closed by a destroy: -EDEADLK, and the group is not
 * destroyed (its name is taken, its callback still called).
 */
static void destroy_closes_a_cycle(void)
{
	struct park a = { .action = clear_other, .ret = 1 };
	struct park b = { .action = destroy_other, .ret = 1 };
	struct tally_memcg_tree *t = cycle(&a, &b);
	struct tally_memcg *x;
	int calls;

	REQUIRE(t);
	CHECK_EQ_LONG(a.ret, 0);
	CHECK_EQ_LONG(a.other_returned, 1);
	CHECK_EQ_LONG(b.ret, -EDEADLK);
	CHECK_EQ_LONG(tally_memcg_find(t, "x", &x), 0);
	calls = GET(&a.calls);
	CHECK_EQ_LONG(tally_memcg_charge(a.g, 8192, 0), -ENOMEM);
	CHECK_CMP_LONG(GET(&a.calls), >, calls);
	CHECK_EQ_LONG(tally_memcg_destroy(a.g), 0);
	tally_memcg_put(x);
	tally_memcg_put(a.g);
	tally_memcg_put(b.g);
	tally_memcg_tree_destroy(t);
}

TEST(a_destroy_that_would_close_a_cycle_of_waits_is_edeadlk_and_destroys_nothing)
{
	CHECK_EQ_LONG(harness_run_child(destroy_closes_a_cycle), 0);
}

/* ---- a callback clears a group whose call runs in a third thread ----- */

/*
 * x's callback parks in thread a; y's callback, in thread b, clears x's:
 * its set returns only after a's call of x's callback returned.
 */
static void clear_a_call_of_a_third_thread(void)
{
	struct tally_memcg_tree *t;
	struct park a = { .ret = 1 };
	struct park b = { .action = clear_other, .ret = 1 };

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(reclaiming_group(t, "x", &a));
	REQUIRE(reclaiming_group(t, "y", &b));
	b.other = &a;
	REQUIRE(park_start(&a));
	REQUIRE(park_start(&b));
	park_release_until_it_waits(&b);
	CHECK_EQ_LONG(GET(&b.returned), 0);	/* waiting for a's call */
	park_finish(&a);
	pthread_join(b.th, NULL);
	CHECK_EQ_LONG(b.ret, 0);
	CHECK_EQ_LONG(b.other_returned, 1);
	/* Cleared: a charge of x finds no callback to call. */
	CHECK_EQ_LONG(tally_memcg_charge(a.g, 8192, 0), -ENOMEM);
	CHECK_EQ_LONG(a.calls, 1);	/* the parked call, none after */
	tally_memcg_put(a.g);
	tally_memcg_put(b.g);
	tally_memcg_tree_destroy(t);
}

TEST(a_callback_clearing_another_groups_callback_waits_for_its_call_in_a_third_thread)
{
	CHECK_EQ_LONG(harness_run_child(clear_a_call_of_a_third_thread), 0);
}

/* ---- fork ------------------------------------------------------------ */

static struct park *forked_park;

static void child_clears_the_parked_callback(void)
{
	CHECK_EQ_LONG(tally_memcg_set_reclaim(forked_park->g, NULL, NULL), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(forked_park->g), 0);
}

/*
 * A call that runs in a thread of the parent never ends in the child:
 * the child's set and destroy do not wait for it.
 */
TEST(a_fork_child_does_not_wait_for_calls_of_the_parents_other_threads)
{
	struct tally_memcg_tree *t;
	struct park p = { .ret = 1 };

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	REQUIRE(reclaiming_group(t, "g", &p));
	REQUIRE(park_start(&p));
	forked_park = &p;
	CHECK_EQ_LONG(harness_run_child(child_clears_the_parked_callback), 0);
	park_finish(&p);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(p.g, NULL, NULL), 0);
	tally_memcg_put(p.g);
	tally_memcg_tree_destroy(t);
}
