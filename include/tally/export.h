/* SPDX-License-Identifier: MIT */
#ifndef TALLY_EXPORT_H
#define TALLY_EXPORT_H

/*
 * tally/export.h - statistics in the Prometheus text format 0.0.4 and in
 * OpenMetrics 1.0, for a scraper, a file or node_exporter's textfile
 * collector.  No HTTP server: the caller serves the text.
 *
 * An exporter holds the output options and a list of sources: statistics
 * trees, and memory trees (tally/memcg.h, see tally_exporter_add_memcg()).
 * Each export takes a snapshot of every source and writes it:
 *
 *   - one family per stat and scope: "PREFIX_hier_STAT" holds the
 *     hierarchical values (the group and its descendants: a sum over
 *     groups counts a value once per ancestor, do not sum it) and
 *     "PREFIX_local_STAT" the local ones (the group alone: sums over
 *     groups are meaningful).  Events are counters ("_total" samples),
 *     states are gauges.  A stat with a unit gets "_UNIT" appended to its
 *     family names (unless they end with it already) and, in OpenMetrics,
 *     a UNIT line;
 *   - one family "PREFIX_accuracy_bound", a gauge: how far the values of
 *     this snapshot may be from the truth (see tally_exporter_add_stats());
 *   - families one after the other, never interleaved, in the order of the
 *     schema (hierarchical then local for each stat) and then the
 *     accuracy; within a family one sample per group, depth-first, a
 *     parent before its children, siblings in byte order of their names;
 *   - HELP and TYPE on every family; OpenMetrics output ends with "# EOF".
 *
 * Labels.  Every stat sample has the label group="PATH": the group's path
 * from the root with a leading '/' ("/" for the root, "/tenant-a/web").
 * The constant labels of the options follow on every sample (after group),
 * then pid="N" when asked (the process ID at the time of each export, so
 * a forked child reports its own).  "instance" and "job" are refused as
 * constant labels: Prometheus sets them at scrape time from its own
 * configuration (the target's address and the job's name) and renames a
 * clashing label of the exposition "exported_instance" or "exported_job";
 * give a host or replica its own label name ("host", "replica") or set
 * target labels in the scrape configuration instead.
 *
 * Escaping.  Label values and HELP texts may hold any byte: a backslash
 * becomes "\\", a newline "\n", and in label values (and OpenMetrics HELP)
 * a double quote '\"'; other control characters pass as they are (both
 * formats allow them).  Valid UTF-8 passes through unchanged.  A byte that
 * does not start a valid UTF-8 sequence (RFC 3629: no overlong form, no
 * surrogate, nothing above U+10FFFF; a truncated sequence is invalid)
 * becomes U+FFFD followed by its two upper-case hex digits ("\xff" gives
 * U+FFFD "FF"), and the next byte is examined on its own; a U+FFFD of the
 * name itself becomes U+FFFD "~".  The text read back by a parser thus
 * tells every name apart: distinct groups never share a label value.
 *
 * Metric names.  A stat's name is sanitised byte by byte: every byte other
 * than an ASCII letter, digit or '_' becomes '_' (a multi-byte character
 * becomes one '_' per byte).  An event's name loses a trailing "_total"
 * (it is the sample suffix).  A state (a gauge) whose metric name would
 * end in "_total", "_count", "_sum" or "_bucket", suffixes Prometheus
 * keeps for counters, histograms and summaries, is refused (-EINVAL).
 * Two stats whose names sanitise alike, or
 * two families of different sources that would share a metric name, are
 * refused (-EEXIST), so an export never holds a duplicate series.
 *
 * Values are printed as integers: states as signed longs, events as
 * unsigned (they wrap modulo 2^64, as the tree's values do).  A memory
 * group's limit set to %TALLY_MEMCG_UNLIMITED (no limit) is printed
 * "+Inf", never as a huge number: usage / limit ratios then read 0, and
 * alerts on them never fire for a group without a limit.
 *
 * Error codes: every function that can fail returns a negative errno
 * value: -EINVAL for NULL pointers and bad options, names or units;
 * -EEXIST for a metric name two families would share; -ENOMEM; the
 * errno of a failed system call for the textfile output; -EIO for a
 * failed write to a FILE.
 *
 * Thread safety: an exporter is used by one thread at a time (its exports
 * reuse its buffers); different exporters may run concurrently.  An
 * export runs concurrently with updates, reads, flushes and group
 * creation and destruction on its trees.  No function here is
 * async-signal-safe (they allocate and take the trees' locks).  After
 * fork() the child may use the parent's exporters.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <tally/memcg.h>
#include <tally/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_exporter;

/**
 * enum tally_export_format - the text format of the output.
 * @TALLY_EXPORT_PROMETHEUS: Prometheus text format 0.0.4 (what
 *	node_exporter's textfile collector reads).
 * @TALLY_EXPORT_OPENMETRICS: OpenMetrics 1.0 text format.
 */
enum tally_export_format {
	TALLY_EXPORT_PROMETHEUS = 0,
	TALLY_EXPORT_OPENMETRICS = 1,
};

