// SPDX-License-Identifier: MIT
/*
 * grace.c - grace periods: when may an object that lock-free paths can
 * reach be freed?
 *
 * The rule, for the whole library: an object is first made unreachable
 * (unlinked from every structure a lock-free path starts from), then
 * retired; it is freed only after every read-side section that was running
 * when it was retired has ended.  Sections are short and never call user
 * code, so reclamation is prompt; a section that is preempted, stopped or
 * parked in a signal handler only delays frees (nothing waits for it, and
 * nothing is kept once it ends and any later call polls).
 *
 * Mechanism: two reader counts and an epoch, as SRCU with two counters.
 * A reader adds one to readers[epoch & 1] and keeps the index; it leaves by
 * subtracting one from that same count.  Each count is split in
 * GRACE_SHARDS cache lines chosen by the reader's CPU, so that readers on
 * different CPUs do not write the same line; only sums are compared.  The epoch may advance from e to
 * e + 1 only when readers[(e + 1) & 1] is zero: every reader that started
 * in epoch e - 1 has left.  An object retired in epoch e is freed once the
 * epoch reached e + 2: readers of epochs <= e are all gone.  A reader that
 * read the epoch, then was preempted before adding itself, is harmless:
 * its add and every load after it are sequentially consistent, so it
 * either is seen by the check that lets the epoch advance or sees the
 * unlink that preceded the retire.
 *
 * Why not liburcu: its flavours either need every reading thread to
 * register (a library cannot ask that of its users' threads) or, for
 * urcu-bp, add a dependency for what is here two counters; and tally's
 * readers are slow paths (drains, reclaim, walks, reads of destroyed
 * groups), not the charge fast path, which a held reference protects.
 *
 * Costs: a section is two uncontended atomic adds on its CPU's line;
 * grace_poll() is O(GRACE_SHARDS) plus the callbacks it runs.  Nothing
 * here allocates.
 *
 * Callbacks run outside the lock, by whichever thread polls.  A poller
 * publishes what it took (a batch on its stack, in gp.batches) and which
 * owner's callback it is running, so that grace_flush_owner() finds every
 * callback of a tree that is being destroyed: queued, taken by a poller
 * and not started (it runs those itself), or running (it waits for it,
 * sleeping on gp.done).
 *
 * fork(): the child has only the forking thread, so the counts are rebuilt
 * from that thread's own sections (it may fork inside one), and the
 * callbacks other threads had taken and not started go back to the queue.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/percpu.h>

#include "grace.h"
#include "fork.h"
#include "percpu_internal.h"

#define GRACE_SHARDS 64

struct grace_shard {
	long readers[2];
} __attribute__((aligned(64)));

static struct {
	unsigned long epoch;
	struct grace_shard shard[GRACE_SHARDS] __attribute__((aligned(64)));
	pthread_mutex_t lock __attribute__((aligned(64)));
	struct grace_node *head;
	struct grace_node **tail;
	unsigned long pending;
	struct grace_batch *batches;	/* taken by pollers, under lock */
	pthread_cond_t done;		/* a taken callback ended */
} gp = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.tail = &gp.head,
	.done = PTHREAD_COND_INITIALIZER,
};

/*
 * What one grace_poll() took off the queue, on its stack: the callbacks
 * not started yet, and the owner of the one running (NULL between two).
 */
struct grace_batch {
	struct grace_batch *next;
	struct grace_node *todo;
	const void *running;
	pthread_t poller;
};

/* This thread's open sections per index: the fork child's counts. */
static __thread long held[2];

/* The token: the index in bit 0, the shard above it. */
unsigned int grace_read_lock(void)
{
	unsigned int idx =
		(unsigned int)__atomic_load_n(&gp.epoch, __ATOMIC_SEQ_CST) & 1;
	unsigned int shard = tally_current_cpu() % GRACE_SHARDS;

	held[idx]++;
	__atomic_add_fetch(&gp.shard[shard].readers[idx], 1, __ATOMIC_SEQ_CST);
	return shard << 1 | idx;
}

void grace_read_unlock(unsigned int token)
{
	__atomic_sub_fetch(&gp.shard[token >> 1].readers[token & 1], 1,
			   __ATOMIC_SEQ_CST);
	held[token & 1]--;
}

/* Readers of index @idx, over every shard (each may be negative alone). */
static long readers(unsigned int idx)
{
	long sum = 0;

	for (int i = 0; i < GRACE_SHARDS; i++)
		sum += __atomic_load_n(&gp.shard[i].readers[idx],
				       __ATOMIC_SEQ_CST);
	return sum;
}

/* Caller holds gp.lock: advance the epoch as far as readers allow (2). */
static void advance(void)
{
	for (int i = 0; i < 2; i++) {
		unsigned long e = __atomic_load_n(&gp.epoch, __ATOMIC_SEQ_CST);

		if (readers((unsigned int)(e + 1) & 1))
			return;
		__atomic_store_n(&gp.epoch, e + 1, __ATOMIC_SEQ_CST);
	}
}

