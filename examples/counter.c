// SPDX-License-Identifier: MIT
/*
 * counter.c - one hierarchical per-CPU counter on this machine's CPUs:
 * two adds, then the cheap approximate read, the exact one, and the
 * interval the approximation guarantees.
 *
 *	cc counter.c $(pkg-config --cflags --libs tally)
 */
#include <tally/counter.h>

#include "check.h"

int main(void)
{
	struct tally_counter rss;
	long approx, exact, lo, hi;

	CHECK(tally_counter_init(&rss, NULL, 32)); /* system CPUs, batch 32 */
	tally_counter_add(&rss, 16);	/* a few ns: rseq add on this CPU */
	tally_counter_add(&rss, -4);

	approx = tally_counter_approximate_sum(&rss);	/* 1 to 8 loads */
	exact = tally_counter_precise_sum(&rss);	/* sums the CPUs */
	tally_counter_approximate_min_max(&rss, &lo, &hi); /* exact in it */
	printf("approximate sum %ld\n", approx);
	printf("precise sum %ld\n", exact);
	printf("precise sum in [%ld, %ld]: %s\n", lo, hi,
	       lo <= exact && exact <= hi ? "yes" : "no");
	tally_counter_destroy(&rss);
	return 0;
}
