/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BACKOFF_H
#define TALLY_BACKOFF_H

/*
 * backoff.h - the one bounded wait of the library.  Every wait for
 * another thread's short step (a transfer between a page counter and a
 * stock, a grace period, a callback call in flight) naps with it: 20 us,
 * doubling up to 1 ms, until its deadline.  A nap is a sleep, never a
 * spin: the thread waited for may be preempted, stopped or parked, and
 * the waiter gives up its CPU to it.
 */

#include <stdbool.h>

struct backoff {
	long deadline;			/* CLOCK_MONOTONIC, ns */
	long nap;			/* the next nap, ns */
};

/* CLOCK_MONOTONIC in nanoseconds. */
long backoff_now_ns(void);

/* Sleep @ns nanoseconds, through signals. */
void backoff_sleep_ns(long ns);

/* A wait that ends at @deadline_ns (CLOCK_MONOTONIC). */
void backoff_begin(struct backoff *b, long deadline_ns);

/* Nap once and return true; false, without a nap, past the deadline. */
bool backoff_nap(struct backoff *b);

#endif /* TALLY_BACKOFF_H */
