// SPDX-License-Identifier: MIT
/*
 * bench_stats_readers.c - `tally bench stats` section 4, readers under
 * load: a kernel flushing test scaled to 2 cores, in every design.
 *
 * A 50 x 5 tree; writers update random stats of random leaves in a tight
 * loop; R reader threads per CPU sleep until their next period P
 * (absolute deadlines, random start phase) and read the snapshot of a
 * random group with TALLY_FLUSH_IF_NEEDED, what memory.stat readers get.
 * Faithful rows: 26 per CPU, the test's 10,000 readers on 384 CPUs, at 10
 * and 100 ms; one overload row: 500 per CPU (1,000 readers on 2 CPUs) at
 * 10 ms.  Checker threads each own a stat and a leaf: every millisecond
 * they add 1, then read the stat back with TALLY_FLUSH_FORCE from the
 * leaf, its parent or the root; a value below what they added is a stale
 * read.  The same writers and checkers also run without readers, to give
 * the writers' throughput that readers cost.  Each phase builds a fresh
 * tree.  On 2 cores the latencies include waiting for a CPU, which is
 * why they are reported in bands as well as percentiles.
 */
#include <math.h>
#include <stdlib.h>

#include "bench_stats.h"

/*
 * One phase on a fresh 50 x 5 tree: the writers, the checkers and
 * @readers readers with period @period_ms.  Their latencies are merged
 * into @hist.
 */
static int readers_phase(struct run *r, unsigned int d, unsigned int readers,
			 unsigned int period_ms, struct phase_result *res,
			 struct lat_hist *hist)
{
	struct phase ph = {
		.checkers = NR_CHECKERS,
		.readers = readers,
		.mode = TALLY_FLUSH_IF_NEEDED,
		.period_ns = period_ms * 1000000ull,
		.duration_ns = scaled_ns(r, READERS_MS),
	};
	struct tree_set s;
	int err;

	if (tree_set_build(&s, d, READERS_A, READERS_B))
		return -1;
	ph.leaves = s.leaves;
	ph.nr_leaves = s.nr_leaves;
	ph.targets = s.groups;
	ph.nr_targets = s.nr_groups;
	for (unsigned int c = 0; c < NR_CHECKERS; c++)
		ph.check_leaf[c] = s.leaves[c * s.nr_leaves / NR_CHECKERS];
	err = phase_run(&ph, s.tree, res);
	if (!err && hist) {
		lat_hist_reset(hist);
		for (unsigned int i = 0; i < res->readers_started; i++)
			lat_hist_merge(hist, &ph.hist[i]);
	}
	free(ph.hist);
	tree_set_destroy(&s);
	return err;
}

/* Bands of the readers' latencies: [10^k, 10^(k+1)) ns boundaries. */
static const unsigned int band_pow10[] = { 0, 5, 6, 7, 8, LAT_DECADES };
static const char *const band_key[] = { "lt_100us", "100us_1ms", "1_10ms",
					"10_100ms", "ge_100ms" };
#define NR_BANDS ARRAY_SIZE(band_key)

static uint64_t band_count(const struct lat_hist *h, unsigned int b)
{
	return lat_hist_count_below(h, band_pow10[b + 1]) -
	       lat_hist_count_below(h, band_pow10[b]);
}

static double writer_rate(const struct phase_result *p)
{
	return p->elapsed_s > 0 ? (double)p->writer_ops / p->elapsed_s : NAN;
}

static double mean_us(uint64_t ns, uint64_t n)
{
	return n ? (double)ns / (double)n / 1e3 : 0;
}

static double per_read(uint64_t n, const struct lat_hist *h)
{
	return h->count ? (double)n / (double)h->count : NAN;
}