/**
 * struct tally_export_label - a constant label of every sample.
 * @name: [a-zA-Z_][a-zA-Z0-9_]*, at most %TALLY_EXPORT_PREFIX_MAX bytes,
 *	not starting with "__", not "group", "instance" nor "job" (the
 *	header says why), not "pid" when the pid label is on, not given
 *	twice.
 * @value: any NUL-terminated bytes (escaped as the header says).
 */
struct tally_export_label {
	const char *name;
	const char *value;
};

/**
 * struct tally_export_options - output options; zero means the default.
 * @format: the text format (default Prometheus 0.0.4).
 * @labels: @nr_labels constant labels (copied), such as host="web-1".
 * @nr_labels: their number, at most %TALLY_EXPORT_MAX_LABELS.
 * @pid: add pid="N", the exporting process's ID.
 */
struct tally_export_options {
	enum tally_export_format format;
	const struct tally_export_label *labels;
	unsigned int nr_labels;
	bool pid;
};

/** Largest number of constant labels. */
#define TALLY_EXPORT_MAX_LABELS 16u
/** Longest metric name prefix, without the terminating NUL. */
#define TALLY_EXPORT_PREFIX_MAX 64u

/**
 * struct tally_export_stats_options - how a statistics tree is exported;
 *	zero means the default.
 * @prefix: the metric names' prefix, [a-zA-Z_][a-zA-Z0-9_]* without a
 *	leading "__", at most %TALLY_EXPORT_PREFIX_MAX bytes (default
 *	"tally").
 * @units: NULL, or one unit per stat of the schema: NULL or "" for none,
 *	otherwise [a-z0-9_]+ ("bytes", "seconds"), at most
 *	%TALLY_EXPORT_PREFIX_MAX bytes, appended to the names.
 * @mode: %TALLY_FLUSH_IF_NEEDED (default) or %TALLY_FLUSH_FORCE: how each
 *	export flushes the tree before reading it.
 */
struct tally_export_stats_options {
	const char *prefix;
	const char *const *units;
	enum tally_flush_mode mode;
};

/**
 * struct tally_export_memcg_options - how a memory tree is exported; zero
 *	means the default.
 * @prefix: the metric names' prefix, as for statistics trees (default
 *	"tally").
 */
struct tally_export_memcg_options {
	const char *prefix;
};

/**
 * tally_exporter_create() - an exporter without sources.
 * @out: where the exporter is stored.
 * @opts: output options, or NULL for the defaults.
 *
 * Context: MT-safe; not async-signal-safe: allocates.
 *
 * Return: 0, -EINVAL (NULL @out, unknown format, @nr_labels over
 * %TALLY_EXPORT_MAX_LABELS or non-zero with NULL @labels, a NULL, invalid,
 * reserved (group, instance, job, pid with @pid) or repeated label name, a
 * NULL label value), -ENOMEM.  On
 * failure *@out is untouched and nothing needs to be destroyed.
 */
int tally_exporter_create(struct tally_exporter **out,
			  const struct tally_export_options *opts);

/**
 * tally_exporter_destroy() - free an exporter (its trees are untouched).
 * @e: the exporter, or NULL.  No other call on @e may run or follow.
 *
 * Context: MT-safe for different exporters (no other call on @e may run); not
 * async-signal-safe: frees memory.
 */
void tally_exporter_destroy(struct tally_exporter *e);

/**
 * tally_exporter_add_stats() - export a statistics tree too.
 * @e: the exporter.
 * @t: the tree; it must outlive @e (or at least @e's last export).
 * @opts: the tree's prefix, units and flush mode, or NULL for the
 *	defaults.
 *
 * Each export of @e then reads @t after one flush decision of its root:
 * with %TALLY_FLUSH_FORCE every value reflects every update that completed
 * before the export began (whatever the tree's design), and the accuracy
 * family says 0; with %TALLY_FLUSH_IF_NEEDED the root is flushed only when
 * over its threshold, and the accuracy family says
 * tally_stats_read_bound(@t): the updates of a group's subtree that its
 * values may miss have |delta| adding up to at most that, over all stats.
 * With %TALLY_FLUSH_FORCE the values of different groups come from the
 * export's flush or a later one (a concurrent reader's): none is older
 * than the export.
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates.
 *
 * Return: 0, -EINVAL (NULL @e or @t, bad prefix or unit, a mode other
 * than the two above, a state whose metric name would end in a suffix
 * Prometheus keeps for counters and histograms), -EEXIST (two of the tree's families, or one of
 * them and a family of a source added before, would share a metric name;
 * the exporter is then unchanged), -ENOMEM.
 */
int tally_exporter_add_stats(struct tally_exporter *e,
			     struct tally_stats_tree *t,
			     const struct tally_export_stats_options *opts);

