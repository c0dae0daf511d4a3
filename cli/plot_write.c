// SPDX-License-Identifier: MIT
/*
 * plot_write.c - the files of a plot: the output files (open_out(),
 * close_out()), the series of a spec, NAME.dat with every number and text
 * of the picture and NAME.gp, the gnuplot script that reads them, for line
 * plots (write_xy()), bars (write_bars()) and rows (write_rows()); and
 * NAME.txt, the caption the index shows (write_caption()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_read.h"
#include "plot_internal.h"

/* DIR/NAME.EXT into @path; false (said) when it does not fit. */
bool out_path(struct output *o, char *path, size_t len,
		     const char *name, const char *ext)
{
	if ((size_t)snprintf(path, len, "%s/%s.%s", o->dir, name, ext) < len)
		return true;
	say("%s/%s.%s: path too long", o->dir, name, ext);
	o->failed = true;
	return false;
}

FILE *open_out(struct output *o, const char *name, const char *ext)
{
	char path[4096];
	FILE *f;

	if (!out_path(o, path, sizeof(path), name, ext))
		return NULL;
	f = fopen(path, "w");
	if (!f) {
		say("cannot write %s: %s", path, strerror(errno));
		o->failed = true;
	}
	return f;
}

int close_out(struct output *o, FILE *f, const char *name,
		     const char *ext)
{
	bool err = ferror(f);

	if (fclose(f) || err) {
		say("cannot write %s/%s.%s: %s", o->dir, name, ext,
		    strerror(errno ? errno : EIO));
		o->failed = true;
		return -1;
	}
	return 0;
}

/**
 * struct series_set - the series of one plot, in order of appearance.
 * @first: each series' first row (its values of the series keys are
 *	what the other rows match).
 * @label: its label: data text, cut to fit, made unique.
 * @n: how many.
 */
struct series_set {
	const struct json_value *first[MAX_SERIES];
	char label[MAX_SERIES][LABEL_LEN];
	size_t n;
};

/* Does @row belong to series @k of @set? */
static bool in_series(const struct plot_spec *s, const struct series_set *set,
		      size_t k, const struct json_value *row)
{
	for (int i = 0; i < MAX_SERIES_KEYS && s->series[i]; i++)
		if (!same_value(json_get(row, s->series[i]),
				json_get(set->first[k], s->series[i])))
			return false;
	return true;
}

/* The label of @row's series: its series values, named, space-separated. */
static void series_label(const struct plot_spec *s,
			 const struct json_value *row, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < MAX_SERIES_KEYS && s->series[i]; i++) {
		char part[LABEL_LEN];

		value_label(json_get(row, s->series[i]), part, sizeof(part));
		if (used + 1 + strlen(part) >= len)
			break;
		used += (size_t)snprintf(out + used, len - used, "%s%s",
					 i ? " " : "", part);
	}
}

/* The series of the rows of @first's split; more than MAX_SERIES: said. */
static void collect_series(const struct plot_spec *s,
			   const struct json_value *rows,
			   const struct json_value *first, const char *name,
			   struct series_set *set)
{
	bool dropped = false;

	set->n = 0;
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		size_t k;

		if (row->type != JSON_OBJECT || !same_split(s, first, row))
			continue;
		for (k = 0; k < set->n && !in_series(s, set, k, row); k++)
			;
		if (k < set->n)
			continue;
		if (set->n == MAX_SERIES) {
			dropped = true;
			continue;
		}
		set->first[k] = row;
		series_label(s, row, set->label[k], LABEL_LEN - 16);
		for (size_t j = 0; j < k; j++)
			if (!strcmp(set->label[j], set->label[k])) {
				size_t len = strlen(set->label[k]);

				snprintf(set->label[k] + len, 16, " #%zu",
					 k + 1);
				break;
			}
		set->n++;
	}
	if (dropped)
		say("%s: more than %d series; the others are left out", name,
		    MAX_SERIES);
}