static void readers_json(struct run *r, unsigned int d, unsigned int p)
{
	const struct readers_row *row = &r->rows[p];
	const struct readers_result *x = &r->rd[d][p];
	const struct lat_hist *h = &x->hist;
	struct bench_json *w = &r->json;

	bench_json_begin(w, NULL, '{', true);
	bench_json_string(w, "design", design_name(d));
	bench_json_string(w, "load", row->overload ? "overload" : "faithful");
	bench_json_int(w, "readers", row->readers);
	bench_json_int(w, "readers_per_cpu", row->per_cpu);
	bench_json_int(w, "readers_started", x->with.readers_started);
	bench_json_int(w, "period_ms", row->period_ms);
	bench_json_string(w, "read_mode", "if_needed");
	bench_json_int(w, "reads", (long long)h->count);
	bench_json_begin(w, "buckets", '{', true);
	for (unsigned int b = 0; b < NR_BANDS; b++)
		bench_json_int(w, band_key[b], (long long)band_count(h, b));
	bench_json_end(w);
	bench_json_double(w, "p50_us", us(lat_hist_percentile(h, 0.5)));
	bench_json_double(w, "p99_us", us(lat_hist_percentile(h, 0.99)));
	bench_json_double(w, "p999_us", us(lat_hist_percentile(h, 0.999)));
	bench_json_double(w, "max_us", us((double)h->max));
	bench_json_int(w, "stale_reads", (long long)x->with.stale);
	bench_json_int(w, "checks", (long long)x->with.checks);
	bench_json_double(w, "forced_read_p50_us",
			  us(lat_hist_percentile(&x->with.forced, 0.5)));
	bench_json_double(w, "forced_read_p99_us",
			  us(lat_hist_percentile(&x->with.forced, 0.99)));
	bench_json_int(w, "stale_reads_no_readers",
		       (long long)r->alone[d].stale);
	bench_json_double(w, "writer_ops_per_s", writer_rate(&x->with));
	bench_json_double(w, "writer_ops_per_s_no_readers",
			  writer_rate(&r->alone[d]));
	bench_json_double(w, "writer_ratio_to_no_readers",
			  writer_rate(&x->with) / writer_rate(&r->alone[d]));
	bench_json_int(w, "flushes", (long long)x->with.info.flushes);
	bench_json_int(w, "root_flushes", (long long)x->with.info.root_flushes);
	bench_json_int(w, "shared_waits", (long long)x->with.info.shared_waits);
	bench_json_int(w, "takeovers", (long long)x->with.info.takeovers);
	bench_json_int(w, "naps", (long long)x->with.info.naps);
	bench_json_int(w, "flush_lock_waits",
		       (long long)x->with.info.flush_lock_waits);
	bench_json_double(w, "flush_lock_wait_mean_us",
			  mean_us(x->with.info.flush_lock_wait_ns,
				  x->with.info.flush_lock_waits));
	bench_json_int(w, "flush_lock_long_holds",
		       (long long)x->with.info.flush_lock_long_holds);
	bench_json_double(w, "flush_lock_long_hold_mean_us",
			  mean_us(x->with.info.flush_lock_long_hold_ns,
				  x->with.info.flush_lock_long_holds));
	bench_json_double(w, "wake_late_p50_us",
			  us(lat_hist_percentile(&x->with.wake_late, 0.5)));
	bench_json_double(w, "wake_late_p99_us",
			  us(lat_hist_percentile(&x->with.wake_late, 0.99)));
	bench_json_double(w, "wake_late_p999_us",
			  us(lat_hist_percentile(&x->with.wake_late, 0.999)));
	bench_json_int(w, "adoptions", (long long)x->with.info.adoptions);
	bench_json_int(w, "design_mutex_waits",
		       (long long)x->with.design_lock_waits);
	bench_json_double(w, "design_mutex_wait_mean_us",
			  mean_us(x->with.design_lock_wait_ns,
				  x->with.design_lock_waits));
	bench_json_double(w, "voluntary_switches_per_read",
			  per_read(x->with.voluntary_switches, h));
	bench_json_double(w, "involuntary_switches_per_read",
			  per_read(x->with.involuntary_switches, h));
	bench_json_int(w, "skipped_flushes", (long long)x->with.skipped);
	bench_json_double(w, "seconds", x->with.elapsed_s);
	bench_json_end(w);
}

/* "26/cpu 10ms": the row's load and period. */
static const char *row_title(const struct readers_row *row, char *buf,
			     size_t len)
{
	snprintf(buf, len, "%u/cpu %ums", row->per_cpu, row->period_ms);
	return buf;
}

