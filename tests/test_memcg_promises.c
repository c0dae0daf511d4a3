// SPDX-License-Identifier: MIT
/*
 * test_memcg_promises.c - the promises of include/tally/memcg.h and the
 * README's "Memory groups" section that no other test proved: signal
 * safety of the stock paths, progress past a thread stopped at an
 * arbitrary point, the APPROX interval on large simulated domains, the
 * zombie handles, the tree's counters and exact events under concurrency.
 */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "harness.h"
#include "util.h"

#define KB 1024l

/*
 * Signal storm: the handler charges and uncharges the very group the
 * interrupted thread is charging and uncharging (memcg.h: charges served
 * by the stock and all uncharges are async-signal-safe).  The group has
 * no max, so a charge never drains.  After the storm the drained usage
 * must equal exactly what the thread and the handler left charged.
 */
static struct tally_memcg *storm_group;
static volatile long storm_handler_bytes;	/* charged by handlers, net */
static volatile sig_atomic_t storm_handler_errors;
static long storm_handled;	/* handler runs, read by the sender */
static sem_t storm_sem;		/* posted by each handler run */

static void storm_handler(int sig)
{
	int saved = errno;

	(void)sig;
	__atomic_add_fetch(&storm_handled, 1, __ATOMIC_RELEASE);
	sem_post(&storm_sem);
	/*
	 * Charge on one signal, uncharge on the next: the main loop fills
	 * or empties the stock in between, so the handler's calls find it
	 * full, empty or in between.  An uncharge is async-signal-safe on
	 * any path; the charge has no max to hit, so it never drains.
	 */
	if (storm_handler_bytes < 8 * KB) {
		if (tally_memcg_charge(storm_group, 8 * KB, 0) != 0)
			storm_handler_errors++;
		else
			storm_handler_bytes += 8 * KB;
	} else if (tally_memcg_uncharge(storm_group, 8 * KB) != 0) {
		storm_handler_errors++;
	} else {
		storm_handler_bytes -= 8 * KB;
	}
	errno = saved;
}

struct storm {
	pthread_t target;
	volatile int stop;
	long sent;
};

static void *storm_sender(void *arg)
{
	struct storm *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		long h = __atomic_load_n(&storm_handled, __ATOMIC_ACQUIRE);

		if (pthread_kill(s->target, SIGUSR1) == 0)
			s->sent++;
		/*
		 * One signal at a time: pending signals merge, and the
		 * sanitizers deliver them late.  Asleep meanwhile, not
		 * yielding: on a loaded machine a woken thread runs sooner
		 * than one that yields, and the round trips keep going.
		 */
		while (__atomic_load_n(&storm_handled, __ATOMIC_ACQUIRE) == h &&
		       !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;		/* to see stop */
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			sem_timedwait(&storm_sem, &ts);
		}
	}
	return NULL;
}

