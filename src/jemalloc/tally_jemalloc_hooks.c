// SPDX-License-Identifier: MIT
/*
 * tally_jemalloc_hooks.c - the extent hooks that charge jemalloc's pages
 * to memory groups (tally/jemalloc.h has the design):
 *
 *   alloc     maps address space with jemalloc's default hook and reports
 *             it uncommitted unless jemalloc asks for committed memory
 *             (then charges it);
 *   commit    charges (the pages are already mapped read-write: Linux
 *             overcommits, committing costs nothing but the charge);
 *   decommit  madvise(MADV_DONTNEED), then uncharges: jemalloc purges
 *             through it, so purged and retained pages are not charged;
 *   dalloc    none: jemalloc keeps the address space (retained), as it
 *             does by default on Linux;
 *   destroy   unmaps, uncharging what was committed;
 *   purge     lazy: none (no muzzy pages); forced: MADV_DONTNEED;
 *   split, merge: jemalloc's defaults (nothing to charge).
 *
 * A hook never calls into jemalloc or into user code: jemalloc holds an
 * arena's lock around it (its grow lock for a new extent), and a purge
 * (mallctl) or a reclaim callback that allocates or frees would take
 * jemalloc's locks in an order its lock checker rejects, or wait for the
 * lock the hook's caller holds.  So a hook charges only with what cannot
 * wait for jemalloc: the stock, one compare-and-swap per level, and a
 * drain of the tree's stocks (%TALLY_MEMCG_NORECLAIM, the tree's own
 * locks).  A charge that does not fit then fails the hook, jemalloc
 * returns NULL (ENOMEM), and the hook leaves a note for the thread: the
 * arena and the bytes it was refused.  tally_jemalloc_make_room(), called
 * after the failed allocation where no allocator lock is held, purges,
 * charges those bytes with the group's reclaim callbacks and OOM policy,
 * and keeps them for the thread: its next commit on that arena (the
 * retried allocation) takes them instead of charging, and what it does
 * not take goes back at once (or at the thread's next commit, next
 * tally_jemalloc_make_room() or exit).  The hooks keep nothing but
 * thread-local state and take one lock of ours, the fork gate, only to
 * try it.
 *
 * The fork gate.  A drain takes the memory tree's drain lock; fork()
 * takes the tree's locks, then jemalloc's, so a fork at the moment a hook
 * (inside an arena's lock) waits for the drain lock would wait for that
 * arena lock while the fork holds the tree's.  The drain runs as a reader
 * of the gate, only if it can enter without waiting; the integration's
 * prepare handler, which runs before the tree's and jemalloc's, takes the
 * gate as a writer and so waits for the hooks inside.  A hook that finds
 * it taken (a fork in progress) refuses the charge that did not fit at
 * once, as a charge the stocks could not serve without waiting
 * (%TALLY_MEMCG_NOBLOCK).
 */
#define _GNU_SOURCE	/* PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "jemalloc_internal.h"

/* jemalloc's default hooks, read once by tally_je_hooks_setup(). */
static extent_hooks_t *dflt;

/* The install of the automatic arenas' hooks: their metadata, mapped
 * through our alloc hook then, is not charged. */
static __thread bool in_install;

/*
 * The calling thread's note: the arena and bytes of the charge its hooks
 * refused last, until one of its charges succeeds or
 * tally_jemalloc_make_room() takes it; the room that function made
 * (charged to the arena, in its charged count, until a commit takes it);
 * and the arena for which, from a refused charge until one of its charges
 * succeeds, it uncharges (room was made) or the note is taken, the
 * thread's hooks map new address space only if the bytes refused fit now
 * (room_for_growth()).  When a commit is refused, jemalloc 5.3 maps more
 * (its retained cache had a range, whose commit failed, so it grows the
 * cache) and then tries a fresh committed mapping: address space that
 * jemalloc never gives back, gained for every refused allocation, with
 * the metadata that describes it (gigabytes of both within seconds at a
 * limit).  Refused at once instead, the allocation fails as it would
 * have.
 */
static __thread struct {
	struct arena *refused_arena;
	size_t refused;
	struct arena *prepaid_arena;
	size_t prepaid;
	struct arena *no_growth;
	bool thread_start;
} room;

/* Writers first: a fork waiting for the gate closes it to new hooks. */
static pthread_rwlock_t gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

void tally_je_gate_close(void)
{
	pthread_rwlock_wrlock(&gate);
}

void tally_je_gate_open(void)
{
	pthread_rwlock_unlock(&gate);
}

void tally_je_gate_reset(void)
{
	static const pthread_rwlock_t fresh =
		PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

	/* The child's writer is its only thread, under another thread ID
	 * than the parent's: unlocking would take it for a reader. */
	memcpy(&gate, &fresh, sizeof(gate));
}

int tally_je_hooks_setup(void)
{
	size_t len = sizeof(dflt);

	return mallctl("arena.0.extent_hooks", &dflt, &len, NULL, 0) ? -1 : 0;
}

void tally_je_installing(bool on)
{
	in_install = on;
}

static struct arena *arena_of(extent_hooks_t *h)
{
	return (struct arena *)h;
}

static void uncharge(struct arena *a, size_t n)
{
	struct tally_memcg *g = atomic_load_explicit(&a->group,
						     memory_order_acquire);

	if (n == 0)
		return;
	atomic_fetch_sub_explicit(&a->charged, (long)n, memory_order_relaxed);
	if (g) {
		tally_memcg_uncharge(g, (long)n);
		tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, -(long)n);
	}
}

