// SPDX-License-Identifier: MIT
/*
 * test_memcg_oracle.c - memory groups (tally/memcg.h) against exact
 * oracles: the guarantees of the header's "What is exact" list.
 *
 *   sequential   one thread, a seeded random stream of charges, uncharges,
 *                limit changes, NOFAIL charges and destroys across a tree
 *                of three levels near its limits.  A model keeps the exact
 *                usage of every group, so every outcome is predicted: a
 *                charge succeeds if and only if it fits under every max of
 *                its chain; reads are checked against the model (drained
 *                reads equal it, the others' intervals hold it).
 *   concurrent   more threads than CPUs charging a shared tree near its
 *                limits, migrated between CPUs and interrupted by signals
 *                whose handlers charge and uncharge, on the system domain
 *                and on simulated 64- and 384-CPU domains.  Usage is
 *                bounded from below by what threads hold ("committed") and
 *                from above by what they have asked for ("claimed"); a
 *                refusal is reported false only when the claimed bound,
 *                plus one stock refill in flight per thread, stayed under
 *                max for the whole call.  At the end the drained usage
 *                equals what the threads hold, and zero once they gave it
 *                all back.
 *   destroy      groups destroyed while threads charge them: nothing lost.
 *   protection   tally_memcg_protection() against a transcription of the
 *                kernel's documented effective min/low rules, on random
 *                trees at quiescence.
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
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "harness.h"
#include "util.h"

#define KB 1024l
#define MB (1024l * 1024)

static long min_l(long a, long b)
{
	return a < b ? a : b;
}

/* Charge or uncharge on the system domain (@cpu < 0) or a simulated CPU. */
static int charge_on(struct tally_memcg *g, int cpu, long n, unsigned int fl)
{
	if (cpu < 0)
		return tally_memcg_charge(g, n, fl);
	return tally_memcg_charge_cpu(g, (unsigned int)cpu, n, fl);
}

static int uncharge_on(struct tally_memcg *g, int cpu, long n)
{
	if (cpu < 0)
		return tally_memcg_uncharge(g, n);
	return tally_memcg_uncharge_cpu(g, (unsigned int)cpu, n);
}

/* A CPU for the next call: -1 on the system domain, else a random one. */
static int pick_cpu(struct rng *r, unsigned int nr_cpus)
{
	return nr_cpus ? (int)rng_below(r, nr_cpus) : -1;
}

static struct tally_memcg_tree *tree_on(struct tally_domain *d, long batch)
{
	struct tally_memcg_options o = { .domain = d, .batch = batch };
	struct tally_memcg_tree *t = NULL;

	if (!CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), 0))
		return NULL;
	return t;
}

/* ------------------------------------------------------------------ */
/* Sequential exact oracle                                            */
/* ------------------------------------------------------------------ */

/*
 *   root - a (4 MiB) - x (2 MiB) - p (1 MiB)
 *        |           |          \ q (1.5 MiB)
 *        |           \ y (1 MiB)
 *        \ b (3 MiB) - z (2 MiB)
 * Only the leaves p, q, y, z are destroyed (and recreated in their slot),
 * so every group that is a parent stays live.
 */
enum { SEQ_GROUPS = 8, SEQ_ALLOCS = 4096 };

static const int seq_parent[SEQ_GROUPS] = { -1, 0, 1, 2, 2, 1, 0, 6 };
static const long seq_max[SEQ_GROUPS] = {
	TALLY_MEMCG_UNLIMITED, 4 * MB, 2 * MB, MB, 3 * MB / 2, MB, 3 * MB,
	2 * MB,
};
static const bool seq_leaf[SEQ_GROUPS] = { 0, 0, 0, 1, 1, 1, 0, 1 };

struct seq_group {
	struct tally_memcg *g;
	long usage;		/* exact usage of the subtree */
	long max, high;
	int gen;		/* bumped when the slot's group is destroyed */
	bool forced;		/* a NOFAIL charge since the last full drain */
	bool forced_ever;	/* ... since creation: peak may exceed max */
	long max_ever;		/* the largest max since creation */
	long local_max_events;
};

struct seq_alloc {
	struct tally_memcg *h;	/* the handle charged (maybe destroyed since) */
	int slot, gen, cpu;
	long n;
};

struct seq {
	struct tally_memcg_tree *t;
	struct seq_group g[SEQ_GROUPS];
	struct seq_alloc a[SEQ_ALLOCS];
	int nr_allocs;
	unsigned int nr_cpus;
	long refusals, destroyed, created;
	struct rng r;
};

/* The live group that a charge of @slot at generation @gen lands in. */
static int seq_target(const struct seq *s, int slot, int gen)
{
	return s->g[slot].gen == gen ? slot : seq_parent[slot];
}

static void seq_add(struct seq *s, int slot, long n)
{
	for (int i = slot; i >= 0; i = seq_parent[i])
		s->g[i].usage += n;
}

static bool seq_create(struct seq *s, int i)
{
	char name[32];

	snprintf(name, sizeof(name), "g%d.%d", i, s->g[i].gen);
	if (!CHECK_EQ_LONG(tally_memcg_create(s->g[seq_parent[i]].g, name,
					      &s->g[i].g), 0))
		return false;
	s->g[i].usage = 0;
	s->g[i].max = seq_max[i];
	s->g[i].high = TALLY_MEMCG_UNLIMITED;
	s->g[i].forced = s->g[i].forced_ever = false;
	s->g[i].max_ever = seq_max[i];
	s->g[i].local_max_events = 0;
	s->created++;
	return seq_max[i] == TALLY_MEMCG_UNLIMITED ||
	       CHECK_EQ_LONG(tally_memcg_set_limit(s->g[i].g, TALLY_MEMCG_MAX,
						   seq_max[i]), 0);
}

static bool seq_init(struct seq *s, struct tally_domain *d, long batch)
{
	memset(s, 0, sizeof(*s));
	s->nr_cpus = d ? tally_domain_nr_cpus(d) : 0;
	s->t = tree_on(d, batch);
	if (!s->t)
		return false;
	s->g[0].g = tally_memcg_root(s->t);
	s->g[0].max = s->g[0].high = TALLY_MEMCG_UNLIMITED;
	s->g[0].max_ever = TALLY_MEMCG_UNLIMITED;
	for (int i = 1; i < SEQ_GROUPS; i++)
		if (!seq_create(s, i))
			return false;
	return true;
}

/* Every read of every live group against the model. */
static bool seq_check_reads(struct seq *s, long step)
{
	for (int i = 0; i < SEQ_GROUPS; i++) {
		struct seq_group *m = &s->g[i];
		struct tally_memcg_range r;
		long peak;

		for (int mode = TALLY_MEMCG_READ_APPROX;
		     mode <= TALLY_MEMCG_READ_PRECISE; mode++) {
			if (!CHECK_EQ_LONG(tally_memcg_usage(m->g, mode, &r), 0) ||
			    !CHECK_LE_LONG(r.min, m->usage) ||
			    !CHECK_LE_LONG(m->usage, r.max) ||
			    !CHECK_LE_LONG(r.min, r.value) ||
			    !CHECK_LE_LONG(r.value, r.max)) {
				harness_log("step %ld group %d mode %d", step,
					    i, mode);
				return false;
			}
			/* The page counter never goes above max unforced. */
			if (mode == TALLY_MEMCG_READ_APPROX && !m->forced &&
			    !CHECK_LE_LONG(r.value, m->max)) {
				harness_log("step %ld group %d", step, i);
				return false;
			}
		}
		peak = tally_memcg_peak(m->g, false);
		if (!CHECK(peak >= m->usage) ||
		    (!m->forced_ever && !CHECK_LE_LONG(peak, m->max_ever))) {
			harness_log("step %ld group %d peak %ld", step, i, peak);
			return false;
		}
	}
	/* Drained, every read is exact (the root drains everyone). */
	for (int i = SEQ_GROUPS - 1; i >= 0; i--) {
		long v = util_memcg_usage(s->g[i].g, TALLY_MEMCG_READ_DRAIN);

		if (!CHECK_EQ_LONG(v, s->g[i].usage)) {
			harness_log("step %ld group %d drained", step, i);
			return false;
		}
		if (i == 0)
			for (int j = 0; j < SEQ_GROUPS; j++)
				s->g[j].forced = s->g[j].usage > s->g[j].max;
	}
	return true;
}