TEST(signal_storm_of_charges_and_uncharges_on_the_same_group_keeps_exact_totals)
{
	struct sigaction sa = { .sa_handler = storm_handler }, old;
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 16 * KB);
	struct tally_memcg_info info;
	struct storm s = { 0 };
	pthread_t sender;
	long i, n = harness_scale(200000), held = 0, bad = 0;
	long want = harness_scale(10000);	/* signals landed, at least */
	double deadline;

	REQUIRE(t);
	storm_group = util_memcg_group(tally_memcg_root(t), "storm");
	REQUIRE(storm_group);
	storm_handler_bytes = 0;
	storm_handler_errors = 0;
	__atomic_store_n(&storm_handled, 0, __ATOMIC_RELAXED);
	REQUIRE(sem_init(&storm_sem, 0, 0) == 0);
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	s.target = pthread_self();
	REQUIRE(pthread_create(&sender, NULL, storm_sender, &s) == 0);
	deadline = harness_now() + HARNESS_HANG_S;
	/*
	 * Until enough signals landed (the fast paths outrun the sender),
	 * however long a loaded machine takes to deliver them.
	 */
	for (i = 0; (i < n || __atomic_load_n(&storm_handled,
					       __ATOMIC_RELAXED) < want) &&
		    ((i & 255) || harness_now() < deadline); i++) {
		/*
		 * Runs of 32 charges then 32 uncharges of mixed sizes: the
		 * charges empty the stock (refills from the counters), the
		 * uncharges overflow it (batches back to the counters), so
		 * the signals land on every path.
		 */
		long b = (i % 7 + 1) * KB;

		if (!((i >> 5) & 1)) {
			if (tally_memcg_charge(storm_group, b, 0) == 0)
				held += b;
			else
				bad++;
		} else if (held >= b) {
			if (tally_memcg_uncharge(storm_group, b) == 0)
				held -= b;
			else
				bad++;
		}
	}
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	pthread_join(sender, NULL);
	sigaction(SIGUSR1, &old, NULL);
	sem_destroy(&storm_sem);
	CHECK_EQ_LONG(bad, 0);
	CHECK_EQ_LONG(storm_handler_errors, 0);
	if (!CHECK(storm_handled >= want))
		harness_log("%ld signals handled in %d s: hung", storm_handled,
			    HARNESS_HANG_S);
	CHECK_EQ_LONG(util_memcg_usage(storm_group, TALLY_MEMCG_READ_DRAIN),
		      held + storm_handler_bytes);
	CHECK_EQ_LONG(util_memcg_usage(tally_memcg_root(t),
				       TALLY_MEMCG_READ_DRAIN),
		      held + storm_handler_bytes);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.underflows, 0);
	harness_log("%ld signals sent, %ld handled, rseq %d", s.sent,
		    storm_handled, info.rseq);
	tally_memcg_tree_destroy(t);
}

/*
 * A thread stopped at an arbitrary point of a loop of charges: SIGSTOP
 * stops the whole process on Linux, so the stop is a signal handler that
 * blocks until released (the thread is then off-CPU at an arbitrary
 * instruction of its loop, exactly as a stopped or long-preempted
 * thread).  memcg.h: "Charges and uncharges served by the stocks never
 * wait for anything"; uncharges never wait.  Another thread's charges
 * and uncharges must all complete while it is stopped.
 */
static int stop_pipe[2];
static int stop_entered;	/* another thread waits for it */

static void stop_handler(int sig)
{
	char c;
	int saved = errno;

	(void)sig;
	__atomic_store_n(&stop_entered, 1, __ATOMIC_RELEASE);
	while (read(stop_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	errno = saved;
}

struct looper {
	struct tally_memcg *g;
	volatile int stop;
	long held;
};

/*
 * Runs of 32 charges then 32 uncharges of mixed sizes (as in the signal
 * storm) so that @g's stock is emptied and overflowed: both the stock and
 * the page counter paths are run, and a stop lands in either.
 */
static bool charge_run(struct tally_memcg *g, long i, long *held)
{
	long b = (i % 7 + 1) * KB;

	if (!((i >> 5) & 1)) {
		if (!CHECK_EQ_LONG(tally_memcg_charge(g, b, 0), 0))
			return false;
		*held += b;
	} else if (*held >= b) {
		if (!CHECK_EQ_LONG(tally_memcg_uncharge(g, b), 0))
			return false;
		*held -= b;
	}
	return true;
}

static void *charge_loop(void *arg)
{
	struct looper *l = arg;
	long i;

	for (i = 0; !__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE); i++)
		if (!charge_run(l->g, i, &l->held))
			break;
	return NULL;
}

struct other {
	struct tally_memcg *g;
	long n, held;
	int done;
};

static void *other_run(void *arg)
{
	struct other *o = arg;
	long i;

	for (i = 0; i < o->n; i++)
		if (!charge_run(o->g, i, &o->held))
			break;
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(a_thread_stopped_in_a_loop_of_charges_does_not_block_other_threads)
{
	struct sigaction sa = { .sa_handler = stop_handler }, old;
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 16 * KB);
	struct looper l = { 0 };
	struct other o = { 0 };
	pthread_t th, oth;
	long held = 0, rounds, blocked = 0;
	double deadline;

	REQUIRE(t);
	l.g = util_memcg_group(tally_memcg_root(t), "shared");
	REQUIRE(l.g);
	REQUIRE(pipe(stop_pipe) == 0);
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR2, &sa, &old) == 0);
	REQUIRE(pthread_create(&th, NULL, charge_loop, &l) == 0);
	for (rounds = 0; rounds < 60; rounds++) {
		__atomic_store_n(&stop_entered, 0, __ATOMIC_RELAXED);
		usleep(100 + rounds * 37);	/* a different point each round */
		REQUIRE(pthread_kill(th, SIGUSR2) == 0);
		while (!__atomic_load_n(&stop_entered, __ATOMIC_ACQUIRE))
			sched_yield();
		/*
		 * Stopped: another thread's charges and uncharges of the same
		 * group complete.  Not a timing test: only a thread that waits
		 * for the stopped one misses the (generous) deadline, and is
		 * then let go by releasing the stopped thread.
		 */
		o = (struct other){ .g = l.g, .n = harness_scale(3000) };
		REQUIRE(pthread_create(&oth, NULL, other_run, &o) == 0);
		deadline = harness_now() + HARNESS_HANG_S;
		while (!__atomic_load_n(&o.done, __ATOMIC_ACQUIRE) &&
		       harness_now() < deadline)
			usleep(200);
		if (!__atomic_load_n(&o.done, __ATOMIC_ACQUIRE))
			blocked++;
		REQUIRE(write(stop_pipe[1], "x", 1) == 1);
		pthread_join(oth, NULL);
		held += o.held;
		if (blocked)
			break;
	}
	CHECK_EQ_LONG(blocked, 0);
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	sigaction(SIGUSR2, &old, NULL);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	CHECK_EQ_LONG(util_memcg_usage(l.g, TALLY_MEMCG_READ_DRAIN),
		      held + l.held);
	tally_memcg_tree_destroy(t);
}