/* Block 0 of every NAME.dat: the title, read by the script. */
static void put_title_block(FILE *dat, const char *title)
{
	fprintf(dat,
		"# Made by tally plot. Block 0: the title; then the data, each\n"
		"# block's first line its column titles.\n\"%s\"\n\n\n",
		title);
}

/**
 * struct shape - what the script needs to know of the data.
 * @n: lines (XY) or bars per category (BARS, ROWS).
 * @points: points or bars drawn.
 * @x: smallest and largest x (XY).
 * @y: smallest and largest y drawn.
 */
struct shape {
	size_t n;
	size_t points;
	double x[2];
	double y[2];
};

static void shape_add(double v[2], size_t points, double value)
{
	if (!points || value < v[0])
		v[0] = value;
	if (!points || value > v[1])
		v[1] = value;
}

/*
 * A range around @v, when all values are equal (gnuplot would warn and
 * widen it itself): an octave each side on a log axis, else 1.
 */
static void fixed_range(FILE *gp, const char *axis, const double v[2],
			bool log)
{
	if (v[0] != v[1] || (log && v[0] <= 0))
		return;
	if (log)
		fprintf(gp, "set %srange [%.17g:%.17g]\n", axis, v[0] / 2,
			v[0] * 2);
	else
		fprintf(gp, "set %srange [%.17g:%.17g]\n", axis, v[0] - 1,
			v[0] + 1);
}

/*
 * How the script draws one picture (both terminals run it): @body writes
 * the settings and plot commands of NAME.
 */
typedef void (*body_fn)(FILE *gp, const struct plot_spec *s,
			const char *name, const struct shape *sh);

/* Settings every picture starts with (the body runs twice: reset all). */
static void common_settings(FILE *gp, const struct plot_spec *s,
			    const char *title_var)
{
	fprintf(gp, "set encoding utf8\n");
	if (title_var)
		fprintf(gp, "set title %s noenhanced\n", title_var);
	fprintf(gp, "set xlabel ");
	gp_quoted(gp, s->xlabel);
	fprintf(gp, "\nset ylabel ");
	gp_quoted(gp, s->ylabel);
	fprintf(gp, "\nset key outside right top noenhanced\nset grid\n");
	if (s->logx)
		fprintf(gp, "set logscale x 2\n");
	if (s->logy)
		fprintf(gp, "set logscale y\n");
}

static void write_script(struct output *o, const struct plot_spec *s,
			 const char *name, const struct shape *sh,
			 body_fn body)
{
	static const char *const terms[][2] = {
		{ "pngcairo", "png" },
		{ "svg", "svg" },
	};
	FILE *gp = open_out(o, name, "gp");
	char file[300];

	if (!gp)
		return;
	fprintf(gp,
		"# Made by tally plot; edit and run again: gnuplot %s.gp\n"
		"# Every text of the benchmark's JSON is in %s.dat: read there,\n"
		"# never written into this script.\n"
		"stats ", name, name);
	snprintf(file, sizeof(file), "%s.dat", name);
	gp_quoted(gp, file);
	fprintf(gp, " index 0 using (title_text = strcol(1), 0) nooutput\n");
	for (size_t t = 0; t < 2; t++) {
		fprintf(gp, "set terminal %s size %d,540%s noenhanced",
			terms[t][0], s->stale ? 1280 : 960,
			t ? " dynamic" : "");
		snprintf(file, sizeof(file), "%s.%s", name, terms[t][1]);
		fprintf(gp, "\nset output ");
		gp_quoted(gp, file);
		fprintf(gp, "\nreset\n");
		body(gp, s, name, sh);
		fprintf(gp, "unset output\n");
	}
	close_out(o, gp, name, "gp");
}

