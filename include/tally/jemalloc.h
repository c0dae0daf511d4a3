/* SPDX-License-Identifier: MIT */
#ifndef TALLY_JEMALLOC_H
#define TALLY_JEMALLOC_H

/*
 * tally/jemalloc.h - memory allocated with jemalloc charged to the
 * allocating thread's memory group, as the kernel charges pages to the
 * current task's cgroup.  An optional component: its own library,
 * libtally_jemalloc, linked with -ltally_jemalloc -ltally -ljemalloc
 * (jemalloc 5.3; libtally itself does not depend on jemalloc).
 *
 *	tally_jemalloc_init(NULL);
 *	struct tally_memcg *save = tally_jemalloc_set_current(tenant);
 *	char *p = malloc(n);		// charged to tenant; NULL + ENOMEM
 *					// when tenant (or an ancestor) is
 *					// at its max
 *	tally_jemalloc_set_current(save);
 *	free(p);			// any thread: uncharged from tenant
 *
 * Granularity: pages, through arenas.  Each group gets its own jemalloc
 * arenas, with extent hooks that charge the group when jemalloc commits
 * pages for the arena and uncharge it when jemalloc decommits them; a
 * thread in a group allocates from the group's arenas (thread.arena).
 * jemalloc returns every freed object to the arena it came from,
 * whichever thread frees it, so the uncharge always reaches the group
 * that was charged, and nothing per object is stored or looked up: a
 * malloc()/free() pair runs jemalloc's own code and nothing else, and
 * only the page-level events (pages committed for a new slab or large
 * extent, pages purged) pay a charge or an uncharge.  This is the kernel's model (pages charged when they are
 * allocated, whatever objects they hold).  The other design, a charge per
 * object with the owner group found from the pointer, costs a charge, an
 * uncharge and a lookup on every pair (several ns on a pair of 20 to 40
 * ns) and is exact to the byte; the page design is exact to the page and
 * costs nothing per object.
 *
 * What is charged: the pages jemalloc holds committed for the group's
 * arenas:
 *
 *	charged = active pages (jemalloc's stats.active for the arenas)
 *		+ dirty pages (freed, not yet purged)
 *
 * The hooks decommit (madvise(MADV_DONTNEED)) what jemalloc purges, so
 * retained address space is not charged, and there are no muzzy pages
 * (no lazy purge).  Dirty pages stay charged until jemalloc's decay
 * purges them (opt.dirty_decay_ms, 10 s by default), as the kernel
 * charges a process for the free pages its allocator keeps, until
 * tally_jemalloc_make_room() purges them after a refused allocation (see
 * Limits).  Active pages hold
 * the live objects and the slack of jemalloc's size classes and slabs.
 * The arenas' own metadata (jemalloc's base allocator) is not charged,
 * except the blocks the automatic arenas (but arena 0) map for it after
 * tally_jemalloc_init() installed their hooks.
 * At quiescence and after tally_jemalloc_purge(), charged equals
 * jemalloc's active pages of the arenas exactly: see
 * tally_jemalloc_stats().
 *
 * The thread cache.  jemalloc caches freed small objects (and large ones
 * up to 32 KiB) per thread, whatever their arena, and serves the thread's
 * next allocations from that cache.  A thread that switches group
 * flushes its cache (unless the options say not to), so its next
 * allocations come from the new group's arenas.  One case remains: a
 * thread that frees an object allocated in another group keeps it in its
 * cache and may reuse it for its own group before the cache is flushed;
 * that object's bytes then stay charged to the group it came from while
 * it lives (nothing is lost: its free uncharges that group).  Within one
 * group (a thread pool serving one tenant) this never matters; a thread
 * that frees other groups' objects can call tally_jemalloc_flush() after
 * doing so, which leaves them no time in its cache.
 *
 * Limits: jemalloc calls the hooks with its own locks held, so a hook
 * never calls back into jemalloc or into user code: it charges with the
 * stocks and a drain of the tree's stocks (as %TALLY_MEMCG_NORECLAIM),
 * and a charge that does not fit that way makes the allocation fail as
 * jemalloc fails it: malloc() returns NULL with errno ENOMEM (realloc()
 * leaves the old block intact), never a crash.  The purge of the dirty
 * pages, the group's reclaim callbacks and its OOM policy run where no
 * allocator lock is held, in tally_jemalloc_make_room(), which the
 * program calls after a failed allocation before it retries it once:
 *
 *	p = malloc(n);
 *	if (!p && tally_jemalloc_make_room() == 0)
 *		p = malloc(n);
 *
 * In C++, a new handler that calls it (and throws std::bad_alloc when it
 * fails) does the same for operator new, which calls the handler and
 * retries.  `tally run` wraps the process's allocation functions so.
 * Those callbacks may therefore call anything a thread may call outside
 * the allocator: malloc() and free(), tally_jemalloc_purge(), fork().
 * memory.stat: the charges are also added to the group's "anon" item
 * (TALLY_MEMCG_ANON).
 *
 * Threads without a group of their own allocate from jemalloc's
 * automatic arenas: charged to the options' auto_group, or to nothing.
 *
 * Groups' lifetime: each arena holds its group (a reference) while it is
 * charged to it.  tally_jemalloc_release() says a group will not be used
 * again: its arenas are purged and, as soon as they hold nothing, given to
 * the next new group (jemalloc cannot free an arena cheaply); until then
 * the frees of its objects still uncharge it (a destroyed group passes
 * them to its nearest live ancestor: nothing is lost).  The memory tree
 * must outlive every allocation charged to its groups: in practice it is
 * never destroyed once tally_jemalloc_init() used it.
 *
 * fork(): the child inherits the arenas, the hooks and the groups with
 * the tree; the integration's lock is taken around fork(), after waiting
 * for the hooks that drain the stocks (a charge that did not fit at
 * once).  While a fork is being prepared, such a charge is refused
 * without draining or counting an event, as a TALLY_MEMCG_NOBLOCK one
 * (tally_jemalloc_make_room() then charges it in full).
 *
 * Error codes: functions that can fail return 0 or a negative errno
 * value.
 */

