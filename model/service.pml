/* SPDX-License-Identifier: MIT */
/*
 * service.pml -- the timer service's protocol (src/service.c), for SPIN.
 *
 * What is modelled, one to one with the C code (docs/model.md maps every
 * variable and step):
 *   the state word of each timer (IDLE ADDING PENDING EXPIRED RUNNING, the
 *   flags F_INBOX and F_ENTRY, periodic), every change of it a single
 *   atomic step as the C code's CAS is; the inboxes (a timer is pushed by
 *   the thread that set F_INBOX, after the CAS; a drain takes them all at
 *   once); the wheel (in it or not, under wheel_mu); the reaper's loop with
 *   its kick protocol (kick_pending, kicked, deadline under reaper_mu) and
 *   its sleep; dispatch to a bounded ring or to the scanning thread itself;
 *   the executors; running[] and waiting[] slots; cancel, cancel_sync (from
 *   a callback, of itself, in a cycle), reschedule, periodic re-arm,
 *   reinit, and shutdown with its hand-back.
 * What is not: which service owns a timer (one service per scenario; the
 * owner's id rides in the state word and the add's CAS claims it, and
 * tests/test_races.c forces two services' adds of one fresh timer), the
 * wheel's buckets (a timer is in the wheel or not, and
 * fires once its due time <= now; wheel.c is checked by its own tests),
 * the order of the inbox stack, the 1024-add kick, counters, and the C11
 * memory orders (SPIN interleaves sequentially consistent steps; the two
 * store-buffering pairs are seq_cst in the C code for that reason).
 *
 * Properties:
 *   safety    every add ends exactly once: at the end of every run,
 *             adds = ran + stopped + handed back, per timer; nothing in the
 *             service touches a timer after its owner may have freed it
 *             (assert in every access); never run early (assert at expiry).
 *   liveness  no thread waits for ever: the scenarios wait for the runs
 *             they expect, so a lost wake-up, a deadlock or a cycle leaves
 *             every process blocked, which SPIN reports as an invalid end
 *             state.
 *
 * Scenarios (SCEN): 1 kicks and the reaper; 2 cancel_sync against
 * shutdown; 3 cancel_sync on a one-executor service with a re-add; 4
 * cancel_sync of a timer from its own callback with a re-add; 5 two
 * callbacks cancel_sync each other; 6 reinit after a plain cancel; 7 two
 * producers each add, reschedule, cancel or cancel_sync either of two
 * timers (one periodic) against the reaper and an executor; then whatever
 * is due must run, and shutdown ends it; 8 tombstones: a timer placed in
 * the wheel is cancelled (plain: it stays linked, F_TOMB), maybe after a
 * reschedule or around a re-add, by one thread, then cancel_synced and
 * freed by another, while polls drain and fire it.
 * In every scenario a monitor checks, in every state, that a timer the
 * wheel links is PENDING, ADDING or flagged (F_INBOX, F_TOMB).
 * Mutations (MUT): 1, 3, 5, 6, 7, 8 put back issue 13's protocol bugs of
 * those numbers; 11 a deferral that forgets the timer; 12 apply() taking
 * the flags down before it unlinks (the order before tombstones: a
 * cancel_sync in between let its caller free a linked timer); 13 a
 * cancel_sync blind to F_TOMB. model/check.sh checks that SPIN finds each.
 */

#ifndef SCEN
#define SCEN 7
#endif
#ifndef MUT
#define MUT 0
#endif
#ifndef OPS
#define OPS 1           /* operations per producer in SCEN 7 */
#endif

#define NT 2            /* timers */
#define NONE 255
#define MAXT 255        /* "no deadline" */

#define IDLE 0
#define ADDING 1
#define PENDING 2
#define EXPIRED 3
#define RUNNING 4

/* results */
#define R_IDLE 0
#define R_STOPPED 1
#define R_RUNNING 2
#define R_EDEADLK 3
#define R_EBUSY 4
#define R_ESHUTDOWN 5
#define R_OK 6

