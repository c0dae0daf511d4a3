// SPDX-License-Identifier: MIT
/*
 * memcg_current.c - a thread's current memory group and the process
 * default (tally/memcg_current.h).
 *
 * One thread-local pointer per thread, one global pointer.  The
 * thread-local uses the initial-exec TLS model: its address is a fixed
 * offset from the thread pointer, so no access ever calls
 * __tls_get_addr() (which may allocate on a thread's first access to a
 * dlopen()ed module's TLS): reading it is async-signal-safe.  Neither
 * slot holds a reference (see the header): nothing here takes or drops
 * one.
 */
#include <stddef.h>

#include <tally/memcg_current.h>

static __thread struct tally_memcg *current_group
	__attribute__((tls_model("initial-exec")));
static struct tally_memcg *default_group;

struct tally_memcg *tally_memcg_current(void)
{
	struct tally_memcg *g = current_group;

	return g ? g : __atomic_load_n(&default_group, __ATOMIC_ACQUIRE);
}

struct tally_memcg *tally_memcg_set_current(struct tally_memcg *g)
{
	struct tally_memcg *prev = current_group;

	current_group = g;
	/* A signal handler of this thread sees the store in order. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return prev;
}

struct tally_memcg *tally_memcg_set_default(struct tally_memcg *g)
{
	return __atomic_exchange_n(&default_group, g, __ATOMIC_ACQ_REL);
}