/*
 * README's table: READ_APPROX is "in [exact, exact + 2 x batch x CPUs x
 * groups] at quiescence"; READ_PRECISE and READ_DRAIN are exact.  Random
 * charges and uncharges on every CPU of a 64 and a 384-CPU simulated
 * domain, over a tree of 3 groups, then each read of each group is held to
 * its bound, and the returned interval is held to contain the exact value.
 */
static void approx_interval_holds(unsigned int nr_cpus)
{
	struct tally_domain *d = NULL;
	struct tally_memcg_tree *t;
	struct tally_memcg *g[3];
	long exact[3] = { 0 }, held[3][8] = { { 0 } };
	const long batch = 8 * KB;
	struct rng r = rng_seed(nr_cpus);
	long i, n = harness_scale(60000);
	int k;

	REQUIRE(tally_domain_create_simulated(&d, nr_cpus,
					      TALLY_GROUP_LOW_BITS) == 0);
	t = util_memcg_tree(d, batch);
	if (!t) {
		tally_domain_destroy(d);
		return;
	}
	g[0] = util_memcg_group(tally_memcg_root(t), "p");
	g[1] = util_memcg_group(g[0], "c1");
	g[2] = util_memcg_group(g[0], "c2");
	REQUIRE(g[0] && g[1] && g[2]);
	for (i = 0; i < n; i++) {
		int which = rng_below(&r, 3);
		unsigned int cpu = rng_below(&r, nr_cpus);
		int slot = rng_below(&r, 8);
		long b = (rng_below(&r, 16) + 1) * 512;

		if (held[which][slot] >= b && rng_below(&r, 2)) {
			if (!CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g[which],
					cpu, b), 0))
				break;
			held[which][slot] -= b;
		} else {
			if (!CHECK_EQ_LONG(tally_memcg_charge_cpu(g[which],
					cpu, b, 0), 0))
				break;
			held[which][slot] += b;
		}
	}
	CHECK_EQ_LONG(i, n);
	/*
	 * The worst case: every stock of every group filled to its cap by
	 * charges then uncharges of half batches on every CPU.
	 */
	for (k = 0; k < 3; k++) {
		unsigned int cpu;
		int j;

		for (cpu = 0; cpu < nr_cpus; cpu++) {
			for (j = 0; j < 8; j++)
				CHECK_EQ_LONG(tally_memcg_charge_cpu(g[k], cpu,
						batch / 2, 0), 0);
			for (j = 0; j < 8; j++)
				CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g[k],
						cpu, batch / 2), 0);
		}
	}
	for (k = 0; k < 3; k++) {
		int s;

		for (s = 0; s < 8; s++)
			exact[k] += held[k][s];
	}
	exact[0] += exact[1] + exact[2];
	for (k = 0; k < 3; k++) {
		struct tally_memcg_range a, p;
		long nr_groups = k == 0 ? 3 : 1;

		REQUIRE(tally_memcg_usage(g[k], TALLY_MEMCG_READ_APPROX,
					  &a) == 0);
		REQUIRE(tally_memcg_usage(g[k], TALLY_MEMCG_READ_PRECISE,
					  &p) == 0);
		CHECK(a.min <= exact[k] && exact[k] <= a.max);
		CHECK(a.value >= exact[k]);
		CHECK_LE_LONG(a.value - exact[k],
			      2 * batch * (long)nr_cpus * nr_groups);
		CHECK_EQ_LONG(p.value, exact[k]);
		CHECK(p.min <= exact[k] && exact[k] <= p.max);
	}
	for (k = 2; k >= 0; k--)
		CHECK_EQ_LONG(util_memcg_usage(g[k], TALLY_MEMCG_READ_DRAIN),
			      exact[k]);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}

