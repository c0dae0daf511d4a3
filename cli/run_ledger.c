// SPDX-License-Identifier: MIT
/*
 * run_ledger.c - the figures of every process of a `tally run` tree in
 * one shared mapping, and the textfile written from them.
 *
 * `tally run` creates a memory file (memfd) of RUN_LEDGER_SLOTS slots,
 * named by its path in tally run's /proc/PID/fd, which every process of
 * the program's tree opens and maps (a descriptor inherited across
 * fork() and execve() would be closed by programs that close what they
 * did not open, as Python's subprocess does): each process's preload
 * claims a slot (its pid; an image that replaces another by exec() keeps
 * its pid's slot) and stores its own figures there, its group being its
 * own (one limit per process).  A slot's pid is stored last, with
 * release: a reader that sees it sees the slot's first figures.  The
 * program tally run started writes the textfile from every slot, and
 * tally run writes it once more when the program has ended, with how it
 * ended: the file's last version holds what every process recorded.
 *
 * Invariant: a slot is written by its process alone, one atomic store
 * per figure, so a reader sees each figure whole (a set of them may mix
 * two moments).  Nothing here allocates: the preload writes the file
 * when its group may be at its max, where malloc() fails.
 *
 * A process that ends by _exit() or a signal records what it can from
 * there (async-signal-safe): a figure it could not is left out of the
 * file, not written as 0.
 *
 * Costs: the mapping is 160 KiB, touched a slot at a time; a write
 * renders the slots of the program and of the processes with an event or
 * a signal (the others are counted only) through a stack buffer.
 */
#define _GNU_SOURCE	/* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_ledger.h"

#define LEDGER_MAGIC 0x74616c6c7972756eL	/* "tallyrun" */

/* A figure of -1 is a limit that is not set: written +Inf. */
#define UNLIMITED_AS_INF 1

static const struct {
	const char *name;
	const char *help;
	enum run_figure fig;
	bool counter;
	int flags;
} families[] = {
	{ "tally_run_memory_current_bytes", "memory.current of the "
	  "process's group: the bytes charged to it, stock reservations "
	  "included (as the kernel's).", RF_CURRENT, false, 0 },
	{ "tally_run_memory_peak_bytes", "memory.peak of the process's "
	  "group: the highest memory.current.", RF_PEAK, false, 0 },
	{ "tally_run_memory_max_bytes", "memory.max of the process's group: "
	  "--memory-max (+Inf: none).", RF_MAX, false, UNLIMITED_AS_INF },
	{ "tally_run_memory_high_bytes", "memory.high of the process's "
	  "group: --memory-high (+Inf: none).", RF_HIGH, false,
	  UNLIMITED_AS_INF },
	{ "tally_run_memory_events_high_total", "memory.events high of the "
	  "process's group: charges that left its usage above its high.",
	  RF_EV_HIGH, true, 0 },
	{ "tally_run_memory_events_max_total", "memory.events max of the "
	  "process's group: charges that did not fit under its max.", RF_EV_MAX,
	  true, 0 },
	{ "tally_run_memory_events_oom_total", "memory.events oom of the "
	  "process's group: charges still refused after reclaim and drain.",
	  RF_EV_OOM, true, 0 },
	{ "tally_run_charged_bytes", "The bytes the jemalloc hooks charged "
	  "for the process's pages.", RF_CHARGED, false, 0 },
	{ "tally_run_adopted_bytes", "The bytes jemalloc held as the "
	  "process started, charged at once.", RF_ADOPTED, false, 0 },
	{ "tally_run_jemalloc_active_bytes", "jemalloc's active pages "
	  "(stats.active).", RF_JE_ACTIVE, false, 0 },
	{ "tally_run_jemalloc_dirty_bytes", "jemalloc's dirty and muzzy "
	  "pages, freed and kept for reuse.", RF_JE_DIRTY, false, 0 },
	{ "tally_run_jemalloc_resident_bytes", "jemalloc's resident pages "
	  "(stats.resident).", RF_JE_RESIDENT, false, 0 },
	{ "tally_run_jemalloc_mapped_bytes", "jemalloc's mapped extents "
	  "(stats.mapped).", RF_JE_MAPPED, false, 0 },
	{ "tally_run_jemalloc_metadata_bytes", "jemalloc's metadata "
	  "(stats.metadata).", RF_JE_METADATA, false, 0 },
	{ "tally_run_process_rss_bytes", "The process's resident set size "
	  "(/proc/self/statm).", RF_RSS, false, 0 },
	{ "tally_run_uncharged_bytes", "The process's RSS minus the bytes "
	  "charged (0 when the charge is larger).", RF_UNCHARGED, false, 0 },
	{ "tally_run_signal", "The signal that ended the process.", RF_SIGNAL,
	  false, 0 },
};

