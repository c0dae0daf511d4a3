/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CLI_PLOT_INTERNAL_H
#define TALLY_CLI_PLOT_INTERNAL_H

/*
 * plot_internal.h - what the files of `tally plot` share: the plot specs
 * (plot_specs.c), the safe texts of the JSON (plot_text.c), the output
 * and the files of a plot (plot_write.c).  plot.c is the command.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "json_read.h"

#define MAX_SERIES 64
#define MAX_Y 4
#define MAX_SPLIT 2
#define MAX_SERIES_KEYS 2
#define MAX_CATS 32
#define MAX_FILE (64 << 20)
#define LABEL_LEN 80
#define TEXT_LEN 512

enum plot_kind {
	PLOT_XY,	/* numeric x; a line per (series, y key) */
	PLOT_BARS,	/* categories = y keys (or a member object's keys) */
	PLOT_ROWS,	/* categories = the rows (named by the series key) */
};

/**
 * struct split_key - a key whose values make separate plots.
 * @key: the JSON key.
 * @pre: text before its value in the title ("period ").
 * @post: text after it (" ms").
 */
struct split_key {
	const char *key;
	const char *pre;
	const char *post;
};

/**
 * struct plot_spec - one kind of picture of a benchmark's JSON.
 * @benchmark: the JSON's "benchmark" value.
 * @name: file stem (split values are appended).
 * @section: the array of rows.
 * @kind: %PLOT_XY, %PLOT_BARS or %PLOT_ROWS.
 * @x: the x key (XY): an integer quantity, ticked at its values.
 * @y: y keys: lines (XY), categories (BARS) or bars (ROWS).
 * @bars_object: for BARS, a member object whose keys are the categories.
 * @series: the keys naming a row's series (its category for ROWS): rows
 *	with equal values of all of them are one series.
 * @split: keys whose values make separate plots.
 * @title: the plot's title (the split values follow).
 * @xlabel: x axis label: quantity and unit.
 * @ylabel: y axis label: quantity and unit.
 * @caption: what the picture shows, for the index.
 * @logx: logarithmic x axis.
 * @logy: logarithmic y axis.
 * @stale: a second panel: the share of stale forced reads per series
 *	("stale_reads" of "checks"), beside the latency.
 */
struct plot_spec {
	const char *benchmark;
	const char *name;
	const char *section;
	enum plot_kind kind;
	const char *x;
	const char *y[MAX_Y];
	const char *bars_object;
	const char *series[MAX_SERIES_KEYS];
	struct split_key split[MAX_SPLIT];
	const char *title;
	const char *xlabel;
	const char *ylabel;
	const char *caption;
	bool logx, logy;
	bool stale;
};

/* --- plot_specs.c -------------------------------------------------------- */

/* The plots of every benchmark, nr_specs of them. */
extern const struct plot_spec specs[];
extern const size_t nr_specs;

/* --- plot_text.c --------------------------------------------------------- */

const char *human_label(const char *raw);
char *read_file(const char *path, size_t *len);
void line_text(char *out, size_t len, const char *in, bool data);
void data_text(char *out, size_t len, const char *in);
void value_label(const struct json_value *v, char *out, size_t len);
void name_part(const struct json_value *v, char *out, size_t len);
bool is_file_part(const char *s);
void gp_quoted(FILE *f, const char *s);
bool is_number(const struct json_value *v);
bool same_value(const struct json_value *a, const struct json_value *b);
bool same_split(const struct plot_spec *s, const struct json_value *a,
		const struct json_value *b);

/* --- plot_write.c -------------------------------------------------------- */

/**
 * struct output - where and how the run goes.
 * @dir: the output directory.
 * @doc: the benchmark's JSON.
 * @gnuplot_missing: gnuplot is not installed: no picture is drawn.
 * @failed: a file or gnuplot failed: the run stops, no index.
 * @plots: plots made.
 */
struct output {
	const char *dir;
	const struct json_value *doc;
	bool gnuplot_missing;
	bool failed;
	unsigned int plots;
};

bool out_path(struct output *o, char *path, size_t len,
		     const char *name, const char *ext);
FILE *open_out(struct output *o, const char *name, const char *ext);
int close_out(struct output *o, FILE *f, const char *name,
		     const char *ext);
size_t write_xy(struct output *o, const struct plot_spec *s,
		const struct json_value *rows,
		const struct json_value *first, const char *name,
		const char *title);
size_t write_bars(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows,
			 const struct json_value *first, const char *name,
			 const char *title);
size_t write_rows(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows, const char *name,
			 const char *title);
void write_caption(struct output *o, const struct plot_spec *s,
			  const char *name, const char *title);

/* --- plot.c -------------------------------------------------------------- */

/* A message on standard error: "tally: " and the formatted text. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TALLY_CLI_PLOT_INTERNAL_H */
