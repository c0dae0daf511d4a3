// SPDX-License-Identifier: MIT
/*
 * tenant_server.c - a multi-threaded server whose requests run in their
 * tenant's memory group: a worker takes a request, makes the tenant's
 * group its current group (tally_jemalloc_set_current()), handles the
 * request with plain malloc() and free(), and restores its group.  Every
 * page jemalloc commits for the request is charged to the tenant and to
 * the "tenants" group above; a tenant at its max, or all of them at the
 * total max, get NULL from malloc() and answer "out of memory" instead of
 * taking the whole process down.
 *
 * Each tenant keeps the bodies of its last requests for reuse, and
 * registers a reclaim callback that frees them: when an allocation is
 * refused, tally_jemalloc_make_room() runs the callbacks (outside
 * jemalloc's locks, so they may free() and purge) and the allocation is
 * tried once more.
 *
 *	cc tenant_server.c $(pkg-config --cflags --libs tally_jemalloc)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include <tally/memcg_current.h>

#include "check.h"

#define MIB (1024l * 1024)
#define WORKERS 4
#define ROUNDS 20
#define CACHED 8		/* request bodies a tenant keeps */

struct tenant {
	const char *name;
	long max;		/* the tenant's memory.max */
	long request;		/* bytes one of its requests needs */
	struct tally_memcg *group;
	int served, refused;	/* under queue.lock */
	pthread_mutex_t cache_lock;
	char *cache[CACHED];	/* idle request bodies */
	int cached, reclaims;	/* under cache_lock */
};

#define TENANT(name, max, request) \
	{ name, max, request, NULL, 0, 0, PTHREAD_MUTEX_INITIALIZER, \
	  { NULL }, 0, 0 }

static struct tenant tenants[] = {
	TENANT("small", 16 * MIB, 1 * MIB),
	TENANT("medium", 64 * MIB, 6 * MIB),
	TENANT("greedy", 8 * MIB, 24 * MIB),	/* over its max */
	TENANT("big", TALLY_MEMCG_UNLIMITED, 80 * MIB),
};
#define NR_TENANTS (sizeof(tenants) / sizeof(tenants[0]))
/* The max of all tenants together: "big" fits its own, not this. */
#define TOTAL_MAX (64 * MIB)

static struct {
	pthread_mutex_t lock;
	int next;		/* requests taken so far */
} queue = { PTHREAD_MUTEX_INITIALIZER, 0 };

/* malloc(), tried once more after room was made if it was refused. */
static void *alloc(size_t n)
{
	void *p = malloc(n);

	if (!p && tally_jemalloc_make_room() == 0)
		p = malloc(n);
	return p;
}

/* The tenant's reclaim callback: free its idle bodies, purge its pages. */
static long free_cached_bodies(struct tally_memcg *g, long bytes, void *arg)
{
	struct tenant *t = arg;
	long freed;

	(void)bytes;
	pthread_mutex_lock(&t->cache_lock);
	freed = t->cached * t->request;
	while (t->cached > 0)
		free(t->cache[--t->cached]);
	t->reclaims++;
	pthread_mutex_unlock(&t->cache_lock);
	tally_jemalloc_purge(g);	/* the freed pages: uncharged */
	return freed;
}

static char *take_body(struct tenant *t)
{
	char *body = NULL;

	pthread_mutex_lock(&t->cache_lock);
	if (t->cached > 0)
		body = t->cache[--t->cached];
	pthread_mutex_unlock(&t->cache_lock);
	return body ? body : alloc((size_t)t->request);
}

static void keep_body(struct tenant *t, char *body)
{
	pthread_mutex_lock(&t->cache_lock);
	if (t->cached < CACHED) {
		t->cache[t->cached++] = body;
		body = NULL;
	}
	pthread_mutex_unlock(&t->cache_lock);
	free(body);
}

/*
 * Handle one request: read its body into one buffer and build the
 * response in another, as a real handler would; keep the body for the
 * next request, free the response.  Returns 0, or -1 when memory ran out
 * (errno ENOMEM; nothing is left allocated).
 */
