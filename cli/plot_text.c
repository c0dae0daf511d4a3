// SPDX-License-Identifier: MIT
/*
 * plot_text.c - the texts of a benchmark's JSON made safe for where they
 * go: data fields of NAME.dat (line_text(), data_text()), labels, file
 * names in [A-Za-z0-9._-] (name_part()), gnuplot's single-quoted strings
 * of this tool's own text (gp_quoted()); the JSON file read whole
 * (read_file()) and its values compared (same_value(), same_split()); the
 * words of the JSON as a reader names them (human_label()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"
#include "plot_internal.h"

/*
 * The words of the JSON (keys and values) as a reader names them; a value
 * not listed here is shown as it is (a design's or method's name).
 */
static const char *const human[][2] = {
	{ "lt_100us", "< 100 µs" },
	{ "100us_1ms", "100 µs - 1 ms" },
	{ "1_10ms", "1 - 10 ms" },
	{ "10_100ms", "10 - 100 ms" },
	{ "ge_100ms", "≥ 100 ms" },
	{ "p50_us", "p50 (median)" },
	{ "p99_us", "p99" },
	{ "p999_us", "p99.9" },
	{ "max_error", "largest error" },
	{ "bound", "documented bound" },
	{ "us_median", "median" },
	{ "approximate_sum", "approximate sum" },
	{ "precise_sum", "precise sum" },
	{ "two_pass", "two-pass" },
	{ "precise", "precise scan" },
	{ "far", "chain far below max" },
	{ "95", "chain at 95% of max" },
	{ "prometheus", "Prometheus text" },
	{ "openmetrics", "OpenMetrics text" },
	{ "updates_then_prometheus", "updates, then Prometheus text" },
	{ "updates", "updates alone" },
	{ "per_group_reads", "forced read of every group" },
	{ "textfile", "textfile write" },
	{ "kernel", "kernel memcg" },
	{ "clickhouse", "ClickHouse MemoryTracker" },
	{ "page_counter", "bare page counter" },
};

const char *human_label(const char *raw)
{
	for (size_t i = 0; i < sizeof(human) / sizeof(human[0]); i++)
		if (!strcmp(human[i][0], raw))
			return human[i][1];
	return raw;
}

/* The whole file, NUL-terminated; *len its length.  NULL: errno says. */
char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n;

	*len = 0;
	if (!f)
		return NULL;
	do {
		if (*len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			if (cap > MAX_FILE ||
			    !(nb = realloc(buf, cap))) {
				free(buf);
				fclose(f);
				errno = EFBIG;
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + *len, 1, cap - *len - 1, f);
		*len += n;
	} while (n);
	if (ferror(f)) {
		int err = errno;

		free(buf);
		fclose(f);
		errno = err ? err : EIO;
		return NULL;
	}
	fclose(f);
	buf[*len] = '\0';
	return buf;
}

/* Length of the UTF-8 character starting with byte @c (1 if not a lead). */
static size_t utf8_len(unsigned char c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/*
 * @in as one line of text of at most @len - 1 bytes, cut between UTF-8
 * characters (the JSON reader accepts valid UTF-8 only): control
 * characters (a newline would end the line) become spaces.  For a field
 * of a data file ("...", @data), where '"' would end the field and
 * gnuplot treats '\\' inconsistently, those become ' and /.
 */
void line_text(char *out, size_t len, const char *in, bool data)
{
	size_t o = 0;

	while (*in) {
		unsigned char c = (unsigned char)*in;
		size_t n = utf8_len(c);

		if (o + n >= len)
			break;
		if (data && c == '"') {
			out[o++] = '\'';
		} else if (data && c == '\\') {
			out[o++] = '/';
		} else if (c < 0x20 || c == 0x7f) {
			out[o++] = ' ';
		} else {
			memcpy(out + o, in, n);
			o += n;
			in += n;
			continue;
		}
		in++;
	}
	out[o] = '\0';
}

void data_text(char *out, size_t len, const char *in)
{
	line_text(out, len, in, true);
}

/* A JSON scalar as a reader names it, made data text. */
void value_label(const struct json_value *v, char *out, size_t len)
{
	char num[32];
	const char *s = "?";

	if (v && v->type == JSON_NUMBER) {
		snprintf(num, sizeof(num), "%g", v->number);
		s = num;
	} else if (v && v->type == JSON_STRING) {
		s = human_label(v->string);
	} else if (v && v->type == JSON_BOOL) {
		s = v->boolean ? "true" : "false";
	}
	data_text(out, len, s);
}

/* @s made safe as part of a file name: [A-Za-z0-9._-], '_' for others. */
static void file_part(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
			*s = '_';
}

/*
 * A split value as part of a file name, which the script names: a number
 * as this file prints it, a string this file knows (human[]) in this
 * file's own spelling, any other string as a hash of it ("h" and 8 hex
 * digits), so that no byte of the JSON is copied into a name.
 */
void name_part(const struct json_value *v, char *out, size_t len)
{
	if (v && v->type == JSON_NUMBER) {
		snprintf(out, len, "%g", v->number);
	} else if (v && v->type == JSON_STRING) {
		uint32_t h = 2166136261u;	/* FNV-1a */
		size_t i;

		for (i = 0; i < sizeof(human) / sizeof(human[0]); i++)
			if (!strcmp(human[i][0], v->string))
				break;
		if (i < sizeof(human) / sizeof(human[0])) {
			snprintf(out, len, "%s", human[i][0]);
		} else {
			for (const char *c = v->string; *c; c++)
				h = (h ^ (unsigned char)*c) * 16777619u;
			snprintf(out, len, "h%08x", (unsigned int)h);
		}
	} else {
		snprintf(out, len, "none");
	}
	file_part(out);
}

/* Is @s a name file_part() could have made (and not "." or "..")? */
bool is_file_part(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' ||
		      *s == '_'))
			return false;
	return true;
}

/*
 * @s as a single-quoted gnuplot string: inside single quotes gnuplot
 * expands nothing (no backquote, no escape, no macro), and a quote is
 * written twice.  Used for the tool's own text and file names only.
 */
void gp_quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('\'', f);
}

bool is_number(const struct json_value *v)
{
	return v && v->type == JSON_NUMBER;
}


/* Equal JSON scalars (the raw values: labels may be cut or replaced). */
bool same_value(const struct json_value *a, const struct json_value *b)
{
	if (!a || !b)
		return a == b;
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_NUMBER:
		return a->number == b->number;
	case JSON_STRING:
		return !strcmp(a->string, b->string);
	case JSON_BOOL:
		return a->boolean == b->boolean;
	case JSON_NULL:
		return true;
	default:
		return a == b;
	}
}

/* Do rows @a and @b have the same values of the split keys? */
bool same_split(const struct plot_spec *s, const struct json_value *a,
		const struct json_value *b)
{
	for (int k = 0; k < MAX_SPLIT && s->split[k].key; k++)
		if (!same_value(json_get(a, s->split[k].key),
				json_get(b, s->split[k].key)))
			return false;
	return true;
}
