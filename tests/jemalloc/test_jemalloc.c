// SPDX-License-Identifier: MIT
/*
 * test_jemalloc.c - the jemalloc integration (tally/jemalloc.h), in a
 * binary whose malloc is jemalloc: pages charged to the allocating
 * thread's group, uncharged from it by whichever thread frees, limits
 * that make malloc() and realloc() fail cleanly, and arenas recycled.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include <tally/jemalloc.h>
#include <tally/memcg_current.h>

#include "../harness.h"
#include "../util.h"

static struct tally_memcg_tree *tree;

/* One tree for the whole binary: the integration is installed once. */
static struct tally_memcg_tree *the_tree(void)
{
	if (!tree) {
		tree = util_memcg_tree(NULL, 0);
		if (tally_jemalloc_init(NULL) != 0)
			abort();
	}
	return tree;
}

static struct tally_memcg *new_group(struct tally_memcg *parent,
				     const char *name)
{
	return util_memcg_group(parent ? parent : tally_memcg_root(the_tree()),
				name);
}

static long usage(struct tally_memcg *g)
{
	return util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN);
}

static long anon(struct tally_memcg *g)
{
	long v = -1;

	tally_memcg_stat_read(g, TALLY_MEMCG_ANON, TALLY_FLUSH_FORCE, &v,
			      NULL);
	return v;
}

static unsigned int arena_of(void *p)
{
	unsigned int ind = ~0u;
	size_t len = sizeof(ind);

	mallctl("arenas.lookup", &ind, &len, &p, sizeof(p));
	return ind;
}

static unsigned int thread_arena(void)
{
	unsigned int ind = ~0u;
	size_t len = sizeof(ind);

	mallctl("thread.arena", &ind, &len, NULL, 0);
	return ind;
}

/* Sizes from 16 B to 64 KiB, small and large classes. */
static size_t size_of(unsigned int i)
{
	static const size_t sizes[] = { 16, 48, 100, 512, 3000, 8192,
					20000, 40000, 65536 };

	return sizes[i % ARRAY_SIZE(sizes)];
}

TEST(the_charge_is_jemalloc_s_active_pages_of_the_group_exactly)
{
	struct tally_memcg *g = new_group(NULL, "exact");
	struct tally_jemalloc_stats st;
	void *p[900];

	struct tally_memcg *save = tally_jemalloc_set_current(g);
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++) {
		p[i] = malloc(size_of(i));
		REQUIRE(p[i]);
		memset(p[i], 1, size_of(i));
	}
	CHECK(tally_jemalloc_purge(g) == 0);
	REQUIRE(tally_jemalloc_stats(g, &st) == 0);
	CHECK(st.active > 0);
	CHECK_EQ_LONG(st.charged, st.active);
	CHECK_EQ_LONG(st.dirty, 0);
	CHECK_EQ_LONG(st.muzzy, 0);
	CHECK_EQ_LONG(usage(g), st.charged);
	CHECK_EQ_LONG(anon(g), st.charged);
	/* Every byte asked for is inside the charge. */
	long asked = 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		asked += (long)size_of(i);
	CHECK_LE_LONG(asked, st.charged);

	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		free(p[i]);
	/* Freed but not purged: dirty pages stay charged. */
	CHECK(tally_jemalloc_flush() == 0);
	REQUIRE(tally_jemalloc_stats(g, &st) == 0);
	CHECK_EQ_LONG(st.charged, st.active + st.dirty);
	CHECK_EQ_LONG(usage(g), st.charged);
	CHECK(tally_jemalloc_purge(g) == 0);
	REQUIRE(tally_jemalloc_stats(g, &st) == 0);
	CHECK_EQ_LONG(st.charged, st.active);
	CHECK_EQ_LONG(usage(g), st.charged);
	CHECK_EQ_LONG(anon(g), st.charged);
	tally_jemalloc_set_current(save);
}

struct exchange {
	struct tally_memcg *group;
	void **mine;		/* allocated by this thread */
	void **theirs;		/* to free: the other thread's */
	unsigned int nr;
	pthread_barrier_t *barrier;
	unsigned int arena_seen;
};

