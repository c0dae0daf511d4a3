// SPDX-License-Identifier: MIT
/*
 * test_memcg_lifetime.c - memory groups (tally/memcg.h) that a service can
 * run for months: the lifetime of groups and of the objects handed to
 * callbacks, callbacks that can be removed, and costs that do not grow with
 * what a charge does not touch.
 *
 * The rule held here: tally_memcg_create() and tally_memcg_find() hand the
 * caller a reference, dropped with tally_memcg_put(); a destroyed group's
 * handle works (its work goes to its nearest live ancestor) while the
 * caller holds a reference, and its memory and event descriptor go once
 * the last one is put.  Setting or removing a callback returns only once
 * no call of the old one runs or can start, so its argument may be freed.
 *
 * Each test runs in a fresh copy of this binary (harness_rerun()) with an
 * alarm: a crash, a sanitizer report or a hang fails that test alone.
 * Races are provoked by counts of rounds, capped in time so that a slow
 * build stays bounded; nothing asserts on time.  The hostile test parks a
 * thread in a signal handler inside a library call, changes the objects
 * under it from another thread, then lets it go on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/mm.h>


#include "harness.h"
#include "util.h"

#define KB 1024l
#define MB (1024l * KB)

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_ACQ_REL)

/* Seconds a test's fresh process has before SIGALRM calls it hung. */
#define CHILD_ALARM_S 240

/*
 * Run the rest of the test's body in a fresh copy of this binary (with the
 * "NAME=VALUE" settings of @env, NULL-terminated, or NULL) that has
 * CHILD_ALARM_S seconds; the parent only checks that it passed.
 */
#define IN_FRESH_PROCESS(env)						\
	do {								\
		if (!harness_is_child()) {				\
			int status_ = RERUN_THIS_TEST(env);		\
									\
			if (!CHECK_EQ_LONG(status_, 0))			\
				harness_log("fresh process: status %d "	\
					    "(134 abort, 139 segv, "	\
					    "142 alarm: hung)",		\
					    status_);			\
			return;						\
		}							\
		alarm(CHILD_ALARM_S);					\
	} while (0)

/* Rounds of a loop: @n of them, or fewer once @end (harness_now()) passed. */
static bool more_rounds(long i, long n, double end)
{
	return i < n && ((i & 15) || harness_now() < end);
}

/* Yield until *@v >= @want or @secs passed; true when it got there. */
static bool wait_for(const long *v, long want, double secs)
{
	double end = harness_now() + secs;

	while (LOAD(v) < want) {
		if (harness_now() > end)
			return false;
		sched_yield();
	}
	return true;
}

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * A thread marks the library calls that a signal may interrupt with
 * IN_CALL(): the handlers below act only inside one.
 */
static __thread volatile sig_atomic_t in_call;

#define IN_CALL(expr)							\
	({								\
		in_call = 1;						\
		__atomic_signal_fence(__ATOMIC_SEQ_CST);		\
		__auto_type r_ = (expr);				\
		__atomic_signal_fence(__ATOMIC_SEQ_CST);		\
		in_call = 0;						\
		r_;							\
	})

/*
 * Stalls: a thread that takes SIGUSR2 inside a call naps there for stall_us
 * microseconds, as a thread preempted at that point would; outside a call
 * it goes on at once.  A staller thread sends the signal to its targets at
 * random moments.
 */
static long stall_us;
static long stalls;		/* taken inside a call */

static void stall_handler(int sig)
{
	int saved = errno;

	(void)sig;
	if (in_call) {
		ADD(&stalls, 1);
		nap_us(LOAD(&stall_us));
	}
	errno = saved;
}

struct staller {
	pthread_t targets[4];
	int nr;
	int quit;
	pthread_t th;
};

/*
 * A stall at a random moment of each target, one target at a time, with
 * at least a stall's length between two: the targets are delayed in the
 * middle of their calls, as by a preemption, never kept in their handlers
 * for good (a thread stopped inside a call is another promise: a refusal
 * waits 1 s for it, then fails).
 */
static void *stall_loop(void *arg)
{
	struct staller *s = arg;
	struct rng r = rng_seed(0x57a11);

	while (!LOAD(&s->quit)) {
		nap_us(LOAD(&stall_us) + (long)rng_below(&r, 100));
		pthread_kill(s->targets[rng_below(&r, (uint64_t)s->nr)],
			     SIGUSR2);
	}
	return NULL;
}

/* Stall the @s->nr threads of @s->targets for @us at random moments. */
static bool stall_start(struct staller *s, long us)
{
	struct sigaction sa = { .sa_handler = stall_handler };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	STORE(&stall_us, us);
	STORE(&stalls, 0);
	STORE(&s->quit, 0);
	return CHECK_EQ_LONG(sigaction(SIGUSR2, &sa, NULL), 0) &&
	       CHECK_EQ_LONG(pthread_create(&s->th, NULL, stall_loop, s), 0);
}

/*
 * Before the targets end: no signal goes to a thread that is gone.  The
 * handler stays: a signal still pending does nothing outside a call.
 */
static void stall_stop(struct staller *s)
{
	STORE(&s->quit, 1);
	pthread_join(s->th, NULL);
}

static bool charged(int ret)
{
	return ret == 0 || ret == TALLY_MEMCG_OVER_HIGH;
}

static long stat_hier(struct tally_memcg *g, enum tally_memcg_stat item)
{
	long hier = LONG_MIN;

	CHECK_EQ_LONG(tally_memcg_stat_read(g, item, TALLY_FLUSH_FORCE, &hier,
					    NULL), 0);
	return hier;
}

/* ---- 1. updates through a zombie while its ancestors go ---------------- */

#define ZOMBIE_WORKERS 2

struct zombie_race {
	struct tally_memcg *c;	/* the destroyed handle of the round */
	long round;		/* published round */
	long got;		/* workers holding their reference */
	long ancestors_gone;	/* b and a destroyed and put */
	long done;		/* workers done with the round */
	long adds;		/* stat_mod(+1) that returned 0 */
	long errors;		/* any other return */
};

static void *zombie_worker(void *arg)
{
	struct zombie_race *z = arg;
	long seen = 0;

	for (;;) {
		struct tally_memcg *c;
		long extra = 32;

		while (LOAD(&z->round) == seen)
			sched_yield();
		seen = LOAD(&z->round);
		if (seen < 0)
			return NULL;
		c = LOAD(&z->c);
		tally_memcg_get(c);
		ADD(&z->got, 1);
		for (;;) {
			int r = tally_memcg_stat_mod(c, TALLY_MEMCG_ANON, 1);

			if (r == 0)
				ADD(&z->adds, 1);
			else
				ADD(&z->errors, 1);
			r = tally_memcg_charge(c, 512, 0);
			if (!charged(r) || tally_memcg_uncharge(c, 512))
				ADD(&z->errors, 1);
			if (LOAD(&z->ancestors_gone) && --extra == 0)
				break;
		}
		tally_memcg_put(c);
		ADD(&z->done, 1);
	}
}

/*
 * memcg.h: stat updates, charges and uncharges of a destroyed group go to
 * its nearest live ancestor; the caller cannot know which one that is, so
 * that ancestor being destroyed at the same moment must not make the
 * update land in freed memory, nor lose it.  Chains root/a/b/c: c is
 * destroyed and used by two threads (each with its reference) while b and
 * a are destroyed and put.  Every update returns 0, the root's memory.stat
 * holds every one, and every byte charged is uncharged.
 */
