// SPDX-License-Identifier: MIT
/*
 * json.c - the streaming JSON writer (json.h).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "json.h"

int bench_json_open(struct bench_json *w, const char *path)
{
	memset(w, 0, sizeof(*w));
	if (!path)
		return 0;
	if (!strcmp(path, "-")) {
		w->f = stdout;
		return 0;
	}
	w->f = fopen(path, "w");
	if (!w->f) {
		fprintf(stderr, "tally: cannot create %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	w->owns = true;
	return 0;
}

int bench_json_close(struct bench_json *w)
{
	int err;

	if (!w->f)
		return 0;
	while (w->depth)
		bench_json_end(w);
	fputc('\n', w->f);
	err = ferror(w->f);
	if (w->owns)
		err |= fclose(w->f);
	else
		err |= fflush(w->f);
	w->f = NULL;
	if (err) {
		fprintf(stderr, "tally: writing the JSON output failed\n");
		return -1;
	}
	return 0;
}

static void json_escaped(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_indent(FILE *f, unsigned int depth)
{
	fputc('\n', f);
	for (unsigned int i = 0; i < depth; i++)
		fputs("  ", f);
}

/* Separator, layout and key before a member of the innermost container. */
static void json_member(struct bench_json *w, const char *key)
{
	unsigned int top = w->depth - 1;

	if (!w->depth)
		return;
	if (w->count[top]++)
		fputc(',', w->f);
	if (!w->oneline[top])
		json_indent(w->f, w->depth);
	else if (w->count[top] > 1)
		fputc(' ', w->f);
	if (key) {
		json_escaped(w->f, key);
		fputs(": ", w->f);
	}
}

void bench_json_begin(struct bench_json *w, const char *key, char kind,
		      bool oneline)
{
	if (!w->f || w->depth == BENCH_JSON_DEPTH)
		return;
	json_member(w, key);
	fputc(kind, w->f);
	w->oneline[w->depth] = oneline ||
			       (w->depth && w->oneline[w->depth - 1]);
	w->close[w->depth] = kind == '{' ? '}' : ']';
	w->count[w->depth] = 0;
	w->depth++;
}

void bench_json_end(struct bench_json *w)
{
	if (!w->f || !w->depth)
		return;
	w->depth--;
	if (!w->oneline[w->depth] && w->count[w->depth])
		json_indent(w->f, w->depth);
	fputc(w->close[w->depth], w->f);
}

void bench_json_string(struct bench_json *w, const char *key, const char *v)
{
	if (!w->f)
		return;
	json_member(w, key);
	json_escaped(w->f, v);
}

void bench_json_int(struct bench_json *w, const char *key, long long v)
{
	if (!w->f)
		return;
	json_member(w, key);
	fprintf(w->f, "%lld", v);
}

void bench_json_double(struct bench_json *w, const char *key, double v)
{
	if (!w->f)
		return;
	json_member(w, key);
	if (!isfinite(v))
		fputs("null", w->f);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(w->f, "%.0f", v);
	else
		fprintf(w->f, "%.6g", v);
}

void bench_json_bool(struct bench_json *w, const char *key, bool v)
{
	if (!w->f)
		return;
	json_member(w, key);
	fputs(v ? "true" : "false", w->f);
}
