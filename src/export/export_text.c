// SPDX-License-Identifier: MIT
/*
 * export_text.c - the exposition's text rules: label and HELP escaping
 * (valid UTF-8 out of any bytes, reversibly) and metric name checks.
 *
 * Owns nothing, no lock, no state: pure functions over their arguments.
 */
#define _GNU_SOURCE
#include "export_internal.h"


/*
 * Length of the valid UTF-8 sequence at @s (@n bytes left), 0 when the
 * byte starts none: RFC 3629, no overlong form, no surrogate, at most
 * U+10FFFF, the whole sequence within @n.
 */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	unsigned int cp, min;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

#define REPLACEMENT "\xef\xbf\xbd"	/* U+FFFD */

/*
 * @s escaped: backslash and newline always, the double quote when @quote
 * (label values, OpenMetrics HELP).  Invalid UTF-8 bytes become U+FFFD
 * and the byte's two hex digits, a U+FFFD of @s becomes U+FFFD and '~':
 * the text decodes back to @s, so distinct names never give one label.
 */
void export_buf_escaped(struct buf *b, const char *s, size_t n, bool quote)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t run = i, len;

		/* Bytes that pass as they are, copied in one go. */
		while (run < n && u[run] >= 0x20 && u[run] < 0x80 &&
		       u[run] != '\\' && !(quote && u[run] == '"'))
			run++;
		buf_mem(b, s + i, run - i);
		i = run;
		if (i == n)
			break;
		if (u[i] == '\\') {
			buf_mem(b, "\\\\", 2);
			i++;
		} else if (u[i] == '\n') {
			buf_mem(b, "\\n", 2);
			i++;
		} else if (u[i] == '"') {
			buf_mem(b, "\\\"", 2);
			i++;
		} else if ((len = utf8_valid(u + i, n - i)) == 3 &&
			   !memcmp(s + i, REPLACEMENT, 3)) {
			buf_mem(b, REPLACEMENT "~", 4);
			i += 3;
		} else if (len > 0) {
			buf_mem(b, s + i, len);
			i += len;
		} else {
			char esc[5] = REPLACEMENT;

			esc[3] = hex[u[i] >> 4];
			esc[4] = hex[u[i] & 15];
			buf_mem(b, esc, 5);
			i++;
		}
	}
}


bool export_is_name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

/* [a-zA-Z_][a-zA-Z0-9_]*, not "__..." (reserved by Prometheus). */
bool export_valid_identifier(const char *s, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, max + 1);
	if (n == 0 || n > max || (s[0] == '_' && s[1] == '_'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!export_is_name_char(s[i], i == 0))
			return false;
	return true;
}

bool export_valid_unit(const char *u)
{
	if (!u)
		return false;
	for (const char *p = u; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return false;
	return strlen(u) <= TALLY_EXPORT_PREFIX_MAX;
}

bool export_ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}
