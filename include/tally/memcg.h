/* SPDX-License-Identifier: MIT */
#ifndef TALLY_MEMCG_H
#define TALLY_MEMCG_H

/*
 * tally/memcg.h - memory groups: a tree of groups with hierarchical limits,
 * charged and uncharged in bytes, with events and memory.stat.
 *
 * The kernel's memory cgroups for a program's own tenants, queries or
 * connections.  Every charge names a group and lands in the group and all
 * its ancestors; the uncharge names the same group (store it with the
 * object), so nothing drifts.
 *
 *   usage    Each group has a page counter: an atomic usage checked against
 *            max before it is raised, one level at a time (a charge never
 *            raises a level above its max, so it never makes another
 *            charge fail by a transient excess).
 *   stock    Each CPU has a stock of 8 slots, each holding bytes already
 *            counted in one group's page counters (the kernel's per-CPU
 *            stock of several groups): its memory is per CPU, whatever
 *            the number of groups.  A charge that its group's slot on the
 *            current CPU covers takes it in one restartable sequence: no
 *            atomic, no lock, no shared cache line written.  An uncharge
 *            gives bytes back to the slot up to two batches.  Otherwise
 *            the charge goes to the page counters, with a batch more for
 *            the slot when every level has room for it (taking over the
 *            least recent slot when its group has none).  Batches grow
 *            while the chain is far from its limits and shrink near them
 *            (struct tally_memcg_options).
 *   limits   A charge that does not fit under max somewhere first settles
 *            the refusing level's subtree: it waits for the bytes other
 *            threads are carrying between a page counter and a slot,
 *            drains the slots that hold its groups on every CPU (its own
 *            CPU's with that CPU's sequences, the others' restarting the
 *            sequences in flight with membarrier()) and retries; only
 *            then does it fail, after the reclaim callbacks and the
 *            group's OOM policy.
 *
 * What is exact:
 *   - usage never exceeds max at any level, except by charges made with
 *     %TALLY_MEMCG_NOFAIL, and for the few instructions in which a charge
 *     that read the old max re-reads the new one set by a concurrent
 *     tally_memcg_set_limit() and backs out;
 *   - a charge fails (-ENOMEM) only when, after the drain, the usage of
 *     some level plus the charge exceeds its max, where usage is every
 *     charge that has returned or is in flight minus every uncharge that
 *     has returned; bytes that a thread is carrying between a page
 *     counter and a stock (a refill, the slot a refill takes over from
 *     another group, or an uncharge giving a full stock's batch back)
 *     count too, but the charge first waits up to 1 s for every such
 *     transfer of the tree that began before it (they are a few
 *     instructions long; only a thread stopped right there outlasts it),
 *     and no transfer that begins later moves bytes of the refusing
 *     level's subtree;
 *   - tally_memcg_usage() with %TALLY_MEMCG_READ_DRAIN is exact at
 *     quiescence; the other reads give a value with an interval that holds
 *     the exact usage at quiescence.
 *
 * Costs: a charge or uncharge served by the stock is one restartable
 * sequence (a few ns); one in every batch / bytes goes to the page counter
 * (one compare-and-swap per level).  A failing charge costs a drain:
 * membarrier() and O(CPUs x 8 slots x depth), whatever the size of the
 * tree.  A charge never walks other groups: going above high only counts
 * the event.
 *
 *   group:   usage (atomic) | max high low min | peak | events
 *   per CPU: | slot 0: group, bytes | ... | slot 7: group, bytes |
 *   usage(G) = sum of charges to G's subtree - uncharges + slot bytes of
 *              the subtree's groups; exact usage = usage(G) - those bytes
 *
 * Handles and lifetime: a handle is a reference.  tally_memcg_create()
 * (with @out) and tally_memcg_find() give one, tally_memcg_get() adds one,
 * tally_memcg_put() drops one; keep one for as long as objects charged to
 * the group may be uncharged through it.  tally_memcg_destroy() takes a
 * group offline: its remaining charge and local events move to its
 * parent, its stats stay in its ancestors' hierarchical values, its name
 * is free for a new group.  A destroyed group's handle still works:
 * uncharges, charges and stat updates go to its nearest live ancestor,
 * so nothing charged is lost.  Once destroyed and its last reference put,
 * its memory and event file descriptor are freed, after every lock-free
 * walk of the tree that could stand on it has ended.  Using a handle after
 * its last put is undefined; builds with -DTALLY_DEBUG keep freed groups
 * poisoned until the tree is destroyed, so that such a use aborts with a
 * message.  The root lives until the tree is destroyed, and putting it
 * does nothing.
 *
 * Callbacks: setting or removing a reclaim callback or an OOM policy
 * returns only when no call of the old callback is running or can start,
 * so its argument may be freed then; destroying a group removes both the
 * same way.  No tally lock is held while a callback runs.  A callback may
 * destroy its own group or others, and set or clear the callbacks of
 * other groups; setting its own group's callback of its own kind is
 * -EDEADLK (it would wait for its own call).  A set or destroy whose wait
 * for calls in other threads could never end (each of a cycle of threads
 * waits for a call that the next one is inside) returns -EDEADLK with
 * nothing changed.  Not detected: a cycle through an OOM kill's victim (a
 * kill callback that waits so for a call whose callback detaches that
 * victim, or destroys its group, waits for ever).
 *
 * Locks: the drain lock (a mutex) serialises drains; a thread stopped or
 * preempted while it drains delays other drains (and so refusals,
 * %TALLY_MEMCG_READ_DRAIN and setting max) until it runs again.  Charges
 * and uncharges served by the stocks never wait for anything, nor do
 * %TALLY_MEMCG_NOBLOCK charges.
 *
 * fork(): the tree's locks are taken around fork() and re-initialised in
 * the child, which may use the inherited tree; fork() never waits for a
 * callback.  Before it, fork() waits (up to 1 s) for the transfers other
 * threads have in flight between a page counter and a stock, and stops
 * new ones from moving bytes until it returns, so no batch on its way
 * between a stock and the counters is left counted in the child.  A
 * charge or uncharge that another thread is making through the page
 * counters at the moment of the fork (one compare-and-swap per level)
 * may be copied half done: the child's levels then disagree by that
 * charge.  Event file descriptors are inherited like any descriptor.
 *
 * Error codes: functions that can fail return 0 or a negative errno value:
 * -EINVAL for NULL pointers, bad names, sizes or flags; -ENOENT for a path
 * that names no group; -EEXIST for a duplicate name; -EBUSY to destroy a
 * group with children or set max below usage; -ENOMEM for a refused charge
 * or a failed allocation; -EAGAIN for a %TALLY_MEMCG_NOBLOCK charge that
 * would have to wait; -E2BIG for a %TALLY_MEMCG_NOFAIL charge larger
 * than some max of the chain; -EDEADLK for a set or destroy that would
 * wait for ever for a callback's calls; -ENOSPC for a short buffer.
 */

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <tally/domain.h>
#include <tally/mm.h>
#include <tally/oom.h>
#include <tally/percpu.h>
#include <tally/stats.h>

