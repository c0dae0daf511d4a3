// SPDX-License-Identifier: MIT
/*
 * stats_flush.c - the flush engine of the statistics tree.
 *
 * Per CPU, updated groups reach a flush in two steps: an update pushes
 * (group, CPU) on the CPU's lock-free list; a flush pops the list into the
 * CPU's updated tree, where a group is linked under its parent:
 *
 *     list: B -> E                 updated tree on CPU c:   root
 *                                                          /    \
 *     (after a pop)                                       A      D
 *                                                         |      |
 *                                                         B      E
 *
 * A flush of G first zeroes the threshold count (over) of every node of
 * G's updated subtree on every CPU before any CPU is folded: an update
 * made on a CPU after that CPU's passes is not folded by this flush, so
 * its count must survive it (zeroing a node as each CPU is passed would
 * wipe the counts of the CPUs passed before, and an if-needed read would
 * then miss more than its bound).  Counts added after the zeroing by
 * updates the flush does fold only make a later read flush early.  Then
 * it runs two passes on each CPU in turn:
 *
 *   1. pop the CPU's list (adopting the claims whose push is still in
 *      progress, see below), make the linked nodes of G's updated
 *      subtree idle (each node notes the
 *      barrier ticket it was made idle at);
 *   2. fold G's updated subtree children first: delta = stat -
 *      prev; local += delta; hier += delta + pending; the parent's pending
 *      += the same; unlink the nodes still idle that keep no child and
 *      that a barrier started after their idle mark has settled.
 *
 * A flush of at most STATS_CPUS_PER_HOLD CPUs does all of it under one
 * hold of flush_lock; a larger one holds it for that many CPUs at a time
 * (the zeroing, then the passes), so that flushes of other subtrees
 * interleave with a long one.  One hold per flush because, with more
 * threads than CPUs, every hand-over of the lock to a flush asleep on it
 * costs a wait for the scheduler: flushes that took the lock once per CPU
 * and per step, interleaved with each other, waited in its line several
 * times each.
 *
 * Barriers.  An update stores its stat, then loads queued with no fence;
 * pass 1 stores idle, pass 2 loads the stat.  Without a barrier both loads
 * may miss the other's store: the update does not queue again and the
 * fold misses its stat.  The node must then stay linked, so that a later
 * fold reads the stat, until a barrier (membarrier(PRIVATE_EXPEDITED))
 * that started after the idle mark has made every such store visible.
 * Barriers are process-wide: a ticket counter and the highest ticket done
 * tell which marks one settled.  A flush needs no barrier of its own: a
 * read that happens after an update (same thread, or synchronised with
 * it) has the update's stat store visible before its flush starts (x86's
 * stores become visible in order), and the node is still listed or
 * linked, so the flush folds it (hence no barrier between the passes
 * either: a node an update raced with stays linked, unsettled, and a later
 * fold reads its stat).  stats_flush_settle() issues a barrier,
 * at most once per SETTLE_NS in the process, after a flush that left
 * nodes waiting for one: such a node stays on the flush path (visited by
 * flushes of its ancestors) for at most that long plus a flush.  A
 * settled flush (destroy) runs pass 1 on every CPU, a barrier, then pass 2
 * on every CPU, so that every node it marked or found marked can be
 * unlinked.
 *
 * The children-first order is a walk over the updated tree's own links
 * (leftmost leaf, next sibling's leftmost leaf, parent) that needs no
 * stack and no list: a flush never allocates and cannot fail.
 *
 * Invariant: a (group, CPU) with a stat not yet in prev is listed or
 * linked (with its ancestors); a group with a non-zero pending is linked on
 * some CPU.  Only a pop ends listed and only pass 2 ends linked, after a
 * barrier settled the idle mark: a node is never pushed twice.  Hence a
 * flush that starts after an update happened before reads it (freshness).
 *
 * Claims not pushed yet.  An update claims (group, CPU) (idle -> listed),
 * then pushes it; another update of the group on that CPU that sees it
 * listed relies on that push and returns at once.  A flush must fold such
 * a claim even when its updater was preempted or stopped between claim
 * and push, without waiting for that thread to run again: before its pop
 * on a CPU whose pushing count is not zero, it links every node of G's
 * subtree on that CPU that is listed and not linked (adopt_claimed()).
 * The count is loaded before the pop: 0 means every claim counted before
 * it was pushed before, so the pop finds it.  An adopted node is listed
 * and linked, a state a node also reaches when an update claims it while
 * it waits for a barrier: pass 1 leaves it as it is, so it stays linked
 * until the late push is popped and a later flush makes it idle.  The
 * walk over G's subtree follows links (walk_first, walk_next) that keep
 * every group until it is finished, detached ones included (a destroyed
 * memory group's stats still take updates until its grace period ends):
 * create and finish change them with atomic stores, and a group it
 * reaches is not freed while the flush holds flush_lock (finish leaves
 * the links, then quiesces).  Before it takes flush_lock, a flush spins
 * briefly for the pushes in progress on its CPUs, so that the walk is
 * mostly for a pusher that does not run; one that runs but pushes when
 * the pass loads the count (of any group on that CPU) costs a walk too.
 *
 * Barriers, their modes and tickets: stats_barrier.c.
 *
 * Cost of a flush: O(nr_cpus) pops, one lock round trip (two per
 * STATS_CPUS_PER_HOLD CPUs for a flush of more) plus O(updated groups x
 * nr_stats), where the updated groups include those updated within the
 * last SETTLE_NS, plus a walk of G's subtree for each CPU with a push in
 * progress as its pass begins; no system call unless the lock is
 * contended.  A barrier:
 * one membarrier() per SETTLE_NS at most, whatever the flush rate.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/fork.h"
#include "runtime/inject.h"
#include "stats_barrier.h"
#include "stats_internal.h"

/*
 * Spins of a flush on a push in progress before it goes on without it
 * (and of stats_wait_for_pushes() before it sleeps).
 */
