// SPDX-License-Identifier: MIT
/*
 * test_memcg_schedules.c - the charge protocol (memcg_transfer.c) keeps
 * its promises in every order its steps can take: no false refusal, no
 * false -EBUSY, no usage above a max, exact usage at quiescence.
 *
 * Each scenario runs two or three threads on a small tree whose slots
 * interact (one CPU: the system domain's rseq stocks with the threads
 * pinned to one CPU, or a simulated domain charged on its CPU 0).  In the
 * injection build (-DTALLY_INJECT) a controlled scheduler runs them: at
 * every injection point the protocol passes (a transfer's begin and end,
 * a level's compare-and-swap, an eviction, a drain, a settle between its
 * drain and its wait, a nap of a bounded wait) a scenario thread parks,
 * and the controller lets exactly one parked thread run at a time,
 * choosing it with a seeded generator.  A thread that runs and reaches
 * no point within BLOCKED_NS is taken as blocked (on a lock a parked
 * thread holds, in a system call): the controller lets another one run.
 * Thousands of schedules per scenario; the seed, the number of schedules
 * and of distinct orders are printed as INFO lines.  A failure prints its
 * schedule's number and the order of the points that led to it;
 * TALLY_TEST_SEED=<seed> TALLY_TEST_SCHEDULE=<number> runs it alone again
 * (the same choices; a thread taken as blocked on a loaded machine may
 * make the order differ).
 *
 * Other builds run the same scenarios with the threads free, as often,
 * and check the same outcomes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tally/domain.h>
#include <tally/memcg.h>

#include "harness.h"
#include "util.h"
#include "memcg/memcg_internal.h"
#include "memcg_scene.h"
#include "runtime/inject.h"

#define KB 1024l
#define PARENT_MAX SCENE_PARENT_MAX
/* Groups beside P: with A, one more than the slots of a CPU. */
#define OTHERS SCENE_OTHERS
#define MAX_THREADS 3

/* ---- the scene (memcg_scene.h): every charge on one CPU ----------------- */

static int charge(struct scene *s, struct tally_memcg *g, long n)
{
	if (s->domain)
		return tally_memcg_charge_cpu(g, 0, n, 0);
	return tally_memcg_charge(g, n, 0);
}

static int uncharge(struct scene *s, struct tally_memcg *g, long n)
{
	if (s->domain)
		return tally_memcg_uncharge_cpu(g, 0, n);
	return tally_memcg_uncharge(g, n);
}

static long drained(struct tally_memcg *g)
{
	return util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN);
}

/*
 * @ret of a call that settles and must succeed: 0, or the refusal tally
 * documents when the settle's wait for the transfers in flight ran out
 * (1 s, counted in drain_waits: a thread stopped inside one for that
 * long, which a loaded machine can do to a scenario thread).  The run's
 * exactness then no longer holds: its final check is skipped, and the
 * runs that timed out are printed with the totals.
 */
static void expect_settled(struct scene *s, long ret)
{
	struct tally_memcg_info info;

	if (ret != 0 && tally_memcg_tree_info(s->t, &info) == 0 &&
	    info.drain_waits > 0) {
		s->settle_timed_out = true;
		return;
	}
	CHECK_EQ_LONG(ret, 0);
}

/* P's usage as its counter holds it now, checked against the watch. */
static void check_no_overshoot(struct scene *s)
{
	if (s->watch_max)
		CHECK_LE_LONG(__atomic_load_n(&s->p->usage, __ATOMIC_SEQ_CST),
			      s->watch_max);
}

/*
 * A's slot first, then OTHERS - 1 groups beside P: every slot of the CPU
 * is taken, A's first (slot 0), so that the next refill of another group
 * on that CPU evicts A's slot (a new thread's first victim is slot 0).
 */
static void fill_slots_a_first(struct scene *s)
{
	CHECK_EQ_LONG(charge(s, s->a, 4 * KB), 0);
	for (int i = 0; i < OTHERS - 1; i++)
		CHECK_EQ_LONG(charge(s, s->other[i], 4 * KB), 0);
}

/* ---- scenarios ------------------------------------------------------------ */

