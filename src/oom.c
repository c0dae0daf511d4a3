// SPDX-License-Identifier: MIT
/*
 * oom.c - victim selection in two passes (tally/oom.h).
 *
 * Pass 1 writes every candidate's badness interval [lo, hi] (and its
 * approximate badness) into the caller's array and finds M, the highest
 * lo.  Only candidates with hi >= M can be the worst: the survivors.
 *
 * Pass 2 takes survivors in key order - hi descending, then index
 * ascending - and keeps the best exactly known badness B:
 *
 *   next survivor s, best b          decision
 *   s.hi < B (or = B, s after b)     stop: no later survivor can beat b
 *   s.lo beats B and the next hi     stop: s wins without a precise sum
 *   s.lo == s.hi                     s's badness is known: no precise sum
 *   budget left                      precise sum of s, maybe a new best
 *   budget spent                     the rest are judged approximately
 *
 * The first two rows are proofs, so the choice is exact whenever the
 * budget was not spent.  Key order comes without sorting or allocation:
 * each round picks the next ROUND survivors by insertion into a small
 * stack array (O(candidates) per round, one round in the common case).
 *
 * Costs: pass 1 one root load per counter; pass 2 at most max_precise
 * precise sums (O(nr_cpus) per counter) plus a scan per round.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <tally/oom.h>
#include "mm_internal.h"

/* Survivors taken per round of pass 2 (one more is kept to peek at). */
#define ROUND 32

/* Badness floor: LONG_MIN marks a candidate that cannot be chosen. */
#define BADNESS_FLOOR (LONG_MIN + 1)
#define INELIGIBLE LONG_MIN

static const struct tally_oom_options default_options =
	TALLY_OOM_OPTIONS_INIT;

static int check_candidate(const struct tally_oom_candidate *c)
{
	if (c->flags & ~(TALLY_OOM_UNKILLABLE | TALLY_OOM_PREFER) ||
	    c->score_adj < TALLY_OOM_SCORE_ADJ_MIN ||
	    c->score_adj > TALLY_OOM_SCORE_ADJ_MAX)
		return -EINVAL;
	if (c->mm)
		return mm_is_live(c->mm) ? 0 : -EINVAL;
	if (!c->counters || !c->nr_counters ||
	    c->nr_counters > TALLY_OOM_MAX_COUNTERS)
		return -EINVAL;
	for (unsigned int i = 0; i < c->nr_counters; i++)
		if (!c->counters[i] || !c->counters[i]->level0 ||
		    (c->weights && c->weights[i] < 0))
			return -EINVAL;
	return 0;
}

static bool eligible(const struct tally_oom_candidate *c)
{
	return !(c->flags & TALLY_OOM_UNKILLABLE) &&
	       c->score_adj != TALLY_OOM_SCORE_ADJ_MIN;
}

static long weight_of(const struct tally_oom_candidate *c, unsigned int i)
{
	return c->weights ? c->weights[i] : 1;
}

/* The candidate's usage from approximate sums, with its interval. */
static struct tally_mm_range usage_approximate(
	const struct tally_oom_candidate *c)
{
	struct tally_mm_range r = { 0, 0, 0 };

	if (c->mm) {
		tally_mm_approximate(c->mm, TALLY_MM_BADNESS, &r);
		return r;
	}
	for (unsigned int i = 0; i < c->nr_counters; i++)
		mm_range_add(&r, c->counters[i], weight_of(c, i));
	return r;
}

static long usage_precise(const struct tally_oom_candidate *c)
{
	long usage = 0;

	if (c->mm)
		return tally_mm_precise(c->mm, TALLY_MM_BADNESS);
	for (unsigned int i = 0; i < c->nr_counters; i++)
		usage = mm_add_weighted(usage,
					tally_counter_precise_sum(c->counters[i]),
					weight_of(c, i));
	return usage;
}

/* The kernel's oom_badness() on @usage, or the caller's policy. */
static long badness_of(const struct tally_oom_options *o,
		       const struct tally_oom_candidate *c, long usage)
{
	__int128 b;

	if (o->badness)
		b = o->badness(c, usage, o->arg);
	else	/* exact in 128 bits, then saturated */
		b = (__int128)usage +
		    (__int128)c->score_adj * (__int128)(o->total / 1000);
	return b < BADNESS_FLOOR ? BADNESS_FLOOR : b > LONG_MAX ? LONG_MAX
								 : (long)b;
}

