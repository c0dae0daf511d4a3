// SPDX-License-Identifier: MIT
/*
 * export.c - a statistics tree exported in the Prometheus text format:
 * printed here, or written atomically for node_exporter's textfile
 * collector when a path is given ("export /var/lib/node_exporter/app.prom").
 * No instance or job label: Prometheus adds them when it scrapes.
 *
 *	cc export.c $(pkg-config --cflags --libs tally)
 */
#include <tally/export.h>

#include "check.h"

static const struct tally_stat_desc schema[] = {
	{ "anon", TALLY_STAT_STATE }, { "pgfault", TALLY_STAT_EVENT },
};
static const char *const units[] = { "bytes", NULL };

int main(int argc, char **argv)
{
	struct tally_export_stats_options tree_opts = {
		.units = units,
		.mode = TALLY_FLUSH_FORCE,	/* exact: accuracy bound 0 */
	};
	struct tally_stats_tree *t;
	struct tally_stats_group *tenant, *web;
	struct tally_exporter *e;

	CHECK(tally_stats_tree_create(&t, schema, 2, NULL));
	CHECK(tally_stats_group_create(tally_stats_root(t), "tenant-a",
				       &tenant));
	CHECK(tally_stats_group_create(tenant, "web", &web));
	CHECK(tally_stats_mod(web, 0, 8192));
	CHECK(tally_stats_mod(web, 1, 2));
	CHECK(tally_stats_mod(tenant, 1, 1));

	CHECK(tally_exporter_create(&e, NULL));	/* Prometheus 0.0.4 */
	CHECK(tally_exporter_add_stats(e, t, &tree_opts));
	if (argc > 1)
		CHECK(tally_export_textfile(e, argv[1]));	/* 0644 */
	else
		CHECK(tally_export_file(e, stdout));
	tally_exporter_destroy(e);
	tally_stats_tree_destroy(t);
	return 0;
}
