/* SPDX-License-Identifier: MIT */
/*
 * jemalloc_internal.h - what the two halves of the jemalloc integration
 * share: the arena record jemalloc's extent hooks are handed, and the
 * hooks' interface (tally_jemalloc_hooks.c) to the arena and group
 * bookkeeping (tally_jemalloc.c).  Nothing here is exported: the
 * library's version script keeps only tally/jemalloc.h.
 */
#ifndef TALLY_JEMALLOC_INTERNAL_H
#define TALLY_JEMALLOC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <jemalloc/jemalloc.h>

#include <tally/memcg.h>

/* jemalloc's limit: MALLOCX_ARENA() has 12 bits. */
#define MAX_ARENAS 4096u
#define MAX_SHARDS 64u
#define DEFAULT_SHARDS_MAX 8u

/*
 * An arena the integration knows: the extent hooks jemalloc calls (first,
 * so that a hook finds its arena from the hooks pointer), the group it
 * charges and the bytes it charged.
 */
struct arena {
	extent_hooks_t hooks;		/* first: what jemalloc hands us */
	unsigned int ind;
	_Atomic(struct tally_memcg *) group;
	atomic_long charged;
	struct arena *next_free;	/* in the pool */
	bool is_auto;
};

/*
 * Read jemalloc's default extent hooks, which ours call to map, unmap,
 * split and merge.  Returns 0, or -1 if jemalloc does not answer.
 */
int tally_je_hooks_setup(void);

/* Give @a our extent hooks, as the arena of jemalloc index @ind. */
void tally_je_hooks_init(struct arena *a, unsigned int ind);

/*
 * Whether the calling thread is installing our hooks on the automatic
 * arenas: the metadata jemalloc maps through them meanwhile is not
 * charged.
 */
void tally_je_installing(bool on);

/*
 * The fork gate (tally_jemalloc_hooks.c): closed by the prepare handler
 * before any other lock (it waits for the hooks charging slowly), opened
 * in the parent, made anew in the child.
 */
void tally_je_gate_close(void);
void tally_je_gate_open(void);
void tally_je_gate_reset(void);

/*
 * The calling thread's room (tally_jemalloc_hooks.c): what its hooks were
 * refused last, taken (true: *@a and *@n set) by
 * tally_jemalloc_make_room(); the room it made, charged to @a and counted
 * in @a's charged, which the thread's next commit on @a takes; and the
 * return of a room no commit took (uncharged from its arena).
 */
bool tally_je_room_wanted(struct arena **a, size_t *n);
void tally_je_room_prepaid(struct arena *a, size_t n);
void tally_je_room_return(void);

/*
 * Whether the calling thread is starting: jemalloc allocates a thread's
 * cache at its first call and, in 5.3, crashes the thread later if that
 * allocation failed, so the hooks charge it %TALLY_MEMCG_NOFAIL meanwhile.
 */
void tally_je_thread_starting(bool on);

#endif
