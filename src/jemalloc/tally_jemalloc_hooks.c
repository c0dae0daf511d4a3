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
 * A refused charge purges every arena's dirty pages and retries with the
 * group's reclaim and OOM policy; a refusal makes the hook fail, and
 * jemalloc returns NULL (ENOMEM).  The hooks keep nothing but
 * thread-local state (whether the thread installs the hooks, and the
 * commit it refused last) and take one lock of ours, the fork gate, only
 * to try it.
 *
 * The fork gate.  jemalloc calls a hook with an arena's lock held, and a
 * charge that does not fit at once drains the memory tree's stocks (its
 * drain lock) and purges every arena (their decay and cache locks):
 * fork() takes the tree's locks, then jemalloc's, so a fork at that
 * moment would wait for the hook's arena lock while the hook waits for a
 * lock the fork holds.  That slow part runs as a reader of the gate, only
 * if it can enter without waiting; the integration's prepare handler,
 * which runs before the tree's and jemalloc's, takes the gate as a writer
 * and so waits for the hooks inside.  A hook that finds it taken (a fork
 * in progress) refuses the charge that did not fit at once, as a charge
 * the stocks could not serve without waiting (%TALLY_MEMCG_NOBLOCK).
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
 * The commit the calling thread's hooks refused last, if no hook ran
 * since.  When a commit is refused jemalloc falls back to a fresh mapping
 * of the same size, committed (extent_alloc_wrapper()): that is the same
 * allocation failing, refused here without a second charge attempt (the
 * group would count two max and oom events for one failed malloc()).
 */
static __thread struct arena *refused_arena;
static __thread size_t refused_size;

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

void tally_je_purge_all(void)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.purge", MALLCTL_ARENAS_ALL);
	mallctl(name, NULL, NULL, NULL, 0);
}

/* Charge @n bytes for @a; false (errno ENOMEM) when refused. */
static bool charge(struct arena *a, size_t n)
{
	struct tally_memcg *g = atomic_load_explicit(&a->group,
						     memory_order_acquire);
	int ret;

	if (n == 0)
		return true;
	if (g && !in_install) {
		ret = tally_memcg_charge(g, (long)n, TALLY_MEMCG_NOBLOCK);
		if (ret == -EAGAIN && !pthread_rwlock_tryrdlock(&gate)) {
			ret = tally_memcg_charge(g, (long)n,
						 TALLY_MEMCG_NORECLAIM);
			if (ret == -ENOMEM) {
				tally_je_purge_all();
				ret = tally_memcg_charge(g, (long)n, 0);
			}
			pthread_rwlock_unlock(&gate);
		}
		if (ret < 0) {
			errno = ENOMEM;
			return false;
		}
		tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, (long)n);
	}
	atomic_fetch_add_explicit(&a->charged, (long)n, memory_order_relaxed);
	return true;
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

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size,
			size_t alignment, bool *zero, bool *commit,
			unsigned int ind)
{
	struct arena *a = arena_of(h);
	bool want_commit = *commit;
	bool retry = refused_arena == a && refused_size == size;
	void *p;

	refused_arena = NULL;
	if (want_commit && retry && !new_addr) {
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
	refused_arena = NULL;
	if (charge(arena_of(h), length))
		return false;
	refused_arena = arena_of(h);
	refused_size = length;
	return true;
}

static bool hook_decommit(extent_hooks_t *h, void *addr, size_t size,
			  size_t offset, size_t length, unsigned int ind)
{
	(void)size;
	(void)ind;
	refused_arena = NULL;
	if (madvise((char *)addr + offset, length, MADV_DONTNEED))
		return true;
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
