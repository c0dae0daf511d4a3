// SPDX-License-Identifier: MIT
/*
 * export_family.c - metric families: the name of each (prefix, scope,
 * sanitised stat, unit), its metadata lines in both formats, rendered
 * once when its source is added, and the exporter's sorted set of every
 * metric name its families claim (a counter "x" claims x, x_total and
 * x_created; a gauge its name).
 *
 * Owns the families' strings and the claimed set (freed by
 * tally_exporter_destroy()); no lock (one thread at a time uses an
 * exporter); a failed claim leaves the set unchanged.
 */
#include <errno.h>
#include <stdlib.h>

#include "export_internal.h"
#include "stats/stats_snapshot.h"
#include "memcg/memcg_snapshot.h"

void export_free_families(struct family *f, unsigned int nr)
{
	for (unsigned int i = 0; f && i < nr; i++) {
		free(f[i].sample);
		free(f[i].meta[TALLY_EXPORT_PROMETHEUS]);
		free(f[i].meta[TALLY_EXPORT_OPENMETRICS]);
	}
	free(f);
}


static const char *const scope_word[] = {
	[FAMILY_HIER] = "hier",
	[FAMILY_LOCAL] = "local",
	[FAMILY_ACCURACY] = "accuracy",
};

/*
 * The family name of the stat called @stat in @kind's scope ("bound" for
 * the accuracy family): PREFIX_SCOPE_SANITISED, an event's trailing
 * "_total" dropped, "_UNIT" appended unless it ends the name already.
 */
static void family_name(struct buf *b, const char *prefix,
			enum family_kind kind, const char *stat, bool event,
			const char *unit)
{
	size_t start;

	buf_str(b, prefix);
	buf_mem(b, "_", 1);
	buf_str(b, scope_word[kind]);
	buf_mem(b, "_", 1);
	start = b->len;
	buf_str(b, stat);
	if (b->failed)
		return;
	for (size_t i = start; i < b->len; i++)
		if (!export_is_name_char(b->p[i], false))
			b->p[i] = '_';
	if (event && export_ends_with(b->p, b->len, "_total"))
		b->len -= strlen("_total");
	if (unit && *unit) {
		char suffix[TALLY_EXPORT_PREFIX_MAX + 2] = "_";

		strcat(suffix, unit);
		if (!export_ends_with(b->p, b->len, suffix))
			buf_str(b, suffix);
	}
}

/* The metadata lines of a family called @name (@n bytes). */
static void family_meta(struct buf *b, enum tally_export_format format,
			const char *name, size_t n, bool counter,
			const char *unit, const char *help_head,
			const char *stat, const char *help_tail)
{
	bool om = format == TALLY_EXPORT_OPENMETRICS;
	const char *type = counter ? "counter" : "gauge";

	if (om) {
		buf_str(b, "# TYPE ");
		buf_mem(b, name, n);
		buf_mem(b, " ", 1);
		buf_str(b, type);
		if (unit && *unit) {
			buf_str(b, "\n# UNIT ");
			buf_mem(b, name, n);
			buf_mem(b, " ", 1);
			buf_str(b, unit);
		}
		buf_mem(b, "\n", 1);
	}
	buf_str(b, "# HELP ");
	buf_mem(b, name, n);
	if (!om && counter)
		buf_str(b, "_total");
	buf_mem(b, " ", 1);
	buf_str(b, help_head);
	export_buf_escaped(b, stat, strlen(stat), om);
	buf_str(b, help_tail);
	buf_mem(b, "\n", 1);
	if (!om) {
		buf_str(b, "# TYPE ");
		buf_mem(b, name, n);
		if (counter)
			buf_str(b, "_total");
		buf_mem(b, " ", 1);
		buf_str(b, type);
		buf_mem(b, "\n", 1);
	}
}

static int finish_family(struct family *f, struct buf *name_buf,
			 const char *unit, const char *help_head,
			 const char *subject, const char *help_tail);

int export_build_family(struct family *f, const char *prefix, enum family_kind kind,
		 unsigned int stat, const struct tally_stats_tree *t,
		 const char *unit)
{
	static const char *const help_head[] = {
		[FAMILY_HIER] = "Hierarchical ",
		[FAMILY_LOCAL] = "Local ",
		[FAMILY_ACCURACY] = "Largest total |change| of the updates "
				    "that happen before this export that the ",
	};
	static const char *const help_tail[] = {
		[FAMILY_HIER] = ": the group and its descendants (a sum over "
				"groups counts a value once per ancestor).",
		[FAMILY_LOCAL] = ": the group alone (sums over groups add "
				 "up).",
		[FAMILY_ACCURACY] = "values of a group's subtree may miss, "
				    "over all stats (0: none).",
	};
	bool accuracy = kind == FAMILY_ACCURACY;
	const char *stat_name = accuracy ? "bound" : stats_stat_name(t, stat);
	struct buf name = { 0 };

	f->per_row = !accuracy;
	f->col = accuracy ? 0
			  : (kind == FAMILY_HIER ? tally_stats_nr_stats(t) : 0) +
				    stat;
	f->counter = !accuracy && stats_stat_is_event(t, stat);
	family_name(&name, prefix, kind, stat_name, f->counter, unit);
	return finish_family(f, &name, unit, help_head[kind],
			     accuracy ? "" : stat_name, help_tail[kind]);
}

/*
 * The metadata (in both formats) and sample name of @f, whose name is in
 * @name and whose kind and column are set; frees @name's buffer on
 * failure.
 */