/* scenario shape */
#if SCEN == 1
#define NEXEC 0
#define REAPER 1
#elif SCEN == 2 || SCEN == 8
#define NEXEC 0
#define REAPER 0
#elif SCEN == 3 || SCEN == 4 || SCEN == 6
#define NEXEC 1
#define REAPER 0
#elif SCEN == 5
#define NEXEC 2
#define REAPER 0
#else
#define NEXEC 1
#define REAPER 1
#endif

/* on_expire's deferral (a full batch: the timer stays PENDING, due now,
 * for the next advance) is a choice in every scenario driven by the
 * reaper or whose polls need not expire anything; scenarios 3-5 script
 * polls that must expire their timers (their processes then wait for the
 * callbacks), so there a deferral would only leave the script waiting. */
#if SCEN == 3 || SCEN == 4 || SCEN == 5
#define DEFER 0
#else
#define DEFER 1
#endif

#define SCANNER NEXEC          /* running[] slot of the scanning thread */
#define HANDBACK (NEXEC + 1)   /* running[] slot of shutdown's hand-back */
#define NSLOT (NEXEC + 2)
#define RCAP 2                 /* executor ring */

/* callback actions */
#define CB_NONE 0
#define CB_SYNC_OTHER 1   /* cancel_sync the other timer */
#define CB_SELF 2         /* wait for a re-add, cancel_sync itself, free */

typedef timer_t {
	byte st;
	bool inbox;      /* F_INBOX */
	bool entry;      /* F_ENTRY */
	bool periodic;   /* F_PERIODIC */
	bool tomb;       /* F_TOMB: cancelled from PENDING, maybe still in
			    the wheel (a tombstone) until the wheel owner
			    unlinks it and clears this */
	bool stacked;    /* really on an inbox stack (pushed, not drained) */
	bool in_wheel;
	byte due;        /* where the wheel has it */
	byte next_due;   /* what the last add asked for */
	bool freed;      /* its owner may have freed it */
	byte cb;         /* callback action */
	byte adds, ran, stopped, handed;
};
timer_t tm[NT];

byte now;                   /* the clock */
bool closing;
byte producers_in;                /* producers inside an operation (all inboxes) */

/* wheel_mu, and what the scanning thread holds */
bool wheel_mu;
bool scan_mu;
byte batch[NT];             /* expired, not yet dispatched (scanner) */
byte nbatch;

/* reaper */
bool reaper_mu, kicked, kick_pending, stop_reaper, reaper_done;
byte deadline = MAXT;

/* executors */
bool q_mu;
byte ring[RCAP];
byte rhead, rlen;
bool stop_exec;
byte exec_done;

byte running[NSLOT];
byte waiting[NSLOT];

/* callbacks' progress, for the scenarios */
byte cb_started[NT], cb_finished[NT];
byte cb_result[NT];
bool readd_done;            /* SCEN 4: the re-add happened */
bool shut_done;
byte handed_total;

#define lock(m)   atomic { !m -> m = 1 }
#define unlock(m) m = 0
#define TOUCH(t)  assert(!tm[t].freed)

/* ---- inboxes ---- */

inline push(t) {
	TOUCH(t);
	tm[t].stacked = 1
}

/* Wheel owner: make the wheel match the state (apply()). A timer that is
 * not PENDING or ADDING is unlinked first; then one CAS clears F_INBOX and
 * F_TOMB if the word is still what was read (else look again); a PENDING
 * one is placed after that CAS, at the due time read then. */
inline apply(t) {
	do
	:: atomic {
		TOUCH(t);
		old = tm[t].st;
		oinb = tm[t].inbox;
		otomb = tm[t].tomb;
#if MUT == 12
		/* the old order: flags down first, the unlink a step later */
		tm[t].inbox = 0;
		tm[t].tomb = 0
	   };
	   atomic {
		if
		:: old != PENDING && old != ADDING -> TOUCH(t); tm[t].in_wheel = 0
		:: else -> skip
		fi;
		break
	   }
#else
		if
		:: old != PENDING && old != ADDING -> tm[t].in_wheel = 0
		:: else -> skip
		fi
	   };
	   atomic {
		if
		:: tm[t].st == old && tm[t].inbox == oinb && tm[t].tomb == otomb ->
			tm[t].inbox = 0; tm[t].tomb = 0; break
		:: else -> skip
		fi
	   }