TEST(approx_read_lies_in_its_documented_interval_on_64_cpus)
{
	approx_interval_holds(64);
}

TEST(approx_read_lies_in_its_documented_interval_on_384_cpus)
{
	approx_interval_holds(384);
}

/*
 * memcg.h, tally_memcg_destroy() and the file comment: a destroyed
 * group's handle stays valid, its usage reads 0, its charges and
 * uncharges go to the nearest live ancestor, its path is refused, and
 * tally_memcg_tree_info() counts it as a zombie, not a group.
 */
TEST(zombie_handles_charge_the_parent_read_zero_and_are_counted)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg *p, *c, *gc;
	struct tally_memcg_info info;
	struct tally_memcg_range r;
	char buf[64];

	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	REQUIRE(p);
	c = util_memcg_group(p, "c");
	REQUIRE(c);
	gc = util_memcg_group(c, "gc");
	REQUIRE(gc);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 4);
	CHECK_EQ_ULONG(info.zombies, 0);
	CHECK_EQ_LONG(tally_memcg_charge(gc, 100 * KB, 0), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(gc), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(c), 0);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	CHECK_EQ_ULONG(info.groups, 2);
	CHECK_EQ_ULONG(info.zombies, 2);
	/* The charge moved to p; the zombies read 0. */
	CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN), 100 * KB);
	CHECK_EQ_LONG(tally_memcg_usage(gc, TALLY_MEMCG_READ_PRECISE, &r), 0);
	CHECK_EQ_LONG(r.value, 0);
	CHECK_EQ_LONG(tally_memcg_usage(c, TALLY_MEMCG_READ_DRAIN, &r), 0);
	CHECK_EQ_LONG(r.value, 0);
	/* A grandchild's zombie charges p, its nearest live ancestor. */
	CHECK_EQ_LONG(tally_memcg_charge(gc, 20 * KB, 0), 0);
	CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN), 120 * KB);
	CHECK_EQ_LONG(tally_memcg_uncharge(gc, 120 * KB), 0);
	CHECK_EQ_LONG(util_memcg_usage(p, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_LONG(util_memcg_usage(tally_memcg_root(t),
				       TALLY_MEMCG_READ_DRAIN), 0);
	/* Structure calls on a zombie are refused. */
	CHECK_EQ_LONG(tally_memcg_path(gc, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_set_limit(gc, TALLY_MEMCG_MAX, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_create(c, "x", NULL), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_destroy(c), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_events_fd(c), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_render(c, TALLY_MEMCG_FILE_LIMITS, false,
					 buf, sizeof(buf)), -EINVAL);
	tally_memcg_tree_destroy(t);
}

/*
 * tally_memcg_tree_info(): refills count charges that reached the page
 * counters, refusals the -ENOMEM returns, drains the drains, underflows
 * the drains that found a stock holding more than its counter.
 */
TEST(tree_info_counts_refills_refusals_drains_and_underflows)
{
	struct tally_domain *d = NULL;
	struct tally_memcg_tree *t;
	struct tally_memcg *g, *h;
	struct tally_memcg_info a, b;

	REQUIRE(tally_domain_create_simulated(&d, 2, TALLY_GROUP_LOW_BITS)
		== 0);
	t = util_memcg_tree(d, 16 * KB);
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	h = util_memcg_group(tally_memcg_root(t), "h");
	REQUIRE(g && h);
	REQUIRE(tally_memcg_set_limit(g, TALLY_MEMCG_MAX, 64 * KB) == 0);
	REQUIRE(tally_memcg_tree_info(t, &a) == 0);
	CHECK_EQ_LONG(a.rseq, 0);	/* simulated: atomic stocks */
	/* First charge: the stock is empty, a refill. */
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 0, 4 * KB, 0), 0);
	REQUIRE(tally_memcg_tree_info(t, &b) == 0);
	CHECK_EQ_ULONG(b.refills, a.refills + 1);
	/* Served by the stock: no refill. */
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 0, 4 * KB, 0), 0);
	REQUIRE(tally_memcg_tree_info(t, &a) == 0);
	CHECK_EQ_ULONG(a.refills, b.refills);
	/* A refused charge: one refusal, at least one drain. */
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 1, 64 * KB,
					     TALLY_MEMCG_NORECLAIM), -ENOMEM);
	REQUIRE(tally_memcg_tree_info(t, &b) == 0);
	CHECK_EQ_ULONG(b.refusals, a.refusals + 1);
	CHECK(b.drains > a.drains);
	CHECK_EQ_LONG(tally_memcg_drain(g), 0);
	REQUIRE(tally_memcg_tree_info(t, &a) == 0);
	CHECK(a.drains > b.drains);
	CHECK_EQ_ULONG(a.underflows, 0);
	/*
	 * An over-uncharge the stock absorbs is caught at the next drain:
	 * the usage is clamped at 0 and one underflow counted.
	 */
	CHECK_EQ_LONG(tally_memcg_charge_cpu(h, 0, 1 * KB, 0), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(h, 1, 2 * KB), 0);
	CHECK_EQ_LONG(tally_memcg_drain(h), 0);
	REQUIRE(tally_memcg_tree_info(t, &b) == 0);
	CHECK_EQ_ULONG(b.underflows, a.underflows + 1);
	CHECK_EQ_LONG(util_memcg_usage(h, TALLY_MEMCG_READ_DRAIN), 0);
	CHECK_EQ_ULONG(b.groups, 3);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}

