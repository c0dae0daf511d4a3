// SPDX-License-Identifier: MIT
/*
 * export_http.c - an exporter served over HTTP with libmicrohttpd
 * (tally/export_http.h).  Built into its own library, libtally_http: it
 * uses only libtally's public API.
 *
 * The listening socket is made here (numeric address, SO_REUSEADDR,
 * close-on-exec, port 0 read back with getsockname()) and handed to one
 * libmicrohttpd daemon with one internal polling thread: every request is
 * answered on that thread, so the exporter (one thread at a time) needs
 * no lock of its own.  The text is rendered into a buffer the endpoint
 * keeps from one request to the next (grown when a snapshot outgrows it)
 * and copied into the response.
 *
 * Requests in flight are counted from the first call of the access
 * handler to libmicrohttpd's completion notice (sent when the answer has
 * gone out or the connection died); tally_http_stop() stops accepting,
 * waits on a condition variable until none is left (or the timeout), then
 * stops the daemon.
 *
 * Slow clients: libmicrohttpd's connection timeout is an idle one, which
 * each byte restarts, so a client trickling its headers would hold a
 * connection slot for ever.  Each connection has a slot of ours (taken
 * when libmicrohttpd reports it started, freed when it reports it
 * closed, both under the endpoint's lock) with the deadline of the
 * headers it waits for: its opening or the previous answer, plus the
 * header timeout.  A watchdog thread sleeps until the earliest deadline
 * and shuts down the socket of every connection past it; libmicrohttpd
 * then sees the end of the stream and closes it.  The socket is shut
 * down, never closed, and only while its slot is held: libmicrohttpd
 * reports the close before it closes the descriptor, so the descriptor
 * cannot have been reused.  Costs: one thread, a scan of the 64 slots
 * per wakeup and per request.  libmicrohttpd's per-address limit keeps
 * one address from taking every slot.
 *
 * An exporter is served by one endpoint at a time: the endpoints live in
 * a list (its lock kept across fork() by a pthread_atfork() handler) that
 * tally_http_start() checks.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include <tally/export_http.h>

#define DEFAULT_ADDRESS "127.0.0.1"
#define DEFAULT_PATH "/metrics"
#define PATH_MAX_LEN 255u
#define DEFAULT_STOP_TIMEOUT_MS 5000u
#define MAX_CONNECTIONS 64u
#define PER_ADDRESS_CONNECTIONS 16u
#define IDLE_TIMEOUT_S 30u
#define DEFAULT_HEADER_TIMEOUT_MS 5000u
#define LISTEN_BACKLOG 64

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS \
	"application/openmetrics-text; version=1.0.0; charset=utf-8"

/* A connection's socket and the deadline of the headers it waits for. */
struct conn {
	bool used;
	bool waiting;		/* for a request's headers */
	int fd;
	struct timespec deadline;
};

struct tally_http {
	struct tally_http *next;	/* in the list of served exporters */
	struct MHD_Daemon *daemon;
	struct tally_exporter *exporter;
	int fd;			/* the listening socket */
	unsigned int port;
	pid_t pid;		/* the process that started it */
	unsigned int stop_timeout_ms;
	char path[PATH_MAX_LEN + 1];

	/* The endpoint's thread only. */
	char *text;
	size_t cap;

	pthread_mutex_t lock;	/* guards in_flight, conns, stopping */
	pthread_cond_t idle;	/* in_flight dropped to 0 */
	unsigned long in_flight;

	unsigned int header_timeout_ms;
	pthread_t watchdog;
	pthread_cond_t wake;	/* a deadline was set, or stopping */
	bool stopping;
	struct conn conns[MAX_CONNECTIONS];
};

/* The endpoints of this process, by exporter (one endpoint each). */
static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_http *served;
static pthread_once_t served_once = PTHREAD_ONCE_INIT;

static void served_prefork(void)
{
	pthread_mutex_lock(&served_lock);
}

static void served_postfork(void)
{
	pthread_mutex_unlock(&served_lock);
}

static void served_init(void)
{
	pthread_atfork(served_prefork, served_postfork, served_postfork);
}

/* Add @h unless its exporter is served already: 0 or -EBUSY. */
static int served_add(struct tally_http *h)
{
	int ret = 0;

	pthread_once(&served_once, served_init);
	pthread_mutex_lock(&served_lock);
	for (struct tally_http *s = served; s; s = s->next)
		if (s->exporter == h->exporter)
			ret = -EBUSY;
	if (!ret) {
		h->next = served;
		served = h;
	}
	pthread_mutex_unlock(&served_lock);
	return ret;
}