/* A result whose neglect is a bug: the compiler warns when it is dropped. */
#define TALLY_MUST_CHECK_ __attribute__((warn_unused_result))

#ifdef __cplusplus
extern "C" {
#endif

struct tally_memcg_tree;
struct tally_memcg;
struct tally_memcg_task;

/** The max of a group without a limit. */
#define TALLY_MEMCG_UNLIMITED LONG_MAX
/** Default stock batch: 64 pages of 4 KiB, the kernel's MEMCG_CHARGE_BATCH. */
#define TALLY_MEMCG_DEFAULT_BATCH (64l * 4096)
/** The default max_batch is at most this many batches... */
#define TALLY_MEMCG_MAX_BATCH_FACTOR 16l
/** ...and keeps a group's stocks on all CPUs within this many bytes. */
#define TALLY_MEMCG_STOCK_BUDGET (32l << 20)
/** Deepest group: the root is at depth 0. */
#define TALLY_MEMCG_MAX_DEPTH 63u
/** Longest group name, without the terminating NUL. */
#define TALLY_MEMCG_NAME_MAX TALLY_STATS_NAME_MAX

/**
 * enum tally_memcg_stat - the memory.stat items, in bytes except the
 *	events (counts).  Kept in a statistics tree (tally/stats.h).
 */
enum tally_memcg_stat {
	TALLY_MEMCG_ANON = 0,
	TALLY_MEMCG_FILE,
	TALLY_MEMCG_KERNEL,
	TALLY_MEMCG_KERNEL_STACK,
	TALLY_MEMCG_PAGETABLES,
	TALLY_MEMCG_SOCK,
	TALLY_MEMCG_SHMEM,
	TALLY_MEMCG_FILE_MAPPED,
	TALLY_MEMCG_FILE_DIRTY,
	TALLY_MEMCG_FILE_WRITEBACK,
	TALLY_MEMCG_SLAB_RECLAIMABLE,
	TALLY_MEMCG_SLAB_UNRECLAIMABLE,
	TALLY_MEMCG_PGFAULT,		/* event */
	TALLY_MEMCG_PGMAJFAULT,		/* event */
	TALLY_MEMCG_NR_STATS,
};

/**
 * enum tally_memcg_event - the memory.events counters.
 * @TALLY_MEMCG_EVENT_LOW: reclaim took memory from a group under its
 *	effective low protection, because nothing unprotected was left.
 * @TALLY_MEMCG_EVENT_HIGH: a charge left the group's usage above high.
 * @TALLY_MEMCG_EVENT_MAX: a charge did not fit under the group's max.
 * @TALLY_MEMCG_EVENT_OOM: a charge was still refused after reclaim and
 *	drain: the group's OOM policy ran.
 * @TALLY_MEMCG_EVENT_OOM_KILL: a task of the group was chosen and reported
 *	to the kill callback.
 */
enum tally_memcg_event {
	TALLY_MEMCG_EVENT_LOW = 0,
	TALLY_MEMCG_EVENT_HIGH,
	TALLY_MEMCG_EVENT_MAX,
	TALLY_MEMCG_EVENT_OOM,
	TALLY_MEMCG_EVENT_OOM_KILL,
	TALLY_MEMCG_NR_EVENTS,
};

/** enum tally_memcg_limit - which limit tally_memcg_set_limit() sets. */
enum tally_memcg_limit {
	TALLY_MEMCG_MIN = 0,
	TALLY_MEMCG_LOW,
	TALLY_MEMCG_HIGH,
	TALLY_MEMCG_MAX,
};

/**
 * struct tally_memcg_options - how a tree is built; zero means the default.
 * @domain: CPUs of the per-CPU stocks (NULL: the system domain).  On a
 *	simulated domain, charges name their CPU (tally_memcg_charge_cpu()).
 * @batch: the smallest refill: bytes a refill adds to a CPU's stock near a
 *	limit (default %TALLY_MEMCG_DEFAULT_BATCH); 1 to 1 GiB.
 * @max_batch: the largest refill, used while every level of the chain is
 *	far from its high and max; at most 1 GiB.  The default is 16 x @batch
 *	(%TALLY_MEMCG_MAX_BATCH_FACTOR) or less, so that two per CPU stay
 *	within %TALLY_MEMCG_STOCK_BUDGET (32 MiB) on all CPUs, but not below
 *	@batch: with the default batch, 4 MiB up to 4 CPUs and the kernel's
 *	fixed batch from 64 CPUs on.  Set it to @batch for a fixed batch.  A refill's batch is the
 *	room left under the nearest high or max divided by 4 x CPUs, rounded
 *	down to a multiple of @batch, within [@batch, @max_batch]; a group's
 *	stock on a CPU holds at most two of its batches.
 */
struct tally_memcg_options {
	struct tally_domain *domain;
	long batch;
	long max_batch;
};

/**
 * tally_memcg_tree_create() - create a tree with its root group.
 * @out: where the tree is stored (NULL on failure).
 * @opts: options, or NULL for the defaults.
 *
 * The root has no limit; its usage is the sum of its subtree's.
 *
 * Context: MT-safe; not async-signal-safe: allocates, may register the
 * process for membarrier().
 *
 * Return: 0, -EINVAL (NULL @out, bad batch or max_batch), -ENOMEM, -ENODEV (no system
 * domain: the CPUs could not be read).  On failure *@out is NULL and
 * nothing needs to be destroyed.
 */
int tally_memcg_tree_create(struct tally_memcg_tree **out,
			    const struct tally_memcg_options *opts);

/**
 * tally_memcg_tree_destroy() - free a tree, its groups and their handles.
 * @t: the tree, or NULL.  No other call on @t may run or follow; event
 *	file descriptors of its groups are closed.
 *
 * Context: not async-signal-safe: frees memory.
 */
void tally_memcg_tree_destroy(struct tally_memcg_tree *t);

/**
 * tally_memcg_root() - the tree's root group.
 * @t: the tree.
 *
 * Context: MT-safe, async-signal-safe: one load.
 *
 * Return: the root, or NULL for a NULL @t.
 */
struct tally_memcg *tally_memcg_root(struct tally_memcg_tree *t);

/**
 * tally_memcg_create() - create a child group, without limits.
 * @parent: the parent group (live, not destroyed).
 * @name: 1 to %TALLY_MEMCG_NAME_MAX bytes, without '/'.
 * @out: where the group is stored, as a reference the caller puts with
 *	tally_memcg_put() (NULL: no handle; tally_memcg_find() gives one).
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's locks,
 * allocates.
 *
 * Return: 0, -EINVAL (NULL, bad name, destroyed parent, a chain deeper than
 * %TALLY_MEMCG_MAX_DEPTH levels below the root), -EEXIST, -ENOMEM.
 */
int tally_memcg_create(struct tally_memcg *parent, const char *name,
		       struct tally_memcg **out);

/**
 * tally_memcg_find() - look a live group up by path.
 * @t: the tree.
 * @path: names separated by '/', from the root ("a/b"); "" is the root.
 * @out: where the group is stored, as a reference the caller puts with
 *	tally_memcg_put().
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's structure lock.
 *
 * Return: 0, -EINVAL (NULL, empty component), -ENOENT.
 */
int tally_memcg_find(struct tally_memcg_tree *t, const char *path,
		     struct tally_memcg **out);

/**
 * tally_memcg_destroy() - remove a group, moving what it holds to its
 *	parent.
 * @g: a live group without children, not the root.
 *
 * Its remaining charge and its local events move to the parent: every
 * ancestor's usage and hierarchical events are the same before and after,
 * and the parent's local events gain the group's.  Its stats stay in its
 * ancestors' hierarchical memory.stat.  Charges, uncharges and stat
 * updates in flight on @g from other threads are not lost: they land in
 * @g before or in the parent after.  Handles stay
 * valid until their last put (see the file comment): later charges,
 * uncharges and stat updates go to the nearest live ancestor; its tasks
 * are detached, its reclaim callback is removed (as by
 * tally_memcg_set_reclaim() with NULL: destroy returns once no call of it
 * runs, but the calling thread's own, so its argument may be freed then),
 * and so is its OOM policy (as by tally_memcg_set_oom_policy() with NULL,
 * the same way: no other thread's call of its kill callback runs when
 * destroy returns, and a charge that resolved to it before fails),
 * its event file descriptor stays open (without events) until the group
 * is freed.  The tree's own reference is dropped: with no handle left,
 * the group is freed.
 *
 * Cost: one membarrier() when a stock slot of the group is filled on
 * another CPU than the caller's (the drain), none otherwise: its
 * memory.stat's last fold waits for a grace period instead of a barrier.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's locks, drains
 * (membarrier()), sleeps while other threads' calls of its reclaim or kill
 * callback run, frees memory.  May be called from any callback, its own
 * group's too (its own call goes on).  -EDEADLK, nothing changed, when a
 * thread whose call it would wait for waits, itself or through others,
 * for a call that this thread is inside.
 *
 * Return: 0, -EINVAL (NULL, the root, already destroyed), -EBUSY (it has
 * live children), -EDEADLK.
 */
int tally_memcg_destroy(struct tally_memcg *g);

/**
 * tally_memcg_get() - take one more reference on a group's handle.
 * @g: a group the caller holds a reference on (live or destroyed), or
 *	NULL (nothing happens).
 *
 * Context: MT-safe, async-signal-safe: one atomic add.
 */
void tally_memcg_get(struct tally_memcg *g);

/**
 * tally_memcg_put() - drop a reference on a group.
 * @g: the group, or NULL (nothing happens).  Putting the root does
 *	nothing.
 *
 * The last reference of a destroyed group frees it (its memory and event
 * file descriptor) once no lock-free walk of the tree can stand on it;
 * the handle must not be used after.  A live group keeps the tree's own
 * reference until it is destroyed.
 *
 * Context: MT-safe; not async-signal-safe: may take the tree's structure
 * lock and free memory.
 */
void tally_memcg_put(struct tally_memcg *g);

/**
 * tally_memcg_path() - the path of a group from the root ("" for the root).
 * @g: the group.
 * @buf: output buffer.
 * @len: its size.
 *
 * Context: MT-safe; not async-signal-safe: takes the structure lock.
 *
 * Return: the path's length, -EINVAL (NULL, a destroyed group), -ENOSPC
 * (short buffer).
 */
int tally_memcg_path(const struct tally_memcg *g, char *buf, size_t len);

/**
 * tally_memcg_set_limit() - set min, low, high or max.
 * @g: a live group; the root too (a process-wide max; min and low have
 *	no effect on the root, which nothing reclaims from above).
 * @which: the limit.
 * @bytes: 0 to %TALLY_MEMCG_UNLIMITED.
 *
 * As in cgroup v2 the four limits are independent: no order between them
 * is refused (a max below high makes high moot, a min above low makes the
 * effective low at least the effective min).  Setting max behaves as the
 * kernel's memory.max write: the new max is published, then the subtree's
 * stocks are drained and, while the usage is above it, its reclaim
 * callbacks are asked for the excess and the drain retried; only when the
 * exact usage stays above the new max is the old one restored (-EBUSY).
 * Charges racing with it either fit under the new max or fail (one that
 * had read the old max may hold the usage above the new one for a few
 * instructions before it backs out).
 *
 * Context: MT-safe; not async-signal-safe: setting max takes the tree's
 * drain lock, drains (membarrier()), may call reclaim callbacks and sleep
 * (1 s at most for transfers in flight).
 *
 * Return: 0, -EINVAL (NULL, a destroyed group, unknown @which, negative
 * @bytes), -EBUSY (the usage stays above the new max after reclaim).
 */
int tally_memcg_set_limit(struct tally_memcg *g, enum tally_memcg_limit which,
			  long bytes);

/**
 * struct tally_memcg_limits - the limits of a group.
 * @min: hard protection: reclaim never takes the group below it.
 * @low: best-effort protection: reclaim takes it below only when nothing
 *	unprotected is left (a low event).
 * @high: throttling: charges above it succeed, record a high event and
 *	return %TALLY_MEMCG_OVER_HIGH; tally_memcg_reclaim_high() asks the
 *	reclaim callbacks for the excess.
 * @max: hard limit.
 */
struct tally_memcg_limits {
	long min;
	long low;
	long high;
	long max;
};

/**
 * tally_memcg_get_limits() - read the limits of a group.
 * @g: the group.
 * @out: where they are stored.
 *
 * Context: MT-safe, async-signal-safe: four loads.
 *
 * Return: 0, -EINVAL (NULL).
 */
int tally_memcg_get_limits(const struct tally_memcg *g,
			   struct tally_memcg_limits *out);

/** Charge flag: always succeed, even over max (the kernel's __GFP_NOFAIL). */
#define TALLY_MEMCG_NOFAIL 0x1u
/**
 * Charge flag: on a refusal, do not call reclaim callbacks nor run the
 * OOM policy: drain, retry, then fail (the kernel's GFP_NOWAIT).  The max
 * event is counted, the oom event is not.
 */
#define TALLY_MEMCG_NORECLAIM 0x2u
/**
 * Charge flag: never take a lock, sleep or call a callback (signal
 * handlers, allocators' inner paths).  Served by the stock or one
 * compare-and-swap per level; when that does not fit, fail with -EAGAIN
 * and count no event: without a drain, bytes reserved in other CPUs'
 * stocks may be what stands in the way.  Retry without the flag where
 * blocking is allowed.
 */
#define TALLY_MEMCG_NOBLOCK 0x4u
/* Every charge flag. */
#define TALLY_MEMCG_FLAGS_ (TALLY_MEMCG_NOFAIL | TALLY_MEMCG_NORECLAIM | \
			    TALLY_MEMCG_NOBLOCK)

