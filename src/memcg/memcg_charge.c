// SPDX-License-Identifier: MIT
/*
 * memcg_charge.c - charge, uncharge and max.
 *
 *   charge(G, n)  stock of G on this CPU >= n?  take it      (rseq, ~2 ns)
 *                 else CAS every level by n + batch, put the batch in the
 *                 stock                                      (1 CAS/level)
 *                 else CAS every level by n                  (1 CAS/level)
 *                 else refuse_or_reclaim(): drain, retry, reclaim, OOM
 *   uncharge(G,n) stock + n <= 2 batches?  give it back       (rseq)
 *                 else subtract n (and a batch of the stock) from every
 *                 level                                     (1 op/level)
 *
 * Invariant: a refusal is never caused by bytes that are in no stock and
 * in no caller's hands but still in the counters.  Such bytes exist only
 * inside a transfer (memcg_transfer.c: a refill between the counter and
 * the stock, an eviction or an uncharge carrying a batch from a stock to
 * the counter), and a refusal settles the refusing level's subtree
 * (drains it and waits for the transfers begun before) before it
 * refuses.
 *
 * The slow path, in one place (charge_slow() and refuse_or_reclaim()):
 * a refill in a transfer; the counters alone; settle and retry, moving up
 * to the level that refuses; reclaim and retry; the OOM policy; refuse.
 *
 * A charge above high only counts the event and returns
 * %TALLY_MEMCG_OVER_HIGH: reclaim for high runs where the caller chooses
 * (tally_memcg_reclaim_high()), as the kernel defers it to the return to
 * user space.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/memcg_current.h>

#include "runtime/inject.h"
#include "memcg_internal.h"

static long excess(const struct tally_memcg *h, long n)
{
	__int128 e = (__int128)LOAD(&h->usage) + n - LOAD(&h->max);

	return e > LONG_MAX ? LONG_MAX : (long)e;
}

/*
 * Settle the refusing level's subtree and retry, until the charge fits or
 * every level refusing it is settled.  Returns NULL when charged, else
 * the level refusing.
 */
struct tally_memcg *memcg_settle_and_retry(struct tally_memcg *g, long n,
					   struct tally_memcg *h)
{
	for (;;) {
		struct tally_memcg *refuser;

		memcg_settle_lock(h);
		(void)tally_inject(TALLY_INJECT_MEMCG_DRAINED);
		refuser = memcg_counters_try_add(g, n);
		memcg_settle_unlock(h);
		/* A level above: its subtree holds stocks too. */
		if (!refuser || refuser == h || refuser->depth >= h->depth)
			return refuser;
		h = refuser;
	}
}

static int refuse_or_reclaim(struct tally_memcg *g, long n,
			     struct tally_memcg *h, unsigned int flags)
{
	struct memcg_oom pol;

	h = memcg_settle_and_retry(g, n, h);
	if (!h)
		return memcg_note_high(g);
	memcg_event(h, TALLY_MEMCG_EVENT_MAX);
	if (!(flags & TALLY_MEMCG_NORECLAIM)) {
		for (int round = 0; h && round < RECLAIM_ROUNDS; round++) {
			if (!memcg_reclaim(h, excess(h, n)))
				break;
			h = memcg_settle_and_retry(g, n, h);
		}
		if (!h)
			return memcg_note_high(g);
		memcg_event(h, TALLY_MEMCG_EVENT_OOM);
		pthread_mutex_lock(&g->tree->oom_lock);
		pol = h->oom;	/* a kill reads it again, under the lock */
		pthread_mutex_unlock(&g->tree->oom_lock);
		if (pol.mode == TALLY_MEMCG_OOM_KILL &&
		    memcg_oom_kill(h, &pol) == MEMCG_NO_VICTIM)
			pol.mode = TALLY_MEMCG_OOM_FAIL;
		if (pol.mode != TALLY_MEMCG_OOM_FAIL)
			h = memcg_wait_for_room(g, n, h,
						backoff_now_ns() +
						pol.timeout_ns);
		if (!h)
			return memcg_note_high(g);
	}
	INC(&g->tree->refusals);
	return -ENOMEM;
}

/* ---- charge and uncharge --------------------------------------------- */

static bool larger_than_a_max(const struct tally_memcg *g, long n)
{
	for (; g; g = g->parent)
		if (n > LOAD(&g->max))
			return true;
	return false;
}

