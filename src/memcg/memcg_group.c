// SPDX-License-Identifier: MIT
/*
 * memcg_group.c - the structure of a memory tree and the lifetime of its
 * groups: create, find, destroy, get, put.
 *
 * Identity: a group's name, path and lookup are its own, a node of the
 * memory tree's tree of named nodes (names/names.h), under the structure
 * lock.  Every group also owns a group of the same path in an internal
 * statistics tree (its memory.stat items), created under its parent's
 * through tally/stats.h and ended through stats/stats_owner.h; nothing of
 * the statistics tree points back.  Creation and destruction hold the
 * structure lock for writing; a group is linked for lock-free walks
 * (memcg_walk.c) only once complete, with a release store, and once
 * unlinked keeps a reference on the sibling that followed it, so that a
 * walk resumed on it after a callback still finds its way.
 *
 * Lifetime.  A group holds references (refs): one of the tree's while it
 * is live, one per handle the caller owns (tally_memcg_create() and
 * tally_memcg_find() give one, tally_memcg_get() adds one,
 * tally_memcg_put() drops one) and one per child not yet freed (a child's
 * work may go to it).  Destroy takes it offline: its charge and local
 * events belong to the parent from then on, its statistics group is
 * detached (its name is free), and the tree's reference is dropped.  When
 * the last reference goes, the group is unlinked from the list of all
 * groups and retired in its tree's grace domain: it is freed (its
 * statistics group, flushed into its ancestors, then its memory and event
 * descriptor) once every lock-free walk, transfer, and update redirected
 * from a destroyed child inside a read-side section, that could stand on
 * it has ended; then it drops its parent's reference and its next
 * sibling's.  One lifetime: the statistics
 * group ends with the memory group that owns it.
 *
 * Costs: create O(1) plus the statistics group; destroy O(CPUs x slots)
 * to drain its stock after a grace period (memcg_settle_dead()),
 * O(siblings) to unlink it; put O(1) plus the frees whose grace period
 * ended.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/grace.h"
#include "memcg_internal.h"
#include "memcg_stock.h"
#include "stats/stats_owner.h"

#define MEMCG_STATS_BATCH (1ul << 18)

static struct tally_memcg *group_alloc(struct tally_memcg_tree *t,
				       struct tally_memcg *parent)
{
	struct tally_memcg *g;

	if (posix_memalign((void **)&g, 64, sizeof(*g)))
		return NULL;
	memset(g, 0, sizeof(*g));
	g->tree = t;
	g->parent = parent;
	g->depth = parent ? parent->depth + 1 : 0;
	g->magic = MEMCG_MAGIC_LIVE;
	g->refs = 1;		/* the tree's, while live */
	g->max = g->high = TALLY_MEMCG_UNLIMITED;
	g->evfd = -1;
	g->fast.stock = t->stocks;
	g->fast.rseq = t->rseq;
	g->fast.stock_cap = 2 * t->batch;
	return g;
}

static void group_free(struct tally_memcg_tree *t, struct tally_memcg *g)
{
	if (g->evfd >= 0)
		close(g->evfd);
	name_node_fini(&g->node);
	g->magic = MEMCG_MAGIC_FREED;
#ifdef TALLY_DEBUG
	/*
	 * Debug builds keep freed groups, poisoned, until the tree goes: a
	 * handle used after its last put aborts with a message instead of
	 * touching reused memory.
	 */
	g->next_all = __atomic_load_n(&t->graveyard, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&t->graveyard, &g->next_all, g,
					    true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
#else
	(void)t;
	free(g);
#endif
}

/*
 * After a grace period: nothing can reach @node's group any more, nor
 * update its statistics group (detached by its destroy).  A child's ends
 * before its parent's: it holds a reference on it until here.
 */
static void group_release(struct grace_node *node)
{
	struct tally_memcg *g = (struct tally_memcg *)
		((char *)node - offsetof(struct tally_memcg, free_node));
	struct tally_memcg *parent = g->parent, *next = g->next_sibling;

	stats_group_finish(g->stats, true);
	group_free(g->tree, g);
	/* Only destroyed groups are released: unlinked, with these refs. */
	if (next)
		memcg_put(next);
	memcg_put(parent);
}

/*
 * A grace period after @node's group was destroyed: the statistics
 * updates that had resolved to it before (and land in its detached
 * statistics group) have ended; fold them into the ancestors' values.
 */
static void group_fold_late(struct grace_node *node)
{
	struct tally_memcg *g = (struct tally_memcg *)
		((char *)node - offsetof(struct tally_memcg, fold_node));

	stats_group_fold(g->stats, true);
	__atomic_store_n(&g->folded_late, 1, __ATOMIC_RELEASE);
	memcg_put(g);
}

void memcg_put(struct tally_memcg *g)
{
	struct tally_memcg_tree *t = g->tree;

	if (__atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL))
		return;
	/* Unreachable first: tree info and fork walk the list of all. */
	pthread_rwlock_wrlock(&t->structure);
	if (g->prev_all)
		g->prev_all->next_all = g->next_all;
	else
		__atomic_store_n(&t->all, g->next_all, __ATOMIC_RELEASE);
	if (g->next_all)
		g->next_all->prev_all = g->prev_all;
	t->nr_zombies--;
	pthread_rwlock_unlock(&t->structure);
	grace_retire(&t->grace, &g->free_node, group_release);
}