static void *swap_and_free(void *arg)
{
	struct exchange *x = arg;

	tally_jemalloc_set_current(x->group);
	x->arena_seen = thread_arena();
	for (unsigned int i = 0; i < x->nr; i++) {
		x->mine[i] = malloc(size_of(i * 7));
		if (x->mine[i])
			memset(x->mine[i], 2, size_of(i * 7));
	}
	pthread_barrier_wait(x->barrier);	/* both allocated */
	pthread_barrier_wait(x->barrier);	/* the main thread checked */
	for (unsigned int i = 0; i < x->nr; i++)
		free(x->theirs[i]);
	tally_jemalloc_flush();
	pthread_barrier_wait(x->barrier);	/* both freed */
	tally_jemalloc_set_current(NULL);
	return NULL;
}

TEST(threads_freeing_each_others_allocations_uncharge_the_allocating_group)
{
	enum { N = 2000 };
	struct tally_memcg *parent = new_group(NULL, "tenants");
	struct tally_memcg *a = new_group(parent, "a");
	struct tally_memcg *b = new_group(parent, "b");
	static void *pa[N], *pb[N];
	pthread_barrier_t barrier;
	struct exchange xa = { a, pa, pb, N, &barrier, 0 };
	struct exchange xb = { b, pb, pa, N, &barrier, 0 };
	struct tally_jemalloc_stats sa, sb;
	pthread_t ta, tb;

	pthread_barrier_init(&barrier, NULL, 3);
	REQUIRE(pthread_create(&ta, NULL, swap_and_free, &xa) == 0);
	REQUIRE(pthread_create(&tb, NULL, swap_and_free, &xb) == 0);
	pthread_barrier_wait(&barrier);
	for (unsigned int i = 0; i < N; i++) {
		CHECK(pa[i] && pb[i]);
		CHECK(arena_of(pa[i]) == xa.arena_seen);
		CHECK(arena_of(pb[i]) == xb.arena_seen);
	}
	tally_jemalloc_purge(NULL);
	REQUIRE(tally_jemalloc_stats(a, &sa) == 0);
	REQUIRE(tally_jemalloc_stats(b, &sb) == 0);
	CHECK(sa.active > 0 && sb.active > 0);
	CHECK_EQ_LONG(usage(a), sa.charged);
	CHECK_EQ_LONG(usage(b), sb.charged);
	CHECK_EQ_LONG(sa.charged, sa.active);
	CHECK_EQ_LONG(sb.charged, sb.active);
	CHECK_EQ_LONG(usage(parent), sa.charged + sb.charged);
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	/* Every object went back to its own group's arena: zero left. */
	tally_jemalloc_purge(NULL);
	REQUIRE(tally_jemalloc_stats(a, &sa) == 0);
	REQUIRE(tally_jemalloc_stats(b, &sb) == 0);
	CHECK_EQ_LONG(sa.active, 0);
	CHECK_EQ_LONG(sb.active, 0);
	CHECK_EQ_LONG(usage(a), 0);
	CHECK_EQ_LONG(usage(b), 0);
	CHECK_EQ_LONG(usage(parent), 0);
	CHECK_EQ_LONG(anon(parent), 0);
	pthread_barrier_destroy(&barrier);
}

/* The retry the integration documents: once, after room was made. */
static void *malloc_with_room(size_t n)
{
	void *p = malloc(n);

	if (!p && tally_jemalloc_make_room() == 0)
		p = malloc(n);
	return p;
}

TEST(a_limit_makes_malloc_return_null_with_enomem_and_count_an_oom)
{
	struct tally_memcg *g = new_group(NULL, "limited");
	void *p[4096];
	unsigned int n = 0;
	long got = 0;

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 1l << 20) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);
	errno = 0;
	CHECK(malloc_with_room(4l << 20) == NULL);
	CHECK_EQ_LONG(errno, ENOMEM);
	/* One failed malloc(), one oom event (not one per jemalloc retry). */
	CHECK_EQ_LONG(util_memcg_event(g, TALLY_MEMCG_EVENT_OOM, true), 1);
	while (n < ARRAY_SIZE(p) && (p[n] = malloc_with_room(4000)) != NULL) {
		memset(p[n], 3, 4000);
		got += 4000;
		n++;
	}
	CHECK(n < ARRAY_SIZE(p));
	CHECK_EQ_LONG(errno, ENOMEM);
	CHECK_LE_LONG(got, 1l << 20);
	CHECK_LE_LONG(usage(g), 1l << 20);
	/* Half a MiB in use: the other half is still there to allocate. */
	CHECK_LE_LONG(768l << 10, got);
	while (n > 0)
		free(p[--n]);
	tally_jemalloc_flush();
	/* The freed pages are dirty, still charged: the room made for the
	 * refused allocation purges them. */
	void *again = malloc_with_room(512l << 10);
	CHECK(again != NULL);
	free(again);
	tally_jemalloc_set_current(save);
	tally_jemalloc_flush();
	tally_jemalloc_purge(g);
	CHECK_EQ_LONG(usage(g), 0);
}