/*
 * The batch of a refill: large while every level of the chain is far from
 * its limits (fewer trips to the shared counters), small near one (less
 * reserved in stocks where a refusal would have to drain it).  All CPUs'
 * slots full of this group's batches, two per CPU, stay within half the
 * room left under the nearest high or max.
 */
static long refill_batch(struct tally_memcg *g)
{
	struct tally_memcg_tree *t = g->tree;
	long room = LONG_MAX, batch;

	if (t->max_batch == t->batch)
		return t->batch;
	for (struct tally_memcg *l = g; l; l = l->parent) {
		long max = LOAD(&l->max), high = LOAD(&l->high);
		long limit = high < max ? high : max;

		if (limit != TALLY_MEMCG_UNLIMITED &&
		    limit - LOAD(&l->usage) < room)
			room = limit - LOAD(&l->usage);
	}
	/*
	 * Whole batches: charges of the batch's granularity (pages) then
	 * empty a slot exactly instead of leaving a remainder no charge can
	 * use, which would make a charge at the limit drain.
	 */
	batch = room / (4l * t->nr_cpus) / t->batch * t->batch;
	return batch < t->batch ? t->batch :
	       batch > t->max_batch ? t->max_batch : batch;
}

/*
 * The counters, with a batch for the stock when no settle presses on the
 * chain: a transfer (memcg_transfer.c).  Returns NULL when charged, else
 * the level refusing.
 */
static struct tally_memcg *refill(struct tally_memcg **gp, unsigned int cpu,
				  long n)
{
	struct tally_memcg *g = *gp, *refuser;
	struct memcg_transfer tr;
	long batch;

	memcg_transfer_begin(g->tree, &tr);
	/*
	 * Read inside the transfer: a destroy that marked the group dead
	 * waits for this transfer, or this transfer sees the flag.
	 */
	*gp = g = memcg_resolve(g);
	batch = refill_batch(g);
	if (memcg_transfer_may_move(g) &&
	    !memcg_counters_try_add(g, n + batch)) {
		STORE(&g->fast.stock_cap, 2 * batch);
		(void)tally_inject(TALLY_INJECT_MEMCG_REFILLED);
		if (!memcg_stock_deposit(g, cpu, batch, 2 * batch))
			memcg_counters_sub(g, NULL, batch);
		refuser = NULL;
	} else {
		refuser = memcg_counters_try_add(g, n);
	}
	memcg_transfer_end(&tr);
	return refuser;
}

/* The stock could not serve @n: go to the counters, refilling the stock. */
static int charge_slow(struct tally_memcg *g, unsigned int cpu, long n,
		       unsigned int flags)
{
	struct tally_memcg *refuser;

	g = memcg_resolve(g);
	(void)tally_inject(TALLY_INJECT_MEMCG_RESOLVED);
	/* On the counter's line, which the refill writes anyway. */
	INC(&g->refills);
	if (flags & TALLY_MEMCG_NOFAIL) {
		if (larger_than_a_max(g, n))
			return -E2BIG;
		if (memcg_counters_try_add(g, n) &&
		    memcg_counters_add(g, n, true))
			return -E2BIG;
		return memcg_note_high(g);
	}
	refuser = refill(&g, cpu, n);
	if (!refuser)
		return memcg_note_high(g);
	/* Settling takes a lock and may wait: not for NOBLOCK. */
	if (flags & TALLY_MEMCG_NOBLOCK)
		return -EAGAIN;
	return refuse_or_reclaim(g, n, refuser, flags);
}

static int charge(struct tally_memcg *g, unsigned int cpu, long bytes,
		  unsigned int flags)
{
	if (bytes < 1 || bytes > TALLY_MEMCG_BYTES_MAX ||
	    (flags & ~TALLY_MEMCG_FLAGS_))
		return -EINVAL;
	/* Any charge the stock covers fits under every max. */
	if (memcg_stock_take(g, cpu, bytes))
		return 0;
	return charge_slow(g, cpu, bytes, flags);
}

int tally_memcg_charge_slow_(struct tally_memcg *g, long bytes,
			     unsigned int flags)
{
	if (!g)
		g = tally_memcg_current();	/* none named: the thread's */
	if (!g || g->tree->simulated)
		return -EINVAL;
	memcg_check_handle(g);
	return charge(g, NO_CPU, bytes, flags);
}

int tally_memcg_charge_cpu(struct tally_memcg *g, unsigned int cpu,
			   long bytes, unsigned int flags)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus)
		return -EINVAL;
	return charge(g, cpu, bytes, flags);
}

