// SPDX-License-Identifier: MIT
/*
 * test_export_http.c - the HTTP endpoint (tally/export_http.h), fetched
 * with a raw socket on 127.0.0.1: the body is byte for byte what
 * tally_export_buffer_as() writes in the negotiated format, with that
 * format's Content-Type; other paths get 404, other methods 405; HEAD
 * gets the headers alone; concurrent scrapes all get whole answers; stop
 * waits for a scrape in flight (and cuts a stalled one after its
 * timeout); port 0, port reuse, a taken port, bad options; a forked
 * child; one endpoint per exporter; slow clients that trickle their
 * headers (from several loopback addresses, 127.0.0.x) cut at the header
 * deadline, and unable to take every connection slot from one address.
 *
 * Every socket read has a 60 s timeout: it catches a hang, never judges
 * speed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tally/export_http.h>

#include "harness.h"
#include "util.h"

static const struct tally_stat_desc schema[] = {
	{ "anon", TALLY_STAT_STATE },
	{ "pgfault", TALLY_STAT_EVENT },
};

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OM "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* What Prometheus 2.42 sends. */
#define PROMETHEUS_ACCEPT                                                   \
	"application/openmetrics-text;version=1.0.0,application/"           \
	"openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;"   \
	"q=0.5,*/*;q=0.1"

/* The sources every test serves: a statistics tree and a memory tree. */
struct fixture {
	struct tally_stats_tree *stats;
	struct tally_memcg_tree *memcg;
	struct tally_memcg *a;		/* /a, charged 12288 bytes */
	struct tally_exporter *served;	/* the endpoint's */
	struct tally_exporter *oracle;	/* the same sources, for the test */
};

static struct tally_exporter *new_exporter(struct fixture *f)
{
	struct tally_export_stats_options so = { .mode = TALLY_FLUSH_FORCE };
	struct tally_exporter *e = NULL;

	CHECK_EQ_LONG(tally_exporter_create(&e, NULL), 0);
	if (e) {
		CHECK_EQ_LONG(tally_exporter_add_stats(e, f->stats, &so), 0);
		CHECK_EQ_LONG(tally_exporter_add_memcg(e, f->memcg, NULL), 0);
	}
	return e;
}

/* @nr_groups stats groups under /tenant (at least web and db). */
static bool fixture_init(struct fixture *f, unsigned int nr_groups)
{
	struct tally_stats_group *tenant, *g;

	memset(f, 0, sizeof(*f));
	if (!CHECK_EQ_LONG(tally_stats_tree_create(&f->stats, schema, 2, NULL),
			   0) ||
	    !CHECK_EQ_LONG(tally_memcg_tree_create(&f->memcg, NULL), 0))
		return false;
	tenant = util_child(tally_stats_root(f->stats), "tenant");
	g = util_child(tenant, "web");
	CHECK_EQ_LONG(tally_stats_mod(g, 0, 8192), 0);
	CHECK_EQ_LONG(tally_stats_mod(g, 1, 2), 0);
	g = util_child(tenant, "db");
	CHECK_EQ_LONG(tally_stats_mod(g, 1, 5), 0);
	for (unsigned int i = 2; i < nr_groups; i++) {
		char name[32];

		snprintf(name, sizeof(name), "group-%06u", i);
		g = util_child(tenant, name);
		if (!g)
			return false;
		CHECK_EQ_LONG(tally_stats_mod(g, 0, (long)i), 0);
	}
	CHECK_EQ_LONG(tally_memcg_create(tally_memcg_root(f->memcg), "a",
					 &f->a), 0);
	if (f->a)
		CHECK_EQ_LONG(tally_memcg_charge(f->a, 12288, 0), 0);
	f->served = new_exporter(f);
	f->oracle = new_exporter(f);
	return f->a && f->served && f->oracle;
}

static void fixture_destroy(struct fixture *f)
{
	tally_exporter_destroy(f->served);
	tally_exporter_destroy(f->oracle);
	if (f->a)
		CHECK_EQ_LONG(tally_memcg_uncharge(f->a, 12288), 0);
	tally_memcg_tree_destroy(f->memcg);
	tally_stats_tree_destroy(f->stats);
}

/*
 * Grow the statistics tree until its export has at least @bytes: chains
 * of 32 groups with 200-byte names, whose paths make long labels (few
 * groups, quick to create).
 */
