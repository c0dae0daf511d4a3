// SPDX-License-Identifier: MIT
/*
 * stats_designs.c - the baseline flushing designs, for comparison.
 *
 * Each is a struct stats_design_ops; their state lives in a struct of
 * their own (tree->design_state), out of the production structures:
 *
 *   linux61   one global threshold; every flush flushes the root; one
 *             flusher at a time, the others skip (they may read stale).
 *   seed001   global threshold; the requested subtree when nobody flushes,
 *             otherwise one coalesced root flush that others wait for, at
 *             most nr_cpus waiters (the others skip).
 *   linux68   per-group thresholds; subtree flushes serialised by a lock.
 *
 * All three use the same flush engine as the TALLY design
 * (stats_flush_subtree()); only the decisions differ.
 */
#include <errno.h>
#include <stdlib.h>

#include "stats_internal.h"

struct baseline_state {
	pthread_mutex_t subtree_mutex;	/* seed001, linux68 */
	int flush_ongoing;		/* linux61 */
	/* seed001's coalesced root flush, under root_lock. */
	pthread_mutex_t root_lock;
	pthread_cond_t root_cond;
	bool root_flush_ongoing;
	uint64_t root_flush_gen, root_flush_done;
	unsigned int root_waiters;
};

static struct baseline_state *state_of(const struct tally_stats_tree *t)
{
	return t->design_state;
}


static int baseline_init(struct tally_stats_tree *t)
{
	struct baseline_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->subtree_mutex, NULL);
	pthread_mutex_init(&s->root_lock, NULL);
	pthread_cond_init(&s->root_cond, NULL);
	t->design_state = s;
	return 0;
}

static void baseline_fini(struct tally_stats_tree *t)
{
	struct baseline_state *s = state_of(t);

	if (!s)
		return;
	pthread_mutex_destroy(&s->subtree_mutex);
	pthread_mutex_destroy(&s->root_lock);
	pthread_cond_destroy(&s->root_cond);
	free(s);
	t->design_state = NULL;
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

/* Flushes and waiters were the parent's other threads. */
static void baseline_fork_child(struct tally_stats_tree *t)
{
	struct baseline_state *s = state_of(t);

	tally_mutex_reset(&s->subtree_mutex);
	tally_mutex_reset(&s->root_lock);
	pthread_cond_init(&s->root_cond, NULL);
	s->flush_ongoing = 0;
	s->root_flush_ongoing = false;
	s->root_waiters = 0;
	s->root_flush_done = s->root_flush_gen;
}

/* Linux 6.1: flush the root; if someone is flushing, skip. */
static bool linux61_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;
	struct baseline_state *s = state_of(t);

	(void)fresh;
	if (__atomic_load_n(&s->flush_ongoing, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&s->flush_ongoing, 1, __ATOMIC_ACQUIRE)) {
		stats_count_info(&t->info.skipped, 1);
		return false;
	}
	stats_flush_subtree(t, t->root, false);
	__atomic_store_n(&s->flush_ongoing, 0, __ATOMIC_RELEASE);
	return true;
}

/* seed001: lead a root flush; root_lock held, and held again on return. */
static void lead_root_flush(struct tally_stats_tree *t,
			    struct baseline_state *s)
{
	uint64_t gen = ++s->root_flush_gen;

	s->root_flush_ongoing = true;
	pthread_mutex_unlock(&s->root_lock);
	stats_flush_subtree(t, t->root, false);
	pthread_mutex_lock(&s->root_lock);
	s->root_flush_done = gen;
	s->root_flush_ongoing = false;
	pthread_cond_broadcast(&s->root_cond);
}

static bool seed001_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;
	struct baseline_state *s = state_of(t);
	uint64_t gen;

	(void)fresh;
	pthread_mutex_lock(&s->root_lock);
	if (!s->root_flush_ongoing) {
		pthread_mutex_unlock(&s->root_lock);
		if (g->parent && !pthread_mutex_trylock(&s->subtree_mutex)) {
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
	if (s->root_waiters >= t->domain->nr_cpus) {
		pthread_mutex_unlock(&s->root_lock);
		stats_count_info(&t->info.skipped, 1);
		return false;
	}
	gen = s->root_flush_gen;
	s->root_waiters++;
	while (s->root_flush_done < gen)
		pthread_cond_wait(&s->root_cond, &s->root_lock);
	s->root_waiters--;
	pthread_mutex_unlock(&s->root_lock);
	stats_count_info(&t->info.shared_waits, 1);
	return true;
}

/* Linux 6.8: each flusher flushes its own subtree, one at a time. */
static bool linux68_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;
	struct baseline_state *s = state_of(t);

	(void)fresh;
	pthread_mutex_lock(&s->subtree_mutex);
	stats_flush_subtree(t, g, false);
	pthread_mutex_unlock(&s->subtree_mutex);
	return true;
}

#define BASELINE_OPS							\
	.init = baseline_init, .fini = baseline_fini,			\
	.fork_prepare = baseline_fork_prepare,				\
	.fork_parent = baseline_fork_parent,				\
	.fork_child = baseline_fork_child

const struct stats_design_ops stats_design_linux61 = {
	.name = "linux61",
	BASELINE_OPS,
	.flush = linux61_flush,
	.global_threshold = true,
};

const struct stats_design_ops stats_design_seed001 = {
	.name = "seed001",
	BASELINE_OPS,
	.flush = seed001_flush,
	.global_threshold = true,
};

const struct stats_design_ops stats_design_linux68 = {
	.name = "linux68",
	BASELINE_OPS,
	.flush = linux68_flush,
};