/*
 * Does @n fit under every max of @slot's chain?  1 if it does, 0 if not,
 * -1 if it only exceeds levels that a NOFAIL charge pushed over max since
 * the last drain: their stocks were charged before and may serve it (the
 * exact usage then grows towards the page counter, which stays put).
 */
static int seq_fits(const struct seq *s, int slot, long n)
{
	int fits = 1;

	for (int i = slot; i >= 0; i = seq_parent[i]) {
		if (s->g[i].usage + n <= s->g[i].max)
			continue;
		if (!s->g[i].forced)
			return 0;
		fits = -1;
	}
	return fits;
}

static long seq_approx(const struct seq *s, int i)
{
	struct tally_memcg_range r = { .value = LONG_MIN };

	CHECK_EQ_LONG(tally_memcg_usage(s->g[i].g, TALLY_MEMCG_READ_APPROX,
					&r), 0);
	return r.value;
}

static bool seq_bigger_than_a_max(const struct seq *s, int slot, long n)
{
	for (int i = slot; i >= 0; i = seq_parent[i])
		if (n > s->g[i].max)
			return true;
	return false;
}

/* Some level of the chain is above high in its page counter. */
static bool seq_some_level_above_high(const struct seq *s, int slot)
{
	for (int i = slot; i >= 0; i = seq_parent[i]) {
		struct tally_memcg_range r;

		if (tally_memcg_usage(s->g[i].g, TALLY_MEMCG_READ_APPROX, &r) ==
		    0 && r.value > s->g[i].high)
			return true;
	}
	return false;
}

static void seq_reread_max_events(struct seq *s)
{
	for (int i = 0; i < SEQ_GROUPS; i++)
		s->g[i].local_max_events = util_memcg_event(
			s->g[i].g, TALLY_MEMCG_EVENT_MAX, true);
}

static bool seq_charge(struct seq *s, long step)
{
	int slot = 1 + (int)rng_below(&s->r, SEQ_GROUPS - 1);
	int cpu = pick_cpu(&s->r, s->nr_cpus);
	unsigned int flags = 0;
	long n, before[SEQ_GROUPS];
	int ret, fits;

	if (rng_below(&s->r, 50) == 0)
		slot = 0;
	switch (rng_below(&s->r, 8)) {
	case 0:
		n = 1 + (long)rng_below(&s->r, 512 * KB);
		break;
	case 1:
		n = 1 + (long)rng_below(&s->r, 64);
		break;
	default:
		n = 1 + (long)rng_below(&s->r, 32 * KB);
	}
	if (rng_below(&s->r, 40) == 0)
		flags |= TALLY_MEMCG_NOFAIL;
	if (rng_below(&s->r, 4) == 0)
		flags |= TALLY_MEMCG_NORECLAIM;
	if (s->nr_allocs == SEQ_ALLOCS)
		return true;
	fits = seq_fits(s, slot, n);
	for (int i = slot; i >= 0; i = seq_parent[i])
		before[i] = seq_approx(s, i);
	ret = charge_on(s->g[slot].g, cpu, n, flags);
	if (fits < 0 && !(flags & TALLY_MEMCG_NOFAIL)) {
		if (ret == -ENOMEM) {
			s->refusals++;
			seq_reread_max_events(s);
			return true;
		}
		/* Served by a stock: no page counter above max went up. */
		for (int i = slot; i >= 0; i = seq_parent[i]) {
			long now = seq_approx(s, i);

			if (!CHECK(now <= s->g[i].max || now <= before[i])) {
				harness_log("group %d page counter %ld -> %ld",
					    i, before[i], now);
				goto fail;
			}
		}
	}
	if ((flags & TALLY_MEMCG_NOFAIL) && seq_bigger_than_a_max(s, slot, n)) {
		if (!CHECK_EQ_LONG(ret, -E2BIG))
			goto fail;
		/* Whether it counts a max event is not said: re-read. */
		seq_reread_max_events(s);
		return true;
	}
	if (!(flags & TALLY_MEMCG_NOFAIL) && !fits) {
		long events[SEQ_GROUPS], bumped = 0;

		if (!CHECK_EQ_LONG(ret, -ENOMEM))
			goto fail;
		s->refusals++;
		/* One max event, on a level of the chain that is full. */
		for (int i = 0; i < SEQ_GROUPS; i++) {
			events[i] = s->g[i].local_max_events;
			s->g[i].local_max_events = util_memcg_event(
				s->g[i].g, TALLY_MEMCG_EVENT_MAX, true);
		}
		for (int i = 0; i < SEQ_GROUPS; i++) {
			long d = s->g[i].local_max_events - events[i];

			if (!d)
				continue;
			bumped += d;
			if (!CHECK(s->g[i].usage + n > s->g[i].max))
				harness_log("max event on group %d, not full",
					    i);
		}
		if (!CHECK_EQ_LONG(bumped, 1))
			goto fail;
		return true;
	}
	/* It fits (or is forced): it must succeed. */
	if (!CHECK(ret == 0 || ret == TALLY_MEMCG_OVER_HIGH))
		goto fail;
	if (ret == TALLY_MEMCG_OVER_HIGH &&
	    !CHECK(seq_some_level_above_high(s, slot)))
		goto fail;
	seq_add(s, slot, n);
	if (flags & TALLY_MEMCG_NOFAIL)
		for (int i = slot; i >= 0; i = seq_parent[i])
			s->g[i].forced = s->g[i].forced_ever = true;
	s->a[s->nr_allocs++] = (struct seq_alloc){
		s->g[slot].g, slot, s->g[slot].gen, cpu, n,
	};
	return true;
fail:
	harness_log("step %ld: charge of %ld to group %d (flags %#x cpu %d) "
		    "returned %d", step, n, slot, flags, cpu, ret);
	for (int i = slot; i >= 0; i = seq_parent[i])
		harness_log("  group %d usage %ld max %ld%s", i, s->g[i].usage,
			    s->g[i].max, s->g[i].forced ?
			    " (NOFAIL since the last drain)" : "");
	return false;
}

static bool seq_uncharge(struct seq *s, long step, int k)
{
	struct seq_alloc a = s->a[k];
	int cpu = pick_cpu(&s->r, s->nr_cpus);
	int ret = uncharge_on(a.h, cpu, a.n);

	if (!CHECK_EQ_LONG(ret, 0)) {
		harness_log("step %ld: uncharge of %ld from group %d gen %d",
			    step, a.n, a.slot, a.gen);
		return false;
	}
	seq_add(s, seq_target(s, a.slot, a.gen), -a.n);
	s->a[k] = s->a[--s->nr_allocs];
	return true;
}

static bool seq_set_max(struct seq *s, long step)
{
	int i = 1 + (int)rng_below(&s->r, SEQ_GROUPS - 1);
	long usage = s->g[i].usage;
	long v = usage + (long)rng_below(&s->r, MB) - 256 * KB;
	int ret;

	if (rng_below(&s->r, 8) == 0)
		v = usage;	/* exactly at the usage: accepted */
	if (v < 0)
		v = 0;
	ret = tally_memcg_set_limit(s->g[i].g, TALLY_MEMCG_MAX, v);
	if (!CHECK_EQ_LONG(ret, v < usage ? -EBUSY : 0)) {
		harness_log("step %ld: max %ld of group %d with usage %ld",
			    step, v, i, usage);
		return false;
	}
	if (!ret)
		s->g[i].max = v;
	if (!ret && v > s->g[i].max_ever)
		s->g[i].max_ever = v;
	return true;
}

