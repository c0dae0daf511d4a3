// SPDX-License-Identifier: MIT
/*
 * bench_charge_oracle.c - `tally bench charge`, the accuracy and error
 * phases: every design against an exact oracle, untimed.
 *
 *   accuracy  the cost phase's cells: each thread charges random sizes
 *             (64 B to 16 KiB) and uncharges random ones of its own,
 *             aiming at twice the room left (6.4 MiB / threads each), so
 *             real refusals happen at 95%.  Then, with every thread
 *             stopped holding its charges, the design's usage is compared
 *             with the exact one.
 *   error     the usage error at quiescence at 16, 64 and 256 threads
 *             without a limit, on this machine's CPUs and on simulated
 *             domains of 64 and 384 CPUs (each charge and uncharge on a
 *             random CPU, as threads migrate).
 *
 * The oracle (accuracy and error phases) is sound: it never blames a
 * design wrongly.
 *   committed  an upper bound of the usage: raised by n before a charge
 *              is called, lowered after a refused charge returns or after
 *              an uncharge returns.  It and a count of the raises that
 *              took it above max share one word changed by compare-and-
 *              swap, so a refusal is "false" only when committed (with
 *              the charge's own n) was at most max when the call started
 *              and no raise took it above max until the call returned:
 *              then the exact usage plus n stayed within max throughout.
 *   held       a lower bound of the usage: raised after a charge returned
 *              success, lowered before an uncharge is called; the largest
 *              held - max seen when it is raised is the overshoot.
 *              At quiescence held is the exact usage.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/memcg.h>
#include "bench_charge.h"
#include "parallel.h"
#include "rand.h"

#define HELD_CAP 4096		/* charges a thread holds at most */
#define ERROR_WAVE (1l << 20)	/* working set per thread, error phase */
#define SEED 0x6d656d6367ull

static const unsigned int error_threads[] = { 16, 64, 256 };
static const unsigned int error_cpus[] = { 0, 64, 384 };	/* 0: system */

/* ---- accuracy and error: the oracle ------------------------------------ */

/*
 * committed in the low bits, raises that took it above max above them
 * (20 bits: a call would have to last a million such raises for the
 * count to wrap back to the value it started with).
 */
#define ORACLE_SHIFT 44
#define ORACLE_MASK ((1ul << ORACLE_SHIFT) - 1)

struct oracle_job {
	struct tree tree;
	unsigned int threads;
	unsigned int leaves;
	unsigned int nr_cpus;		/* simulated CPUs, 0: this machine */
	long max;
	long wave;
	unsigned long ops;
	unsigned long word;		/* committed | over-max raises */
	long held;
	long overshoot;
	unsigned long refused, false_refused;
	long error;
	int failed;
	pthread_barrier_t stop;
};

