/* SPDX-License-Identifier: MIT */
#ifndef TALLY_DOMAIN_INTERNAL_H
#define TALLY_DOMAIN_INTERNAL_H

#include <stdbool.h>
#include <tally/domain.h>

#include "percpu_internal.h"

struct tally_domain {
	unsigned int nr_cpus;		/* slots: highest CPU id + 1 */
	unsigned int order;		/* ceil(log2(nr_cpus)) */
	bool simulated;
	enum tally_grouping grouping;	/* in use (after any fallback) */

	/* Counter tree shape; level 0 of these arrays is tree level 1. */
	unsigned int nr_levels;
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned int shift[TALLY_MAX_LEVELS];	/* pos >> shift = item */
	unsigned int offset[TALLY_MAX_LEVELS];	/* first item of level */
	unsigned int used[TALLY_MAX_LEVELS];	/* items with >= 1 CPU */
	unsigned int nr_items;
	unsigned int *cpu_pos;			/* leaf position per CPU */

	struct tally_percpu_pool pool;		/* nr_cpus units */
};

/* The system domain, or NULL with errno set; built once. */
struct tally_domain *tally_domain_resolve(struct tally_domain *d);

/* Item index of @cpu at tree level @level (0 = leaf items). */
static inline unsigned int tally_domain_item(const struct tally_domain *d,
					     unsigned int cpu,
					     unsigned int level)
{
	return d->offset[level] + (d->cpu_pos[cpu] >> d->shift[level]);
}

#endif /* TALLY_DOMAIN_INTERNAL_H */
