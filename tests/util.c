// SPDX-License-Identifier: MIT
/*
 * util.c - helpers shared by the tally tests (util.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

struct tally_domain *util_domain(unsigned int nr_cpus)
{
	struct tally_domain *d = NULL;

	if (tally_domain_create_simulated(&d, nr_cpus, TALLY_GROUP_LOW_BITS)) {
		fprintf(stderr, "cannot create a %u-CPU domain\n", nr_cpus);
		abort();
	}
	return d;
}

unsigned long util_span(const struct tally_domain *d, unsigned int level)
{
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned long span = 1;

	tally_domain_shape(d, arity);
	for (unsigned int l = 0; l <= level; l++)
		span *= arity[l];
	return span;
}

unsigned int util_item_of(const struct tally_domain *d, unsigned int cpu,
			  unsigned int level)
{
	return (unsigned int)tally_domain_cpu_position(d, cpu) /
	       (unsigned int)util_span(d, level);
}

unsigned long util_under(const struct tally_counter *c)
{
	unsigned long under = 0, over = 0;

	tally_counter_approximate_accuracy_range(c, &under, &over);
	return under;
}

unsigned long util_gap(const struct tally_counter *c)
{
	return (unsigned long)tally_counter_precise_sum(c) -
	       (unsigned long)tally_counter_approximate_sum(c);
}

long util_slot(const struct tally_counter *c, unsigned int cpu)
{
	return tally_percpu_read_cpu(c->level0, cpu);
}

unsigned long util_expected_top(const struct tally_counter *c)
{
	const struct tally_domain *d = c->domain;
	unsigned int nr_cpus = tally_domain_nr_cpus(d);
	unsigned int arity[TALLY_MAX_LEVELS];
	unsigned int levels = tally_domain_shape(d, arity);
	unsigned long *below, *above, step = c->batch, top = 0;
	unsigned long nr_below = 1;

	/* Level-l items indexed by position / span(l); the leaves first. */
	while (nr_below < nr_cpus)
		nr_below *= 2;
	below = calloc(nr_below, sizeof(*below));
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++)
		below[tally_domain_cpu_position(d, cpu)] =
			(unsigned long)util_slot(c, cpu);
	for (unsigned int l = 0; l < levels; l++) {
		unsigned long nr_above = nr_below / arity[l];

		above = calloc(nr_above, sizeof(*above));
		for (unsigned long i = 0; i < nr_below; i++)
			above[i / arity[l]] += below[i] & ~(step - 1);
		free(below);
		below = above;
		nr_below = nr_above;
		step *= arity[l];
	}
	/* The top level: a root, or a few items on small domains. */
	for (unsigned long i = 0; i < nr_below; i++)
		top += below[i];
	free(below);
	return top;
}

/*
 * @sub/@name in the nearest directory above the test binary that has it
 * (into @path), or @sub/@name relative to the working directory.
 */
static const char *find_upward(const char *sub, const char *name,
			       char *path, size_t len)
{
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	struct stat st;

	if (n < 0)
		n = 0;
	dir[n] = '\0';
	while (n > 0) {
		char *slash = strrchr(dir, '/');

		if (!slash)
			break;
		*slash = '\0';
		snprintf(path, len, "%s/%s/%s", dir, sub, name);
		if (!stat(path, &st))
			return path;
		n = slash - dir;
	}
	snprintf(path, len, "%s/%s", sub, name);
	return path;
}

const char *util_fixture(const char *name)
{
	static char path[PATH_MAX + 64];

	return find_upward("tests/fixtures", name, path, sizeof(path));
}

const char *util_doc(const char *name)
{
	static char path[PATH_MAX + 64];

	return find_upward("docs", name, path, sizeof(path));
}

const char *util_tool(const char *name)
{
	static char path[PATH_MAX + 64];

	return find_upward("build/tools", name, path, sizeof(path));
}

