/* SPDX-License-Identifier: MIT */
#ifndef TALLY_GRACE_H
#define TALLY_GRACE_H

/*
 * grace.h - tally's one lifetime rule: an object that a lock-free path can
 * reach is freed only after a grace period in which every such path that
 * could have seen it has finished.  See grace.c for the design.
 *
 *	reader:   g = grace_read_lock(); ... walk, read ...; grace_read_unlock(g);
 *	updater:  unlink obj; grace_retire(&obj->node, free_fn, owner);
 *	          grace_poll();	  (runs the retired callbacks whose grace
 *				   period has ended, never waits)
 */

#include <stdbool.h>

struct grace_node {
	struct grace_node *next;
	unsigned long epoch;		/* the epoch it was retired in */
	void (*fn)(struct grace_node *node);
	const void *owner;		/* for grace_flush_owner() */
};

/*
 * Enter and leave a read-side section: async-signal-safe, wait-free (one
 * atomic add each, on a line of the reader's CPU), nestable.  A reader
 * stopped inside one only delays reclamation, never blocks anyone.
 */
unsigned int grace_read_lock(void);
void grace_read_unlock(unsigned int token);

/* Call @fn(@node) once every reader that may have seen the object left. */
void grace_retire(struct grace_node *node, void (*fn)(struct grace_node *),
		  const void *owner);

/* Run the retired callbacks whose grace period has ended; never waits. */
void grace_poll(void);

/*
 * Run now every retired callback of @owner (its users guarantee that no
 * reader of it is left: tree destruction).
 */
void grace_flush_owner(const void *owner);

/* Pending callbacks, for the tests and tree info. */
unsigned long grace_pending(void);

#endif /* TALLY_GRACE_H */
