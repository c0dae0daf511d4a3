// SPDX-License-Identifier: MIT
/*
 * stats_read.c - reads of the statistics tree, and the TALLY design's
 * shared, fresh flushes.
 *
 * A read first decides whether to flush (its mode, the group's threshold
 * or the periodic flusher's lateness), asks the tree's design to do it,
 * then loads the flushed values: O(1) per stat when no flush is needed.
 *
 * TALLY design.  A leaf that no update reached since its last flush (idle
 * and out of every CPU's updated tree: stats_group_clean()) needs no
 * flush: its read touches only the leaf's own lines, however busy the
 * tree around it.  Otherwise each group carries a share (under
 * coord_lock): whether a flush of it is active, with the stamp it started
 * with, and the stamps of the last one done and of the last active one
 * done.  Stamps increase
 * with each flush started.  A reader of G arriving when the clock reads
 * `arrival` needs a flush of G or of an ancestor that started after
 * arrival (forced reads; if-needed reads also take the nearest one
 * running at arrival, once that one is done).  It
 *
 *   - returns once such a flush is done (done_stamp > arrival);
 *   - otherwise waits for one of G that is active and started after
 *     arrival;
 *   - otherwise runs a flush of G itself, or, when one of G is already
 *     active (started too early), queues one behind it: the first waiter
 *     to wake runs it;
 *   - takes over when the flush it waits for takes longer than a few
 *     times what a flush of that group takes (its flusher is preempted or
 *     stopped: in userspace nothing keeps it running): it runs a flush of
 *     G alongside, which started after its arrival.
 *
 * Readers share the flushes of their own group only.  An ancestor's flush
 * folds more (a root flush, every updated group of the tree) and takes
 * longer than the reader's own: waiting for one made the reader wait
 * longer than flushing, and on a machine with more threads than CPUs
 * most such waits ended in a takeover (the ancestor's flusher waiting for
 * a CPU) after 200 us or more.  One that completes meanwhile still
 * serves the reader.
 *
 * Invariant: a reader never flushes outside its own subtree (it runs only
 * flushes of G, never an ancestor's queued one), never returns stale, and
 * waits for at most two flushes of G, or for its takeover deadline, then
 * its own flush: never for a thread that does not run.  Readers of one
 * group share every flush that keeps running; readers of unrelated groups
 * never wait for each other.  Several flushes of one group may run at once
 * (takeovers): the engine allows it, and done_stamp keeps the latest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime/fork.h"
#include "stats_internal.h"

/*
 * A reader waits for a flush it could join for TAKEOVER_FACTOR times what
 * a flush of that group takes (note_flush_time()), within [MIN, MAX]; then
 * it flushes its group itself.  In userspace a flusher can be preempted or
 * stopped at any point: a waiter must not depend on it running again.
 */
#define TAKEOVER_FACTOR 4
#define TAKEOVER_MIN_NS 200000ull
#define TAKEOVER_MAX_NS 20000000ull

/*
 * The count of the first level of @g's threshold chain: @g's own over
 * (another design may have given its groups one shared count).
 */
static bool over_threshold(const struct tally_stats_group *g)
{
	return __atomic_load_n(stats_chain_over(g)[0], __ATOMIC_RELAXED) >
	       (long)g->tree->flush_at;
}

/* --- TALLY design ------------------------------------------------------- */

/*
 * What a flush of the group takes when its flusher keeps running: the
 * lower envelope of the measured times, which follows a faster flush at
 * once and a slower one by 1/8 per flush, so that a flush that was
 * preempted (and took milliseconds) does not stretch the takeover wait.
 * One flush in TIMED_EVERY is timed (two clock reads): a few tens of ns
 * on flushes that take a few hundred.
 */
#define TIMED_EVERY 8
static void note_flush_time(struct stats_share *s, uint64_t ns)
{
	uint64_t grown = s->flush_ns + s->flush_ns / 8 + 1;

	s->flush_ns = ns < grown ? ns : grown;
}

/*
 * Run a flush of @a; coord_lock held, dropped during the flush.  @shared:
 * the one readers join (active); otherwise a takeover, alongside it.
 * Stamps may complete out of order: done_stamp keeps the highest.
 */
