// SPDX-License-Identifier: MIT
/*
 * charge_designs.c - the four charging designs of `tally bench charge`
 * (charge_designs.h), written from the designs' descriptions, not from
 * their code.
 *
 *   tally         tally_memcg_charge()/uncharge() on a tally_memcg tree
 *                 (per-CPU stocks of up to two batches taken by rseq,
 *                 page counters raised by compare-and-swap, a drain of
 *                 every CPU before a refusal).
 *   kernel        Linux memcg: a hierarchical page counter (one atomic add
 *                 per level, checked against max after the add and undone
 *                 on failure, as page_counter_try_charge() does) refilled
 *                 64 pages at a time into a per-CPU stock that caches ONE
 *                 group (memcg_stock_pcp).  A charge the stock covers
 *                 takes it; else it charges a batch and stocks the rest;
 *                 else it charges exactly; else it drains its own CPU's
 *                 stock and retries once, then fails.  The kernel also
 *                 schedules the other CPUs' drains, asynchronously, and
 *                 does not wait for them: modelled as not draining them.
 *                 Uncharges go to the stock (refill_stock(): the kernel's
 *                 path for kernel memory; page-cache and anonymous folios
 *                 are uncharged straight from the page counter), which is
 *                 drained whole once it holds more than a batch.
 *                 The stock is one long per CPU: the cached group's number
 *                 in the high bits, the bytes in the low ones, taken and
 *                 put back with tally_percpu_xchg() (an rseq exchange, no
 *                 atomic; the kernel disables interrupts on its CPU
 *                 instead).  Bytes between the take and the put-back belong
 *                 to the thread; whatever another thread of the same CPU
 *                 left in the slot meanwhile is drained, so nothing is
 *                 lost.  On a simulated domain the exchanges are atomic on
 *                 the named CPU's slot.
 *   clickhouse    ClickHouse's MemoryTracker: each thread adds to its own
 *                 untracked bytes; past +4 MiB (max_untracked_memory) it
 *                 charges them to the chain with one atomic add per level,
 *                 each checked against the level's limit and undone on
 *                 failure (MemoryTracker::allocImpl: the same try-charge as
 *                 the page counter's); below -4 MiB it subtracts them.  A
 *                 refused flush undoes every level and keeps the bytes
 *                 untracked but the refused charge.  At thread exit the
 *                 untracked bytes are flushed without a limit check, as
 *                 ClickHouse's ThreadStatus does.
 *   page_counter  the page counter alone: one atomic per level on every
 *                 charge and uncharge, exact, no cache.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/memcg.h>
#include <tally/percpu.h>
#include "charge_designs.h"

/* The thread_exit of designs that keep nothing per thread. */
static void no_thread_exit(void *v, struct charge_thread *th)
{
}

/* ---- tally ------------------------------------------------------------ */

struct tally_design {
	struct tally_memcg_tree *tree;
	struct tally_memcg *deepest;	/* of the chain: the reads */
	struct tally_memcg **targets;	/* the leaves, or the deepest */
	unsigned int flags;
};

static void tally_destroy(void *v)
{
	struct tally_design *t = v;

	tally_memcg_tree_destroy(t->tree);
	free(t->targets);
	free(t);
}

static void *tally_create(const struct charge_setup *s)
{
	struct tally_memcg_options o = { .domain = s->domain };
	struct tally_design *t = calloc(1, sizeof(*t));
	struct tally_memcg *g;
	int err;

	if (!t)
		return NULL;
	t->flags = s->tally_flags;
	t->targets = calloc(s->leaves ? s->leaves : 1, sizeof(*t->targets));
	err = t->targets ? tally_memcg_tree_create(&t->tree, &o) : -ENOMEM;
	g = err ? NULL : tally_memcg_root(t->tree);
	for (unsigned int i = 0; i < s->depth && !err; i++) {
		char name[16];

		snprintf(name, sizeof(name), "level%u", i + 1);
		err = tally_memcg_create(g, name, &g);
		if (!err)
			err = tally_memcg_set_limit(g, TALLY_MEMCG_MAX, s->max);
	}
	t->deepest = g;
	t->targets[0] = g;
	for (unsigned int i = 0; i < s->leaves && !err; i++) {
		char name[16];

		snprintf(name, sizeof(name), "leaf%u", i);
		err = tally_memcg_create(t->deepest, name, &t->targets[i]);
	}
	if (err) {
		tally_destroy(t);
		errno = -err;
		return NULL;
	}
	return t;
}