void tally_memcg_get(struct tally_memcg *g)
{
	if (!g)
		return;
	memcg_check_handle(g);
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void tally_memcg_put(struct tally_memcg *g)
{
	struct tally_memcg_tree *t;

	if (!g)
		return;
	memcg_check_handle(g);
	if (!g->parent)
		return;		/* the root lives as long as its tree */
	t = g->tree;		/* g may be freed once put */
	memcg_put(g);
	grace_poll(&t->grace);
}

int tally_memcg_tree_create(struct tally_memcg_tree **out,
			    const struct tally_memcg_options *opts)
{
	struct tally_stat_desc schema[TALLY_MEMCG_NR_STATS];
	struct tally_stats_options sopts = { 0 };
	struct tally_memcg_tree *t;
	long batch = opts && opts->batch ? opts->batch
					 : TALLY_MEMCG_DEFAULT_BATCH;
	long max_batch;
	int err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (batch < 1 || batch > (1l << 30))
		return -EINVAL;
	if (opts && opts->max_batch) {
		max_batch = opts->max_batch;
		if (max_batch < batch || max_batch > (1l << 30))
			return -EINVAL;
	} else {
		max_batch = batch;	/* set below, once the CPUs are known */
	}
	/* Its grace domain's shards are cache lines of their own. */
	if (posix_memalign((void **)&t, 64, sizeof(*t)))
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	t->domain = opts && opts->domain ? opts->domain : tally_domain_system();
	if (!t->domain) {
		free(t);
		return -ENODEV;
	}
	t->nr_cpus = tally_domain_nr_cpus(t->domain);
	t->simulated = tally_domain_is_simulated(t->domain);
	t->rseq = !t->simulated && memcg_rseq_stocks_possible();
	t->batch = batch;
	t->max_batch = max_batch;
	if (!(opts && opts->max_batch)) {
		/*
		 * Large batches where few CPUs hold them: all CPUs' stocks of
		 * a group stay within TALLY_MEMCG_STOCK_BUDGET, so that from
		 * 64 CPUs on the default is the kernel's fixed batch.
		 */
		long fit = TALLY_MEMCG_STOCK_BUDGET / (2l * t->nr_cpus) /
			   batch * batch;
		long most = batch > (1l << 30) / TALLY_MEMCG_MAX_BATCH_FACTOR ?
			    (1l << 30) : TALLY_MEMCG_MAX_BATCH_FACTOR * batch;

		t->max_batch = fit < batch ? batch : fit > most ? most : fit;
	}
	t->stocks = tally_percpu_alloc(t->domain,
				       MEMCG_SLOTS * sizeof(struct memcg_slot),
				       64);
	if (!t->stocks) {
		free(t);
		return -ENOMEM;
	}
	memcg_init_tree_locks(t);

	for (int i = 0; i < TALLY_MEMCG_NR_STATS; i++) {
		schema[i].name = tally_memcg_stat_name(i);
		schema[i].kind = i >= TALLY_MEMCG_PGFAULT ? TALLY_STAT_EVENT
							  : TALLY_STAT_STATE;
	}
	sopts.domain = t->domain;
	sopts.batch = MEMCG_STATS_BATCH;
	err = tally_stats_tree_create(&t->stats, schema, TALLY_MEMCG_NR_STATS,
				      &sopts);
	if (err) {
		tally_percpu_free(t->domain, t->stocks);
		free(t);
		return err;
	}
	t->root = group_alloc(t, NULL);
	if (!t->root) {
		tally_stats_tree_destroy(t->stats);
		tally_percpu_free(t->domain, t->stocks);
		free(t);
		return -ENOMEM;
	}
	if (name_node_init(&t->root->node, NULL, "", 0) ||
	    names_init(&t->names)) {
		name_node_fini(&t->root->node);
		free(t->root);
		tally_stats_tree_destroy(t->stats);
		tally_percpu_free(t->domain, t->stocks);
		free(t);
		return -ENOMEM;
	}
	t->root->stats = tally_stats_root(t->stats);
	grace_domain_init(&t->grace);
	t->all = t->root;
	t->nr_groups = 1;
	memcg_register_tree(t);
	*out = t;
	return 0;
}

void tally_memcg_tree_destroy(struct tally_memcg_tree *t)
{
	struct tally_memcg *g, *next;

	if (!t)
		return;
	memcg_unregister_tree(t);
	/*
	 * Pending ends first; then the groups left, newest (so children)
	 * first.  A destroyed one still held by a handle ends its detached
	 * statistics group; the live ones' go with their tree.
	 */
	grace_domain_fini(&t->grace);
	for (g = t->all; g; g = next) {
		next = g->next_all;
		if (g->dead)
			stats_group_finish(g->stats, true);
		group_free(t, g);
	}
	for (g = t->graveyard; g; g = next) {
		next = g->next_all;
		free(g);
	}
	tally_stats_tree_destroy(t->stats);
	names_fini(&t->names);
	tally_percpu_free(t->domain, t->stocks);
	free(t->cands);
	free(t->cand_tasks);
	pthread_rwlock_destroy(&t->structure);
	pthread_mutex_destroy(&t->drain_lock);
	pthread_mutex_destroy(&t->oom_lock);
	pthread_cond_destroy(&t->kill_done);
	free(t);
}

struct tally_memcg *tally_memcg_root(struct tally_memcg_tree *t)
{
	return t ? t->root : NULL;
}

int tally_memcg_create(struct tally_memcg *parent, const char *name,
		       struct tally_memcg **out)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *g;
	size_t len;
	int err;

	if (!parent || !names_valid(name, TALLY_MEMCG_NAME_MAX))
		return -EINVAL;
	memcg_check_handle(parent);
	t = parent->tree;
	grace_poll(&t->grace);
	if (parent->depth + 1 > TALLY_MEMCG_MAX_DEPTH)
		return -EINVAL;
	g = group_alloc(t, parent);
	if (!g)
		return -ENOMEM;
	len = strlen(name);
	if (name_node_init(&g->node, &parent->node, name, len)) {
		group_free(t, g);
		return -ENOMEM;
	}
	pthread_rwlock_wrlock(&t->structure);
	if (__atomic_load_n(&parent->dead, __ATOMIC_RELAXED))
		err = -EINVAL;
	else if (names_child(&t->names, &parent->node, name, len))
		err = -EEXIST;
	else
		err = names_reserve(&t->names);
	if (!err)
		err = tally_stats_group_create(parent->stats, name, &g->stats);
	if (!err) {
		names_insert(&t->names, &g->node);
		__atomic_add_fetch(&parent->refs, 1, __ATOMIC_RELAXED);
		if (out)
			__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
		g->next_sibling = parent->first_child;
		g->next_all = t->all;
		if (t->all)
			t->all->prev_all = g;
		__atomic_store_n(&t->all, g, __ATOMIC_RELEASE);
		parent->nr_children++;
		for (struct tally_memcg *a = parent; a; a = a->parent)
			__atomic_add_fetch(&a->nr_descendants, 1,
					   __ATOMIC_RELAXED);
		t->nr_groups++;
		__atomic_store_n(&parent->first_child, g, __ATOMIC_RELEASE);
	}
	pthread_rwlock_unlock(&t->structure);
	if (err) {
		group_free(t, g);
		return err;
	}
	if (out)
		*out = g;
	return 0;
}

