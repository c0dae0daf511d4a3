/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_DESIGN_H
#define TALLY_STATS_DESIGN_H

/*
 * stats_design.h - the hook through which a statistics tree can run
 * another flushing design than its own on the same flush engine.
 *
 * The library's trees use the TALLY design (stats_read.c).  The kernel's
 * earlier designs, which `tally bench stats` compares it with, live with
 * the benchmark (bench/stats_designs.c) and reach the engine through this
 * header only: a design decides which flush a read needs and how readers
 * share it, the engine does every flush.  Internal: nothing here is
 * exported by libtally.so; the tool and the tests link the static
 * library.
 */

#include <stdbool.h>
#include <stdint.h>

#include <tally/stats.h>

/*
 * How flushes are decided and shared.  flush is required; the other
 * hooks may be NULL.
 */
struct stats_design_ops {
	const char *name;
	/* Per-tree state (stats_design_state()) and its locks. */
	int (*init)(struct tally_stats_tree *t);
	void (*fini)(struct tally_stats_tree *t);
	/*
	 * Flush for a read of @g.  @fresh: the flush must start after the
	 * call (forced reads); otherwise one already running may serve.
	 * Returns false when no flush ran: the design skipped it, or the
	 * group needed none.
	 */
	bool (*flush)(struct tally_stats_group *g, bool fresh);
	/* A group leaves: no flush of the design may still refer to it. */
	void (*retire)(struct tally_stats_group *g);
	/*
	 * A group was made, before anything can reach it: the design may
	 * give it another threshold chain (stats_design_set_chain()).
	 */
	void (*group_init)(struct tally_stats_group *g);
	/* Around fork(): take the design's locks; free or reset them. */
	void (*fork_prepare)(struct tally_stats_tree *t);
	void (*fork_parent)(struct tally_stats_tree *t);
	void (*fork_child)(struct tally_stats_tree *t);
};

/*
 * tally_stats_tree_create() with the design @ops (kept: it must outlive
 * the tree).
 */
int stats_tree_create_design(struct tally_stats_tree **out,
			     const struct tally_stat_desc *schema,
			     unsigned int nr_stats,
			     const struct tally_stats_options *opts,
			     const struct stats_design_ops *ops);

/* The design of @t. */
const struct stats_design_ops *
stats_design_of(const struct tally_stats_tree *t);
/* The design's per-tree state (NULL until it sets one). */
void *stats_design_state(const struct tally_stats_tree *t);
void stats_design_set_state(struct tally_stats_tree *t, void *state);
/* The domain of @t's per-CPU data, and its number of CPUs. */
struct tally_domain *stats_design_domain(const struct tally_stats_tree *t);
unsigned int stats_design_nr_cpus(const struct tally_stats_tree *t);
/* The tree of @g. */
struct tally_stats_tree *stats_design_tree(const struct tally_stats_group *g);
/* batch x nr_cpus: the threshold of @t. */
unsigned long stats_design_threshold(const struct tally_stats_tree *t);

/*
 * From group_init: @g's updates count their threshold hints in @count
 * (a per-CPU long on the tree's domain) and move them to @over, instead
 * of in a count per ancestor.  @over is what an if-needed read of @g
 * compares with the threshold.
 */
void stats_design_set_chain(struct tally_stats_group *g, long *count,
			    long *over);

/*
 * The engine: flush @g's subtree on every CPU; never fails, never
 * allocates.  @settle: see stats_internal.h.
 */
void stats_flush_subtree(struct tally_stats_tree *t,
			 struct tally_stats_group *g, bool settle);

/* A read waited for another reader's flush (tally_stats_info). */
void stats_design_count_shared_wait(struct tally_stats_tree *t);

#endif /* TALLY_STATS_DESIGN_H */
