// SPDX-License-Identifier: MIT
/*
 * inject.c - the hook table behind inject.h (test builds only).
 */
#include <tally/percpu.h>
#include "inject.h"

#ifdef TALLY_INJECT

tally_inject_fn tally_inject_hooks[TALLY_INJECT_NR_POINTS];
/* Declared in tally/percpu_x86_64.h: the rseq sequences use them inline. */
long tally_inject_rseq_delay;
unsigned long tally_inject_rseq_aborts;
static void *hook_args[TALLY_INJECT_NR_POINTS];

void tally_inject_set(enum tally_inject_point point, tally_inject_fn fn,
		      void *arg)
{
	if ((unsigned int)point >= TALLY_INJECT_NR_POINTS)
		return;
	hook_args[point] = arg;
	__atomic_store_n(&tally_inject_hooks[point], fn, __ATOMIC_RELEASE);
}

int tally_inject_run(enum tally_inject_point point)
{
	tally_inject_fn fn = __atomic_load_n(&tally_inject_hooks[point],
					     __ATOMIC_ACQUIRE);

	return fn ? fn(point, hook_args[point]) : 0;
}

#endif /* TALLY_INJECT */