static void served_remove(struct tally_http *h)
{
	pthread_mutex_lock(&served_lock);
	for (struct tally_http **p = &served; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	pthread_mutex_unlock(&served_lock);
}

/* The address of this marks a request counted in flight (con_cls). */
static char counted;

/* --- content negotiation ------------------------------------------------ */

/* @s (@n bytes) is @word, ASCII case-insensitively. */
static bool token_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && !strncasecmp(s, word, n);
}

static const char *skip_space(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

static size_t trimmed_len(const char *s, const char *end)
{
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return (size_t)(end - s);
}

/*
 * A qvalue (RFC 9110: "0" or "1" with up to three decimals) in
 * thousandths, or -1 when malformed.  No strtod(): it follows the locale.
 */
static int parse_q(const char *s, size_t n)
{
	int q, scale = 100;

	if (n == 0 || (s[0] != '0' && s[0] != '1'))
		return -1;
	q = (s[0] - '0') * 1000;
	if (n == 1)
		return q;
	if (s[1] != '.' || n > 5)
		return -1;
	for (size_t i = 2; i < n; i++, scale /= 10) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		q += (s[i] - '0') * scale;
	}
	return q <= 1000 ? q : -1;
}

/* What one media range of an Accept header asks for. */
enum range_kind { RANGE_NONE, RANGE_TEXT, RANGE_OPENMETRICS };

struct range {
	enum range_kind kind;
	bool wildcard;
	int q;			/* thousandths */
};

/* One media range, "type/subtype *( ; name=value )", of @s..@end. */
static struct range parse_range(const char *s, const char *end)
{
	struct range r = { RANGE_NONE, false, 1000 };
	const char *semi = memchr(s, ';', (size_t)(end - s));
	const char *type_end = semi ? semi : end;
	size_t type_len;
	const char *version = NULL;
	size_t version_len = 0;

	s = skip_space(s, end);
	type_len = trimmed_len(s, type_end);
	while (semi) {
		const char *p = skip_space(semi + 1, end), *eq, *pend;
		size_t name_len;

		semi = memchr(p, ';', (size_t)(end - p));
		pend = semi ? semi : end;
		eq = memchr(p, '=', (size_t)(pend - p));
		if (!eq)
			continue;
		name_len = trimmed_len(p, eq);
		eq = skip_space(eq + 1, pend);
		if (token_is(p, name_len, "q")) {
			r.q = parse_q(eq, trimmed_len(eq, pend));
			if (r.q < 0)
				r.q = 0;	/* malformed: not acceptable */
		} else if (token_is(p, name_len, "version")) {
			version = eq;
			version_len = trimmed_len(eq, pend);
			/* A parameter's value may be a quoted string. */
			if (version_len >= 2 && version[0] == '"' &&
			    version[version_len - 1] == '"') {
				version++;
				version_len -= 2;
			}
		}
	}
	if (token_is(s, type_len, "application/openmetrics-text")) {
		if (!version || token_is(version, version_len, "1.0.0"))
			r.kind = RANGE_OPENMETRICS;
	} else if (token_is(s, type_len, "text/plain")) {
		if (!version || token_is(version, version_len, "0.0.4"))
			r.kind = RANGE_TEXT;
	} else if (token_is(s, type_len, "*/*") ||
		   token_is(s, type_len, "text/*")) {
		r.kind = RANGE_TEXT;
		r.wildcard = true;
	} else if (token_is(s, type_len, "application/*")) {
		r.kind = RANGE_OPENMETRICS;
		r.wildcard = true;
	}
	return r;
}

/*
 * The format an Accept header prefers: the acceptable range (q > 0) of
 * highest q, a named type before a wildcard at equal q, the first listed
 * at equal both; the text format when nothing is acceptable.
 */
static enum tally_export_format negotiate(const char *accept)
{
	struct range best = { RANGE_NONE, true, 0 };
	const char *s = accept;

	while (s && *s) {
		const char *comma = strchr(s, ',');
		const char *end = comma ? comma : s + strlen(s);
		struct range r = parse_range(s, end);

		if (r.kind != RANGE_NONE && r.q > 0 &&
		    (r.q > best.q ||
		     (r.q == best.q && best.wildcard && !r.wildcard)))
			best = r;
		s = comma ? comma + 1 : NULL;
	}
	return best.kind == RANGE_OPENMETRICS ? TALLY_EXPORT_OPENMETRICS
					      : TALLY_EXPORT_PROMETHEUS;
}

/* --- header deadlines ---------------------------------------------------- */

