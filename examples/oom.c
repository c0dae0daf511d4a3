// SPDX-License-Identifier: MIT
/*
 * oom.c - memory counters for three "queries" of a server, and the choice
 * of the one to cancel when memory runs out: the 2-pass selection reads
 * one load per counter for every query and sums CPUs only for the few
 * whose intervals overlap the worst one's.
 *
 *	cc oom.c $(pkg-config --cflags --libs tally)
 */
#include <limits.h>
#include <tally/oom.h>

#include "check.h"

struct query {
	const char *sql;
	struct tally_mm mm;	/* RSS-style counters, in bytes */
};

int main(void)
{
	struct query q[3] = {
		{ .sql = "SELECT 1" },
		{ .sql = "SELECT * FROM big JOIN huge" },
		{ .sql = "INSERT INTO log" },
	};
	static const long anon[3] = { 4096, 3l << 30, 64l << 20 };
	struct tally_oom_candidate cand[3] = { { 0 } };
	struct tally_oom_options opts = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;
	int i;

	for (i = 0; i < 3; i++) {
		CHECK(tally_mm_init(&q[i].mm, NULL, 0, NULL));	/* system CPUs */
		/* Any thread, a few ns each: an allocation, then a free. */
		CHECK(tally_mm_add(&q[i].mm, TALLY_MM_ANON, anon[i] + 8192));
		CHECK(tally_mm_add(&q[i].mm, TALLY_MM_ANON, -8192));
		CHECK(tally_mm_add(&q[i].mm, TALLY_MM_FILE, 1 << 20));
		cand[i].mm = &q[i].mm;
		printf("%-28s rss %ld bytes\n", q[i].sql,
		       CHECK(tally_mm_precise(&q[i].mm, TALLY_MM_RSS)));
	}
	cand[0].flags = TALLY_OOM_UNKILLABLE;	/* never cancel this one */
	opts.total = 4ul << 30;			/* score_adj is per mille of it */

	CHECK(tally_oom_select(cand, 3, &opts, &res));
	printf("cancel: %s\n", q[res.index].sql);
	/* Approximate unless it took a precise sum; in [min, max] when no
	 * add runs meanwhile. */
	printf("it frees about %ld bytes, between %ld and %ld\n",
	       res.frees.value, res.frees.min, res.frees.max);
	printf("same choice as a precise scan: %s\n", res.exact ? "yes" : "no");

	for (i = 0; i < 3; i++) {
		CHECK(tally_mm_add(&q[i].mm, TALLY_MM_ANON, -anon[i]));
		CHECK(tally_mm_add(&q[i].mm, TALLY_MM_FILE, -(1 << 20)));
		CHECK(tally_mm_destroy(&q[i].mm));	/* -ENOTEMPTY if not 0 */
	}
	return 0;
}
