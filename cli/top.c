// SPDX-License-Identifier: MIT
/*
 * top.c - `tally top URL|FILE`: a running program's memory groups and
 * statistics groups as trees, from its Prometheus text (0.0.4) or
 * OpenMetrics exposition, refreshed every few seconds: what systemd-cgtop
 * is for cgroups.
 *
 * A refresh reads the whole exposition (a regular file, or the body of an
 * HTTP/1.0 GET over a socket: no redirect followed, at most MAX_EXPOSITION
 * bytes, within --timeout seconds), parses every line strictly, keeps the
 * samples that carry a group="PATH" label and that tally/export.h's
 * families name, and builds one tree per source:
 *
 *   - a memory tree: PREFIX_memory_{current,peak,min,low,high,max}_bytes
 *     and PREFIX_memory_events_EVENT_total (the hierarchical memory.events;
 *     the local ones are left out);
 *   - a statistics tree: PREFIX_hier_STAT (gauges) and PREFIX_hier_STAT_total
 *     (counters), the prefix being that of a PREFIX_accuracy_bound sample
 *     when there is one, else what precedes the first "_hier_".
 *
 * Everything a label brings (group names, stat names, the HTTP reason) is
 * printed through put_safe(): control characters, invalid UTF-8 and text
 * direction marks are shown as \xNN escapes, and names are cut to their
 * column, so no byte of the exposition acts on the terminal.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include <tally/version.h>

#include "../tool/args.h"
#include "cli.h"


/* Exit status: the source was read but holds no exposition we can show. */
#define TOP_EXIT_BAD_INPUT 3

#define MAX_EXPOSITION (32ul << 20)	/* bytes of an exposition (HTTP body) */
#define MAX_HEADER (64ul << 10)	/* bytes of an HTTP response's header */
#define MAX_URL 2048u
#define MAX_DEPTH 256u		/* deepest group shown (the root is 0) */
#define DEFAULT_WIDTH 120u	/* columns without a terminal or $COLUMNS */
#define NAME_COLS_MAX 40u	/* widest group column */
#define VALUE_COLS 8u		/* a value's column */
#define STAT_COLS_MAX 14u	/* widest stat column (its header cut) */
#define MAX_ERROR 512u

/* The limits a memory group's line shows; >= 2^63 or +Inf is no limit. */
#define UNLIMITED_FROM 9223372036854775807.0

enum sort_key { SORT_USAGE, SORT_NAME };

struct top_args {
	double interval, timeout;
	enum sort_key sort;
	unsigned int depth;
	bool once;
	const char *source;
};

/* --- text buffers --------------------------------------------------------- */

/* A growing text; a failed growth sets @failed and later writes drop. */
struct text {
	char *p;
	size_t len, cap;
	bool failed;
};