struct scenario {
	const char *name;
	/* Run by the main thread, on the scene's CPU, before the threads. */
	void (*setup)(struct scene *s);
	int nr;
	void (*step[MAX_THREADS])(struct scene *s);
	/* After the threads joined, with nothing in flight. */
	void (*check)(struct scene *s);
	/* Schedules (runs), times TALLY_TEST_SCALE. */
	long schedules;
};

/* The refill of the last group beside P: it evicts A's slot. */
static void refill_evicting_a(struct scene *s)
{
	expect_settled(s, charge(s, s->other[OTHERS - 1], 4 * KB));
}

/* What is not charged under P yet: all of it fits once A's slot is back. */
#define FITS (PARENT_MAX - 4 * KB)

static void charge_what_fits_under_p(struct scene *s)
{
	expect_settled(s, charge(s, s->p, FITS));
	check_no_overshoot(s);
}

/* What fits under P beside A's two charges of 4 KiB. */
#define FITS_BESIDE_A (PARENT_MAX - 8 * KB)

static void charge_what_fits_beside_a(struct scene *s)
{
	expect_settled(s, charge(s, s->p, FITS_BESIDE_A));
	check_no_overshoot(s);
}

/* A's second 4 KiB: a refill of A when its slot is gone. */
static void charge_a(struct scene *s)
{
	expect_settled(s, charge(s, s->a, 4 * KB));
	check_no_overshoot(s);
}

static void setup_refusal(struct scene *s)
{
	fill_slots_a_first(s);
	s->watch_max = PARENT_MAX;
}

/* P holds @p, the groups beside it 4 KiB each; nothing else anywhere. */
static void check_exact(struct scene *s, long p)
{
	long beside = 0;

	CHECK_EQ_LONG(drained(s->p), p);
	for (int i = 0; i < OTHERS; i++)
		beside += drained(s->other[i]);
	CHECK_EQ_LONG(beside, OTHERS * 4 * KB);
	CHECK_EQ_LONG(drained(tally_memcg_root(s->t)), p + beside);
}

static void check_refusal(struct scene *s)
{
	check_exact(s, PARENT_MAX);
}

/*
 * (1) A refill evicts A's slot while P is charged what fits only once
 * that slot is back, and A is charged again (a refill of A that may
 * begin while P's refusal settles).
 */
static const struct scenario refill_with_eviction = {
	.name = "refill with eviction",
	.setup = setup_refusal,
	.nr = 3,
	.step = { refill_evicting_a, charge_what_fits_beside_a, charge_a },
	.check = check_refusal,
	.schedules = 4000,
};

/*
 * (2) A's slot holds 124 KiB of a 128 KiB cap; an uncharge of 128 KiB
 * does not fit in it and carries a batch of it back with the bytes,
 * while P's max is set to what is charged before the uncharge.
 */
#define CARRIED (128 * KB)

static void setup_carry(struct scene *s)
{
	CHECK_EQ_LONG(charge(s, s->a, 4 * KB), 0);
	CHECK_EQ_LONG(charge(s, s->a, CARRIED), 0);
}

static void uncharge_carrying_a_batch(struct scene *s)
{
	CHECK_EQ_LONG(uncharge(s, s->a, CARRIED), 0);
}

static void set_p_max_to_the_charged_total(struct scene *s)
{
	expect_settled(s, tally_memcg_set_limit(s->p, TALLY_MEMCG_MAX,
						4 * KB + CARRIED));
}

static void check_carry(struct scene *s)
{
	struct tally_memcg_limits l;

	CHECK_EQ_LONG(drained(s->p), 4 * KB);
	CHECK_EQ_LONG(drained(s->a), 4 * KB);
	CHECK_EQ_LONG(tally_memcg_get_limits(s->p, &l), 0);
	CHECK_EQ_LONG(l.max, 4 * KB + CARRIED);
}

static const struct scenario carry_against_set_max = {
	.name = "uncharge carrying a batch",
	.setup = setup_carry,
	.nr = 2,
	.step = { uncharge_carrying_a_batch, set_p_max_to_the_charged_total },
	.check = check_carry,
	.schedules = 4000,
};

