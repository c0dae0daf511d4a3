// SPDX-License-Identifier: MIT
/*
 * fuzz_accept.c - the HTTP endpoint's content negotiation (negotiate() of
 * src/http/export_http.c, compiled in: it is the file's own) on any
 * Accept header.  Properties: the answer is one of the two formats; the
 * OpenMetrics format only when the header names an "application/" type
 * (any case); a range of q=0 appended changes nothing (it is not
 * acceptable); "text/plain" appended at q=0.001 still gets OpenMetrics
 * when it got it with a q above 0.001 (a lower q never wins; at an equal
 * q the more specific range does, as RFC 9110 says).
 */
#include "../../src/http/export_http.c"

#include "fuzz.h"

/* The highest q (thousandths) of @h's acceptable OpenMetrics ranges. */
static int best_openmetrics_q(const char *h)
{
	int best = 0;

	for (const char *s = h; s && *s;) {
		const char *comma = strchr(s, ',');
		struct range r = parse_range(s, comma ? comma : s + strlen(s));

		if (r.kind == RANGE_OPENMETRICS && r.q > best)
			best = r.q;
		s = comma ? comma + 1 : NULL;
	}
	return best;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = strndup((const char *)data, size), *more;
	enum tally_export_format f;
	size_t n;

	if (!h)
		return 0;
	n = strlen(h);
	f = negotiate(h);
	CHECK(f == TALLY_EXPORT_PROMETHEUS || f == TALLY_EXPORT_OPENMETRICS);
	if (f == TALLY_EXPORT_OPENMETRICS)
		CHECK(strcasestr(h, "application/"));
	more = malloc(n + 64);
	CHECK(more);
	snprintf(more, n + 64, "%s,text/plain;q=0", h);
	CHECK(negotiate(more) == f);
	snprintf(more, n + 64, "%s,application/openmetrics-text;q=0", h);
	CHECK(negotiate(more) == f);
	if (f == TALLY_EXPORT_OPENMETRICS && best_openmetrics_q(h) > 1) {
		snprintf(more, n + 64, "%s,text/plain;q=0.001", h);
		CHECK(negotiate(more) == f);
	}
	free(more);
	free(h);
	return 0;
}