static bool grow_to(struct fixture *f, size_t bytes)
{
	char pad[192], name[TALLY_STATS_NAME_MAX + 1];

	memset(pad, '.', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	for (unsigned int chain = 0; chain < 4096; chain++) {
		struct tally_stats_group *g = tally_stats_root(f->stats);

		if (tally_export_buffer_as(f->oracle, TALLY_EXPORT_PROMETHEUS,
					   NULL, 0) >= (long)bytes)
			return true;
		for (int depth = 0; depth < 32 && g; depth++) {
			snprintf(name, sizeof(name), "%06u-%02d%s", chain, depth,
				 pad);
			g = util_child(g, name);
			if (g)
				CHECK_EQ_LONG(tally_stats_mod(g, 1, depth), 0);
		}
		if (!g)
			return false;
	}
	return false;
}

/* The oracle's text in @format (malloc'ed), or NULL. */
static char *expected(struct fixture *f, enum tally_export_format format)
{
	long n = tally_export_buffer_as(f->oracle, format, NULL, 0);
	char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;

	if (text && tally_export_buffer_as(f->oracle, format, text,
					   (size_t)n + 1) != n) {
		free(text);
		text = NULL;
	}
	CHECK(text);
	return text;
}

/* --- a raw HTTP client -------------------------------------------------- */

/*
 * A connection to 127.0.0.1:@port from the loopback address 127.0.0.@src
 * (every 127.x.y.z is this host's: distinct clients without a network).
 */
static int connect_from(unsigned int port, unsigned int src)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 60 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	from.sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + src);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int connect_to(unsigned int port)
{
	return connect_from(port, 1);
}

static bool send_all(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

		if (w <= 0)
			return false;
		s += w;
		n -= (size_t)w;
	}
	return true;
}

struct reply {
	int status;
	char *head;		/* status line and headers, NUL-terminated */
	char *body;		/* what followed, NUL-terminated */
	size_t body_len;
	long content_length;	/* -1 when absent */
	bool complete;		/* body_len == content_length */
};

static void reply_free(struct reply *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* The value of header @name in @r (copied into @out), or NULL. */
static const char *header(const struct reply *r, const char *name,
			  char *out, size_t len)
{
	size_t n = strlen(name);

	for (const char *l = strstr(r->head, "\r\n"); l && l[2];
	     l = strstr(l + 2, "\r\n")) {
		const char *s = l + 2, *end = strstr(s, "\r\n");

		if (!end || end == s)
			break;
		if ((size_t)(end - s) > n && s[n] == ':' &&
		    !strncasecmp(s, name, n)) {
			s += n + 1;
			while (*s == ' ')
				s++;
			snprintf(out, len, "%.*s", (int)(end - s), s);
			return out;
		}
	}
	return NULL;
}

/*
 * Read a whole reply (the server closes: "Connection: close").  When
 * @flag is given, *@seen is *@flag as it was once @at bytes had come.
 */
static bool read_reply_watching(int fd, struct reply *r, size_t at,
				const int *flag, int *seen)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1), *sep, cl[32];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	if (!buf)
		return false;
	while ((n = recv(fd, buf + len, cap - len < 4096 ? cap - len : 4096,
			 0)) > 0) {
		if (flag && len < at && len + (size_t)n >= at)
			*seen = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
		len += (size_t)n;
		if (len == cap) {
			char *p = realloc(buf, 2 * cap + 1);

			if (!p)
				break;
			buf = p;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	sep = strstr(buf, "\r\n\r\n");
	if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
		harness_log("not an HTTP reply (%zu bytes)", len);
		free(buf);
		return false;
	}
	r->head = strndup(buf, (size_t)(sep - buf) + 2);
	r->body_len = len - (size_t)(sep + 4 - buf);
	r->body = malloc(r->body_len + 1);
	if (r->body) {
		memcpy(r->body, sep + 4, r->body_len);
		r->body[r->body_len] = '\0';
	}
	free(buf);
	if (!r->head || !r->body)
		return false;
	if (header(r, "Content-Length", cl, sizeof(cl)))
		r->content_length = atol(cl);
	r->complete = r->content_length == (long)r->body_len;
	return true;
}

static bool read_reply(int fd, struct reply *r)
{
	return read_reply_watching(fd, r, 0, NULL, NULL);
}

/*
 * One request from 127.0.0.@src; Connection: close.  @accept NULL: no
 * Accept header.
 */
