// SPDX-License-Identifier: MIT
/*
 * memcg.c - memory groups: hierarchical page counters fed by per-CPU
 * stocks, limits, reclaim, OOM policies and events.
 *
 * Invariant, for every live group G at every moment:
 *
 *   G->usage = charges of G's subtree - uncharges
 *            + slot bytes of G's subtree (reserved, not yet used)
 *            + transfers in flight under G (memcg_transfer.c: refills
 *              taken from the counters, not yet in a slot; evictions and
 *              uncharges carrying a slot's bytes to the counters)
 *
 * and G->usage <= G->max, because a level is raised only by a
 * compare-and-swap that checks it (NOFAIL charges excepted).  Exact usage
 * (what callers hold) is therefore <= max too.
 *
 *   charge(G, n)  G's slot on this CPU >= n?  take it      (rseq, ~2 ns)
 *                 else CAS every level by n + batch, put the batch in
 *                 G's slot (memcg_charge.c)                  (1 CAS/level)
 *                 else CAS every level by n                  (1 CAS/level)
 *                 else refuse_or_reclaim(): drain, retry, reclaim, OOM
 *   uncharge(G,n) slot + n <= 2 batches?  give it back        (rseq)
 *                 else subtract n from every level          (1 op/level)
 *   drain(H)      close every slot of H's groups, membarrier(RSEQ), empty
 *                 them into the counters (memcg_stock.c): O(CPUs x slots),
 *                 rare
 *
 * A refusal must not be caused by reservations: the refusing charge
 * settles the level H that refused it (memcg_transfer.c): it sets
 * "pressure" on H (no transfer moves bytes of H's subtree from then on:
 * charges there go to the counters byte for byte), drains H's subtree,
 * waits for the transfers that began before (sleeping, 1 s at most),
 * drains again and retries under the drain lock.
 *
 * Lifetime (memcg_group.c, grace.c): a caller's handle is a reference; a
 * destroyed group is a "zombie" whose charges, uncharges and stat updates
 * go to its nearest live ancestor (each group holds a reference on its
 * parent, so that chain stays allocated) until its last reference is put;
 * it is then freed after a grace period of its tree's grace domain, so
 * the tree can be walked without a lock inside a read-side section
 * (memcg_walk.c).
 *
 * Locks, in their order: oom_lock (task lists, policies, the kill in
 * progress, OOM candidates' room), drain_lock (drains, destroy),
 * structure (create, destroy, find, attach), then the callbacks' lock of
 * memcg_callback.c (one for every tree, a leaf).  No lock is held while a
 * user callback runs: fork() takes these locks and never waits for one.
 * Callbacks are removed by waiting (sleeping) for the calls in flight.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>
#include <tally/memcg_current.h>
#include <tally/oom.h>

#include "runtime/inject.h"
#include "memcg_internal.h"
#include "memcg_stock.h"
#include "runtime/fork.h"
#include "runtime/percpu_internal.h"


static const char *const stat_names[TALLY_MEMCG_NR_STATS] = {
	[TALLY_MEMCG_ANON] = "anon",
	[TALLY_MEMCG_FILE] = "file",
	[TALLY_MEMCG_KERNEL] = "kernel",
	[TALLY_MEMCG_KERNEL_STACK] = "kernel_stack",
	[TALLY_MEMCG_PAGETABLES] = "pagetables",
	[TALLY_MEMCG_SOCK] = "sock",
	[TALLY_MEMCG_SHMEM] = "shmem",
	[TALLY_MEMCG_FILE_MAPPED] = "file_mapped",
	[TALLY_MEMCG_FILE_DIRTY] = "file_dirty",
	[TALLY_MEMCG_FILE_WRITEBACK] = "file_writeback",
	[TALLY_MEMCG_SLAB_RECLAIMABLE] = "slab_reclaimable",
	[TALLY_MEMCG_SLAB_UNRECLAIMABLE] = "slab_unreclaimable",
	[TALLY_MEMCG_PGFAULT] = "pgfault",
	[TALLY_MEMCG_PGMAJFAULT] = "pgmajfault",
};

static const char *const event_names[TALLY_MEMCG_NR_EVENTS] = {
	[TALLY_MEMCG_EVENT_LOW] = "low",
	[TALLY_MEMCG_EVENT_HIGH] = "high",
	[TALLY_MEMCG_EVENT_MAX] = "max",
	[TALLY_MEMCG_EVENT_OOM] = "oom",
	[TALLY_MEMCG_EVENT_OOM_KILL] = "oom_kill",
};

const char *tally_memcg_stat_name(enum tally_memcg_stat item)
{
	return (unsigned int)item < TALLY_MEMCG_NR_STATS ? stat_names[item]
							 : NULL;
}

const char *tally_memcg_event_name(enum tally_memcg_event ev)
{
	return (unsigned int)ev < TALLY_MEMCG_NR_EVENTS ? event_names[ev]
						       : NULL;
}


/* ---- trees registry and fork ---------------------------------------- */