TEST(realloc_growing_across_the_limit_returns_null_and_keeps_the_block)
{
	struct tally_memcg *g = new_group(NULL, "realloc");
	char *p, *q;

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 1l << 20) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);
	p = malloc(300000);
	REQUIRE(p);
	for (int i = 0; i < 300000; i++)
		p[i] = (char)(i * 31);
	q = realloc(p, 600000);		/* fits: 900 KB at most in use */
	REQUIRE(q);
	p = q;
	errno = 0;
	q = realloc(p, 2l << 20);
	CHECK(q == NULL);
	if (q) {
		free(q);
	} else {
		bool intact = true;

		CHECK_EQ_LONG(errno, ENOMEM);
		for (int i = 0; i < 300000; i++)
			intact &= p[i] == (char)(i * 31);
		CHECK(intact);
		free(p);
	}
	tally_jemalloc_set_current(save);
	tally_jemalloc_purge(g);
	CHECK_EQ_LONG(usage(g), 0);
}

TEST(a_switch_flushes_the_thread_cache_so_the_new_group_is_charged)
{
	struct tally_memcg *a = new_group(NULL, "switch-a");
	struct tally_memcg *b = new_group(NULL, "switch-b");
	void *p[64];

	struct tally_memcg *save = tally_jemalloc_set_current(a);
	unsigned int arena_a = thread_arena();
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		p[i] = malloc(64);
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		free(p[i]);		/* cached by this thread */
	CHECK(tally_jemalloc_set_current(b) == a);
	unsigned int arena_b = thread_arena();
	CHECK(arena_a != arena_b);
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++) {
		p[i] = malloc(64);
		CHECK_EQ_LONG(arena_of(p[i]), arena_b);
	}
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		free(p[i]);
	tally_jemalloc_set_current(save);
	tally_jemalloc_purge(NULL);
	CHECK_EQ_LONG(usage(a), 0);
	CHECK_EQ_LONG(usage(b), 0);
}

/*
 * A thread notes the arena of its last groups: switching back to one binds
 * that arena again without the integration's lock, and a release (which
 * may give arenas to new groups) makes every thread look its groups up
 * again.
 */
TEST(switching_back_to_a_recent_group_binds_its_arena_until_a_release)
{
	struct tally_memcg *a = new_group(NULL, "recent-a");
	struct tally_memcg *b = new_group(NULL, "recent-b");

	struct tally_memcg *save = tally_jemalloc_set_current(a);
	unsigned int arena_a = thread_arena();
	tally_jemalloc_set_current(b);
	unsigned int arena_b = thread_arena();
	CHECK(arena_a != arena_b);
	for (int i = 0; i < 8; i++) {
		tally_jemalloc_set_current(a);
		CHECK_EQ_LONG(thread_arena(), arena_a);
		tally_jemalloc_set_current(a);	/* the group it is in */
		CHECK_EQ_LONG(thread_arena(), arena_a);
		tally_jemalloc_set_current(b);
		CHECK_EQ_LONG(thread_arena(), arena_b);
	}
	/* b keeps a live block: its arena stays b's after the release. */
	void *kept = malloc(5000);
	REQUIRE(kept != NULL);
	CHECK_EQ_LONG(arena_of(kept), arena_b);
	tally_jemalloc_set_current(a);
	CHECK(tally_jemalloc_release(b) == 0);
	long b_usage = usage(b);	/* purged: the live block's pages */
	CHECK(b_usage > 0);

	struct tally_memcg *c = new_group(NULL, "recent-c");
	tally_jemalloc_set_current(c);
	unsigned int arena_c = thread_arena();
	CHECK(arena_c != arena_b);
	CHECK(arena_c != arena_a);
	void *x = malloc(5000);
	REQUIRE(x != NULL);
	CHECK_EQ_LONG(arena_of(x), arena_c);
	CHECK(usage(c) > 0);
	CHECK_EQ_LONG(usage(b), b_usage);
	tally_jemalloc_set_current(a);
	CHECK_EQ_LONG(thread_arena(), arena_a);
	tally_jemalloc_set_current(c);
	CHECK_EQ_LONG(thread_arena(), arena_c);
	free(x);
	tally_jemalloc_set_current(save);
	free(kept);
	tally_jemalloc_flush();
	CHECK(tally_jemalloc_release(c) == 0);
	CHECK(tally_jemalloc_release(a) == 0);
	tally_jemalloc_purge(NULL);
	CHECK_EQ_LONG(usage(b), 0);
	CHECK_EQ_LONG(usage(c), 0);
}

