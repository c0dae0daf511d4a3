// SPDX-License-Identifier: MIT
/*
 * memcg_stock.c - the per-CPU stock of a memory tree, lock-free walks and
 * drains.
 *
 * Each CPU has MEMCG_SLOTS slots { group, bytes } (memcg_stock.h): a
 * group's bytes reserved on that CPU, already counted in its page
 * counters.  Charges take from their group's slot and uncharges give to
 * it (one restartable sequence each); a refill that finds no slot for its
 * group evicts one (its bytes go back to their group's counters) and
 * installs its group there.  Memory: MEMCG_SLOTS x 16 bytes per CPU and
 * tree, whatever the number of groups.
 *
 * A drain of a subtree H looks at every CPU's slots, O(CPUs x slots x
 * depth), and empties those whose group is in H, whatever the size of the
 * tree: it never visits groups, only slots.  Refills stop under H while a
 * refusal drains it ("pressure"); refills that had passed that check, and
 * uncharges carrying a batch from a slot to the counters, count
 * themselves in their group's "refilling" until their bytes are in a slot
 * or in the counters, and a refusal waits for them.  A destroyed group
 * never gets a slot again: an install reads the group's dead flag inside
 * its sequence (rseq) or after its compare-and-swap (atomic stocks).
 *
 * Invariant: every slot's bytes are counted in its group's page counter
 * and its ancestors'; a group has at most one slot per CPU (rseq stocks:
 * the install sequence checks; atomic stocks may briefly hold two).
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

#include "runtime/inject.h"
#include "memcg_internal.h"
#include "memcg_stock.h"
#include "runtime/percpu_internal.h"

/* ---- slots ------------------------------------------------------------ */

static bool rseq_retry(int r)
{
	/* -1: this thread's rseq area is not set up yet; set it up once. */
	return r < 0 && tally_rseq_thread_ready();
}

bool memcg_stock_take(struct tally_memcg *g, unsigned int cpu, long n)
{
	void *stocks = g->fast.stock;

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_slot_take_(stocks, g, n);

		if (rseq_retry(r))
			r = tally_percpu_slot_take_(stocks, g, n);
		return r > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return slot_take_atomic(memcg_cpu_slots(stocks, cpu), (uintptr_t)g, n);
}

bool memcg_stock_give(struct tally_memcg *g, unsigned int cpu, long n,
		      long cap)
{
	void *stocks = g->fast.stock;

	if (cpu == NO_CPU && g->fast.rseq) {
		int r = tally_percpu_slot_give_(stocks, g, n, cap);

		if (rseq_retry(r))
			r = tally_percpu_slot_give_(stocks, g, n, cap);
		return r > 0;
	}
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	return slot_give_atomic(memcg_cpu_slots(stocks, cpu), (uintptr_t)g, n,
				cap);
}

/* Which slot a refill takes over: a free one, else the next in turn. */
static unsigned int victim(struct memcg_slot *slots)
{
	static __thread unsigned int turn;

	for (unsigned int i = 0; i < MEMCG_SLOTS; i++)
		if (!__atomic_load_n(&slots[i].group, __ATOMIC_RELAXED))
			return i;
	return turn++ % MEMCG_SLOTS;
}

/* Bytes of an evicted slot go back to their group's counters. */
static void give_back(uintptr_t group, long bytes)
{
	slot_observe(group);
	if (bytes)
		memcg_counters_give_back((struct tally_memcg *)group, bytes);
}

static bool install_rseq(struct tally_memcg *g, long batch, long cap)
{
	void *stocks = g->fast.stock;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct memcg_slot *slots =
			memcg_cpu_slots(stocks, tally_current_cpu());
		unsigned int i = victim(slots);
		uintptr_t old = __atomic_load_n(&slots[i].group,
						__ATOMIC_RELAXED);
		long bytes = 0;

		if (old & SLOT_CLOSED)
			continue;
		if (old && tally_percpu_slot_evict_(stocks, i, (void *)old,
						    &bytes) <= 0)
			continue;	/* migrated, or the slot changed */
		give_back(old, bytes);
		slot_publish(g);
		if (tally_percpu_slot_install_(stocks, i, (void *)old, g,
					       &g->dead) > 0 ||
		    !LOAD(&g->dead))
			if (tally_percpu_slot_give_(stocks, g, batch, cap) > 0)
				return true;
	}
	return false;
}

