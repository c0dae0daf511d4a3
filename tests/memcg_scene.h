/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TESTS_MEMCG_SCENE_H
#define TALLY_TESTS_MEMCG_SCENE_H

/*
 * memcg_scene.h - the small tree on which the transfer tests make a
 * CPU's slots interact: P (max SCENE_PARENT_MAX) with a child A, and
 * SCENE_OTHERS groups beside P under the root, one more group than a
 * CPU has slots: a worker charging A, then each of the others, on one
 * CPU makes its last refill evict the first slot installed, A's (a free
 * slot first, then slot 0).  Refill batches are SCENE_BATCH.
 */

#include <stdbool.h>
#include <tally/domain.h>
#include <tally/memcg.h>

#include "memcg/memcg_stock.h"

#define SCENE_OTHERS MEMCG_SLOTS
#define SCENE_BATCH (64 * 1024l)
#define SCENE_PARENT_MAX (1024 * 1024l)

struct scene {
	struct tally_domain *domain;	/* simulated, or NULL */
	struct tally_memcg_tree *t;
	struct tally_memcg *p, *a, *other[SCENE_OTHERS];
	/* The CPU charges go to: the simulated domain's CPU 0, or the
	 * first allowed CPU (the threads are pinned there). */
	int cpu;
	long watch_max;			/* P's usage never above it, or 0 */
	bool settle_timed_out;		/* a settle's wait ran out */
};

/* The tree, on a simulated domain of 2 CPUs or the system's; checked. */
bool scene_init(struct scene *s, bool simulated);
void scene_fini(struct scene *s);

#endif /* TALLY_TESTS_MEMCG_SCENE_H */