TEST(a_destroyed_group_loses_nothing_and_its_arenas_serve_the_next_group)
{
	struct tally_memcg *parent = new_group(NULL, "churn");
	struct tally_memcg *q1 = new_group(parent, "q1");
	void *p[100];

	struct tally_memcg *save = tally_jemalloc_set_current(q1);
	unsigned int arena_q1 = thread_arena();
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		REQUIRE((p[i] = malloc(size_of(i))) != NULL);
	tally_jemalloc_set_current(save);
	long charged = usage(q1);
	CHECK(charged > 0);
	CHECK_EQ_LONG(usage(parent), charged);

	/* Destroyed with its objects alive: the parent holds the charge. */
	CHECK(tally_jemalloc_release(q1) == 0);
	CHECK(tally_memcg_destroy(q1) == 0);
	CHECK_EQ_LONG(usage(parent), charged);
	for (unsigned int i = 0; i < ARRAY_SIZE(p); i++)
		free(p[i]);
	tally_jemalloc_flush();
	tally_jemalloc_purge(NULL);
	CHECK_EQ_LONG(usage(parent), 0);
	CHECK_EQ_LONG(anon(parent), 0);

	/* Its arena, empty now, is the next new group's. */
	struct tally_memcg *q2 = new_group(parent, "q2");
	save = tally_jemalloc_set_current(q2);
	bool reused = false;
	for (unsigned int i = 0; i < 64 && !reused; i++)
		reused = thread_arena() == arena_q1;
	void *x = malloc(1000);
	CHECK(x != NULL);
	CHECK(usage(q2) > 0);
	free(x);
	tally_jemalloc_set_current(save);
	CHECK(tally_jemalloc_release(q2) == 0);
	CHECK(reused);
}

struct churn {
	struct tally_memcg *group;
	atomic_bool *stop;
	uint64_t seed;
};

/* Allocate and free blocks of up to 3 MiB in a group at its max. */
static void *churn_at_the_limit(void *arg)
{
	struct churn *c = arg;
	struct rng r = { c->seed };
	void *b[16] = { 0 };

	tally_jemalloc_set_current(c->group);
	while (!atomic_load(c->stop))
		for (unsigned int i = 0; i < ARRAY_SIZE(b); i++) {
			size_t n = 4096 + rng_next(&r) % (3u << 20);

			free(b[i]);
			b[i] = i % 2 ? malloc(n) : malloc_with_room(n);
			if (b[i])
				memset(b[i], 1, 4096);
		}
	for (unsigned int i = 0; i < ARRAY_SIZE(b); i++)
		free(b[i]);
	tally_jemalloc_set_current(NULL);
	return NULL;
}

/*
 * The forks of one process whose threads (more than the CPUs) allocate
 * in a group at its max, each child allocating and exiting: 0 when every
 * fork returned.
 */
static int fork_while_charging(struct tally_memcg *g)
{
	enum { THREADS = 4, FORKS = 100 };
	struct churn c[THREADS];
	pthread_t th[THREADS];
	atomic_bool stop = false;
	int ret = 0;

	for (unsigned int i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ g, &stop, i + 1 };
		if (pthread_create(&th[i], NULL, churn_at_the_limit, &c[i]))
			return 1;
	}
	for (int i = 0; i < FORKS && !ret; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			free(malloc(100000));
			_exit(0);
		}
		ret = pid < 0 || harness_wait_child(pid) != 0;
	}
	atomic_store(&stop, true);
	for (unsigned int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	return ret;
}

