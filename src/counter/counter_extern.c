// SPDX-License-Identifier: MIT
/*
 * counter_extern.c - the add fast path of tally/counter.h as a function
 * of the library.
 *
 * tally_counter_add() is static inline, so that a C caller adds with one
 * restartable sequence and no call.  A caller that cannot compile C (a
 * foreign function interface, dlsym()) reaches the same sequence through
 * tally_counter_add_extern(): the inline function compiled here, so the
 * two never differ.  Cost: one call and return more.
 */
#include <tally/counter.h>

void tally_counter_add_extern(struct tally_counter *c, long inc)
{
	tally_counter_add(c, inc);
}
