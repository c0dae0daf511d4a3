/* SPDX-License-Identifier: MIT */
#ifndef TALLY_OOM_H
#define TALLY_OOM_H

/*
 * tally/oom.h - choosing what to cancel when memory runs out, in two
 * passes over approximate counters.
 *
 * Every candidate's usage is a weighted sum of hierarchical counters (a
 * task's tally_mm, or any counters).  Its badness is the kernel's
 * oom_badness() - usage plus score_adj thousandths of a total the caller
 * gives - or what a policy callback makes of the usage.
 *
 *   pass 1   for every candidate: [min, max] of its badness from one load
 *            per counter and the counters' accuracy bounds; M = highest min.
 *   pass 2   only candidates whose max reaches M can be the worst.  Take
 *            them by decreasing max, compute their precise badness, stop as
 *            soon as the next max is below the best precise value.  After
 *            max_precise precise sums, the rest are judged by their
 *            approximate badness (as the kernel does, to bound the time).
 *
 * When pass 2 stops before its budget runs out, the choice is provably the
 * one a precise scan of every candidate makes (at quiescence); the result
 * says whether it is.  Precise sums cost O(nr_cpus) per counter; the rest
 * is O(candidates) loads and compares.  Nothing is allocated: per-candidate
 * intervals are written into the caller's candidate array.
 *
 * Ties: of two candidates with the same badness, the one with the lower
 * index in the array wins, in both methods.
 */

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <tally/counter.h>
#include <tally/mm.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Never choose this candidate (like a kernel thread or init). */
#define TALLY_OOM_UNKILLABLE 0x1u
/**
 * Choose this candidate first, whatever its badness (like the kernel's
 * oom_task_origin()); of several, the lowest index.
 */
#define TALLY_OOM_PREFER 0x2u

/** score_adj that means "never choose" (the kernel's OOM_SCORE_ADJ_MIN). */
#define TALLY_OOM_SCORE_ADJ_MIN (-1000)
/** Largest score_adj (OOM_SCORE_ADJ_MAX). */
#define TALLY_OOM_SCORE_ADJ_MAX 1000

/** Default budget of precise sums in pass 2 (the kernel patch's). */
#define TALLY_OOM_DEFAULT_MAX_PRECISE 16u

/**
 * struct tally_oom_candidate - one task that may be chosen.
 * @mm: the task's counters; its usage is the sum of %TALLY_MM_BADNESS
 *	(RSS + swap + page tables), each item clamped at 0.  When NULL,
 *	@counters is used instead.
 * @counters: @nr_counters counters whose weighted sum, each clamped at 0,
 *	is the usage.
 * @weights: one weight >= 0 per counter, or NULL for 1 each.
 * @nr_counters: at least 1 when @mm is NULL.
 * @score_adj: -1000 (never choose) to 1000.
 * @flags: %TALLY_OOM_UNKILLABLE, %TALLY_OOM_PREFER.
 * @badness: output: the approximate badness from pass 1 (LONG_MIN for a
 *	candidate that cannot be chosen).
 * @badness_min: output: the pass-1 lower bound of the badness, which
 *	holds the precise badness at quiescence (LONG_MIN when not
 *	eligible).
 * @badness_max: output: the pass-1 upper bound (LONG_MIN when not
 *	eligible).
 *
 * The caller fills the inputs; tally_oom_select() writes the outputs.  The
 * precise method (%TALLY_OOM_PRECISE) writes each eligible candidate's
 * precise badness to all three, unless a %TALLY_OOM_PREFER candidate made
 * the scan needless.
 */
struct tally_oom_candidate {
	const struct tally_mm *mm;
	const struct tally_counter *const *counters;
	const long *weights;
	unsigned int nr_counters;
	int score_adj;
	unsigned int flags;
	long badness;
	long badness_min;
	long badness_max;
};

/**
 * typedef tally_oom_badness_fn - a caller's badness for a usage.
 * @c: the candidate.
 * @usage: its usage (bytes, or the caller's unit), >= 0.
 * @arg: the options' @arg.
 *
 * Must be non-decreasing in @usage for a given candidate (e.g. usage minus
 * a soft limit, or usage * 1000 / soft limit) and give the same result for
 * the same usage during one selection: pass 1 maps a usage interval to
 * [f(min), f(max)].  A policy that breaks this gets a valid candidate, but
 * the result's @exact no longer proves anything.  It is called from
 * tally_oom_select() only, up to 4 times per candidate, and must not modify
 * the candidate array.
 * Results below LONG_MIN + 1 are read as LONG_MIN + 1 (LONG_MIN marks the
 * candidates that cannot be chosen).
 *
 * Return: the badness; higher is chosen first.
 */