static bool text_reserve(struct text *t, size_t n)
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
static void text_mem(struct text *t, const void *s, size_t n)
{
	if (!text_reserve(t, n))
		return;
	if (n)
		memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_str(struct text *t, const char *s)
{
	text_mem(t, s, strlen(s));
}

static void text_chars(struct text *t, char c, size_t n)
{
	if (!text_reserve(t, n))
		return;
	memset(t->p + t->len, c, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_free(struct text *t)
{
	free(t->p);
	*t = (struct text){ 0 };
}

/* --- safe output ---------------------------------------------------------- */

static bool utf8_terminal;	/* the locale's character set is UTF-8 */

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
static size_t put_safe(struct text *t, const char *s, size_t n, size_t max)
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
static size_t fit_columns(const char *s, size_t n, size_t max)
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

/* A message into @err (MAX_ERROR bytes); @what is shown safely. */
static void errorf(char *err, const char *what, size_t what_len,
		   const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void errorf(char *err, const char *what, size_t what_len,
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

/* --- reading a source ----------------------------------------------------- */

/**
 * struct url - an http:// URL, checked.
 * @host: the host as written ("127.0.0.1", "localhost", "::1" unbracketed).
 * @port: the port, decimal.
 * @authority: host[:port] as the URL has it, for the Host header.
 * @path: the path and query ("/metrics" when the URL has none).
 */
struct url {
	char host[256];
	char port[6];
	char authority[270];
	char path[MAX_URL + 1];
};

struct source {
	const char *arg;	/* as given */
	bool http;
	struct url url;
};

static bool is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 3986 pchar, '/' and '?' (percent-escapes checked by the caller). */
static bool is_path_char(int c)
{
	return is_alpha(c) || is_digit(c) || (c && strchr("-._~!$&'()*+,;=:@/?%", c));
}

/* Does @s start with "SCHEME://"? */
static bool looks_like_url(const char *s)
{
	size_t i = 0;

	if (!is_alpha(s[0]))
		return false;
	while (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' ||
	       s[i] == '-' || s[i] == '.')
		i++;
	return !strncmp(s + i, "://", 3);
}

/*
 * Check @s, an http://HOST[:PORT][/PATH] URL: HOST a name of letters,
 * digits, '-' and '.', or an IPv4 address, or an IPv6 address in
 * brackets; PORT 1 to 65535; PATH of RFC 3986's characters.  Returns
 * NULL, or why it is refused.
 */
static const char *parse_url(const char *s, struct url *u)
{
	const char *p, *host, *end;
	size_t n;

	if (strncasecmp(s, "http://", 7))
		return strncasecmp(s, "https://", 8)
			       ? "only http:// URLs are read"
			       : "https is not supported: read the endpoint "
				 "over http:// (on loopback) or its textfile";
	host = p = s + 7;
	n = strcspn(host, "/?#");
	if (memchr(host, '@', n))
		return "user names and passwords in URLs are not supported";
	if (*p == '[') {
		unsigned char addr[16];

		end = memchr(p, ']', n);
		if (!end || (size_t)(end - p - 1) >= sizeof(u->host))
			return "an IPv6 address must be in brackets: "
			       "http://[::1]:PORT/PATH";
		memcpy(u->host, p + 1, (size_t)(end - p - 1));
		u->host[end - p - 1] = '\0';
		if (inet_pton(AF_INET6, u->host, addr) != 1)
			return "bad IPv6 address";
		p = end + 1;
	} else {
		while (is_alpha(*p) || is_digit(*p) || *p == '-' || *p == '.')
			p++;
		n = (size_t)(p - host);
		if (n == 0)
			return "no host";
		if (n >= sizeof(u->host) || host[0] == '.' ||
		    host[0] == '-' || memmem(host, n, "..", 2))
			return "bad host name";
		memcpy(u->host, host, n);
		u->host[n] = '\0';
	}
	n = (size_t)(p - host);
	memcpy(u->authority, host, n);
	u->authority[n] = '\0';
	strcpy(u->port, "80");
	if (*p == ':') {
		unsigned long port = 0;
		const char *d = ++p;

		while (is_digit(*p) && p - d < 6)
			port = port * 10 + (unsigned long)(*p++ - '0');
		if (p == d || p - d > 5 || port == 0 || port > 65535)
			return "bad port (1 to 65535)";
		snprintf(u->port, sizeof(u->port), "%lu", port);
		n = (size_t)(p - host);
		if (n >= sizeof(u->authority))
			return "bad host name";
		memcpy(u->authority, host, n);
		u->authority[n] = '\0';
	}
	if (!*p) {
		strcpy(u->path, "/metrics");
		return NULL;
	}
	if (*p != '/')
		return "bad character after the host";
	if (strlen(p) > MAX_URL)
		return "path too long";
	for (const char *c = p; *c; c++) {
		if (*c == '#')
			return "a fragment (#...) is not sent to a server";
		if (!is_path_char((unsigned char)*c) ||
		    (*c == '%' && !(is_hex(c[1]) && is_hex(c[2]))))
			return "bad character in the path";
	}
	strcpy(u->path, p);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile sig_atomic_t quit_asked, resized;

/*
 * Wait for @events on @fd until @deadline (now_s()); 0, or -ETIMEDOUT,
 * -EINTR after a quit signal, a negative errno.
 */
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		double left = deadline - now_s();
		int r;

		if (quit_asked)
			return -EINTR;
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* A socket connected to @u's host, or a negative errno (*@why set). */
static int http_connect(const struct url *u, double deadline,
			const char **why)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	int fd = -1, err = -EHOSTUNREACH, gai;

	*why = NULL;
	gai = getaddrinfo(u->host, u->port, &hints, &res);
	if (gai) {
		*why = gai_strerror(gai);
		return -ENOENT;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int soerr = 0;
		socklen_t len = sizeof(soerr);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
				   SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		err = -errno;
		if (err == -EINPROGRESS) {
			err = wait_fd(fd, POLLOUT, deadline);
			if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR,
					       &soerr, &len))
				err = -errno;
			if (!err)
				err = -soerr;
			if (!err)
				break;
		}
		close(fd);
		fd = -1;
		if (err == -ETIMEDOUT || err == -EINTR)
			break;
	}
	freeaddrinfo(res);
	return fd >= 0 ? fd : err;
}

/* The value of header @name in @h (@n bytes of "Name: value\r\n" lines). */
static const char *header(const char *h, size_t n, const char *name,
			  size_t *len)
{
	size_t k = strlen(name);

	for (const char *l = h, *end = h + n; l < end;) {
		const char *eol = memchr(l, '\n', (size_t)(end - l));

		if (!eol)
			eol = end;
		if ((size_t)(eol - l) > k && l[k] == ':' &&
		    !strncasecmp(l, name, k)) {
			const char *v = l + k + 1;
			const char *ve = eol;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' ||
					  ve[-1] == '\t'))
				ve--;
			*len = (size_t)(ve - v);
			return v;
		}
		l = eol + 1;
	}
	return NULL;
}

/*
 * Check the response in @t (status line, header, body) and leave only
 * the body in it.  Returns 0 or CLI_EXIT_FAILED with @err set.
 */
static int http_response(struct text *t, const struct source *src,
			 bool *openmetrics, char *err)
{
	const char *a = src->arg, *body, *v;
	size_t alen = strlen(a), hlen, vlen, cl_len;
	unsigned long code;

	body = t->len ? memmem(t->p, t->len, "\r\n\r\n", 4) : NULL;
	if (!body) {
		errorf(err, a, alen, "%s", t->len < MAX_HEADER
			? "not an HTTP response (no end of header)"
			: "HTTP header over 64 KiB");
		return CLI_EXIT_FAILED;
	}
	hlen = (size_t)(body - t->p) + 2;
	body += 4;
	if (hlen > MAX_HEADER) {
		errorf(err, a, alen, "HTTP header over 64 KiB");
		return CLI_EXIT_FAILED;
	}
	if (strncmp(t->p, "HTTP/1.", 7) || !is_digit(t->p[7]) ||
	    t->p[8] != ' ' || !is_digit(t->p[9]) || !is_digit(t->p[10]) ||
	    !is_digit(t->p[11]) || (t->p[12] != ' ' && t->p[12] != '\r')) {
		errorf(err, a, alen, "not an HTTP/1.x response");
		return CLI_EXIT_FAILED;
	}
	code = (unsigned long)(t->p[9] - '0') * 100 +
	       (unsigned long)(t->p[10] - '0') * 10 +
	       (unsigned long)(t->p[11] - '0');
	if (code != 200) {
		struct text m = { 0 };
		const char *reason = t->p + 12;
		size_t rlen = strcspn(reason, "\r\n");

		text_str(&m, "");
		if (rlen > 1) {
			text_str(&m, " ");
			put_safe(&m, reason + 1, rlen - 1, 60);
		}
		if (code >= 300 && code < 400) {
			text_str(&m, ": redirects are not followed");
			if ((v = header(t->p, hlen, "Location", &vlen))) {
				text_str(&m, " (to ");
				put_safe(&m, v, vlen, 100);
				text_str(&m, ")");
			}
		}
		errorf(err, a, alen, "HTTP status %lu%s", code,
		       m.p ? m.p : "");
		text_free(&m);
		return CLI_EXIT_FAILED;
	}
	if (header(t->p, hlen, "Transfer-Encoding", &vlen)) {
		errorf(err, a, alen, "the server sent a Transfer-Encoding to "
		       "an HTTP/1.0 request");
		return CLI_EXIT_FAILED;
	}
	v = header(t->p, hlen, "Content-Encoding", &vlen);
	if (v && !(vlen == 8 && !strncasecmp(v, "identity", 8))) {
		errorf(err, a, alen, "compressed response (Content-Encoding), "
		       "which was not asked for");
		return CLI_EXIT_FAILED;
	}
	v = header(t->p, hlen, "Content-Type", &vlen);
	*openmetrics = v && vlen >= 26 &&
		       !strncasecmp(v, "application/openmetrics-text", 26);
	vlen = (size_t)(t->len - (size_t)(body - t->p));
	if (vlen > MAX_EXPOSITION) {
		errorf(err, a, alen, "response over %lu MiB",
		       MAX_EXPOSITION >> 20);
		return CLI_EXIT_FAILED;
	}
	if ((v = header(t->p, hlen, "Content-Length", &cl_len))) {
		unsigned long long cl = 0;
		size_t i;

		for (i = 0; i < cl_len && is_digit(v[i]) &&
			    cl < MAX_EXPOSITION * 2; i++)
			cl = cl * 10 + (unsigned long long)(v[i] - '0');
		if (i == 0 || i < cl_len) {
			errorf(err, a, alen, "bad Content-Length");
			return CLI_EXIT_FAILED;
		}
		if (cl != vlen) {
			errorf(err, a, alen, "%s response: Content-Length %llu,"
			       " %zu bytes received",
			       cl > vlen ? "truncated" : "overlong", cl, vlen);
			return CLI_EXIT_FAILED;
		}
	}
	memmove(t->p, body, vlen);
	t->len = vlen;
	t->p[vlen] = '\0';
	return 0;
}

/* GET the URL into @t; 0 or CLI_EXIT_FAILED with @err set. */
static int load_http(const struct source *src, double timeout,
		     struct text *t, bool *openmetrics, char *err)
{
	const struct url *u = &src->url;
	const char *a = src->arg, *why;
	size_t alen = strlen(a), off = 0;
	double deadline = now_s() + timeout;
	struct text req = { 0 };
	int fd, e;

	fd = http_connect(u, deadline, &why);
	if (fd < 0) {
		if (why)
			errorf(err, a, alen, "%s: %s", u->host, why);
		else if (fd == -ETIMEDOUT)
			errorf(err, a, alen, "no connection within %g s",
			       timeout);
		else
			errorf(err, a, alen, "%s", strerror(-fd));
		return CLI_EXIT_FAILED;
	}
	text_str(&req, "GET ");
	text_str(&req, u->path);
	text_str(&req, " HTTP/1.0\r\nHost: ");
	text_str(&req, u->authority);
	text_str(&req, "\r\nUser-Agent: tally-top/");
	text_str(&req, tally_version());
	text_str(&req, "\r\nAccept: application/openmetrics-text;"
		       "version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.5,"
		       "*/*;q=0.1\r\nConnection: close\r\n\r\n");
	e = req.failed ? -ENOMEM : 0;
	while (!e && off < req.len) {
		ssize_t w = send(fd, req.p + off, req.len - off, MSG_NOSIGNAL);

		if (w >= 0)
			off += (size_t)w;
		else if (errno == EAGAIN)
			e = wait_fd(fd, POLLOUT, deadline);
		else if (errno != EINTR)
			e = -errno;
	}
	text_free(&req);
	t->len = 0;
	while (!e) {
		ssize_t r;

		if (!text_reserve(t, 65536)) {
			e = -ENOMEM;
			break;
		}
		r = recv(fd, t->p + t->len, 65536, 0);
		if (r == 0)
			break;
		if (r > 0) {
			t->len += (size_t)r;
			t->p[t->len] = '\0';
			if (t->len > MAX_EXPOSITION + MAX_HEADER)
				e = -EFBIG;
		} else if (errno == EAGAIN) {
			e = wait_fd(fd, POLLIN, deadline);
		} else if (errno != EINTR) {
			e = -errno;
		}
	}
	close(fd);
	if (e == -ETIMEDOUT)
		errorf(err, a, alen, "no complete response within %g s "
		       "(--timeout)", timeout);
	else if (e == -EFBIG)
		errorf(err, a, alen, "response over %lu MiB", MAX_EXPOSITION >> 20);
	else if (e)
		errorf(err, a, alen, "%s", strerror(-e));
	if (e)
		return CLI_EXIT_FAILED;
	if (text_reserve(t, 1))
		t->p[t->len] = '\0';
	return http_response(t, src, openmetrics, err);
}

/* Read the file into @t; 0 or CLI_EXIT_FAILED with @err set. */
static int load_file(const struct source *src, struct text *t, char *err)
{
	const char *a = src->arg;
	size_t alen = strlen(a);
	struct stat st;
	int fd, e = 0;

	/* Non-blocking: opening a FIFO must not wait for a writer. */
	fd = open(a, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		e = errno;
	else if (fstat(fd, &st))
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	else if ((unsigned long long)st.st_size > MAX_EXPOSITION)
		e = EFBIG;
	t->len = 0;
	while (!e) {
		ssize_t r;

		if (!text_reserve(t, 65536)) {
			e = ENOMEM;
			break;
		}
		r = read(fd, t->p + t->len, 65536);
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			e = errno;
		if (r > 0)
			t->len += (size_t)r;
		if (t->len > MAX_EXPOSITION)
			e = EFBIG;
	}
	if (fd >= 0)
		close(fd);
	if (e == EINVAL)
		errorf(err, a, alen, "not a regular file (give a textfile "
		       "or an http:// URL)");
	else if (e == EFBIG)
		errorf(err, a, alen, "larger than %lu MiB", MAX_EXPOSITION >> 20);
	else if (e == ENOENT && strchr(a, ':'))
		errorf(err, a, alen, "%s (a URL starts with http://)",
		       strerror(e));
	else if (e)
		errorf(err, a, alen, "%s", strerror(e));
	if (e)
		return CLI_EXIT_FAILED;
	if (text_reserve(t, 1))
		t->p[t->len] = '\0';
	return 0;
}

/* --- parsing the exposition ---------------------------------------------- */

/* A sample with a group label; @name and @group point into the text. */
struct sample {
	const char *name, *group;
	size_t name_len, group_len;
	double value;
	size_t line;
};

/* A PREFIX_accuracy_bound sample. */
struct bound {
	const char *prefix;
	size_t len;
	double value;
};

struct exposition {
	struct sample *s;
	size_t nr, cap;
	struct bound *b;
	size_t nr_b, cap_b;
};

static void *grow_array(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;

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

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

/*
 * Parse @t (modified: label values are unescaped in place) into @x.
 * Returns 0, or TOP_EXIT_BAD_INPUT with @err set, or CLI_EXIT_FAILED
 * when memory runs out.
 */
static int parse_exposition(struct text *t, bool openmetrics,
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

/* --- the model: sections of trees ----------------------------------------- */

enum {
	MEM_CURRENT,
	MEM_PEAK,
	MEM_MIN,
	MEM_LOW,
	MEM_HIGH,
	MEM_MAX,
	MEM_NR_FIXED,	/* then one column per event */
};

static const char *const mem_suffix[MEM_NR_FIXED] = {
	"_memory_current_bytes", "_memory_peak_bytes", "_memory_min_bytes",
	"_memory_low_bytes", "_memory_high_bytes", "_memory_max_bytes",
};

static const char *const mem_header[MEM_NR_FIXED] = {
	"CURRENT", "PEAK", "MIN", "LOW", "HIGH", "MAX",
};

/* A column: a stat, or an event of a memory section. */
struct column {
	const char *name;	/* into the text */
	size_t len;
	bool bytes;		/* a stat whose name ends in "_bytes" */
	bool event;		/* a counter (its samples end in "_total") */
	double root;		/* its value at the root, for the ranking */
	bool nonzero;		/* non-zero in some group */
};

/* A group: @path points into the text; its parent's path is a prefix. */
struct node {
	const char *path;
	size_t path_len;
	const char *name;	/* the last component */
	size_t name_len;
	size_t parent;		/* SIZE_MAX for the root */
	unsigned int depth;
	size_t *kids;
	size_t nr_kids;
};

struct section {
	bool memory;
	const char *prefix;
	size_t prefix_len;
	struct column *cols;	/* memory: the events; stats: the stats */
	size_t nr_cols, cap_cols;
	struct node *nodes;
	size_t nr_nodes, cap_nodes;
	size_t *hash;		/* open addressing, SIZE_MAX empty */
	size_t hash_size;
	double *vals;		/* nr_nodes x (MEM_NR_FIXED +) nr_cols */
	double bound;		/* accuracy bound, NAN when none */
	const struct section *memory_of; /* memory.stat of that section */
};

struct model {
	struct section *secs;
	size_t nr_secs;
	size_t too_deep;	/* samples of groups deeper than MAX_DEPTH */
};

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nr_secs; i++) {
		struct section *s = &m->secs[i];

		for (size_t k = 0; k < s->nr_nodes; k++)
			free(s->nodes[k].kids);
		free(s->nodes);
		free(s->cols);
		free(s->hash);
		free(s->vals);
	}
	free(m->secs);
	*m = (struct model){ 0 };
}

static size_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return (size_t)h;
}

static size_t nr_value_cols(const struct section *s)
{
	return (s->memory ? MEM_NR_FIXED : 0) + s->nr_cols;
}

/* The slot of @path in @s's hash: its node's, or an empty one. */
static size_t *hash_slot(struct section *s, const char *path, size_t n)
{
	size_t mask = s->hash_size - 1;

	for (size_t i = hash_bytes(path, n) & mask;; i = (i + 1) & mask) {
		size_t k = s->hash[i];

		if (k == SIZE_MAX || (s->nodes[k].path_len == n &&
				      !memcmp(s->nodes[k].path, path, n)))
			return &s->hash[i];
	}
}

static bool hash_grow(struct section *s)
{
	size_t size = s->hash_size ? s->hash_size * 2 : 64;
	size_t *h = malloc(size * sizeof(*h));

	if (!h)
		return false;
	memset(h, 0xff, size * sizeof(*h));
	free(s->hash);
	s->hash = h;
	s->hash_size = size;
	for (size_t k = 0; k < s->nr_nodes; k++)
		*hash_slot(s, s->nodes[k].path, s->nodes[k].path_len) = k;
	return true;
}

/* find_node()'s answers besides a node's index. */
#define NODE_BAD_PATH SIZE_MAX
#define NODE_NO_MEMORY (SIZE_MAX - 1)
#define NODE_TOO_DEEP (SIZE_MAX - 2)

/*
 * The node of @path, at @depth (its number of names), created with its
 * ancestors when new; its index or NODE_NO_MEMORY.
 */
static size_t add_node(struct section *s, const char *path, size_t n,
		       unsigned int depth)
{
	size_t *slot, parent = SIZE_MAX, k;
	const char *slash = path;
	struct node *nodes;

	if (s->hash_size && *(slot = hash_slot(s, path, n)) != SIZE_MAX)
		return *slot;
	if (depth) {
		slash = path + n - 1;
		while (*slash != '/')
			slash--;
		parent = add_node(s, path, slash == path ? 1 :
				  (size_t)(slash - path), depth - 1);
		if (parent == NODE_NO_MEMORY)
			return parent;
	}
	/* At most half full, counting the ancestors just added. */
	if (2 * (s->nr_nodes + 1) > s->hash_size && !hash_grow(s))
		return NODE_NO_MEMORY;
	slot = hash_slot(s, path, n);
	nodes = grow_array(s->nodes, &s->cap_nodes, s->nr_nodes + 1,
			   sizeof(*nodes));
	if (!nodes)
		return NODE_NO_MEMORY;
	s->nodes = nodes;
	k = s->nr_nodes++;
	nodes[k] = (struct node){
		.path = path,
		.path_len = n,
		.name = depth ? slash + 1 : path,
		.name_len = depth ? (size_t)(path + n - slash - 1) : 1,
		.parent = parent,
		.depth = depth,
	};
	*slot = k;
	return k;
}

/*
 * The node of @path, created with its ancestors when new: its index, or
 * NODE_BAD_PATH with *@why set, NODE_TOO_DEEP (deeper than MAX_DEPTH),
 * NODE_NO_MEMORY.
 */
static size_t find_node(struct section *s, const char *path, size_t n,
			const char **why)
{
	unsigned int depth = 0;

	if (n == 0 || path[0] != '/') {
		*why = "a group path that does not start with '/'";
		return NODE_BAD_PATH;
	}
	if (n > 1 && (path[n - 1] == '/' || memmem(path, n, "//", 2))) {
		*why = "a group path with an empty name";
		return NODE_BAD_PATH;
	}
	for (const char *p = path; n > 1 && p; p = memchr(p + 1, '/',
						       n - (size_t)(p + 1 - path)))
		if (++depth > MAX_DEPTH)
			return NODE_TOO_DEEP;
	return add_node(s, path, n, depth);
}

/* Index of column @name in @s, added when new; SIZE_MAX: no memory. */
static size_t find_column(struct section *s, const char *name, size_t n,
			  size_t hint)
{
	struct column *c;

	if (hint < s->nr_cols && s->cols[hint].len == n &&
	    !memcmp(s->cols[hint].name, name, n))
		return hint;
	for (size_t i = 0; i < s->nr_cols; i++)
		if (s->cols[i].len == n && !memcmp(s->cols[i].name, name, n))
			return i;
	c = grow_array(s->cols, &s->cap_cols, s->nr_cols + 1, sizeof(*c));
	if (!c)
		return SIZE_MAX;
	s->cols = c;
	c[s->nr_cols] = (struct column){
		.name = name, .len = n,
		.bytes = ends_with(name, n, "_bytes"),
	};
	return s->nr_cols++;
}

/* The section of @prefix and kind, added when new; NULL: no memory. */
static struct section *find_section(struct model *m, bool memory,
				    const char *prefix, size_t n)
{
	struct section *s;

	for (size_t i = 0; i < m->nr_secs; i++)
		if (m->secs[i].memory == memory &&
		    m->secs[i].prefix_len == n &&
		    !memcmp(m->secs[i].prefix, prefix, n))
			return &m->secs[i];
	s = realloc(m->secs, (m->nr_secs + 1) * sizeof(*s));
	if (!s)
		return NULL;
	m->secs = s;
	s += m->nr_secs++;
	*s = (struct section){ .memory = memory, .prefix = prefix,
			       .prefix_len = n, .bound = NAN };
	return s;
}

/* Does @name start with @prefix and then @word? */
static bool starts(const char *name, size_t n, const char *prefix,
		   size_t plen, const char *word)
{
	size_t wlen = strlen(word);

	return n > plen + wlen && !memcmp(name, prefix, plen) &&
	       !memcmp(name + plen, word, wlen);
}

/*
 * Where @s belongs: its section and column (a memory section's fixed
 * columns first), or NULL for a sample no tree shows.  @x gives the
 * prefixes of statistics trees (their accuracy bounds).
 */
static struct section *classify(struct model *m, const struct exposition *x,
				const struct sample *s, size_t *col,
				size_t *hint, bool *nomem)
{
	const char *n = s->name, *w;
	size_t len = s->name_len, best = 0, plen;
	const struct bound *stats = NULL;
	struct section *sec;
	bool event;

	*nomem = false;
	/* A statistics tree of a known prefix (the longest that fits). */
	for (size_t i = 0; i < x->nr_b; i++)
		if (x->b[i].len >= best &&
		    (starts(n, len, x->b[i].prefix, x->b[i].len, "_hier_") ||
		     starts(n, len, x->b[i].prefix, x->b[i].len, "_local_"))) {
			stats = &x->b[i];
			best = x->b[i].len;
		}
	if (stats) {
		plen = stats->len;
		w = n + plen + 1;
		if (*w == 'l')
			return NULL;	/* the local values */
		w += 5;
		goto stat;
	}
	for (size_t c = 0; c < MEM_NR_FIXED; c++)
		if (ends_with(n, len, mem_suffix[c]) &&
		    len > strlen(mem_suffix[c])) {
			sec = find_section(m, true, n,
					   len - strlen(mem_suffix[c]));
			*nomem = !sec;
			*col = c;
			return sec;
		}
	w = memmem(n, len, "_memory_events_", 15);
	if (w && w > n && ends_with(n, len, "_total") &&
	    (size_t)(n + len - w) > 15 + 6) {
		const char *ev = w + 15;
		size_t evlen = (size_t)(n + len - ev) - 6;

		if (evlen > 6 && !memcmp(ev, "local_", 6))
			return NULL;
		sec = find_section(m, true, n, (size_t)(w - n));
		*nomem = !sec;
		if (!sec)
			return NULL;
		*col = find_column(sec, ev, evlen, *hint);
		*nomem = *col == SIZE_MAX;
		*hint = *col;
		*col += MEM_NR_FIXED;
		return *nomem ? NULL : sec;
	}
	w = memmem(n, len, "_hier_", 6);
	if (!w || w == n || w + 6 == n + len)
		return NULL;
	plen = (size_t)(w - n);
	w += 6;
stat:
	sec = find_section(m, false, n, plen);
	*nomem = !sec;
	if (!sec)
		return NULL;
	len = (size_t)(n + len - w);
	event = ends_with(w, len, "_total") && len > 6;
	*col = find_column(sec, w, len - (event ? 6 : 0), *hint);
	*nomem = *col == SIZE_MAX;
	*hint = *col;
	if (*nomem)
		return NULL;
	sec->cols[*col].event |= event;
	return sec;
}

/*
 * Is @s the memory.stat of @mem: exported under the same prefix as
 * "P_hier_STAT", or under "P_memory_stat" (tally/export.h's ways), with
 * the same groups (tally_memcg_stats_tree() has the memory tree's)?  Its
 * states are then bytes, its events counts (enum tally_memcg_stat).
 */
static bool is_memory_stat(const struct section *s, struct section *mem)
{
	size_t n = mem->prefix_len;

	if (s->prefix_len < n || memcmp(s->prefix, mem->prefix, n) ||
	    !(s->prefix_len == n ||
	      (s->prefix_len == n + 12 &&
	       !memcmp(s->prefix + n, "_memory_stat", 12))) ||
	    s->nr_nodes != mem->nr_nodes)
		return false;
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (*hash_slot(mem, s->nodes[k].path, s->nodes[k].path_len) ==
		    SIZE_MAX)
			return false;
	return true;
}

/* Where each kept sample goes, between the two passes of build_model(). */
struct cell {
	size_t sec;		/* index in the model's sections */
	size_t node, col;
	double value;
	size_t line;
};

/* By section, in sample order within one (qsort is not stable). */
static int cmp_cell_section(const void *a, const void *b)
{
	const struct cell *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/* Children lists of every node, and the values matrix from @cells. */
static int finish_section(struct section *s, struct cell *cells, size_t nr,
			  const char *src, char *err)
{
	size_t nc = nr_value_cols(s), *count;

	s->vals = malloc((s->nr_nodes * nc + 1) * sizeof(*s->vals));
	count = calloc(s->nr_nodes, sizeof(*count));
	if (!s->vals || !count) {
		free(count);
		return -1;
	}
	for (size_t i = 0; i < s->nr_nodes * nc; i++)
		s->vals[i] = NAN;
	for (size_t i = 0; i < nr; i++) {
		double *v = &s->vals[cells[i].node * nc + cells[i].col];

		if (!isnan(*v)) {
			const struct node *g = &s->nodes[cells[i].node];

			struct text t = { 0 };

			put_safe(&t, g->path, g->path_len, 60);
			errorf(err, src, strlen(src), "line %zu: a second "
			       "sample of group %s in one family (other "
			       "labels apart): tally top shows one program "
			       "at a time", cells[i].line, t.p ? t.p : "");
			text_free(&t);
			free(count);
			return 1;
		}
		*v = cells[i].value;
		if (!s->memory || cells[i].col >= MEM_NR_FIXED) {
			struct column *c = &s->cols[cells[i].col -
						    (s->memory ? MEM_NR_FIXED
							       : 0)];

			c->nonzero |= *v != 0 && !isnan(*v);
			if (s->nodes[cells[i].node].parent == SIZE_MAX)
				c->root = *v;
		}
	}
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (s->nodes[k].parent != SIZE_MAX)
			count[s->nodes[k].parent]++;
	for (size_t k = 0; k < s->nr_nodes; k++) {
		if (count[k] && !(s->nodes[k].kids =
				  malloc(count[k] * sizeof(size_t)))) {
			free(count);
			return -1;
		}
	}
	for (size_t k = 0; k < s->nr_nodes; k++) {
		size_t p = s->nodes[k].parent;

		if (p != SIZE_MAX)
			s->nodes[p].kids[s->nodes[p].nr_kids++] = k;
	}
	free(count);
	return 0;
}

/*
 * The sections of @x.  Returns 0, TOP_EXIT_BAD_INPUT (a bad group path,
 * a repeated series) or CLI_EXIT_FAILED (no memory), with @err set.
 */
static int build_model(const struct exposition *x, struct model *m,
		       const char *src, char *err)
{
	struct cell *cells = malloc((x->nr ? x->nr : 1) * sizeof(*cells));
	size_t nr = 0, hint = 0, slen = strlen(src);
	int ret = 0;

	*m = (struct model){ 0 };
	if (!cells)
		goto nomem;
	for (size_t i = 0; i < x->nr; i++) {
		const struct sample *s = &x->s[i];
		const char *why = NULL;
		size_t col = 0, node;
		bool nomem;
		struct section *sec = classify(m, x, s, &col, &hint, &nomem);

		if (nomem)
			goto nomem;
		if (!sec)
			continue;
		node = find_node(sec, s->group, s->group_len, &why);
		if (node == NODE_NO_MEMORY)
			goto nomem;
		if (node == NODE_TOO_DEEP) {
			m->too_deep++;
			continue;
		}
		if (node == NODE_BAD_PATH) {
			errorf(err, src, slen, "line %zu: %s", s->line, why);
			ret = TOP_EXIT_BAD_INPUT;
			goto out;
		}
		cells[nr++] = (struct cell){ (size_t)(sec - m->secs), node,
					     col, s->value, s->line };
	}
	/* Sections may move while the array grows: cells hold indexes. */
	for (size_t i = 0; i < m->nr_secs; i++)
		for (size_t b = 0; b < x->nr_b; b++)
			if (!m->secs[i].memory &&
			    x->b[b].len == m->secs[i].prefix_len &&
			    !memcmp(x->b[b].prefix, m->secs[i].prefix,
				    x->b[b].len))
				m->secs[i].bound = x->b[b].value;
	for (size_t i = 0; i < m->nr_secs; i++)
		for (size_t k = 0; k < m->nr_secs; k++)
			if (!m->secs[i].memory && m->secs[k].memory &&
			    is_memory_stat(&m->secs[i], &m->secs[k]))
				m->secs[i].memory_of = &m->secs[k];
	qsort(cells, nr, sizeof(*cells), cmp_cell_section);
	for (size_t i = 0, j = 0; i < m->nr_secs; i++) {
		size_t k = j;
		int r;

		while (k < nr && cells[k].sec == i)
			k++;
		r = finish_section(&m->secs[i], cells + j, k - j, src, err);
		if (r < 0)
			goto nomem;
		if (r > 0) {
			ret = TOP_EXIT_BAD_INPUT;
			goto out;
		}
		j = k;
	}
out:
	free(cells);
	if (ret)
		model_free(m);
	return ret;
nomem:
	free(cells);
	model_free(m);
	errorf(err, src, slen, "%s", strerror(ENOMEM));
	return CLI_EXIT_FAILED;
}

/* --- rendering ------------------------------------------------------------ */

/* A value in @width columns: bytes in K, M, G... (1024s), counts whole. */
static void fmt_value(char *out, size_t size, double v, bool bytes,
		      bool limit)
{
	static const char units[] = "BKMGTPE";
	int u = 0;

	if (isnan(v)) {
		snprintf(out, size, "-");
	} else if (limit && v >= UNLIMITED_FROM) {
		snprintf(out, size, "max");
	} else if (isinf(v)) {
		snprintf(out, size, v > 0 ? "inf" : "-inf");
	} else if (bytes) {
		double a = fabs(v);

		while (a >= 1024 && u < 6) {
			a /= 1024;
			u++;
		}
		if (u == 0)
			snprintf(out, size, "%s%.0f%s", v < 0 ? "-" : "", a,
				 a ? "B" : "");
		else
			snprintf(out, size, "%s%.1f%c", v < 0 ? "-" : "", a,
				 units[u]);
	} else if (v == floor(v) && fabs(v) < 1e8) {
		snprintf(out, size, "%.0f", v);
	} else {
		snprintf(out, size, "%.3g", v);
	}
}

struct view {
	const struct top_args *a;	/* --sort, --depth */
	size_t width;		/* columns of a line */
	size_t name_cols;
	const struct section *sec;
	size_t *shown;		/* stat columns shown, best first */
	size_t nr_shown;
	struct text *out;
};

static double node_value(const struct section *s, size_t node, size_t col)
{
	return s->vals[node * nr_value_cols(s) + col];
}

/* The sort key's value of a group: usage, or the first stat shown. */
static double usage_of(const struct view *v, size_t node)
{
	double x;

	if (v->sec->memory)
		x = node_value(v->sec, node, MEM_CURRENT);
	else if (v->nr_shown)
		x = node_value(v->sec, node, v->shown[0]);
	else
		return -INFINITY;
	return isnan(x) ? -INFINITY : x;
}

static int cmp_names(const struct node *a, const struct node *b)
{
	size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
	int c = memcmp(a->name, b->name, n);

	return c ? c : (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

static int cmp_kids(const void *pa, const void *pb, void *arg)
{
	const struct view *v = arg;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;

	if (v->a->sort == SORT_USAGE) {
		double ua = usage_of(v, a), ub = usage_of(v, b);

		if (ua != ub)
			return ua > ub ? -1 : 1;
	}
	return cmp_names(&v->sec->nodes[a], &v->sec->nodes[b]);
}

/* End a line: cut to the width, strip trailing blanks, add '\n'. */
static void end_line(const struct view *v, struct text *line)
{
	size_t n = line->p ? fit_columns(line->p, line->len, v->width) : 0;

	while (n && line->p[n - 1] == ' ')
		n--;
	text_mem(v->out, line->p, n);
	text_mem(v->out, "\n", 1);
	line->len = 0;
}

static void cell_right(struct text *line, const char *s, size_t cols)
{
	size_t n = strlen(s);

	text_chars(line, ' ', n < cols ? cols - n + 1 : 1);
	text_str(line, s);
}

static size_t indent_of(const struct node *g)
{
	return 2 * (g->depth < 8 ? g->depth : 8);
}

/* The width of a stat column: its header (cut), at least a value's. */
static size_t stat_cols(const struct column *c)
{
	size_t n = c->len - (c->bytes ? 6 : 0);

	return n < VALUE_COLS ? VALUE_COLS
			      : n > STAT_COLS_MAX ? STAT_COLS_MAX : n;
}

static void render_row(const struct view *v, size_t k, struct text *line)
{
	const struct section *s = v->sec;
	const struct node *g = &s->nodes[k];
	size_t ind = indent_of(g), used;
	char num[32];

	text_chars(line, ' ', ind);
	used = put_safe(line, g->name, g->name_len,
			v->name_cols > ind ? v->name_cols - ind : 1);
	text_chars(line, ' ', v->name_cols > ind + used
				      ? v->name_cols - ind - used : 0);
	if (s->memory) {
		bool any = false;

		for (size_t c = 0; c < MEM_NR_FIXED; c++) {
			fmt_value(num, sizeof(num), node_value(s, k, c), true,
				  c >= MEM_MIN);
			cell_right(line, num, VALUE_COLS);
		}
		text_str(line, "  ");
		for (size_t e = 0; e < s->nr_cols; e++) {
			double x = node_value(s, k, MEM_NR_FIXED + e);

			if (isnan(x) || x == 0)
				continue;
			if (any)
				text_str(line, " ");
			put_safe(line, s->cols[e].name, s->cols[e].len, 24);
			fmt_value(num, sizeof(num), x, false, false);
			text_str(line, ":");
			text_str(line, num);
			any = true;
		}
	} else {
		for (size_t i = 0; i < v->nr_shown; i++) {
			const struct column *c = &s->cols[v->shown[i]];

			fmt_value(num, sizeof(num),
				  node_value(s, k, v->shown[i]),
				  c->bytes || (s->memory_of && !c->event),
				  false);
			cell_right(line, num, stat_cols(c));
		}
	}
	end_line(v, line);
}

static void render_tree(struct view *v, size_t k, struct text *line)
{
	const struct node *g = &v->sec->nodes[k];

	if (g->depth > v->a->depth)
		return;
	render_row(v, k, line);
	if (g->nr_kids > 1)
		qsort_r(g->kids, g->nr_kids, sizeof(size_t), cmp_kids, v);
	for (size_t i = 0; i < g->nr_kids; i++)
		render_tree(v, g->kids[i], line);
}

static int cmp_rank(const void *pa, const void *pb, void *arg)
{
	const struct section *s = arg;
	const struct column *a = &s->cols[*(const size_t *)pa];
	const struct column *b = &s->cols[*(const size_t *)pb];
	double ra = isnan(a->root) ? -1 : fabs(a->root);
	double rb = isnan(b->root) ? -1 : fabs(b->root);

	if (ra != rb)
		return ra > rb ? -1 : 1;
	return (*(const size_t *)pa > *(const size_t *)pb) -
	       (*(const size_t *)pa < *(const size_t *)pb);
}

/* The widest name column the visible groups need, within limits. */
static size_t name_columns(const struct view *v)
{
	size_t cols = 5;	/* "GROUP" */

	for (size_t k = 0; k < v->sec->nr_nodes; k++) {
		const struct node *g = &v->sec->nodes[k];
		struct text t = { 0 };
		size_t w;

		if (g->depth > v->a->depth)
			continue;
		w = indent_of(g) + put_safe(&t, g->name, g->name_len,
					    NAME_COLS_MAX);
		text_free(&t);
		if (w > cols)
			cols = w;
	}
	return cols > NAME_COLS_MAX ? NAME_COLS_MAX : cols;
}

static void render_section(struct view *v, const struct section *s)
{
	struct text line = { 0 };
	char num[64];
	size_t zero = 0, no_room = 0, room, root = SIZE_MAX;

	v->sec = s;
	v->nr_shown = 0;
	text_str(v->out, "\n");
	text_str(&line, s->memory ? "memory groups (" :
			s->memory_of ? "memory.stat of those groups (" :
				       "statistics groups (");
	put_safe(&line, s->prefix, s->prefix_len, 60);
	text_str(&line, s->memory ? "_memory_*)" : "_hier_*)");
	if (!isnan(s->bound)) {
		fmt_value(num, sizeof(num), s->bound, false, false);
		text_str(&line, ", accuracy bound ");
		text_str(&line, num);
	}
	v->name_cols = name_columns(v);
	if (!s->memory) {
		/* The stats non-zero somewhere, largest at the root first,
		 * as many as fit. */
		v->shown = malloc((s->nr_cols ? s->nr_cols : 1) *
				  sizeof(size_t));
		if (!v->shown) {
			v->out->failed = true;
			return;
		}
		for (size_t i = 0; i < s->nr_cols; i++)
			if (s->cols[i].nonzero)
				v->shown[v->nr_shown++] = i;
		zero = s->nr_cols - v->nr_shown;
		qsort_r(v->shown, v->nr_shown, sizeof(size_t), cmp_rank,
			(void *)s);
		room = v->width > v->name_cols ? v->width - v->name_cols : 0;
		for (size_t i = 0; i < v->nr_shown; i++) {
			size_t w = stat_cols(&s->cols[v->shown[i]]) + 1;

			if (w > room) {
				no_room = v->nr_shown - i;
				v->nr_shown = i;
				break;
			}
			room -= w;
		}
	}
	end_line(v, &line);
	text_str(&line, "GROUP");
	text_chars(&line, ' ', v->name_cols - 5);
	if (s->memory) {
		for (size_t c = 0; c < MEM_NR_FIXED; c++)
			cell_right(&line, mem_header[c], VALUE_COLS);
		text_str(&line, "  EVENTS");
	} else {
		for (size_t i = 0; i < v->nr_shown; i++) {
			const struct column *c = &s->cols[v->shown[i]];
			size_t w = stat_cols(c), n = c->len - (c->bytes ? 6 : 0);
			struct text h = { 0 };
			size_t used;

			used = put_safe(&h, c->name, n, w);
			text_chars(&line, ' ', 1 + (w > used ? w - used : 0));
			text_mem(&line, h.p, h.len);
			text_free(&h);
		}
	}
	end_line(v, &line);
	for (size_t k = 0; k < s->nr_nodes; k++)
		if (s->nodes[k].parent == SIZE_MAX)
			root = k;
	if (root != SIZE_MAX)
		render_tree(v, root, &line);
	/* The stats left out, under the tree: short enough to be read. */
	if (zero || no_room) {
		snprintf(num, sizeof(num), "(hidden: %zu zero everywhere",
			 zero);
		text_str(&line, zero ? num : "(hidden:");
		snprintf(num, sizeof(num), "%s %zu past the width", zero ?
			 "," : "", no_room);
		text_str(&line, no_room ? num : "");
		text_str(&line, ")");
		end_line(v, &line);
	}
	text_free(&line);
	free(v->shown);
	v->shown = NULL;
}

/* One frame of @m into @out. */
static void render_model(const struct model *m, const struct top_args *a,
			 size_t width, struct text *out)
{
	struct view v = { .a = a, .width = width, .out = out };
	bool any = false;

	/* Memory groups first, each followed by its memory.stat, then
	 * the other statistics groups, each as found. */
	for (size_t i = 0; i < m->nr_secs; i++) {
		if (!m->secs[i].memory)
			continue;
		render_section(&v, &m->secs[i]);
		for (size_t k = 0; k < m->nr_secs; k++)
			if (m->secs[k].memory_of == &m->secs[i])
				render_section(&v, &m->secs[k]);
		any = true;
	}
	for (size_t i = 0; i < m->nr_secs; i++) {
		if (m->secs[i].memory || m->secs[i].memory_of)
			continue;
		render_section(&v, &m->secs[i]);
		any = true;
	}
	if (!any)
		text_str(out, "\nno memory groups or statistics groups: no "
			      "sample of tally's families with a group "
			      "label\n");
	if (m->too_deep) {
		char note[96];

		snprintf(note, sizeof(note), "\n(%zu samples of groups deeper "
			 "than %u levels not shown)\n", m->too_deep, MAX_DEPTH);
		text_str(out, note);
	}
}

/* --- the command ---------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tally top [--once] [--interval S] [--sort usage|name] [--depth N]\n"
		"                 [--timeout S] URL|FILE\n"
		"\n"
		"A running program's memory groups and statistics groups as trees, from\n"
		"its Prometheus (text 0.0.4) or OpenMetrics exposition, refreshed: what\n"
		"systemd-cgtop is for cgroups.  Memory groups show memory.current, peak,\n"
		"min, low, high and max (\"max\": no limit, written +Inf or\n"
		"9223372036854775807) and their non-zero memory.events; statistics groups\n"
		"show their hierarchical values, the stats largest at the root first, as\n"
		"many as the width holds (bytes in K, M, G: powers of 1024).\n"
		"\n"
		"  URL                http://HOST[:PORT][/PATH] (default path /metrics),\n"
		"                     read with one HTTP/1.0 GET: no redirect followed,\n"
		"                     at most 32 MiB; https is not supported\n"
		"  FILE               a textfile the program writes (tally_export_textfile(),\n"
		"                     tally metrics -o), a regular file of at most 32 MiB\n"
		"  --once             print one frame and exit, without terminal controls\n"
		"  --interval S       seconds between refreshes, 0.1 to 86400 (default 2)\n"
		"  --sort usage|name  siblings by usage (memory.current, or the first stat\n"
		"                     shown), largest first, the default; or by name\n"
		"  --depth N          show groups down to depth N (the root is 0; groups\n"
		"                     deeper than 256 levels are counted, never shown)\n"
		"  --timeout S        give up a refresh after S seconds, 0.1 to 3600\n"
		"                     (default 5)\n"
		"  -h, --help         show this help\n"
		"\n"
		"On a terminal the view is redrawn in place until Ctrl-C; otherwise (or\n"
		"with --once) frames are plain text.  Names are shown safely: control\n"
		"characters and invalid UTF-8 as \\xNN, long names cut with '~'.  Width:\n"
		"the terminal's, else $COLUMNS, else 120.  A failed refresh after the first\n"
		"frame is reported in the view, which keeps the last data.\n"
		"\n"
		"Exit status: 0 done (or stopped by Ctrl-C); 1 the source could not be read\n"
		"(missing file, connection refused, timeout, HTTP error, over 32 MiB);\n"
		"2 bad command line (including a URL that cannot be parsed); 3 the source\n"
		"is not a valid exposition (the message gives the line), or a group path\n"
		"or a repeated series it cannot show.\n");
}

static int option(int opt, char *arg, void *ctx)
{
	static const char *const sorts[] = { "usage", "name" };
	struct top_args *a = ctx;
	unsigned long n;
	unsigned int i;

	switch (opt) {
	case 'o':
		a->once = true;
		break;
	case 'i':
		return tool_opt_number(arg, 0.1, 86400, "seconds",
				       &a->interval);
	case 't':
		return tool_opt_number(arg, 0.1, 3600, "seconds", &a->timeout);
	case 's':
		if (tool_opt_choice(arg, sorts, 2, &i))
			return -1;
		a->sort = i ? SORT_NAME : SORT_USAGE;
		break;
	case 'd':
		if (tool_opt_uint(arg, 0, MAX_DEPTH, &n))
			return -1;
		a->depth = (unsigned int)n;
		break;
	}
	return 0;
}

/* Return: 0, 1 after --help, or -1 for a bad command line. */
static int parse(struct top_args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "sort", required_argument, NULL, 's' },
		{ "depth", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"top", usage, "", longopts, option, false
	};
	int err, first;

	err = tool_parse_options(&cmd, argc, argv, a, &first);
	if (err)
		return err;
	if (first == argc)
		return tool_usage_error("no URL or FILE given");
	if (first + 1 < argc)
		return tool_usage_error("unexpected argument '%s'",
					argv[first + 1]);
	a->source = argv[first];
	return 0;
}

static void on_quit(int sig)
{
	(void)sig;
	quit_asked = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static size_t frame_width(bool tty, size_t *rows)
{
	struct winsize ws;
	const char *c = getenv("COLUMNS");
	char *end;
	unsigned long n;

	*rows = 0;
	if (tty && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col) {
		*rows = ws.ws_row;
		return ws.ws_col;
	}
	if (c && is_digit(c[0])) {
		n = strtoul(c, &end, 10);
		if (!*end && n >= 20 && n <= 10000)
			return n;
	}
	return DEFAULT_WIDTH;
}

/* One refresh: the source's exposition into @m; 0 or a status. */
static int refresh(const struct source *src, const struct top_args *a,
		   struct text *t, struct exposition *x, struct model *m,
		   char *err)
{
	bool openmetrics = false;
	int st;

	st = src->http ? load_http(src, a->timeout, t, &openmetrics, err)
		       : load_file(src, t, err);
	if (!st)
		st = parse_exposition(t, openmetrics, x, src->arg, err);
	if (!st)
		st = build_model(x, m, src->arg, err);
	return st;
}

static int write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The frame's first line, then the frame, cut to @rows (0: no cut). */
static int show(const struct source *src, const struct top_args *a,
		const struct model *m, const char *failure, bool tty,
		bool live)
{
	struct text out = { 0 }, line = { 0 };
	size_t rows, width = frame_width(tty, &rows), n;
	char stamp[64] = "";
	int err;

	if (tty)
		text_str(&out, "\033[H\033[2J");
	text_str(&line, "tally top: ");
	put_safe(&line, src->arg, strlen(src->arg), 200);
	if (live) {
		time_t now = time(NULL);
		struct tm tm;

		if (localtime_r(&now, &tm))
			strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
		text_str(&line, "  ");
		text_str(&line, stamp);
		snprintf(stamp, sizeof(stamp), "  every %gs%s", a->interval,
			 tty ? ", Ctrl-C quits" : "");
		text_str(&line, stamp);
	}
	n = line.p ? fit_columns(line.p, line.len, width) : 0;
	text_mem(&out, line.p, n);
	text_str(&out, "\n");
	if (failure) {
		line.len = 0;
		text_str(&line, "refresh failed: ");
		text_str(&line, failure);
		text_str(&line, " (showing the last data)");
		n = fit_columns(line.p, line.len, width);
		text_mem(&out, line.p, n);
		text_str(&out, "\n");
	}
	text_free(&line);
	render_model(m, a, width, &out);
	if (tty && rows > 1) {
		/* No scrolling: the frame stops at the terminal's bottom. */
		const char *p = out.p;

		for (size_t r = 0; p && r < rows - 1; r++) {
			p = memchr(p, '\n', out.len - (size_t)(p - out.p));
			if (p)
				p++;
		}
		if (p && (size_t)(p - out.p) < out.len)
			out.len = (size_t)(p - out.p) - 1;
	} else if (live) {
		text_str(&out, "\n");
	}
	err = out.failed ? -ENOMEM : write_all(out.p, out.len);
	text_free(&out);
	return err;
}

/* Sleep @s seconds, or until a quit signal. */
static void pause_for(double s)
{
	double deadline = now_s() + s;

	while (!quit_asked && !resized) {
		double left = deadline - now_s();
		struct timespec ts;

		if (left <= 0)
			break;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

int tally_cmd_top(int argc, char **argv)
{
	struct top_args a = {
		.interval = 2, .timeout = 5, .depth = MAX_DEPTH,
	};
	struct source src = { 0 };
	struct text t = { 0 }, last = { 0 };
	struct exposition x = { 0 };
	struct model m = { 0 }, shown = { 0 };
	char err[MAX_ERROR];
	bool tty;
	int st = parse(&a, argc, argv);

	if (st)
		return st > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	src.arg = a.source;
	/* Non-ASCII reaches the terminal only when it speaks UTF-8. */
	setlocale(LC_CTYPE, "");
	utf8_terminal = !strcmp(nl_langinfo(CODESET), "UTF-8");
	if (looks_like_url(a.source) || !strncasecmp(a.source, "http:", 5)) {
		const char *why = strlen(a.source) > MAX_URL + 300
					  ? "URL too long"
					  : parse_url(a.source, &src.url);

		if (why) {
			errorf(err, a.source, strlen(a.source), "%s", why);
			fprintf(stderr, "tally: top: %s\n", err);
			return CLI_EXIT_USAGE;
		}
		src.http = true;
	}
	tty = !a.once && isatty(STDOUT_FILENO);
	if (!a.once) {
		struct sigaction sa = { .sa_handler = on_quit };

		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sa.sa_handler = on_winch;
		sigaction(SIGWINCH, &sa, NULL);
	}
	st = refresh(&src, &a, &t, &x, &shown, err);
	if (st && quit_asked) {
		st = CLI_EXIT_OK;	/* stopped while reading */
		goto out;
	}
	if (st) {
		fprintf(stderr, "tally: top: %s\n", err);
		goto out;
	}
	/* The model points into the text it was built from: keep both. */
	last = t;
	t = (struct text){ 0 };
	for (bool failed = false;;) {
		int w = show(&src, &a, &shown, failed ? err : NULL, tty,
			     !a.once);

		if (w) {
			if (!quit_asked)
				fprintf(stderr, "tally: top: standard output:"
					" %s\n", strerror(-w));
			st = quit_asked ? CLI_EXIT_OK : CLI_EXIT_FAILED;
			break;
		}
		if (a.once)
			break;
		pause_for(a.interval);
		if (quit_asked)
			break;
		if (resized) {
			resized = 0;
			continue;
		}
		failed = refresh(&src, &a, &t, &x, &m, err) != 0;
		if (quit_asked)
			break;
		if (!failed) {
			model_free(&shown);
			shown = m;
			m = (struct model){ 0 };
			text_free(&last);
			last = t;
			t = (struct text){ 0 };
		}
	}
out:
	model_free(&shown);
	text_free(&t);
	text_free(&last);
	free(x.s);
	free(x.b);
	return st;
}