static void xy_body(FILE *gp, const struct plot_spec *s, const char *name,
		    const struct shape *sh)
{
	char file[300];

	common_settings(gp, s, "title_text");
	fixed_range(gp, "x", sh->x, s->logx);
	fixed_range(gp, "y", sh->y, s->logy);
	snprintf(file, sizeof(file), "%s.dat", name);
	/*
	 * Ticks at the measured x values, labelled from the data (a tick
	 * on the border would be dropped: room on both sides).
	 */
	fprintf(gp, "set offsets graph 0.04, graph 0.04, 0, 0\n");
	fprintf(gp, "plot for [i=1:%zu] ", sh->n);
	gp_quoted(gp, file);
	fprintf(gp,
		" index i using 1:2:xticlabels(1) with linespoints title columnheader(1)\n");
}

/* Each write_*() returns the number of points it wrote (0: no picture). */
size_t write_xy(struct output *o, const struct plot_spec *s,
		const struct json_value *rows,
		const struct json_value *first, const char *name,
		const char *title)
{
	struct series_set set;
	struct shape sh = { 0 };
	size_t nr_y = 0;
	FILE *dat;

	collect_series(s, rows, first, name, &set);
	while (nr_y < MAX_Y && s->y[nr_y])
		nr_y++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	for (size_t k = 0; k < set.n; k++) {
		for (size_t y = 0; y < nr_y; y++) {
			unsigned int points = 0;

			/* The line's title, then its points. */
			fprintf(dat, "\"%s%s%s\"\n", set.label[k],
				nr_y > 1 ? " " : "",
				nr_y > 1 ? human_label(s->y[y]) : "");
			for (size_t r = 0; r < rows->n; r++) {
				const struct json_value *row = &rows->items[r];
				const struct json_value *xv = json_get(row, s->x);
				const struct json_value *yv =
					json_get(row, s->y[y]);

				/* As a bar: a log axis cannot show <= 0. */
				if (!same_split(s, first, row) ||
				    !in_series(s, &set, k, row) ||
				    !is_number(xv) || !is_number(yv) ||
				    (s->logx && xv->number <= 0) ||
				    (s->logy && yv->number <= 0))
					continue;
				fprintf(dat, "%.17g %.17g\n", xv->number,
					yv->number);
				shape_add(sh.x, sh.points, xv->number);
				shape_add(sh.y, sh.points, yv->number);
				sh.points++;
				points++;
			}
			if (!points)
				fprintf(dat, "NaN NaN\n");
			fprintf(dat, "\n\n");
			sh.n++;
		}
	}
	if (close_out(o, dat, name, "dat"))
		return 0;
	if (sh.points)
		write_script(o, s, name, &sh, xy_body);
	return sh.points;
}

/* One bar's value; zero cannot go on a log axis, so it is left out. */
static void put_bar(FILE *dat, const struct plot_spec *s,
		    const struct json_value *v, struct shape *sh)
{
	if (is_number(v) && (v->number > 0 || !s->logy)) {
		fprintf(dat, " %.17g", v->number);
		shape_add(sh->y, sh->points, v->number);
		sh->points++;
	} else {
		fprintf(dat, " NaN");
	}
}

static void bars_settings(FILE *gp, const struct plot_spec *s,
			  const struct shape *sh, const char *title_var)
{
	common_settings(gp, s, title_var);
	fprintf(gp,
		"set style data histograms\nset style histogram clustered gap 1\n"
		"set style fill solid 0.8 border -1\nset boxwidth 0.9\n");
	fprintf(gp, "set xtics rotate by -30\n");
	/* Counts on a log axis: a bar of 1 read must show. */
	if (s->bars_object && s->logy && sh->y[0] == sh->y[1])
		fprintf(gp, "set yrange [0.5:%.17g]\n", 2 * sh->y[1]);
	else if (s->bars_object && s->logy)
		fprintf(gp, "set yrange [0.5:*]\n");
	else
		fixed_range(gp, "y", sh->y, s->logy);
}

/*
 * Stale reads, right of the latency: block 2 of NAME.dat, a bar per
 * series (@n), each in its series' colour, its value written above it.
 */
