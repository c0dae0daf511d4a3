// SPDX-License-Identifier: MIT
/*
 * stats_tree.c - statistics trees: creation, schema, information.
 *
 * A tree owns its schema (names and kinds, copied), its design (the
 * TALLY design, or another through stats_design.h), the per-CPU update
 * lists and push counts, and its groups.  Creation sets up
 * every part before the tree is published (registered for fork, returned);
 * a failed creation undoes what was done and leaves *out untouched.
 * Costs: create O(nr_stats^2) for the duplicate check; destroy O(groups).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats_internal.h"

#define DEFAULT_BATCH 64ul
#define DEFAULT_PERIOD_NS 2000000000ull
#define MAX_THRESHOLD ((unsigned long)LONG_MAX / 8)

static uint64_t default_clock(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int copy_schema(struct tally_stats_tree *t,
		       const struct tally_stat_desc *schema, unsigned int nr)
{
	t->names = calloc(nr, sizeof(*t->names));
	t->is_event = calloc(nr, 1);
	if (!t->names || !t->is_event)
		return -ENOMEM;
	for (unsigned int i = 0; i < nr; i++) {
		const char *name = schema[i].name;

		if (!name || !*name || strpbrk(name, " \t\n\r\v\f") ||
		    (schema[i].kind != TALLY_STAT_STATE &&
		     schema[i].kind != TALLY_STAT_EVENT))
			return -EINVAL;
		for (unsigned int j = 0; j < i; j++)
			if (!strcmp(t->names[j], name))
				return -EINVAL;
		t->names[i] = strdup(name);
		if (!t->names[i])
			return -ENOMEM;
		t->is_event[i] = schema[i].kind == TALLY_STAT_EVENT;
	}
	return 0;
}

/* Free what a tree holds; every part may be missing (failed create). */
static void tree_free(struct tally_stats_tree *t)
{
	stats_periodic_fini(t);
	stats_groups_fini(t);
	if (t->ops && t->ops->fini)
		t->ops->fini(t);
	if (t->domain) {
		tally_percpu_free(t->domain, t->hcache);
		tally_percpu_free(t->domain, t->lists);
		tally_percpu_free(t->domain, t->pushing);
	}
	for (unsigned int i = 0; t->names && i < t->nr_stats; i++)
		free(t->names[i]);
	free(t->names);
	free(t->is_event);
	stats_flush_fini(t);
	free(t);
}

void tally_stats_tree_destroy(struct tally_stats_tree *t)
{
	if (!t)
		return;
	stats_unregister_tree(t);
	tree_free(t);
}

static bool valid_options(const struct tally_stats_options *o)
{
	return !o->batch || (o->batch >= 2 && !(o->batch & (o->batch - 1)));
}

/* The design, per-CPU and group memory, once the domain is known. */
static int tree_setup(struct tally_stats_tree *t,
		      const struct stats_design_ops *ops)
{
	int err;

	t->ops = ops;
	if (t->ops->init) {
		err = t->ops->init(t);
		if (err)
			return err;
	}
	t->hcache = tally_percpu_alloc(t->domain, sizeof(*t->hcache), 32);
	t->lists = tally_percpu_alloc(t->domain, sizeof(*t->lists), 0);
	t->pushing = tally_percpu_alloc(t->domain, sizeof(*t->pushing), 0);
	if (!t->hcache || !t->lists || !t->pushing)
		return -ENOMEM;
	t->root = stats_group_new(t, NULL, "", 0);
	return t->root ? 0 : -ENOMEM;
}

int tally_stats_tree_create(struct tally_stats_tree **out,
			    const struct tally_stat_desc *schema,
			    unsigned int nr_stats,
			    const struct tally_stats_options *opts)
{
	return stats_tree_create_design(out, schema, nr_stats, opts,
					&stats_design_tally);
}

