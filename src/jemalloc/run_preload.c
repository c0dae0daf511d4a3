// SPDX-License-Identifier: MIT
/*
 * run_preload.c - the library `tally run` preloads into the program it
 * runs (libtally_run.so, after jemalloc): every allocation of the process
 * charged to one memory group, the limits of the command line on it, and
 * its memory files written as a Prometheus textfile.
 *
 * Its constructor reads what `tally run` put in the environment:
 *
 *   TALLY_RUN_MEMORY_MAX, TALLY_RUN_MEMORY_HIGH   bytes (decimal), or unset
 *   TALLY_RUN_METRICS, TALLY_RUN_INTERVAL_MS       the textfile, its period
 *   TALLY_RUN_PID      the process that writes the textfile: the one
 *                      `tally run` started (its later images too, after
 *                      execve()), not its descendants
 *   TALLY_RUN_FD       a pipe to `tally run`: the constructor writes one
 *                      byte, '+' when the accounting is installed, '-'
 *                      when it failed (and the process then exits 125)
 *
 * and builds a memory tree whose group "run" is the process default and
 * the auto_group of the jemalloc integration: every arena of the process
 * charges it.  Descendants inherit the environment, so a child that
 * execs another program is accounted in its own process, with the same
 * limits, but writes no textfile; a forked child keeps its copy of the
 * parent's tree and group (its usage starts at the parent's).
 *
 * The textfile holds the memory tree (tally_exporter_add_memcg()),
 * memory.stat, and a few gauges of the process, prefix tally_run: the
 * bytes the hooks charged and adopted (tally_jemalloc_stats() of the
 * automatic arenas, which are all the process's arenas: jemalloc's huge
 * arena is turned off), jemalloc's active and dirty pages, its
 * stats.resident, stats.mapped and stats.metadata, and the process's
 * resident set size (/proc/self/statm): what the accounting sees against
 * what the kernel sees, and their difference, uncharged = RSS - charged
 * (0 when the charge is larger: pages allocated but never written, or
 * freed lazily and taken back by the kernel).  The bound, read in the
 * same process: active + dirty <= charged <= active + dirty + adopted.
 * It is written once as the program starts, then by a thread every
 * interval, and once more at exit (atexit()); a process that ends by
 * _exit() or a signal leaves the last write.
 *
 * The memory a program maps itself (a heap of its own, as V8's) is
 * reported in uncharged, not charged: a preload sees mmap() calls, not
 * the pages they make resident.  V8 reserves its heap without access
 * and commits it with mprotect(), glibc's thread stacks are mapped from
 * inside libc, and a charge of every writable mapping would count
 * reservations never touched; a refused mmap() is, for most such
 * programs (V8, the JVM), a fatal error, no better than a kernel
 * cgroup's OOM kill.  The difference to RSS, exact and cheap, tells the
 * user which limit to reach for (docs/jemalloc.md).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include <tally/export.h>
#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include <tally/memcg_current.h>
#include <tally/stats.h>

enum {
	P_CHARGED,
	P_ADOPTED,
	P_JE_ACTIVE,
	P_JE_DIRTY,
	P_JE_RESIDENT,
	P_JE_MAPPED,
	P_JE_METADATA,
	P_RSS,
	P_UNCHARGED,
	P_NR,
};

static const struct tally_stat_desc process_schema[P_NR] = {
	[P_CHARGED] = { "charged", TALLY_STAT_STATE },
	[P_ADOPTED] = { "adopted", TALLY_STAT_STATE },
	[P_JE_ACTIVE] = { "jemalloc_active", TALLY_STAT_STATE },
	[P_JE_DIRTY] = { "jemalloc_dirty", TALLY_STAT_STATE },
	[P_JE_RESIDENT] = { "jemalloc_resident", TALLY_STAT_STATE },
	[P_JE_MAPPED] = { "jemalloc_mapped", TALLY_STAT_STATE },
	[P_JE_METADATA] = { "jemalloc_metadata", TALLY_STAT_STATE },
	[P_RSS] = { "process_rss", TALLY_STAT_STATE },
	[P_UNCHARGED] = { "uncharged", TALLY_STAT_STATE },
};

static const char *const process_units[P_NR] = {
	"bytes", "bytes", "bytes", "bytes", "bytes", "bytes", "bytes",
	"bytes", "bytes",
};

static struct {
	struct tally_memcg_tree *tree;
	struct tally_memcg *group;
	struct tally_stats_tree *process;
	long shown[P_NR];
	struct tally_exporter *exporter;
	const char *path;
	long interval_ms;
	pid_t writer;
	long held_at_start;	/* adopted, when more than the max */
	int write_err;		/* of the last write of the textfile */
	pthread_mutex_t lock;
} run = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * jemalloc has no pvalloc(): glibc's would serve it from glibc's own heap,
 * uncharged, and jemalloc's free() cannot take that block back (the
 * program crashes).  The one allocation function the preload exports:
 * valloc() (jemalloc's, preloaded first) of whole pages, one for 0 bytes,
 * as glibc's.
 */
__attribute__((visibility("default"))) void *pvalloc(size_t size);

void *pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (size > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	return valloc(size ? (size + page - 1) & ~(page - 1) : page);
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0)
		return -1;
	return v;
}

static long je_size(const char *name)
{
	size_t v = 0, len = sizeof(v);

	return mallctl(name, &v, &len, NULL, 0) ? 0 : (long)v;
}

static long rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	long size, resident = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

