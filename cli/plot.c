// SPDX-License-Identifier: MIT
/*
 * plot.c - `tally plot RESULT.json [-o DIR]`: pictures of a benchmark's
 * JSON, drawn by gnuplot.
 *
 * Each benchmark has a few plot specs: which array of the JSON, which keys
 * are x, y and the series, and which keys split the rows into separate
 * plots.  For every plot the command writes NAME.dat (the numbers and
 * every text of the picture), NAME.gp (a gnuplot script that reads them
 * and writes NAME.png and NAME.svg) and NAME.txt (the title, caption,
 * machine and load the index shows), and runs gnuplot on the script, so a
 * user can edit it and run it again.  When every picture was made,
 * DIR/index.html and DIR/index.md show every picture of DIR with its
 * caption, so that several results plotted into one folder share an
 * index; a run that fails leaves the index as it was.
 *
 * No text of the JSON reaches gnuplot's command parser.  A gnuplot script
 * is a program: in a double-quoted string gnuplot runs `backquoted`
 * commands and expands backslash escapes, and a quote or a newline in a
 * label would end the string and start a command (system("...") is one).
 * Quoting can be made right (single quotes, quotes doubled, newlines
 * removed), but it is a rule every future line of these files would have to
 * follow, and a gnuplot version that expands more inside strings would
 * break it.  So the labels, the categories, the tick labels and the title
 * are data: they are written to NAME.dat, as quoted fields of data lines
 * (where '"' and '\' are replaced, and control characters become spaces),
 * and the script reads them there with `title columnheader`, xtic(1) and
 * strcol(1).  gnuplot's data reader never executes anything.  The script
 * itself holds only the tool's constant text (single-quoted, see
 * gp_quoted()), numbers the tool formats, and file names made of those
 * (name_part(): an unknown string of the JSON becomes a hash of it), in
 * [A-Za-z0-9._-], characters that have no meaning inside a single-quoted
 * gnuplot string.  gnuplot runs with execvp(), in DIR, with no shell.  The index is HTML: every text in it is escaped (html_text()),
 * and the index.md text is escaped for Markdown as well.
 *
 * Exit status: 0 pictures made; 1 a file could not be written or gnuplot
 * failed; 2 bad usage or a JSON that is malformed or of no known
 * benchmark; 3 gnuplot is missing: the data and scripts are written, the
 * message says what to install.  Every message starts with "tally: ";
 * gnuplot's own messages are passed on as "tally: gnuplot: ...".
 *
 * This file is the command, runs gnuplot and writes the index;
 * plot_specs.c holds the figures of each benchmark, plot_text.c makes the
 * JSON's texts safe, plot_write.c writes the data, scripts and captions.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tool/args.h"
#include "../tool/schema.h"
#include "json_read.h"
#include "plot.h"
#include "plot_internal.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally plot RESULT.json [-o DIR]\n"
		"\n"
		"Draw the figures of a benchmark's JSON (tally bench NAME --json FILE)\n"
		"with gnuplot: for each plot DIR/NAME.png and NAME.svg, with the data\n"
		"(NAME.dat), the gnuplot script (NAME.gp) and the caption (NAME.txt)\n"
		"beside them; then, when every picture was made, DIR/index.html and\n"
		"DIR/index.md show every picture in DIR with its caption, machine and\n"
		"load.\n"
		"\n"
		"  -o, --output DIR  where to write (default: the JSON file's directory)\n"
		"  -h, --help        show this help\n"
		"\n"
		"Exit status: 0 done, 1 a file or gnuplot failed, 2 bad usage or input,\n"
		"3 gnuplot missing (data and scripts written).\n");
}

void say(const char *fmt, ...)
{
	va_list ap;

	fputs("tally: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Run gnuplot on DIR/NAME.gp, in DIR (the script names files relative),
 * its messages passed on with "tally: gnuplot: " in front.
 */
