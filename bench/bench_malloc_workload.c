// SPDX-License-Identifier: MIT
/*
 * bench_malloc_workload.c - `tally bench malloc`'s workload, its timing
 * and its accounting error, per design and thread count.
 *
 * Per thread: a working set of 1,024 slots; each operation allocates 16 B
 * to 64 KiB (an octave of 16 B .. 32 KiB chosen uniformly, then a size
 * uniformly within it, capped at 64 KiB), writes the size in the object's
 * first word, puts it in a slot (its own slot, or with probability 1/4 a
 * slot of the next thread) and frees what the slot held (so about a
 * quarter of the frees are cross-thread).  The switch design moves the
 * thread to the other of its two groups before every 16th allocation.
 * ns per pair = one malloc + one free, in CPU time of each thread
 * (thread_cpu_ns()), median of the repetitions (designs interleaved); a
 * switch costs 16 x (switch - tally) of them.  Then, with every thread stopped
 * holding its working set, the accounting error: each design's figure
 * minus the exact live bytes (the sum of the sizes in the slots): tally's
 * charge (exactly jemalloc's active and dirty pages of the group's
 * arenas, so against the live bytes its error is jemalloc's overhead:
 * size classes, partly used slabs, thread caches, and the dirty pages
 * until they are purged; shown after a purge too), the tracker's shared
 * counter (the bytes asked for, less what each thread has not flushed: up
 * to 4 MiB per thread either way).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_malloc.h"
#include "parallel.h"
#include "rand.h"

static const char *const design_names[NR_DESIGNS] = {
	"glibc", "jemalloc", "tally", "switch", "tracker",
};

/* The designs whose groups tally charges. */
static bool charged(enum design d)
{
	return d == TALLY || d == SWITCH;
}

/* One design at one thread count. */
struct job {
	enum design d;
	unsigned int threads;
	unsigned long n;
	_Atomic(uintptr_t) *slots;	/* threads x SLOTS */
	pthread_barrier_t barrier;
	uint64_t ns[MAX_THREADS];
	atomic_long tracked;		/* the tracker's shared counter */
	struct tally_memcg *groups[2];	/* tally: one; switch: two */
	unsigned int pin;
	/* At quiescence, after the timed loop of the last run. */
	long live, figure, active, purged;
};

static size_t next_size(uint64_t *rng)
{
	uint64_t r = bench_rand(rng);
	unsigned int octave = (unsigned int)(r % 12);	/* 16 B .. 32 KiB */
	size_t lo = (size_t)16 << octave;
	size_t sz = lo + (size_t)((r >> 8) % lo);

	return sz > 65536 ? 65536 : sz;
}

struct thread_state {
	long untracked;
};

static inline void *obj_alloc(struct job *j, struct thread_state *t,
			      size_t sz)
{
	size_t *p;

	if (j->d == GLIBC) {
		p = malloc(sz);
	} else {
		p = je.mallocx(sz, 0);
		if (j->d == TRACKER && p) {
			t->untracked += (long)sz;
			if (t->untracked > UNTRACKED_MAX) {
				atomic_fetch_add_explicit(&j->tracked,
							  t->untracked,
							  memory_order_relaxed);
				t->untracked = 0;
			}
		}
	}
	if (p)
		*p = sz;
	return p;
}

static inline void obj_free(struct job *j, struct thread_state *t, void *v)
{
	size_t *p = v;

	if (j->d == GLIBC) {
		free(p);
		return;
	}
	if (j->d == TRACKER) {
		t->untracked -= (long)*p;
		if (t->untracked < -UNTRACKED_MAX) {
			atomic_fetch_add_explicit(&j->tracked, t->untracked,
						  memory_order_relaxed);
			t->untracked = 0;
		}
	}
	je.dallocx(p, 0);
}

/*
 * The calling thread's CPU time: the machines this runs on are often
 * shared, and wall time would count the time a thread waits for a CPU
 * (page faults and the kernel's work for the allocator count: they are
 * the thread's).
 */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The drained charge of @j's groups (0 for none), -1 on failure. */
static long charge_of(const struct job *j)
{
	struct tally_memcg_range r;
	long sum = 0;

	for (int i = 0; i < 2 && j->groups[i]; i++) {
		if (je.usage(j->groups[i], TALLY_MEMCG_READ_DRAIN, &r))
			return -1;
		sum += r.value;
	}
	return sum;
}

static void measure_error(struct job *j)
{
	struct tally_jemalloc_stats st;
	long live = 0, charge;

	for (unsigned int i = 0; i < j->threads * SLOTS; i++) {
		size_t *p = (size_t *)atomic_load(&j->slots[i]);

		if (p)
			live += (long)*p;
	}
	j->live = live;
	j->figure = live;
	j->active = 0;
	if (j->d == TRACKER)
		j->figure = atomic_load(&j->tracked);
	if (charged(j->d) && (charge = charge_of(j)) >= 0) {
		j->figure = charge;
		for (int i = 0; i < 2 && j->groups[i]; i++) {
			if (!je.stats(j->groups[i], &st))
				j->active += st.active;
			/* Its dirty pages purged, a charge is its active pages. */
			(void)je.purge(j->groups[i]);
		}
		j->purged = charge_of(j);
	}
}

