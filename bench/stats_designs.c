// SPDX-License-Identifier: MIT
/*
 * stats_designs.c - the kernel's earlier flushing designs, for
 * `tally bench stats` and the tests that compare them with the
 * statistics tree's own.
 *
 * Each is a struct stats_design_ops (src/stats_design.h), run on the
 * library's flush engine through that hook; only the decisions differ.
 * Their state lives in a struct of their own (stats_design_state()):
 *
 *   linux61   one global threshold; every flush flushes the root; one
 *             flusher at a time, the others skip (they may read stale).
 *   rfc2023   global threshold; the requested subtree when nobody flushes,
 *             otherwise one coalesced root flush that others wait for, at
 *             most nr_cpus waiters (the others skip).
 *   linux68   per-group thresholds; subtree flushes serialised by a lock.
 *
 * The global threshold: every group's threshold chain is one per-CPU
 * count of the tree, moved to one global over (stats_design_set_chain()),
 * which a root flush zeroes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/percpu.h>
#include "stats/stats_design.h"
#include "stats_designs.h"

struct baseline_state {
	pthread_mutex_t subtree_mutex;	/* rfc2023, linux68 */
	int flush_ongoing;		/* linux61 */
	/* rfc2023's coalesced root flush, under root_lock. */
	pthread_mutex_t root_lock;
	pthread_cond_t root_cond;
	bool root_flush_ongoing;
	uint64_t root_flush_gen, root_flush_done;
	unsigned int root_waiters;
	uint64_t skipped;		/* reads that skipped a needed flush */
	/* linux68's flushers that found subtree_mutex held, their wait. */
	uint64_t lock_waits, lock_wait_ns;
	long *global_count;		/* per CPU (global threshold) */
	/* Moved counts (global threshold), a cache line of their own. */
	long global_over __attribute__((aligned(64)));
};

static struct baseline_state *state_of(const struct tally_stats_tree *t)
{
	return stats_design_state(t);
}

static void count_skip(struct tally_stats_tree *t)
{
	__atomic_add_fetch(&state_of(t)->skipped, 1, __ATOMIC_RELAXED);
}

static int baseline_init(struct tally_stats_tree *t)
{
	struct baseline_state *s = aligned_alloc(64, sizeof(*s));

	if (!s)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	s->global_count = tally_percpu_alloc(stats_design_domain(t),
					     sizeof(long), 0);
	if (!s->global_count) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->subtree_mutex, NULL);
	pthread_mutex_init(&s->root_lock, NULL);
	pthread_cond_init(&s->root_cond, NULL);
	stats_design_set_state(t, s);
	return 0;
}

static void baseline_fini(struct tally_stats_tree *t)
{
	struct baseline_state *s = state_of(t);

	if (!s)
		return;
	tally_percpu_free(stats_design_domain(t), s->global_count);
	pthread_mutex_destroy(&s->subtree_mutex);
	pthread_mutex_destroy(&s->root_lock);
	pthread_cond_destroy(&s->root_cond);
	free(s);
	stats_design_set_state(t, NULL);
}

/* Global threshold: every group counts in the tree's one count. */
static void global_group_init(struct tally_stats_group *g)
{
	struct baseline_state *s = state_of(stats_design_tree(g));

	stats_design_set_chain(g, s->global_count, &s->global_over);
}

static void baseline_fork_prepare(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&state_of(t)->root_lock);
	pthread_mutex_lock(&state_of(t)->subtree_mutex);
}

static void baseline_fork_parent(struct tally_stats_tree *t)
{
	pthread_mutex_unlock(&state_of(t)->subtree_mutex);
	pthread_mutex_unlock(&state_of(t)->root_lock);
}

/* As the library's locks: unlocked for the sanitizers, made afresh. */
static void reset_mutex(pthread_mutex_t *lock)
{
	pthread_mutex_unlock(lock);
	pthread_mutex_init(lock, NULL);
}

/* Flushes and waiters were the parent's other threads. */
static void baseline_fork_child(struct tally_stats_tree *t)
{
	struct baseline_state *s = state_of(t);

	reset_mutex(&s->subtree_mutex);
	reset_mutex(&s->root_lock);
	pthread_cond_init(&s->root_cond, NULL);
	s->flush_ongoing = 0;
	s->root_flush_ongoing = false;
	s->root_waiters = 0;
	s->root_flush_done = s->root_flush_gen;
}

/* A root flush, which zeroes the global over first, as the engine does
 * the group's. */
static void flush_root(struct tally_stats_tree *t, struct baseline_state *s)
{
	__atomic_store_n(&s->global_over, 0, __ATOMIC_RELAXED);
	stats_flush_subtree(t, tally_stats_root(t), false);
}

/* Linux 6.1: flush the root; if someone is flushing, skip. */
static bool linux61_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = stats_design_tree(g);
	struct baseline_state *s = state_of(t);

	(void)fresh;
	if (__atomic_load_n(&s->flush_ongoing, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&s->flush_ongoing, 1, __ATOMIC_ACQUIRE)) {
		count_skip(t);
		return false;
	}
	flush_root(t, s);
	__atomic_store_n(&s->flush_ongoing, 0, __ATOMIC_RELEASE);
	return true;
}

/* rfc2023: lead a root flush; root_lock held, and held again on return. */
static void lead_root_flush(struct tally_stats_tree *t,
			    struct baseline_state *s)
{
	uint64_t gen = ++s->root_flush_gen;

