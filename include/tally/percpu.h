/* SPDX-License-Identifier: MIT */
#ifndef TALLY_PERCPU_H
#define TALLY_PERCPU_H

/*
 * tally/percpu.h - per-CPU memory and per-CPU updates without atomics.
 *
 * Memory.  tally_percpu_alloc() returns a per-CPU pointer: the address of
 * CPU 0's copy.  CPU c's copy lives TALLY_PERCPU_UNIT bytes further per CPU:
 *
 *   chunk:  | unit of CPU 0 | unit of CPU 1 | ... | unit of CPU n-1 |
 *             [a][b][c]...    [a][b][c]...          [a][b][c]...
 *
 * Allocations of one domain are packed inside each CPU's unit, so the slots
 * that many counters keep for one CPU share that CPU's cache lines and
 * never a line of another CPU.  A counter's level 0 costs 8 bytes per
 * possible CPU of address space; a page of a CPU's unit is committed only
 * when something writes it (that CPU's updates; reads and frees never
 * commit a page), so CPUs that never run cost no memory.
 *
 * Updates.  On the system domain, tally_percpu_add() and
 * tally_percpu_add_return() update the current CPU's copy inside a
 * restartable sequence (rseq): a plain load, add and store that the kernel
 * restarts if the thread is preempted, migrated or signalled before the
 * store.  No atomic instruction, no lock prefix.  glibc's rseq registration
 * is reused (__rseq_offset); tally registers its own area only when glibc
 * did not.  If rseq cannot be used at all the whole process falls back to
 * an atomic add on the slot of sched_getcpu()'s CPU, still exact.
 * Updates may start before tally's constructor ran (from another
 * constructor): the first one sets the mode up.
 *
 * Signals.  The updates are async-signal-safe: the kernel restarts a
 * sequence that a signal interrupts, so a handler's update of the same
 * slot is never lost, and the slow paths take no lock and allocate
 * nothing.  That holds once the mode is decided, which tally's constructor
 * does at load time; an update before that (from another constructor)
 * decides it under pthread_once().
 *
 * Never mixed: an atomic add could race with another thread's plain rseq
 * store on the same slot and lose counts.  So in a process that uses rseq,
 * a thread that cannot (tally's own registration refused by the kernel,
 * or a thread glibc could not register) prints a message on stderr and
 * aborts the process at its first update.  TALLY_RSEQ=off avoids it by
 * making the whole process use atomic updates.
 *
 * On a simulated domain updates name their CPU and are atomic adds
 * (tally_percpu_add_return_cpu()), so any number of threads may update the
 * same simulated CPU.
 */

#include <stddef.h>
#include <stdint.h>
#include <tally/domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/** log2 of the distance between two CPUs' copies of a per-CPU object. */
#define TALLY_PERCPU_UNIT_SHIFT 16
/** Distance in bytes between two CPUs' copies; also the largest allocation. */
#define TALLY_PERCPU_UNIT (1ul << TALLY_PERCPU_UNIT_SHIFT)

/**
 * tally_percpu_alloc() - allocate zeroed per-CPU memory.
 * @d: the domain (NULL means the system domain).
 * @size: bytes per CPU, 1 to %TALLY_PERCPU_UNIT.
 * @align: alignment of each CPU's copy: a power of two up to 4096, or 0
 *	for 8.
 *
 * Context: MT-safe; not async-signal-safe: takes the pool's mutex, may mmap()
 * and allocate, and with a NULL @d may build the system domain.
 *
 * Return: the per-CPU pointer (CPU 0's copy), or NULL with errno set to
 * EINVAL (bad size or alignment, no system domain) or ENOMEM.
 */
void *tally_percpu_alloc(struct tally_domain *d, size_t size, size_t align);

/**
 * tally_percpu_free() - free per-CPU memory.
 * @d: the domain it was allocated from (NULL means the system domain).
 * @ptr: a pointer from tally_percpu_alloc() on @d, or NULL (ignored).
 *
 * The memory is zeroed again before it is reused.
 *
 * Context: MT-safe on distinct pointers; not async-signal-safe: takes the
 * pool's mutex.
 */
void tally_percpu_free(struct tally_domain *d, void *ptr);

/**
 * tally_percpu_ptr() - CPU @cpu's copy of a per-CPU object.
 * @ptr: a per-CPU pointer.
 * @cpu: a CPU number below the domain's nr_cpus (not checked).
 *
 * Context: MT-safe, async-signal-safe: arithmetic only.
 */