static void run_gnuplot(struct output *o, const char *name)
{
	char script[300], line[1024];
	int fds[2], status;
	FILE *err;
	pid_t pid;

	if (o->gnuplot_missing)
		return;
	snprintf(script, sizeof(script), "%s.gp", name);
	fflush(NULL);
	if (pipe(fds)) {
		say("cannot run gnuplot: %s", strerror(errno));
		o->failed = true;
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (dup2(fds[1], STDERR_FILENO) < 0 ||
		    dup2(fds[1], STDOUT_FILENO) < 0 || chdir(o->dir))
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(fds[1]);
	err = pid < 0 ? NULL : fdopen(fds[0], "r");
	if (!err)
		close(fds[0]);
	while (err && fgets(line, sizeof(line), err)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0])
			say("gnuplot: %s", line);
	}
	if (err)
		fclose(err);
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		say("cannot run gnuplot: %s", strerror(errno));
		o->failed = true;
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		o->gnuplot_missing = true;
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		say("gnuplot failed on %s/%s", o->dir, script);
		o->failed = true;
	}
}

static void plot_spec(struct output *o, const struct plot_spec *s)
{
	const struct json_value *rows = json_get(o->doc, s->section);

	if (!rows || rows->type != JSON_ARRAY)
		return;
	for (size_t r = 0; r < rows->n; r++) {
		const struct json_value *row = &rows->items[r];
		char name[256], title[TEXT_LEN];
		size_t p, points;

		if (row->type != JSON_OBJECT)
			continue;
		/* One plot per split: made at the split's first row. */
		for (p = 0; p < r && (rows->items[p].type != JSON_OBJECT ||
				      !same_split(s, &rows->items[p], row));
		     p++)
			;
		if (p < r)
			continue;
		snprintf(name, sizeof(name), "%s", s->name);
		snprintf(title, sizeof(title), "%s", s->title);
		for (int k = 0; k < MAX_SPLIT && s->split[k].key; k++) {
			const struct json_value *v = json_get(row,
							      s->split[k].key);
			char label[LABEL_LEN], part[64];
			size_t n = strlen(name), t = strlen(title);

			value_label(v, label, sizeof(label));
			snprintf(title + t, sizeof(title) - t, "%s%s%s%s",
				 k ? ", " : ": ", s->split[k].pre, label,
				 s->split[k].post);
			name_part(v, part, sizeof(part));
			snprintf(name + n, sizeof(name) - n, "_%s%s",
				 s->split[k].key, part);
		}
		if (s->kind == PLOT_XY)
			points = write_xy(o, s, rows, row, name, title);
		else if (s->kind == PLOT_BARS)
			points = write_bars(o, s, rows, row, name, title);
		else
			points = write_rows(o, s, rows, name, title);
		if (o->failed)
			return;
		if (!points) {
			say("%s: no number to plot; no picture", name);
			continue;
		}
		write_caption(o, s, name, title);
		if (o->failed)
			return;
		run_gnuplot(o, name);
		if (o->failed)
			return;
		o->plots++;
	}
}

/* @s as HTML text (also fit for a quoted attribute). */
static void html_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

/*
 * @s as Markdown text: the characters Markdown acts on inline are
 * backslash-escaped, and <, > and & are entities (no raw HTML).
 */
static void md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<' || *s == '>' || *s == '&') {
			char c[2] = { *s, '\0' };

			html_text(f, c);
		} else {
			if (strchr("\\`*_[]#!|~", *s))
				fputc('\\', f);
			fputc(*s, f);
		}
	}
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is there a non-empty DIR/NAME.EXT? */
static bool have_file(struct output *o, const char *name, const char *ext)
{
	char path[4096];
	struct stat st;

	return (size_t)snprintf(path, sizeof(path), "%s/%s.%s", o->dir, name,
				ext) < sizeof(path) &&
	       !stat(path, &st) && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* NAME.txt's lines: title, caption, machine, load ("" when missing). */
static void read_caption(struct output *o, const char *name,
			 char lines[4][TEXT_LEN])
{
	char path[4096];
	FILE *f;

	for (int i = 0; i < 4; i++)
		lines[i][0] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s.txt", o->dir, name) >=
	    sizeof(path) || !(f = fopen(path, "r")))
		return;
	for (int i = 0; i < 4 && fgets(lines[i], TEXT_LEN, f); i++)
		lines[i][strcspn(lines[i], "\n")] = '\0';
	fclose(f);
}

