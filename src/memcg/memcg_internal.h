/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_INTERNAL_H
#define TALLY_MEMCG_INTERNAL_H

/*
 * memcg_internal.h - what the files of the memory groups share.
 *
 *   memcg_group.c    tree and group lifetime: create, find, destroy,
 *                    references (get/put), freeing after a grace period;
 *                    names and paths (names/names.h)
 *   memcg_counter.c  hierarchical page counters and events
 *   memcg_stock.c    per-CPU stocks: slots, installs, evictions, drains
 *   memcg_transfer.c bytes in transit between counters and stocks, and
 *                    settling a subtree (the refusal's wait for them)
 *   memcg_walk.c     lock-free walks of a subtree
 *   memcg_charge.c   charge, uncharge, the refusal's loop, limits
 *   memcg_callback.c calling, setting and removing the user callbacks
 *   memcg_reclaim.c  protection, reclaim, high
 *   memcg_oom.c      OOM policies, kills, tasks
 *   memcg.c          names, fork, stock mode, reads, stats, events fd
 *   memcg_render.c   memory.stat / memory.events / limits as text or JSON
 *   memcg_snapshot.c the exporter's rows (memcg_snapshot.h)
 *
 * Lock order: oom_lock (tasks, policies, the kill in progress), drain_lock
 * (drains, destroy), structure (create, destroy, find, attach), then the
 * callbacks' lock (memcg_callback.c, a leaf).  No tally lock is held while
 * a user callback runs, so fork() never waits for one.
 */

#include <pthread.h>
#include <tally/memcg.h>
#include <tally/oom.h>

#include "names/names.h"
#include "runtime/backoff.h"
#include "runtime/fork.h"
#include "runtime/grace.h"

/* The CPU argument of the system domain's charges: the current one. */
#define NO_CPU (~0u)

/*
 * How long a refusal (or setting max, destroy, fork) waits for the
 * transfers in flight between a page counter and a stock, in real time:
 * they are a few instructions long, so only a thread descheduled or
 * stopped right there for longer makes the wait end without them.  A
 * second, not less: on a machine with many runnable threads per CPU, a
 * thread preempted in that window can wait over 100 ms for its CPU.
 */
#define TRANSFER_WAIT_NS (1000l * 1000 * 1000)
#define RECLAIM_ROUNDS 4
#define MAX_OOM_TIMEOUT_NS (60l * 1000 * 1000 * 1000)

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define INC(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)

#define MEMCG_MAGIC_LIVE 0x6d656d63u	/* "memc" */
#define MEMCG_MAGIC_FREED 0xdeadc0deu

/* A group's OOM policy but its kill callback (callbacks[MEMCG_CB_KILL]). */
struct memcg_oom {
	enum tally_memcg_oom_mode mode;
	long timeout_ns;
};

enum memcg_cb_kind { MEMCG_CB_RECLAIM, MEMCG_CB_KILL, MEMCG_CB_KINDS };

/* A group's callback of one kind, under the callbacks' lock. */
struct memcg_callback {
	void (*fn)(void);	/* the kind's type; NULL: none */
	void *arg;
	int closed;		/* its group is destroyed: none from now on */
};

struct memcg_caller;

/* One call of a callback in flight, on its thread's stack. */
struct memcg_cb_call {
	void (*fn)(void);	/* what it calls, read when it began */
	void *arg;
	struct tally_memcg *g;
	enum memcg_cb_kind kind;
	unsigned long seq;	/* callbacks published before it began */
	struct memcg_caller *caller;
	struct memcg_cb_call *next, *prev;	/* every call in flight */
	struct memcg_cb_call *outer;	/* the call its thread is inside */
};

/* A wait for the calls of callbacks published before it began. */
struct memcg_cb_wait {
	struct tally_memcg *g;
	unsigned int kinds;	/* 1 << kind, for each kind waited for */
	unsigned long seq;
	bool others_only;	/* not the waiting thread's own calls */
	struct memcg_caller *caller;
};

