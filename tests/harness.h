/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TESTS_HARNESS_H
#define TALLY_TESTS_HARNESS_H

/*
 * harness.h - a tiny test harness.
 *
 *	TEST(sum_of_two_adds_is_exact)
 *	{
 *		CHECK_EQ_LONG(f(1) + f(2), 3);
 *	}
 *
 * Every TEST() registers itself before main() runs; harness.c's main()
 * runs them in file order, one line per test, and ends with the line
 * "N passed, N failed"; its exit status is non-zero when any test failed.
 * "test_foo NAME" runs only the tests whose name contains NAME, and
 * "test_foo =NAME" only the test called NAME.
 *
 * CHECK*() never stop a test: each evaluates to true when the check held,
 * so a loop can stop at its first failure with
 *	if (!CHECK(x)) break;
 * and REQUIRE() returns from the current (void) function instead.  Checks
 * may run in any thread and in a forked child; a child reports with
 * harness_child_exit() and the parent collects it with
 * harness_wait_child().
 *
 * Randomness: rng_seed() gives each test a seed, printed when the test
 * fails; TALLY_TEST_SEED=N replays it.  Scale: TALLY_TEST_SCALE (a
 * number, default 1) multiplies the iteration counts that tests pass
 * through harness_scale(); the runner lowers it for sanitizer builds.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct harness_test {
	const char *name;
	void (*fn)(void);
	const char *file;
	int line;
	struct harness_test *next;
};

void harness_register(struct harness_test *t);

#define TEST(name)							\
	static void test_##name(void);					\
	static struct harness_test harness_test_##name = {		\
		#name, test_##name, __FILE__, __LINE__, 0		\
	};								\
	__attribute__((constructor)) static void			\
	harness_register_##name(void)					\
	{								\
		harness_register(&harness_test_##name);			\
	}								\
	static void test_##name(void)

bool harness_check(bool ok, const char *file, int line, const char *expr);
bool harness_check_long(bool ok, const char *file, int line, const char *a,
			const char *op, const char *b, long va, long vb);
bool harness_check_ulong(bool ok, const char *file, int line, const char *a,
			 const char *op, const char *b, unsigned long va,
			 unsigned long vb);

#define CHECK(cond) harness_check(!!(cond), __FILE__, __LINE__, #cond)

#define CHECK_CMP_LONG(a, op, b)					\
	({								\
		long va_ = (long)(a), vb_ = (long)(b);			\
		harness_check_long(va_ op vb_, __FILE__, __LINE__, #a,	\
				   #op, #b, va_, vb_);			\
	})

#define CHECK_CMP_ULONG(a, op, b)					\
	({								\
		unsigned long va_ = (unsigned long)(a);			\
		unsigned long vb_ = (unsigned long)(b);			\
		harness_check_ulong(va_ op vb_, __FILE__, __LINE__, #a,	\
				    #op, #b, va_, vb_);			\
	})

#define CHECK_EQ_LONG(a, b) CHECK_CMP_LONG(a, ==, b)
#define CHECK_LE_LONG(a, b) CHECK_CMP_LONG(a, <=, b)
#define CHECK_EQ_ULONG(a, b) CHECK_CMP_ULONG(a, ==, b)
#define CHECK_LE_ULONG(a, b) CHECK_CMP_ULONG(a, <=, b)

#define REQUIRE(cond)							\
	do {								\
		if (!CHECK(cond))					\
			return;						\
	} while (0)

/* Print a line of context (e.g. the inputs of a failed check). */
__attribute__((format(printf, 1, 2))) void harness_log(const char *fmt, ...);

/*
 * Print a coverage line, "INFO ...": what a test saw of an interleaving
 * it cannot force (a race won one way or the other, retries, aborts).  It
 * never fails the test: tests assert outcomes, never that a race happened.
 */
__attribute__((format(printf, 1, 2))) void harness_info(const char *fmt, ...);

/* True when a check of the current test failed (in this process). */
bool harness_test_failed(void);

/* End a forked child: status 0 when its checks held, 1 otherwise. */
__attribute__((noreturn)) void harness_child_exit(void);

/* Wait for @pid: its exit status, or 128 + signal when it was killed. */
int harness_wait_child(pid_t pid);

/*
 * Run @fn in a forked child that an alarm kills after HARNESS_HANG_S (a
 * hang): its status as harness_wait_child() (0: its checks held).
 */
int harness_run_child(void (*fn)(void));

/*
 * Run this binary again in a child with only the test @name, after
 * setting the environment variables of @env ("NAME=VALUE" strings, NULL
 * terminated; "NAME=" alone unsets NAME) and HARNESS_CHILD=1.  Returns
 * as harness_wait_child().  A test that finds harness_is_child() true is
 * the re-executed copy: it checks what needs a fresh process.
 */
int harness_rerun(const char *name, const char *const *env);
bool harness_is_child(void);

/* harness_rerun() of the test whose body this is. */
#define RERUN_THIS_TEST(env) harness_rerun(__func__ + sizeof("test_") - 1, env)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* @n times TALLY_TEST_SCALE, at least 1. */
long harness_scale(long n);

/* Seconds on the monotonic clock. */
double harness_now(void);

/*
 * Seconds a test waits for progress before it counts as hung.  No test
 * asserts on wall time or on a rate: a test that needs events to happen
 * (signals handled, refusals, reads racing a destroy) runs until they did,
 * and fails only when they did not within this long, so that a loaded
 * machine makes it slower, never red.  Waits of tally's own (an OOM
 * policy's timeout) that another thread must end are as long as allowed.
 */
#define HARNESS_HANG_S 120

/* A small fast generator (splitmix64); one per thread. */
struct rng {
	uint64_t state;
};

/* The current test's seed (distinct per @stream, e.g. per thread). */
struct rng rng_seed(uint64_t stream);
uint64_t rng_next(struct rng *r);
/* The run's seed, as TALLY_TEST_SEED gives it and a failure prints it. */
uint64_t harness_seed(void);
/* Uniform in [0, n), n >= 1. */
uint64_t rng_below(struct rng *r, uint64_t n);

#endif /* TALLY_TESTS_HARNESS_H */
