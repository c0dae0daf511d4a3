// SPDX-License-Identifier: MIT
/*
 * bench_malloc.c - `tally bench malloc`: what accounting every allocation
 * costs in a malloc-heavy workload, four ways in one run:
 *
 *   glibc       glibc's malloc() and free() (the tool's own allocator);
 *   jemalloc    jemalloc alone: mallocx() and dallocx(), threads on its
 *               automatic arenas;
 *   tally       jemalloc with tally's accounting (tally/jemalloc.h):
 *               the threads are in one memory group, the group's arenas
 *               charge it a page at a time through their extent hooks;
 *   tracker     jemalloc with a ClickHouse-style MemoryTracker: each
 *               thread adds every allocation's size to a thread-local
 *               "untracked" count and moves it to a shared atomic when it
 *               passes 4 MiB either way.
 *
 * jemalloc and glibc cannot both be the malloc of one process.  The tool
 * keeps glibc's, and loads jemalloc (with libtally_jemalloc and a second
 * libtally, found beside the tool) with dlopen(RTLD_LOCAL): their symbols
 * stay out of the global scope, so nothing else binds to jemalloc's
 * malloc, and the rows call jemalloc through mallocx()/dallocx() (names
 * glibc does not define) found with dlsym() on that handle.  Debian's
 * jemalloc is built with initial-exec TLS, which a dlopen() can place only
 * in glibc's static TLS surplus: when the default surplus is too small
 * the benchmark runs itself again with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536.
 *
 * Workload, per thread: a working set of 1,024 slots; each operation
 * allocates 16 B to 64 KiB (an octave of 16 B .. 32 KiB chosen uniformly,
 * then a size uniformly within it, capped at 64 KiB), writes the size in
 * the object's first word, puts it in a slot (its own slot, or with
 * probability 1/4 a slot of the next thread) and frees what the slot held
 * (so about a quarter of the frees are cross-thread).  ns per pair = one
 * malloc + one free, in CPU time of each thread (thread_cpu_ns()), median
 * of the repetitions (designs interleaved).  Then, with every thread stopped holding its working set,
 * the accounting error: each design's figure minus the exact live bytes
 * (the sum of the sizes in the slots): tally's charge (exactly jemalloc's
 * active and dirty pages of the group's arenas, so against the live bytes
 * its error is jemalloc's overhead: size classes, partly used slabs,
 * thread caches, and the dirty pages until they are purged; shown after a
 * purge too), the tracker's shared counter (the bytes asked for, less
 * what each thread has not flushed: up to 4 MiB per thread either way).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "parallel.h"
#include "rand.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CMD "tally bench malloc"
#define SLOTS 1024u
#define MAX_THREADS 16
#define MAX_LIST 8
#define UNTRACKED_MAX (4l << 20)
#define TLS_TUNABLE "glibc.rtld.optional_static_tls=65536"

enum design { GLIBC, JEMALLOC, TALLY, TRACKER, NR_DESIGNS };
static const char *const design_names[NR_DESIGNS] = {
	"glibc", "jemalloc", "tally", "tracker",
};

/* jemalloc and the libtally behind libtally_jemalloc, from dlopen(). */
static struct {
	void *(*mallocx)(size_t, int);
	void (*dallocx)(void *, int);
	int (*tree_create)(struct tally_memcg_tree **,
			   const struct tally_memcg_options *);
	struct tally_memcg *(*root)(struct tally_memcg_tree *);
	int (*create)(struct tally_memcg *, const char *,
		      struct tally_memcg **);
	int (*usage)(struct tally_memcg *, enum tally_memcg_read_mode,
		     struct tally_memcg_range *);
	int (*init)(const struct tally_jemalloc_options *);
	struct tally_memcg *(*set_current)(struct tally_memcg *);
	int (*stats)(struct tally_memcg *, struct tally_jemalloc_stats *);
	int (*flush)(void);
	int (*purge)(struct tally_memcg *);
} je;

struct run {
	unsigned int threads[MAX_LIST], nr_threads;
	unsigned int reps;
	unsigned int pin;
	bool quick;
	struct bench_plan plan;
	const char *json_path;
	struct bench_json json;
	FILE *out;
	struct tally_memcg *group;
};