struct tally_memcg {
	/*
	 * Read by every charge: set at creation, or rarely written.  The
	 * inline fast paths (tally/memcg.h) read the first member.
	 */
	struct tally_memcg_fast_ fast;	/* the tree's stocks, this group's cap */
	struct tally_memcg_tree *tree;
	struct tally_memcg *parent;	/* a reference on it is held */
	int dead;			/* destroyed: work goes to parent */
	/*
	 * Settles of this subtree running: read by every transfer of the
	 * chain below, written only by settles, so not on the counter's
	 * line, which every refill of every CPU writes.
	 */
	int pressure;
	unsigned int magic;
	unsigned int depth;
	struct tally_stats_group *stats;

	/* The page counter: written by refills of every CPU. */
	long usage __attribute__((aligned(64)));
	long peak;
	unsigned long refills;		/* charges that reached the counter */
	long max;
	long high;
	long low;
	long min;
	/* Protected usage, as its parent sums it, and its children's sums. */
	long min_usage;
	long low_usage;
	long children_min_usage;
	long children_low_usage;

	/* Rare: events, callbacks, structure, lifetime. */
	long events[TALLY_MEMCG_NR_EVENTS] __attribute__((aligned(64)));
	long events_local[TALLY_MEMCG_NR_EVENTS];
	long refs;			/* tree's while live + handles + children */
	int evfd;
	struct memcg_callback callbacks[MEMCG_CB_KINDS];
	struct memcg_oom oom;		/* under oom_lock */
	struct tally_memcg_task *tasks;	/* under oom_lock + structure */
	struct name_node node;		/* name, in the tree's table */
	struct tally_memcg *first_child;
	struct tally_memcg *next_sibling;
	struct tally_memcg *next_all;	/* every group not yet freed */
	struct tally_memcg *prev_all;
	unsigned long nr_children;
	unsigned long nr_descendants;	/* live, under structure */
	struct grace_node free_node;	/* its end (and its stats group's) */
	struct grace_node fold_node;	/* its stats folded after destroy */
	int folded_late;		/* group_fold_late() has folded them */
};

struct tally_memcg_tree {
	struct tally_domain *domain;
	unsigned int nr_cpus;
	int simulated;
	int rseq;			/* stocks taken by rseq sequences */
	long batch;
	long max_batch;
	void *stocks;			/* per CPU: MEMCG_SLOTS slots */
	struct tally_stats_tree *stats;
	struct tally_memcg *root;
	struct tally_memcg *all;
	struct name_table names;	/* live groups' names, under structure */
	struct tally_memcg *graveyard;	/* debug builds: freed groups */

	pthread_cond_t kill_done;	/* with oom_lock: a kill ended */
	struct tally_memcg_task *killing;	/* under oom_lock */
	struct tally_memcg *killing_group;	/* the victim's, under oom_lock */
	int kill_running;		/* under oom_lock */
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

	struct tally_fork_node fork_node;	/* memcg.c: live trees */
	/* Lifetimes and transfers of this tree's groups (64-byte aligned). */
	struct grace_domain grace;
};

enum { MEMCG_KILLED, MEMCG_NO_VICTIM, MEMCG_KILL_BUSY, MEMCG_NOT_KILLING };

/* memcg.c */
bool memcg_rseq_stocks_possible(void);
void memcg_register_tree(struct tally_memcg_tree *t);
void memcg_unregister_tree(struct tally_memcg_tree *t);
void memcg_init_tree_locks(struct tally_memcg_tree *t);
void memcg_check_handle(const struct tally_memcg *g);

/* memcg_counter.c */
struct tally_memcg *memcg_resolve(struct tally_memcg *g);
void memcg_counters_sub(struct tally_memcg *from, struct tally_memcg *upto,
			long n);
struct tally_memcg *memcg_counters_add(struct tally_memcg *g, long n,
				       bool force);
struct tally_memcg *memcg_counters_try_add(struct tally_memcg *g, long n);
int memcg_counters_uncharge(struct tally_memcg *g, long n);
void memcg_counters_give_back(struct tally_memcg *g, long n);
void memcg_propagate_protected(struct tally_memcg *g, long usage);
void memcg_unprotect(struct tally_memcg *g);
void memcg_event(struct tally_memcg *g, enum tally_memcg_event ev);
void memcg_add_local_events(struct tally_memcg *g, enum tally_memcg_event ev,
			    long count);

