// SPDX-License-Identifier: MIT
/*
 * backoff.c - the library's one bounded wait (backoff.h): naps that
 * double from 20 us to 1 ms, so that a wait for a step of a few
 * instructions ends within microseconds when the thread taking it runs,
 * and costs at most one wake-up per millisecond when it does not.
 */
#include <errno.h>
#include <time.h>

#include "backoff.h"
#include "inject.h"

#define BACKOFF_FIRST_NAP_NS 20000l
#define BACKOFF_LONGEST_NAP_NS 1000000l

long backoff_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000l + ts.tv_nsec;
}

void backoff_sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000l, ns % 1000000000l };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void backoff_begin(struct backoff *b, long deadline_ns)
{
	b->deadline = deadline_ns;
	b->nap = BACKOFF_FIRST_NAP_NS;
}

bool backoff_nap(struct backoff *b)
{
	long now = backoff_now_ns(), nap = b->nap;

	if (now >= b->deadline)
		return false;
	(void)tally_inject(TALLY_INJECT_BACKOFF_NAP);
	if (nap > b->deadline - now)
		nap = b->deadline - now;
	backoff_sleep_ns(nap);
	b->nap = b->nap * 2 > BACKOFF_LONGEST_NAP_NS ? BACKOFF_LONGEST_NAP_NS
						     : b->nap * 2;
	return true;
}
