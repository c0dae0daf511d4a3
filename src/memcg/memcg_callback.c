// SPDX-License-Identifier: MIT
/*
 * memcg_callback.c - the one protocol of the groups' user callbacks
 * (reclaim and kill): call, set, replace, remove, wait.
 *
 * Invariant: every call in flight is listed (under cb_lock) with the
 * number of callbacks published before it read its own, and a set or
 * destroy that published number n returns only once no call numbered
 * below n of a callback it replaced runs (for a destroy: in another
 * thread), unless that wait could never end: then it returns -EDEADLK
 * before changing anything.
 *
 * A call takes cb_lock to read (fn, arg) and list itself, and again to
 * leave: the pair is never torn, and a call that began after a setter
 * published its callback calls the new one.  A setter takes it to check,
 * publish and begin its wait, then sleeps on cb_ended, whose mutex is
 * never held while user code runs, until the calls it waits for left.
 * Each thread keeps the calls it is inside (innermost first) and the wait
 * it is in: a wait that would close a cycle of threads, each waiting for
 * a call of the next, is found by a depth-first walk of those waits from
 * the new one, under cb_lock; the thread that closes the cycle gets
 * -EDEADLK (a setter inside a call of the callback it replaces is the
 * shortest cycle).  Waits of other kinds (a kill's victim, the user's own
 * locks) are not edges of that graph.
 *
 * One lock for every tree: a cycle may go through groups of several
 * trees.  It is a leaf, taken under oom_lock, drain_lock and structure,
 * never the reverse.  fork(): memcg.c's handlers take it with the trees'
 * locks; the child drops the calls of the threads it does not have.
 *
 * Costs: a call takes the lock twice; a set or destroy walks the calls in
 * flight, O(calls x waiting threads) for the cycle check, and wakes on
 * each call that leaves while a wait runs.
 */
#include <errno.h>
#include <pthread.h>

#include "memcg_internal.h"

/* A thread's calls and wait, seen by other threads under cb_lock. */
struct memcg_caller {
	struct memcg_cb_call *inside;	/* innermost call of this thread */
	struct memcg_cb_wait *waiting;	/* between publish and wait's end */
	unsigned long mark;		/* cycle check: visited */
};

static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cb_ended = PTHREAD_COND_INITIALIZER;
static struct memcg_cb_call *calls;	/* every call in flight */
static unsigned long seq;		/* callbacks published so far */
static unsigned long mark;		/* cycle checks so far */
static int sleepers;			/* threads asleep on cb_ended */
static __thread struct memcg_caller self;

bool memcg_callback_enter(struct tally_memcg *g, enum memcg_cb_kind kind,
			  struct memcg_cb_call *c)
{
	struct memcg_callback *cb = &g->callbacks[kind];

	pthread_mutex_lock(&cb_lock);
	c->fn = cb->fn;
	c->arg = cb->arg;
	if (c->fn) {
		c->g = g;
		c->kind = kind;
		c->seq = seq;
		c->caller = &self;
		c->outer = self.inside;
		c->prev = NULL;
		c->next = calls;
		if (calls)
			calls->prev = c;
		calls = c;
		self.inside = c;
	}
	pthread_mutex_unlock(&cb_lock);
	return c->fn != NULL;
}

static void unlink_call(struct memcg_cb_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

void memcg_callback_leave(struct memcg_cb_call *c)
{
	pthread_mutex_lock(&cb_lock);
	unlink_call(c);
	self.inside = c->outer;
	if (sleepers)
		pthread_cond_broadcast(&cb_ended);
	pthread_mutex_unlock(&cb_lock);
}

/* Caller holds cb_lock: @w has to wait for @c to leave. */
static bool blocks(const struct memcg_cb_call *c,
		   const struct memcg_cb_wait *w)
{
	return c->g == w->g && (w->kinds & 1u << c->kind) && c->seq < w->seq &&
	       !(w->others_only && c->caller == w->caller);
}

/*
 * Caller holds cb_lock: does @from wait, itself or through the threads it
 * waits for, for a call of @to?  Each thread is visited once per check.
 */
static bool waits_for(struct memcg_caller *from, struct memcg_caller *to)
{
	const struct memcg_cb_wait *w = from->waiting;

	if (!w || from->mark == mark)
		return false;
	from->mark = mark;
	for (struct memcg_cb_call *c = calls; c; c = c->next)
		if (blocks(c, w) &&
		    (c->caller == to || waits_for(c->caller, to)))
			return true;
	return false;
}

/*
 * Caller holds cb_lock: begin the wait @w for @g's callbacks of @kinds
 * published so far (@others_only: not this thread's calls), unless it
 * would never end: -EDEADLK, nothing changed.
 */
static int begin_wait(struct tally_memcg *g, unsigned int kinds,
		      bool others_only, struct memcg_cb_wait *w)
{
	*w = (struct memcg_cb_wait){ g, kinds, seq + 1, others_only, &self };
	self.waiting = w;
	mark++;
	if (waits_for(&self, &self)) {
		self.waiting = NULL;
		return -EDEADLK;
	}
	seq++;			/* calls from now on are not waited for */
	return 0;
}

int memcg_callback_publish(struct tally_memcg *g, enum memcg_cb_kind kind,
			   void (*fn)(void), void *arg,
			   struct memcg_cb_wait *w)
{
	struct memcg_callback *cb = &g->callbacks[kind];
	int err;

	pthread_mutex_lock(&cb_lock);
	err = cb->closed ? -EINVAL : begin_wait(g, 1u << kind, false, w);
	if (!err) {
		/* Calls read them under cb_lock: the atomics serve peeks. */
		__atomic_store_n(&cb->fn, fn, __ATOMIC_RELAXED);
		cb->arg = arg;
	}
	pthread_mutex_unlock(&cb_lock);
	return err;
}

int memcg_callback_close(struct tally_memcg *g, struct memcg_cb_wait *w)
{
	int err;

	pthread_mutex_lock(&cb_lock);
	err = begin_wait(g, (1u << MEMCG_CB_KINDS) - 1, true, w);
	for (int k = 0; !err && k < MEMCG_CB_KINDS; k++) {
		__atomic_store_n(&g->callbacks[k].fn, NULL, __ATOMIC_RELAXED);
		g->callbacks[k].arg = NULL;
		g->callbacks[k].closed = 1;
	}
	pthread_mutex_unlock(&cb_lock);
	return err;
}

void memcg_callback_wait(struct memcg_cb_wait *w)
{
	pthread_mutex_lock(&cb_lock);
	for (;;) {
		struct memcg_cb_call *c = calls;

		while (c && !blocks(c, w))
			c = c->next;
		if (!c)
			break;
		sleepers++;
		pthread_cond_wait(&cb_ended, &cb_lock);
		sleepers--;
	}
	self.waiting = NULL;
	pthread_mutex_unlock(&cb_lock);
}

bool memcg_callback_present(const struct tally_memcg *g, enum memcg_cb_kind kind)
{
	return __atomic_load_n(&g->callbacks[kind].fn, __ATOMIC_RELAXED);
}

void memcg_callback_fork_prepare(void)
{
	pthread_mutex_lock(&cb_lock);
}

void memcg_callback_fork_parent(void)
{
	pthread_mutex_unlock(&cb_lock);
}

void memcg_callback_fork_child(void)
{
	/* Calls of the threads the child does not have never leave. */
	for (struct memcg_cb_call *c = calls, *next; c; c = next) {
		next = c->next;
		if (c->caller != &self)
			unlink_call(c);
	}
	sleepers = 0;
	pthread_cond_init(&cb_ended, NULL);
	tally_mutex_reset(&cb_lock);
}