static void run_flush(struct tally_stats_tree *t, struct tally_stats_group *a,
		      bool shared)
{
	uint64_t stamp = ++t->flush_clock, start = 0;
	bool timed = !(a->share.timed++ % TIMED_EVERY);

	if (timed)
		start = stats_mono_ns();
	if (shared) {
		a->share.active = true;
		a->share.active_stamp = stamp;
	}
	a->share.running++;
	pthread_mutex_unlock(&t->coord_lock);
	stats_flush_subtree(t, a, false);
	pthread_mutex_lock(&t->coord_lock);
	if (timed)
		note_flush_time(&a->share, stats_mono_ns() - start);
	a->share.running--;
	if (a->share.done_stamp < stamp)
		a->share.done_stamp = stamp;
	if (shared) {
		a->share.active = false;
		a->share.active_done = stamp;
	}
	pthread_cond_broadcast(&a->share.cond);
}

/*
 * Until when a reader waits for the flush of @a before it takes over: a
 * few times what a flush of @a takes when its flusher keeps running.
 */
static struct timespec takeover_deadline(const struct tally_stats_group *a)
{
	uint64_t wait = TAKEOVER_FACTOR * a->share.flush_ns;
	uint64_t at = stats_mono_ns() +
		      (wait < TAKEOVER_MIN_NS ? TAKEOVER_MIN_NS :
		       wait > TAKEOVER_MAX_NS ? TAKEOVER_MAX_NS : wait);

	return (struct timespec){ .tv_sec = (time_t)(at / 1000000000ull),
				  .tv_nsec = (long)(at % 1000000000ull) };
}

static bool tally_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;
	struct tally_stats_group *cover = NULL;
	struct timespec deadline = { 0, 0 };
	uint64_t arrival, cover_stamp = 0;
	bool waited = false;

	/*
	 * A leaf nobody updated since its last flush: nothing to fold, and
	 * what was folded is visible: a flush that visits nothing, done by
	 * looking.  Not the root: a root flush also tells ratelimited reads
	 * when the tree was last flushed.
	 */
	if (g->parent && stats_group_clean(g)) {
		stats_count_clean_read(t);
		return false;
	}
	pthread_mutex_lock(&t->coord_lock);
	arrival = t->flush_clock;
	/*
	 * Not fresh: the nearest covering flush already running serves too,
	 * once it is done: that one, not any flush that started after it
	 * (and maybe ended before our arrival).
	 */
	for (struct tally_stats_group *a = g; !fresh && !cover && a;
	     a = a->parent)
		if (a->share.active) {
			cover = a;
			cover_stamp = a->share.active_stamp;
		}
	for (;;) {
		for (struct tally_stats_group *a = g; a; a = a->parent)
			if (a->share.done_stamp > arrival)
				goto done;
		if (cover && cover->share.active_done >= cover_stamp)
			goto done;
		if (!g->share.active) {
			run_flush(t, g, true);
			continue;
		}
		/*
		 * G's flush (not an ancestor's: see "Readers share" above):
		 * one that started after arrival, or the covering one, serves
		 * us when done; one that started earlier, once it ends, lets
		 * the first waiter to wake run the next.
		 */
		if (!waited)
			deadline = takeover_deadline(g);
		waited = true;
		if (pthread_cond_clockwait(&g->share.cond, &t->coord_lock,
					   CLOCK_MONOTONIC,
					   &deadline) == ETIMEDOUT) {
			/* Its flusher is preempted or stopped: ours is fresh. */
			stats_count_info(&t->info.takeovers, 1);
			run_flush(t, g, false);
		}
	}
done:
	pthread_mutex_unlock(&t->coord_lock);
	if (waited)
		stats_count_info(&t->info.shared_waits, 1);
	return true;
}

/* No reader may still wait on a share of @g once it is freed. */
static void tally_retire(struct tally_stats_group *g)
{
	struct tally_stats_tree *t = g->tree;

	pthread_mutex_lock(&t->coord_lock);
	while (g->share.running)
		pthread_cond_wait(&g->share.cond, &t->coord_lock);
	pthread_mutex_unlock(&t->coord_lock);
}

static void tally_fork_prepare(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&t->coord_lock);
}

static void tally_fork_parent(struct tally_stats_tree *t)
{
	pthread_mutex_unlock(&t->coord_lock);
}