static inline __attribute__((always_inline)) int
tally_charge_to(void *v, struct charge_thread *th, int cpu, long n,
		bool leaves)
{
	struct tally_design *t = v;
	int err;
	struct tally_memcg *g = leaves ? t->targets[th->leaf] : t->deepest;

	if (cpu == CHARGE_THIS_CPU)
		err = tally_memcg_charge(g, n, t->flags);
	else
		err = tally_memcg_charge_cpu(g, (unsigned int)cpu, n, t->flags);
	return err < 0 ? err : 0;	/* no high set: no OVER_HIGH */
}

static inline __attribute__((always_inline)) void
tally_uncharge_to(void *v, struct charge_thread *th, int cpu, long n,
		  bool leaves)
{
	struct tally_design *t = v;
	struct tally_memcg *g = leaves ? t->targets[th->leaf] : t->deepest;

	/* A failure (-ERANGE) would show as drift in the harness's check. */
	if (cpu == CHARGE_THIS_CPU)
		tally_memcg_uncharge(g, n);
	else
		tally_memcg_uncharge_cpu(g, (unsigned int)cpu, n);
}

static long tally_read(struct tally_design *t, enum tally_memcg_read_mode m)
{
	struct tally_memcg_range r;

	return tally_memcg_usage(t->deepest, m, &r) ? -1 : r.value;
}

static long tally_usage(void *v)
{
	return tally_read(v, TALLY_MEMCG_READ_APPROX);
}

static long tally_drained_usage(void *v)
{
	return tally_read(v, TALLY_MEMCG_READ_DRAIN);
}

CHARGE_DESIGN_ENTRIES(tally)

const struct charge_design charge_design_tally = {
	.name = "tally",
	.what = "tally_memcg: per-CPU stocks of up to 2 batches (rseq),\n"
		"               CAS page counters, every CPU drained before a refusal",
	.create = tally_create,
	.destroy = tally_destroy,
	.charge = tally_charge,
	.uncharge = tally_uncharge,
	.thread_exit = no_thread_exit,
	.usage = tally_usage,
	.drained_usage = tally_drained_usage,
	.pairs = tally_pairs,
};

/* ---- the page counter, shared by the three baselines ------------------ */

/* One level: its own cache line, as the kernel aligns the usage. */
struct page_counter {
	long usage;
	long max;
	long peak;
	struct page_counter *parent;
} __attribute__((aligned(64)));

/*
 * Raise every level from @c up by @n: add, compare with max, undo on
 * failure (this level and those below).  A level is transiently above
 * max between the add and the undo, which can make a concurrent charge
 * fail: both the kernel and ClickHouse accept that.
 */
static bool pc_try_charge(struct page_counter *c, long n)
{
	for (struct page_counter *i = c; i; i = i->parent) {
		long now = __atomic_add_fetch(&i->usage, n, __ATOMIC_RELAXED);

		if (now > i->max) {
			for (struct page_counter *j = c; j != i->parent;
			     j = j->parent)
				__atomic_sub_fetch(&j->usage, n,
						   __ATOMIC_RELAXED);
			return false;
		}
		/* The watermark (memory.peak / MemoryTracker::peak). */
		if (now > __atomic_load_n(&i->peak, __ATOMIC_RELAXED))
			__atomic_store_n(&i->peak, now, __ATOMIC_RELAXED);
	}
	return true;
}

