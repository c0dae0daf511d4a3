/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_STOCK_H
#define TALLY_MEMCG_STOCK_H

/*
 * memcg_stock.h - the two per-CPU operations on a memory group's stock.
 * On the system domain with rseq they are tally_percpu_take_() and
 * tally_percpu_give_() (tally/percpu_x86_64.h), one restartable sequence
 * each on the current CPU's slot:
 *
 *   take:  if (!*stop && slot >= n)          slot -= n
 *   give:  if (!*stop && slot + n <= cap)    slot += n
 *
 * *stop is read inside the sequence.  A drainer sets it, then issues
 * membarrier(PRIVATE_EXPEDITED_RSEQ): every sequence that read it clear
 * has then committed or will restart and read it set, so the drainer may
 * exchange the slots with atomic operations while no plain store can
 * overwrite them.  Trees without that guarantee (a simulated domain, no
 * rseq, no membarrier) use the compare-and-swap versions below instead.
 */

#include <stdbool.h>
#include <tally/percpu.h>

#include "inject.h"

/* The same on a named CPU's slot, with compare-and-swap. */
static inline bool stock_take_atomic(long *stock, unsigned int cpu, long n,
				     const int *stop)
{
	long *slot = (long *)tally_percpu_ptr(stock, cpu);
	long old;

	if (__atomic_load_n(stop, __ATOMIC_ACQUIRE))
		return false;
	old = __atomic_load_n(slot, __ATOMIC_RELAXED);
	do {
		if (__atomic_load_n(stop, __ATOMIC_RELAXED) || old < n)
			return false;
	} while ((tally_inject(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS),
		  !__atomic_compare_exchange_n(slot, &old, old - n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED)));
	return true;
}

static inline bool stock_give_atomic(long *stock, unsigned int cpu, long n,
				     long cap, const int *stop)
{
	long *slot = (long *)tally_percpu_ptr(stock, cpu);
	long old;

	if (__atomic_load_n(stop, __ATOMIC_ACQUIRE))
		return false;
	old = __atomic_load_n(slot, __ATOMIC_RELAXED);
	do {
		if (__atomic_load_n(stop, __ATOMIC_RELAXED) || old > cap - n)
			return false;
	} while ((tally_inject(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS),
		  !__atomic_compare_exchange_n(slot, &old, old + n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED)));
	return true;
}

#endif /* TALLY_MEMCG_STOCK_H */