/*
 * (3) A is refilled (its first charge installs its slot), destroyed, and
 * P is charged what fits, all at once.
 */
static void setup_destroy(struct scene *s)
{
	s->watch_max = PARENT_MAX;
}

static void destroy_a(struct scene *s)
{
	CHECK_EQ_LONG(tally_memcg_destroy(s->a), 0);
}

static void check_destroy(struct scene *s)
{
	CHECK_EQ_LONG(drained(s->p), 4 * KB + FITS);
	CHECK_EQ_LONG(drained(tally_memcg_root(s->t)), 4 * KB + FITS);
}

static const struct scenario destroy_against_refill = {
	.name = "destroy",
	.setup = setup_destroy,
	.nr = 3,
	.step = { charge_a, destroy_a, charge_what_fits_under_p },
	.check = check_destroy,
	.schedules = 4000,
};

/* ---- the threads of a run ---------------------------------------------- */

enum { RUNNING, PARKED, DONE };

struct sched_thread {
	pthread_t th;
	int id;
	int state;
	int go;				/* futex: the controller's turn */
	enum tally_inject_point at;	/* where it parked */
	struct scene *s;
	void (*step)(struct scene *s);
	struct run *run;
};

struct run {
	const struct scenario *sc;
	struct scene s;
	struct sched_thread t[MAX_THREADS];
	int started;			/* futex: free runs start together */
	int events;			/* futex: a thread parked or ended */
	bool controlled;
	pid_t pid;
};

static int futex(int *word, int op, int val, long timeout_ns)
{
	struct timespec ts = { timeout_ns / 1000000000l,
			       timeout_ns % 1000000000l };

	return (int)syscall(SYS_futex, word, op, val,
			    timeout_ns ? &ts : NULL, NULL, 0);
}

static void wake(int *word)
{
	futex(word, FUTEX_WAKE_PRIVATE, 1, 0);
}

static void note_event(struct run *r)
{
	__atomic_add_fetch(&r->events, 1, __ATOMIC_SEQ_CST);
	wake(&r->events);
}

/* This thread's place in the run it belongs to; NULL in every other. */
static __thread struct sched_thread *me;

/*
 * The START pseudo point: a thread parks there before its step, so that
 * the first choice is the controller's too.
 */
#define POINT_START TALLY_INJECT_NR_POINTS

static void park(struct sched_thread *t, enum tally_inject_point point)
{
	struct run *r = t->run;

	t->at = point;
	__atomic_store_n(&t->go, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->state, PARKED, __ATOMIC_SEQ_CST);
	note_event(r);
	while (!__atomic_load_n(&t->go, __ATOMIC_ACQUIRE))
		futex(&t->go, FUTEX_WAIT_PRIVATE, 0, 0);
}

static void *scenario_thread(void *arg)
{
	struct sched_thread *t = arg;
	struct run *r = t->run;

	if (!r->s.domain)
		util_pin(r->s.cpu);
	if (r->controlled) {
		park(t, POINT_START);
		me = t;
	} else {
		while (!__atomic_load_n(&r->started, __ATOMIC_ACQUIRE))
			futex(&r->started, FUTEX_WAIT_PRIVATE, 0, 0);
	}
	t->step(&r->s);
	me = NULL;
	__atomic_store_n(&t->state, DONE, __ATOMIC_SEQ_CST);
	note_event(r);
	return NULL;
}

static bool start_threads(struct run *r)
{
	for (int i = 0; i < r->sc->nr; i++) {
		struct sched_thread *t = &r->t[i];

		t->id = i;
		t->run = r;
		t->step = r->sc->step[i];
		t->state = RUNNING;
		if (!CHECK_EQ_LONG(pthread_create(&t->th, NULL, scenario_thread,
						  t), 0)) {
			r->sc = NULL;
			return false;
		}
	}
	return true;
}

/* A scene set up for @sc, its setup made on the scene's CPU. */
static bool run_setup(struct run *r, const struct scenario *sc,
		      bool simulated)
{
	memset(r, 0, sizeof(*r));
	r->sc = sc;
	if (!scene_init(&r->s, simulated))
		return false;
	if (!simulated)
		util_pin(r->s.cpu);
	sc->setup(&r->s);
	if (!simulated)
		util_pin(-1);
	return !harness_test_failed();
}

