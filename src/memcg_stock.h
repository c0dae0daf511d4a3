/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_STOCK_H
#define TALLY_MEMCG_STOCK_H

/*
 * memcg_stock.h - the two per-CPU operations on a memory group's stock,
 * each one restartable sequence on the current CPU's slot:
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

/* Returns 1 when committed, 0 when refused, -1 without an rseq area. */
static inline int stock_take_rseq(long *stock, long n, const int *stop)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"cmpl $0, (%[stop])\n\t"
		"jne %l[refused]\n\t"
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"movq (%%rax), %%rdx\n\t"
		"subq %[n], %%rdx\n\t"
		"jl %l[refused]\n\t"
		"movq %%rdx, (%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (stock), [n] "r" (n), [stop] "r" (stop),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

static inline int stock_give_rseq(long *stock, long n, long cap,
				  const int *stop)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"cmpl $0, (%[stop])\n\t"
		"jne %l[refused]\n\t"
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"movq (%%rax), %%rdx\n\t"
		"addq %[n], %%rdx\n\t"
		"cmpq %[cap], %%rdx\n\t"
		"jg %l[refused]\n\t"
		"movq %%rdx, (%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (stock), [n] "r" (n), [cap] "r" (cap),
		  [stop] "r" (stop), [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

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
	} while (!__atomic_compare_exchange_n(slot, &old, old - n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
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
	} while (!__atomic_compare_exchange_n(slot, &old, old + n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

#endif /* TALLY_MEMCG_STOCK_H */
