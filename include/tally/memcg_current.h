/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_CURRENT_H
#define TALLY_MEMCG_CURRENT_H

/*
 * tally/memcg_current.h - the current memory group of a thread: the
 * kernel's current->memcg and set_active_memcg().
 *
 * A thread's current group is what charges and memory.stat updates that
 * name no group use, and what an allocator integration (tally/jemalloc.h)
 * charges for the memory the thread allocates.  It is one thread-local
 * pointer: reading it is one load, so it can be read anywhere, a signal
 * handler included.
 *
 * Scoped switch.  tally_memcg_set_current() returns the group it replaces,
 * so that a caller can run a piece of work in a group and restore what
 * was there, nested as deep as it likes:
 *
 *	struct tally_memcg *save = tally_memcg_set_current(tenant);
 *	handle_request(req);		// charged to tenant
 *	tally_memcg_set_current(save);
 *
 * New threads.  A thread starts without a group of its own: until it
 * sets one, its current group is the process-wide default
 * (tally_memcg_set_default(), NULL until set).  It does not inherit its
 * creator's group: a library cannot run code when a thread is created
 * without wrapping pthread_create(), and a worker of a pool created while
 * its creator served one tenant would otherwise stay that tenant's for
 * its whole life.  A program that wants every thread in one group (a
 * whole-process limit) sets it as the default; a thread leaves the
 * default only for the scopes it sets.  Setting NULL returns a thread to
 * the default.  fork(): the child's thread keeps the forking thread's
 * current group, and the default is inherited.
 *
 * Lifetime.  Neither the thread's slot nor the default holds a reference
 * to its group, as the kernel's active_memcg holds none: the caller keeps
 * the group alive (its own reference, or not destroying it) for as long
 * as it is current in some thread or is the default, and restores the
 * previous group (or NULL) before dropping it.  A group destroyed while
 * current keeps working as a destroyed group does (tally/memcg.h: its
 * charges and uncharges go to its nearest live ancestor).
 */

#include <tally/memcg.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * tally_memcg_current() - the calling thread's current group.
 *
 * The group the thread set with tally_memcg_set_current(), or if it set
 * none (or NULL), the process default of tally_memcg_set_default().
 *
 * Context: MT-safe, async-signal-safe: two thread-local or relaxed loads.
 *
 * Return: the group, or NULL when the thread has none and there is no
 * default.
 */
struct tally_memcg *tally_memcg_current(void);

/**
 * tally_memcg_set_current() - set the calling thread's current group.
 * @g: the group, or NULL to return to the process default.
 *
 * Only the thread's slot changes: no charge moves.  An allocator
 * integration may need its own switch call to move the thread's
 * allocations too (tally_jemalloc_set_current()).
 *
 * Context: MT-safe, async-signal-safe: one thread-local store.  A signal
 * handler that sets a group restores the previous one before it returns.
 *
 * Return: the group the thread had set before (NULL if it used the
 * default), to restore with another call.
 */
struct tally_memcg *tally_memcg_set_current(struct tally_memcg *g);

/**
 * tally_memcg_set_default() - set the process-wide default group.
 * @g: the group of every thread that has set none, or NULL for none.
 *
 * Context: MT-safe, async-signal-safe: one atomic exchange.  Threads
 * reading the default concurrently see the old group or the new one.
 *
 * Return: the previous default.
 */
struct tally_memcg *tally_memcg_set_default(struct tally_memcg *g);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_MEMCG_CURRENT_H */
