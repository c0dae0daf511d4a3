// SPDX-License-Identifier: MIT
/*
 * percpu.c - the per-CPU memory allocator.
 *
 * A chunk is one mapping of nr_cpus units of TALLY_PERCPU_UNIT bytes; an
 * allocation is an offset inside a unit, valid in every CPU's unit:
 *
 *   base ---> | CPU 0: [a  ][b][c    ]... | CPU 1: [a  ][b][c    ]... | ...
 *
 * Invariant: the "used" bitmap of a chunk marks the 8-byte granules taken
 * in every unit, the "start" bitmap the first granule of each allocation,
 * and every free granule is zero in every unit (freeing clears it), so an
 * allocation needs no clearing and untouched pages stay uncommitted.
 *
 * Costs: alloc and free take the pool's mutex.  An allocation is a next
 * fit: each chunk's search starts where its last allocation ended (and
 * a free of the last allocation moves that back), so allocations in a row
 * cost O(1) each whatever their alignment; only a chunk whose end is full
 * is searched again from its start, O(UNIT/8) at worst per chunk.  Free
 * finds its chunk, O(chunks), and also reads nr_units copies and
 * clears the non-zero granules (never writing a page no CPU wrote).
 * Neither is on an update path.  Units are mapped lazily, so a CPU's unit
 * gets its pages from the first CPU that writes them (the CPU itself, for
 * updates).
 *
 * fork(): every live pool is in a registry; the handlers (rank
 * TALLY_FORK_PERCPU of runtime/fork.h, the last: every layer allocates
 * under its own locks) take the registry lock, then each pool's lock,
 * before fork, and the child re-initialises them all, so a thread that
 * was allocating in the parent cannot leave the child's allocator locked.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tally/percpu.h>
#include "fork.h"
#include "percpu_internal.h"

#define GRANULE 8u
#define NR_GRANULES (TALLY_PERCPU_UNIT / GRANULE)
#define BITS_PER_WORD 64u

struct tally_percpu_chunk {
	struct tally_percpu_chunk *next;
	char *base;
	size_t map_size;
	size_t nr_free;
	size_t no_fit;		/* a run this long failed since the last free */
	size_t cursor;		/* where the last allocation ended */
	uint64_t used[NR_GRANULES / BITS_PER_WORD];
	uint64_t start[NR_GRANULES / BITS_PER_WORD];
};

static bool test_bit(const uint64_t *map, size_t i)
{
	return map[i / BITS_PER_WORD] >> (i % BITS_PER_WORD) & 1u;
}

static void assign_bit(uint64_t *map, size_t i, bool v)
{
	uint64_t mask = (uint64_t)1 << (i % BITS_PER_WORD);

	if (v)
		map[i / BITS_PER_WORD] |= mask;
	else
		map[i / BITS_PER_WORD] &= ~mask;
}

/*
 * First free run of @n granules aligned to @step granules in [@from,
 * @to), or -1.  Whole used words are skipped 64 granules at a time.
 */
static long find_run_in(const struct tally_percpu_chunk *ch, size_t n,
			size_t step, size_t from, size_t to)
{
	for (size_t first = (from + step - 1) / step * step; first + n <= to;
	     first += step) {
		size_t i;

		if (ch->used[first / BITS_PER_WORD] == ~(uint64_t)0) {
			/* Jump to the next word, keeping the alignment. */
			first = (first / BITS_PER_WORD + 1) * BITS_PER_WORD;
			first = (first + step - 1) / step * step - step;
			continue;
		}
		for (i = 0; i < n; i++)
			if (test_bit(ch->used, first + i))
				break;
		if (i == n)
			return (long)first;
		/* Skip past the taken granule, keeping the alignment. */
		first = (first + i) / step * step;
	}
	return -1;
}

/*
 * Next fit: from where the last allocation ended, then from the start.
 * Allocations in a row (a tree's groups) cost O(1) each, not a scan past
 * every hole that their alignment leaves behind them.
 */
static long find_run(const struct tally_percpu_chunk *ch, size_t n,
		     size_t step)
{
	long first = find_run_in(ch, n, step, ch->cursor, NR_GRANULES);

	if (first < 0)
		first = find_run_in(ch, n, step, 0,
				    ch->cursor + n < NR_GRANULES ?
					    ch->cursor + n : NR_GRANULES);
	return first;
}

static struct tally_percpu_chunk *chunk_new(struct tally_percpu_pool *pool)
{
	struct tally_percpu_chunk *ch = calloc(1, sizeof(*ch));
	size_t size = (size_t)pool->nr_units * TALLY_PERCPU_UNIT;

	if (!ch)
		return NULL;
	ch->base = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ch->base == MAP_FAILED) {
		free(ch);
		return NULL;
	}
	ch->map_size = size;
	ch->nr_free = NR_GRANULES;
	ch->no_fit = 0;
	ch->next = pool->chunks;
	pool->chunks = ch;
	return ch;
}