/* Add @n (any sign) to every level from @c up, without a check. */
static void pc_add(struct page_counter *c, long n)
{
	for (; c; c = c->parent)
		__atomic_add_fetch(&c->usage, n, __ATOMIC_RELAXED);
}

static long pc_read(const struct page_counter *c)
{
	return __atomic_load_n(&c->usage, __ATOMIC_RELAXED);
}

/*
 * The chain of @s: level 0 the root (no limit), levels 1 to depth with
 * s->max, then s->leaves levels without a limit under level depth.
 * Return: the levels, NULL with errno set.
 */
static struct page_counter *pc_chain(const struct charge_setup *s)
{
	size_t nr = s->depth + 1 + s->leaves;
	struct page_counter *c;

	if (!s->depth || s->depth > CHARGE_MAX_DEPTH) {
		errno = EINVAL;
		return NULL;
	}
	c = aligned_alloc(64, sizeof(*c) * nr);
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c) * nr);
	c[0].max = TALLY_MEMCG_UNLIMITED;
	for (unsigned int i = 1; i < nr; i++) {
		c[i].max = i <= s->depth ? s->max : TALLY_MEMCG_UNLIMITED;
		c[i].parent = &c[i <= s->depth ? i - 1 : s->depth];
	}
	return c;
}

/* The level charges go to first: the first leaf, or the deepest. */
static unsigned int pc_first_target(const struct charge_setup *s)
{
	return s->leaves ? s->depth + 1 : s->depth;
}

/* ---- kernel: page counter + per-CPU stock of one group ----------------- */

/* A stock word: the group's number (1 up) above bit 48, bytes below. */
#define STOCK_SHIFT 48
#define STOCK_BYTES(w) ((w) & ((1l << STOCK_SHIFT) - 1))
#define STOCK_GROUP(w) ((unsigned int)((w) >> STOCK_SHIFT))

struct kernel_design {
	struct page_counter *levels;
	unsigned int depth;
	unsigned int first;		/* pc_first_target() */
	struct tally_domain *domain;	/* NULL: the system's, rseq */
	unsigned int nr_cpus;
	long *stock;			/* per-CPU stock words */
};

static long stock_xchg(struct kernel_design *k, int cpu, long w)
{
	if (cpu == CHARGE_THIS_CPU)
		return tally_percpu_xchg(k->stock, w);
	return __atomic_exchange_n((long *)tally_percpu_ptr(k->stock,
							     (unsigned int)cpu),
				   w, __ATOMIC_RELAXED);
}

/* drain_stock(): give a stock word's bytes back to its group. */
static void stock_drain(struct kernel_design *k, long w)
{
	if (w)
		pc_add(&k->levels[STOCK_GROUP(w) - 1], -STOCK_BYTES(w));
}

/* Put @w in the slot; what another thread left there meanwhile drains. */
static void stock_put(struct kernel_design *k, int cpu, long w)
{
	if (w)
		stock_drain(k, stock_xchg(k, cpu, w));
}

/* consume_stock(): take @n from this CPU's stock if it caches the group. */
static bool stock_consume(struct kernel_design *k, int cpu, unsigned int id,
			  long n)
{
	long w = stock_xchg(k, cpu, 0);

	if (w && STOCK_GROUP(w) == id && STOCK_BYTES(w) >= n) {
		long rest = STOCK_BYTES(w) - n;

		stock_put(k, cpu, rest ? ((long)id << STOCK_SHIFT) | rest : 0);
		return true;
	}
	stock_put(k, cpu, w);
	return false;
}

/*
 * refill_stock(): add @n to this CPU's stock, replacing (draining) the
 * stock of another group; more than a batch drains it all.
 */
