// SPDX-License-Identifier: MIT
/*
 * test_memcg_windows.c - memory groups in the windows between "look up"
 * and "use": a hook runs in the thread that just resolved a destroyed
 * group's live ancestor, and destroys that ancestor and puts it before
 * the thread goes on.  The grace period must keep what the thread uses
 * allocated (ASan), and nothing it adds may be lost.  The hooks exist in
 * the fault-injection builds (inject, asan); elsewhere the file has no
 * test.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "harness.h"
#include "inject.h"
#include "util.h"

#ifdef TALLY_INJECT

static struct tally_memcg *victim;
static int hook_done;

/* Destroy and put the resolved ancestor, once. */
static int destroy_resolved(enum tally_inject_point point, void *arg)
{
	(void)point;
	(void)arg;
	if (victim && !hook_done) {
		hook_done = 1;
		CHECK_EQ_LONG(tally_memcg_destroy(victim), 0);
		tally_memcg_put(victim);
		victim = NULL;
	}
	return 0;
}

/* root -> a -> b, b destroyed; its handle kept. */
static struct tally_memcg_tree *zombie_chain(struct tally_memcg **a,
					     struct tally_memcg **b)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);

	if (!t)
		return NULL;
	*a = util_memcg_group(tally_memcg_root(t), "a");
	*b = util_memcg_group(*a, "b");
	if (!*a || !*b || !CHECK_EQ_LONG(tally_memcg_destroy(*b), 0)) {
		tally_memcg_tree_destroy(t);
		return NULL;
	}
	return t;
}

TEST(stat_update_of_a_zombie_survives_its_ancestor_destroyed_in_the_window)
{
	struct tally_memcg *a, *b;
	struct tally_memcg_tree *t = zombie_chain(&a, &b);
	long hier = 0;

	REQUIRE(t);
	victim = a;
	hook_done = 0;
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, destroy_resolved, NULL);
	/* Resolves to a; a is destroyed and put before the update lands. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(b, TALLY_MEMCG_ANON, 4096), 0);
	tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, NULL, NULL);
	CHECK(hook_done);
	/* The update reached the root's hierarchical value. */
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 4096);
	/* Later updates of b go to the root. */
	CHECK_EQ_LONG(tally_memcg_stat_mod(b, TALLY_MEMCG_ANON, -4096), 0);
	CHECK_EQ_LONG(tally_memcg_stat_read(tally_memcg_root(t),
					    TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE,
					    &hier, NULL), 0);
	CHECK_EQ_LONG(hier, 0);
	tally_memcg_put(b);
	tally_memcg_tree_destroy(t);
}

TEST(charge_of_a_zombie_survives_its_ancestor_destroyed_in_the_window)
{
	const unsigned int flags[] = { 0, TALLY_MEMCG_NOFAIL,
				       TALLY_MEMCG_NOBLOCK };

	for (unsigned int f = 0; f < 3; f++) {
		struct tally_memcg *a, *b;
		struct tally_memcg_tree *t = zombie_chain(&a, &b);
		struct tally_memcg *root;

		REQUIRE(t);
		root = tally_memcg_root(t);
		victim = a;
		hook_done = 0;
		tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, destroy_resolved,
				 NULL);
		CHECK_EQ_LONG(tally_memcg_charge(b, 10000, flags[f]), 0);
		tally_inject_set(TALLY_INJECT_MEMCG_RESOLVED, NULL, NULL);
		CHECK(hook_done);
		CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN),
			      10000);
		/* The uncharge through the zombie reaches the root too. */
		CHECK_EQ_LONG(tally_memcg_uncharge(b, 10000), 0);
		CHECK_EQ_LONG(util_memcg_usage(root, TALLY_MEMCG_READ_DRAIN),
			      0);
		tally_memcg_put(b);
		tally_memcg_tree_destroy(t);
	}
}

#ifdef TALLY_DEBUG
/* Debug builds: a handle used after its last put aborts, with a message. */
TEST(a_handle_used_after_its_last_put_aborts_in_debug_builds)
{
	int calls;

	for (calls = 0; calls < 3; calls++) {
		int status = 0;
		pid_t pid = fork();

		REQUIRE(pid >= 0);
		if (pid == 0) {
			struct tally_memcg_tree *t = NULL;
			struct tally_memcg *g = NULL;

			/* Quiet: the abort's message is the point, not noise. */
			if (!freopen("/dev/null", "w", stderr))
				_exit(3);
			if (tally_memcg_tree_create(&t, NULL) ||
			    tally_memcg_create(tally_memcg_root(t), "q", &g) ||
			    tally_memcg_destroy(g))
				_exit(2);
			tally_memcg_put(g);	/* the last reference */
			if (calls == 0)
				tally_memcg_charge(g, 1 << 20, 0);
			else if (calls == 1)
				tally_memcg_destroy(g);
			else
				tally_memcg_put(g);
			_exit(0);
		}
		REQUIRE(waitpid(pid, &status, 0) == pid);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	}
}
#endif /* TALLY_DEBUG */

#endif /* TALLY_INJECT */
