/*
 * push.pml - how updates hand a (group, CPU) to the flush engine, and how
 * a flush folds a claim whose updater stopped before its push
 * (src/stats/stats_update.c: queue_update(); src/stats/stats_flush.c:
 * pushes_in_progress(), pop_updates(), adopt_claimed(), mark_cpu(),
 * fold_cpu()), checked with spin.
 *
 * One group on one CPU.  Modelled, one step per atomic of the C:
 *   stat		the group's stat on the CPU (each update adds 1)
 *   queued		stats_pcpu.queued: IDLE, LISTED or LINKED
 *   on_list		the node is on the CPU's lock-free list
 *   linked		stats_pcpu.linked: in the CPU's updated tree
 *   pushing		the CPU's pushing count
 *   prev, hier		what the flushes folded (stats_fpcpu.prev, the
 *			group's hier): a fold adds stat - prev
 *   completed		ghost: updates that returned
 *
 * Processes: two updaters, one update each: store the stat; if the node
 * looks idle, count itself in pushing, claim it (IDLE -> LISTED by a
 * compare-and-swap), push it, leave pushing.  The first may stop for good
 * between its claim and its push (preempted or SIGSTOPped, never to run
 * again: an end state); the other then sees the node listed, relies on
 * that push and returns.  One reader runs two forced reads, each a flush
 * (the engine's lock keeps flushes one at a time: one flusher is all the
 * interleavings): load pushing, pop, adopt the claimed node if pushing
 * was not 0, pass 1 (LINKED -> IDLE), pass 2 (fold; unlink if idle).
 * Sequentially consistent, as the engine's fenced mode; the barriers
 * that settle idle marks under weaker ordering are not modelled (a node
 * is unlinked as soon as it is idle).
 *
 * Properties (assertions): a read folds every update that returned
 * before it began (hier >= the updates completed at its start); a node is
 * never pushed while on the list; once both updaters returned, a read
 * folds exactly what they added (nothing lost, nothing twice); and the
 * reader never waits for an updater: it ends even if one stopped.
 *
 * -DMUTANT_NO_ADOPT: a flush goes past a push in progress without
 * adopting the claim: spin must find a stale read.
 * -DMUTANT_COUNT_AFTER_POP: the flush loads pushing after its pop: spin
 * must find a stale read (a push landing between the two is missed).
 */

/* EVENT(k, c): path k of the list in formal/README.md is taken here */
#include "probe.h"

#define IDLE	0
#define LISTED	1
#define LINKED	2

byte stat;
byte queued = IDLE;
bool on_list;
bool linked;
byte pushing;
byte prev;
byte hier;
byte completed;
bool halted;		/* ghost: the first updater stopped for good */

proctype updater(byte me)
{
	bool claimed = false;

	stat++;
	if
	:: queued == IDLE ->
		pushing++;
		atomic {
			if
			:: queued == IDLE -> queued = LISTED; claimed = true
			:: else -> skip
			fi
		};
		if
		:: claimed ->
			if
			:: me == 0 ->
				/* stops for good between claim and push */
				halted = true;
end_stopped:
				false
			:: true
			fi;
			atomic {
				assert(!on_list);
				on_list = true
			}
		:: else -> skip
		fi;
		pushing--
	:: else ->
		/* relies on another update's claim */
		EVENT(1, queued == LISTED && halted)
	fi;
	completed++
}

inline flush()
{
	need = completed;
#ifndef MUTANT_COUNT_AFTER_POP
	unpushed = pushing != 0;
#endif
	/* pop_updates(): the list's head swapped out, then each node */
	atomic {
		popped = on_list;
		on_list = false
	};
	if
	:: popped ->
		queued = LINKED;
		linked = true;
		EVENT(3, 1)	/* a push popped */
	:: else -> skip
	fi;
#ifdef MUTANT_COUNT_AFTER_POP
	unpushed = pushing != 0;
#endif
#ifndef MUTANT_NO_ADOPT
	/* adopt_claimed(): link a claim that may not be pushed yet */
	if
	:: unpushed ->
		atomic {
			if
			:: queued == LISTED && !linked ->
				linked = true;
				EVENT(2, halted)	/* a stopped claim adopted */
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
#endif
	/* pass 1: mark_cpu() */
	atomic {
		if
		:: linked && queued == LINKED -> queued = IDLE
		:: else -> skip
		fi
	};
	/* pass 2: fold_cpu() */
	if
	:: linked ->
		seen = stat;
		hier = hier + seen - prev;
		prev = seen;
		atomic {
			if
			:: queued == IDLE -> linked = false
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	assert(hier >= need)
}

proctype reader()
{
	byte need, seen;
	bool unpushed, popped;

	flush();
	flush();
	/* Both updates returned: a last read has exactly them. */
	if
	:: completed == 2 ->
		flush();
		assert(hier == 2);
		EVENT(4, 1)	/* a read after both updates */
	:: else -> skip
	fi
}

init
{
	atomic {
		run updater(0);
		run updater(1);
		run reader()
	}
}