/** tally_memcg_charge() succeeded, and left some level above its high. */
#define TALLY_MEMCG_OVER_HIGH 1

/**
 * tally_memcg_charge() - charge bytes to a group and its ancestors.
 * @g: the group (a destroyed group charges its nearest live ancestor), or
 *	NULL for the calling thread's current group (tally/memcg_current.h).
 * @bytes: 1 to %TALLY_MEMCG_BYTES_MAX.
 * @flags: 0 or an OR of %TALLY_MEMCG_NOFAIL, %TALLY_MEMCG_NORECLAIM,
 *	%TALLY_MEMCG_NOBLOCK.
 *
 * Served by the current CPU's stock when it can (one restartable sequence,
 * no atomic); else charges the page counters with a refill for the stock;
 * else drains, asks the reclaim callbacks, drains and retries, and runs
 * the OOM policy of the group whose max was hit (see the file comment for
 * what a refusal guarantees).  Uncharge with tally_memcg_uncharge() on the
 * same group.  The high limits are checked when a charge reaches the page
 * counters, so a group can be above high by up to two batches per CPU
 * before it is noticed, as in the kernel; a charge above high reclaims
 * nothing itself (call tally_memcg_reclaim_high() where it suits).
 *
 * Context: MT-safe.  With %TALLY_MEMCG_NOBLOCK: async-signal-safe and
 * lock-free, never sleeps.  Without it: the slow path takes the tree's
 * drain lock, calls membarrier() and the callbacks, may sleep (OOM wait):
 * not async-signal-safe.
 *
 * Return: 0; %TALLY_MEMCG_OVER_HIGH (charged, and some level is now above
 * its high: tally_memcg_high_delay() gives the kernel's throttling delay);
 * -ENOMEM (refused, nothing charged); -EAGAIN (%TALLY_MEMCG_NOBLOCK and
 * not served without waiting: nothing charged); -E2BIG (a
 * %TALLY_MEMCG_NOFAIL charge larger than some level's max, or that would
 * take some level's usage past LONG_MAX: nothing charged); -EINVAL (NULL
 * without a current group, bytes out of range, unknown flags, a tree on
 * a simulated domain).  A charge's result must be read (the compiler
 * warns otherwise): a refused charge changed nothing.
 */