/*
 * A charge that does not fit drains the stocks (the memory tree's drain
 * lock) from inside an extent hook, which jemalloc calls with an arena's
 * lock held, and tally_jemalloc_make_room() purges jemalloc's arenas and
 * reclaims; fork() takes the tree's locks, then jemalloc's.  A fork at
 * those moments must not deadlock: run in a child, killed if it makes no
 * progress.
 */
TEST(fork_while_threads_allocate_at_the_limit_does_not_deadlock)
{
	struct tally_memcg *g = new_group(NULL, "forking");
	struct timespec tick = { 0, 10000000 };
	double deadline;
	int status = -1;
	pid_t pid, done = 0;

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 16l << 20) == 0);
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(fork_while_charging(g));
	deadline = harness_now() + HARNESS_HANG_S;
	while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
	       harness_now() < deadline)
		nanosleep(&tick, NULL);
	if (done == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		harness_log("the forking process hung (killed after %d s)",
			    HARNESS_HANG_S);
	}
	CHECK(done == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The address space the process has mapped (/proc/self/statm), bytes. */
static long mapped_bytes(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) * sysconf(_SC_PAGESIZE);
}

/*
 * jemalloc answers a refused commit by mapping more address space (it
 * grows the cache of ranges it retains) and never gives it back: a
 * program that keeps failing at its limit would map terabytes, with
 * gigabytes of uncharged metadata to describe them (2,000 refusals of 2
 * to 10 MiB mapped 15 GiB).  A refused allocation maps at most one range
 * for its size, the first time no retained range fits it, never one per
 * refusal (with or without the retry after tally_jemalloc_make_room()).
 */
TEST(refused_allocations_do_not_grow_the_address_space)
{
	enum { TRIES = 2000 };
	struct tally_memcg *g = new_group(NULL, "no-growth");
	unsigned int refused = 0;
	long before, grown;

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 1l << 20) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);

	free(malloc(3l << 20));		/* refused: the arena exists */
	before = mapped_bytes();
	for (unsigned int i = 0; i < TRIES; i++) {
		/* Sizes that grow: no earlier range fits exactly. */
		size_t n = (2l << 20) + (size_t)i * 4096;
		void *p = i % 2 ? malloc(n) : malloc_with_room(n);

		refused += !p;
		free(p);
	}
	grown = mapped_bytes() - before;
	tally_jemalloc_set_current(save);
	CHECK_EQ_LONG(refused, TRIES);
	harness_log("%u refused allocations of 2 to 10 MiB mapped %ld KiB",
		    refused, grown >> 10);
	CHECK_LE_LONG(grown, 256l << 20);
}

/*
 * A refusal is the thread's note for one allocation, not a verdict on
 * the group: once the limit has room again (raised here; memory freed by
 * another thread is the same), the thread's next allocation that needs
 * new address space succeeds without tally_jemalloc_make_room().
 */
TEST(an_allocation_after_the_limit_was_raised_is_not_refused)
{
	struct tally_memcg *g = new_group(NULL, "raised");
	void *p;

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 1l << 20) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);

	errno = 0;
	p = malloc(3l << 20);
	CHECK(p == NULL);
	free(p);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 256l << 20) == 0);
	/* Larger than any range the arena retains: new address space. */
	p = malloc(64l << 20);
	CHECK(p != NULL);
	free(p);
	tally_jemalloc_set_current(save);
	tally_jemalloc_flush();
	tally_jemalloc_purge(g);
	CHECK_EQ_LONG(usage(g), 0);
}

/* A cache of the group's blocks that its reclaim callback empties. */
struct block_cache {
	void *block[64];
	unsigned int nr;
	unsigned int calls;
	unsigned int forks;
};

static void block_cache_fill(struct block_cache *c, size_t size)
{
	while (c->nr < ARRAY_SIZE(c->block) &&
	       (c->block[c->nr] = malloc(size)) != NULL)
		memset(c->block[c->nr++], 7, size);
}

/* Empty the cache: free() and a purge, allowed in a reclaim callback. */
static long block_cache_empty(struct tally_memcg *g, long bytes, void *arg)
{
	struct block_cache *c = arg;
	long before = usage(g);

	(void)bytes;
	c->calls++;
	while (c->nr > 0)
		free(c->block[--c->nr]);
	tally_jemalloc_flush();
	CHECK(tally_jemalloc_purge(g) == 0);
	return before > usage(g) ? before - usage(g) : 0;
}

