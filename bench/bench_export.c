// SPDX-License-Identifier: MIT
/*
 * bench_export.c - `tally bench export`: what an export of a statistics
 * tree costs (tally/export.h), 1,000 groups x 10 stats by default.
 *
 * The tree: N groups (the root included), each group's children filled
 * breadth-first up to 32 per parent; S stats, even ones states, odd ones
 * events; every value non-zero with a realistic number of digits.
 * Measured, repetitions interleaved over the rows (measure.h), median:
 *
 *   prometheus, openmetrics   tally_export_buffer() into a buffer large
 *                             enough, forced flush (nothing to flush: the
 *                             walk and the formatting alone);
 *   + flush of every group    one update of every group, then the export
 *                             (its forced flush then visits every group
 *                             on this CPU), minus the same updates alone;
 *   per-group reads           what a caller writes without tally/export.h:
 *                             a forced tally_stats_snapshot() per group
 *                             and a snprintf() per sample, into the same
 *                             buffer (same families and labels, unescaped);
 *   textfile                  tally_export_textfile() into the directory
 *                             of --dir (default /tmp): rendering, write,
 *                             two fsync()s and a rename.
 *
 * The table gives us per export, ns per sample (2 x S x N + 1 samples) and
 * the text's size; the ratio compares the export with the per-group reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/export.h>
#include "../tool/args.h"
#include "bench.h"
#include "json.h"
#include "machine.h"
#include "measure.h"

/* The command, as messages name it. */

#define FANOUT 32u
#define MAX_GROUPS 1000000u

struct run {
	unsigned int nr_groups, nr_stats;
	bool quick;
	const char *json_path, *dir;
	struct tally_stats_tree *tree;
	struct tally_stats_group **groups;
	char **paths;			/* the per-group reads' labels */
	struct tally_exporter *prom, *om;
	char *buf;
	size_t len;
	long *values;			/* per-group reads: hier, local */
	char textfile[4096];
	long bytes[2];			/* text sizes: prometheus, openmetrics */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally bench export [--groups N] [--stats N] [--dir DIR]\n"
		"                          [--json FILE] [--quick]\n"
		"\n"
		"What exporting a statistics tree costs (tally/export.h): the\n"
		"Prometheus and OpenMetrics text of N groups x S stats, with and without\n"
		"a flush of every group, against per-group forced reads formatted with\n"
		"snprintf(), and the atomic textfile write.  Prints a table and ratios.\n"
		"\n"
		"  --groups N    groups of the tree, the root included (default 1000)\n"
		"  --stats N     stats per group, 1 to 256 (default 10)\n"
		"  --dir DIR     directory of the textfile row (default /tmp)\n"
		"  --json FILE   also write the figures as JSON to FILE; \"-\" means\n"
		"                standard output (the table goes to standard error)\n"
		"  --quick       short runs: a quick look, noisier\n"
		"  -h, --help    show this help\n");
}

