// SPDX-License-Identifier: MIT
/*
 * memcg_render.c - a memory group's files in the kernel's text format
 * ("name value" lines) and as JSON objects.  Every file is a list of
 * (name, value) pairs; one writer serves both formats, so the text and
 * the JSON always hold the same values.  The buffer is filled whole or
 * not at all (-ENOSPC leaves "").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "memcg_internal.h"

struct out {
	char *buf;
	size_t len;
	size_t pos;
	bool json;
	bool overflow;
	unsigned int items;	/* pairs written in the current object */
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->pos)
		o->overflow = true;
	else
		o->pos += (size_t)n;
}

/* One pair; @value < 0 with @unlimited prints "max" as the kernel does. */
static void pair(struct out *o, const char *name, long value, bool unlimited)
{
	if (o->json) {
		const char *sep = o->items++ ? ", " : "";

		if (unlimited)
			put(o, "%s\"%s\": \"max\"", sep, name);
		else
			put(o, "%s\"%s\": %ld", sep, name, value);
	} else if (unlimited) {
		put(o, "%s max\n", name);
	} else {
		put(o, "%s %ld\n", name, value);
	}
}

static void open_object(struct out *o, const char *key)
{
	if (!o->json)
		return;
	put(o, key ? "%s\"%s\": {" : "{", o->items ? ", " : "", key);
	o->items = 0;
}

static void close_object(struct out *o)
{
	if (o->json) {
		put(o, "}");
		o->items = 1;
	}
}

static int render_stat(struct tally_memcg *g, struct out *o)
{
	long hier[TALLY_MEMCG_NR_STATS];
	int err = tally_stats_snapshot(g->stats, TALLY_FLUSH_FORCE, hier,
				       NULL);

	if (err)
		return err;
	for (int i = 0; i < TALLY_MEMCG_NR_STATS; i++)
		pair(o, tally_memcg_stat_name(i), hier[i], false);
	return 0;
}

static void render_events(struct tally_memcg *g, struct out *o, bool local)
{
	long ev[TALLY_MEMCG_NR_EVENTS];

	tally_memcg_events(g, local ? NULL : ev, local ? ev : NULL);
	for (int i = 0; i < TALLY_MEMCG_NR_EVENTS; i++)
		pair(o, tally_memcg_event_name(i), ev[i], false);
}

static void render_limits(struct tally_memcg *g, struct out *o)
{
	struct tally_memcg_range usage;
	struct tally_memcg_limits lim;

	/* The page counter, as memory.peak: stock reservations count. */
	tally_memcg_usage(g, TALLY_MEMCG_READ_APPROX, &usage);
	tally_memcg_get_limits(g, &lim);
	pair(o, "memory.current", usage.value, false);
	pair(o, "memory.min", lim.min, lim.min == TALLY_MEMCG_UNLIMITED);
	pair(o, "memory.low", lim.low, lim.low == TALLY_MEMCG_UNLIMITED);
	pair(o, "memory.high", lim.high, lim.high == TALLY_MEMCG_UNLIMITED);
	pair(o, "memory.max", lim.max, lim.max == TALLY_MEMCG_UNLIMITED);
	pair(o, "memory.peak", tally_memcg_peak(g, false), false);
}

static int render(struct tally_memcg *g, enum tally_memcg_file file,
		  bool json, char *buf, size_t len)
{
	struct out o = { buf, len, 0, json, false, 0 };
	int err = 0;

	if (__atomic_load_n(&g->dead, __ATOMIC_ACQUIRE) ||
	    (unsigned int)file > TALLY_MEMCG_FILE_ALL)
		return -EINVAL;
	if (!len)
		return -ENOSPC;
	buf[0] = '\0';
	switch (file) {
	case TALLY_MEMCG_FILE_STAT:
		open_object(&o, NULL);
		err = render_stat(g, &o);
		close_object(&o);
		break;
	case TALLY_MEMCG_FILE_EVENTS:
	case TALLY_MEMCG_FILE_EVENTS_LOCAL:
		open_object(&o, NULL);
		render_events(g, &o, file == TALLY_MEMCG_FILE_EVENTS_LOCAL);
		close_object(&o);
		break;
	case TALLY_MEMCG_FILE_LIMITS:
		open_object(&o, NULL);
		render_limits(g, &o);
		close_object(&o);
		break;
	case TALLY_MEMCG_FILE_ALL:
		o.json = true;
		open_object(&o, NULL);
		open_object(&o, "memory");
		render_limits(g, &o);
		close_object(&o);
		open_object(&o, "memory.stat");
		err = render_stat(g, &o);
		close_object(&o);
		open_object(&o, "memory.events");
		render_events(g, &o, false);
		close_object(&o);
		open_object(&o, "memory.events.local");
		render_events(g, &o, true);
		close_object(&o);
		close_object(&o);
		break;
	default:
		return -EINVAL;
	}
	if (err)
		return err;
	if (o.json && !o.overflow)
		put(&o, "\n");
	if (o.overflow) {
		buf[0] = '\0';
		return -ENOSPC;
	}
	return (int)o.pos;
}

int tally_memcg_render(struct tally_memcg *g, enum tally_memcg_file file,
		       bool json, char *buf, size_t len)
{
	int ret;

	if (!g || !buf)
		return -EINVAL;
	/* Its path and its children stay as they are while it is rendered. */
	pthread_rwlock_rdlock(&g->tree->structure);
	ret = render(g, file, json, buf, len);
	pthread_rwlock_unlock(&g->tree->structure);
	return ret;
}