int tally_memcg_find(struct tally_memcg_tree *t, const char *path,
		     struct tally_memcg **out)
{
	struct name_node *n;
	int err;

	if (!t || !path || !out)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->structure);
	err = names_find(&t->names, &t->root->node, path, &n);
	if (!err) {
		struct tally_memcg *g = memcg_of(n);

		if (g->parent)
			__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
		*out = g;
	}
	pthread_rwlock_unlock(&t->structure);
	return err;
}

int tally_memcg_path(const struct tally_memcg *g, char *buf, size_t len)
{
	int n;

	if (!g || (!buf && len))
		return -EINVAL;
	pthread_rwlock_rdlock(&g->tree->structure);
	n = __atomic_load_n(&g->dead, __ATOMIC_RELAXED) ? -EINVAL :
		names_path(&g->node, buf, len);
	pthread_rwlock_unlock(&g->tree->structure);
	return n;
}

/* Caller holds the structure lock for writing. */
static void unlink_child(struct tally_memcg *g)
{
	struct tally_memcg **link = &g->parent->first_child;

	while (*link != g)
		link = &(*link)->next_sibling;
	/*
	 * g keeps its own next_sibling, and a reference on it: a walk
	 * standing on it goes on, now or after a callback (memcg_walk.c).
	 */
	if (g->next_sibling)
		__atomic_add_fetch(&g->next_sibling->refs, 1, __ATOMIC_RELAXED);
	__atomic_store_n(link, g->next_sibling, __ATOMIC_RELEASE);
	g->parent->nr_children--;
}

