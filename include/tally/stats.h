/* SPDX-License-Identifier: MIT */
#ifndef TALLY_STATS_H
#define TALLY_STATS_H

/*
 * tally/stats.h - a tree of groups with per-CPU statistics, flushed lazily.
 *
 * The kernel's rstat with the memory-cgroup flushing rules, for programs
 * that keep statistics per tenant, service or connection and read them
 * while many threads update them.
 *
 *   - Every group of a tree has the same schema: nr_stats named stats,
 *     each a state (goes up and down) or an event (only counts up).
 *   - tally_stats_mod() adds to the group's per-CPU value (rseq, no
 *     atomic, no lock, never waits) and queues the group on the CPU's
 *     lock-free list of updated groups, once until the next flush.  A run
 *     of updates of one group on a CPU costs the same at any depth.
 *   - A flush of group G moves, for every CPU, the per-CPU deltas of G's
 *     updated descendants into their local and hierarchical values,
 *     children before parents.  Its cost follows the updates, not the tree.
 *   - Reads take a flush mode.  Per-group thresholds (kernel 6.8) decide
 *     whether an if-needed read flushes; forced reads are fresh: they
 *     reflect every update that happens before the read begins (the
 *     reading thread's own, and those of threads it synchronised with
 *     since: a lock, a join, an acquire load of what the updater stored
 *     after updating).  A read of a leaf that no update reached since it
 *     was last flushed needs no flush and takes no lock, however busy the
 *     tree around it.  Concurrent readers of a group share its flushes
 *     instead of repeating them; a reader whose shared flush makes no
 *     progress during a 200 us nap (its flusher preempted or stopped)
 *     flushes the group itself.
 *   - Flushes and structure changes take locks (per tree: one for the
 *     structure, and the flush engine's, held once per flush of up to 64
 *     CPUs, once per CPU and pass by destroy's flush).  A flush that finds the engine's lock held by a thread that
 *     last ran on its own CPU (which it preempted) gives the CPU back a
 *     few times (sched_yield()) before it sleeps on the lock.  A flush
 *     never waits for an updater: an update caught between queueing a
 *     group and pushing it (preempted, stopped or traced there) has the
 *     groups it may have queued found by the flush itself, among those of
 *     the flushed subtree.  Destroy may wait for an update caught taking
 *     a CPU's hint cache (a few instructions).  Updates never wait for
 *     anything.
 *
 * Memory barriers: updates need no fence, and flushes issue no barrier
 * of their own (their only system calls are a contended lock's futex
 * calls and the yields above).  A group a flush found updated
 * stays on the flush path (visited by the flushes of its ancestors) until
 * a membarrier(PRIVATE_EXPEDITED) issued after that flush has made every
 * racing update visible; reads that flush issue one at most every 10 ms
 * in the process, and tally_stats_group_destroy() one per group (a memory
 * group's destroy none).  If membarrier() is
 * unavailable, or the environment variable TALLY_MEMBARRIER=off is set
 * when the first tree is created, updates issue a full fence instead (a
 * few ns more).  If it
 * fails later, the process switches to fences safely (a one-time
 * membarrier(GLOBAL), or a TLB shootdown of a page it unmaps when that fails
 * too); tally_stats_tree_info() reports the mode.
 *
 * fork(): every tree lock is taken around fork() and re-initialised in the
 * child, which may use every inherited tree (groups and values as at the
 * fork; a flush that another thread was running is redone by the next
 * one).  An update that another thread was in the middle of may or may
 * not appear in the child, possibly only once the child updates the same
 * group.  The periodic flusher does not run in the child: start it again
 * if needed.  Do not fork from a tally_stats_group_for_each_child()
 * callback (the walk holds the structure lock that fork takes).
 *
 * Error codes: every function that can fail returns 0 or a negative errno
 * value: -EINVAL for NULL pointers, unknown stats, bad names or options;
 * -EEXIST for a duplicate name; -ENOENT for a path that names no group;
 * -EBUSY to destroy a group with children; -ENOSPC for a short buffer;
 * -ENOMEM.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <tally/domain.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_stats_tree;
struct tally_stats_group;

/** Largest number of stats in a schema. */
#define TALLY_STATS_MAX 256u
/** Longest group name, without the terminating NUL. */
#define TALLY_STATS_NAME_MAX 255u

/**
 * enum tally_stat_kind - what a stat counts.
 * @TALLY_STAT_STATE: a level that goes up and down (bytes in use).
 * @TALLY_STAT_EVENT: a count of events: tally_stats_mod() refuses a
 *	negative delta.
 */
