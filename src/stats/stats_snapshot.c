// SPDX-License-Identifier: MIT
/*
 * stats_snapshot.c - the statistics tree's side of the snapshot interface
 * (stats_snapshot.h): its schema and a sorted walk of its groups with
 * their flushed values.
 *
 * Owns nothing; reads groups under topo_lock for reading (no create or
 * destroy meanwhile) and their flushed values with relaxed loads (a flush
 * may run beside it).  Costs: O(n log fanout) for n groups plus one
 * allocation (the walk's stack), O(nr_stats) per group.
 */
#include <errno.h>

#include <tally/stats.h>
#include "stats_internal.h"
#include "stats_snapshot.h"

const char *stats_stat_name(const struct tally_stats_tree *t, unsigned int i)
{
	return t->names[i];
}

bool stats_stat_is_event(const struct tally_stats_tree *t, unsigned int i)
{
	return t->is_event[i];
}

/* @n's first child (@prev NULL) or the child after @prev. */
static struct name_node *group_child(struct name_node *n,
				     struct name_node *prev)
{
	struct tally_stats_group *c = prev ? stats_group_of(prev)->next_sibling
					   : stats_group_of(n)->first_child;

	return c ? &c->node : NULL;
}

struct walk {
	unsigned int nr_stats;
	snapshot_row_fn row;
	void *arg;
};

static int visit(struct name_node *n, unsigned int depth, void *arg)
{
	struct walk *w = arg;
	long *v = w->row(w->arg, n->name, n->len, depth);

	if (!v)
		return -ENOMEM;
	tally_stats_snapshot(stats_group_of(n), TALLY_FLUSH_NONE,
			     v + w->nr_stats, v);
	return 0;
}

int stats_snapshot_walk(struct tally_stats_tree *t, snapshot_row_fn row,
			void *arg)
{
	struct walk w = { t->nr_stats, row, arg };
	int ret;

	pthread_rwlock_rdlock(&t->topo_lock);
	ret = names_walk_sorted(&t->root->node, t->group_names.nr_hashed + 1,
				group_child, visit, &w);
	pthread_rwlock_unlock(&t->topo_lock);
	return ret;
}
