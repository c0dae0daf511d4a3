/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MM_H
#define TALLY_MM_H

/*
 * tally/mm.h - a task's memory counters, RSS-style.
 *
 * A "task" is whatever a program may have to cancel when memory runs out:
 * a query, an isolate, a connection, a child process.  Its memory state is
 * five hierarchical per-CPU counters (tally/counter.h) made by one
 * tally_counter_init_many(): one per-CPU allocation whose five slots of a
 * CPU share a cache line, and tree items that may live in the caller's own
 * task structure.  The five items are the kernel's rss_stat set plus page
 * tables, all in BYTES (the kernel counts pages; userspace allocators think
 * in bytes; a caller counting pages multiplies by its page size):
 *
 *	item                  kernel counterpart
 *	TALLY_MM_FILE         MM_FILEPAGES      resident file-backed memory
 *	TALLY_MM_ANON         MM_ANONPAGES      resident anonymous memory
 *	TALLY_MM_SWAP         MM_SWAPENTS       swapped-out memory
 *	TALLY_MM_SHMEM        MM_SHMEMPAGES     resident shared memory
 *	TALLY_MM_PGTABLES     pgtables_bytes    page tables (or any overhead)
 *
 * Costs: tally_mm_add() is the counter's add (an rseq add-return, plus
 * one atomic per tree level once per batch); an approximate read is one
 * load per item and gives its interval; a precise read sums every CPU's
 * slot of each item (O(nr_cpus) per item).
 *
 * Reads are clamped at 0 item by item, as the kernel's _positive reads
 * are: a task whose frees were counted on one CPU before the allocations
 * on another can transiently sum below 0, and a size that is divided by
 * or compared must not be.  Clamping keeps the interval sound: when an
 * item's precise sum lies in [min, max], its clamped value lies in
 * [max(min, 0), max(max, 0)].  Sums over several items add the clamped
 * items and saturate at LONG_MAX.
 *
 * Accuracy: at quiescence (no add in flight) the precise sum of an item
 * lies in the [min, max] of its approximate read; the width is the
 * counter's under bound (tally_counter_accuracy()).  With the default
 * batch of 128 KiB, per item:
 *
 *	CPUs        2       64       256       384      4096
 *	width   256 KiB   20 MiB    88 MiB   160 MiB  1856 MiB
 *
 * Choose the batch for the error you can accept.  While adds are in
 * flight either read may lag them.
 *
 * Thread safety: add and every read are MT-safe and may run from signal
 * handlers (no lock, no allocation).  init and destroy take the counter
 * registry's lock (fork safety) and are not async-signal-safe.
 */

#include <errno.h>
#include <stddef.h>
#include <tally/counter.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum tally_mm_item - the counters of a task, each in bytes. */
enum tally_mm_item {
	TALLY_MM_FILE = 0,
	TALLY_MM_ANON,
	TALLY_MM_SWAP,
	TALLY_MM_SHMEM,
	TALLY_MM_PGTABLES,
	TALLY_MM_NR_ITEMS
};

/**
 * TALLY_MM_BIT() - the mask of one item, for the sum reads; or them.
 *
 * Item bits start at bit 16, so that an item number passed where a mask
 * belongs (TALLY_MM_ANON instead of TALLY_MM_BIT(TALLY_MM_ANON)), alone or
 * or'ed into a mask, is refused with -EINVAL instead of summing another
 * item.  TALLY_MM_FILE is 0 and cannot be told from no item at all when
 * or'ed into a mask: TALLY_MM_BIT(TALLY_MM_ANON) | TALLY_MM_FILE is read
 * as anon alone.
 */
#define TALLY_MM_BIT(item) (1u << ((item) + 16))
/** Resident memory: anonymous + file + shared (the kernel's get_mm_rss()). */
#define TALLY_MM_RSS \
	(TALLY_MM_BIT(TALLY_MM_FILE) | TALLY_MM_BIT(TALLY_MM_ANON) | \
	 TALLY_MM_BIT(TALLY_MM_SHMEM))
