// SPDX-License-Identifier: MIT
/*
 * test_rseq.c - the rseq update paths at their edges: a thread whose own
 * registration fails (the process must die rather than mix rseq and
 * atomic updates), updates made before tally's constructor ran, the
 * hint sequence for every hint count against an oracle, and every
 * sequence aborted at its injection points and restarted exactly.
 *
 * Tests that need a fresh process or a given rseq mode run a copy of this
 * binary (harness_rerun()); the ones that need hooks exist only in builds
 * with -DTALLY_INJECT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/inject.h"
#include "util.h"

/* Per-CPU longs for the hint tests: slot 0 gets v, 1..10 the hints. */
#define HINT_SLOTS 11

/*
 * @calls hint sequences of @nr hints (0 to 10) pinned on @cpu, each checked
 * against the slots it updated; then the totals over every CPU.
 */
static void hints_match_oracle(long *slots, unsigned long nr, long calls,
			       unsigned int cpu)
{
	long offs[HINT_SLOTS], total[HINT_SLOTS] = { 0 };
	unsigned long acc, or = 0;
	unsigned int got;

	for (unsigned long i = 0; i < nr; i++)
		offs[i] = (long)((i + 1) * sizeof(long));
	util_pin((int)cpu);
	for (long k = 0; k < calls; k++) {
		acc = tally_percpu_add_hints(slots, offs, nr, 3, slots, k,
					     &got);
		if (!CHECK_EQ_LONG(got, cpu))
			break;
		or = 0;
		for (unsigned long i = 1; i <= nr; i++)
			or |= (unsigned long)tally_percpu_read_cpu(slots + i,
								   cpu);
		if (!CHECK_EQ_ULONG(acc, or))
			break;
	}
	util_pin(-1);
	for (unsigned int c = 0;
	     c < tally_domain_nr_cpus(tally_domain_system()); c++)
		for (unsigned int i = 0; i < HINT_SLOTS; i++)
			total[i] += tally_percpu_read_cpu(slots + i, c);
	/* v exactly once per call; a restart may repeat a hint. */
	CHECK_EQ_LONG(total[0], calls * (calls - 1) / 2);
	for (unsigned long i = 1; i < HINT_SLOTS; i++) {
		if (i <= nr &&
		    !CHECK(total[i] >= 3 * calls && total[i] % 3 == 0))
			harness_log("nr %lu, hint %lu: %ld", nr, i, total[i]);
		if (i > nr)
			CHECK_EQ_LONG(total[i], 0);
	}
}

static void zero_hints_once(void)
{
	long *slots = tally_percpu_alloc(NULL, HINT_SLOTS * sizeof(long), 0);

	if (CHECK(slots))
		hints_match_oracle(slots, 0, 1, util_allowed_cpu(0));
}

TEST(add_hints_of_zero_hints_is_the_exact_add_alone)
{
	char text[256];

	/* In a child: the unfixed sequence loops through 2^64 hints. */
	CHECK_EQ_LONG(util_run_capturing_stderr(zero_hints_once, text,
						sizeof(text)),
		      0);
}

TEST(add_hints_of_0_to_10_hints_match_the_oracle)
{
	for (unsigned long nr = 0; nr < HINT_SLOTS; nr++) {
		long *slots = tally_percpu_alloc(NULL,
						 HINT_SLOTS * sizeof(long), 0);

		REQUIRE(slots);
		hints_match_oracle(slots, nr, harness_scale(2000),
				   util_allowed_cpu((unsigned int)nr));
		tally_percpu_free(NULL, slots);
		if (harness_test_failed()) {
			harness_log("with %lu hints", nr);
			break;
		}
	}
}

#ifdef TALLY_INJECT

/* The environment of a copy in own-registration mode. */
static const char *const own_mode_env[] = {
	"TALLY_RSEQ=", "GLIBC_TUNABLES=glibc.pthread.rseq=0", NULL
};


static int fail_registration(enum tally_inject_point point, void *arg)
{
	return ENOSYS;
}

static void *add_once(void *arg)
{
	tally_percpu_add(arg, 1);
	return NULL;
}

/* A second thread whose own registration fails updates per-CPU data. */
static void second_thread_fails_to_register(void)
{
	long *slots = tally_percpu_alloc(NULL, sizeof(long), 0);
	pthread_t t;

	tally_percpu_add(slots, 1);
	tally_inject_set(TALLY_INJECT_RSEQ_REGISTER, fail_registration, NULL);
	if (pthread_create(&t, NULL, add_once, slots))
		return;
	pthread_join(t, NULL);
	/* Reached only if the update went through some other way. */
	harness_log("the update of the unregistered thread returned");
}

/*
 * Own-registration mode (forced in a copy of this binary) and a thread
 * whose registration fails: it must not fall back to atomic adds on slots
 * that other threads update with plain rseq stores.  It dies, loudly.
 */