static void index_entry(FILE *html, FILE *md, const char *name,
			char cap[4][TEXT_LEN])
{
	const char *title = cap[0][0] ? cap[0] : name;

	fprintf(html, "<figure id=\"%s\">\n<img src=\"%s.svg\" alt=\"", name,
		name);
	html_text(html, title);
	fprintf(html, "\">\n<figcaption><b>");
	html_text(html, title);
	fprintf(html, ".</b> ");
	html_text(html, cap[1]);
	fprintf(html, "<br>\n");
	if (cap[2][0]) {
		fprintf(html, "Measured on ");
		html_text(html, cap[2]);
	} else {
		fprintf(html, "Machine not recorded");
	}
	fprintf(html, "; %s", cap[3][0] ? "" : "load not recorded");
	html_text(html, cap[3]);
	fprintf(html, ".");
	fprintf(html,
		"<br>\n<a href=\"%s.png\">PNG</a> &middot; <a href=\"%s.dat\">data</a>"
		" &middot; <a href=\"%s.gp\">gnuplot script</a></figcaption>\n"
		"</figure>\n", name, name, name);

	fprintf(md, "## ");
	md_text(md, title);
	fprintf(md, "\n\n![");
	md_text(md, title);
	fprintf(md, "](%s.svg)\n\n", name);
	md_text(md, cap[1]);
	fprintf(md, "\n\n");
	if (cap[2][0]) {
		fprintf(md, "Measured on ");
		md_text(md, cap[2]);
	} else {
		fprintf(md, "Machine not recorded");
	}
	fprintf(md, "; %s", cap[3][0] ? "" : "load not recorded");
	md_text(md, cap[3]);
	fprintf(md, ".");
	fprintf(md, " [PNG](%s.png), [data](%s.dat), [script](%s.gp)\n\n",
		name, name, name);
}

/* Write DIR/index.EXT from its temporary file: the whole file or none. */
static void commit_index(struct output *o, FILE *f, const char *ext)
{
	char tmp[4096], path[4096];

	out_path(o, tmp, sizeof(tmp), ".index", ext);
	if (close_out(o, f, ".index", ext) ||
	    !out_path(o, path, sizeof(path), "index", ext))
		return;
	if (rename(tmp, path)) {
		say("cannot write %s: %s", path, strerror(errno));
		o->failed = true;
	}
}

/*
 * DIR/index.html and DIR/index.md: every picture of DIR (NAME.svg with
 * its NAME.gp), by name, with its caption.  Each is written to a
 * temporary file and renamed: the index is complete or as it was.
 */
