// SPDX-License-Identifier: MIT
/*
 * baseline_percpu_counter.c - the kernel's classic percpu_counter.
 *
 * A global count protected by a spinlock plus one slot per CPU.  An add
 * adds to the current CPU's slot (the same rseq add-return as tally's fast
 * path); when the slot's magnitude reaches the batch, the slot is folded
 * into the global count under the lock.  Reads: the global count alone
 * (percpu_counter_read(), off by up to nr_cpus * (batch - 1)) or the
 * global count plus every slot under the lock (percpu_counter_sum()).
 * The default batch is the kernel's max(32, 2 * nr_cpus), so the error
 * bound grows as nr_cpus squared.
 *
 * The fold is exact.  The kernel reads and clears the slot with
 * interrupts off; here the thread may be preempted or migrated between
 * its add-return and the fold.  So the fold moves exactly the amount it
 * observed, @seen: it adds @seen to the global count and subtracts @seen
 * from a slot with another rseq add (or an atomic add on a simulated
 * domain).  Whatever the slot received in between stays in it, and if the
 * subtraction lands on another CPU's slot after a migration, the sum of
 * all slots plus the global count is still the exact total: no update is
 * ever lost, only the split between slots changes.  Both steps happen
 * under the lock, so pcpu_counter_sum() never sees half a fold.
 *
 * The lock spins, then yields: unlike the kernel, a userspace lock holder
 * can be preempted, and with more threads than CPUs the waiters would
 * otherwise spin through the holder's whole time slice.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "baselines.h"

/* Like the kernel's struct, the lock and count share the slots' line. */
struct pcpu_counter {
	long count;			/* folded total, under lock */
	int lock;
	long *slots;			/* per-CPU */
	long batch;
	struct tally_domain *domain;	/* NULL: this machine */
} __attribute__((aligned(64)));

static void spin_lock(int *lock)
{
	unsigned int spins = 0;

	while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(lock, __ATOMIC_RELAXED)) {
			if (++spins % 256)
				__builtin_ia32_pause();
			else
				sched_yield();
		}
	}
}

static void spin_unlock(int *lock)
{
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

long pcpu_counter_default_batch(unsigned int nr_cpus)
{
	return 2l * nr_cpus > 32 ? 2l * nr_cpus : 32;
}

struct pcpu_counter *pcpu_counter_create(struct tally_domain *d, long batch)
{
	struct tally_domain *dom = d ? d : tally_domain_system();
	struct pcpu_counter *c;

	if (!dom)
		return NULL;
	c = aligned_alloc(64, sizeof(*c));
	if (!c)
		return NULL;
	c->slots = tally_percpu_alloc(d, sizeof(long), 0);
	if (!c->slots) {
		free(c);
		return NULL;
	}
	c->count = 0;
	c->lock = 0;
	c->batch = batch > 0 ? batch
			     : pcpu_counter_default_batch(
				       tally_domain_nr_cpus(dom));
	c->domain = d;
	return c;
}

void pcpu_counter_destroy(struct pcpu_counter *c)
{
	tally_percpu_free(c->domain, c->slots);
	free(c);
}

long pcpu_counter_batch(const struct pcpu_counter *c)
{
	return c->batch;
}

/*
 * Move @seen from a slot to the global count (see the top comment): from
 * the current CPU's slot when @cpu is negative, else from simulated CPU
 * @cpu's slot.
 */
static void fold(struct pcpu_counter *c, long seen, long cpu)
{
	unsigned int now;

	spin_lock(&c->lock);
	__atomic_store_n(&c->count, c->count + seen, __ATOMIC_RELAXED);
	if (cpu < 0)
		tally_percpu_add_return(c->slots, -seen, &now);
	else
		tally_percpu_add_return_cpu(c->slots, (unsigned int)cpu,
					    -seen);
	spin_unlock(&c->lock);
}

static void pcpu_counter_add(void *ctr, long inc)
{
	struct pcpu_counter *c = ctr;
	unsigned int cpu;
	long res = tally_percpu_add_return(c->slots, inc, &cpu);

	if (__builtin_expect(res >= c->batch || res <= -c->batch, 0))
		fold(c, res, -1);
}

void pcpu_counter_add_cpu(struct pcpu_counter *c, unsigned int cpu, long inc)
{
	long res = tally_percpu_add_return_cpu(c->slots, cpu, inc);

	if (res >= c->batch || res <= -c->batch)
		fold(c, res, cpu);
}

long pcpu_counter_read(const struct pcpu_counter *c)
{
	return __atomic_load_n(&c->count, __ATOMIC_RELAXED);
}

long pcpu_counter_sum(struct pcpu_counter *c)
{
	long sum;

	spin_lock(&c->lock);
	sum = c->count + bench_percpu_sum(c->slots,
					  c->domain ? c->domain
						    : tally_domain_system());
	spin_unlock(&c->lock);
	return sum;
}

static void *percpu_counter_create(void)
{
	return pcpu_counter_create(NULL, 0);
}

static void percpu_counter_destroy(void *ctr)
{
	pcpu_counter_destroy(ctr);
}

static void percpu_counter_run(void *ctr, unsigned long n)
{
	bench_add_loop(ctr, n, pcpu_counter_add);
}

static long percpu_counter_sum(void *ctr)
{
	return pcpu_counter_sum(ctr);
}

const struct bench_impl bench_impl_percpu_counter = {
	.name = "percpu_counter",
	.what = "kernel's classic per-CPU counter",
	.create = percpu_counter_create,
	.destroy = percpu_counter_destroy,
	.run = percpu_counter_run,
	.sum = percpu_counter_sum,
};