	s->root_flush_ongoing = true;
	pthread_mutex_unlock(&s->root_lock);
	flush_root(t, s);
	pthread_mutex_lock(&s->root_lock);
	s->root_flush_done = gen;
	s->root_flush_ongoing = false;
	pthread_cond_broadcast(&s->root_cond);
}

static bool rfc2023_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = stats_design_tree(g);
	struct baseline_state *s = state_of(t);
	uint64_t gen;

	(void)fresh;
	pthread_mutex_lock(&s->root_lock);
	if (!s->root_flush_ongoing) {
		pthread_mutex_unlock(&s->root_lock);
		if (tally_stats_group_parent(g) &&
		    !pthread_mutex_trylock(&s->subtree_mutex)) {
			stats_flush_subtree(t, g, false);
			pthread_mutex_unlock(&s->subtree_mutex);
			return true;
		}
		pthread_mutex_lock(&s->root_lock);
		if (!s->root_flush_ongoing) {
			lead_root_flush(t, s);
			pthread_mutex_unlock(&s->root_lock);
			return true;
		}
	}
	if (s->root_waiters >= stats_design_nr_cpus(t)) {
		pthread_mutex_unlock(&s->root_lock);
		count_skip(t);
		return false;
	}
	gen = s->root_flush_gen;
	s->root_waiters++;
	while (s->root_flush_done < gen)
		pthread_cond_wait(&s->root_cond, &s->root_lock);
	s->root_waiters--;
	pthread_mutex_unlock(&s->root_lock);
	stats_design_count_shared_wait(t);
	return true;
}

/* Linux 6.8: each flusher flushes its own subtree, one at a time. */
static bool linux68_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = stats_design_tree(g);
	struct baseline_state *s = state_of(t);

	(void)fresh;
	if (pthread_mutex_trylock(&s->subtree_mutex)) {
		struct timespec a, b;

		clock_gettime(CLOCK_MONOTONIC, &a);
		pthread_mutex_lock(&s->subtree_mutex);
		clock_gettime(CLOCK_MONOTONIC, &b);
		__atomic_add_fetch(&s->lock_waits, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->lock_wait_ns,
				   (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000ll +
					      (b.tv_nsec - a.tv_nsec)),
				   __ATOMIC_RELAXED);
	}
	stats_flush_subtree(t, g, false);
	pthread_mutex_unlock(&s->subtree_mutex);
	return true;
}

#define BASELINE_OPS							\
	.init = baseline_init, .fini = baseline_fini,			\
	.fork_prepare = baseline_fork_prepare,				\
	.fork_parent = baseline_fork_parent,				\
	.fork_child = baseline_fork_child

static const struct stats_design_ops linux61 = {
	.name = "linux61",
	BASELINE_OPS,
	.flush = linux61_flush,
	.group_init = global_group_init,
};

static const struct stats_design_ops rfc2023 = {
	.name = "rfc2023",
	BASELINE_OPS,
	.flush = rfc2023_flush,
	.group_init = global_group_init,
};

static const struct stats_design_ops linux68 = {
	.name = "linux68",
	BASELINE_OPS,
	.flush = linux68_flush,
};

static const struct stats_design_ops *const designs[BENCH_STATS_NR_DESIGNS] = {
	[BENCH_STATS_LINUX61] = &linux61,
	[BENCH_STATS_RFC2023] = &rfc2023,
	[BENCH_STATS_LINUX68] = &linux68,
};

int bench_stats_tree_create(struct tally_stats_tree **out,
			    const struct tally_stat_desc *schema,
			    unsigned int nr_stats,
			    const struct tally_stats_options *opts,
			    enum bench_stats_design design)
{
	if ((unsigned int)design >= BENCH_STATS_NR_DESIGNS)
		return -EINVAL;
	if (design == BENCH_STATS_TALLY)
		return tally_stats_tree_create(out, schema, nr_stats, opts);
	return stats_tree_create_design(out, schema, nr_stats, opts,
					designs[design]);
}

const char *bench_stats_design_name(enum bench_stats_design design)
{
	if (design == BENCH_STATS_TALLY)
		return "tally";
	return (unsigned int)design < BENCH_STATS_NR_DESIGNS ?
		       designs[design]->name : "unknown";
}

bool bench_stats_global_threshold(enum bench_stats_design design)
{
	return design == BENCH_STATS_LINUX61 || design == BENCH_STATS_RFC2023;
}

bool bench_stats_fresh(enum bench_stats_design design)
{
	return design == BENCH_STATS_TALLY || design == BENCH_STATS_LINUX68;
}

/* @t's baseline state, or NULL for the library's design. */
static struct baseline_state *baseline_of(const struct tally_stats_tree *t)
{
	const struct stats_design_ops *ops = stats_design_of(t);

	for (unsigned int d = 0; d < BENCH_STATS_NR_DESIGNS; d++)
		if (designs[d] && designs[d] == ops)
			return state_of(t);
	return NULL;
}

uint64_t bench_stats_skipped(const struct tally_stats_tree *t)
{
	struct baseline_state *s = baseline_of(t);

	return s ? __atomic_load_n(&s->skipped, __ATOMIC_RELAXED) : 0;
}

uint64_t bench_stats_design_lock_waits(const struct tally_stats_tree *t,
				       uint64_t *wait_ns)
{
	struct baseline_state *s = baseline_of(t);

	*wait_ns = s ? __atomic_load_n(&s->lock_wait_ns, __ATOMIC_RELAXED) : 0;
	return s ? __atomic_load_n(&s->lock_waits, __ATOMIC_RELAXED) : 0;
}
