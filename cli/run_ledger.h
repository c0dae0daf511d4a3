/* SPDX-License-Identifier: MIT */
/*
 * run_ledger.h - the figures of every process of a `tally run` tree, in
 * one shared mapping, and the textfile written from them (run_ledger.c).
 * `tally run` creates it; the preload of each process (run_preload.c)
 * records into it; the process `tally run` started and, once it ended,
 * `tally run` itself write the textfile from it.
 */
#ifndef TALLY_RUN_LEDGER_H
#define TALLY_RUN_LEDGER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A process's figures, as the textfile names them (run_ledger.c). */
enum run_figure {
	RF_CURRENT,
	RF_PEAK,
	RF_MAX,
	RF_HIGH,
	RF_EV_HIGH,
	RF_EV_MAX,
	RF_EV_OOM,
	RF_CHARGED,
	RF_ADOPTED,
	RF_JE_ACTIVE,
	RF_JE_DIRTY,
	RF_JE_RESIDENT,
	RF_JE_MAPPED,
	RF_JE_METADATA,
	RF_RSS,
	RF_UNCHARGED,
	RF_SIGNAL,	/* the signal that ended the process, 0 if none */
	RF_NR,
};

/* The first event figure and the one after the last. */
#define RF_EVENTS_FIRST RF_EV_HIGH
#define RF_EVENTS_END (RF_EV_OOM + 1)

/* A figure the process did not record (it ended before it could). */
#define RUN_FIGURE_NONE LONG_MIN

#define RUN_LEDGER_SLOTS 1024
#define RUN_LEDGER_NAME 16	/* /proc/PID/comm, with its NUL */

/*
 * One process (one pid): claimed by its preload when it starts, an image
 * that a process exec()s taking its pid's slot over.  Each field is
 * written with single atomic stores, by that process alone (and, for the
 * program tally run started, by tally run once it ended).
 */
struct run_slot {
	long pid;		/* 0: free */
	long fig[RF_NR];
	char name[RUN_LEDGER_NAME];
};

struct run_ledger {
	long magic;
	long claimed;		/* slots taken, or wanted past the last */
	struct run_slot slot[RUN_LEDGER_SLOTS];
};

/*
 * tally run: a ledger in a memory file, its path (in this process's
 * /proc/PID/fd, while it lives) into @path (@len bytes).  NULL and errno
 * on failure.
 */
struct run_ledger *run_ledger_create(char *path, size_t len);

/* The preload: the ledger at @path, NULL if there is none there. */
struct run_ledger *run_ledger_open(const char *path);

/* The slot of process @pid, NULL if it has none.  Async-signal-safe. */
struct run_slot *run_ledger_find(struct run_ledger *l, pid_t pid);

/*
 * The slot of process @pid: the one it has (an image that replaced
 * another by exec()), else a new one named @name, its figures
 * RUN_FIGURE_NONE but the events and the signal (0); NULL when all are
 * taken.  Async-signal-safe (a fork handler claims one).
 */
struct run_slot *run_ledger_claim(struct run_ledger *l, pid_t pid,
				  const char *name);

/* Store and load one figure of a slot (single atomic accesses). */
void run_slot_set(struct run_slot *s, enum run_figure f, long v);
long run_slot_get(const struct run_slot *s, enum run_figure f);

/*
 * Write the textfile @path from @l, atomically (a file beside it renamed
 * over it), without allocating; @main is the pid of the program tally run
 * started.  0 or a negative errno.
 */
int run_ledger_write(const struct run_ledger *l, pid_t main, const char *path);

#endif /* TALLY_RUN_LEDGER_H */
