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
	s->g[i].max = TALLY_MEMCG_UNLIMITED;
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
	for (int i = 1; i < SEQ_GROUPS; i++) {
		if (!seq_create(s, i))
			return false;
		s->g[i].max = seq_max[i];
	}
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

/* Does @n fit under every max of @slot's chain? */
static bool seq_fits(const struct seq *s, int slot, long n)
{
	for (int i = slot; i >= 0; i = seq_parent[i])
		if (s->g[i].usage + n > s->g[i].max)
			return false;
	return true;
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

static bool seq_charge(struct seq *s, long step)
{
	int slot = 1 + (int)rng_below(&s->r, SEQ_GROUPS - 1);
	int cpu = pick_cpu(&s->r, s->nr_cpus);
	unsigned int flags = 0;
	long n;
	int ret;

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
	ret = charge_on(s->g[slot].g, cpu, n, flags);
	if ((flags & TALLY_MEMCG_NOFAIL) && seq_bigger_than_a_max(s, slot, n)) {
		if (!CHECK_EQ_LONG(ret, -E2BIG))
			goto fail;
		/* Whether it counts a max event is not said: re-read. */
		for (int i = 0; i < SEQ_GROUPS; i++)
			s->g[i].local_max_events = util_memcg_event(
				s->g[i].g, TALLY_MEMCG_EVENT_MAX, true);
		return true;
	}
	if (!(flags & TALLY_MEMCG_NOFAIL) && !seq_fits(s, slot, n)) {
		long before[SEQ_GROUPS], bumped = 0;

		if (!CHECK_EQ_LONG(ret, -ENOMEM))
			goto fail;
		s->refusals++;
		/* One max event, on a level of the chain that is full. */
		for (int i = 0; i < SEQ_GROUPS; i++) {
			before[i] = s->g[i].local_max_events;
			s->g[i].local_max_events = util_memcg_event(
				s->g[i].g, TALLY_MEMCG_EVENT_MAX, true);
		}
		for (int i = 0; i < SEQ_GROUPS; i++) {
			long d = s->g[i].local_max_events - before[i];

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
		harness_log("  group %d usage %ld max %ld", i, s->g[i].usage,
			    s->g[i].max);
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
	long steps = harness_scale(20000);
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
	CHECK(s->refusals > steps / 100);	/* it did run near the limits */
	CHECK(s->destroyed > 0);
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
