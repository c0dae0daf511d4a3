// SPDX-License-Identifier: MIT
/*
 * memcg_counter.c - the page counters of memory groups, their protected
 * usage and their events.
 *
 * Every change of a level's usage also updates what it protects
 * (min(usage, min) and min(usage, low)) in its parent's sums of its
 * children's protected usage, as the kernel's propagate_protected_usage():
 * effective protection then reads its siblings' total in O(1) instead of
 * walking them.  Costs one exchange per protected level changed; none for
 * a level without min or low.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "runtime/inject.h"
#include "memcg_internal.h"

/* ---- chains of page counters ----------------------------------------- */

/* The live group a destroyed one hands its work to. */
struct tally_memcg *memcg_resolve(struct tally_memcg *g)
{
	while (ACQUIRE(&g->dead))
		g = g->parent;
	return g;
}

static void raise_peak(struct tally_memcg *g, long usage)
{
	long peak = LOAD(&g->peak);

	while (usage > peak &&
	       !__atomic_compare_exchange_n(&g->peak, &peak, usage, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void propagate_one(long *mine, long *sum, long setting, long usage)
{
	long prot = usage < setting ? usage : setting, old;

	if (prot < 0)
		prot = 0;
	if (!prot && !LOAD(mine))
		return;
	old = __atomic_exchange_n(mine, prot, __ATOMIC_SEQ_CST);
	if (prot != old)
		__atomic_add_fetch(sum, prot - old, __ATOMIC_RELAXED);
}

/* A destroyed group protects nothing: its part leaves its parent's sums. */
void memcg_unprotect(struct tally_memcg *g)
{
	long min = __atomic_exchange_n(&g->min_usage, 0, __ATOMIC_SEQ_CST);
	long low = __atomic_exchange_n(&g->low_usage, 0, __ATOMIC_SEQ_CST);

	if (g->parent) {
		__atomic_sub_fetch(&g->parent->children_min_usage, min,
				   __ATOMIC_RELAXED);
		__atomic_sub_fetch(&g->parent->children_low_usage, low,
				   __ATOMIC_RELAXED);
	}
}

/*
 * @g's usage is now @usage: bring its protected usage in its parent's
 * sums up to date.  A destroy that marked it dead in between takes it out
 * again (it exchanges after marking; we read the mark after exchanging).
 */
void memcg_propagate_protected(struct tally_memcg *g, long usage)
{
	if (!g->parent)
		return;
	propagate_one(&g->min_usage, &g->parent->children_min_usage,
		      LOAD(&g->min), usage);
	propagate_one(&g->low_usage, &g->parent->children_low_usage,
		      LOAD(&g->low), usage);
	if (__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST))
		memcg_unprotect(g);
}

void memcg_counters_sub(struct tally_memcg *from, struct tally_memcg *upto,
			 long n)
{
	for (struct tally_memcg *g = from; g != upto; g = g->parent)
		memcg_propagate_protected(g, __atomic_sub_fetch(&g->usage, n,
							__ATOMIC_RELAXED));
}

/*
 * Raise every level from @g up by @n, each only if it stays within its
 * max (within LONG_MAX when @force: a NOFAIL charge).  On failure, undo
 * the levels below and return the level that refused.
 *
 * The max read before the CAS may be stale: tally_memcg_set_limit() may
 * have published a lower one and checked the usage in between.  Both
 * sides write, then read the other's word (seq_cst), so one sees the
 * other: after the CAS the max is read again, and a level that no longer
 * fits is undone and retried against the new max (or the setter sees the
 * usage and restores the old max).
 */
struct tally_memcg *memcg_counters_add(struct tally_memcg *g, long n,
					bool force)
{
	long raised[TALLY_MEMCG_MAX_DEPTH + 1];	/* each level's new usage */

	for (struct tally_memcg *l = g; l; l = l->parent) {
		long max, usage;

retry:
		max = force ? LONG_MAX : LOAD(&l->max);
		usage = LOAD(&l->usage);
		(void)tally_inject(TALLY_INJECT_MEMCG_BEFORE_CAS);
		do {
			if (usage > max - n) {
				memcg_counters_sub(g, l, n);
				return l;
			}
		} while (!__atomic_compare_exchange_n(&l->usage, &usage,
						      usage + n, true,
						      __ATOMIC_SEQ_CST,
						      __ATOMIC_RELAXED));
		if (!force &&
		    usage > __atomic_load_n(&l->max, __ATOMIC_SEQ_CST) - n) {
			__atomic_sub_fetch(&l->usage, n, __ATOMIC_RELAXED);
			goto retry;
		}
		raised[l->depth] = usage + n;
		memcg_propagate_protected(l, usage + n);
	}
	/*
	 * Peaks only once every level took the charge: a level that refused
	 * undid the ones below, whose peaks must not keep it.
	 */
	for (struct tally_memcg *l = g; l; l = l->parent)
		raise_peak(l, raised[l->depth]);
	return NULL;
}

struct tally_memcg *memcg_counters_try_add(struct tally_memcg *g, long n)
{
	return memcg_counters_add(g, n, false);
}

/* -ERANGE, with nothing changed, when @g's own level holds less than @n. */
int memcg_counters_uncharge(struct tally_memcg *g, long n)
{
	long usage = LOAD(&g->usage);

	do {
		if (usage < n)
			return -ERANGE;
	} while (!__atomic_compare_exchange_n(&g->usage, &usage, usage - n,
					      true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcg_propagate_protected(g, usage - n);
	memcg_counters_sub(g->parent, NULL, n);
	return 0;
}

/*
 * A drain's or an eviction's uncharge of what a slot of @g held.  A
 * destroyed group's slot goes back to its nearest live ancestor: until it
 * was drained, uncharges through a handle of the dead group could put
 * there bytes charged, after the destroy, to that ancestor alone.  A
 * caller that uncharged more than it charged may have left more there
 * than the counter holds: clamp at 0 rather than refuse, so that the
 * stocks' legitimate bytes are not kept counted for ever.
 */
void memcg_counters_give_back(struct tally_memcg *g, long n)
{
	long usage, take;

	g = memcg_resolve(g);
	usage = LOAD(&g->usage);

	do {
		take = usage < n ? usage : n;
	} while (!__atomic_compare_exchange_n(&g->usage, &usage, usage - take,
					      true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	if (take < n)
		INC(&g->tree->underflows);
	memcg_propagate_protected(g, usage - take);
	memcg_counters_sub(g->parent, NULL, take);
}

/* ---- events ----------------------------------------------------------- */

static void notify(struct tally_memcg *g)
{
	int fd = ACQUIRE(&g->evfd);
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the count is at its maximum, still readable. */
	}
}

/*
 * Add @count local events to @g, or to its live ancestor if it is
 * destroyed meanwhile.  Destroy sets dead, then takes the local counts
 * (exchange) for the parent; we add, then look at dead.  One of us sees
 * the other, and each count is moved by exactly one exchange.
 */
void memcg_add_local_events(struct tally_memcg *g, enum tally_memcg_event ev,
			    long count)
{
	while (count) {
		g = memcg_resolve(g);
		__atomic_add_fetch(&g->events_local[ev], count,
				   __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST))
			return;
		count = __atomic_exchange_n(&g->events_local[ev], 0,
					    __ATOMIC_SEQ_CST);
	}
}

void memcg_event(struct tally_memcg *g, enum tally_memcg_event ev)
{
	g = memcg_resolve(g);
	memcg_add_local_events(g, ev, 1);
	for (struct tally_memcg *l = g; l; l = l->parent) {
		INC(&l->events[ev]);
		notify(l);
	}
}

