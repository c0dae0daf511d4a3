// SPDX-License-Identifier: MIT
/*
 * rseq.c - choosing and registering the rseq area the fast paths use.
 *
 * The fast paths (tally/percpu.h) find the thread's struct rseq at
 * thread pointer + tally_rseq_area_offset.  That offset is set once, by a
 * constructor, and never changes, so the mode is process-wide:
 *
 *   GLIBC     glibc registered every thread: offset = __rseq_offset.
 *   OWN       glibc did not: offset of tally's own initial-exec TLS area,
 *             which each thread registers on its first update (its cpu_id
 *             starts negative, which sends the fast path here).
 *   FALLBACK  rseq unusable (or TALLY_RSEQ=off): the own area is never
 *             registered, its cpu_id stays negative, and every update takes
 *             tally_percpu_add_return_slow(): an atomic add on the slot of
 *             sched_getcpu()'s CPU.
 *
 * Never mixing rseq and atomic updates in one process is what keeps the
 * sums exact: an atomic add from a thread whose CPU number went stale could
 * race with a plain rseq store on that slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <linux/rseq.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tally/percpu.h>

/* glibc >= 2.35 exports these; weak so that older glibc still links. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

static __thread struct rseq own_area
	__attribute__((aligned(32), tls_model("initial-exec"))) = {
		.cpu_id = (uint32_t)RSEQ_CPU_ID_UNINITIALIZED,
		.cpu_id_start = 0,
	};
static __thread int own_registration_tried
	__attribute__((tls_model("initial-exec")));

ptrdiff_t tally_rseq_area_offset;
static enum tally_rseq_mode mode;

static ptrdiff_t own_area_offset(void)
{
	return (char *)&own_area - (char *)__builtin_thread_pointer();
}

static int register_own_area(void)
{
	int err = 0;

	if (syscall(__NR_rseq, &own_area, sizeof(own_area), 0,
		    TALLY_RSEQ_SIG) != 0)
		err = -errno;
	own_registration_tried = 1;
	return err;
}

static bool glibc_registered(void)
{
	const struct rseq *rs;

	if (!&__rseq_size || !&__rseq_offset || __rseq_size == 0)
		return false;
	rs = (const struct rseq *)((char *)__builtin_thread_pointer() +
				   __rseq_offset);
	return (int32_t)rs->cpu_id >= 0;
}

__attribute__((constructor(101))) static void tally_rseq_init(void)
{
	const char *env = getenv("TALLY_RSEQ");

	if (mode)
		return;
	if (env && !strcmp(env, "off")) {
		tally_rseq_area_offset = own_area_offset();
		mode = TALLY_RSEQ_FALLBACK;
	} else if (glibc_registered()) {
		tally_rseq_area_offset = __rseq_offset;
		mode = TALLY_RSEQ_GLIBC;
	} else {
		tally_rseq_area_offset = own_area_offset();
		mode = register_own_area() == 0 ? TALLY_RSEQ_OWN
						: TALLY_RSEQ_FALLBACK;
	}
}

enum tally_rseq_mode tally_rseq_mode(void)
{
	tally_rseq_init();
	return mode;
}

/*
 * The slow paths run when the thread's rseq area has a negative cpu_id.  In
 * OWN mode that means the thread has not registered yet: register and let
 * the caller redo the fast path.  Otherwise (FALLBACK mode, or an OWN-mode
 * thread the kernel refused, which happens only if something registered
 * an area for it behind glibc's back) update atomically the slot of the CPU
 * sched_getcpu() names.
 */
static bool registered_now(void)
{
	if (mode != TALLY_RSEQ_OWN)
		return false;
	if (!own_registration_tried)
		register_own_area();
	/*
	 * A signal handler that updated between our check and our syscall
	 * registered the area itself (ours then fails with EBUSY): the area
	 * counts, not the syscall's result, or this update would go atomic
	 * while other threads use rseq on the same slot.
	 */
	return (int32_t)__atomic_load_n(&own_area.cpu_id, __ATOMIC_RELAXED) >=
	       0;
}

static unsigned int fallback_cpu(void)
{
	int c = sched_getcpu();

	return c < 0 ? 0 : (unsigned int)c;
}

long tally_percpu_add_return_slow(long *ptr, long v, unsigned int *cpu)
{
	if (registered_now())
		return tally_percpu_add_return(ptr, v, cpu);
	*cpu = fallback_cpu();
	return tally_percpu_add_return_cpu(ptr, *cpu, v);
}

unsigned long tally_percpu_add_hints_slow(long *base, const long *offs,
					  unsigned long nr, long hint,
					  long *ptr, long v, unsigned int *cpu)
{
	unsigned long acc = 0;

	if (registered_now())
		return tally_percpu_add_hints(base, offs, nr, hint, ptr, v, cpu);
	*cpu = fallback_cpu();
	for (unsigned long i = 0; i < nr; i++)
		acc |= (unsigned long)tally_percpu_add_return_cpu(
			(long *)((char *)base + offs[i]), *cpu, hint);
	tally_percpu_add_return_cpu(ptr, *cpu, v);
	return acc;
}

long tally_percpu_xchg_slow(long *ptr, long v)
{
	if (registered_now())
		return tally_percpu_xchg(ptr, v);
	return __atomic_exchange_n((long *)tally_percpu_ptr(ptr, fallback_cpu()),
				   v, __ATOMIC_RELAXED);
}

unsigned int tally_current_cpu(void)
{
	const struct rseq *rs =
		(const struct rseq *)((char *)__builtin_thread_pointer() +
				      tally_rseq_area_offset);
	int32_t c = (int32_t)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);

	if (c < 0) {
		c = sched_getcpu();
		if (c < 0)
			c = 0;
	}
	return (unsigned int)c;
}
