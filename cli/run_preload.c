// SPDX-License-Identifier: MIT
/*
 * run_preload.c - the library `tally run` preloads into the program it
 * runs (libtally_run.so, before jemalloc): every allocation of the process
 * charged to one memory group, the limits of the command line on it, and
 * its memory files written as a Prometheus textfile.
 *
 * Its constructor reads what `tally run` put in the environment:
 *
 *   TALLY_RUN_MEMORY_MAX, TALLY_RUN_MEMORY_HIGH   bytes (decimal), or unset
 *   TALLY_RUN_METRICS, TALLY_RUN_INTERVAL_MS       the textfile, its period
 *   TALLY_RUN_LEDGER   the ledger (cli/run_ledger.h): the path of a
 *                      memory file of every process's figures, shared by
 *                      the tree
 *   TALLY_RUN_PID      the process that writes the textfile: the one
 *                      `tally run` started (its later images too, after
 *                      execve()), not its descendants
 *   TALLY_RUN_FD       a pipe to `tally run`: the constructor writes one
 *                      byte, '+' when the accounting is installed, '-'
 *                      when it failed (and the process then exits 125)
 *
 * and builds a memory tree whose root is the process's group, its
 * default and the auto_group of the jemalloc integration: every arena of
 * the process charges it.  Descendants inherit the environment: a child
 * that execs a program is accounted in its own process, with the same
 * limits; a forked child keeps its copy of the parent's tree (its usage
 * starts at the parent's, its events at none).  One limit per process.
 *
 * Each process records its figures in its slot of the ledger: its
 * group's memory files, the bytes the hooks charged and adopted
 * (tally_jemalloc_stats() of the automatic arenas, which are all the
 * process's arenas: jemalloc's huge arena is turned off), jemalloc's
 * active and dirty pages, its stats.resident, stats.mapped and
 * stats.metadata, and its resident set size (/proc/self/statm): what the
 * accounting sees against what the kernel sees, and their difference,
 * uncharged = RSS - charged (0 when the charge is larger).  The bound,
 * read in the same process: active + dirty <= charged <= active + dirty +
 * adopted.  The writer records and writes the textfile as the program
 * starts, then from a thread every interval, and at exit (atexit());
 * every other process records at exit.  A process killed by SIGABRT,
 * SIGSEGV, SIGBUS, SIGILL or SIGFPE (one it left at its default action)
 * records its events and the signal first; `tally run` writes the file
 * once more when the program has ended.  Nothing on these paths
 * allocates: a process at its max is where malloc() fails.
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
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include <tally/memcg_current.h>

#include "run_ledger.h"

static struct {
	struct tally_memcg_tree *tree;
	struct tally_memcg *group;
	struct run_ledger *ledger;
	struct run_slot *slot;	/* NULL: not recorded */
	/* Events before this image's: of the image it replaced (exec) ... */
	long carried[RF_NR];
	/* ... and of the parent, in a forked child's copy of its tree. */
	long inherited[TALLY_MEMCG_NR_EVENTS];
	const char *path;
	long interval_ms;
	pid_t writer;
	long held_at_start;	/* adopted, when more than the max */
	bool threads_before;	/* another thread before the install */
	int write_err;		/* of the last write of the textfile */
	long page;
	pthread_mutex_t lock;
} run = { .lock = PTHREAD_MUTEX_INITIALIZER };

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

/*
 * A file of /proc read into @buf (@len bytes with the NUL) with open()
 * and read(): no FILE, no malloc().  Its length, or -1.
 */
