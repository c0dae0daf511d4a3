/*
 * charge.pml - the charge protocol of memory groups (src/memcg/), checked
 * with spin.
 *
 * What is modelled (names are the C's: src/memcg/memcg_transfer.c,
 * memcg_counter.c, memcg_stock.c, memcg_charge.c, src/runtime/grace.c):
 *
 *   groups	P (a parent with a max), A (its child, with a max) and B
 *		(a group that is not under P, no max): the tree's root is
 *		unlimited and not modelled.  usage[] is each group's page
 *		counter (struct tally_memcg.usage), MAX_* its max.
 *   slots	one CPU with NS = 2 slots { sg[i], sb[i] } (struct
 *		memcg_slot: group, bytes) shared by the three groups, so
 *		that a refill finding both taken evicts one.  Each slot
 *		operation is one step: the atomic stocks' 16-byte
 *		compare-and-swap (slot_cas()) or one restartable sequence.
 *   counters	memcg_counters_try_add(): one CAS per level, from the
 *		group up, undoing the lower levels when a level refuses;
 *		give_back and uncharge: one atomic subtraction per level.
 *   domain	the tree's grace domain: epoch, readers[2], one step per
 *		seq_cst atomic: grace_enter() loads the epoch, then adds 1
 *		to readers[epoch & 1] (two steps); grace_leave() subtracts;
 *		grace_wait() advances the epoch twice, each advance only
 *		when readers[(e + 1) & 1] is zero (the sum of the shards).
 *   transfers	refill (counters -> slot), eviction (slot -> counters),
 *		carry (slot -> counters), each between
 *		memcg_transfer_begin() and memcg_transfer_end() (a grace
 *		section), checking memcg_transfer_may_move() after begin
 *		on each group whose bytes it moves.
 *   refusal	memcg_settle_lock(): steps 1-5 of the design (pressure, drain,
 *		grace_wait, drain + try_add under drain_lock, move up).
 *
 * Processes (CONFIG, chosen with -D at spin -a time):
 *   default		worker (charge A 1: the fast path; charge A 1: a
 *			refill into A's slot; charge B 1: a refill that
 *			installs B, evicting A's or P's slot; uncharge A 2:
 *			a give, or a carry when A's slot is full; uncharge
 *			B 1) and refuser (charge REFUSER_GROUP, default A,
 *			REFUSER_BYTES: a refill, or a refusal when the
 *			counters are full of slot bytes), both through the
 *			same charge(), so the worker may be refused too:
 *			two refusals at once.
 *   -DCONFIG_DESTROY	worker and destroyer (destroy A: dead, grace_wait,
 *			drain), the worker's work resolving to P once A is
 *			dead (memcg_resolve()); with -DDESTROY_AND_REFUSE
 *			the refuser too (best at P: -DREFUSER_GROUP=P),
 *			whose drains of P's subtree meet the destroy's.
 *   -DCONFIG_FORK	worker and forker (fork prepare: pressure on the
 *			root, grace_wait, drain_lock: the child's state).
 *
 * Properties (assertions; the monitor's are checked in every reachable
 * state, spin -DSAFETY also reports any invalid end state: a hang):
 *   no overshoot	usage[G] <= max(G) at every level at all times;
 *   conservation	usage[G] = ch[G] + bytes in the slots of G's subtree
 *			+ tr[G], at all times (ch: bytes of charges counted
 *			at that level, tr: bytes of transfers in flight
 *			counted there: ghost variables);
 *   no false refusal	when step 4's try_add is refused at a level L that
 *			is H or below it, ch[L] + n > max(L): the charged
 *			bytes alone do not fit, no slot byte nor transfer
 *			byte made it fail (REFUSER_BYTES always fits once
 *			every slot is drained, so in this model any refusal
 *			is a false one, and is reported by this assertion);
 *   quiescence		when every process ended: usage[G] = ch[G] + slots
 *			of G's subtree, no transfer in flight, no reader in
 *			the domain, no pressure left;
 *   destroy		once destroy's drain is done, no slot holds A;
 *   fork		at the fork instant (forker holding drain_lock after
 *			pressure + grace_wait), no byte of any level is in
 *			a transfer: the child, which keeps only the forking
 *			thread, has usage = charged + slots exactly.
 *
 * -DMUTANT_EVICTION_HIDDEN: today's hole.  The eviction's give_back runs
 * after the refill's section ended and the victim's pressure is not
 * checked, so a refusal at an ancestor of the victim can drain, wait and
 * refuse while the evicted bytes are still on their way to the counters.
 * spin must find the false refusal.
 * -DMUTANT_DESTROY_NO_WAIT (with CONFIG_DESTROY): destroy drains without
 * grace_wait(); spin must find a slot of A after the drain.
 * -DMUTANT_FORK_NO_WAIT (with CONFIG_FORK): fork takes its locks without
 * grace_wait(); spin must find bytes in transfer at the fork instant.
 * -DMUTANT_WAIT_START_UNLOCKED: grace_wait() reads the epoch it starts
 * from without the domain's lock; with two waiters (CONFIG_DESTROY with
 * DESTROY_AND_REFUSE) spin must find the false refusal.
 */