int tally_memcg_destroy(struct tally_memcg *g)
{
	struct tally_memcg_tree *t;
	struct tally_memcg *parent;
	struct memcg_cb_wait w;
	int err = 0;

	if (!g || !g->parent)
		return -EINVAL;
	memcg_check_handle(g);
	t = g->tree;
	parent = g->parent;
	pthread_mutex_lock(&t->oom_lock);
	/*
	 * Its tasks are about to be detached: not while another thread's
	 * kill callback has a victim in it.
	 */
	memcg_wait_kill(t, g);
	pthread_mutex_lock(&t->drain_lock);
	pthread_rwlock_wrlock(&t->structure);
	if (__atomic_load_n(&g->dead, __ATOMIC_RELAXED))
		err = -EINVAL;
	else if (g->nr_children)
		err = -EBUSY;
	/*
	 * Its callbacks first, the one step that can fail (-EDEADLK: a wait
	 * for them could never end) with the group as it was.  The
	 * statistics group then has no children, nor is it detached: its
	 * name is free in the statistics tree from here on.
	 */
	else if (!(err = memcg_callback_close(g, &w)))
		err = stats_group_detach(g->stats);
	if (err)
		goto out;

	/*
	 * From here on its work goes to the parent; then close its stock
	 * for good (a drain leaves a dead group's stock closed) and give
	 * it back to the counters.  The stock itself is freed with the
	 * group: handles may still run sequences that read its stop flag.
	 */
	__atomic_store_n(&g->dead, 1, __ATOMIC_SEQ_CST);
	/* A kill that resolved to it before now fails (memcg_oom_kill()). */
	g->oom = (struct memcg_oom){ TALLY_MEMCG_OOM_FAIL, 0 };
	memcg_unprotect(g);
	while (g->tasks)
		memcg_unlink_task(g->tasks);
	for (int ev = 0; ev < TALLY_MEMCG_NR_EVENTS; ev++)
		memcg_add_local_events(parent, ev,
				       __atomic_exchange_n(&g->events_local[ev],
							   0,
							   __ATOMIC_SEQ_CST));
	unlink_child(g);
	names_remove(&t->names, &g->node);
	for (struct tally_memcg *a = parent; a; a = a->parent)
		__atomic_sub_fetch(&a->nr_descendants, 1, __ATOMIC_RELAXED);
	/*
	 * Its name is free now.  Its statistics group, detached, still
	 * takes the updates that resolved to it before the dead flag; it is
	 * folded into its ancestors below, and ends with the group
	 * (group_release()).
	 */
	t->nr_groups--;
	t->nr_zombies++;
out:
	pthread_rwlock_unlock(&t->structure);
	pthread_mutex_unlock(&t->drain_lock);
	pthread_mutex_unlock(&t->oom_lock);
	if (!err) {
		/* Its slots, once the installs that missed the flag ended. */
		memcg_settle_dead(g);
		/* Other threads' calls of its callbacks in flight end first. */
		memcg_callback_wait(&w);
		/*
		 * Its stats in its ancestors' hierarchical values once the
		 * updates in flight have landed: at once when none runs (the
		 * poll below ends the grace period), else now and once more
		 * then.  One flush, and no barrier, for a quiet group.
		 */
		__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
		grace_retire(&t->grace, &g->fold_node, group_fold_late);
		grace_poll(&t->grace);
		if (!__atomic_load_n(&g->folded_late, __ATOMIC_ACQUIRE))
			stats_group_fold(g->stats, false);
		memcg_put(g);		/* the tree's reference */
		grace_poll(&t->grace);
	}
	return err;
}