/* memcg_stock.c (the slots; a caller of these runs a transfer) */
bool memcg_stock_take(struct tally_memcg *g, unsigned int cpu, long n);
bool memcg_stock_give(struct tally_memcg *g, unsigned int cpu, long n,
		      long cap);
bool memcg_stock_deposit(struct tally_memcg *g, unsigned int cpu, long batch,
			 long cap);
long memcg_stock_sum(struct tally_memcg *h);
void memcg_drain_locked(struct tally_memcg *h);

/* memcg_transfer.c */
struct memcg_transfer {
	struct grace_section section;
};

void memcg_transfer_begin(struct tally_memcg_tree *t,
			  struct memcg_transfer *tr);
void memcg_transfer_end(struct memcg_transfer *tr);
bool memcg_transfer_may_move(const struct tally_memcg *g);
void memcg_settle_lock(struct tally_memcg *h);
void memcg_settle_unlock(struct tally_memcg *h);
void memcg_settle_dead(struct tally_memcg *g);
void memcg_transfers_fork_prepare(struct tally_memcg_tree *t);
void memcg_transfers_fork_parent(struct tally_memcg_tree *t);

/* memcg_charge.c */
struct tally_memcg *memcg_settle_and_retry(struct tally_memcg *g, long n,
					   struct tally_memcg *h);

/* memcg_walk.c */
long memcg_walk(struct tally_memcg *h,
		long (*fn)(struct tally_memcg *g, void *arg), void *arg);
void memcg_walk_calling(struct tally_memcg *h,
			bool (*wants)(struct tally_memcg *g, void *arg),
			void (*call)(struct tally_memcg *g, void *arg),
			void *arg);

/* memcg_reclaim.c */
void memcg_protection(struct tally_memcg *root, struct tally_memcg *g,
		      long *emin, long *elow);
long memcg_reclaim(struct tally_memcg *h, long want);
int memcg_note_high(struct tally_memcg *g);

/* memcg_callback.c */
/*
 * Begin a call of @g's callback of @kind: false when there is none, else
 * @c->fn and @c->arg are what to call; memcg_callback_leave() after it.
 */
bool memcg_callback_enter(struct tally_memcg *g, enum memcg_cb_kind kind,
			  struct memcg_cb_call *c);
void memcg_callback_leave(struct memcg_cb_call *c);
/*
 * Replace @g's callback of @kind by (@fn, @arg), then memcg_callback_wait()
 * for the calls of the old one: -EINVAL (destroyed group) or -EDEADLK
 * (that wait could never end), nothing changed and nothing to wait for.
 */
int memcg_callback_publish(struct tally_memcg *g, enum memcg_cb_kind kind,
			   void (*fn)(void), void *arg,
			   struct memcg_cb_wait *w);
/*
 * Destroy's: remove every callback of @g for good, then
 * memcg_callback_wait() for the calls of other threads; -EDEADLK as
 * above.
 */
int memcg_callback_close(struct tally_memcg *g, struct memcg_cb_wait *w);
/* Sleep until no call that @w waits for runs. */
void memcg_callback_wait(struct memcg_cb_wait *w);
/* Whether @g has a callback of @kind (a racy peek). */
bool memcg_callback_present(const struct tally_memcg *g, enum memcg_cb_kind kind);
void memcg_callback_fork_prepare(void);
void memcg_callback_fork_parent(void);
void memcg_callback_fork_child(void);

/* memcg_oom.c */
int memcg_oom_kill(struct tally_memcg *h, struct memcg_oom *pol);
struct tally_memcg *memcg_wait_for_room(struct tally_memcg *g, long n,
					struct tally_memcg *h, long deadline);
/* Caller holds oom_lock and the structure lock for writing. */
void memcg_unlink_task(struct tally_memcg_task *task);
void memcg_wait_kill(struct tally_memcg_tree *t, struct tally_memcg *g);

/* memcg_group.c */
void memcg_put(struct tally_memcg *g);

/* The group whose name node is @n. */
static inline struct tally_memcg *memcg_of(struct name_node *n)
{
	return (struct tally_memcg *)((char *)n -
				      offsetof(struct tally_memcg, node));
}

#endif /* TALLY_MEMCG_INTERNAL_H */