/* Runs whose settle timed out (expect_settled()), of every scenario. */
static long settle_timeouts;

static void run_finish(struct run *r, int started)
{
	for (int i = 0; i < started; i++)
		pthread_join(r->t[i].th, NULL);
	if (r->s.settle_timed_out)
		settle_timeouts++;
	else if (started == r->sc->nr && !harness_test_failed())
		r->sc->check(&r->s);
	scene_fini(&r->s);
}

#ifdef TALLY_INJECT

/* ---- the controlled scheduler ------------------------------------------ */

/*
 * How long a thread let go may run without reaching a point before the
 * controller takes it as blocked and lets another one go.
 */
#define BLOCKED_NS 300000l
/* Points recorded per schedule; the hash covers them all. */
#define TRACE_MAX 2048

static struct run *current_run;

/* Every point a scenario passes. */
static const struct {
	enum tally_inject_point point;
	const char *name;
} points[] = {
	{ TALLY_INJECT_MEMCG_BEFORE_CAS, "cas" },
	{ TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS, "stock-cas" },
	{ TALLY_INJECT_MEMCG_EVICTED, "evicted" },
	{ TALLY_INJECT_MEMCG_DRAINED, "drained" },
	{ TALLY_INJECT_MEMCG_DRAIN_STOPPED, "drain-stopped" },
	{ TALLY_INJECT_MEMCG_RESOLVED, "resolved" },
	{ TALLY_INJECT_BACKOFF_NAP, "nap" },
	{ TALLY_INJECT_MEMCG_TRANSFER_BEGUN, "begun" },
	{ TALLY_INJECT_MEMCG_TRANSFER_ENDING, "ending" },
	{ TALLY_INJECT_MEMCG_SETTLE_PRESSED, "settle-pressed" },
	{ TALLY_INJECT_MEMCG_REFILLED, "refilled" },
	{ TALLY_INJECT_MEMCG_CARRIED, "carried" },
};

static const char *point_name(unsigned int point)
{
	if (point == POINT_START)
		return "start";
	for (size_t i = 0; i < ARRAY_SIZE(points); i++)
		if (points[i].point == point)
			return points[i].name;
	return "?";
}

/*
 * The hook of every point: a thread of the current run parks there until
 * the controller lets it go.  Any other thread (the controller, the main
 * thread, a fork child's only thread) goes on.
 */
static int sched_hook(enum tally_inject_point point, void *arg)
{
	struct sched_thread *t = me;

	(void)arg;
	if (t && t->run == current_run && getpid() == t->run->pid)
		park(t, point);
	return 0;
}

static void hooks_set(bool on)
{
	for (size_t i = 0; i < ARRAY_SIZE(points); i++)
		tally_inject_set(points[i].point, on ? sched_hook : NULL, NULL);
}

/* The choices of one schedule: thread << 8 | point. */
struct trace {
	unsigned short step[TRACE_MAX];
	long len;
	uint64_t hash;
};

static void trace_add(struct trace *tr, int thread, unsigned int point)
{
	unsigned short v = (unsigned short)(thread << 8 | point);

	if (tr->len < TRACE_MAX)
		tr->step[tr->len] = v;
	tr->len++;
	tr->hash = (tr->hash ^ v) * 0x100000001b3ull;
}

static void trace_log(const struct trace *tr)
{
	char line[160];
	size_t used = 0;

	for (long i = 0; i < tr->len && i < TRACE_MAX; i++) {
		int n = snprintf(line + used, sizeof(line) - used, "%s T%d:%s",
				 used ? "" : "   ", tr->step[i] >> 8,
				 point_name(tr->step[i] & 0xff));

		if (n < 0 || used + (size_t)n >= 76) {
			line[used] = '\0';	/* without this entry */
			harness_log("%s", line);
			used = 0;
			i--;
			continue;
		}
		used += (size_t)n;
	}
	if (used)
		harness_log("%s", line);
	if (tr->len > TRACE_MAX)
		harness_log("    ... %ld more", tr->len - TRACE_MAX);
}