#include <stdbool.h>
#include <tally/memcg.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * struct tally_jemalloc_options - how the integration runs; zero means
 *	the default.
 * @auto_group: the group charged for jemalloc's automatic arenas, those of
 *	threads without a group of their own (NULL: not charged).  Set it to
 *	account every allocation of the process in one group.
 * @arenas_per_group: arenas each group spreads its threads over (default:
 *	the number of CPUs, at most 8; 1 to 64).
 * @keep_tcache: do not flush the thread cache when a thread switches
 *	group (faster switches; see the thread cache in the file comment).
 */
struct tally_jemalloc_options {
	struct tally_memcg *auto_group;
	unsigned int arenas_per_group;
	bool keep_tcache;
};

/**
 * tally_jemalloc_init() - install the integration, once per process.
 * @opts: the options, or NULL for the defaults.
 *
 * With @auto_group set, the automatic arenas get the charging hooks: the
 * pages they hold at that moment are charged to it (%TALLY_MEMCG_NOFAIL)
 * and from then on every page they commit or decommit.  jemalloc's huge
 * arena (allocations of opt.oversize_threshold bytes and more, 8 MiB by
 * default), which jemalloc creates on its first use, is created then by
 * one such allocation, so that it has the hooks too.  Call it before the
 * process has other threads (it counts them in /proc/self/stat and
 * refuses otherwise; without /proc it cannot tell), from a thread that
 * has not been moved to a group's arena.
 *
 * Context: MT-safe; not async-signal-safe: calls mallctl(), allocates.
 *
 * Return: 0, -EINVAL (an option out of range), -EBUSY (already
 * installed, or the process has another thread: nothing is installed),
 * -ENOTSUP (the jemalloc this library was linked with does
 * not answer its controls, or is not 5.x), -E2BIG (the pages the
 * automatic arenas already hold, adopted by @auto_group with one
 * %TALLY_MEMCG_NOFAIL charge, are more than its max or an ancestor's:
 * nothing is installed or charged), -ENOMEM.
 */
int tally_jemalloc_init(const struct tally_jemalloc_options *opts);

/**
 * tally_jemalloc_set_current() - tally_memcg_set_current(), and move the
 *	thread's allocations to the group's arenas.
 * @g: the group (NULL: back to the process default group and, for
 *	allocation, the automatic arenas).
 *
 * The group's arenas are created on its first use.  The thread's cache is
 * flushed when its arena changes (see the options).
 *
 * Cost: a change of arena costs microseconds (docs/jemalloc.md: jemalloc
 * merges the cache's statistics under the old arena's bin locks and
 * purges that arena when no thread is left in it); setting the group the
 * thread is already in calls no mallctl().  A group among the last four
 * the thread set (the one it is in, most often) is found in the thread's
 * own notes, without a lock; another one takes the integration's lock
 * and is found in a list of the groups with arenas.
 *
 * Context: MT-safe; not async-signal-safe: may take the integration's
 * lock and call mallctl(); a first use of a group creates arenas.
 *
 * Return: the thread's previous group, as tally_memcg_set_current().
 * Before tally_jemalloc_init() only the current group changes.  If
 * the group's arenas cannot be created (jemalloc's 4,096 arenas used up,
 * no memory), the thread's group is still set but it allocates from the
 * automatic arenas.
 */
