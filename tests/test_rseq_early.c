// SPDX-License-Identifier: MIT
/*
 * test_rseq_early.c - updates made before tally's constructor ran.
 *
 * A constructor of priority 100 runs before tally's (101): it allocates,
 * updates through every rseq sequence and a counter, and records what it
 * added.  Until tally's constructor runs, the offset of the rseq area is
 * 0, which would make the fast paths read and write the thread control
 * block; they must take the slow path, which sets the mode up.  A
 * binary of its own: a failure may crash before main().
 */
#include <stdint.h>

#include "harness.h"
#include "util.h"

static long *slots;
static struct tally_counter counter;
static int counter_err = -1;
static ptrdiff_t offset_before;
static long added, exchanged_out, hint_or;
static unsigned int hint_cpu = ~0u;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wprio-ctor-dtor"
__attribute__((constructor(100))) static void update_before_tally(void)
{
	static const long offs[] = { sizeof(long), 2 * sizeof(long) };
	unsigned int cpu;

	offset_before = tally_rseq_area_offset;
	slots = tally_percpu_alloc(NULL, 3 * sizeof(long), 0);
	if (!slots)
		return;
	for (long i = 1; i <= 100; i++) {
		tally_percpu_add(slots, i);
		tally_percpu_add_return(slots, i, &cpu);
		added += 2 * i;
	}
	hint_or = (long)tally_percpu_add_hints(slots, offs, 2, 4, slots, 5,
					      &hint_cpu);
	added += 5;
	exchanged_out = tally_percpu_xchg(slots + 2, 0);
	counter_err = tally_counter_init(&counter, NULL, 4);
	if (!counter_err)
		for (long i = 1; i <= 100; i++)
			tally_counter_add(&counter, i);
}
#pragma GCC diagnostic pop

TEST(updates_before_the_library_constructor_are_exact)
{
	unsigned int nr = tally_domain_nr_cpus(tally_domain_system());
	long sum = 0, hints = 0, hints_left = 0;

	if (offset_before)
		harness_log("tally's constructor ran first: nothing early");
	REQUIRE(slots);
	for (unsigned int cpu = 0; cpu < nr; cpu++) {
		sum += tally_percpu_read_cpu(slots, cpu);
		hints += tally_percpu_read_cpu(slots + 1, cpu);
		hints_left += tally_percpu_read_cpu(slots + 2, cpu);
	}
	CHECK_EQ_LONG(sum, added);
	/* A restarted hint sequence may add its hints twice. */
	CHECK(hints >= 4 && hints % 4 == 0);
	CHECK(hint_or >= 4 && hint_or % 4 == 0);
	CHECK(hints_left + exchanged_out >= 4 &&
	      (hints_left + exchanged_out) % 4 == 0);
	CHECK(hint_cpu < nr);
	REQUIRE(counter_err == 0);
	CHECK_EQ_LONG(tally_counter_precise_sum(&counter), 5050);
	CHECK_EQ_ULONG(tally_counter_approximate_sum(&counter),
		       util_expected_top(&counter));
	tally_counter_destroy(&counter);
	tally_percpu_free(NULL, slots);
}