void grace_retire(struct grace_node *node, void (*fn)(struct grace_node *),
		  const void *owner)
{
	node->fn = fn;
	node->owner = owner;
	node->next = NULL;
	pthread_mutex_lock(&gp.lock);
	node->epoch = __atomic_load_n(&gp.epoch, __ATOMIC_SEQ_CST);
	*gp.tail = node;
	gp.tail = &node->next;
	__atomic_add_fetch(&gp.pending, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&gp.lock);
}

/* Caller holds gp.lock: take @b off gp.batches. */
static void batch_unlink(struct grace_batch *b)
{
	struct grace_batch **link = &gp.batches;

	while (*link != b)
		link = &(*link)->next;
	*link = b->next;
}

void grace_poll(void)
{
	struct grace_batch b = { .poller = pthread_self() };
	struct grace_node **todo_tail = &b.todo;

	if (!__atomic_load_n(&gp.pending, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&gp.lock);
	advance();
	/* The list is in retire order, so in epoch order. */
	while (gp.head && gp.head->epoch + 2 <= gp.epoch) {
		struct grace_node *n = gp.head;

		gp.head = n->next;
		if (!gp.head)
			gp.tail = &gp.head;
		__atomic_sub_fetch(&gp.pending, 1, __ATOMIC_RELAXED);
		n->next = NULL;
		*todo_tail = n;
		todo_tail = &n->next;
	}
	if (!b.todo) {
		pthread_mutex_unlock(&gp.lock);
		return;
	}
	b.next = gp.batches;
	gp.batches = &b;
	/* Outside the lock: a callback may retire more (a parent's put). */
	while (b.todo) {
		struct grace_node *n = b.todo;

		b.todo = n->next;
		b.running = n->owner;
		pthread_mutex_unlock(&gp.lock);
		n->fn(n);
		pthread_mutex_lock(&gp.lock);
		b.running = NULL;
		pthread_cond_broadcast(&gp.done);
	}
	batch_unlink(&b);
	pthread_mutex_unlock(&gp.lock);
}

/* Caller holds gp.lock: unlink and return a queued callback of @owner. */
static struct grace_node *take_owned(struct grace_node **link,
				     struct grace_node ***tail,
				     const void *owner)
{
	for (; *link; link = &(*link)->next) {
		struct grace_node *n = *link;

		if (n->owner != owner)
			continue;
		*link = n->next;
		if (tail && !*link)
			*tail = link;
		return n;
	}
	return NULL;
}

void grace_flush_owner(const void *owner)
{
	pthread_mutex_lock(&gp.lock);
	for (;;) {
		struct grace_node *found = take_owned(&gp.head, &gp.tail,
						      owner);
		bool running = false;

		if (found) {
			__atomic_sub_fetch(&gp.pending, 1, __ATOMIC_RELAXED);
		} else {
			/* Taken by a poller, not started: ours to run. */
			for (struct grace_batch *b = gp.batches;
			     b && !found; b = b->next)
				found = take_owned(&b->todo, NULL, owner);
		}
		if (found) {
			pthread_mutex_unlock(&gp.lock);
			/* One at a time: it may retire another of @owner. */
			found->fn(found);
			pthread_mutex_lock(&gp.lock);
			continue;
		}
		for (struct grace_batch *b = gp.batches; b; b = b->next)
			running |= b->running == owner;
		if (!running)
			break;
		/* Running in a poller: its end is the owner's, not ours. */
		pthread_cond_wait(&gp.done, &gp.lock);
	}
	pthread_mutex_unlock(&gp.lock);
}

unsigned long grace_pending(void)
{
	return __atomic_load_n(&gp.pending, __ATOMIC_RELAXED);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&gp.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&gp.lock);
}

static void fork_child(void)
{
	/* Only this thread's sections are left; their unlocks may hit any
	 * shard: only the sums matter. */
	for (int i = 0; i < GRACE_SHARDS; i++)
		gp.shard[i].readers[0] = gp.shard[i].readers[1] = 0;
	gp.shard[0].readers[0] = held[0];
	gp.shard[0].readers[1] = held[1];
	/*
	 * Other threads' pollers are gone: the callbacks they had taken and
	 * not started go back to the front of the queue (their grace period
	 * has ended); one they were running is lost with them, half done.
	 * This thread's own poll, if it forked from a callback, goes on.
	 */
	for (struct grace_batch **link = &gp.batches; *link;) {
		struct grace_batch *b = *link;

		if (pthread_equal(b->poller, pthread_self())) {
			link = &b->next;
			continue;
		}
		*link = b->next;
		while (b->todo) {
			struct grace_node *n = b->todo;

			b->todo = n->next;
			n->next = gp.head;
			if (!gp.head)
				gp.tail = &n->next;
			gp.head = n;
			__atomic_add_fetch(&gp.pending, 1, __ATOMIC_RELAXED);
		}
	}
	tally_mutex_reset(&gp.lock);
	pthread_cond_init(&gp.done, NULL);
}

__attribute__((constructor)) static void grace_init(void)
{
	tally_fork_register(TALLY_FORK_GRACE, fork_prepare, fork_parent,
			    fork_child);
}
