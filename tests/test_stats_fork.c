// SPDX-License-Identifier: MIT
/*
 * test_stats_fork.c - fork() while other threads use the statistics tree.
 *
 * fork() copies only the calling thread: every lock another thread held,
 * and every structure it was changing, is frozen in the child.  The tree
 * must hand the child consistent trees and free locks whatever the other
 * threads were doing: creating, destroying and finding groups, updating,
 * flushing and reading, or running the periodic flusher.  Each test forks
 * many times while one kind of work runs (the last, all of them on two
 * trees); each child, single-threaded, must create a group, find it,
 * update it, read its exact value with a forced read, destroy it and
 * destroy the trees.  A child that hangs is killed by its alarm and the
 * test fails instead of hanging.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <tally/stats.h>

#include "harness.h"
#include "util.h"

static const struct tally_stat_desc schema[] = {
	{ "events", TALLY_STAT_EVENT },
	{ "level", TALLY_STAT_STATE },
};
#define NS ((unsigned int)ARRAY_SIZE(schema))

#define NR_LEAVES 8
#define CHILD_TIMEOUT HARNESS_HANG_S	/* seconds before a child hangs */

/* A tree with NR_LEAVES leaves under "svc", on @nr_cpus simulated CPUs. */
struct load_tree {
	struct tally_domain *dom;
	struct tally_stats_tree *t;
	struct tally_stats_group *leaves[NR_LEAVES];
	unsigned int nr_cpus;
};

enum work {
	WORK_TOPOLOGY,		/* create, find and destroy groups */
	WORK_FIND,		/* find paths, list children */
	WORK_UPDATE,
	WORK_FLUSH,		/* forced reads, snapshots, flushes */
	NR_WORK
};

/*
 * The workers run only around each fork (@paused clear): what they do
 * while a child runs does not matter, and churn there would only make the
 * trees (and in debug builds, the graveyard of destroyed groups) grow.
 */
struct load {
	struct load_tree trees[2];
	unsigned int nr_trees;
	int stop, paused;
};

struct worker {
	struct load *l;
	enum work work;
	unsigned int id;
	pthread_t th;
	long ops;
};

static bool tree_init(struct load_tree *lt, unsigned int nr_cpus,
		      uint64_t period_ns)
{
	struct tally_stats_options o = { .period_ns = period_ns };
	struct tally_stats_group *svc;

	memset(lt, 0, sizeof(*lt));
	if (nr_cpus)
		lt->dom = util_domain(nr_cpus);
	lt->nr_cpus = nr_cpus;
	o.domain = lt->dom;
	if (!CHECK_EQ_LONG(tally_stats_tree_create(&lt->t, schema, NS, &o), 0))
		return false;
	if (!CHECK_EQ_LONG(tally_stats_group_create(tally_stats_root(lt->t),
						    "svc", &svc), 0))
		return false;
	for (int i = 0; i < NR_LEAVES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "l%d", i);
		if (!CHECK_EQ_LONG(tally_stats_group_create(svc, name,
							    &lt->leaves[i]),
				   0))
			return false;
	}
	return true;
}

static void tree_fini(struct load_tree *lt)
{
	tally_stats_tree_destroy(lt->t);
	tally_domain_destroy(lt->dom);
}

static int mod(const struct load_tree *lt, struct tally_stats_group *g,
	       unsigned int cpu, unsigned int stat, long delta)
{
	if (lt->dom)
		return tally_stats_mod_cpu(g, cpu % lt->nr_cpus, stat, delta);
	return tally_stats_mod(g, stat, delta);
}

static void topology_step(struct worker *w, struct load_tree *lt,
			  struct rng *r)
{
	struct tally_stats_group *parent = lt->leaves[rng_below(r, NR_LEAVES)];
	struct tally_stats_group *g, *sub, *found;
	char name[32], path[64];

	snprintf(name, sizeof(name), "w%u-%ld", w->id, w->ops);
	if (tally_stats_group_create(parent, name, &g))
		return;
	if (!tally_stats_group_create(g, "sub", &sub)) {
		mod(lt, sub, (unsigned int)rng_below(r, 64), 0, 1);
		tally_stats_group_path(sub, path, sizeof(path));
		tally_stats_group_find(lt->t, path, &found);
		tally_stats_group_destroy(sub);
	}
	tally_stats_group_destroy(g);
}

static void find_step(struct load_tree *lt, struct rng *r)
{
	struct tally_stats_group *found;
	char path[32];
	long n = 0;

	snprintf(path, sizeof(path), "svc/l%u",
		 (unsigned int)rng_below(r, NR_LEAVES));
	tally_stats_group_find(lt->t, path, &found);
	tally_stats_group_find(lt->t, "svc/l0/missing", &found);
	tally_stats_group_for_each_child(lt->leaves[rng_below(r, NR_LEAVES)],
					 util_count_child, &n);
}

