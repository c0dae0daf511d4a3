/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_INTERNAL_H
#define TALLY_MEMCG_INTERNAL_H

#include <pthread.h>
#include <tally/memcg.h>
#include <tally/oom.h>

/* The CPU argument of the system domain's charges: the current one. */
#define NO_CPU (~0u)
/* Deepest chain (the root is at depth 0). */

struct memcg_oom {
	enum tally_memcg_oom_mode mode;
	long timeout_ns;
	tally_memcg_kill_fn kill;
	void *arg;
};

struct tally_memcg {
	/*
	 * Read by every charge: set at creation, or rarely written.  The
	 * inline fast paths (tally/memcg.h) read the first member.
	 */
	struct tally_memcg_fast_ fast;	/* stock freed once destroyed */
	struct tally_memcg_tree *tree;
	struct tally_memcg *parent;
	int dead;			/* destroyed: work goes to parent */
	unsigned int depth;
	struct tally_stats_group *stats;

	/* The page counter: written by refills of every CPU. */
	long usage __attribute__((aligned(64)));
	long peak;
	unsigned long refills;		/* charges that reached the counter */
	int refilling;			/* refills between counter and stock */
	int pressure;			/* refusals draining this subtree */
	long max;
	long high;
	long low;
	long min;

	/* Rare: events, callbacks, structure. */
	long events[TALLY_MEMCG_NR_EVENTS] __attribute__((aligned(64)));
	long events_local[TALLY_MEMCG_NR_EVENTS];
	int evfd;
	tally_memcg_reclaim_fn reclaim;
	void *reclaim_arg;
	struct memcg_oom oom;		/* under oom_lock */
	struct tally_memcg_task *tasks;	/* under oom_lock + structure */
	struct tally_memcg *first_child;
	struct tally_memcg *next_sibling;
	struct tally_memcg *next_all;	/* every group, zombies included */
	unsigned long nr_children;
};

struct tally_memcg_tree {
	struct tally_domain *domain;
	unsigned int nr_cpus;
	int simulated;
	int rseq;			/* stocks taken by rseq sequences */
	long batch;
	struct tally_stats_tree *stats;
	struct tally_memcg *root;
	struct tally_memcg *all;

	pthread_mutex_t kill_lock;
	pthread_cond_t kill_done;	/* with oom_lock: a kill ended */
	struct tally_memcg_task *killing;	/* under oom_lock */
	pthread_t killer;
	pthread_mutex_t oom_lock;
	pthread_mutex_t drain_lock;
	pthread_rwlock_t structure;

	/* OOM candidates' room, one per attached task, under oom_lock. */
	struct tally_oom_candidate *cands;
	struct tally_memcg_task **cand_tasks;
	size_t cand_room;
	size_t nr_tasks;

	unsigned long drains;
	unsigned long drain_waits;
	unsigned long refusals;
	unsigned long underflows;
	unsigned long nr_groups;
	unsigned long nr_zombies;

	struct tally_memcg_tree *next_tree;
};

void memcg_event(struct tally_memcg *g, enum tally_memcg_event ev);
void memcg_add_local_events(struct tally_memcg *g, enum tally_memcg_event ev,
			    long count);
long memcg_walk(struct tally_memcg *h,
		long (*fn)(struct tally_memcg *g, void *arg), void *arg);
long memcg_drain_locked(struct tally_memcg *h);
void memcg_protection(struct tally_memcg *root, struct tally_memcg *g,
		      long *emin, long *elow);
bool memcg_rseq_stocks_possible(void);
void memcg_register_tree(struct tally_memcg_tree *t);
void memcg_unregister_tree(struct tally_memcg_tree *t);
void memcg_init_tree_locks(struct tally_memcg_tree *t);
/* Caller holds oom_lock and the structure lock for writing. */
void memcg_unlink_task(struct tally_memcg_task *task);
void memcg_wait_kill(struct tally_memcg_tree *t, struct tally_memcg_task *task,
		     struct tally_memcg *g);

#endif /* TALLY_MEMCG_INTERNAL_H */