static void stock_refill(struct kernel_design *k, int cpu, unsigned int id,
			 long n)
{
	long w = stock_xchg(k, cpu, 0);

	if (w && STOCK_GROUP(w) == id) {
		n += STOCK_BYTES(w);
	} else {
		stock_drain(k, w);
	}
	if (n > CHARGE_KERNEL_BATCH)
		pc_add(&k->levels[id - 1], -n);
	else
		stock_put(k, cpu, ((long)id << STOCK_SHIFT) | n);
}

static void kernel_destroy(void *v)
{
	struct kernel_design *k = v;

	tally_percpu_free(k->domain, k->stock);
	free(k->levels);
	free(k);
}

static void *kernel_create(const struct charge_setup *s)
{
	struct kernel_design *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->depth = s->depth;
	k->first = pc_first_target(s);
	k->domain = s->domain;
	k->nr_cpus = tally_domain_nr_cpus(s->domain ? s->domain :
					  tally_domain_system());
	k->levels = pc_chain(s);
	k->stock = k->levels ? tally_percpu_alloc(s->domain, sizeof(long), 0) :
			       NULL;
	if (!k->stock) {
		int err = errno;

		free(k->levels);
		free(k);
		errno = err;
		return NULL;
	}
	return k;
}

static inline __attribute__((always_inline)) int
kernel_charge_to(void *v, struct charge_thread *th, int cpu, long n,
		 bool leaves)
{
	struct kernel_design *k = v;
	unsigned int id = leaves ? k->first + th->leaf + 1 : k->depth + 1;
	struct page_counter *leaf = &k->levels[id - 1];
	long batch = n > CHARGE_KERNEL_BATCH ? n : CHARGE_KERNEL_BATCH;

	if (n <= CHARGE_KERNEL_BATCH && stock_consume(k, cpu, id, n))
		return 0;
	if (pc_try_charge(leaf, batch)) {
		if (batch > n)
			stock_refill(k, cpu, id, batch - n);
		return 0;
	}
	if (batch > n && pc_try_charge(leaf, n))
		return 0;
	/* The synchronous part of drain_all_stock(): this CPU only. */
	stock_drain(k, stock_xchg(k, cpu, 0));
	return pc_try_charge(leaf, n) ? 0 : -ENOMEM;
}

static inline __attribute__((always_inline)) void
kernel_uncharge_to(void *v, struct charge_thread *th, int cpu, long n,
		   bool leaves)
{
	struct kernel_design *k = v;

	stock_refill(k, cpu, leaves ? k->first + th->leaf + 1 : k->depth + 1,
		     n);
}

static long kernel_usage(void *v)
{
	struct kernel_design *k = v;

	return pc_read(&k->levels[k->depth]);
}

/* At quiescence only: atomic exchanges on slots that rseq may write. */
static long kernel_drained_usage(void *v)
{
	struct kernel_design *k = v;

	for (unsigned int cpu = 0; cpu < k->nr_cpus; cpu++)
		stock_drain(k, __atomic_exchange_n(
				(long *)tally_percpu_ptr(k->stock, cpu), 0,
				__ATOMIC_SEQ_CST));
	return kernel_usage(v);
}

CHARGE_DESIGN_ENTRIES(kernel)

const struct charge_design charge_design_kernel = {
	.name = "kernel",
	.what = "Linux memcg: an atomic page counter per level and a per-CPU\n"
		"               stock of 64 pages caching one group",
	.create = kernel_create,
	.destroy = kernel_destroy,
	.charge = kernel_charge,
	.uncharge = kernel_uncharge,
	.thread_exit = no_thread_exit,
	.usage = kernel_usage,
	.drained_usage = kernel_drained_usage,
	.pairs = kernel_pairs,
};

/* ---- the bare page counter, and ClickHouse ----------------------------- */

struct chain_design {
	struct page_counter *levels;
	struct page_counter *deepest;	/* of the chain: the reads */
	struct page_counter *targets;	/* the leaves, or the deepest */
};

