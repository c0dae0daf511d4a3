// SPDX-License-Identifier: MIT
/*
 * test_oom.c - victim selection (tally/oom.h) against a brute-force
 * precise oracle written here from the counters' precise sums (the oracle
 * does not use tally_mm's reads or anything of oom.c): random populations
 * of 1 to 10,000 tasks on 1 to 4096 simulated CPUs, ranges that overlap
 * their neighbours', all-equal values, negative transient values,
 * score_adj at both ends, flags, weighted counters with a policy,
 * budgets; then errors, policies that break their contract, and selection
 * while other threads add.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/oom.h>

#include "harness.h"
#include "util.h"

/* A population of tasks on one simulated domain. */
struct population {
	struct tally_domain *d;
	struct tally_mm *mm;
	struct tally_oom_candidate *cand;
	size_t nr;
};

static void population_free(struct population *p)
{
	for (size_t i = 0; i < p->nr; i++) {
		/* Leave every task at 0 so that destroy can check it. */
		for (unsigned int k = 0; k < TALLY_MM_NR_ITEMS; k++)
			tally_counter_set(&p->mm[i].counters[k], 0);
		CHECK_EQ_LONG(tally_mm_destroy(&p->mm[i]), 0);
	}
	free(p->mm);
	free(p->cand);
	tally_domain_destroy(p->d);
}

/*
 * Bring item @k of task @t to @v through adds on random CPUs, some of
 * them pairs that cancel, so that every slot holds a random remainder and
 * some slots go negative.
 */
static void set_item(struct population *p, size_t t, unsigned int k, long v,
		     struct rng *r)
{
	unsigned int nr = tally_domain_nr_cpus(p->d);
	unsigned int parts = 1 + (unsigned int)rng_below(r, 4);
	long left = v;

	for (unsigned int i = 0; i < parts; i++) {
		long part = i + 1 == parts ? left : left / 2;
		long noise = (long)rng_below(r, 1 << 16);

		tally_mm_add_cpu(&p->mm[t], (unsigned int)rng_below(r, nr), k,
				 part + noise);
		tally_mm_add_cpu(&p->mm[t], (unsigned int)rng_below(r, nr), k,
				 -noise);
		left -= part;
	}
}

enum shape {
	SPREAD,		/* most tasks small, a few large */
	OVERLAPPING,	/* neighbours closer than the accuracy width */
	ALL_EQUAL,
	NEGATIVE,	/* items that sum below 0 (clamped to 0) */
	NR_SHAPES
};

static const char *const shape_names[] = { "spread", "overlapping",
					   "all-equal", "negative" };

static void population_make(struct population *p, size_t nr,
			    unsigned int cpus, enum shape shape,
			    struct rng *r)
{
	unsigned long under, over;

	p->d = util_domain(cpus);
	p->nr = 0;
	p->mm = calloc(nr, sizeof(*p->mm));
	p->cand = calloc(nr, sizeof(*p->cand));
	if (!p->mm || !p->cand ||
	    tally_counter_accuracy(p->d, 32, &under, &over))
		abort();
	for (size_t t = 0; t < nr; t++) {
		struct tally_oom_candidate *c = &p->cand[t];

		if (tally_mm_init(&p->mm[t], p->d, 32, NULL))
			abort();
		p->nr++;
		for (unsigned int k = 0; k < TALLY_MM_NR_ITEMS; k++) {
			long v;

			switch (shape) {
			case SPREAD:
				v = (long)rng_below(r, 1000) *
				    (rng_below(r, 50) ? 10 : 5000);
				break;
			case OVERLAPPING:
				v = (long)(t * (under / 3 + 1));
				break;
			case ALL_EQUAL:
				v = 12345;
				break;
			default:
				v = (long)rng_below(r, 200000) - 150000;
				break;
			}
			set_item(p, t, k, v, r);
		}
		c->mm = &p->mm[t];
		/* score_adj at both ends and between; a few flags. */
		switch (rng_below(r, 8)) {
		case 0: c->score_adj = TALLY_OOM_SCORE_ADJ_MIN; break;
		case 1: c->score_adj = TALLY_OOM_SCORE_ADJ_MAX; break;
		case 2: c->score_adj = (int)rng_below(r, 2001) - 1000; break;
		default: c->score_adj = 0; break;
		}
		c->flags = rng_below(r, 20) ? 0 : TALLY_OOM_UNKILLABLE;
	}
}