static void deadline_from_now(struct timespec *t, unsigned int ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += ms / 1000;
	t->tv_nsec += (long)(ms % 1000) * 1000000;
	if (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Under h->lock: @k waits for headers from now on. */
static void arm(struct tally_http *h, struct conn *k)
{
	k->waiting = true;
	deadline_from_now(&k->deadline, h->header_timeout_ms);
	pthread_cond_signal(&h->wake);
}

/*
 * The watchdog: shut down every connection still waiting for its headers
 * at its deadline, and sleep until the next one.
 */
static void *watchdog(void *arg)
{
	struct tally_http *h = arg;

	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		struct timespec now, next = { 0, 0 };
		bool any = false;

		clock_gettime(CLOCK_MONOTONIC, &now);
		for (unsigned int i = 0; i < MAX_CONNECTIONS; i++) {
			struct conn *k = &h->conns[i];

			if (!k->used || !k->waiting)
				continue;
			if (!before(&now, &k->deadline)) {
				/* libmicrohttpd reads the end and closes. */
				shutdown(k->fd, SHUT_RDWR);
				k->waiting = false;
			} else if (!any || before(&k->deadline, &next)) {
				next = k->deadline;
				any = true;
			}
		}
		if (any)
			pthread_cond_timedwait(&h->wake, &h->lock, &next);
		else
			pthread_cond_wait(&h->wake, &h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* libmicrohttpd's notices of a connection's start and close. */
static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct tally_http *h = cls;
	struct conn *k = *socket_context;

	pthread_mutex_lock(&h->lock);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info =
			MHD_get_connection_info(c,
				MHD_CONNECTION_INFO_CONNECTION_FD);

		for (unsigned int i = 0; i < MAX_CONNECTIONS && !k; i++)
			if (!h->conns[i].used)
				k = &h->conns[i];
		/* libmicrohttpd's limit is the slots': always one free. */
		if (k && info) {
			k->used = true;
			k->fd = info->connect_fd;
			arm(h, k);
			*socket_context = k;
		}
	} else if (k) {
		k->used = false;
		k->waiting = false;
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&h->lock);
}

/* The connection's headers came (true) or its answer went out (false). */
static void headers_done(struct tally_http *h, struct MHD_Connection *c,
			 bool came)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *k = info ? info->socket_context : NULL;

	if (!k)
		return;
	pthread_mutex_lock(&h->lock);
	if (came)
		k->waiting = false;
	else
		arm(h, k);
	pthread_mutex_unlock(&h->lock);
}

/* --- requests ----------------------------------------------------------- */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned int status,
			      const char *type, const char *body, size_t len,
			      bool allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body,
					    MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) ==
		    MHD_NO ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept") ==
		    MHD_NO ||
	    (allow && MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
					      "GET, HEAD") == MHD_NO)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *c,
				   unsigned int status, const char *msg,
				   bool allow)
{
	return answer(c, status, "text/plain; charset=utf-8", msg, strlen(msg),
		      allow);
}

/*
 * A snapshot in @format into h->text, grown as needed: its length, or a
 * negative errno.  A snapshot may grow between the sizing and the
 * writing (groups created meanwhile): a few tries with room to spare.
 */
static long render(struct tally_http *h, enum tally_export_format format)
{
	long n = -ENOMEM;

	for (int tries = 0; tries < 8; tries++) {
		size_t want;
		char *p;

		n = tally_export_buffer_as(h->exporter, format, h->text,
					   h->cap);
		if (n < 0 || (size_t)n < h->cap)
			return n;
		want = (size_t)n + (size_t)n / 4 + 4096;
		p = realloc(h->text, want);
		if (!p)
			return -ENOMEM;
		h->text = p;
		h->cap = want;
	}
	return n < 0 ? n : -ENOMEM;
}

static void count_request(struct tally_http *h, int delta)
{
	pthread_mutex_lock(&h->lock);
	if (delta > 0) {
		h->in_flight++;
	} else if (--h->in_flight == 0) {
		pthread_cond_broadcast(&h->idle);
	}
	pthread_mutex_unlock(&h->lock);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct tally_http *h = cls;
	enum tally_export_format format;
	long n;

	(void)version;
	(void)upload;
	if (*con_cls == &counted) {
		/* A body after the answer was queued: drop it. */
		*upload_size = 0;
		return MHD_YES;
	}
	*con_cls = &counted;
	count_request(h, 1);
	headers_done(h, c, true);
	if (strcmp(url, h->path))
		return answer_text(c, MHD_HTTP_NOT_FOUND, "not found: the "
				   "metrics are at the metrics path\n", false);
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				   "method not allowed: GET or HEAD\n", true);
	format = negotiate(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_ACCEPT));
	n = render(h, format);
	if (n < 0)
		return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				   n == -ENOMEM ? "export failed: out of "
						  "memory\n"
						: "export failed\n",
				   false);
	return answer(c, MHD_HTTP_OK,
		      format == TALLY_EXPORT_OPENMETRICS ? CT_OPENMETRICS
							 : CT_TEXT,
		      h->text, (size_t)n, false);
}