/*
 * Events are exact under concurrency: with NORECLAIM and the FAIL
 * policy, every -ENOMEM is one max event and nothing else, and the
 * eventfd of the parent adds exactly one per event.
 */
struct refuser {
	struct tally_memcg *g;
	long refused, held, n;
};

static void *refuse_loop(void *arg)
{
	struct refuser *r = arg;
	long i;

	for (i = 0; i < r->n; i++) {
		int ret = tally_memcg_charge(r->g, 4 * KB,
					     TALLY_MEMCG_NORECLAIM);

		if (ret == -ENOMEM) {
			r->refused++;
		} else if (ret == 0) {
			r->held += 4 * KB;
		} else {
			CHECK_EQ_LONG(ret, 0);
			break;
		}
		if ((i & 3) == 3 && r->held >= 4 * KB &&
		    CHECK_EQ_LONG(tally_memcg_uncharge(r->g, 4 * KB), 0))
			r->held -= 4 * KB;
	}
	return NULL;
}

TEST(max_events_and_the_eventfd_count_every_refusal_under_concurrency)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 8 * KB);
	struct tally_memcg *p, *c;
	struct refuser r[2];
	pthread_t th[2];
	uint64_t fd_count = 0;
	int fd, i;

	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	REQUIRE(p);
	c = util_memcg_group(p, "c");
	REQUIRE(c);
	REQUIRE(tally_memcg_set_limit(c, TALLY_MEMCG_MAX, 128 * KB) == 0);
	fd = tally_memcg_events_fd(p);
	REQUIRE(fd >= 0);
	for (i = 0; i < 2; i++) {
		r[i] = (struct refuser){ .g = c, .n = harness_scale(3000) };
		REQUIRE(pthread_create(&th[i], NULL, refuse_loop, &r[i]) == 0);
	}
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(r[0].refused + r[1].refused > 0);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_MAX, true),
		      r[0].refused + r[1].refused);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_MAX, false),
		      r[0].refused + r[1].refused);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_MAX, true), 0);
	CHECK_EQ_LONG(util_memcg_event(c, TALLY_MEMCG_EVENT_OOM, false), 0);
	CHECK_EQ_LONG(read(fd, &fd_count, sizeof(fd_count)),
		      (long)sizeof(fd_count));
	CHECK_EQ_LONG((long)fd_count, r[0].refused + r[1].refused);
	CHECK_EQ_LONG(util_memcg_usage(c, TALLY_MEMCG_READ_DRAIN),
		      r[0].held + r[1].held);
	tally_memcg_tree_destroy(t);
}