/** What the OOM badness counts: RSS + swap + page tables. */
#define TALLY_MM_BADNESS \
	(TALLY_MM_RSS | TALLY_MM_BIT(TALLY_MM_SWAP) | \
	 TALLY_MM_BIT(TALLY_MM_PGTABLES))
/** Every item. */
#define TALLY_MM_ALL (((1u << TALLY_MM_NR_ITEMS) - 1) << 16)

/** Default batch: 32 pages of 4 KiB, the kernel's RSS batch, in bytes. */
#define TALLY_MM_DEFAULT_BATCH (32ul * 4096)

/**
 * struct tally_mm - one task's memory counters.
 *
 * Fields are private: use the functions below.  Registered by address
 * (see tally/counter.h): an initialized tally_mm must not be moved or
 * copied.
 */
struct tally_mm {
	struct tally_counter counters[TALLY_MM_NR_ITEMS];
	unsigned long magic;		/* TALLY_MM_MAGIC while initialized */
};

/* Internal: the value of struct tally_mm's magic while it is live. */
#define TALLY_MM_MAGIC 0x74616c6c796d6d31ul

/**
 * struct tally_mm_range - a read with the interval it guarantees.
 * @value: the approximate value (clamped at 0), or the precise one.
 * @min: the precise value (clamped at 0) is at least this...
 * @max: ...and at most this, at quiescence.
 */
struct tally_mm_range {
	long value;
	long min;
	long max;
};

/**
 * tally_mm_items_size() - bytes of tree-item memory one tally_mm needs.
 * @d: its domain; NULL means the system domain.
 *
 * Context: MT-safe; async-signal-safe when @d is not NULL (the first use of the
 * system domain builds it: pthread_once(), allocation, /sys read with stdio).
 *
 * Return: the size (a multiple of 64), or 0 when @d is NULL and the
 * system's CPUs cannot be read.
 */
size_t tally_mm_items_size(const struct tally_domain *d);

/**
 * tally_mm_init() - set up a task's counters, all at 0.
 * @mm: the counters.
 * @d: their domain (the system's when NULL, or a simulated one).
 * @batch: power of two >= 2, in bytes: how far a CPU's slot of an item
 *	moves before it carries into the tree; 0 means
 *	%TALLY_MM_DEFAULT_BATCH.
 * @items: 64-byte aligned memory of tally_mm_items_size(@d) bytes that
 *	the caller owns and keeps until destroy (e.g. the flexible tail of
 *	its task structure), or NULL to let tally allocate it.
 *
 * One per-CPU allocation holds the five slots of every CPU.  On failure
 * @mm (when not NULL) is left so that tally_mm_destroy() on it returns
 * -EINVAL and does nothing else.
 *
 * Context: MT-safe on distinct tally_mm; not async-signal-safe: as
 * tally_counter_init_many(), takes the counter registry's mutex and allocates.
 *
 * Return: 0, -EINVAL for a NULL @mm, a bad batch or misaligned @items,
 * -EBUSY when @mm holds live counters (initialized and not destroyed:
 * nothing done), -ENOMEM, -ENODEV when @d is NULL and the system domain
 * cannot be built.
 */
int tally_mm_init(struct tally_mm *mm, struct tally_domain *d,
		  unsigned long batch, void *items);

/**
 * tally_mm_destroy() - free a task's counters.
 * @mm: counters from tally_mm_init().
 *
 * The counters are freed in every case but -EINVAL.  A task whose items
 * do not all sum to 0 is a caller bug (an allocation never uncharged, or
 * a free counted twice): the kernel reports it as "Bad rss-counter state";
 * tally returns -ENOTEMPTY and, in debug builds (TALLY_DEBUG), prints one
 * line per non-zero item to stderr:
 *
 *	tally: Bad rss-counter state mm:0x... type:TALLY_MM_ANON val:4096
 *
 * The sums are precise, so destroy only quiet counters (no add running).
 * A second destroy of the same memory, or a destroy of memory that was
 * never initialized successfully, is detected (the magic word is cleared)
 * and returns -EINVAL in every build.
 *
 * Context: MT-safe on distinct tally_mm; not async-signal-safe: takes the
 * counter registry's mutex and the per-CPU pool's, frees memory (debug builds
 * also print with stdio).
 *
 * Return: 0, -ENOTEMPTY (freed, but an item was not 0), or -EINVAL for a
 * NULL or not initialized @mm (nothing done).
 */