static void readers_report(struct run *r)
{
	static const char *const band_title[NR_BANDS] = {
		"<100us", "100us-1ms", "1-10ms", "10-100ms", ">=100ms"
	};
	char title[32];

	fprintf(r->out, "%-13s %-8s %8s", "readers", "design", "reads");
	for (unsigned int b = 0; b < NR_BANDS; b++)
		fprintf(r->out, " %9s", band_title[b]);
	fprintf(r->out, " %9s %9s %9s %9s %7s\n", "p50 us", "p99 us",
		"p99.9 us", "max us", "p99 x");
	for (unsigned int p = 0; p < r->nr_rows; p++) {
		double tally_p99 = lat_hist_percentile(&r->rd[0][p].hist, 0.99);

		row_title(&r->rows[p], title, sizeof(title));
		for (unsigned int d = 0; d < NR_DESIGNS; d++) {
			const struct lat_hist *h = &r->rd[d][p].hist;
			double all = h->count ? (double)h->count : 1;

			fprintf(r->out, "%-13s %-8s %8llu", title,
				design_name(d), (unsigned long long)h->count);
			for (unsigned int b = 0; b < NR_BANDS; b++)
				fprintf(r->out, " %8.2f%%",
					100.0 * (double)band_count(h, b) / all);
			fprintf(r->out, " %9.1f %9.1f %9.1f %9.1f %6.2fx\n",
				us(lat_hist_percentile(h, 0.5)),
				us(lat_hist_percentile(h, 0.99)),
				us(lat_hist_percentile(h, 0.999)),
				us((double)h->max),
				lat_hist_percentile(h, 0.99) / tally_p99);
		}
	}
	fprintf(r->out, "(p99 x: p99 / tally's p99 in the same row)\n");
	fprintf(r->out, "\n%-13s %-8s %13s %9s %9s %8s %6s %8s %9s %9s %6s\n",
		"readers", "design", "stale/checks", "forced", "forced",
		"flushes", "root", "skipped", "writers", "no", "ratio");
	fprintf(r->out, "%-13s %-8s %13s %9s %9s %8s %6s %8s %9s %9s\n", "",
		"", "", "p50 us", "p99 us", "", "", "", "Mops/s", "readers");
	for (unsigned int p = 0; p < r->nr_rows; p++) {
		row_title(&r->rows[p], title, sizeof(title));
		for (unsigned int d = 0; d < NR_DESIGNS; d++) {
			const struct phase_result *x = &r->rd[d][p].with;
			double alone = writer_rate(&r->alone[d]);
			char sc[32];

			snprintf(sc, sizeof(sc), "%llu/%llu",
				 (unsigned long long)x->stale,
				 (unsigned long long)x->checks);
			fprintf(r->out,
				"%-13s %-8s %13s %9.1f %9.1f %8llu %6llu %8llu %9.1f %9.1f %6.2f\n",
				title, design_name(d), sc,
				us(lat_hist_percentile(&x->forced, 0.5)),
				us(lat_hist_percentile(&x->forced, 0.99)),
				(unsigned long long)x->info.flushes,
				(unsigned long long)x->info.root_flushes,
				(unsigned long long)x->skipped,
				writer_rate(x) / 1e6, alone / 1e6,
				writer_rate(x) / alone);
		}
	}
	fprintf(r->out,
		"(forced: the checkers' forced reads; ratio: writer throughput with\n"
		" readers / without readers, same design: with fewer CPUs than\n"
		" threads, the readers' CPU time is taken from the writers)\n");
	fprintf(r->out,
		"\n%-13s %-8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %8s %8s %8s\n",
		"readers", "design", "flushes", "engine", "waited", "long",
		"held", "mutex", "waited", "naps", "take-", "switches",
		"switches", "wake");
	fprintf(r->out,
		"%-13s %-8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %8s %8s %8s\n",
		"", "", "", "waits", "mean us", "holds", "mean us", "waits",
		"mean us", "", "overs", "vol/rd", "invol/rd", "p99 us");
	for (unsigned int p = 0; p < r->nr_rows; p++) {
		row_title(&r->rows[p], title, sizeof(title));
		for (unsigned int d = 0; d < NR_DESIGNS; d++) {
			const struct phase_result *x = &r->rd[d][p].with;
			const struct lat_hist *h = &r->rd[d][p].hist;

			fprintf(r->out,
				"%-13s %-8s %8llu %8llu %8.1f %8llu %8.1f %8llu %8.1f %7llu %7llu %8.2f %8.2f %8.1f\n",
				title, design_name(d),
				(unsigned long long)x->info.flushes,
				(unsigned long long)x->info.flush_lock_waits,
				mean_us(x->info.flush_lock_wait_ns,
					x->info.flush_lock_waits),
				(unsigned long long)x->info.flush_lock_long_holds,
				mean_us(x->info.flush_lock_long_hold_ns,
					x->info.flush_lock_long_holds),
				(unsigned long long)x->design_lock_waits,
				mean_us(x->design_lock_wait_ns,
					x->design_lock_waits),
				(unsigned long long)x->info.naps,
				(unsigned long long)x->info.takeovers,
				per_read(x->voluntary_switches, h),
				per_read(x->involuntary_switches, h),
				us(lat_hist_percentile(&x->wake_late, 0.99)));
		}
	}
	fprintf(r->out,
		"(engine waits: times a flush found the flush engine's lock held\n"
		" and waited, with their mean wait; long holds: holds of that lock\n"
		" over 200 us, their holder off a CPU; mutex waits: linux68's flushes that\n"
		" found its one flush mutex held; naps and takeovers: readers waiting for\n"
		" their group's shared flush (tally only); switches: the process's\n"
		" context switches per read, every thread's; wake: how late readers\n"
		" woke for their periods, what any sleep costs in the phase)\n");
	for (unsigned int d = 0; d < NR_DESIGNS; d++)
		if (r->alone[d].stale)
			fprintf(r->out, "(%s, no readers: %llu/%llu stale)\n",
				design_name(d),
				(unsigned long long)r->alone[d].stale,
				(unsigned long long)r->alone[d].checks);
}

