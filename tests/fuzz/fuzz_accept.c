// SPDX-License-Identifier: MIT
/*
 * fuzz_accept.c - the HTTP endpoint's content negotiation (negotiate() of
 * src/http/export_http.c, compiled in: it is the file's own) on any
 * Accept header.  Properties: the answer is one of the two formats; the
 * OpenMetrics format only when the header names an "application/" type
 * (any case); a range of q=0 appended changes nothing (it is not
 * acceptable); a header of one range "text/plain" appended at q=0.001
 * still gets OpenMetrics when it got it (a lower q never wins).
 */
#include "../../src/http/export_http.c"

#include "fuzz.h"

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
	if (f == TALLY_EXPORT_OPENMETRICS) {
		snprintf(more, n + 64, "%s,text/plain;q=0.001", h);
		CHECK(negotiate(more) == f);
	}
	free(more);
	free(h);
	return 0;
}
