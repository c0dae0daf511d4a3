// SPDX-License-Identifier: MIT
/*
 * memcg_snapshot.c - a memory tree's rows for the exporter
 * (memcg_snapshot.h): its live groups in sorted order, each with its
 * usage, peak, limits and events.
 *
 * Owns nothing; reads under the structure lock for reading, so every
 * group met is live and stays so; the values are relaxed loads (charges
 * and settings run beside it).  Costs: O(n log fanout) for n groups plus
 * one allocation (the walk's stack), O(events) per group.
 */
#include <errno.h>

#include "memcg_internal.h"
#include "memcg_snapshot.h"

/* @n's first live child (@prev NULL) or the one after @prev. */
static struct name_node *group_child(struct name_node *n,
				     struct name_node *prev)
{
	struct tally_memcg *c = prev ? memcg_of(prev)->next_sibling
				     : memcg_of(n)->first_child;

	return c ? &c->node : NULL;
}

struct walk {
	snapshot_row_fn row;
	void *arg;
};

static int visit(struct name_node *n, unsigned int depth, void *arg)
{
	struct walk *w = arg;
	struct tally_memcg *g = memcg_of(n);
	long *v = w->row(w->arg, n->name, n->len, depth);
	struct tally_memcg_range usage;
	struct tally_memcg_limits lim;

	if (!v)
		return -ENOMEM;
	/* The page counter, as the peak: stock reservations count. */
	tally_memcg_usage(g, TALLY_MEMCG_READ_APPROX, &usage);
	tally_memcg_get_limits(g, &lim);
	v[MEMCG_COL_CURRENT] = usage.value;
	v[MEMCG_COL_PEAK] = tally_memcg_peak(g, false);
	v[MEMCG_COL_MIN] = lim.min;
	v[MEMCG_COL_LOW] = lim.low;
	v[MEMCG_COL_HIGH] = lim.high;
	v[MEMCG_COL_MAX] = lim.max;
	tally_memcg_events(g, v + MEMCG_COL_EVENTS, v + MEMCG_COL_EVENTS_LOCAL);
	return 0;
}

int memcg_snapshot_walk(struct tally_memcg_tree *t, snapshot_row_fn row,
			void *arg)
{
	struct walk w = { row, arg };
	int ret;

	pthread_rwlock_rdlock(&t->structure);
	ret = names_walk_sorted(&t->root->node, t->names.nr_hashed + 1,
				group_child, visit, &w);
	pthread_rwlock_unlock(&t->structure);
	return ret;
}