/* The oracle: precise usage of every eligible task, the kernel's rule. */
static long oracle_usage(const struct tally_oom_candidate *c)
{
	long usage = 0;

	for (unsigned int k = 0; k < TALLY_MM_NR_ITEMS; k++) {
		long v = tally_counter_precise_sum(&c->mm->counters[k]);

		if (v > 0)
			usage += v;
	}
	return usage;
}

static long oracle_badness(const struct tally_oom_candidate *c,
			   unsigned long total)
{
	return oracle_usage(c) + c->score_adj * (long)(total / 1000);
}

static bool oracle_eligible(const struct tally_oom_candidate *c)
{
	return !(c->flags & TALLY_OOM_UNKILLABLE) && c->score_adj != -1000;
}

/* Index of the precise scan's choice, or SIZE_MAX. */
static size_t oracle_choice(const struct population *p, unsigned long total,
			    long *badness)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < p->nr; i++) {
		long b;

		if (!oracle_eligible(&p->cand[i]))
			continue;
		b = oracle_badness(&p->cand[i], total);
		if (best == SIZE_MAX || b > *badness) {
			best = i;
			*badness = b;
		}
	}
	return best;
}

/* Check one selection of @p against the oracle; false on a mismatch. */
static bool select_matches_oracle(struct population *p,
				  const struct tally_oom_options *o)
{
	struct tally_oom_result res;
	long want_badness = 0;
	size_t want = oracle_choice(p, o->total, &want_badness);
	int err = tally_oom_select(p->cand, p->nr, o, &res);

	if (want == SIZE_MAX)
		return CHECK_EQ_LONG(err, -ENOENT);
	if (!CHECK_EQ_LONG(err, 0) || !CHECK(res.index < p->nr) ||
	    !CHECK(oracle_eligible(&p->cand[res.index])))
		return false;
	if (o->method == TALLY_OOM_TWO_PASS &&
	    !CHECK_LE_ULONG(res.precise_sums, o->max_precise))
		return false;
	if (o->max_precise == UINT_MAX && !CHECK(res.exact))
		return false;
	/* Every eligible interval holds the precise badness. */
	for (size_t i = 0; i < p->nr; i++) {
		const struct tally_oom_candidate *c = &p->cand[i];
		long b;

		if (!oracle_eligible(c))
			continue;
		b = oracle_badness(c, o->total);
		if (!CHECK_LE_LONG(c->badness_min, b) ||
		    !CHECK_LE_LONG(b, c->badness_max)) {
			harness_log("candidate %zu", i);
			return false;
		}
	}
	if (!res.exact)
		return true;
	if (!CHECK_EQ_LONG((long)res.index, (long)want) ||
	    !CHECK_LE_LONG(res.badness_min, want_badness) ||
	    !CHECK_LE_LONG(want_badness, res.badness_max) ||
	    (res.precise_chosen && !CHECK_EQ_LONG(res.badness, want_badness)) ||
	    !CHECK_LE_LONG(res.frees.min, oracle_usage(&p->cand[want])) ||
	    !CHECK_LE_LONG(oracle_usage(&p->cand[want]), res.frees.max))
		return false;
	if (res.precise_chosen &&
	    !CHECK_EQ_LONG(res.frees.value, oracle_usage(&p->cand[want])))
		return false;
	return true;
}

