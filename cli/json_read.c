// SPDX-License-Identifier: MIT
/*
 * json_read.c - a recursive-descent JSON reader (json_read.h).
 *
 * One pass over the text, one allocation per string and per container
 * (containers grow by doubling).  Depth is bounded, so hostile nesting
 * cannot exhaust the stack; every error names the byte offset.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

struct parser {
	const char *start;
	const char *p;
	size_t len;
	char *err;
	size_t errlen;
	bool failed;
};

__attribute__((format(printf, 2, 3)))
static int fail(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->failed)
		return -1;
	ps->failed = true;
	n = snprintf(ps->err, ps->errlen, "at byte %zu: ",
		     (size_t)(ps->p - ps->start));
	/* The text is NUL-terminated: a NUL before its end stops it. */
	if (!*ps->p && (size_t)(ps->p - ps->start) < ps->len) {
		if (n >= 0 && (size_t)n < ps->errlen)
			snprintf(ps->err + n, ps->errlen - (size_t)n,
				 "a NUL byte");
		return -1;
	}
	if (n >= 0 && (size_t)n < ps->errlen) {
		va_start(ap, fmt);
		vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static void skip_space(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
	       *ps->p == '\r')
		ps->p++;
}

static int parse_value(struct parser *ps, struct json_value *v,
		       unsigned int depth);

static int hex4(struct parser *ps, unsigned int *out)
{
	unsigned int v = 0;

	for (int i = 0; i < 4; i++) {
		char c = ps->p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned int)(c - 'A' + 10);
		else
			return fail(ps, "bad \\u escape");
	}
	ps->p += 4;
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned int cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * The length of the UTF-8 character at @p (RFC 3629: no overlong form, no
 * surrogate, nothing past U+10FFFF), or 0 when it is not one.
 */
static size_t utf8_char(const unsigned char *p)
{
	unsigned int cp;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
		return 0;
	return n;
}

/* A string starting at the opening quote; *out is malloc'ed. */
static int parse_string(struct parser *ps, char **out)
{
	const char *end = ps->p + 1;
	char *s, *o;

	/* The decoded string is never longer than the text. */
	while (*end && *end != '"')
		end += *end == '\\' && end[1] ? 2 : 1;
	if (!*end) {
		ps->p = end;
		return fail(ps, "unterminated string");
	}
	s = o = malloc((size_t)(end - ps->p));
	if (!s)
		return fail(ps, "out of memory");
	ps->p++;
	while (*ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;
		unsigned int cp, lo;

		if (c < 0x20) {
			free(s);
			return fail(ps, "control character in string");
		}
		if (c != '\\') {
			size_t n = utf8_char((const unsigned char *)ps->p);

			if (!n) {
				free(s);
				return fail(ps, "not UTF-8");
			}
			memcpy(o, ps->p, n);
			o += n;
			ps->p += n;
			continue;
		}
		ps->p++;
		switch (*ps->p++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (hex4(ps, &cp))
				goto bad;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (ps->p[0] != '\\' || ps->p[1] != 'u')
					goto lone;
				ps->p += 2;
				if (hex4(ps, &lo))
					goto bad;
				if (lo < 0xdc00 || lo >= 0xe000)
					goto lone;
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				goto lone;
			}
			o += put_utf8(o, cp);
			break;
		default:
			ps->p--;
			free(s);
			return fail(ps, "bad escape");
		}
	}
	ps->p++;
	*o = '\0';
	*out = s;
	return 0;
lone:
	fail(ps, "unpaired surrogate in \\u escape");
bad:
	free(s);
	return -1;
}

