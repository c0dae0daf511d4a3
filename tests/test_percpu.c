// SPDX-License-Identifier: MIT
/*
 * test_percpu.c - the per-CPU allocator, the per-CPU add paths and the
 * process-wide rseq mode (glibc, own registration, fallback).
 *
 * The runner runs this binary with no rseq variable, with TALLY_RSEQ=off
 * and with GLIBC_TUNABLES=glibc.pthread.rseq=0; the mode test also starts
 * a fresh copy of itself in each of the three settings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

static bool all_zero(const void *p, unsigned int nr_cpus, size_t size)
{
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++) {
		const unsigned char *b = tally_percpu_ptr(p, cpu);

		for (size_t i = 0; i < size; i++)
			if (b[i])
				return false;
	}
	return true;
}

static void fill(void *p, unsigned int nr_cpus, size_t size, int byte)
{
	for (unsigned int cpu = 0; cpu < nr_cpus; cpu++)
		memset(tally_percpu_ptr(p, cpu), byte, size);
}

TEST(alloc_returns_zeroed_memory_on_every_cpu)
{
	static const unsigned int nrs[] = { 1, 3, 64 };

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		struct tally_domain *d = util_domain(nrs[i]);
		void *p[4];

		for (size_t k = 0; k < ARRAY_SIZE(p); k++) {
			size_t size = 8 + 1000 * k;

			p[k] = tally_percpu_alloc(d, size, 0);
			if (CHECK(p[k])) {
				CHECK(all_zero(p[k], nrs[i], size));
				fill(p[k], nrs[i], size, 0x5a);
			}
		}
		for (size_t k = 0; k < ARRAY_SIZE(p); k++)
			tally_percpu_free(d, p[k]);
		tally_domain_destroy(d);
	}
}

TEST(freed_memory_comes_back_zeroed)
{
	struct tally_domain *d = util_domain(5);

	for (size_t size = 1; size <= TALLY_PERCPU_UNIT; size *= 4) {
		void *p = tally_percpu_alloc(d, size, 0), *q;

		REQUIRE(p);
		fill(p, 5, size, 0xff);
		tally_percpu_free(d, p);
		q = tally_percpu_alloc(d, size, 0);
		/* The last allocation freed: its place again, cleared. */
		CHECK(q == p);
		CHECK(q && all_zero(q, 5, size));
		tally_percpu_free(d, q);
	}
	tally_domain_destroy(d);
}

TEST(alloc_honours_every_alignment_up_to_4096)
{
	struct tally_domain *d = util_domain(3);
	void *odd = tally_percpu_alloc(d, 8, 0);

	REQUIRE(odd);
	for (size_t align = 0; align <= 4096; align = align ? align * 2 : 1) {
		for (size_t size = 1; size <= 5000; size = size * 3 + 1) {
			void *p = tally_percpu_alloc(d, size, align);
			size_t want = align > 8 ? align : 8;

			if (!CHECK(p))
				continue;
			for (unsigned int cpu = 0; cpu < 3; cpu++) {
				uintptr_t a = (uintptr_t)tally_percpu_ptr(p,
									  cpu);

				CHECK_EQ_ULONG(a % want, 0);
			}
			/* Leave it, so later ones start unaligned. */
			if (size % 2)
				tally_percpu_free(d, p);
		}
	}
	tally_percpu_free(d, odd);
	tally_domain_destroy(d);
}

/* Every long of @p's copy on @cpu set to, or checked against, @tag. */
static void tag_copy(void *p, unsigned int cpu, size_t size, long tag)
{
	long *w = tally_percpu_ptr(p, cpu);

	for (size_t i = 0; i < size / sizeof(long); i++)
		w[i] = tag;
}

static bool copy_has_tag(const void *p, unsigned int cpu, size_t size,
			 long tag)
{
	const long *w = tally_percpu_ptr(p, cpu);

	for (size_t i = 0; i < size / sizeof(long); i++)
		if (w[i] != tag)
			return false;
	return true;
}