static inline void *tally_percpu_ptr(const void *ptr, unsigned int cpu)
{
	return (char *)ptr + ((size_t)cpu << TALLY_PERCPU_UNIT_SHIFT);
}

/**
 * enum tally_rseq_mode - how this process updates per-CPU data.
 * @TALLY_RSEQ_GLIBC: rseq through glibc's registration.
 * @TALLY_RSEQ_OWN: rseq through tally's own per-thread registration
 *	(glibc did not register, e.g. glibc.pthread.rseq=0).
 * @TALLY_RSEQ_FALLBACK: no rseq: atomic add on sched_getcpu()'s slot.
 */
enum tally_rseq_mode {
	TALLY_RSEQ_GLIBC = 1,
	TALLY_RSEQ_OWN = 2,
	TALLY_RSEQ_FALLBACK = 3,
};

/**
 * tally_rseq_mode() - the update mode of this process.
 *
 * Decided once for the whole process, on first use: a process never mixes
 * rseq updates with atomic ones, which could lose updates.  Setting the
 * environment variable TALLY_RSEQ=off before the first use forces
 * %TALLY_RSEQ_FALLBACK (used by the tests of the fallback path).
 *
 * Context: MT-safe, async-signal-safe once tally's constructor has run (one
 * load); a call before it, from another constructor, decides the mode under
 * pthread_once().
 */
enum tally_rseq_mode tally_rseq_mode(void);

/**
 * tally_current_cpu() - the CPU this thread runs on, from the rseq area.
 *
 * Context: MT-safe, async-signal-safe once tally's constructor has run: a load
 * from the rseq area, or sched_getcpu() without one; no lock, no allocation.
 *
 * Return: a CPU number (possibly stale as soon as it is returned).
 */
unsigned int tally_current_cpu(void);

/* Internal: offset of the rseq area from the thread pointer. */
extern ptrdiff_t tally_rseq_area_offset;
/**
 * tally_percpu_add_return_slow() - internal: tally_percpu_add_return()
 *	when this thread has no usable rseq area.
 * @ptr: as for tally_percpu_add_return().
 * @v: the increment.
 * @cpu: set to the CPU whose copy was updated.
 *
 * Before the mode is decided, decides it; in %TALLY_RSEQ_OWN mode
 * registers the thread's area and redoes the sequence; in
 * %TALLY_RSEQ_FALLBACK mode adds atomically on sched_getcpu()'s slot.  A
 * thread that has no rseq area in a process that uses rseq aborts the
 * process (a message by write(), then abort()).
 *
 * Context: MT-safe, async-signal-safe once tally's constructor has run: at most
 * one rseq() system call registering the thread, else an atomic add; no lock,
 * no allocation, never waits (before the constructor it decides the mode under
 * pthread_once()).
 *
 * Return: the new value of that CPU's copy.
 */
long tally_percpu_add_return_slow(long *ptr, long v, unsigned int *cpu);

/**
 * tally_percpu_add_hints_slow() - internal: tally_percpu_add_hints()
 *	without a usable rseq area, as tally_percpu_add_return_slow().
 * @base: as for tally_percpu_add_hints().
 * @offs: the offsets of the hinted longs.
 * @nr: their number.
 * @hint: added to each of them.
 * @ptr: the long that gets @v.
 * @v: the exact increment.
 * @cpu: set to the CPU whose copies were updated.
 *
 * Context: MT-safe, async-signal-safe once tally's constructor has run: at most
 * one rseq() system call registering the thread, else an atomic add; no lock,
 * no allocation, never waits (before the constructor it decides the mode under
 * pthread_once()).
 *
 * Return: as tally_percpu_add_hints().
 */
unsigned long tally_percpu_add_hints_slow(long *base, const long *offs,
					  unsigned long nr, long hint,
					  long *ptr, long v, unsigned int *cpu);

/**
 * tally_percpu_xchg_slow() - internal: tally_percpu_xchg() without a
 *	usable rseq area, as tally_percpu_add_return_slow().
 * @ptr: as for tally_percpu_xchg().
 * @v: the new value.
 *
 * Context: MT-safe, async-signal-safe once tally's constructor has run: at most
 * one rseq() system call registering the thread, else an atomic add; no lock,
 * no allocation, never waits (before the constructor it decides the mode under
 * pthread_once()).
 *
 * Return: the value it replaced.
 */
