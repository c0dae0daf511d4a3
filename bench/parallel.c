// SPDX-License-Identifier: MIT
/*
 * parallel.c - threads released together by a barrier (parallel.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>

#include "measure.h"
#include "parallel.h"

struct parallel {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
	bool abort;
	pthread_barrier_t start;
	bench_thread_fn fn;
	void *arg;
	uint64_t *elapsed_ns;
	cpu_set_t allowed;		/* CPUs to pin to */
	unsigned int nr_allowed;	/* 0: do not pin */
};

struct parallel_thread {
	struct parallel *p;
	unsigned int index;
	pthread_t tid;
};

/* Bind the calling thread to the @nth CPU of @allowed. */
static void pin_to(const cpu_set_t *allowed, unsigned int nth)
{
	cpu_set_t one;

	for (unsigned int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, allowed) || nth--)
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* Failure leaves the thread unbound: still a valid run. */
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
		return;
	}
}

static void *parallel_main(void *v)
{
	struct parallel_thread *t = v;
	struct parallel *p = t->p;
	uint64_t start;
	bool abort;

	/* Wait until every thread exists (or creating one failed). */
	pthread_mutex_lock(&p->lock);
	while (!p->go)
		pthread_cond_wait(&p->cond, &p->lock);
	abort = p->abort;
	pthread_mutex_unlock(&p->lock);
	if (abort)
		return NULL;
	if (p->nr_allowed)
		pin_to(&p->allowed, t->index % p->nr_allowed);
	pthread_barrier_wait(&p->start);
	start = bench_now_ns();
	p->fn(p->arg, t->index);
	if (p->elapsed_ns)
		p->elapsed_ns[t->index] = bench_now_ns() - start;
	return NULL;
}

static void parallel_release(struct parallel *p, bool abort)
{
	pthread_mutex_lock(&p->lock);
	p->go = true;
	p->abort = abort;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

int bench_run_parallel(unsigned int nr, bench_thread_fn fn, void *arg,
		       uint64_t *elapsed_ns, unsigned int flags)
{
	struct parallel p = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
		.fn = fn,
		.arg = arg,
		.elapsed_ns = elapsed_ns,
	};
	struct parallel_thread *t = calloc(nr, sizeof(*t));
	unsigned int created;
	int err = 0;

	if (!t)
		return -ENOMEM;
	if ((flags & BENCH_PIN) &&
	    !sched_getaffinity(0, sizeof(p.allowed), &p.allowed))
		p.nr_allowed = (unsigned int)CPU_COUNT(&p.allowed);
	err = -pthread_barrier_init(&p.start, NULL, nr);
	if (err) {
		free(t);
		return err;
	}
	for (created = 0; created < nr; created++) {
		t[created].p = &p;
		t[created].index = created;
		err = -pthread_create(&t[created].tid, NULL, parallel_main,
				      &t[created]);
		if (err)
			break;
	}
	parallel_release(&p, err != 0);
	for (unsigned int i = 0; i < created; i++)
		pthread_join(t[i].tid, NULL);
	pthread_barrier_destroy(&p.start);
	free(t);
	return err;
}