static bool seq_set_high(struct seq *s)
{
	int i = 1 + (int)rng_below(&s->r, SEQ_GROUPS - 1);
	long v = rng_below(&s->r, 4) ? s->g[i].usage +
		 (long)rng_below(&s->r, MB) - 512 * KB :
		 TALLY_MEMCG_UNLIMITED;

	if (v < 0)
		v = 0;
	if (!CHECK_EQ_LONG(tally_memcg_set_limit(s->g[i].g, TALLY_MEMCG_HIGH,
						 v), 0))
		return false;
	s->g[i].high = v;
	return true;
}

/*
 * Destroy a leaf: its ancestors' usage is unchanged, it reads 0, its
 * charges belong to its parent; a new group takes its slot.
 */
static bool seq_destroy(struct seq *s, long step)
{
	int i = 3 + (int)rng_below(&s->r, SEQ_GROUPS - 3);
	struct tally_memcg *old;
	long before[SEQ_GROUPS];

	while (!seq_leaf[i])
		i = 3 + (int)rng_below(&s->r, SEQ_GROUPS - 3);
	old = s->g[i].g;
	for (int j = 0; j < SEQ_GROUPS; j++)
		before[j] = util_memcg_usage(s->g[j].g, TALLY_MEMCG_READ_DRAIN);
	if (!CHECK_EQ_LONG(tally_memcg_destroy(old), 0))
		return false;
	s->destroyed++;
	for (int j = seq_parent[i]; j >= 0; j = seq_parent[j])
		if (!CHECK_EQ_LONG(util_memcg_usage(s->g[j].g,
						    TALLY_MEMCG_READ_DRAIN),
				   before[j])) {
			harness_log("step %ld: destroy of %d moved group %d",
				    step, i, j);
			return false;
		}
	if (!CHECK_EQ_LONG(util_memcg_usage(old, TALLY_MEMCG_READ_DRAIN), 0))
		return false;
	/* Its local max events went to the parent. */
	s->g[seq_parent[i]].local_max_events += s->g[i].local_max_events;
	if (!CHECK_EQ_LONG(util_memcg_event(s->g[seq_parent[i]].g,
					    TALLY_MEMCG_EVENT_MAX, true),
			   s->g[seq_parent[i]].local_max_events))
		return false;
	s->g[i].gen++;
	return seq_create(s, i);
}

static void run_sequential(struct tally_domain *d, long batch, uint64_t stream)
{
	struct seq *s = calloc(1, sizeof(*s));
	long steps = harness_scale(60000);
	struct tally_memcg_info info;
	long hier[TALLY_MEMCG_NR_EVENTS], local[TALLY_MEMCG_NR_EVENTS];
	long sum_local[TALLY_MEMCG_NR_EVENTS] = { 0 };

	REQUIRE(s);
	if (!seq_init(s, d, batch))
		goto out;
	s->r = rng_seed(stream);
	for (long step = 0; step < steps; step++) {
		uint64_t op = rng_below(&s->r, 1000);
		bool ok;

		if (op < 540)
			ok = seq_charge(s, step);
		else if (op < 975)
			ok = !s->nr_allocs ||
			     seq_uncharge(s, step, (int)rng_below(
						  &s->r, (uint64_t)s->nr_allocs));
		else if (op < 985)
			ok = seq_set_max(s, step);
		else if (op < 995)
			ok = seq_set_high(s);
		else
			ok = seq_destroy(s, step);
		if (ok && (step % 97 == 0 || step == steps - 1))
			ok = seq_check_reads(s, step);
		if (!ok) {
			harness_log("batch %ld, %u simulated CPUs", batch,
				    s->nr_cpus);
			goto out;
		}
	}
	/* Zero drift: give everything back, every usage is 0. */
	while (s->nr_allocs)
		if (!seq_uncharge(s, steps, s->nr_allocs - 1))
			goto out;
	for (int i = 0; i < SEQ_GROUPS; i++)
		CHECK_EQ_LONG(s->g[i].usage, 0);
	seq_check_reads(s, steps);
	REQUIRE(tally_memcg_tree_info(s->t, &info) == 0);
	CHECK_EQ_ULONG(info.refusals, s->refusals);
	CHECK_EQ_ULONG(info.groups, SEQ_GROUPS);
	CHECK_EQ_ULONG(info.zombies, s->destroyed);
	CHECK(info.drain_waits <= info.refusals);
	harness_info("%ld steps: %ld refusals, %ld groups destroyed", steps,
		     s->refusals, s->destroyed);
	/* memory.events of the root: the sum of every live group's local. */
	for (int i = 0; i < SEQ_GROUPS; i++) {
		REQUIRE(tally_memcg_events(s->g[i].g, NULL, local) == 0);
		for (int e = 0; e < TALLY_MEMCG_NR_EVENTS; e++)
			sum_local[e] += local[e];
	}
	REQUIRE(tally_memcg_events(s->g[0].g, hier, NULL) == 0);
	for (int e = 0; e < TALLY_MEMCG_NR_EVENTS; e++)
		CHECK_EQ_LONG(hier[e], sum_local[e]);
	CHECK_EQ_LONG(hier[TALLY_MEMCG_EVENT_MAX], s->refusals);
out:
	if (s->t)
		tally_memcg_tree_destroy(s->t);
	free(s);
}

TEST(sequential_stream_outcomes_and_reads_equal_an_exact_model_default_batch)
{
	run_sequential(NULL, 0, 0);
}

TEST(sequential_stream_outcomes_and_reads_equal_an_exact_model_small_batch)
{
	run_sequential(NULL, 4096, 1);
}

TEST(sequential_stream_outcomes_and_reads_equal_an_exact_model_64_cpus)
{
	struct tally_domain *d = util_domain(64);

	run_sequential(d, 0, 2);
	tally_domain_destroy(d);
}

TEST(sequential_stream_outcomes_and_reads_equal_an_exact_model_384_cpus)
{
	struct tally_domain *d = util_domain(384);

	run_sequential(d, 8192, 3);
	tally_domain_destroy(d);
}

/* ------------------------------------------------------------------ */
/* Concurrent oracle                                                  */
/* ------------------------------------------------------------------ */

/*
 *   root - A (2 MiB) - A1 (1 MiB)
 *        |           \ A2 (1 MiB)
 *        |- B (1.5 MiB) - B1 (1 MiB)
 *        \ H (no limit): the signal handlers' group
 */
enum { CON_GROUPS = 7, CON_H = 6, CON_THREADS = 8, CON_ALLOCS = 192 };

static const int con_parent[CON_GROUPS] = { -1, 0, 1, 1, 0, 4, 0 };
static const long con_max[CON_GROUPS] = {
	TALLY_MEMCG_UNLIMITED, 2 * MB, MB, MB, 3 * MB / 2, MB,
	TALLY_MEMCG_UNLIMITED,
};
/* What the main thread charges to H before the handlers run. */
static const long con_reserve = MB;

/*
 * claim: the epoch (high 32 bits) counts the claims that left the
 * claimed bytes (low 32 bits) above the group's threshold; both change in
 * one compare-and-swap, so a refusal can tell whether the bound crossed
 * the threshold at any time during its call.
 */
struct con_group {
	struct tally_memcg *g;
	long threshold;		/* max - the refills possibly in flight */
	unsigned long claim;
	long committed;		/* held by threads: a lower bound of usage */
};

struct con_alloc {
	int slot;
	long n;
};

struct con_run;

