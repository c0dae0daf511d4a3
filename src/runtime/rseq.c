// SPDX-License-Identifier: MIT
/*
 * rseq.c - choosing and registering the rseq area the fast paths use.
 *
 * The fast paths (tally/percpu.h) find the thread's struct rseq at
 * thread pointer + tally_rseq_area_offset.  That offset is set once, by a
 * constructor or by an update that comes before it (the offset is 0 until
 * then, which the fast paths send here), and never changes, so the mode is
 * process-wide:
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
 * race with a plain rseq store on that slot.  So a thread that cannot use
 * rseq in a GLIBC or OWN process aborts the process with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <linux/rseq.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tally/percpu.h>
#include "inject.h"
#include "percpu_internal.h"

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
	int err = tally_inject(TALLY_INJECT_RSEQ_REGISTER);

	if (err)
		err = -err;
	else if (syscall(__NR_rseq, &own_area, sizeof(own_area), 0,
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

static void decide_mode(void)
{
	const char *env = getenv("TALLY_RSEQ");
	enum tally_rseq_mode m;

	if (env && !strcmp(env, "off")) {
		tally_rseq_area_offset = own_area_offset();
		m = TALLY_RSEQ_FALLBACK;
	} else if (glibc_registered()) {
		tally_rseq_area_offset = __rseq_offset;
		m = TALLY_RSEQ_GLIBC;
	} else {
		tally_rseq_area_offset = own_area_offset();
		m = register_own_area() == 0 ? TALLY_RSEQ_OWN
					     : TALLY_RSEQ_FALLBACK;
	}
	__atomic_store_n(&mode, m, __ATOMIC_RELEASE);
}

/*
 * Run by the constructor, and by the first update when it comes earlier
 * (from another library's constructor): the offset is 0 until then.
 */
__attribute__((constructor(101))) static void tally_rseq_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (!__atomic_load_n(&mode, __ATOMIC_ACQUIRE))
		pthread_once(&once, decide_mode);
}

enum tally_rseq_mode tally_rseq_mode(void)
{
	tally_rseq_init();
	return mode;
}

/*
 * A thread without rseq in a process whose other threads use it: an atomic
 * add on sched_getcpu()'s slot could race with another thread's plain rseq
 * store on that slot and lose updates.  Never mix: stop, loudly.  write()
 * because this may run in a signal handler.
 */
static void __attribute__((noreturn)) refuse_to_mix(void)
{
	static const char msg[] =
		"tally: this thread has no rseq registration while the "
		"process updates per-CPU data with rseq; atomic updates "
		"would race with them and lose counts, so tally aborts "
		"(TALLY_RSEQ=off makes the whole process use atomic "
		"updates)\n";

	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		abort();
	abort();
}

static int32_t area_cpu_id(void)
{
	const struct rseq *rs =
		(const struct rseq *)((char *)__builtin_thread_pointer() +
				      tally_rseq_area_offset);

	return (int32_t)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
}

/*
 * The slow paths run when the fast path found no usable rseq area: before
 * the mode was decided (set it up), in OWN mode before the thread's first
 * registration (register), or in FALLBACK mode.  True when the caller must
 * redo the fast path, false for an atomic update of the slot of
 * sched_getcpu()'s CPU (FALLBACK mode only).  A thread that still has no
 * rseq area while the process uses rseq (glibc could not register it, or
 * the kernel refused ours) makes the process abort.
 */
static bool registered_now(void)
{
	tally_rseq_init();
	if (mode == TALLY_RSEQ_FALLBACK)
		return false;
	if (mode == TALLY_RSEQ_OWN && !own_registration_tried)
		register_own_area();
	/*
	 * A signal handler that updated between our check and our syscall
	 * registered the area itself (ours then fails with EBUSY): the area
	 * counts, not the syscall's result.
	 */
	if (area_cpu_id() < 0)
		refuse_to_mix();
	return true;
}

bool tally_rseq_thread_ready(void)
{
	return registered_now();
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
	int32_t c;

	tally_rseq_init();
	c = area_cpu_id();
	if (c < 0) {
		c = sched_getcpu();
		if (c < 0)
			c = 0;
	}
	return (unsigned int)c;
}