#endif
	od;
	if
	:: old == PENDING -> atomic { TOUCH(t); tm[t].in_wheel = 1; tm[t].due = tm[t].next_due }
	:: else -> skip
	fi
}

/* Wheel owner (wheel_mu held): one exchange takes every stacked timer. */
inline drain_inboxes() {
	atomic {
		i = 0;
		do
		:: i < NT -> taken[i] = tm[i].stacked; tm[i].stacked = 0; i++
		:: else -> break
		od
	}
	i = 0;
	do
	:: i < NT ->
		if
		:: taken[i] -> taken[i] = 0; apply(i)
		:: else -> skip
		fi;
		i++
	:: else -> break
	od
}

/* ---- the reaper's kick ---- */

inline kick() {
#if REAPER
	/* a load first (no write to the shared line when a kick is already
	 * pending), then the exchange that decides between kickers */
	if
	:: kick_pending -> old = 1
	:: else -> atomic { old = kick_pending; kick_pending = 1 }
	fi;
	if
	:: !old ->
		lock(reaper_mu);
		kicked = 1;
		unlock(reaper_mu)
	:: else -> skip
	fi
#else
	skip
#endif
}

/* ---- producers ---- */

inline enter() {
	atomic {
		if
		:: closing -> entered = 0
		:: else -> producers_in++; entered = 1
		fi
	}
}

inline leave() { producers_in-- }

/* add (resched 0) or reschedule (resched 1) of t at d; rc gets the result */
inline add_or_reschedule(t, d, resched) {
	enter();
	if
	:: !entered -> rc = R_ESHUTDOWN
	:: else ->
		do
		:: atomic {
			TOUCH(t);
			tm[t].st != ADDING ->
			s = tm[t].st;
			if
			:: !resched && (s == PENDING || s == EXPIRED) ->
				rc = R_EBUSY; break
			:: else -> tm[t].st = ADDING; rc = R_OK; break
			fi
		   }
		od;
		if
		:: rc == R_OK ->
			if
			:: resched && (s == PENDING || s == EXPIRED) ->
				tm[t].stopped++; rc = R_STOPPED
			:: else -> skip
			fi;
			tm[t].next_due = d;
			atomic { old = tm[t].inbox; tm[t].st = PENDING; tm[t].inbox = 1; tm[t].adds++ };
			if
			:: !old -> push(t)
			:: else -> skip
			fi;
			if
			:: d < deadline -> kick()
			:: else -> skip
			fi
		:: else -> skip
		fi;
		leave()
	fi
}

/* running[] other than slot skip holds t */
inline is_running_except(t, skip_slot, res) {
	res = 0;
	j = 0;
	do
	:: j < NSLOT -> if :: j != skip_slot && running[j] == t -> res = 1 :: else -> skip fi; j++
	:: else -> break
	od
}

/* Take t to IDLE; was gets the state it left. One CAS, no inbox: a
 * PENDING timer stays in the wheel as a tombstone (F_TOMB). */
inline cancel_state(t) {
	do
	:: atomic {
		TOUCH(t);
		tm[t].st != ADDING ->
		was = tm[t].st;
		if
		:: was == IDLE -> break
		:: else ->
			tm[t].st = IDLE;
			if
			:: was == PENDING -> tm[t].tomb = 1
			:: else -> skip
			fi;
			break
		fi
	   }
	od;
	if
	:: was == PENDING || was == EXPIRED -> rc = R_STOPPED; tm[t].stopped++
	:: was == RUNNING -> rc = R_RUNNING
	:: else ->
		is_running_except(t, HANDBACK, res);
		rc = (res -> R_RUNNING : R_IDLE)
	fi
}

