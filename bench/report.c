// SPDX-License-Identifier: MIT
/*
 * report.c - timing, threads, JSON and target checks shared by the
 * benchmarks (report.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <tally/domain.h>
#include <tally/percpu.h>
#include "report.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

double bench_median(const double *v, size_t n)
{
	double s[BENCH_MAX_REPS];

	if (!n)
		return 0;
	if (n > BENCH_MAX_REPS)
		n = BENCH_MAX_REPS;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), compare_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

unsigned long bench_calibrate(bench_run_fn run, void *arg,
			      const struct bench_plan *plan)
{
	unsigned long n = plan->min_n ? plan->min_n : 1;
	double elapsed, scale;

	for (;;) {
		double ns = run(arg, n);

		if (ns < 0)
			return 0;
		elapsed = ns * (double)n;
		if (elapsed * 8 >= (double)plan->target_ns || n >= 1ul << 40)
			break;
		scale = elapsed > 0 ? (double)plan->target_ns / elapsed : 16;
		n = (unsigned long)((double)n * fmin(fmax(scale, 2), 16));
	}
	scale = elapsed > 0 ? (double)plan->target_ns / elapsed : 1;
	n = (unsigned long)fmax((double)n * scale, (double)plan->min_n);
	return n ? n : 1;
}

void bench_summarize(const double *v, unsigned int reps, unsigned long n,
		     struct bench_result *res)
{
	if (reps > BENCH_MAX_REPS)
		reps = BENCH_MAX_REPS;
	res->median = bench_median(v, reps);
	res->min = v[0];
	res->max = v[0];
	for (unsigned int i = 1; i < reps; i++) {
		res->min = fmin(res->min, v[i]);
		res->max = fmax(res->max, v[i]);
	}
	res->n = n;
}

int bench_measure_set(const struct bench_job *jobs, unsigned int nr,
		      const struct bench_plan *plan, struct bench_result *res)
{
	unsigned int reps = plan->reps;
	double (*v)[BENCH_MAX_REPS] = calloc(nr, sizeof(*v));
	unsigned long *n = calloc(nr, sizeof(*n));
	int err = 0;

	if (reps < 1)
		reps = 1;
	if (reps > BENCH_MAX_REPS)
		reps = BENCH_MAX_REPS;
	if (!v || !n) {
		fprintf(stderr, "tally: out of memory\n");
		err = -1;
	}
	for (unsigned int i = 0; i < nr && !err; i++) {
		n[i] = bench_calibrate(jobs[i].run, jobs[i].arg, plan);
		err = n[i] ? 0 : -1;
	}
	for (unsigned int rep = 0; rep < reps && !err; rep++) {
		for (unsigned int i = 0; i < nr && !err; i++) {
			v[i][rep] = jobs[i].run(jobs[i].arg, n[i]);
			err = v[i][rep] < 0 ? -1 : 0;
		}
	}
	for (unsigned int i = 0; i < nr && !err; i++)
		bench_summarize(v[i], reps, n[i], &res[i]);
	free(v);
	free(n);
	return err;
}

int bench_measure(bench_run_fn run, void *arg, const struct bench_plan *plan,
		  struct bench_result *res)
{
	const struct bench_job job = { .run = run, .arg = arg };

	return bench_measure_set(&job, 1, plan, res);
}

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

uint64_t bench_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int bench_parse_list(const char *s, unsigned int *out, unsigned int max,
		     unsigned int lo, unsigned int hi)
{
	unsigned int nr = 0;

	for (;;) {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || v < lo || v > hi || nr == max)
			return -1;
		out[nr++] = (unsigned int)v;
		if (!*end)
			return (int)nr;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

static void read_cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		colon += 1 + strspn(colon + 1, " \t");
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

static const char *rseq_mode_name(enum tally_rseq_mode mode)
{
	switch (mode) {
	case TALLY_RSEQ_GLIBC:
		return "glibc";
	case TALLY_RSEQ_OWN:
		return "own";
	case TALLY_RSEQ_FALLBACK:
		return "fallback";
	}
	return "unknown";
}

void bench_machine_get(struct bench_machine *m)
{
	struct tally_domain *d = tally_domain_system();
	struct utsname u;
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	read_cpu_model(m->cpu_model, sizeof(m->cpu_model));
	m->possible_cpus = d ? tally_domain_nr_cpus(d) : 0;
	m->online_cpus = online > 0 ? (unsigned int)online : 0;
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s %s", u.sysname,
			 u.release);
	else
		snprintf(m->kernel, sizeof(m->kernel), "unknown");
	m->rseq = rseq_mode_name(tally_rseq_mode());
	if (getloadavg(&m->loadavg, 1) != 1)
		m->loadavg = -1;
#if defined(__clang__)
	m->compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
	m->compiler = "gcc " __VERSION__;
#else
	m->compiler = "unknown";
#endif
}

void bench_machine_print(FILE *f, const struct bench_machine *m)
{
	fprintf(f,
		"machine: %s, %u possible CPUs (%u online), %s, rseq %s, %s, load %.2f\n",
		m->cpu_model, m->possible_cpus, m->online_cpus, m->kernel,
		m->rseq, m->compiler, m->loadavg);
}

int bench_json_open(struct bench_json *w, const char *path)
{
	memset(w, 0, sizeof(*w));
	if (!path)
		return 0;
	if (!strcmp(path, "-")) {
		w->f = stdout;
		return 0;
	}
	w->f = fopen(path, "w");
	if (!w->f) {
		fprintf(stderr, "tally: cannot create %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	w->owns = true;
	return 0;
}

int bench_json_close(struct bench_json *w)
{
	int err;

	if (!w->f)
		return 0;
	while (w->depth)
		bench_json_end(w);
	fputc('\n', w->f);
	err = ferror(w->f);
	if (w->owns)
		err |= fclose(w->f);
	else
		err |= fflush(w->f);
	w->f = NULL;
	if (err) {
		fprintf(stderr, "tally: writing the JSON output failed\n");
		return -1;
	}
	return 0;
}

static void json_escaped(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_indent(FILE *f, unsigned int depth)
{
	fputc('\n', f);
	for (unsigned int i = 0; i < depth; i++)
		fputs("  ", f);
}

/* Separator, layout and key before a member of the innermost container. */
static void json_member(struct bench_json *w, const char *key)
{
	unsigned int top = w->depth - 1;

	if (!w->depth)
		return;
	if (w->count[top]++)
		fputc(',', w->f);
	if (!w->oneline[top])
		json_indent(w->f, w->depth);
	else if (w->count[top] > 1)
		fputc(' ', w->f);
	if (key) {
		json_escaped(w->f, key);
		fputs(": ", w->f);
	}
}

