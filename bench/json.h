/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_JSON_H
#define TALLY_BENCH_JSON_H

/*
 * json.h - a small streaming JSON writer for the benchmarks' --json
 * output: objects, arrays, strings, integers, numbers and booleans,
 * indented, or on one line per container when asked.
 */

#include <stdbool.h>
#include <stdio.h>

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

#endif /* TALLY_BENCH_JSON_H */
