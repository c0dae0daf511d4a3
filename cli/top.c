// SPDX-License-Identifier: MIT
/*
 * top.c - `tally top URL|FILE`: a running program's memory groups and
 * statistics groups as trees, from its Prometheus text (0.0.4) or
 * OpenMetrics exposition, refreshed every few seconds: what systemd-cgtop
 * is for cgroups.
 *
 * A refresh reads the whole exposition (a regular file, or the body of an
 * HTTP/1.0 GET over a socket: no redirect followed, at most MAX_EXPOSITION
 * bytes, within --timeout seconds), parses every line strictly, keeps the
 * samples that carry a group="PATH" label and that tally/export.h's
 * families name, and builds one tree per source:
 *
 *   - a memory tree: PREFIX_memory_{current,peak,min,low,high,max}_bytes
 *     and PREFIX_memory_events_EVENT_total (the hierarchical memory.events;
 *     the local ones are left out);
 *   - a statistics tree: PREFIX_hier_STAT (gauges) and PREFIX_hier_STAT_total
 *     (counters), the prefix being that of a PREFIX_accuracy_bound sample
 *     when there is one, else what precedes the first "_hier_".
 *
 * Everything a label brings (group names, stat names, the HTTP reason) is
 * printed through put_safe(): control characters, invalid UTF-8 and text
 * direction marks are shown as \xNN escapes, and names are cut to their
 * column, so no byte of the exposition acts on the terminal.
 *
 * This file is the command: its options, the terminal and the refresh
 * loop.  top.h lists the other files: top_source.c reads a source,
 * top_parse.c parses it, top_model.c builds the trees, top_render.c
 * draws them, top_text.c holds texts and the safe output of names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "../tool/args.h"
#include "cli.h"
#include "top.h"

volatile sig_atomic_t quit_asked, resized;

/* --- the command ---------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally top [--once] [--interval S] [--sort usage|name] [--depth N]\n"
		"                 [--timeout S] URL|FILE\n"
		"\n"
		"A running program's memory groups and statistics groups as trees, from\n"
		"its Prometheus (text 0.0.4) or OpenMetrics exposition, refreshed: what\n"
		"systemd-cgtop is for cgroups.  Memory groups show memory.current, peak,\n"
		"min, low, high and max (\"max\": no limit, written +Inf or\n"
		"9223372036854775807) and their non-zero memory.events; statistics groups\n"
		"show their hierarchical values, the stats largest at the root first, as\n"
		"many as the width holds (bytes in K, M, G: powers of 1024).\n"
		"\n"
		"  URL                http://HOST[:PORT][/PATH] (default path /metrics),\n"
		"                     read with one HTTP/1.0 GET: no redirect followed,\n"
		"                     at most 32 MiB; https is not supported\n"
		"  FILE               a textfile the program writes (tally_export_textfile(),\n"
		"                     tally metrics -o), a regular file of at most 32 MiB\n"
		"  --once             print one frame and exit, without terminal controls\n"
		"  --interval S       seconds between refreshes, 0.1 to 86400 (default 2)\n"
		"  --sort usage|name  siblings by usage (memory.current, or the first stat\n"
		"                     shown), largest first, the default; or by name\n"
		"  --depth N          show groups down to depth N (the root is 0; groups\n"
		"                     deeper than 256 levels are counted, never shown)\n"
		"  --timeout S        give up a refresh after S seconds, 0.1 to 3600\n"
		"                     (default 5)\n"
		"  -h, --help         show this help\n"
		"\n"
		"On a terminal the view is redrawn in place until Ctrl-C; otherwise (or\n"
		"with --once) frames are plain text.  Names are shown safely: control\n"
		"characters and invalid UTF-8 as \\xNN, long names cut with '~'.  Width:\n"
		"the terminal's, else $COLUMNS, else 120.  A failed refresh after the first\n"
		"frame is reported in the view, which keeps the last data.\n"
		"\n"
		"Exit status: 0 done (or stopped by Ctrl-C); 1 the source could not be read\n"
		"(missing file, connection refused, timeout, HTTP error, over 32 MiB);\n"
		"2 bad command line (including a URL that cannot be parsed); 3 the source\n"
		"is not a valid exposition (the message gives the line), or a group path\n"
		"or a repeated series it cannot show.\n");
}

static int option(int opt, char *arg, void *ctx)
{
	static const char *const sorts[] = { "usage", "name" };
	struct top_args *a = ctx;
	unsigned long n;
	unsigned int i;

	switch (opt) {
	case 'o':
		a->once = true;
		break;
	case 'i':
		return tool_opt_number(arg, 0.1, 86400, "seconds",
				       &a->interval);
	case 't':
		return tool_opt_number(arg, 0.1, 3600, "seconds", &a->timeout);
	case 's':
		if (tool_opt_choice(arg, sorts, 2, &i))
			return -1;
		a->sort = i ? SORT_NAME : SORT_USAGE;
		break;
	case 'd':
		if (tool_opt_uint(arg, 0, MAX_DEPTH, &n))
			return -1;
		a->depth = (unsigned int)n;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for a bad command line. */