/*
 * TALLY_MEMCG_UNLIMITED is accepted for every limit, read back, and
 * rendered "max"; a negative limit is -EINVAL; uncharge and the _cpu
 * calls refuse what memcg.h says they refuse.  (It found min and low
 * rendered as 9223372036854775807 where the kernel, and memcg.h, say
 * "max".)
 */
TEST(unlimited_is_accepted_and_rendered_max_and_bad_sizes_are_einval)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 0);
	struct tally_memcg_limits lim;
	struct tally_memcg *g;
	char buf[512];
	int w;

	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	for (w = TALLY_MEMCG_MIN; w <= TALLY_MEMCG_MAX; w++) {
		CHECK_EQ_LONG(tally_memcg_set_limit(g, w, 4 * KB), 0);
		CHECK_EQ_LONG(tally_memcg_set_limit(g, w,
						    TALLY_MEMCG_UNLIMITED), 0);
		CHECK_EQ_LONG(tally_memcg_set_limit(g, w, -1), -EINVAL);
	}
	CHECK_EQ_LONG(tally_memcg_set_limit(g, TALLY_MEMCG_MAX + 1, 0),
		      -EINVAL);
	REQUIRE(tally_memcg_get_limits(g, &lim) == 0);
	CHECK_EQ_LONG(lim.min, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(lim.low, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(lim.high, TALLY_MEMCG_UNLIMITED);
	CHECK_EQ_LONG(lim.max, TALLY_MEMCG_UNLIMITED);
	CHECK(tally_memcg_render(g, TALLY_MEMCG_FILE_LIMITS, false, buf,
				 sizeof(buf)) > 0);
	CHECK(strstr(buf, "memory.max max\n") != NULL);
	CHECK(strstr(buf, "memory.high max\n") != NULL);
	CHECK(strstr(buf, "memory.min max\n") != NULL);
	CHECK(strstr(buf, "memory.low max\n") != NULL);
	/* A NOFAIL charge of the largest size fits under no-limit max. */
	CHECK_EQ_LONG(tally_memcg_charge(g, TALLY_MEMCG_BYTES_MAX,
					 TALLY_MEMCG_NOFAIL), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, TALLY_MEMCG_BYTES_MAX), 0);
	/* Sizes and NULLs. */
	CHECK_EQ_LONG(tally_memcg_uncharge(g, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, -1), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, TALLY_MEMCG_BYTES_MAX + 1),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(NULL, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge(g, TALLY_MEMCG_BYTES_MAX + 1, 0),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 0, KB, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g, 0, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod_cpu(g, 0, TALLY_MEMCG_ANON, KB),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_peak(NULL, false), -EINVAL);
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
}