TALLY_MUST_CHECK_
static inline int tally_memcg_charge(struct tally_memcg *g, long bytes,
				     unsigned int flags);

/**
 * tally_memcg_charge_cpu() - tally_memcg_charge() on a simulated domain.
 * @g: the group.
 * @cpu: the CPU whose stock serves the charge (below the domain's
 *	nr_cpus).
 * @bytes: as for tally_memcg_charge().
 * @flags: as for tally_memcg_charge().
 *
 * Any number of threads may charge the same simulated CPU (its stock is
 * updated with atomic operations).
 *
 * Context: as tally_memcg_charge().
 *
 * Return: as tally_memcg_charge(); -EINVAL also for a CPU out of range or
 * a tree on the system domain.
 */
TALLY_MUST_CHECK_
int tally_memcg_charge_cpu(struct tally_memcg *g, unsigned int cpu,
			   long bytes, unsigned int flags);

/**
 * tally_memcg_uncharge() - give back bytes charged to a group.
 * @g: the group they were charged to (destroyed or not).
 * @bytes: 1 to %TALLY_MEMCG_BYTES_MAX.
 *
 * Goes to the current CPU's stock while it holds less than two batches
 * (one restartable sequence), else to the page counters.  Uncharging more
 * than was charged is a caller bug, caught where it can be: an uncharge
 * that reaches the page counters and would take the group's below 0 is
 * refused (-ERANGE, nothing changed); bytes a stock absorbed are checked
 * at the next drain, which clamps the group's usage at 0 and counts an
 * underflow (tally_memcg_tree_info()).
 *
 * Context: MT-safe, async-signal-safe, lock-free: a restartable sequence
 * or one atomic operation per level; never waits.
 *
 * Return: 0, -EINVAL (NULL, bytes out of range, a tree on a simulated
 * domain), -ERANGE.
 */
static inline int tally_memcg_uncharge(struct tally_memcg *g, long bytes);

/**
 * tally_memcg_uncharge_cpu() - tally_memcg_uncharge() on a simulated
 *	domain.
 * @g: the group.
 * @cpu: the CPU whose stock gets the bytes.
 * @bytes: as for tally_memcg_uncharge().
 *
 * Context: as tally_memcg_uncharge().
 *
 * Return: as tally_memcg_uncharge(); -EINVAL also for a CPU out of range
 * or a tree on the system domain.
 */
int tally_memcg_uncharge_cpu(struct tally_memcg *g, unsigned int cpu,
			     long bytes);

/**
 * enum tally_memcg_read_mode - how tally_memcg_usage() reads.
 * @TALLY_MEMCG_READ_APPROX: one load of the page counter; the interval
 *	allows every slot the subtree can hold to be full: on each CPU,
 *	min(8, groups of the subtree) slots of two max_batch (8 slots on
 *	trees with atomic stocks).  O(1).
 * @TALLY_MEMCG_READ_PRECISE: the page counter minus the slots of the
 *	subtree's groups, read without stopping anyone.  O(CPUs x 8 x
 *	depth).
 * @TALLY_MEMCG_READ_DRAIN: drains the subtree's stocks into the page
 *	counters, then reads them: exact at quiescence.  Costs a
 *	membarrier() and takes the drain lock.
 */
