// SPDX-License-Identifier: MIT
/*
 * checks.c - target checks (checks.h).
 */
#include "checks.h"

bool bench_check(struct bench_checks *c, const char *what, double value,
		 double limit, enum bench_check_kind kind)
{
	bool pass = kind == BENCH_AT_MOST ? value <= limit : value >= limit;
	struct bench_check_item *it;

	/* A NaN value compares false both ways: it never passes. */
	if (c->nr == BENCH_MAX_CHECKS)
		return pass;
	it = &c->item[c->nr++];
	it->what = what;
	it->value = value;
	it->limit = limit;
	it->kind = kind;
	it->pass = pass;
	return pass;
}

void bench_checks_print(FILE *f, const struct bench_checks *c)
{
	for (unsigned int i = 0; i < c->nr; i++) {
		const struct bench_check_item *it = &c->item[i];

		fprintf(f, "%s  %-58s %7.2f  (target %s %.2f)\n",
			it->pass ? "PASS" : "MISS", it->what, it->value,
			it->kind == BENCH_AT_MOST ? "<=" : ">=", it->limit);
	}
}

void bench_checks_json(struct bench_json *w, const struct bench_checks *c)
{
	bench_json_begin(w, "targets", '[', false);
	for (unsigned int i = 0; i < c->nr; i++) {
		const struct bench_check_item *it = &c->item[i];

		bench_json_begin(w, NULL, '{', true);
		bench_json_string(w, "target", it->what);
		bench_json_double(w, "value", it->value);
		bench_json_string(w, "compare",
				  it->kind == BENCH_AT_MOST ? "<=" : ">=");
		bench_json_double(w, "limit", it->limit);
		bench_json_bool(w, "pass", it->pass);
		bench_json_end(w);
	}
	bench_json_end(w);
}