static int option(int opt, char *arg, void *ctx)
{
	struct run *r = ctx;
	unsigned long n;

	switch (opt) {
	case 'g':
		if (tool_opt_uint(arg, 1, MAX_GROUPS, &n))
			return -1;
		r->nr_groups = (unsigned int)n;
		break;
	case 's':
		if (tool_opt_uint(arg, 1, TALLY_STATS_MAX, &n))
			return -1;
		r->nr_stats = (unsigned int)n;
		break;
	case 'd':
		r->dir = arg;
		break;
	case 'j':
		r->json_path = arg;
		break;
	case 'q':
		r->quick = true;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for bad options (usage printed). */
static int parse_options(struct run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "groups", required_argument, NULL, 'g' },
		{ "stats", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", required_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	static const struct tool_command cmd = {
		"bench export", usage, "", longopts, option, false
	};

	r->nr_groups = 1000;
	r->nr_stats = 10;
	r->dir = "/tmp";
	return tool_parse_options(&cmd, argc, argv, r, NULL);
}

/* The tree, every group's path and a first value in every stat. */
static int build(struct run *r)
{
	struct tally_stat_desc *schema = calloc(r->nr_stats, sizeof(*schema));
	char (*names)[16] = calloc(r->nr_stats, sizeof(*names));
	int err = schema && names ? 0 : -ENOMEM;

	for (unsigned int s = 0; !err && s < r->nr_stats; s++) {
		snprintf(names[s], sizeof(names[s]), "stat%u", s);
		schema[s].name = names[s];
		schema[s].kind = s % 2 ? TALLY_STAT_EVENT : TALLY_STAT_STATE;
	}
	if (!err)
		err = tally_stats_tree_create(&r->tree, schema, r->nr_stats,
					      NULL);
	free(schema);
	free(names);
	r->groups = calloc(r->nr_groups, sizeof(*r->groups));
	r->paths = calloc(r->nr_groups, sizeof(*r->paths));
	if (!err && (!r->groups || !r->paths))
		err = -ENOMEM;
	if (err)
		return err;
	r->groups[0] = tally_stats_root(r->tree);
	r->paths[0] = strdup("/");
	for (unsigned int i = 1; !err && i < r->nr_groups; i++) {
		unsigned int p = (i - 1) / FANOUT;
		char name[32];

		snprintf(name, sizeof(name), "group-%u", i);
		err = tally_stats_group_create(r->groups[p], name,
					       &r->groups[i]);
		if (!err && asprintf(&r->paths[i], "%s%s%s", r->paths[p],
				     p ? "/" : "", name) < 0)
			err = -ENOMEM;
	}
	for (unsigned int i = 0; !err && i < r->nr_groups; i++)
		for (unsigned int s = 0; !err && s < r->nr_stats; s++)
			err = tally_stats_mod(r->groups[i], s,
					      1000003l * (i + 1) + 7 * s);
	return err;
}

static int make_exporter(struct tally_exporter **e,
			 enum tally_export_format format,
			 struct tally_stats_tree *t)
{
	struct tally_export_options o = { .format = format };
	struct tally_export_stats_options so = { .mode = TALLY_FLUSH_FORCE };
	int err = tally_exporter_create(e, &o);

	return err ? err : tally_exporter_add_stats(*e, t, &so);
}

static double per_op(uint64_t start, unsigned long n)
{
	return (double)(bench_now_ns() - start) / (double)n;
}

static double run_export(struct tally_exporter *e, struct run *r,
			 unsigned long n)
{
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++) {
		long len = tally_export_buffer(e, r->buf, r->len);

		if (len < 0 || (size_t)len >= r->len) {
			fprintf(stderr, "tally: export failed: %s\n",
				len < 0 ? strerror((int)-len)
					: "text too long");
			return -1;
		}
	}
	return per_op(start, n);
}

static double run_prometheus(void *arg, unsigned long n)
{
	struct run *r = arg;

	return run_export(r->prom, r, n);
}

static double run_openmetrics(void *arg, unsigned long n)
{
	struct run *r = arg;

	return run_export(r->om, r, n);
}

static int touch_every_group(struct run *r)
{
	int err = 0;

	for (unsigned int g = 0; !err && g < r->nr_groups; g++)
		err = tally_stats_mod(r->groups[g], g % r->nr_stats, 1);
	return err;
}

static double run_updates(void *arg, unsigned long n)
{
	struct run *r = arg;
	uint64_t start = bench_now_ns();

	double ns;

	for (unsigned long i = 0; i < n; i++)
		if (touch_every_group(r))
			return -1;
	ns = per_op(start, n);
	/* Flushed outside the timing: the next repetition starts clean. */
	tally_stats_flush(r->groups[0]);
	return ns;
}

static double run_updates_export(void *arg, unsigned long n)
{
	struct run *r = arg;
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++)
		if (touch_every_group(r) ||
		    tally_export_buffer(r->prom, r->buf, r->len) < 0)
			return -1;
	return per_op(start, n);
}