/* cancel_sync: give up t's entry if it is found and not live again */
inline take_entry(t) {
	/* the scanner's own batch */
	if
	:: me == SCANNER ->
		j = 0;
		do
		:: j < nbatch ->
			if
			:: batch[j] == t ->
				atomic {
					if
					:: tm[t].entry && tm[t].st != EXPIRED ->
						tm[t].entry = 0; batch[j] = NONE
					:: else -> skip
					fi
				}
			:: else -> skip
			fi;
			j++
		:: else -> break
		od
	:: else -> skip
	fi;
	lock(q_mu);
	j = 0;
	do
	:: j < rlen ->
		if
		:: ring[(rhead + j) % RCAP] == t ->
			atomic {
				if
				:: tm[t].entry && tm[t].st != EXPIRED ->
					tm[t].entry = 0; ring[(rhead + j) % RCAP] = NONE
				:: else -> skip
				fi
			}
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	unlock(q_mu)
}

inline unreferenced(t, skip_slot, res) {
#if MUT == 5
	/* bug 5: only PENDING / ADDING counted as "re-added" */
	if
	:: tm[t].st == PENDING || tm[t].st == ADDING -> res = 1
#else
	if
	:: tm[t].st != IDLE -> res = 1
#endif
	:: else ->
		if
#if MUT == 13
		/* cancel_sync blind to tombstones */
		:: tm[t].inbox || tm[t].entry -> res = 0
#else
		:: tm[t].inbox || tm[t].entry || tm[t].tomb -> res = 0
#endif
		:: else -> is_running_except(t, skip_slot, res); res = !res
		fi
	fi
}

/* Would waiting for t wait for the callback running in slot me? */
inline waits_for_me(t, res) {
	res = 0;
	cur = t;
	hop = 0;
	do
	:: hop < NSLOT ->
		k = 0;
		do
		:: k < NSLOT && (k == me || running[k] != cur) -> k++
		:: else -> break
		od;
		if
		:: k == NSLOT && (hop > 0 || !tm[cur].entry) -> break
		:: k == NSLOT -> k = SCANNER
		:: else -> skip
		fi;
		cur = waiting[k];
		if
		:: cur == NONE -> break
		:: cur == running[me] -> res = 1; break
		:: else -> hop++
		fi
	:: else -> break
	od
}

/* What a cancel_sync waiter reads, folded into two numbers: it waits (the
 * C code's 1 ms timed wait) until one of them changes, since until then
 * its next pass would find what this one found. Sound (no change is
 * missed) and blocking (if nothing can change, it really waits for ever,
 * which SPIN then reports). */
#define RUNV(k) (k < NSLOT -> (running[k] == NONE -> 3 : running[k]) : 0)
#define WAITV(k) (k < NSLOT -> (waiting[k] == NONE -> 3 : waiting[k]) : 0)
#define SIGA (tm[0].st + 8 * tm[0].inbox + 16 * tm[0].entry + \
	32 * tm[1].st + 256 * tm[1].inbox + 512 * tm[1].entry + \
	1024 * rlen + 4096 * rhead + 16384 * nbatch + \
	65536 * tm[0].tomb + 131072 * tm[1].tomb)
#define SIGB (RUNV(0) + 4 * RUNV(1) + 16 * RUNV(2) + 64 * RUNV(3) + \
	256 * WAITV(0) + 1024 * WAITV(1) + 4096 * WAITV(2) + 16384 * WAITV(3) + \
	65536 * (ring[0] == NONE -> 3 : ring[0]) + 262144 * (ring[1] == NONE -> 3 : ring[1]))