TEST(two_pass_choice_equals_the_precise_scan_whenever_it_says_exact)
{
	static const size_t sizes[] = { 1, 2, 3, 40, 1000, 10000 };
	static const unsigned int cpus[] = { 1, 2, 3, 64, 256, 4096 };
	static const unsigned int budgets[] = { 0, 1, 16, UINT_MAX };
	unsigned long exact = 0, runs = 0;
	struct rng r = rng_seed(0);

	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		for (size_t c = 0; c < ARRAY_SIZE(cpus); c++) {
			/* Memory: keep tasks x CPUs at most 4.1 million. */
			if (sizes[s] * cpus[c] > 4100000 ||
			    (long)(sizes[s] * cpus[c]) > harness_scale(4100000))
				continue;
			for (int shape = 0; shape < NR_SHAPES; shape++) {
				struct population p;
				bool ok = true;

				/* The largest rows: the hardest shape only. */
				if (sizes[s] * cpus[c] > 2600000 &&
				    shape != OVERLAPPING)
					continue;

				population_make(&p, sizes[s], cpus[c], shape,
						&r);
				for (size_t b = 0; ok && b < ARRAY_SIZE(budgets);
				     b++) {
					struct tally_oom_options o =
						TALLY_OOM_OPTIONS_INIT;
					struct tally_oom_result res;

					o.max_precise = budgets[b];
					o.total = rng_below(&r, 2) ? 0 :
						  rng_below(&r, 1ul << 40);
					ok = select_matches_oracle(&p, &o);
					if (!ok)
						harness_log(
							"%zu tasks, %u CPUs, %s, budget %u, total %lu",
							sizes[s], cpus[c],
							shape_names[shape],
							budgets[b], o.total);
					if (ok && !tally_oom_select(p.cand, p.nr,
								    &o, &res)) {
						exact += res.exact;
						runs++;
					}
					o.method = TALLY_OOM_PRECISE;
					ok = ok && select_matches_oracle(&p, &o);
				}
				population_free(&p);
				if (!ok)
					return;
			}
		}
	}
	/* The check above must have had exact results to compare. */
	CHECK(exact * 2 > runs);
	harness_log("%lu of %lu selections exact", exact, runs);
}

TEST(a_dominant_task_is_chosen_without_any_precise_sum)
{
	struct rng r = rng_seed(1);
	struct population p;
	struct tally_oom_result res;

	population_make(&p, 1000, 64, SPREAD, &r);
	for (size_t i = 0; i < p.nr; i++)
		p.cand[i].score_adj = 0, p.cand[i].flags = 0;
	set_item(&p, 500, TALLY_MM_ANON, 1l << 40, &r);
	REQUIRE(tally_oom_select(p.cand, p.nr, NULL, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 500);
	CHECK(res.exact);
	CHECK_EQ_LONG(res.precise_sums, 0);
	CHECK(!res.precise_chosen);
	CHECK_EQ_LONG((long)res.eligible, 1000);
	population_free(&p);
}

TEST(equal_badness_goes_to_the_lowest_index_in_both_methods)
{
	struct tally_domain *d = util_domain(1);
	struct tally_mm mm[4];
	struct tally_oom_candidate c[4];
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;

	memset(c, 0, sizeof(c));
	for (int i = 0; i < 4; i++) {
		REQUIRE(tally_mm_init(&mm[i], d, 2, NULL) == 0);
		/* Badness 2, 8, 8, 8: three tie for the worst. */
		tally_mm_add_cpu(&mm[i], 0, TALLY_MM_ANON, i == 0 ? 2 : 8);
		c[i].mm = &mm[i];
	}
	for (int method = 0; method < 2; method++) {
		o.method = method;
		REQUIRE(tally_oom_select(c, 4, &o, &res) == 0);
		CHECK_EQ_LONG((long)res.index, 1);
		CHECK_EQ_LONG(res.badness, 8);
		CHECK(res.exact);
	}
	for (int i = 0; i < 4; i++) {
		tally_mm_add_cpu(&mm[i], 0, TALLY_MM_ANON, i == 0 ? -2 : -8);
		CHECK_EQ_LONG(tally_mm_destroy(&mm[i]), 0);
	}
	tally_domain_destroy(d);
}

/* Badness = usage + the offset of the candidate's index. */
static long usage_plus_offset(const struct tally_oom_candidate *c, long usage,
			      void *arg)
{
	const struct tally_oom_candidate *base = ((void **)arg)[0];
	const long *offset = ((void **)arg)[1];

	return usage + offset[c - base];
}

TEST(a_tie_at_the_edge_of_an_interval_goes_to_the_lower_index)
{
	struct tally_domain *d = util_domain(1);
	struct tally_counter cnt[2];
	const struct tally_counter *ptr[2] = { &cnt[0], &cnt[1] };
	static const long offset[2] = { -1, 0 };
	struct tally_oom_candidate c[2];
	void *arg[2] = { c, (void *)offset };
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;

	/*
	 * 1 CPU, batch 2: a counter reads [approx, approx + 1].
	 * Candidate 0: slot 11, approx 10, offset -1: [9, 10], precise 10.
	 * Candidate 1: slot 10, approx 10, offset 0: [10, 11], precise 10.
	 * Candidate 1's min equals candidate 0's max, yet it does not win:
	 * both are 10 and candidate 0 has the lower index.
	 */
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 2; i++) {
		REQUIRE(tally_counter_init(&cnt[i], d, 2) == 0);
		tally_counter_add_cpu(&cnt[i], 0, 11 - i);
		c[i].counters = &ptr[i];
		c[i].nr_counters = 1;
	}
	o.badness = usage_plus_offset;
	o.arg = arg;
	REQUIRE(tally_oom_select(c, 2, &o, &res) == 0);
	CHECK_EQ_LONG(c[0].badness_max, c[1].badness_min);
	CHECK_EQ_LONG((long)res.index, 0);
	CHECK_EQ_LONG(res.badness, 10);
	CHECK(res.exact);
	for (int i = 0; i < 2; i++)
		tally_counter_destroy(&cnt[i]);
	tally_domain_destroy(d);
}