TEST(updates_through_a_zombie_while_its_ancestors_are_destroyed_land_and_are_kept)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *root;
	struct zombie_race z = { 0 };
	pthread_t th[ZOMBIE_WORKERS];
	long i, n = harness_scale(2000);
	double end;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 16 * KB);
	REQUIRE(t);
	root = tally_memcg_root(t);
	for (int k = 0; k < ZOMBIE_WORKERS; k++)
		REQUIRE(pthread_create(&th[k], NULL, zombie_worker, &z) == 0);
	end = harness_now() + 20;
	for (i = 0; more_rounds(i, n, end); i++) {
		struct tally_memcg *a, *b, *c;

		a = util_memcg_group(root, "a");
		b = a ? util_memcg_group(a, "b") : NULL;
		c = b ? util_memcg_group(b, "c") : NULL;
		if (!c)
			break;
		CHECK(charged(tally_memcg_charge(c, 8 * KB, 0)));
		CHECK_EQ_LONG(tally_memcg_destroy(c), 0);
		STORE(&z.got, 0);
		STORE(&z.done, 0);
		STORE(&z.ancestors_gone, 0);
		STORE(&z.c, c);
		STORE(&z.round, i + 1);
		if (!CHECK(wait_for(&z.got, ZOMBIE_WORKERS, 60)))
			break;
		CHECK_EQ_LONG(tally_memcg_destroy(b), 0);
		tally_memcg_put(b);
		CHECK_EQ_LONG(tally_memcg_destroy(a), 0);
		tally_memcg_put(a);
		STORE(&z.ancestors_gone, 1);
		/* The charge moved c -> b -> a -> root: c gives it back. */
		CHECK_EQ_LONG(tally_memcg_uncharge(c, 8 * KB), 0);
		tally_memcg_put(c);
		if (!CHECK(wait_for(&z.done, ZOMBIE_WORKERS, 60)))
			break;
		if (LOAD(&z.errors))
			break;
	}
	STORE(&z.round, -1);
	for (int k = 0; k < ZOMBIE_WORKERS; k++)
		pthread_join(th[k], NULL);
	harness_log("%ld rounds, %ld updates", i, z.adds);
	CHECK_EQ_LONG(z.errors, 0);
	CHECK_EQ_LONG(stat_hier(root, TALLY_MEMCG_ANON), z.adds);
	CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
}

/* ---- 2. the kill victim after its detach ------------------------------ */

/*
 * A tree with a group g full at its 64 KiB max (any charge of g hits it)
 * whose OOM policy kills with @kill(@arg), without waiting; @mm: counters
 * for the tasks, with 1 MiB of anon (a badness to be chosen for).
 */
struct oom_fixture {
	struct tally_memcg_tree *t;
	struct tally_memcg *root, *g;
	struct tally_mm mm;
};

static bool oom_fixture_init(struct oom_fixture *f, tally_memcg_kill_fn kill,
			     void *arg)
{
	struct tally_memcg_oom_policy pol = {
		.mode = TALLY_MEMCG_OOM_KILL, .timeout_ns = 0,
		.kill = kill, .arg = arg,
	};

	if (!CHECK_EQ_LONG(tally_mm_init(&f->mm, NULL, 0, NULL), 0))
		return false;
	tally_mm_add(&f->mm, TALLY_MM_ANON, MB);
	f->t = util_memcg_tree(NULL, 0);
	if (!f->t)
		return false;
	f->root = tally_memcg_root(f->t);
	f->g = util_memcg_group(f->root, "g");
	return f->g &&
	       CHECK_EQ_LONG(tally_memcg_set_limit(f->g, TALLY_MEMCG_MAX,
						   64 * KB), 0) &&
	       CHECK_EQ_LONG(tally_memcg_set_oom_policy(f->g, &pol), 0) &&
	       CHECK_EQ_LONG(tally_memcg_charge(f->g, 64 * KB,
						TALLY_MEMCG_NOFAIL), 0);
}