enum tally_memcg_read_mode {
	TALLY_MEMCG_READ_APPROX = 0,
	TALLY_MEMCG_READ_PRECISE = 1,
	TALLY_MEMCG_READ_DRAIN = 2,
};

/**
 * struct tally_memcg_range - a usage with the interval it guarantees.
 * @value: the usage read (0 or more).
 * @min: at quiescence the exact usage is at least this...
 * @max: ...and at most this.
 */
struct tally_memcg_range {
	long value;
	long min;
	long max;
};

/**
 * tally_memcg_usage() - the usage of a group's subtree (memory.current).
 * @g: the group (a destroyed group reads as 0: its charge is its parent's).
 * @mode: how to read.
 * @out: the usage and its interval.
 *
 * Context: MT-safe.  %TALLY_MEMCG_READ_APPROX and %TALLY_MEMCG_READ_PRECISE
 * are async-signal-safe: loads along a lock-free walk of the subtree;
 * %TALLY_MEMCG_READ_DRAIN is not: it takes the drain lock and calls
 * membarrier().
 *
 * Return: 0, -EINVAL (NULL, unknown mode).
 */
int tally_memcg_usage(struct tally_memcg *g, enum tally_memcg_read_mode mode,
		      struct tally_memcg_range *out);

/**
 * tally_memcg_peak() - the highest usage of the group's page counter
 *	(memory.peak), stocks included, since creation or the last reset.
 * @g: the group.
 * @reset: set the peak to the current usage after reading it.
 *
 * Context: MT-safe, async-signal-safe: loads and a compare-and-swap.
 *
 * Return: the peak (0 or more), or -EINVAL for NULL.
 */
long tally_memcg_peak(struct tally_memcg *g, bool reset);

/**
 * tally_memcg_drain() - give every CPU's stock of a subtree back to the
 *	page counters.
 * @g: the group.
 *
 * Context: MT-safe; not async-signal-safe: takes the drain lock, calls
 * membarrier().
 *
 * Return: 0, -EINVAL (NULL).
 */
int tally_memcg_drain(struct tally_memcg *g);

/**
 * tally_memcg_stat_mod() - add to a memory.stat item of a group.
 * @g: the group (a destroyed group updates its nearest live ancestor), or
 *	NULL for the calling thread's current group (tally/memcg_current.h).
 * @item: the item.
 * @delta: the change (>= 0 for the event items).
 *
 * The items are separate from the charge: a program charges bytes and
 * says what they are (anon, file, ...) here.  An update of the statistics
 * tree (tally_stats_mod(): rseq, no lock) inside a read-side section of
 * the tree's groups (two uncontended atomic adds), so that it may race
 * with the destroy of the group or of the ancestor it lands in.
 *
 * Context: MT-safe, async-signal-safe, lock-free; never waits.
 *
 * Return: 0, -EINVAL (NULL, unknown item, negative event delta, a tree on
 * a simulated domain).
 */
int tally_memcg_stat_mod(struct tally_memcg *g, enum tally_memcg_stat item,
			 long delta);

/**
 * tally_memcg_stat_mod_cpu() - tally_memcg_stat_mod() on a simulated
 *	domain.
 * @g: the group.
 * @cpu: the CPU.
 * @item: the item.
 * @delta: the change.
 *
 * Context: as tally_memcg_stat_mod().
 *
 * Return: as tally_memcg_stat_mod(); -EINVAL also for a CPU out of range.
 */
int tally_memcg_stat_mod_cpu(struct tally_memcg *g, unsigned int cpu,
			     enum tally_memcg_stat item, long delta);

/**
 * tally_memcg_stat_read() - read a memory.stat item.
 * @g: the group.
 * @item: the item.
 * @mode: the statistics tree's flush mode (%TALLY_FLUSH_FORCE is fresh).
 * @hier: set to the subtree's value (or NULL).
 * @local: set to the group's own value (or NULL).
 *
 * Context: MT-safe, also against tally_memcg_destroy() of @g; not
 * async-signal-safe: takes the tree's structure lock for reading, then
 * as tally_stats_read().
 *
 * Return: 0, -EINVAL (NULL @g, unknown item or mode, destroyed group).
 */
int tally_memcg_stat_read(struct tally_memcg *g, enum tally_memcg_stat item,
			  enum tally_flush_mode mode, long *hier, long *local);

/**
 * tally_memcg_stat_name() - the memory.stat name of an item ("anon").
 * @item: the item.
 *
 * Context: MT-safe, async-signal-safe.
 *
 * Return: the name, or NULL for an unknown item.
 */
const char *tally_memcg_stat_name(enum tally_memcg_stat item);

/**
 * tally_memcg_stats_tree() - the statistics tree holding the memory.stat
 *	items (to export it or read it with tally/stats.h).
 * @t: the memory tree.
 *
 * Its groups have the memory groups' paths.  Do not create or destroy
 * groups in it.
 *
 * Context: MT-safe, async-signal-safe: one load.
 *
 * Return: the tree, or NULL for a NULL @t.
 */
struct tally_stats_tree *tally_memcg_stats_tree(struct tally_memcg_tree *t);

/**
 * tally_memcg_events() - read memory.events and memory.events.local.
 * @g: the group.
 * @hier: %TALLY_MEMCG_NR_EVENTS counts of the group and its descendants
 *	(or NULL).
 * @local: %TALLY_MEMCG_NR_EVENTS counts of the group alone (or NULL).
 *
 * Events are counted exactly: each is one atomic add on the group's local
 * count and on the hierarchical count of the group and every ancestor.
 *
 * Context: MT-safe, async-signal-safe: loads.
 *
 * Return: 0, -EINVAL (NULL @g).
 */
int tally_memcg_events(const struct tally_memcg *g, long *hier, long *local);

/**
 * tally_memcg_event_name() - the memory.events name of an event ("high").
 * @ev: the event.
 *
 * Context: MT-safe, async-signal-safe.
 *
 * Return: the name, or NULL for an unknown event.
 */
const char *tally_memcg_event_name(enum tally_memcg_event ev);

