// SPDX-License-Identifier: MIT
/*
 * memcg_extern.c - the charge and uncharge fast paths of tally/memcg.h as
 * functions of the library.
 *
 * tally_memcg_charge() and tally_memcg_uncharge() are static inline, so
 * that a C caller takes a stock's bytes without a call.  A caller that
 * cannot compile C (a foreign function interface, dlsym()) reaches the
 * same sequence through these: each is the inline function compiled
 * here, so the two never differ.  Cost: one call and return more.
 */
#include <tally/memcg.h>

int tally_memcg_charge_extern(struct tally_memcg *g, long bytes,
			      unsigned int flags)
{
	return tally_memcg_charge(g, bytes, flags);
}

int tally_memcg_uncharge_extern(struct tally_memcg *g, long bytes)
{
	return tally_memcg_uncharge(g, bytes);
}