static void *chain_create(const struct charge_setup *s)
{
	struct chain_design *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->levels = pc_chain(s);
	if (!c->levels) {
		int err = errno;

		free(c);
		errno = err;
		return NULL;
	}
	c->deepest = &c->levels[s->depth];
	c->targets = &c->levels[pc_first_target(s)];
	return c;
}

static void chain_destroy(void *v)
{
	struct chain_design *c = v;

	free(c->levels);
	free(c);
}

static long chain_usage(void *v)
{
	struct chain_design *c = v;

	return pc_read(c->deepest);
}

/* The group a chain design's call goes to. */
static inline __attribute__((always_inline)) struct page_counter *
chain_target(struct chain_design *c, struct charge_thread *th, bool leaves)
{
	return leaves ? &c->targets[th->leaf] : c->deepest;
}

static inline __attribute__((always_inline)) int
pc_charge_to(void *v, struct charge_thread *th, int cpu, long n, bool leaves)
{
	return pc_try_charge(chain_target(v, th, leaves), n) ? 0 : -ENOMEM;
}

static inline __attribute__((always_inline)) void
pc_uncharge_to(void *v, struct charge_thread *th, int cpu, long n,
	       bool leaves)
{
	pc_add(chain_target(v, th, leaves), -n);
}

CHARGE_DESIGN_ENTRIES(pc)

const struct charge_design charge_design_page_counter = {
	.name = "page_counter",
	.what = "one atomic add per level on every charge and uncharge,\n"
		"               checked against max, no cache",
	.create = chain_create,
	.destroy = chain_destroy,
	.charge = pc_charge,
	.uncharge = pc_uncharge,
	.thread_exit = no_thread_exit,
	.usage = chain_usage,
	.drained_usage = chain_usage,
	.pairs = pc_pairs,
};

/*
 * The thread's untracked bytes go to the group they were counted for, as
 * ClickHouse's ThreadStatus flushes them when a thread leaves a query:
 * without a limit check.
 */
static void ch_flush(struct chain_design *c, struct charge_thread *th)
{
	pc_add(&c->targets[th->untracked_leaf], th->untracked);
	th->untracked = 0;
}

/* The thread moves to th->leaf: its untracked bytes are for the old one. */
static void ch_follow(struct chain_design *c, struct charge_thread *th)
{
	if (th->leaf != th->untracked_leaf) {
		ch_flush(c, th);
		th->untracked_leaf = th->leaf;
	}
}

static inline __attribute__((always_inline)) int
ch_charge_to(void *v, struct charge_thread *th, int cpu, long n, bool leaves)
{
	struct chain_design *c = v;

	if (leaves)
		ch_follow(c, th);
	th->untracked += n;
	if (th->untracked <= CHARGE_CLICKHOUSE_UNTRACKED)
		return 0;
	if (pc_try_charge(chain_target(c, th, leaves), th->untracked)) {
		th->untracked = 0;
		return 0;
	}
	th->untracked -= n;
	return -ENOMEM;
}

static inline __attribute__((always_inline)) void
ch_uncharge_to(void *v, struct charge_thread *th, int cpu, long n,
	       bool leaves)
{
	struct chain_design *c = v;

	if (leaves)
		ch_follow(c, th);
	th->untracked -= n;
	if (th->untracked < -CHARGE_CLICKHOUSE_UNTRACKED)
		ch_flush(c, th);
}

static void ch_thread_exit(void *v, struct charge_thread *th)
{
	ch_flush(v, th);
}

CHARGE_DESIGN_ENTRIES(ch)

const struct charge_design charge_design_clickhouse = {
	.name = "clickhouse",
	.what = "MemoryTracker: per-thread untracked bytes up to +-4 MiB,\n"
		"               then one atomic add per level with a limit check",
	.create = chain_create,
	.destroy = chain_destroy,
	.charge = ch_charge,
	.uncharge = ch_uncharge,
	.thread_exit = ch_thread_exit,
	.usage = chain_usage,
	.drained_usage = chain_usage,
	.pairs = ch_pairs,
};
