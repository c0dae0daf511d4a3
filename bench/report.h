/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_REPORT_H
#define TALLY_BENCH_REPORT_H

/*
 * report.h - what every benchmark of the tally tool shares: clocks and
 * medians, a calibrated "ns per operation" measurement, threads that start
 * together, a small JSON writer, the machine description and the target
 * checks (PASS/MISS lines, also written to the JSON).
 *
 * Usage pattern of a benchmark:
 *
 *	bench_machine_get(&m);
 *	bench_measure(run, arg, &plan, &res);	(calibrates, then median)
 *	bench_check(&checks, "what", ratio, limit, BENCH_AT_MOST);
 *	bench_json_open(&w, path) ... bench_json_close(&w);
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** bench_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/**
 * bench_median() - the median of @n values (the mean of the two middle ones
 *	when @n is even); @v is left unchanged.
 * @v: the values.
 * @n: their number, at most %BENCH_MAX_REPS; 0 gives 0.
 */
double bench_median(const double *v, size_t n);

/** Largest number of repetitions of one measurement. */
#define BENCH_MAX_REPS 32

/**
 * struct bench_plan - how long and how often to repeat a measurement.
 * @target_ns: wanted duration of one repetition.
 * @reps: repetitions (1 to %BENCH_MAX_REPS); the median is reported.
 * @min_n: smallest operation count per repetition (at least 1).
 */
struct bench_plan {
	uint64_t target_ns;
	unsigned int reps;
	unsigned long min_n;
};

/**
 * struct bench_result - the outcome of bench_measure().
 * @median: median over the repetitions of the ns per operation.
 * @min: fastest repetition.
 * @max: slowest repetition.
 * @n: operations per repetition (per thread for threaded runs).
 */
struct bench_result {
	double median;
	double min;
	double max;
	unsigned long n;
};

/**
 * typedef bench_run_fn - one repetition of a measurement.
 * @arg: the caller's context.
 * @n: how many operations to do (per thread for threaded runs).
 *
 * Return: nanoseconds per operation (the elapsed time of the repetition
 * is taken to be that times @n), or a negative value on failure, which
 * stops the measurement.
 */
typedef double (*bench_run_fn)(void *arg, unsigned long n);

/**
 * bench_calibrate() - choose the operation count of one repetition.
 * @run: the repetition.
 * @arg: passed to @run.
 * @plan: the wanted duration.
 *
 * Grows n from @plan->min_n until a run lasts an eighth of
 * @plan->target_ns, then scales it to the target; these runs also warm up
 * caches and page tables.
 *
 * Return: the count, or 0 when @run failed (its message is printed).
 */
unsigned long bench_calibrate(bench_run_fn run, void *arg,
			      const struct bench_plan *plan);

/**
 * bench_summarize() - median, fastest and slowest of repetitions.
 * @v: ns per operation of each repetition.
 * @reps: their number, 1 to %BENCH_MAX_REPS.
 * @n: operations per repetition, copied to @res.
 * @res: filled with the figures.
 */
void bench_summarize(const double *v, unsigned int reps, unsigned long n,
		     struct bench_result *res);

/**
 * struct bench_job - one measurement of a set.
 * @run: its repetition.
 * @arg: passed to @run.
 */
struct bench_job {
	bench_run_fn run;
	void *arg;
};

/**
 * bench_measure_set() - measure several operations, repetitions
 *	interleaved.
 * @jobs: the measurements.
 * @nr: their number.
 * @plan: duration and repetitions of each.
 * @res: array of @nr results.
 *
 * Each job is calibrated alone, then the repetitions run in rounds, one of
 * each job per round: a slow period of the machine (other work, a noisy
 * neighbour) then hits every job alike, and their ratios stay meaningful.
 *
 * Return: 0, or -1 when a run failed (its message is already printed).
 */
int bench_measure_set(const struct bench_job *jobs, unsigned int nr,
		      const struct bench_plan *plan, struct bench_result *res);

/**
 * bench_measure() - calibrate, repeat and summarize one measurement.
 * @run: the repetition.
 * @arg: passed to @run.
 * @plan: duration and repetitions.
 * @res: filled with the figures.
 *
 * Return: 0, or -1 when @run failed (its message is already printed).
 */
int bench_measure(bench_run_fn run, void *arg, const struct bench_plan *plan,
		  struct bench_result *res);

/**
 * typedef bench_thread_fn - the body of one of bench_run_parallel()'s
 *	threads.
 * @arg: the caller's context.
 * @index: the thread's number, 0 to nr - 1.
 */
typedef void (*bench_thread_fn)(void *arg, unsigned int index);

/** bench_run_parallel() flag: pin thread i to the i-th allowed CPU. */
#define BENCH_PIN 0x1u

/**
 * bench_run_parallel() - run @fn on @nr threads that start together.
 * @nr: number of threads (at least 1).
 * @fn: the body.
 * @arg: passed to @fn.
 * @elapsed_ns: if not NULL, array of @nr set to each thread's wall time
 *	of @fn (CLOCK_MONOTONIC, from the moment the barrier released it).
 * @flags: 0 or %BENCH_PIN: before the start, thread i binds itself to the
 *	CPU (i modulo their number) of the caller's allowed CPUs, as
 *	will-it-scale does; threads beyond the CPU count share CPUs.
 *
 * All threads are created first and released by a barrier, so none
 * starts its work before the last is ready.  Returns once all have ended.
 *
 * Return: 0, or a negative errno when a thread cannot be created (the
 * created ones are released without running @fn and joined).
 */
int bench_run_parallel(unsigned int nr, bench_thread_fn fn, void *arg,
		       uint64_t *elapsed_ns, unsigned int flags);

/**
 * bench_rand() - the next number of a fast deterministic generator
 *	(splitmix64), for reproducible workloads.
 * @state: the generator's state; any seed.
 */
