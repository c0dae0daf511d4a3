/*
 * share.pml - the TALLY design's shared, fresh flushes of one group
 * (src/stats/stats_read.c: tally_flush(), claim_and_run(), watch(),
 * run_flush()), checked with spin.
 *
 * Modelled, one step per seq_cst atomic of the C:
 *   clock		tree.flush_clock (take_stamp(): add, then a fence)
 *   act		share.active: 0, CLAIMING, or the running shared
 *			flush's stamp
 *   progress		share.progress, ticked by the shared flush at each
 *			lock round trip of the engine (two here)
 *   done_stamp		share.done_stamp (raise_to())
 *   upd		the group's updates made so far (the readers' own)
 *   folded		what a read returns: the updates the flushes done so
 *			far have folded.  A flush folds every update made
 *			before it took its stamp (the fences of take_stamp()
 *			and of the reader's arrival: stats_flush.c's
 *			freshness), and folded values only grow (a fold adds
 *			deltas), so a flush done late never lowers it.
 *
 * Processes: NREADERS readers, each updating the group once, then a
 * forced read (tally_flush(g, true)).  The first may stop for good at
 * any step of a flush it runs (preempted or SIGSTOPped, never to run
 * again: an end state).  A watcher looks at progress twice and may take
 * over when it did not move in between, as the C does after a nap
 * without a tick: the model lets it take over at any such look (the
 * nap is a time, which the model has not).
 *
 * Properties (assertions): a read returns every update made before it
 * (folded >= its own update), and every reader that does not stop
 * returns: once nothing can move, the monitor checks that all of them
 * did (a reader waiting for a stopped flusher is that failure; spin
 * -DSAFETY would also report the hang as an invalid end state).
 *
 * -DMUTANT_NO_TAKEOVER: a watcher waits until the flush it watches ends
 * (the design before takeovers); spin must find a reader that never
 * returns.
 * -DMUTANT_JOIN_EARLIER: a forced read also takes a shared flush that was
 * running at its arrival, once it is done (as an if-needed read does);
 * spin must find a stale read.
 */

/* EVENT(k, c): path k of the list in formal/README.md is taken here */
#include "probe.h"

#ifndef NREADERS
#define NREADERS	2
#endif
#define CLAIMING	255

byte clock;
byte act;
byte progress;
byte done_stamp;
byte active_done;
byte upd;
byte folded;
byte returned;		/* ghost: readers that returned */
byte stopped;		/* ghost: readers stopped for good */

/* The first reader may stop for good here (a final end state). */
inline maybe_stop(me)
{
	if
	:: me == 0 && stopped == 0 ->
		stopped = 1;
end_stopped:
		false
	:: true
	fi
}

/* take_stamp(): the flush folds every update made before (see above). */
inline take_stamp(s, snap)
{
	atomic {
		clock++;
		s = clock;
		snap = upd
	}
}

/*
 * run_flush(): the engine's two lock round trips (ticked when shared),
 * then done_stamp raised, then, shared, active_done and act.
 */
inline run_flush(me, s, snap, shared)
{
	maybe_stop(me);
	if
	:: shared -> progress++
	:: else
	fi;
	maybe_stop(me);
	if
	:: shared -> progress++
	:: else
	fi;
	atomic {
		if
		:: folded < snap -> folded = snap
		:: else
		fi
	}
	maybe_stop(me);
	atomic {
		if
		:: done_stamp < s -> done_stamp = s
		:: else
		fi
	}
	if
	:: shared ->
		active_done = s;
		act = 0
	:: else
	fi
}

proctype reader(byte me)
{
	byte mine, arrival, a, seen, s, snap, cover;
	bit took;

	atomic {		/* tally_stats_mod(g, 0, 1) */
		upd++;
		mine = upd
	}
	arrival = clock;	/* after the reader's fence */
#ifdef MUTANT_JOIN_EARLIER
	cover = act;
	if
	:: cover == CLAIMING -> cover = 0
	:: else
	fi;
#endif
	do
	:: done_stamp > arrival -> break
	:: cover != 0 && active_done >= cover -> break
	:: else ->
		a = act;
		if
		:: a == 0 ->
			/* claim_and_run() */
			atomic {
				if
				:: act == 0 -> act = CLAIMING; took = 1
				:: else
				fi
			}
			if
			:: took ->
				take_stamp(s, snap);
				act = s;
				run_flush(me, s, snap, 1);
				took = 0
			:: else
			fi
		:: else ->
			/* watch(): until served or the flush ends */
			seen = progress;
			do
			:: done_stamp > arrival -> break
			:: cover != 0 && active_done >= cover -> break
			:: act != a -> break
			:: progress != seen -> seen = progress
#ifndef MUTANT_NO_TAKEOVER
			:: progress == seen ->
				/* stalled: a takeover */
				EVENT(2, stopped);
				take_stamp(s, snap);
				run_flush(me, s, snap, 0);
				break
#endif
			od;
			EVENT(1, 1)		/* a reader watched a flush */
		fi
	od;
	atomic {
		assert(folded >= mine);
		EVENT(3, act != 0 && act != CLAIMING && act <= arrival);
		returned++
	}
}

/* Once nothing can move: every reader returned or stopped. */
proctype monitor()
{
	timeout -> assert(returned + stopped == NREADERS)
}

init
{
	byte i;

	atomic {
		for (i : 0 .. NREADERS - 1) {
			run reader(i)
		}
		run monitor()
	}
}