/*
 * Rank TALLY_FORK_MEMCG of runtime/fork.h, the first: a tree's locks are
 * held while its groups create statistics groups and counters.
 */
static struct tally_fork_list trees = TALLY_FORK_LIST_INIT;

static void fork_prepare(void)
{
	struct tally_memcg_tree *t;

	pthread_mutex_lock(&trees.lock);
	tally_fork_for_each(t, &trees, struct tally_memcg_tree, fork_node) {
		memcg_transfers_fork_prepare(t);
		pthread_mutex_lock(&t->oom_lock);
		pthread_mutex_lock(&t->drain_lock);
		pthread_rwlock_wrlock(&t->structure);
	}
	memcg_callback_fork_prepare();
}

static void fork_parent(void)
{
	struct tally_memcg_tree *t;

	memcg_callback_fork_parent();
	tally_fork_for_each(t, &trees, struct tally_memcg_tree, fork_node) {
		pthread_rwlock_unlock(&t->structure);
		pthread_mutex_unlock(&t->drain_lock);
		pthread_mutex_unlock(&t->oom_lock);
		memcg_transfers_fork_parent(t);
	}
	pthread_mutex_unlock(&trees.lock);
}

void memcg_init_tree_locks(struct tally_memcg_tree *t)
{
	pthread_rwlockattr_t attr;

	pthread_cond_init(&t->kill_done, NULL);
	pthread_mutex_init(&t->oom_lock, NULL);
	pthread_mutex_init(&t->drain_lock, NULL);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->structure, &attr);
	pthread_rwlockattr_destroy(&attr);
}

static void fork_child(void)
{
	struct tally_memcg_tree *t;

	/*
	 * Lock words may count waiters the child does not have: build them
	 * anew (their holders were this thread, in fork_prepare()).
	 * No transfer of another thread was half way (the prepare handler
	 * waited for them, then pressed the root); refusals and settles
	 * other threads had in flight never finish here: forget their
	 * pressure, and the root's of the prepare handler.
	 */
	tally_fork_for_each(t, &trees, struct tally_memcg_tree, fork_node) {
		memcg_init_tree_locks(t);
		/*
		 * A kill callback that ran in another thread never ends
		 * here; one this thread forked from goes on, and detach and
		 * destroy must still wait for it.
		 */
		if (!t->kill_running ||
		    !pthread_equal(t->killer, pthread_self())) {
			t->kill_running = 0;
			t->killing = NULL;
			t->killing_group = NULL;
		}
		for (struct tally_memcg *g = t->all; g; g = g->next_all) {
			STORE(&g->pressure, 0);
		}
	}
	memcg_callback_fork_child();
	tally_mutex_reset(&trees.lock);
}

__attribute__((constructor)) static void install_fork_handlers(void)
{
	tally_fork_register(TALLY_FORK_MEMCG, fork_prepare, fork_parent,
			    fork_child);
}

void memcg_register_tree(struct tally_memcg_tree *t)
{
	tally_fork_list_add(&trees, &t->fork_node);
}