static bool install_atomic(struct tally_memcg *g, unsigned int cpu,
			   long batch)
{
	struct memcg_slot *slots = memcg_cpu_slots(g->fast.stock, cpu);
	struct memcg_slot *s = &slots[victim(slots)];
	slot_word w = slot_load(s);

	if (__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST) ||
	    !slot_cas(s, w, slot_pack((uintptr_t)g, batch)))
		return false;
	give_back(slot_group(w), slot_bytes(w));
	/*
	 * A destroy that set dead before our compare-and-swap may have
	 * scanned this slot before it: take the batch back ourselves (or
	 * its drain did).
	 */
	if (__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST)) {
		w = slot_pack((uintptr_t)g, batch);
		while (slot_group(w = slot_load(s)) == (uintptr_t)g)
			if (slot_cas(s, w, 0)) {
				give_back((uintptr_t)g, slot_bytes(w));
				break;
			}
	}
	return true;
}

/*
 * A refill: put @batch, already counted in @g's counters, in @g's slot on
 * @cpu, installing @g in a slot when it has none.  False when it could
 * not: the caller gives the batch back to the counters.
 */
bool memcg_stock_deposit(struct tally_memcg *g, unsigned int cpu, long batch,
			 long cap)
{
	unsigned int token;
	bool done;

	if (memcg_stock_give(g, cpu, batch, cap))
		return true;
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	/* A slot of its own, too full for the batch: no second one. */
	if (slot_find_atomic(memcg_cpu_slots(g->fast.stock, cpu),
			     (uintptr_t)g))
		return false;
	/* The evicted group may be destroyed and put meanwhile. */
	token = grace_read_lock();
	if (g->fast.rseq)
		done = install_rseq(g, batch, cap);
	else
		done = install_atomic(g, cpu, batch);
	grace_read_unlock(token);
	return done;
}

/* @g, read from a slot, is @h or below it. */
static bool in_subtree(const struct tally_memcg *g, const struct tally_memcg *h)
{
	slot_observe(g);
	while (g->depth > h->depth)
		g = g->parent;
	return g == h;
}

/*
 * Bytes in the slots of @h's subtree.  Inside a read-side section: a
 * group read from a slot is not freed before the walk ends.
 */
long memcg_stock_sum(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;
	unsigned int token = grace_read_lock();
	long sum = 0;

	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++) {
		struct memcg_slot *slots = memcg_cpu_slots(t->stocks, cpu);

		for (int i = 0; i < MEMCG_SLOTS; i++) {
			uintptr_t w = __atomic_load_n(&slots[i].group,
						      __ATOMIC_ACQUIRE);

			w &= ~SLOT_CLOSED;
			if (w && in_subtree((struct tally_memcg *)w, h))
				sum += __atomic_load_n(&slots[i].bytes,
						       __ATOMIC_RELAXED);
		}
	}
	grace_read_unlock(token);
	return sum;
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

static long refills_in_flight(struct tally_memcg *g, void *arg)
{
	(void)arg;
	return __atomic_load_n(&g->refilling, __ATOMIC_SEQ_CST);
}

static void rseq_barrier(struct tally_memcg_tree *t)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
		    0, 0)) {
		/* Registered at creation: failing now is a broken kernel. */
		static const char msg[] =
			"tally: membarrier(PRIVATE_EXPEDITED_RSEQ) failed\n";

		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to say */
		}
		abort();
	}
	(void)t;
}

static void drain_rseq(struct tally_memcg_tree *t, struct tally_memcg *h)
{
	bool closed = false;

	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++) {
		struct memcg_slot *slots = memcg_cpu_slots(t->stocks, cpu);

		for (int i = 0; i < MEMCG_SLOTS; i++) {
			uintptr_t w = LOAD(&slots[i].group);

			if (w && !(w & SLOT_CLOSED) &&
			    in_subtree((struct tally_memcg *)w, h))
				closed |= __atomic_compare_exchange_n(
					&slots[i].group, &w, w | SLOT_CLOSED,
					false, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED);
		}
	}
	if (!closed)
		return;
	rseq_barrier(t);
	(void)tally_inject(TALLY_INJECT_MEMCG_DRAIN_STOPPED);
	/* Drains take turns: every closed slot is this drain's. */
	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++) {
		struct memcg_slot *slots = memcg_cpu_slots(t->stocks, cpu);

		for (int i = 0; i < MEMCG_SLOTS; i++) {
			uintptr_t w = LOAD(&slots[i].group);

			if (!(w & SLOT_CLOSED))
				continue;
			give_back(w & ~SLOT_CLOSED,
				  __atomic_exchange_n(&slots[i].bytes, 0,
						      __ATOMIC_RELAXED));
			__atomic_store_n(&slots[i].group, 0, __ATOMIC_RELEASE);
		}
	}
}

