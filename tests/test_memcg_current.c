// SPDX-License-Identifier: MIT
/*
 * test_memcg_current.c - a thread's current memory group
 * (tally/memcg_current.h): the scoped switch, the default of new threads,
 * reads from a signal handler and across fork().
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/memcg_current.h>

#include "harness.h"
#include "util.h"

TEST(scoped_switches_restore_what_they_replaced)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a = util_memcg_group(tally_memcg_root(t), "a");
	struct tally_memcg *b = util_memcg_group(a, "b");

	CHECK(tally_memcg_current() == NULL);
	struct tally_memcg *save1 = tally_memcg_set_current(a);
	CHECK(save1 == NULL);
	CHECK(tally_memcg_current() == a);
	struct tally_memcg *save2 = tally_memcg_set_current(b);
	CHECK(save2 == a);
	CHECK(tally_memcg_current() == b);
	CHECK(tally_memcg_set_current(save2) == b);
	CHECK(tally_memcg_current() == a);
	CHECK(tally_memcg_set_current(save1) == a);
	CHECK(tally_memcg_current() == NULL);
	tally_memcg_tree_destroy(t);
}

static void *report_current(void *arg)
{
	struct tally_memcg **out = arg;

	out[0] = tally_memcg_current();
	/* Its own scope does not leak into the creator's. */
	tally_memcg_set_current(out[1]);
	out[2] = tally_memcg_current();
	return NULL;
}

TEST(new_threads_start_in_the_default_not_in_their_creators_group)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a = util_memcg_group(tally_memcg_root(t), "a");
	struct tally_memcg *d = util_memcg_group(tally_memcg_root(t), "d");
	struct tally_memcg *seen[3] = { NULL, a, NULL };
	pthread_t th;

	CHECK(tally_memcg_set_default(d) == NULL);
	tally_memcg_set_current(a);
	REQUIRE(pthread_create(&th, NULL, report_current, seen) == 0);
	pthread_join(th, NULL);
	CHECK(seen[0] == d);
	CHECK(seen[2] == a);
	CHECK(tally_memcg_current() == a);

	/* NULL returns the thread to the default; the default can change. */
	CHECK(tally_memcg_set_current(NULL) == a);
	CHECK(tally_memcg_current() == d);
	CHECK(tally_memcg_set_default(NULL) == d);
	CHECK(tally_memcg_current() == NULL);
	tally_memcg_tree_destroy(t);
}

static struct tally_memcg *volatile seen_in_handler;

static void read_in_handler(int sig)
{
	(void)sig;
	seen_in_handler = tally_memcg_current();
}

TEST(a_signal_handler_reads_the_group_of_its_thread)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a = util_memcg_group(tally_memcg_root(t), "a");
	struct sigaction sa = { .sa_handler = read_in_handler }, old;

	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	struct tally_memcg *save = tally_memcg_set_current(a);
	raise(SIGUSR1);
	CHECK(seen_in_handler == a);
	tally_memcg_set_current(save);
	raise(SIGUSR1);
	CHECK(seen_in_handler == NULL);
	sigaction(SIGUSR1, &old, NULL);
	tally_memcg_tree_destroy(t);
}

TEST(a_forked_child_keeps_the_current_group_and_charges_it)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *a = util_memcg_group(tally_memcg_root(t), "a");
	struct tally_memcg *save = tally_memcg_set_current(a);
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		CHECK(tally_memcg_current() == a);
		CHECK(tally_memcg_charge(tally_memcg_current(), 4096, 0) == 0);
		CHECK_EQ_LONG(util_memcg_usage(a, TALLY_MEMCG_READ_DRAIN),
			      4096);
		harness_child_exit();
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	CHECK_EQ_LONG(util_memcg_usage(a, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_set_current(save);
	tally_memcg_tree_destroy(t);
}

TEST(charges_and_stat_updates_that_name_no_group_use_the_current_one)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 1);
	struct tally_memcg *g, *save;
	long hier = 0;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	/* No current group: nothing to charge. */
	save = tally_memcg_set_current(NULL);
	CHECK_EQ_LONG(tally_memcg_charge(NULL, 4096, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(NULL, TALLY_MEMCG_ANON, 1), -EINVAL);
	tally_memcg_set_current(g);
	CHECK_EQ_LONG(tally_memcg_charge(NULL, 4096, 0), 0);
	CHECK_EQ_LONG(tally_memcg_stat_mod(NULL, TALLY_MEMCG_ANON, 4096), 0);
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_PRECISE), 4096);
	CHECK_EQ_LONG(tally_memcg_stat_read(g, TALLY_MEMCG_ANON,
					    TALLY_FLUSH_FORCE, &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 4096);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 4096), 0);
	tally_memcg_set_current(save);
	tally_memcg_tree_destroy(t);
}