/* Distinct orders: a set of trace hashes (open addressing). */
#define ORDERS_BITS 16

struct orders {
	uint64_t slot[1u << ORDERS_BITS];
	long distinct;
};

static void orders_add(struct orders *o, uint64_t h)
{
	unsigned int mask = (1u << ORDERS_BITS) - 1;

	h |= 1;		/* 0 marks a free slot */
	if (o->distinct >= (long)mask / 2)
		return;	/* full enough: count no more */
	for (unsigned int i = (unsigned int)(h >> 20) & mask;;
	     i = (i + 1) & mask) {
		if (o->slot[i] == h)
			return;
		if (!o->slot[i]) {
			o->slot[i] = h;
			o->distinct++;
			return;
		}
	}
}

static long now_ns(void)
{
	return (long)(harness_now() * 1e9);
}

static int state_of(struct run *r, int i)
{
	return __atomic_load_n(&r->t[i].state, __ATOMIC_SEQ_CST);
}

/* Wait for an event after @seen, at most @ns. */
static void wait_event(struct run *r, int seen, long ns)
{
	if (ns > 0)
		futex(&r->events, FUTEX_WAIT_PRIVATE, seen, ns);
}

/*
 * Run the threads of @r one at a time, choosing with @rng, until every
 * one ended.  False on a hang (HARNESS_HANG_S without an event): every
 * thread is then let go for good.
 */
static bool control(struct run *r, struct rng *rng, struct trace *tr)
{
	long deadline = now_ns() + HARNESS_HANG_S * 1000000000l;
	int runner = -1, nr = r->sc->nr;
	long released = 0;

	for (;;) {
		int seen = __atomic_load_n(&r->events, __ATOMIC_SEQ_CST);
		int parked[MAX_THREADS], nr_parked = 0, done = 0, starting = 0;
		struct sched_thread *t;

		for (int i = 0; i < nr; i++) {
			int st = state_of(r, i);

			done += st == DONE;
			if (st == PARKED)
				parked[nr_parked++] = i;
			/* Before the first choice, every thread at START. */
			starting |= !tr->len && st == RUNNING;
		}
		if (done == nr)
			return true;
		check_no_overshoot(&r->s);
		if (starting ||
		    (runner >= 0 && state_of(r, runner) == RUNNING &&
		     now_ns() - released < BLOCKED_NS)) {
			wait_event(r, seen, runner >= 0 && !starting ?
				   BLOCKED_NS - (now_ns() - released) :
				   BLOCKED_NS);
			continue;
		}
		runner = -1;
		if (!nr_parked) {
			if (now_ns() > deadline)
				break;
			wait_event(r, seen, BLOCKED_NS);
			continue;
		}
		deadline = now_ns() + HARNESS_HANG_S * 1000000000l;
		t = &r->t[parked[rng_below(rng, (uint64_t)nr_parked)]];
		trace_add(tr, t->id, t->at);
		runner = t->id;
		released = now_ns();
		__atomic_store_n(&t->state, RUNNING, __ATOMIC_SEQ_CST);
		__atomic_store_n(&t->go, 1, __ATOMIC_RELEASE);
		wake(&t->go);
	}
	/* A hang: let everyone go, to join them. */
	current_run = NULL;
	for (int i = 0; i < nr; i++) {
		__atomic_store_n(&r->t[i].go, 1, __ATOMIC_RELEASE);
		wake(&r->t[i].go);
	}
	return false;
}

/* One schedule of @sc, chosen by @rng. */
static bool schedule_once(const struct scenario *sc, bool simulated,
			  struct rng *rng, struct trace *tr)
{
	struct run *r = calloc(1, sizeof(*r));
	bool ok;

	if (!CHECK(r))
		return false;
	memset(tr, 0, sizeof(*tr));
	if (!run_setup(r, sc, simulated)) {
		scene_fini(&r->s);
		free(r);
		return false;
	}
	r->controlled = true;
	r->pid = getpid();
	current_run = r;
	if (!start_threads(r)) {
		free(r);
		return false;
	}
	ok = CHECK(control(r, rng, tr));
	current_run = NULL;
	run_finish(r, sc->nr);
	free(r);
	return ok && !harness_test_failed();
}