struct con_worker {
	struct con_run *run;
	pthread_t th;
	struct con_alloc a[CON_ALLOCS];
	int nr;
	long refusals, ops;
	uint64_t stream;
};

struct con_run {
	struct tally_memcg_tree *t;
	struct con_group g[CON_GROUPS];
	struct con_worker w[CON_THREADS];
	unsigned int nr_cpus;
	int stop, stop_signals;
	long false_refusals, over_max, bad_returns;
	unsigned long handled, handler_failed;
	/*
	 * The toggled max of CON_TOGGLED: (generation << 32) | KiB, the max
	 * in force since its set_limit() returned, published before a raise
	 * and after a lowering.
	 */
	unsigned long bound;
	long lowered, busy, false_busy;
};


#define CLAIM_MASK 0xffffffffUL

/* Claim @n for the chain of @slot; the claims after it go to @c, @e. */
static void con_claim(struct con_run *run, int slot, long n,
		      unsigned long *c, unsigned long *e)
{
	for (int i = slot; i > 0; i = con_parent[i]) {
		struct con_group *g = &run->g[i];
		unsigned long old = __atomic_load_n(&g->claim, __ATOMIC_SEQ_CST);
		unsigned long new;

		do {
			new = old + (unsigned long)n;
			if ((long)(new & CLAIM_MASK) > g->threshold)
				new += 1ul << 32;
		} while (!__atomic_compare_exchange_n(&g->claim, &old, new,
						      false, __ATOMIC_SEQ_CST,
						      __ATOMIC_SEQ_CST));
		c[i] = new & CLAIM_MASK;
		e[i] = new >> 32;
	}
}

static void con_unclaim(struct con_run *run, int slot, long n)
{
	for (int i = slot; i > 0; i = con_parent[i])
		__atomic_sub_fetch(&run->g[i].claim, (unsigned long)n,
				   __ATOMIC_SEQ_CST);
}

static void con_commit(struct con_run *run, int slot, long n)
{
	for (int i = slot; i > 0; i = con_parent[i]) {
		long v = __atomic_add_fetch(&run->g[i].committed, n,
					    __ATOMIC_SEQ_CST);

		if (n > 0 && v > con_max[i])
			__atomic_add_fetch(&run->over_max, 1, __ATOMIC_RELAXED);
	}
}

/*
 * A refusal is false for sure when, at every level of the chain, the
 * claimed bound was under the threshold at the claim and never crossed it
 * until now.
 */
static bool con_refusal_is_false(struct con_run *run, int slot,
				 const unsigned long *c,
				 const unsigned long *e)
{
	for (int i = slot; i > 0; i = con_parent[i]) {
		unsigned long now = __atomic_load_n(&run->g[i].claim,
						    __ATOMIC_SEQ_CST);

		if ((long)c[i] > run->g[i].threshold || (now >> 32) != e[i])
			return false;
	}
	return true;
}

static bool con_stopped(const int *stop)
{
	return __atomic_load_n(stop, __ATOMIC_RELAXED) != 0;
}

static void con_charge(struct con_worker *w, struct rng *r)
{
	struct con_run *run = w->run;
	static const int slots[] = { 2, 3, 5, 1, 4, 2, 3, 5 };
	int slot = slots[rng_below(r, ARRAY_SIZE(slots))];
	int cpu = pick_cpu(r, run->nr_cpus);
	long n = rng_below(r, 16) ? 1 + (long)rng_below(r, 16 * KB) :
		 1 + (long)rng_below(r, 128 * KB);
	unsigned int flags = rng_below(r, 4) ? 0 : TALLY_MEMCG_NORECLAIM;
	unsigned long c[CON_GROUPS], e[CON_GROUPS];
	int ret;

	con_claim(run, slot, n, c, e);
	ret = charge_on(run->g[slot].g, cpu, n, flags);
	if (ret == 0) {
		con_commit(run, slot, n);
		w->a[w->nr++] = (struct con_alloc){ slot, n };
		return;
	}
	if (ret == -ENOMEM) {
		w->refusals++;
		if (con_refusal_is_false(run, slot, c, e) &&
		    __atomic_add_fetch(&run->false_refusals, 1,
				       __ATOMIC_RELAXED) <= 5) {
			harness_log("false refusal: %ld bytes to group %d", n,
				    slot);
			for (int i = slot; i > 0; i = con_parent[i])
				harness_log("  group %d: claimed %lu <= %ld "
					    "(max %ld)", i, c[i],
					    run->g[i].threshold, con_max[i]);
		}
	} else {
		__atomic_add_fetch(&run->bad_returns, 1, __ATOMIC_RELAXED);
	}
	con_unclaim(run, slot, n);
}

static void con_uncharge(struct con_worker *w, int k, int cpu)
{
	struct con_alloc a = w->a[k];

	con_commit(w->run, a.slot, -a.n);
	if (uncharge_on(w->run->g[a.slot].g, cpu, a.n))
		__atomic_add_fetch(&w->run->bad_returns, 1, __ATOMIC_RELAXED);
	con_unclaim(w->run, a.slot, a.n);
	w->a[k] = w->a[--w->nr];
}

static void *con_worker_main(void *arg)
{
	struct con_worker *w = arg;
	struct con_run *run = w->run;
	struct rng r = rng_seed(w->stream);

	while (!con_stopped(&run->stop)) {
		if (!run->nr_cpus && w->ops % 64 == 0)
			util_pin_random(&r);
		if (w->nr < CON_ALLOCS && (!w->nr || rng_below(&r, 100) < 55))
			con_charge(w, &r);
		else
			con_uncharge(w, (int)rng_below(&r, (uint64_t)w->nr),
				     pick_cpu(&r, run->nr_cpus));
		w->ops++;
	}
	if (!run->nr_cpus)
		util_pin(-1);
	return NULL;
}

static struct con_run *con_signal_run;

/*
 * Give back some of H's reserve and take it again: the uncharge is
 * async-signal-safe, and H's chain has no max, so the charge never takes
 * the refusal path's locks (it is served by the stock the uncharge just
 * filled unless the thread migrated in between).
 */
static void con_on_signal(int sig)
{
	struct con_run *run = __atomic_load_n(&con_signal_run,
					      __ATOMIC_ACQUIRE);
	int saved_errno = errno;
	unsigned long k = __atomic_add_fetch(&run->handled, 1,
					     __ATOMIC_RELAXED);
	long n = 1 + (long)(k * 7919 % 2048);
	int cpu = run->nr_cpus ? (int)(k % run->nr_cpus) : -1;

	(void)sig;
	if (uncharge_on(run->g[CON_H].g, cpu, n) ||
	    charge_on(run->g[CON_H].g, cpu, n, 0))
		__atomic_add_fetch(&run->handler_failed, 1, __ATOMIC_RELAXED);
	errno = saved_errno;
}