static void drain_atomic(struct tally_memcg_tree *t, struct tally_memcg *h)
{
	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++) {
		struct memcg_slot *slots = memcg_cpu_slots(t->stocks, cpu);

		for (int i = 0; i < MEMCG_SLOTS; i++) {
			uintptr_t key = LOAD(&slots[i].group);
			slot_word w;

			/* A plain look first: most slots hold other groups. */
			if (!key || !in_subtree((struct tally_memcg *)key, h))
				continue;
			w = slot_load(&slots[i]);
			while (slot_group(w) &&
			       in_subtree((struct tally_memcg *)slot_group(w), h))
				if (slot_cas(&slots[i], w, 0)) {
					give_back(slot_group(w), slot_bytes(w));
					break;
				} else {
					w = slot_load(&slots[i]);
				}
		}
	}
}

/*
 * Give every slot of @h's subtree back to the counters.  Caller holds
 * drain_lock.  Returns the transfers in flight seen under @h (refills
 * between the counters and a slot, uncharges between a slot and the
 * counters): a caller that needs every byte in the counters waits for
 * them and drains again.
 */
long memcg_drain_locked(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;
	/*
	 * Before the slots are emptied: a refill that may still put bytes
	 * in a slot after them passed the pressure check before the caller
	 * set pressure, so it counted itself before this read.
	 */
	long in_flight = memcg_walk(h, refills_in_flight, NULL);
	unsigned int token = grace_read_lock();

	if (t->rseq)
		drain_rseq(t, h);
	else
		drain_atomic(t, h);
	grace_read_unlock(token);
	INC(&t->drains);
	/*
	 * After: an uncharge that took a batch from a slot before the drain
	 * counted itself first, so it is seen here until the batch is in
	 * the counters; one that comes later finds no slot to take from.
	 */
	return in_flight + memcg_walk(h, refills_in_flight, NULL);
}

/*
 * Drain a group that destroy just marked dead.  An install that read the
 * dead flag clear may still be in flight, in a thread that counted itself
 * in refilling before it read the flag: after a barrier, none is.
 */
void memcg_drain_dead(struct tally_memcg *g)
{
	struct tally_memcg_tree *t = g->tree;

	if (t->rseq && __atomic_load_n(&g->refilling, __ATOMIC_SEQ_CST))
		rseq_barrier(t);
	memcg_drain_locked(g);
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

void memcg_wait_begin(struct memcg_wait *w)
{
	w->deadline = memcg_now_ns() + TRANSFER_WAIT_NS;
	w->nap = 20000;
}

bool memcg_wait_more(struct memcg_wait *w)
{
	if (memcg_now_ns() >= w->deadline)
		return false;
	memcg_sleep_ns(w->nap);
	w->nap = w->nap * 2 > 1000000 ? 1000000 : w->nap * 2;
	return true;
}

/*
 * Drain and retry until the charge fits, or no reservation can be what
 * stands in the way.  Returns NULL when charged, else the level refusing.
 */
struct tally_memcg *memcg_drain_and_retry(struct tally_memcg *g, long n,
					   struct tally_memcg *h)
{
	struct tally_memcg_tree *t = g->tree;
	struct tally_memcg *refuser;
	struct memcg_wait w;

	memcg_wait_begin(&w);
	__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		long refilling;

		/*
		 * Under pressure no refill puts bytes in a slot of @h's
		 * subtree, and uncharges find no slot there: what they
		 * return meanwhile is in the counters for the retry.
		 */
		pthread_mutex_lock(&t->drain_lock);
		refilling = memcg_drain_locked(h);
		(void)tally_inject(TALLY_INJECT_MEMCG_DRAINED);
		refuser = memcg_counters_try_add(g, n);
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
		if (!refilling || !memcg_wait_more(&w))
			break;
		INC(&t->drain_waits);
	}
	__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	return refuser;
}