#define P	0
#define A	1
#define B	2
#define NG	3		/* no group: a free slot */
#define NS	2		/* MEMCG_SLOTS, on the one CPU */

#ifndef MAX_P
#define MAX_P	4
#endif
#ifndef MAX_A
#define MAX_A	4
#endif
#define MAX_B	255		/* TALLY_MEMCG_UNLIMITED */
#define BATCH	1		/* refill_batch() */
#define CAP	2		/* fast.stock_cap: 2 * batch */

#ifndef REFUSER_GROUP
#define REFUSER_GROUP	A
#endif
#ifndef REFUSER_BYTES
#define REFUSER_BYTES	2	/* the worker's 2 + 2 <= MAX_A, MAX_P */
#endif

#define PARENT(g)	((g) == A -> P : NG)
#define MAXOF(g)	((g) == P -> MAX_P : ((g) == A -> MAX_A : MAX_B))
/* @g is @h or below it (in_subtree() of memcg_stock.c) */
#define IN_SUB(g, h)	((g) == (h) || ((g) == A && (h) == P))
/* level @r is a strict ancestor of level @h (depth(r) < depth(h)) */
#define ABOVE(r, h)	((r) == P && (h) == A)
/* slot_find_atomic(): the first slot of @g, NS when none */
#define FIND(g)		(sg[0] == (g) -> 0 : (sg[1] == (g) -> 1 : NS))
#define SLOT_IN(i, h)	(sg[i] != NG && IN_SUB(sg[i], h) -> sb[i] : 0)
#define SLOTS(h)	(SLOT_IN(0, h) + SLOT_IN(1, h))

/* ---- shared state ------------------------------------------------------ */

byte usage[3];		/* tally_memcg.usage, per group */
byte pressure[3];	/* tally_memcg.pressure: refusals draining it */
bit dead[3];		/* tally_memcg.dead */
bit root_pressure;	/* pressure on the (unmodelled) root: fork */
byte sg[NS] = NG;	/* memcg_slot.group */
byte sb[NS];		/* memcg_slot.bytes */
bit drain_lock;		/* tally_memcg_tree.drain_lock */

byte epoch;		/* the domain's epoch (grow-only in the model) */
byte readers[2];	/* the domain's readers[], summed over shards */
bit grace_lock;		/* the domain's lock: one advance at a time */

/* ghosts: not in the C, for the properties */
byte ch[3];		/* bytes of charges counted at that level */
byte tr[3];		/* bytes of transfers in flight counted there */
byte finished;		/* processes that ended */
bit destroyed;		/* destroy's drain is done */

/* which processes run besides the worker */
#if defined(CONFIG_DESTROY) || defined(CONFIG_FORK)
#if defined(CONFIG_DESTROY) && defined(DESTROY_AND_REFUSE)
#define WITH_REFUSER
#define NPROCS	3
#else
#define NPROCS	2
#endif
#else
#define WITH_REFUSER
#define NPROCS	2
#endif

/* EVENT(k, c): path k of the list in formal/README.md is taken here */
#include "probe.h"

/* grace_waits in progress, for EVENT 21 only */
#ifdef PROBES
byte waiting;
#define WAITING(d)	waiting = waiting + (d)
#else
#define WAITING(d)	skip
#endif

#define CONSERVED(g)	(usage[g] == ch[g] + SLOTS(g) + tr[g])
#define FITS(g)		(usage[g] <= MAXOF(g))

/* ---- ghost bookkeeping ------------------------------------------------- */

/*
 * Add @d (signed) to x[g], a counter or a ghost.  A destroyed group's own
 * level is no longer kept exact (its work goes to its parent, and a drain
 * of its slot clamps at 0: memcg_counters_give_back()), so only there may
 * it go below 0 (clamped); anywhere else that is an error.
 */