void bench_json_begin(struct bench_json *w, const char *key, char kind,
		      bool oneline)
{
	if (!w->f || w->depth == BENCH_JSON_DEPTH)
		return;
	json_member(w, key);
	fputc(kind, w->f);
	w->oneline[w->depth] = oneline ||
			       (w->depth && w->oneline[w->depth - 1]);
	w->close[w->depth] = kind == '{' ? '}' : ']';
	w->count[w->depth] = 0;
	w->depth++;
}

void bench_json_end(struct bench_json *w)
{
	if (!w->f || !w->depth)
		return;
	w->depth--;
	if (!w->oneline[w->depth] && w->count[w->depth])
		json_indent(w->f, w->depth);
	fputc(w->close[w->depth], w->f);
}

void bench_json_string(struct bench_json *w, const char *key, const char *v)
{
	if (!w->f)
		return;
	json_member(w, key);
	json_escaped(w->f, v);
}

void bench_json_int(struct bench_json *w, const char *key, long long v)
{
	if (!w->f)
		return;
	json_member(w, key);
	fprintf(w->f, "%lld", v);
}

void bench_json_double(struct bench_json *w, const char *key, double v)
{
	if (!w->f)
		return;
	json_member(w, key);
	if (!isfinite(v))
		fputs("null", w->f);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(w->f, "%.0f", v);
	else
		fprintf(w->f, "%.6g", v);
}

void bench_json_bool(struct bench_json *w, const char *key, bool v)
{
	if (!w->f)
		return;
	json_member(w, key);
	fputs(v ? "true" : "false", w->f);
}

void bench_machine_json(struct bench_json *w, const struct bench_machine *m)
{
	bench_json_begin(w, "machine", '{', false);
	bench_json_string(w, "cpu_model", m->cpu_model);
	bench_json_int(w, "possible_cpus", m->possible_cpus);
	bench_json_int(w, "online_cpus", m->online_cpus);
	bench_json_string(w, "kernel", m->kernel);
	bench_json_string(w, "rseq", m->rseq);
	bench_json_string(w, "compiler", m->compiler);
	bench_json_double(w, "loadavg_1min", m->loadavg);
	bench_json_end(w);
}

bool bench_check(struct bench_checks *c, const char *what, double value,
		 double limit, enum bench_check_kind kind)
{
	bool pass = kind == BENCH_AT_MOST ? value <= limit : value >= limit;
	struct bench_check_item *it;

	/* A NaN value compares false both ways: it never passes. */
	if (c->nr == BENCH_MAX_CHECKS)
		return pass;
	it = &c->item[c->nr++];
	it->what = what;
	it->value = value;
	it->limit = limit;
	it->kind = kind;
	it->pass = pass;
	return pass;
}

void bench_checks_print(FILE *f, const struct bench_checks *c)
{
	for (unsigned int i = 0; i < c->nr; i++) {
		const struct bench_check_item *it = &c->item[i];

		fprintf(f, "%s  %-58s %7.2f  (target %s %.2f)\n",
			it->pass ? "PASS" : "MISS", it->what, it->value,
			it->kind == BENCH_AT_MOST ? "<=" : ">=", it->limit);
	}
}

void bench_checks_json(struct bench_json *w, const struct bench_checks *c)
{
	bench_json_begin(w, "targets", '[', false);
	for (unsigned int i = 0; i < c->nr; i++) {
		const struct bench_check_item *it = &c->item[i];

		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "target", it->what);
		bench_json_double(w, "value", it->value);
		bench_json_string(w, "compare",
				  it->kind == BENCH_AT_MOST ? "<=" : ">=");
		bench_json_double(w, "limit", it->limit);
		bench_json_bool(w, "pass", it->pass);
		bench_json_end(w);
	}
	bench_json_end(w);
}

int bench_bad_usage(const char *cmd, const char *what, const char *arg,
		    void (*usage)(FILE *f))
{
	fprintf(stderr, "%s: %s: '%s'\n", cmd, what, arg);
	usage(stderr);
	return -1;
}
