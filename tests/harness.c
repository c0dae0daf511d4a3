// SPDX-License-Identifier: MIT
/*
 * harness.c - registration, running and reporting of TEST()s (harness.h).
 *
 * Output, one line per test and a last line the runner reads:
 *
 *	  INFO 3000 rounds: 12 won by the callback
 *	PASS name (0.012 s)
 *	  tests/test_x.c:42: a == b failed: a = 1, b = 2
 *	FAIL name (seed 1234)
 *	1 passed, 1 failed
 *
 * A copy re-executed by harness_rerun() prefixes its lines with "child: "
 * so that they are never taken for the parent's.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Failures printed per test; later ones are only counted. */
#define MAX_PRINTED 10

static struct harness_test *tests;
static unsigned long failures;		/* of the running test */
static uint64_t base_seed;		/* printed, and given to children */
static uint64_t test_seed;		/* base_seed mixed with the name */
static const char *program;

void harness_register(struct harness_test *t)
{
	struct harness_test **p = &tests;

	/* Keep file order: by file name, then by line. */
	while (*p && (strcmp((*p)->file, t->file) < 0 ||
		      (!strcmp((*p)->file, t->file) && (*p)->line < t->line)))
		p = &(*p)->next;
	t->next = *p;
	*p = t;
}

bool harness_is_child(void)
{
	return getenv("HARNESS_CHILD") != NULL;
}

static const char *prefix(void)
{
	return harness_is_child() ? "child: " : "";
}

static bool record(bool ok)
{
	if (ok)
		return false;
	return __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED) <
	       MAX_PRINTED;
}

bool harness_check(bool ok, const char *file, int line, const char *expr)
{
	if (record(ok))
		printf("%s  %s:%d: CHECK(%s) failed\n", prefix(), file, line,
		       expr);
	return ok;
}

bool harness_check_long(bool ok, const char *file, int line, const char *a,
			const char *op, const char *b, long va, long vb)
{
	if (record(ok))
		printf("%s  %s:%d: %s %s %s failed: %s = %ld, %s = %ld\n",
		       prefix(), file, line, a, op, b, a, va, b, vb);
	return ok;
}

bool harness_check_ulong(bool ok, const char *file, int line, const char *a,
			 const char *op, const char *b, unsigned long va,
			 unsigned long vb)
{
	if (record(ok))
		printf("%s  %s:%d: %s %s %s failed: %s = %lu, %s = %lu\n",
		       prefix(), file, line, a, op, b, a, va, b, vb);
	return ok;
}

/* One indented line, whole: threads may print at the same time. */
static void print_line(const char *tag, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	printf("%s  %s%s\n", prefix(), tag, line);
}

void harness_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_line("", fmt, ap);
	va_end(ap);
}

void harness_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_line("INFO ", fmt, ap);
	va_end(ap);
}

bool harness_test_failed(void)
{
	return __atomic_load_n(&failures, __ATOMIC_RELAXED) != 0;
}

void harness_child_exit(void)
{
	fflush(NULL);
	_exit(harness_test_failed() ? 1 : 0);
}

int harness_wait_child(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int harness_run_child(void (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0) {
		alarm(HARNESS_HANG_S);
		fn();
		harness_child_exit();
	}
	return harness_wait_child(pid);
}

int harness_rerun(const char *name, const char *const *env)
{
	char filter[256], seed[32];
	pid_t pid;

	snprintf(filter, sizeof(filter), "=%s", name);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)base_seed);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		for (; env && *env; env++) {
			const char *eq = strchr(*env, '=');
			char var[256];

			if (!eq || (size_t)(eq - *env) >= sizeof(var))
				_exit(126);
			memcpy(var, *env, (size_t)(eq - *env));
			var[eq - *env] = '\0';
			if (eq[1])
				setenv(var, eq + 1, 1);
			else
				unsetenv(var);
		}
		setenv("HARNESS_CHILD", "1", 1);
		setenv("TALLY_TEST_SEED", seed, 1);
		execl("/proc/self/exe", program, filter, (char *)NULL);
		_exit(127);
	}
	return harness_wait_child(pid);
}

long harness_scale(long n)
{
	static double scale = -1;
	long r;

	if (scale < 0) {
		const char *s = getenv("TALLY_TEST_SCALE");

		scale = s ? strtod(s, NULL) : 1.0;
		if (!(scale > 0))
			scale = 1.0;
	}
	r = (long)((double)n * scale);
	return r > 0 ? r : 1;
}

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	/* The bias of a 64-bit modulo is far below what tests can see. */
	return rng_next(r) % n;
}

struct rng rng_seed(uint64_t stream)
{
	struct rng r = { test_seed ^ (stream * 0xd1342543de82ef95ull) };

	rng_next(&r);
	return r;
}

uint64_t harness_seed(void)
{
	return base_seed;
}

static bool selected(const struct harness_test *t, const char *filter)
{
	if (!filter)
		return true;
	if (filter[0] == '=')
		return !strcmp(t->name, filter + 1);
	return strstr(t->name, filter) != NULL;
}

int main(int argc, char **argv)
{
	const char *filter = argc > 1 ? argv[1] : NULL;
	const char *seed_env = getenv("TALLY_TEST_SEED");
	unsigned int passed = 0, failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	program = argv[0];
	if (seed_env)
		base_seed = strtoull(seed_env, NULL, 0);
	else
		base_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	for (struct harness_test *t = tests; t; t = t->next) {
		double start;

		if (!selected(t, filter))
			continue;
		test_seed = base_seed;
		for (const char *c = t->name; *c; c++)
			test_seed = (test_seed ^ (unsigned char)*c) *
				    0x100000001b3ull;
		failures = 0;
		start = harness_now();
		t->fn();
		if (harness_test_failed()) {
			printf("%sFAIL %s (seed %llu)\n", prefix(), t->name,
			       (unsigned long long)base_seed);
			failed++;
		} else {
			printf("%sPASS %s (%.3f s)\n", prefix(), t->name,
			       harness_now() - start);
			passed++;
		}
	}
	printf("%s%u passed, %u failed\n", prefix(), passed, failed);
	return failed || !passed ? 1 : 0;
}