/* Everything given back: the root holds nothing. */
static void oom_fixture_destroy(struct oom_fixture *f)
{
	CHECK_EQ_LONG(tally_memcg_uncharge(f->g, 64 * KB), 0);
	CHECK_EQ_LONG(util_memcg_usage(f->root, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_put(f->g);
	tally_memcg_tree_destroy(f->t);
	tally_mm_add(&f->mm, TALLY_MM_ANON, -MB);
	CHECK_EQ_LONG(tally_mm_destroy(&f->mm), 0);
}

struct kill_race {
	long destroys;		/* groups the other thread destroyed */
	long kills;
	long errors;
	int quit;
	size_t page;
	struct tally_memcg *root;
};

/*
 * The victim lives alone in a mapping of its own: once its callback
 * unmapped it, a read of it faults in every build (not only under ASan).
 */
static struct tally_memcg_task *victim_new(struct tally_mm *mm, size_t page)
{
	struct tally_memcg_task *task = mmap(NULL, page,
					     PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS, -1,
					     0);

	if (task == MAP_FAILED)
		return NULL;
	task->mm = mm;
	task->owner = task;
	return task;
}

static void kill_detach_and_free(struct tally_memcg *oom_group,
				 struct tally_memcg_task *victim, void *arg)
{
	struct kill_race *k = arg;
	long before;
	double end;

	(void)oom_group;
	if (tally_memcg_task_detach(victim))
		ADD(&k->errors, 1);
	munmap(victim, k->page);
	ADD(&k->kills, 1);
	/*
	 * Still in the callback: let the other thread destroy a group or two
	 * (bounded: a destroy that waits for this callback just ends it).
	 */
	before = LOAD(&k->destroys);
	end = harness_now() + 0.05;
	while (LOAD(&k->destroys) < before + 2 && harness_now() < end)
		nap_us(20);
}

static void *destroy_loop(void *arg)
{
	struct kill_race *k = arg;

	while (!LOAD(&k->quit)) {
		struct tally_memcg *x;

		if (tally_memcg_create(k->root, "other", &x)) {
			ADD(&k->errors, 1);
			break;
		}
		if (tally_memcg_destroy(x))
			ADD(&k->errors, 1);
		tally_memcg_put(x);
		ADD(&k->destroys, 1);
	}
	return NULL;
}

/*
 * memcg.h: the kill callback may detach its victim, and the caller frees a
 * task once detached.  A callback that detaches and frees its victim, then
 * still runs while another thread destroys an unrelated group: nothing in
 * tally may read the victim after its detach.
 */
TEST(kill_victim_freed_by_its_callback_is_never_read_while_groups_are_destroyed)
{
	struct kill_race k = { 0 };
	struct oom_fixture f;
	pthread_t th;
	long i, n = harness_scale(200), kills = 0;
	double end;

	IN_FRESH_PROCESS(NULL);
	k.page = (size_t)sysconf(_SC_PAGESIZE);
	REQUIRE(oom_fixture_init(&f, kill_detach_and_free, &k));
	k.root = f.root;
	REQUIRE(pthread_create(&th, NULL, destroy_loop, &k) == 0);
	end = harness_now() + 20;
	for (i = 0; more_rounds(i, n, end); i++) {
		struct tally_memcg_task *v = victim_new(&f.mm, k.page);

		if (!CHECK(v != NULL))
			break;
		if (!CHECK_EQ_LONG(tally_memcg_task_attach(f.g, v), 0))
			break;
		CHECK_EQ_LONG(tally_memcg_charge(f.g, 4 * KB, 0), -ENOMEM);
		if (!CHECK_EQ_LONG(LOAD(&k.kills), ++kills)) {
			/* Not chosen: still attached and mapped. */
			tally_memcg_task_detach(v);
			munmap(v, k.page);
			break;
		}
	}
	STORE(&k.quit, 1);
	pthread_join(th, NULL);
	harness_log("%ld kills, %ld destroys meanwhile", k.kills, k.destroys);
	CHECK_EQ_LONG(k.errors, 0);
	oom_fixture_destroy(&f);
}

/* ---- 3. replacing and removing the reclaim callback ------------------- */

/* A callback's argument: live from its registration to its replacement. */
struct reclaim_arg {
	int live;
};

static struct reclaim_race {
	struct tally_memcg *g;
	struct reclaim_arg a, b;
	long calls;
	long torn;		/* a call with the other one's argument */
	long late;		/* a call running once replaced */
	long errors;
	int quit;
} rr;

static long reclaim_check(struct reclaim_arg *mine, struct tally_memcg *g,
			  void *arg)
{
	ADD(&rr.calls, 1);
	if (g != rr.g || arg != mine) {
		ADD(&rr.torn, 1);
		return 0;
	}
	if (!LOAD(&mine->live))
		ADD(&rr.late, 1);
	/* A call in flight: its removal must wait for it. */
	for (int i = 0; i < 3; i++)
		sched_yield();
	if (!LOAD(&mine->live))
		ADD(&rr.late, 1);
	return 0;
}

static long reclaim_a(struct tally_memcg *g, long bytes, void *arg)
{
	(void)bytes;
	return reclaim_check(&rr.a, g, arg);
}

static long reclaim_b(struct tally_memcg *g, long bytes, void *arg)
{
	(void)bytes;
	return reclaim_check(&rr.b, g, arg);
}

/* Charges refused at max ask the reclaim callback; so does reclaim_high. */
static void *reclaim_trigger(void *arg)
{
	(void)arg;
	while (!LOAD(&rr.quit)) {
		int r = tally_memcg_charge(rr.g, 4 * KB, 0);

		if (charged(r))
			tally_memcg_uncharge(rr.g, 4 * KB);
		else if (r != -ENOMEM)
			ADD(&rr.errors, 1);
		if (tally_memcg_reclaim_high(rr.g) == -EINVAL)
			ADD(&rr.errors, 1);
	}
	return NULL;
}

/*
 * tally_memcg_set_reclaim() replaces (fn, arg) as one pair and returns
 * only once no call of the old pair runs or can start, so the caller may
 * free the old argument then.  One thread cycles the callback through
 * (reclaim_a, &a), (reclaim_b, &b) and NULL, marking the replaced argument
 * dead as soon as the call returns; two threads make reclaim run all the
 * while.  No call may see the other function's argument, nor run on a
 * dead argument.
 */
TEST(reclaim_callback_pairs_are_never_torn_and_removal_waits_for_calls_in_flight)
{
	struct tally_memcg_tree *t;
	struct reclaim_arg *cur = NULL;
	struct rng r = rng_seed(3);
	pthread_t th[2];
	long i, n = harness_scale(3000);
	double end, hang;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 0);
	REQUIRE(t);
	rr.g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(rr.g);
	REQUIRE(tally_memcg_set_limit(rr.g, TALLY_MEMCG_MAX, 16 * KB) == 0);
	REQUIRE(tally_memcg_charge(rr.g, 16 * KB, TALLY_MEMCG_NOFAIL |
				   TALLY_MEMCG_NORECLAIM) >= 0);
	REQUIRE(tally_memcg_set_limit(rr.g, TALLY_MEMCG_HIGH, 0) == 0);
	for (int k = 0; k < 2; k++)
		REQUIRE(pthread_create(&th[k], NULL, reclaim_trigger, NULL) ==
			0);
	end = harness_now() + 20;
	hang = harness_now() + HARNESS_HANG_S;
	/*
	 * n switches at least, and on until n / 4 calls were made, or at
	 * least one on a machine too busy to make them in 20 s.
	 */
	for (i = 0; (i < n || LOAD(&rr.calls) < n / 4) &&
		    (harness_now() < end ||
		     (!LOAD(&rr.calls) && harness_now() < hang));
	     i++) {
		struct reclaim_arg *next;
		tally_memcg_reclaim_fn fn;

		do {
			int c = (int)rng_below(&r, 3);

			next = c == 0 ? &rr.a : c == 1 ? &rr.b : NULL;
		} while (next == cur);
		fn = next == &rr.a ? reclaim_a : next ? reclaim_b : NULL;
		if (next)
			STORE(&next->live, 1);
		if (!CHECK_EQ_LONG(tally_memcg_set_reclaim(rr.g, fn, next), 0))
			break;
		if (cur)
			STORE(&cur->live, 0);
		cur = next;
		sched_yield();
	}
	CHECK_EQ_LONG(tally_memcg_set_reclaim(rr.g, NULL, NULL), 0);
	if (cur)
		STORE(&cur->live, 0);
	STORE(&rr.quit, 1);
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	harness_info("%ld switches, %ld calls: %ld torn, %ld after removal",
		     i, rr.calls, rr.torn, rr.late);
	CHECK_EQ_LONG(rr.torn, 0);
	CHECK_EQ_LONG(rr.late, 0);
	CHECK_EQ_LONG(rr.errors, 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(rr.g, 16 * KB), 0);
	CHECK_EQ_LONG(util_memcg_usage(tally_memcg_root(t),
				       TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_put(rr.g);
	tally_memcg_tree_destroy(t);
}

static long self_replace_ret = 1;

static long replace_own_callback(struct tally_memcg *g, long bytes, void *arg)
{
	(void)bytes;
	(void)arg;
	self_replace_ret = tally_memcg_set_reclaim(g, NULL, NULL);
	return 0;
}

/*
 * A reclaim callback cannot wait for its own end: replacing its own
 * group's callback from inside it is refused (-EDEADLK) and changes
 * nothing; the callback is still called by the next reclaim.
 */
TEST(reclaim_callback_replacing_its_own_groups_callback_is_edeadlk)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 0);
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 16 * KB) == 0);
	REQUIRE(tally_memcg_charge(g, 16 * KB, TALLY_MEMCG_NOFAIL) == 0);
	REQUIRE(tally_memcg_set_reclaim(g, replace_own_callback, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_charge(g, 4 * KB, 0), -ENOMEM);
	CHECK_EQ_LONG(self_replace_ret, -EDEADLK);
	self_replace_ret = 1;
	CHECK_EQ_LONG(tally_memcg_charge(g, 4 * KB, 0), -ENOMEM);
	CHECK_EQ_LONG(self_replace_ret, -EDEADLK);
	CHECK_EQ_LONG(tally_memcg_set_reclaim(g, NULL, NULL), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 16 * KB), 0);
	tally_memcg_put(g);
	tally_memcg_tree_destroy(t);
}

/* ---- 4. setting max above the exact usage ----------------------------- */

#define CEILING_THREADS 2
#define CEILING_HOLD (16 * KB)	/* most a thread holds, in flight too */

struct ceiling {
	struct tally_memcg *g;
	int quit;
	long cycles, refused, errors;
};

static void *ceiling_loop(void *arg)
{
	struct ceiling *c = arg;

	while (!LOAD(&c->quit)) {
		long held = 0;

		while (held < CEILING_HOLD) {
			int r = IN_CALL(tally_memcg_charge(c->g, 4 * KB,
						TALLY_MEMCG_NORECLAIM));

			if (charged(r))
				held += 4 * KB;
			else if (r == -ENOMEM)
				ADD(&c->refused, 1);
			else
				ADD(&c->errors, 1);
			if (r)
				break;
		}
		for (; held; held -= 4 * KB)
			if (tally_memcg_uncharge(c->g, 4 * KB))
				ADD(&c->errors, 1);
		ADD(&c->cycles, 1);
	}
	return NULL;
}

