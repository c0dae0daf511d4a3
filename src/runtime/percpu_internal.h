/* SPDX-License-Identifier: MIT */
#ifndef TALLY_PERCPU_INTERNAL_H
#define TALLY_PERCPU_INTERNAL_H

/*
 * percpu_internal.h - the per-CPU memory pool behind tally_percpu_alloc().
 *
 * A pool knows only its number of units (CPUs); the domain that owns one
 * resolves its callers' domain arguments and hands the pool over.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fork.h"

struct tally_percpu_chunk;

struct tally_percpu_pool {
	pthread_mutex_t lock;		/* chunks and their bitmaps */
	struct tally_percpu_chunk *chunks;
	unsigned int nr_units;		/* one unit per CPU */
	struct tally_fork_node fork_node;	/* live pools, for fork */
};

/* Set up an empty pool of @nr_units units and register it. */
void tally_percpu_pool_init(struct tally_percpu_pool *pool,
			    unsigned int nr_units);

/* As tally_percpu_alloc(), on @pool: NULL with errno EINVAL or ENOMEM. */
void *tally_percpu_pool_alloc(struct tally_percpu_pool *pool, size_t size,
			      size_t align);

/* As tally_percpu_free(), on @pool. */
void tally_percpu_pool_free(struct tally_percpu_pool *pool, void *ptr);

/* Unregister @pool and unmap every chunk; nothing of it may be in use. */
void tally_percpu_pool_release(struct tally_percpu_pool *pool);

/*
 * Make sure this thread's rseq area is usable: sets the mode up, registers
 * tally's own area in OWN mode, aborts the process (as every update does)
 * when the thread cannot have one.  False in FALLBACK mode.
 */
bool tally_rseq_thread_ready(void);

#endif /* TALLY_PERCPU_INTERNAL_H */
