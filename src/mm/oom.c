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
 * stack array, O(candidates) per round.  After MAX_ROUNDS rounds (a large
 * budget over many overlapping intervals) the remaining survivors are
 * taken in index order instead, one scan: the first row then applies to
 * each survivor alone, and the proof still holds when the budget lasts.
 *
 * Costs: pass 1 one root load per counter; pass 2 at most max_precise
 * precise sums (O(nr_cpus) per counter) plus at most MAX_ROUNDS + 2 scans
 * of the candidates.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <tally/oom.h>
#include "counter/counter_internal.h"
#include "mm_internal.h"

/* Survivors taken per round of pass 2 (one more is kept to peek at). */
#define ROUND 32
#define MAX_ROUNDS 4

/* Badness floor: LONG_MIN marks a candidate that cannot be chosen. */
#define BADNESS_FLOOR (LONG_MIN + 1)
#define INELIGIBLE LONG_MIN
#define NONE SIZE_MAX

static const struct tally_oom_options default_options =
	TALLY_OOM_OPTIONS_INIT;

/* --- a candidate's counters, whether a tally_mm or the caller's ---------- */

static unsigned int nr_counters_of(const struct tally_oom_candidate *c)
{
	return c->mm ? TALLY_MM_NR_ITEMS : c->nr_counters;
}

static const struct tally_counter *counter_of(
	const struct tally_oom_candidate *c, unsigned int i)
{
	return c->mm ? &c->mm->counters[i] : c->counters[i];
}

static long weight_of(const struct tally_oom_candidate *c, unsigned int i)
{
	return c->weights && !c->mm ? c->weights[i] : 1;
}

static int check_candidate(const struct tally_oom_candidate *c)
{
	if (c->flags & ~(TALLY_OOM_UNKILLABLE | TALLY_OOM_PREFER) ||
	    c->score_adj < TALLY_OOM_SCORE_ADJ_MIN ||
	    c->score_adj > TALLY_OOM_SCORE_ADJ_MAX)
		return -EINVAL;
	if (c->mm)
		return mm_is_live(c->mm) ? 0 : -EINVAL;
	if (!c->counters || !c->nr_counters)
		return -EINVAL;
	for (unsigned int i = 0; i < c->nr_counters; i++)
		if (!c->counters[i] || !c->counters[i]->level0 ||
		    weight_of(c, i) < 0)
			return -EINVAL;
	return 0;
}

static bool eligible(const struct tally_oom_candidate *c)
{
	return !(c->flags & TALLY_OOM_UNKILLABLE) &&
	       c->score_adj != TALLY_OOM_SCORE_ADJ_MIN;
}

/* The candidate's usage from approximate sums, with its interval. */
static struct tally_mm_range usage_approximate(
	const struct tally_oom_candidate *c)
{
	struct tally_mm_range r = { 0, 0, 0 };

	for (unsigned int i = 0; i < nr_counters_of(c); i++)
		mm_range_add(&r, counter_of(c, i), weight_of(c, i));
	return r;
}