/*
 * tally_memcg_set_limit(max) behaves as the kernel's memory.max write:
 * publish, drain, reclaim, retry; -EBUSY only when the exact usage stays
 * above the new max (bytes a charge took for its stock and has not put
 * there yet are no usage).  Threads charging and uncharging hold at most
 * 32 KiB together, and are stalled 100 us at random points of their
 * charges; every max set is at least 32 KiB, so none may be refused.
 */
TEST(set_max_above_the_exact_usage_is_never_ebusy_while_others_charge)
{
	struct tally_memcg_tree *t;
	struct ceiling c = { 0 };
	struct staller st = { 0 };
	struct rng r = rng_seed(4);
	pthread_t th[CEILING_THREADS];
	const long bound = CEILING_THREADS * CEILING_HOLD;
	long i, n = harness_scale(2000), busy = 0, other = 0;
	double end;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 16 * KB);
	REQUIRE(t);
	c.g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(c.g);
	for (int k = 0; k < CEILING_THREADS; k++)
		REQUIRE(pthread_create(&th[k], NULL, ceiling_loop, &c) == 0);
	REQUIRE(wait_for(&c.cycles, 100, 60));
	for (int k = 0; k < CEILING_THREADS; k++)
		st.targets[k] = th[k];
	st.nr = CEILING_THREADS;
	REQUIRE(stall_start(&st, 100));
	end = harness_now() + 20;
	/* n tries at least, and on until the chargers were stalled n times. */
	for (i = 0; (i < n || LOAD(&stalls) < n) && harness_now() < end; i++) {
		long max = rng_below(&r, 4) ? bound + 4 * KB *
				(long)rng_below(&r, 16) : TALLY_MEMCG_UNLIMITED;
		int ret = tally_memcg_set_limit(c.g, TALLY_MEMCG_MAX, max);

		if (ret == -EBUSY)
			busy++;
		else if (ret)
			other++;
	}
	stall_stop(&st);
	STORE(&c.quit, 1);
	for (int k = 0; k < CEILING_THREADS; k++)
		pthread_join(th[k], NULL);
	harness_log("%ld of %ld set max refused -EBUSY (stalled %ld times; %ld "
		    "cycles of charges, %ld refused)", busy, i, stalls,
		    c.cycles, c.refused);
	CHECK_EQ_LONG(busy, 0);
	CHECK_EQ_LONG(other, 0);
	CHECK_EQ_LONG(c.errors, 0);
	CHECK_EQ_LONG(util_memcg_usage(c.g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_put(c.g);
	tally_memcg_tree_destroy(t);
}

/* ---- 5. a group per query, for ever ----------------------------------- */

/*
 * The settings of a fresh process for a memory measure: ASan's quarantine
 * holds freed memory back, so it is turned off there (other builds ignore
 * ASAN_OPTIONS).
 */
static const char *const *no_quarantine_env(void)
{
	static char asan[512];
	static const char *env[2];
	const char *old = getenv("ASAN_OPTIONS");

	snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%squarantine_size_mb=0",
		 old ? old : "", old && *old ? ":" : "");
	env[0] = asan;
	env[1] = NULL;
	return env;
}

/*
 * What a service does per query: create a group, (watch its events,)
 * charge it, destroy it when the query ends, uncharge what was left
 * through its handle, drop the handle.  With 256 descriptors, after
 * harness_scale(2000) and harness_scale(20000) queries: no EMFILE, no byte
 * and no memory.stat item left anywhere, resident memory that did not grow
 * by more than 64 bytes a query (plus 1 MiB of slack), and no more
 * destroyed groups kept than there are descriptors.
 */
static void queries_leave_nothing_behind(bool watch_events)
{
	struct rlimit rl;
	struct tally_memcg_tree *t;
	struct tally_memcg *root, *svc;
	struct tally_memcg_info info;
	long page = sysconf(_SC_PAGESIZE), rss1 = -1, rss2, i;
	long n1 = harness_scale(2000), n2 = harness_scale(20000);

	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = 256;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	t = util_memcg_tree(NULL, 0);
	REQUIRE(t);
	root = tally_memcg_root(t);
	svc = util_memcg_group(root, "svc");
	REQUIRE(svc);
	for (i = 0; i < n2; i++) {
		long bytes = 4 * KB + (i % 7) * 1536;
		struct tally_memcg *q;
		char name[32];

		snprintf(name, sizeof(name), "query-%ld", i);
		if (!CHECK_EQ_LONG(tally_memcg_create(svc, name, &q), 0))
			break;
		if (watch_events) {
			int fd = tally_memcg_events_fd(q);

			if (!CHECK(fd >= 0)) {
				harness_log("events_fd of query %ld: %d", i,
					    fd);
				break;
			}
		}
		if (!CHECK(charged(tally_memcg_charge(q, bytes, 0))) ||
		    !CHECK_EQ_LONG(tally_memcg_stat_mod(q, TALLY_MEMCG_ANON,
							bytes), 0) ||
		    !CHECK_EQ_LONG(tally_memcg_destroy(q), 0) ||
		    !CHECK_EQ_LONG(tally_memcg_uncharge(q, bytes), 0) ||
		    !CHECK_EQ_LONG(tally_memcg_stat_mod(q, TALLY_MEMCG_ANON,
							-bytes), 0))
			break;
		tally_memcg_put(q);
		if (i + 1 == n1) {
			CHECK_EQ_LONG(util_memcg_usage(root,
					TALLY_MEMCG_READ_DRAIN), 0);
			rss1 = util_resident_pages();
		}
	}
	rss2 = util_resident_pages();
	CHECK_EQ_LONG(i, n2);
	CHECK_EQ_LONG(util_memcg_usage(svc, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_LONG(stat_hier(root, TALLY_MEMCG_ANON), 0);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 2);
	CHECK_LE_ULONG(info.zombies, 256);
	harness_log("%ld queries: resident %ld KiB after %ld, %ld KiB after "
		    "%ld; %lu destroyed groups kept", i, rss1 * page / KB, n1,
		    rss2 * page / KB, n2, info.zombies);
#ifndef TALLY_DEBUG
	/* Debug builds keep destroyed groups poisoned until the tree goes. */
	if (rss1 > 0 && rss2 > 0)
		CHECK_LE_LONG((rss2 - rss1) * page, (n2 - n1) * 64 + MB);
#endif
	tally_memcg_put(svc);
	tally_memcg_tree_destroy(t);
}

TEST(a_group_per_query_leaves_no_memory_and_no_byte_behind)
{
	IN_FRESH_PROCESS(no_quarantine_env());
	queries_leave_nothing_behind(false);
}

TEST(a_group_per_query_with_its_events_fd_runs_out_of_no_descriptor)
{
	IN_FRESH_PROCESS(no_quarantine_env());
	queries_leave_nothing_behind(true);
}

/* ---- 6. over-high reclaim out of the charge --------------------------- */

struct sibling {
	struct tally_memcg *g;
	long held;
};

static long sibling_calls;
static long sibling_wrong_group;

static long sibling_reclaim(struct tally_memcg *g, long bytes, void *arg)
{
	struct sibling *s = arg;
	long n = bytes < s->held ? bytes : s->held;

	ADD(&sibling_calls, 1);
	if (g != s->g) {
		ADD(&sibling_wrong_group, 1);
		return 0;
	}
	if (n <= 0 || tally_memcg_uncharge(g, n))
		return 0;
	s->held -= n;
	return n;
}

/*
 * Over-high reclaim is the caller's call: a charge that leaves a level
 * above high returns TALLY_MEMCG_OVER_HIGH and counts the high event, but
 * calls no reclaim callback (its cost must not grow with the siblings
 * above high); tally_memcg_reclaim_high() then reclaims the excess of the
 * group and its ancestors.  harness_scale(20000) siblings, each above its
 * own high, make their parent p twice its high; a charge of x, p's other
 * child, calls none of their callbacks; reclaim_high(x) brings p's exact
 * usage under its high through them.
 */
TEST(charge_above_high_calls_no_reclaim_and_reclaim_high_reclaims_the_excess)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *x;
	struct sibling *s;
	long i, n = harness_scale(20000), held = 0, events, got, high;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 0);
	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	x = p ? util_memcg_group(p, "x") : NULL;
	s = calloc((size_t)n, sizeof(*s));
	REQUIRE(x && s);
	for (i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "s%ld", i);
		s[i].g = util_memcg_group(p, name);
		if (!s[i].g ||
		    !CHECK(charged(tally_memcg_charge(s[i].g, 4 * KB,
						      TALLY_MEMCG_NOFAIL |
						      TALLY_MEMCG_NORECLAIM))))
			break;
		s[i].held = 4 * KB;
		if (!CHECK_EQ_LONG(tally_memcg_set_limit(s[i].g,
						TALLY_MEMCG_HIGH, 0), 0) ||
		    !CHECK_EQ_LONG(tally_memcg_set_reclaim(s[i].g,
						sibling_reclaim, &s[i]), 0))
			break;
	}
	REQUIRE(i == n);
	high = n * 4 * KB / 2;
	REQUIRE(tally_memcg_set_limit(p, TALLY_MEMCG_HIGH, high) == 0);
	events = util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false);

	CHECK_EQ_LONG(tally_memcg_charge(x, 4 * KB, 0), TALLY_MEMCG_OVER_HIGH);
	CHECK_EQ_LONG(LOAD(&sibling_calls), 0);
	CHECK_LE_LONG(events + 1, util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH,
						   false));

	got = tally_memcg_reclaim_high(x);
	CHECK(got > 0);
	CHECK(LOAD(&sibling_calls) > 0);
	CHECK_EQ_LONG(sibling_wrong_group, 0);
	for (i = 0; i < n; i++)
		held += s[i].held;
	CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN),
		      held + 4 * KB);
	CHECK_LE_LONG(held + 4 * KB, high);
	harness_log("%ld siblings, %ld callback calls, %ld bytes reclaimed",
		    n, sibling_calls, got);

	CHECK_EQ_LONG(tally_memcg_uncharge(x, 4 * KB), 0);
	for (i = 0; i < n; i++) {
		if (s[i].held)
			CHECK_EQ_LONG(tally_memcg_uncharge(s[i].g, s[i].held),
				      0);
		tally_memcg_put(s[i].g);
	}
	CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_put(x);
	tally_memcg_put(p);
	tally_memcg_tree_destroy(t);
	free(s);
}