/* cancel_sync: rc is the cancel's result, or R_EDEADLK */
inline cancel_sync(t) {
	cancel_state(t);
	skipslot = NSLOT;
	if
	:: me != NONE && running[me] == t -> skipslot = me
	:: else -> skip
	fi;
#if MUT == 6
	/* bug 6: from its own callback, give up at once */
	if
	:: skipslot != NSLOT -> rc = R_EDEADLK; goto sync_done
	:: else -> skip
	fi;
#endif
	if
	:: me != NONE -> waiting[me] = t
	:: else -> skip
	fi;
	do
	:: true ->
		if
#if MUT == 13
		:: tm[t].inbox ->
#else
		:: tm[t].inbox || tm[t].tomb ->
#endif
			lock(wheel_mu);
			drain_inboxes();
			atomic {
				res = (tm[t].st != PENDING && tm[t].st != ADDING);
				if
				:: res && tm[t].in_wheel -> TOUCH(t); tm[t].in_wheel = 0
				:: else -> skip
				fi
			}
			if
			:: res -> tm[t].tomb = 0   /* clear_tomb(), after the unlink */
			:: else -> skip
			fi;
			unlock(wheel_mu)
		:: else -> skip
		fi;
		if
		:: tm[t].entry && tm[t].st != EXPIRED -> take_entry(t)
		:: else -> skip
		fi;
		atomic { unreferenced(t, skipslot, res); siga = SIGA; sigb = SIGB };
		if
		:: res -> break
		:: else -> skip
		fi;
#if MUT != 7
		if
		:: me != NONE ->
			atomic { waits_for_me(t, res) };
			if
			:: res -> rc = R_EDEADLK; break
			:: else -> skip
			fi
		:: else -> skip
		fi;
#endif
		(SIGA != siga || SIGB != sigb)
	od;
	if
	:: me != NONE -> waiting[me] = NONE
	:: else -> skip
	fi;
sync_done:
	skip
}

/* ---- expiry and dispatch ---- */

/* The scanning thread: drain, fire what is due, note the next due time. */
inline scan() {
	lock(wheel_mu);
	drain_inboxes();
	i = 0;
	next = MAXT;
	do
	:: i < NT ->
		atomic {
			if
			:: tm[i].in_wheel && tm[i].due <= now ->
				TOUCH(i);
				tm[i].in_wheel = 0;
				if
				:: DEFER && tm[i].st == PENDING && !tm[i].inbox && !tm[i].entry ->
					/* the batch is full (or cannot grow): it
					 * stays PENDING, back in the wheel due
					 * now, for the next advance (on_expire) */
#if MUT == 11
					/* a deferral that forgets to put it back */
					next = now
#else
					tm[i].in_wheel = 1;
					tm[i].due = now;
					next = now
#endif
				:: tm[i].st == PENDING && !tm[i].inbox ->
					assert(tm[i].next_due <= now); /* never early */
					tm[i].st = EXPIRED;
					old = tm[i].entry;
					tm[i].entry = 1;
					if
					:: !old -> batch[nbatch] = i; nbatch++
					:: else -> skip
					fi
				:: else -> tm[i].tomb = 0 /* unlinked: no tombstone */
				fi
			:: tm[i].in_wheel && tm[i].st != PENDING && tm[i].st != ADDING ->
				/* a cascade meets a tombstone before its due
				 * time and drops it (drop_tombstone) */
				TOUCH(i);
				tm[i].in_wheel = 0;
				tm[i].tomb = 0
			:: tm[i].in_wheel && tm[i].due > now && tm[i].due < next ->
				next = tm[i].due
			:: else -> skip
			fi
		}
		i++
	:: else -> break
	od;
	unlock(wheel_mu)
}

/* One entry per timer: none may already wait when one is queued. */
inline assert_single_entry(t) {
	j = 0;
	do
	:: j < rlen -> assert(ring[(rhead + j) % RCAP] != t); j++
	:: else -> break
	od
}

inline callback(t) {
	if
	:: tm[t].cb == CB_SYNC_OTHER ->
		cb_started[t] = 1;
#if SCEN == 5
		(cb_started[0] && cb_started[1]);
#endif
		cancel_sync(1 - t);
		cb_result[t] = rc;
		cb_finished[t] = 1
	:: tm[t].cb == CB_SELF ->
		cb_started[t] = 1;
		readd_done;
		cancel_sync(t);
		cb_result[t] = rc;
		cb_finished[t] = 1;
		tm[t].freed = 1 /* a one-shot may free itself as its last act */
	:: else -> cb_finished[t] = 1
	fi
}

