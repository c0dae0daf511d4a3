// SPDX-License-Identifier: MIT
/*
 * baseline_striped.c - striped CAS cells in the style of Java's LongAdder.
 *
 * A base value plus a table of cache-line-padded cells.  Without
 * contention every add is a CAS on the base.  The first failed CAS on the
 * base creates a table of two cells; from then on a thread adds with a CAS
 * on the cell its thread-local probe selects.  A failed CAS on a cell
 * means another thread shares it: the thread moves to another cell by
 * advancing its probe (a xorshift step), and after a second collision in
 * a row the table doubles, until it has at least as many cells as there
 * are possible CPUs (the next power of two), like LongAdder's NCPU cap.
 * Cells are created lazily when a probe first selects them.
 *
 * Unlike Java, which copies the cell references into a new array, the
 * table here is allocated once at its largest size and doubling only
 * publishes a larger length: a cell keeps its index, as in Java, and no
 * array is ever freed while threads may read it.  The sum is the base
 * plus every cell.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "baselines.h"

struct cell {
	long value;
} __attribute__((aligned(64)));

struct striped {
	long base __attribute__((aligned(64)));
	unsigned int len __attribute__((aligned(64)));	/* 0: base only */
	unsigned int max;
	struct cell **cells;				/* max entries */
};

/* The thread's probe; 0 until its first contention, like Java's. */
static __thread uint32_t probe __attribute__((tls_model("initial-exec")));
static uint32_t probe_seed;

static uint32_t probe_advance(uint32_t h)
{
	h ^= h << 13;
	h ^= h >> 17;
	h ^= h << 5;
	return h;
}

static uint32_t probe_init(void)
{
	uint32_t h = __atomic_add_fetch(&probe_seed, 0x9e3779b9u,
					__ATOMIC_RELAXED);

	h = (h ^ (h >> 16)) * 0x85ebca6bu;
	h ^= h >> 13;
	return h ? h : 1;
}

static bool cas(long *p, long old, long new)
{
	return __atomic_compare_exchange_n(p, &old, new, false,
					   __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void *striped_create(void)
{
	struct tally_domain *d = tally_domain_system();
	struct striped *s;
	unsigned int max = 2;

	if (!d)
		return NULL;
	while (max < tally_domain_nr_cpus(d))
		max *= 2;
	s = aligned_alloc(64, sizeof(*s));
	if (!s)
		return NULL;
	s->cells = calloc(max, sizeof(*s->cells));
	if (!s->cells) {
		free(s);
		return NULL;
	}
	s->base = 0;
	s->len = 0;
	s->max = max;
	return s;
}

static void striped_destroy(void *ctr)
{
	struct striped *s = ctr;

	for (unsigned int i = 0; i < s->max; i++)
		free(s->cells[i]);
	free(s->cells);
	free(s);
}

/* Put a new cell holding @x at @slot; false if another thread was first. */
static bool cell_create(struct cell **slot, long x)
{
	struct cell *expected = NULL, *c = aligned_alloc(64, sizeof(*c));

	if (!c)		/* the caller tries the base, then elsewhere */
		return false;
	c->value = x;
	if (__atomic_compare_exchange_n(slot, &expected, c, false,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		return true;
	free(c);
	return false;
}

/* The contended path (Java's longAccumulate). */
static void __attribute__((noinline)) striped_slow(struct striped *s, long x,
						    bool cell_collided)
{
	bool collide = false;
	uint32_t h = probe;

	if (!h)
		h = probe_init();
	else if (cell_collided)
		h = probe_advance(h);
	for (;;) {
		unsigned int len = __atomic_load_n(&s->len, __ATOMIC_ACQUIRE);
		struct cell **slot;
		struct cell *c;
		long v;

		if (!len) {
			unsigned int zero = 0;

			/* First contention on the base: start the table. */
			__atomic_compare_exchange_n(&s->len, &zero, 2, false,
						    __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED);
			continue;
		}
		slot = &s->cells[h & (len - 1)];
		c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (!c) {
			if (cell_create(slot, x))
				break;
			v = __atomic_load_n(&s->base, __ATOMIC_RELAXED);
			if (cas(&s->base, v, v + x))
				break;
			collide = false;
		} else {
			v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
			if (cas(&c->value, v, v + x))
				break;
			if (len >= s->max) {
				collide = false;
			} else if (!collide) {
				collide = true;
			} else {
				/* Double the table, retry at the same probe. */
				__atomic_compare_exchange_n(&s->len, &len,
							    len * 2, false,
							    __ATOMIC_RELEASE,
							    __ATOMIC_RELAXED);
				collide = false;
				continue;
			}
		}
		h = probe_advance(h);
	}
	probe = h;
}

static void striped_add(void *ctr, long x)
{
	struct striped *s = ctr;
	unsigned int len = __atomic_load_n(&s->len, __ATOMIC_ACQUIRE);
	struct cell *c;
	long v;

	if (!len) {
		v = __atomic_load_n(&s->base, __ATOMIC_RELAXED);
		if (__builtin_expect(cas(&s->base, v, v + x), 1))
			return;
		striped_slow(s, x, false);
		return;
	}
	c = __atomic_load_n(&s->cells[probe & (len - 1)], __ATOMIC_ACQUIRE);
	if (__builtin_expect(c != NULL, 1)) {
		v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
		if (__builtin_expect(cas(&c->value, v, v + x), 1))
			return;
	}
	striped_slow(s, x, c != NULL);
}

static void striped_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, striped_add);
}

static long striped_sum(void *ctr)
{
	struct striped *s = ctr;
	unsigned long sum = (unsigned long)__atomic_load_n(&s->base,
							   __ATOMIC_RELAXED);

	for (unsigned int i = 0; i < s->max; i++) {
		struct cell *c = __atomic_load_n(&s->cells[i],
						 __ATOMIC_ACQUIRE);

		if (c)
			sum += (unsigned long)__atomic_load_n(&c->value,
							      __ATOMIC_RELAXED);
	}
	return (long)sum;
}

const struct bench_impl bench_impl_striped_cells = {
	.name = "striped_cells",
	.what = "striped CAS cells (Java LongAdder)",
	.create = striped_create,
	.destroy = striped_destroy,
	.run = striped_run,
	.sum = striped_sum,
};
