// SPDX-License-Identifier: MIT
/*
 * memcg_stock.c - the per-CPU stock of a memory tree: its slots,
 * installs, evictions and drains.
 *
 * Each CPU has MEMCG_SLOTS slots { group, bytes } (memcg_stock.h): a
 * group's bytes reserved on that CPU, already counted in its page
 * counters.  Charges take from their group's slot and uncharges give to
 * it (one restartable sequence each); a refill that finds no slot for its
 * group evicts one (its bytes go back to their group's counters) and
 * installs its group there.  Memory: MEMCG_SLOTS x 16 bytes per CPU and
 * tree, whatever the number of groups.
 *
 * Every movement of bytes between a slot and the counters here is part
 * of a transfer (memcg_transfer.c: the caller of memcg_stock_deposit()
 * runs one, and an eviction moves a victim's bytes only when no settle
 * presses on it) or of a drain, under drain_lock.  A drain of a subtree H
 * looks at every CPU's slots, O(CPUs x slots x depth), and empties those
 * whose group is in H, whatever the size of the tree: it never visits
 * groups, only slots.  A destroyed group never gets a slot again: an
 * install reads the group's dead flag inside its sequence (rseq) or after
 * its compare-and-swap (atomic stocks).
 *
 * Invariant: every slot's bytes are counted in its group's page counter
 * and its ancestors'; a group has at most one slot per CPU (rseq stocks:
 * the install sequence checks; atomic stocks may briefly hold two, and a
 * drain empties both).  The two modes keep one invariant and one drain
 * order (close or empty every slot of H, give its bytes back); they
 * differ only in how a slot changes atomically: a restartable sequence
 * on the slot's CPU, or a 16-byte compare-and-swap from any CPU.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
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

/* Bytes of an evicted or drained slot go back to their group's counters. */
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
		/* A settle of the victim waits for nothing that starts now. */
		if (old && !memcg_transfer_may_move((struct tally_memcg *)old))
			return false;
		if (old && tally_percpu_slot_evict_(stocks, i, (void *)old,
						    &bytes) <= 0)
			continue;	/* migrated, or the slot changed */
		if (old)
			(void)tally_inject(TALLY_INJECT_MEMCG_EVICTED);
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

	slot_observe(slot_group(w));
	if (__atomic_load_n(&g->dead, __ATOMIC_SEQ_CST) ||
	    (slot_group(w) &&
	     !memcg_transfer_may_move((struct tally_memcg *)slot_group(w))) ||
	    !slot_cas(s, w, slot_pack((uintptr_t)g, batch)))
		return false;
	if (slot_group(w))
		(void)tally_inject(TALLY_INJECT_MEMCG_EVICTED);
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
 * not: the caller gives the batch back to the counters.  Inside the
 * caller's transfer, which also keeps an evicted group allocated.
 */
bool memcg_stock_deposit(struct tally_memcg *g, unsigned int cpu, long batch,
			 long cap)
{
	if (memcg_stock_give(g, cpu, batch, cap))
		return true;
	if (cpu == NO_CPU)
		cpu = tally_current_cpu();
	/* A slot of its own, too full for the batch: no second one. */
	if (slot_find_atomic(memcg_cpu_slots(g->fast.stock, cpu),
			     (uintptr_t)g))
		return false;
	if (g->fast.rseq)
		return install_rseq(g, batch, cap);
	return install_atomic(g, cpu, batch);
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
	struct grace_section sec;
	long sum = 0;

	grace_enter(&t->grace, &sec);
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
	grace_leave(&sec);
	return sum;
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

/*
 * The slots of @h's subtree on the drainer's own CPU, emptied and freed
 * by sequences of that CPU: no barrier is needed for them.  A slot whose
 * sequence refuses (the thread migrated, a charge or an uncharge changed
 * it) is left to the closing pass.  A group that was only used on the
 * destroying thread's CPU is destroyed without a membarrier().
 */
static void drain_own_cpu(struct tally_memcg_tree *t, struct tally_memcg *h)
{
	void *stocks = t->stocks;
	struct memcg_slot *slots = memcg_cpu_slots(stocks, tally_current_cpu());

	for (unsigned int i = 0; i < MEMCG_SLOTS; i++) {
		uintptr_t w = LOAD(&slots[i].group);
		long bytes = 0;

		if (!w || (w & SLOT_CLOSED) ||
		    !in_subtree((struct tally_memcg *)w, h) ||
		    tally_percpu_slot_evict_(stocks, i, (void *)w, &bytes) <= 0)
			continue;
		give_back(w, bytes);
		(void)tally_percpu_slot_release_(stocks, i, (void *)w);
	}
}

static void drain_rseq(struct tally_memcg_tree *t, struct tally_memcg *h)
{
	bool closed = false;

	drain_own_cpu(t, h);
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
 * drain_lock.  Inside a section: a group read from a slot is not freed
 * before the drain ends.
 */
void memcg_drain_locked(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;
	struct grace_section sec;

	grace_enter(&t->grace, &sec);
	if (t->rseq)
		drain_rseq(t, h);
	else
		drain_atomic(t, h);
	grace_leave(&sec);
	INC(&t->drains);
}