enum tally_stat_kind {
	TALLY_STAT_STATE = 0,
	TALLY_STAT_EVENT = 1,
};

/** struct tally_stat_desc - one stat of a schema. */
struct tally_stat_desc {
	const char *name;		/* non-empty, no white space */
	enum tally_stat_kind kind;
};

/**
 * enum tally_flush_mode - what a read does before reading.
 * @TALLY_FLUSH_IF_NEEDED: flush when the group is over its threshold (a
 *	covering flush already running counts); the value is then within
 *	tally_stats_read_bound() of the truth, up to the updates made
 *	during that flush.
 * @TALLY_FLUSH_FORCE: flush: the value reflects every update that
 *	happens before the read begins.
 * @TALLY_FLUSH_RATELIMITED: flush only when the periodic flusher is a full
 *	period late (no root flush for 2 periods).
 * @TALLY_FLUSH_NONE: read what was last flushed.
 */
enum tally_flush_mode {
	TALLY_FLUSH_IF_NEEDED = 0,
	TALLY_FLUSH_FORCE = 1,
	TALLY_FLUSH_RATELIMITED = 2,
	TALLY_FLUSH_NONE = 3,
};

/**
 * struct tally_stats_options - tree options; zero means the default.
 * @domain: CPUs of the per-CPU data (NULL: the system domain).  On a
 *	simulated domain updates use tally_stats_mod_cpu().
 * @batch: per-CPU update volume that moves to a group's threshold counter
 *	(power of two, default 64, as the kernel's MEMCG_CHARGE_BATCH); a
 *	group needs flushing past batch x nr_cpus (less what the CPUs' hint
 *	caches may hold, see tally_stats_mod()), which must not exceed
 *	LONG_MAX / 8 (-EINVAL otherwise).
 * @period_ns: periodic flusher period (default 2 s).
 * @clock: the time in nanoseconds (default CLOCK_MONOTONIC); tests inject
 *	a fake clock here.
 * @clock_arg: argument of @clock.
 */
struct tally_stats_options {
	struct tally_domain *domain;
	unsigned long batch;
	uint64_t period_ns;
	uint64_t (*clock)(void *arg);
	void *clock_arg;
};

/**
 * tally_stats_tree_create() - a tree with a root group named "".
 * @out: where the tree is stored.
 * @schema: @nr_stats stat descriptions (copied).
 * @nr_stats: 1 to %TALLY_STATS_MAX.
 * @opts: options, or NULL for the defaults.
 *
 * Context: MT-safe; not async-signal-safe: allocates, takes the tree registry's
 * mutex and the per-CPU pool's; the first tree on the system domain sets the
 * membarrier() mode up under pthread_once().
 *
 * Return: 0, -EINVAL (NULL, bad schema: empty or duplicate names, unknown
 * kind; bad options), -ENOMEM, -ENODEV (no system domain).  On failure
 * *@out is left untouched and nothing needs to be destroyed.
 */
int tally_stats_tree_create(struct tally_stats_tree **out,
			    const struct tally_stat_desc *schema,
			    unsigned int nr_stats,
			    const struct tally_stats_options *opts);

/**
 * tally_stats_tree_destroy() - stop the periodic flusher and free the tree
 *	and all its groups.
 * @t: the tree, or NULL.  No other call on @t may run or follow.
 *
 * Context: MT-safe against calls on other trees only (none on @t may run); not
 * async-signal-safe: joins the periodic flusher, takes the tree registry's
 * mutex, frees memory.
 */
void tally_stats_tree_destroy(struct tally_stats_tree *t);

/**
 * tally_stats_root() - the root group of @t.
 *
 * Context: MT-safe, async-signal-safe: one load.
 */
struct tally_stats_group *tally_stats_root(struct tally_stats_tree *t);

/**
 * tally_stats_nr_stats() - the schema size of @t.
 *
 * Context: MT-safe, async-signal-safe: one load.
 */
unsigned int tally_stats_nr_stats(const struct tally_stats_tree *t);

/**
 * tally_stats_stat_index() - the index of a stat by name.
 * @t: the tree.
 * @name: the stat's name.
 *
 * Context: MT-safe, async-signal-safe: compares the schema's names, no lock, no
 * allocation.
 *
 * Return: the index, or -EINVAL for NULL, -ENOENT for an unknown name.
 */
int tally_stats_stat_index(const struct tally_stats_tree *t, const char *name);