/*
 * The reclaim callback of a group runs where the charge is made in full:
 * after the allocation failed, in tally_jemalloc_make_room(), with no
 * lock of jemalloc's held, so it may free the group's blocks and purge
 * its arenas; the retried allocation then fits.
 */
TEST(a_reclaim_callback_may_free_and_purge_for_a_refused_malloc)
{
	struct tally_memcg *g = new_group(NULL, "reclaim-frees");
	struct block_cache c = { .nr = 0 };

	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4l << 20) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);

	block_cache_fill(&c, 64l << 10);
	CHECK(c.nr >= 32);
	REQUIRE(tally_memcg_set_reclaim(g, block_cache_empty, &c) == 0);
	void *big = malloc_with_room(2l << 20);

	CHECK(big != NULL);
	CHECK(c.calls >= 1);
	CHECK_EQ_LONG(c.nr, 0);
	free(big);
	REQUIRE(tally_memcg_set_reclaim(g, NULL, NULL) == 0);
	tally_jemalloc_set_current(save);
	tally_jemalloc_flush();
	tally_jemalloc_purge(g);
	CHECK_EQ_LONG(usage(g), 0);
}

/* The victim's cancel: fork a child that exits, then free its blocks. */
static void forking_kill(struct tally_memcg *oom_group,
			 struct tally_memcg_task *victim, void *arg)
{
	struct block_cache *c = arg;
	pid_t pid = fork();

	(void)oom_group;
	(void)victim;
	if (pid == 0)
		_exit(0);
	if (pid > 0 && harness_wait_child(pid) == 0)
		c->forks++;
	block_cache_empty(oom_group, 0, c);
}

static void kill_callback_forks_at_the_limit(void)
{
	struct tally_memcg *g = new_group(NULL, "kill-forks");
	struct block_cache c = { .nr = 0 };
	struct tally_mm mm;
	struct tally_memcg_task task = { .mm = &mm };
	struct tally_memcg_oom_policy pol = { TALLY_MEMCG_OOM_KILL,
					      1000000000, forking_kill, &c };

	REQUIRE(tally_mm_init(&mm, NULL, 0, NULL) == 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4l << 20) == 0);
	REQUIRE(tally_memcg_set_oom_policy(g, &pol) == 0);
	REQUIRE(tally_memcg_task_attach(g, &task) == 0);
	struct tally_memcg *save = tally_jemalloc_set_current(g);

	block_cache_fill(&c, 64l << 10);
	void *big = malloc_with_room(2l << 20);

	CHECK(big != NULL);
	CHECK_EQ_LONG(c.forks, 1);
	free(big);
	tally_jemalloc_set_current(save);
	tally_memcg_task_detach(&task);
	harness_child_exit();
}

/*
 * A kill callback may fork (tally/memcg.h): under the integration it runs
 * in tally_jemalloc_make_room(), outside jemalloc's locks and the hooks'
 * fork gate, so the fork neither waits for the gate its own thread holds
 * nor for an arena lock.  Run in a child, killed if it hangs.
 */
TEST(a_kill_callback_may_fork_for_a_refused_malloc)
{
	the_tree();
	fflush(NULL);
	CHECK_EQ_LONG(harness_run_child(kill_callback_forks_at_the_limit), 0);
}

/*
 * The integration is installed once per process: a test of its install
 * runs in a fresh copy of this binary (one thread at its start), and
 * the parent checks that copy's status.
 */
#define IN_A_FRESH_PROCESS()						\
	do {								\
		if (!harness_is_child()) {				\
			const char *const env_[] = { NULL };		\
									\
			CHECK_EQ_LONG(RERUN_THIS_TEST(env_), 0);	\
			return;						\
		}							\
	} while (0)

/* A group of a tree of its own, for the fresh process's auto_group. */
static struct tally_memcg *fresh_group(void)
{
	return util_memcg_group(tally_memcg_root(util_memcg_tree(NULL, 0)),
				"all");
}

/*
 * A process whose threads have no group of their own: with auto_group,
 * jemalloc's automatic arenas (the huge arena of 8 MiB allocations too)
 * charge it.  Run in a fresh copy of this binary: the integration is
 * installed once per process.
 */
