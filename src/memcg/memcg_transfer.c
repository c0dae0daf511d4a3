// SPDX-License-Identifier: MIT
/*
 * memcg_transfer.c - bytes in transit between the page counters and the
 * per-CPU stocks, and how a refusal makes sure none are in its way.
 *
 * Invariant: a group's usage is the bytes charged to its subtree, plus
 * the bytes in its subtree's slots, plus the bytes that transfers in
 * flight carry for it; and every transfer in flight is a section of its
 * tree's grace domain that checked, after it began, that no settle
 * presses on a group whose bytes it moves.
 *
 * A transfer is any movement of bytes between a slot and the counters
 * outside a drain: a refill (counters, then a slot: memcg_charge.c), the
 * eviction a refill makes to install its group (a slot, then the
 * victim's counters: memcg_stock.c), and an uncharge that carries a
 * full slot's batch back (a slot, then the counters: memcg_charge.c).
 * Each runs between memcg_transfer_begin() and memcg_transfer_end(), and
 * moves the bytes of a group only if memcg_transfer_may_move() said yes
 * for it after the begin.  Drains move bytes too, but hold drain_lock,
 * under which every settled read is made.
 *
 * Settling @h's subtree (a refusal's last try, setting max): press @h
 * (from then on a new transfer moves none of its subtree's bytes), wait
 * for the transfers that began before (grace_wait()), drain it and,
 * still under drain_lock, read or charge the counters.  Then every byte
 * in them is charged: the old transfers have ended (their bytes are in
 * the counters or in a slot the drain emptied), the new ones saw the
 * pressure and put nothing in a slot of the subtree nor took one over,
 * and other drains are behind the lock.  formal/charge.pml checks this
 * with spin, with the same steps.
 *
 * Destroy uses it without the pressure: the dead flag stops new installs
 * of the group, the wait ends the old ones, then the drain empties its
 * slots for good.  fork() presses every tree's root and waits, so no
 * transfer of another thread is half way when the child is copied: the
 * child's counters hold exactly what its slots and its charges hold.
 *
 * Costs: a transfer, two atomic adds on its CPU's shard of the domain
 * and a load per level of the chain (the pressure check), on the slow
 * path only.  A settle, a grace period and a drain: O(CPUs x slots x
 * depth) and, when every transfer runs, two lock round trips; a transfer
 * whose thread is off its CPU delays it, 1 s at most (TRANSFER_WAIT_NS):
 * the charge is then refused, as the bytes may be lost with that thread.
 */
#include <pthread.h>

#include <tally/memcg.h>

#include "runtime/inject.h"
#include "memcg_internal.h"

void memcg_transfer_begin(struct tally_memcg_tree *t,
			  struct memcg_transfer *tr)
{
	grace_enter(&t->grace, &tr->section);
	(void)tally_inject(TALLY_INJECT_MEMCG_TRANSFER_BEGUN);
}

void memcg_transfer_end(struct memcg_transfer *tr)
{
	(void)tally_inject(TALLY_INJECT_MEMCG_TRANSFER_ENDING);
	grace_leave(&tr->section);
}

/* Inside a transfer: no settle presses on @g or an ancestor. */
bool memcg_transfer_may_move(const struct tally_memcg *g)
{
	for (; g; g = g->parent)
		if (__atomic_load_n(&g->pressure, __ATOMIC_SEQ_CST))
			return false;
	return true;
}

/*
 * Settle @h's subtree and return with drain_lock held: the counters then
 * hold only charged bytes until memcg_settle_unlock(), unless a transfer
 * that began before did not end within TRANSFER_WAIT_NS (counted in
 * drain_waits): its bytes may still be in the counters, and the caller
 * goes on as if they were charged (a refusal refuses).
 */
void memcg_settle_lock(struct tally_memcg *h)
{
	struct tally_memcg_tree *t = h->tree;

	__atomic_add_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
	(void)tally_inject(TALLY_INJECT_MEMCG_SETTLE_PRESSED);
	if (!grace_wait(&t->grace, backoff_now_ns() + TRANSFER_WAIT_NS))
		INC(&t->drain_waits);
	pthread_mutex_lock(&t->drain_lock);
	memcg_drain_locked(h);
}

void memcg_settle_unlock(struct tally_memcg *h)
{
	pthread_mutex_unlock(&h->tree->drain_lock);
	__atomic_sub_fetch(&h->pressure, 1, __ATOMIC_SEQ_CST);
}

/*
 * @g was just marked dead (seq_cst): an install that began before may
 * still put it in a slot; wait for those, then empty its slots for good
 * (a new install reads the flag after its begin and never installs it).
 * An install stopped for longer than the wait is harmless: it reads the
 * flag again inside its sequence (rseq), or after its compare-and-swap
 * and takes the slot back (atomic stocks); its bytes reach the counters
 * when it runs again instead of before destroy returns.
 */
void memcg_settle_dead(struct tally_memcg *g)
{
	struct tally_memcg_tree *t = g->tree;

	(void)grace_wait(&t->grace, backoff_now_ns() + TRANSFER_WAIT_NS);
	pthread_mutex_lock(&t->drain_lock);
	memcg_drain_locked(g);
	pthread_mutex_unlock(&t->drain_lock);
}

/*
 * Before fork(), no lock of @t held: every other thread's transfer ends,
 * or begins after the pressure and moves nothing, until the parent's or
 * the child's handler.
 */
void memcg_transfers_fork_prepare(struct tally_memcg_tree *t)
{
	__atomic_add_fetch(&t->root->pressure, 1, __ATOMIC_SEQ_CST);
	grace_wait(&t->grace, backoff_now_ns() + TRANSFER_WAIT_NS);
}

void memcg_transfers_fork_parent(struct tally_memcg_tree *t)
{
	__atomic_sub_fetch(&t->root->pressure, 1, __ATOMIC_SEQ_CST);
}