/* RUNNING -> PENDING at its next period, unless a cancel or add won. */
inline rearm(t) {
	c = closing;
	atomic {
		TOUCH(t);
		if
		:: tm[t].st == RUNNING -> tm[t].st = (c -> IDLE : ADDING); res = !c
		:: else -> res = 0
		fi
	}
	if
	:: res ->
		tm[t].next_due = tm[t].next_due + 2;
		atomic { old = tm[t].inbox; tm[t].st = PENDING; tm[t].inbox = 1; tm[t].adds++ };
		if
		:: !old -> push(t)
		:: else -> skip
		fi;
		if
		:: tm[t].next_due < deadline -> kick()
		:: else -> skip
		fi
	:: else -> skip
	fi
}

inline execute(t, slot) {
	running[slot] = t;
	atomic {
		TOUCH(t);
		old = tm[t].st;
		tm[t].entry = 0;
		if
		:: old == EXPIRED -> tm[t].st = (tm[t].periodic -> RUNNING : IDLE)
		:: else -> skip
		fi
	}
	if
	:: old == EXPIRED ->
		tm[t].ran++;
		me = slot;
		callback(t);
		me = NONE;
		if
		:: tm[t].periodic -> rearm(t)
		:: else -> skip
		fi
	:: else -> skip
	fi;
	running[slot] = NONE
}

inline dispatch() {
	i = 0;
	do
	:: i < nbatch && batch[i] == NONE -> i++
	:: i < nbatch && batch[i] != NONE ->
#if NEXEC > 0
		lock(q_mu);
		if
		:: rlen < RCAP && !stop_exec ->
			assert_single_entry(batch[i]);
			ring[(rhead + rlen) % RCAP] = batch[i];
			rlen++;
			batch[i] = NONE;
			unlock(q_mu);
			i++
		:: else ->
			unlock(q_mu);
			t2 = batch[i];
			batch[i] = NONE;
			execute(t2, SCANNER);
			i++
		fi
#else
		t2 = batch[i];
		batch[i] = NONE;
		execute(t2, SCANNER);
		i++
#endif
	:: else -> break
	od;
	nbatch = 0
}

/* manual mode's poll (SCEN 2..6: the scenario's own process) */
inline poll() {
	lock(scan_mu);
	if
	:: closing -> skip
	:: else -> scan(); dispatch()
	fi;
	unlock(scan_mu)
}

#define LOCALS byte old, s, rc, was, i, j, k, cur, hop, t2, next, skipslot; \
	bool entered, res, c, oinb, otomb; byte me = NONE; bool taken[NT]; int siga, sigb

proctype reaper()
{
	LOCALS;
	do
	:: true ->
#if MUT == 1
		/* bug 1: kick_pending cleared outside the lock */
		deadline = MAXT;
		kick_pending = 0;
		lock(reaper_mu);
		if
		:: stop_reaper -> unlock(reaper_mu); break
		:: else -> skip
		fi;
		kicked = 0;
		unlock(reaper_mu);
#else
		lock(reaper_mu);
		if
		:: stop_reaper -> unlock(reaper_mu); break
		:: else -> skip
		fi;
		kicked = 0;
		kick_pending = 0;
		deadline = MAXT;
		unlock(reaper_mu);
#endif
		lock(scan_mu);
		scan();
		dispatch();
		unlock(scan_mu);
		lock(reaper_mu);
		if
		:: !kicked && !stop_reaper ->
			deadline = next;
			unlock(reaper_mu);
			/* pthread_cond_(timed)wait: a kick, stop, or the time */
			(kicked || stop_reaper || (next != MAXT && now >= next));
			lock(reaper_mu)
		:: else -> skip
		fi;
		unlock(reaper_mu)
	od;
	reaper_done = 1
}