void memcg_unregister_tree(struct tally_memcg_tree *t)
{
	tally_fork_list_del(&trees, &t->fork_node);
}

/* ---- the stock mode --------------------------------------------------- */

/*
 * rseq stocks need membarrier(PRIVATE_EXPEDITED_RSEQ) for drains; the
 * registration is per process and asked once.
 */
static int rseq_barrier_ok;

static void register_rseq_barrier(void)
{
	const char *env = getenv("TALLY_MEMBARRIER");

	if (env && !strcmp(env, "off"))
		return;
	if (tally_rseq_mode() == TALLY_RSEQ_FALLBACK)
		return;
	rseq_barrier_ok = !syscall(__NR_membarrier,
			MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

bool memcg_rseq_stocks_possible(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, register_rseq_barrier);
	return rseq_barrier_ok;
}

/*
 * Debug builds keep freed groups' magic readable long enough to catch a
 * handle used after its last reference (ASan reports the read itself).
 */
void memcg_check_handle(const struct tally_memcg *g)
{
#ifdef TALLY_DEBUG
	if (LOAD(&g->magic) != MEMCG_MAGIC_LIVE) {
		static const char msg[] =
			"tally: memory group used after its last reference\n";

		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to say */
		}
		abort();
	}
#else
	(void)g;
#endif
}

/* ---- reads ------------------------------------------------------------ */

/*
 * The most the slots of @g's subtree can hold: on each CPU, one slot per
 * group (rseq stocks; atomic ones may briefly hold a group twice) of at
 * most two of the largest batches.
 */
static long stock_slack(const struct tally_memcg *g)
{
	const struct tally_memcg_tree *t = g->tree;
	unsigned long slots = LOAD(&g->nr_descendants) + 1;
	__int128 slack;

	if (!t->rseq || slots > MEMCG_SLOTS)
		slots = MEMCG_SLOTS;
	slack = (__int128)t->nr_cpus * slots * 2 * t->max_batch;
	return slack > LONG_MAX ? LONG_MAX : (long)slack;
}

int tally_memcg_usage(struct tally_memcg *g, enum tally_memcg_read_mode mode,
		      struct tally_memcg_range *out)
{
	long usage, v;

	if (!g || !out || (unsigned int)mode > TALLY_MEMCG_READ_DRAIN)
		return -EINVAL;
	if (LOAD(&g->dead)) {
		*out = (struct tally_memcg_range){ 0, 0, 0 };
		return 0;
	}
	switch (mode) {
	case TALLY_MEMCG_READ_APPROX: {
		long slack = stock_slack(g);

		usage = LOAD(&g->usage);
		out->value = usage;
		out->max = usage;
		out->min = slack >= usage ? 0 : usage - slack;
		return 0;
	}
	case TALLY_MEMCG_READ_PRECISE:
		usage = LOAD(&g->usage);
		v = usage - memcg_stock_sum(g);
		break;
	default:
		pthread_mutex_lock(&g->tree->drain_lock);
		memcg_drain_locked(g);
		v = LOAD(&g->usage);
		pthread_mutex_unlock(&g->tree->drain_lock);
		break;
	}
	if (v < 0)
		v = 0;
	*out = (struct tally_memcg_range){ v, v, v };
	return 0;
}

long tally_memcg_peak(struct tally_memcg *g, bool reset)
{
	long peak;

	if (!g)
		return -EINVAL;
	g = memcg_resolve(g);
	peak = LOAD(&g->peak);
	if (reset)
		STORE(&g->peak, LOAD(&g->usage));
	return peak;
}

int tally_memcg_drain(struct tally_memcg *g)
{
	if (!g)
		return -EINVAL;
	g = memcg_resolve(g);
	pthread_mutex_lock(&g->tree->drain_lock);
	memcg_drain_locked(g);
	pthread_mutex_unlock(&g->tree->drain_lock);
	return 0;
}

int tally_memcg_events(const struct tally_memcg *g, long *hier, long *local)
{
	if (!g)
		return -EINVAL;
	for (int ev = 0; ev < TALLY_MEMCG_NR_EVENTS; ev++) {
		if (hier)
			hier[ev] = LOAD(&g->events[ev]);
		if (local)
			local[ev] = LOAD(&g->events_local[ev]);
	}
	return 0;
}

