/*
 * grace.pml - the grace domain alone (src/runtime/grace.c: the two-counter
 * epoch scheme of SRCU), checked with spin.
 *
 * Modelled, one step per seq_cst atomic of the C:
 *   epoch		gp.epoch (grows; only its parity indexes readers[])
 *   readers[2]	the sum over shards of gp.shard[].readers[] (a sum read
 *			shard by shard sees every section open across the
 *			read, each shard counting only its own sections)
 *   ptr		a pointer that lock-free readers follow (the root of a
 *			structure: slot, child list), to object 1 or 2 or none
 *   freed[o]		object o's memory was given back
 *
 * Processes:
 *   reader (x2)	NSECTIONS sections each: grace_enter() (load the
 *			epoch, then add 1 to readers[idx]: two steps), load
 *			ptr, use the object it names, grace_leave().
 *   updater		replace object 1 by object 2 (unlink 1), retire 1
 *			(grace_retire(): its epoch under the lock), poll
 *			until it is freed; then unlink 2, retire it, poll
 *			until freed.  grace_poll(): advance() at most twice,
 *			each advance loads e and stores e + 1 only when
 *			readers[(e + 1) & 1] is zero; then frees the queued
 *			objects whose epoch + 2 <= epoch.
 *
 * Property (assertions): an object is never freed while a reader that
 * loaded a pointer to it is inside its section (checked at the free, with
 * the ghost holds[o]), and a reader never uses a freed object (checked at
 * the use).  spin -DSAFETY also reports a hang (invalid end state).
 *
 * -DMUTANT_ONE_ADVANCE: free once the epoch advanced once (epoch + 1 <=
 * epoch) instead of twice; spin must find the use after free.
 */

/* EVENT(k, c): path k of the list in formal/README.md is taken here */
#include "probe.h"

#ifndef NSECTIONS
#define NSECTIONS	2
#endif

#ifdef MUTANT_ONE_ADVANCE
#define GRACE_ADVANCES	1
#else
#define GRACE_ADVANCES	2	/* grace_poll(): node->epoch + 2 <= epoch */
#endif

byte epoch;		/* gp.epoch */
byte readers[2];	/* gp.shard[].readers[], summed */
byte ptr = 1;		/* the published pointer: object 1 at first */
bit freed[3];		/* objects 1 and 2 (0: none) */
byte holds[3];		/* ghost: readers inside a section that loaded it */

/* grace_enter(): the epoch's parity, then the add (seq_cst each). */
inline read_lock(idx)
{
	idx = epoch % 2;
	atomic {
		readers[idx]++;
		EVENT(4, idx != epoch % 2)	/* entered with a stale epoch */
	}
}

/* grace_leave(): subtract from the index it entered. */
inline read_unlock(idx)
{
	readers[idx]--
}

proctype reader()
{
	byte idx, o, k;

	do
	:: k < NSECTIONS ->
		read_lock(idx);
		atomic {			/* ACQUIRE(ptr) */
			o = ptr;
			holds[o]++;
			EVENT(1, o == 1);
			EVENT(2, o == 2);
			EVENT(3, o == 0)
		}
		assert(!freed[o]);		/* the use */
		atomic {
			holds[o]--;
			read_unlock(idx)
		}
		o = 0;
		idx = 0;
		k++
	:: else -> break
	od
}

/*
 * grace_poll() with the object retired in epoch @re: advance() (at most
 * two advances, each only when the other index has no reader), then free
 * it when its grace period has ended.  @done = 1 once freed.
 */
inline poll(obj, re, done)
{
	n = 0;
	do
	:: n < 2 ->
		e = epoch;
		if
		:: readers[(e + 1) % 2] == 0 ->
			epoch = e + 1;
			n++
		:: else ->
			EVENT(5, 1);		/* a reader holds it back */
			break
		fi
	:: else -> break
	od;
	n = 0;
	e = 0;
	atomic {
		if
		:: re + GRACE_ADVANCES <= epoch ->
			assert(holds[obj] == 0);
			freed[obj] = 1;
			done = 1
		:: else
		fi
	}
}

proctype updater()
{
	byte re, e, n;
	bit done;

	ptr = 2;		/* unlink 1: publish 2 in its place */
	re = epoch;		/* grace_retire(1) */
	do
	:: !done -> poll(1, re, done)
	:: else -> break
	od;
	done = 0;
	ptr = 0;		/* unlink 2 */
	re = epoch;		/* grace_retire(2) */
	do
	:: !done -> poll(2, re, done)
	:: else -> break
	od
}

init
{
	atomic {
		run reader();
		run reader();
		run updater()
	}
}