proctype executor(byte e)
{
	LOCALS;
	do
	:: lock(q_mu);
		if
		:: rlen > 0 ->
			t2 = ring[rhead];
			rhead = (rhead + 1) % RCAP;
			rlen--;
			unlock(q_mu);
			if
			:: t2 != NONE -> execute(t2, e)
			:: else -> skip
			fi
		:: rlen == 0 && stop_exec -> unlock(q_mu); break
		:: rlen == 0 && !stop_exec -> unlock(q_mu); (rlen > 0 || stop_exec)
		fi
	od;
	exec_done++
}

inline shutdown() {
	lock(scan_mu);
	closing = 1;
	unlock(scan_mu);
	(producers_in == 0);
#if REAPER
	lock(reaper_mu);
	stop_reaper = 1;
	unlock(reaper_mu);
	reaper_done;
#endif
#if NEXEC > 0
	lock(q_mu);
	stop_exec = 1;
	unlock(q_mu);
	(exec_done == NEXEC);
#endif
	lock(wheel_mu);
	drain_inboxes();
	i = 0;
	do
	:: i < NT ->
		atomic {
			if
			:: tm[i].in_wheel ->
				TOUCH(i);
				tm[i].in_wheel = 0;
				if
				:: tm[i].st == PENDING ->
					tm[i].st = IDLE;
#if MUT != 3
					tm[i].entry = 1;
#endif
					coll[i] = 1
				:: else -> tm[i].tomb = 0
				fi
			:: else -> skip
			fi
		}
		i++
	:: else -> break
	od;
	unlock(wheel_mu);
	i = 0;
	do
	:: i < NT ->
		if
		:: coll[i] ->
			coll[i] = 0;
#if MUT != 3
			running[HANDBACK] = i;
			tm[i].entry = 0;
#endif
			TOUCH(i);
			tm[i].handed++;
			running[HANDBACK] = NONE
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	shut_done = 1
}

/* Each add ended exactly once. */
inline check_accounts() {
	i = 0;
	do
	:: i < NT ->
		assert(tm[i].adds == tm[i].ran + tm[i].stopped + tm[i].handed);
		i++
	:: else -> break
	od
}

#if SCEN == 2
proctype canceller()
{
	LOCALS;
	cancel_sync(0);
	if
	:: rc != R_EDEADLK -> tm[0].freed = 1 /* cancel_sync said it may be */
	:: else -> skip
	fi;
	cb_finished[1] = 1
}
#endif

#if SCEN == 8
bool churned, synced;

/* The owner's thread: a plain cancel of the placed timer, after a
 * reschedule, or twice around a re-add. */
proctype churner()
{
	LOCALS;
	if
	:: cancel_state(0)
	:: add_or_reschedule(0, 2, 1); cancel_state(0)
	:: cancel_state(0); add_or_reschedule(0, 1, 0); cancel_state(0)
	fi;
	churned = 1
}

/* Another thread of the owner: once the churner is done, cancel_sync and
 * free, while the poller drains and fires. */
proctype syncer()
{
	LOCALS;
	churned;
	cancel_sync(0);
	tm[0].freed = 1;
	synced = 1
}
#endif

#if SCEN == 1
proctype kicker()
{
	LOCALS;
	kick()
}
#endif

#if SCEN == 7
byte producers_done;

proctype producer(byte id)
{
	LOCALS;
	byte n = 0, t;
	do
	:: n < OPS ->
		if
		:: t = 0
		:: t = 1
		fi;
		if
		:: true -> add_or_reschedule(t, 1, 0)
		:: true -> add_or_reschedule(t, 2, 1)
		:: true -> cancel_state(t)
		:: true -> cancel_sync(t)
		fi;
		n++
	:: else -> break
	od;
	producers_done++
}

proctype clock()
{
	do
	:: now < 3 -> now++
	:: else -> break
	od
}
#endif

bool coll[NT];

/* Always: a timer the wheel links is PENDING or ADDING, or its word says
 * it may be linked (F_INBOX, F_TOMB). cancel_sync takes wheel_mu only for
 * a flagged timer, so this is what keeps it from letting the owner free a
 * timer the wheel still links. */
