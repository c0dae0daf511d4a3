/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_BASELINES_H
#define TALLY_BENCH_BASELINES_H

/*
 * baselines.h - the counters that `tally bench counter` compares, behind
 * one tiny interface, plus the entry points of the two baselines that the
 * other experiments use directly (the classic per-CPU counter in the
 * accuracy experiment, the thread-cached counter at 64 threads).
 *
 * Every implementation's run() performs its adds through
 * bench_add_loop(), so each one's add is inlined into the same loop and
 * the only difference between two timings is the add itself.
 */

#include <stdint.h>
#include <tally/domain.h>
#include <tally/percpu.h>

/** The increment of every timed add: +1, a page fault's RSS update. */
#define BENCH_INC 1

/** tally's batch in every experiment: the kernel's RSS batch. */
#define BENCH_TALLY_BATCH 32

/**
 * struct bench_impl - one counter implementation under test.
 * @name: its name in the JSON ("impl") and in the table.
 * @what: a few words describing it.
 * @create: a new counter at 0 on this machine's CPUs, or NULL with errno
 *	set.
 * @destroy: free a counter from @create.
 * @run: @n adds of %BENCH_INC from the calling thread, including any
 *	per-thread setup and teardown (registration, final flush): once it
 *	returns, the thread's adds are all visible to @sum.
 * @sum: the exact total, once every thread has returned from @run.
 */
struct bench_impl {
	const char *name;
	const char *what;
	void *(*create)(void);
	void (*destroy)(void *ctr);
	void (*run)(void *ctr, unsigned long n);
	long (*sum)(void *ctr);
};

extern const struct bench_impl bench_impl_tally;
extern const struct bench_impl bench_impl_shared_atomic;
extern const struct bench_impl bench_impl_percpu_counter;
extern const struct bench_impl bench_impl_percpu_atomic;
extern const struct bench_impl bench_impl_striped_cells;
extern const struct bench_impl bench_impl_thread_cached;
extern const struct bench_impl bench_impl_rseq_add;
extern const struct bench_impl bench_impl_tls_increment;

/*
 * The timed loop.  Always inlined into each implementation's run(), where
 * @add is a constant, so the compiler inlines the add itself: no indirect
 * call in any timing.
 */
static inline __attribute__((always_inline)) void
bench_add_loop(void *ctr, unsigned long n, void (*add)(void *ctr, long inc))
{
	for (unsigned long i = 0; i < n; i++)
		add(ctr, BENCH_INC);
}

/*
 * The CPU this thread runs on, read from its rseq area like
 * tally_current_cpu() but inline (that one is a function call).
 */
static inline unsigned int bench_rseq_cpu(void)
{
	const uint32_t *id = (const uint32_t *)(tally_rseq_area_() +
						TALLY_RSEQ_CPU_ID_OFFSET);
	int32_t cpu = (int32_t)__atomic_load_n(id, __ATOMIC_RELAXED);

	return cpu >= 0 ? (unsigned int)cpu : tally_current_cpu();
}

/* The sum of every CPU's copy of a per-CPU long of domain @d. */
static inline long bench_percpu_sum(const long *p, const struct tally_domain *d)
{
	unsigned long sum = 0;

	for (unsigned int cpu = 0; cpu < tally_domain_nr_cpus(d); cpu++)
		sum += (unsigned long)tally_percpu_read_cpu(p, cpu);
	return (long)sum;
}

struct pcpu_counter;

/**
 * pcpu_counter_default_batch() - the kernel's percpu_counter_batch.
 * @nr_cpus: the CPU count.
 *
 * Return: max(32, 2 * @nr_cpus).
 */
long pcpu_counter_default_batch(unsigned int nr_cpus);

/**
 * pcpu_counter_create() - a classic per-CPU counter at 0.
 * @d: its domain: NULL for this machine (updates with pcpu_counter_add()
 *	inside the implementation's run()), or a simulated domain (updates
 *	with pcpu_counter_add_cpu()).
 * @batch: fold threshold, or 0 for pcpu_counter_default_batch() of @d.
 *
 * Return: the counter, or NULL with errno set.
 */
struct pcpu_counter *pcpu_counter_create(struct tally_domain *d, long batch);

/** pcpu_counter_destroy() - free a counter from pcpu_counter_create(). */
void pcpu_counter_destroy(struct pcpu_counter *c);

/** pcpu_counter_batch() - the fold threshold of @c. */
long pcpu_counter_batch(const struct pcpu_counter *c);

/**
 * pcpu_counter_add_cpu() - add @inc on simulated CPU @cpu.
 * @c: a counter on a simulated domain.
 * @cpu: below the domain's CPU count (not checked).
 * @inc: the increment.
 */
void pcpu_counter_add_cpu(struct pcpu_counter *c, unsigned int cpu, long inc);

/** pcpu_counter_read() - the global count alone (percpu_counter_read()). */
long pcpu_counter_read(const struct pcpu_counter *c);

/**
 * pcpu_counter_sum() - the global count plus every CPU's slot, under the
 *	lock (percpu_counter_sum()).
 * @c: the counter.
 */
long pcpu_counter_sum(struct pcpu_counter *c);

/** Adds a thread keeps to itself before flushing them (folly: 1000). */
#define THREAD_CACHED_FLUSH 1000

struct thread_cached;

/**
 * thread_cached_create() - a thread-cached counter at 0.
 *
 * Return: the counter, or NULL with errno set.
 */
struct thread_cached *thread_cached_create(void);

/**
 * thread_cached_destroy() - free a counter; every thread must have
 *	detached.
 * @c: the counter.
 */
void thread_cached_destroy(struct thread_cached *c);

/**
 * thread_cached_add() - add @inc to the calling thread's cache of @c.
 * @c: the counter.
 * @inc: the increment.
 *
 * The first add of a thread registers its cache.  A thread caches one
 * counter at a time: adding to another one detaches it from the first.
 */
void thread_cached_add(struct thread_cached *c, long inc);

/**
 * thread_cached_detach() - flush and unregister the calling thread's
 *	cache (what a thread's exit does).
 * @c: the counter.
 */
void thread_cached_detach(struct thread_cached *c);

/** thread_cached_read_fast() - the flushed total: one load. */
long thread_cached_read_fast(const struct thread_cached *c);

/**
 * thread_cached_read_full() - the flushed total plus every registered
 *	thread's cache, under the registry lock.
 * @c: the counter.
 */
long thread_cached_read_full(struct thread_cached *c);

#endif /* TALLY_BENCH_BASELINES_H */