static void *con_signaller_main(void *arg)
{
	struct con_run *run = arg;
	const struct timespec pause = { 0, 50000 };
	struct rng r = rng_seed(1000);

	while (!con_stopped(&run->stop_signals)) {
		pthread_kill(run->w[rng_below(&r, CON_THREADS)].th, SIGUSR1);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* A1's max goes between con_max[] and this, if the run toggles it. */
enum { CON_TOGGLED = 2 };
static const long con_toggled_low = 768 * KB;

static void con_publish_bound(struct con_run *run, long max)
{
	unsigned long old = __atomic_load_n(&run->bound, __ATOMIC_SEQ_CST);

	__atomic_store_n(&run->bound, ((old >> 32) + 1) << 32 |
			 (unsigned long)(max / KB), __ATOMIC_SEQ_CST);
}

/*
 * While A1's max is the lowered one (only this thread changes it), its
 * page counter, stocks and refills included, stays under it.
 */
static void con_watch_lowered(struct con_run *run)
{
	double end = harness_now() + 200e-6;

	while (harness_now() < end) {
		struct tally_memcg_range r;

		if (tally_memcg_usage(run->g[CON_TOGGLED].g,
				      TALLY_MEMCG_READ_APPROX, &r) == 0 &&
		    r.value > con_toggled_low &&
		    __atomic_add_fetch(&run->over_max, 1,
				       __ATOMIC_RELAXED) <= 5)
			harness_log("A1's page counter %ld over the max %ld "
				    "set before", r.value, con_toggled_low);
	}
}

/*
 * Lower and raise A1's max while threads charge it.  Lowering drains,
 * then refuses (-EBUSY) a max below the exact usage: false for sure when
 * the claimed bound stayed under the threshold for the whole call.
 */
static void *con_toggler_main(void *arg)
{
	struct con_run *run = arg;
	struct con_group *g = &run->g[CON_TOGGLED];
	const struct timespec pause = { 0, 200000 };

	while (!con_stopped(&run->stop)) {
		unsigned long before;
		int ret;

		con_publish_bound(run, con_max[CON_TOGGLED]);
		if (tally_memcg_set_limit(g->g, TALLY_MEMCG_MAX,
					  con_max[CON_TOGGLED]))
			__atomic_add_fetch(&run->bad_returns, 1,
					   __ATOMIC_RELAXED);
		nanosleep(&pause, NULL);
		before = __atomic_load_n(&g->claim, __ATOMIC_SEQ_CST);
		ret = tally_memcg_set_limit(g->g, TALLY_MEMCG_MAX,
					    con_toggled_low);
		if (!ret) {
			con_publish_bound(run, con_toggled_low);
			__atomic_add_fetch(&run->lowered, 1, __ATOMIC_RELAXED);
			con_watch_lowered(run);
		} else if (ret == -EBUSY) {
			__atomic_add_fetch(&run->busy, 1, __ATOMIC_RELAXED);
			if ((long)(before & CLAIM_MASK) <= g->threshold &&
			    __atomic_load_n(&g->claim, __ATOMIC_SEQ_CST) >> 32 ==
			    before >> 32 && ++run->false_busy <= 5)
				harness_log("false -EBUSY: claimed %lu <= %ld",
					    before & CLAIM_MASK, g->threshold);
		} else {
			__atomic_add_fetch(&run->bad_returns, 1,
					   __ATOMIC_RELAXED);
		}
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* What threads hold of A1 is under the max in force. */
static void con_check_toggled(struct con_run *run)
{
	unsigned long b1 = __atomic_load_n(&run->bound, __ATOMIC_SEQ_CST);
	long committed = __atomic_load_n(&run->g[CON_TOGGLED].committed,
					 __ATOMIC_SEQ_CST);
	unsigned long b2 = __atomic_load_n(&run->bound, __ATOMIC_SEQ_CST);
	long bound = (long)(b1 & CLAIM_MASK) * KB;

	if (b1 == b2 && b1 && committed > bound &&
	    __atomic_add_fetch(&run->over_max, 1, __ATOMIC_RELAXED) <= 5)
		harness_log("A1 holds %ld over its max %ld", committed, bound);
}

/* Usage is never above max, sampled with every read. */
static void *con_checker_main(void *arg)
{
	struct con_run *run = arg;
	const struct timespec pause = { 0, 500000 };

	for (unsigned long round = 0; !con_stopped(&run->stop); round++) {
		for (int i = 1; i < CON_GROUPS; i++) {
			struct tally_memcg_range rp, rd;
			long committed = __atomic_load_n(&run->g[i].committed,
							 __ATOMIC_SEQ_CST);

			rd.value = 0;
			if (tally_memcg_usage(run->g[i].g,
					      TALLY_MEMCG_READ_PRECISE, &rp) ||
			    (round % 8 == 0 &&
			     tally_memcg_usage(run->g[i].g,
					       TALLY_MEMCG_READ_DRAIN, &rd)))
				__atomic_add_fetch(&run->bad_returns, 1,
						   __ATOMIC_RELAXED);
			if (committed > con_max[i] || rp.value > con_max[i] ||
			    rd.value > con_max[i] ||
			    tally_memcg_peak(run->g[i].g, false) > con_max[i]) {
				if (__atomic_add_fetch(&run->over_max, 1,
						       __ATOMIC_RELAXED) <= 5)
					harness_log("group %d over max %ld: "
						    "committed %ld precise %ld "
						    "drained %ld", i,
						    con_max[i], committed,
						    rp.value, rd.value);
			}
		}
		con_check_toggled(run);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/*
 * Has the run done what its checks below need: signals handled, charges
 * refused and refilled, and, with @toggle, lowerings that held and
 * refused?  However long a loaded machine takes, up to a hang.
 */
static bool con_progressed(struct con_run *run, bool toggle)
{
	struct tally_memcg_info info;

	if (tally_memcg_tree_info(run->t, &info))
		return true;	/* the checks after the run say what failed */
	return __atomic_load_n(&run->handled, __ATOMIC_RELAXED) > 0 &&
	       info.refusals > 0 && info.refills >= 1 &&
	       (!toggle ||
		(__atomic_load_n(&run->lowered, __ATOMIC_RELAXED) > 0 &&
		 __atomic_load_n(&run->busy, __ATOMIC_RELAXED) > 0));
}

static void run_concurrent(unsigned int nr_cpus, long batch, uint64_t stream,
			   bool toggle)
{
	struct con_run *run = calloc(1, sizeof(*run));
	struct tally_domain *d = nr_cpus ? util_domain(nr_cpus) : NULL;
	struct sigaction sa, old_sa;
	pthread_t signaller, checker, toggler;
	long held[CON_GROUPS] = { 0 }, refusals = 0, ops = 0;
	struct tally_memcg_info info;
	long slack = CON_THREADS * 2 * batch;

	REQUIRE(run);
	run->nr_cpus = nr_cpus;
	run->t = tree_on(d, batch);
	if (!run->t)
		goto out;
	run->g[0].g = tally_memcg_root(run->t);
	for (int i = 1; i < CON_GROUPS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		if (!CHECK_EQ_LONG(tally_memcg_create(run->g[con_parent[i]].g,
						      name, &run->g[i].g), 0) ||
		    (con_max[i] != TALLY_MEMCG_UNLIMITED &&
		     !CHECK_EQ_LONG(tally_memcg_set_limit(run->g[i].g,
							  TALLY_MEMCG_MAX,
							  con_max[i]), 0)))
			goto out;
		run->g[i].threshold = con_max[i] - slack;
	}
	if (toggle)
		run->g[CON_TOGGLED].threshold = con_toggled_low - slack;
	REQUIRE(charge_on(run->g[CON_H].g, pick_cpu(&(struct rng){ 1 },
						    nr_cpus),
			  con_reserve, 0) == 0);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = con_on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	__atomic_store_n(&con_signal_run, run, __ATOMIC_RELEASE);
	REQUIRE(sigaction(SIGUSR1, &sa, &old_sa) == 0);
	alarm(2 * HARNESS_HANG_S + 60);	/* a hang fails the run */
	for (int i = 0; i < CON_THREADS; i++) {
		run->w[i].run = run;
		run->w[i].stream = stream * 100 + (uint64_t)i;
		REQUIRE(pthread_create(&run->w[i].th, NULL, con_worker_main,
				       &run->w[i]) == 0);
	}
	REQUIRE(pthread_create(&signaller, NULL, con_signaller_main, run) == 0);
	REQUIRE(pthread_create(&checker, NULL, con_checker_main, run) == 0);
	if (toggle)
		REQUIRE(pthread_create(&toggler, NULL, con_toggler_main, run)
			== 0);
	usleep((useconds_t)harness_scale(700000));
	for (double end = harness_now() + HARNESS_HANG_S;
	     !con_progressed(run, toggle) && harness_now() < end;)
		usleep(10000);
	__atomic_store_n(&run->stop_signals, 1, __ATOMIC_RELAXED);
	pthread_join(signaller, NULL);
	__atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < CON_THREADS; i++)
		pthread_join(run->w[i].th, NULL);
	pthread_join(checker, NULL);
	if (toggle)
		pthread_join(toggler, NULL);
	sigaction(SIGUSR1, &old_sa, NULL);
	alarm(0);

	/*
	 * A refusal (or a max refused with -EBUSY) that the claims do not
	 * explain is allowed only where memcg.h allows it: its settle's 1 s
	 * wait for a transfer in flight ran out (a thread kept off its CPU
	 * that long by a loaded machine), counted in drain_waits.
	 */
	struct tally_memcg_info tree_info;

	REQUIRE(tally_memcg_tree_info(run->t, &tree_info) == 0);
	if (run->false_refusals || run->false_busy)
		harness_log("%ld refusals and %ld -EBUSY the claims do not "
			    "explain, %lu settles whose wait ran out",
			    run->false_refusals, run->false_busy,
			    tree_info.drain_waits);
	CHECK_LE_LONG(run->false_refusals + run->false_busy,
		      (long)tree_info.drain_waits);
	CHECK_EQ_LONG(run->over_max, 0);
	CHECK_EQ_LONG(run->bad_returns, 0);
	CHECK_EQ_ULONG(run->handler_failed, 0);
	/* Exact totals: the drained usage is what the threads hold. */
	for (int k = 0; k < CON_THREADS; k++) {
		refusals += run->w[k].refusals;
		ops += run->w[k].ops;
		for (int j = 0; j < run->w[k].nr; j++)
			for (int i = run->w[k].a[j].slot; i >= 0;
			     i = con_parent[i])
				held[i] += run->w[k].a[j].n;
	}
	held[CON_H] += con_reserve;
	held[0] += con_reserve;
	/* Quiescent: both cheap reads' intervals hold the exact usage. */
	for (int i = 0; i < CON_GROUPS; i++)
		for (int mode = TALLY_MEMCG_READ_APPROX;
		     mode <= TALLY_MEMCG_READ_PRECISE; mode++) {
			struct tally_memcg_range rr;

			if (!CHECK_EQ_LONG(tally_memcg_usage(run->g[i].g, mode,
							     &rr), 0) ||
			    !CHECK_LE_LONG(rr.min, held[i]) ||
			    !CHECK_LE_LONG(held[i], rr.max))
				harness_log("group %d mode %d", i, mode);
		}
	for (int i = CON_GROUPS - 1; i >= 0; i--)
		if (!CHECK_EQ_LONG(util_memcg_usage(run->g[i].g,
						    TALLY_MEMCG_READ_DRAIN),
				   held[i]))
			harness_log("group %d", i);
	REQUIRE(tally_memcg_tree_info(run->t, &info) == 0);
	CHECK_EQ_ULONG(info.refusals, refusals);
	CHECK_EQ_ULONG(info.groups, CON_GROUPS);
	CHECK_EQ_ULONG(info.zombies, 0);
	CHECK(info.drain_waits <= info.refusals);
	harness_info("%ld ops, %ld refusals, %lu drains, %lu refills, %lu "
		     "handler pairs; max lowered %ld times, refused %ld",
		     ops, refusals, info.drains, info.refills, run->handled,
		     run->lowered, run->busy);
	if (nr_cpus)
		CHECK_EQ_LONG(info.rseq, 0);
	/* Zero drift once everything is given back. */
	for (int k = 0; k < CON_THREADS; k++)
		while (run->w[k].nr)
			con_uncharge(&run->w[k], run->w[k].nr - 1,
				     pick_cpu(&(struct rng){ (uint64_t)k },
					      nr_cpus));
	CHECK_EQ_LONG(run->bad_returns, 0);
	CHECK_EQ_LONG(uncharge_on(run->g[CON_H].g, nr_cpus ? 0 : -1,
				  con_reserve), 0);
	for (int i = CON_GROUPS - 1; i >= 0; i--)
		if (!CHECK_EQ_LONG(util_memcg_usage(run->g[i].g,
						    TALLY_MEMCG_READ_DRAIN), 0))
			harness_log("group %d after the uncharges", i);
	for (int i = 1; i < CON_GROUPS; i++)
		CHECK_EQ_LONG(run->g[i].claim & CLAIM_MASK, 0);
out:
	if (harness_test_failed())
		harness_log("%u simulated CPUs (0: system), batch %ld",
			    nr_cpus, batch);
	if (run->t)
		tally_memcg_tree_destroy(run->t);
	free(run);
	tally_domain_destroy(d);
}

TEST(concurrent_charges_never_exceed_max_refuse_only_when_full_system)
{
	run_concurrent(0, 4096, 0, true);
}

TEST(concurrent_charges_never_exceed_max_refuse_only_when_full_64_cpus)
{
	run_concurrent(64, 4096, 1, true);
}

TEST(concurrent_charges_never_exceed_max_refuse_only_when_full_384_cpus)
{
	run_concurrent(384, 2048, 2, false);
}

/* ------------------------------------------------------------------ */
/* Destroy with charges in flight                                     */
/* ------------------------------------------------------------------ */

enum { CD_THREADS = 6, CD_ALLOCS = 64 };

struct cd_worker {
	struct tally_memcg *x;
	unsigned int nr_cpus;
	int *stop;
	struct { struct tally_memcg *h; long n; } a[CD_ALLOCS];
	int nr;
	long over_high, charged, bad;
	uint64_t stream;
	pthread_t th;
};

static void *cd_worker_main(void *arg)
{
	struct cd_worker *w = arg;
	struct rng r = rng_seed(w->stream);

	while (!con_stopped(w->stop)) {
		if (w->nr < CD_ALLOCS && rng_below(&r, 100) < 60) {
			long n = 1 + (long)rng_below(&r, 8 * KB);
			int ret = charge_on(w->x, pick_cpu(&r, w->nr_cpus), n,
					    0);

			if (ret >= 0) {
				w->over_high += ret == TALLY_MEMCG_OVER_HIGH;
				w->charged++;
				w->a[w->nr].h = w->x;
				w->a[w->nr++].n = n;
			} else if (ret != -ENOMEM) {
				w->bad++;
			}
		} else if (w->nr) {
			int k = (int)rng_below(&r, (uint64_t)w->nr);

			if (uncharge_on(w->a[k].h, pick_cpu(&r, w->nr_cpus),
					w->a[k].n))
				w->bad++;
			w->a[k] = w->a[--w->nr];
		}
	}
	return NULL;
}

/*
 * @rounds times: threads charge and uncharge a new child x of p while
 * the main thread destroys x after @pause_us; the threads go on through
 * x's handle, then stop.  @nr_cpus simulated CPUs (0: the system's).
 */
static void run_destroy_in_flight(unsigned int nr_cpus, long rounds,
				  useconds_t pause_us)
{
	struct tally_domain *d = nr_cpus ? util_domain(nr_cpus) : NULL;
	struct tally_memcg_tree *t = tree_on(d, 1024);
	struct cd_worker w[CD_THREADS];
	struct tally_memcg *p;
	long over_high = 0, charged = 0, high, round = 0, failed = 0;
	struct tally_memcg_info info;

	REQUIRE(t);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "p", &p) == 0);
	REQUIRE(tally_memcg_set_limit(p, TALLY_MEMCG_MAX, MB) == 0);
	memset(w, 0, sizeof(w));
	alarm(2 * HARNESS_HANG_S + 60);
	/*
	 * @rounds, and more until a charge returned OVER_HIGH: the threads
	 * may not get to run in a round's pause on a loaded machine.
	 */
	for (double end = harness_now() + HARNESS_HANG_S;
	     (round < rounds || (!over_high && harness_now() < end)) &&
	     failed < 3; round++) {
		struct tally_memcg *x;
		int stop = 0;
		long held = 0;
		char name[32];

		snprintf(name, sizeof(name), "x%ld", round);
		REQUIRE(tally_memcg_create(p, name, &x) == 0);
		REQUIRE(tally_memcg_set_limit(x, TALLY_MEMCG_HIGH, 64 * KB) == 0);
		for (int i = 0; i < CD_THREADS; i++) {
			w[i].x = x;
			w[i].nr_cpus = nr_cpus;
			w[i].stop = &stop;
			w[i].stream = (uint64_t)(round * CD_THREADS + i);
			REQUIRE(pthread_create(&w[i].th, NULL, cd_worker_main,
					       &w[i]) == 0);
		}
		usleep(pause_us);
		CHECK_EQ_LONG(tally_memcg_destroy(x), 0);
		usleep(pause_us);
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < CD_THREADS; i++) {
			pthread_join(w[i].th, NULL);
			for (int j = 0; j < w[i].nr; j++)
				held += w[i].a[j].n;
			over_high += w[i].over_high;
			charged += w[i].charged;
			w[i].over_high = w[i].charged = 0;
			CHECK_EQ_LONG(w[i].bad, 0);
		}
		/*
		 * Only x has a high: every high event is x's, counted once
		 * in p's hierarchical count and, moved by the destroy, in
		 * p's local one.  A charge returns OVER_HIGH when the level
		 * is still above high after counting the event, so the
		 * returns are a lower bound and the charges an upper one.
		 */
		high = util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false);
		if (!CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN),
				   held) ||
		    !CHECK_EQ_LONG(util_memcg_usage(x, TALLY_MEMCG_READ_DRAIN),
				   0) ||
		    !CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH,
						    true), high) ||
		    !CHECK_LE_LONG(over_high, high) ||
		    !CHECK_LE_LONG(high, charged)) {
			harness_log("round %ld (%u simulated CPUs)", round,
				    nr_cpus);
			failed++;
		}
	}
	alarm(0);
	harness_info("%ld rounds: %ld charges, %ld returned OVER_HIGH", round,
		     charged, over_high);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 2);
	CHECK_EQ_ULONG(info.zombies, (unsigned long)round);
	/* The destroyed handles still take their uncharges. */
	for (int i = 0; i < CD_THREADS; i++)
		for (int j = 0; j < w[i].nr; j++)
			CHECK_EQ_LONG(uncharge_on(w[i].a[j].h,
						  nr_cpus ? (int)(j % nr_cpus) :
						  -1, w[i].a[j].n), 0);
	CHECK_EQ_LONG(util_memcg_usage(tally_memcg_root(t),
				       TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_LONG(util_memcg_event(tally_memcg_root(t),
				       TALLY_MEMCG_EVENT_HIGH, false),
		      util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, true));
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}