static int handle(struct tenant *t)
{
	char *body = take_body(t);
	char *response;

	if (!body)
		return -1;
	memset(body, 'x', (size_t)t->request);
	response = alloc(4096);
	if (response)
		snprintf(response, 4096, "%s: %ld bytes", t->name, t->request);
	keep_body(t, body);
	free(response);
	return response ? 0 : -1;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&queue.lock);
		int r = queue.next++;
		pthread_mutex_unlock(&queue.lock);
		if (r >= ROUNDS * (int)NR_TENANTS)
			break;

		struct tenant *t = &tenants[r % NR_TENANTS];
		/* The request runs in its tenant's group. */
		struct tally_memcg *save = tally_jemalloc_set_current(t->group);
		int ret = handle(t);
		tally_jemalloc_set_current(save);

		pthread_mutex_lock(&queue.lock);
		if (ret)
			t->refused++;
		else
			t->served++;
		pthread_mutex_unlock(&queue.lock);
	}
	return NULL;
}

static long events(struct tally_memcg *g, enum tally_memcg_event ev)
{
	long hier[TALLY_MEMCG_NR_EVENTS];

	CHECK(tally_memcg_events(g, hier, NULL));
	return hier[ev];
}

static long usage(struct tally_memcg *g)
{
	struct tally_memcg_range r;

	CHECK(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r));
	return r.value;
}

int main(void)
{
	struct tally_memcg_tree *tree;
	struct tally_memcg *all;
	pthread_t th[WORKERS];

	CHECK(tally_memcg_tree_create(&tree, NULL));
	CHECK(tally_memcg_create(tally_memcg_root(tree), "tenants", &all));
	CHECK(tally_memcg_set_limit(all, TALLY_MEMCG_MAX, TOTAL_MAX));
	for (size_t i = 0; i < NR_TENANTS; i++) {
		CHECK(tally_memcg_create(all, tenants[i].name,
					 &tenants[i].group));
		CHECK(tally_memcg_set_limit(tenants[i].group, TALLY_MEMCG_MAX,
					    tenants[i].max));
		CHECK(tally_memcg_set_reclaim(tenants[i].group,
					      free_cached_bodies, &tenants[i]));
	}
	CHECK(tally_jemalloc_init(NULL));

	for (int i = 0; i < WORKERS; i++)
		if (pthread_create(&th[i], NULL, worker, NULL)) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);

	printf("%d workers, %d requests per tenant, tenants' total max "
	       "%ld MiB\n", WORKERS, ROUNDS, TOTAL_MAX / MIB);
	for (size_t i = 0; i < NR_TENANTS; i++) {
		struct tenant *t = &tenants[i];
		char max[32];

		if (t->max == TALLY_MEMCG_UNLIMITED)
			snprintf(max, sizeof(max), "max");
		else
			snprintf(max, sizeof(max), "%ld MiB", t->max / MIB);
		printf("%-6s max %-7s request %2ld MiB: %2d served, %2d out of "
		       "memory, peak %ld KiB\n", t->name, max,
		       t->request / MIB, t->served, t->refused,
		       tally_memcg_peak(t->group, false) / 1024);
	}
	printf("tenants: max events %s, oom events %s, medium's cached "
	       "bodies reclaimed %s\n",
	       events(all, TALLY_MEMCG_EVENT_MAX) > 0 ? "counted" : "none",
	       events(all, TALLY_MEMCG_EVENT_OOM) > 0 ? "counted" : "none",
	       tenants[1].reclaims > 0 ? "yes" : "no");

	/* The bodies the tenants keep, then the pages jemalloc keeps. */
	for (size_t i = 0; i < NR_TENANTS; i++) {
		CHECK(tally_memcg_set_reclaim(tenants[i].group, NULL, NULL));
		free_cached_bodies(tenants[i].group, 0, &tenants[i]);
	}
	CHECK(tally_jemalloc_purge(NULL));
	printf("after the purge: tenants use %ld bytes\n", usage(all));
	for (size_t i = 0; i < NR_TENANTS; i++)
		CHECK(tally_jemalloc_release(tenants[i].group));
	return 0;
}
