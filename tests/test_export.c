// SPDX-License-Identifier: MIT
/*
 * test_export.c - the Prometheus and OpenMetrics export (tally/export.h).
 *
 * Two outside oracles judge the text: `promtool check metrics` (of the
 * Debian package prometheus, unpacked into build/tools by
 * scripts/ensure-deps.sh test) for the 0.0.4 format, and the OpenMetrics
 * parser of Debian's python3-prometheus-client, run with Debian's
 * /usr/bin/python3, which also decodes the escaping back so that hostile
 * names are compared byte for byte with what they must become.  A missing
 * tool fails its test saying where it comes from (`make test` gets both
 * through scripts/ensure-deps.sh): never a silent pass.
 *
 * tally's own checks: every sample's value against a forced read of its
 * group, the depth-first by-name order against an oracle sort of the
 * paths, no series twice and no family split in two (also while other
 * threads create, destroy and update groups), the claimed-name conflicts,
 * the snprintf contract of the buffer output and the atomic textfile.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/export.h>

#include "harness.h"
#include "util.h"

static const struct tally_stat_desc schema[] = {
	{ "anon", TALLY_STAT_STATE },
	{ "file", TALLY_STAT_STATE },
	{ "pgfault", TALLY_STAT_EVENT },
	{ "cpu_seconds_total", TALLY_STAT_EVENT },
};
#define NS ((unsigned int)ARRAY_SIZE(schema))
static const char *const units[NS] = { "bytes", "bytes", NULL, "seconds" };

static struct tally_stats_tree *new_tree(void)
{
	struct tally_stats_tree *t = NULL;

	CHECK_EQ_LONG(tally_stats_tree_create(&t, schema, NS, NULL), 0);
	return t;
}

/* tenant-a/{web,db}, tenant-b, with some activity; returns the root. */
static struct tally_stats_group *populate(struct tally_stats_tree *t)
{
	struct tally_stats_group *root = tally_stats_root(t);
	struct tally_stats_group *b = util_child(root, "tenant-b");
	struct tally_stats_group *a = util_child(root, "tenant-a");
	struct tally_stats_group *web = util_child(a, "web");
	struct tally_stats_group *db = util_child(a, "db");

	CHECK_EQ_LONG(tally_stats_mod(web, 0, 4096), 0);
	CHECK_EQ_LONG(tally_stats_mod(web, 2, 7), 0);
	CHECK_EQ_LONG(tally_stats_mod(db, 1, 1 << 20), 0);
	CHECK_EQ_LONG(tally_stats_mod(db, 3, 3), 0);
	CHECK_EQ_LONG(tally_stats_mod(b, 0, -100), 0);
	CHECK_EQ_LONG(tally_stats_mod(root, 2, 1), 0);
	return root;
}

static struct tally_exporter *
new_exporter(enum tally_export_format format, struct tally_stats_tree *t,
	     enum tally_flush_mode mode)
{
	static const struct tally_export_label labels[] = {
		{ "host", "host-1:9100" },
	};
	struct tally_export_options o = { .format = format,
					  .labels = labels,
					  .nr_labels = 1,
					  .pid = true };
	struct tally_export_stats_options so = { .units = units,
						 .mode = mode };
	struct tally_exporter *e = NULL;

	CHECK_EQ_LONG(tally_exporter_create(&e, &o), 0);
	if (e && t)
		CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), 0);
	return e;
}

/* The whole export as a string (malloc'ed), or NULL. */
static char *export_text(struct tally_exporter *e)
{
	long n = tally_export_buffer(e, NULL, 0);
	char *text;

	if (!CHECK(n >= 0))
		return NULL;
	/* Room for the values to grow between the two snapshots. */
	text = malloc((size_t)n + 4096);
	if (!text)
		return NULL;
	n = tally_export_buffer(e, text, (size_t)n + 4096);
	if (!CHECK(n >= 0)) {
		free(text);
		return NULL;
	}
	return text;
}

static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/tally-export-XXXXXX");
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!CHECK(f != NULL)) {
		free(path);
		return NULL;
	}
	fputs(text, f);
	fclose(f);
	return path;
}

#define PROMTOOL "prometheus/usr/bin/promtool"

static bool have_promtool(void)
{
	if (access(util_tool(PROMTOOL), X_OK) == 0)
		return true;
	harness_log("%s is missing: scripts/ensure-deps.sh test unpacks the "
		    "Debian package prometheus there", util_tool(PROMTOOL));
	return false;
}

#define PYTHON "/usr/bin/python3"

static bool have_python_parser(void)
{
	static const char *const argv[] = {
		PYTHON, "-c", "import prometheus_client.openmetrics.parser",
		NULL
	};
	char out[512];

	if (util_run(argv, NULL, out, sizeof(out)) == 0)
		return true;
	harness_log("%s cannot import prometheus_client: install the Debian "
		    "package python3-prometheus-client (scripts/ensure-deps.sh"
		    " test does): %s", PYTHON, out);
	return false;
}

/* promtool check metrics on @text: true when it accepts it (no lint). */
static bool promtool_accepts(const char *text)
{
	const char *const argv[] = { util_tool(PROMTOOL), "check", "metrics",
				     NULL };
	char out[8192];
	char *path = write_temp(text);
	int rc;

	if (!path)
		return false;
	rc = util_run(argv, path, out, sizeof(out));
	if (rc != 0)
		harness_log("promtool (exit %d): %s", rc, out);
	unlink(path);
	free(path);
	return rc == 0;
}

/*
 * The strict OpenMetrics parser on @text (read as strict UTF-8): prints
 * one line per sample, "FAMILY TYPE UNIT SAMPLE GROUP-HEX VALUE" (VALUE
 * an integer, or +Inf), and per family "HELP FAMILY HELP-HEX", into @out.
 * Returns its exit status.
 */
static int python_parse(const char *text, char *out, size_t len)
{
	static const char script[] =
		"import math, sys\n"
		"from prometheus_client.openmetrics.parser import "
		"text_string_to_metric_families\n"
		"text = open(sys.argv[1], encoding='utf-8', errors='strict',"
		" newline='').read()\n"
		"for f in text_string_to_metric_families(text):\n"
		"    print('HELP', f.name, f.documentation.encode().hex())\n"
		"    for s in f.samples:\n"
		"        v = s.value\n"
		"        print(f.name, f.type, f.unit or '-', s.name,\n"
		"              s.labels.get('group', '').encode().hex(),\n"
		"              '+Inf' if v == math.inf else int(v))\n";
	char *path = write_temp(text), *spath = write_temp(script);
	int rc = -1;

	if (path && spath) {
		const char *const argv[] = { PYTHON, spath, path, NULL };

		rc = util_run(argv, NULL, out, len);
		if (rc != 0)
			harness_log("python parser (exit %d): %s", rc, out);
	}
	if (path)
		unlink(path);
	if (spath)
		unlink(spath);
	free(path);
	free(spath);
	return rc;
}

static void hex(const char *s, char *out)
{
	for (; *s; s++, out += 2)
		sprintf(out, "%02x", (unsigned char)*s);
	*out = '\0';
}