/* One design at one thread count. */
struct job {
	enum design d;
	unsigned int threads;
	unsigned long n;
	_Atomic(uintptr_t) *slots;	/* threads x SLOTS */
	pthread_barrier_t barrier;
	uint64_t ns[MAX_THREADS];
	atomic_long tracked;		/* the tracker's shared counter */
	struct tally_memcg *group;
	unsigned int pin;
	/* At quiescence, after the timed loop of the last run. */
	long live, figure, active, purged;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench malloc [--json FILE] [--threads LIST] [--reps N]\n"
		"                          [--no-pin] [--quick]\n"
		"\n"
		"A malloc-heavy workload (16 B to 64 KiB, a quarter of the frees\n"
		"cross-thread) with glibc malloc, jemalloc alone, jemalloc with tally's\n"
		"accounting (tally/jemalloc.h) and jemalloc with a ClickHouse-style\n"
		"per-thread tracker.  Prints ns per malloc + free pair with the ratio\n"
		"to jemalloc alone, and each design's accounting error against the exact\n"
		"live bytes at quiescence.  Needs libtally_jemalloc.so beside the tool\n"
		"(or installed) and jemalloc.\n"
		"\n"
		"  --json FILE      also write the figures as JSON to FILE; \"-\" means\n"
		"                   standard output (the tables then go to standard error)\n"
		"  --threads LIST   thread counts, 1 to %d (default 2,4)\n"
		"  --reps N         repetitions per figure, the median reported, 1 to 32\n"
		"                   (default 7; --quick: 3)\n"
		"  --no-pin         do not pin thread i to the i-th allowed CPU\n"
		"  --quick          short runs: a quick look, noisier figures\n"
		"  -h, --help       show this help\n", MAX_THREADS);
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;
	unsigned long one;

	switch (opt) {
	case 'j':
		r->json_path = arg;
		break;
	case 't':
		return tool_opt_list(arg, r->threads, MAX_LIST, 1, MAX_THREADS,
				     &r->nr_threads);
	case 'r':
		if (tool_opt_uint(arg, 1, BENCH_MAX_REPS, &one))
			return -1;
		r->reps = (unsigned int)one;
		break;
	case 'P':
		r->pin = 0;
		break;
	case 'q':
		r->quick = true;
		break;
	}
	return 0;
}

static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },
		{ "no-pin", no_argument, NULL, 'P' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"bench malloc", usage, "", longopts, option, false
	};
	int err;

	r->pin = BENCH_PIN;
	err = tool_parse_options(&cmd, argc, argv, r, NULL);
	if (err)
		return err;
	if (!r->nr_threads) {
		r->nr_threads = 2;
		r->threads[0] = 2;
		r->threads[1] = 4;
	}
	if (!r->reps)
		r->reps = r->quick ? 3 : 7;
	r->plan.target_ns = r->quick ? 20000000 : 200000000;
	r->plan.reps = r->reps;
	r->plan.min_n = 4096;
	return 0;
}

/* ---- loading jemalloc --------------------------------------------------- */

static void *sym(void *h, const char *name, bool *ok)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "tally: %s: %s\n", CMD, dlerror());
		*ok = false;
	}
	return p;
}

