// SPDX-License-Identifier: MIT
/*
 * fuzz_json.c - `tally plot`'s JSON reader (cli/json_read.c) on any
 * bytes.  Properties: a refusal has a message "at byte N: ..." with N
 * within the input; a document accepted is a tree no deeper than
 * JSON_READ_DEPTH whose strings are valid UTF-8 (RFC 3629) and numbers
 * finite, and writing it back as JSON and reading that gives the same
 * tree (json_get() finding each object's first member of a name).
 */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "json_read.h"

/* Valid UTF-8: no overlong form, no surrogate, nothing past U+10FFFF. */
static bool valid_utf8(const unsigned char *s)
{
	while (*s) {
		unsigned int cp, n;

		if (*s < 0x80) {
			s++;
			continue;
		}
		n = *s >= 0xf0 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc0 ? 2 : 0;
		if (!n || *s > 0xf4)
			return false;
		cp = *s & (0x7f >> n);
		for (unsigned int i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
		    (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp < 0xe000) ||
		    cp > 0x10ffff)
			return false;
		s += n;
	}
	return true;
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void write_json(FILE *f, const struct json_value *v)
{
	switch (v->type) {
	case JSON_NULL: fputs("null", f); break;
	case JSON_BOOL: fputs(v->boolean ? "true" : "false", f); break;
	case JSON_NUMBER: fprintf(f, "%.17g", v->number); break;
	case JSON_STRING: put_string(f, v->string); break;
	case JSON_ARRAY:
	case JSON_OBJECT:
		fputc(v->type == JSON_ARRAY ? '[' : '{', f);
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				fputc(',', f);
			if (v->type == JSON_OBJECT) {
				put_string(f, v->keys[i]);
				fputc(':', f);
			}
			write_json(f, &v->items[i]);
		}
		fputc(v->type == JSON_ARRAY ? ']' : '}', f);
		break;
	}
}

static unsigned int check_tree(const struct json_value *v)
{
	unsigned int depth = 0;

	switch (v->type) {
	case JSON_NUMBER:
		CHECK(isfinite(v->number));
		return 0;
	case JSON_STRING:
		CHECK(valid_utf8((const unsigned char *)v->string));
		return 0;
	case JSON_ARRAY:
	case JSON_OBJECT:
		for (size_t i = 0; i < v->n; i++) {
			unsigned int d = check_tree(&v->items[i]);

			if (v->type == JSON_OBJECT) {
				CHECK(valid_utf8((const unsigned char *)
						 v->keys[i]));
				/* The first member of the name. */
				CHECK(json_get(v, v->keys[i]) <= &v->items[i]);
			}
			if (d + 1 > depth)
				depth = d + 1;
		}
		return depth;
	default:
		return 0;
	}
}

static bool same(const struct json_value *a, const struct json_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_BOOL: return a->boolean == b->boolean;
	case JSON_NUMBER: return a->number == b->number;
	case JSON_STRING: return !strcmp(a->string, b->string);
	case JSON_ARRAY:
	case JSON_OBJECT:
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if ((a->type == JSON_OBJECT &&
			     strcmp(a->keys[i], b->keys[i])) ||
			    !same(&a->items[i], &b->items[i]))
				return false;
		return true;
	default:
		return true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[256], *again = NULL;
	struct json_value *v = NULL, *w = NULL;
	size_t again_len = 0, at;
	FILE *f;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (json_parse(text, size, &v, err, sizeof(err))) {
		CHECK(sscanf(err, "at byte %zu: ", &at) == 1 && at <= size);
		free(text);
		return 0;
	}
	CHECK(check_tree(v) <= JSON_READ_DEPTH);
	f = open_memstream(&again, &again_len);
	CHECK(f);
	write_json(f, v);
	CHECK(!fclose(f));
	CHECK(!json_parse(again, again_len, &w, err, sizeof(err)));
	CHECK(same(v, w));
	json_free(v);
	json_free(w);
	free(again);
	free(text);
	return 0;
}