static void stale_panel(FILE *gp, const char *file, size_t n)
{
	fprintf(gp,
		"set origin 0.6,0\nset size 0.4,0.94\n"
		"unset logscale y\nset yrange [0:100]\nset xrange [-0.6:%zu.6]\n"
		"set boxwidth 0.6\nset title 'stale forced reads'\n"
		"set xlabel 'design'\nset ylabel 'stale reads (%% of forced reads)'\n"
		"plot ", n ? n - 1 : 0);
	gp_quoted(gp, file);
	fprintf(gp, " index 2 using 0:2:($0 + 1):xtic(1) with boxes lc variable "
		"notitle, '' index 2 using 0:2:(sprintf('%%.1f%%%%', $2)) with "
		"labels offset 0,0.8 notitle\n");
}

/*
 * A clustered bar chart: block 1 of NAME.dat has the categories in column
 * 1, @nr_bars bars from column 2 on, their titles in its first line.
 */
static void bars_body(FILE *gp, const struct plot_spec *s, const char *name,
		      const struct shape *sh)
{
	size_t nr_bars = sh->n;
	char file[300];

	snprintf(file, sizeof(file), "%s.dat", name);
	if (s->stale) {
		fprintf(gp, "set multiplot title title_text noenhanced\n");
		bars_settings(gp, s, sh, NULL);
		fprintf(gp, "set title 'read latency'\n"
			"set origin 0,0\nset size 0.6,0.94\n");
	} else {
		bars_settings(gp, s, sh, "title_text");
	}
	fprintf(gp, "plot for [i=2:%zu] ", nr_bars + 1);
	gp_quoted(gp, file);
	fprintf(gp, " index 1 using i:xtic(1) title columnheader(i)\n");
	if (s->stale) {
		stale_panel(gp, file, nr_bars);
		fprintf(gp, "unset multiplot\n");
	}
}

/* Block 2: each series' stale forced reads, percent of its checks. */
static void put_stale_block(FILE *dat, const struct series_set *set)
{
	fprintf(dat, "\n\n# design, stale forced reads (%%)\n");
	for (size_t k = 0; k < set->n; k++) {
		const struct json_value *st = json_get(set->first[k],
						       "stale_reads");
		const struct json_value *ch = json_get(set->first[k], "checks");

		fprintf(dat, "\"%s\"", set->label[k]);
		if (is_number(st) && is_number(ch) && ch->number > 0)
			fprintf(dat, " %.17g\n", 100 * st->number / ch->number);
		else
			fprintf(dat, " NaN\n");
	}
}

size_t write_bars(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows,
			 const struct json_value *first, const char *name,
			 const char *title)
{
	struct series_set set;
	const struct json_value *cats_of = NULL;
	const char *cats[MAX_CATS];
	struct shape sh = { 0 };
	size_t nr_cats = 0;
	FILE *dat;

	collect_series(s, rows, first, name, &set);
	/* Categories: the y keys, or the member names of bars_object. */
	if (s->bars_object) {
		cats_of = json_get(first, s->bars_object);
		if (!cats_of || cats_of->type != JSON_OBJECT)
			return 0;
		for (size_t i = 0; i < cats_of->n && nr_cats < MAX_CATS; i++)
			cats[nr_cats++] = cats_of->keys[i];
	} else {
		while (nr_cats < MAX_Y && s->y[nr_cats]) {
			cats[nr_cats] = s->y[nr_cats];
			nr_cats++;
		}
	}
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	fprintf(dat, "\"category\"");
	for (size_t k = 0; k < set.n; k++)
		fprintf(dat, " \"%s\"", set.label[k]);
	fprintf(dat, "\n");
	for (size_t c = 0; c < nr_cats; c++) {
		char cat[LABEL_LEN];

		data_text(cat, sizeof(cat), human_label(cats[c]));
		fprintf(dat, "\"%s\"", cat);
		for (size_t k = 0; k < set.n; k++) {
			const struct json_value *v = NULL;

			for (size_t r = 0; r < rows->n && !v; r++) {
				const struct json_value *row = &rows->items[r];

				if (!same_split(s, first, row) ||
				    !in_series(s, &set, k, row))
					continue;
				v = json_get(s->bars_object ?
					     json_get(row, s->bars_object) : row,
					     cats[c]);
			}
			put_bar(dat, s, v, &sh);
		}
		fprintf(dat, "\n");
	}
	if (s->stale)
		put_stale_block(dat, &set);
	if (close_out(o, dat, name, "dat"))
		return 0;
	sh.n = set.n;
	if (sh.points)
		write_script(o, s, name, &sh, bars_body);
	return sh.points;
}