void tally_je_room_return(void)
{
	struct arena *a = room.prepaid_arena;

	room.prepaid_arena = NULL;
	if (a)
		uncharge(a, room.prepaid);
}

bool tally_je_room_wanted(struct arena **a, size_t *n)
{
	*a = room.refused_arena;
	*n = room.refused;
	room.refused_arena = NULL;
	room.no_growth = NULL;
	return *a != NULL;
}

void tally_je_thread_starting(bool on)
{
	room.thread_start = on;
}

void tally_je_room_prepaid(struct arena *a, size_t n)
{
	room.prepaid_arena = a;
	room.prepaid = n;
}

/*
 * The room tally_jemalloc_make_room() made for this commit: true when it
 * covers @n bytes of @a (what it does not cover goes back); false, and
 * whatever room there was goes back, otherwise.
 */
static bool take_room(struct arena *a, size_t n)
{
	if (!room.prepaid_arena)
		return false;
	if (room.prepaid_arena != a || room.prepaid < n) {
		tally_je_room_return();
		return false;
	}
	room.prepaid_arena = NULL;
	uncharge(a, room.prepaid - n);
	return true;
}

/* Charge @n bytes for @a; false (errno ENOMEM) when refused. */
static bool charge(struct arena *a, size_t n)
{
	struct tally_memcg *g = atomic_load_explicit(&a->group,
						     memory_order_acquire);
	int ret;

	if (n == 0 || take_room(a, n))
		return true;
	if (g && !in_install) {
		ret = tally_memcg_charge(g, (long)n, room.thread_start ?
					 TALLY_MEMCG_NOFAIL :
					 TALLY_MEMCG_NOBLOCK);
		if (ret == -EAGAIN && !pthread_rwlock_tryrdlock(&gate)) {
			ret = tally_memcg_charge(g, (long)n,
						 TALLY_MEMCG_NORECLAIM);
			pthread_rwlock_unlock(&gate);
		}
		if (ret < 0) {
			room.refused_arena = a;
			room.refused = n;
			room.no_growth = a;
			errno = ENOMEM;
			return false;
		}
		room.refused_arena = NULL;
		room.no_growth = NULL;
		tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, (long)n);
	}
	atomic_fetch_add_explicit(&a->charged, (long)n, memory_order_relaxed);
	return true;
}

/*
 * Whether @a may map new address space: yes, unless the thread's last
 * charge for @a was refused; then only if the bytes refused fit now (the
 * limit was raised, another thread freed), charged as they would be and
 * kept for the commit this growth is for.
 */
static bool room_for_growth(struct arena *a)
{
	size_t n = room.refused;

	if (room.no_growth != a)
		return true;
	if (!charge(a, n))
		return false;
	room.prepaid_arena = a;
	room.prepaid = n;
	return true;
}

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size,
			size_t alignment, bool *zero, bool *commit,
			unsigned int ind)
{
	struct arena *a = arena_of(h);
	bool want_commit = *commit;
	void *p;

	if (!new_addr && !room_for_growth(a)) {
		errno = ENOMEM;
		return NULL;
	}
	if (want_commit && !in_install && !charge(a, size))
		return NULL;
	p = dflt->alloc(dflt, new_addr, size, alignment, zero, commit,
			   ind);
	if (!p) {
		if (want_commit && !in_install)
			uncharge(a, size);
		return NULL;
	}
	/* Mapped read-write; committed only where jemalloc asked for it. */
	*commit = want_commit;
	return p;
}

static bool hook_commit(extent_hooks_t *h, void *addr, size_t size,
			size_t offset, size_t length, unsigned int ind)
{
	(void)addr;
	(void)size;
	(void)ind;
	return !charge(arena_of(h), length);
}

static bool hook_decommit(extent_hooks_t *h, void *addr, size_t size,
			  size_t offset, size_t length, unsigned int ind)
{
	(void)size;
	(void)ind;
	if (madvise((char *)addr + offset, length, MADV_DONTNEED))
		return true;
	room.no_growth = NULL;	/* room was made */
	uncharge(arena_of(h), length);
	return false;
}

static bool hook_purge_forced(extent_hooks_t *h, void *addr, size_t size,
			      size_t offset, size_t length, unsigned int ind)
{
	(void)h;
	(void)size;
	(void)ind;
	return madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
}

static void hook_destroy(extent_hooks_t *h, void *addr, size_t size,
			 bool committed, unsigned int ind)
{
	if (committed)
		uncharge(arena_of(h), size);
	dflt->destroy(dflt, addr, size, committed, ind);
}

static bool hook_split(extent_hooks_t *h, void *addr, size_t size,
		       size_t size_a, size_t size_b, bool committed,
		       unsigned int ind)
{
	(void)h;
	return dflt->split(dflt, addr, size, size_a, size_b, committed,
			      ind);
}

static bool hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
		       void *addr_b, size_t size_b, bool committed,
		       unsigned int ind)
{
	(void)h;
	return dflt->merge(dflt, addr_a, size_a, addr_b, size_b,
			      committed, ind);
}

void tally_je_hooks_init(struct arena *a, unsigned int ind)
{
	a->hooks = (extent_hooks_t){
		.alloc = hook_alloc,
		.dalloc = NULL,
		.destroy = hook_destroy,
		.commit = hook_commit,
		.decommit = hook_decommit,
		.purge_lazy = NULL,
		.purge_forced = hook_purge_forced,
		.split = hook_split,
		.merge = hook_merge,
	};
	a->ind = ind;
}
