// SPDX-License-Identifier: MIT
/*
 * http_endpoint.c - a statistics tree and memory groups served at
 * http://127.0.0.1:PORT/metrics, for Prometheus to scrape.
 *
 *	http_endpoint                start, print the address, stop
 *	http_endpoint --serve [PORT] serve until SIGINT or SIGTERM (PORT 0 or
 *	                             none: one the kernel picks)
 *
 *	cc http_endpoint.c $(pkg-config --cflags --libs tally_http)
 *
 * Then: curl -s http://127.0.0.1:PORT/metrics, or in prometheus.yml
 *	scrape_configs:
 *	  - job_name: app
 *	    static_configs: [{ targets: ["127.0.0.1:PORT"] }]
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tally/export_http.h>

#include "check.h"

static const struct tally_stat_desc schema[] = {
	{ "anon", TALLY_STAT_STATE }, { "pgfault", TALLY_STAT_EVENT },
};
static const char *const units[] = { "bytes", NULL };

int main(int argc, char **argv)
{
	struct tally_export_stats_options tree_opts = {
		.units = units,
		.mode = TALLY_FLUSH_FORCE,	/* exact at every scrape */
	};
	struct tally_http_options http_opts = { 0 };	/* 127.0.0.1, port 0 */
	bool serve = argc > 1 && !strcmp(argv[1], "--serve");
	struct tally_stats_tree *t;
	struct tally_stats_group *tenant, *web;
	struct tally_memcg_tree *mt;
	struct tally_memcg *app, *cache;
	struct tally_exporter *e;
	struct tally_http *h;
	sigset_t stop;
	int sig;

	if (serve && argc > 2)
		http_opts.port = (unsigned int)strtoul(argv[2], NULL, 10);

	/* Statistics: tenant-a/web has 8 KiB and 2 faults, tenant-a 1. */
	CHECK(tally_stats_tree_create(&t, schema, 2, NULL));
	CHECK(tally_stats_group_create(tally_stats_root(t), "tenant-a",
				       &tenant));
	CHECK(tally_stats_group_create(tenant, "web", &web));
	CHECK(tally_stats_mod(web, 0, 8192));
	CHECK(tally_stats_mod(web, 1, 2));
	CHECK(tally_stats_mod(tenant, 1, 1));

	/* Memory groups: app (no limit) holds 12 KiB, app/cache at most 1 MiB. */
	CHECK(tally_memcg_tree_create(&mt, NULL));
	CHECK(tally_memcg_create(tally_memcg_root(mt), "app", &app));
	CHECK(tally_memcg_create(app, "cache", &cache));
	CHECK(tally_memcg_set_limit(cache, TALLY_MEMCG_MAX, 1 << 20));
	CHECK(tally_memcg_charge(app, 8192, 0));
	CHECK(tally_memcg_charge(cache, 4096, 0));
	/*
	 * memory.current counts the bytes the charges reserved in per-CPU
	 * stocks too, as the kernel's does; give them back so that the
	 * export shows exactly what is charged.
	 */
	CHECK(tally_memcg_drain(tally_memcg_root(mt)));

	CHECK(tally_exporter_create(&e, NULL));
	CHECK(tally_exporter_add_stats(e, t, &tree_opts));
	CHECK(tally_exporter_add_memcg(e, mt, NULL));

	/* The endpoint's thread inherits the mask: sigwait() gets them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	CHECK(tally_http_start(&h, e, &http_opts));
	printf("serving http://127.0.0.1:%u/metrics\n", tally_http_port(h));
	fflush(stdout);
	if (serve)
		sigwait(&stop, &sig);
	CHECK(tally_http_stop(h));
	printf("stopped\n");

	tally_exporter_destroy(e);
	CHECK(tally_memcg_uncharge(cache, 4096));
	CHECK(tally_memcg_uncharge(app, 8192));
	tally_memcg_tree_destroy(mt);
	tally_stats_tree_destroy(t);
	return 0;
}