/* Does (v, i) beat (w, j): higher badness, or equal and lower index? */
static bool beats(long v, size_t i, long w, size_t j)
{
	return v > w || (v == w && i < j);
}

/* Pass-2 order: (hi, index) of @a comes before that of @b. */
static bool key_before(const struct tally_oom_candidate *cands, size_t a,
		       size_t b)
{
	return beats(cands[a].badness_max, a, cands[b].badness_max, b);
}

/*
 * Fill @out with the next (up to @cap) survivors in key order strictly
 * after survivor @after (SIZE_MAX: from the start).  Returns how many.
 */
static size_t next_round(const struct tally_oom_candidate *cands, size_t nr,
			 long m, size_t after, size_t *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < nr; i++) {
		size_t pos;

		if (cands[i].badness_max < m ||
		    (after != SIZE_MAX && !key_before(cands, after, i)))
			continue;
		if (n == cap && !key_before(cands, i, out[cap - 1]))
			continue;
		pos = n < cap ? n++ : cap - 1;
		while (pos && key_before(cands, i, out[pos - 1])) {
			out[pos] = out[pos - 1];
			pos--;
		}
		out[pos] = i;
	}
	return n;
}

/* The choice being built by a pass. */
struct choice {
	size_t index;		/* SIZE_MAX: none yet */
	long badness;
	long usage;		/* precise usage when precise */
	bool precise;
};

static void consider(struct choice *best, size_t i, long badness, long usage,
		     bool precise)
{
	if (best->index != SIZE_MAX &&
	    !beats(badness, i, best->badness, best->index))
		return;
	best->index = i;
	best->badness = badness;
	best->usage = usage;
	best->precise = precise;
}

/* Evaluate candidate @i precisely and consider it. */
static void consider_precise(const struct tally_oom_options *o,
			     const struct tally_oom_candidate *cands, size_t i,
			     struct choice *best, unsigned int *sums)
{
	long usage = usage_precise(&cands[i]);

	(*sums)++;
	consider(best, i, badness_of(o, &cands[i], usage), usage, true);
}

/*
 * Pass 2 of the 2-pass method.  Returns true when the choice is proven to
 * be the precise scan's.
 */
static bool two_pass(const struct tally_oom_options *o,
		     const struct tally_oom_candidate *cands, size_t nr,
		     long m, struct choice *best, unsigned int *sums)
{
	size_t keys[ROUND + 1], after = SIZE_MAX;

	for (;;) {
		size_t n = next_round(cands, nr, m, after, keys, ROUND + 1);
		size_t take = n > ROUND ? ROUND : n;

		if (!n)
			return true;
		for (size_t k = 0; k < take; k++) {
			size_t s = keys[k];
			const struct tally_oom_candidate *c = &cands[s];

			if (best->index != SIZE_MAX &&
			    !beats(c->badness_max, s, best->badness,
				   best->index))
				return true;
			if ((best->index == SIZE_MAX ||
			     beats(c->badness_min, s, best->badness,
				   best->index)) &&
			    (k + 1 == n ||
			     c->badness_min > cands[keys[k + 1]].badness_max)) {
				/* Beats the best and every later max. */
				best->index = s;
				best->badness = c->badness;
				best->precise = false;
				return true;
			}
			if (c->badness_min == c->badness_max) {
				consider(best, s, c->badness_min, 0, false);
			} else if (*sums < o->max_precise) {
				consider_precise(o, cands, s, best, sums);
			} else {
				/* Budget spent: the rest by approximation. */
				for (size_t i = 0; i < nr; i++)
					if (cands[i].badness_max >= m &&
					    (i == s ||
					     key_before(cands, s, i)))
						consider(best, i,
							 cands[i].badness, 0,
							 false);
				return false;
			}
			after = s;
		}
	}
}