TEST(failed_own_registration_aborts_instead_of_mixing_modes)
{
	char text[1024];
	int status;

	if (!harness_is_child()) {
		CHECK_EQ_LONG(RERUN_THIS_TEST(own_mode_env), 0);
		return;
	}
	if (tally_rseq_mode() != TALLY_RSEQ_OWN) {
		harness_log("no own rseq registration here: skipped");
		return;
	}
	status = util_run_capturing_stderr(second_thread_fails_to_register,
					   text, sizeof(text));
	CHECK_EQ_LONG(status, 128 + SIGABRT);
	if (!CHECK(strstr(text, "tally:") && strstr(text, "rseq")))
		harness_log("stderr: \"%s\"", text);
}

#endif /* TALLY_INJECT */

#ifdef TALLY_INJECT

/*
 * The sequences the restart test runs: every operation of
 * tally/percpu_x86_64.h and the statistics tree's update (its hint-cache
 * sequences); the last kinds are hints of nr 0..10.
 */
enum {
	SEQ_ADD, SEQ_ADD_RETURN, SEQ_XCHG,
	SEQ_SLOT_INSTALL, SEQ_SLOT_GIVE, SEQ_SLOT_TAKE, SEQ_SLOT_EVICT,
	SEQ_STATS_MOD, SEQ_HINTS,
	NR_KINDS = SEQ_HINTS + HINT_SLOTS
};

/* A keyed slot, as the slot sequences see each CPU's copy. */
struct key_slot {
	uintptr_t key;
	long value;
};

/* The key of the slot tests: an aligned address; the install's stop flag. */
static long slot_key_object;
#define SLOT_KEY ((const void *)&slot_key_object)
static const int no_stop;

struct restarts {
	long *slots;		/* HINT_SLOTS per-CPU longs, or CPU slots */
	int kind;
	long calls;
	long expected;		/* what slot 0 (for slot kinds, slot 0's
				 * value; for stats, the root) must sum to
				 * (for xchg: the values written) */
	long returned;		/* xchg: the values taken out */
	struct tally_stats_tree *tree;		/* SEQ_STATS_MOD */
	struct tally_stats_group *groups[2];
};

/*
 * One call of a slot sequence, pinned on the CPU whose slot 0 is @s: the
 * slot is set up with plain stores (no other thread uses it), then the
 * sequence must succeed with the exact result.
 */
static bool slot_call(struct restarts *r, struct key_slot *s, long k)
{
	long out = -1;

	s->key = (uintptr_t)SLOT_KEY;
	switch (r->kind) {
	case SEQ_SLOT_INSTALL:
		s->key = 0;
		return CHECK_EQ_LONG(tally_percpu_slot_install_(r->slots, 0,
								NULL,
								SLOT_KEY,
								&no_stop),
				     1) &&
		       CHECK(s->key == (uintptr_t)SLOT_KEY);
	case SEQ_SLOT_GIVE:
		r->expected += k;
		return CHECK_EQ_LONG(tally_percpu_slot_give_(r->slots,
							     SLOT_KEY, k,
							     LONG_MAX),
				     1);
	case SEQ_SLOT_TAKE:
		s->value = k;
		return CHECK_EQ_LONG(tally_percpu_slot_take_(r->slots,
							     SLOT_KEY, k),
				     1) &&
		       CHECK_EQ_LONG(s->value, 0);
	default:
		s->value = k;
		return CHECK_EQ_LONG(tally_percpu_slot_evict_(r->slots, 0,
							      SLOT_KEY, &out),
				     1) &&
		       CHECK_EQ_LONG(out, k) && CHECK_EQ_LONG(s->value, 0);
	}
}

static void run_kind(struct restarts *r)
{
	unsigned int pinned = util_allowed_cpu(0);
	long offs[HINT_SLOTS];
	unsigned int cpu;

	for (unsigned long i = 0; i + 1 < HINT_SLOTS; i++)
		offs[i] = (long)((i + 1) * sizeof(long));
	if (r->kind >= SEQ_SLOT_INSTALL && r->kind <= SEQ_SLOT_EVICT)
		util_pin((int)pinned);
	for (long k = 1; k <= r->calls; k++) {
		switch (r->kind) {
		case SEQ_ADD:
			tally_percpu_add(r->slots, k);
			break;
		case SEQ_ADD_RETURN:
			tally_percpu_add_return(r->slots, k, &cpu);
			break;
		case SEQ_XCHG:
			r->returned += tally_percpu_xchg(r->slots, k);
			break;
		case SEQ_SLOT_INSTALL:
		case SEQ_SLOT_GIVE:
		case SEQ_SLOT_TAKE:
		case SEQ_SLOT_EVICT:
			if (!slot_call(r, tally_percpu_ptr(r->slots, pinned),
				       k))
				k = r->calls;
			continue;
		case SEQ_STATS_MOD:
			/* Runs of 4: each group takes the CPU's cache. */
			CHECK_EQ_LONG(tally_stats_mod(r->groups[(k / 4) % 2],
						      0, k),
				      0);
			break;
		default:
			tally_percpu_add_hints(r->slots, offs,
					       (unsigned long)(r->kind -
							       SEQ_HINTS),
					       1, r->slots, k, &cpu);
		}
		r->expected += k;
	}
	util_pin(-1);
}