TEST(prometheus_output_passes_promtool_check_metrics)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e;
	char *text;

	REQUIRE(t);
	populate(t);
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	text = e ? export_text(e) : NULL;
	if (text && have_promtool()) {
		CHECK(promtool_accepts(text));
		CHECK(strstr(text,
			     "# TYPE tally_hier_pgfault_total counter\n"));
		CHECK(strstr(text, "# TYPE tally_local_anon_bytes gauge\n"));
		CHECK(!strstr(text, "# EOF"));
		CHECK(!strstr(text, "# UNIT"));
	} else {
		CHECK(!"promtool and an export are needed");
	}
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(openmetrics_output_passes_the_strict_python_parser)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e;
	char *text, out[16384];

	REQUIRE(t);
	populate(t);
	e = new_exporter(TALLY_EXPORT_OPENMETRICS, t, TALLY_FLUSH_FORCE);
	text = e ? export_text(e) : NULL;
	if (text && have_python_parser()) {
		size_t n = strlen(text);

		CHECK_EQ_LONG(python_parse(text, out, sizeof(out)), 0);
		CHECK(n > 6 && !strcmp(text + n - 6, "# EOF\n"));
		/* A counter family, its _total sample, a unit. */
		CHECK(strstr(out, "tally_hier_pgfault counter - "
				  "tally_hier_pgfault_total 2f 8\n"));
		CHECK(strstr(out, "tally_local_cpu_seconds counter seconds "
				  "tally_local_cpu_seconds_total "
				  "2f74656e616e742d612f6462 3\n"));
		CHECK(strstr(out, "tally_hier_anon_bytes gauge bytes "
				  "tally_hier_anon_bytes 2f 3996\n"));
		CHECK(strstr(out, "tally_accuracy_bound gauge - "
				  "tally_accuracy_bound  0\n"));
		CHECK(strstr(text, "# UNIT tally_hier_file_bytes bytes\n"));
	} else {
		CHECK(!"the python parser and an export are needed");
	}
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

/* Group names of every kind of trouble, and what a parser must decode. */
static const struct {
	const char *name, *decoded;
} hostile[] = {
	{ "q\"uote", "q\"uote" },
	{ "back\\slash\\", "back\\slash\\" },
	{ "new\nline", "new\nline" },
	{ "caf\xc3\xa9", "caf\xc3\xa9" },
	{ "\xe6\x97\xa5\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac" },
	{ "emoji\xf0\x9f\x98\x80", "emoji\xf0\x9f\x98\x80" },
	{ "bad\xff", "bad\xef\xbf\xbd" "FF" },
	{ "lit\xef\xbf\xbd" "FF", "lit\xef\xbf\xbd~FF" },
	{ "trunc\xe6\x97", "trunc\xef\xbf\xbd" "E6\xef\xbf\xbd" "97" },
	{ "overlong\xc0\xaf", "overlong\xef\xbf\xbd" "C0\xef\xbf\xbd" "AF" },
	{ "surrogate\xed\xa0\x80",
	  "surrogate\xef\xbf\xbd" "ED\xef\xbf\xbd" "A0\xef\xbf\xbd" "80" },
	{ "beyond\xf4\x90\x80\x80",
	  "beyond\xef\xbf\xbd" "F4\xef\xbf\xbd" "90\xef\xbf\xbd" "80"
	  "\xef\xbf\xbd" "80" },
	{ "tab\tcr\rdel\x7f", "tab\tcr\rdel\x7f" },
	{ "{group=\"x\"} 1", "{group=\"x\"} 1" },
};

static struct tally_stats_tree *hostile_tree(void)
{
	static const struct tally_stat_desc s[] = {
		{ "qu\"ot\\e\xff-\xc3\xa9", TALLY_STAT_STATE },
		{ "9lives", TALLY_STAT_EVENT },
	};
	struct tally_stats_tree *t = NULL;
	struct tally_stats_group *nl = NULL;

	if (!CHECK_EQ_LONG(tally_stats_tree_create(&t, s, 2, NULL), 0))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
		struct tally_stats_group *g =
			util_child(tally_stats_root(t), hostile[i].name);

		if (g)
			CHECK_EQ_LONG(tally_stats_mod(g, 1, (long)i + 1), 0);
		if (i == 2)
			nl = g;
	}
	if (nl)
		util_child(nl, "child\\\"");
	return t;
}

TEST(hostile_group_names_round_trip_through_both_parsers)
{
	struct tally_export_stats_options forced = {
		.mode = TALLY_FLUSH_FORCE };
	struct tally_export_options om_format = {
		.format = TALLY_EXPORT_OPENMETRICS };
	struct tally_stats_tree *t = hostile_tree();
	struct tally_exporter *prom = NULL, *om = NULL;
	char *ptext = NULL, *otext = NULL, *out = malloc(1 << 16);

	REQUIRE(t && out);
	CHECK_EQ_LONG(tally_exporter_create(&prom, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(prom, t, &forced), 0);
	CHECK_EQ_LONG(tally_exporter_create(&om, &om_format), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(om, t, &forced), 0);
	ptext = prom ? export_text(prom) : NULL;
	otext = om ? export_text(om) : NULL;
	if (ptext && have_promtool())
		CHECK(promtool_accepts(ptext));
	else
		CHECK(!"promtool and an export are needed");
	if (otext && have_python_parser() &&
	    CHECK_EQ_LONG(python_parse(otext, out, 1 << 16), 0)) {
		char want[512], h[256], h2[256];

		for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
			char path[64] = "/";

			strcat(path, hostile[i].decoded);
			hex(path, h);
			snprintf(want, sizeof(want),
				 "tally_local_9lives counter - "
				 "tally_local_9lives_total %s %zu\n", h, i + 1);
			if (!CHECK(strstr(out, want)))
				harness_log("missing: %s", want);
		}
		hex("/new\nline/child\\\"", h);
		snprintf(want, sizeof(want), " %s 0\n", h);
		CHECK(strstr(out, want));
		/* The stat's name: sanitised in the metric, escaped in HELP. */
		hex("Hierarchical qu\"ot\\e\xef\xbf\xbd" "FF-\xc3\xa9:", h2);
		snprintf(want, sizeof(want), "HELP tally_hier_qu_ot_e____ %s",
			 h2);
		CHECK(strstr(out, want));
	} else {
		CHECK(!"the python parser and an export are needed");
	}
	free(ptext);
	free(otext);
	free(out);
	tally_exporter_destroy(prom);
	tally_exporter_destroy(om);
	tally_stats_tree_destroy(t);
}

/* The label value of the text's sample lines of @family, in order. */
static size_t group_labels(const char *text, const char *family,
			   char (*out)[64], size_t max)
{
	size_t n = 0, flen = strlen(family);

	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		const char *g;

		if (!strncmp(l, family, flen) && l[flen] == '{' &&
		    (g = strstr(l, "group=\"")) && n < max) {
			const char *end = strchr(g + 7, '"');

			snprintf(out[n++], 64, "%.*s", (int)(end - g - 7),
				 g + 7);
		}
	}
	return n;
}

TEST(hostile_stat_names_are_sanitised_and_help_escaped)
{
	struct tally_export_stats_options forced = {
		.mode = TALLY_FLUSH_FORCE };
	struct tally_stats_tree *t = hostile_tree();
	struct tally_exporter *e = NULL;
	char *text;

	REQUIRE(t);
	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &forced), 0);
	text = e ? export_text(e) : NULL;
	if (CHECK(text)) {
		/* 0.0.4 HELP escapes the backslash only, keeps the quote. */
		CHECK(strstr(text, "# HELP tally_hier_qu_ot_e____ Hierarchical "
				   "qu\"ot\\\\e\xef\xbf\xbd" "FF-\xc3\xa9: "));
		CHECK(strstr(text, "tally_local_9lives_total{group="
				   "\"/new\\nline\"} 3\n"));
		CHECK(strstr(text, "{group=\"/q\\\"uote\"}"));
		CHECK(strstr(text, "{group=\"/back\\\\slash\\\\\"}"));
		CHECK(strstr(text, "{group=\"/new\\nline/child\\\\\\\"\"}"));
	}
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