int stats_tree_create_design(struct tally_stats_tree **out,
			     const struct tally_stat_desc *schema,
			     unsigned int nr_stats,
			     const struct tally_stats_options *opts,
			     const struct stats_design_ops *ops)
{
	struct tally_stats_options o = { 0 };
	struct tally_stats_tree *t;
	int err;

	if (opts)
		o = *opts;
	if (!out || !schema || !nr_stats || nr_stats > TALLY_STATS_MAX ||
	    !valid_options(&o) || !ops || !ops->flush)
		return -EINVAL;
	/* Its locks and counters have cache lines of their own. */
	t = aligned_alloc(STATS_CACHELINE, sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	stats_flush_init(t);
	stats_periodic_init(t);
	t->nr_stats = nr_stats;
	err = stats_groups_init(t);
	if (!err)
		err = copy_schema(t, schema, nr_stats);
	if (err)
		goto fail;
	t->domain = tally_domain_resolve(o.domain);
	if (!t->domain) {
		err = -ENODEV;
		goto fail;
	}
	t->batch = o.batch ? o.batch : DEFAULT_BATCH;
	/* Counts reach a few thresholds at most: keep them far from overflow. */
	if (t->batch > MAX_THRESHOLD / t->domain->nr_cpus) {
		err = -EINVAL;
		goto fail;
	}
	t->threshold = t->batch * t->domain->nr_cpus;
	t->nr_cpus = t->domain->nr_cpus;
	t->simulated = t->domain->simulated;
	/*
	 * A quarter batch: the larger, the rarer a run of updates of one
	 * group goes to its chain, and the earlier groups flush.  Without
	 * rseq updates no group takes the hint cache.
	 */
	t->cache_cap = !t->simulated && t->batch / 4 >= 2 ? t->batch / 4 : 0;
	t->flush_at = t->threshold -
		      t->domain->nr_cpus * (t->cache_cap ? t->cache_cap - 1 : 0);
	t->period_ns = o.period_ns ? o.period_ns : DEFAULT_PERIOD_NS;
	t->clock = o.clock ? o.clock : default_clock;
	t->clock_arg = o.clock_arg;
	if (!t->simulated)
		stats_barrier_setup();
	err = tree_setup(t, ops);
	if (err)
		goto fail;
	t->info.groups = 1;
	t->last_root_flush = stats_now(t);
	stats_register_tree(t);
	*out = t;
	return 0;
fail:
	tree_free(t);
	return err;
}

struct tally_stats_group *tally_stats_root(struct tally_stats_tree *t)
{
	return t ? t->root : NULL;
}

unsigned int tally_stats_nr_stats(const struct tally_stats_tree *t)
{
	return t ? t->nr_stats : 0;
}

int tally_stats_stat_index(const struct tally_stats_tree *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	for (unsigned int i = 0; i < t->nr_stats; i++)
		if (!strcmp(t->names[i], name))
			return (int)i;
	return -ENOENT;
}

static uint64_t load_info(const uint64_t *field)
{
	return __atomic_load_n(field, __ATOMIC_RELAXED);
}

int tally_stats_tree_info(const struct tally_stats_tree *t,
			  struct tally_stats_info *info)
{
	if (!t || !info)
		return -EINVAL;
	info->flushes = load_info(&t->info.flushes);
	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++)
		info->flushes += (uint64_t)tally_percpu_read_cpu(
			&t->hcache->clean_reads, cpu);
	info->root_flushes = load_info(&t->info.root_flushes);
	info->groups_flushed = load_info(&t->info.groups_flushed);
	info->shared_waits = load_info(&t->info.shared_waits);
	info->groups = load_info(&t->info.groups);
	info->barriers = load_info(&t->info.barriers);
	info->takeovers = load_info(&t->info.takeovers);
	info->naps = load_info(&t->info.naps);
	info->flush_lock_waits = load_info(&t->info.flush_lock_waits);
	info->flush_lock_wait_ns = load_info(&t->info.flush_lock_wait_ns);
	info->flush_lock_long_holds = load_info(&t->info.flush_lock_long_holds);
	info->flush_lock_long_hold_ns =
		load_info(&t->info.flush_lock_long_hold_ns);
	info->adoptions = load_info(&t->info.adoptions);
	info->fenced = t->simulated || stats_updates_fence();
	return 0;
}

/* --- the design hook (stats_design.h) ------------------------------------ */

const struct stats_design_ops *stats_design_of(const struct tally_stats_tree *t)
{
	return t->ops;
}

void *stats_design_state(const struct tally_stats_tree *t)
{
	return t->design_state;
}

void stats_design_set_state(struct tally_stats_tree *t, void *state)
{
	t->design_state = state;
}

struct tally_domain *stats_design_domain(const struct tally_stats_tree *t)
{
	return t->domain;
}

unsigned int stats_design_nr_cpus(const struct tally_stats_tree *t)
{
	return t->domain->nr_cpus;
}

struct tally_stats_tree *stats_design_tree(const struct tally_stats_group *g)
{
	return g->tree;
}

unsigned long stats_design_threshold(const struct tally_stats_tree *t)
{
	return t->threshold;
}

void stats_design_count_shared_wait(struct tally_stats_tree *t)
{
	stats_count_info(&t->info.shared_waits, 1);
}