static int parse_number(struct parser *ps, struct json_value *v)
{
	const char *q = ps->p;
	char *end;

	/* The JSON grammar, which strtod alone would widen (hex, inf). */
	if (*q == '-')
		q++;
	if (*q == '0')
		q++;
	else if (*q >= '1' && *q <= '9')
		while (*q >= '0' && *q <= '9')
			q++;
	else
		return fail(ps, "bad number");
	if (*q == '.') {
		if (*++q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (*q >= '0' && *q <= '9')
			q++;
	}
	if (*q == 'e' || *q == 'E') {
		q++;
		if (*q == '+' || *q == '-')
			q++;
		if (*q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (*q >= '0' && *q <= '9')
			q++;
	}
	errno = 0;
	v->number = strtod(ps->p, &end);
	if (end != q)
		return fail(ps, "bad number");
	if (!isfinite(v->number))
		return fail(ps, "number out of range");
	v->type = JSON_NUMBER;
	ps->p = q;
	return 0;
}

/* Make room for one more element in @v. */
static int grow(struct parser *ps, struct json_value *v, size_t *cap,
		bool with_keys)
{
	struct json_value *items;
	char **keys;
	size_t ncap;

	if (v->n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 4;
	items = realloc(v->items, ncap * sizeof(*items));
	if (!items)
		return fail(ps, "out of memory");
	v->items = items;
	if (with_keys) {
		keys = realloc(v->keys, ncap * sizeof(*keys));
		if (!keys)
			return fail(ps, "out of memory");
		v->keys = keys;
	}
	*cap = ncap;
	return 0;
}

static int parse_container(struct parser *ps, struct json_value *v,
			   unsigned int depth)
{
	bool object = *ps->p == '{';
	char close = object ? '}' : ']';
	size_t cap = 0;

	if (depth >= JSON_READ_DEPTH)
		return fail(ps, "nested deeper than %d", JSON_READ_DEPTH);
	v->type = object ? JSON_OBJECT : JSON_ARRAY;
	ps->p++;
	skip_space(ps);
	if (*ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		if (grow(ps, v, &cap, object))
			return -1;
		if (object) {
			skip_space(ps);
			if (*ps->p != '"')
				return fail(ps, "expected a member name");
			if (parse_string(ps, &v->keys[v->n]))
				return -1;
			skip_space(ps);
			if (*ps->p != ':') {
				free(v->keys[v->n]);
				return fail(ps, "expected ':'");
			}
			ps->p++;
		}
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		v->n++;	/* counted now, so that json_free() frees it */
		if (parse_value(ps, &v->items[v->n - 1], depth + 1))
			return -1;
		skip_space(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			return 0;
		}
		return fail(ps, "expected ',' or '%c'", close);
	}
}

static int parse_word(struct parser *ps, const char *word)
{
	size_t len = strlen(word);

	if (strncmp(ps->p, word, len))
		return fail(ps, "unexpected character");
	ps->p += len;
	return 0;
}

static int parse_value(struct parser *ps, struct json_value *v,
		       unsigned int depth)
{
	skip_space(ps);
	switch (*ps->p) {
	case '{':
	case '[':
		return parse_container(ps, v, depth);
	case '"':
		v->type = JSON_STRING;
		return parse_string(ps, &v->string);
	case 't':
		v->type = JSON_BOOL;
		v->boolean = true;
		return parse_word(ps, "true");
	case 'f':
		v->type = JSON_BOOL;
		return parse_word(ps, "false");
	case 'n':
		v->type = JSON_NULL;
		return parse_word(ps, "null");
	case '\0':
		return fail(ps, "unexpected end of input");
	case '-':
	case '0' ... '9':
		return parse_number(ps, v);
	default:
		return fail(ps, "unexpected character");
	}
}

static void free_members(struct json_value *v)
{
	for (size_t i = 0; i < v->n; i++) {
		if (v->keys)
			free(v->keys[i]);
		free_members(&v->items[i]);
	}
	free(v->keys);
	free(v->items);
	free(v->string);
}

void json_free(struct json_value *v)
{
	if (!v)
		return;
	free_members(v);
	free(v);
}

int json_parse(const char *text, size_t len, struct json_value **out,
	       char *err, size_t errlen)
{
	struct parser ps = { text, text, len, err, errlen, false };
	struct json_value *v = calloc(1, sizeof(*v));

	if (!v)
		return snprintf(err, errlen, "out of memory"), -1;
	if (!parse_value(&ps, v, 0)) {
		skip_space(&ps);
		if ((size_t)(ps.p - text) == len) {
			*out = v;
			return 0;
		}
		fail(&ps, "text after the document");
	}
	json_free(v);
	return -1;
}

const struct json_value *json_get(const struct json_value *v,
				  const char *key)
{
	if (!v || v->type != JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->keys[i], key))
			return &v->items[i];
	return NULL;
}