/* Refresh the process gauges, then write the textfile. */
static void write_metrics(void)
{
	struct tally_jemalloc_stats st = { 0 };
	long now[P_NR];
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);

	pthread_mutex_lock(&run.lock);
	tally_jemalloc_stats(NULL, &st);
	mallctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
	now[P_CHARGED] = st.charged;
	now[P_ADOPTED] = st.adopted;
	now[P_JE_ACTIVE] = st.active;
	now[P_JE_DIRTY] = st.dirty + st.muzzy;
	now[P_JE_RESIDENT] = je_size("stats.resident");
	now[P_JE_MAPPED] = je_size("stats.mapped");
	now[P_JE_METADATA] = je_size("stats.metadata");
	now[P_RSS] = rss_bytes();
	now[P_UNCHARGED] = now[P_RSS] > now[P_CHARGED] ?
			   now[P_RSS] - now[P_CHARGED] : 0;
	for (int i = 0; i < P_NR; i++) {
		tally_stats_mod(tally_stats_root(run.process), (unsigned int)i,
				now[i] - run.shown[i]);
		run.shown[i] = now[i];
	}
	int ret = tally_export_textfile(run.exporter, run.path);

	/* tally run checked the file's directory: a failure now (a full
	 * disk, a directory removed) is said once, not at every write. */
	if (ret && ret != run.write_err)
		fprintf(stderr, "tally: run: cannot write %s: %s\n", run.path,
			strerror(-ret));
	run.write_err = ret;
	pthread_mutex_unlock(&run.lock);
}

static void *metrics_thread(void *arg)
{
	struct timespec ts = { run.interval_ms / 1000,
			       (run.interval_ms % 1000) * 1000000 };

	(void)arg;
	for (;;) {
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		ts = (struct timespec){ run.interval_ms / 1000,
					(run.interval_ms % 1000) * 1000000 };
		write_metrics();
	}
	return NULL;
}

static void metrics_at_exit(void)
{
	if (getpid() == run.writer)
		write_metrics();
}

static int setup_metrics(void)
{
	struct tally_export_stats_options stat_opts = {
		.prefix = "tally_run", .units = process_units,
		.mode = TALLY_FLUSH_FORCE,
	};
	struct tally_export_stats_options memstat_opts = {
		.prefix = "tally_memory_stat", .mode = TALLY_FLUSH_FORCE,
	};
	pthread_attr_t attr;
	pthread_t th;
	int ret;

	ret = tally_stats_tree_create(&run.process, process_schema, P_NR,
				      NULL);
	if (!ret)
		ret = tally_exporter_create(&run.exporter, NULL);
	if (!ret)
		ret = tally_exporter_add_memcg(run.exporter, run.tree, NULL);
	if (!ret)
		ret = tally_exporter_add_stats(run.exporter,
					       tally_memcg_stats_tree(run.tree),
					       &memstat_opts);
	if (!ret)
		ret = tally_exporter_add_stats(run.exporter, run.process,
					       &stat_opts);
	if (ret)
		return ret;
	if (atexit(metrics_at_exit))
		return -ENOMEM;
	/* A program that ends by _exit() or a signal runs no atexit()
	 * handler: the file is there from its start. */
	write_metrics();
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&th, &attr, metrics_thread, NULL);
	pthread_attr_destroy(&attr);
	return ret;
}

static int setup(void)
{
	long max = env_long("TALLY_RUN_MEMORY_MAX", TALLY_MEMCG_UNLIMITED);
	long high = env_long("TALLY_RUN_MEMORY_HIGH", TALLY_MEMCG_UNLIMITED);
	struct tally_jemalloc_options opts = { 0 };
	int ret;

	if (max < 0 || high < 0)
		return -EINVAL;
	ret = tally_memcg_tree_create(&run.tree, NULL);
	if (!ret)
		ret = tally_memcg_create(tally_memcg_root(run.tree), "run",
					 &run.group);
	if (!ret)
		ret = tally_memcg_set_limit(run.group, TALLY_MEMCG_HIGH, high);
	if (ret)
		return ret;
	tally_memcg_set_default(run.group);
	opts.auto_group = run.group;
	ret = tally_jemalloc_init(&opts);
	if (ret)
		return ret;
	/*
	 * The max once the allocator's first pages are adopted: one below
	 * them could never be kept (-EBUSY), and the program not start.
	 */
	ret = tally_memcg_set_limit(run.group, TALLY_MEMCG_MAX, max);
	if (ret == -EBUSY) {
		struct tally_memcg_range r = { 0 };

		if (!tally_memcg_usage(run.group, TALLY_MEMCG_READ_DRAIN, &r))
			run.held_at_start = r.value;
	}
	if (ret)
		return ret;
	run.path = getenv("TALLY_RUN_METRICS");
	run.writer = (pid_t)env_long("TALLY_RUN_PID", 0);
	run.interval_ms = env_long("TALLY_RUN_INTERVAL_MS", 10000);
	if (run.path && *run.path && run.writer == getpid()) {
		if (run.interval_ms < 1)
			return -EINVAL;
		return setup_metrics();
	}
	return 0;
}

__attribute__((constructor)) static void run_preload_init(void)
{
	long fd = env_long("TALLY_RUN_FD", -1);
	int ret = setup();

	/* Only the process tally run started reports to it. */
	unsetenv("TALLY_RUN_FD");
	if (fd >= 0) {
		char c = ret ? '-' : '+';

		if (write((int)fd, &c, 1) != 1)
			ret = ret ? ret : -EPIPE;
		close((int)fd);
	}
	if (ret == -EBUSY && run.held_at_start > 0) {
		fprintf(stderr, "tally: run: --memory-max is below the %ld "
			"bytes the allocator holds as the program starts: give "
			"at least %ldK\n", run.held_at_start,
			run.held_at_start / 1024 + 1);
		_exit(125);
	}
	if (ret) {
		fprintf(stderr, "tally: run: cannot account the program's "
			"memory: %s\n", strerror(-ret));
		_exit(125);
	}
}