void *tally_percpu_pool_alloc(struct tally_percpu_pool *pool, size_t size,
			      size_t align)
{
	struct tally_percpu_chunk *ch;
	size_t n, step;
	long first = -1;

	if (!align)
		align = GRANULE;
	if (!size || size > TALLY_PERCPU_UNIT || align > 4096 ||
	    (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	n = (size + GRANULE - 1) / GRANULE;
	step = align > GRANULE ? align / GRANULE : 1;

	pthread_mutex_lock(&pool->lock);
	for (ch = pool->chunks; ch; ch = ch->next) {
		if (ch->nr_free < n || (ch->no_fit && n >= ch->no_fit))
			continue;
		first = find_run(ch, n, step);
		if (first >= 0)
			break;
		/* Alignment aside, nothing this long fits until a free. */
		if (step == 1)
			ch->no_fit = n;
	}
	if (!ch) {
		ch = chunk_new(pool);
		if (ch)
			first = find_run(ch, n, step);
	}
	if (!ch || first < 0) {
		pthread_mutex_unlock(&pool->lock);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		assign_bit(ch->used, (size_t)first + i, true);
	assign_bit(ch->start, (size_t)first, true);
	ch->nr_free -= n;
	ch->cursor = (size_t)first + n;
	pthread_mutex_unlock(&pool->lock);
	return ch->base + (size_t)first * GRANULE;
}

/*
 * Zero @n granules, writing only the non-zero ones: reading a page no CPU
 * ever wrote maps the shared zero page and commits nothing, where a store
 * would commit a page for a CPU that may never run (a VM with 384 possible
 * CPUs and 8 online).
 */
static void clear_granules(void *copy, size_t n)
{
	uint64_t *g = copy;

	for (size_t i = 0; i < n; i++)
		if (g[i])
			g[i] = 0;
}

void tally_percpu_pool_free(struct tally_percpu_pool *pool, void *ptr)
{
	struct tally_percpu_chunk *ch;
	size_t first, n = 0;

	if (!ptr)
		return;
	pthread_mutex_lock(&pool->lock);
	for (ch = pool->chunks; ch; ch = ch->next)
		if ((char *)ptr >= ch->base &&
		    (char *)ptr < ch->base + TALLY_PERCPU_UNIT)
			break;
	if (!ch)
		goto out;
	first = (size_t)((char *)ptr - ch->base) / GRANULE;
	if (!test_bit(ch->start, first))
		goto out;
	assign_bit(ch->start, first, false);
	while (first + n < NR_GRANULES && test_bit(ch->used, first + n) &&
	       !test_bit(ch->start, first + n)) {
		assign_bit(ch->used, first + n, false);
		n++;
	}
	for (unsigned int cpu = 0; cpu < pool->nr_units; cpu++)
		clear_granules(tally_percpu_ptr(ptr, cpu), n);
	ch->nr_free += n;
	ch->no_fit = 0;
	/* The last allocation freed: the next one takes its place. */
	if (first + n == ch->cursor)
		ch->cursor = first;
out:
	pthread_mutex_unlock(&pool->lock);
}

/* --- registry of live pools, for fork ------------------------------------ */

static struct tally_fork_list pools = TALLY_FORK_LIST_INIT;

void tally_percpu_pool_init(struct tally_percpu_pool *pool,
			    unsigned int nr_units)
{
	pthread_mutex_init(&pool->lock, NULL);
	pool->chunks = NULL;
	pool->nr_units = nr_units;
	tally_fork_list_add(&pools, &pool->fork_node);
}

static void fork_prepare(void)
{
	struct tally_percpu_pool *p;

	pthread_mutex_lock(&pools.lock);
	tally_fork_for_each(p, &pools, struct tally_percpu_pool, fork_node)
		pthread_mutex_lock(&p->lock);
}

static void fork_parent(void)
{
	struct tally_percpu_pool *p;

	tally_fork_for_each(p, &pools, struct tally_percpu_pool, fork_node)
		pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&pools.lock);
}

/*
 * The child's only thread took these locks in fork_prepare(); it releases
 * them (so that tools tracking owners, like TSan, see them released) and
 * initialises them afresh, free of any waiter the parent had: a thread
 * the child does not have.
 */
static void fork_child(void)
{
	struct tally_percpu_pool *p;

	tally_fork_for_each(p, &pools, struct tally_percpu_pool, fork_node)
		tally_mutex_reset(&p->lock);
	tally_mutex_reset(&pools.lock);
}

__attribute__((constructor)) static void install_fork_handlers(void)
{
	tally_fork_register(TALLY_FORK_PERCPU, fork_prepare, fork_parent,
			    fork_child);
}

void tally_percpu_pool_release(struct tally_percpu_pool *pool)
{
	struct tally_percpu_chunk *ch = pool->chunks;

	tally_fork_list_del(&pools, &pool->fork_node);

	while (ch) {
		struct tally_percpu_chunk *next = ch->next;

		munmap(ch->base, ch->map_size);
		free(ch);
		ch = next;
	}
	pool->chunks = NULL;
	pthread_mutex_destroy(&pool->lock);
}
