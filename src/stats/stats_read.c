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
 * tree around it.  Otherwise the reader works on its group's share
 * (struct stats_share), a few atomic words and no lock: the stamp of the
 * group's shared flush running (at most one at a time), a progress count
 * that flush advances at each CPU it passes, and the stamps of the last
 * flush done and of the last shared one done.  Stamps come from the
 * tree's flush clock, taken by each flush as it starts.  A reader of G
 * arriving when the clock reads `arrival` needs a flush of G or of an
 * ancestor that started after arrival (forced reads; if-needed reads also
 * take the nearest shared one running at arrival, once that one is done).
 * It
 *
 *   - returns once such a flush is done (done_stamp > arrival);
 *   - otherwise, when no shared flush of G runs, claims it and runs it;
 *   - otherwise waits for the shared flush of G for as long as it makes
 *     progress: until it serves the reader, or ends (then the reader
 *     looks again: it may claim the next).  It spins for SPIN_NS (what
 *     a flush of a few CPUs takes), then naps on the share's futex word,
 *     which every flush of G bumps and wakes when it is done;
 *   - takes over as soon as a nap passed without progress (the flusher
 *     is preempted, stopped or blocked): it runs a flush of G of its
 *     own, alongside, which started after its arrival.
 *
 * No lock: a lock that kept the shares made every reader of the tree wait
 * for whichever reader held it when it was preempted, and on a machine
 * with more threads than CPUs a reader waiting for it was woken
 * milliseconds after it was free.  A waiter naps rather than spins: a
 * spinning waiter takes the CPU its preempted flusher needs, and every
 * takeover is one more flush queueing on the engine's lock.
 *
 * Readers share the flushes of their own group only.  An ancestor's flush
 * folds more (a root flush, every updated group of the tree) and takes
 * longer than the reader's own: waiting for one makes the reader wait
 * longer than flushing.  One that completes meanwhile still serves the
 * reader.
 *
 * Invariant: a reader waits only for a flush of its own group that made
 * progress during its last nap, and returns only once a flush of its
 * group or of an ancestor that started after its arrival (or, if-needed,
 * the one that ran at its arrival) is done: never stale, never more than
 * a nap behind a thread that does not run.  Several flushes of one group
 * may run at once (takeovers): the engine allows it, and done_stamp keeps
 * the latest.
 *
 * Cost of a read that flushes: a fence, a load of the clock, a
 * compare-and-swap and a few stores on the group's share line, one
 * fetch-and-add on the clock, the flush, and a futex wake when a reader
 * naps on it; a waiter spins SPIN_NS, then naps at most NAP_NS at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/inject.h"
#include "stats_internal.h"

/*
 * A waiter spins SPIN_NS, about what a flush of a few CPUs takes when its
 * flusher runs (a flush about to end serves it without a sleep), reading
 * the clock once in CLOCK_EVERY spins; then it naps NAP_NS at a time,
 * many times what a CPU's pass takes (a lock round trip and a fold, a
 * few microseconds), so that a flush that makes no progress during a nap
 * is not running.
 */
#define SPIN_NS 2000ull
#define NAP_NS 200000l
#define CLOCK_EVERY 32

/* stats_share.active while its claimer takes the flush's stamp. */
#define SHARE_CLAIMING UINT64_MAX

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
 * A flush's stamp, taken as it starts.  The fence pairs with the one a
 * reader issues before it loads its arrival: a flush whose stamp is above
 * the arrival loads every stat stored before the read (what the flush
 * engine needs of a flush that starts after an update).
 */
static uint64_t take_stamp(struct tally_stats_tree *t)
{
	uint64_t stamp = __atomic_add_fetch(&t->flush_clock, 1,
					    __ATOMIC_SEQ_CST);

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return stamp;
}

/* Raise *@p to @v if below: done_stamp keeps the latest flush done. */
static void raise_to(uint64_t *p, uint64_t v)
{
	uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (old < v && !__atomic_compare_exchange_n(p, &old, v, true,
						       __ATOMIC_RELEASE,
						       __ATOMIC_RELAXED))
		;
}

/* Wake the readers napping on @s (watch()): a flush of the group is done. */
static void wake_watchers(struct stats_share *s)
{
	__atomic_add_fetch(&s->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->sleepers, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &s->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
			NULL, 0);
}

/*
 * Run a flush of @a with @stamp.  @shared: the one readers watch (its
 * stamp in active, its progress counted); otherwise a takeover, alongside
 * it.  The releases order the fold before what readers load to return.
 */
static void run_flush(struct tally_stats_tree *t, struct tally_stats_group *a,
		      uint64_t stamp, bool shared)
{
	struct stats_share *s = &a->share;

	__atomic_add_fetch(&s->running, 1, __ATOMIC_RELAXED);
	stats_flush_counted(t, a, shared ? &s->progress : NULL);
	tally_inject(TALLY_INJECT_STATS_FLUSH_DONE);
	raise_to(&s->done_stamp, stamp);
	if (shared) {
		__atomic_store_n(&s->active_done, stamp, __ATOMIC_RELEASE);
		__atomic_store_n(&s->active, 0, __ATOMIC_RELEASE);
	}
	wake_watchers(s);
	stats_count_leave(&s->running);
}

/*
 * Claim @g's shared flush and run it, if none runs.  The claim comes
 * before the stamp, so that shared flushes of a group take their stamps
 * in the order they run: active_done then tells whether a given one is
 * done.
 */
