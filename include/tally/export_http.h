/* SPDX-License-Identifier: MIT */
#ifndef TALLY_EXPORT_HTTP_H
#define TALLY_EXPORT_HTTP_H

/*
 * tally/export_http.h - an exporter (tally/export.h) served over HTTP at
 * /metrics, the way Prometheus scrapes.  An optional component: its own
 * library, libtally_http (`pkg-config --cflags --libs tally_http`, or
 * -ltally_http -ltally -lmicrohttpd -pthread), built on libmicrohttpd;
 * libtally itself does not depend on it.
 *
 * The endpoint answers GET and HEAD of its path (default "/metrics") with
 * a snapshot of the exporter, taken for each request, in the format the
 * scraper's Accept header prefers:
 *
 *   - "application/openmetrics-text" (no version, or version=1.0.0) gets
 *     OpenMetrics 1.0, Content-Type "application/openmetrics-text;
 *     version=1.0.0; charset=utf-8" (what Prometheus asks for first);
 *   - "text/plain" (no version, or version=0.0.4), the wildcards (any
 *     subtype of text, any type), no Accept header, or nothing acceptable
 *     gets the text format 0.0.4, Content-Type "text/plain;
 *     version=0.0.4; charset=utf-8".
 *
 * The media range with the highest q wins; among equal q a named type
 * before a wildcard, then the first listed.  Every answer has
 * "Vary: Accept".  Another path gets 404, another method 405 (with
 * "Allow: GET, HEAD"), a failed export 500.
 *
 * By default it listens on 127.0.0.1 only: serving another interface is
 * the caller's explicit choice (a numeric IPv4 or IPv6 address such as
 * "0.0.0.0" or "::"); port 0 lets the kernel pick a free port, which
 * tally_http_port() tells.
 *
 * One thread of the endpoint serves every connection (non-blocking), so
 * exports never run concurrently: while the endpoint runs, its exporter
 * belongs to it.  Export elsewhere with another exporter (exporters of the
 * same trees may run concurrently); a second tally_http_start() of an
 * exporter already served fails with -EBUSY.
 *
 * Slow clients: at most 64 connections at a time, 16 of them from one
 * address (more are closed at once).  A connection must send each
 * request's headers whole within the header timeout (5 s by default) of
 * its opening or of the previous answer, or it is closed, so that
 * clients trickling their bytes cannot hold every slot; one that reads
 * an answer is closed when idle for 30 s.
 *
 * Fork: the endpoint's thread does not survive fork().  A child must not
 * use an endpoint its parent started except to call tally_http_stop(),
 * which there only closes the child's copy of the listening socket and
 * frees what it can (the parent's endpoint runs on).  The child may start
 * an endpoint of its own, on another port or after the parent stopped.
 * Connections are close-on-exec.
 *
 * Error codes: negative errno values, as in tally/export.h.
 */

#include <tally/export.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_http;

/**
 * struct tally_http_options - where and how to serve; zero means the
 *	default.
 * @address: numeric IPv4 or IPv6 address to listen on (no host name is
 *	resolved); NULL for "127.0.0.1", loopback only.
 * @port: TCP port, at most 65535; 0 for one the kernel picks.
 * @path: the metrics path, starting with '/', at most 255 bytes; NULL
 *	for "/metrics".  Query strings are ignored.
 * @stop_timeout_ms: how long tally_http_stop() waits for requests in
 *	flight; 0 for 5000.
 * @header_timeout_ms: how long a connection has to send a request's
 *	headers whole, from its opening or from the previous answer; 0 for
 *	5000.  A connection past it is closed, however slowly it was still
 *	sending: a kept-alive connection idle that long too.
 */
struct tally_http_options {
	const char *address;
	unsigned int port;
	const char *path;
	unsigned int stop_timeout_ms;
	unsigned int header_timeout_ms;
};

/**
 * tally_http_start() - serve an exporter over HTTP.
 * @out: where the endpoint is stored.
 * @e: the exporter; it must outlive the endpoint, and no other thread may
 *	use it until tally_http_stop() returns.
 * @opts: address, port, path, or NULL for the defaults (127.0.0.1, a
 *	port the kernel picks, /metrics).
 *
 * Binds and listens before it returns: a scraper may connect as soon as
 * it has.  The listening socket has SO_REUSEADDR (a restart on the same
 * port does not wait for old connections) and is close-on-exec.
 *
 * Context: MT-safe; not async-signal-safe: allocates, starts a thread.
 *
 * Return: 0, -EINVAL (NULL @out or @e, an address that is not a numeric
 * IPv4 or IPv6 address, @port over 65535, a bad @path), -EBUSY (@e is
 * served by an endpoint already: stop it first), -EADDRINUSE (the port
 * is taken), -EACCES (a privileged port), another negative errno of
 * socket(), bind(), listen() or pthread_create(), -ENOMEM, -EIO
 * (libmicrohttpd did not start: threads or memory).  On failure *@out is
 * untouched.
 */
int tally_http_start(struct tally_http **out, struct tally_exporter *e,
		     const struct tally_http_options *opts);

/**
 * tally_http_port() - the port an endpoint listens on.
 * @h: the endpoint.
 *
 * Context: MT-safe, async-signal-safe: reads a field set at start.
 *
 * Return: the port (the one the kernel picked for @port 0), or 0 for a
 * NULL @h.
 */
unsigned int tally_http_port(const struct tally_http *h);

/**
 * tally_http_stop() - stop serving and free the endpoint.
 * @h: the endpoint, or NULL.  No other call on @h may run or follow.
 *
 * Stops accepting connections first (one attempted from then on is never
 * served: it is reset when the listening socket closes), then waits, up
 * to the stop timeout of the options, for the requests in flight: each
 * gets its whole answer.  Then it closes every connection, idle
 * keep-alive ones included, closes the listening socket and joins the
 * endpoint's thread: when it returns no request is served any more, the
 * port is free and the exporter is the caller's again.  In a child of
 * fork() see the header.
 *
 * Context: MT-safe for different endpoints; not async-signal-safe: waits,
 * joins a thread, frees memory.
 *
 * Return: 0, or -ETIMEDOUT when requests still in flight after the
 * timeout were cut off (the endpoint is stopped and freed either way).
 */
int tally_http_stop(struct tally_http *h);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_EXPORT_HTTP_H */