static void on_completed(void *cls, struct MHD_Connection *c,
			 void **con_cls, enum MHD_RequestTerminationCode why)
{
	(void)why;
	if (*con_cls == &counted) {
		*con_cls = NULL;
		count_request(cls, -1);
		/* A kept-alive connection waits for its next headers. */
		headers_done(cls, c, false);
	}
}

/* --- start and stop ----------------------------------------------------- */

/* A listening socket on @address:@port; the fd or a negative errno. */
static int listen_on(const char *address, unsigned int port,
		     unsigned int *bound)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int fd, one = 1, err;

	if (inet_pton(AF_INET, address, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, address, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) ||
	    listen(fd, LISTEN_BACKLOG) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*bound = ntohs(ss.ss_family == AF_INET ? in4->sin_port
					       : in6->sin6_port);
	return fd;
}

static bool valid_path(const char *p)
{
	return p[0] == '/' && strlen(p) <= PATH_MAX_LEN && !strchr(p, '?');
}

static void free_endpoint(struct tally_http *h)
{
	pthread_cond_destroy(&h->wake);
	pthread_cond_destroy(&h->idle);
	pthread_mutex_destroy(&h->lock);
	free(h->text);
	free(h);
}

static void stop_watchdog(struct tally_http *h)
{
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->watchdog, NULL);
}

int tally_http_start(struct tally_http **out, struct tally_exporter *e,
		     const struct tally_http_options *opts)
{
	static const struct tally_http_options defaults;
	const struct tally_http_options *o = opts ? opts : &defaults;
	const char *address = o->address ? o->address : DEFAULT_ADDRESS;
	const char *path = o->path ? o->path : DEFAULT_PATH;
	pthread_condattr_t ca;
	struct tally_http *h;
	int fd, err;

	if (!out || !e || o->port > 65535 || !valid_path(path))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	fd = listen_on(address, o->port, &h->port);
	if (fd < 0) {
		free(h);
		return fd;
	}
	h->fd = fd;
	h->exporter = e;
	h->pid = getpid();
	h->stop_timeout_ms = o->stop_timeout_ms ? o->stop_timeout_ms
						: DEFAULT_STOP_TIMEOUT_MS;
	h->header_timeout_ms = o->header_timeout_ms ? o->header_timeout_ms
						    : DEFAULT_HEADER_TIMEOUT_MS;
	strcpy(h->path, path);
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->idle, &ca);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	err = served_add(h);
	if (err)
		goto fail;
	err = -pthread_create(&h->watchdog, NULL, watchdog, h);
	if (err) {
		served_remove(h);
		goto fail;
	}
	h->daemon = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL,
		on_request, h,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
		MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_ADDRESS_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
		MHD_OPTION_END);
	if (!h->daemon) {
		stop_watchdog(h);
		served_remove(h);
		err = -EIO;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	close(fd);
	free_endpoint(h);
	return err;
}

unsigned int tally_http_port(const struct tally_http *h)
{
	return h ? h->port : 0;
}

int tally_http_stop(struct tally_http *h)
{
	struct timespec deadline;
	MHD_socket quiesced;
	bool cut;
	int err = 0;

	if (!h)
		return 0;
	if (getpid() != h->pid) {
		/*
		 * A child of fork(): the daemon's thread is the parent's.
		 * Release the port's socket and our memory, never the
		 * daemon's (its locks may be held by a thread that is gone).
		 */
		served_remove(h);
		close(h->fd);
		free(h->text);
		free(h);
		return 0;
	}
	quiesced = MHD_quiesce_daemon(h->daemon);
	deadline_from_now(&deadline, h->stop_timeout_ms);
	pthread_mutex_lock(&h->lock);
	while (h->in_flight && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&h->idle, &h->lock, &deadline);
	cut = h->in_flight != 0;
	pthread_mutex_unlock(&h->lock);
	MHD_stop_daemon(h->daemon);
	/* Quiesced, the socket is ours to close; otherwise MHD closed it. */
	if (quiesced != MHD_INVALID_SOCKET)
		close(quiesced);
	stop_watchdog(h);
	served_remove(h);
	free_endpoint(h);
	return cut ? -ETIMEDOUT : 0;
}
