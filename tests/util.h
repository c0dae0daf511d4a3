/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TESTS_UTIL_H
#define TALLY_TESTS_UTIL_H

/*
 * util.h - helpers shared by the tally tests (independent oracles of the
 * tree layout and contents, fixtures, CPU affinity).
 */

#include <tally/counter.h>
#include <tally/memcg.h>
#include <tally/stats.h>

#include "harness.h"

/*
 * A simulated low-bits domain of @nr_cpus CPUs; aborts the test run on
 * failure (every caller needs one to go on).
 */
struct tally_domain *util_domain(unsigned int nr_cpus);

/*
 * Number of leaf positions below one level-@level item (level 0 = leaf
 * items): 2^(log2 arity_1 + ... + log2 arity_(level+1)).
 */
unsigned long util_span(const struct tally_domain *d, unsigned int level);

/*
 * Index, among its level, of the level-@level item that @cpu feeds, from
 * the public position and shape of @d only.
 */
unsigned int util_item_of(const struct tally_domain *d, unsigned int cpu,
			  unsigned int level);

/* The under bound of @c, from tally_counter_approximate_accuracy_range(). */
unsigned long util_under(const struct tally_counter *c);

/* precise - approximate (modulo 2^64) of a quiet counter. */
unsigned long util_gap(const struct tally_counter *c);

/*
 * The sum of the top level's items (the root, or the few top items of a
 * small domain) that a quiet counter must hold, recomputed from its
 * per-CPU slot values alone: each slot carried the multiples of the batch
 * its value crossed since 0, each item the multiples of its own step, the
 * top items kept all.  The result does not depend on the order of the
 * adds, so it also checks counters updated concurrently.
 */
unsigned long util_expected_top(const struct tally_counter *c);

/* Slot of @cpu of @c (white-box: reads the level-0 per-CPU long). */
long util_slot(const struct tally_counter *c, unsigned int cpu);

/*
 * Absolute path of tests/fixtures/@name (searched upward from the test
 * binary, so that every build directory finds it).
 */
const char *util_fixture(const char *name);

/* Path of docs/@name, searched upward from the test binary likewise. */
const char *util_doc(const char *name);

/*
 * Path of build/tools/@name (a test tool that scripts/ensure-deps.sh test
 * unpacks, such as "prometheus/usr/bin/promtool"), searched upward from
 * the test binary like util_fixture().
 */
const char *util_tool(const char *name);

/*
 * Run the program @argv[0] (a path: no shell, no PATH search) with
 * arguments @argv, standard input from the file @input (or inherited when
 * NULL), stdout and stderr into @out (@len bytes with the NUL; the rest
 * is read and dropped).  Returns its exit status, 128 when a signal ended
 * it, -1 when it could not run.
 */
int util_run(const char *const argv[], const char *input, char *out,
	     size_t len);

/* Number of CPUs this process may run on (at the first call), the @i-th. */
unsigned int util_nr_allowed(void);
unsigned int util_allowed_cpu(unsigned int i);
/* Pin the calling thread to @cpu, or to every allowed CPU if @cpu < 0. */
int util_pin(int cpu);
/* Pin the calling thread to a random allowed CPU, or 1 time in 4 to all. */
int util_pin_random(struct rng *r);

/*
 * Run @fn in a forked child (alarm of 30 s) whose stderr goes to a pipe;
 * what it wrote goes to @text (@len bytes with the NUL).  Returns as
 * harness_wait_child().
 */
int util_run_capturing_stderr(void (*fn)(void), char *text, size_t len);

/* Resident pages of this process (/proc/self/statm), or -1. */
long util_resident_pages(void);

/* tally_stats_tree_info() of @t, checked to succeed. */
struct tally_stats_info util_stats_info(const struct tally_stats_tree *t);

/* A for_each_child callback that counts the children in *(long *)@arg. */
int util_count_child(struct tally_stats_group *child, const char *name,
		     void *arg);

/* A child @name of @parent, checked to be created (NULL otherwise). */
struct tally_stats_group *util_child(struct tally_stats_group *parent,
				     const char *name);

/*
 * A memory tree on @d (NULL: the system's), checked to be created, with a
 * fixed refill batch (0: the defaults, adaptive batches).
 */
struct tally_memcg_tree *util_memcg_tree(struct tally_domain *d, long batch);

/* A child group @name of @parent, checked to be created (NULL otherwise). */
struct tally_memcg *util_memcg_group(struct tally_memcg *parent,
				     const char *name);

/*
 * The usage of @g read with @mode, checked to succeed and to lie in its
 * own interval (LONG_MIN when the read failed).
 */
long util_memcg_usage(struct tally_memcg *g, enum tally_memcg_read_mode mode);

/* The hierarchical (@local false) or local count of @ev of @g. */
long util_memcg_event(const struct tally_memcg *g, enum tally_memcg_event ev,
		      bool local);

#endif /* TALLY_TESTS_UTIL_H */