#define GHOST_ADD(x, g, d) \
	if \
	:: x[g] + (d) >= 0 -> x[g] = x[g] + (d) \
	:: else -> assert(dead[g]); x[g] = 0 \
	fi

/* Add @d to tr[] on @g's chain; inside the caller's atomic. */
inline tr_chain(g, d)
{
	if
	:: (g) != NG ->
		GHOST_ADD(tr, g, d);
		if
		:: PARENT(g) != NG -> GHOST_ADD(tr, PARENT(g), d)
		:: else
		fi
	:: else
	fi
}

/* The same for ch[]: charges taken from or given to a slot. */
inline ch_chain(g, d)
{
	GHOST_ADD(ch, g, d);
	if
	:: PARENT(g) != NG -> GHOST_ADD(ch, PARENT(g), d)
	:: else
	fi
}

/* pthread_mutex_lock() of drain_lock or of the domain's lock */
inline lock(l)
{
	atomic { l == 0 -> l = 1 }
}

inline unlock(l)
{
	l = 0
}

/* ---- the grace domain (src/runtime/grace.c, per tree) ------------------ */

/* grace_enter(): a seq_cst load of the epoch, then a seq_cst add. */
inline grace_enter(idx)
{
	idx = epoch % 2;
	readers[idx]++
}

/* grace_leave(): a seq_cst subtraction from the index it entered. */
inline grace_leave(idx)
{
	readers[idx]--
}

/*
 * grace_wait(): the epoch it starts from is read under the domain's lock,
 * then the epoch must advance twice from there, by this waiter or another
 * one; each advance (under the lock: load e, sum readers[(e + 1) & 1],
 * store e + 1) only when that count is zero.  The nap between tries is a
 * block here, and there is no deadline (sections are short and never
 * block).
 *
 * The start must be read under the lock: read outside it, it may fall
 * between another waiter's check of the readers and its store of the
 * epoch, and that advance, whose check came before this wait began,
 * would count as this wait's first (-DMUTANT_WAIT_START_UNLOCKED).
 */
inline grace_wait()
{
#ifdef MUTANT_WAIT_START_UNLOCKED
	e0 = epoch;
#else
	lock(grace_lock);
	e0 = epoch;
	unlock(grace_lock);
#endif
	WAITING(1);
	do
	:: epoch >= e0 + 2 -> break
	:: else ->
		lock(grace_lock);
		e = epoch;
		if
		:: e < e0 + 2 ->
			EVENT(14, readers[(e + 1) % 2] != 0);
			EVENT(21, waiting == 2);
			readers[(e + 1) % 2] == 0;
			epoch = e + 1
		:: else
		fi;
		unlock(grace_lock)
	od;
	WAITING(-1);
	e0 = 0;
	e = 0
}

/* ---- page counters (memcg_counter.c) ----------------------------------- */

/* memcg_transfer_may_move(): each level's pressure, one load each. */
inline chain_under_pressure(g, res)
{
	res = (pressure[g] > 0);
	if
	:: !res && PARENT(g) != NG -> res = (pressure[PARENT(g)] > 0)
	:: else
	fi;
#ifdef CONFIG_FORK
	if
	:: !res -> res = root_pressure
	:: else
	fi
#endif
}

/*
 * memcg_counters_try_add(g, n + b): n charged bytes and b bytes of a
 * refill; r = the refusing level or NG.  With @chk (refusal step 4 of a
 * refusal at level @h), a refusal at H or below H asserts that the
 * charged bytes alone do not fit: no false refusal.
 */
inline try_add(g, n, b, chk, h)
{
	r = NG;
	lv = g;
	do
	:: lv == NG -> break
	:: else ->
		atomic {
			if
			:: usage[lv] + (n) + (b) > MAXOF(lv) ->
				r = lv;
				assert(!(chk) || ABOVE(lv, h) ||
				       ch[lv] + (n) > MAXOF(lv))
			:: else ->
				usage[lv] = usage[lv] + (n) + (b);
				ch[lv] = ch[lv] + (n);
				tr[lv] = tr[lv] + (b)
			fi
		}
		if
		:: r != NG -> break
		:: else -> lv = PARENT(lv)
		fi
	od;
	/* undo the level below the refusing one (two levels at most) */
	if
	:: r != NG && r != g ->
		atomic {
			usage[g] = usage[g] - (n) - (b);
			ch[g] = ch[g] - (n);
			tr[g] = tr[g] - (b)
		}
	:: else
	fi;
	lv = 0
}