#define PUSH_SPINS 256

/* A hold of flush_lock this long had its holder off a CPU (unlock_engine). */
#define LONG_HOLD_NS 200000ull

/* Yields of a flush to a holder of flush_lock it preempted. */
#define HOLDER_YIELDS 4

/* --- waiting for pushes ------------------------------------------------- */

void stats_wait_for_pushes(unsigned int *pushing)
{
	for (unsigned int spins = 0;; spins++) {
		unsigned int v = __atomic_load_n(pushing, __ATOMIC_ACQUIRE);

		if (!(v & ~STATS_PUSH_WAITERS))
			return;
		if (spins < PUSH_SPINS) {
			__builtin_ia32_pause();
			continue;
		}
		if (!(v & STATS_PUSH_WAITERS) &&
		    !__atomic_compare_exchange_n(pushing, &v,
						 v | STATS_PUSH_WAITERS, false,
						 __ATOMIC_SEQ_CST,
						 __ATOMIC_RELAXED))
			continue;
		syscall(SYS_futex, pushing, FUTEX_WAIT_PRIVATE,
			v | STATS_PUSH_WAITERS, NULL, NULL, 0);
	}
}

/*
 * Wake what waits on @pushing once its count fell to 0: flushers, a
 * destroy on a cache's stealing count or a group's running flushes.
 */
