// SPDX-License-Identifier: MIT
/*
 * stats_periodic.c - the periodic flusher of a statistics tree.
 *
 * A thread flushes the root once per period, ignoring thresholds, as the
 * kernel's periodic rstat flush does: it bounds how stale a value read
 * without a flush can be, and ratelimited reads (stats_read.c) flush only
 * when it is a full period late.  tally_stats_periodic_tick() is the whole
 * work of one period, for callers that drive their own clock.
 *
 * periodic_lock guards the thread's start and stop flags; it is never held
 * during a flush.  Cost: one root flush per period.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>

#include "runtime/fork.h"
#include "stats_internal.h"

int tally_stats_periodic_tick(struct tally_stats_tree *t)
{
	uint64_t last;

	if (!t)
		return -EINVAL;
	last = __atomic_load_n(&t->last_root_flush, __ATOMIC_RELAXED);
	if (stats_now(t) - last < t->period_ns)
		return 0;
	/* A design may skip (another flush running): then no flush is done. */
	return stats_design_flush(t->root, true) ? 1 : 0;
}

static void *periodic_main(void *arg)
{
	struct tally_stats_tree *t = arg;

	pthread_mutex_lock(&t->periodic_lock);
	while (!t->periodic_stop) {
		struct timespec until;
		uint64_t ns;

		pthread_mutex_unlock(&t->periodic_lock);
		tally_stats_periodic_tick(t);
		pthread_mutex_lock(&t->periodic_lock);
		clock_gettime(CLOCK_MONOTONIC, &until);
		ns = (uint64_t)until.tv_nsec + t->period_ns;
		until.tv_sec += (time_t)(ns / 1000000000ull);
		until.tv_nsec = (long)(ns % 1000000000ull);
		while (!t->periodic_stop &&
		       pthread_cond_timedwait(&t->periodic_cond,
					      &t->periodic_lock,
					      &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->periodic_lock);
	return NULL;
}

int tally_stats_periodic_start(struct tally_stats_tree *t)
{
	int err = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->periodic_lock);
	if (t->periodic_running) {
		err = -EALREADY;
	} else {
		t->periodic_stop = false;
		err = -pthread_create(&t->periodic_thread, NULL, periodic_main,
				      t);
		t->periodic_running = !err;
	}
	pthread_mutex_unlock(&t->periodic_lock);
	return err;
}

int tally_stats_periodic_stop(struct tally_stats_tree *t)
{
	bool running;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->periodic_lock);
	running = t->periodic_running;
	t->periodic_stop = true;
	t->periodic_running = false;
	pthread_cond_broadcast(&t->periodic_cond);
	pthread_mutex_unlock(&t->periodic_lock);
	if (running)
		pthread_join(t->periodic_thread, NULL);
	return 0;
}

/* periodic_main() waits until a CLOCK_MONOTONIC time. */
static void init_cond(struct tally_stats_tree *t)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&t->periodic_cond, &attr);
	pthread_condattr_destroy(&attr);
}

void stats_periodic_init(struct tally_stats_tree *t)
{
	pthread_mutex_init(&t->periodic_lock, NULL);
	init_cond(t);
}

void stats_periodic_fini(struct tally_stats_tree *t)
{
	tally_stats_periodic_stop(t);
	pthread_mutex_destroy(&t->periodic_lock);
	pthread_cond_destroy(&t->periodic_cond);
}

void stats_periodic_fork_prepare(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&t->periodic_lock);
}

void stats_periodic_fork_parent(struct tally_stats_tree *t)
{
	pthread_mutex_unlock(&t->periodic_lock);
}

/* The thread is not in the child: the child may start its own. */
void stats_periodic_fork_child(struct tally_stats_tree *t)
{
	tally_mutex_reset(&t->periodic_lock);
	init_cond(t);
	t->periodic_running = false;
	t->periodic_stop = false;
}
