// SPDX-License-Identifier: MIT
/* memcg_scene.c - the transfer tests' small tree (memcg_scene.h). */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "memcg_scene.h"
#include "util.h"

bool scene_init(struct scene *s, bool simulated)
{
	memset(s, 0, sizeof(*s));
	s->cpu = simulated ? 0 : (int)util_allowed_cpu(0);
	if (simulated &&
	    !CHECK_EQ_LONG(tally_domain_create_simulated(&s->domain, 2,
							  TALLY_GROUP_LOW_BITS), 0))
		return false;
	s->t = util_memcg_tree(s->domain, SCENE_BATCH);
	if (!s->t)
		return false;
	s->p = util_memcg_group(tally_memcg_root(s->t), "p");
	s->a = s->p ? util_memcg_group(s->p, "a") : NULL;
	if (!s->a ||
	    !CHECK_EQ_LONG(tally_memcg_set_limit(s->p, TALLY_MEMCG_MAX,
						 SCENE_PARENT_MAX), 0))
		return false;
	for (int i = 0; i < SCENE_OTHERS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "o%d", i);
		s->other[i] = util_memcg_group(tally_memcg_root(s->t), name);
		if (!s->other[i])
			return false;
	}
	return true;
}

void scene_fini(struct scene *s)
{
	tally_memcg_put(s->a);
	tally_memcg_put(s->p);
	for (int i = 0; i < SCENE_OTHERS; i++)
		tally_memcg_put(s->other[i]);
	tally_memcg_tree_destroy(s->t);
	tally_domain_destroy(s->domain);
}