/*
 * 40 allocations of 4 KiB need several 64 KiB units: each keeps its own
 * bytes on every CPU (a distinct tag per allocation and CPU survives the
 * others' writes), and all come back zeroed.
 */
TEST(allocations_spanning_several_chunks_never_overlap)
{
	enum { NR = 40, SIZE = 4096, CPUS = 7 };
	struct tally_domain *d = util_domain(CPUS);
	void *p[NR];

	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < NR; i++) {
			p[i] = tally_percpu_alloc(d, SIZE, 64);
			REQUIRE(p[i]);
			CHECK(all_zero(p[i], CPUS, SIZE));
			for (unsigned int cpu = 0; cpu < CPUS; cpu++)
				tag_copy(p[i], cpu, SIZE, i * CPUS + cpu + 1);
		}
		for (int i = 0; i < NR; i++)
			for (unsigned int cpu = 0; cpu < CPUS; cpu++)
				if (!CHECK(copy_has_tag(p[i], cpu, SIZE,
							i * CPUS + cpu + 1)))
					return;
		for (int i = 0; i < NR; i++)
			tally_percpu_free(d, p[i]);
	}
	tally_domain_destroy(d);
}

TEST(cpu_copies_of_a_64_aligned_allocation_never_share_a_cache_line)
{
	enum { CPUS = 384 };
	struct tally_domain *d = util_domain(CPUS);
	void *pad = tally_percpu_alloc(d, 24, 0);
	void *p = tally_percpu_alloc(d, 64, 64);

	REQUIRE(pad && p);
	for (unsigned int a = 0; a < CPUS; a++) {
		uintptr_t la = (uintptr_t)tally_percpu_ptr(p, a) / 64;
		uintptr_t pa = (uintptr_t)tally_percpu_ptr(pad, a) / 64;

		/* Nor a line with another allocation's copy. */
		CHECK(la != pa);
		for (unsigned int b = a + 1; b < CPUS; b++) {
			uintptr_t lb = (uintptr_t)tally_percpu_ptr(p, b) / 64;

			if (!CHECK(la != lb))
				break;
		}
	}
	tally_percpu_free(d, p);
	tally_percpu_free(d, pad);
	tally_domain_destroy(d);
}

TEST(bad_sizes_and_alignments_fail_with_einval)
{
	static const struct {
		size_t size, align;
	} bad[] = {
		{ 0, 0 },
		{ TALLY_PERCPU_UNIT + 1, 0 },
		{ SIZE_MAX, 8 },
		{ 8, 3 },
		{ 8, 24 },
		{ 8, 8192 },
		{ 8, 1ul << 40 },
	};
	struct tally_domain *d = util_domain(2);
	void *p;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errno = 0;
		CHECK(tally_percpu_alloc(d, bad[i].size, bad[i].align) == NULL);
		CHECK_EQ_LONG(errno, EINVAL);
	}
	/* The limits themselves are fine. */
	p = tally_percpu_alloc(d, TALLY_PERCPU_UNIT, 4096);
	CHECK(p);
	tally_percpu_free(d, p);
	tally_percpu_free(d, NULL);
	tally_domain_destroy(d);
}

struct cpu_adder {
	long *slots;
	unsigned int cpu;
	long n;
};

static void *add_on_cpu_thread(void *arg)
{
	struct cpu_adder *a = arg;

	for (long i = 0; i < a->n; i++)
		tally_percpu_add_return_cpu(a->slots, a->cpu, i % 3 ? 2 : -1);
	return NULL;
}

