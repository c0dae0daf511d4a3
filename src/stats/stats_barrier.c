// SPDX-License-Identifier: MIT
/*
 * stats_barrier.c - the process-wide barriers that let updated groups
 * leave the flush path (stats_flush.c says why a node waits for one).
 *
 * Owns: the barrier mode (stats_barrier_state) and the tickets: a counter
 * of barriers started and the highest ticket whose barrier completed, for
 * every tree of the process.  A flush notes a ticket when it makes a node
 * idle (stats_barrier_mark()); a barrier started after it settles the mark
 * (stats_mark_settled()), and the node may then be unlinked.
 *
 * Barrier modes (process-wide, stats_barrier_state): MEMBARRIER; FENCED
 * (TALLY_MEMBARRIER=off, or registration refused): updates and flushes
 * both fence, so an idle mark is settled at once; SWITCHING: membarrier()
 * failed at a barrier, updates fence from now on and each barrier is a
 * heavy one (membarrier GLOBAL, else a TLB shootdown) until one has
 * completed, which covers the updates that had not seen the switch; then
 * FENCED.  Simulated domains: updates are sequentially consistent atomics,
 * marks are settled at once too.
 *
 * Invariant: barriers.done only grows, and a ticket counts as done only
 * once its barrier (and every earlier one) has returned.
 *
 * Locks: none; atomics only, so that any flush, under any tree's locks,
 * may take a barrier.  Costs: stats_flush_settle() issues at most one
 * membarrier() per SETTLE_NS in the process, whatever the flush rate;
 * a mark is one load.  Nothing here allocates (a heavy barrier's
 * fallback maps and unmaps one page).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/inject.h"
#include "stats_barrier.h"
#include "stats_internal.h"

enum { BARRIER_MEMBARRIER, BARRIER_SWITCHING, BARRIER_FENCED };

int stats_barrier_state;

/*
 * Least time between two barriers of stats_flush_settle(): what a node
 * updated once may stay on the flush path, and a bound of 100 system
 * calls a second (membarrier() is serialised across the whole machine,
 * and each one interrupts every CPU running the process).
 */
#define SETTLE_NS 10000000ull

/* Process-wide barrier tickets: every tree's marks share the barrier. */
static struct {
	unsigned long started;	/* tickets taken */
	unsigned long done;	/* the highest ticket whose barrier completed */
	uint64_t last_ns;	/* when stats_flush_settle() last issued one */
	/*
	 * Least CLOCK_MONOTONIC_COARSE time between two (a few ns to read,
	 * against tens for the precise clock, on every flush): SETTLE_NS
	 * plus its resolution, so that SETTLE_NS really passed.
	 */
	uint64_t gap_ns;
} barriers __attribute__((aligned(STATS_CACHELINE))) = {
	.gap_ns = 2 * SETTLE_NS,
};

static uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- barrier ------------------------------------------------------------ */

static int membarrier_cmd(int cmd, enum tally_inject_point point)
{
	int err = tally_inject(point);

	if (err) {
		errno = err;
		return -1;
	}
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void setup_barrier_mode(void)
{
	const char *env = getenv("TALLY_MEMBARRIER");
	struct timespec res;

	if (!clock_getres(CLOCK_MONOTONIC_COARSE, &res) && !res.tv_sec)
		__atomic_store_n(&barriers.gap_ns,
				 SETTLE_NS + (uint64_t)res.tv_nsec,
				 __ATOMIC_RELAXED);

	if ((env && !strcmp(env, "off")) ||
	    syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0))
		__atomic_store_n(&stats_barrier_state, BARRIER_FENCED,
				 __ATOMIC_SEQ_CST);
}

void stats_barrier_setup(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, setup_barrier_mode);
}

/*
 * Unmapping a page this thread just wrote makes the kernel shoot down its
 * TLB entry on every CPU running a thread of the process: an interrupt
 * there, which drains the store buffer (the fallback of folly's
 * asymmetric barrier and of .NET's FlushProcessWriteBuffers).
 */
static void tlb_shootdown_barrier(void)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile char *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "tally: membarrier() failed and mmap() too "
				"(%s): no process-wide barrier, stopping\n",
			strerror(errno));
		abort();
	}
	*p = 1;
	munmap((void *)p, (size_t)page);
}

/* A barrier that also orders updates that do not fence. */
static void heavy_barrier(void)
{
	if (membarrier_cmd(MEMBARRIER_CMD_GLOBAL,
			   TALLY_INJECT_MEMBARRIER_GLOBAL))
		tlb_shootdown_barrier();
}

/* Make every update whose queued check came before the call visible. */
static void flush_barrier(const struct tally_stats_tree *t)
{
	int state = __atomic_load_n(&stats_barrier_state, __ATOMIC_SEQ_CST);
	int expected = BARRIER_MEMBARRIER;

	if (t->simulated || state == BARRIER_FENCED) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return;
	}
	if (state == BARRIER_MEMBARRIER &&
	    !membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED,
			    TALLY_INJECT_MEMBARRIER))
		return;
	/* Updates fence from now on; this barrier covers those that did not. */
	__atomic_compare_exchange_n(&stats_barrier_state, &expected,
				    BARRIER_SWITCHING, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	heavy_barrier();
	expected = BARRIER_SWITCHING;
	__atomic_compare_exchange_n(&stats_barrier_state, &expected,
				    BARRIER_FENCED, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
}

void stats_barrier_ticketed(struct tally_stats_tree *t)
{
	unsigned long ticket = __atomic_add_fetch(&barriers.started, 1,
						  __ATOMIC_SEQ_CST);
	unsigned long done = __atomic_load_n(&barriers.done, __ATOMIC_RELAXED);

	flush_barrier(t);
	/* Raise done to our ticket, unless a later barrier did already. */
	while ((long)(ticket - done) > 0 &&
	       !__atomic_compare_exchange_n(&barriers.done, &done, ticket,
					    false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	stats_count_info(&t->info.barriers, 1);
}

unsigned long stats_barrier_mark(bool immediate)
{
	if (immediate)
		return __atomic_load_n(&barriers.done, __ATOMIC_RELAXED) - 1;
	return __atomic_load_n(&barriers.started, __ATOMIC_SEQ_CST);
}

void stats_flush_settle(struct tally_stats_tree *t)
{
	uint64_t now, last;

	if (!__atomic_load_n(&t->unsettled, __ATOMIC_RELAXED))
		return;
	now = coarse_ns();
	last = __atomic_load_n(&barriers.last_ns, __ATOMIC_RELAXED);
	if (now - last < __atomic_load_n(&barriers.gap_ns, __ATOMIC_RELAXED) ||
	    !__atomic_compare_exchange_n(&barriers.last_ns, &last, now, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	/* A node left waiting after our ticket sets it again. */
	__atomic_store_n(&t->unsettled, false, __ATOMIC_SEQ_CST);
	stats_barrier_ticketed(t);
}

unsigned long stats_barrier_done(void)
{
	return __atomic_load_n(&barriers.done, __ATOMIC_ACQUIRE);
}

bool stats_barriers_fenced(void)
{
	return __atomic_load_n(&stats_barrier_state, __ATOMIC_SEQ_CST) ==
	       BARRIER_FENCED;
}