static void flush_step(struct load_tree *lt, struct rng *r)
{
	struct tally_stats_group *g = lt->leaves[rng_below(r, NR_LEAVES)];
	long v, hier[NS];

	switch (rng_below(r, 4)) {
	case 0:
		tally_stats_read(g, 0, TALLY_FLUSH_FORCE, &v, NULL);
		break;
	case 1:
		tally_stats_snapshot(tally_stats_group_parent(g),
				     TALLY_FLUSH_FORCE, hier, NULL);
		break;
	case 2:
		tally_stats_flush(tally_stats_root(lt->t));
		break;
	default:
		tally_stats_read(g, 1, TALLY_FLUSH_IF_NEEDED, &v, NULL);
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	struct rng r = rng_seed(w->id);

	while (!__atomic_load_n(&l->stop, __ATOMIC_RELAXED)) {
		struct load_tree *lt = &l->trees[w->ops % l->nr_trees];
		struct tally_stats_group *leaf =
			lt->leaves[rng_below(&r, NR_LEAVES)];

		if (__atomic_load_n(&l->paused, __ATOMIC_RELAXED)) {
			usleep(100);
			continue;
		}
		switch (w->work) {
		case WORK_TOPOLOGY:
			topology_step(w, lt, &r);
			break;
		case WORK_FIND:
			find_step(lt, &r);
			break;
		case WORK_UPDATE:
			for (int i = 0; i < 64; i++)
				mod(lt, leaf, (unsigned int)rng_below(&r, 64),
				    (unsigned int)i % NS, 1);
			break;
		case WORK_FLUSH:
			mod(lt, leaf, (unsigned int)rng_below(&r, 64), 1, -1);
			flush_step(lt, &r);
			break;
		default:
			break;
		}
		__atomic_add_fetch(&w->ops, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * In the child: the whole life of a group, then the tree's end.  The
 * group is the child's own: its values are exact.  The root's grow by what
 * the child adds, plus at most one update per thread of the parent that
 * fork() froze in the middle of tally_stats_mod() (@in_flight): such an
 * update never completed, and may show up at any later flush.
 */
static void child_uses_tree(struct load_tree *lt, long in_flight)
{
	struct tally_stats_group *root = tally_stats_root(lt->t);
	struct tally_stats_group *kid = NULL, *found = NULL;
	long before = -1, v = -1, local = -1;

	CHECK_EQ_LONG(tally_stats_read(root, 0, TALLY_FLUSH_FORCE, &before,
				       NULL), 0);
	if (!CHECK_EQ_LONG(tally_stats_group_create(lt->leaves[0], "kid", &kid),
			   0))
		return;
	CHECK_EQ_LONG(tally_stats_group_find(lt->t, "svc/l0/kid", &found), 0);
	CHECK(found == kid);
	for (unsigned int i = 0; i < 1000; i++) {
		mod(lt, kid, i, 0, 1);
		mod(lt, kid, i, 1, -3);
	}
	CHECK_EQ_LONG(tally_stats_read(kid, 0, TALLY_FLUSH_FORCE, &v, &local),
		      0);
	CHECK_EQ_LONG(v, 1000);
	CHECK_EQ_LONG(local, 1000);
	CHECK_EQ_LONG(tally_stats_read(kid, 1, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_EQ_LONG(v, -3000);
	/* The parent's values are there; nobody else updates in the child. */
	CHECK_EQ_LONG(tally_stats_read(root, 0, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_CMP_LONG(v - before, >=, 1000);
	CHECK_LE_LONG(v - before, 1000 + in_flight);
	CHECK_EQ_LONG(tally_stats_group_destroy(kid), 0);
	CHECK_EQ_LONG(tally_stats_group_find(lt->t, "svc/l0/kid", &found),
		      -ENOENT);
	CHECK_EQ_LONG(tally_stats_read(root, 0, TALLY_FLUSH_FORCE, &v, NULL),
		      0);
	CHECK_CMP_LONG(v - before, >=, 1000);
	CHECK_LE_LONG(v - before, 1000 + in_flight);
	/* No periodic thread in the child: stopping it waits for nothing. */
	CHECK_EQ_LONG(tally_stats_periodic_stop(lt->t), 0);
}

/* Has every worker done some work (between forks: they run only then)? */
static bool all_worked(struct worker *w, unsigned int nr_workers)
{
	for (unsigned int i = 0; i < nr_workers; i++)
		if (!__atomic_load_n(&w[i].ops, __ATOMIC_RELAXED))
			return false;
	return true;
}

/*
 * Run @nr_work[k] threads of each kind of work on @nr_trees trees (the
 * second on 16 simulated CPUs), with the periodic flusher (period
 * @period_ns) when @periodic, and fork harness_scale(@forks) times, or
 * fewer (FORK_MIN at least) once FORK_BUDGET_S passed: a machine with one
 * CPU or under load forks slowly.  Then on until every worker did some
 * work (a loaded machine may not run one in the pauses between the first
 * forks), up to a hang.
 */
#define FORK_MIN 16
#define FORK_BUDGET_S 20
static void fork_under_load(const unsigned int nr_work[NR_WORK],
			    unsigned int nr_trees, bool periodic,
			    uint64_t period_ns, long forks)
{
	struct load *l = calloc(1, sizeof(*l));
	struct worker *w = calloc(16, sizeof(*w));
	unsigned int nr_workers = 0, idle = 0;
	struct rng r = rng_seed(0);
	long done = 0;

	REQUIRE(l && w);
	l->nr_trees = nr_trees;
	for (unsigned int i = 0; i < nr_trees; i++)
		if (!tree_init(&l->trees[i], i ? 16 : 0, period_ns))
			goto out;
	for (unsigned int i = 0; periodic && i < nr_trees; i++)
		if (!CHECK_EQ_LONG(tally_stats_periodic_start(l->trees[i].t),
				   0))
			goto out;
	for (unsigned int k = 0; k < NR_WORK; k++)
		for (unsigned int i = 0; i < nr_work[k] && nr_workers < 16;
		     i++) {
			w[nr_workers] = (struct worker){
				.l = l, .work = (enum work)k, .id = nr_workers,
			};
			if (pthread_create(&w[nr_workers].th, NULL, worker_main,
					   &w[nr_workers])) {
				CHECK(!"pthread_create");
				goto stop;
			}
			nr_workers++;
		}
	forks = harness_scale(forks);
	for (double budget = harness_now() + FORK_BUDGET_S,
		    end = harness_now() + HARNESS_HANG_S;
	     ((done < forks && (done < FORK_MIN || harness_now() < budget)) ||
	      (!all_worked(w, nr_workers) && harness_now() < end)) &&
	     !harness_test_failed(); done++) {
		pid_t pid;
		int status;

		/* Land the fork at varied points of the workers' work. */
		__atomic_store_n(&l->paused, 0, __ATOMIC_RELAXED);
		usleep(500 + (useconds_t)rng_below(&r, 2500));
		pid = fork();
		__atomic_store_n(&l->paused, 1, __ATOMIC_RELAXED);
		if (pid < 0) {
			CHECK(!"fork");
			break;
		}
		if (pid == 0) {
			alarm(CHILD_TIMEOUT);
			for (unsigned int i = 0; i < nr_trees; i++)
				child_uses_tree(&l->trees[i], nr_workers);
			for (unsigned int i = 0; i < nr_trees; i++)
				tally_stats_tree_destroy(l->trees[i].t);
			harness_child_exit();
		}
		status = harness_wait_child(pid);
		if (!CHECK_EQ_LONG(status, 0))
			harness_log("fork %ld: child %s", done,
				    status == 128 + SIGALRM
					    ? "hung (killed by its alarm)"
					    : "failed");
	}
stop:
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < nr_workers; i++)
		pthread_join(w[i].th, NULL);
	/* Whether the forks landed amid every worker's work. */
	for (unsigned int i = 0; i < nr_workers; i++)
		idle += !w[i].ops;
	harness_info("%ld of %ld forks, %u workers, %u of them never ran",
		     done, forks, nr_workers, idle);
out:
	for (unsigned int i = 0; i < nr_trees; i++)
		tree_fini(&l->trees[i]);
	free(w);
	free(l);
}

TEST(fork_while_groups_are_created_destroyed_and_found)
{
	static const unsigned int work[NR_WORK] = {
		[WORK_TOPOLOGY] = 2, [WORK_FIND] = 2,
	};

	fork_under_load(work, 1, false, 0, 150);
}

TEST(fork_while_groups_are_updated)
{
	static const unsigned int work[NR_WORK] = { [WORK_UPDATE] = 3 };

	fork_under_load(work, 1, false, 0, 150);
}

TEST(fork_while_forced_flushes_and_reads_run)
{
	static const unsigned int work[NR_WORK] = {
		[WORK_UPDATE] = 1, [WORK_FLUSH] = 2,
	};

	fork_under_load(work, 1, false, 0, 150);
}

TEST(fork_while_the_periodic_flusher_runs)
{
	static const unsigned int work[NR_WORK] = { [WORK_UPDATE] = 1 };

	fork_under_load(work, 1, true, 100000, 150);
}

/* Everything at once, on a system-domain tree and a simulated one. */
TEST(fork_while_everything_runs_on_two_trees)
{
	static const unsigned int work[NR_WORK] = {
		[WORK_TOPOLOGY] = 2, [WORK_FIND] = 1, [WORK_UPDATE] = 2,
		[WORK_FLUSH] = 2,
	};

	fork_under_load(work, 2, true, 100000, 150);
}