#define UNSAID(i) (tm[i].in_wheel && tm[i].st != PENDING && \
	tm[i].st != ADDING && !tm[i].inbox && !tm[i].tomb)
active proctype linked_means_flagged()
{
end:	atomic { (UNSAID(0) || UNSAID(1)) -> assert(false) }
}

init
{
	LOCALS;
	atomic {
		i = 0;
		do
		:: i < NT -> running[i] = NONE; waiting[i] = NONE; i++
		:: else -> break
		od;
		do
		:: i < NSLOT -> running[i] = NONE; waiting[i] = NONE; i++
		:: else -> break
		od;
		ring[0] = NONE;
		ring[1] = NONE;
		batch[0] = NONE;
		batch[1] = NONE;
	}
#if SCEN == 1
	/* Two timers due now, one after the other ran: the second add's
	 * kick must get through whatever the reaper was doing. */
	run reaper();
	run kicker();
	add_or_reschedule(0, 0, 0);
	tm[0].ran == 1;
	add_or_reschedule(1, 0, 0);
	tm[1].ran == 1;
	shutdown();
#elif SCEN == 2
	/* cancel_sync against shutdown's hand-back. */
	add_or_reschedule(0, 5, 0);
	run canceller();
	shutdown();
	cb_finished[1];
#elif SCEN == 3
	/* x's callback cancel_syncs y on the only executor, y is re-added. */
	tm[0].cb = CB_SYNC_OTHER;
	run executor(0);
	add_or_reschedule(0, 0, 0);
	add_or_reschedule(1, 0, 0);
	poll();
	add_or_reschedule(1, 0, 0);
	poll();
	cb_finished[0];
	shutdown();
#elif SCEN == 4
	/* x's callback waits for a re-add of x, cancel_syncs x, frees it. */
	tm[0].cb = CB_SELF;
	run executor(0);
	add_or_reschedule(0, 0, 0);
	poll();
	cb_started[0];
	add_or_reschedule(0, 1, 0);
	readd_done = 1;
	cb_finished[0];
	poll();
	shutdown();
#elif SCEN == 5
	/* two callbacks cancel_sync each other */
	tm[0].cb = CB_SYNC_OTHER;
	tm[1].cb = CB_SYNC_OTHER;
	run executor(0);
	run executor(1);
	add_or_reschedule(0, 0, 0);
	add_or_reschedule(1, 0, 0);
	poll();
	cb_finished[0] && cb_finished[1];
	assert(cb_result[0] == R_EDEADLK || cb_result[1] == R_EDEADLK);
	shutdown();
#elif SCEN == 6
	/* a plain cancel of an expired timer, then reinit and re-add */
	run executor(0);
	add_or_reschedule(0, 0, 0);
	poll();
	cancel_state(0);
	atomic {
		tm[0].st == IDLE;
#if MUT == 8
		/* bug 8: tw_service_timer_init wipes the flags */
		tm[0].entry = 0;
		tm[0].inbox = 0
#endif
	}
	add_or_reschedule(0, 0, 0);
	poll();
	shutdown();
#elif SCEN == 8
	/* tombstones: a placed timer is cancelled (plain) by one thread and
	 * cancel_synced and freed by another, while polls drain the inboxes
	 * and fire what is due, tombstones included */
	add_or_reschedule(0, 2, 0);
	poll();
	run churner();
	run syncer();
	poll();
	if
	:: now = 2
	:: skip
	fi;
	poll();
	synced;
	poll();
	shutdown();
#else
	/* the general run */
	tm[1].periodic = 1;
	now = 1;
	run reaper();
	run executor(0);
#ifdef CLOCK
	run clock();
#endif
	run producer(0);
	run producer(1);
	producers_done == 2;
	/* liveness: whatever is due now runs (a reaper asleep through an
	 * add would leave this waiting for ever) */
	!((tm[0].st == PENDING || tm[0].st == EXPIRED) && tm[0].next_due <= now) &&
	!((tm[1].st == PENDING || tm[1].st == EXPIRED) && tm[1].next_due <= now);
	shutdown();
#endif
	check_accounts()
}
