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

struct tenant {
	const char *name;
	long max;		/* the tenant's memory.max */
	long request;		/* bytes one of its requests needs */
	struct tally_memcg *group;
	int served, refused;	/* under queue.lock */
};

static struct tenant tenants[] = {
	{ "small", 16 * MIB, 1 * MIB, NULL, 0, 0 },
	{ "medium", 64 * MIB, 6 * MIB, NULL, 0, 0 },
	{ "greedy", 8 * MIB, 24 * MIB, NULL, 0, 0 },	/* over its max */
	{ "big", TALLY_MEMCG_UNLIMITED, 80 * MIB, NULL, 0, 0 },
};
#define NR_TENANTS (sizeof(tenants) / sizeof(tenants[0]))
/* The max of all tenants together: "big" fits its own, not this. */
#define TOTAL_MAX (64 * MIB)

static struct {
	pthread_mutex_t lock;
	int next;		/* requests taken so far */
} queue = { PTHREAD_MUTEX_INITIALIZER, 0 };

/*
 * Handle one request: read its body into one buffer and build the
 * response in another, as a real handler would, then free them.
 * Returns 0, or -1 when memory ran out (errno ENOMEM; nothing is left
 * allocated).
 */
static int handle(const struct tenant *t)
{
	char *body = malloc((size_t)t->request);
	char *response;

	if (!body)
		return -1;
	memset(body, 'x', (size_t)t->request);
	response = malloc(4096);
	if (response)
		snprintf(response, 4096, "%s: %ld bytes", t->name, t->request);
	free(body);
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
	printf("tenants: max events %s, oom events %s\n",
	       events(all, TALLY_MEMCG_EVENT_MAX) > 0 ? "counted" : "none",
	       events(all, TALLY_MEMCG_EVENT_OOM) > 0 ? "counted" : "none");

	/* Freed pages stay charged until jemalloc purges them. */
	CHECK(tally_jemalloc_purge(NULL));
	printf("after the purge: tenants use %ld bytes\n", usage(all));
	for (size_t i = 0; i < NR_TENANTS; i++)
		CHECK(tally_jemalloc_release(tenants[i].group));
	return 0;
}