TEST(add_return_cpu_is_atomic_across_threads_sharing_a_cpu)
{
	enum { THREADS = 4, CPUS = 3 };
	struct tally_domain *d = util_domain(CPUS);
	long *slots = tally_percpu_alloc(d, sizeof(long), 0);
	struct cpu_adder a[THREADS];
	pthread_t t[THREADS];
	long n = harness_scale(200000), per_thread;

	REQUIRE(slots);
	CHECK_EQ_LONG(tally_percpu_add_return_cpu(slots, 2, 5), 5);
	CHECK_EQ_LONG(tally_percpu_add_return_cpu(slots, 2, -7), -2);
	CHECK_EQ_LONG(tally_percpu_read_cpu(slots, 2), -2);
	CHECK_EQ_LONG(tally_percpu_read_cpu(slots, 1), 0);
	for (int i = 0; i < THREADS; i++) {
		a[i] = (struct cpu_adder){ slots, 1, n };
		pthread_create(&t[i], NULL, add_on_cpu_thread, &a[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	/* Per thread: 2 for i % 3 != 0, -1 for i % 3 == 0. */
	per_thread = 2 * (n - (n + 2) / 3) - (n + 2) / 3;
	CHECK_EQ_LONG(tally_percpu_read_cpu(slots, 1), THREADS * per_thread);
	CHECK_EQ_LONG(tally_percpu_read_cpu(slots, 2), -2);
	tally_percpu_free(d, slots);
	tally_domain_destroy(d);
}

/* Pinned to each allowed CPU in turn, the update lands on that CPU. */
TEST(add_return_updates_the_slot_of_the_cpu_it_runs_on)
{
	long *slots = tally_percpu_alloc(NULL, sizeof(long), 0);

	REQUIRE(slots);
	for (unsigned int i = 0; i < 2 * util_nr_allowed(); i++) {
		unsigned int want = util_allowed_cpu(i), cpu = ~0u;
		long before = tally_percpu_read_cpu(slots, want), res;

		if (!CHECK_EQ_LONG(util_pin((int)want), 0))
			continue;
		CHECK_EQ_LONG(tally_current_cpu(), want);
		res = tally_percpu_add_return(slots, 10 + i, &cpu);
		CHECK_EQ_LONG(cpu, want);
		CHECK_EQ_LONG(res, before + 10 + i);
		CHECK_EQ_LONG(tally_percpu_read_cpu(slots, want), res);
		tally_percpu_add(slots, -3);
		CHECK_EQ_LONG(tally_percpu_read_cpu(slots, want), res - 3);
	}
	util_pin(-1);
	tally_percpu_free(NULL, slots);
}

struct migrator {
	long *slots;
	long n;
	unsigned int seed;
};

static void *add_and_migrate_thread(void *arg)
{
	struct migrator *m = arg;
	struct rng r = rng_seed(m->seed);

	for (long i = 0; i < m->n; i++) {
		if (i % 64 == 0)
			util_pin_random(&r);
		if (i % 2) {
			tally_percpu_add(m->slots, 3);
		} else {
			unsigned int cpu;

			tally_percpu_add_return(m->slots, -1, &cpu);
		}
	}
	return NULL;
}

TEST(per_cpu_adds_from_migrating_threads_sum_exactly)
{
	enum { THREADS = 8 };
	struct tally_domain *sys = tally_domain_system();
	long *slots = tally_percpu_alloc(NULL, sizeof(long), 0);
	struct migrator m[THREADS];
	pthread_t t[THREADS];
	long n = harness_scale(400000), sum = 0;

	REQUIRE(sys && slots);
	for (unsigned int i = 0; i < THREADS; i++) {
		m[i] = (struct migrator){ slots, n, i };
		pthread_create(&t[i], NULL, add_and_migrate_thread, &m[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (unsigned int cpu = 0; cpu < tally_domain_nr_cpus(sys); cpu++)
		sum += tally_percpu_read_cpu(slots, cpu);
	/* Per thread: n / 2 adds of 3 and n / 2 of -1. */
	CHECK_EQ_LONG(sum, THREADS * (n / 2) * 2);
	tally_percpu_free(NULL, slots);
}

/* The mode this process must be in, from its environment. */
static enum tally_rseq_mode expected_mode(void)
{
	const char *off = getenv("TALLY_RSEQ");
	const char *tunables = getenv("GLIBC_TUNABLES");

	if (off && !strcmp(off, "off"))
		return TALLY_RSEQ_FALLBACK;
	/* A kernel without rseq says ENOSYS; one with it, EINVAL. */
	if (syscall(__NR_rseq, NULL, 0, 0, 0) == -1 && errno == ENOSYS)
		return TALLY_RSEQ_FALLBACK;
	if (tunables && strstr(tunables, "glibc.pthread.rseq=0"))
		return TALLY_RSEQ_OWN;
	return TALLY_RSEQ_GLIBC;
}

TEST(rseq_mode_follows_the_environment_in_every_setting)
{
	static const char *const settings[][3] = {
		{ "TALLY_RSEQ=", "GLIBC_TUNABLES=", NULL },
		{ "TALLY_RSEQ=off", "GLIBC_TUNABLES=", NULL },
		{ "TALLY_RSEQ=", "GLIBC_TUNABLES=glibc.pthread.rseq=0", NULL },
		{ "TALLY_RSEQ=off", "GLIBC_TUNABLES=glibc.pthread.rseq=0",
		  NULL },
	};
	long *slots = tally_percpu_alloc(NULL, sizeof(long), 0);
	long sum = 0;

	CHECK_EQ_LONG(tally_rseq_mode(), expected_mode());
	REQUIRE(slots);
	for (int i = 0; i < 1000; i++)
		tally_percpu_add(slots, i);
	for (unsigned int cpu = 0; cpu < tally_domain_nr_cpus(
					   tally_domain_system());
	     cpu++)
		sum += tally_percpu_read_cpu(slots, cpu);
	CHECK_EQ_LONG(sum, 999 * 1000 / 2);
	tally_percpu_free(NULL, slots);
	if (harness_is_child())
		return;
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		CHECK_EQ_LONG(RERUN_THIS_TEST(settings[i]), 0);
}

/*
 * On a VM with hundreds of possible CPUs and a few online, per-CPU memory
 * of the absent CPUs must stay uncommitted: allocating and freeing objects
 * that only 2 CPUs wrote may not commit a page for each of the other
 * 4094 CPUs.
 */
TEST(free_leaves_the_pages_of_cpus_that_never_wrote_uncommitted)
{
	struct tally_domain *d;
	void *p[64];
	long before, after;

#ifdef __SANITIZE_THREAD__
	/* TSan commits shadow memory for every byte the allocator reads. */
	harness_log("resident size not measurable under TSan: skipped");
	return;
#endif
	d = util_domain(4096);

	/* A first allocation maps the chunk; count from there. */
	p[0] = tally_percpu_alloc(d, 8, 0);
	REQUIRE(p[0]);
	before = util_resident_pages();
	REQUIRE(before > 0);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 1; i < ARRAY_SIZE(p); i++) {
			p[i] = tally_percpu_alloc(d, 64 * i, 64);
			REQUIRE(p[i]);
			memset(tally_percpu_ptr(p[i], 7), 0x11, 64 * i);
			memset(tally_percpu_ptr(p[i], 4000), 0x22, 64 * i);
		}
		for (size_t i = 1; i < ARRAY_SIZE(p); i++) {
			tally_percpu_free(d, p[i]);
			p[i] = tally_percpu_alloc(d, 64 * i, 64);
			REQUIRE(p[i]);
			CHECK(all_zero(tally_percpu_ptr(p[i], 7), 1, 64 * i));
			CHECK(all_zero(tally_percpu_ptr(p[i], 4000), 1,
				       64 * i));
			tally_percpu_free(d, p[i]);
		}
	}
	after = util_resident_pages();
	/* Two CPUs wrote at most 64 pages each; 4096 would be a leak. */
	if (!CHECK_LE_LONG(after - before, 1024))
		harness_log("resident pages %ld -> %ld", before, after);
	tally_percpu_free(d, p[0]);
	tally_domain_destroy(d);
}