static void explore(const struct scenario *sc, bool simulated)
{
	static struct orders orders;
	static struct trace tr;
	const char *only = getenv("TALLY_TEST_SCHEDULE");
	long first = 0, n = harness_scale(sc->schedules), i, points_seen = 0;
	double start = harness_now();

	memset(&orders, 0, sizeof(orders));
	if (only) {
		first = strtol(only, NULL, 0);
		n = first + 1;
	}
	hooks_set(true);
	for (i = first; i < n; i++) {
		struct rng rng = rng_seed((uint64_t)i + 1);

		if (!schedule_once(sc, simulated, &rng, &tr)) {
			harness_log("%s (%s domain): schedule %ld failed; "
				    "replay: TALLY_TEST_SEED=%llu "
				    "TALLY_TEST_SCHEDULE=%ld; its order:",
				    sc->name, simulated ? "simulated" : "system",
				    i, (unsigned long long)harness_seed(), i);
			trace_log(&tr);
			i++;
			break;
		}
		points_seen += tr.len;
		orders_add(&orders, tr.hash);
	}
	hooks_set(false);
	harness_info("%s (%s domain): seed %llu, %ld schedules, %ld distinct "
		     "orders, %.1f points each, %.1f s, %ld settle timeouts "
		     "so far",
		     sc->name, simulated ? "simulated" : "system",
		     (unsigned long long)harness_seed(), i - first,
		     orders.distinct, i > first ? (double)points_seen /
						   (double)(i - first) : 0.0,
		     harness_now() - start, settle_timeouts);
}

#else /* !TALLY_INJECT */

static void explore(const struct scenario *sc, bool simulated)
{
	long n = harness_scale(sc->schedules / 2);

	for (long i = 0; i < n && !harness_test_failed(); i++) {
		struct run *r = calloc(1, sizeof(*r));

		REQUIRE(r);
		if (!run_setup(r, sc, simulated) || !start_threads(r)) {
			if (r->sc)
				scene_fini(&r->s);
			free(r);
			return;
		}
		__atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
		futex(&r->started, FUTEX_WAKE_PRIVATE, MAX_THREADS, 0);
		run_finish(r, sc->nr);
		free(r);
	}
	harness_info("%s (%s domain): %ld free runs, %ld settle timeouts so "
		     "far", sc->name, simulated ? "simulated" : "system", n,
		     settle_timeouts);
}

#endif /* TALLY_INJECT */

/* ---- the tests ----------------------------------------------------------- */

/*
 * A charge that fits once the slots are drained succeeds in every order
 * of a refill that evicts a slot of the refusing level's subtree and of a
 * second settle of that level, and no usage goes above the max.
 */
TEST(a_charge_that_fits_is_never_refused_in_any_order_of_an_eviction)
{
	explore(&refill_with_eviction, false);
}

TEST(a_charge_that_fits_is_never_refused_in_any_order_of_an_eviction_on_a_simulated_domain)
{
	explore(&refill_with_eviction, true);
}

/*
 * Setting a max to what is charged succeeds in every order of an
 * uncharge that carries a batch of its slot back to the counters.
 */
TEST(a_max_that_holds_every_charge_is_set_in_any_order_of_a_carried_batch)
{
	explore(&carry_against_set_max, false);
}

TEST(a_max_that_holds_every_charge_is_set_in_any_order_of_a_carried_batch_on_a_simulated_domain)
{
	explore(&carry_against_set_max, true);
}

/*
 * A destroy racing a refill of its group and a charge of the parent
 * returns 0, the charge that fits succeeds, and the usage is exact.
 */
TEST(a_destroy_racing_a_refill_and_a_charge_of_the_parent_is_exact_in_any_order)
{
	explore(&destroy_against_refill, false);
}

TEST(a_destroy_racing_a_refill_and_a_charge_of_the_parent_is_exact_in_any_order_on_a_simulated_domain)
{
	explore(&destroy_against_refill, true);
}
