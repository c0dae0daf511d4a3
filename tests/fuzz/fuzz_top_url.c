// SPDX-License-Identifier: MIT
/*
 * fuzz_top_url.c - `tally top`'s URL check (parse_url() of
 * cli/top_source.c) on any string.  Properties of a URL accepted: the
 * host is not empty and, with the port, the authority and the path, made
 * of printable ASCII without a space (they go into the request line and
 * the Host header: no CR, LF or space may split them); the port is 1 to
 * 65535 in decimal; the path starts with '/' and holds at most MAX_URL
 * bytes and no '#'; the authority is the host (bracketed when IPv6),
 * then ":PORT" when the URL names one.  A refusal gives a reason.
 */
#include <string.h>

#include "fuzz.h"
#include "top.h"

volatile sig_atomic_t quit_asked, resized;

static void check_token(const char *s)
{
	for (; *s; s++)
		CHECK(*s > 0x20 && *s < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = strndup((const char *)data, size);
	struct url u;
	const char *why;
	unsigned long port;
	size_t hl;

	if (!s)
		return 0;
	(void)looks_like_url(s);
	why = parse_url(s, &u);
	if (why) {
		CHECK(*why);
		free(s);
		return 0;
	}
	CHECK(u.host[0]);
	check_token(u.host);
	check_token(u.port);
	check_token(u.authority);
	check_token(u.path);
	CHECK(strspn(u.port, "0123456789") == strlen(u.port));
	port = strtoul(u.port, NULL, 10);
	CHECK(port >= 1 && port <= 65535);
	CHECK(u.path[0] == '/' && strlen(u.path) <= MAX_URL);
	CHECK(!strchr(u.path, '#'));
	hl = strlen(u.host);
	if (u.authority[0] == '[')
		CHECK(!strncmp(u.authority + 1, u.host, hl) &&
		      u.authority[hl + 1] == ']');
	else
		CHECK(!strncmp(u.authority, u.host, hl));
	free(s);
	return 0;
}
