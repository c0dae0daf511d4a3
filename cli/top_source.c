// SPDX-License-Identifier: MIT
/*
 * top_source.c - `tally top`'s sources: an http:// URL checked strictly
 * (parse_url()) and read with one HTTP/1.0 GET over a socket within a
 * deadline (load_http()), or a regular file (load_file()); at most
 * MAX_EXPOSITION bytes either way.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tally/version.h>

#include "cli.h"
#include "top.h"

bool is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool is_digit(int c)
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
bool looks_like_url(const char *s)
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
const char *parse_url(const char *s, struct url *u)
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

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}


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
int load_http(const struct source *src, double timeout,
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
int load_file(const struct source *src, struct text *t, char *err)
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