int bench_readers(struct run *r)
{
	struct bench_json *w = &r->json;
	int err = 0;

	fprintf(r->out,
		"\n4. readers under load: 50 x 5 tree (%u groups), %u writers (tight loop,\n"
		"   random leaves), %u checkers (+1 then a forced read of leaf, parent or\n"
		"   root, every %llu ms), R readers per CPU (%u CPUs) each reading a random\n"
		"   group's snapshot every P ms with TALLY_FLUSH_IF_NEEDED: %u per CPU as\n"
		"   in the 2023 proposal's test (10,000 readers on 384 CPUs) at each period",
		1 + READERS_A + READERS_A * READERS_B, NR_WRITERS, NR_CHECKERS,
		CHECK_PAUSE_NS / 1000000, r->nr_cpus, r->readers_per_cpu);
	if (r->overload_per_cpu)
		fprintf(r->out, ",\n   and an overload row, %u per CPU at %u ms",
			r->overload_per_cpu, r->periods_ms[0]);
	fprintf(r->out,
		"; %.1f s per phase, and the writers and\n"
		"   checkers alone for the 'no readers' throughput\n",
		(double)scaled_ns(r, READERS_MS) / 1e9);
	fflush(r->out);
	for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
		err = readers_phase(r, d, 0, 0, &r->alone[d], NULL);
	for (unsigned int p = 0; p < r->nr_rows && !err; p++)
		for (unsigned int d = 0; d < NR_DESIGNS && !err; d++)
			err = readers_phase(r, d, r->rows[p].readers,
					    r->rows[p].period_ms,
					    &r->rd[d][p].with,
					    &r->rd[d][p].hist);
	if (err)
		return err;
	for (unsigned int p = 0; p < r->nr_rows; p++)
		if (r->rd[0][p].with.readers_started < r->rows[p].readers)
			fprintf(r->out,
				"(only %u of %u reader threads could be created)\n",
				r->rd[0][p].with.readers_started,
				r->rows[p].readers);
	readers_report(r);
	bench_json_begin(w, "readers", '[', false);
	for (unsigned int p = 0; p < r->nr_rows; p++)
		for (unsigned int d = 0; d < NR_DESIGNS; d++)
			readers_json(r, d, p);
	bench_json_end(w);
	return 0;
}