/**
 * tally_stats_group_create() - create a child group.
 * @parent: the parent group.
 * @name: 1 to %TALLY_STATS_NAME_MAX bytes, without '/'.
 * @out: where the group is stored (may be NULL).
 *
 * Safe while other threads update, read, create and destroy other groups.
 * Creation writes no CPU's per-CPU copy: a group costs memory on a CPU
 * only once that CPU updates it.  Finding a name among the siblings costs
 * O(1) on average: flat trees of many groups build in linear time.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's structure lock (a
 * rwlock) for writing, allocates (malloc(), the per-CPU pool's mutex).
 *
 * Return: 0, -EINVAL (NULL, bad name, parent being destroyed), -EEXIST,
 * -ENOMEM.
 */
int tally_stats_group_create(struct tally_stats_group *parent,
			     const char *name,
			     struct tally_stats_group **out);

/**
 * tally_stats_group_destroy() - remove a group without losing its stats.
 * @g: a group without children, not the root.
 *
 * The group's unflushed per-CPU deltas are flushed into its ancestors
 * first: their hierarchical values are the same before and after.  The
 * caller must stop updating and reading @g before; updating it after this
 * returned is a misuse that debug builds (TALLY_DEBUG) detect and abort on.
 * Once it returned 0, @g is freed: any later call with it, a second
 * destroy included, is a misuse (debug builds return -EINVAL for a second
 * destroy; release builds may crash).
 *
 * Context: MT-safe against calls on other groups; not async-signal-safe: takes
 * the structure lock for writing, flushes @g (the flush engine's lock),
 * waits for updates caught taking a CPU's hint cache (a futex sleep),
 * issues membarrier(), waits for the readers sharing a flush of @g, frees
 * memory.
 *
 * Return: 0, -EINVAL (NULL or the root), -EBUSY (it has children).
 */
int tally_stats_group_destroy(struct tally_stats_group *g);

/**
 * tally_stats_group_find() - look a group up by path.
 * @t: the tree.
 * @path: names separated by '/', from the root ("a/b/c"); "" is the root.
 * @out: where the group is stored.
 *
 * Context: MT-safe; not async-signal-safe: takes the structure lock for reading
 * (and waits for a writer).
 *
 * Return: 0, -EINVAL (NULL, empty path component), -ENOENT.
 */
int tally_stats_group_find(struct tally_stats_tree *t, const char *path,
			   struct tally_stats_group **out);

/**
 * tally_stats_group_for_each_child() - visit the children of a group.
 * @g: the group.
 * @fn: called with each child and its name; a non-zero return stops the
 *	walk and is returned.  It must not create, destroy or find groups,
 *	nor fork(): the walk holds the tree's structure lock for reading,
 *	and a waiting writer (create, destroy, fork) goes first.
 * @arg: passed to @fn.
 *
 * Context: MT-safe; not async-signal-safe: holds the structure lock for reading
 * during the walk (and waits for a writer).
 *
 * Return: 0, @fn's non-zero value, or -EINVAL for NULL.
 */
int tally_stats_group_for_each_child(struct tally_stats_group *g,
				     int (*fn)(struct tally_stats_group *child,
					       const char *name, void *arg),
				     void *arg);

/**
 * tally_stats_group_name() - the group's name ("" for the root).
 *
 * Context: MT-safe, async-signal-safe: one load (@g must not be destroyed
 * meanwhile).
 */
const char *tally_stats_group_name(const struct tally_stats_group *g);

/**
 * tally_stats_group_parent() - the parent group, NULL for the root.
 *
 * Context: MT-safe, async-signal-safe: one load (@g must not be destroyed
 * meanwhile).
 */
struct tally_stats_group *
tally_stats_group_parent(const struct tally_stats_group *g);

/**
 * tally_stats_group_path() - the group's path from the root.
 * @g: the group.
 * @buf: output buffer.
 * @len: its size.
 *
 * Context: MT-safe, async-signal-safe: walks the ancestors (which cannot be
 * destroyed while @g lives), no lock, no allocation.
 *
 * Return: the path length, -EINVAL (NULL @g, or NULL @buf with a non-zero
 * @len), or -ENOSPC when @buf is too small (always when @len is 0).
 */
int tally_stats_group_path(const struct tally_stats_group *g, char *buf,
			   size_t len);