/* Run the tool again with a larger static TLS surplus (see the top). */
static void rerun_with_tls(int argc, char **argv)
{
	const char *old = getenv("GLIBC_TUNABLES");
	char *tun = malloc((old ? strlen(old) : 0) + sizeof(TLS_TUNABLE) + 1);
	char **args = calloc((size_t)argc + 3, sizeof(char *));

	if (!tun || !args || (old && strstr(old, TLS_TUNABLE)))
		return;		/* already tried: let the caller fail */
	sprintf(tun, "%s%s%s", old ? old : "", old && *old ? ":" : "",
		TLS_TUNABLE);
	setenv("GLIBC_TUNABLES", tun, 1);
	args[0] = (char *)"tally";
	args[1] = (char *)"bench";
	for (int i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	fflush(NULL);
	execv("/proc/self/exe", args);
}

static int load_jemalloc(int argc, char **argv)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h = NULL;
	bool ok = true;

	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');

		if (slash) {
			*slash = 0;
			snprintf(path, sizeof(path), "%s/libtally_jemalloc.so",
				 exe);
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (!h) {
		const char *e = dlerror();

		if (e && strstr(e, "static TLS"))
			rerun_with_tls(argc, argv);
		h = dlopen(TALLY_LIBDIR "/libtally_jemalloc.so",
			   RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		const char *e = dlerror();

		if (e && strstr(e, "static TLS"))
			rerun_with_tls(argc, argv);
		fprintf(stderr, "tally: %s: cannot load libtally_jemalloc.so: "
			"%s\n", CMD, e ? e : "not found");
		return -1;
	}
	je.mallocx = (void *(*)(size_t, int))sym(h, "mallocx", &ok);
	je.dallocx = (void (*)(void *, int))sym(h, "dallocx", &ok);
	*(void **)&je.tree_create = sym(h, "tally_memcg_tree_create", &ok);
	*(void **)&je.root = sym(h, "tally_memcg_root", &ok);
	*(void **)&je.create = sym(h, "tally_memcg_create", &ok);
	*(void **)&je.usage = sym(h, "tally_memcg_usage", &ok);
	*(void **)&je.init = sym(h, "tally_jemalloc_init", &ok);
	*(void **)&je.set_current = sym(h, "tally_jemalloc_set_current", &ok);
	*(void **)&je.stats = sym(h, "tally_jemalloc_stats", &ok);
	*(void **)&je.flush = sym(h, "tally_jemalloc_flush", &ok);
	*(void **)&je.purge = sym(h, "tally_jemalloc_purge", &ok);
	return ok ? 0 : -1;
}

/* ---- the workload ------------------------------------------------------- */

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

static void measure_error(struct job *j)
{
	struct tally_jemalloc_stats st;
	struct tally_memcg_range r;
	long live = 0;

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
	if (j->d == TALLY && !je.usage(j->group, TALLY_MEMCG_READ_DRAIN, &r)) {
		j->figure = r.value;
		if (!je.stats(j->group, &st))
			j->active = st.active;
		/* The dirty pages purged, the charge is the active pages. */
		if (!je.purge(j->group) &&
		    !je.usage(j->group, TALLY_MEMCG_READ_DRAIN, &r))
			j->purged = r.value;
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

	if (j->d == TALLY)
		save = je.set_current(j->group);
	for (unsigned int k = 0; k < SLOTS; k++)
		atomic_store(&mine[k], (uintptr_t)obj_alloc(j, &t,
							   next_size(&rng)));
	pthread_barrier_wait(&j->barrier);
	start = thread_cpu_ns();
	for (unsigned long i = 0; i < j->n; i++) {
		uint64_t r = bench_rand(&rng);
		_Atomic(uintptr_t) *s = (r & 3) == 0 ? next : mine;
		void *p = obj_alloc(j, &t, next_size(&rng));
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
	if (j->d == TALLY)
		je.set_current(save);
	else if (j->d != GLIBC)
		je.flush();
}

static double job_run(void *arg, unsigned long n)
{
	struct job *j = arg;
	uint64_t sum = 0;
	int err;

	j->n = n;
	atomic_store(&j->tracked, 0);
	pthread_barrier_init(&j->barrier, NULL, j->threads);
	err = bench_run_parallel(j->threads, worker, j, NULL, j->pin);
	pthread_barrier_destroy(&j->barrier);
	if (err) {
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
		return -1;
	}
	for (unsigned int i = 0; i < j->threads; i++)
		sum += j->ns[i];
	return (double)sum / j->threads / (double)n;
}

/* ---- output ------------------------------------------------------------- */

static void print_header(struct run *r)
{
	fprintf(r->out, "\nns of CPU time per malloc + free pair, per thread "
		"(median of %u); ratio to jemalloc alone\n", r->reps);
	fprintf(r->out, "%-8s", "threads");
	for (int d = 0; d < NR_DESIGNS; d++)
		fprintf(r->out, " %10s", design_names[d]);
	fprintf(r->out, " %12s %12s\n", "tally/jem", "tracker/jem");
}

static void print_row(struct run *r, unsigned int threads,
		      const struct bench_result *res)
{
	fprintf(r->out, "%-8u", threads);
	for (int d = 0; d < NR_DESIGNS; d++)
		fprintf(r->out, " %10.1f", res[d].median);
	fprintf(r->out, " %12.3f %12.3f\n", res[TALLY].median /
		res[JEMALLOC].median, res[TRACKER].median /
		res[JEMALLOC].median);
}

static void print_error(struct run *r, unsigned int threads,
			const struct job *jobs)
{
	fprintf(r->out, "  error at quiescence: live %ld bytes; tally %+ld "
		"(active %ld + dirty %ld pages), %+ld after a purge; tracker "
		"%+ld (bound +-%ld)\n", jobs[TALLY].live, jobs[TALLY].figure -
		jobs[TALLY].live, jobs[TALLY].active, jobs[TALLY].figure -
		jobs[TALLY].active, jobs[TALLY].purged - jobs[TALLY].live,
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
		if (d == TALLY || d == TRACKER)
			bench_json_int(w, "accounting_error",
				       jobs[d].figure - jobs[d].live);
		if (d == TALLY) {
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

static int measure(struct run *r, unsigned int threads)
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
		jobs[d].group = r->group;
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

int tally_bench_malloc(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct tally_memcg_tree *tree;
	struct tally_jemalloc_options opts = { 0 };
	struct bench_machine m;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int err;

	if (!r) {
		fprintf(stderr, "tally: out of memory\n");
		return 1;
	}
	err = parse_options(r, argc, argv);
	if (err) {
		free(r);
		return err > 0 ? 0 : 2;
	}
	if (load_jemalloc(argc, argv) || bench_json_open(&r->json,
							 r->json_path)) {
		free(r);
		return 1;
	}
	/* As many arenas for the group as jemalloc has automatic ones. */
	opts.arenas_per_group = (unsigned int)(ncpu < 1 ? 4 : ncpu > 16 ?
					       64 : 4 * ncpu);
	err = je.tree_create(&tree, NULL);
	if (!err)
		err = je.create(je.root(tree), "bench", &r->group);
	if (!err)
		err = je.init(&opts);
	if (err) {
		fprintf(stderr, "tally: %s: cannot set up tally's accounting: "
			"%s\n", CMD, strerror(-err));
		bench_json_close(&r->json);
		free(r);
		return 1;
	}
	r->out = r->json.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(r->out, "%s%s\n", CMD, r->quick ? " (quick)" : "");
	bench_machine_print(r->out, &m);
	bench_json_begin(&r->json, NULL, '{', false);
	bench_json_identity(&r->json, "malloc");
	bench_machine_json(&r->json, &m);
	bench_json_begin(&r->json, "settings", '{', false);
	bench_json_int(&r->json, "slots_per_thread", SLOTS);
	bench_json_int(&r->json, "min_size", 16);
	bench_json_int(&r->json, "max_size", 65536);
	bench_json_double(&r->json, "cross_thread_share", 0.25);
	bench_json_int(&r->json, "tracker_untracked_bytes", UNTRACKED_MAX);
	bench_json_int(&r->json, "tally_arenas", opts.arenas_per_group);
	bench_json_int(&r->json, "reps", r->reps);
	bench_json_bool(&r->json, "quick", r->quick);
	bench_json_end(&r->json);
	print_header(r);
	bench_json_begin(&r->json, "malloc", '[', false);
	for (unsigned int t = 0; t < r->nr_threads && !err; t++) {
		err = measure(r, r->threads[t]);
		fflush(r->out);
	}
	bench_json_end(&r->json);
	if (!err) {
		double load;

		fprintf(r->out, "\ntally charges pages, exactly jemalloc's "
			"active + dirty pages of the group's arenas:\n"
			"against the live bytes that adds jemalloc's overhead "
			"(size classes, slabs, caches)\nand the dirty pages "
			"until they are purged; the tracker counts the bytes "
			"asked for,\nbut misses what each thread has not "
			"flushed (up to %ld MiB a thread).\n",
			UNTRACKED_MAX >> 20);
		if (getloadavg(&load, 1) == 1)
			fprintf(r->out, "load average (1 min) at the end: "
				"%.2f\n", load);
	} else {
		fprintf(stderr, "tally: benchmark stopped\n");
	}
	if (bench_json_close(&r->json))
		err = -1;
	free(r);
	return err ? 1 : 0;
}