/* ---- 7. an uncharge in transit is no reason to refuse ----------------- */

#define TRANSIT_UNCHARGERS 2
#define TRANSIT_HOLD (16 * KB)	/* what an uncharger holds, or 0 */
#define TRANSIT_MAX (128 * KB)

struct transit {
	struct tally_memcg *g;
	bool simulated;
	int quit;
	long cycles, refused, errors;
};

static int transit_charge(struct transit *x, unsigned int cpu, long n)
{
	return x->simulated ? tally_memcg_charge_cpu(x->g, cpu, n,
						     TALLY_MEMCG_NORECLAIM)
			    : tally_memcg_charge(x->g, n,
						 TALLY_MEMCG_NORECLAIM);
}

static int transit_uncharge(struct transit *x, unsigned int cpu, long n)
{
	return x->simulated ? tally_memcg_uncharge_cpu(x->g, cpu, n)
			    : tally_memcg_uncharge(x->g, n);
}

struct uncharger {
	struct transit *x;
	unsigned int cpu;
	pthread_t th;
};

/*
 * Charge TRANSIT_HOLD (larger than a stock: it goes to the page counters,
 * and leaves the CPU's stock full, two batches of 4 KiB), then uncharge it:
 * the uncharge finds the stock full, takes a batch out of it and gives it
 * back to the page counters with the bytes.  Stalls land in the uncharges.
 */
static void *uncharge_loop(void *arg)
{
	struct uncharger *u = arg;
	struct transit *x = u->x;

	if (!x->simulated)
		util_pin((int)util_allowed_cpu(u->cpu % util_nr_allowed()));
	while (!LOAD(&x->quit)) {
		int r = transit_charge(x, u->cpu, TRANSIT_HOLD);

		if (!charged(r))
			ADD(r == -ENOMEM ? &x->refused : &x->errors, 1);
		else if (IN_CALL(transit_uncharge(x, u->cpu, TRANSIT_HOLD)))
			ADD(&x->errors, 1);
		ADD(&x->cycles, 1);
	}
	return NULL;
}

/*
 * memcg.h, "What is exact": a charge fails only when the usage of some
 * level (charges returned or in flight, minus uncharges returned) plus
 * the charge exceeds its max: a batch an uncharge took out of a stock on
 * its way to the page counters is no usage.  Two threads charge and
 * uncharge 16 KiB of a 128 KiB max through full stocks, stalled at random
 * points of their uncharges; a third charges the 96 KiB left, over and
 * over (past the stocks, so mostly after a drain): no charge may be
 * refused.  @nr_cpus: a simulated domain of that many CPUs, 0 for the
 * system domain.
 */