/**
 * tally_exporter_add_memcg() - export a memory tree's usage, limits and
 *	events too.
 * @e: the exporter.
 * @t: the memory tree; it must outlive @e (or at least @e's last export).
 * @opts: the prefix, or NULL for the default.
 *
 * Families, one sample per live group with the label group="PATH":
 * gauges PREFIX_memory_current_bytes and PREFIX_memory_peak_bytes (the
 * page counter and its highest value, stock reservations included in
 * both, as the kernel's memory.current and memory.peak:
 * tally_memcg_usage()'s %TALLY_MEMCG_READ_APPROX value), and
 * PREFIX_memory_{min,low,high,max}_bytes (+Inf for
 * %TALLY_MEMCG_UNLIMITED: no limit, or for min and low all of the usage
 * protected); counters PREFIX_memory_events_EVENT_total (memory.events) and
 * PREFIX_memory_events_local_EVENT_total (memory.events.local) for each
 * event of enum tally_memcg_event.  memory.stat is a statistics tree:
 * export it with tally_exporter_add_stats(@e,
 * tally_memcg_stats_tree(@t), ...), under another prefix or the same.
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates.
 *
 * Return: 0, -EINVAL (NULL @e or @t, bad prefix), -EEXIST (a family would
 * share a metric name with one of a source added before; the exporter is
 * then unchanged), -ENOMEM.
 */
int tally_exporter_add_memcg(struct tally_exporter *e,
			     struct tally_memcg_tree *t,
			     const struct tally_export_memcg_options *opts);

/**
 * tally_export_buffer() - write a snapshot into a caller's buffer.
 * @e: the exporter.
 * @buf: the buffer (may be NULL when @len is 0).
 * @len: its size.
 *
 * As snprintf(): the return value is the length of the whole text; when
 * it is below @len the text is in @buf, NUL-terminated.  Otherwise @buf
 * holds an empty string (when @len > 0), never a truncated text that a
 * scraper could take for a whole one: call again with a larger buffer
 * (the next snapshot may be longer still: leave room for growth).
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates and takes the trees' locks (the trees'
 * structure locks, and their flush locks as each tree's mode says).
 *
 * Return: the text length, or -EINVAL (NULL @e, NULL @buf with a non-zero
 * @len), -ENOMEM.
 */
long tally_export_buffer(struct tally_exporter *e, char *buf, size_t len);

/**
 * tally_export_buffer_as() - write a snapshot in a given format into a
 *	caller's buffer.
 * @e: the exporter.
 * @format: the text format, whatever the one of @e's options.
 * @buf: the buffer (may be NULL when @len is 0).
 * @len: its size.
 *
 * As tally_export_buffer(), in @format: what an HTTP server that
 * negotiates the format with its scraper serves (tally/export_http.h
 * does).  The metadata of both formats is built when a source is added:
 * either costs the same.
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates and takes the trees' locks (the trees'
 * structure locks, and their flush locks as each tree's mode says).
 *
 * Return: the text length, or -EINVAL (NULL @e, unknown @format, NULL
 * @buf with a non-zero @len), -ENOMEM.
 */
long tally_export_buffer_as(struct tally_exporter *e,
			    enum tally_export_format format, char *buf,
			    size_t len);

/**
 * tally_export_file() - write a snapshot to a stdio stream.
 * @e: the exporter.
 * @f: the stream, left open and flushed (fflush()).
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates and takes the trees' locks, writes with
 * stdio.
 *
 * Return: 0, -EINVAL (NULL argument), -ENOMEM, -EIO (a write or the
 * flush failed: @f may hold part of the text).
 */
int tally_export_file(struct tally_exporter *e, FILE *f);

/**
 * tally_export_textfile() - replace a file with a snapshot, atomically.
 * @e: the exporter.
 * @path: the file, such as
 *	"/var/lib/prometheus/node-exporter/myapp.prom" for node_exporter's
 *	textfile collector (which reads the Prometheus format only).
 *
 * Writes a hidden temporary file ".NAME.XXXXXX" in the same directory
 * (so it never matches the collector's "*.prom"), sets its mode to 0644
 * (whatever the umask), fsync()s it, renames it over @path and fsync()s
 * the directory: a reader sees the old file or the new one, whole, and
 * after a crash one of them survives.  The temporary file is removed when
 * a step before the rename fails.  Only a regular file (or a symbolic
 * link, which the rename replaces) is replaced: a @path that names a
 * directory, device, FIFO or socket is refused.  The temporary name is 8
 * bytes longer than the file's, so the file name may have at most
 * NAME_MAX - 8 bytes (-ENAMETOOLONG otherwise).
 *
 * Context: MT-safe for different exporters (one thread at a time per exporter);
 * not async-signal-safe: allocates and takes the trees' locks, creates, syncs
 * and renames files.
 *
 * Return: 0, -EINVAL (NULL argument, empty @path or one ending in '/'),
 * -EEXIST (@path exists and is not a regular file or a symbolic link),
 * -ENOMEM, or the negative errno of the failed mkostemp(), fchmod(),
 * write(), fsync(), rename() or open() of the directory (after a
 * failed directory fsync() the new file is in place but may not survive
 * a crash).
 */
int tally_export_textfile(struct tally_exporter *e, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_EXPORT_H */