static void worker(void *arg, unsigned int index)
{
	struct job *j = arg;
	struct thread_state t = { 0 };
	_Atomic(uintptr_t) *mine = j->slots + index * SLOTS;
	_Atomic(uintptr_t) *next = j->slots +
		((index + 1) % j->threads) * SLOTS;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (index + 1);
	struct tally_memcg *save = NULL;
	uint64_t start;

	if (charged(j->d))
		save = je.set_current(j->groups[0]);
	for (unsigned int k = 0; k < SLOTS; k++)
		atomic_store(&mine[k], (uintptr_t)obj_alloc(j, &t,
							   next_size(&rng)));
	pthread_barrier_wait(&j->barrier);
	start = thread_cpu_ns();
	for (unsigned long i = 0; i < j->n; i++) {
		uint64_t r = bench_rand(&rng);
		_Atomic(uintptr_t) *s = (r & 3) == 0 ? next : mine;
		void *p;

		if (j->d == SWITCH && !(i % REQUEST_ALLOCS))
			je.set_current(j->groups[i / REQUEST_ALLOCS & 1]);
		p = obj_alloc(j, &t, next_size(&rng));
		void *old = (void *)atomic_exchange_explicit(
			&s[(r >> 2) % SLOTS], (uintptr_t)p,
			memory_order_acq_rel);

		if (old)
			obj_free(j, &t, old);
	}
	j->ns[index] = thread_cpu_ns() - start;
	/* Quiescence: every thread holds its working set. */
	if (pthread_barrier_wait(&j->barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
		measure_error(j);
	pthread_barrier_wait(&j->barrier);
	for (unsigned int k = 0; k < SLOTS; k++) {
		void *p = (void *)atomic_exchange(&mine[k], (uintptr_t)0);

		if (p)
			obj_free(j, &t, p);
	}
	if (j->d == TRACKER && t.untracked)
		atomic_fetch_add(&j->tracked, t.untracked);
	if (charged(j->d))
		je.set_current(save);
	else if (j->d != GLIBC)
		je.flush();
}

/*
 * A repetition's ns per operation from its threads' times, or -1 with a
 * message when bench_run_parallel() failed with @err.
 */
static double per_op_ns(int err, unsigned int threads, const uint64_t *ns,
			unsigned long n)
{
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			threads, strerror(-err));
		return -1;
	}
	return bench_per_op_ns(ns, threads, n);
}

static double job_run(void *arg, unsigned long n)
{
	struct job *j = arg;
	int err;

	j->n = n;
	atomic_store(&j->tracked, 0);
	pthread_barrier_init(&j->barrier, NULL, j->threads);
	err = bench_run_parallel(j->threads, worker, j, NULL, j->pin);
	pthread_barrier_destroy(&j->barrier);
	return per_op_ns(err, j->threads, j->ns, n);
}

void print_header(struct run *r)
{
	fprintf(r->out, "\nns of CPU time per malloc + free pair, per thread "
		"(median of %u); ratio to jemalloc alone\n", r->reps);
	fprintf(r->out, "%-8s", "threads");
	for (int d = 0; d < NR_DESIGNS; d++)
		fprintf(r->out, " %10s", design_names[d]);
	fprintf(r->out, " %10s %11s %11s %9s\n", "tally/jem", "switch/jem",
		"tracker/jem", "ns/switch");
}

/* One switch: what a request of the switch design costs more than tally's. */
static double switch_ns(const struct bench_result *res)
{
	return (res[SWITCH].median - res[TALLY].median) * REQUEST_ALLOCS;
}

static void print_row(struct run *r, unsigned int threads,
		      const struct bench_result *res)
{
	fprintf(r->out, "%-8u", threads);
	for (int d = 0; d < NR_DESIGNS; d++)
		fprintf(r->out, " %10.1f", res[d].median);
	fprintf(r->out, " %10.3f %11.3f %11.3f %9.0f\n", res[TALLY].median /
		res[JEMALLOC].median, res[SWITCH].median /
		res[JEMALLOC].median, res[TRACKER].median /
		res[JEMALLOC].median, switch_ns(res));
}

static void print_error(struct run *r, unsigned int threads,
			const struct job *jobs)
{
	for (int d = TALLY; d <= SWITCH; d++)
		fprintf(r->out, "  %s: live %ld bytes at quiescence, charged "
			"%+ld (active %ld + dirty %ld pages), %+ld after a "
			"purge\n", design_names[d], jobs[d].live,
			jobs[d].figure - jobs[d].live, jobs[d].active,
			jobs[d].figure - jobs[d].active,
			jobs[d].purged - jobs[d].live);
	fprintf(r->out, "  tracker: live %ld bytes, counted %+ld (bound "
		"+-%ld)\n", jobs[TRACKER].live,
		jobs[TRACKER].figure - jobs[TRACKER].live,
		(long)threads * UNTRACKED_MAX);
}