/**
 * tally_stats_mod() - add @delta to stat @stat of @g on the current CPU.
 * @g: the group (of a tree on the system domain).
 * @stat: the stat index.
 * @delta: the change; must be >= 0 for an event.
 *
 * No lock, no allocation, no atomic on the common path, never waits: one
 * restartable sequence adds @delta to the group's per-CPU value and the
 * hint min(|@delta|, threshold + 1) to the per-CPU threshold counts of the
 * group and of each ancestor; once per batch a count moves to its group's
 * atomic.  Each CPU of a tree also has a hint cache, taken by a group
 * updated three times in a row there: while it lasts, the hint goes to
 * the cache instead of the counts, and the update costs the same at any
 * depth; once the cache would hold a quarter batch it moves to the overs
 * of the group and its ancestors (so a group flushes past batch x nr_cpus
 * less a quarter batch per CPU, and tally_stats_read_bound() holds).  The
 * first update of a group on a CPU since its last flush also pushes it on
 * that CPU's list.  A @delta of 0 does nothing.  Values wrap modulo 2^64
 * (any delta, LONG_MIN included, is accepted for a state).
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence and atomics, at
 * most a futex wake (which never blocks); no lock, no allocation, never waits.
 *
 * Return: 0, or -EINVAL for NULL, an unknown stat, a negative event delta
 * or a tree on a simulated domain.
 */
int tally_stats_mod(struct tally_stats_group *g, unsigned int stat,
		    long delta);

/**
 * tally_stats_mod_cpu() - tally_stats_mod() on simulated CPU @cpu.
 * @g: the group (of a tree on a simulated domain).
 * @cpu: the CPU.
 * @stat: the stat index.
 * @delta: the change.
 *
 * Context: MT-safe, async-signal-safe: atomics, at most a futex wake (which
 * never blocks); no lock, no allocation, never waits.
 *
 * Return: 0, or -EINVAL (CPU out of range, system-domain tree, bad stat).
 */
int tally_stats_mod_cpu(struct tally_stats_group *g, unsigned int cpu,
			unsigned int stat, long delta);

/**
 * tally_stats_read() - the hierarchical and local value of one stat.
 * @g: the group.
 * @stat: the stat index.
 * @mode: the flush mode.
 * @hier: set to the value of the group and all its descendants (or NULL).
 * @local: set to the value of the group alone (or NULL).
 *
 * Context: MT-safe; async-signal-safe only with %TALLY_FLUSH_NONE (loads only):
 * the other modes may flush, which takes the tree's flush engine's lock, may
 * wait for another reader's flush, and may issue membarrier().
 *
 * Return: 0, -EINVAL (NULL group, unknown stat or mode).
 */
int tally_stats_read(struct tally_stats_group *g, unsigned int stat,
		     enum tally_flush_mode mode, long *hier, long *local);

/**
 * tally_stats_snapshot() - every stat of a group, after one flush decision.
 * @g: the group.
 * @mode: the flush mode.
 * @hier: array of nr_stats hierarchical values (or NULL).
 * @local: array of nr_stats local values (or NULL).
 *
 * Context: MT-safe; async-signal-safe only with %TALLY_FLUSH_NONE (loads only):
 * the other modes may flush, which takes the tree's flush engine's lock, may
 * wait for another reader's flush, and may issue membarrier().
 *
 * Return: 0, -EINVAL.
 */
int tally_stats_snapshot(struct tally_stats_group *g,
			 enum tally_flush_mode mode, long *hier, long *local);

/**
 * tally_stats_render() - memory.stat-style text: one "name value" line per
 *	stat, hierarchical values.
 * @g: the group.
 * @mode: the flush mode.
 * @buf: output buffer, NUL-terminated on success.
 * @len: its size.
 *
 * Context: MT-safe; not async-signal-safe: formats with snprintf(), and flushes
 * as tally_stats_read() does in every mode but %TALLY_FLUSH_NONE.
 *
 * Return: the text length, -EINVAL, or -ENOSPC (nothing useful in @buf).
 */
int tally_stats_render(struct tally_stats_group *g, enum tally_flush_mode mode,
		       char *buf, size_t len);

/**
 * tally_stats_flush() - flush @g's subtree now (a forced flush).
 * @g: the group.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's flush engine's
 * lock, may wait for another reader's flush, may issue membarrier().
 *
 * Return: 0, -EINVAL.
 */
int tally_stats_flush(struct tally_stats_group *g);

/**
 * tally_stats_read_bound() - how far an if-needed read may be from the
 *	truth.
 * @t: the tree.
 *
 * An if-needed read that does not flush misses updates of the group's
 * subtree whose |delta| add up to at most this: the group's threshold
 * (batch x nr_cpus) plus what each CPU holds back (batch - 1 each).  The
 * value it returns is within this bound of the truth, for the sum over
 * all stats of the subtree, whatever the deltas (huge ones included) and
 * however threads migrate.
 *
 * Context: MT-safe, async-signal-safe: arithmetic on the tree's constants.
 *
 * Return: the bound, in units of the stats; 0 for a NULL @t.
 */