TEST(destroy_with_charges_in_flight_loses_no_charge_and_no_event)
{
	run_destroy_in_flight(0, harness_scale(20), 10000);
}

/* Simulated CPUs: the stocks are taken with atomic operations. */
TEST(destroy_with_charges_in_flight_loses_nothing_on_4_simulated_cpus)
{
	run_destroy_in_flight(4, harness_scale(200), 1000);
}

/* ------------------------------------------------------------------ */
/* Protection math                                                    */
/* ------------------------------------------------------------------ */

/*
 * The rules of Documentation/admin-guide/cgroup-v2.rst for memory.min and
 * memory.low, as the kernel's effective_protection() applies them without
 * the recursive mode, computed from the root of the reclaim down:
 *   - the root has no protection of its own;
 *   - a child of the root keeps its own settings;
 *   - deeper, a group is protected up to min(usage, setting); when the
 *     siblings' such amounts together exceed the parent's effective
 *     protection, each gets its share of the parent's in proportion:
 *     min(usage, setting) * parent_effective / siblings_sum (rounded
 *     down).
 * Computed separately for min and for low.
 */
enum { PROT_MAX = 16 };

struct prot_model {
	int nr;
	int parent[PROT_MAX];
	long own[PROT_MAX];		/* bytes charged to the group itself */
	long usage[PROT_MAX];		/* of the subtree */
	long setting[2][PROT_MAX];	/* [0] min, [1] low */
	long eff[2][PROT_MAX];
};