/**
 * tally_memcg_events_fd() - a file descriptor that becomes readable when
 *	the group's memory.events change.
 * @g: a live group.
 *
 * An eventfd(2) owned by the group (the same one on every call): every
 * event of the group or a descendant adds 1 to it, so poll() or epoll
 * report it readable; read() returns the number of events since the last
 * read and clears it.  It is non-blocking and close-on-exec; do not close
 * it: tally_memcg_tree_destroy() does.
 *
 * Context: MT-safe; not async-signal-safe: the first call creates it under
 * the structure lock.
 *
 * Return: the descriptor, -EINVAL (NULL, destroyed group), or the negative
 * errno of eventfd() (-EMFILE, -ENFILE, -ENOMEM).
 */
int tally_memcg_events_fd(struct tally_memcg *g);

/**
 * struct tally_memcg_throttle - how far a group's chain is above high.
 * @over: the largest usage - high over the chain, in bytes (0 if none
 *	is above).
 * @group: the level that is furthest above its high, relatively (or NULL).
 * @delay_ns: the kernel's throttling penalty for a charge of @bytes: the
 *	square of the relative overage, scaled as mem_cgroup_handle_over_high()
 *	does, at most 2 s; 0 below one jiffy's worth (10 ms at HZ=100 is not
 *	worth sleeping; the kernel's rule).
 */
struct tally_memcg_throttle {
	long over;
	struct tally_memcg *group;
	long delay_ns;
};

/**
 * tally_memcg_high_delay() - the throttling a caller may apply after
 *	%TALLY_MEMCG_OVER_HIGH.
 * @g: the group charged.
 * @bytes: the size of the charge (scales the delay as the kernel does).
 * @out: the overage and the delay.
 *
 * Reads the chain's page counters (approximate: stocks included).  tally
 * never sleeps on the caller's behalf for high.
 *
 * Context: MT-safe, async-signal-safe: loads and arithmetic.
 *
 * Return: 0, -EINVAL (NULL, bytes < 1).
 */
int tally_memcg_high_delay(struct tally_memcg *g, long bytes,
			   struct tally_memcg_throttle *out);

/**
 * typedef tally_memcg_reclaim_fn - free memory charged to a group.
 * @g: the group asked (its own objects, not its descendants').
 * @bytes: how much is wanted from it.
 * @arg: the registered argument.
 *
 * Called by a charge that hit max, by tally_memcg_set_limit() lowering a
 * max, or by tally_memcg_reclaim_high(), in that thread, with no tally
 * lock held: it may uncharge (that is how it frees)
 * and charge other groups, but must not charge @g's subtree; it may
 * destroy @g or other groups and set the callbacks of other groups (see
 * tally_memcg_set_reclaim()).  Groups are
 * asked in order: first those above their effective low protection (for
 * the part above it), then those above their effective min (a low event
 * each); never below the effective min.
 *
 * Return: the bytes it freed (uncharged), 0 if none: reclaim asks the next
 * groups for what the callbacks so far did not free.  tally then retries
 * the charge, so a callback that says more than it freed only ends the
 * reclaim early.
 */
typedef long (*tally_memcg_reclaim_fn)(struct tally_memcg *g, long bytes,
				       void *arg);

/**
 * tally_memcg_set_reclaim() - register a group's reclaim callback.
 * @g: a live group.
 * @fn: the callback, or NULL to remove it.
 * @arg: passed to @fn.
 *
 * Every call sees a registered (@fn, @arg) pair, never one half of each.
 * Returns once no call of the previous callback is running or can start:
 * its argument may be freed then.
 *
 * Context: MT-safe; not async-signal-safe: sleeps while calls of the old
 * callback run.  From a callback: not from @g's own reclaim callback
 * (-EDEADLK: its call would never end first); for another group, -EDEADLK
 * when a thread whose call it would wait for waits, itself or through
 * others, for a call that this thread is inside (two callbacks that each
 * replace the other's group's callback: the second to wait gets it).
 * -EDEADLK changes nothing.  Not detected: a kill callback that waits
 * here for a call whose callback detaches the kill's victim or destroys
 * the victim's group.
 *
 * Return: 0, -EINVAL (NULL @g, destroyed group), -EDEADLK.
 */
int tally_memcg_set_reclaim(struct tally_memcg *g, tally_memcg_reclaim_fn fn,
			    void *arg);

/**
 * tally_memcg_reclaim_high() - reclaim what a group and its ancestors hold
 *	above their high.
 * @g: the group (a destroyed group: its nearest live ancestor).
 *
 * The work the kernel does on the way back to user space after a charge
 * above high: for every level of the chain above its high, the reclaim
 * callbacks of its subtree are asked for the excess, in protection order
 * (see tally_memcg_reclaim_fn).  Call it where the caller may block, after
 * a charge returned %TALLY_MEMCG_OVER_HIGH; tally_memcg_high_delay() then
 * says how long to throttle if that was not enough.
 *
 * Context: MT-safe; not async-signal-safe: calls the callbacks.
 *
 * Return: the bytes the callbacks reported freed (0 or more), -EINVAL
 * (NULL).
 */
long tally_memcg_reclaim_high(struct tally_memcg *g);

/**
 * tally_memcg_protection() - the effective min and low of a group.
 * @g: the group.
 * @emin: set to its effective min (or NULL).
 * @elow: set to its effective low (or NULL).
 *
 * Computed for reclaim from the root as the kernel's
 * effective_protection() does, without the recursive mode: a child's
 * protection is min(usage, its setting), scaled down in proportion when
 * the siblings together claim more than the parent's effective
 * protection; the root and its children keep their settings.  Usages are
 * the page counters (approximate reads).
 *
 * Context: MT-safe, lock-free; not async-signal-safe.
 *
 * Return: 0, -EINVAL (NULL @g).
 */
int tally_memcg_protection(struct tally_memcg *g, long *emin, long *elow);

/**
 * enum tally_memcg_oom_mode - what a group does with a charge still
 *	refused after reclaim.
 * @TALLY_MEMCG_OOM_FAIL: fail it (-ENOMEM).  The default.
 * @TALLY_MEMCG_OOM_WAIT: wait up to the timeout for uncharges, retrying.
 * @TALLY_MEMCG_OOM_KILL: choose a task of the group's subtree with the
 *	2-pass selection (tally/oom.h), report it to the kill callback
 *	(an oom_kill event), then wait up to the timeout for its memory.
 */
enum tally_memcg_oom_mode {
	TALLY_MEMCG_OOM_FAIL = 0,
	TALLY_MEMCG_OOM_WAIT = 1,
	TALLY_MEMCG_OOM_KILL = 2,
};

