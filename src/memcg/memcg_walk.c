// SPDX-License-Identifier: MIT
/*
 * memcg_walk.c - walking a subtree of memory groups without a lock.
 *
 * A walk runs inside a section of the tree's grace domain: a group it
 * stands on may be destroyed and put meanwhile, but it is not freed, nor
 * is any group its links lead to, before the section ends.  Children are
 * linked at the head of their parent's list, each with a release store
 * once complete, and unlinked in place: a walk standing on a group just
 * unlinked still follows its next_sibling to the rest of the list.
 *
 * A walk that calls user code (reclaim callbacks) must not stay in the
 * section meanwhile: the call may be long, and every grace period of the
 * tree would wait for it.  memcg_walk_calling() takes a reference on the
 * group it calls, leaves the section, calls, enters again and goes on
 * from that group.  The group may have been destroyed during the call:
 * then its links are its last ones, and the groups they lead to stay
 * allocated because an unlinked group holds a reference on the sibling
 * that followed it (memcg_group.c, unlink_child()), dropped when it is
 * freed.  Since children are only ever added at the head, the siblings
 * that followed a group when it was unlinked are, with those unlinked
 * since, all that follow it now: the walk visits every group that was
 * linked throughout, once.
 *
 * Costs: O(groups of the subtree); memcg_walk_calling() adds a reference
 * and two section round trips per call.
 */
#include <tally/memcg.h>

#include "memcg_internal.h"

/* The group after @g in @h's subtree, in pre-order; NULL at the end. */
static struct tally_memcg *next_in_subtree(struct tally_memcg *g,
					   struct tally_memcg *h)
{
	struct tally_memcg *next = ACQUIRE(&g->first_child);

	if (next)
		return next;
	while (g != h && !(next = ACQUIRE(&g->next_sibling)))
		g = g->parent;
	return g == h ? NULL : next;
}

/*
 * Visit @h's subtree in pre-order without a lock, summing what @fn
 * returns.  @fn runs inside the section: it must not call user code nor
 * wait.
 */
long memcg_walk(struct tally_memcg *h,
		long (*fn)(struct tally_memcg *g, void *arg), void *arg)
{
	struct grace_section s;
	long acc = 0;

	grace_enter(&h->tree->grace, &s);
	for (struct tally_memcg *g = h; g; g = next_in_subtree(g, h))
		acc += fn(g, arg);
	grace_leave(&s);
	return acc;
}

/* A reference on @g unless its last one is gone (it is being freed). */
static bool get_unless_released(struct tally_memcg *g)
{
	long refs = __atomic_load_n(&g->refs, __ATOMIC_RELAXED);

	do {
		if (!refs)
			return false;
	} while (!__atomic_compare_exchange_n(&g->refs, &refs, refs + 1, true,
					      __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

/*
 * Call @call(g, @arg) for each group g of @h's subtree, in pre-order,
 * for which @wants(g, @arg) (run inside the section) says so; @call runs
 * outside any section and any lock, with a reference on g.  The caller
 * holds a reference on @h.
 */
void memcg_walk_calling(struct tally_memcg *h,
			bool (*wants)(struct tally_memcg *g, void *arg),
			void (*call)(struct tally_memcg *g, void *arg),
			void *arg)
{
	struct grace_domain *d = &h->tree->grace;
	struct tally_memcg *held = NULL;
	struct grace_section s;

	grace_enter(d, &s);
	for (struct tally_memcg *g = h; g; g = next_in_subtree(g, h)) {
		if (!wants(g, arg) || !get_unless_released(g))
			continue;
		grace_leave(&s);
		if (held)
			memcg_put(held);
		held = g;
		call(g, arg);
		grace_enter(d, &s);
	}
	grace_leave(&s);
	if (held)
		memcg_put(held);
}