static ssize_t read_proc(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* The resident set size: async-signal-safe (system calls, a parse). */
static long rss_bytes(void)
{
	char buf[128], *p;
	long resident = 0;

	if (read_proc("/proc/self/statm", buf, sizeof(buf)) <= 0)
		return 0;
	p = strchr(buf, ' ');
	for (p = p ? p + 1 : buf; *p >= '0' && *p <= '9'; p++)
		resident = resident * 10 + (*p - '0');
	return resident * run.page;
}

static long limit_figure(long v)
{
	return v == TALLY_MEMCG_UNLIMITED ? -1 : v;
}

static const enum run_figure event_figure[TALLY_MEMCG_NR_EVENTS] = {
	[TALLY_MEMCG_EVENT_LOW] = RF_NR,
	[TALLY_MEMCG_EVENT_HIGH] = RF_EV_HIGH,
	[TALLY_MEMCG_EVENT_MAX] = RF_EV_MAX,
	[TALLY_MEMCG_EVENT_OOM] = RF_EV_OOM,
	[TALLY_MEMCG_EVENT_OOM_KILL] = RF_NR,
};

/*
 * The figures a process can record as it ends by _exit() or a signal:
 * its group's usage, peak and events, its RSS.  Async-signal-safe
 * (loads, stores, system calls).
 */
static void record_at_end(void)
{
	long ev[TALLY_MEMCG_NR_EVENTS];
	struct tally_memcg_range cur = { 0 };

	if (!run.slot)
		return;
	if (!tally_memcg_events(run.group, ev, NULL))
		for (int i = 0; i < TALLY_MEMCG_NR_EVENTS; i++)
			if (event_figure[i] != RF_NR)
				run_slot_set(run.slot, event_figure[i],
					     run.carried[event_figure[i]] +
					     ev[i] - run.inherited[i]);
	tally_memcg_usage(run.group, TALLY_MEMCG_READ_APPROX, &cur);
	run_slot_set(run.slot, RF_CURRENT, cur.value);
	run_slot_set(run.slot, RF_PEAK, tally_memcg_peak(run.group, false));
	run_slot_set(run.slot, RF_RSS, rss_bytes());
}

/* The group's limits, set once as the process starts. */
static void record_limits(void)
{
	struct tally_memcg_limits lim;

	if (run.slot && !tally_memcg_get_limits(run.group, &lim)) {
		run_slot_set(run.slot, RF_MAX, limit_figure(lim.max));
		run_slot_set(run.slot, RF_HIGH, limit_figure(lim.high));
	}
}

/* Every figure of the process into its slot. */
static void record(void)
{
	struct tally_jemalloc_stats st = { 0 };
	long charged, rss;
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);

	if (!run.slot)
		return;
	tally_jemalloc_stats(NULL, &st);
	mallctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
	record_at_end();
	charged = st.charged;
	rss = run_slot_get(run.slot, RF_RSS);
	run_slot_set(run.slot, RF_CHARGED, charged);
	run_slot_set(run.slot, RF_ADOPTED, st.adopted);
	run_slot_set(run.slot, RF_JE_ACTIVE, st.active);
	run_slot_set(run.slot, RF_JE_DIRTY, st.dirty + st.muzzy);
	run_slot_set(run.slot, RF_JE_RESIDENT, je_size("stats.resident"));
	run_slot_set(run.slot, RF_JE_MAPPED, je_size("stats.mapped"));
	run_slot_set(run.slot, RF_JE_METADATA, je_size("stats.metadata"));
	run_slot_set(run.slot, RF_UNCHARGED, rss > charged ? rss - charged : 0);
}

