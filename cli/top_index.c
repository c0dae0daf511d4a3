// SPDX-License-Identifier: MIT
/*
 * top_index.c - `tally top`'s name indexes: the sections, columns, groups
 * and accuracy bounds of an exposition found by name in constant expected
 * time, so that a refresh costs time linear in the exposition's size.
 *
 * An index maps a name (bytes into the exposition's text, not copied) to a
 * number: open addressing with linear probing, at most half full, each slot
 * keeping the name's full hash so that a probe compares bytes only when the
 * hashes are equal.  The hash is FNV-1a from a per-process random seed,
 * then a 64-bit finalizer: its state after a name's first N bytes is that
 * of the N-byte prefix, so that every prefix of a name (every ancestor of a
 * group path, every prefix a statistics tree may have) is hashed in one
 * pass over the name.  The seed keeps an exposition from choosing names
 * that collide in one run's tables.  Costs: a lookup hashes the name once
 * (O(length)) and compares it once when found; growth rehashes from the
 * stored hashes, never from the names.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "top.h"

static uint64_t seed;

uint64_t name_hash_start(void)
{
	if (!seed) {
		uint64_t s = 0;

		/* No entropy yet (early boot): a varying seed still. */
		if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != sizeof(s))
			s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		seed = s | 1;
	}
	return seed;
}

uint64_t name_hash_more(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

/* The hash of a name whose FNV state is @h and length @n. */
uint64_t name_hash_end(uint64_t h, size_t n)
{
	h ^= n;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t name_hash(const char *s, size_t n)
{
	return name_hash_end(name_hash_more(name_hash_start(), s, n), n);
}

static struct name_slot *slot_of(const struct name_index *ix, const char *s,
				 size_t n, uint64_t h)
{
	size_t mask = ix->size - 1;

	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct name_slot *e = &ix->slot[i];

		if (!e->name || (e->hash == h && e->len == n &&
				 !memcmp(e->name, s, n)))
			return e;
	}
}

size_t index_find(const struct name_index *ix, const char *s, size_t n,
		  uint64_t h)
{
	const struct name_slot *e;

	if (!ix->size)
		return SIZE_MAX;
	e = slot_of(ix, s, n, h);
	return e->name ? e->val : SIZE_MAX;
}

static bool index_grow(struct name_index *ix)
{
	size_t size = ix->size ? ix->size * 2 : 8;
	struct name_slot *old = ix->slot, *slot;

	if (size > SIZE_MAX / 2 / sizeof(*slot) ||
	    !(slot = calloc(size, sizeof(*slot))))
		return false;
	ix->slot = slot;
	for (size_t i = 0; i < ix->size; i++) {
		size_t k = (size_t)old[i].hash & (size - 1);

		if (!old[i].name)
			continue;
		while (slot[k].name)
			k = (k + 1) & (size - 1);
		slot[k] = old[i];
	}
	ix->size = size;
	free(old);
	return true;
}

bool index_put(struct name_index *ix, const char *s, size_t n, uint64_t h,
	       size_t val)
{
	struct name_slot *e;

	if (2 * (ix->nr + 1) > ix->size && !index_grow(ix))
		return false;
	e = slot_of(ix, s, n, h);
	if (!e->name) {
		*e = (struct name_slot){ .name = s, .len = n, .hash = h };
		ix->nr++;
	}
	e->val = val;
	return true;
}

void index_free(struct name_index *ix)
{
	free(ix->slot);
	*ix = (struct name_index){ 0 };
}
