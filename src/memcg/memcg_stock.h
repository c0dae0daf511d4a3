/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_STOCK_H
#define TALLY_MEMCG_STOCK_H

/*
 * memcg_stock.h - the per-CPU stock of a memory tree: on each CPU,
 * TALLY_PERCPU_SLOTS_ slots { group, bytes }, each caching the bytes
 * reserved for one group (the kernel's per-CPU stock of several memcgs,
 * since 6.16).  Its memory is per tree and per CPU, whatever the number
 * of groups; a group has at most one slot per CPU.
 *
 * On the system domain with rseq, every change of a slot is one
 * restartable sequence on the current CPU (tally/percpu_x86_64.h:
 * take, give, evict, install), except a drain's: the drainer marks the
 * slot's key closed (bit 0, compare-and-swap), then issues
 * membarrier(PRIVATE_EXPEDITED_RSEQ): every sequence that read the key
 * open has then committed or will restart and miss it, so the drainer
 * may empty the slot while no plain store can overwrite it.  Trees
 * without that guarantee (a simulated domain, no rseq, no membarrier)
 * change each slot with a 16-byte compare-and-swap of the pair, below.
 */

#include <stdbool.h>
#include <stdint.h>
#include <tally/percpu.h>

#include "runtime/inject.h"

#define MEMCG_SLOTS TALLY_PERCPU_SLOTS_
#define SLOT_CLOSED ((uintptr_t)1)

struct memcg_slot {
	uintptr_t group;
	long bytes;
} __attribute__((aligned(16)));

_Static_assert(sizeof(struct memcg_slot) * MEMCG_SLOTS == 128,
	       "TALLY_SLOTS_BYTES_ of tally/percpu_x86_64.h");

typedef unsigned __int128 slot_word;

/*
 * A group's address reaches other threads through a slot written by a
 * restartable sequence, which ThreadSanitizer does not see: tell it that
 * the install publishes the group and a slot's reader observes it.
 */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define slot_publish(g) __tsan_release((void *)(g))
#define slot_observe(g) __tsan_acquire((void *)(g))
#else
#define slot_publish(g) ((void)(g))
#define slot_observe(g) ((void)(g))
#endif

static inline struct memcg_slot *memcg_cpu_slots(void *stocks,
						 unsigned int cpu)
{
	return (struct memcg_slot *)tally_percpu_ptr(stocks, cpu);
}

static inline slot_word slot_pack(uintptr_t group, long bytes)
{
	return (slot_word)group | (slot_word)(unsigned long)bytes << 64;
}

static inline uintptr_t slot_group(slot_word w)
{
	return (uintptr_t)w;
}

static inline long slot_bytes(slot_word w)
{
	return (long)(unsigned long)(w >> 64);
}

/* One 16-byte atomic load (cmpxchg16b). */
static inline slot_word slot_load(struct memcg_slot *s)
{
	return __sync_val_compare_and_swap((slot_word *)s, 0, 0);
}

static inline bool slot_cas(struct memcg_slot *s, slot_word old,
			    slot_word new)
{
	(void)tally_inject(TALLY_INJECT_MEMCG_STOCK_BEFORE_CAS);
	return __sync_bool_compare_and_swap((slot_word *)s, old, new);
}

/* The slot of @key among @slots, or NULL (atomic stocks). */
static inline struct memcg_slot *slot_find_atomic(struct memcg_slot *slots,
						  uintptr_t key)
{
	for (int i = 0; i < MEMCG_SLOTS; i++)
		if (__atomic_load_n(&slots[i].group, __ATOMIC_RELAXED) == key)
			return &slots[i];
	return NULL;
}

/* Take @n from @key's slot: the pair is checked and changed at once. */
static inline bool slot_take_atomic(struct memcg_slot *slots, uintptr_t key,
				    long n)
{
	struct memcg_slot *s = slot_find_atomic(slots, key);
	slot_word w;

	if (!s)
		return false;
	do {
		w = slot_load(s);
		if (slot_group(w) != key || slot_bytes(w) < n)
			return false;
	} while (!slot_cas(s, w, slot_pack(key, slot_bytes(w) - n)));
	return true;
}

static inline bool slot_give_atomic(struct memcg_slot *slots, uintptr_t key,
				    long n, long cap)
{
	struct memcg_slot *s = slot_find_atomic(slots, key);
	slot_word w;

	if (!s)
		return false;
	do {
		w = slot_load(s);
		if (slot_group(w) != key || slot_bytes(w) > cap - n)
			return false;
	} while (!slot_cas(s, w, slot_pack(key, slot_bytes(w) + n)));
	return true;
}

#endif /* TALLY_MEMCG_STOCK_H */