void stats_wake_waiters(unsigned int *pushing)
{
	unsigned int waiters = STATS_PUSH_WAITERS;

	/* A later one that got in first wakes them when it is done. */
	if (__atomic_compare_exchange_n(pushing, &waiters, 0, false,
					__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		syscall(SYS_futex, pushing, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
			NULL, 0);
}

/* --- the updated tree --------------------------------------------------- */

/*
 * Link @g and its unlinked ancestors into @cpu's updated tree.  A node
 * comes in settled: no flush made it idle since it was last unlinked, so
 * no update can have missed it (an update that finds it idle pushes it).
 */
static void link_updated(struct tally_stats_group *g, unsigned int cpu)
{
	for (; g; g = g->parent) {
		struct stats_fpcpu *fp = fpcpu_of(g, cpu);
		struct stats_pcpu *pc = pcpu_of(g, cpu);

		if (pc->linked)
			return;
		/* Loaded without the lock by stats_group_clean(). */
		__atomic_store_n(&pc->linked, true, __ATOMIC_RELAXED);
		fp->marked = stats_barrier_mark(true);
		if (g->parent) {
			struct stats_fpcpu *pfp = fpcpu_of(g->parent, cpu);

			fp->sibling = pfp->children;
			pfp->children = g;
		}
	}
}

static void pop_updates(struct tally_stats_tree *t, unsigned int cpu)
{
	struct stats_pcpu **head = tally_percpu_ptr(t->lists, cpu);
	struct stats_pcpu *pc = __atomic_exchange_n(head, NULL,
						    __ATOMIC_ACQUIRE);

	while (pc) {
		struct stats_pcpu *next = pc->next;

		__atomic_store_n(&pc->queued, QUEUE_LINKED, __ATOMIC_SEQ_CST);
		link_updated(__atomic_load_n(&pc->group, __ATOMIC_RELAXED), cpu);
		pc = next;
	}
}

/*
 * Children-first walk of @g's updated subtree on @cpu, with no memory of
 * its own: start at the leftmost leaf; after a group comes the leftmost
 * leaf of its next sibling, or else its parent; @g ends the walk.  A pass
 * takes the next group before working on the current one, which may then
 * unlink its (already visited) children and itself: the sibling and
 * parent links the walk follows stay as they were.
 */
static struct tally_stats_group *leftmost(struct tally_stats_group *g,
					  unsigned int cpu)
{
	struct tally_stats_group *c;

	while ((c = fpcpu_of(g, cpu)->children))
		g = c;
	return g;
}

static struct tally_stats_group *walk_first(struct tally_stats_group *g,
					    unsigned int cpu)
{
	return pcpu_of(g, cpu)->linked ? leftmost(g, cpu) : NULL;
}

static struct tally_stats_group *walk_next(struct tally_stats_group *g,
					   struct tally_stats_group *n,
					   unsigned int cpu)
{
	struct tally_stats_group *sibling;

	if (n == g)
		return NULL;
	sibling = fpcpu_of(n, cpu)->sibling;
	return sibling ? leftmost(sibling, cpu) : n->parent;
}

/* --- the two passes ----------------------------------------------------- */

/* The last holder of flush_lock took it on the CPU we run on. */
static bool holder_preempted_by_us(const struct tally_stats_tree *t)
{
	int cpu = sched_getcpu();

	return cpu >= 0 && cpu == __atomic_load_n(&t->holder_cpu,
						  __ATOMIC_RELAXED);
}

/*
 * Take flush_lock for a pass.  A pass that finds it held is counted with
 * the time it waited (tally_stats_info): under overload, that wait (a
 * holder waiting for a CPU) is what a fresh read's tail is made of.
 */
static void lock_engine(struct tally_stats_tree *t)
{
	uint64_t start;

	if (!pthread_mutex_trylock(&t->flush_lock))
		goto taken;
	start = stats_mono_ns();
	/*
	 * Its holder last ran on our CPU: we took the CPU from it.  Give the
	 * CPU back rather than sleep until it ran and released, a few
	 * times: a holder that does not run (stopped) is then slept on.
	 */
	for (unsigned int y = 0; y < HOLDER_YIELDS && holder_preempted_by_us(t);
	     y++) {
		sched_yield();
		if (!pthread_mutex_trylock(&t->flush_lock))
			goto waited;
	}
	pthread_mutex_lock(&t->flush_lock);
waited:
	stats_count_info(&t->info.flush_lock_waits, 1);
	stats_count_info(&t->info.flush_lock_wait_ns, stats_mono_ns() - start);
taken:
	t->hold_start = stats_mono_ns();
	__atomic_store_n(&t->holder_cpu, sched_getcpu(), __ATOMIC_RELAXED);
	tally_inject(TALLY_INJECT_STATS_ENGINE_HELD);
}

/*
 * Release flush_lock.  A hold longer than LONG_HOLD_NS, many times what
 * the passes of a hold take when its holder runs, is counted with its
 * length: its holder waited for a CPU while every flush waited for it.
 */
static void unlock_engine(struct tally_stats_tree *t)
{
	uint64_t held = stats_mono_ns() - t->hold_start;

	pthread_mutex_unlock(&t->flush_lock);
	if (held > LONG_HOLD_NS) {
		stats_count_info(&t->info.flush_lock_long_holds, 1);
		stats_count_info(&t->info.flush_lock_long_hold_ns, held);
	}
}

/*
 * Pass 1 on one CPU, flush_lock held: G's updated subtree made idle (each
 * node noting its mark).  @quiesced: every update of G itself happened
 * before this flush and none follows, so no update can have missed G's
 * node: it is settled at once, even if an earlier flush made it idle.
 */
static void mark_cpu(struct tally_stats_group *g, unsigned int cpu,
		     bool immediate, bool quiesced)
{
	struct tally_stats_group *n, *next;

	for (n = walk_first(g, cpu); n; n = next) {
		int linked = QUEUE_LINKED;
		bool own_quiesced = quiesced && n == g;

		next = walk_next(g, n, cpu);
		/* Not a listed one: it is (being) pushed again. */
		if (__atomic_compare_exchange_n(&pcpu_of(n, cpu)->queued,
						&linked, QUEUE_IDLE, false,
						__ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED) || own_quiesced)
			fpcpu_of(n, cpu)->marked =
				stats_barrier_mark(immediate || own_quiesced);
	}
}

/* A lock round trip of a flush done: only its flusher writes @progress. */
static void tick(uint64_t *progress)
{
	if (progress)
		__atomic_store_n(progress,
				 __atomic_load_n(progress, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELAXED);
}

/*
 * Before any pass, flush_lock held: zero the over of every node of @g's
 * updated subtree on @cpu, for every CPU (see the top of the file).  A
 * node that is linked nowhere holds no count of an update that this
 * flush folds.
 */
static void zero_cpu(struct tally_stats_tree *t, struct tally_stats_group *g,
		     unsigned int cpu)
{
	pop_updates(t, cpu);
	for (struct tally_stats_group *n = walk_first(g, cpu); n;
	     n = walk_next(g, n, cpu))
		/* Most are 0 already: a load leaves the line shared. */
		if (__atomic_load_n(&n->over, __ATOMIC_RELAXED))
			__atomic_store_n(&n->over, 0, __ATOMIC_RELAXED);
}

/* Wrapping add of a flushed value (readers load it concurrently). */
static void add_long(long *p, long v)
{
	__atomic_store_n(p, (long)((unsigned long)stats_load(p) +
				   (unsigned long)v),
			 __ATOMIC_RELAXED);
}

/* Fold (g, cpu)'s per-CPU delta and pending into g and its parent. */
static bool fold_group(struct tally_stats_group *g, unsigned int cpu)
{
	struct stats_pcpu *pc = pcpu_of(g, cpu);
	struct stats_fpcpu *fp = fpcpu_of(g, cpu);
	struct tally_stats_group *p = g->parent;
	long *pending = stats_pending(g);
	bool moved = false;

	for (unsigned int i = 0; i < g->nr_stats; i++) {
		long v = stats_load(&pc->stat[i]);
		long delta = (long)((unsigned long)v -
				    (unsigned long)fp->prev[i]);
		long total = (long)((unsigned long)delta +
				    (unsigned long)pending[i]);

		fp->prev[i] = v;
		pending[i] = 0;
		if (delta)
			add_long(&stats_local(g)[i], delta);
		if (!total)
			continue;
		add_long(&stats_hier(g)[i], total);
		if (p) {
			long *up = stats_pending(p);

			up[i] = (long)((unsigned long)up[i] +
				       (unsigned long)total);
			moved = true;
		}
	}
	return moved;
}

/* Drop the children of @n that are no longer linked. */
static void prune_children(struct stats_fpcpu *fp, unsigned int cpu)
{
	struct tally_stats_group **link = &fp->children;

	while (*link) {
		struct stats_fpcpu *cfp = fpcpu_of(*link, cpu);

		if (pcpu_of(*link, cpu)->linked) {
			link = &cfp->sibling;
		} else {
			*link = cfp->sibling;
			cfp->sibling = NULL;
		}
	}
}

/*
 * The node leaves the CPU's updated tree: its values are folded, and no
 * update it could have missed is left.  The release orders the fold's
 * stores before the flag a quiet read (stats_group_clean()) loads.
 */
static void unlink_node(struct stats_pcpu *pc)
{
	__atomic_store_n(&pc->linked, false, __ATOMIC_RELEASE);
}

/*
 * Pass 2 on one CPU, flush_lock held: fold G's updated subtree children
 * first, then unlink every group that nobody re-queued since pass 1, whose
 * idle mark a barrier settled and that keeps no linked child.  A re-queued
 * group stays linked: its new update may not be visible yet, so the next
 * flush reads it again; so does an unsettled one (*@unsettled is set).
 * Returns the groups visited.
 */
static uint64_t fold_cpu(struct tally_stats_group *g, unsigned int cpu,
			 bool *unsettled)
{
	struct tally_stats_group *n, *next;
	/* Before the stat loads: the barriers up to done made them visible. */
	unsigned long done = stats_barrier_done();
	bool moved_up = false;
	uint64_t visited = 0;

	for (n = walk_first(g, cpu); n; n = next) {
		struct stats_fpcpu *fp = fpcpu_of(n, cpu);

		next = walk_next(g, n, cpu);
		visited++;
		if (fold_group(n, cpu) && n == g)
			moved_up = true;
		prune_children(fp, cpu);
		if (fp->children ||
		    __atomic_load_n(&pcpu_of(n, cpu)->queued,
				    __ATOMIC_SEQ_CST) != QUEUE_IDLE)
			continue;
		if (stats_mark_settled(done, fp->marked))
			unlink_node(pcpu_of(n, cpu));
		else
			*unsettled = true;
	}
	/* G's parent is not visited: unlink G from it by hand. */
	if (visited && !pcpu_of(g, cpu)->linked && g->parent) {
		struct tally_stats_group **link =
			&fpcpu_of(g->parent, cpu)->children;

		while (*link && *link != g)
			link = &fpcpu_of(*link, cpu)->sibling;
		if (*link)
			*link = fpcpu_of(g, cpu)->sibling;
		fpcpu_of(g, cpu)->sibling = NULL;
	}
	/* The parent's pending must be folded by a later flush: link it. */
	if (moved_up)
		link_updated(g->parent, cpu);
	return visited;
}

static bool pushes_in_progress(struct tally_stats_tree *t, unsigned int cpu)
{
	return __atomic_load_n((unsigned int *)tally_percpu_ptr(t->pushing, cpu),
			       __ATOMIC_SEQ_CST) &
	       ~STATS_PUSH_WAITERS;
}

/*
 * Before flush_lock: give the pushes in progress on @cpu a moment to end,
 * so that adopt_claimed() runs mostly for a pusher that is not running.
 */
static void spin_for_pushes(struct tally_stats_tree *t, unsigned int cpu)
{
	for (unsigned int spins = 0;
	     spins < PUSH_SPINS && pushes_in_progress(t, cpu); spins++)
		__builtin_ia32_pause();
}

/*
 * Link every node of @g's subtree on @cpu that an update claimed and
 * that is not linked: its push may not have happened yet (see "Claims
 * not pushed yet" at the top of the file).
 */
static void adopt_claimed(struct tally_stats_group *g, unsigned int cpu)
{
	for (struct tally_stats_group *n = g; n; n = stats_walk_next(g, n)) {
		struct stats_pcpu *pc = pcpu_of(n, cpu);

		if (__atomic_load_n(&pc->queued, __ATOMIC_ACQUIRE) ==
			    QUEUE_LISTED &&
		    !pc->linked)
			link_updated(n, cpu);
	}
}

/*
 * Pass 1 (@mark), pass 2 (@fold) or both on one CPU, flush_lock held.
 * Both at once need no barrier between them: what an update racing with
 * the mark hides from the fold stays linked, unsettled.
 */
static uint64_t pass_cpu(struct tally_stats_tree *t,
			 struct tally_stats_group *g, unsigned int cpu,
			 bool mark, bool fold, bool immediate, bool quiesced)
{
	bool unsettled = false, unpushed = pushes_in_progress(t, cpu);
	uint64_t visited = 0;

	pop_updates(t, cpu);
	if (unpushed) {
		adopt_claimed(g, cpu);
		stats_count_info(&t->info.adoptions, 1);
	}
	if (mark)
		mark_cpu(g, cpu, immediate, quiesced);
	if (mark && fold && immediate)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (fold)
		visited = fold_cpu(g, cpu, &unsettled);
	if (unsettled && !__atomic_load_n(&t->unsettled, __ATOMIC_RELAXED))
		__atomic_store_n(&t->unsettled, true, __ATOMIC_RELAXED);
	return visited;
}

/* What a flush leaves behind (stats_internal.h). */
enum flush_mode { FLUSH_PLAIN, FLUSH_SETTLED, FLUSH_QUIESCED };

static void flush_subtree(struct tally_stats_tree *t,
			  struct tally_stats_group *g, enum flush_mode mode,
			  uint64_t *progress)
{
	unsigned int nr = t->domain->nr_cpus;
	/* The clock only for a root flush: ratelimited reads look at it. */
	uint64_t start = g->parent ? 0 : stats_now(t), visited = 0;
	/* Updates fence or are seq_cst atomics: a fence settles the marks. */
	bool immediate = t->simulated || stats_barriers_fenced();

	/* A settled flush marks every CPU, then a barrier, then folds. */
	bool split = mode == FLUSH_SETTLED && !immediate;
	/* The CPUs of one hold of flush_lock: every CPU, in one, if few. */
	unsigned int per = split ? 1 : t->cpus_per_hold;
	bool one_hold = nr <= per;

	__atomic_store_n(&g->over, 0, __ATOMIC_RELAXED);
	if (one_hold)
		for (unsigned int cpu = 0; cpu < nr; cpu++)
			spin_for_pushes(t, cpu);
	for (unsigned int cpu = 0; cpu < nr; cpu++) {
		if (cpu % per == 0)
			lock_engine(t);
		zero_cpu(t, g, cpu);
		if (!one_hold && (cpu % per == per - 1 || cpu == nr - 1))
			unlock_engine(t);
		tick(progress);
	}
	for (unsigned int first = 0; first < nr; first += per) {
		unsigned int end = first + per < nr ? first + per : nr;

		if (!one_hold) {
			for (unsigned int cpu = first; cpu < end; cpu++)
				spin_for_pushes(t, cpu);
			lock_engine(t);
		}
		for (unsigned int cpu = first; cpu < end; cpu++)
			visited += pass_cpu(t, g, cpu, true, !split, immediate,
					    mode == FLUSH_QUIESCED);
		unlock_engine(t);
		tick(progress);
		if (first == 0 && !split)
			tally_inject(TALLY_INJECT_FLUSH_BETWEEN_PASSES);
	}
	if (split) {
		tally_inject(TALLY_INJECT_FLUSH_BETWEEN_PASSES);
		stats_barrier_ticketed(t);
		for (unsigned int cpu = 0; cpu < nr; cpu++) {
			lock_engine(t);
			visited += pass_cpu(t, g, cpu, false, true, false,
					    false);
			unlock_engine(t);
		}
	}
	stats_count_info(&t->info.groups_flushed, visited);
	stats_count_info(&t->info.flushes, 1);
	if (!g->parent) {
		stats_count_info(&t->info.root_flushes, 1);
		__atomic_store_n(&t->last_root_flush, start, __ATOMIC_RELAXED);
	}
}

void stats_flush_subtree(struct tally_stats_tree *t,
			 struct tally_stats_group *g, bool settle)
{
	flush_subtree(t, g, settle ? FLUSH_SETTLED : FLUSH_PLAIN, NULL);
}

void stats_flush_quiesced(struct tally_stats_tree *t,
			  struct tally_stats_group *g)
{
	flush_subtree(t, g, FLUSH_QUIESCED, NULL);
}

void stats_flush_counted(struct tally_stats_tree *t,
			 struct tally_stats_group *g, uint64_t *progress)
{
	flush_subtree(t, g, FLUSH_PLAIN, progress);
}

/*
 * Whether a flush of @g would fold nothing: @g has no child, not even a
 * detached one not finished yet (a destroyed memory group's stats take
 * updates until its grace period ends, and they reach @g only when a
 * flush of @g folds them), and on every CPU it is idle and out of the
 * updated tree.  Then every update of @g
 * that happens before the call was folded, and the fold's stores are
 * visible: an update claims (g, cpu) after its stat store, a pop links it
 * before pass 1 makes it idle again, and only pass 2 unlinks it, after
 * folding every update that did not claim it (the release in
 * unlink_node()).  Each load here is an acquire, queued before linked:
 * a queued seen idle from pass 1 makes the link before it visible.  Only
 * one line of @g's per CPU is read; flushes write nothing of the group's
 * for it.
 */
bool stats_group_clean(const struct tally_stats_group *g)
{
	const struct tally_stats_tree *t = g->tree;

	if (__atomic_load_n(&g->walk_first, __ATOMIC_ACQUIRE))
		return false;
	for (unsigned int cpu = 0; cpu < t->nr_cpus; cpu++)
		if (__atomic_load_n(&pcpu_of(g, cpu)->queued,
				    __ATOMIC_ACQUIRE) != QUEUE_IDLE ||
		    __atomic_load_n(&pcpu_of(g, cpu)->linked,
				    __ATOMIC_ACQUIRE))
			return false;
	return true;
}

void stats_flush_init(struct tally_stats_tree *t)
{
	pthread_mutex_init(&t->flush_lock, NULL);
	t->cpus_per_hold = STATS_CPUS_PER_HOLD;
}

void stats_flush_fini(struct tally_stats_tree *t)
{
	pthread_mutex_destroy(&t->flush_lock);
}

/* Each pass keeps group pointers only while it holds flush_lock. */
void stats_flush_quiesce(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&t->flush_lock);
	pthread_mutex_unlock(&t->flush_lock);
}

/* --- fork --------------------------------------------------------------- */

void stats_flush_fork_prepare(struct tally_stats_tree *t)
{
	pthread_mutex_lock(&t->flush_lock);
}

void stats_flush_fork_parent(struct tally_stats_tree *t)
{
	pthread_mutex_unlock(&t->flush_lock);
}

/* Push (g, cpu) back on the child's list if a parent thread claimed it. */
void stats_flush_fork_relist(struct tally_stats_group *g, unsigned int cpu)
{
	struct stats_pcpu **head = tally_percpu_ptr(g->tree->lists, cpu);
	struct stats_pcpu *pc = pcpu_of(g, cpu);

	if (pc->queued == QUEUE_LISTED) {
		pc->group = g;
		pc->next = *head;
		*head = pc;
	}
}

/*
 * Flushes the parent's threads were running left groups linked, which the
 * next flush visits: nothing to undo.
 */
void stats_flush_fork_child(struct tally_stats_tree *t)
{
	tally_mutex_reset(&t->flush_lock);
}

/*
 * The child has only the forking thread.  A thread caught between
 * claiming a group and pushing it never pushes it here, and the CPU's
 * pushing count would never drop: such a CPU's list is emptied, to be
 * rebuilt from the groups marked listed.  A thread caught taking a CPU's
 * hint cache (in the cache's stealing count) never moves the count it
 * took over.
 */
unsigned int stats_flush_fork_forget_cpu(struct tally_stats_tree *t,
					 unsigned int cpu)
{
	unsigned int *pushing = tally_percpu_ptr(t->pushing, cpu);
	struct stats_hcache *hc = tally_percpu_ptr(t->hcache, cpu);
	unsigned int repair = 0;

	if (hc->stealing) {
		repair |= STATS_FORK_CACHES;
		hc->stealing = 0;
	}
	if (*pushing) {
		repair |= STATS_FORK_RELIST;
		*pushing = 0;
		*(struct stats_pcpu **)tally_percpu_ptr(t->lists, cpu) = NULL;
	}
	return repair;
}