/* Raise committed by @n; returns it, with the raise count in @raises. */
static unsigned long oracle_commit(struct oracle_job *j, long n,
				   unsigned long *raises)
{
	unsigned long old = __atomic_load_n(&j->word, __ATOMIC_SEQ_CST), new;

	do {
		unsigned long c = (old & ORACLE_MASK) + (unsigned long)n;

		new = old + (unsigned long)n;
		if (c > (unsigned long)j->max)
			new += 1ul << ORACLE_SHIFT;
	} while (!__atomic_compare_exchange_n(&j->word, &old, new, false,
					      __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	*raises = new >> ORACLE_SHIFT;
	return new & ORACLE_MASK;
}

static void atomic_max(long *p, long v)
{
	long old = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (v > old && !__atomic_compare_exchange_n(p, &old, v, false,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

struct holder {
	long bytes[HELD_CAP];
	unsigned int leaf_of[HELD_CAP];	/* the leaf charged */
	unsigned int next_leaf;
	unsigned int nr;
	long total;
	uint64_t rng;
	struct charge_thread th;
	long overshoot;
	unsigned long refused, false_refused;
};

static int oracle_cpu(struct oracle_job *j, struct holder *h)
{
	return j->nr_cpus ? (int)(bench_rand(&h->rng) % j->nr_cpus) :
			    CHARGE_THIS_CPU;
}

/* One charge of a random size under the oracle. */
static int oracle_charge(struct oracle_job *j, struct holder *h)
{
	const struct charge_design *d = j->tree.d;
	long n = (long)(1 + bench_rand(&h->rng) % 256) * 64;
	unsigned long raises, after;
	unsigned long committed = oracle_commit(j, n, &raises);
	int err;

	h->th.leaf = h->next_leaf;
	err = d->charge(j->tree.obj, &h->th, oracle_cpu(j, h), n);
	if (!err) {
		if (j->leaves && ++h->next_leaf == j->leaves)
			h->next_leaf = 0;
		h->leaf_of[h->nr] = h->th.leaf;
		long held = __atomic_add_fetch(&j->held, n, __ATOMIC_SEQ_CST);

		if (held - j->max > h->overshoot)
			h->overshoot = held - j->max;
		h->bytes[h->nr++] = n;
		h->total += n;
		return 0;
	}
	if (err != -ENOMEM) {
		fprintf(stderr, "tally: %s charge: %s\n", d->name,
			strerror(-err));
		return -1;
	}
	after = __atomic_load_n(&j->word, __ATOMIC_SEQ_CST) >> ORACLE_SHIFT;
	h->refused++;
	if (committed <= (unsigned long)j->max && after == raises)
		h->false_refused++;
	__atomic_sub_fetch(&j->word, (unsigned long)n, __ATOMIC_SEQ_CST);
	return 0;
}

/* Uncharge the @i-th charge the thread holds. */
static void oracle_uncharge(struct oracle_job *j, struct holder *h,
			    unsigned int i)
{
	long n = h->bytes[i];

	h->th.leaf = h->leaf_of[i];
	h->leaf_of[i] = h->leaf_of[h->nr - 1];
	h->bytes[i] = h->bytes[--h->nr];
	h->total -= n;
	__atomic_sub_fetch(&j->held, n, __ATOMIC_SEQ_CST);
	j->tree.d->uncharge(j->tree.obj, &h->th, oracle_cpu(j, h), n);
	__atomic_sub_fetch(&j->word, (unsigned long)n, __ATOMIC_SEQ_CST);
}

static void oracle_thread(void *arg, unsigned int index)
{
	struct oracle_job *j = arg;
	struct holder *h = calloc(1, sizeof(*h));
	int failed = !h;

	if (h) {
		h->rng = SEED ^ ((uint64_t)index * 0x9e3779b97f4a7c15ull);
		h->th.nr_leaves = j->leaves;
	}
	for (unsigned long op = 0; op < j->ops && !failed; op++) {
		uint64_t coin = bench_rand(&h->rng);

		/* Three charges in four while below the aim: it gets there. */
		if (!h->nr || (h->total < j->wave && h->nr < HELD_CAP &&
			       (coin & 3)))
			failed = oracle_charge(j, h);
		else
			oracle_uncharge(j, h, (unsigned int)((coin >> 2) %
							     h->nr));
	}
	if (failed)
		__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	/* Quiescence: every thread stopped, holding its charges. */
	pthread_barrier_wait(&j->stop);
	if (!index) {
		long usage = j->tree.d->usage(j->tree.obj);
		long exact = __atomic_load_n(&j->held, __ATOMIC_SEQ_CST);

		j->error = usage > exact ? usage - exact : exact - usage;
	}
	pthread_barrier_wait(&j->stop);
	if (!h)
		return;
	while (h->nr)
		oracle_uncharge(j, h, h->nr - 1);
	j->tree.d->thread_exit(j->tree.obj, &h->th);
	atomic_max(&j->overshoot, h->overshoot);
	__atomic_add_fetch(&j->refused, h->refused, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->false_refused, h->false_refused,
			   __ATOMIC_RELAXED);
	free(h);
}

/* Run the oracle phase on a fresh tree of @d built from @s. */
static int oracle_run(struct oracle_job *j, const struct charge_design *d,
		      const struct charge_setup *s, long pre)
{
	int err;

	if (tree_make(&j->tree, d, s, pre))
		return -1;
	j->max = s->max;
	j->word = (unsigned long)pre;
	j->held = pre;
	j->overshoot = pre - s->max;
	if (pthread_barrier_init(&j->stop, NULL, j->threads)) {
		tree_free(&j->tree);
		return -1;
	}
	err = bench_run_parallel(j->threads, oracle_thread, j, NULL, 0);
	pthread_barrier_destroy(&j->stop);
	if (err)
		fprintf(stderr, "tally: cannot start %u threads: %s\n",
			j->threads, strerror(-err));
	if (tree_free(&j->tree) || j->failed)
		err = -1;
	return err;
}

int measure_accuracy(struct run *r, struct cell *c)
{
	struct charge_setup s;

	setup_of(r, c, &s);
	for (unsigned int i = 0; i < NR_DESIGNS; i++) {
		struct oracle_job *j = calloc(1, sizeof(*j));
		int err;

		if (!j) {
			fprintf(stderr, "tally: out of memory\n");
			return -1;
		}
		j->threads = c->threads;
		j->leaves = s.leaves;
		j->wave = 2 * ROOM / c->threads;
		j->ops = r->acc_ops;
		err = oracle_run(j, bench_charge_designs[i], &s,
				 c->fill == FILL_95 ? FILL95 : 0);
		c->refused[i] = j->refused;
		c->false_refused[i] = j->false_refused;
		c->overshoot[i] = j->overshoot > 0 ? j->overshoot : 0;
		c->error[i] = j->error;
		free(j);
		if (err)
			return -1;
	}
	return 0;
}

void print_accuracy(struct run *r, const struct cell *cells,
			   unsigned int nr)
{
	fprintf(r->out, "\naccuracy against the exact oracle (%lu random "
		"charges/uncharges per thread, 64 B-16 KiB)\n", r->acc_ops);
	fprintf(r->out, "%5s %6s %4s %7s  %-12s %9s %9s %14s %14s %12s\n",
		"depth", "groups", "fill", "threads", "design", "refused",
		"false",
		"overshoot_B", "usage_err_B", "cost_refused");
	for (unsigned int k = 0; k < nr; k++) {
		const struct cell *c = &cells[k];

		for (unsigned int i = 0; i < NR_DESIGNS; i++)
			fprintf(r->out, "%5u %6u %4s %7u  %-12s %9lu %9lu %14ld %14ld %12lu\n",
				c->depth, c->groups, fill_names[c->fill],
				c->threads,
				bench_charge_designs[i]->name, c->refused[i],
				c->false_refused[i], c->overshoot[i],
				c->error[i], c->timed_refused[i]);
	}
}

/* ---- the error phase ---------------------------------------------------- */

int measure_error(struct run *r)
{
	int err = 0;

	fprintf(r->out, "\nusage error at quiescence, bytes: |the design's "
		"cheap read - exact|, no limit, depth 1, %lu random "
		"charges/uncharges per thread, charges held\n", r->error_ops);
	fprintf(r->out, "%-9s %5s %7s", "CPUs", "", "threads");
	for (unsigned int i = 0; i < NR_DESIGNS; i++)
		fprintf(r->out, " %13s", bench_charge_designs[i]->name);
	fprintf(r->out, "\n");
	bench_json_begin(&r->json, "usage_error", '[', false);
	for (unsigned int c = 0; c < ARRAY_SIZE(error_cpus) && !err; c++) {
		struct tally_domain *dom = NULL;
		struct charge_setup s = {
			.depth = 1,
			.max = TALLY_MEMCG_UNLIMITED,
			.tally_flags = r->tally_flags,
		};
		unsigned int cpus = error_cpus[c];

		if (cpus && tally_domain_create_simulated(&dom, cpus,
							  TALLY_GROUP_LOW_BITS)) {
			fprintf(stderr, "tally: cannot simulate %u CPUs\n", cpus);
			err = -1;
			break;
		}
		s.domain = dom;
		if (!cpus)
			cpus = tally_domain_nr_cpus(tally_domain_system());
		for (unsigned int t = 0; t < ARRAY_SIZE(error_threads) && !err;
		     t++) {
			long e[NR_DESIGNS];

			for (unsigned int i = 0; i < NR_DESIGNS && !err; i++) {
				struct oracle_job *j = calloc(1, sizeof(*j));

				if (!j) {
					err = -1;
					break;
				}
				j->threads = error_threads[t];
				j->nr_cpus = dom ? cpus : 0;
				j->wave = ERROR_WAVE;
				j->ops = r->error_ops;
				err = oracle_run(j, bench_charge_designs[i], &s, 0);
				e[i] = j->error;
				free(j);
			}
			if (err)
				break;
			fprintf(r->out, "%-9u %5s %7u", cpus,
				dom ? "sim" : "this", error_threads[t]);
			for (unsigned int i = 0; i < NR_DESIGNS; i++) {
				fprintf(r->out, " %13ld", e[i]);
				bench_json_begin(&r->json, NULL, '{', true);
				bench_json_string(&r->json, "design",
						  bench_charge_designs[i]->name);
				bench_json_string(&r->json, "domain",
						  dom ? "simulated" : "system");
				bench_json_int(&r->json, "cpus", cpus);
				bench_json_int(&r->json, "threads",
					       error_threads[t]);
				bench_json_int(&r->json, "max_error", e[i]);
				bench_json_end(&r->json);
			}
			fprintf(r->out, "\n");
			fflush(r->out);
		}
		tally_domain_destroy(dom);
	}
	bench_json_end(&r->json);
	return err;
}