typedef long (*tally_oom_badness_fn)(const struct tally_oom_candidate *c,
				     long usage, void *arg);

/** enum tally_oom_method - how usage sums are taken. */
enum tally_oom_method {
	TALLY_OOM_TWO_PASS = 0,	/* the 2-pass scheme above */
	TALLY_OOM_PRECISE = 1,	/* precise sums of every eligible candidate */
};

/**
 * struct tally_oom_options - how to choose.
 * @method: %TALLY_OOM_TWO_PASS or %TALLY_OOM_PRECISE.
 * @max_precise: pass 2's budget of precise sums (one per candidate);
 *	%TALLY_OOM_DEFAULT_MAX_PRECISE is 16, as in the kernel patch that
 *	proposed the 2-pass selection; UINT_MAX never runs out, so the
 *	choice is always exact; 0 judges on approximations only.
 * @total: what score_adj is a thousandth of: badness = usage + score_adj *
 *	(@total / 1000), the kernel's rule (e.g. the memory limit in bytes;
 *	below 1000, score_adj only matters at -1000).
 * @badness: a policy replacing the kernel's badness, or NULL.  score_adj
 *	-1000 and the flags still apply; @total is then unused.
 * @arg: passed to @badness.
 */
struct tally_oom_options {
	enum tally_oom_method method;
	unsigned int max_precise;
	unsigned long total;
	tally_oom_badness_fn badness;
	void *arg;
};

/** Defaults: 2-pass, 16 precise sums, score_adj unscaled (total 0). */
#define TALLY_OOM_OPTIONS_INIT \
	{ TALLY_OOM_TWO_PASS, TALLY_OOM_DEFAULT_MAX_PRECISE, 0, NULL, NULL }

/**
 * struct tally_oom_result - the choice.
 * @index: the chosen candidate's index in the array.
 * @badness: its badness: precise when @precise_chosen, else approximate.
 * @badness_min: its pass-1 interval...
 * @badness_max: ...which holds the precise badness at quiescence.
 * @frees: what cancelling it frees (its usage): precise when
 *	@precise_chosen, else approximate, with its interval.
 * @precise_sums: candidates whose precise usage was summed.
 * @eligible: candidates that could be chosen.
 * @precise_chosen: @badness and @frees.value are precise sums.
 * @exact: the choice is provably the one a precise scan of every candidate
 *	would make (true whenever the budget did not run out; assumes no add
 *	was in flight).
 */
struct tally_oom_result {
	size_t index;
	long badness;
	long badness_min;
	long badness_max;
	struct tally_mm_range frees;
	unsigned int precise_sums;
	size_t eligible;
	bool precise_chosen;
	bool exact;
};

/**
 * tally_oom_select() - choose the candidate with the highest badness.
 * @cands: @nr candidates; their output fields are written.
 * @nr: how many.
 * @opts: how to choose, or NULL for %TALLY_OOM_OPTIONS_INIT.
 * @res: the choice.
 *
 * Ineligible candidates: %TALLY_OOM_UNKILLABLE or score_adj -1000.  An
 * eligible %TALLY_OOM_PREFER candidate is chosen at once (one precise sum,
 * for its @frees, unless max_precise is 0; the others get their pass-1
 * intervals).  Badness arithmetic saturates at LONG_MIN + 1 and LONG_MAX.
 *
 * Cost: pass 1 one load per counter per candidate; pass 2 at most
 * max_precise precise sums and at most 6 scans of the array (in key order
 * for the first 128 survivors, then in index order), so a large budget
 * never costs more than a precise scan plus those scans.
 *
 * MT-safe against adds to the candidates' counters: the choice is then one
 * of the eligible candidates, judged on sums taken while the adds ran, and
 * @exact only describes those sums.  The candidates must stay initialized
 * during the call.
 *
 * Context: MT-safe against adds to the candidates' counters (see above;
 * concurrent selections must not share @cands); async-signal-safe when @opts's
 * badness callback is: no lock, no allocation.
 *
 * Return: 0, -ENOENT when no candidate is eligible (including @nr 0),
 * -EINVAL for a NULL @res, a NULL @cands with @nr > 0, an unknown method,
 * a candidate without counters, a NULL or destroyed counter, a negative
 * weight, a destroyed tally_mm, or a score_adj or flag out of range (@res
 * is untouched then).
 */
int tally_oom_select(struct tally_oom_candidate *cands, size_t nr,
		     const struct tally_oom_options *opts,
		     struct tally_oom_result *res);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_OOM_H */