static void json_row(struct run *r, unsigned int threads,
		     const struct bench_result *res, const struct job *jobs)
{
	struct bench_json *w = &r->json;

	for (int d = 0; d < NR_DESIGNS; d++) {
		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "design", design_names[d]);
		bench_json_int(w, "threads", threads);
		bench_json_double(w, "ns_per_pair", res[d].median);
		bench_json_double(w, "ns_min", res[d].min);
		bench_json_double(w, "ns_max", res[d].max);
		bench_json_double(w, "ratio_to_jemalloc",
				  res[d].median / res[JEMALLOC].median);
		bench_json_int(w, "live_bytes", jobs[d].live);
		if (charged((enum design)d) || d == TRACKER)
			bench_json_int(w, "accounting_error",
				       jobs[d].figure - jobs[d].live);
		if (d == SWITCH)
			bench_json_double(w, "ns_per_switch", switch_ns(res));
		if (charged((enum design)d)) {
			bench_json_int(w, "jemalloc_active", jobs[d].active);
			bench_json_int(w, "error_after_purge",
				       jobs[d].purged - jobs[d].live);
		}
		if (d == TRACKER)
			bench_json_int(w, "error_bound",
				       (long)threads * UNTRACKED_MAX);
		bench_json_end(w);
	}
}

int measure(struct run *r, unsigned int threads)
{
	struct job *jobs = calloc(NR_DESIGNS, sizeof(*jobs));
	struct bench_job set[NR_DESIGNS];
	struct bench_result res[NR_DESIGNS];
	int err = 0;

	if (!jobs)
		return -1;
	for (int d = 0; d < NR_DESIGNS && !err; d++) {
		jobs[d].d = (enum design)d;
		jobs[d].threads = threads;
		if (d == TALLY)
			jobs[d].groups[0] = r->group;
		if (d == SWITCH)
			memcpy(jobs[d].groups, r->tenants,
			       sizeof(jobs[d].groups));
		jobs[d].pin = r->pin;
		jobs[d].slots = calloc(threads * SLOTS, sizeof(uintptr_t));
		if (!jobs[d].slots)
			err = -1;
		set[d] = (struct bench_job){ job_run, &jobs[d] };
	}
	if (!err)
		err = bench_measure_set(set, NR_DESIGNS, &r->plan, res);
	if (!err) {
		print_row(r, threads, res);
		print_error(r, threads, jobs);
		json_row(r, threads, res, jobs);
	}
	for (int d = 0; d < NR_DESIGNS; d++)
		free(jobs[d].slots);
	free(jobs);
	return err;
}

/* tally_jemalloc_set_current() of the group each thread is in already. */
struct rebind_job {
	struct tally_memcg *group;
	unsigned int threads, pin;
	unsigned long n;
	uint64_t ns[MAX_THREADS];
};

static void rebind_worker(void *arg, unsigned int index)
{
	struct rebind_job *j = arg;
	struct tally_memcg *save = je.set_current(j->group);
	uint64_t start = thread_cpu_ns();

	for (unsigned long i = 0; i < j->n; i++)
		je.set_current(j->group);
	j->ns[index] = thread_cpu_ns() - start;
	je.set_current(save);
}

static double rebind_run(void *arg, unsigned long n)
{
	struct rebind_job *j = arg;
	int err;

	j->n = n;
	err = bench_run_parallel(j->threads, rebind_worker, j, NULL, j->pin);
	return per_op_ns(err, j->threads, j->ns, n);
}

void print_rebind_header(struct run *r)
{
	fprintf(r->out, "\nns of CPU time per tally_jemalloc_set_current() of "
		"the group the thread is in,\nper thread (median of %u "
		"[min-max]): what a server pays to set each request's\n"
		"tenant when its threads serve one tenant each\n", r->reps);
	fprintf(r->out, "%-8s %10s\n", "threads", "ns");
}

int measure_rebind(struct run *r, unsigned int threads)
{
	struct rebind_job j = { .group = r->group, .threads = threads,
				.pin = r->pin };
	struct bench_job job = { rebind_run, &j };
	struct bench_result res;

	if (bench_measure_set(&job, 1, &r->plan, &res))
		return -1;
	fprintf(r->out, "%-8u %10.1f [%.1f-%.1f]\n", threads, res.median,
		res.min, res.max);
	bench_json_begin(&r->json, NULL, '{', true);
	bench_json_int(&r->json, "threads", threads);
	bench_json_double(&r->json, "ns_per_call", res.median);
	bench_json_double(&r->json, "ns_min", res.min);
	bench_json_double(&r->json, "ns_max", res.max);
	bench_json_end(&r->json);
	return 0;
}