static bool claim_and_run(struct tally_stats_tree *t,
			  struct tally_stats_group *g)
{
	uint64_t none = 0, stamp;

	if (!__atomic_compare_exchange_n(&g->share.active, &none,
					 SHARE_CLAIMING, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return false;
	stamp = take_stamp(t);
	__atomic_store_n(&g->share.active, stamp, __ATOMIC_RELEASE);
	run_flush(t, g, stamp, true);
	return true;
}

/* What a reader of @g waits for (see the top of the file). */
struct wanted {
	uint64_t arrival;
	const struct tally_stats_group *cover;	/* if-needed: running at arrival */
	uint64_t cover_stamp;
};

static bool served(const struct tally_stats_group *g, const struct wanted *w)
{
	for (const struct tally_stats_group *a = g; a; a = a->parent)
		if (__atomic_load_n(&a->share.done_stamp, __ATOMIC_ACQUIRE) >
		    w->arrival)
			return true;
	return w->cover && __atomic_load_n(&w->cover->share.active_done,
					   __ATOMIC_ACQUIRE) >= w->cover_stamp;
}

static bool watch_ends(const struct tally_stats_group *g, uint64_t active,
		       const struct wanted *w)
{
	return served(g, w) ||
	       __atomic_load_n(&g->share.active, __ATOMIC_ACQUIRE) != active;
}

/*
 * Watch @g's shared flush @active until the reader is served or that
 * flush ends (true), or it made no progress during a whole nap (false).
 * A spin of SPIN_NS first serves a flush about to end; then naps of at
 * most NAP_NS on the share's seq, which every flush of the group bumps,
 * waking the nappers, when it is done.
 */
static bool watch(struct tally_stats_group *g, uint64_t active,
		  const struct wanted *w)
{
	struct stats_share *s = &g->share;
	uint64_t seen = __atomic_load_n(&s->progress, __ATOMIC_RELAXED);
	uint64_t until = stats_mono_ns() + SPIN_NS;
	const struct timespec nap = { 0, NAP_NS };

	for (unsigned int spins = 1; !watch_ends(g, active, w); spins++) {
		uint32_t seq;
		uint64_t p;

		__builtin_ia32_pause();
		if (spins % CLOCK_EVERY || stats_mono_ns() < until)
			continue;
		stats_count_info(&g->tree->info.naps, 1);
		/* Counted before the seq is loaded: wake_watchers(). */
		__atomic_add_fetch(&s->sleepers, 1, __ATOMIC_SEQ_CST);
		seq = __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST);
		if (!watch_ends(g, active, w))
			syscall(SYS_futex, &s->seq, FUTEX_WAIT_PRIVATE, seq,
				&nap, NULL, 0);
		__atomic_sub_fetch(&s->sleepers, 1, __ATOMIC_RELAXED);
		if (watch_ends(g, active, w))
			break;
		p = __atomic_load_n(&s->progress, __ATOMIC_RELAXED);
		if (p == seen)
			return false;
		seen = p;
	}
	return true;
}

static bool tally_flush(struct tally_stats_group *g, bool fresh)
{
	struct tally_stats_tree *t = g->tree;
	struct wanted w = { 0 };
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
	/* The stats stored before the read, before the arrival: take_stamp(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	w.arrival = __atomic_load_n(&t->flush_clock, __ATOMIC_SEQ_CST);
	/*
	 * Not fresh: the nearest shared flush already running serves too,
	 * once it is done: that one, not any flush that started after it
	 * (and maybe ended before our arrival).
	 */
	for (const struct tally_stats_group *a = g; !fresh && a; a = a->parent) {
		uint64_t active = __atomic_load_n(&a->share.active,
						  __ATOMIC_ACQUIRE);

		if (active && active != SHARE_CLAIMING) {
			w.cover = a;
			w.cover_stamp = active;
			break;
		}
	}
	while (!served(g, &w)) {
		uint64_t active = __atomic_load_n(&g->share.active,
						  __ATOMIC_ACQUIRE);

		if (!active) {
			claim_and_run(t, g);
			continue;
		}
		/*
		 * G's flush (not an ancestor's: see "Readers share" above):
		 * one that started after arrival, or the covering one, serves
		 * us when done; one that started earlier, once it ends, lets
		 * a reader claim the next.
		 */
		waited = true;
		if (!watch(g, active, &w)) {
			/* Its flusher is preempted or stopped: ours is fresh. */
			stats_count_info(&t->info.takeovers, 1);
			run_flush(t, g, take_stamp(t), false);
		}
	}
	if (waited)
		stats_count_info(&t->info.shared_waits, 1);
	return true;
}

/* No flush of @g may still run once it is freed (a takeover's reader may
 * have returned while the flush it took over still runs). */
static void tally_retire(struct tally_stats_group *g)
{
	stats_wait_for_pushes(&g->share.running);
}

/* The flushes of shares were the parent's other threads. */
static void forget_share(struct tally_stats_group *g, void *arg)
{
	(void)arg;
	g->share.active = 0;
	g->share.running = 0;
	g->share.sleepers = 0;
}

static void tally_fork_child(struct tally_stats_tree *t)
{
	stats_for_each_group(t, forget_share, NULL);
}

const struct stats_design_ops stats_design_tally = {
	.name = "tally",
	.flush = tally_flush,
	.retire = tally_retire,
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
