// SPDX-License-Identifier: MIT
/*
 * stats_group.c - groups of the statistics tree: lifetime, names, paths.
 *
 * The structure (parent, children, names) changes under the tree's
 * topo_lock, written by create and destroy, read by find and the child
 * walk.  Children of a group are a doubly linked list (O(1) unlink); the
 * names are a tree of named nodes (names/names.h) whose table of every
 * group keyed by (parent, name) answers "which child has this name" in
 * O(1), so building a flat tree of n groups costs O(n), not O(n^2).
 *
 * Invariant: a group is in the table and in its parent's child list from
 * the end of its creation to the start of its destruction; a group with
 * children is never destroyed; a group marked dying gets no child.  Create
 * allocates under topo_lock, after checking that the parent is alive.
 *
 * Destroy folds the group's unflushed deltas into its parent's pending
 * values with a flush of the group (the parent is linked, so a later flush
 * of any ancestor carries them up): hierarchical values are the same
 * before and after.
 *
 * Costs: create O(depth) plus the per-CPU allocation; destroy one flush of
 * the group; find O(path length); path O(depth).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"

struct tally_stats_group *stats_walk_next(struct tally_stats_group *g,
					  struct tally_stats_group *n)
{
	struct tally_stats_group *c = __atomic_load_n(&n->walk_first,
						      __ATOMIC_ACQUIRE);

	while (!c) {
		if (n == g)
			return NULL;
		c = __atomic_load_n(&n->walk_next, __ATOMIC_ACQUIRE);
		n = n->parent;
	}
	return c;
}

void stats_for_each_group(struct tally_stats_tree *t,
			  void (*fn)(struct tally_stats_group *g, void *arg),
			  void *arg)
{
	for (struct tally_stats_group *g = t->root; g;
	     g = stats_walk_next(t->root, g))
		fn(g, arg);
}

/*
 * Writers first: with glibc's default, a stream of finds could hold off
 * create, destroy and fork (which takes the lock for writing) for ever.
 */
static void init_topo_lock(struct tally_stats_tree *t)
{
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->topo_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
}

int stats_groups_init(struct tally_stats_tree *t)
{
	init_topo_lock(t);
	return names_init(&t->group_names);
}

static void free_named(struct name_node *n, void *arg)
{
	(void)arg;
	stats_group_free(stats_group_of(n));
}

void stats_groups_fini(struct tally_stats_tree *t)
{
	if (t->group_names.buckets)
		names_for_each(&t->group_names, free_named, NULL);
	if (t->root)
		stats_group_free(t->root);
	t->root = NULL;
#ifdef TALLY_DEBUG
	for (struct tally_stats_group *g = t->graveyard, *next; g; g = next) {
		next = g->next_sibling;
		stats_group_free(g);
	}
#endif
	names_fini(&t->group_names);
	pthread_rwlock_destroy(&t->topo_lock);
}

void stats_group_free(struct tally_stats_group *g)
{
	struct tally_domain *d = g->tree->domain;

	tally_percpu_free(d, g->pcpu);
	tally_percpu_free(d, g->fpcpu);
	free(g->chain_offs);
	name_node_fini(&g->node);
	free(g);
}

static unsigned int depth_of(const struct tally_stats_group *g)
{
	unsigned int depth = 0;

	for (; g; g = g->parent)
		depth++;
	return depth;
}

/* Fill the threshold chain: the group's count, then each ancestor's. */
static void set_chain(struct tally_stats_group *g)
{
	unsigned int i = 0;

	for (struct tally_stats_group *a = g; a; a = a->parent, i++) {
		g->chain_offs[i] = (char *)&a->pcpu->count - (char *)g->pcpu;
		stats_chain_over(g)[i] = &a->over;
	}
}

void stats_design_set_chain(struct tally_stats_group *g, long *count,
			    long *over)
{
	g->nr_chain = 1;
	g->chain_offs[0] = (char *)count - (char *)g->pcpu;
	stats_chain_over(g)[0] = over;
}

/*
 * A group, not yet linked anywhere.  Only CPU-independent memory is
 * written: per-CPU copies stay untouched until their CPU updates.
 */