#define NR_FAMILIES (sizeof(families) / sizeof(families[0]))

struct run_ledger *run_ledger_create(char *path, size_t len)
{
	struct run_ledger *l;
	int fd = memfd_create("tally-run", MFD_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (ftruncate(fd, sizeof(*l)) ||
	    snprintf(path, len, "/proc/%d/fd/%d", (int)getpid(), fd) >=
	    (int)len) {
		close(fd);
		return NULL;
	}
	l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (l == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	l->magic = LEDGER_MAGIC;
	return l;	/* the descriptor stays open: @path names it */
}

struct run_ledger *run_ledger_open(const char *path)
{
	struct run_ledger *l = MAP_FAILED;
	struct stat st;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && st.st_size == (off_t)sizeof(*l))
		l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
	close(fd);
	if (l == MAP_FAILED)
		return NULL;
	if (__atomic_load_n(&l->magic, __ATOMIC_RELAXED) != LEDGER_MAGIC) {
		munmap(l, sizeof(*l));
		return NULL;
	}
	return l;
}

void run_slot_set(struct run_slot *s, enum run_figure f, long v)
{
	__atomic_store_n(&s->fig[f], v, __ATOMIC_RELAXED);
}

long run_slot_get(const struct run_slot *s, enum run_figure f)
{
	return __atomic_load_n(&s->fig[f], __ATOMIC_RELAXED);
}

static void slot_name(struct run_slot *s, const char *name)
{
	int i = 0;

	for (; i < RUN_LEDGER_NAME - 1 && name[i]; i++)
		s->name[i] = name[i];
	for (; i < RUN_LEDGER_NAME; i++)
		s->name[i] = 0;
}

struct run_slot *run_ledger_find(struct run_ledger *l, pid_t pid)
{
	long n = __atomic_load_n(&l->claimed, __ATOMIC_ACQUIRE);

	for (long i = 0; i < n && i < RUN_LEDGER_SLOTS; i++)
		if (__atomic_load_n(&l->slot[i].pid, __ATOMIC_ACQUIRE) == pid)
			return &l->slot[i];
	return NULL;
}

struct run_slot *run_ledger_claim(struct run_ledger *l, pid_t pid,
				  const char *name)
{
	struct run_slot *s = run_ledger_find(l, pid);
	long n;

	if (s) {
		/* The new image's name (a writer may read a mix of the two
		 * once: one sample's label). */
		slot_name(s, name);
		return s;
	}
	n = __atomic_fetch_add(&l->claimed, 1, __ATOMIC_ACQ_REL);
	if (n >= RUN_LEDGER_SLOTS)
		return NULL;
	s = &l->slot[n];
	for (int f = 0; f < RF_NR; f++)
		s->fig[f] = (f >= RF_EVENTS_FIRST && f < RF_EVENTS_END) ||
			    f == RF_SIGNAL ? 0 : RUN_FIGURE_NONE;
	slot_name(s, name);
	__atomic_store_n(&s->pid, (long)pid, __ATOMIC_RELEASE);
	return s;
}

/* --- the textfile ----------------------------------------------------- */

/* The file being written, through a buffer on the writer's stack. */
struct out {
	int fd;
	int err;
	size_t len;
	char buf[4096];
};

static void out_flush(struct out *o)
{
	for (size_t done = 0; done < o->len && !o->err;) {
		ssize_t n = write(o->fd, o->buf + done, o->len - done);

		if (n < 0 && errno != EINTR)
			o->err = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	o->len = 0;
}

static void out_str(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (o->len == sizeof(o->buf))
			out_flush(o);
		o->buf[o->len++] = *s;
	}
}

static void out_long(struct out *o, long v)
{
	char s[24];

	snprintf(s, sizeof(s), "%ld", v);
	out_str(o, s);
}

/*
 * A process is shown when it is the program tally run started, or when
 * it had an event or a signal: the processes a program starts and that
 * end well are only counted.
 */
static bool shown(const struct run_slot *s, pid_t main)
{
	long pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);