int tally_memcg_tree_info(const struct tally_memcg_tree *t,
			  struct tally_memcg_info *out)
{
	struct tally_memcg_tree *mt = (struct tally_memcg_tree *)t;
	unsigned long refills = 0;
	struct grace_section sec;

	if (!t || !out)
		return -EINVAL;
	grace_enter(&mt->grace, &sec);
	for (const struct tally_memcg *g = ACQUIRE(&t->all); g;
	     g = ACQUIRE(&g->next_all))
		refills += LOAD(&g->refills);
	grace_leave(&sec);
	*out = (struct tally_memcg_info){
		.refills = refills,
		.drains = LOAD(&t->drains),
		.drain_waits = LOAD(&t->drain_waits),
		.refusals = LOAD(&t->refusals),
		.groups = LOAD(&t->nr_groups),
		.zombies = LOAD(&t->nr_zombies),
		.underflows = LOAD(&t->underflows),
		.rseq = t->rseq,
		.stock_bytes = (unsigned long)t->nr_cpus * MEMCG_SLOTS *
			       sizeof(struct memcg_slot),
		.group_bytes = sizeof(struct tally_memcg),
	};
	return 0;
}

/* ---- stats ------------------------------------------------------------ */

/*
 * An update goes to the group's statistics group, or a destroyed group's
 * to its nearest live ancestor's.  Another thread may be destroying
 * either: inside a read-side section the statistics group stays allocated
 * (destroy finishes it one grace period later).
 */
static int stat_mod(struct tally_memcg *g, unsigned int cpu,
		    enum tally_memcg_stat item, long delta)
{
	struct grace_section sec;
	int err;

	grace_enter(&g->tree->grace, &sec);
	g = memcg_resolve(g);
	(void)tally_inject(TALLY_INJECT_MEMCG_RESOLVED);
	err = cpu == NO_CPU ? tally_stats_mod(g->stats, item, delta) :
		tally_stats_mod_cpu(g->stats, cpu, item, delta);
	grace_leave(&sec);
	return err;
}

int tally_memcg_stat_mod(struct tally_memcg *g, enum tally_memcg_stat item,
			 long delta)
{
	if (!g)
		g = tally_memcg_current();	/* none named: the thread's */
	if (!g || g->tree->simulated || (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	return stat_mod(g, NO_CPU, item, delta);
}

int tally_memcg_stat_mod_cpu(struct tally_memcg *g, unsigned int cpu,
			     enum tally_memcg_stat item, long delta)
{
	if (!g || !g->tree->simulated || cpu >= g->tree->nr_cpus ||
	    (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	return stat_mod(g, cpu, item, delta);
}

int tally_memcg_stat_read(struct tally_memcg *g, enum tally_memcg_stat item,
			  enum tally_flush_mode mode, long *hier, long *local)
{
	int err = -EINVAL;

	if (!g || (unsigned int)item >= TALLY_MEMCG_NR_STATS)
		return -EINVAL;
	/* Destroy detaches the statistics group under it for writing. */
	pthread_rwlock_rdlock(&g->tree->structure);
	if (!LOAD(&g->dead))
		err = tally_stats_read(g->stats, item, mode, hier, local);
	pthread_rwlock_unlock(&g->tree->structure);
	return err;
}

struct tally_stats_tree *tally_memcg_stats_tree(struct tally_memcg_tree *t)
{
	return t ? t->stats : NULL;
}

int tally_memcg_events_fd(struct tally_memcg *g)
{
	int fd;

	if (!g || LOAD(&g->dead))
		return -EINVAL;
	pthread_rwlock_wrlock(&g->tree->structure);
	fd = LOAD(&g->evfd);
	if (fd < 0) {
		fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		else
			RELEASE(&g->evfd, fd);
	}
	pthread_rwlock_unlock(&g->tree->structure);
	return fd;
}