struct tally_stats_group *stats_group_new(struct tally_stats_tree *t,
					  struct tally_stats_group *parent,
					  const char *name, size_t len)
{
	unsigned int nr_chain = depth_of(parent) + 1;
	struct tally_stats_group *g;
	size_t n = t->nr_stats;

	/*
	 * over has a cache line of its own: the group needs that alignment.
	 * The flushed values follow (stats_hier()).
	 */
	g = aligned_alloc(STATS_CACHELINE,
			  (STATS_GROUP_SIZE + 3 * n * sizeof(long) +
			   STATS_CACHELINE - 1) &
				  ~(size_t)(STATS_CACHELINE - 1));
	if (!g)
		return NULL;
	memset(g, 0, STATS_GROUP_SIZE + 3 * n * sizeof(long));
	g->chain_offs = calloc(nr_chain, sizeof(long) + sizeof(long *));
	g->tree = t;
	g->parent = parent;
	g->nr_stats = (unsigned short)t->nr_stats;
	g->nr_chain = nr_chain;
	g->batch = t->batch;
	g->cache_cap = t->cache_cap;
	g->hcache = t->hcache;
	g->hint_cap = t->threshold + 1;
	g->simulated = t->simulated;
	g->pcpu = tally_percpu_alloc(t->domain,
				     sizeof(struct stats_pcpu) + n * sizeof(long),
				     STATS_CACHELINE);
	g->fpcpu = tally_percpu_alloc(t->domain,
				      sizeof(struct stats_fpcpu) +
					      n * sizeof(long),
				      8);
	if (name_node_init(&g->node, parent ? &parent->node : NULL, name,
			   len) ||
	    !g->chain_offs || !g->pcpu || !g->fpcpu) {
		stats_group_free(g);
		return NULL;
	}
	set_chain(g);
	if (t->ops->group_init)
		t->ops->group_init(g);
	g->magic = STATS_GROUP_MAGIC;
	return g;
}

int tally_stats_group_create(struct tally_stats_group *parent,
			     const char *name, struct tally_stats_group **out)
{
	struct tally_stats_tree *t;
	struct tally_stats_group *g = NULL;
	size_t len;
	int err = 0;

	if (!parent || !names_valid(name, TALLY_STATS_NAME_MAX))
		return -EINVAL;
	t = parent->tree;
	len = strlen(name);
	pthread_rwlock_wrlock(&t->topo_lock);
	if (parent->dying || parent->magic != STATS_GROUP_MAGIC)
		err = -EINVAL;
	else if (names_child(&t->group_names, &parent->node, name, len))
		err = -EEXIST;
	else
		err = names_reserve(&t->group_names);
	if (!err) {
		g = stats_group_new(t, parent, name, len);
		if (!g)
			err = -ENOMEM;
	}
	if (!err) {
		g->next_sibling = parent->first_child;
		if (parent->first_child)
			parent->first_child->prev_sibling = g;
		__atomic_store_n(&parent->first_child, g, __ATOMIC_RELEASE);
		g->walk_next = parent->walk_first;
		if (parent->walk_first)
			parent->walk_first->walk_prev = g;
		/* Loaded without the lock: stats_group_clean(), adopt_claimed(). */
		__atomic_store_n(&parent->walk_first, g, __ATOMIC_RELEASE);
		names_insert(&t->group_names, &g->node);
		stats_count_info(&t->info.groups, 1);
	}
	pthread_rwlock_unlock(&t->topo_lock);
	if (!err && out)
		*out = g;
	return err;
}

int stats_group_detach(struct tally_stats_group *g)
{
	struct tally_stats_tree *t;

	if (!g || !g->parent)
		return -EINVAL;
	t = g->tree;
	pthread_rwlock_wrlock(&t->topo_lock);
	if (g->first_child || g->dying) {
		pthread_rwlock_unlock(&t->topo_lock);
		return g->dying ? -EINVAL : -EBUSY;
	}
	g->dying = true;
	if (g->prev_sibling)
		g->prev_sibling->next_sibling = g->next_sibling;
	else
		__atomic_store_n(&g->parent->first_child, g->next_sibling,
				 __ATOMIC_RELEASE);
	if (g->next_sibling)
		g->next_sibling->prev_sibling = g->prev_sibling;
	names_remove(&t->group_names, &g->node);
	stats_count_info(&t->info.groups, (uint64_t)-1);
	pthread_rwlock_unlock(&t->topo_lock);
	return 0;
}

void stats_group_fold(struct tally_stats_group *g, bool quiesced)
{
	/* No CPU's hint cache names it any more; its hints went up. */
	stats_hcache_evict(g);
	if (quiesced)
		stats_flush_quiesced(g->tree, g);
	else
		stats_flush_subtree(g->tree, g, false);
}

/*
 * No flush's adopt_claimed() reaches @g any more once the flushes that
 * hold flush_lock now are done (stats_flush_quiesce()).  @g takes no
 * update any more: its last fold is done.  Its children still on its
 * links (detached, finishing at the same time: a statistics tree's
 * destroy of a parent may overtake its leaf's) leave them too: @g's fold
 * folded them, and they must not touch @g once it is freed.
 */
