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
 * Domains: the state below is per domain (struct grace_domain), one per
 * memory tree, so that one tree's slow section (a transfer stopped half
 * way, a long walk) never holds back another tree's frees or waits.
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
 * grace_poll() and each try of grace_wait() are O(GRACE_SHARDS) plus the
 * callbacks run.  A domain is 4.2 KiB.  Nothing here allocates.
 *
 * Callbacks run outside the lock, by whichever thread polls.  A poller
 * publishes what it took (a batch on its stack, in d->batches) and whether
 * it is running one, so that grace_domain_fini() finds every callback of
 * a domain that is ending: queued, taken by a poller and not started (it
 * runs those itself), or running (it waits for it, sleeping on d->done).
 *
 * fork(): the child has only the forking thread, so each domain's counts
 * are rebuilt from that thread's own open sections (a list on its stack,
 * kept per thread), and the callbacks other threads had taken and not
 * started go back to the queue.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <tally/percpu.h>

#include "backoff.h"
#include "grace.h"
#include "fork.h"
#include "percpu_internal.h"

/*
 * What one grace_poll() took off the queue, on its stack: the callbacks
 * not started yet, and whether one is running.
 */
struct grace_batch {
	struct grace_batch *next;
	struct grace_node *todo;
	bool running;
	pthread_t poller;
};

/* Every domain, for the fork handlers. */
static struct tally_fork_list domains = TALLY_FORK_LIST_INIT;

/* This thread's open sections, innermost first: the fork child's counts. */
static __thread struct grace_section *open_sections;

/*
 * Shards in use: the machine's possible CPUs, rounded up to a power of
 * two, at most GRACE_SHARDS, so that a sum reads no line no CPU writes.
 */
static unsigned int nr_shards = GRACE_SHARDS;

/*
 * A grace_wait() first retries this many times, a few hundred
 * nanoseconds apart, before it naps: a transfer that holds it back is a
 * few hundred nanoseconds long when its thread runs.
 */
#define GRACE_QUICK_TRIES 16

void grace_domain_init(struct grace_domain *d)
{
	for (int i = 0; i < GRACE_SHARDS; i++)
		d->shard[i].readers[0] = d->shard[i].readers[1] = 0;
	d->epoch = 0;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->done, NULL);
	d->head = NULL;
	d->tail = &d->head;
	d->pending = 0;
	d->batches = NULL;
	tally_fork_list_add(&domains, &d->fork_node);
}