/* Paths compared component by component, bytes unsigned: the oracle. */
static int path_cmp(const void *a, const void *b)
{
	const unsigned char *x = *(const unsigned char *const *)a;
	const unsigned char *y = *(const unsigned char *const *)b;

	for (;; x++, y++) {
		int cx = *x == '/' ? 1 : *x, cy = *y == '/' ? 1 : *y;

		if (cx != cy || !cx)
			return cx - cy;
	}
}

TEST(groups_come_depth_first_by_name)
{
	struct rng r = rng_seed(1);
	struct tally_stats_tree *t = new_tree();
	struct tally_stats_group *g[64];
	char *paths[64], (*seen)[64] = malloc(64 * 64);
	size_t n = 1;
	struct tally_exporter *e = NULL;
	char *text = NULL;

	REQUIRE(t && seen);
	g[0] = tally_stats_root(t);
	paths[0] = strdup("");
	/* Random parents and names, created in random order. */
	while (n < ARRAY_SIZE(g)) {
		size_t p = rng_below(&r, n);
		char name[8], path[64];

		snprintf(name, sizeof(name), "%c%c%s",
			 "abAB_-z\xc3"[rng_below(&r, 8)],
			 "ab0"[rng_below(&r, 3)], rng_below(&r, 2) ? "" : "a");
		if (tally_stats_group_create(g[p], name, &g[n]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", paths[p], name);
		paths[n++] = strdup(path);
	}
	qsort(paths, n, sizeof(*paths), path_cmp);
	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, NULL), 0);
	text = e ? export_text(e) : NULL;
	if (CHECK(text) &&
	    CHECK_EQ_LONG(group_labels(text, "tally_local_file", seen, 64),
			  n)) {
		CHECK(!strcmp(seen[0], "/"));
		for (size_t i = 1; i < n; i++) {
			char want[64], *w = want;

			/* A lone '\xc3' is written U+FFFD "C3". */
			for (const char *c = paths[i]; *c; c++)
				if (*c == '\xc3')
					w = stpcpy(w, "\xef\xbf\xbd" "C3");
				else
					*w++ = *c;
			*w = '\0';
			if (!CHECK(!strcmp(seen[i], want)))
				harness_log("position %zu: %s, want %s", i,
					    seen[i], want);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(seen);
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

/* @text holds the line @fmt... as a whole line. */
__attribute__((format(printf, 2, 3))) static bool has_line(const char *text,
							   const char *fmt,
							   ...)
{
	char line[512], want[520];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(want, sizeof(want), "\n%s\n", line);
	if (strstr(text, want) || !strncmp(text, want + 1, strlen(want + 1)))
		return true;
	harness_log("no line \"%s\"", line);
	return false;
}

static const char *const family_of[NS][2] = {
	{ "tally_local_anon_bytes", "tally_hier_anon_bytes" },
	{ "tally_local_file_bytes", "tally_hier_file_bytes" },
	{ "tally_local_pgfault_total", "tally_hier_pgfault_total" },
	{ "tally_local_cpu_seconds_total", "tally_hier_cpu_seconds_total" },
};

/* Every group's values, read with a forced read, are in @text. */
static void check_values(const char *text, struct tally_stats_group *g)
{
	char path[512] = "/";
	long v[2];
	int pid = getpid();

	CHECK(tally_stats_group_path(g, path + 1, sizeof(path) - 1) >= 0);
	for (unsigned int s = 0; s < NS; s++) {
		CHECK_EQ_LONG(tally_stats_read(g, s, TALLY_FLUSH_FORCE, &v[1],
					       &v[0]),
			      0);
		for (int k = 0; k < 2; k++) {
			char value[24];

			if (schema[s].kind == TALLY_STAT_EVENT)
				snprintf(value, sizeof(value), "%lu",
					 (unsigned long)v[k]);
			else
				snprintf(value, sizeof(value), "%ld", v[k]);
			CHECK(has_line(text,
				       "%s{group=\"%s\",host=\"host-1:"
				       "9100\",pid=\"%d\"} %s",
				       family_of[s][k], path, pid, value));
		}
	}
}

static int check_child_values(struct tally_stats_group *child,
			      const char *name, void *arg)
{
	check_values(arg, child);
	return 0;
}

TEST(values_are_the_forced_reads_of_every_group)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_stats_group *root, *a = NULL;
	struct tally_exporter *e;
	char *text;

	REQUIRE(t);
	root = populate(t);
	CHECK_EQ_LONG(tally_stats_group_find(t, "tenant-a", &a), 0);
	/* Wrapped event (printed unsigned), LONG_MIN state. */
	CHECK_EQ_LONG(tally_stats_mod(a, 2, LONG_MAX), 0);
	CHECK_EQ_LONG(tally_stats_mod(a, 2, LONG_MAX), 0);
	CHECK_EQ_LONG(tally_stats_mod(a, 1, LONG_MIN), 0);
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	text = e ? export_text(e) : NULL;
	if (CHECK(text && a)) {
		check_values(text, root);
		tally_stats_group_for_each_child(root, check_child_values,
						 text);
		tally_stats_group_for_each_child(a, check_child_values, text);
		CHECK(strstr(text, "} 18446744073709551614\n"));
		CHECK(strstr(text, "} -9223372036854775808\n"));
	}
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

static int cmp_strs(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * tally's own checks of a text: no series twice (name and labels), no
 * family split (a sample name that comes back after another), every
 * sample after the TYPE of its family.
 */
static bool well_formed(const char *text)
{
	size_t nr = 0, cap = 1024, nr_closed = 0;
	char **keys = malloc(cap * sizeof(*keys));
	char **closed = malloc(cap * sizeof(*closed));
	char cur[256] = "", typed[256] = "";
	bool ok = keys && closed;

	for (const char *l = text; ok && *l; l = strchr(l, '\n') + 1) {
		size_t len = (size_t)(strchr(l, '\n') - l);
		size_t nlen = strcspn(l, "{ ");

		if (!strncmp(l, "# TYPE ", 7)) {
			snprintf(typed, sizeof(typed), "%.*s",
				 (int)strcspn(l + 7, " "), l + 7);
			continue;
		}
		if (*l == '#')
			continue;
		if (strncmp(l, typed, strlen(typed))) {
			harness_log("sample before its TYPE: %.*s", (int)len,
				    l);
			ok = false;
		}
		if (strlen(cur) != nlen || strncmp(cur, l, nlen)) {
			for (size_t i = 0; i < nr_closed; i++)
				if (strlen(closed[i]) == nlen &&
				    !strncmp(closed[i], l, nlen)) {
					harness_log("family split: %.*s",
						    (int)nlen, l);
					ok = false;
				}
			if (*cur && nr_closed < cap)
				closed[nr_closed++] = strdup(cur);
			snprintf(cur, sizeof(cur), "%.*s", (int)nlen, l);
		}
		if (nr == cap) {
			cap *= 2;
			keys = realloc(keys, cap * sizeof(*keys));
			if (!keys)
				return false;
		}
		keys[nr++] = strndup(l, (size_t)(strrchr(l, ' ') - l));
	}
	if (ok) {
		qsort(keys, nr, sizeof(*keys), cmp_strs);
		for (size_t i = 1; i < nr; i++)
			if (!strcmp(keys[i - 1], keys[i])) {
				harness_log("duplicate series %s", keys[i]);
				ok = false;
			}
	}
	for (size_t i = 0; keys && i < nr; i++)
		free(keys[i]);
	for (size_t i = 0; closed && i < nr_closed; i++)
		free(closed[i]);
	free(keys);
	free(closed);
	return ok;
}

TEST(families_are_never_interleaved_and_series_never_repeat)
{
	struct tally_stats_tree *t1 = new_tree();
	struct tally_stats_tree *t2 = new_tree();
	struct tally_export_stats_options other = { .prefix = "other" };
	struct tally_exporter *e[2];
	char name[16];

	REQUIRE(t1 && t2);
	populate(t1);
	for (int i = 0; i < 200; i++) {
		struct tally_stats_group *g;

		snprintf(name, sizeof(name), "g%d", i);
		g = util_child(tally_stats_root(t2), name);
		if (g && i % 3 == 0)
			util_child(g, "x");
		if (g)
			CHECK_EQ_LONG(tally_stats_mod(g, 2, i), 0);
	}
	for (int f = 0; f < 2; f++) {
		char *text;

		e[f] = new_exporter((enum tally_export_format)f, t1,
				    TALLY_FLUSH_IF_NEEDED);
		if (!e[f])
			continue;
		CHECK_EQ_LONG(tally_exporter_add_stats(e[f], t2, &other), 0);
		text = export_text(e[f]);
		if (CHECK(text)) {
			CHECK(well_formed(text));
			/* 5 + 268 groups, 8 families each, plus accuracy. */
			CHECK(strstr(text, "other_local_pgfault_total{group="
					   "\"/g199\""));
		}
		free(text);
		tally_exporter_destroy(e[f]);
	}
	tally_stats_tree_destroy(t1);
	tally_stats_tree_destroy(t2);
}

TEST(names_that_would_collide_are_refused)
{
	static const struct tally_stat_desc alike[] = {
		{ "a-b", TALLY_STAT_STATE }, { "a.b", TALLY_STAT_STATE } };
	static const struct tally_stat_desc created[] = {
		{ "y", TALLY_STAT_EVENT }, { "y_created", TALLY_STAT_STATE } };
	static const struct tally_stat_desc suffix[] = {
		{ "z_total", TALLY_STAT_EVENT }, { "z", TALLY_STAT_EVENT } };
	const struct tally_stat_desc *bad[] = { alike, created, suffix };
	/* Gauges may not take a counter's or a histogram's suffix. */
	static const struct tally_stat_desc gauges[][1] = {
		{ { "x_total", TALLY_STAT_STATE } },
		{ { "n_count", TALLY_STAT_STATE } },
		{ { "s_sum", TALLY_STAT_STATE } },
		{ { "h_bucket", TALLY_STAT_STATE } },
	};
	struct tally_stats_tree *t = new_tree(), *b;
	struct tally_export_stats_options other = { .prefix = "other" };
	struct tally_exporter *e = NULL;
	char *before, *after;

	REQUIRE(t);
	populate(t);
	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	REQUIRE(e);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, NULL), 0);
	before = export_text(e);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		REQUIRE(tally_stats_tree_create(&b, bad[i], 2, NULL) == 0);
		CHECK_EQ_LONG(tally_exporter_add_stats(e, b, &other), -EEXIST);
		tally_stats_tree_destroy(b);
	}
	for (size_t i = 0; i < ARRAY_SIZE(gauges); i++) {
		REQUIRE(tally_stats_tree_create(&b, gauges[i], 1, NULL) == 0);
		CHECK_EQ_LONG(tally_exporter_add_stats(e, b, &other), -EINVAL);
		tally_stats_tree_destroy(b);
	}
	/* The same tree twice, or another under the same prefix. */
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, NULL), -EEXIST);
	b = new_tree();
	CHECK_EQ_LONG(tally_exporter_add_stats(e, b, NULL), -EEXIST);
	/* A refused tree leaves the exporter as it was. */
	after = export_text(e);
	CHECK(before && after && !strcmp(before, after));
	CHECK_EQ_LONG(tally_exporter_add_stats(e, b, &other), 0);
	free(before);
	free(after);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(b);
	tally_stats_tree_destroy(t);
}

