// SPDX-License-Identifier: MIT
/*
 * top_parse.c - `tally top`'s exposition parser: every line of the
 * Prometheus text (0.0.4) or OpenMetrics exposition checked strictly, the
 * samples that carry a group="PATH" label and the accuracy bounds kept
 * (parse_exposition()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "top.h"

void *grow_array(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 1;

	if (need <= *cap)
		return p;
	while (n < need) {
		if (n > SIZE_MAX / 2 / size)
			return NULL;
		n *= 2;
	}
	p = realloc(p, n * size);
	if (p)
		*cap = n;
	return p;
}

static bool is_name_start(int c)
{
	return is_alpha(c) || c == '_' || c == ':';
}

static bool is_name_char(int c)
{
	return is_name_start(c) || is_digit(c);
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/*
 * A value or timestamp at @p: Prometheus's float syntax ([+-] digits,
 * fraction, exponent; Inf, NaN).  Returns its end, or NULL.
 */
static const char *parse_number(const char *p, const char *end, double *v)
{
	char tmp[64], *e;
	const char *q = p;
	size_t n;

	while (q < end && *q != ' ' && *q != '\t')
		q++;
	n = (size_t)(q - p);
	if (n == 0 || n >= sizeof(tmp))
		return NULL;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "Inf") ||
	    !strcmp(tmp, "+inf") || !strcmp(tmp, "inf")) {
		*v = INFINITY;
		return q;
	}
	if (!strcmp(tmp, "-Inf") || !strcmp(tmp, "-inf")) {
		*v = -INFINITY;
		return q;
	}
	if (!strcmp(tmp, "NaN")) {
		*v = NAN;
		return q;
	}
	for (size_t i = 0; i < n; i++)
		if (!is_digit(tmp[i]) && !strchr("+-.eE", tmp[i]))
			return NULL;
	errno = 0;
	*v = strtod(tmp, &e);
	if (e != tmp + n || (errno == ERANGE && fabs(*v) == HUGE_VAL))
		return NULL;
	return q;
}

/*
 * Parse the labels from @p (after '{') to their '}', unescaping the
 * group label's value in place.  Returns the end (after '}') or NULL with
 * *@why set.
 */
