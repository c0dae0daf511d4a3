// SPDX-License-Identifier: MIT
/*
 * memcg.c - memory groups for the tenants of a server: every buffer is
 * charged to its tenant's group (and the groups above it), and stores that
 * group so that freeing it uncharges the same one.  A tenant's max is
 * exact: no charge is refused while there is room, none goes over.
 *
 *	cc memcg.c $(pkg-config --cflags --libs tally)
 */
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <tally/memcg.h>

#include "check.h"

#define BUF_SIZE 4096
#define MAX_BUFS 1024

struct buffer {
	struct tally_memcg *group;	/* the group charged: uncharge it */
	char data[BUF_SIZE];
};

struct cache {
	struct buffer *bufs[MAX_BUFS];
	int nr;
};

static struct buffer *buffer_alloc(struct tally_memcg *g, unsigned int flags)
{
	struct buffer *b;
	int ret = tally_memcg_charge(g, BUF_SIZE, flags);

	if (ret == -ENOMEM)
		return NULL;		/* the tenant is at its max */
	CHECK(ret);			/* 0, or TALLY_MEMCG_OVER_HIGH */
	b = malloc(sizeof(*b));
	if (!b) {
		CHECK(tally_memcg_uncharge(g, BUF_SIZE));
		return NULL;
	}
	b->group = g;
	return b;
}

static void buffer_free(struct buffer *b)
{
	CHECK(tally_memcg_uncharge(b->group, BUF_SIZE));
	free(b);
}

/* Reclaim: the cache gives back its oldest buffers. */
static long shrink_cache(struct tally_memcg *g, long bytes, void *arg)
{
	struct cache *c = arg;
	long freed = 0;

	(void)g;	/* one cache per group here */
	while (freed < bytes && c->nr > 0) {
		buffer_free(c->bufs[--c->nr]);
		freed += BUF_SIZE;
	}
	return freed;
}

/* A tenant's "queries", each with its own RSS-style counters. */
struct query {
	const char *name;
	struct tally_mm mm;
	struct tally_memcg_task task;
	struct cache held;
	int cancelled;
};

static void cancel_query(struct tally_memcg *oom_group,
			 struct tally_memcg_task *victim, void *arg)
{
	struct query *q = victim->owner;

	(void)oom_group;
	(void)arg;
	q->cancelled = 1;
	printf("OOM in bob: cancel query %s\n", q->name);
	while (q->held.nr > 0) {
		CHECK(tally_mm_add(&q->mm, TALLY_MM_ANON, -BUF_SIZE));
		buffer_free(q->held.bufs[--q->held.nr]);
	}
}

static long usage(struct tally_memcg *g)
{
	struct tally_memcg_range r;

	CHECK(tally_memcg_usage(g, TALLY_MEMCG_READ_DRAIN, &r));
	return r.value;
}

static void run_query(struct query *q, struct tally_memcg *g, int nr)
{
	while (nr--) {
		struct buffer *b = buffer_alloc(g, 0);

		if (!b)
			break;
		if (q->cancelled) {	/* charged once the victim freed */
			buffer_free(b);
			break;
		}
		CHECK(tally_mm_add(&q->mm, TALLY_MM_ANON, BUF_SIZE));
		q->held.bufs[q->held.nr++] = b;
	}
}

int main(void)
{
	struct tally_memcg_oom_policy kill = { TALLY_MEMCG_OOM_KILL, 0,
					       cancel_query, NULL };
	struct tally_memcg_tree *tree;
	struct tally_memcg *tenants, *alice, *bob;
	static struct cache alice_cache;
	static struct query q[2] = { { .name = "small" }, { .name = "big" } };
	struct buffer *b;
	struct pollfd pfd;
	char text[1024];
	uint64_t nr_events;
	int i;

	CHECK(tally_memcg_tree_create(&tree, NULL));	/* system CPUs */
	CHECK(tally_memcg_create(tally_memcg_root(tree), "tenants", &tenants));
	CHECK(tally_memcg_create(tenants, "alice", &alice));
	CHECK(tally_memcg_create(tenants, "bob", &bob));
	CHECK(tally_memcg_set_limit(alice, TALLY_MEMCG_MAX, 1 << 20));
	CHECK(tally_memcg_set_limit(bob, TALLY_MEMCG_MAX, 2 << 20));
	pfd.fd = CHECK(tally_memcg_events_fd(tenants));
	pfd.events = POLLIN;

	/* Exactly 256 buffers of 4 KiB fit under alice's 1 MiB. */
	while ((b = buffer_alloc(alice, TALLY_MEMCG_NORECLAIM)))
		alice_cache.bufs[alice_cache.nr++] = b;
	printf("alice holds %d buffers, usage %ld of max %d\n",
	       alice_cache.nr, usage(alice), 1 << 20);

	/* With a reclaim callback, the cache makes room. */
	CHECK(tally_memcg_set_reclaim(alice, shrink_cache, &alice_cache));
	b = buffer_alloc(alice, 0);
	printf("after reclaim: %s, cache %d buffers, usage %ld\n",
	       b ? "charged" : "refused", alice_cache.nr, usage(alice));
	if (b)
		buffer_free(b);

	/* bob cancels its largest query when it runs out. */
	CHECK(tally_memcg_set_oom_policy(bob, &kill));
	for (i = 0; i < 2; i++) {
		CHECK(tally_mm_init(&q[i].mm, NULL, 0, NULL));
		q[i].task.mm = &q[i].mm;
		q[i].task.owner = &q[i];
		CHECK(tally_memcg_task_attach(bob, &q[i].task));
	}
	run_query(&q[0], bob, 100);
	run_query(&q[1], bob, 1000);	/* its 413th buffer hits the max */
	printf("query small holds %d buffers, big %d; bob usage %ld\n",
	       q[0].held.nr, q[1].held.nr, usage(bob));

	CHECK(tally_memcg_render(tenants, TALLY_MEMCG_FILE_EVENTS, false,
				 text, sizeof(text)));
	printf("tenants memory.events:\n%s", text);
	CHECK(tally_memcg_render(alice, TALLY_MEMCG_FILE_LIMITS, false,
				 text, sizeof(text)));
	printf("alice:\n%s", text);
	if (poll(&pfd, 1, 0) == 1 &&
	    read(pfd.fd, &nr_events, sizeof(nr_events)) == sizeof(nr_events))
		printf("the events fd reported %llu events\n",
		       (unsigned long long)nr_events);

	for (i = 0; i < 2; i++) {
		while (q[i].held.nr > 0) {
			CHECK(tally_mm_add(&q[i].mm, TALLY_MM_ANON, -BUF_SIZE));
			buffer_free(q[i].held.bufs[--q[i].held.nr]);
		}
		CHECK(tally_memcg_task_detach(&q[i].task));
		CHECK(tally_mm_destroy(&q[i].mm));
	}
	shrink_cache(alice, LONG_MAX, &alice_cache);
	printf("all freed: tenants usage %ld\n", usage(tenants));
	CHECK(tally_memcg_destroy(alice));
	CHECK(tally_memcg_destroy(bob));
	CHECK(tally_memcg_destroy(tenants));
	/* The handles are references: destroyed groups are freed now. */
	tally_memcg_put(alice);
	tally_memcg_put(bob);
	tally_memcg_put(tenants);
	tally_memcg_tree_destroy(tree);
	return 0;
}
