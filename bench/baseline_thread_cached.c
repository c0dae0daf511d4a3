// SPDX-License-Identifier: MIT
/*
 * baseline_thread_cached.c - per-thread cached counts in the style of
 * folly's ThreadCachedInt.
 *
 * Each thread adds to its own cache, registered in the counter's list on
 * the thread's first add; every THREAD_CACHED_FLUSH adds the cache is
 * flushed into a shared atomic target with one atomic add.  The cached
 * value is updated with relaxed atomic loads and stores, as in folly, so
 * that a full read may read it from another thread.
 *
 * Reads: the fast read is the target alone, one load, behind the truth by
 * up to (THREAD_CACHED_FLUSH - 1) * threads for +1 adds: the error grows
 * with the number of threads, not of CPUs.  The full read walks every
 * registered cache under the registry lock, O(threads).  A thread flushes
 * and unregisters when it ends (here: when its run ends, or
 * thread_cached_detach()).
 *
 * Simplification: folly keeps one cache per (thread, counter) in a
 * thread-local table; here a thread caches one counter at a time, which
 * is all the benchmark needs.
 */
#include <pthread.h>
#include <stdlib.h>

#include "baselines.h"

struct tc_cache {
	long value;			/* read_full reads it too */
	unsigned long updates;
	struct thread_cached *owner;
	struct tc_cache *next;		/* registry, under owner->lock */
} __attribute__((aligned(64)));

struct thread_cached {
	long target __attribute__((aligned(64)));
	pthread_mutex_t lock __attribute__((aligned(64)));
	struct tc_cache *caches;
};

static __thread struct tc_cache *tc_mine
	__attribute__((tls_model("initial-exec")));

struct thread_cached *thread_cached_create(void)
{
	struct thread_cached *c = aligned_alloc(64, sizeof(*c));

	if (!c)
		return NULL;
	c->target = 0;
	pthread_mutex_init(&c->lock, NULL);
	c->caches = NULL;
	return c;
}

void thread_cached_destroy(struct thread_cached *c)
{
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void tc_flush(struct tc_cache *k)
{
	__atomic_fetch_add(&k->owner->target,
			   __atomic_load_n(&k->value, __ATOMIC_RELAXED),
			   __ATOMIC_RELEASE);
	__atomic_store_n(&k->value, 0, __ATOMIC_RELAXED);
	k->updates = 0;
}

void thread_cached_detach(struct thread_cached *c)
{
	struct tc_cache *k = tc_mine, **pp;

	if (!k || k->owner != c)
		return;
	pthread_mutex_lock(&c->lock);
	tc_flush(k);
	for (pp = &c->caches; *pp != k; pp = &(*pp)->next)
		;
	*pp = k->next;
	pthread_mutex_unlock(&c->lock);
	free(k);
	tc_mine = NULL;
}

/* The calling thread's first add to @c: register a cache (or NULL). */
static struct tc_cache * __attribute__((noinline))
tc_attach(struct thread_cached *c)
{
	struct tc_cache *k;

	if (tc_mine)
		thread_cached_detach(tc_mine->owner);
	k = aligned_alloc(64, sizeof(*k));
	if (!k)
		return NULL;
	k->value = 0;
	k->updates = 0;
	k->owner = c;
	pthread_mutex_lock(&c->lock);
	k->next = c->caches;
	c->caches = k;
	pthread_mutex_unlock(&c->lock);
	tc_mine = k;
	return k;
}

static inline __attribute__((always_inline)) void tc_add(void *ctr,
							  long inc)
{
	struct thread_cached *c = ctr;
	struct tc_cache *k = tc_mine;

	if (__builtin_expect(!k || k->owner != c, 0)) {
		k = tc_attach(c);
		if (!k) {
			/* No memory for a cache: add to the target, exact. */
			__atomic_fetch_add(&c->target, inc, __ATOMIC_RELAXED);
			return;
		}
	}
	__atomic_store_n(&k->value,
			 __atomic_load_n(&k->value, __ATOMIC_RELAXED) + inc,
			 __ATOMIC_RELAXED);
	if (__builtin_expect(++k->updates >= THREAD_CACHED_FLUSH, 0))
		tc_flush(k);
}

void thread_cached_add(struct thread_cached *c, long inc)
{
	tc_add(c, inc);
}

long thread_cached_read_fast(const struct thread_cached *c)
{
	return __atomic_load_n(&c->target, __ATOMIC_ACQUIRE);
}

long thread_cached_read_full(struct thread_cached *c)
{
	unsigned long sum;

	pthread_mutex_lock(&c->lock);
	sum = (unsigned long)__atomic_load_n(&c->target, __ATOMIC_ACQUIRE);
	for (struct tc_cache *k = c->caches; k; k = k->next)
		sum += (unsigned long)__atomic_load_n(&k->value,
						      __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
	return (long)sum;
}

static void *thread_cached_impl_create(void)
{
	return thread_cached_create();
}

static void thread_cached_impl_destroy(void *ctr)
{
	thread_cached_destroy(ctr);
}

static void thread_cached_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, tc_add);
	thread_cached_detach(ctr);
}

static long thread_cached_sum(void *ctr)
{
	return thread_cached_read_full(ctr);
}

const struct bench_impl bench_impl_thread_cached = {
	.name = "thread_cached",
	.what = "per-thread caches, flush every 1000",
	.create = thread_cached_impl_create,
	.destroy = thread_cached_impl_destroy,
	.run = thread_cached_run,
	.sum = thread_cached_sum,
};