/*
 * memcg_counters_give_back(g, x): the bytes of a slot back to the
 * counters, one atomic subtraction per level; they were a transfer's.
 * Only a destroyed group's own level may hold less (clamped at 0).
 */
inline give_back(g, x)
{
	lv = g;
	do
	:: lv == NG -> break
	:: else ->
		atomic {
			GHOST_ADD(usage, lv, -(x));
			GHOST_ADD(tr, lv, -(x));
			lv = PARENT(lv)
		}
	od;
	lv = 0
}

/*
 * memcg_counters_uncharge(g, n + x): n uncharged bytes and x bytes
 * carried out of a slot, one atomic subtraction per level.
 */
inline uncharge_counters(g, n, x)
{
	lv = g;
	do
	:: lv == NG -> break
	:: else ->
		atomic {
			assert(usage[lv] >= (n) + (x) && ch[lv] >= (n) &&
			       tr[lv] >= (x));
			usage[lv] = usage[lv] - (n) - (x);
			ch[lv] = ch[lv] - (n);
			tr[lv] = tr[lv] - (x);
			lv = PARENT(lv)
		}
	od;
	lv = 0
}

/* ---- slots (memcg_stock.c) --------------------------------------------- */

/*
 * memcg_drain_locked(h), caller holds drain_lock: each slot of h's
 * subtree emptied by one CAS, its bytes given back.
 */
inline drain(h)
{
	i = 0;
	do
	:: i < NS ->
		atomic {
			if
			:: sg[i] != NG && IN_SUB(sg[i], h) ->
				vg = sg[i];
				vb = sb[i];
				sg[i] = NG;
				sb[i] = 0;
				tr_chain(vg, vb)
			:: else ->
				vg = NG
			fi
		}
		if
		:: vg != NG && vb > 0 ->
			EVENT(18, dead[vg]);
			give_back(vg, vb)
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	vg = 0;
	vb = 0
}

/*
 * The install of memcg_stock_deposit() (install_atomic()): pick a victim
 * slot (victim(): a free one, else any), load it, check the victim's chain
 * (memcg_transfer_may_move()) and this group's dead flag, all after
 * the refill's memcg_transfer_begin(), then one CAS puts {g, b} in place
 * of the victim.  ok = 1 when installed; the victim's bytes (gbg, gbx)
 * are left for the caller to give back.
 */
inline install(g, b)
{
	atomic {
		if
		:: sg[0] == NG -> i = 0
		:: sg[0] != NG && sg[1] == NG -> i = 1
		:: sg[0] != NG && sg[1] != NG -> i = 0
		:: sg[0] != NG && sg[1] != NG -> i = 1
		fi
	}
	atomic {
		vg = sg[i];
		vb = sb[i]
	}
	pr = 0;
#ifndef MUTANT_EVICTION_HIDDEN
	if
	:: vg != NG -> chain_under_pressure(vg, pr)
	:: else
	fi;
#endif
	if
	:: pr -> ok = 0; EVENT(6, 1)
	:: else -> ok = !dead[g]; EVENT(17, !ok)
	fi;
	if
	:: ok ->
		atomic {
			if
			:: sg[i] == vg && sb[i] == vb ->
				sg[i] = g;
				sb[i] = b;
				tr_chain(vg, vb);
				tr_chain(g, -(b));
				gbg = vg;
				gbx = vb;
				EVENT(4, vg == NG);
				EVENT(5, vg != NG && vb > 0)
			:: else ->
				ok = 0;
				EVENT(7, 1)
			fi
		}
	:: else
	fi;
	i = 0;
	vg = 0;
	vb = 0;
	pr = 0
}

/*
 * memcg_stock_deposit(g, b): give to g's slot when it fits under the cap;
 * a slot of g too full: no second one (ok = 0); no slot: install.
 */
inline deposit(g, b)
{
	atomic {
		i = FIND(g);
		if
		:: i < NS && sb[i] + (b) <= CAP ->
			sb[i] = sb[i] + (b);
			tr_chain(g, -(b));
			ok = 1;
			EVENT(2, 1)
		:: i < NS && sb[i] + (b) > CAP ->
			ok = 0;
			EVENT(3, 1)
		:: else ->
			ok = 2
		fi;
		i = 0
	}
	if
	:: ok == 2 -> install(g, b)
	:: else
	fi
}

/* ---- charge, uncharge, refusal (memcg_charge.c, memcg_transfer.c) ------ */