/**
 * typedef tally_memcg_kill_fn - cancel a chosen task.
 * @oom_group: the group whose max was hit.
 * @victim: the chosen task (attached to @oom_group's subtree).
 * @arg: the registered argument.
 *
 * Called in the charging thread; should make the victim release its
 * memory soon (cancel a query, close a connection); the charge then
 * retries, and waits for the uncharges up to the policy's timeout.  The
 * victim stays attached until the caller detaches it, which the callback
 * may do itself; another thread's tally_memcg_task_detach() of the victim
 * (or tally_memcg_destroy() of its group) waits until the callback
 * returns, so the victim cannot be freed under it; once detached, tally
 * never reads the victim again, so the callback may free it.  One kill
 * runs at a time per tree (no tally lock is held across the callback): a
 * charge that hits max meanwhile waits for room instead of choosing a
 * second victim.  The callback may charge, uncharge, attach and detach
 * tasks, create and destroy groups (@oom_group too), set the callbacks
 * of other groups (see tally_memcg_set_oom_policy()), and fork().
 */
typedef void (*tally_memcg_kill_fn)(struct tally_memcg *oom_group,
				    struct tally_memcg_task *victim,
				    void *arg);

/**
 * struct tally_memcg_oom_policy - a group's OOM policy.
 * @mode: the mode.
 * @timeout_ns: how long %TALLY_MEMCG_OOM_WAIT and %TALLY_MEMCG_OOM_KILL
 *	wait for uncharges (0 to 60 s).
 * @kill: the kill callback (required by %TALLY_MEMCG_OOM_KILL).
 * @arg: passed to @kill.
 */
struct tally_memcg_oom_policy {
	enum tally_memcg_oom_mode mode;
	long timeout_ns;
	tally_memcg_kill_fn kill;
	void *arg;
};

/**
 * tally_memcg_set_oom_policy() - set the OOM policy of a group.
 * @g: a live group (the root too).
 * @policy: the policy (copied), or NULL for %TALLY_MEMCG_OOM_FAIL.
 *
 * Returns once no call of the previous kill callback for @g is running
 * or can start: its argument may be freed then.  A set that overlaps
 * @g's destroy either gets -EINVAL or is removed by the destroy.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's OOM lock,
 * sleeps while calls of the old kill callback run.  From a callback: not
 * from the kill callback running for @g (-EDEADLK); for another group,
 * -EDEADLK when a thread whose call it would wait for waits, itself or
 * through others, for a call that this thread is inside.  -EDEADLK
 * changes nothing.  Not detected: a kill callback that waits here for a
 * call whose callback detaches the kill's victim or destroys the
 * victim's group.
 *
 * Return: 0, -EINVAL (NULL @g, destroyed group, unknown mode, timeout out
 * of range, %TALLY_MEMCG_OOM_KILL without a callback), -EDEADLK.
 */
int tally_memcg_set_oom_policy(struct tally_memcg *g,
			       const struct tally_memcg_oom_policy *policy);

/**
 * struct tally_memcg_task - a task (thread, query, connection) attached to
 *	a group, as an OOM candidate.
 * @mm: its per-task counters (tally/mm.h): its badness is their
 *	%TALLY_MM_BADNESS sum.
 * @score_adj: -1000 (never chosen) to 1000, thousandths of the group's
 *	max added to the badness, as oom_score_adj.
 * @flags: %TALLY_OOM_UNKILLABLE, %TALLY_OOM_PREFER (tally/oom.h).
 * @owner: the caller's pointer, for the kill callback.
 *
 * The caller fills these and keeps the structure alive while attached;
 * the rest is tally's.  A task whose fields are no longer valid when an
 * OOM kill chooses (changed since the attach, or its mm destroyed) is
 * left out of the choice.
 */
struct tally_memcg_task {
	const struct tally_mm *mm;
	int score_adj;
	unsigned int flags;
	void *owner;
	/* private: */
	struct tally_memcg_tree *tree_;
	struct tally_memcg *group_;
	struct tally_memcg_task *next_;
	struct tally_memcg_task *prev_;
};

/**
 * tally_memcg_task_attach() - attach a task to a group.
 * @g: a live group.
 * @task: a task not attached anywhere, with @mm set.
 *
 * Context: MT-safe; not async-signal-safe: takes the structure lock, may
 * allocate (room for the OOM candidates, so that an OOM kill allocates
 * nothing).
 *
 * Return: 0, -EINVAL (NULL, no mm or a destroyed one, score_adj out of
 * range, flags other than %TALLY_OOM_UNKILLABLE and %TALLY_OOM_PREFER,
 * destroyed group), -EBUSY (already attached), -ENOMEM.
 */
int tally_memcg_task_attach(struct tally_memcg *g,
			    struct tally_memcg_task *task);

/**
 * tally_memcg_task_detach() - detach a task from its group.
 * @task: an attached task.
 *
 * Context: MT-safe; not async-signal-safe: takes the tree's OOM and
 * structure locks; waits while another thread's kill callback has @task
 * as its victim.
 *
 * Return: 0, -EINVAL (NULL, not attached, or detached by another thread
 * meanwhile).
 */
int tally_memcg_task_detach(struct tally_memcg_task *task);

/**
 * enum tally_memcg_file - what tally_memcg_render() writes.
 * @TALLY_MEMCG_FILE_STAT: memory.stat ("anon 4096" lines, hierarchical).
 * @TALLY_MEMCG_FILE_EVENTS: memory.events (hierarchical).
 * @TALLY_MEMCG_FILE_EVENTS_LOCAL: memory.events.local.
 * @TALLY_MEMCG_FILE_LIMITS: memory.current, memory.min, memory.low,
 *	memory.high, memory.max, memory.peak as "name value" lines ("max"
 *	for unlimited).
 * @TALLY_MEMCG_FILE_ALL: all of the above as one JSON object (the
 *	format is then JSON whatever @json says).
 */
enum tally_memcg_file {
	TALLY_MEMCG_FILE_STAT = 0,
	TALLY_MEMCG_FILE_EVENTS,
	TALLY_MEMCG_FILE_EVENTS_LOCAL,
	TALLY_MEMCG_FILE_LIMITS,
	TALLY_MEMCG_FILE_ALL,
};

