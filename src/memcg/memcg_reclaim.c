// SPDX-License-Identifier: MIT
/*
 * memcg_reclaim.c - protection, reclaim callbacks and high.
 *
 * Reclaim asks the callbacks of a subtree for bytes, unprotected memory
 * first, then memory under low (never under min), with effective
 * protections computed top-down along each group's chain: O(depth x
 * siblings) per group asked.  It runs on a refusal (max), on a max being
 * lowered, and when the caller asks (tally_memcg_reclaim_high()); never
 * inside a charge that merely went above high.
 *
 * The callbacks are called, set and removed by memcg_callback.c, as the
 * kill callbacks are.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "runtime/inject.h"
#include "memcg_internal.h"

/* ---- protection and reclaim ------------------------------------------ */

static long mul_div(long a, long b, long c)
{
	return (long)((__int128)a * b / c);
}

/* The kernel's effective_protection(), without recursive protection. */
static long effective_protection(long usage, long setting,
				 long parent_effective, long siblings)
{
	long protected = usage < setting ? usage : setting;

	if (siblings > parent_effective)
		return mul_div(protected, parent_effective, siblings);
	return protected;
}

/* What @parent's children protect together: kept up to date, O(1). */
static long siblings_protected(const struct tally_memcg *parent, int low)
{
	return LOAD(low ? &parent->children_low_usage :
			  &parent->children_min_usage);
}

/*
 * Effective min and low of @g for reclaim from @root, computed top-down
 * along the chain: O(depth).
 */
void memcg_protection(struct tally_memcg *root, struct tally_memcg *g,
		      long *emin, long *elow)
{
	struct tally_memcg *chain[TALLY_MEMCG_MAX_DEPTH + 1];
	unsigned int n = 0;
	long pmin = 0, plow = 0;

	for (struct tally_memcg *l = g; l != root; l = l->parent)
		chain[n++] = l;
	*emin = *elow = 0;
	while (n--) {
		struct tally_memcg *l = chain[n];
		long usage = LOAD(&l->usage);

		if (!usage) {
			pmin = plow = 0;
		} else if (l->parent == root) {
			pmin = LOAD(&l->min);
			plow = LOAD(&l->low);
		} else {
			pmin = effective_protection(usage, LOAD(&l->min), pmin,
					siblings_protected(l->parent, 0));
			plow = effective_protection(usage, LOAD(&l->low), plow,
					siblings_protected(l->parent, 1));
		}
	}
	*emin = pmin;
	*elow = plow;
}

struct reclaim_pass {
	struct tally_memcg *root;
	long want;		/* bytes still wanted */
	long ask;		/* of the group about to be called */
	int below_low;		/* second pass: dip under low, not min */
};

static long call_reclaim(struct tally_memcg *g, long ask)
{
	struct memcg_cb_call call;
	long freed;

	if (!memcg_callback_enter(g, MEMCG_CB_RECLAIM, &call))
		return 0;
	(void)tally_inject(TALLY_INJECT_MEMCG_BEFORE_CALLBACK);
	freed = ((tally_memcg_reclaim_fn)call.fn)(g, ask, call.arg);
	memcg_callback_leave(&call);
	return freed;
}

static long local_usage(struct tally_memcg *g)
{
	long usage = LOAD(&g->usage);

	for (struct tally_memcg *c = ACQUIRE(&g->first_child); c;
	     c = ACQUIRE(&c->next_sibling))
		if (!LOAD(&c->dead))
			usage -= LOAD(&c->usage);
	return usage > 0 ? usage : 0;
}

/*
 * Inside the walk's section: how much to ask @g for (p->ask), if
 * anything.  Its siblings and ancestors are read here, not in the call.
 */
static bool reclaim_wants(struct tally_memcg *g, void *arg)
{
	struct reclaim_pass *p = arg;
	long emin, elow, usage, floor, ask;

	if (p->want <= 0 || !memcg_callback_present(g, MEMCG_CB_RECLAIM) ||
	    LOAD(&g->dead))
		return false;
	usage = LOAD(&g->usage);
	memcg_protection(p->root, g, &emin, &elow);
	floor = p->below_low ? emin : (elow > emin ? elow : emin);
	if (usage <= floor)
		return false;
	ask = usage - floor;
	if (ask > local_usage(g))
		ask = local_usage(g);
	if (ask > p->want)
		ask = p->want;
	if (ask <= 0)
		return false;
	if (p->below_low && usage <= elow)
		memcg_event(g, TALLY_MEMCG_EVENT_LOW);
	p->ask = ask;
	return true;
}

