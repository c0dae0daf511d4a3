// SPDX-License-Identifier: MIT
/*
 * top_text.c - `tally top`'s growing texts, and the safe output of what an
 * exposition brings: control characters, invalid UTF-8 and text direction
 * marks as \xNN escapes, names cut to their column (put_safe()), messages
 * that quote them (errorf()).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "top.h"

bool text_reserve(struct text *t, size_t n)
{
	size_t cap = t->cap ? t->cap : 1024;
	char *p;

	if (t->failed)
		return false;
	if (n < t->cap - t->len)
		return true;
	while (cap - t->len <= n) {
		if (cap > SIZE_MAX / 2) {
			t->failed = true;
			return false;
		}
		cap *= 2;
	}
	p = realloc(t->p, cap);
	if (!p) {
		t->failed = true;
		return false;
	}
	t->p = p;
	t->cap = cap;
	return true;
}

/* Append @n bytes; the text stays NUL-terminated. */
void text_mem(struct text *t, const void *s, size_t n)
{
	if (!text_reserve(t, n))
		return;
	if (n)
		memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void text_str(struct text *t, const char *s)
{
	text_mem(t, s, strlen(s));
}

void text_chars(struct text *t, char c, size_t n)
{
	if (!text_reserve(t, n))
		return;
	memset(t->p + t->len, c, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void text_free(struct text *t)
{
	free(t->p);
	*t = (struct text){ 0 };
}

/* --- safe output ---------------------------------------------------------- */

bool utf8_terminal;	/* the locale's character set is UTF-8 */

/*
 * The code point of the valid UTF-8 sequence at @s (@n bytes left) and
 * its length in *@len; -1 when the byte starts no valid sequence (RFC
 * 3629: no overlong form, no surrogate, nothing above U+10FFFF).
 */
static long utf8_decode(const unsigned char *s, size_t n, size_t *len)
{
	static const unsigned int min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	unsigned long cp;
	size_t k;

	if (s[0] < 0x80) {
		*len = 1;
		return s[0];
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4;
	else
		return -1;
	if (n < k)
		return -1;
	cp = s[0] & (0x7f >> k);
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = k;
	return (long)cp;
}

/*
 * Code points a terminal must not get from a label: C0 and C1 controls,
 * DEL, the line and paragraph separators, the marks and embeddings that
 * change the direction of the text after them, the byte order mark.
 */
static bool unsafe_code_point(long cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) ||
	       cp == 0x200e || cp == 0x200f || cp == 0x2028 ||
	       cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

/*
 * The unit of safe text at @s: *@bytes of input shown as @out (*@out_len
 * bytes, *@cols columns).  Printable ASCII is itself, a backslash "\\",
 * printable UTF-8 itself on a UTF-8 terminal; any other byte "\xNN".
 */
static void safe_unit(const char *s, size_t n, size_t *bytes, char *out,
		      size_t *out_len, size_t *cols)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t len = 0;
	long cp = utf8_decode(u, n, &len);
	int w = -1;

	if (cp == '\\') {
		memcpy(out, "\\\\", 2);
		*bytes = 1;
		*out_len = *cols = 2;
		return;
	}
	if (cp >= 0 && !unsafe_code_point(cp) && (cp < 0x80 || utf8_terminal))
		w = cp < 0x80 ? 1 : wcwidth((wchar_t)cp);
	if (w >= 0) {
		memcpy(out, s, len);
		*bytes = *out_len = len;
		*cols = (size_t)w;
		return;
	}
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[u[0] >> 4];
	out[3] = hex[u[0] & 15];
	*bytes = 1;
	*out_len = *cols = 4;
}

/*
 * Append @s (@n bytes of any content) to @t as safe text of at most
 * @max columns (@max >= 1): cut with a final '~' when it is wider.
 * Zero-width characters count as columns of their own for the cut, so
 * the output is at most 4 x @max bytes.  Returns the columns used.
 */
size_t put_safe(struct text *t, const char *s, size_t n, size_t max)
{
	size_t i = 0, cols = 0, bytes, len, w, total = 0;
	char unit[4];

	/* Whether it fits: measured up to the first unit past @max. */
	for (size_t k = 0; k < n && total <= max; k += bytes) {
		safe_unit(s + k, n - k, &bytes, unit, &len, &w);
		total += w ? w : 1;
	}
	while (i < n) {
		safe_unit(s + i, n - i, &bytes, unit, &len, &w);
		if (total > max && cols + (w ? w : 1) > max - 1)
			break;
		text_mem(t, unit, len);
		cols += w;
		i += bytes;
		if (!w)
			max--;	/* a zero-width unit still takes a place */
	}
	if (i < n) {
		text_mem(t, "~", 1);
		cols++;
	}
	return cols;
}

/*
 * The bytes of @s (safe text) that fit in @max columns: cut at a
 * character boundary.
 */
size_t fit_columns(const char *s, size_t n, size_t max)
{
	size_t i = 0, cols = 0, len;

	while (i < n) {
		long cp = utf8_decode((const unsigned char *)s + i, n - i,
				      &len);
		int w = cp < 0x80 ? 1 : wcwidth((wchar_t)cp);

		if (cp < 0 || w < 0)
			w = 1;
		if (cp < 0)
			len = 1;
		if (cols + (size_t)w > max)
			break;
		cols += (size_t)w;
		i += len;
	}
	return i;
}

void errorf(char *err, const char *what, size_t what_len,
		   const char *fmt, ...)
{
	struct text t = { 0 };
	char tail[MAX_ERROR];
	va_list ap;

	if (what) {
		put_safe(&t, what, what_len, 120);
		text_str(&t, ": ");
	}
	va_start(ap, fmt);
	vsnprintf(tail, sizeof(tail), fmt, ap);
	va_end(ap);
	text_str(&t, tail);
	snprintf(err, MAX_ERROR, "%s", t.failed || !t.p ? tail : t.p);
	text_free(&t);
}