static int parse(struct top_args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "sort", required_argument, NULL, 's' },
		{ "depth", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"top", usage, "", longopts, option, false
	};
	int err, first;

	err = tool_parse_options(&cmd, argc, argv, a, &first);
	if (err)
		return err;
	if (first == argc)
		return tool_usage_error("no URL or FILE given");
	if (first + 1 < argc)
		return tool_usage_error("unexpected argument '%s'",
					argv[first + 1]);
	a->source = argv[first];
	return 0;
}

static void on_quit(int sig)
{
	(void)sig;
	quit_asked = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static size_t frame_width(bool tty, size_t *rows)
{
	struct winsize ws;
	const char *c = getenv("COLUMNS");
	char *end;
	unsigned long n;

	*rows = 0;
	if (tty && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col) {
		*rows = ws.ws_row;
		return ws.ws_col;
	}
	if (c && is_digit(c[0])) {
		n = strtoul(c, &end, 10);
		if (!*end && n >= 20 && n <= 10000)
			return n;
	}
	return DEFAULT_WIDTH;
}

/* One refresh: the source's exposition into @m; 0 or a status. */
static int refresh(const struct source *src, const struct top_args *a,
		   struct text *t, struct exposition *x, struct model *m,
		   char *err)
{
	bool openmetrics = false;
	int st;

	st = src->http ? load_http(src, a->timeout, t, &openmetrics, err)
		       : load_file(src, t, err);
	if (!st)
		st = parse_exposition(t, openmetrics, x, src->arg, err);
	if (!st)
		st = build_model(x, m, src->arg, err);
	return st;
}

static int write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The frame's first line, then the frame, cut to @rows (0: no cut). */
static int show(const struct source *src, const struct top_args *a,
		const struct model *m, const char *failure, bool tty,
		bool live)
{
	struct text out = { 0 }, line = { 0 };
	size_t rows, width = frame_width(tty, &rows), n;
	char stamp[64] = "";
	int err;

	if (tty)
		text_str(&out, "\033[H\033[2J");
	text_str(&line, "tally top: ");
	put_safe(&line, src->arg, strlen(src->arg), 200);
	if (live) {
		time_t now = time(NULL);
		struct tm tm;

		if (localtime_r(&now, &tm))
			strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
		text_str(&line, "  ");
		text_str(&line, stamp);
		snprintf(stamp, sizeof(stamp), "  every %gs%s", a->interval,
			 tty ? ", Ctrl-C quits" : "");
		text_str(&line, stamp);
	}
	n = line.p ? fit_columns(line.p, line.len, width) : 0;
	text_mem(&out, line.p, n);
	text_str(&out, "\n");
	if (failure) {
		line.len = 0;
		text_str(&line, "refresh failed: ");
		text_str(&line, failure);
		text_str(&line, " (showing the last data)");
		n = fit_columns(line.p, line.len, width);
		text_mem(&out, line.p, n);
		text_str(&out, "\n");
	}
	text_free(&line);
	render_model(m, a, width, &out);
	if (tty && rows > 1) {
		/* No scrolling: the frame stops at the terminal's bottom. */
		const char *p = out.p;

		for (size_t r = 0; p && r < rows - 1; r++) {
			p = memchr(p, '\n', out.len - (size_t)(p - out.p));
			if (p)
				p++;
		}
		if (p && (size_t)(p - out.p) < out.len)
			out.len = (size_t)(p - out.p) - 1;
	} else if (live) {
		text_str(&out, "\n");
	}
	err = out.failed ? -ENOMEM : write_all(out.p, out.len);
	text_free(&out);
	return err;
}

/* Sleep @s seconds, or until a quit signal. */
static void pause_for(double s)
{
	double deadline = now_s() + s;

	while (!quit_asked && !resized) {
		double left = deadline - now_s();
		struct timespec ts;

		if (left <= 0)
			break;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

int tally_cmd_top(int argc, char **argv)
{
	struct top_args a = {
		.interval = 2, .timeout = 5, .depth = MAX_DEPTH,
	};
	struct source src = { 0 };
	struct text t = { 0 }, last = { 0 };
	struct exposition x = { 0 };
	struct model m = { 0 }, shown = { 0 };
	char err[MAX_ERROR];
	bool tty;
	int st = parse(&a, argc, argv);

	if (st)
		return st > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	src.arg = a.source;
	/* Non-ASCII reaches the terminal only when it speaks UTF-8. */
	setlocale(LC_CTYPE, "");
	utf8_terminal = !strcmp(nl_langinfo(CODESET), "UTF-8");
	if (looks_like_url(a.source) || !strncasecmp(a.source, "http:", 5)) {
		const char *why = strlen(a.source) > MAX_URL + 300
					  ? "URL too long"
					  : parse_url(a.source, &src.url);

		if (why) {
			errorf(err, a.source, strlen(a.source), "%s", why);
			fprintf(stderr, "tally: top: %s\n", err);
			return CLI_EXIT_USAGE;
		}
		src.http = true;
	}
	tty = !a.once && isatty(STDOUT_FILENO);
	if (!a.once) {
		struct sigaction sa = { .sa_handler = on_quit };

		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sa.sa_handler = on_winch;
		sigaction(SIGWINCH, &sa, NULL);
	}
	st = refresh(&src, &a, &t, &x, &shown, err);
	if (st && quit_asked) {
		st = CLI_EXIT_OK;	/* stopped while reading */
		goto out;
	}
	if (st) {
		fprintf(stderr, "tally: top: %s\n", err);
		goto out;
	}
	/* The model points into the text it was built from: keep both. */
	last = t;
	t = (struct text){ 0 };
	for (bool failed = false;;) {
		int w = show(&src, &a, &shown, failed ? err : NULL, tty,
			     !a.once);

		if (w) {
			if (!quit_asked)
				fprintf(stderr, "tally: top: standard output:"
					" %s\n", strerror(-w));
			st = quit_asked ? CLI_EXIT_OK : CLI_EXIT_FAILED;
			break;
		}
		if (a.once)
			break;
		pause_for(a.interval);
		if (quit_asked)
			break;
		if (resized) {
			resized = 0;
			continue;
		}
		failed = refresh(&src, &a, &t, &x, &m, err) != 0;
		if (quit_asked)
			break;
		if (!failed) {
			model_free(&shown);
			shown = m;
			m = (struct model){ 0 };
			text_free(&last);
			last = t;
			t = (struct text){ 0 };
		}
	}
out:
	model_free(&shown);
	text_free(&t);
	text_free(&last);
	free(x.s);
	free(x.b);
	return st;
}
