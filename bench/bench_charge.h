/* SPDX-License-Identifier: MIT */
#ifndef TALLY_BENCH_CHARGE_H
#define TALLY_BENCH_CHARGE_H

/*
 * bench_charge.h - private to `tally bench charge`: one invocation's
 * settings (struct run), the figures of a cell, a design's tree with its
 * fill, and the phases: cost (bench_charge_cost.c), accuracy and error
 * (bench_charge_oracle.c), driven by bench_charge.c.
 */

#include <stdbool.h>
#include <stdio.h>

#include "charge_designs.h"
#include "json.h"
#include "measure.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CMD "tally bench charge"
#define PAGE 4096l
#define PAIR_BYTES PAGE
#define LIMIT (64l << 20)
#define FILL95 (LIMIT / 100 * 95 / PAGE * PAGE)
#define ROOM (LIMIT - FILL95)
#define MAX_THREADS 64
#define MAX_LIST 8

/* The designs compared, in the tables' order. */
#define NR_DESIGNS 4
#define TALLY 0
#define PAGE_COUNTER 3
extern const struct charge_design *const bench_charge_designs[NR_DESIGNS];

enum fill { FILL_FAR, FILL_95, NR_FILLS };
extern const char *const fill_names[NR_FILLS];

struct run {
	unsigned int threads[MAX_LIST], nr_threads;
	unsigned int depths[MAX_LIST], nr_depths;
	unsigned int groups[MAX_LIST], nr_groups;	/* leaves per CPU */
	unsigned int fills;		/* mask of enum fill */
	unsigned int reps;
	unsigned int pin;		/* BENCH_PIN or 0 */
	unsigned int tally_flags;
	long wave;			/* cost phase, per thread; 0: default */
	bool quick;
	unsigned long acc_ops, error_ops;
	struct bench_plan plan;
	const char *json_path;
	struct bench_json json;
	FILE *out;
};

/* The figures of one cell (threads x depth x groups x fill), per design. */
struct cell {
	unsigned int threads, depth;
	unsigned int groups;		/* leaves per CPU, 0: none */
	enum fill fill;
	struct bench_result res[NR_DESIGNS];
	unsigned long timed_refused[NR_DESIGNS];
	unsigned long refused[NR_DESIGNS], false_refused[NR_DESIGNS];
	long overshoot[NR_DESIGNS], error[NR_DESIGNS];
};

/* A design's tree, the main thread's state, and the fill charged. */
struct tree {
	const struct charge_design *d;
	void *obj;
	struct charge_thread main;
	long pre;
	int cpu;		/* of the main thread's charges */
};

/* Build @d's tree from @s and charge it @pre bytes.  Return: 0 or -1. */
int tree_make(struct tree *t, const struct charge_design *d,
	      const struct charge_setup *s, long pre);

/*
 * Give the fill back, check that nothing drifted (every charge of the
 * phase was uncharged: the drained usage must be 0), free the tree.
 */
int tree_free(struct tree *t);

/*
 * The chain of cell @c: its depth, max LIMIT on every level, and its
 * leaves (groups per CPU x this machine's CPUs).
 */
void setup_of(const struct run *r, const struct cell *c,
	      struct charge_setup *s);

/* ---- cost (bench_charge_cost.c) ----------------------------------------- */

/* ns per pair of every design in cell @c, repetitions interleaved. */
int measure_cost(struct run *r, struct cell *c);
void print_cost_header(struct run *r);
void print_cost_row(struct run *r, const struct cell *c);
/* The cell's figures, cost and accuracy, as one JSON object per design. */
void json_cell(struct run *r, const struct cell *c);

/* ---- accuracy and error (bench_charge_oracle.c) ------------------------- */

/* Refusals, overshoot and error of every design in cell @c. */
int measure_accuracy(struct run *r, struct cell *c);
void print_accuracy(struct run *r, const struct cell *cells, unsigned int nr);
/* The error phase: its table and its JSON. */
int measure_error(struct run *r);

#endif /* TALLY_BENCH_CHARGE_H */