/* One bar group per row, a bar per y key. */
size_t write_rows(struct output *o, const struct plot_spec *s,
			 const struct json_value *rows, const char *name,
			 const char *title)
{
	struct shape sh = { 0 };
	FILE *dat;

	while (sh.n < MAX_Y && s->y[sh.n])
		sh.n++;
	dat = open_out(o, name, "dat");
	if (!dat)
		return 0;
	put_title_block(dat, title);
	fprintf(dat, "\"category\"");
	for (size_t y = 0; y < sh.n; y++)
		fprintf(dat, " \"%s\"", human_label(s->y[y]));
	fprintf(dat, "\n");
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char cat[LABEL_LEN];

		series_label(s, row, cat, sizeof(cat));
		fprintf(dat, "\"%s\"", cat);
		for (size_t y = 0; y < sh.n; y++)
			put_bar(dat, s, json_get(row, s->y[y]), &sh);
		fprintf(dat, "\n");
	}
	if (close_out(o, dat, name, "dat"))
		return 0;
	if (sh.points)
		write_script(o, s, name, &sh, bars_body);
	return sh.points;
}

/*
 * A string member of @obj as one line of text ("unknown" if none):
 * control characters become spaces (the index escapes the rest).
 */
static void member_text(const struct json_value *obj, const char *key,
			char *out, size_t len)
{
	const struct json_value *v = json_get(obj, key);

	if (v && v->type == JSON_STRING)
		line_text(out, len, v->string, false);
	else if (is_number(v))
		snprintf(out, len, "%g", v->number);
	else
		snprintf(out, len, "unknown");
}

/*
 * NAME.txt, what the index shows under the picture: title, caption, the
 * machine and the load of the run (plain text, a line each; an empty line
 * when the JSON does not say).
 */
void write_caption(struct output *o, const struct plot_spec *s,
			  const char *name, const char *title)
{
	const struct json_value *m = json_get(o->doc, "machine");
	const struct json_value *l0 = json_get(m, "loadavg_1min");
	const struct json_value *l1 = json_get(o->doc, "loadavg_1min_end");
	char cpu[160], kernel[160], compiler[160], rseq[32], possible[32],
		online[32];
	FILE *f = open_out(o, name, "txt");

	if (!f)
		return;
	member_text(m, "cpu_model", cpu, sizeof(cpu));
	member_text(m, "kernel", kernel, sizeof(kernel));
	member_text(m, "compiler", compiler, sizeof(compiler));
	member_text(m, "rseq", rseq, sizeof(rseq));
	member_text(m, "possible_cpus", possible, sizeof(possible));
	member_text(m, "online_cpus", online, sizeof(online));
	fprintf(f, "%s\n%s\n", title, s->caption);
	if (m)
		fprintf(f, "%s, %s possible CPUs (%s online), %s, rseq %s, %s\n",
			cpu, possible, online, kernel, rseq, compiler);
	else
		fprintf(f, "\n");
	if (is_number(l0) && l0->number >= 0 && is_number(l1) &&
	    l1->number >= 0)
		fprintf(f, "load average (1 min) %.2f at the start, %.2f at the end\n",
			l0->number, l1->number);
	else if (is_number(l0) && l0->number >= 0)
		fprintf(f, "load average (1 min) %.2f at the start\n",
			l0->number);
	else
		fprintf(f, "\n");
	close_out(o, f, name, "txt");
}