/* The same text without tally/export.h: forced reads, snprintf(). */
static double run_per_group(void *arg, unsigned long n)
{
	struct run *r = arg;
	unsigned int ns = r->nr_stats;
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++) {
		size_t used = 0;

		for (unsigned int g = 0; g < r->nr_groups; g++)
			if (tally_stats_snapshot(r->groups[g],
						 TALLY_FLUSH_FORCE,
						 r->values + 2 * g * ns,
						 r->values + (2 * g + 1) * ns))
				return -1;
		for (unsigned int f = 0; f < 2 * ns; f++) {
			unsigned int s = f / 2, local = f % 2;
			bool event = s % 2;

			used += (size_t)snprintf(
				r->buf + used, r->len - used,
				"# HELP tally_%s_stat%u%s help\n"
				"# TYPE tally_%s_stat%u%s %s\n",
				local ? "local" : "hier", s,
				event ? "_total" : "", local ? "local" : "hier",
				s, event ? "_total" : "",
				event ? "counter" : "gauge");
			for (unsigned int g = 0; g < r->nr_groups; g++) {
				long v = r->values[(2 * g + local) * ns + s];

				used += (size_t)snprintf(
					r->buf + used, r->len - used,
					event ? "tally_%s_stat%u_total{group="
						"\"%s\"} %lu\n"
					      : "tally_%s_stat%u{group="
						"\"%s\"} %ld\n",
					local ? "local" : "hier", s,
					r->paths[g], v);
				if (used >= r->len)
					return -1;
			}
		}
	}
	return per_op(start, n);
}

static double run_textfile(void *arg, unsigned long n)
{
	struct run *r = arg;
	uint64_t start = bench_now_ns();

	for (unsigned long i = 0; i < n; i++) {
		int err = tally_export_textfile(r->prom, r->textfile);

		if (err) {
			fprintf(stderr, "tally: %s: %s\n", r->textfile,
				strerror(-err));
			return -1;
		}
	}
	return per_op(start, n);
}

enum { ROW_PROM, ROW_OM, ROW_FLUSH, ROW_UPDATES, ROW_PER_GROUP, NR_ROWS };

static void print_row(struct run *r, FILE *out, const char *name, double ns,
		      long bytes)
{
	double samples = 2.0 * r->nr_groups * r->nr_stats + 1;

	fprintf(out, "  %-34s %10.1f %10.1f", name, ns / 1000, ns / samples);
	if (bytes > 0)
		fprintf(out, " %10ld", bytes);
	fputc('\n', out);
}

static void json_row(struct bench_json *j, const char *name,
		     const struct bench_result *res, long bytes)
{
	bench_json_begin(j, NULL, '{', true);
	bench_json_string(j, "row", name);
	bench_json_double(j, "us_median", res->median / 1000);
	bench_json_double(j, "us_min", res->min / 1000);
	bench_json_double(j, "us_max", res->max / 1000);
	if (bytes > 0)
		bench_json_int(j, "bytes", bytes);
	bench_json_end(j);
}

static int measure(struct run *r, FILE *out, struct bench_json *j)
{
	const struct bench_job jobs[NR_ROWS] = {
		[ROW_PROM] = { run_prometheus, r },
		[ROW_OM] = { run_openmetrics, r },
		[ROW_FLUSH] = { run_updates_export, r },
		[ROW_UPDATES] = { run_updates, r },
		[ROW_PER_GROUP] = { run_per_group, r },
	};
	struct bench_plan plan = {
		.target_ns = r->quick ? 20000000 : 200000000,
		.reps = r->quick ? 3 : 7,
		.min_n = 1,
	};
	struct bench_plan file_plan = plan;
	struct bench_result res[NR_ROWS], file;
	double flush;

	if (bench_measure_set(jobs, NR_ROWS, &plan, res))
		return -1;
	file_plan.target_ns /= 4;
	if (bench_measure(run_textfile, r, &file_plan, &file))
		return -1;
	unlink(r->textfile);
	flush = res[ROW_FLUSH].median - res[ROW_UPDATES].median;
	fprintf(out, "\n%u groups x %u stats = %.0f samples, median of %u"
		" repetitions\n", r->nr_groups, r->nr_stats,
		2.0 * r->nr_groups * r->nr_stats + 1, plan.reps);
	fprintf(out, "  %-34s %10s %10s %10s\n", "export", "us", "ns/sample",
		"bytes");
	print_row(r, out, "prometheus 0.0.4", res[ROW_PROM].median,
		  r->bytes[0]);
	print_row(r, out, "openmetrics 1.0", res[ROW_OM].median, r->bytes[1]);
	print_row(r, out, "prometheus + flush of every group", flush, 0);
	print_row(r, out, "(the updates alone)", res[ROW_UPDATES].median, 0);
	print_row(r, out, "per-group forced reads + snprintf",
		  res[ROW_PER_GROUP].median, 0);
	print_row(r, out, "textfile (prometheus)", file.median, r->bytes[0]);
	fprintf(out, "  per-group reads / export: %.2fx;  textfile / buffer: "
		"%.2fx\n", res[ROW_PER_GROUP].median / res[ROW_PROM].median,
		file.median / res[ROW_PROM].median);
	bench_json_begin(j, "rows", '[', false);
	json_row(j, "prometheus", &res[ROW_PROM], r->bytes[0]);
	json_row(j, "openmetrics", &res[ROW_OM], r->bytes[1]);
	json_row(j, "updates_then_prometheus", &res[ROW_FLUSH], 0);
	json_row(j, "updates", &res[ROW_UPDATES], 0);
	json_row(j, "per_group_reads", &res[ROW_PER_GROUP], 0);
	json_row(j, "textfile", &file, r->bytes[0]);
	bench_json_end(j);
	return 0;
}