static void uncharges_in_transit(unsigned int nr_cpus)
{
	struct tally_domain *d = nr_cpus ? util_domain(nr_cpus) : NULL;
	struct transit x = { .simulated = nr_cpus > 0 };
	struct uncharger u[TRANSIT_UNCHARGERS];
	struct staller st = { 0 };
	struct tally_memcg_info info;
	struct tally_memcg_tree *t = util_memcg_tree(d, 4 * KB);
	const long big = TRANSIT_MAX - TRANSIT_UNCHARGERS * TRANSIT_HOLD;
	long i, n = harness_scale(20000), refused = 0;
	double end;

	REQUIRE(t);
	x.g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(x.g);
	REQUIRE(tally_memcg_set_limit(x.g, TALLY_MEMCG_MAX, TRANSIT_MAX) == 0);
	for (int k = 0; k < TRANSIT_UNCHARGERS; k++) {
		u[k] = (struct uncharger){ &x, (unsigned int)k, 0 };
		REQUIRE(pthread_create(&u[k].th, NULL, uncharge_loop, &u[k]) ==
			0);
	}
	REQUIRE(wait_for(&x.cycles, 100, 60));
	for (int k = 0; k < TRANSIT_UNCHARGERS; k++)
		st.targets[k] = u[k].th;
	st.nr = TRANSIT_UNCHARGERS;
	REQUIRE(stall_start(&st, 100));
	end = harness_now() + 20;
	/* n rounds at least, and on until n / 10 stalls of the unchargers. */
	for (i = 0; (i < n || LOAD(&stalls) < n / 10) && harness_now() < end;
	     i++) {
		unsigned int cpu = nr_cpus ? nr_cpus - 1 : 0;
		int r = transit_charge(&x, cpu, big);

		if (r == -ENOMEM)
			refused++;
		else if (!charged(r) || transit_uncharge(&x, cpu, big))
			ADD(&x.errors, 1);
	}
	stall_stop(&st);
	STORE(&x.quit, 1);
	for (int k = 0; k < TRANSIT_UNCHARGERS; k++)
		pthread_join(u[k].th, NULL);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	harness_log("%ld of %ld charges of %ld KiB refused, %ld small ones of "
		    "%ld cycles, %ld stalls, %lu settles whose wait ran out "
		    "(rseq stocks: %d)", refused, i, big / KB, x.refused,
		    x.cycles, stalls, info.drain_waits, info.rseq);
	/*
	 * A refusal is allowed only where memcg.h allows it: its settle's
	 * 1 s wait for a transfer in flight ran out (a stalled thread kept
	 * off its CPU that long by a loaded machine), counted in drain_waits.
	 */
	CHECK_LE_LONG(refused + x.refused, (long)info.drain_waits);
	CHECK_EQ_LONG(x.errors, 0);
	CHECK_EQ_LONG(util_memcg_usage(x.g, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_ULONG(info.underflows, 0);
	tally_memcg_put(x.g);
	tally_memcg_tree_destroy(t);
	if (d)
		tally_domain_destroy(d);
}

TEST(uncharge_in_transit_causes_no_refusal_on_the_system_domain)
{
	IN_FRESH_PROCESS(NULL);
	uncharges_in_transit(0);
}

TEST(uncharge_in_transit_causes_no_refusal_without_membarrier)
{
	static const char *const env[] = { "TALLY_MEMBARRIER=off", NULL };

	IN_FRESH_PROCESS(env);
	uncharges_in_transit(0);
}

TEST(uncharge_in_transit_causes_no_refusal_on_a_simulated_domain)
{
	IN_FRESH_PROCESS(NULL);
	uncharges_in_transit(4);
}

/* ---- 8. detach racing the kill callback's detach ---------------------- */

struct detach_race {
	struct tally_memcg_task task;
	long by_thread, by_kill, kills, errors;
	long hold;		/* non-zero: the thread must not detach */
	long held;		/* the last hold the thread obeys */
	int quit;
};

/* Lets the other thread reach its detach of the victim first. */
static void kill_detach(struct tally_memcg *oom_group,
			struct tally_memcg_task *victim, void *arg)
{
	struct detach_race *d = arg;
	int r;

	(void)oom_group;
	for (int i = 0; i < 3; i++)
		sched_yield();
	r = tally_memcg_task_detach(victim);
	ADD(&d->kills, 1);
	if (r == 0)
		ADD(&d->by_kill, 1);
	else if (r != -EINVAL)
		ADD(&d->errors, 1);
}

static void *detach_loop(void *arg)
{
	struct detach_race *d = arg;

	while (!LOAD(&d->quit)) {
		long hold = LOAD(&d->hold);
		int r;

		if (hold) {
			STORE(&d->held, hold);
			sched_yield();
			continue;
		}
		r = tally_memcg_task_detach(&d->task);
		if (r == 0)
			ADD(&d->by_thread, 1);
		else if (r != -EINVAL)
			ADD(&d->errors, 1);
	}
	return NULL;
}

/*
 * memcg.h: the kill callback may detach its victim; any thread may detach
 * a task, and a detach of the victim waits for the callback.  One thread
 * detaching the task over and over while the kill callback detaches it as
 * the victim: no data race (TSan), and each attach is undone by exactly
 * one detach that returns 0 (one that waited for the callback finds the
 * task detached: -EINVAL).  Which detach wins a round is the scheduler's
 * choice, so every fourth round holds the thread first: there the kill
 * callback's detach must be the one that returns 0.
 */
TEST(detach_racing_the_kill_callbacks_detach_of_the_same_victim_is_race_free)
{
	struct detach_race d = { 0 };
	struct oom_fixture f;
	pthread_t th;
	long i, n = harness_scale(3000), attached = 0, held = 0;
	double end;

	IN_FRESH_PROCESS(NULL);
	REQUIRE(oom_fixture_init(&f, kill_detach, &d));
	d.task.mm = &f.mm;
	REQUIRE(pthread_create(&th, NULL, detach_loop, &d) == 0);
	end = harness_now() + 20;
	for (i = 0; more_rounds(i, n, end); i++) {
		bool hold = i % 4 == 0;
		long by_kill = LOAD(&d.by_kill);

		if (hold) {
			STORE(&d.hold, i + 1);
			if (!CHECK(wait_for(&d.held, i + 1, HARNESS_HANG_S)))
				break;
		}
		if (!CHECK_EQ_LONG(tally_memcg_task_attach(f.g, &d.task), 0))
			break;
		attached++;
		CHECK_EQ_LONG(tally_memcg_charge(f.g, 4 * KB, 0), -ENOMEM);
		if (hold) {
			/* The thread is held: only the callback detached. */
			held++;
			if (!CHECK_EQ_LONG(LOAD(&d.by_kill), by_kill + 1))
				break;
			STORE(&d.hold, 0);
		}
		/* Detached by the callback or by the thread, once. */
		if (!CHECK(wait_for(&d.by_thread, attached - LOAD(&d.by_kill),
				    60)))
			break;
	}
	STORE(&d.quit, 1);
	pthread_join(th, NULL);
	harness_info("%ld attaches (%ld with the thread held): %ld detached "
		     "by the kill callback, %ld by the thread", attached, held,
		     d.by_kill, d.by_thread);
	CHECK_EQ_LONG(d.by_kill + d.by_thread, attached);
	CHECK_LE_LONG(d.kills, attached);	/* one kill per attach, at most */
	CHECK_EQ_LONG(d.errors, 0);
	oom_fixture_destroy(&f);
}

/* ---- the hostile technique: park, mutate, resume ---------------------- */

/*
 * The worker marks the library calls it makes; the signal handler parks it
 * only inside one (it leaves at once otherwise, and the sender tries
 * again), after a charge of its own with TALLY_MEMCG_NOBLOCK, which may
 * not wait for whatever the interrupted call holds.
 */
static struct park {
	struct tally_memcg *g;	/* the worker's group of the round */
	long state;		/* 0 sent, 1 parked, 2 resumed, -1 missed */
	int release;
	long handler_held;	/* the handler's charges, net */
	long handler_bad;	/* other than charged, -EAGAIN, -ENOMEM */
} park;

static void park_handler(int sig)
{
	long sent = 0;
	int saved = errno, r;

	(void)sig;
	/* Parked only inside a call, and only if the sender still waits. */
	if (!__atomic_compare_exchange_n(&park.state, &sent,
					 in_call ? 1 : -1, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
	    LOAD(&park.state) != 1) {
		errno = saved;
		return;
	}
	r = tally_memcg_charge(LOAD(&park.g), 512, TALLY_MEMCG_NOBLOCK);
	if (charged(r))
		ADD(&park.handler_held, 512);
	else if (r != -EAGAIN && r != -ENOMEM)
		ADD(&park.handler_bad, 1);
	while (!LOAD(&park.release))
		nap_us(50);
	STORE(&park.release, 0);
	STORE(&park.state, 2);
	errno = saved;
}

struct hostile {
	struct tally_memcg *g;	/* published group of the round */
	long round;
	long got;		/* the worker holds its reference */
	long finish;		/* the round's mutation is over */
	long done;		/* the worker gave everything back */
	long adds;		/* memory.stat updates that returned 0 */
	long bad;
	unsigned long seed;
};

/* One library call of the worker on @g; @held: bytes it holds. */
static void hostile_op(struct hostile *h, struct tally_memcg *g,
		       struct rng *r, long *held)
{
	long bytes = (long)(rng_below(r, 16) + 1) * KB;
	struct tally_memcg *w;
	int ret;

	switch (rng_below(r, 8)) {
	case 0: case 1:
		if (*held > 96 * KB)
			break;
		ret = IN_CALL(tally_memcg_charge(g, bytes,
						 TALLY_MEMCG_NORECLAIM));
		if (charged(ret))
			*held += bytes;
		else if (ret != -ENOMEM)
			ADD(&h->bad, 1);
		break;
	case 2: case 3:
		if (*held < bytes)
			bytes = *held;
		if (bytes && IN_CALL(tally_memcg_uncharge(g, bytes)))
			ADD(&h->bad, 1);
		else
			*held -= bytes;
		break;
	case 4: case 5:
		if (IN_CALL(tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, 1)))
			ADD(&h->bad, 1);
		else
			ADD(&h->adds, 1);
		break;
	case 6:
		/* -EINVAL: destroyed meanwhile. */
		ret = IN_CALL(tally_memcg_drain(g));
		if (ret && ret != -EINVAL)
			ADD(&h->bad, 1);
		break;
	default:
		/* A short query under g: refused once g is destroyed. */
		ret = IN_CALL(tally_memcg_create(g, "w", &w));
		if (ret) {
			if (ret != -EINVAL)
				ADD(&h->bad, 1);
			break;
		}
		ret = IN_CALL(tally_memcg_charge(w, 4 * KB,
					      TALLY_MEMCG_NORECLAIM));
		if (ret != -ENOMEM && !charged(ret))
			ADD(&h->bad, 1);
		if (IN_CALL(tally_memcg_destroy(w)))
			ADD(&h->bad, 1);
		if (charged(ret) && IN_CALL(tally_memcg_uncharge(w, 4 * KB)))
			ADD(&h->bad, 1);
		tally_memcg_put(w);
		break;
	}
}

static void *hostile_worker(void *arg)
{
	struct hostile *h = arg;
	struct rng r = rng_seed(h->seed);
	long seen = 0;

	for (;;) {
		struct tally_memcg *g;
		long held = 0, extra = 200;

		while (LOAD(&h->round) == seen)
			sched_yield();
		seen = LOAD(&h->round);
		if (seen < 0)
			return NULL;
		g = LOAD(&h->g);
		tally_memcg_get(g);
		STORE(&park.g, g);
		ADD(&h->got, 1);
		while (!LOAD(&h->finish) || extra-- > 0)
			hostile_op(h, g, &r, &held);
		/* The handler no longer runs: the sender waits for done. */
		held += LOAD(&park.handler_held);
		STORE(&park.handler_held, 0);
		if (held && tally_memcg_uncharge(g, held))
			ADD(&h->bad, 1);
		tally_memcg_put(g);
		ADD(&h->done, 1);
	}
}

struct mutation {
	struct tally_memcg *p, *g;
	int what;
	long max;
	long over;		/* the mutation returned */
	long bad;
};

/*
 * Every result is a documented one: -EBUSY for a destroy of a group with a
 * child (the worker's query) or a max below the usage, -EINVAL for a group
 * destroyed already.
 */
static void *mutate(void *arg)
{
	struct mutation *m = arg;
	int r[2] = { 0, 0 };

	switch (m->what) {
	case 0:
		r[0] = tally_memcg_set_limit(m->g, TALLY_MEMCG_MAX, m->max);
		break;
	case 1:
		r[0] = tally_memcg_set_limit(m->p, TALLY_MEMCG_MAX, m->max);
		break;
	case 2:
		r[0] = tally_memcg_set_limit(m->p, TALLY_MEMCG_HIGH, m->max);
		break;
	case 3:
		r[0] = tally_memcg_destroy(m->g);
		break;
	default:
		r[0] = tally_memcg_destroy(m->g);
		r[1] = tally_memcg_destroy(m->p);
		break;
	}
	for (int k = 0; k < 2; k++)
		if (r[k] && r[k] != -EBUSY && r[k] != -EINVAL)
			m->bad++;
	STORE(&m->over, 1);
	return NULL;
}

/*
 * A thread parked in a signal handler at a random point of a library call
 * (a charge on its slow path, a drain, a destroy, a stat update) on its
 * group g, live or destroyed, while another thread sets limits on g or
 * its parent p, or destroys g or both; then it resumes.  Its calls still
 * return documented values, the handler's NOBLOCK charge never waits for
 * the call it interrupted, and once everything is given back the root
 * holds exactly 0 bytes and every memory.stat update.
 */
TEST(a_thread_parked_inside_a_call_while_its_groups_change_keeps_exact_totals)
{
	struct sigaction sa = { .sa_handler = park_handler };
	struct tally_memcg_tree *t;
	struct tally_memcg *root;
	struct hostile h = { 0 };
	struct rng r = rng_seed(9);
	pthread_t worker;
	long i, n = harness_scale(500), parked = 0, mbad = 0;
	double end, hang;

	IN_FRESH_PROCESS(NULL);
	t = util_memcg_tree(NULL, 8 * KB);
	REQUIRE(t);
	root = tally_memcg_root(t);
	h.seed = rng_next(&r);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	REQUIRE(pthread_create(&worker, NULL, hostile_worker, &h) == 0);
	end = harness_now() + 20;
	hang = harness_now() + HARNESS_HANG_S;
	/* On past n rounds until the worker was parked once. */
	for (i = 0; more_rounds(i, n, end) ||
		    (!parked && harness_now() < hang); i++) {
		struct mutation m = { 0 };
		struct tally_memcg *p, *g;
		pthread_t mt;
		double until;
		int ret;

		p = util_memcg_group(root, "p");
		g = p ? util_memcg_group(p, "g") : NULL;
		if (!g)
			break;
		CHECK_EQ_LONG(tally_memcg_set_limit(p, TALLY_MEMCG_MAX,
						    64 * KB), 0);
		/* Half the rounds on a zombie: its work goes to p. */
		if (rng_below(&r, 2))
			CHECK_EQ_LONG(tally_memcg_destroy(g), 0);
		STORE(&h.got, 0);
		STORE(&h.finish, 0);
		STORE(&h.done, 0);
		STORE(&h.g, g);
		STORE(&h.round, i + 1);
		if (!CHECK(wait_for(&h.got, 1, 60)))
			break;
		/* Park the worker inside a call: tries at random times. */
		for (int tries = 0; tries < 20; tries++) {
			long sent = 0;

			nap_us((long)rng_below(&r, 300));
			STORE(&park.state, 0);
			REQUIRE(pthread_kill(worker, SIGUSR1) == 0);
			until = harness_now() + 5;
			while (LOAD(&park.state) == 0 && harness_now() < until)
				sched_yield();
			/* Not delivered yet: the handler will leave at once. */
			__atomic_compare_exchange_n(&park.state, &sent, -2,
						    false, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE);
			if (LOAD(&park.state) == 1)
				break;
		}
		if (LOAD(&park.state) == 1) {
			parked++;
			m = (struct mutation){
				.p = p, .g = g,
				.what = (int)rng_below(&r, 8),
				.max = (long)rng_below(&r, 33) * 4 * KB,
			};
			REQUIRE(pthread_create(&mt, NULL, mutate, &m) == 0);
			/* A mutation that waits for the parked call: go on. */
			until = harness_now() + 0.02;
			while (!LOAD(&m.over) && harness_now() < until)
				nap_us(100);
			STORE(&park.release, 1);
			pthread_join(mt, NULL);
			mbad += m.bad;
			while (LOAD(&park.state) != 2)
				sched_yield();
		}
		STORE(&h.finish, 1);
		if (!CHECK(wait_for(&h.done, 1, 60)))
			break;
		/* -EINVAL: destroyed already. */
		ret = tally_memcg_destroy(g);
		CHECK(ret == 0 || ret == -EINVAL);
		ret = tally_memcg_destroy(p);
		CHECK(ret == 0 || ret == -EINVAL);
		tally_memcg_put(g);
		tally_memcg_put(p);
	}
	STORE(&h.round, -1);
	/* The handler stays: a signal given up on may still arrive. */
	pthread_join(worker, NULL);
	harness_info("%ld rounds, %ld parked inside a call", i, parked);
	CHECK_EQ_LONG(h.bad, 0);
	CHECK_EQ_LONG(mbad, 0);
	CHECK_EQ_LONG(park.handler_bad, 0);
	CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_LONG(stat_hier(root, TALLY_MEMCG_ANON), h.adds);
	tally_memcg_tree_destroy(t);
}

/* ---- 9. one identity, one lifetime ------------------------------------ */

/*
 * A destroyed group's name is free at once, in the memory tree and in its
 * memory.stat tree, while a handle still holds the group; the handle's
 * stat updates go to the live parent, never to the new group of the same
 * name; and a tree destroyed with the handle still held frees the group
 * and its statistics group (the sanitizer builds report a leak or a
 * use-after-free otherwise).
 */
TEST(a_held_destroyed_groups_name_is_free_at_once_and_its_tree_frees_it)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_stats_tree *st = tally_memcg_stats_tree(t);
	struct tally_memcg *a, *old, *fresh, *found = NULL;
	struct tally_stats_group *sg = NULL;
	char path[16];
	long hier, local;

	REQUIRE(t && st);
	a = util_memcg_group(tally_memcg_root(t), "a");
	old = util_memcg_group(a, "b");
	REQUIRE(a && old);
	CHECK_EQ_LONG(tally_memcg_stat_mod(old, TALLY_MEMCG_ANON, 10), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(old), 0);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b", &found), -ENOENT);
	CHECK_EQ_LONG(tally_stats_group_find(st, "a/b", &sg), -ENOENT);
	CHECK_EQ_LONG(tally_memcg_path(old, path, sizeof(path)), -EINVAL);

	fresh = util_memcg_group(a, "b");
	REQUIRE(fresh);
	CHECK_EQ_LONG(tally_memcg_find(t, "a/b", &found), 0);
	CHECK(found == fresh);
	tally_memcg_put(found);
	CHECK_EQ_LONG(tally_memcg_path(fresh, path, sizeof(path)), 3);
	CHECK(!strcmp(path, "a/b"));
	CHECK_EQ_LONG(tally_stats_group_find(st, "a/b", &sg), 0);

	CHECK_EQ_LONG(tally_memcg_stat_mod(old, TALLY_MEMCG_ANON, 5), 0);
	CHECK_EQ_LONG(tally_memcg_stat_mod(fresh, TALLY_MEMCG_ANON, 7), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(fresh, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(local, 7);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(local, 5);
	CHECK_EQ_LONG(hier, 22);
	/* old is still held: the tree's destroy ends it. */
	tally_memcg_tree_destroy(t);
}

/* ---- fork() from a kill callback -------------------------------------- */

static struct {
	struct tally_memcg_task task;
	pid_t child;
	pthread_t detacher;
	int callback_done, detached_early;
} forked_kill;

static void *detach_victim(void *arg)
{
	(void)arg;
	tally_memcg_task_detach(&forked_kill.task);
	if (!LOAD(&forked_kill.callback_done))
		STORE(&forked_kill.detached_early, 1);
	return NULL;
}

/* Forks; the child detaches the victim while the callback goes on. */
static void forking_kill(struct tally_memcg *h, struct tally_memcg_task *v,
			 void *arg)
{
	(void)h;
	(void)v;
	(void)arg;
	fflush(NULL);
	forked_kill.child = fork();
	if (forked_kill.child == 0) {
		alarm(HARNESS_HANG_S);	/* a deadlock fails the test */
		if (pthread_create(&forked_kill.detacher, NULL, detach_victim,
				   NULL))
			_exit(2);
		/* Still using the victim: the detach must wait for us. */
		usleep(50000);
		STORE(&forked_kill.callback_done, 1);
	}
}

/*
 * memcg.h: the kill callback may fork(), and a detach of the victim waits
 * until the callback returns.  In the child the forking thread is still
 * inside the callback: a detach there must wait for it too, not find the
 * kill forgotten by the child's fork handler.
 */
TEST(a_kill_callback_that_forks_keeps_detach_waiting_in_the_child)
{
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL, 0,
					      forking_kill, NULL };
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	struct tally_mm mm;
	int ret;

#ifdef __SANITIZE_THREAD__
	/*
	 * The child starts a thread after a fork made while the parent's
	 * locks were held by its fork handlers: TSan keeps the parent's
	 * view of those locks and reports them held.
	 */
	harness_log("a thread started in a forked child: not under TSan");
	return;
#endif
	IN_FRESH_PROCESS(NULL);
	REQUIRE(tally_mm_init(&mm, tally_domain_system(), 0, NULL) == 0);
	t = util_memcg_tree(NULL, 4 * KB);
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4 * KB) == 0);
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	forked_kill.task.mm = &mm;
	REQUIRE(tally_memcg_task_attach(g, &forked_kill.task) == 0);
	ret = tally_memcg_charge(g, 8 * KB, 0);
	if (forked_kill.child == 0) {
		/* The child, out of the callback: now the detach may end. */
		pthread_join(forked_kill.detacher, NULL);
		CHECK_EQ_LONG(LOAD(&forked_kill.detached_early), 0);
		harness_child_exit();
	}
	CHECK(ret == -ENOMEM || ret >= 0);
	CHECK_EQ_LONG(harness_wait_child(forked_kill.child), 0);
	tally_memcg_task_detach(&forked_kill.task);
	tally_memcg_put(g);
	tally_memcg_tree_destroy(t);
	tally_mm_destroy(&mm);
}