static char *parse_labels(char *p, const char *end, struct sample *s,
			  const char **why)
{
	for (;;) {
		const char *name;
		size_t nlen;
		char *out;
		bool group;

		p = (char *)skip_blanks(p, end);
		if (p < end && *p == '}')
			return p + 1;
		name = p;
		if (p == end || !(is_alpha(*p) || *p == '_')) {
			*why = "bad label name";
			return NULL;
		}
		while (p < end && (is_alpha(*p) || is_digit(*p) || *p == '_'))
			p++;
		nlen = (size_t)(p - name);
		p = (char *)skip_blanks(p, end);
		if (p == end || *p != '=') {
			*why = "a label without '='";
			return NULL;
		}
		p = (char *)skip_blanks(p + 1, end);
		if (p == end || *p != '"') {
			*why = "a label value without '\"'";
			return NULL;
		}
		group = nlen == 5 && !memcmp(name, "group", 5);
		if (group && s->group) {
			*why = "two group labels";
			return NULL;
		}
		out = ++p;
		if (group)
			s->group = out;
		while (p < end && *p != '"') {
			char c = *p++;

			if (c == '\\') {
				if (p == end) {
					break;
				}
				c = *p++;
				if (c == 'n') {
					c = '\n';
				} else if (c != '\\' && c != '"') {
					*why = "bad escape in a label value "
					       "(only \\\\, \\\" and \\n)";
					return NULL;
				}
			}
			*out++ = c;
		}
		if (p == end) {
			*why = "unterminated label value";
			return NULL;
		}
		if (group)
			s->group_len = (size_t)(out - s->group);
		p = (char *)skip_blanks(p + 1, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			return p + 1;
		*why = "expected ',' or '}' after a label";
		return NULL;
	}
}

bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

/*
 * Parse @t (modified: label values are unescaped in place) into @x, in
 * one pass (time linear in its size).  Returns 0, or TOP_EXIT_BAD_INPUT
 * with @err set, or CLI_EXIT_FAILED when memory runs out or a quit signal
 * came (quit_asked: checked at every line).
 */
int parse_exposition(struct text *t, bool openmetrics,
			    struct exposition *x, const char *src, char *err)
{
	char *p = t->p, *end = t->p + t->len, *nul;
	size_t line = 0, slen = strlen(src);
	bool eof = false;

	x->nr = x->nr_b = 0;
	if (t->len && (nul = memchr(t->p, '\0', t->len))) {
		errorf(err, src, slen, "a NUL byte at offset %zu: binary data,"
		       " not a text exposition", (size_t)(nul - t->p));
		return TOP_EXIT_BAD_INPUT;
	}
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		char *q;
		struct sample s = { 0 };
		const char *why = NULL;

		if (!eol)
			eol = end;
		line++;
		if (quit_asked) {
			errorf(err, src, slen, "interrupted");
			return CLI_EXIT_FAILED;
		}
		if (eof) {
			errorf(err, src, slen, "line %zu: data after # EOF",
			       line);
			return TOP_EXIT_BAD_INPUT;
		}
		q = (char *)skip_blanks(p, eol);
		if (q == eol || *q == '#') {
			eof = (size_t)(eol - q) == 5 && !memcmp(q, "# EOF", 5);
			p = eol + 1;
			continue;
		}
		s.name = q;
		if (!is_name_start(*q))
			why = "not a metric sample (NAME{LABELS} VALUE)";
		while (!why && q < eol && is_name_char(*q))
			q++;
		s.name_len = (size_t)(q - s.name);
		if (!why && q < eol && *q == '{')
			q = parse_labels(q + 1, eol, &s, &why);
		if (!why && (q == eol || (*q != ' ' && *q != '\t')))
			why = "no value after the metric name";
		if (!why) {
			q = (char *)skip_blanks(q, eol);
			q = (char *)parse_number(q, eol, &s.value);
			if (!q)
				why = "bad value";
		}
		if (!why) {
			double ts;

			q = (char *)skip_blanks(q, eol);
			if (q < eol && *q != '#') {
				q = (char *)parse_number(q, eol, &ts);
				if (!q)
					why = "bad timestamp";
				else
					q = (char *)skip_blanks(q, eol);
			}
			/* An OpenMetrics exemplar: " # {labels} value". */
			if (!why && q < eol && !(*q == '#' && q + 1 < eol &&
						 q[1] == ' '))
				why = "unexpected text after the value";
		}
		if (why) {
			errorf(err, src, slen, "line %zu: %s", line, why);
			return TOP_EXIT_BAD_INPUT;
		}
		s.line = line;
		if (s.group) {
			struct sample *a = grow_array(x->s, &x->cap, x->nr + 1,
						      sizeof(*a));

			if (!a)
				goto nomem;
			x->s = a;
			x->s[x->nr++] = s;
		} else if (ends_with(s.name, s.name_len, "_accuracy_bound") &&
			   s.name_len > 15) {
			struct bound *b = grow_array(x->b, &x->cap_b,
						     x->nr_b + 1, sizeof(*b));

			if (!b)
				goto nomem;
			x->b = b;
			x->b[x->nr_b++] = (struct bound){
				s.name, s.name_len - 15, s.value };
		}
		p = eol + 1;
	}
	if (openmetrics && !eof) {
		errorf(err, src, slen, "OpenMetrics response without '# EOF' "
		       "(truncated?)");
		return TOP_EXIT_BAD_INPUT;
	}
	return 0;
nomem:
	errorf(err, src, slen, "%s", strerror(ENOMEM));
	return CLI_EXIT_FAILED;
}