/* Record the process's figures, then write the textfile. */
static void write_metrics(void)
{
	int ret;

	pthread_mutex_lock(&run.lock);
	record();
	ret = run_ledger_write(run.ledger, run.writer, run.path);
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

static void at_exit(void)
{
	if (run.path && getpid() == run.writer)
		write_metrics();
	else
		record();
}

/* The signals that end a process, and that programs seldom handle. */
static const int fatal_signals[] = { SIGABRT, SIGSEGV, SIGBUS, SIGILL,
				     SIGFPE };

/*
 * A fatal signal: the events and the signal recorded, then the default
 * action (SA_RESETHAND restored it) taken when the handler returns (a
 * fault) or the signal is sent again (abort(), kill()).
 */
static void on_fatal_signal(int sig)
{
	int saved = errno;

	record_at_end();
	if (run.slot)
		run_slot_set(run.slot, RF_SIGNAL, sig);
	raise(sig);
	errno = saved;
}

/*
 * A process that ends by _exit() or _Exit() (a forked child, often) runs
 * no atexit() handler: the preload's own, exported over libc's, records
 * its events (async-signal-safe, as _exit() is) and ends it as libc's
 * does.  exit() calls libc's internal one, after the atexit() handlers.
 */
__attribute__((visibility("default"), noreturn)) void _exit(int status);
__attribute__((visibility("default"), noreturn)) void _Exit(int status);

void _exit(int status)
{
	record_at_end();
	for (;;)
		syscall(SYS_exit_group, status);
}

void _Exit(int status)
{
	_exit(status);
}

/* Only where the program left the default action: its own handler wins. */
static void catch_fatal_signals(void)
{
	struct sigaction sa = { .sa_handler = on_fatal_signal,
				.sa_flags = SA_RESETHAND | SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(int); i++) {
		struct sigaction old;

		if (!sigaction(fatal_signals[i], NULL, &old) &&
		    old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
			sigaction(fatal_signals[i], &sa, NULL);
	}
}

/*
 * A forked child is a process of its own: a slot of its own, its events
 * counted from the fork (its tree is a copy of the parent's).  Only
 * async-signal-safe calls, as after fork() in a threaded parent.
 */
static void record_fork_child(void)
{
	if (!run.slot)
		return;
	tally_memcg_events(run.group, run.inherited, NULL);
	memset(run.carried, 0, sizeof(run.carried));
	run.slot = run_ledger_claim(run.ledger, getpid(), run.slot->name);
	record_limits();
}

/* The process's name (/proc/self/comm) into @name. */
static void process_name(char name[RUN_LEDGER_NAME])
{
	ssize_t n = read_proc("/proc/self/comm", name, RUN_LEDGER_NAME);

	if (n > 0 && name[n - 1] == '\n')
		name[n - 1] = 0;
}

/*
 * Take this process's slot in the ledger TALLY_RUN_LEDGER names, if tally
 * run gave one: an image that replaced another by exec() carries its
 * events on.
 */
static int setup_ledger(void)
{
	const char *path = getenv("TALLY_RUN_LEDGER");
	char name[RUN_LEDGER_NAME] = "";

	if (!path || !*path)
		return 0;
	/* Once tally run has ended there is none: nothing is recorded, and
	 * the program runs on. */
	run.ledger = run_ledger_open(path);
	if (!run.ledger)
		return 0;
	process_name(name);
	run.slot = run_ledger_claim(run.ledger, getpid(), name);
	if (run.slot)
		for (int f = RF_EVENTS_FIRST; f < RF_EVENTS_END; f++)
			run.carried[f] = run_slot_get(run.slot,
						      (enum run_figure)f);
	record_limits();
	if (pthread_atfork(NULL, NULL, record_fork_child) ||
	    atexit(at_exit))
		return -ENOMEM;
	catch_fatal_signals();
	return 0;
}

static int setup_metrics(void)
{
	pthread_attr_t attr;
	pthread_t th;
	int ret;

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
	run.page = sysconf(_SC_PAGESIZE);
	ret = tally_memcg_tree_create(&run.tree, NULL);
	if (ret)
		return ret;
	/* The root takes limits: the process's group needs no other. */
	run.group = tally_memcg_root(run.tree);
	ret = tally_memcg_set_limit(run.group, TALLY_MEMCG_HIGH, high);
	if (ret)
		return ret;
	tally_memcg_set_default(run.group);
	opts.auto_group = run.group;
	ret = tally_jemalloc_init(&opts);
	if (ret == -EBUSY)
		run.threads_before = true;
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
	ret = setup_ledger();
	if (ret)
		return ret;
	run.path = getenv("TALLY_RUN_METRICS");
	run.writer = (pid_t)env_long("TALLY_RUN_PID", 0);
	run.interval_ms = env_long("TALLY_RUN_INTERVAL_MS", 10000);
	if (run.ledger && run.path && *run.path && run.writer == getpid()) {
		if (run.interval_ms < 1)
			return -EINVAL;
		return setup_metrics();
	}
	run.path = NULL;
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
	if (run.threads_before) {
		fprintf(stderr, "tally: run: the process has another thread "
			"before the accounting is installed (a library the "
			"program preloads started it): cannot account it\n");
		_exit(125);
	}
	if (ret) {
		fprintf(stderr, "tally: run: cannot account the program's "
			"memory: %s\n", strerror(-ret));
		_exit(125);
	}
}