TEST(units_suffix_names_once_and_openmetrics_says_them)
{
	static const struct tally_stat_desc s[] = {
		{ "rss", TALLY_STAT_STATE },
		{ "wait_seconds", TALLY_STAT_EVENT },
		{ "plain", TALLY_STAT_STATE },
	};
	static const char *const u[] = { "bytes", "seconds", "" };
	struct tally_export_stats_options so = { .units = u };
	struct tally_export_options oo = { .format = TALLY_EXPORT_OPENMETRICS };
	struct tally_stats_tree *t = NULL;
	struct tally_exporter *e = NULL;
	char *text;

	REQUIRE(tally_stats_tree_create(&t, s, 3, NULL) == 0);
	CHECK_EQ_LONG(tally_exporter_create(&e, &oo), 0);
	REQUIRE(e);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), 0);
	text = export_text(e);
	if (CHECK(text)) {
		CHECK(has_line(text, "# UNIT tally_hier_rss_bytes bytes"));
		CHECK(has_line(text, "# UNIT tally_local_wait_seconds "
				     "seconds"));
		CHECK(has_line(text, "tally_local_wait_seconds_total{group="
				     "\"/\"} 0"));
		CHECK(has_line(text, "tally_hier_plain{group=\"/\"} 0"));
		CHECK(!strstr(text, "# UNIT tally_hier_plain"));
		CHECK(well_formed(text));
	}
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(accuracy_is_zero_when_forced_and_the_read_bound_if_needed)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *forced, *lazy;
	char *ft, *lt;

	REQUIRE(t);
	populate(t);
	forced = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	lazy = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_IF_NEEDED);
	ft = forced ? export_text(forced) : NULL;
	lt = lazy ? export_text(lazy) : NULL;
	if (CHECK(ft && lt)) {
		CHECK(has_line(ft, "tally_accuracy_bound{host=\"host-1:"
				   "9100\",pid=\"%d\"} 0", (int)getpid()));
		CHECK(has_line(lt, "tally_accuracy_bound{host=\"host-1:"
				   "9100\",pid=\"%d\"} %lu", (int)getpid(),
			       tally_stats_read_bound(t)));
		CHECK(tally_stats_read_bound(t) > 0);
	}
	free(ft);
	free(lt);
	tally_exporter_destroy(forced);
	tally_exporter_destroy(lazy);
	tally_stats_tree_destroy(t);
}

TEST(forced_export_is_exact_below_every_threshold)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_stats_group *root;
	struct tally_exporter *e;
	char *text;

	REQUIRE(t);
	root = populate(t);
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	/* Below every threshold: only a forced flush sees it. */
	CHECK_EQ_LONG(tally_stats_mod(root, 0, 1), 0);
	text = e ? export_text(e) : NULL;
	if (CHECK(text))
		CHECK(has_line(text, "tally_hier_anon_bytes{group="
				     "\"/\",host=\"host-1:9100\","
				     "pid=\"%d\"} 3997",
			       (int)getpid()));
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(buffer_output_returns_the_needed_size_like_snprintf)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e;
	char small[16] = "untouched", *whole;
	long n;

	REQUIRE(t);
	populate(t);
	e = new_exporter(TALLY_EXPORT_OPENMETRICS, t, TALLY_FLUSH_FORCE);
	REQUIRE(e);
	n = tally_export_buffer(e, NULL, 0);
	CHECK(n > 100);
	whole = malloc((size_t)n + 1);
	REQUIRE(whole);
	CHECK_EQ_LONG(tally_export_buffer(e, small, sizeof(small)), n);
	CHECK_EQ_LONG(small[0], 0);
	memset(whole, 'x', (size_t)n + 1);
	/* One byte short (no room for the NUL): nothing but "". */
	CHECK_EQ_LONG(tally_export_buffer(e, whole, (size_t)n), n);
	CHECK_EQ_LONG(whole[0], 0);
	CHECK_EQ_LONG(tally_export_buffer(e, whole, (size_t)n + 1), n);
	CHECK_EQ_LONG((long)strlen(whole), n);
	CHECK(n > 6 && !strcmp(whole + n - 6, "# EOF\n"));
	free(whole);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