static void leave_walk(struct tally_stats_group *g)
{
	struct tally_stats_tree *t = g->tree;
	struct tally_stats_group *c, *next;

	pthread_rwlock_wrlock(&t->topo_lock);
	/* Loaded without the lock: stats_group_clean(), adopt_claimed(). */
	if (!g->walk_orphan)
		__atomic_store_n(g->walk_prev ? &g->walk_prev->walk_next :
						&g->parent->walk_first,
				 g->walk_next, __ATOMIC_RELEASE);
	if (g->walk_next)
		g->walk_next->walk_prev = g->walk_prev;
	for (c = g->walk_first; c; c = next) {
		next = c->walk_next;
		c->walk_orphan = true;
		c->walk_prev = NULL;
		__atomic_store_n(&c->walk_next, NULL, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&g->walk_first, NULL, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&t->topo_lock);
}

void stats_group_finish(struct tally_stats_group *g, bool children_finished)
{
	struct tally_stats_tree *t = g->tree;

	/*
	 * After this fold and the quiesce, g is linked on no CPU and no
	 * flusher holds it.  A group an earlier fold left clean (a memory
	 * group's, folded quiesced a grace period after its last update)
	 * needs no second fold: it would cost a barrier and fold nothing.
	 * Unless its children have all finished: a detached child's fold
	 * still links its parent when it pops the child's updates.
	 */
	stats_hcache_evict(g);
	if (!children_finished || !stats_group_clean(g))
		stats_flush_subtree(t, g, true);
	leave_walk(g);
	stats_flush_quiesce(t);
	if (t->ops->retire)
		t->ops->retire(g);
	g->magic = STATS_GROUP_DEAD;
#ifdef TALLY_DEBUG
	/* Kept poisoned: a later update aborts instead of corrupting. */
	pthread_rwlock_wrlock(&t->topo_lock);
	g->next_sibling = t->graveyard;
	t->graveyard = g;
	pthread_rwlock_unlock(&t->topo_lock);
#else
	stats_group_free(g);
#endif
}

int tally_stats_group_destroy(struct tally_stats_group *g)
{
	int err = stats_group_detach(g);

	if (!err)
		stats_group_finish(g, false);
	return err;
}

int tally_stats_group_find(struct tally_stats_tree *t, const char *path,
			   struct tally_stats_group **out)
{
	struct name_node *n;
	int err;

	if (!t || !path || !out)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->topo_lock);
	err = names_find(&t->group_names, &t->root->node, path, &n);
	pthread_rwlock_unlock(&t->topo_lock);
	if (!err)
		*out = stats_group_of(n);
	return err;
}

int tally_stats_group_for_each_child(struct tally_stats_group *g,
				     int (*fn)(struct tally_stats_group *child,
					       const char *name, void *arg),
				     void *arg)
{
	int ret = 0;

	if (!g || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&g->tree->topo_lock);
	for (struct tally_stats_group *c = g->first_child; c && !ret;
	     c = c->next_sibling)
		ret = fn(c, c->node.name, arg);
	pthread_rwlock_unlock(&g->tree->topo_lock);
	return ret;
}

const char *tally_stats_group_name(const struct tally_stats_group *g)
{
	return g ? g->node.name : NULL;
}

struct tally_stats_group *
tally_stats_group_parent(const struct tally_stats_group *g)
{
	return g ? g->parent : NULL;
}

int tally_stats_group_path(const struct tally_stats_group *g, char *buf,
			   size_t len)
{
	if (!g || (!buf && len))
		return -EINVAL;
	return names_path(&g->node, buf, len);
}

/* --- fork --------------------------------------------------------------- */

/*
 * Write-locked: no create, destroy, find or walk runs in another thread
 * at fork; the child re-initialises the lock rather than unlocking it (a
 * lock word may count threads the child does not have).
 */
void stats_group_fork_prepare(struct tally_stats_tree *t)
{
	pthread_rwlock_wrlock(&t->topo_lock);
}

void stats_group_fork_parent(struct tally_stats_tree *t)
{
	pthread_rwlock_unlock(&t->topo_lock);
}

void stats_group_fork_child(struct tally_stats_tree *t)
{
	/*
	 * The unlock only tells the sanitizers that the lock is free: glibc
	 * sees another thread id in the child and takes its reader path,
	 * which the initialisation then wipes out.
	 */
	pthread_rwlock_unlock(&t->topo_lock);
	init_topo_lock(t);
}