/* ---- a destroyed group's statistics, handle held ---------------------- */

struct stat_writer {
	struct tally_memcg *g;
	unsigned int cpu;
	long n;
};

static void *write_stats(void *arg)
{
	struct stat_writer *w = arg;

	util_pin((int)util_allowed_cpu(w->cpu % util_nr_allowed()));
	for (long i = 0; i < w->n; i++)
		tally_memcg_stat_mod(w->g, TALLY_MEMCG_ANON, 3);
	return NULL;
}

/*
 * memcg.h: a destroyed group's statistics stay in its ancestors'
 * hierarchical memory.stat.  Updates of a child on every CPU, some still
 * per-CPU (never flushed, or in a CPU's hint cache), then its destroy
 * while a handle holds it: a forced read of the parent and of the root
 * gives every update at once, not only after the last put.
 */
TEST(a_destroyed_groups_stats_are_in_its_ancestors_while_a_handle_holds_it)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 4 * KB);
	struct stat_writer w[4];
	pthread_t th[4];
	struct tally_memcg *a, *c;
	long want = 0, hier = -1, local = -1;

	REQUIRE(t);
	a = util_memcg_group(tally_memcg_root(t), "a");
	c = a ? util_memcg_group(a, "c") : NULL;
	REQUIRE(c);
	for (unsigned int i = 0; i < 4; i++) {
		w[i] = (struct stat_writer){ c, i, 1000 + 7 * i };
		want += 3 * w[i].n;
		REQUIRE(pthread_create(&th[i], NULL, write_stats, &w[i]) == 0);
	}
	for (unsigned int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_LONG(tally_memcg_destroy(c), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(hier, want);
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(hier, want);
	/* Updates through the held handle go to the parent now. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(c, TALLY_MEMCG_ANON, 5), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(hier, want + 5);
	tally_memcg_put(c);
	CHECK_EQ_LONG(tally_memcg_stat_read(a, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, &local),
		      0);
	CHECK_EQ_LONG(hier, want + 5);
	tally_memcg_put(a);
	tally_memcg_tree_destroy(t);
}