unsigned long tally_stats_read_bound(const struct tally_stats_tree *t);

/**
 * tally_stats_periodic_start() - start the periodic flusher thread.
 * @t: the tree.
 *
 * Every period it flushes the root (ignoring thresholds) and records the
 * time for ratelimited reads.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's periodic mutex and
 * creates a thread.
 *
 * Return: 0, -EINVAL, -EALREADY, or a pthread_create() error (negative).
 */
int tally_stats_periodic_start(struct tally_stats_tree *t);

/**
 * tally_stats_periodic_stop() - stop it and wait for it; 0 or -EINVAL.
 *
 * Context: MT-safe; not async-signal-safe: takes the periodic mutex and joins
 * the flusher thread (waits for its flush to end).
 */
int tally_stats_periodic_stop(struct tally_stats_tree *t);

/**
 * tally_stats_periodic_tick() - do the periodic work if a period is due.
 * @t: the tree.
 *
 * The periodic thread calls it; tests that drive a fake clock call it
 * directly.
 *
 * Context: MT-safe; not async-signal-safe: calls the options' clock and may
 * flush the root, as tally_stats_flush().
 *
 * Return: 1 when it flushed, 0 when not due, -EINVAL.
 */
int tally_stats_periodic_tick(struct tally_stats_tree *t);

/**
 * struct tally_stats_info - what the tree has done, for tests and tools.
 * @flushes: flushes run (a subtree or the root); a read of a leaf that
 *	no update reached since it was last flushed counts as one that
 *	visited nothing.
 * @root_flushes: flushes of the root.
 * @groups_flushed: (group, CPU) pairs visited by flushes.
 * @shared_waits: reads that waited for another reader's flush.
 * @groups: groups alive, the root included.
 * @fenced: non-zero when updates of this tree order themselves with a fence
 *	or a sequentially consistent atomic (simulated domains,
 *	TALLY_MEMBARRIER=off, no usable membarrier()) rather than relying on
 *	membarrier().
 * @barriers: process-wide barriers (membarrier()) this tree's flushes
 *	issued: at most one per 10 ms in the process, plus one per group
 *	destroy.
 * @takeovers: readers that stopped waiting for a flush of their group
 *	that made no progress during a 200 us nap (its flusher preempted,
 *	stopped or blocked) and ran one themselves.
 * @naps: naps of readers waiting for a flush of their group (each at most
 *	200 us, ended early when the flush is done).
 * @flush_lock_waits: times a flush found the flush engine's lock held by
 *	another flush and slept for it (a flush takes it once, or once per
 *	64 CPUs for its zeroing and again for its passes on more CPUs).
 * @flush_lock_wait_ns: the time they slept, in all.  With more threads
 *	than CPUs, a holder waiting for a CPU makes these long: the share of
 *	a fresh read's latency that no flushing design avoids.
 * @flush_lock_long_holds: holds of the flush engine's lock that lasted
 *	over 200 us, many times what a hold's work takes: its holder was
 *	off a CPU (preempted, stopped) while other flushes waited.
 * @flush_lock_long_hold_ns: their length, in all.
 * @adoptions: times a flush's pass on a CPU found an update of that CPU
 *	between its claim of a (group, CPU) and its push on the CPU's list
 *	(preempted or stopped there, or pushing at that moment) and, rather
 *	than wait for it, looked for the claimed groups of its subtree on
 *	that CPU itself.
 */
struct tally_stats_info {
	uint64_t flushes;
	uint64_t root_flushes;
	uint64_t groups_flushed;
	uint64_t shared_waits;
	uint64_t groups;
	uint64_t fenced;
	uint64_t barriers;
	uint64_t takeovers;
	uint64_t naps;
	uint64_t flush_lock_waits;
	uint64_t flush_lock_wait_ns;
	uint64_t flush_lock_long_holds;
	uint64_t flush_lock_long_hold_ns;
	uint64_t adoptions;
};

/**
 * tally_stats_tree_info() - fill @info; 0 or -EINVAL.
 *
 * Context: MT-safe, async-signal-safe: relaxed loads, no lock, no allocation.
 */
int tally_stats_tree_info(const struct tally_stats_tree *t,
			  struct tally_stats_info *info);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_STATS_H */