static int finish_family(struct family *f, struct buf *name_buf,
			 const char *unit, const char *help_head,
			 const char *subject, const char *help_tail)
{
	struct buf name = *name_buf, prom = { 0 }, om = { 0 };

	family_meta(&prom, TALLY_EXPORT_PROMETHEUS, name.p, name.len,
		    f->counter, unit, help_head, subject, help_tail);
	family_meta(&om, TALLY_EXPORT_OPENMETRICS, name.p, name.len,
		    f->counter, unit, help_head, subject, help_tail);
	if (f->counter)
		buf_str(&name, "_total");
	buf_mem(&prom, "", 1);
	buf_mem(&om, "", 1);
	buf_mem(&name, "", 1);
	if (name.failed || prom.failed || om.failed) {
		free(name.p);
		free(prom.p);
		free(om.p);
		return -ENOMEM;
	}
	f->sample = name.p;
	f->sample_len = name.len - 1;
	f->meta[TALLY_EXPORT_PROMETHEUS] = prom.p;
	f->meta[TALLY_EXPORT_OPENMETRICS] = om.p;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Add the names @nr families claim to the exporter's set: -EEXIST, the
 * set unchanged, when one is claimed already (or twice among them).
 */
int export_claim_names(struct tally_exporter *e, const struct family *f,
		unsigned int nr)
{
	static const char *const counter_suffixes[] = { "", "_total",
							"_created" };
	size_t old = e->nr_names, added = 0, size;
	char **fresh = malloc(3 * (size_t)nr * sizeof(*fresh));
	char **all = NULL;
	int err = fresh ? 0 : -ENOMEM;

	for (unsigned int i = 0; i < nr && !err; i++) {
		size_t base = f[i].sample_len -
			      (f[i].counter ? strlen("_total") : 0);

		/* Prometheus keeps these suffixes for counters, histograms
		 * and summaries: a gauge named so fails its checkers. */
		if (!f[i].counter &&
		    (export_ends_with(f[i].sample, f[i].sample_len, "_total") ||
		     export_ends_with(f[i].sample, f[i].sample_len, "_count") ||
		     export_ends_with(f[i].sample, f[i].sample_len, "_sum") ||
		     export_ends_with(f[i].sample, f[i].sample_len, "_bucket"))) {
			err = -EINVAL;
			break;
		}

		for (unsigned int k = 0; k < (f[i].counter ? 3u : 1u); k++) {
			const char *sfx = counter_suffixes[k];
			char *n = malloc(base + strlen(sfx) + 1);

			if (!n) {
				err = -ENOMEM;
				break;
			}
			memcpy(n, f[i].sample, base);
			strcpy(n + base, sfx);
			fresh[added++] = n;
		}
	}
	size = (old + added) * sizeof(*all);
	if (!err && !(all = malloc(size)))
		err = -ENOMEM;
	if (!err) {
		if (old)
			memcpy(all, e->names, old * sizeof(*all));
		memcpy(all + old, fresh, added * sizeof(*all));
		qsort(all, old + added, sizeof(*all), cmp_names);
		for (size_t i = 1; i < old + added && !err; i++)
			if (!strcmp(all[i - 1], all[i]))
				err = -EEXIST;
	}
	if (err) {
		for (size_t i = 0; i < added; i++)
			free(fresh[i]);
		free(all);
	} else {
		free(e->names);
		e->names = all;
		e->nr_names = old + added;
	}
	free(fresh);
	return err;
}

static const struct memcg_family {
	const char *name;
	const char *help;
} memcg_families[] = {
	[MEMCG_COL_CURRENT] = { "memory_current",
		"memory.current: the usage of the group and its descendants, "
		"stock reservations included (as the kernel's)." },
	[MEMCG_COL_PEAK] = { "memory_peak",
		"memory.peak: the highest memory.current, stock reservations "
		"included." },
	[MEMCG_COL_MIN] = { "memory_min",
		"memory.min: hard protection (+Inf: all of the usage)." },
	[MEMCG_COL_LOW] = { "memory_low",
		"memory.low: best-effort protection (+Inf: all of the "
		"usage)." },
	[MEMCG_COL_HIGH] = { "memory_high",
		"memory.high: throttling limit (+Inf: none)." },
	[MEMCG_COL_MAX] = { "memory_max",
		"memory.max: hard limit (+Inf: none)." },
};

int export_build_memcg_family(struct family *f, const char *prefix,
		       unsigned int col)
{
	struct buf name = { 0 };
	bool local = col >= MEMCG_COL_EVENTS_LOCAL;
	const char *event;

	f->per_row = true;
	f->col = col;
	f->counter = col >= MEMCG_COL_EVENTS;
	f->limit = col >= MEMCG_COL_MIN && col <= MEMCG_COL_MAX;
	buf_str(&name, prefix);
	buf_mem(&name, "_", 1);
	if (!f->counter) {
		buf_str(&name, memcg_families[col].name);
		buf_str(&name, "_bytes");
		return finish_family(f, &name, "bytes",
				     memcg_families[col].help, "", "");
	}
	event = tally_memcg_event_name(col - (local ? MEMCG_COL_EVENTS_LOCAL
						   : MEMCG_COL_EVENTS));
	buf_str(&name, local ? "memory_events_local_" : "memory_events_");
	buf_str(&name, event);
	return finish_family(f, &name, NULL,
			     local ? "memory.events.local: " :
				     "memory.events: ",
			     event, local ? " events of the group alone." :
				" events of the group and its descendants.");
}