static int setup(struct run *r)
{
	int err = build(r);

	if (!err)
		err = make_exporter(&r->prom, TALLY_EXPORT_PROMETHEUS, r->tree);
	if (!err)
		err = make_exporter(&r->om, TALLY_EXPORT_OPENMETRICS, r->tree);
	if (err)
		return err;
	r->bytes[0] = tally_export_buffer(r->prom, NULL, 0);
	r->bytes[1] = tally_export_buffer(r->om, NULL, 0);
	if (r->bytes[0] < 0 || r->bytes[1] < 0)
		return (int)(r->bytes[0] < 0 ? r->bytes[0] : r->bytes[1]);
	/* Values grow while measuring: room for more digits. */
	r->len = 2 * (size_t)(r->bytes[1] > r->bytes[0] ? r->bytes[1]
							 : r->bytes[0]);
	r->buf = malloc(r->len);
	r->values = calloc(2 * (size_t)r->nr_groups * r->nr_stats,
			   sizeof(*r->values));
	if (!r->buf || !r->values)
		return -ENOMEM;
	snprintf(r->textfile, sizeof(r->textfile), "%s/tally-bench-%d.prom",
		 r->dir, (int)getpid());
	return 0;
}

static void teardown(struct run *r)
{
	tally_exporter_destroy(r->prom);
	tally_exporter_destroy(r->om);
	tally_stats_tree_destroy(r->tree);
	for (unsigned int i = 0; r->paths && i < r->nr_groups; i++)
		free(r->paths[i]);
	free(r->paths);
	free(r->groups);
	free(r->buf);
	free(r->values);
}

int tally_bench_export(int argc, char **argv)
{
	struct run r = { 0 };
	struct bench_json j = { 0 };
	struct bench_machine m;
	FILE *out;
	int err;

	err = parse_options(&r, argc, argv);
	if (err)
		return err > 0 ? 0 : 2;
	if (bench_json_open(&j, r.json_path))
		return 1;
	out = j.f == stdout ? stderr : stdout;
	bench_machine_get(&m);
	fprintf(out, "tally bench export%s\n", r.quick ? " (quick)" : "");
	bench_machine_print(out, &m);
	bench_json_begin(&j, NULL, '{', false);
	bench_json_identity(&j, "export");
	bench_machine_json(&j, &m);
	bench_json_int(&j, "groups", r.nr_groups);
	bench_json_int(&j, "stats", r.nr_stats);
	err = setup(&r);
	if (err)
		fprintf(stderr, "tally: cannot build the tree: %s\n",
			strerror(-err));
	else if (measure(&r, out, &j))
		err = -1;
	teardown(&r);
	bench_json_load_end(&j);
	if (bench_json_close(&j))
		err = -1;
	return err ? 1 : 0;
}