/* memcg.h: -EINVAL for a CPU out of range on a simulated domain. */
TEST(cpu_calls_refuse_a_cpu_out_of_range_and_the_system_calls)
{
	struct tally_domain *d = NULL;
	struct tally_memcg_tree *t;
	struct tally_memcg *g;

	REQUIRE(tally_domain_create_simulated(&d, 4, TALLY_GROUP_LOW_BITS)
		== 0);
	t = util_memcg_tree(d, 0);
	REQUIRE(t);
	g = util_memcg_group(tally_memcg_root(t), "g");
	REQUIRE(g);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 4, KB, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, UINT_MAX, KB, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g, 4, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod_cpu(g, 4, TALLY_MEMCG_ANON, KB),
		      -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge(g, KB, 0), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_uncharge(g, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, KB), -EINVAL);
	CHECK_EQ_LONG(tally_memcg_charge_cpu(g, 3, KB, 0), 0);
	CHECK_EQ_LONG(tally_memcg_uncharge_cpu(g, 3, KB), 0);
	CHECK_EQ_LONG(util_memcg_usage(g, TALLY_MEMCG_READ_DRAIN), 0);
	tally_memcg_tree_destroy(t);
	tally_domain_destroy(d);
}

/*
 * memcg.h: TALLY_MEMCG_OVER_HIGH means "charged, and some level is now
 * above its high"; the high event is "a charge left the group's usage
 * above high", and high is checked when a charge reaches the page
 * counters.  Under concurrent charges of one group with a high (its
 * parent has none): every OVER_HIGH return has its high event, and only
 * charges that reached the counters (refills) count one.  Not equality:
 * an uncharge by another thread between the event and the return's
 * re-read of the usage makes an event without an OVER_HIGH return.
 */
struct high_runner {
	struct tally_memcg *g;
	long n, over_high, held;
};

static void *high_loop(void *arg)
{
	struct high_runner *r = arg;
	long i;

	for (i = 0; i < r->n; i++) {
		int ret = tally_memcg_charge(r->g, 4 * KB,
					     TALLY_MEMCG_NORECLAIM);

		if (ret == TALLY_MEMCG_OVER_HIGH)
			r->over_high++;
		else if (!CHECK_EQ_LONG(ret, 0))
			break;
		r->held += 4 * KB;
		if ((i & 1) && CHECK_EQ_LONG(tally_memcg_uncharge(r->g, 4 * KB),
					     0))
			r->held -= 4 * KB;
		if (r->held > 512 * KB) {
			CHECK_EQ_LONG(tally_memcg_uncharge(r->g, r->held), 0);
			r->held = 0;
		}
	}
	return NULL;
}

TEST(every_over_high_return_has_its_high_event_under_concurrency)
{
	struct tally_memcg_tree *t = util_memcg_tree(NULL, 8 * KB);
	struct tally_memcg *p, *c;
	struct high_runner r[2];
	struct tally_memcg_info info;
	unsigned long refills0;
	pthread_t th[2];
	long events;
	int i;

	REQUIRE(t);
	p = util_memcg_group(tally_memcg_root(t), "p");
	REQUIRE(p);
	c = util_memcg_group(p, "c");
	REQUIRE(c);
	REQUIRE(tally_memcg_set_limit(c, TALLY_MEMCG_HIGH, 256 * KB) == 0);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	refills0 = info.refills;
	for (i = 0; i < 2; i++) {
		r[i] = (struct high_runner){ .g = c, .n = harness_scale(20000) };
		REQUIRE(pthread_create(&th[i], NULL, high_loop, &r[i]) == 0);
	}
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	REQUIRE(tally_memcg_tree_info(t, &info) == 0);
	events = util_memcg_event(c, TALLY_MEMCG_EVENT_HIGH, true);
	CHECK(r[0].over_high + r[1].over_high > 0);
	CHECK_LE_LONG(r[0].over_high + r[1].over_high, events);
	CHECK_LE_LONG(events, (long)(info.refills - refills0));
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, false),
		      events);
	CHECK_EQ_LONG(util_memcg_event(p, TALLY_MEMCG_EVENT_HIGH, true), 0);
	CHECK_EQ_LONG(util_memcg_usage(c, TALLY_MEMCG_READ_DRAIN),
		      r[0].held + r[1].held);
	tally_memcg_tree_destroy(t);
}