TEST(auto_group_charges_the_allocations_of_threads_without_a_group)
{
	IN_A_FRESH_PROCESS();
	struct tally_memcg *g = fresh_group();
	struct tally_jemalloc_options opts = { .auto_group = g };
	struct tally_jemalloc_stats st;

	REQUIRE(tally_jemalloc_init(&opts) == 0);
	REQUIRE(tally_jemalloc_stats(NULL, &st) == 0);
	CHECK_EQ_LONG(usage(g), st.adopted);
	CHECK_EQ_LONG(st.charged, st.adopted);

	char *huge = malloc(12l << 20);		/* the huge arena's */
	void *small[1000];

	REQUIRE(huge);
	memset(huge, 1, 12l << 20);
	for (unsigned int i = 0; i < ARRAY_SIZE(small); i++)
		REQUIRE((small[i] = malloc(size_of(i))) != NULL);
	REQUIRE(tally_jemalloc_stats(NULL, &st) == 0);
	CHECK_LE_LONG(12l << 20, st.active);
	CHECK_LE_LONG(st.active + st.dirty + st.muzzy, st.charged);
	CHECK_LE_LONG(st.charged, st.active + st.dirty + st.muzzy + st.adopted);
	CHECK_EQ_LONG(usage(g), st.charged);

	free(huge);
	for (unsigned int i = 0; i < ARRAY_SIZE(small); i++)
		free(small[i]);
	tally_jemalloc_flush();
	tally_jemalloc_purge(NULL);
	REQUIRE(tally_jemalloc_stats(NULL, &st) == 0);
	CHECK_LE_LONG(st.active, st.charged);
	CHECK_LE_LONG(st.charged, st.active + st.adopted);
	CHECK_EQ_LONG(usage(g), st.charged);
	harness_child_exit();
}

/*
 * A max below what jemalloc's automatic arenas already hold cannot be
 * kept: the adoption is refused (-E2BIG) with nothing hooked or charged,
 * and the same group with room for it is installed afterwards.
 */
TEST(an_auto_group_whose_max_is_below_what_is_adopted_is_refused)
{
	IN_A_FRESH_PROCESS();
	struct tally_memcg *g = fresh_group();
	struct tally_jemalloc_options opts = { .auto_group = g };
	struct tally_jemalloc_stats st;

	REQUIRE(g);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 4096) == 0);
	CHECK_EQ_LONG(tally_jemalloc_init(&opts), -E2BIG);
	CHECK_EQ_LONG(usage(g), 0);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX,
				      TALLY_MEMCG_UNLIMITED) == 0);
	REQUIRE(tally_jemalloc_init(&opts) == 0);
	REQUIRE(tally_jemalloc_stats(NULL, &st) == 0);
	CHECK(st.adopted > 4096);
	CHECK_EQ_LONG(usage(g), st.adopted);
	harness_child_exit();
}

static void *park(void *arg)
{
	pthread_barrier_wait(arg);	/* parked: the thread exists */
	pthread_barrier_wait(arg);	/* released */
	return NULL;
}

/*
 * Installed after another thread exists, the integration would adopt
 * pages that thread's cache may still free unseen: it is refused
 * (-EBUSY) with nothing installed, and once the thread is joined it is
 * installed.  Run in a fresh copy of this binary (one thread at its
 * start).
 */
TEST(init_while_another_thread_exists_is_refused_with_ebusy)
{
	IN_A_FRESH_PROCESS();
	struct tally_memcg *g = fresh_group();
	struct tally_jemalloc_options opts = { .auto_group = g };
	pthread_barrier_t b;
	pthread_t th;

	REQUIRE(g);
	pthread_barrier_init(&b, NULL, 2);
	REQUIRE(pthread_create(&th, NULL, park, &b) == 0);
	pthread_barrier_wait(&b);
	CHECK_EQ_LONG(tally_jemalloc_init(&opts), -EBUSY);
	CHECK_EQ_LONG(usage(g), 0);
	pthread_barrier_wait(&b);
	pthread_join(th, NULL);
	CHECK_EQ_LONG(tally_jemalloc_init(&opts), 0);
	CHECK(usage(g) > 0);
	harness_child_exit();
}
