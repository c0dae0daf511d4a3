// SPDX-License-Identifier: MIT
/*
 * fuzz_top_parse.c - `tally top`'s exposition parser, model and frame
 * (cli/top_parse.c, top_model.c, top_render.c) on any bytes.  The first
 * byte picks the format (Prometheus text or OpenMetrics), the locale's
 * kind (UTF-8 or ASCII), the sort and the width; the rest is the
 * exposition.  Properties:
 *   - a refused exposition gets status 3 and a message of printable text
 *     (it quotes input: no control byte reaches the terminal);
 *   - every sample kept points into the text, a name never empty;
 *   - the model's trees: a parent made before its child, its path a
 *     prefix of the child's ending at a '/', depth one more, at most
 *     MAX_DEPTH; a group's values in increasing column order;
 *   - the frame: no control byte but newlines, every line within the
 *     width; on an ASCII terminal, ASCII only.
 */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "fuzz.h"
#include "top.h"

/* top.c's, which the harness does not link. */
volatile sig_atomic_t quit_asked, resized;

static void check_printable(const char *s, size_t n, bool ascii)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		CHECK(c == '\n' || (c >= 0x20 && c != 0x7f));
		CHECK(!ascii || c < 0x80);
	}
}

static void check_model(const struct model *m)
{
	for (size_t i = 0; i < m->nr_secs; i++) {
		const struct section *s = &m->secs[i];

		for (size_t k = 0; k < s->nr_nodes; k++) {
			const struct node *g = &s->nodes[k];
			const struct node *p;

			CHECK(g->depth <= MAX_DEPTH);
			CHECK(g->path_len >= 1 && g->path[0] == '/');
			for (size_t v = 1; v < g->nr_vals; v++)
				CHECK(s->vals[g->first_val + v - 1].col <
				      s->vals[g->first_val + v].col);
			if (g->parent == SIZE_MAX) {
				CHECK(g->depth == 0 && g->path_len == 1);
				continue;
			}
			CHECK(g->parent < k);
			p = &s->nodes[g->parent];
			CHECK(p->depth + 1 == g->depth);
			CHECK(p->path_len < g->path_len);
			CHECK(!memcmp(p->path, g->path, p->path_len));
			CHECK(g->path[p->depth ? p->path_len : 0] == '/');
			CHECK(g->name + g->name_len == g->path + g->path_len);
			CHECK(g->name_len >= 1 &&
			      !memchr(g->name, '/', g->name_len));
		}
		if (s->memory_of)
			CHECK(s->memory_of->memory && !s->memory);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct text t = { 0 }, out = { 0 };
	struct exposition x = { 0 };
	struct model m = { 0 };
	struct top_args a = { .depth = MAX_DEPTH };
	char err[MAX_ERROR];
	bool om;
	size_t width;
	int st;

	if (!size)
		return 0;
	om = data[0] & 1;
	utf8_terminal = data[0] & 2;
	a.sort = data[0] & 4 ? SORT_NAME : SORT_USAGE;
	width = 20 + (data[0] >> 3) * 4;
	text_mem(&t, data + 1, size - 1);
	CHECK(!t.failed);
	st = parse_exposition(&t, om, &x, "fuzz", err);
	if (st) {
		CHECK(st == TOP_EXIT_BAD_INPUT);
		check_printable(err, strlen(err), !utf8_terminal);
		goto out;
	}
	for (size_t i = 0; i < x.nr; i++) {
		const struct sample *s = &x.s[i];

		CHECK(s->name >= t.p && s->name_len >= 1 &&
		      s->name + s->name_len <= t.p + t.len);
		CHECK(s->group >= t.p && s->group + s->group_len <= t.p + t.len);
	}
	st = build_model(&x, &m, "fuzz", err);
	if (st) {
		CHECK(st == TOP_EXIT_BAD_INPUT);
		check_printable(err, strlen(err), !utf8_terminal);
		goto out;
	}
	check_model(&m);
	render_model(&m, &a, width, &out);
	CHECK(!out.failed);
	check_printable(out.p, out.len, !utf8_terminal);
	if (!utf8_terminal)
		for (const char *l = out.p, *e; l && l < out.p + out.len;
		     l = e + 1) {
			e = memchr(l, '\n', (size_t)(out.p + out.len - l));
			if (!e)
				e = out.p + out.len;
			CHECK((size_t)(e - l) <= width);
		}
out:
	model_free(&m);
	text_free(&out);
	text_free(&t);
	free(x.s);
	free(x.b);
	return 0;
}