static void prot_effective(struct prot_model *m, int k, int g)
{
	long sum = 0, pe;

	if (m->parent[g] == 0) {
		m->eff[k][g] = m->setting[k][g];
		return;
	}
	pe = m->eff[k][m->parent[g]];
	for (int s = 1; s < m->nr; s++)
		if (m->parent[s] == m->parent[g])
			sum += min_l(m->usage[s], m->setting[k][s]);
	m->eff[k][g] = min_l(m->usage[g], m->setting[k][g]);
	if (sum > pe)
		m->eff[k][g] = (long)((__int128)m->eff[k][g] * pe / sum);
}

/* A random tree: parents come before their children. */
static void prot_random(struct prot_model *m, struct rng *r)
{
	static const long sizes[] = { 0, 64 * KB, 512 * KB, MB, 3 * MB };

	memset(m, 0, sizeof(*m));
	m->nr = 2 + (int)rng_below(r, PROT_MAX - 1);
	m->parent[0] = -1;
	for (int g = 1; g < m->nr; g++) {
		m->parent[g] = (int)rng_below(r, (uint64_t)g);
		m->own[g] = 4096 * (1 + (long)rng_below(r, 512));
		for (int k = 0; k < 2; k++)
			m->setting[k][g] = rng_below(r, 3) ?
				sizes[rng_below(r, ARRAY_SIZE(sizes))] :
				4096 * (long)rng_below(r, 1024);
		/* Mostly min <= low, as configured in practice. */
		if (rng_below(r, 4) && m->setting[0][g] > m->setting[1][g]) {
			long tmp = m->setting[0][g];

			m->setting[0][g] = m->setting[1][g];
			m->setting[1][g] = tmp;
		}
	}
	for (int g = m->nr - 1; g > 0; g--) {
		m->usage[g] += m->own[g];
		m->usage[m->parent[g]] += m->usage[g];
	}
	for (int g = 1; g < m->nr; g++)
		for (int k = 0; k < 2; k++)
			prot_effective(m, k, g);
}

TEST(protection_equals_the_kernels_documented_rules_on_random_trees)
{
	struct rng r = rng_seed(0);
	long trees = harness_scale(300);
	long scaled = 0;

	for (long n = 0; n < trees && !harness_test_failed(); n++) {
		struct tally_memcg_tree *t = tree_on(NULL, 0);
		struct tally_memcg *g[PROT_MAX];
		struct prot_model m;

		REQUIRE(t);
		prot_random(&m, &r);
		g[0] = tally_memcg_root(t);
		for (int i = 1; i < m.nr; i++) {
			char name[16];

			snprintf(name, sizeof(name), "g%d", i);
			REQUIRE(tally_memcg_create(g[m.parent[i]], name, &g[i])
				== 0);
			REQUIRE(tally_memcg_set_limit(g[i], TALLY_MEMCG_MIN,
						      m.setting[0][i]) == 0);
			REQUIRE(tally_memcg_set_limit(g[i], TALLY_MEMCG_LOW,
						      m.setting[1][i]) == 0);
			REQUIRE(tally_memcg_charge(g[i], m.own[i], 0) == 0);
		}
		/* At quiescence the page counters are the exact usages. */
		REQUIRE(tally_memcg_drain(g[0]) == 0);
		for (int i = 0; i < m.nr; i++) {
			long emin = -1, elow = -1;
			long want_low = m.eff[1][i];

			REQUIRE(tally_memcg_protection(g[i], &emin, &elow) == 0);
			/*
			 * The header: a min above low makes the effective
			 * low at least the effective min.
			 */
			if (elow != want_low && elow == m.eff[0][i] &&
			    m.eff[0][i] > want_low)
				want_low = m.eff[0][i];
			if (!CHECK_EQ_LONG(emin, m.eff[0][i]) ||
			    !CHECK_EQ_LONG(elow, want_low)) {
				harness_log("tree %ld group %d:", n, i);
				for (int j = 0; j < m.nr; j++)
					harness_log("  g%d parent g%d usage %ld "
						    "min %ld low %ld: emin %ld "
						    "elow %ld", j, m.parent[j],
						    m.usage[j], m.setting[0][j],
						    m.setting[1][j], m.eff[0][j],
						    m.eff[1][j]);
				break;
			}
			if (i > 0 && m.parent[i] > 0 &&
			    m.eff[1][i] < min_l(m.usage[i], m.setting[1][i]))
				scaled++;
		}
		tally_memcg_tree_destroy(t);
	}
	harness_info("%ld trees, %ld groups with a scaled-down low", trees,
		     scaled);
}