/* The flushes and waiters of shares were the parent's other threads. */
static void forget_share(struct tally_stats_group *g, void *arg)
{
	(void)arg;
	g->share.active = false;
	g->share.running = 0;
	pthread_cond_init(&g->share.cond, NULL);
}

static void tally_fork_child(struct tally_stats_tree *t)
{
	tally_mutex_reset(&t->coord_lock);
	stats_for_each_group(t, forget_share, NULL);
}

static int tally_init(struct tally_stats_tree *t)
{
	pthread_mutex_init(&t->coord_lock, NULL);
	return 0;
}

static void tally_fini(struct tally_stats_tree *t)
{
	pthread_mutex_destroy(&t->coord_lock);
}

const struct stats_design_ops stats_design_tally = {
	.name = "tally",
	.init = tally_init,
	.fini = tally_fini,
	.flush = tally_flush,
	.retire = tally_retire,
	.fork_prepare = tally_fork_prepare,
	.fork_parent = tally_fork_parent,
	.fork_child = tally_fork_child,
};

/* --- reads -------------------------------------------------------------- */

static bool ratelimit_late(const struct tally_stats_tree *t)
{
	uint64_t last = __atomic_load_n(&t->last_root_flush, __ATOMIC_RELAXED);
	uint64_t elapsed = stats_now(t) - last;

	/* Two periods, without overflowing 2 * period_ns. */
	return elapsed > t->period_ns && elapsed - t->period_ns > t->period_ns;
}

bool stats_design_flush(struct tally_stats_group *g, bool fresh)
{
	bool flushed = g->tree->ops->flush(g, fresh);

	/* Nothing flushed left no node waiting for a barrier. */
	if (flushed)
		stats_flush_settle(g->tree);
	return flushed;
}

static int flush_for_read(struct tally_stats_group *g,
			  enum tally_flush_mode mode)
{
	switch (mode) {
	case TALLY_FLUSH_IF_NEEDED:
		if (over_threshold(g))
			stats_design_flush(g, false);
		return 0;
	case TALLY_FLUSH_FORCE:
		stats_design_flush(g, true);
		return 0;
	case TALLY_FLUSH_RATELIMITED:
		if (ratelimit_late(g->tree))
			stats_design_flush(g, true);
		return 0;
	case TALLY_FLUSH_NONE:
		return 0;
	}
	return -EINVAL;
}

int tally_stats_flush(struct tally_stats_group *g)
{
	if (!g)
		return -EINVAL;
	stats_design_flush(g, true);
	return 0;
}

int tally_stats_read(struct tally_stats_group *g, unsigned int stat,
		     enum tally_flush_mode mode, long *hier, long *local)
{
	int err;

	if (!g || stat >= g->nr_stats)
		return -EINVAL;
	err = flush_for_read(g, mode);
	if (err)
		return err;
	if (hier)
		*hier = stats_load(&stats_hier(g)[stat]);
	if (local)
		*local = stats_load(&stats_local(g)[stat]);
	return 0;
}

int tally_stats_snapshot(struct tally_stats_group *g,
			 enum tally_flush_mode mode, long *hier, long *local)
{
	int err;

	if (!g)
		return -EINVAL;
	err = flush_for_read(g, mode);
	if (err)
		return err;
	for (unsigned int i = 0; i < g->nr_stats; i++) {
		if (hier)
			hier[i] = stats_load(&stats_hier(g)[i]);
		if (local)
			local[i] = stats_load(&stats_local(g)[i]);
	}
	return 0;
}

int tally_stats_render(struct tally_stats_group *g, enum tally_flush_mode mode,
		       char *buf, size_t len)
{
	long hier[TALLY_STATS_MAX];
	size_t used = 0;
	int err;

	if (!g || !buf)
		return -EINVAL;
	err = tally_stats_snapshot(g, mode, hier, NULL);
	for (unsigned int i = 0; !err && i < g->nr_stats; i++) {
		int n = snprintf(buf + used, len - used, "%s %ld\n",
				 g->tree->names[i], hier[i]);

		if (n < 0 || (size_t)n >= len - used)
			err = -ENOSPC;
		else
			used += (size_t)n;
	}
	return err ? err : (int)used;
}

unsigned long tally_stats_read_bound(const struct tally_stats_tree *t)
{
	if (!t)
		return 0;
	return t->threshold + t->domain->nr_cpus * (t->batch - 1);
}