	if (!pid)
		return false;
	if (pid == main || run_slot_get(s, RF_SIGNAL))
		return true;
	for (int f = RF_EVENTS_FIRST; f < RF_EVENTS_END; f++)
		if (run_slot_get(s, (enum run_figure)f))
			return true;
	return false;
}

/* pid="N",program="NAME": the name's bytes other than printable ASCII,
 * '"' and '\' become '_'. */
static void out_labels(struct out *o, const struct run_slot *s)
{
	char name[RUN_LEDGER_NAME];

	for (int i = 0; i < RUN_LEDGER_NAME; i++) {
		char c = s->name[i];

		name[i] = !c || (c > ' ' - 1 && c < 127 && c != '"' &&
				 c != '\\') ? c : '_';
	}
	name[RUN_LEDGER_NAME - 1] = 0;
	out_str(o, "{pid=\"");
	out_long(o, s->pid);
	out_str(o, "\",program=\"");
	out_str(o, name);
	out_str(o, "\"}");
}

static void render(struct out *o, const struct run_ledger *l, pid_t main)
{
	long n = __atomic_load_n(&l->claimed, __ATOMIC_ACQUIRE), recorded;

	recorded = n < RUN_LEDGER_SLOTS ? n : RUN_LEDGER_SLOTS;
	out_str(o, "# HELP tally_run_processes The processes of the "
		"program's tree that tally run accounted, each in a group of "
		"its own.\n# TYPE tally_run_processes gauge\n"
		"tally_run_processes ");
	out_long(o, n);
	out_str(o, "\n");
	if (n > RUN_LEDGER_SLOTS) {
		out_str(o, "# HELP tally_run_processes_unrecorded The processes "
			"accounted but not in this file (the ledger was full)."
			"\n# TYPE tally_run_processes_unrecorded gauge\n"
			"tally_run_processes_unrecorded ");
		out_long(o, n - RUN_LEDGER_SLOTS);
		out_str(o, "\n");
	}
	for (size_t f = 0; f < NR_FAMILIES; f++) {
		bool any = false;

		for (long i = 0; i < recorded && !any; i++) {
			long v = run_slot_get(&l->slot[i], families[f].fig);

			any = shown(&l->slot[i], main) && v &&
			      v != RUN_FIGURE_NONE;
		}
		if (!any)
			continue;	/* zero everywhere: left out */
		out_str(o, "# HELP ");
		out_str(o, families[f].name);
		out_str(o, " ");
		out_str(o, families[f].help);
		out_str(o, "\n# TYPE ");
		out_str(o, families[f].name);
		out_str(o, families[f].counter ? " counter\n" : " gauge\n");
		for (long i = 0; i < recorded; i++) {
			const struct run_slot *s = &l->slot[i];
			long v = run_slot_get(s, families[f].fig);

			if (!shown(s, main) || v == RUN_FIGURE_NONE)
				continue;
			out_str(o, families[f].name);
			out_labels(o, s);
			out_str(o, " ");
			if (v < 0 && (families[f].flags & UNLIMITED_AS_INF))
				out_str(o, "+Inf");
			else
				out_long(o, v);
			out_str(o, "\n");
		}
	}
	out_flush(o);
}

int run_ledger_write(const struct run_ledger *l, pid_t main, const char *path)
{
	const char *slash = strrchr(path, '/');
	char tmp[PATH_MAX];
	struct out o = { .fd = -1 };
	int dirlen = slash ? (int)(slash - path) + 1 : 0;

	if (snprintf(tmp, sizeof(tmp), "%.*s.%s.XXXXXX", dirlen, path,
		     path + dirlen) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	o.fd = mkostemp(tmp, O_CLOEXEC);
	if (o.fd < 0)
		return -errno;
	if (fchmod(o.fd, 0644))
		o.err = -errno;
	if (!o.err)
		render(&o, l, main);
	if (!o.err && fsync(o.fd))
		o.err = -errno;
	if (close(o.fd) && !o.err)
		o.err = -errno;
	if (!o.err && rename(tmp, path))
		o.err = -errno;
	if (o.err)
		unlink(tmp);
	return o.err;
}