static long usage_precise(const struct tally_oom_candidate *c)
{
	long usage = 0;

	if (c->mm)	/* one pass over the CPUs for the five items */
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

/*
 * Pass 1 is a walk over many tasks whose counters and roots sit in other
 * cache lines and pages each: it is bound by memory latency.  Loads are
 * started ahead, in two stages: the counters of the candidate
 * 2 * PREFETCH_AHEAD places ahead, then the roots of the one PREFETCH_AHEAD
 * ahead (whose counters have arrived by then).
 */
#define PREFETCH_AHEAD 8

static void prefetch_ahead(const struct tally_oom_candidate *cands,
			   size_t nr, size_t i)
{
	size_t far = i + 2 * PREFETCH_AHEAD, near = i + PREFETCH_AHEAD;

	if (far < nr)
		for (unsigned int k = 0; k < nr_counters_of(&cands[far]); k++)
			__builtin_prefetch(counter_of(&cands[far], k));
	if (near < nr)
		for (unsigned int k = 0; k < nr_counters_of(&cands[near]); k++)
			counter_prefetch(counter_of(&cands[near], k));
}

/*
 * Pass 1 for candidate @c.  The interval spans the three badness values
 * of its usage interval, so that a policy that breaks the contract (not
 * non-decreasing) still yields lo <= badness <= hi and a candidate that
 * survives; only the proof of exactness is then void.
 */
static void judge_approximately(const struct tally_oom_options *o,
				struct tally_oom_candidate *c)
{
	struct tally_mm_range u = usage_approximate(c);
	long a = badness_of(o, c, u.min), b = badness_of(o, c, u.value);
	long z = badness_of(o, c, u.max);

	c->badness = b;
	c->badness_min = a < b ? (a < z ? a : z) : (b < z ? b : z);
	c->badness_max = a > b ? (a > z ? a : z) : (b > z ? b : z);
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

/* A survivor not yet taken: hi reaches @m, key strictly after @after. */
static bool pending(const struct tally_oom_candidate *cands, long m,
		    size_t after, size_t i)
{
	return cands[i].badness_max >= m &&
	       (after == NONE || key_before(cands, after, i));
}

/*
 * Fill @out with the next (up to @cap) pending survivors in key order.
 * Returns how many.
 */
static size_t next_round(const struct tally_oom_candidate *cands, size_t nr,
			 long m, size_t after, size_t *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < nr; i++) {
		size_t pos;

		if (!pending(cands, m, after, i) ||
		    (n == cap && !key_before(cands, i, out[cap - 1])))
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

/* The choice being built. */
struct choice {
	size_t index;		/* NONE: none yet */
	long badness;
	long usage;		/* precise usage when precise */
	bool precise;
};

static void consider(struct choice *best, size_t i, long badness, long usage,
		     bool precise)
{
	if (best->index != NONE &&
	    !beats(badness, i, best->badness, best->index))
		return;
	best->index = i;
	best->badness = badness;
	best->usage = usage;
	best->precise = precise;
}

/* Sum candidate @i precisely; returns its precise badness. */
static long judge_precisely(const struct tally_oom_options *o,
			    const struct tally_oom_candidate *cands, size_t i,
			    struct choice *best, unsigned int *sums)
{
	long usage = usage_precise(&cands[i]);
	long badness = badness_of(o, &cands[i], usage);

	(*sums)++;
	consider(best, i, badness, usage, true);
	return badness;
}

/* The state of pass 2. */
struct pass2 {
	const struct tally_oom_options *o;
	const struct tally_oom_candidate *cands;
	size_t nr;
	long m;
	struct choice *best;
	unsigned int *sums;
};

/* Can pending survivor @s still beat the best? */
static bool may_beat_best(const struct pass2 *p, size_t s)
{
	return p->best->index == NONE ||
	       beats(p->cands[s].badness_max, s, p->best->badness,
		     p->best->index);
}

/*
 * Learn survivor @s's badness: known when its interval is one point, else
 * a precise sum.  False when the budget is spent.
 */
static bool judge(struct pass2 *p, size_t s)
{
	const struct tally_oom_candidate *c = &p->cands[s];

	if (c->badness_min == c->badness_max) {
		consider(p->best, s, c->badness_min, 0, false);
		return true;
	}
	if (*p->sums >= p->o->max_precise)
		return false;
	judge_precisely(p->o, p->cands, s, p->best, p->sums);
	return true;
}

/* Budget spent: every survivor pending after @after, from index @from on,
 * by its approximate badness. */
static void judge_rest_approximately(struct pass2 *p, size_t after,
				     size_t from)
{
	for (size_t i = from; i < p->nr; i++)
		if (pending(p->cands, p->m, after, i))
			consider(p->best, i, p->cands[i].badness, 0, false);
}

/* Pass 2; true when the choice is proven to be the precise scan's. */
static bool two_pass(struct pass2 *p)
{
	size_t keys[ROUND + 1], after = NONE;

	for (unsigned int round = 0; round < MAX_ROUNDS; round++) {
		size_t n = next_round(p->cands, p->nr, p->m, after, keys,
				      ROUND + 1);
		size_t take = n > ROUND ? ROUND : n;

		if (!n)
			return true;
		for (size_t k = 0; k < take; k++) {
			size_t s = keys[k];
			const struct tally_oom_candidate *c = &p->cands[s];

			if (!may_beat_best(p, s))
				return true;	/* nor can any later key */
			if ((p->best->index == NONE ||
			     beats(c->badness_min, s, p->best->badness,
				   p->best->index)) &&
			    (k + 1 == n ||
			     c->badness_min > p->cands[keys[k + 1]].badness_max)) {
				/* Beats the best and every later max. */
				p->best->index = s;
				p->best->badness = c->badness;
				p->best->precise = false;
				return true;
			}
			if (!judge(p, s)) {
				judge_rest_approximately(p, after, 0);
				return false;
			}
			after = s;
		}
	}
	/* Many overlapping survivors: the rest in index order, one scan. */
	for (size_t i = 0; i < p->nr; i++) {
		if (!pending(p->cands, p->m, after, i) || !may_beat_best(p, i))
			continue;
		if (!judge(p, i)) {
			judge_rest_approximately(p, after, i);
			return false;
		}
	}
	return true;
}

int tally_oom_select(struct tally_oom_candidate *cands, size_t nr,
		     const struct tally_oom_options *opts,
		     struct tally_oom_result *res)
{
	const struct tally_oom_options *o = opts ? opts : &default_options;
	struct choice best = { NONE, 0, 0, false };
	size_t preferred = NONE, nr_eligible = 0, highest_min = NONE;
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
		    preferred == NONE)
			preferred = i;
	}
	/* A preferred candidate is chosen anyway: no precise scan. */
	precise_scan = o->method == TALLY_OOM_PRECISE && preferred == NONE;

	/* Pass 1; the precise method takes every candidate's precise sum. */
	for (size_t i = 0; i < nr; i++) {
		struct tally_oom_candidate *c = &cands[i];

		c->badness_min = c->badness_max = c->badness = INELIGIBLE;
		if (!eligible(c))
			continue;
		nr_eligible++;
		if (precise_scan) {
			c->badness = judge_precisely(o, cands, i, &best, &sums);
			c->badness_min = c->badness_max = c->badness;
			continue;
		}
		prefetch_ahead(cands, nr, i);
		judge_approximately(o, c);
		if (c->badness_min > m) {
			m = c->badness_min;
			highest_min = i;
		}
	}
	if (!nr_eligible)
		return -ENOENT;

	if (preferred != NONE) {
		if (o->max_precise)
			judge_precisely(o, cands, preferred, &best, &sums);
		else	/* a budget of 0 takes no precise sum at all */
			consider(&best, preferred, cands[preferred].badness, 0,
				 false);
	} else if (!precise_scan) {
		struct pass2 p = { o, cands, nr, m, &best, &sums };

		exact = two_pass(&p);
		/* The highest min always survives; this only guards it. */
		if (best.index == NONE)
			consider(&best, highest_min, cands[highest_min].badness,
				 0, false);
	}

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