int tally_mm_destroy(struct tally_mm *mm);

/**
 * tally_mm_add() - add @delta bytes (any sign) to one item, on this CPU.
 * @mm: initialized counters (on the system domain; see tally_mm_add_cpu()
 *	for simulated ones, where this adds on the current CPU modulo the
 *	domain's count).
 * @item: which counter.
 * @delta: bytes allocated (positive) or freed (negative).
 *
 * A few nanoseconds and no lock: on the system domain an rseq add, no
 * atomic instruction (atomic on simulated domains).
 *
 * Context: MT-safe, async-signal-safe: no lock, no allocation, never waits.
 *
 * Return: 0, or -EINVAL for a NULL @mm, an unknown @item or a destroyed
 * @mm (nothing added).
 */
static inline int tally_mm_add(struct tally_mm *mm, enum tally_mm_item item,
			       long delta)
{
	struct tally_counter *c;

	if (__builtin_expect(!mm || (unsigned int)item >= TALLY_MM_NR_ITEMS,
			     0))
		return -EINVAL;
	c = &mm->counters[item];
	if (__builtin_expect(!c->level0, 0))	/* cleared by destroy */
		return -EINVAL;
	tally_counter_add(c, delta);
	return 0;
}

/**
 * tally_mm_add_cpu() - add @delta bytes to one item on simulated CPU @cpu.
 * @mm: counters on a simulated domain.
 * @cpu: a CPU below the domain's count.
 * @item: which counter.
 * @delta: the increment.
 *
 * Atomic on the slot: threads may share a simulated CPU.
 *
 * Context: MT-safe, async-signal-safe: relaxed atomic adds, no lock, no
 * allocation, never waits.
 *
 * Return: 0, or -EINVAL for a NULL or destroyed @mm, an unknown @item,
 * counters on the system domain or a CPU out of range.
 */
int tally_mm_add_cpu(struct tally_mm *mm, unsigned int cpu,
		     enum tally_mm_item item, long delta);

/**
 * tally_mm_approximate() - the approximate sum of some items, with its
 *	interval.
 * @mm: initialized counters.
 * @mask: the items, TALLY_MM_BIT(item) or'ed, e.g. %TALLY_MM_RSS or
 *	%TALLY_MM_BADNESS; not 0.
 * @out: set to the sum of the items' approximations, each clamped at 0,
 *	and [min, max], which holds the sum of the clamped precise values at
 *	quiescence.
 *
 * One load per item, plus its accuracy bound.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 *
 * Return: 0, or -EINVAL for a NULL or destroyed @mm, a NULL @out, or a
 * mask that names no item or has a bit no TALLY_MM_BIT() sets (a bare
 * item number, for instance).
 */
int tally_mm_approximate(const struct tally_mm *mm, unsigned int mask,
			 struct tally_mm_range *out);

/**
 * tally_mm_precise() - the precise sum of some items.
 * @mm: initialized counters.
 * @mask: as for tally_mm_approximate().
 *
 * Sums every CPU's slot of each item (O(nr_cpus) per item), clamps each
 * item at 0 and adds them, saturating at LONG_MAX.  Exact when no add is
 * in flight.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 *
 * Return: the sum (>= 0), or -EINVAL for a NULL or destroyed @mm or a bad
 * mask.
 */
long tally_mm_precise(const struct tally_mm *mm, unsigned int mask);

/**
 * tally_mm_item_name() - the name of an item, e.g. "TALLY_MM_ANON".
 * @item: the item.
 *
 * Context: MT-safe, async-signal-safe: returns a constant.
 *
 * Return: a static string, or NULL for an unknown item.
 */
const char *tally_mm_item_name(enum tally_mm_item item);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_MM_H */