int util_run(const char *const argv[], const char *input, char *out,
	     size_t len)
{
	int fds[2], status, in = -1;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	out[0] = '\0';
	if (input && (in = open(input, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (pipe2(fds, O_CLOEXEC)) {
		if (in >= 0)
			close(in);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		if ((in >= 0 && dup2(in, 0) < 0) || dup2(fds[1], 1) < 0 ||
		    dup2(fds[1], 2) < 0)
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	if (in >= 0)
		close(in);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	while ((n = read(fds[0], out + used, len - 1 - used)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		used += (size_t)n;
		if (used + 1 == len) {
			char sink[256];

			/* Full: read the rest away so the child ends. */
			while (read(fds[0], sink, sizeof(sink)) > 0)
				;
			break;
		}
	}
	out[used] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static cpu_set_t allowed;
static unsigned int nr_allowed;
static unsigned int allowed_list[CPU_SETSIZE];
static pthread_once_t allowed_once = PTHREAD_ONCE_INIT;

static void read_allowed(void)
{
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		CPU_ZERO(&allowed);
		CPU_SET(0, &allowed);
	}
	for (unsigned int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed))
			allowed_list[nr_allowed++] = cpu;
}

static const cpu_set_t *allowed_cpus(void)
{
	pthread_once(&allowed_once, read_allowed);
	return &allowed;
}

unsigned int util_nr_allowed(void)
{
	allowed_cpus();
	return nr_allowed;
}

unsigned int util_allowed_cpu(unsigned int i)
{
	allowed_cpus();
	return allowed_list[i % nr_allowed];
}

int util_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return sched_setaffinity(0, sizeof(cpu_set_t),
					 allowed_cpus());
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

int util_pin_random(struct rng *r)
{
	if (rng_below(r, 4) == 0)
		return util_pin(-1);
	return util_pin((int)util_allowed_cpu((unsigned int)rng_below(r, 64)));
}

int util_run_capturing_stderr(void (*fn)(void), char *text, size_t len)
{
	int fds[2];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fds))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		alarm(HARNESS_HANG_S);	/* a hang fails the test */
		fn();
		harness_child_exit();
	}
	close(fds[1]);
	while (got + 1 < len &&
	       (n = read(fds[0], text + got, len - 1 - got)) > 0)
		got += (size_t)n;
	text[got] = '\0';
	close(fds[0]);
	return harness_wait_child(pid);
}

long util_resident_pages(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size, resident = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident;
}

struct tally_stats_info util_stats_info(const struct tally_stats_tree *t)
{
	struct tally_stats_info info;

	memset(&info, 0xff, sizeof(info));
	CHECK_EQ_LONG(tally_stats_tree_info(t, &info), 0);
	return info;
}

int util_count_child(struct tally_stats_group *child, const char *name,
		     void *arg)
{
	(void)child;
	(void)name;
	++*(long *)arg;
	return 0;
}

struct tally_stats_group *util_child(struct tally_stats_group *parent,
				     const char *name)
{
	struct tally_stats_group *g = NULL;

	CHECK_EQ_LONG(tally_stats_group_create(parent, name, &g), 0);
	return g;
}

struct tally_memcg_tree *util_memcg_tree(struct tally_domain *d, long batch)
{
	/* A fixed batch (batch 0: the defaults, adaptive). */
	struct tally_memcg_options o = { .domain = d, .batch = batch,
					 .max_batch = batch };
	struct tally_memcg_tree *t = NULL;

	if (!CHECK_EQ_LONG(tally_memcg_tree_create(&t, &o), 0))
		return NULL;
	return t;
}

struct tally_memcg *util_memcg_group(struct tally_memcg *parent,
				     const char *name)
{
	struct tally_memcg *g = NULL;

	if (!CHECK_EQ_LONG(tally_memcg_create(parent, name, &g), 0)) {
		harness_log("create %s", name);
		return NULL;
	}
	return g;
}

long util_memcg_usage(struct tally_memcg *g, enum tally_memcg_read_mode mode)
{
	struct tally_memcg_range r;

	if (!CHECK_EQ_LONG(tally_memcg_usage(g, mode, &r), 0))
		return LONG_MIN;
	if (!CHECK_LE_LONG(r.min, r.value) || !CHECK_LE_LONG(r.value, r.max) ||
	    !CHECK(r.value >= 0)) {
		harness_log("read mode %d", (int)mode);
		return LONG_MIN;
	}
	return r.value;
}

long util_memcg_event(const struct tally_memcg *g, enum tally_memcg_event ev,
		      bool local)
{
	long hier[TALLY_MEMCG_NR_EVENTS], loc[TALLY_MEMCG_NR_EVENTS];

	if (!CHECK_EQ_LONG(tally_memcg_events(g, hier, loc), 0))
		return LONG_MIN;
	return local ? loc[ev] : hier[ev];
}