uint64_t bench_rand(uint64_t *state);

/**
 * bench_parse_list() - parse a comma-separated list of integers.
 * @s: the text, such as "1,2,4".
 * @out: array receiving the values.
 * @max: capacity of @out.
 * @lo: smallest accepted value.
 * @hi: largest accepted value.
 *
 * Return: the number of values, or -1 for an empty list, a value out of
 * [@lo, @hi], a malformed number or more than @max values.
 */
int bench_parse_list(const char *s, unsigned int *out, unsigned int max,
		     unsigned int lo, unsigned int hi);

/**
 * struct bench_machine - where the figures were measured.
 * @cpu_model: "model name" of /proc/cpuinfo, or "unknown".
 * @possible_cpus: CPUs of tally's system domain (possible CPUs).
 * @online_cpus: online CPUs (sysconf), for reference.
 * @kernel: uname's system name and release.
 * @rseq: how tally updates per-CPU data: "glibc", "own" or "fallback".
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

/** Deepest nesting of JSON containers. */
#define BENCH_JSON_DEPTH 16

/**
 * struct bench_json - a streaming JSON writer.
 * @f: the output; NULL makes every call a no-op, so a benchmark can write
 *	unconditionally and only open a file when asked to.
 * @depth: open containers.
 * @count: members written so far in each open container.
 * @oneline: whether each open container is written on a single line.
 * @close: the closing character of each open container.
 * @owns: @f was opened by bench_json_open() (not standard output).
 *
 * Members are written as "key": value inside objects (pass the key) and
 * as bare values inside arrays (pass NULL).
 */
struct bench_json {
	FILE *f;
	unsigned int depth;
	unsigned int count[BENCH_JSON_DEPTH];
	bool oneline[BENCH_JSON_DEPTH];
	char close[BENCH_JSON_DEPTH];
	bool owns;
};

/**
 * bench_json_open() - start a JSON document.
 * @w: the writer.
 * @path: a file name, "-" for standard output, or NULL for no output.
 *
 * Return: 0, or -1 when the file cannot be created (message printed).
 */
int bench_json_open(struct bench_json *w, const char *path);

/**
 * bench_json_close() - finish the document and close the file.
 * @w: the writer.  Containers still open are closed first, so a benchmark
 *	that stops half-way still leaves a well-formed (shorter) document.
 *
 * Return: 0, or -1 when writing failed (message printed).
 */
int bench_json_close(struct bench_json *w);

/**
 * bench_json_begin() - open an object or an array.
 * @w: the writer.
 * @key: the member name inside an object, NULL inside an array or at top.
 * @kind: '{' or '['.
 * @oneline: write the container on one line (its children too).
 */
void bench_json_begin(struct bench_json *w, const char *key, char kind,
		      bool oneline);

/** bench_json_end() - close the innermost container of @w. */
void bench_json_end(struct bench_json *w);

/** bench_json_string() - a string member (escaped). */
void bench_json_string(struct bench_json *w, const char *key, const char *v);

/** bench_json_int() - an integer member. */
void bench_json_int(struct bench_json *w, const char *key, long long v);

/** bench_json_double() - a number member; NaN and infinities are null. */
void bench_json_double(struct bench_json *w, const char *key, double v);

/** bench_json_bool() - a boolean member. */
void bench_json_bool(struct bench_json *w, const char *key, bool v);

/** bench_machine_json() - the "machine" object describing @m. */
void bench_machine_json(struct bench_json *w, const struct bench_machine *m);

/** Largest number of target checks one benchmark records. */
#define BENCH_MAX_CHECKS 32

/**
 * enum bench_check_kind - which side of the limit passes.
 * @BENCH_AT_MOST: the measured ratio must be <= the limit.
 * @BENCH_AT_LEAST: the measured ratio must be >= the limit.
 */
enum bench_check_kind {
	BENCH_AT_MOST,
	BENCH_AT_LEAST,
};

/**
 * struct bench_check_item - one target and how it was met.
 * @what: the target in words (a string literal or other lasting text).
 * @value: the measured figure.
 * @limit: the target figure.
 * @kind: which side passes.
 * @pass: the outcome.
 */
struct bench_check_item {
	const char *what;
	double value;
	double limit;
	enum bench_check_kind kind;
	bool pass;
};

/**
 * struct bench_checks - the targets of one benchmark run.
 * @nr: recorded items.
 * @item: the items.
 */
struct bench_checks {
	unsigned int nr;
	struct bench_check_item item[BENCH_MAX_CHECKS];
};

/**
 * bench_check() - record one target.
 * @c: the record.
 * @what: the target in words; must outlive @c.
 * @value: the measured figure (NaN when it could not be measured: the
 *	target then counts as missed).
 * @limit: the target figure.
 * @kind: which side passes.
 *
 * Return: whether the target is met.
 */
bool bench_check(struct bench_checks *c, const char *what, double value,
		 double limit, enum bench_check_kind kind);

/** bench_checks_print() - one "PASS"/"MISS" line per target. */
void bench_checks_print(FILE *f, const struct bench_checks *c);

/** bench_checks_json() - the "targets" array of @c. */
void bench_checks_json(struct bench_json *w, const struct bench_checks *c);

/**
 * bench_bad_usage() - report a bad command line of a benchmark.
 * @cmd: the command ("tally bench stats").
 * @what: what is wrong ("bad option or missing value", ...).
 * @arg: the offending argument.
 * @usage: prints the command's usage to a stream.
 *
 * Return: -1, what the option parsers return for a bad command line.
 */
int bench_bad_usage(const char *cmd, const char *what, const char *arg,
		    void (*usage)(FILE *f));

#endif /* TALLY_BENCH_REPORT_H */