struct tally_memcg *tally_jemalloc_set_current(struct tally_memcg *g);

/**
 * tally_jemalloc_flush() - flush the calling thread's cache, giving the
 *	objects it holds back to their arenas.
 *
 * Context: MT-safe; not async-signal-safe: calls mallctl().
 *
 * Return: 0, -ENOTSUP (not installed).
 */
int tally_jemalloc_flush(void);

/**
 * tally_jemalloc_purge() - purge the dirty pages of a group's arenas (or
 *	of every arena), uncharging them.
 * @g: the group, or NULL for every arena of the process.
 *
 * Context: MT-safe; not async-signal-safe: calls mallctl().
 *
 * Return: 0, -ENOTSUP (not installed).
 */
int tally_jemalloc_purge(struct tally_memcg *g);

/**
 * tally_jemalloc_make_room() - after an allocation the calling thread was
 *	refused, make room for it: purge, reclaim, run the OOM policy.
 *
 * The hooks refuse a charge that the stocks and a drain cannot serve
 * (see Limits in the file comment) and note the arena and the bytes.
 * This purges the dirty pages of every arena, then charges those bytes
 * to the arena's group as tally_memcg_charge() does, with its reclaim
 * callbacks and the OOM policy, and keeps them for the thread: the
 * thread's next commit of pages on that arena (the retried allocation)
 * takes them without charging again.  Room a commit does not take goes
 * back at the thread's next commit, its next call of this function, or
 * its exit.  Retry the allocation once when it returns 0; another
 * refusal means the group is full.
 *
 * Context: MT-safe; not async-signal-safe: calls mallctl(), takes the
 * integration's lock, may sleep and call the group's callbacks.  Call it
 * where the thread holds no lock a callback may need.
 *
 * Return: 0 (room made: retry), -ENOENT (no charge of this thread was
 * refused since its last call: the failure was not the limit's),
 * -ENOMEM (the group is full even after reclaim and the OOM policy),
 * -ENOTSUP (not installed).
 */
int tally_jemalloc_make_room(void);

/**
 * tally_jemalloc_release() - a group will not get new allocations: give
 *	its arenas back once they hold nothing.
 * @g: the group; no thread may have it current any more.
 *
 * Its arenas are purged; each one that holds no page is given back to
 * the pool for the next new group at once, the others when they are
 * empty (checked whenever a group needs arenas).  Call it before or after
 * tally_memcg_destroy(); the frees of objects still charged to @g keep
 * uncharging it (or its nearest live ancestor once it is destroyed).
 *
 * Context: MT-safe; not async-signal-safe: takes the integration's lock,
 * calls mallctl().
 *
 * Return: 0, -ENOENT (@g has no arenas), -ENOTSUP (not installed).
 */
int tally_jemalloc_release(struct tally_memcg *g);

/**
 * struct tally_jemalloc_stats - a group's arenas, as jemalloc and the
 *	hooks see them, in bytes.
 * @charged: what the hooks charged and did not uncharge.
 * @active: jemalloc's active pages of the arenas (stats.arenas.<i>.pactive).
 * @dirty: their dirty pages (freed, not purged).
 * @muzzy: their muzzy pages (0: the hooks do not purge lazily).
 * @adopted: for the automatic arenas, what tally_jemalloc_init() charged
 *	for the pages they held already (0 for a group's arenas).
 * @arenas: the number of arenas.
 *
 * At quiescence, for a group's arenas, charged == active + dirty + muzzy,
 * and charged == active after tally_jemalloc_purge(); while threads
 * allocate, each value is read at a slightly different moment.  The
 * automatic arenas may have held address space committed by jemalloc's
 * default hooks (retained) before the install: it was adopted (charged)
 * as it was, and stays charged until jemalloc reuses and purges it, so
 * for them active + dirty + muzzy <= charged <= active + dirty + muzzy +
 * adopted.
 */
struct tally_jemalloc_stats {
	long charged;
	long active;
	long dirty;
	long muzzy;
	long adopted;
	unsigned int arenas;
};

/**
 * tally_jemalloc_stats() - read a group's arenas.
 * @g: the group, or NULL for the automatic arenas.
 * @out: where the values are stored.
 *
 * Context: MT-safe; not async-signal-safe: takes the integration's lock,
 * refreshes jemalloc's statistics (mallctl("epoch")).
 *
 * Return: 0, -EINVAL (NULL @out), -ENOENT (@g has no arenas), -ENOTSUP
 * (not installed).
 */
int tally_jemalloc_stats(struct tally_memcg *g,
			 struct tally_jemalloc_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_JEMALLOC_H */
