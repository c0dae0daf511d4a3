// SPDX-License-Identifier: MIT
/*
 * memcg_stock.c - per-CPU stocks and drains.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "inject.h"
#include "memcg_internal.h"
#include "memcg_stock.h"
#include "percpu_internal.h"

/* ---- stocks ----------------------------------------------------------- */

/*
 * Take @n from @g's stock on @cpu (current CPU when @cpu is NO_CPU).  The
 * stock pointer is loaded once: destroy may free it and store NULL, which
 * the sequences never dereference since they read stop first.
 */
bool memcg_stock_take(struct tally_memcg *g, unsigned int cpu, long n)
{
	long *stock = LOAD(&g->fast.stock);

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_take_(stock, n, &g->fast.stop);

		if (r >= 0 || !tally_rseq_thread_ready())
			return r > 0;
		return tally_percpu_take_(stock, n, &g->fast.stop) > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return stock_take_atomic(stock, cpu, n, &g->fast.stop);
}

bool memcg_stock_give(struct tally_memcg *g, unsigned int cpu, long n,
		       long cap)
{
	long *stock = LOAD(&g->fast.stock);

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_give_(stock, n, cap, &g->fast.stop);

		if (r >= 0 || !tally_rseq_thread_ready())
			return r > 0;
		return tally_percpu_give_(stock, n, cap, &g->fast.stop) > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return stock_give_atomic(stock, cpu, n, cap, &g->fast.stop);
}

/*
 * Visit @h's live subtree in pre-order without a lock, summing what @fn
 * returns.  Inside a read-side section: a group the walk stands on may be
 * unlinked and put meanwhile, but it is not freed, nor is the sibling it
 * still points to, before the walk ends.  @fn may call user code (reclaim
 * callbacks): that only delays frees.
 */
long memcg_walk(struct tally_memcg *h,
		long (*fn)(struct tally_memcg *g, void *arg), void *arg)
{
	unsigned int token = grace_read_lock();
	struct tally_memcg *g = h;
	long acc = 0;

	for (;;) {
		struct tally_memcg *next;

		acc += fn(g, arg);
		next = ACQUIRE(&g->first_child);
		if (next) {
			g = next;
			continue;
		}
		while (g != h && !(next = ACQUIRE(&g->next_sibling)))
			g = g->parent;
		if (g == h)
			break;
		g = next;
	}
	grace_read_unlock(token);
	return acc;
}

static long set_stop(struct tally_memcg *g, void *arg)
{
	if (g->fast.stock)
		__atomic_store_n(&g->fast.stop, 1, __ATOMIC_SEQ_CST);
	(void)arg;
	return LOAD(&g->refilling);
}

static long empty_stock(struct tally_memcg *g, void *arg)
{
	unsigned int nr_cpus = g->tree->nr_cpus;
	long sum = 0;

	(void)arg;
	/*
	 * Only the stocks this drain closed: a group created since set_stop()
	 * has an open stock that sequences on other CPUs may be writing.
	 */
	if (!g->fast.stock || !LOAD(&g->fast.stop))
		return 0;
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++) {
		long *slot = tally_percpu_ptr(g->fast.stock, cpu);
		long old;

		if (g->tree->rseq) {
			if (LOAD(slot))
				sum += __atomic_exchange_n(slot, 0,
							   __ATOMIC_RELAXED);
			continue;
		}
		old = __atomic_exchange_n(slot, STOCK_CLOSED, __ATOMIC_RELAXED);
		if (old != STOCK_CLOSED)
			sum += old;
	}
	if (sum)
		memcg_counters_give_back(g, sum);
	return 0;
}

/* Open the stocks again after a drain; a destroyed group's stay closed. */
static long clear_stop(struct tally_memcg *g, void *arg)
{
	(void)arg;
	if (LOAD(&g->dead) || !g->fast.stock)
		return 0;
	if (!g->tree->rseq) {
		for (unsigned int cpu = 0; cpu < g->tree->nr_cpus; cpu++) {
			long closed = STOCK_CLOSED;

			__atomic_compare_exchange_n(
				(long *)tally_percpu_ptr(g->fast.stock, cpu),
				&closed, 0, false, __ATOMIC_RELAXED,
				__ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&g->fast.stop, 0, __ATOMIC_RELEASE);
	return 0;
}

static void rseq_barrier(struct tally_memcg_tree *t)
{
	if (t->rseq && syscall(__NR_membarrier,
			       MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0)) {
		/* Registered at creation: failing now is a broken kernel. */
		static const char msg[] =
			"tally: membarrier(PRIVATE_EXPEDITED_RSEQ) failed\n";

		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to say */
		}
		abort();
	}
}

/*
 * Give every stock of @h's subtree back to the counters and leave them
 * closed (charges and uncharges go to the counters) until memcg_reopen_stocks().
 * Caller holds drain_lock.  Returns the refills in flight seen under @h.
 */
long memcg_drain_closed(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;
	long refilling = memcg_walk(h, set_stop, NULL);

	rseq_barrier(t);
	(void)tally_inject(TALLY_INJECT_MEMCG_DRAIN_STOPPED);
	memcg_walk(h, empty_stock, NULL);
	INC(&t->drains);
	return refilling;
}

void memcg_reopen_stocks(struct tally_memcg *h)
{
	memcg_walk(h, clear_stop, NULL);
}

/*
 * Give every stock of @h's subtree back to the counters.  Caller holds
 * drain_lock.  Returns the refills in flight seen under @h.
 */
long memcg_drain_locked(struct tally_memcg *h)
{
	long refilling = memcg_drain_closed(h);

	memcg_reopen_stocks(h);
	return refilling;
}

void memcg_sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000l, ns % 1000000000l };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

long memcg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000l + ts.tv_nsec;
}

/*
 * Drain and retry until the charge fits, or no reservation can be what
 * stands in the way.  Returns NULL when charged, else the level refusing.
 */
struct tally_memcg *memcg_drain_and_retry(struct tally_memcg *g, long n,
					   struct tally_memcg *h)
{
	struct tally_memcg_tree *t = g->tree;
	long waited = 0, nap = 20000;
	struct tally_memcg *refuser;

	__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		long refilling;

		/*
		 * Retry before reopening the stocks: an uncharge that
		 * returned in between is in the counters, not in a stock.
		 */
		pthread_mutex_lock(&t->drain_lock);
		refilling = memcg_drain_closed(h);
		(void)tally_inject(TALLY_INJECT_MEMCG_DRAINED);
		refuser = memcg_counters_try_add(g, n);
		memcg_reopen_stocks(h);
		pthread_mutex_unlock(&t->drain_lock);
		if (!refuser)
			break;
		if (refuser != h && refuser->depth < h->depth) {
			/* A level above: its subtree holds stocks too. */
			__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
			h = refuser;
			__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (!refilling || waited >= REFILL_WAIT_NS)
			break;
		INC(&t->drain_waits);
		memcg_sleep_ns(nap);
		waited += nap;
		nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
	}
	__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	return refuser;
}