/* ------------------------------------------------------------------ */
/* Lowering max while charges reach the page counter                  */
/* ------------------------------------------------------------------ */

enum { LM_THREADS = 8 };

struct lm_run {
	struct tally_memcg *g;
	int stop;
	long bad;
};

/* Hold up to 64 KiB, charging 16 KiB at a time, then give it all back. */
static void *lm_worker_main(void *arg)
{
	struct lm_run *run = arg;
	long held = 0;

	while (!con_stopped(&run->stop)) {
		if (held < 64 * KB) {
			int ret = tally_memcg_charge(run->g, 16 * KB,
						     TALLY_MEMCG_NORECLAIM);

			if (ret == 0)
				held += 16 * KB;
			else if (ret != -ENOMEM)
				run->bad++;
		} else {
			if (tally_memcg_uncharge(run->g, held))
				run->bad++;
			held = 0;
		}
	}
	if (held && tally_memcg_uncharge(run->g, held))
		run->bad++;
	return NULL;
}

/*
 * set_limit() publishes the new max and then checks the usage; a charge
 * must compare against the max after raising the usage (or re-read it),
 * else one that read the old max before the publication adds after the
 * check and leaves the usage above the max set.  The thread that lowers
 * the max watches the page counter until it raises it again.
 */
TEST(lowered_max_holds_against_charges_in_flight)
{
	struct tally_memcg_tree *t = tree_on(NULL, 1);
	struct lm_run run = { 0 };
	pthread_t th[LM_THREADS];
	double end = harness_now() + (double)harness_scale(1000) / 1000;
	long lowered = 0, over = 0, worst = 0, tries = 0;
	/*
	 * The threads want up to 512 KiB: the usage sits just under the
	 * lowered max when it is set, where a stale charge goes over.
	 */
	const long high = 1024 * KB, low = 504 * KB;

	REQUIRE(t);
	REQUIRE(tally_memcg_create(tally_memcg_root(t), "g", &run.g) == 0);
	REQUIRE(tally_memcg_set_limit(run.g, TALLY_MEMCG_MAX, high) == 0);
	for (int i = 0; i < LM_THREADS; i++)
		REQUIRE(pthread_create(&th[i], NULL, lm_worker_main, &run) == 0);
	/* A second, and on until a lowering held (a loaded machine). */
	while (harness_now() < end ||
	       (!lowered && harness_now() < end + HARNESS_HANG_S)) {
		tries++;
		if (tally_memcg_set_limit(run.g, TALLY_MEMCG_MAX, low) == 0) {
			lowered++;
			for (int k = 0; k < 20; k++) {
				long v = util_memcg_usage(run.g,
							  TALLY_MEMCG_READ_APPROX);

				if (v > low) {
					over++;
					worst = v > worst ? v : worst;
				}
			}
		}
		CHECK_EQ_LONG(tally_memcg_set_limit(run.g, TALLY_MEMCG_MAX,
						    high), 0);
		sched_yield();
	}
	__atomic_store_n(&run.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < LM_THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_LONG(run.bad, 0);
	harness_info("%ld of %ld lowerings held", lowered, tries);
	if (!CHECK_EQ_LONG(over, 0))
		harness_log("page counter up to %ld over a max of %ld, %ld "
			    "lowerings of %ld", worst, low, lowered, tries);
	CHECK_EQ_LONG(util_memcg_usage(run.g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
}

/* ------------------------------------------------------------------ */
/* Lock-free reads while groups are destroyed                         */
/* ------------------------------------------------------------------ */

struct walk_run {
	struct tally_memcg *root;
	int stop;
	long reads, bad;
};

static void *walk_reader_main(void *arg)
{
	struct walk_run *run = arg;

	while (!con_stopped(&run->stop)) {
		for (int mode = TALLY_MEMCG_READ_APPROX;
		     mode <= TALLY_MEMCG_READ_PRECISE; mode++) {
			struct tally_memcg_range r;

			if (tally_memcg_usage(run->root, mode, &r) ||
			    r.value < 0 || r.min > r.value || r.value > r.max)
				__atomic_add_fetch(&run->bad, 1,
						   __ATOMIC_RELAXED);
		}
		__atomic_add_fetch(&run->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * READ_APPROX and READ_PRECISE walk the subtree without a lock (they are
 * documented async-signal-safe) while tally_memcg_destroy() closes (and,
 * with rseq stocks, frees) the stocks of the groups it removes: the walk
 * must never touch a freed or cleared stock.  @nr_cpus simulated CPUs make
 * each group's stock walk long; 0 is the system domain (rseq stocks).
 */
static void run_reads_during_destroys(unsigned int nr_cpus, long rounds)
{
	struct tally_domain *d = nr_cpus ? util_domain(nr_cpus) : NULL;
	struct tally_memcg_tree *t = tree_on(d, 4096);
	struct walk_run run = { 0 };
	unsigned int cpus = nr_cpus ? nr_cpus : 1;
	long charged = 0;
	pthread_t th[2];

	REQUIRE(t);
	run.root = tally_memcg_root(t);
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, walk_reader_main, &run)
			== 0);
	/* The readers run before the destroys begin, however loaded. */
	for (double end = harness_now() + HARNESS_HANG_S;
	     !__atomic_load_n(&run.reads, __ATOMIC_RELAXED) &&
	     harness_now() < end;)
		usleep(1000);
	for (long k = 0; k < rounds; k++) {
		struct tally_memcg *g;
		char name[32];

		snprintf(name, sizeof(name), "g%ld", k);
		REQUIRE(tally_memcg_create(run.root, name, &g) == 0);
		for (unsigned int cpu = 0; cpu < cpus; cpu += 7) {
			CHECK_EQ_LONG(charge_on(g, nr_cpus ? (int)cpu : -1, 100,
						0), 0);
			charged += 100;
		}
		CHECK_EQ_LONG(tally_memcg_destroy(g), 0);
		CHECK_EQ_LONG(uncharge_on(g, nr_cpus ? 0 : -1, charged), 0);
		charged = 0;
	}
	__atomic_store_n(&run.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_LONG(run.bad, 0);
	harness_info("%ld rounds of destroys, %ld reads of the root", rounds,
		     run.reads);
	CHECK_EQ_LONG(util_memcg_usage(run.root, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}

TEST(cheap_reads_of_the_root_survive_concurrent_destroys)
{
	run_reads_during_destroys(384, harness_scale(2000));
}

TEST(cheap_reads_of_the_root_survive_concurrent_destroys_system)
{
	run_reads_during_destroys(0, harness_scale(20000));
}