void grace_enter(struct grace_domain *d, struct grace_section *s)
{
	unsigned int idx =
		(unsigned int)__atomic_load_n(&d->epoch, __ATOMIC_SEQ_CST) & 1;
	unsigned int shard = tally_current_cpu() & (nr_shards - 1);

	s->domain = d;
	s->token = shard << 1 | idx;
	s->outer = open_sections;
	/* Listed before counted: the fork child counts what is listed. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	open_sections = s;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_add_fetch(&d->shard[shard].readers[idx], 1, __ATOMIC_SEQ_CST);
}

void grace_leave(struct grace_section *s)
{
	__atomic_sub_fetch(&s->domain->shard[s->token >> 1]
				    .readers[s->token & 1], 1,
			   __ATOMIC_SEQ_CST);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	open_sections = s->outer;
}

/* Readers of index @idx, over every shard (each may be negative alone). */
static long readers(struct grace_domain *d, unsigned int idx)
{
	long sum = 0;

	for (unsigned int i = 0; i < nr_shards; i++)
		sum += __atomic_load_n(&d->shard[i].readers[idx],
				       __ATOMIC_SEQ_CST);
	return sum;
}

/* Caller holds d->lock: advance the epoch as far as readers allow (2). */
static void advance(struct grace_domain *d)
{
	for (int i = 0; i < 2; i++) {
		unsigned long e = __atomic_load_n(&d->epoch, __ATOMIC_SEQ_CST);

		if (readers(d, (unsigned int)(e + 1) & 1))
			return;
		__atomic_store_n(&d->epoch, e + 1, __ATOMIC_SEQ_CST);
	}
}

static bool inside(const struct grace_domain *d)
{
	for (struct grace_section *s = open_sections; s; s = s->outer)
		if (s->domain == d)
			return true;
	return false;
}

bool grace_wait(struct grace_domain *d, long deadline_ns)
{
	unsigned long target;
	struct backoff b;

	/* Its own section would hold the epoch back until the deadline. */
	if (inside(d))
		return false;
	/*
	 * Under the lock: an advance in flight (another waiter's, which
	 * checked the readers before this wait began) must not count as
	 * one of ours.  Read without it, the epoch could be the one before
	 * that advance's store (formal/charge.pml, MUTANT_WAIT_START_UNLOCKED).
	 */
	pthread_mutex_lock(&d->lock);
	target = __atomic_load_n(&d->epoch, __ATOMIC_SEQ_CST) + 2;
	pthread_mutex_unlock(&d->lock);
	backoff_begin(&b, deadline_ns);
	for (int tries = 0;; tries++) {
		unsigned long e;

		pthread_mutex_lock(&d->lock);
		advance(d);
		e = __atomic_load_n(&d->epoch, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&d->lock);
		if ((long)(e - target) >= 0)
			return true;
		if (tries < GRACE_QUICK_TRIES) {
			for (int i = 0; i < 64; i++)
				__builtin_ia32_pause();
			continue;
		}
		if (!backoff_nap(&b))
			return false;
	}
}

void grace_retire(struct grace_domain *d, struct grace_node *node,
		  void (*fn)(struct grace_node *))
{
	node->fn = fn;
	node->next = NULL;
	pthread_mutex_lock(&d->lock);
	node->epoch = __atomic_load_n(&d->epoch, __ATOMIC_SEQ_CST);
	*d->tail = node;
	d->tail = &node->next;
	__atomic_add_fetch(&d->pending, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
}

/* Caller holds d->lock: take @b off d->batches. */
static void batch_unlink(struct grace_domain *d, struct grace_batch *b)
{
	struct grace_batch **link = &d->batches;

	while (*link != b)
		link = &(*link)->next;
	*link = b->next;
}

void grace_poll(struct grace_domain *d)
{
	struct grace_batch b = { .poller = pthread_self() };
	struct grace_node **todo_tail = &b.todo;

	if (!__atomic_load_n(&d->pending, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&d->lock);
	advance(d);
	/* The list is in retire order, so in epoch order. */
	while (d->head && d->head->epoch + 2 <= d->epoch) {
		struct grace_node *n = d->head;

		d->head = n->next;
		if (!d->head)
			d->tail = &d->head;
		__atomic_sub_fetch(&d->pending, 1, __ATOMIC_RELAXED);
		n->next = NULL;
		*todo_tail = n;
		todo_tail = &n->next;
	}
	if (!b.todo) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	b.next = d->batches;
	d->batches = &b;
	/* Outside the lock: a callback may retire more (a parent's put). */
	while (b.todo) {
		struct grace_node *n = b.todo;

		b.todo = n->next;
		b.running = true;
		pthread_mutex_unlock(&d->lock);
		n->fn(n);
		pthread_mutex_lock(&d->lock);
		b.running = false;
		pthread_cond_broadcast(&d->done);
	}
	batch_unlink(d, &b);
	pthread_mutex_unlock(&d->lock);
}

void grace_domain_fini(struct grace_domain *d)
{
	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct grace_node *found = d->head;
		bool running = false;

		if (found) {
			d->head = found->next;
			if (!d->head)
				d->tail = &d->head;
			__atomic_sub_fetch(&d->pending, 1, __ATOMIC_RELAXED);
		} else {
			/* Taken by a poller, not started: ours to run. */
			for (struct grace_batch *b = d->batches; b && !found;
			     b = b->next)
				if ((found = b->todo))
					b->todo = found->next;
		}
		if (found) {
			pthread_mutex_unlock(&d->lock);
			/* One at a time: it may retire another. */
			found->fn(found);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		for (struct grace_batch *b = d->batches; b; b = b->next)
			running |= b->running;
		if (!running)
			break;
		/* Running in a poller: its end is the domain's, not ours. */
		pthread_cond_wait(&d->done, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	tally_fork_list_del(&domains, &d->fork_node);
	pthread_cond_destroy(&d->done);
	pthread_mutex_destroy(&d->lock);
}

unsigned long grace_pending(const struct grace_domain *d)
{
	return __atomic_load_n(&d->pending, __ATOMIC_RELAXED);
}

static void fork_prepare(void)
{
	struct grace_domain *d;

	pthread_mutex_lock(&domains.lock);
	tally_fork_for_each(d, &domains, struct grace_domain, fork_node)
		pthread_mutex_lock(&d->lock);
}

static void fork_parent(void)
{
	struct grace_domain *d;

	tally_fork_for_each(d, &domains, struct grace_domain, fork_node)
		pthread_mutex_unlock(&d->lock);
	pthread_mutex_unlock(&domains.lock);
}

/*
 * Other threads' pollers are gone: the callbacks they had taken and not
 * started go back to the front of @d's queue (their grace period has
 * ended); one they were running is lost with them, half done.  This
 * thread's own poll, if it forked from a callback, goes on.
 */
static void requeue_orphans(struct grace_domain *d)
{
	for (struct grace_batch **link = &d->batches; *link;) {
		struct grace_batch *b = *link;

		if (pthread_equal(b->poller, pthread_self())) {
			link = &b->next;
			continue;
		}
		*link = b->next;
		while (b->todo) {
			struct grace_node *n = b->todo;

			b->todo = n->next;
			n->next = d->head;
			if (!d->head)
				d->tail = &n->next;
			d->head = n;
			__atomic_add_fetch(&d->pending, 1, __ATOMIC_RELAXED);
		}
	}
}

static void fork_child(void)
{
	struct grace_domain *d;

	/*
	 * Only this thread's sections are left; their leaves may hit any
	 * shard: only the sums matter.
	 */
	tally_fork_for_each(d, &domains, struct grace_domain, fork_node) {
		for (int i = 0; i < GRACE_SHARDS; i++)
			d->shard[i].readers[0] = d->shard[i].readers[1] = 0;
		requeue_orphans(d);
		tally_mutex_reset(&d->lock);
		pthread_cond_init(&d->done, NULL);
	}
	for (struct grace_section *s = open_sections; s; s = s->outer)
		s->domain->shard[s->token >> 1].readers[s->token & 1]++;
	tally_mutex_reset(&domains.lock);
}

__attribute__((constructor)) static void grace_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	while (nr_shards > 1 && nr_shards / 2 >= cpus)
		nr_shards /= 2;
	tally_fork_register(TALLY_FORK_GRACE, fork_prepare, fork_parent,
			    fork_child);
}