/* What the kind's slots sum to over every CPU, plus what xchg took out. */
static long kind_total(const struct restarts *r, unsigned int nr_cpus)
{
	long sum = r->returned, hier = 0;

	if (r->kind == SEQ_STATS_MOD) {
		CHECK_EQ_LONG(tally_stats_read(tally_stats_root(r->tree), 0,
					       TALLY_FLUSH_FORCE, &hier,
					       NULL),
			      0);
		return hier;
	}
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++)
		sum += r->kind >= SEQ_SLOT_INSTALL && r->kind <= SEQ_SLOT_EVICT
			       ? ((struct key_slot *)tally_percpu_ptr(r->slots,
								      cpu))
					 ->value
			       : tally_percpu_read_cpu(r->slots, cpu);
	return sum;
}

static void empty_handler(int sig)
{
}

struct signaller {
	pthread_t target;
	bool stop;
};

static void *signal_fast(void *arg)
{
	struct signaller *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		pthread_kill(s->target, SIGUSR1);
		sched_yield();
	}
	return NULL;
}

/* A tree of one stat and two groups under the root, for SEQ_STATS_MOD. */
static bool stats_setup(struct restarts *r)
{
	static const struct tally_stat_desc schema[] = {
		{ "bytes", TALLY_STAT_STATE },
	};
	struct tally_stats_group *root;

	if (!CHECK_EQ_LONG(tally_stats_tree_create(&r->tree, schema, 1, NULL),
			   0))
		return false;
	root = tally_stats_root(r->tree);
	return CHECK_EQ_LONG(tally_stats_group_create(root, "a",
						      &r->groups[0]),
			     0) &&
	       CHECK_EQ_LONG(tally_stats_group_create(root, "b",
						      &r->groups[1]),
			     0);
}

/*
 * With a delay at the injection points of every critical section and
 * SIGUSR1 sent to this thread as fast as another thread can, every kind
 * of sequence is aborted and restarted, and every result must stay exact:
 * v exactly once (for xchg: each value written is either still in a slot
 * or was returned once; the slot sequences, pinned on one CPU, each
 * succeed with their exact result every time).  Each kind runs until a
 * signal aborted it (a hang at most); whether one did is the scheduler's
 * doing, so the aborts are printed, not checked.  TSan defers
 * asynchronous signals to safe points outside the sequences, and the
 * fallback mode has no sequences: there nothing aborts.
 */
TEST(every_rseq_sequence_stays_exact_when_signals_restart_it)
{
#ifdef __SANITIZE_THREAD__
	const bool can_abort = false;
#else
	const bool can_abort = tally_rseq_mode() != TALLY_RSEQ_FALLBACK;
#endif
	struct signaller s = { .target = pthread_self() };
	struct sigaction sa = { .sa_handler = empty_handler };
	unsigned int nr_cpus = tally_domain_nr_cpus(tally_domain_system());
	pthread_t thread;

	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	tally_inject_rseq_delay = 2000;
	REQUIRE(pthread_create(&thread, NULL, signal_fast, &s) == 0);
	for (int kind = 0; kind < NR_KINDS; kind++) {
		struct restarts r = {
			.slots = tally_percpu_alloc(NULL,
						    sizeof(struct key_slot) *
							    TALLY_PERCPU_SLOTS_,
						    sizeof(struct key_slot)),
			.kind = kind,
			.calls = harness_scale(1000),
		};
		double deadline = harness_now() + HARNESS_HANG_S;
		unsigned long aborts;
		long total;

		if (!CHECK(r.slots) ||
		    (kind == SEQ_STATS_MOD && !stats_setup(&r)))
			break;
		__atomic_store_n(&tally_inject_rseq_aborts, 0,
				 __ATOMIC_RELAXED);
		do
			run_kind(&r);
		while (can_abort && !harness_test_failed() &&
		       harness_now() < deadline &&
		       !__atomic_load_n(&tally_inject_rseq_aborts,
					__ATOMIC_RELAXED));
		aborts = __atomic_load_n(&tally_inject_rseq_aborts,
					 __ATOMIC_RELAXED);
		total = kind_total(&r, nr_cpus);
		CHECK_EQ_LONG(total, r.expected);
		harness_info("sequence kind %d: %lu aborts", kind, aborts);
		tally_stats_tree_destroy(r.tree);
		tally_percpu_free(NULL, r.slots);
		if (harness_test_failed())
			break;
	}
	__atomic_store_n(&s.stop, true, __ATOMIC_RELAXED);
	pthread_join(thread, NULL);
	tally_inject_rseq_delay = 0;
	signal(SIGUSR1, SIG_DFL);
}

#endif /* TALLY_INJECT */
