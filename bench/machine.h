/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_MACHINE_H
#define TALLY_BENCH_MACHINE_H

/*
 * machine.h - where the figures were measured: CPU model and count,
 * kernel, how tally reaches rseq, compiler and load, printed as one line
 * and written to the JSON.
 */

#include <stdio.h>

#include "json.h"

/**
 * struct bench_machine - where the figures were measured.
 * @cpu_model: "model name" of /proc/cpuinfo, or "unknown".
 * @possible_cpus: CPUs of tally's system domain (possible CPUs).
 * @online_cpus: online CPUs (sysconf), for reference.
 * @kernel: uname's system name and release.
 * @rseq: how tally updates per-CPU data: tool_rseq_mode_name().
 * @compiler: the compiler that built the tool.
 * @loadavg: the 1-minute load average when described (-1 if unknown): other
 *	work running on the machine skews the figures.
 */
struct bench_machine {
	char cpu_model[128];
	unsigned int possible_cpus;
	unsigned int online_cpus;
	char kernel[160];
	const char *rseq;
	const char *compiler;
	double loadavg;
};

/**
 * bench_machine_get() - describe this machine.
 * @m: filled in; fields that cannot be read say "unknown" (or 0).
 */
void bench_machine_get(struct bench_machine *m);

/** bench_machine_print() - one line "machine: ..." describing @m. */
void bench_machine_print(FILE *f, const struct bench_machine *m);

/**
 * bench_json_identity() - the members every benchmark's JSON starts with:
 *	"benchmark" (@name), "tally_version" and "schema_version"
 *	(TOOL_BENCH_JSON_SCHEMA).
 * @w: the writer, inside the top-level object.
 * @name: the benchmark's name ("counter", "oom", ...).
 */
void bench_json_identity(struct bench_json *w, const char *name);

/** bench_machine_json() - the "machine" object describing @m. */
void bench_machine_json(struct bench_json *w, const struct bench_machine *m);

/**
 * bench_json_load_end() - the member "loadavg_1min_end": the 1-minute load
 *	average when the benchmark ended ("machine" has it at the start), so
 *	that a reader sees what else ran meanwhile.  Containers still open
 *	inside the top-level object (a benchmark that stopped half way) are
 *	closed first.
 * @w: the writer.
 */
void bench_json_load_end(struct bench_json *w);

/**
 * bench_rss_kib() - this process's resident memory (VmRSS), in KiB.
 *
 * Return: the size, or -1 when /proc/self/status cannot be read.
 */
long bench_rss_kib(void);

#endif /* TALLY_BENCH_MACHINE_H */