long tally_percpu_xchg_slow(long *ptr, long v);

/**
 * tally_percpu_add_return() - add to the current CPU's copy of a long.
 * @ptr: per-CPU pointer to a long, allocated on the system domain.
 * @v: the increment (any sign).
 * @cpu: set to the CPU whose copy was updated.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence, which a signal
 * restarts; no lock, no allocation, never waits.
 *
 * Return: the new value of that CPU's copy.
 */
static inline long tally_percpu_add_return(long *ptr, long v,
					   unsigned int *cpu);

/**
 * tally_percpu_add() - add to the current CPU's copy of a long.
 * @ptr: per-CPU pointer to a long, allocated on the system domain.
 * @v: the increment (any sign).
 *
 * The cheapest exact per-CPU update: one add to memory commits it.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence, which a signal
 * restarts; no lock, no allocation, never waits.
 */
static inline void tally_percpu_add(long *ptr, long v);

/**
 * tally_percpu_add_hints() - add @hint to several per-CPU longs, then @v
 *	to one more, on the current CPU, in one restartable sequence.
 * @base: a per-CPU pointer of the same domain; the others are given as
 *	byte offsets from it, which are the same on every CPU.
 * @offs: @nr offsets from @base of the per-CPU longs that get @hint
 *	(e.g. the flush-threshold counts of a group and its ancestors).
 * @nr: 1 to 8 (unrolled); more is done by a loop; 0 is the add of @v
 *	alone.
 * @hint: added to each of them on the current CPU.
 * @ptr: per-CPU pointer to the long that must get @v exactly once.
 * @v: the exact increment.
 * @cpu: set to the CPU whose copies were updated.
 *
 * The add of @v is the committing store: it happens exactly once.  The
 * hint adds come before it and are not undone if the sequence restarts, so
 * a restart can add @hint twice to some of them (on this CPU or the next):
 * use it only for counts where counting too much is harmless, like the
 * flush thresholds of the statistics tree.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence, which a signal
 * restarts; no lock, no allocation, never waits.  A restart may add a hint
 * twice (see above).
 *
 * Return: the bitwise OR of the new hint values (0 without hints); with a
 * power-of-two batch, it is >= batch exactly when some hint reached the
 * batch.
 */
static inline unsigned long tally_percpu_add_hints(long *base,
						   const long *offs,
						   unsigned long nr, long hint,
						   long *ptr, long v,
						   unsigned int *cpu);

/**
 * tally_percpu_xchg() - replace the current CPU's copy of a long.
 * @ptr: per-CPU pointer to a long, allocated on the system domain.
 * @v: the new value.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence, which a signal
 * restarts; no lock, no allocation, never waits.
 *
 * Return: the value it replaced; together with tally_percpu_add*() on the
 * same slot, nothing is lost or counted twice.
 */
static inline long tally_percpu_xchg(long *ptr, long v);

#if defined(__x86_64__)
#include <tally/percpu_x86_64.h>
#else
#error "tally's rseq sequences exist only for x86-64 (tally/percpu_x86_64.h)"
#endif

/**
 * tally_percpu_add_return_cpu() - atomically add to CPU @cpu's copy.
 * @ptr: per-CPU pointer to a long.
 * @cpu: a CPU below the domain's nr_cpus (not checked).
 * @v: the increment.
 *
 * For simulated domains, where updates name their CPU.  Safe from any
 * thread; never mix it with tally_percpu_add*() on the same slot.
 *
 * Context: MT-safe, async-signal-safe: one relaxed atomic add, no lock.
 *
 * Return: the new value of that copy.
 */
static inline long tally_percpu_add_return_cpu(long *ptr, unsigned int cpu,
					       long v)
{
	long *slot = (long *)tally_percpu_ptr(ptr, cpu);

	return (long)__atomic_add_fetch((unsigned long *)slot,
					(unsigned long)v, __ATOMIC_RELAXED);
}

/**
 * tally_percpu_read_cpu() - read CPU @cpu's copy of a long.
 * @ptr: per-CPU pointer to a long.
 * @cpu: a CPU below the domain's nr_cpus (not checked).
 *
 * Context: MT-safe, async-signal-safe: one relaxed load.
 */
static inline long tally_percpu_read_cpu(const long *ptr, unsigned int cpu)
{
	return __atomic_load_n((const long *)tally_percpu_ptr(ptr, cpu),
			       __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif

#endif /* TALLY_PERCPU_H */