TEST(prefer_wins_and_unkillable_or_adj_min_never_do)
{
	struct rng r = rng_seed(2);
	struct population p;
	struct tally_oom_result res;

	population_make(&p, 100, 8, SPREAD, &r);
	for (size_t i = 0; i < p.nr; i++)
		p.cand[i].score_adj = 0, p.cand[i].flags = 0;
	set_item(&p, 10, TALLY_MM_ANON, 1l << 40, &r);
	set_item(&p, 20, TALLY_MM_ANON, 1l << 39, &r);
	p.cand[10].score_adj = TALLY_OOM_SCORE_ADJ_MIN;
	REQUIRE(tally_oom_select(p.cand, p.nr, NULL, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 20);
	CHECK_EQ_LONG(p.cand[10].badness_max, LONG_MIN);
	p.cand[20].flags = TALLY_OOM_UNKILLABLE;
	REQUIRE(tally_oom_select(p.cand, p.nr, NULL, &res) == 0);
	CHECK(res.index != 10 && res.index != 20);

	/* Preferred: the lowest eligible index, whatever its size. */
	p.cand[30].flags = TALLY_OOM_PREFER | TALLY_OOM_UNKILLABLE;
	p.cand[40].flags = TALLY_OOM_PREFER;
	p.cand[50].flags = TALLY_OOM_PREFER;
	for (int method = 0; method < 2; method++) {
		struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;

		o.method = method;
		REQUIRE(tally_oom_select(p.cand, p.nr, &o, &res) == 0);
		CHECK_EQ_LONG((long)res.index, 40);
		CHECK(res.exact && res.precise_chosen);
		CHECK_EQ_LONG(res.precise_sums, 1);
		CHECK_EQ_LONG(res.frees.value, oracle_usage(&p.cand[40]));
		/* A budget of 0 takes no precise sum, not even for frees. */
		o.max_precise = 0;
		REQUIRE(tally_oom_select(p.cand, p.nr, &o, &res) == 0);
		CHECK_EQ_LONG((long)res.index, 40);
		CHECK_EQ_LONG(res.precise_sums, 0);
		CHECK(!res.precise_chosen);
		CHECK(res.frees.min <= oracle_usage(&p.cand[40]) &&
		      oracle_usage(&p.cand[40]) <= res.frees.max);
	}
	population_free(&p);
}

TEST(score_adj_scales_with_the_total_and_can_pick_a_small_task)
{
	struct tally_domain *d = util_domain(4);
	struct tally_mm mm[2];
	struct tally_oom_candidate c[2];
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;

	memset(c, 0, sizeof(c));
	for (int i = 0; i < 2; i++) {
		REQUIRE(tally_mm_init(&mm[i], d, 32, NULL) == 0);
		c[i].mm = &mm[i];
	}
	tally_mm_add_cpu(&mm[0], 1, TALLY_MM_ANON, 1 << 30);	/* 1 GiB */
	tally_mm_add_cpu(&mm[1], 2, TALLY_MM_FILE, 1 << 20);	/* 1 MiB */
	c[1].score_adj = 500;
	o.total = 4ul << 30;	/* +500 = +2 GiB */
	REQUIRE(tally_oom_select(c, 2, &o, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 1);
	CHECK(res.exact);
	CHECK_EQ_LONG(res.badness, (1l << 20) + 500 * (long)(o.total / 1000));
	CHECK(res.frees.min <= 1 << 20 && 1 << 20 <= res.frees.max);
	/* Saturation: an adj times a huge total stays ordered. */
	o.total = ULONG_MAX;
	c[0].score_adj = -999;
	REQUIRE(tally_oom_select(c, 2, &o, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 1);
	CHECK_EQ_LONG(res.badness, LONG_MAX);
	CHECK_EQ_LONG(c[0].badness_max, LONG_MIN + 1);	/* saturated */
	tally_mm_add_cpu(&mm[0], 1, TALLY_MM_ANON, -(1 << 30));
	tally_mm_add_cpu(&mm[1], 2, TALLY_MM_FILE, -(1 << 20));
	for (int i = 0; i < 2; i++)
		CHECK_EQ_LONG(tally_mm_destroy(&mm[i]), 0);
	tally_domain_destroy(d);
}

/* ClickHouse-style: usage over the task's soft limit, in thousandths. */
struct soft_limits {
	const struct tally_oom_candidate *base;
	long soft[3];
};

static long over_soft_limit(const struct tally_oom_candidate *c, long usage,
			    void *arg)
{
	const struct soft_limits *s = arg;

	return usage * 1000 / s->soft[c - s->base];
}

TEST(weighted_counters_and_a_policy_choose_by_usage_over_soft_limit)
{
	struct tally_domain *d = util_domain(64);
	struct tally_counter q[3][2];
	const struct tally_counter *ptr[3][2];
	static const long weights[2] = { 1, 2 };
	struct tally_oom_candidate c[3];
	struct soft_limits limits = { c, { 100000, 1000000, 10000000 } };
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;
	struct rng r = rng_seed(3);

	memset(c, 0, sizeof(c));
	for (int i = 0; i < 3; i++) {
		REQUIRE(tally_counter_init_many(q[i], NULL, 2, d, 32) == 0);
		for (int k = 0; k < 2; k++) {
			ptr[i][k] = &q[i][k];
			for (int n = 0; n < 100; n++)
				tally_counter_add_cpu(&q[i][k],
					(unsigned int)rng_below(&r, 64),
					(i + 1) * 1000 * (k + 1));
		}
		c[i].counters = ptr[i];
		c[i].weights = weights;
		c[i].nr_counters = 2;
	}
	/* usage = 1 * 100,000 (i+1) + 2 * 200,000 (i+1) = 500,000 (i+1) */
	REQUIRE(tally_oom_select(c, 3, NULL, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 2);
	CHECK(res.exact);
	if (res.precise_chosen)
		CHECK_EQ_LONG(res.frees.value, 1500000);
	/* Over soft limit: 5000, 1000 and 150 thousandths. */
	o.badness = over_soft_limit;
	o.arg = &limits;
	o.max_precise = UINT_MAX;
	REQUIRE(tally_oom_select(c, 3, &o, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 0);
	CHECK(res.exact);
	limits.soft[0] = 10000000;	/* 50, 1000, 150: task 1 */
	REQUIRE(tally_oom_select(c, 3, &o, &res) == 0);
	CHECK_EQ_LONG((long)res.index, 1);
	CHECK(res.exact);
	if (res.precise_chosen)
		CHECK_EQ_LONG(res.badness, 1000);
	for (int i = 0; i < 3; i++)
		tally_counter_destroy_many(q[i], 2);
	tally_domain_destroy(d);
}

/* --- weighted counters and a policy, against the oracle ------------------ */

struct weighted {
	struct tally_domain *d;
	struct tally_counter (*cnt)[3];
	const struct tally_counter *(*ptr)[3];
	long (*weights)[3];
	long *soft;
	struct tally_oom_candidate *cand;
	size_t nr;
};

/* Usage over the candidate's soft limit, in thousandths: monotone. */
static long per_mille_of_soft(const struct tally_oom_candidate *c,
			      long usage, void *arg)
{
	const struct weighted *w = arg;

	return (long)((__int128)usage * 1000 / w->soft[c - w->cand]);
}

static long oracle_weighted(const struct weighted *w, size_t i)
{
	long usage = 0;

	for (int k = 0; k < 3; k++) {
		long v = tally_counter_precise_sum(&w->cnt[i][k]);

		if (v > 0)
			usage += w->weights[i][k] * v;
	}
	return (long)((__int128)usage * 1000 / w->soft[i]);
}

TEST(weighted_counters_with_a_policy_match_the_oracle_whenever_exact)
{
	static const size_t sizes[] = { 1, 40, 1000 };
	static const unsigned int cpus[] = { 1, 64, 4096 };
	static const unsigned int budgets[] = { 0, 3, 16, UINT_MAX };
	struct rng r = rng_seed(5);
	unsigned long exact = 0, runs = 0;

	for (size_t si = 0; si < ARRAY_SIZE(sizes); si++) {
		for (size_t ci = 0; ci < ARRAY_SIZE(cpus); ci++) {
			size_t nr = sizes[si];
			struct weighted w = { util_domain(cpus[ci]),
				calloc(nr, sizeof(*w.cnt)),
				calloc(nr, sizeof(*w.ptr)),
				calloc(nr, sizeof(*w.weights)),
				calloc(nr, sizeof(long)),
				calloc(nr, sizeof(*w.cand)), nr };

			REQUIRE(w.cnt && w.ptr && w.weights && w.soft &&
				w.cand);
			for (size_t i = 0; i < nr; i++) {
				REQUIRE(tally_counter_init_many(w.cnt[i], NULL,
						3, w.d, 32) == 0);
				for (int k = 0; k < 3; k++) {
					w.ptr[i][k] = &w.cnt[i][k];
					w.weights[i][k] = (long)rng_below(&r, 4);
					for (int n = 0; n < 3; n++)
						tally_counter_add_cpu(
							&w.cnt[i][k],
							(unsigned int)rng_below(
								&r, cpus[ci]),
							(long)rng_below(&r,
								100000) -
								20000);
				}
				w.soft[i] = 1 + (long)rng_below(&r, 1000);
				w.cand[i].counters = w.ptr[i];
				w.cand[i].weights = w.weights[i];
				w.cand[i].nr_counters = 3;
			}
			for (size_t b = 0; b < ARRAY_SIZE(budgets); b++) {
				struct tally_oom_options o =
					TALLY_OOM_OPTIONS_INIT;
				struct tally_oom_result res;
				size_t want = 0;

				o.badness = per_mille_of_soft;
				o.arg = &w;
				o.max_precise = budgets[b];
				for (size_t i = 1; i < nr; i++)
					if (oracle_weighted(&w, i) >
					    oracle_weighted(&w, want))
						want = i;
				if (!CHECK_EQ_LONG(tally_oom_select(w.cand, nr,
						&o, &res), 0))
					break;
				CHECK_LE_ULONG(res.precise_sums, budgets[b]);
				runs++;
				if (!res.exact)
					continue;
				exact++;
				if (!CHECK_EQ_LONG((long)res.index, (long)want))
					harness_log("%zu tasks, %u CPUs, budget %u",
						    nr, cpus[ci], budgets[b]);
			}
			for (size_t i = 0; i < nr; i++)
				tally_counter_destroy_many(w.cnt[i], 3);
			free(w.cnt);
			free(w.ptr);
			free(w.weights);
			free(w.soft);
			free(w.cand);
			tally_domain_destroy(w.d);
		}
	}
	CHECK(exact * 2 > runs);
}

/* --- policies that break their contract ---------------------------------- */

static long decreasing(const struct tally_oom_candidate *c, long usage,
		       void *arg)
{
	(void)c;
	(void)arg;
	return -usage;
}

static long drifting(const struct tally_oom_candidate *c, long usage,
		     void *arg)
{
	long *calls = arg;

	(void)c;
	/* Its "limit" moves on every call, as if another thread set it. */
	return usage / (1 + (*calls)++ % 7);
}

TEST(a_policy_that_breaks_its_contract_still_gets_an_eligible_candidate)
{
	struct rng r = rng_seed(6);
	struct population p;
	long calls = 0;

	population_make(&p, 300, 64, OVERLAPPING, &r);
	for (size_t i = 0; i < p.nr; i++)
		p.cand[i].flags = i % 3 ? 0 : TALLY_OOM_UNKILLABLE;
	for (int policy = 0; policy < 2; policy++) {
		for (unsigned int budget = 0; budget < 40; budget += 13) {
			struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
			struct tally_oom_result res;

			o.badness = policy ? drifting : decreasing;
			o.arg = &calls;
			o.max_precise = budget;
			REQUIRE(tally_oom_select(p.cand, p.nr, &o, &res) == 0);
			CHECK(res.index < p.nr);
			CHECK(oracle_eligible(&p.cand[res.index]));
			CHECK_LE_LONG(res.badness_min, res.badness_max);
			CHECK_LE_ULONG(res.precise_sums, budget);
		}
	}
	population_free(&p);
}

TEST(a_budget_without_limit_sums_many_overlapping_tasks_once_each)
{
	struct rng r = rng_seed(7);
	struct population p;
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;
	long want_badness = 0;
	size_t want;

	/* All equal on 4 CPUs: every interval overlaps every other. */
	population_make(&p, (size_t)harness_scale(20000), 4, ALL_EQUAL, &r);
	for (size_t i = 0; i < p.nr; i++)
		p.cand[i].score_adj = 0, p.cand[i].flags = 0;
	want = oracle_choice(&p, 0, &want_badness);
	o.max_precise = UINT_MAX;
	REQUIRE(tally_oom_select(p.cand, p.nr, &o, &res) == 0);
	CHECK(res.exact);
	CHECK_EQ_LONG((long)res.index, (long)want);
	CHECK_LE_ULONG(res.precise_sums, p.nr);
	population_free(&p);
}

TEST(bad_input_is_refused_and_leaves_the_result_untouched)
{
	struct tally_domain *d = util_domain(4);
	struct tally_mm mm, dead;
	struct tally_counter cnt;
	const struct tally_counter *ptrs[2] = { &cnt, NULL };
	const long negative[1] = { -1 };
	struct tally_oom_candidate c;
	struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res, before;

	REQUIRE(tally_mm_init(&mm, d, 32, NULL) == 0);
	REQUIRE(tally_mm_init(&dead, d, 32, NULL) == 0);
	REQUIRE(tally_counter_init(&cnt, d, 32) == 0);
	tally_mm_destroy(&dead);
	memset(&before, 0xa5, sizeof(before));
	res = before;

#define REFUSED(call, err)						\
	do {								\
		CHECK_EQ_LONG(call, err);				\
		CHECK(!memcmp(&res, &before, sizeof(res)));		\
	} while (0)
	c = (struct tally_oom_candidate){ .mm = &mm };
	REFUSED(tally_oom_select(&c, 1, NULL, NULL), -EINVAL);
	REFUSED(tally_oom_select(NULL, 1, NULL, &res), -EINVAL);
	REFUSED(tally_oom_select(NULL, 0, NULL, &res), -ENOENT);
	o.method = 7;
	REFUSED(tally_oom_select(&c, 1, &o, &res), -EINVAL);
	c.score_adj = 1001;
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c.score_adj = -1001;
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c.score_adj = -1000;
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -ENOENT);
	c = (struct tally_oom_candidate){ .mm = &mm, .flags = 0x4 };
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c.flags = TALLY_OOM_UNKILLABLE;
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -ENOENT);
	c = (struct tally_oom_candidate){ .mm = &dead };
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c = (struct tally_oom_candidate){ .counters = ptrs, .nr_counters = 0 };
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c.nr_counters = 2;	/* the second is NULL */
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c.nr_counters = 1;
	c.weights = negative;
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	c = (struct tally_oom_candidate){ .nr_counters = 1 };
	REFUSED(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	/* A bad candidate anywhere refuses the whole call. */
	{
		struct tally_oom_candidate two[2] = {
			{ .mm = &mm }, { .mm = &mm, .score_adj = 2000 },
		};

		REFUSED(tally_oom_select(two, 2, NULL, &res), -EINVAL);
	}
#undef REFUSED
	c = (struct tally_oom_candidate){ .counters = ptrs, .nr_counters = 1 };
	CHECK_EQ_LONG(tally_oom_select(&c, 1, NULL, &res), 0);
	CHECK_EQ_LONG((long)res.index, 0);
	tally_counter_destroy(&cnt);
	c = (struct tally_oom_candidate){ .counters = ptrs, .nr_counters = 1 };
	CHECK_EQ_LONG(tally_oom_select(&c, 1, NULL, &res), -EINVAL);
	CHECK_EQ_LONG(tally_mm_destroy(&mm), 0);
	tally_domain_destroy(d);
}

/* --- selection while other threads add ----------------------------------- */

struct churn {
	struct tally_mm *mm;
	size_t nr;
	int stop;
	uint64_t stream;
};

static void *churn_counters(void *arg)
{
	struct churn *ch = arg;
	struct rng r = rng_seed(ch->stream);

	while (!__atomic_load_n(&ch->stop, __ATOMIC_RELAXED)) {
		size_t t = rng_below(&r, ch->nr);
		unsigned int k = (unsigned int)rng_below(&r, 5);
		long delta = (long)rng_below(&r, 1 << 20);

		tally_mm_add(&ch->mm[t], k, delta);
		tally_mm_add(&ch->mm[t], k, -delta);
		if (rng_below(&r, 1024) == 0)
			util_pin_random(&r);
	}
	return NULL;
}

TEST(selection_while_threads_add_returns_an_eligible_candidate)
{
	enum { TASKS = 300, THREADS = 4 };
	struct tally_mm *mm = calloc(TASKS, sizeof(*mm));
	struct tally_oom_candidate *c = calloc(TASKS, sizeof(*c));
	struct churn ch = { mm, TASKS, 0, 0 };
	struct churn per[THREADS];
	pthread_t tid[THREADS];
	struct rng r = rng_seed(4);
	long rounds = harness_scale(2000);

	REQUIRE(mm && c);
	for (size_t t = 0; t < TASKS; t++) {
		REQUIRE(tally_mm_init(&mm[t], NULL, 4096, NULL) == 0);
		tally_mm_add(&mm[t], TALLY_MM_ANON,
			     (long)rng_below(&r, 1 << 24));
		c[t].mm = &mm[t];
		c[t].flags = t % 7 == 0 ? TALLY_OOM_UNKILLABLE : 0;
	}
	for (int i = 0; i < THREADS; i++) {
		per[i] = ch;
		per[i].stream = (uint64_t)i + 10;
		REQUIRE(pthread_create(&tid[i], NULL, churn_counters,
				       &per[i]) == 0);
	}
	for (long n = 0; n < rounds; n++) {
		struct tally_oom_options o = TALLY_OOM_OPTIONS_INIT;
		struct tally_oom_result res;

		o.method = n % 5 == 0 ? TALLY_OOM_PRECISE : TALLY_OOM_TWO_PASS;
		o.max_precise = (unsigned int)(n % 20);
		if (!CHECK_EQ_LONG(tally_oom_select(c, TASKS, &o, &res), 0) ||
		    !CHECK(res.index < TASKS && res.index % 7 != 0) ||
		    !CHECK(res.frees.min <= res.frees.max))
			break;
	}
	for (int i = 0; i < THREADS; i++)
		__atomic_store_n(&per[i].stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	for (size_t t = 0; t < TASKS; t++) {
		tally_counter_set(&mm[t].counters[TALLY_MM_ANON], 0);
		CHECK_EQ_LONG(tally_mm_destroy(&mm[t]), 0);
	}
	free(mm);
	free(c);
}
