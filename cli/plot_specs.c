// SPDX-License-Identifier: MIT
/*
 * plot_specs.c - the figures of each benchmark: which array of its JSON,
 * which keys are x, y and the series, which keys split the rows into
 * separate plots, the titles and captions (specs[]).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>

#include "plot_internal.h"

#define READERS_SPLIT { { "readers", "", " readers" }, \
			{ "period_ms", "period ", " ms" } }

const struct plot_spec specs[] = {
	{ "counter", "counter_add", "add", PLOT_XY, "threads",
	  { "ns_per_op" }, NULL, { "impl" }, { { NULL } },
	  "Counter add", "threads adding at once", "time per add (ns)",
	  "Median time of one add to a shared counter, by the number of "
	  "threads adding at once, for tally and the other counter designs. "
	  "Lower is better.",
	  true, true, false },
	{ "counter", "counter_read", "read", PLOT_XY, "cpus",
	  { "ns_per_op" }, NULL, { "impl", "op" }, { { NULL } },
	  "Counter read", "CPUs (simulated)", "time per read (ns)",
	  "Median time of one read of a counter whose every CPU slot holds a "
	  "value, by the number of CPUs, for tally and the kernel-style "
	  "percpu_counter: a line for each one's approximate sum and each "
	  "one's precise sum (a walk of every CPU). Lower is better.",
	  true, true, false },
	{ "counter", "counter_accuracy", "accuracy", PLOT_XY, "cpus",
	  { "max_error", "bound" }, NULL, { "impl" }, { { NULL } },
	  "Counter error of a CPU-hopping updater", "CPUs (simulated)",
	  "|approximate - precise sum| (counts)",
	  "Largest difference between a counter's approximate and precise "
	  "sums seen while one thread adds from CPU to CPU, with the bound "
	  "each design documents for it, by the number of CPUs.",
	  true, true, false },
	{ "stats", "stats_update", "update", PLOT_XY, "depth",
	  { "ns_per_op" }, NULL, { "design" }, { { NULL } },
	  "Statistics tree update", "depth of the updated group (levels)",
	  "time per update (ns)",
	  "Median time of one update of a statistic, by the depth of the "
	  "group updated, for each flushing design. Lower is better.",
	  false, false, false },
	{ "stats", "stats_read_latency", "readers", PLOT_BARS, NULL,
	  { NULL }, "buckets", { "design" }, READERS_SPLIT,
	  "Reader latency", "time one read took", "reads (count)",
	  "Left: how many readers' reads (TALLY_FLUSH_IF_NEEDED) took how "
	  "long, per design, while writers update the tree. Right: the share "
	  "of the checkers' forced reads that missed an update made before "
	  "them (stale); a design that is fast but stale is wrong.",
	  false, true, true },
	{ "stats", "stats_read_percentiles", "readers", PLOT_BARS, NULL,
	  { "p50_us", "p99_us", "p999_us" }, NULL, { "design" },
	  READERS_SPLIT,
	  "Reader latency percentiles", "percentile",
	  "read latency (µs)",
	  "Left: the median, 99th and 99.9th percentile of the readers' read "
	  "latency (TALLY_FLUSH_IF_NEEDED), per design, while writers update "
	  "the tree. Right: the share of the checkers' forced reads that "
	  "missed an update made before them (stale); a design that is fast "
	  "but stale is wrong.",
	  false, true, true },
	{ "oom", "oom_select", "select", PLOT_XY, "tasks",
	  { "median_us" }, NULL, { "method" },
	  { { "cpus", "", " CPUs (simulated)" } },
	  "Victim selection", "tasks", "time per selection (µs)",
	  "Median time to choose an out-of-memory victim among the tasks, by "
	  "their number: the precise scan (every task summed over every CPU) "
	  "against tally's two-pass selection. Lower is better.",
	  true, true, false },
	{ "export", "export_cost", "rows", PLOT_ROWS, NULL,
	  { "us_median" }, NULL, { "row" }, { { NULL } },
	  "Export of a statistics tree", "", "time (µs)",
	  "Median time of each way to export a statistics tree: the "
	  "Prometheus and OpenMetrics text, with and without a flush of every "
	  "group, per-group forced reads formatted with snprintf(), and the "
	  "atomic textfile write. Lower is better.",
	  false, true, false },
	{ "charge", "charge_cost", "charge", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, { "design" },
	  { { "depth", "depth ", "" }, { "fill", "", "" } },
	  "Charge + uncharge", "threads charging at once",
	  "time per charge + uncharge pair (ns)",
	  "Median time of a charge and its uncharge against a chain of groups "
	  "with a max on every level, by the number of threads charging at "
	  "once, for tally's memory groups, the kernel's memcg, ClickHouse's "
	  "MemoryTracker and the bare page counter. Lower is better.",
	  false, true, false },
	{ "malloc", "malloc_cost", "malloc", PLOT_XY, "threads",
	  { "ns_per_pair" }, NULL, { "design" }, { { NULL } },
	  "malloc + free, accounted or not", "threads allocating at once",
	  "time per malloc + free pair (ns)",
	  "Median time of a malloc and its free (16 B to 64 KiB, a share "
	  "freed by another thread) with glibc's malloc, jemalloc alone, "
	  "jemalloc with tally's accounting, and jemalloc with a "
	  "ClickHouse-style per-thread tracker. Lower is better.",
	  false, false, false },
};

const size_t nr_specs = sizeof(specs) / sizeof(specs[0]);