/* Outside any section, with a reference on @g: the user's callback. */
static void reclaim_call(struct tally_memcg *g, void *arg)
{
	struct reclaim_pass *p = arg;
	long freed = call_reclaim(g, p->ask);

	/* What it says it freed: its uncharges may sit in stocks yet. */
	p->want -= freed < 0 ? 0 : freed > p->ask ? p->ask : freed;
}

/*
 * Ask the callbacks of @h's subtree for @want bytes: unprotected memory
 * first, then memory under low (never under min).  A thread that is
 * already reclaiming does not reclaim again from its callbacks' charges.
 */
static __thread int in_reclaim;

long memcg_reclaim(struct tally_memcg *h, long want)
{
	struct reclaim_pass p = { h, want, 0, 0 };

	if (in_reclaim || want <= 0)
		return 0;
	in_reclaim = 1;
	memcg_walk_calling(h, reclaim_wants, reclaim_call, &p);
	if (p.want > 0) {
		p.below_low = 1;
		memcg_walk_calling(h, reclaim_wants, reclaim_call, &p);
	}
	in_reclaim = 0;
	return want - p.want;
}

/*
 * After a charge reached the counters: a high event for every level above
 * its high, and %TALLY_MEMCG_OVER_HIGH.  O(depth); no reclaim here.
 */
int memcg_note_high(struct tally_memcg *g)
{
	int over = 0;

	for (struct tally_memcg *l = g; l; l = l->parent) {
		if (LOAD(&l->usage) <= LOAD(&l->high))
			continue;
		memcg_event(l, TALLY_MEMCG_EVENT_HIGH);
		over = TALLY_MEMCG_OVER_HIGH;
	}
	return over;
}

long tally_memcg_reclaim_high(struct tally_memcg *g)
{
	long total = 0;

	if (!g)
		return -EINVAL;
	memcg_check_handle(g);
	for (struct tally_memcg *l = memcg_resolve(g); l; l = l->parent) {
		long usage = LOAD(&l->usage), high = LOAD(&l->high);

		if (usage > high)
			total += memcg_reclaim(l, usage - high);
	}
	return total;
}

int tally_memcg_high_delay(struct tally_memcg *g, long bytes,
			   struct tally_memcg_throttle *out)
{
	/* The kernel's fixed point: overage in 1/2^20, delay scaling 2^14. */
	const int precision = 20, scaling = 14;
	const long max_delay_ns = 2000000000l, min_delay_ns = 10000000l;
	/*
	 * Overages at or above 2^40 (2^20 times high) give the 2 s maximum
	 * for any charge size and batch; saturating there keeps every
	 * product below in 128 bits.
	 */
	const long max_overage = 1l << 40;
	long worst = 0;
	__int128 delay;

	if (!g || !out || bytes < 1)
		return -EINVAL;
	*out = (struct tally_memcg_throttle){ 0, NULL, 0 };
	for (struct tally_memcg *l = memcg_resolve(g); l; l = l->parent) {
		long usage = LOAD(&l->usage), high = LOAD(&l->high);
		__int128 wide;
		long overage;

		if (usage <= high)
			continue;
		if (usage - high > out->over)
			out->over = usage - high;
		wide = ((__int128)(usage - high) << precision) /
		       (high > 0 ? high : 1);
		overage = wide > max_overage ? max_overage : (long)wide;
		if (overage > worst) {
			worst = overage;
			out->group = l;
		}
	}
	if (!worst)
		return 0;
	/* overage^2 seconds, scaled down; proportional to the charge. */
	delay = (__int128)worst * worst * 1000000000l;
	delay >>= precision + scaling;
	if (delay > (__int128)max_delay_ns * g->tree->batch)
		delay = (__int128)max_delay_ns * g->tree->batch;
	delay = delay * bytes / g->tree->batch;
	if (delay > max_delay_ns)
		delay = max_delay_ns;
	out->delay_ns = delay < min_delay_ns ? 0 : (long)delay;
	return 0;
}


int tally_memcg_set_reclaim(struct tally_memcg *g, tally_memcg_reclaim_fn fn,
			    void *arg)
{
	struct memcg_cb_wait w;
	int err;

	if (!g)
		return -EINVAL;
	memcg_check_handle(g);
	err = memcg_callback_publish(g, MEMCG_CB_RECLAIM, (void (*)(void))fn,
				     arg, &w);
	if (!err)
		memcg_callback_wait(&w);
	return err;
}

int tally_memcg_protection(struct tally_memcg *g, long *emin, long *elow)
{
	struct grace_section sec;
	long m, l;

	if (!g)
		return -EINVAL;
	g = memcg_resolve(g);
	grace_enter(&g->tree->grace, &sec); /* siblings may be freed meanwhile */
	memcg_protection(g->tree->root, g, &m, &l);
	grace_leave(&sec);
	if (emin)
		*emin = m;
	if (elow)
		*elow = l;
	return 0;
}

