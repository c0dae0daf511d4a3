// SPDX-License-Identifier: MIT
/*
 * simulated_domain.c - a counter on a simulated 384-CPU machine (on any
 * machine): every update names its CPU.  Prints the tree's shape, the
 * approximate and the precise value, and the bound that holds between
 * them.
 *
 *	cc simulated_domain.c $(pkg-config --cflags --libs tally)
 */
#include <tally/counter.h>

#include "check.h"

#define NR_CPUS 384

int main(void)
{
	unsigned int arity[TALLY_MAX_LEVELS], levels, cpu, l;
	struct tally_domain *d;
	struct tally_counter c;
	unsigned long under, over;
	long approx, exact;

	CHECK(tally_domain_create_simulated(&d, NR_CPUS, TALLY_GROUP_LOW_BITS));
	CHECK(tally_counter_init(&c, d, 32));
	levels = tally_domain_shape(d, arity);
	printf("%u CPUs, shape {", tally_domain_nr_cpus(d));
	for (l = 0; l < levels; l++)
		printf(l ? ",%u" : "%u", arity[l]);
	printf("}\n");

	/* CPU n adds 1000 * (n % 64 + 1). */
	for (cpu = 0; cpu < NR_CPUS; cpu++)
		CHECK(tally_counter_add_cpu(&c, cpu, 1000 * (cpu % 64 + 1)));

	approx = tally_counter_approximate_sum(&c);
	exact = tally_counter_precise_sum(&c);
	CHECK(tally_counter_accuracy(d, 32, &under, &over));
	printf("approximate sum %ld\n", approx);
	printf("precise sum %ld\n", exact);
	printf("accuracy: precise - %lu <= approximate <= precise + %lu\n",
	       under, over);
	printf("bound holds: %s\n",
	       exact - (long)under <= approx && approx <= exact + (long)over ?
	       "yes" : "no");
	tally_counter_destroy(&c);
	tally_domain_destroy(d);
	return 0;
}