static void write_index(struct output *o)
{
	char *names[1024];
	size_t n = 0;
	struct dirent *e;
	DIR *dir = opendir(o->dir);
	FILE *html, *md;

	if (!dir) {
		say("cannot read %s: %s", o->dir, strerror(errno));
		o->failed = true;
		return;
	}
	while ((e = readdir(dir)) && n < 1024) {
		size_t len = strlen(e->d_name);
		char *stem;

		if (len <= 3 || strcmp(e->d_name + len - 3, ".gp"))
			continue;
		stem = strndup(e->d_name, len - 3);
		if (stem && is_file_part(stem) && have_file(o, stem, "svg"))
			names[n++] = stem;
		else
			free(stem);
	}
	closedir(dir);
	qsort(names, n, sizeof(names[0]), compare_names);
	html = open_out(o, ".index", "html");
	md = html ? open_out(o, ".index", "md") : NULL;
	if (html && md) {
		fprintf(html,
			"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
			"<title>tally plots</title>\n<style>figure { margin: 2em 0; } "
			"figcaption { max-width: 60em; } img { max-width: 100%%; }"
			"</style></head><body>\n<h1>tally plots</h1>\n");
		fprintf(md, "# tally plots\n\n");
		for (size_t i = 0; i < n; i++) {
			char cap[4][TEXT_LEN];

			read_caption(o, names[i], cap);
			index_entry(html, md, names[i], cap);
		}
		fprintf(html, "</body></html>\n");
		commit_index(o, html, "html");
		if (!o->failed)
			commit_index(o, md, "md");
		else
			fclose(md);
	} else {
		char tmp[4096];

		if (html)
			fclose(html);
		if (out_path(o, tmp, sizeof(tmp), ".index", "html"))
			unlink(tmp);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

/*
 * Beyond this magnitude gnuplot's range and tick arithmetic overflows (a
 * range of 1e308 is "invalid"), and so would the ranges this tool writes.
 */
#define PLOT_MAX_NUMBER 1e300

/* Does @v hold a number gnuplot cannot draw? */
static bool has_huge_number(const struct json_value *v)
{
	if (v->type == JSON_NUMBER)
		return fabs(v->number) > PLOT_MAX_NUMBER;
	for (size_t i = 0; i < v->n; i++)
		if (has_huge_number(&v->items[i]))
			return true;
	return false;
}

/* -o, --output: the directory (@ctx). */
static int option(int opt, char *arg, void *ctx)
{
	*(const char **)ctx = arg;
	return 0;
}

int tally_plot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct output o = { NULL, NULL, false, false, 0 };
	const struct json_value *bench, *schema;
	struct json_value *doc;
	char err[256], *text, *dir_of_json = NULL;
	const char *path;
	size_t len;
	static const struct tool_command cmd = {
		"plot", usage, "o:", longopts, option, false
	};
	int first, st;

	st = tool_parse_options(&cmd, argc, argv, &o.dir, &first);
	if (st)
		return st > 0 ? 0 : 2;
	if (first + 1 != argc) {
		tool_usage_error("one RESULT.json expected");
		return 2;
	}
	path = argv[first];
	text = read_file(path, &len);
	if (!text) {
		say("cannot read %s: %s", path, strerror(errno));
		return 2;
	}
	if (json_parse(text, len, &doc, err, sizeof(err))) {
		say("%s: not JSON %s", path, err);
		free(text);
		return 2;
	}
	free(text);
	o.doc = doc;
	schema = json_get(doc, "schema_version");
	if (schema && (schema->type != JSON_NUMBER ||
		       schema->number > TOOL_BENCH_JSON_SCHEMA)) {
		say("%s: JSON layout %g is newer than this tool's (%d)", path,
		    schema->type == JSON_NUMBER ? schema->number : -1.0,
		    TOOL_BENCH_JSON_SCHEMA);
		json_free(doc);
		return 2;
	}
	bench = json_get(doc, "benchmark");
	if (!bench || bench->type != JSON_STRING) {
		say("%s: no \"benchmark\" name: not the JSON of tally bench",
		    path);
		json_free(doc);
		return 2;
	}
	if (has_huge_number(doc)) {
		say("%s: a number beyond +-%g, too large for gnuplot to draw",
		    path, PLOT_MAX_NUMBER);
		json_free(doc);
		return 2;
	}
	if (!o.dir) {
		char *slash;

		dir_of_json = strdup(path);
		slash = dir_of_json ? strrchr(dir_of_json, '/') : NULL;
		if (slash)
			*slash = '\0';
		o.dir = slash ? dir_of_json : ".";
		if (slash && !*o.dir)
			o.dir = "/";
	}
	if (mkdir(o.dir, 0755) && errno != EEXIST) {
		say("cannot create %s: %s", o.dir, strerror(errno));
		json_free(doc);
		free(dir_of_json);
		return 1;
	}
	for (size_t i = 0; i < nr_specs && !o.failed; i++)
		if (!strcmp(specs[i].benchmark, bench->string))
			plot_spec(&o, &specs[i]);
	if (!o.failed && !o.plots) {
		char name[LABEL_LEN];

		data_text(name, sizeof(name), bench->string);
		say("%s: nothing to plot for benchmark '%s'", path, name);
	}
	/* An index only of a run that made every picture. */
	if (!o.failed && !o.gnuplot_missing && o.plots)
		write_index(&o);
	json_free(doc);
	if (o.failed) {
		free(dir_of_json);
		return 1;
	}
	if (o.gnuplot_missing) {
		say("gnuplot not found: data and scripts are in %s", o.dir);
		say("install gnuplot (Debian: apt-get install -y gnuplot-nox) and run 'gnuplot NAME.gp' there");
		free(dir_of_json);
		return 3;
	}
	if (o.plots)
		printf("%u plots in %s (index.html, index.md)\n", o.plots,
		       o.dir);
	free(dir_of_json);
	return o.plots ? 0 : 2;
}
