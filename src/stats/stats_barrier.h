/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_BARRIER_H
#define TALLY_STATS_BARRIER_H

/*
 * stats_barrier.h - what the flush engine (stats_flush.c) asks of the
 * process-wide barriers (stats_barrier.c).  The mode's setup and
 * stats_flush_settle(), which the other files call, are in
 * stats_internal.h.
 */

#include <stdbool.h>

struct tally_stats_tree;

/*
 * The ticket an idle mark notes: settled at once when updates order
 * themselves (@immediate: fenced, simulated), else by the next barrier
 * to start.
 */
unsigned long stats_barrier_mark(bool immediate);

/*
 * The highest ticket whose barrier completed (an acquire: load it before
 * the stats whose stores those barriers made visible).
 */
unsigned long stats_barrier_done(void);

/* Whether a barrier with a ticket after @mark has completed by @done. */
static inline bool stats_mark_settled(unsigned long done, unsigned long mark)
{
	return (long)(done - mark) > 0;
}

/* A barrier with a ticket: it settles every mark taken before it. */
void stats_barrier_ticketed(struct tally_stats_tree *t);

/* Whether updates and flushes fence (no membarrier()): marks settle at once. */
bool stats_barriers_fenced(void);

#endif /* TALLY_STATS_BARRIER_H */
