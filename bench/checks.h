/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_CHECKS_H
#define TALLY_BENCH_CHECKS_H

/*
 * checks.h - target checks of a benchmark run: measured ratios against
 * limits, printed as PASS/MISS lines and written to the JSON.
 */

#include <stdbool.h>
#include <stdio.h>

#include "json.h"

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

#endif /* TALLY_BENCH_CHECKS_H */