/*
 * memcg_settle_and_retry(g, n) for a charge refused at level r, each
 * round a memcg_settle_lock(): press h, wait for the transfers that began
 * before, drain h and retry under drain_lock.  Leaves r = NG when charged.
 */
inline settle(g, n)
{
	h = r;
	pressure[h]++;					/* 1 */
	EVENT(11, 1);
	EVENT(13, pressure[P] + pressure[A] >= 2);
	do
	:: 1 ->
		grace_wait();				/* 2 */
		lock(drain_lock);			/* 3 */
		drain(h);
		try_add(g, n, 0, 1, h);
		unlock(drain_lock);
		if
		:: r != NG && ABOVE(r, h) ->		/* 5: move up */
			EVENT(12, 1);
			pressure[h]--;
			h = r;
			pressure[h]++
		:: else ->
			EVENT(16, r == NG);
			pressure[h]--;
			break
		fi
	od;
	h = 0
}

/*
 * charge(G0, n): memcg_stock_take() (fast path), else charge_slow(): the
 * refill in a transfer section (no batch under pressure), then the
 * counters byte for byte, then the refusal.  r = NG when charged.
 */
inline charge(G0, n)
{
	atomic {
		r = NG;
		i = FIND(G0);
		if
		:: i < NS && sb[i] >= (n) ->
			sb[i] = sb[i] - (n);
			ch_chain(G0, n);
			done = 1;
			EVENT(1, 1)
		:: else ->
			done = 0
		fi;
		i = 0
	}
	if
	:: !done ->
		g = (dead[G0] -> PARENT(G0) : G0);	/* memcg_resolve() */
		EVENT(19, g != G0);
		grace_enter(idx);			/* memcg_transfer_begin() */
		chain_under_pressure(g, pr);
		EVENT(8, pr);
		if
		:: !pr ->
			try_add(g, n, BATCH, 0, NG);
			if
			:: r == NG ->
				gbg = NG;
				deposit(g, BATCH);
				if
				:: !ok ->	/* memcg_counters_sub(g, batch) */
					give_back(g, BATCH)
				:: else
				fi;
#ifndef MUTANT_EVICTION_HIDDEN
				if
				:: gbg != NG && gbx > 0 -> give_back(gbg, gbx)
				:: else
				fi;
#endif
				done = 1
			:: else
			fi
		:: else
		fi;
		pr = 0;
		ok = 0;
		grace_leave(idx);			/* memcg_transfer_end() */
		idx = 0;
#ifdef MUTANT_EVICTION_HIDDEN
		/* today: the evicted bytes travel outside any section */
		if
		:: done && gbg != NG && gbx > 0 -> give_back(gbg, gbx)
		:: else
		fi;
#endif
		gbg = 0;
		gbx = 0;
		if
		:: !done ->
			try_add(g, n, 0, 0, NG);
			if
			:: r != NG -> settle(g, n)
			:: else
			fi
		:: else
		fi;
		g = 0
	:: else
	fi;
	done = 0
}

/*
 * uncharge(G0, n): memcg_stock_give() under the cap, else a carry in a
 * transfer section: a batch out of the slot (none under pressure), then
 * memcg_counters_uncharge(memcg_resolve(G0), n + batch).
 */
inline uncharge(G0, n)
{
	atomic {
		i = FIND(G0);
		if
		:: i < NS && sb[i] + (n) <= CAP ->
			sb[i] = sb[i] + (n);
			ch_chain(G0, -(n));
			done = 1
		:: else ->
			done = 0
		fi;
		i = 0
	}
	if
	:: !done ->
		grace_enter(idx);			/* memcg_transfer_begin() */
		chain_under_pressure(G0, pr);
		EVENT(10, pr);
		gbx = 0;
		if
		:: !pr ->
			atomic {			/* memcg_stock_take(batch) */
				i = FIND(G0);
				if
				:: i < NS && sb[i] >= BATCH ->
					sb[i] = sb[i] - BATCH;
					tr_chain(G0, BATCH);
					gbx = BATCH;
					EVENT(9, 1)
				:: else
				fi;
				i = 0
			}
		:: else
		fi;
		pr = 0;
		g = (dead[G0] -> PARENT(G0) : G0);	/* memcg_resolve() */
		uncharge_counters(g, n, gbx);
		grace_leave(idx);			/* memcg_transfer_end() */
		idx = 0;
		gbx = 0;
		g = 0
	:: else
	fi;
	done = 0
}