/**
 * tally_memcg_render() - write a group's memory files as text or JSON.
 * @g: the group.
 * @file: which file.
 * @json: JSON (an object of name: value) instead of the kernel's text.
 * @buf: output buffer, NUL-terminated on success.
 * @len: its size.
 *
 * The stats are read with a forced flush.  memory.current is the page
 * counter (%TALLY_MEMCG_READ_APPROX's value) and memory.peak its highest
 * value: both count the bytes reserved in per-CPU stocks, as the kernel's
 * memory.current and memory.peak do, so that the two always agree
 * (current <= peak); %TALLY_MEMCG_READ_PRECISE gives the usage without
 * the stocks.
 *
 * Context: MT-safe, also against tally_memcg_destroy() of @g; not
 * async-signal-safe: takes the tree's structure lock for reading, flushes
 * the statistics tree.
 *
 * Return: the length written, -EINVAL (NULL, unknown file, destroyed
 * group), -ENOSPC (short buffer: @buf holds "").
 */
int tally_memcg_render(struct tally_memcg *g, enum tally_memcg_file file,
		       bool json, char *buf, size_t len);

/**
 * struct tally_memcg_info - counts for tests and tools.
 * @refills: charges that went to the page counters.
 * @drains: drains of a subtree's stocks.
 * @drain_waits: settles (a refusal's, or setting max's) whose wait for
 *	the transfers in flight ran out (1 s) before they ended.
 * @refusals: charges refused (-ENOMEM).
 * @groups: live groups, the root included.
 * @zombies: destroyed groups not yet freed (a handle is still held, or
 *	the grace period is running).
 * @underflows: drains that found more bytes in a group's stocks than its
 *	counter held (a caller uncharged more than it charged).
 * @rseq: non-zero when stocks are taken with restartable sequences, 0 when
 *	with atomic operations (simulated domain, rseq or membarrier()
 *	unavailable).
 * @stock_bytes: memory of the tree's per-CPU stocks (the same whatever
 *	the number of groups).
 * @group_bytes: memory of one group (its own structure; its statistics
 *	group comes on top).
 */
struct tally_memcg_info {
	unsigned long refills;
	unsigned long drains;
	unsigned long drain_waits;
	unsigned long refusals;
	unsigned long groups;
	unsigned long zombies;
	unsigned long underflows;
	int rseq;
	unsigned long stock_bytes;
	unsigned long group_bytes;
};

/**
 * tally_memcg_tree_info() - read a tree's counts.
 * @t: the tree.
 * @out: where they are stored.
 *
 * Context: MT-safe, async-signal-safe: loads.
 *
 * Return: 0, -EINVAL (NULL).
 */
int tally_memcg_tree_info(const struct tally_memcg_tree *t,
			  struct tally_memcg_info *out);

/*
 * The inline fast paths.  Everything below is private: it may change in
 * any release.
 */

/** Largest charge or uncharge: LONG_MAX / 4. */
#define TALLY_MEMCG_BYTES_MAX (LONG_MAX / 4)

/*
 * The first member of every group: what the fast paths read.  @stock is
 * the tree's per-CPU stock (slots keyed by group), @stock_cap the most
 * this group's slot may hold (two of its current refill batches).
 */
struct tally_memcg_fast_ {
	void *stock;		/* per CPU: slots { group, bytes } */
	int rseq;		/* stocks taken by rseq sequences */
	long stock_cap;
};

/**
 * tally_memcg_charge_slow_() - internal: tally_memcg_charge() when the
 *	current CPU's stock cannot serve it.
 * @g: as for tally_memcg_charge().
 * @bytes: as for tally_memcg_charge().
 * @flags: as for tally_memcg_charge().
 *
 * Context: as tally_memcg_charge().
 *
 * Return: as tally_memcg_charge().
 */
TALLY_MUST_CHECK_
int tally_memcg_charge_slow_(struct tally_memcg *g, long bytes,
			     unsigned int flags);

/**
 * tally_memcg_uncharge_slow_() - internal: tally_memcg_uncharge() when the
 *	current CPU's stock cannot take the bytes back.
 * @g: as for tally_memcg_uncharge().
 * @bytes: as for tally_memcg_uncharge().
 *
 * Context: as tally_memcg_uncharge().
 *
 * Return: as tally_memcg_uncharge().
 */
int tally_memcg_uncharge_slow_(struct tally_memcg *g, long bytes);

static inline int tally_memcg_charge(struct tally_memcg *g, long bytes,
				     unsigned int flags)
{
	const struct tally_memcg_fast_ *f = (const struct tally_memcg_fast_ *)g;

	if (__builtin_expect(g && f->rseq && bytes > 0 &&
			     !(flags & ~TALLY_MEMCG_FLAGS_) &&
			     bytes <= TALLY_MEMCG_BYTES_MAX, 1) &&
	    __builtin_expect(tally_percpu_slot_take_(f->stock, g, bytes) > 0,
			     1))
		return 0;
	return tally_memcg_charge_slow_(g, bytes, flags);
}

static inline int tally_memcg_uncharge(struct tally_memcg *g, long bytes)
{
	const struct tally_memcg_fast_ *f = (const struct tally_memcg_fast_ *)g;

	if (__builtin_expect(g && f->rseq && bytes > 0 &&
			     bytes <= TALLY_MEMCG_BYTES_MAX, 1) &&
	    __builtin_expect(tally_percpu_slot_give_(f->stock, g, bytes,
						     __atomic_load_n(
							&f->stock_cap,
							__ATOMIC_RELAXED)) > 0,
			     1))
		return 0;
	return tally_memcg_uncharge_slow_(g, bytes);
}

/**
 * tally_memcg_charge_extern() - tally_memcg_charge() as a function of the
 *	library.
 * @g: as for tally_memcg_charge().
 * @bytes: as for tally_memcg_charge().
 * @flags: as for tally_memcg_charge().
 *
 * The same fast path compiled into libtally, for callers that cannot
 * compile the header's inline functions (another language's foreign
 * function interface, a dlsym() lookup): one call more than the inline
 * sequence.
 *
 * Context: as tally_memcg_charge().
 *
 * Return: as tally_memcg_charge().
 */
TALLY_MUST_CHECK_
int tally_memcg_charge_extern(struct tally_memcg *g, long bytes,
			      unsigned int flags);

/**
 * tally_memcg_uncharge_extern() - tally_memcg_uncharge() as a function of
 *	the library.
 * @g: as for tally_memcg_uncharge().
 * @bytes: as for tally_memcg_uncharge().
 *
 * The same fast path compiled into libtally, for callers that cannot
 * compile the header's inline functions: one call more than the inline
 * sequence.
 *
 * Context: as tally_memcg_uncharge().
 *
 * Return: as tally_memcg_uncharge().
 */
int tally_memcg_uncharge_extern(struct tally_memcg *g, long bytes);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_MEMCG_H */
