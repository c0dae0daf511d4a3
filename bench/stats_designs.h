/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_STATS_DESIGNS_H
#define TALLY_BENCH_STATS_DESIGNS_H

/*
 * stats_designs.h - the statistics tree's flushing design and the
 * kernel's earlier ones, side by side: trees of each for
 * `tally bench stats` and for the tests that compare them.  Not part of
 * the library: the kernel's designs reach its flush engine through an
 * internal hook (src/stats_design.h).
 */

#include <stdbool.h>
#include <stdint.h>

#include <tally/stats.h>

enum bench_stats_design {
	/* The library's own: per-group thresholds, shared fresh flushes. */
	BENCH_STATS_TALLY,
	/* One global threshold; every flush flushes the root; one flusher
	 * at a time, the others skip (possibly stale). */
	BENCH_STATS_LINUX61,
	/* The "memcg: more sophisticated stats flushing" proposal (2023,
	 * not merged): global threshold; the requested subtree is flushed
	 * when nobody else flushes, otherwise a coalesced root flush that
	 * others wait for, at most nr_cpus waiters (others skip). */
	BENCH_STATS_RFC2023,
	/* Per-group thresholds; subtree flushes serialised by one lock. */
	BENCH_STATS_LINUX68,
	BENCH_STATS_NR_DESIGNS
};

/* tally_stats_tree_create() with @design; -EINVAL for an unknown one. */
int bench_stats_tree_create(struct tally_stats_tree **out,
			    const struct tally_stat_desc *schema,
			    unsigned int nr_stats,
			    const struct tally_stats_options *opts,
			    enum bench_stats_design design);

/* "tally", "linux61", "rfc2023", "linux68" ("unknown" otherwise). */
const char *bench_stats_design_name(enum bench_stats_design design);

/* Whether @design counts every update against one tree-wide threshold. */
bool bench_stats_global_threshold(enum bench_stats_design design);

/* Whether @design's forced reads are fresh (it never skips a flush). */
bool bench_stats_fresh(enum bench_stats_design design);

/* Reads of @t that skipped a needed flush (0 for the library's design). */
uint64_t bench_stats_skipped(const struct tally_stats_tree *t);

/*
 * linux68's flushes that found its one flush mutex held (0 for the other
 * designs), and in *@wait_ns the time they waited for it.
 */
uint64_t bench_stats_design_lock_waits(const struct tally_stats_tree *t,
				       uint64_t *wait_ns);

#endif /* TALLY_BENCH_STATS_DESIGNS_H */