#define LOCALS \
	byte i, g, r, h, lv, idx, vg, vb, gbg, gbx, e0, e; \
	bit pr, done; \
	byte ok

/* ---- processes --------------------------------------------------------- */

proctype worker()
{
	LOCALS;
	byte held;

	charge(A, 1);		/* the fast path: A's slot has 1 */
	held = (r == NG);
	charge(A, 1);		/* a refill into A's own slot */
	held = held + (r == NG);
	charge(B, 1);		/* a refill installing B: an eviction */
	if
	:: held > 0 -> uncharge(A, held)	/* a carry when A's slot is full */
	:: else
	fi;
	held = 0;
	uncharge(B, 1);
	finished++
}

#ifdef WITH_REFUSER
proctype refuser()
{
	LOCALS;

	charge(REFUSER_GROUP, REFUSER_BYTES);
	finished++
}
#endif

#ifdef CONFIG_DESTROY
/*
 * tally_memcg_destroy(A): dead (seq_cst), grace_wait(), then drain(A)
 * under drain_lock (memcg_drain_locked()).
 */
proctype destroyer()
{
	LOCALS;

	dead[A] = 1;
#ifndef MUTANT_DESTROY_NO_WAIT
	grace_wait();
#endif
	lock(drain_lock);
	drain(A);
	destroyed = 1;
	unlock(drain_lock);
	finished++
}
#endif

#ifdef CONFIG_FORK
/*
 * fork prepare (memcg.c's fork_prepare()): pressure on the root,
 * grace_wait(), then the locks; the child is the state at that instant
 * with only this thread, which is in no section.  The parent then takes
 * the pressure off.
 */
proctype forker()
{
	LOCALS;

	root_pressure = 1;
#ifndef MUTANT_FORK_NO_WAIT
	grace_wait();
#endif
	lock(drain_lock);
	atomic {
		/* the child: every byte is charged or in a slot */
		EVENT(20, readers[0] + readers[1] > 0);
		assert(tr[P] == 0 && tr[A] == 0 && tr[B] == 0);
		assert(usage[P] == ch[P] + SLOTS(P) &&
		       usage[A] == ch[A] + SLOTS(A) &&
		       usage[B] == ch[B] + SLOTS(B))
	}
	unlock(drain_lock);
	root_pressure = 0;
	finished++
}
#endif

/*
 * The invariants, checked in every reachable state: this one step is
 * enabled in each state until it runs, and spin runs it from each.  A
 * destroyed A's own counter is no longer kept (its work goes to P), so it
 * is left out once dead.
 */
proctype monitor()
{
	atomic {
		assert(FITS(P) && FITS(A) && FITS(B));
		assert(CONSERVED(P) && CONSERVED(B) &&
		       (dead[A] || CONSERVED(A)));
		assert(!destroyed || (sg[0] != A && sg[1] != A))
	}
}

/*
 * The starting state: earlier charges left a batch of A in one slot and
 * 1 or 2 bytes of P in the other (both counted in their counters), B has
 * no slot, so the worker's first charge of B evicts one of them.  With 2
 * bytes in P's slot the refuser is refused from its first try, before
 * the worker's refills (which then see the pressure); with 1, the
 * worker's refill comes first and the refusal meets its slot and carry.
 * For the destroy, A has no slot (B and P have one each): the worker's
 * first charge of A installs it, racing with the destroy.
 */
init
{
	atomic {
#ifdef CONFIG_DESTROY
		sg[0] = B;
		sb[0] = 1;
		usage[B] = 1;
		sg[1] = P;
		sb[1] = 1;
		usage[P] = 1;
#else
		sg[0] = A;
		sb[0] = 1;
		sg[1] = P;
		if
		:: sb[1] = 1
		:: sb[1] = 2
		fi;
		usage[A] = 1;
		usage[P] = 1 + sb[1];
#endif
		run monitor();
		run worker();
#ifdef CONFIG_DESTROY
		run destroyer();
#elif defined(CONFIG_FORK)
		run forker();
#endif
#ifdef WITH_REFUSER
		run refuser()
#endif
	}
	/* quiescence: every process ended */
	finished == NPROCS;
	assert(tr[P] == 0 && tr[B] == 0 && (dead[A] || tr[A] == 0));
	assert(CONSERVED(P) && CONSERVED(B) && (dead[A] || CONSERVED(A)));
	assert(readers[0] == 0 && readers[1] == 0);
	assert(pressure[P] == 0 && pressure[A] == 0 && pressure[B] == 0 &&
	       root_pressure == 0)
}