/*
 * Pass 1 is a walk over many tasks whose counters and roots sit in other
 * cache lines and pages each: it is bound by memory latency.  Loads are
 * started ahead, in two stages: the counters of the candidate PREFETCH_AHEAD
 * * 2 places ahead, then the roots of the one PREFETCH_AHEAD ahead (whose
 * counters have arrived by then).
 */
#define PREFETCH_AHEAD 8

static const struct tally_counter *counter_of(
	const struct tally_oom_candidate *c, unsigned int i)
{
	return c->mm ? &c->mm->counters[i] : c->counters[i];
}

static unsigned int nr_counters_of(const struct tally_oom_candidate *c)
{
	return c->mm ? TALLY_MM_NR_ITEMS : c->nr_counters;
}

static void prefetch_ahead(const struct tally_oom_candidate *cands,
			   size_t nr, size_t i)
{
	size_t far = i + 2 * PREFETCH_AHEAD, near = i + PREFETCH_AHEAD;

	if (far < nr)
		for (unsigned int k = 0; k < nr_counters_of(&cands[far]); k++)
			__builtin_prefetch(counter_of(&cands[far], k));
	if (near < nr)
		for (unsigned int k = 0; k < nr_counters_of(&cands[near]); k++)
			tally_counter_prefetch(counter_of(&cands[near], k));
}

/* Pass 1 for candidate @c: its badness interval and approximation. */
static void judge_approximately(const struct tally_oom_options *o,
				struct tally_oom_candidate *c)
{
	struct tally_mm_range u = usage_approximate(c);

	c->badness_min = badness_of(o, c, u.min);
	c->badness_max = badness_of(o, c, u.max);
	c->badness = badness_of(o, c, u.value);
}

int tally_oom_select(struct tally_oom_candidate *cands, size_t nr,
		     const struct tally_oom_options *opts,
		     struct tally_oom_result *res)
{
	const struct tally_oom_options *o = opts ? opts : &default_options;
	struct choice best = { SIZE_MAX, 0, 0, false };
	size_t preferred = SIZE_MAX, nr_eligible = 0;
	bool precise_scan, exact = true;
	unsigned int sums = 0;
	long m = INELIGIBLE;

	if (!res || (!cands && nr) ||
	    (o->method != TALLY_OOM_TWO_PASS && o->method != TALLY_OOM_PRECISE))
		return -EINVAL;
	for (size_t i = 0; i < nr; i++) {
		if (check_candidate(&cands[i]))
			return -EINVAL;
		if (eligible(&cands[i]) && (cands[i].flags & TALLY_OOM_PREFER) &&
		    preferred == SIZE_MAX)
			preferred = i;
	}
	/* A preferred candidate is chosen anyway: no precise scan. */
	precise_scan = o->method == TALLY_OOM_PRECISE && preferred == SIZE_MAX;

	/* Pass 1; the precise method takes every candidate's precise sum. */
	for (size_t i = 0; i < nr; i++) {
		struct tally_oom_candidate *c = &cands[i];
		long usage;

		c->badness_min = c->badness_max = c->badness = INELIGIBLE;
		if (!eligible(c))
			continue;
		nr_eligible++;
		if (!precise_scan) {
			prefetch_ahead(cands, nr, i);
			judge_approximately(o, c);
			if (c->badness_min > m)
				m = c->badness_min;
			continue;
		}
		usage = usage_precise(c);
		sums++;
		c->badness = badness_of(o, c, usage);
		c->badness_min = c->badness_max = c->badness;
		consider(&best, i, c->badness, usage, true);
	}
	if (!nr_eligible)
		return -ENOENT;

	if (preferred != SIZE_MAX)
		consider_precise(o, cands, preferred, &best, &sums);
	else if (!precise_scan)
		exact = two_pass(o, cands, nr, m, &best, &sums);

	memset(res, 0, sizeof(*res));
	res->index = best.index;
	res->badness = best.badness;
	res->badness_min = cands[best.index].badness_min;
	res->badness_max = cands[best.index].badness_max;
	res->frees = usage_approximate(&cands[best.index]);
	if (best.precise)
		res->frees.value = best.usage;
	res->precise_sums = sums;
	res->eligible = nr_eligible;
	res->precise_chosen = best.precise;
	res->exact = exact;
	return 0;
}
