/* SPDX-License-Identifier: MIT */
#ifndef TALLY_GRACE_H
#define TALLY_GRACE_H

/*
 * grace.h - tally's one lifetime rule: an object that a lock-free path can
 * reach is freed only after a grace period in which every such path that
 * could have seen it has finished.  See grace.c for the design.
 *
 * Grace periods are counted per domain (each memory tree has its own), so
 * that a slow section of one tree never holds back another tree's frees.
 *
 *	reader:   grace_enter(d, &s); ... walk, read ...; grace_leave(&s);
 *	updater:  unlink obj; grace_retire(d, &obj->node, free_fn);
 *	          grace_poll(d);  (runs the retired callbacks whose grace
 *				   period has ended, never waits)
 *	waiter:   grace_wait(d, deadline)  (every section that began before
 *				   the call has ended, or the deadline passed)
 *
 * A section never spans user code and never waits for a lock: it is a
 * few loads and stores long, or a walk of the library's own structures.
 */

#include <pthread.h>
#include <stdbool.h>

#include "runtime/fork.h"

#define GRACE_SHARDS 64

struct grace_node {
	struct grace_node *next;
	unsigned long epoch;		/* the epoch it was retired in */
	void (*fn)(struct grace_node *node);
};

struct grace_shard {
	long readers[2];
} __attribute__((aligned(64)));

struct grace_batch;

/* One domain: embed it, 64-byte aligned, in the object that owns it. */
struct grace_domain {
	unsigned long epoch;
	struct grace_shard shard[GRACE_SHARDS] __attribute__((aligned(64)));
	pthread_mutex_t lock __attribute__((aligned(64)));
	struct grace_node *head;
	struct grace_node **tail;
	unsigned long pending;
	struct grace_batch *batches;	/* taken by pollers, under lock */
	pthread_cond_t done;		/* a taken callback ended */
	struct tally_fork_node fork_node;
};

/* A section, on its reader's stack, between enter and leave. */
struct grace_section {
	struct grace_section *outer;	/* this thread's open sections */
	struct grace_domain *domain;
	unsigned int token;		/* shard << 1 | index */
};

/* Set up @d (registered for fork()); grace_domain_fini() ends it. */
void grace_domain_init(struct grace_domain *d);

/*
 * Run every callback still retired in @d, then forget it.  The owner
 * guarantees that no section of @d is open and none will start.
 */
void grace_domain_fini(struct grace_domain *d);

/*
 * Enter and leave a read-side section: async-signal-safe, wait-free (one
 * atomic add each, on a line of the reader's CPU), nestable.  A reader
 * stopped inside one only delays reclamation and grace_wait().
 */
void grace_enter(struct grace_domain *d, struct grace_section *s);
void grace_leave(struct grace_section *s);

/*
 * Wait (sleeping, runtime/backoff.h) until every section
 * of @d that began before this call has ended: true; false once
 * CLOCK_MONOTONIC passed @deadline_ns first.  The caller's own open
 * sections are not waited for.  Caller holds no lock a section takes.
 */
bool grace_wait(struct grace_domain *d, long deadline_ns);

/* Call @fn(@node) once every section that may have seen it has ended. */
void grace_retire(struct grace_domain *d, struct grace_node *node,
		  void (*fn)(struct grace_node *));

/* Run the retired callbacks whose grace period has ended; never waits. */
void grace_poll(struct grace_domain *d);

/* Callbacks retired and not yet run, for the tests and tree info. */
unsigned long grace_pending(const struct grace_domain *d);

#endif /* TALLY_GRACE_H */