/* Entries of @dir other than . and .. */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = calloc(1, 1 << 16);

	if (f && text)
		fread(text, 1, (1 << 16) - 1, f);
	if (f)
		fclose(f);
	return text;
}

TEST(textfile_is_replaced_atomically_with_mode_0644)
{
	struct tally_stats_tree *t = new_tree();
	char dir[] = "/tmp/tally-textfile-XXXXXX", path[64], sub[80];
	struct tally_exporter *e;
	struct stat st;
	char *text, *file;
	mode_t old;

	REQUIRE(t && mkdtemp(dir));
	populate(t);
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	REQUIRE(e);
	snprintf(path, sizeof(path), "%s/tally.prom", dir);
	old = umask(077);
	CHECK_EQ_LONG(tally_export_textfile(e, path), 0);
	/* Replacing an existing file. */
	CHECK_EQ_LONG(tally_export_textfile(e, path), 0);
	umask(old);
	CHECK_EQ_LONG(stat(path, &st), 0);
	CHECK_EQ_LONG(st.st_mode & 07777, 0644);
	CHECK_EQ_LONG(dir_entries(dir), 1);
	text = export_text(e);
	file = slurp(path);
	CHECK(text && file && !strcmp(text, file));
	/* A rename that fails (a non-empty directory in the way) leaves
	 * no temporary file behind. */
	snprintf(sub, sizeof(sub), "%s/dir.prom", dir);
	CHECK_EQ_LONG(mkdir(sub, 0755), 0);
	snprintf(path, sizeof(path), "%s/dir.prom/x", dir);
	CHECK_EQ_LONG(mkdir(path, 0755), 0);
	CHECK(tally_export_textfile(e, sub) < 0);
	CHECK_EQ_LONG(dir_entries(dir), 2);
	CHECK_EQ_LONG(tally_export_textfile(e, "/nonexistent-dir/x.prom"),
		      -ENOENT);
	rmdir(path);
	rmdir(sub);
	/* Never a device, FIFO or socket: a FIFO in the way stays one. */
	CHECK_EQ_LONG(mkfifo(sub, 0600), 0);
	CHECK_EQ_LONG(tally_export_textfile(e, sub), -EEXIST);
	CHECK(!lstat(sub, &st) && S_ISFIFO(st.st_mode));
	CHECK_EQ_LONG(dir_entries(dir), 2);
	unlink(sub);
	snprintf(path, sizeof(path), "%s/tally.prom", dir);
	unlink(path);
	CHECK_EQ_LONG(rmdir(dir), 0);
	free(text);
	free(file);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(file_output_reports_a_failed_write)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e;
	FILE *full = fopen("/dev/full", "w");

	REQUIRE(t && full);
	populate(t);
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	CHECK_EQ_LONG(tally_export_file(e, full), -EIO);
	fclose(full);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(bad_input_gets_documented_errors)
{
	struct tally_export_label l[3] = { { "host", "x" } };
	struct tally_export_options o = { .labels = l, .nr_labels = 2 };
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e = (struct tally_exporter *)&o;
	struct tally_export_stats_options so = { 0 };
	static const char *const bad_prefixes[] = { "", "1x", "__x", "a-b",
						    "a:b", "caf\xc3\xa9" };
	static const char *const bad_names[] = { NULL, "", "1x", "__x",
						 "group", "a b", "host",
						 "instance", "job" };
	const char *u[NS] = { "Bytes" };
	char buf[8];

	REQUIRE(t);
	CHECK_EQ_LONG(tally_exporter_create(NULL, NULL), -EINVAL);
	o.format = (enum tally_export_format)2;
	o.nr_labels = 0;
	CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	o.format = TALLY_EXPORT_PROMETHEUS;
	for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
		l[1] = (struct tally_export_label){ bad_names[i], "v" };
		o.nr_labels = 2;
		CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	}
	l[1] = (struct tally_export_label){ "pid", "v" };
	o.pid = true;
	CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	l[1] = (struct tally_export_label){ "region", NULL };
	o.pid = false;
	CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	o.labels = NULL;
	CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	o.labels = l;
	o.nr_labels = TALLY_EXPORT_MAX_LABELS + 1;
	CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
	/* Every failure left *out untouched. */
	CHECK(e == (struct tally_exporter *)&o);

	e = NULL;
	REQUIRE(tally_exporter_create(&e, NULL) == 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(NULL, t, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, NULL, NULL), -EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(bad_prefixes); i++) {
		so.prefix = bad_prefixes[i];
		CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);
	}
	so.prefix = NULL;
	so.units = u;
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);
	u[0] = "a b";
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);
	so.units = NULL;
	so.mode = TALLY_FLUSH_NONE;
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);
	so.mode = TALLY_FLUSH_RATELIMITED;
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);
	so.mode = (enum tally_flush_mode)9;
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), -EINVAL);

	CHECK_EQ_LONG(tally_export_buffer(NULL, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ_LONG(tally_export_buffer(e, NULL, 1), -EINVAL);
	/* No source: an empty text. */
	CHECK_EQ_LONG(tally_export_buffer(e, buf, sizeof(buf)), 0);
	CHECK_EQ_LONG(tally_export_file(NULL, stdout), -EINVAL);
	CHECK_EQ_LONG(tally_export_file(e, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_export_textfile(NULL, "/tmp/x"), -EINVAL);
	CHECK_EQ_LONG(tally_export_textfile(e, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_export_textfile(e, ""), -EINVAL);
	CHECK_EQ_LONG(tally_export_textfile(e, "/tmp/"), -EINVAL);
	tally_exporter_destroy(e);
	tally_exporter_destroy(NULL);
	tally_stats_tree_destroy(t);
}

/* Made by the parent, used by a forked child. */
static struct tally_exporter *inherited;

static void print_export_in_child(void)
{
	fprintf(stderr, "pid=\"%d\"\n", (int)getpid());
	tally_export_file(inherited, stderr);
}

TEST(constant_labels_follow_group_and_a_forked_child_exports_its_pid)
{
	struct tally_stats_tree *t = new_tree();
	char text[8192], want[64], *nl;

	REQUIRE(t);
	inherited = new_exporter(TALLY_EXPORT_PROMETHEUS, t,
				 TALLY_FLUSH_FORCE);
	REQUIRE(inherited);
	CHECK_EQ_LONG(util_run_capturing_stderr(print_export_in_child, text,
						sizeof(text)),
		      0);
	nl = strchr(text, '\n');
	if (CHECK(nl)) {
		snprintf(want, sizeof(want), "%.*s", (int)(nl - text), text);
		CHECK(has_line(text, "tally_hier_anon_bytes{group=\"/\","
				     "host=\"host-1:9100\",%s} 0", want));
		snprintf(want, sizeof(want), "pid=\"%d\"", (int)getpid());
		CHECK(!strstr(text, want));
	}
	tally_exporter_destroy(inherited);
	tally_stats_tree_destroy(t);
}

struct churn {
	struct tally_stats_tree *t;
	struct tally_stats_group *leaves[8];
	long iterations;
	long events;		/* added by the thread */
	bool failed;
	int *finished;		/* threads done */
};

static void *update_leaves(void *arg)
{
	struct churn *c = arg;
	struct rng r = rng_seed(2);

	for (long i = 0; i < c->iterations; i++) {
		if (tally_stats_mod(c->leaves[rng_below(&r, 8)], 2, 1))
			c->failed = true;
		c->events++;
	}
	__atomic_add_fetch(c->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *create_and_destroy(void *arg)
{
	struct churn *c = arg;

	for (long i = 0; i < c->iterations / 64; i++) {
		struct tally_stats_group *g;
		char name[32];

		snprintf(name, sizeof(name), "tmp%ld", i % 5);
		if (tally_stats_group_create(c->leaves[i % 8], name, &g)) {
			c->failed = true;
			continue;
		}
		if (tally_stats_mod(g, 2, 3) || tally_stats_group_destroy(g))
			c->failed = true;
		c->events += 3;
	}
	__atomic_add_fetch(c->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(export_during_churn_stays_well_formed_and_ends_exact)
{
	struct tally_stats_tree *t = new_tree();
	int finished = 0;
	struct churn up = { .t = t, .finished = &finished };
	struct churn cr = { .t = t, .finished = &finished };
	struct tally_exporter *e;
	pthread_t th[2];
	char *text;
	int rounds = 0;

	REQUIRE(t);
	for (int i = 0; i < 8; i++) {
		char name[16];

		snprintf(name, sizeof(name), "l%d", i);
		up.leaves[i] = util_child(i < 4 ? tally_stats_root(t)
					 : up.leaves[i - 4],
				   name);
	}
	memcpy(cr.leaves, up.leaves, sizeof(up.leaves));
	up.iterations = cr.iterations = (long)harness_scale(200000);
	e = new_exporter(TALLY_EXPORT_OPENMETRICS, t, TALLY_FLUSH_FORCE);
	REQUIRE(e);
	REQUIRE(pthread_create(&th[0], NULL, update_leaves, &up) == 0);
	REQUIRE(pthread_create(&th[1], NULL, create_and_destroy, &cr) == 0);
	do {
		text = export_text(e);
		if (!CHECK(text && well_formed(text)))
			break;
		free(text);
		rounds++;
	} while (rounds < 20 ||
		 __atomic_load_n(&finished, __ATOMIC_ACQUIRE) < 2);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	CHECK(!up.failed && !cr.failed);
	text = export_text(e);
	if (CHECK(text))
		CHECK(has_line(text, "tally_hier_pgfault_total{group=\"/\","
				     "host=\"host-1:9100\",pid=\"%d\"} "
				     "%ld",
			       (int)getpid(), up.events + cr.events));
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(names_that_differ_only_in_invalid_bytes_get_distinct_labels)
{
	static const char *const names[] = {
		"a\xff", "a\xfe", "a\xef\xbf\xbd" "FF", "a\xef\xbf\xbd",
		"a\xef\xbf\xbd~", "a\xef\xbf\xbd~FF", "a\xc3", "a\xc3\xa9",
	};
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e = NULL;
	char (*seen)[64] = malloc(32 * 64);
	char *text;

	REQUIRE(t && seen);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		util_child(util_child(tally_stats_root(t), names[i]), "child");
	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, NULL), 0);
	text = e ? export_text(e) : NULL;
	if (CHECK(text)) {
		CHECK(well_formed(text));
		CHECK_EQ_LONG(group_labels(text, "tally_hier_anon", seen, 32),
			      1 + 2 * ARRAY_SIZE(names));
	}
	free(seen);
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
}

TEST(a_tree_on_a_simulated_domain_exports_its_sum_over_cpus)
{
	struct tally_stats_options o = { .domain = util_domain(64) };
	struct tally_export_stats_options so = { .mode = TALLY_FLUSH_FORCE };
	struct tally_stats_tree *t = NULL;
	struct tally_stats_group *g;
	struct tally_exporter *e = NULL;
	char *text;

	REQUIRE(tally_stats_tree_create(&t, schema, NS, &o) == 0);
	g = util_child(tally_stats_root(t), "g");
	for (unsigned int cpu = 0; g && cpu < 64; cpu++)
		CHECK_EQ_LONG(tally_stats_mod_cpu(g, cpu, 2, cpu + 1), 0);
	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_stats(e, t, &so), 0);
	text = e ? export_text(e) : NULL;
	if (CHECK(text))
		CHECK(has_line(text, "tally_hier_pgfault_total{group=\"/\"} "
				     "2080"));
	free(text);
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
	tally_domain_destroy(o.domain);
}

/*
 * A memory tree: usage, peak, limits and events of every live group, in
 * both formats, accepted by both parsers; a destroyed group disappears
 * while its charge stays in its parent's usage.
 */
TEST(a_memory_tree_exports_usage_limits_and_events_that_parsers_accept)
{
	struct tally_memcg_tree *t = NULL;
	struct tally_memcg *a = NULL, *b = NULL;
	struct tally_export_options po = { .format = TALLY_EXPORT_PROMETHEUS };
	struct tally_export_options oo = { .format = TALLY_EXPORT_OPENMETRICS };
	struct tally_export_stats_options so = { .prefix = "tally_memory_stat",
						 .mode = TALLY_FLUSH_FORCE };
	struct tally_exporter *pe = NULL, *oe = NULL;
	char *ptext = NULL, *otext = NULL, out[16384];

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_create(tally_memcg_root(t), "a", &a), 0);
	CHECK_EQ_LONG(tally_memcg_create(a, "b", &b), 0);
	REQUIRE(a && b);
	CHECK_EQ_LONG(tally_memcg_set_limit(b, TALLY_MEMCG_MAX, 8192), 0);
	CHECK_EQ_LONG(tally_memcg_charge(b, 8192, 0), 0);
	CHECK_EQ_LONG(tally_memcg_charge(b, 1, TALLY_MEMCG_NORECLAIM),
		      -ENOMEM);
	CHECK_EQ_LONG(tally_memcg_charge(a, 4096, 0), 0);
	CHECK_EQ_LONG(tally_memcg_stat_mod(b, TALLY_MEMCG_ANON, 8192), 0);

	CHECK_EQ_LONG(tally_exporter_create(&pe, &po), 0);
	CHECK_EQ_LONG(tally_exporter_create(&oe, &oo), 0);
	REQUIRE(pe && oe);
	CHECK_EQ_LONG(tally_exporter_add_memcg(pe, t, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_memcg(pe, t, NULL), -EEXIST);
	CHECK_EQ_LONG(tally_exporter_add_stats(pe, tally_memcg_stats_tree(t),
					       &so), 0);
	CHECK_EQ_LONG(tally_exporter_add_memcg(oe, t, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_memcg(NULL, t, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_exporter_add_memcg(oe, NULL, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_exporter_add_memcg(oe, t,
		&(struct tally_export_memcg_options){ .prefix = "9x" }),
		-EINVAL);

	/* memory.current counts stocks, as the kernel's: empty them. */
	CHECK_EQ_LONG(tally_memcg_drain(tally_memcg_root(t)), 0);
	ptext = export_text(pe);
	otext = export_text(oe);
	if (CHECK(ptext && otext)) {
		CHECK(has_line(ptext, "tally_memory_current_bytes{group=\"/\"} "
				      "12288"));
		CHECK(has_line(ptext, "tally_memory_current_bytes"
				      "{group=\"/a/b\"} 8192"));
		CHECK(has_line(ptext, "tally_memory_max_bytes{group=\"/a/b\"} "
				      "8192"));
		CHECK(has_line(ptext, "tally_memory_max_bytes{group=\"/a\"} "
				      "+Inf"));
		CHECK(has_line(ptext, "tally_memory_events_max_total"
				      "{group=\"/\"} 1"));
		CHECK(has_line(ptext, "tally_memory_events_local_max_total"
				      "{group=\"/\"} 0"));
		CHECK(has_line(ptext, "tally_memory_events_local_max_total"
				      "{group=\"/a/b\"} 1"));
		CHECK(has_line(ptext, "tally_memory_stat_hier_anon"
				      "{group=\"/a\"} 8192"));
		if (have_promtool())
			CHECK(promtool_accepts(ptext));
		else
			CHECK(!"promtool is needed");
		if (have_python_parser()) {
			CHECK_EQ_LONG(python_parse(otext, out, sizeof(out)), 0);
			CHECK(strstr(out, "tally_memory_events_max counter - "
					  "tally_memory_events_max_total "
					  "2f612f62 1\n"));
			CHECK(strstr(out, "tally_memory_current_bytes gauge "
					  "bytes tally_memory_current_bytes "
					  "2f61 12288\n"));
		} else {
			CHECK(!"the python parser is needed");
		}
	}
	free(ptext);
	CHECK_EQ_LONG(tally_memcg_uncharge(b, 8192), 0);
	CHECK_EQ_LONG(tally_memcg_destroy(b), 0);
	CHECK_EQ_LONG(tally_memcg_drain(tally_memcg_root(t)), 0);
	ptext = export_text(pe);
	if (CHECK(ptext)) {
		CHECK(!strstr(ptext, "group=\"/a/b\""));
		CHECK(has_line(ptext, "tally_memory_current_bytes"
				      "{group=\"/a\"} 4096"));
		/* The destroyed group's local events are its parent's now. */
		CHECK(has_line(ptext, "tally_memory_events_local_max_total"
				      "{group=\"/a\"} 1"));
	}
	free(ptext);
	free(otext);
	CHECK_EQ_LONG(tally_memcg_uncharge(a, 4096), 0);
	tally_exporter_destroy(pe);
	tally_exporter_destroy(oe);
	tally_memcg_tree_destroy(t);
}

/*
 * Prometheus sets instance and job at scrape time (the target's address,
 * the job's name) and renames clashing labels of the exposition to
 * exported_instance and exported_job: as constant labels they are refused,
 * whatever the format, and no export ever holds them.
 */
TEST(instance_and_job_are_refused_as_constant_labels)
{
	static const char *const reserved[] = { "instance", "job" };
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e = NULL;
	char *text;

	REQUIRE(t);
	populate(t);
	for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
		struct tally_export_label l[2] = {
			{ "host", "web-1" }, { reserved[i], "x" },
		};
		struct tally_export_options o = { .labels = l,
						  .nr_labels = 2 };

		CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
		o.format = TALLY_EXPORT_OPENMETRICS;
		l[0] = l[1];
		o.nr_labels = 1;
		CHECK_EQ_LONG(tally_exporter_create(&e, &o), -EINVAL);
		CHECK(e == NULL);
	}
	/* Names that only contain them are a program's own. */
	e = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	text = e ? export_text(e) : NULL;
	if (CHECK(text)) {
		CHECK(!strstr(text, "instance="));
		CHECK(!strstr(text, "job="));
		CHECK(has_line(text, "tally_accuracy_bound{host=\"host-1:9100\","
				     "pid=\"%d\"} 0", (int)getpid()));
	}
	free(text);
	tally_exporter_destroy(e);
	{
		struct tally_export_label l = { "instance_name", "x" };
		struct tally_export_options o = { .labels = &l,
						  .nr_labels = 1 };

		e = NULL;
		CHECK_EQ_LONG(tally_exporter_create(&e, &o), 0);
		tally_exporter_destroy(e);
	}
	tally_stats_tree_destroy(t);
}

/*
 * A limit of TALLY_MEMCG_UNLIMITED is +Inf in both formats (a ratio of
 * usage over it is then 0, not a tiny fraction of 8 EiB), for max and
 * high of a group without limits, for the root's, and for min and low set
 * to protect everything; set limits stay integers.  promtool and the
 * strict OpenMetrics parser read +Inf back as infinity.
 */
TEST(unlimited_memory_limits_are_plus_inf_in_both_formats)
{
	struct tally_memcg_tree *t = NULL;
	struct tally_memcg *a = NULL, *b = NULL;
	struct tally_export_options oo = { .format = TALLY_EXPORT_OPENMETRICS };
	struct tally_exporter *pe = NULL, *oe = NULL;
	char *ptext = NULL, *otext = NULL, out[16384];
	static const char *const cols[] = { "min", "low", "high", "max" };

	REQUIRE(tally_memcg_tree_create(&t, NULL) == 0);
	CHECK_EQ_LONG(tally_memcg_create(tally_memcg_root(t), "a", &a), 0);
	CHECK_EQ_LONG(tally_memcg_create(a, "b", &b), 0);
	REQUIRE(a && b);
	CHECK_EQ_LONG(tally_memcg_set_limit(b, TALLY_MEMCG_MAX, 1 << 20), 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(b, TALLY_MEMCG_HIGH, 1 << 19), 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(b, TALLY_MEMCG_MIN,
					    TALLY_MEMCG_UNLIMITED), 0);
	CHECK_EQ_LONG(tally_memcg_set_limit(b, TALLY_MEMCG_LOW,
					    TALLY_MEMCG_UNLIMITED), 0);
	CHECK_EQ_LONG(tally_exporter_create(&pe, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_create(&oe, &oo), 0);
	REQUIRE(pe && oe);
	CHECK_EQ_LONG(tally_exporter_add_memcg(pe, t, NULL), 0);
	CHECK_EQ_LONG(tally_exporter_add_memcg(oe, t, NULL), 0);
	ptext = export_text(pe);
	otext = export_text(oe);
	if (CHECK(ptext && otext)) {
		CHECK(!strstr(ptext, "9223372036854775807"));
		CHECK(!strstr(otext, "9223372036854775807"));
		for (size_t i = 0; i < ARRAY_SIZE(cols); i++) {
			/* The root has no limit and no protection. */
			CHECK(has_line(ptext, "tally_memory_%s_bytes"
					      "{group=\"/\"} %s", cols[i],
				       i < 2 ? "0" : "+Inf"));
			CHECK(has_line(ptext, "tally_memory_%s_bytes"
					      "{group=\"/a\"} %s", cols[i],
				       i < 2 ? "0" : "+Inf"));
			CHECK(has_line(otext, "tally_memory_%s_bytes"
					      "{group=\"/a\"} %s", cols[i],
				       i < 2 ? "0" : "+Inf"));
		}
		CHECK(has_line(ptext, "tally_memory_min_bytes{group=\"/a/b\"} "
				      "+Inf"));
		CHECK(has_line(ptext, "tally_memory_low_bytes{group=\"/a/b\"} "
				      "+Inf"));
		CHECK(has_line(ptext, "tally_memory_high_bytes{group=\"/a/b\"} "
				      "524288"));
		CHECK(has_line(otext, "tally_memory_max_bytes{group=\"/a/b\"} "
				      "1048576"));
		if (have_promtool())
			CHECK(promtool_accepts(ptext));
		else
			CHECK(!"promtool is needed");
		if (have_python_parser()) {
			CHECK_EQ_LONG(python_parse(otext, out, sizeof(out)), 0);
			CHECK(strstr(out, "tally_memory_max_bytes gauge bytes "
					  "tally_memory_max_bytes 2f61 +Inf\n"));
			CHECK(strstr(out, "tally_memory_max_bytes gauge bytes "
					  "tally_memory_max_bytes 2f612f62 "
					  "1048576\n"));
			CHECK(strstr(out, "tally_memory_low_bytes gauge bytes "
					  "tally_memory_low_bytes 2f612f62 "
					  "+Inf\n"));
		} else {
			CHECK(!"the python parser is needed");
		}
	}
	free(ptext);
	free(otext);
	tally_exporter_destroy(pe);
	tally_exporter_destroy(oe);
	tally_memcg_tree_destroy(t);
}

/*
 * tally_export_buffer_as() writes either format whatever the exporter's
 * own: the same text as an exporter created with that format, with the
 * snprintf contract of tally_export_buffer().
 */
TEST(buffer_as_writes_either_format_whatever_the_options)
{
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *pe, *oe;
	char *ptext, *otext, *as_p = NULL, *as_o = NULL, small[16] = "x";
	long n;

	REQUIRE(t);
	populate(t);
	pe = new_exporter(TALLY_EXPORT_PROMETHEUS, t, TALLY_FLUSH_FORCE);
	oe = new_exporter(TALLY_EXPORT_OPENMETRICS, t, TALLY_FLUSH_FORCE);
	REQUIRE(pe && oe);
	ptext = export_text(pe);
	otext = export_text(oe);
	REQUIRE(ptext && otext);
	as_p = calloc(1, strlen(ptext) + 1);
	as_o = calloc(1, strlen(otext) + 1);
	REQUIRE(as_p && as_o);
	CHECK_EQ_LONG(tally_export_buffer_as(oe, TALLY_EXPORT_PROMETHEUS, as_p,
					     strlen(ptext) + 1),
		      (long)strlen(ptext));
	CHECK_EQ_LONG(tally_export_buffer_as(pe, TALLY_EXPORT_OPENMETRICS,
					     as_o, strlen(otext) + 1),
		      (long)strlen(otext));
	CHECK(!strcmp(as_p, ptext));
	CHECK(!strcmp(as_o, otext));
	CHECK(strstr(as_o, "# EOF\n") && !strstr(as_p, "# EOF"));
	/* The exporter's own format is untouched by it. */
	free(ptext);
	ptext = export_text(pe);
	CHECK(ptext && !strstr(ptext, "# EOF"));
	n = tally_export_buffer_as(pe, TALLY_EXPORT_OPENMETRICS, small,
				   sizeof(small));
	CHECK_EQ_LONG(n, (long)strlen(otext));
	CHECK_EQ_LONG(small[0], 0);
	CHECK_EQ_LONG(tally_export_buffer_as(pe, TALLY_EXPORT_OPENMETRICS,
					     NULL, 0), (long)strlen(otext));
	CHECK_EQ_LONG(tally_export_buffer_as(pe, (enum tally_export_format)2,
					     small, sizeof(small)), -EINVAL);
	CHECK_EQ_LONG(tally_export_buffer_as(NULL, TALLY_EXPORT_PROMETHEUS,
					     small, sizeof(small)), -EINVAL);
	CHECK_EQ_LONG(tally_export_buffer_as(pe, TALLY_EXPORT_PROMETHEUS,
					     NULL, 1), -EINVAL);
	free(ptext);
	free(otext);
	free(as_p);
	free(as_o);
	tally_exporter_destroy(pe);
	tally_exporter_destroy(oe);
	tally_stats_tree_destroy(t);
}

/*
 * @text as an extended regular expression matching it whole into @re
 * (@len bytes): the placeholders of docs/export.md's table of families
 * (PREFIX, STAT, EVENT, _UNIT) stand for any name, the rest for itself.
 */
static void doc_regex(const char *text, size_t n, bool name, char *re,
		      size_t len)
{
	static const struct {
		const char *word, *re;
	} holders[] = {
		{ "PREFIX", "[a-zA-Z_][a-zA-Z0-9_]*" },
		{ "STAT", "[a-z0-9_]+" },
		{ "EVENT", "[a-z_]+" },
		{ "_UNIT", "(_[a-z0-9_]+)?" },
	};
	size_t o = 0;

	re[o++] = '^';
	for (size_t i = 0; i < n && o + 32 < len;) {
		size_t k;

		for (k = 0; k < ARRAY_SIZE(holders); k++)
			if (!strncmp(text + i, holders[k].word,
				     strlen(holders[k].word)))
				break;
		if (k < ARRAY_SIZE(holders)) {
			o += (size_t)snprintf(re + o, len - o, "%s",
					      holders[k].re);
			i += strlen(holders[k].word);
			continue;
		}
		if (text[i] == '\\' && text[i + 1] == '|')
			i++;	/* a table cell's escaped '|' */
		if (strchr(".[]()*+?{}|^$\\", text[i]))
			re[o++] = '\\';
		re[o++] = text[i++];
	}
	/* A counter's HELP line names it with _total. */
	snprintf(re + o, len - o, "%s$", name ? "(_total)?" : "");
}

/* Whether @pattern (regex_t-ready, see doc_regex()) matches @s whole. */
static bool doc_match(const char *pattern, const char *s)
{
	regex_t re;
	bool ok;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
		return false;
	ok = !regexec(&re, s, 0, NULL, 0);
	regfree(&re);
	return ok;
}

/*
 * The definition of family @name in the table of @doc (rows
 * "| `NAME` | DEFINITION |", the first whose name matches) as a regex
 * into @re; false when no row names it.
 */
static bool doc_definition(const char *doc, const char *name, char *re,
			   size_t len)
{
	for (const char *row = strstr(doc, "\n| `"); row;
	     row = strstr(row + 1, "\n| `")) {
		const char *pat = row + 4, *end = strchr(pat, '`');
		const char *def, *def_end;

		if (!end || strncmp(end, "` | ", 4))
			continue;
		doc_regex(pat, (size_t)(end - pat), true, re, len);
		if (!doc_match(re, name))
			continue;
		def = end + 4;
		def_end = strstr(def, " |\n");
		if (!def_end)
			return false;
		doc_regex(def, (size_t)(def_end - def), false, re, len);
		return true;
	}
	return false;
}

/*
 * Every HELP line of an export, of a memory tree, its memory.stat and a
 * statistics tree with units and events, is the definition docs/export.md
 * gives its family.
 */
TEST(every_help_line_is_the_definition_in_the_docs)
{
	struct tally_export_stats_options so = { .prefix = "tally_memory_stat" };
	struct tally_export_stats_options ao = { .prefix = "app",
						 .units = units };
	struct tally_memcg_tree *mt = NULL;
	struct tally_stats_tree *t = new_tree();
	struct tally_exporter *e = NULL;
	char *doc = slurp(util_doc("export.md"));
	static char out[65536];
	char re[2048];
	int lines = 0;

	REQUIRE(doc && t);
	REQUIRE(tally_memcg_tree_create(&mt, NULL) == 0);
	REQUIRE(tally_exporter_create(&e, NULL) == 0);
	REQUIRE(tally_exporter_add_memcg(e, mt, NULL) == 0);
	REQUIRE(tally_exporter_add_stats(e, tally_memcg_stats_tree(mt),
					 &so) == 0);
	REQUIRE(tally_exporter_add_stats(e, t, &ao) == 0);
	REQUIRE(tally_export_buffer(e, out, sizeof(out)) > 0);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char *name = line + strlen("# HELP "), *help;

		if (strncmp(line, "# HELP ", 7))
			continue;
		help = strchr(name, ' ');
		REQUIRE(help);
		*help++ = 0;
		lines++;
		if (!CHECK(doc_definition(doc, name, re, sizeof(re))))
			harness_log("%s: no row of docs/export.md's table "
				    "names it", name);
		else if (!CHECK(doc_match(re, help)))
			harness_log("%s: HELP \"%s\" is not the docs' "
				    "definition /%s/", name, help, re);
	}
	/* 6 memory files, 10 events, 2 x 14 memory.stat and 2 x 4 stats,
	 * 2 accuracy bounds. */
	CHECK_EQ_LONG(lines, 6 + 10 + 28 + 8 + 2);
	tally_exporter_destroy(e);
	tally_memcg_tree_destroy(mt);
	tally_stats_tree_destroy(t);
	free(doc);
}
