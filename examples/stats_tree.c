// SPDX-License-Identifier: MIT
/*
 * stats_tree.c - a statistics tree: a tenant with one service, updates
 * from this thread, a forced (fresh) read and a memory.stat-style text.
 *
 *	cc stats_tree.c $(pkg-config --cflags --libs tally)
 */
#include <tally/stats.h>

#include "check.h"

static const struct tally_stat_desc schema[] = {
	{ "anon", TALLY_STAT_STATE }, { "file", TALLY_STAT_STATE },
	{ "pgfault", TALLY_STAT_EVENT },
};

int main(void)
{
	struct tally_stats_tree *t;
	struct tally_stats_group *tenant, *svc;
	char text[256];
	long anon;

	CHECK(tally_stats_tree_create(&t, schema, 3, NULL));
	CHECK(tally_stats_group_create(tally_stats_root(t), "tenant-a",
				       &tenant));
	CHECK(tally_stats_group_create(tenant, "web", &svc));
	CHECK(tally_stats_periodic_start(t));	/* flush the root every 2 s */

	CHECK(tally_stats_mod(svc, 0, 4096));	/* any thread, no lock */
	CHECK(tally_stats_mod(svc, 2, 1));

	/* Fresh: reflects every update that happens before the read. */
	CHECK(tally_stats_read(tenant, 0, TALLY_FLUSH_FORCE, &anon, NULL));
	printf("tenant-a anon %ld\n", anon);		/* 4096 */
	CHECK(tally_stats_render(tenant, TALLY_FLUSH_IF_NEEDED, text,
				 sizeof(text)));
	printf("%s", text);	/* "anon 4096\nfile 0\npgfault 1\n" */
	tally_stats_tree_destroy(t);
	return 0;
}