/*
 * The stock is full (or closed): give the bytes back to the counters, and
 * a batch of the stock with them when it has one, so that the next 2
 * batches of uncharges on this CPU are served by the stock again (the
 * kernel's drain_stock() on a full stock): one counter operation per
 * batch, not one per uncharge.
 */
static int uncharge(struct tally_memcg *g, unsigned int cpu, long bytes)
{
	long batch = LOAD(&g->fast.stock_cap) / 2;
	struct memcg_transfer tr;
	int err;

	if (bytes < 1 || bytes > TALLY_MEMCG_BYTES_MAX)
		return -EINVAL;
	if (memcg_stock_give(g, cpu, bytes, LOAD(&g->fast.stock_cap)))
		return 0;
	/* The batch carried from the stock to the counters: a transfer. */
	memcg_transfer_begin(g->tree, &tr);
	if (!memcg_transfer_may_move(g) ||
	    !memcg_stock_take(g, cpu, batch)) {
		memcg_transfer_end(&tr);
		return memcg_counters_uncharge(memcg_resolve(g), bytes);
	}
	(void)tally_inject(TALLY_INJECT_MEMCG_CARRIED);
	err = memcg_counters_uncharge(memcg_resolve(g), bytes + batch);
	if (err && !memcg_stock_give(g, cpu, batch, LOAD(&g->fast.stock_cap)))
		memcg_counters_give_back(memcg_resolve(g), batch);
	memcg_transfer_end(&tr);
	return err;
}

int tally_memcg_uncharge_slow_(struct tally_memcg *g, long bytes)
{
	if (!g || g->tree->simulated)
		return -EINVAL;
	memcg_check_handle(g);
	return uncharge(g, NO_CPU, bytes);
}

int tally_memcg_uncharge_cpu(struct tally_memcg *g, unsigned int cpu,
			     long bytes)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus)
		return -EINVAL;
	return uncharge(g, cpu, bytes);
}


/* ---- limits ----------------------------------------------------------- */

/*
 * @g's usage once its subtree is settled: every byte then is charged, or
 * reserved by a refill checked against the new max, which it cannot
 * exceed.  Caller holds nothing.
 */
static long settled_usage(struct tally_memcg *g)
{
	long usage;

	memcg_settle_lock(g);
	usage = __atomic_load_n(&g->usage, __ATOMIC_SEQ_CST);
	memcg_settle_unlock(g);
	return usage;
}

/*
 * As the kernel's memory.max write: publish the new max, then drain,
 * reclaim and retry; only when the usage stays above it is the old max
 * restored (-EBUSY).  A charge racing with the publication either raised
 * the usage first (the drain-and-check sees it) or sees the new max
 * (memcg_counters_add() re-reads it after its CAS).
 */
static int set_max(struct tally_memcg *g, long bytes)
{
	long old = __atomic_exchange_n(&g->max, bytes, __ATOMIC_SEQ_CST);

	for (int round = 0;; round++) {
		long usage = settled_usage(g);

		if (usage <= bytes)
			return 0;
		if (round >= RECLAIM_ROUNDS || !memcg_reclaim(g, usage - bytes))
			break;
	}
	/* Unless another setter replaced it meanwhile. */
	__atomic_compare_exchange_n(&g->max, &bytes, old, false,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return -EBUSY;
}

int tally_memcg_set_limit(struct tally_memcg *g, enum tally_memcg_limit which,
			  long bytes)
{
	long *field;

	if (!g || LOAD(&g->dead) || bytes < 0)
		return -EINVAL;
	memcg_check_handle(g);
	switch (which) {
	case TALLY_MEMCG_MIN:
		field = &g->min;
		break;
	case TALLY_MEMCG_LOW:
		field = &g->low;
		break;
	case TALLY_MEMCG_HIGH:
		field = &g->high;
		break;
	case TALLY_MEMCG_MAX:
		return set_max(g, bytes);
	default:
		return -EINVAL;
	}
	STORE(field, bytes);
	memcg_propagate_protected(g, LOAD(&g->usage));
	return 0;
}

int tally_memcg_get_limits(const struct tally_memcg *g,
			   struct tally_memcg_limits *out)
{
	if (!g || !out)
		return -EINVAL;
	*out = (struct tally_memcg_limits){ LOAD(&g->min), LOAD(&g->low),
					    LOAD(&g->high), LOAD(&g->max) };
	return 0;
}