static bool fetch_from(unsigned int src, unsigned int port,
		       const char *method, const char *path,
		       const char *accept, struct reply *r)
{
	char req[1024];
	int fd = connect_from(port, src);
	bool ok;

	if (fd < 0) {
		harness_log("connect to port %u: %s", port, strerror(errno));
		return false;
	}
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s"
		 "Connection: close\r\n\r\n",
		 method, path, accept ? "Accept: " : "", accept ? accept : "",
		 accept ? "\r\n" : "");
	ok = send_all(fd, req) && read_reply(fd, r);
	close(fd);
	return ok;
}

static bool fetch(unsigned int port, const char *method, const char *path,
		  const char *accept, struct reply *r)
{
	return fetch_from(1, port, method, path, accept, r);
}

static struct tally_http *start(struct fixture *f,
				const struct tally_http_options *o)
{
	struct tally_http *h = NULL;

	CHECK_EQ_LONG(tally_http_start(&h, f->served, o), 0);
	if (h)
		CHECK(tally_http_port(h) > 0);
	return h;
}

/* --- tests -------------------------------------------------------------- */

TEST(get_without_accept_serves_the_text_format_with_its_content_type)
{
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	char *want, ct[128], vary[64];

	REQUIRE(fixture_init(&f, 2));
	want = expected(&f, TALLY_EXPORT_PROMETHEUS);
	h = start(&f, NULL);
	if (h && want && CHECK(fetch(tally_http_port(h), "GET", "/metrics",
				     NULL, &r))) {
		CHECK_EQ_LONG(r.status, 200);
		CHECK(r.complete);
		CHECK(!strcmp(r.body, want));
		CHECK(header(&r, "Content-Type", ct, sizeof(ct)) &&
		      !strcmp(ct, CT_TEXT));
		CHECK(header(&r, "Vary", vary, sizeof(vary)) &&
		      !strcmp(vary, "Accept"));
		CHECK(strstr(r.body, "tally_memory_max_bytes{group=\"/a\"} "
				     "+Inf\n"));
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(want);
	fixture_destroy(&f);
}

TEST(accept_header_picks_the_format_by_q_and_specificity)
{
	static const struct {
		const char *accept;
		enum tally_export_format want;
	} cases[] = {
		{ PROMETHEUS_ACCEPT, TALLY_EXPORT_OPENMETRICS },
		{ "application/openmetrics-text", TALLY_EXPORT_OPENMETRICS },
		{ "Application/OpenMetrics-Text; Version=1.0.0",
		  TALLY_EXPORT_OPENMETRICS },
		{ "application/openmetrics-text; version=\"1.0.0\"",
		  TALLY_EXPORT_OPENMETRICS },
		{ "text/plain; version=\"0.0.4\"; q=0.5, "
		  "application/openmetrics-text; version=\"0.0.1\"",
		  TALLY_EXPORT_PROMETHEUS },
		{ "application/*", TALLY_EXPORT_OPENMETRICS },
		{ "text/plain;q=0.3, application/openmetrics-text;q=0.9",
		  TALLY_EXPORT_OPENMETRICS },
		{ "*/*;q=0.5, application/openmetrics-text;q=0.5",
		  TALLY_EXPORT_OPENMETRICS },
		{ "text/plain;version=0.0.4", TALLY_EXPORT_PROMETHEUS },
		{ "text/plain", TALLY_EXPORT_PROMETHEUS },
		{ "*/*", TALLY_EXPORT_PROMETHEUS },
		{ "text/*", TALLY_EXPORT_PROMETHEUS },
		{ "application/openmetrics-text;version=0.0.1",
		  TALLY_EXPORT_PROMETHEUS },
		{ "application/openmetrics-text;q=0", TALLY_EXPORT_PROMETHEUS },
		{ "application/openmetrics-text;q=abc",
		  TALLY_EXPORT_PROMETHEUS },
		{ "application/openmetrics-text;q=0.2, text/plain;q=0.9",
		  TALLY_EXPORT_PROMETHEUS },
		{ "text/plain;q=0.5, application/openmetrics-text;q=0.5",
		  TALLY_EXPORT_PROMETHEUS },
		{ "image/png", TALLY_EXPORT_PROMETHEUS },
		{ "", TALLY_EXPORT_PROMETHEUS },
		{ ",,;;=,", TALLY_EXPORT_PROMETHEUS },
	};
	struct fixture f;
	struct tally_http *h;
	char *text, *om, ct[128];

	REQUIRE(fixture_init(&f, 2));
	text = expected(&f, TALLY_EXPORT_PROMETHEUS);
	om = expected(&f, TALLY_EXPORT_OPENMETRICS);
	h = start(&f, NULL);
	for (size_t i = 0; h && text && om && i < ARRAY_SIZE(cases); i++) {
		bool is_om = cases[i].want == TALLY_EXPORT_OPENMETRICS;
		struct reply r;

		if (!CHECK(fetch(tally_http_port(h), "GET", "/metrics",
				 cases[i].accept, &r)))
			break;
		if (!CHECK_EQ_LONG(r.status, 200) ||
		    !CHECK(!strcmp(r.body, is_om ? om : text)) ||
		    !CHECK(header(&r, "Content-Type", ct, sizeof(ct)) &&
			   !strcmp(ct, is_om ? CT_OM : CT_TEXT)))
			harness_log("Accept: %s", cases[i].accept);
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(text);
	free(om);
	fixture_destroy(&f);
}

TEST(other_paths_get_404_other_methods_405_queries_are_ignored)
{
	static const char *const paths[] = { "/", "/metrics/", "/metricsx",
					     "/Metrics", "/favicon.ico" };
	static const char *const methods[] = { "POST", "PUT", "DELETE",
					       "OPTIONS", "PATCH" };
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	char allow[64];

	REQUIRE(fixture_init(&f, 2));
	h = start(&f, NULL);
	for (size_t i = 0; h && i < ARRAY_SIZE(paths); i++) {
		if (!CHECK(fetch(tally_http_port(h), "GET", paths[i], NULL, &r)))
			break;
		if (!CHECK_EQ_LONG(r.status, 404))
			harness_log("GET %s", paths[i]);
		reply_free(&r);
	}
	for (size_t i = 0; h && i < ARRAY_SIZE(methods); i++) {
		if (!CHECK(fetch(tally_http_port(h), methods[i], "/metrics",
				 NULL, &r)))
			break;
		if (!CHECK_EQ_LONG(r.status, 405) ||
		    !CHECK(header(&r, "Allow", allow, sizeof(allow)) &&
			   !strcmp(allow, "GET, HEAD")))
			harness_log("%s /metrics", methods[i]);
		reply_free(&r);
	}
	if (h && CHECK(fetch(tally_http_port(h), "GET", "/metrics?x=1&y",
			     NULL, &r))) {
		CHECK_EQ_LONG(r.status, 200);
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	fixture_destroy(&f);
}

TEST(a_path_option_moves_the_metrics)
{
	struct tally_http_options o = { .path = "/internal/metrics" };
	struct fixture f;
	struct tally_http *h;
	struct reply r;

	REQUIRE(fixture_init(&f, 2));
	h = start(&f, &o);
	if (h && CHECK(fetch(tally_http_port(h), "GET", "/internal/metrics",
			     NULL, &r))) {
		CHECK_EQ_LONG(r.status, 200);
		reply_free(&r);
	}
	if (h && CHECK(fetch(tally_http_port(h), "GET", "/metrics", NULL,
			     &r))) {
		CHECK_EQ_LONG(r.status, 404);
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	fixture_destroy(&f);
}

TEST(head_gets_the_headers_of_get_without_a_body)
{
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	char *om, ct[128];

	REQUIRE(fixture_init(&f, 2));
	om = expected(&f, TALLY_EXPORT_OPENMETRICS);
	h = start(&f, NULL);
	if (h && om && CHECK(fetch(tally_http_port(h), "HEAD", "/metrics",
				   PROMETHEUS_ACCEPT, &r))) {
		CHECK_EQ_LONG(r.status, 200);
		CHECK_EQ_LONG(r.body_len, 0);
		CHECK_EQ_LONG(r.content_length, (long)strlen(om));
		CHECK(header(&r, "Content-Type", ct, sizeof(ct)) &&
		      !strcmp(ct, CT_OM));
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(om);
	fixture_destroy(&f);
}

struct scraper {
	unsigned int port;
	int rounds;
	const char *want[2];
	int ok;
};

static void *scrape_loop(void *arg)
{
	struct scraper *s = arg;

	for (int i = 0; i < s->rounds; i++) {
		bool om = i % 2;
		struct reply r;

		if (!fetch(s->port, "GET", "/metrics",
			   om ? "application/openmetrics-text" : NULL, &r))
			continue;
		if (r.status == 200 && r.complete && !strcmp(r.body, s->want[om]))
			s->ok++;
		reply_free(&r);
	}
	return NULL;
}

/* Eight scrapers at once, both formats: every answer whole and exact. */
TEST(concurrent_scrapes_all_get_whole_exact_answers)
{
	enum { THREADS = 8 };
	struct scraper s[THREADS];
	pthread_t th[THREADS];
	struct fixture f;
	struct tally_http *h;
	char *text, *om;

	REQUIRE(fixture_init(&f, 200));
	text = expected(&f, TALLY_EXPORT_PROMETHEUS);
	om = expected(&f, TALLY_EXPORT_OPENMETRICS);
	h = start(&f, NULL);
	REQUIRE(h && text && om);
	for (int i = 0; i < THREADS; i++) {
		s[i] = (struct scraper){ .port = tally_http_port(h),
					 .rounds = (int)harness_scale(40),
					 .want = { text, om } };
		REQUIRE(pthread_create(&th[i], NULL, scrape_loop, &s[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ_LONG(s[i].ok, s[i].rounds);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(text);
	free(om);
	fixture_destroy(&f);
}

struct stopper {
	struct tally_http *h;
	int ret;
	int done;
};

static void *stop_thread(void *arg)
{
	struct stopper *s = arg;

	s->ret = tally_http_stop(s->h);
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The most a TCP socket's send buffer grows to (tcp_wmem's maximum). */
static size_t send_buffer_max(void)
{
	unsigned long lo, def, max = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");

	if (f) {
		if (fscanf(f, "%lu %lu %lu", &lo, &def, &max) != 3)
			max = 0;
		fclose(f);
	}
	return max ? max : 4ul << 20;
}

/*
 * A scrape whose answer is far larger than what the socket buffers hold
 * (a receive buffer of a few KiB, the send buffer at its maximum); stop
 * is called once the first bytes came.  Until the client has read all
 * but (send buffer + a MiB) of it, the server cannot have sent it all:
 * stop must still be waiting then.  The client gets the whole answer and
 * stop returns 0.  With a short stop timeout and a client that never
 * reads, stop cuts the scrape: -ETIMEDOUT, and the client sees a short
 * body.
 */
static void scrape_during_stop(bool stall)
{
	struct tally_http_options o = { .stop_timeout_ms = stall ? 300 : 0 };
	size_t margin = send_buffer_max() + (1u << 20), total;
	int small = 4096, fd, seen = -1;
	struct stopper st = { 0 };
	struct fixture f;
	struct reply r;
	pthread_t th;
	char *text, first[1];

	REQUIRE(fixture_init(&f, 2));
	REQUIRE(grow_to(&f, 2 * margin));
	text = expected(&f, TALLY_EXPORT_PROMETHEUS);
	REQUIRE(text);
	total = strlen(text);
	REQUIRE(total > margin + 4096);
	st.h = start(&f, &o);
	REQUIRE(st.h);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	{
		struct sockaddr_in a = {
			.sin_family = AF_INET,
			.sin_port = htons((uint16_t)tally_http_port(st.h)),
			.sin_addr = { htonl(INADDR_LOOPBACK) },
		};
		struct timeval tv = { .tv_sec = 60 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	}
	REQUIRE(send_all(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n"
			     "Connection: close\r\n\r\n"));
	/* The answer has begun: the request is in flight. */
	REQUIRE(recv(fd, first, 1, MSG_PEEK) == 1);
	REQUIRE(pthread_create(&th, NULL, stop_thread, &st) == 0);
	if (stall)
		pthread_join(th, NULL);
	if (CHECK(read_reply_watching(fd, &r, total - margin, &st.done,
				      &seen))) {
		CHECK_EQ_LONG(r.status, 200);
		if (stall) {
			CHECK(!r.complete);
			CHECK(r.body_len < total);
		} else {
			CHECK(r.complete);
			CHECK(!strcmp(r.body, text));
			CHECK_EQ_LONG(seen, 0);
		}
		reply_free(&r);
	}
	if (!stall)
		pthread_join(th, NULL);
	CHECK_EQ_LONG(st.ret, stall ? -ETIMEDOUT : 0);
	close(fd);
	free(text);
	fixture_destroy(&f);
}

TEST(stop_waits_for_a_scrape_in_flight)
{
	scrape_during_stop(false);
}

TEST(stop_cuts_a_stalled_scrape_after_its_timeout)
{
	scrape_during_stop(true);
}

/* Listening only on 127.0.0.1 by default, as /proc/net/tcp shows. */
static bool listens_on(const char *hex_addr, unsigned int port)
{
	char want[64], line[512];
	FILE *f = fopen("/proc/net/tcp", "r");
	bool found = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), "%s:%04X", hex_addr, port);
	while (fgets(line, sizeof(line), f)) {
		char local[64], remote[64];
		unsigned int state;

		if (sscanf(line, "%*d: %63s %63s %X", local, remote,
			   &state) == 3 &&
		    !strcmp(local, want) && state == 0x0A)
			found = true;
	}
	fclose(f);
	return found;
}

TEST(binds_loopback_by_default_and_port_zero_reports_the_port)
{
	struct tally_http_options any = { .address = "0.0.0.0" };
	struct fixture f;
	struct tally_http *h, *h2 = NULL;
	struct reply r;
	unsigned int port;

	REQUIRE(fixture_init(&f, 2));
	h = start(&f, NULL);
	REQUIRE(h);
	port = tally_http_port(h);
	CHECK(listens_on("0100007F", port));
	CHECK(!listens_on("00000000", port));
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	CHECK(!listens_on("0100007F", port));

	/* The same port again at once (SO_REUSEADDR), then taken. */
	any.port = port;
	h = start(&f, &any);
	if (h) {
		CHECK_EQ_LONG(tally_http_port(h), port);
		CHECK(listens_on("00000000", port));
		CHECK_EQ_LONG(tally_http_start(&h2, f.oracle, &any),
			      -EADDRINUSE);
		CHECK(h2 == NULL);
		if (CHECK(fetch(port, "GET", "/metrics", NULL, &r))) {
			CHECK_EQ_LONG(r.status, 200);
			reply_free(&r);
		}
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	fixture_destroy(&f);
}

TEST(bad_options_get_documented_errors)
{
	static const char *const bad_addresses[] = {
		"localhost", "1.2.3", "", "127.0.0.1:80", "::1%nope", "1.2.3.4.5",
	};
	static const char *const bad_paths[] = { "", "metrics", "/a?b" };
	struct tally_http_options o = { 0 };
	struct tally_http *h = (struct tally_http *)&o;
	struct fixture f;
	char long_path[300];

	REQUIRE(fixture_init(&f, 2));
	CHECK_EQ_LONG(tally_http_start(NULL, f.served, NULL), -EINVAL);
	CHECK_EQ_LONG(tally_http_start(&h, NULL, NULL), -EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(bad_addresses); i++) {
		o.address = bad_addresses[i];
		if (!CHECK_EQ_LONG(tally_http_start(&h, f.served, &o),
				   -EINVAL))
			harness_log("address \"%s\"", bad_addresses[i]);
	}
	o.address = NULL;
	o.port = 65536;
	CHECK_EQ_LONG(tally_http_start(&h, f.served, &o), -EINVAL);
	o.port = 0;
	for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++) {
		o.path = bad_paths[i];
		CHECK_EQ_LONG(tally_http_start(&h, f.served, &o), -EINVAL);
	}
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	o.path = long_path;
	CHECK_EQ_LONG(tally_http_start(&h, f.served, &o), -EINVAL);
	/* Failures leave *out untouched. */
	CHECK(h == (struct tally_http *)&o);
	CHECK_EQ_LONG(tally_http_port(NULL), 0);
	CHECK_EQ_LONG(tally_http_stop(NULL), 0);
	fixture_destroy(&f);
}

/*
 * A forked child: stopping the inherited endpoint only releases its copy
 * (the parent serves on), and it may serve the exporter on its own
 * endpoint.  The parent's endpoint still answers after the child is done.
 */
TEST(a_forked_child_stops_its_copy_and_serves_on_its_own)
{
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	char *text;
	pid_t pid;

	REQUIRE(fixture_init(&f, 2));
	text = expected(&f, TALLY_EXPORT_PROMETHEUS);
	h = start(&f, NULL);
	REQUIRE(h && text);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct tally_http *mine = NULL;

		CHECK_EQ_LONG(tally_http_stop(h), 0);
#ifdef __SANITIZE_THREAD__
		/* TSan cannot start threads after a multi-threaded fork. */
		harness_child_exit();
#endif
		CHECK_EQ_LONG(tally_http_start(&mine, f.served, NULL), 0);
		if (mine && CHECK(fetch(tally_http_port(mine), "GET",
					"/metrics", NULL, &r))) {
			CHECK_EQ_LONG(r.status, 200);
			CHECK(!strcmp(r.body, text));
			reply_free(&r);
		}
		CHECK_EQ_LONG(tally_http_stop(mine), 0);
		harness_child_exit();
	}
	CHECK_EQ_LONG(harness_wait_child(pid), 0);
	if (CHECK(fetch(tally_http_port(h), "GET", "/metrics", NULL, &r))) {
		CHECK_EQ_LONG(r.status, 200);
		CHECK(!strcmp(r.body, text));
		reply_free(&r);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(text);
	fixture_destroy(&f);
}

/* While an endpoint serves an exporter, the exporter is its own. */
TEST(a_second_start_on_a_served_exporter_is_refused)
{
	struct fixture f;
	struct tally_http *h, *h2 = NULL;

	REQUIRE(fixture_init(&f, 2));
	h = start(&f, NULL);
	REQUIRE(h);
	CHECK_EQ_LONG(tally_http_start(&h2, f.served, NULL), -EBUSY);
	CHECK(h2 == NULL);
	if (h2)
		tally_http_stop(h2);
	/* Another exporter of the same trees may be served beside it. */
	h2 = NULL;
	CHECK_EQ_LONG(tally_http_start(&h2, f.oracle, NULL), 0);
	CHECK_EQ_LONG(tally_http_stop(h2), 0);
	/* Stopped, the exporter may be served again. */
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	h = start(&f, NULL);
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	fixture_destroy(&f);
}

/* --- slow clients --------------------------------------------------------- */

#define SLOW_CLIENTS 64
#define TRICKLE_MS 100

/*
 * SLOW_CLIENTS connections that send a request line and then one byte of
 * a header every TRICKLE_MS, never ending the headers, for at most
 * @rounds rounds (then @done), until @stop or until the server closed
 * them all.  Each from 127.0.0.@src[i].
 */
struct trickler {
	unsigned int port;
	unsigned int src[SLOW_CLIENTS];
	int fd[SLOW_CLIENTS];
	int rounds;
	int stop;		/* set by the test */
	int done;		/* set when the rounds ran out */
	int cut;		/* connections the server closed */
	int connected;
};

/* Whether the server closed @fd (end of file or an error, no waiting). */
static bool closed_by_server(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void *trickle(void *arg)
{
	struct trickler *t = arg;
	struct timespec pause = { 0, TRICKLE_MS * 1000000l };
	bool open[SLOW_CLIENTS];
	int r;

	for (int i = 0; i < SLOW_CLIENTS; i++) {
		open[i] = t->fd[i] >= 0 &&
			  send_all(t->fd[i], "GET /metrics HTTP/1.1\r\n"
					     "X-Slow: ");
		if (!open[i])
			__atomic_add_fetch(&t->cut, 1, __ATOMIC_RELEASE);
	}
	for (r = 0; r < t->rounds && t->cut < SLOW_CLIENTS &&
		    !__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE); r++) {
		for (int i = 0; i < SLOW_CLIENTS; i++) {
			if (!open[i])
				continue;
			if (closed_by_server(t->fd[i]) ||
			    send(t->fd[i], "a", 1, MSG_NOSIGNAL) != 1) {
				open[i] = false;
				__atomic_add_fetch(&t->cut, 1, __ATOMIC_RELEASE);
			}
		}
		nanosleep(&pause, NULL);
	}
	if (r == t->rounds)
		__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < SLOW_CLIENTS; i++)
		if (t->fd[i] >= 0)
			close(t->fd[i]);
	return NULL;
}

static bool trickle_start(struct trickler *t, pthread_t *th)
{
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		t->fd[i] = connect_from(t->port, t->src[i]);
		t->connected += t->fd[i] >= 0;
	}
	return CHECK_EQ_LONG(t->connected, SLOW_CLIENTS) &&
	       CHECK(pthread_create(th, NULL, trickle, t) == 0);
}

/*
 * 64 clients of one address trickle the headers of their requests (every
 * connection slot of an endpoint without a per-address limit) for 2 s;
 * a scrape from another address is answered meanwhile, while they are
 * still trickling, and the address keeps 16 connections.
 */
TEST(slow_clients_of_one_address_leave_a_scrape_answered)
{
	struct trickler t = { .rounds = 2000 / TRICKLE_MS };
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	pthread_t th;
	double t0;
	char *want;

	REQUIRE(fixture_init(&f, 2));
	want = expected(&f, TALLY_EXPORT_PROMETHEUS);
	h = start(&f, NULL);
	REQUIRE(h && want);
	t.port = tally_http_port(h);
	for (int i = 0; i < SLOW_CLIENTS; i++)
		t.src[i] = 1;
	if (trickle_start(&t, &th)) {
		t0 = harness_now();
		if (CHECK(fetch_from(2, t.port, "GET", "/metrics", NULL, &r))) {
			CHECK(!__atomic_load_n(&t.done, __ATOMIC_ACQUIRE));
			CHECK_EQ_LONG(r.status, 200);
			CHECK(r.complete && !strcmp(r.body, want));
			reply_free(&r);
		}
		harness_log("info: scrape answered in %.3f s",
			    harness_now() - t0);
		/* The address's connections past 16 were closed at once;
		 * the 16 others trickle on (their deadline is 5 s). */
		while (__atomic_load_n(&t.cut, __ATOMIC_ACQUIRE) <
			       SLOW_CLIENTS - 16 &&
		       !__atomic_load_n(&t.done, __ATOMIC_ACQUIRE))
			usleep(10000);
		__atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		CHECK_EQ_LONG(t.cut, SLOW_CLIENTS - 16);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(want);
	fixture_destroy(&f);
}

/*
 * One client trickles its headers a byte every 100 ms (each byte restarts
 * an idle timeout): the endpoint closes it at the default deadline of
 * the headers, 5 s after it connected, never sooner; it would have sent
 * for 10 s.
 */
TEST(request_headers_are_cut_at_their_deadline)
{
	struct timespec pause = { 0, TRICKLE_MS * 1000000l };
	struct fixture f;
	struct tally_http *h;
	double t0, cut_at = -1;
	int fd;

	REQUIRE(fixture_init(&f, 2));
	h = start(&f, NULL);
	REQUIRE(h);
	t0 = harness_now();
	fd = connect_to(tally_http_port(h));
	if (CHECK(fd >= 0) &&
	    CHECK(send_all(fd, "GET /metrics HTTP/1.1\r\nX-Slow: "))) {
		for (int i = 0; i < 10000 / TRICKLE_MS; i++) {
			if (closed_by_server(fd) ||
			    send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
				cut_at = harness_now() - t0;
				break;
			}
			nanosleep(&pause, NULL);
		}
		harness_log("info: cut after %.3f s", cut_at);
		CHECK(cut_at >= 5.0);
	}
	if (fd >= 0)
		close(fd);
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	fixture_destroy(&f);
}

/*
 * 64 clients of 64 addresses take every connection slot and trickle; with
 * a header timeout of 300 ms the endpoint cuts them all and a scrape
 * waiting for a slot is answered.  They would have trickled for 10 s.
 */
TEST(a_header_timeout_cuts_slow_clients_of_every_address)
{
	struct tally_http_options o = { .header_timeout_ms = 300 };
	struct trickler t = { .rounds = 10000 / TRICKLE_MS };
	struct fixture f;
	struct tally_http *h;
	struct reply r;
	pthread_t th;
	char *want;

	REQUIRE(fixture_init(&f, 2));
	want = expected(&f, TALLY_EXPORT_PROMETHEUS);
	h = start(&f, &o);
	REQUIRE(h && want);
	t.port = tally_http_port(h);
	for (int i = 0; i < SLOW_CLIENTS; i++)
		t.src[i] = 2 + (unsigned int)i;
	if (trickle_start(&t, &th)) {
		if (CHECK(fetch_from(1, t.port, "GET", "/metrics", NULL, &r))) {
			CHECK(!__atomic_load_n(&t.done, __ATOMIC_ACQUIRE));
			CHECK_EQ_LONG(r.status, 200);
			CHECK(r.complete && !strcmp(r.body, want));
			reply_free(&r);
		}
		pthread_join(th, NULL);
		CHECK_EQ_LONG(t.cut, SLOW_CLIENTS);
		CHECK(!t.done);
	}
	CHECK_EQ_LONG(tally_http_stop(h), 0);
	free(want);
	fixture_destroy(&f);
}
