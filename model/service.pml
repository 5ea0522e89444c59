/* SPDX-License-Identifier: MIT */
/*
 * service.pml -- the timer service's protocol (src/service/), for SPIN.
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
 * What is not: which service owns a timer, but in SCEN 9 (one service
 * elsewhere; the owner's id rides in the state word, checked in the CAS
 * that changes the state, and tests/test_races.c forces two services'
 * adds of one fresh timer), the
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
 * freed by another, while polls drain and fire it; 9 two services whose
 * callbacks cancel_sync each other's timer (a ring across services); 10
 * shutdown's private list: a hand_back cancel_syncs and frees a timer
 * still on it while another thread cancel_syncs and frees the first; 11
 * the purgatory's stop_pending racing the add it stops (between the
 * add's CAS and its push), then freeing the timer; 12 one timer's owner
 * making any three calls (reinit and stop_pending among them) against a
 * poller and an executor; 13 (no property) the step relation: one call
 * from every word; 15 a periodic timer on two executors rescheduled
 * during its run (by another thread or by the run itself), whose next run
 * cancels and frees it, or whose run cancel_syncs and frees it (mode 3:
 * the first with a one-shot timer); 16 a
 * ring of one: the poller runs x itself and x cancel_syncs y, which the
 * only executor takes: no cycle, so no TW_EDEADLK; 17 a manual
 * service's event loop (poll, tw_service_next_expiry, sleep until the
 * answer or its wake-up) and a periodic timer whose run the poll queues
 * for the executor: the re-arm must wake the loop.
 * In every scenario execute asserts, at each claim, that the timer is in
 * no other run (inrun[]): a timer never runs beside itself; and a cancel
 * that finds the timer IDLE and answers TW_SVC_RUNNING from the slots
 * asserts that the slot it counted holds a run (slotrun[]).
 * In every scenario a monitor checks, in every state, that a timer the
 * wheel links is PENDING, ADDING or flagged (F_INBOX, F_TOMB).
 * Mutations (MUT): 1, 3, 5, 6, 7, 8 put back issue 13's protocol bugs of
 * those numbers; 11 a deferral that forgets the timer; 12 apply() taking
 * the flags down before it unlinks (the order before tombstones: a
 * cancel_sync in between let its caller free a linked timer); 13 a
 * cancel_sync blind to F_TOMB; issue 28: 15 a ring check per service
 * (a callback of another service is an outsider), 16 shutdown claiming
 * its timers when it collects them (IDLE with F_ENTRY: a cancel_sync from
 * hand_back waited for itself), 20 stop_pending returning after one drain
 * (a timer the add pushes after it, freed, still in an inbox); issue 26:
 * 21 apply loading the due time before its CAS takes F_INBOX down (a
 * reschedule to a window in between pushes nothing, and the torn pair,
 * old due time and new window, fires early: scenario 14); issue 38:
 * 25 execute claiming an expiry whose timer another slot runs (no
 * hand-over: two runs at once), 26 cancel_sync from the callback blind to
 * the expiry handed to its own slot (it waits for itself): scenario 15;
 * 27 an executor storing its slot after it let go of q_mu (the entry in
 * neither the ring nor a slot: a false TW_EDEADLK, scenario 16); the
 * eighth review's G1: 28 a manual service's kick that wakes nobody (the
 * code before tw_service_set_wake), 29 next_expiry clearing kick_pending
 * after its drain (scenario 17); G2: 30 a cancel counting any slot that
 * holds the timer as a run (the code before the slot tags), 31 a slot
 * that gives up a stopped entry left tagged T_HELD (scenario 12: the
 * assertion that a slot taken for a run is one); the ninth review: 33 a
 * held slot judged by the word alone, no second look at the slot (a
 * give-up between the two loads read as a claim).
 * model/check.sh checks that SPIN finds each.
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
#elif SCEN == 2 || SCEN == 8 || SCEN == 9 || SCEN == 10 || SCEN == 11 || SCEN == 14
#define NEXEC 0
#define REAPER 0
#elif SCEN == 3 || SCEN == 4 || SCEN == 6 || SCEN == 12 || SCEN == 13 || SCEN == 16 || SCEN == 17
#define NEXEC 1
#define REAPER 0
#elif SCEN == 5 || SCEN == 15
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
#if SCEN == 3 || SCEN == 4 || SCEN == 5 || SCEN == 9 || SCEN == 14 || SCEN == 15 || SCEN == 16 || SCEN == 17
#define DEFER 0
#else
#define DEFER 1
#endif

/* Services: one, but two in SCEN 9 (a cancel_sync ring across them),
 * each with its own wheel_mu, scan_mu, batch and running[] slots; timer t
 * belongs to service SVC_OF(t). Their slots are one array: service s has
 * running[s * NSLOT] .. running[s * NSLOT + NSLOT - 1], as the process-wide
 * record of cancel_sync waits names a slot by (service, slot). */
#if SCEN == 9
#define NSVC 2
#define SVC_OF(t) tm[t].svc
#else
#define NSVC 1
#define SVC_OF(t) 0
#endif

#define NSLOT (NEXEC + 2)      /* running[] slots of one service */
#define NSLOTS (NSVC * NSLOT)  /* of every service */
#define SCANNER_OF(s) ((s) * NSLOT + NEXEC)      /* the scanning thread's */
#define HANDBACK_OF(s) ((s) * NSLOT + NEXEC + 1) /* shutdown's hand-back */
#define SCANNER SCANNER_OF(0)
#define HANDBACK HANDBACK_OF(0)
#define BATCH(s, j) batch[(s) * NT + (j)]
#if SCEN == 16
#define RCAP 1                 /* executor ring: full with one entry */
#else
#define RCAP 2                 /* executor ring */
#endif

/* callback actions */
#define CB_NONE 0
#define CB_SYNC_OTHER 1   /* cancel_sync the other timer */
#define CB_SELF 2         /* wait for a re-add, cancel_sync itself, free */
#define CB_TWICE 3        /* SCEN 15: run 1 may reschedule itself, or
			     cancel_sync itself and free; run 2 cancels
			     itself and frees */

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
#if SCEN == 14
	byte next_slack; /* its window: next_due + 0 .. next_slack */
	byte read_due;   /* apply's first load, before its second */
#endif
	bool freed;      /* its owner may have freed it */
	byte cb;         /* callback action */
	byte adds, ran, stopped, handed;
#if NSVC > 1
	byte svc;        /* the service that owns it */
#endif
};
timer_t tm[NT];

byte now;                   /* the clock */
bool closing;
byte producers_in;                /* producers inside an operation (all inboxes) */

/* per service: wheel_mu, and what the scanning thread holds */
bool wheel_mu[NSVC];
bool scan_mu[NSVC];
byte batch[NSVC * NT];      /* expired, not yet dispatched (scanner) */
byte nbatch[NSVC];

/* reaper */
bool reaper_mu, kicked, kick_pending, stop_reaper, reaper_done;
byte deadline = MAXT;
#if SCEN == 17
/* a manual service's event loop: its eventfd (woken), and its end */
bool woken, stop_loop, loop_done;
#endif

/* executors */
bool q_mu;
byte ring[2];               /* RCAP of them used */
byte rhead, rlen;
bool stop_exec;
byte exec_done;

byte running[NSLOTS];
/* The slot's tag (core.h: a slot's two low bits): T_RUN a run is under
 * way (with again[k]: RUN_AGAIN), T_HELD it holds the entry and may be
 * claiming it, T_NORUN it gives a stopped entry up or hands it over.
 * slotrun[k] (a ghost): slot k's claim went through and it has not let
 * go -- what a TW_SVC_RUNNING found in the slots must be (review G2). */
#define T_RUN 0
#define T_HELD 2
#define T_NORUN 3
byte tag[NSLOTS];
bool slotrun[NSLOTS];
bool again[NSLOTS];         /* RUN_AGAIN: an expiry of running[k] handed
			       to slot k, for after its run */
byte waiting[NSLOTS];
byte inrun[NT];             /* runs of the timer under way, claim to re-arm */

/* callbacks' progress, for the scenarios */
byte cb_started[NT], cb_finished[NT];
byte cb_result[NT];
bool readd_done;            /* SCEN 4: the re-add happened */
#if SCEN == 15
byte s15_mode;              /* who reschedules during run 1 (init) */
bool resched_done;
#endif
bool shut_done;
byte handed_total;
bool coll[NT];              /* on shutdown's private list (tls_handed) */

#define lock(m)   atomic { !m -> m = 1 }
#define unlock(m) m = 0
#define TOUCH(t)  assert(!tm[t].freed)

/*
 * Code and model, one machine. The timer's state word as the C code lays
 * it out (src/service/state.h): the state in bits 0-2, then F_INBOX,
 * F_ENTRY, F_PERIODIC, F_TOMB. Every step below that changes a timer's
 * word is bracketed by BEGIN_STEP(t) and STEP(t, name), name as the C
 * code's transition (state.h's tr_*). Built with -DRECORD (model/check.sh
 * does, in the runs that must pass and in scenario 13's run from every
 * word), STEP prints each (name, from, to) the first time SPIN reaches
 * it; check.sh gathers them into model/service.transitions, the table the
 * C test-point build checks each of its own transitions against
 * (transitions.c). The two scratch globals are 0 outside a step, so they
 * add no state.
 */
#define WORD(t) (tm[t].st + 8 * tm[t].inbox + 16 * tm[t].entry + \
	32 * tm[t].periodic + 64 * tm[t].tomb)
byte step_from, step_to;
#ifdef RECORD
c_decl {
	static unsigned char tw_step_seen[16][128][128];
	static void tw_step(int id, const char *name, int from, int to)
	{
		if (from == to || tw_step_seen[id][from][to])
			return;
		tw_step_seen[id][from][to] = 1;
		printf("STEP %s %d %d\n", name, from, to);
	}
}
#define BEGIN_STEP(t) step_from = WORD(t)
#define STEP(t, name) step_to = WORD(t); \
	c_code { tw_step(T_##name, #name, now.step_from, now.step_to); }; \
	step_from = 0; step_to = 0
#else
#define BEGIN_STEP(t) skip
#define STEP(t, name) skip
#endif
#define T_add 0
#define T_publish 1
#define T_rearm 2
#define T_apply 3
#define T_clear_tomb 4
#define T_expire 5
#define T_execute 6
#define T_release_entry 7
#define T_reinit 8
#define T_cancel 9
#define T_stop_pending 10
#define T_collect 11
#define T_hand_back 12

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
#if SCEN == 14 && MUT == 21
	/* the due time loaded before F_INBOX goes down: a reschedule
	 * between this load and the CAS finds F_INBOX set and pushes
	 * nothing, and the CAS (same state, same flags) succeeds */
	tm[t].read_due = tm[t].next_due;
#endif
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
			BEGIN_STEP(t); tm[t].inbox = 0; tm[t].tomb = 0;
			STEP(t, apply); break
		:: else -> skip
		fi
	   }
#endif
	od;
#if SCEN == 14
	/* Windows: the due time and the window are two loads, after the
	 * CAS; a reschedule between them tears the pair, and has pushed the
	 * timer again (it found F_INBOX down), so the scan passes over the
	 * torn placement. The wheel files it anywhere in its window. */
	if
	:: old == PENDING ->
#if MUT == 21
		/* loaded before the CAS above: see its other half there */
		skip;
#else
		tm[t].read_due = tm[t].next_due;
#endif
		atomic {
			TOUCH(t); tm[t].in_wheel = 1;
			if
			:: tm[t].due = tm[t].read_due
			:: tm[t].due = tm[t].read_due + tm[t].next_slack
			fi
		}
	:: else -> skip
	fi
#else
	if
	:: old == PENDING -> atomic { TOUCH(t); tm[t].in_wheel = 1; tm[t].due = tm[t].next_due }
	:: else -> skip
	fi
#endif
}

/* Wheel owner of service sid (its wheel_mu held): one exchange takes every
 * timer stacked on its inboxes. */
inline drain_inboxes(sid) {
	atomic {
		i = 0;
		do
		:: i < NT && SVC_OF(i) == sid -> taken[i] = tm[i].stacked; tm[i].stacked = 0; i++
		:: i < NT && SVC_OF(i) != sid -> i++
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
#elif SCEN == 17
	/* a manual service's kick: its loop's wake-up (wake_loop), once
	 * per question (tw_service_next_expiry clears kick_pending). The
	 * manual deadline stays MAXT, so every add and re-arm comes here.
	 * (The C code skips the polling thread's own adds, its loop asking
	 * after the poll; none happen in scenario 17.) */
#if MUT == 28
	skip   /* the code before: a manual service's kick did nothing */
#else
	if
	:: kick_pending -> old = 1
	:: else -> atomic { old = kick_pending; kick_pending = 1 }
	fi;
	if
	:: !old && intail -> wo = 1   /* execute wakes it after its let-go */
	:: !old && !intail -> woken = 1
	:: else -> skip
	fi
#endif
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

/* add (resched 0) or reschedule (resched 1) of t at d, with a window of
 * sl more (add_range, reschedule_range; scenario 14 only); rc gets the
 * result */
#define add_or_reschedule(t, d, resched) add_or_reschedule_range(t, d, 0, resched)
inline add_or_reschedule_range(t, d, sl, resched) {
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
			:: else ->
				BEGIN_STEP(t); tm[t].st = ADDING; STEP(t, add);
				rc = R_OK; break
			fi
		   }
		od;
		if
		:: rc == R_OK ->
			if
			:: resched && (s == PENDING || s == EXPIRED) ->
				tm[t].stopped++; rc = R_STOPPED
			:: resched && s == RUNNING -> rc = R_RUNNING
			:: resched && s == IDLE ->
				/* what a cancel would have returned: a run in
				 * the slots (stop_result); R_OK stands for IDLE */
				runs_except(t, HANDBACK_OF(SVC_OF(t)), res);
				rc = (res -> R_RUNNING : R_OK)
			:: else -> skip
			fi;
			tm[t].next_due = d;
#if SCEN == 14
			tm[t].next_slack = sl;
#endif
			atomic { BEGIN_STEP(t); old = tm[t].inbox; tm[t].st = PENDING; tm[t].inbox = 1; tm[t].adds++; STEP(t, publish) };
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

/* running[] of t's service other than slot skip holds t */
inline is_running_except(t, skip_slot, res) {
	res = 0;
	j = SVC_OF(t) * NSLOT;
	do
	:: j < SVC_OF(t) * NSLOT + NSLOT -> if :: j != skip_slot && running[j] == t -> res = 1 :: else -> skip fi; j++
	:: else -> break
	od
}

/* What a cancel that found t IDLE answers: whether a slot of t's service
 * other than skip_slot runs t (core.h, slot_runs): T_RUN; T_HELD only if
 * the word then has no F_ENTRY and the slot, loaded once more, still
 * holds t and not T_NORUN (a give-up clears F_ENTRY too, after T_NORUN);
 * never T_NORUN. Three loads, three steps, as in the C code. Asserted: a
 * slot taken for a run is one (slotrun). */
inline runs_except(t, skip_slot, res) {
	res = 0;
	j = SVC_OF(t) * NSLOT;
	do
	:: j < SVC_OF(t) * NSLOT + NSLOT ->
		/* the slot, one load */
		atomic {
			if
#if MUT == 30
			/* the code before: any slot holding t */
			:: j != skip_slot && running[j] == t -> assert(slotrun[j]); res = 1; k = 0
#else
			:: j != skip_slot && running[j] == t && tag[j] == T_RUN ->
				assert(slotrun[j]); res = 1; k = 0
			:: j != skip_slot && running[j] == t && tag[j] == T_HELD -> k = 1
#endif
			:: else -> k = 0
			fi
		}
		if
		:: k ->
			/* held: the word, then the slot again (three loads) */
			k = !tm[t].entry;
			if
			:: k ->
#if MUT == 33
				/* the ninth reading: no second look at the slot */
				atomic { assert(slotrun[j]); res = 1 }
#else
				atomic {
					if
					:: running[j] == t && tag[j] != T_NORUN ->
						assert(slotrun[j]); res = 1
					:: else -> skip
					fi
				}
#endif
			:: else -> skip
			fi;
			k = 0
		:: else -> skip
		fi;
		j++
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
			BEGIN_STEP(t);
			tm[t].st = IDLE;
			if
			:: was == PENDING -> tm[t].tomb = 1
			:: else -> skip
			fi;
			STEP(t, cancel);
			break
		fi
	   }
	od;
	if
	:: was == PENDING || was == EXPIRED -> rc = R_STOPPED; tm[t].stopped++
	:: was == RUNNING -> rc = R_RUNNING
	:: else ->
		runs_except(t, HANDBACK_OF(SVC_OF(t)), res);
		rc = (res -> R_RUNNING : R_IDLE)
	fi;
	/* from its own callback: its run is its last, not re-armed
	 * (THIS_THREAD.rearm), so that the callback may free it */
	if
	:: me != NONE && running[me] == t -> rearm_ok = 0
	:: else -> skip
	fi
}

/* cancel_sync: give up t's entry if it is found and not live again */
inline take_entry(t) {
#if MUT != 16
	/* Shutdown's list is the shutting-down thread's: from its hand_back
	 * (tls_slot is the hand-back slot), a timer still on it is taken off
	 * and its F_ENTRY cleared (our cancel stopped it), for that thread
	 * cannot wait for itself to reach it. */
	if
	:: me == HANDBACK_OF(SVC_OF(t)) && coll[t] ->
		atomic { coll[t] = 0; TOUCH(t); BEGIN_STEP(t); tm[t].entry = 0; STEP(t, release_entry) }
	:: else ->
#endif
#if MUT != 26
	/* From t's own callback: an expiry handed to this thread's slot
	 * (again[me]) is taken back, unless t expired again meanwhile;
	 * waiting for it would be waiting for itself. */
	if
	:: me != NONE && running[me] == t && again[me] ->
		atomic {
			if
			:: tm[t].entry && tm[t].st != EXPIRED ->
				BEGIN_STEP(t); tm[t].entry = 0; STEP(t, release_entry);
				again[me] = 0
			:: else -> skip
			fi
		}
	:: else ->
#endif
	/* the scanner's own batch (tls_scanning == svc) */
	if
	:: me == SCANNER_OF(SVC_OF(t)) ->
		j = 0;
		do
		:: j < nbatch[SVC_OF(t)] ->
			if
			:: BATCH(SVC_OF(t), j) == t ->
				atomic {
					if
					:: tm[t].entry && tm[t].st != EXPIRED ->
						BEGIN_STEP(t); tm[t].entry = 0; STEP(t, release_entry);
						BATCH(SVC_OF(t), j) = NONE
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
#if NSVC == 1   /* SCEN 9 has no executors: no ring */
	lock(q_mu);
	j = 0;
	do
	:: j < rlen ->
		if
		:: ring[(rhead + j) % RCAP] == t ->
			atomic {
				if
				:: tm[t].entry && tm[t].st != EXPIRED ->
					BEGIN_STEP(t); tm[t].entry = 0; STEP(t, release_entry);
					ring[(rhead + j) % RCAP] = NONE
				:: else -> skip
				fi
			}
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	unlock(q_mu)
#endif
#if MUT != 26
	fi
#endif
#if MUT != 16
	fi
#endif
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

/* Would waiting for t wait for the callback running in slot me?
 * (closes_ring: follow t to the slot of its service that runs it, or
 * holds its entry, to what the thread there waits for, ... ; waiting[] of
 * every service is the one record under sync_waits_mu.) Every hop is
 * looked at as things are now, under q_mu (the caller's atomic waits for
 * it): a timer in no slot holds up its waiter only while its entry is in
 * the scanner's batch; one in the executors' ring is taken back at the
 * waiter's next look (holder_slot). */
#define IN_RING(c) ((rlen > 0 && ring[rhead] == c) || \
	(rlen > 1 && ring[(rhead + 1) % RCAP] == c))
inline waits_for_me(t, res) {
	res = 0;
	cur = t;
	hop = 0;
	do
	:: hop < NSLOTS ->
		k = SVC_OF(cur) * NSLOT;
		do
		:: k < SVC_OF(cur) * NSLOT + NSLOT && (k == me || running[k] != cur) -> k++
		:: else -> break
		od;
		if
		:: k == SVC_OF(cur) * NSLOT + NSLOT && (!tm[cur].entry || IN_RING(cur)) -> break
		:: k == SVC_OF(cur) * NSLOT + NSLOT && tm[cur].entry && !IN_RING(cur) ->
			k = SCANNER_OF(SVC_OF(cur))
		:: else -> skip
		fi;
#if MUT != 15
		if
		:: k == me -> res = 1; break   /* its entry is in my own batch */
		:: else -> skip
		fi;
#endif
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
 * which SPIN then reports). Nor does it wait while its timer is on an
 * inbox stack: the word still says F_INBOX, so the next pass drains it (a
 * push after this pass's drain -- scenario 12 found a model that waited
 * for ever there, where the C code's next pass drains); nor, from the
 * timer's own callback, while an expiry of it waits in its own slot
 * (again[me]): the next pass takes it back (handed over after this
 * pass's take_entry looked -- scenario 15 found that one the same way). */
#define RUNV(k) (k < NSLOTS -> (running[k] == NONE -> 3 : running[k]) : 0)
#define WAITV(k) (k < NSLOTS -> (waiting[k] == NONE -> 3 : waiting[k]) : 0)
#define AGAINV(k) (k < NSLOTS -> again[k] : 0)
#define SIGA (tm[0].st + 8 * tm[0].inbox + 16 * tm[0].entry + \
	32 * tm[1].st + 256 * tm[1].inbox + 512 * tm[1].entry + \
	1024 * rlen + 4096 * rhead + 16384 * nbatch[0] + \
	65536 * tm[0].tomb + 131072 * tm[1].tomb + 262144 * nbatch[NSVC - 1] + \
	1048576 * (AGAINV(0) + 2 * AGAINV(1) + 4 * AGAINV(2) + 8 * AGAINV(3)))
#define SIGB (RUNV(0) + 4 * RUNV(1) + 16 * RUNV(2) + 64 * RUNV(3) + \
	256 * WAITV(0) + 1024 * WAITV(1) + 4096 * WAITV(2) + 16384 * WAITV(3) + \
	65536 * (ring[0] == NONE -> 3 : ring[0]) + 262144 * (ring[1] == NONE -> 3 : ring[1]))

/* cancel_sync: rc is the cancel's result, or R_EDEADLK */
inline cancel_sync(t) {
	cancel_state(t);
	skipslot = NSLOTS;
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
#if MUT == 15
	/* today's check, per service: only a callback of t's own service
	 * posts (waiting[], before the loop) and looks; a callback of another
	 * service is an outsider to this one */
	mine = (me != NONE && me / NSLOT == SVC_OF(t));
	if
	:: mine -> waiting[me] = t
	:: else -> skip
	fi;
#endif
	do
	:: true ->
		if
#if MUT == 13
		:: tm[t].inbox ->
#else
		:: tm[t].inbox || tm[t].tomb ->
#endif
			lock(wheel_mu[SVC_OF(t)]);
			drain_inboxes(SVC_OF(t));
			atomic {
				res = (tm[t].st != PENDING && tm[t].st != ADDING);
				if
				:: res && tm[t].in_wheel -> TOUCH(t); tm[t].in_wheel = 0
				:: else -> skip
				fi
			}
			if
			:: res ->   /* clear_tomb(), after the unlink */
				atomic { BEGIN_STEP(t); tm[t].tomb = 0; STEP(t, clear_tomb) }
			:: else -> skip
			fi;
			unlock(wheel_mu[SVC_OF(t)])
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
#if MUT == 15
		if
		:: mine ->
			atomic { waits_for_me(t, res) };
			if
			:: res -> rc = R_EDEADLK; break
			:: else -> skip
			fi
		:: else -> skip
		fi;
#elif MUT != 7
		/* A callback of any service (or a hand_back) about to wait:
		 * post what it waits for (once) and look for a ring, in one
		 * critical section of sync_waits_mu (wait_closes_ring). Its
		 * own post is no change to wait for: sigb takes it in. */
		if
		:: me != NONE ->
			atomic {
				!q_mu;   /* holder_slot looks under q_mu */
				d = SIGB;
				waiting[me] = t;
				sigb = sigb + SIGB - d;
				d = 0;
				waits_for_me(t, res)
			};
			if
			:: res -> rc = R_EDEADLK; break
			:: else -> skip
			fi
		:: else -> skip
		fi;
#endif
#if MUT == 26
		/* the pass does not look at its own slot: nor does the wait */
		(SIGA != siga || SIGB != sigb || tm[t].stacked)
#else
		(SIGA != siga || SIGB != sigb || tm[t].stacked ||
		 (me != NONE && running[me] == t && again[me]))
#endif
	od;
	if
	:: me != NONE -> waiting[me] = NONE   /* unpost_wait */
	:: else -> skip
	fi;
sync_done:
	skip
}

/* tw__service_stop_pending (the purgatory's completion): PENDING with no
 * entry -> IDLE and a tombstone in one step, then under wheel_mu drain
 * while an inbox holds the timer (an add between its CAS and its push),
 * unlink it and clear the tombstone. It never waits for a callback. On
 * R_STOPPED its caller may free the timer. */
inline stop_pending(t) {
	atomic {
		TOUCH(t);
		tm[t].st != ADDING ->   /* settled() */
		if
		:: tm[t].st == PENDING && !tm[t].entry ->
			BEGIN_STEP(t); tm[t].st = IDLE; tm[t].tomb = 1; STEP(t, stop_pending);
			tm[t].stopped++; rc = R_STOPPED
		:: else -> rc = R_IDLE
		fi
	}
	if
	:: rc == R_STOPPED ->
		do
		:: true ->
			lock(wheel_mu[SVC_OF(t)]);
#if MUT == 20
			/* the first version: one drain, whatever it found */
			drain_inboxes(SVC_OF(t));
			break
#else
			/* no drain while no inbox holds the timer (the
			 * usual case: it was applied long ago) */
			if
			:: !tm[t].inbox -> break
			:: else -> drain_inboxes(SVC_OF(t))
			fi;
			if
			:: !tm[t].inbox -> break
			:: else -> unlock(wheel_mu[SVC_OF(t)])
			fi
#endif
		od;
		atomic {
			res = (tm[t].st != PENDING && tm[t].st != ADDING);
			if
			:: res && tm[t].in_wheel -> TOUCH(t); tm[t].in_wheel = 0
			:: else -> skip
			fi
		}
		if
		:: res -> atomic { BEGIN_STEP(t); tm[t].tomb = 0; STEP(t, clear_tomb) }
		:: else -> skip
		fi;
		unlock(wheel_mu[SVC_OF(t)])
	:: else -> skip
	fi
}

/* ---- expiry and dispatch ---- */

/* The scanning thread of service sid: drain, fire what is due, note the
 * next due time. */
inline scan(sid) {
	lock(wheel_mu[sid]);
	drain_inboxes(sid);
	i = 0;
	next = MAXT;
	do
	:: i < NT && SVC_OF(i) != sid -> i++
	:: i < NT && SVC_OF(i) == sid ->
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
					BEGIN_STEP(i);
					tm[i].st = EXPIRED;
					old = tm[i].entry;
					tm[i].entry = 1;
					STEP(i, expire);
					if
					:: !old -> BATCH(sid, nbatch[sid]) = i; nbatch[sid]++
					:: else -> skip
					fi
				:: else -> /* unlinked: no tombstone */
					BEGIN_STEP(i); tm[i].tomb = 0; STEP(i, clear_tomb)
				fi
			:: tm[i].in_wheel && tm[i].st != PENDING && tm[i].st != ADDING ->
				/* a cascade meets a tombstone before its due
				 * time and drops it (drop_tombstone) */
				TOUCH(i);
				tm[i].in_wheel = 0;
				BEGIN_STEP(i); tm[i].tomb = 0; STEP(i, clear_tomb)
			:: tm[i].in_wheel && tm[i].due > now && tm[i].due < next ->
				next = tm[i].due
			:: else -> skip
			fi
		}
		i++
	:: else -> break
	od;
	unlock(wheel_mu[sid])
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
#if SCEN == 5 || SCEN == 9
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
#if SCEN == 15
	:: tm[t].cb == CB_TWICE ->
		cb_started[t] = 1;
		if
		:: tm[t].ran == 1 && s15_mode == 1 ->
			/* run 1 reschedules itself, due at once */
			add_or_reschedule(t, 0, 1);
			assert(rc == R_RUNNING);
			resched_done = 1
		:: tm[t].ran == 1 && s15_mode == 2 ->
			/* run 1, once the other thread rescheduled it (its
			 * expiry may be handed to this very thread), stops
			 * itself with cancel_sync and frees itself */
			resched_done;
			cancel_sync(t);
			if
			:: rc != R_EDEADLK -> tm[t].freed = 1
			:: else -> skip
			fi
		:: tm[t].ran == 2 ->
			/* run 2 cancels itself (plainly) and frees itself */
			cancel_state(t);
			assert(rc == R_RUNNING);
			tm[t].freed = 1
		:: else -> skip
		fi;
		cb_finished[t]++
#endif
	:: else -> cb_finished[t] = 1
	fi
}

/* RUNNING -> PENDING at its next period, unless a cancel or add won. */
inline rearm(t) {
	c = closing;
	atomic {
		TOUCH(t);
		if
		:: tm[t].st == RUNNING ->
			BEGIN_STEP(t); tm[t].st = (c -> IDLE : ADDING); STEP(t, rearm);
			res = !c
		:: else -> res = 0
		fi
	}
	if
	:: res ->
		tm[t].next_due = rdue + 2;   /* the run's own due + period */
		atomic { BEGIN_STEP(t); old = tm[t].inbox; tm[t].st = PENDING; tm[t].inbox = 1; tm[t].adds++; STEP(t, publish) };
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

/*
 * execute(): the slot holds t from where its thread took the entry (an
 * executor under q_mu, as it takes it off the ring; the scanner as it
 * takes it from its batch) until the run (and
 * every expiry handed to it meanwhile) is over. An expiry whose timer is
 * running in another executor's (or the scanner's) slot is handed to that
 * slot (again[], the C code's RUN_AGAIN bit, set by a CAS that expects the
 * slot to hold t unflagged) instead of run beside it; the slot's thread
 * runs it when its own run returns. The scan is one load a step, as the C
 * code's. inrun[] counts runs under way, from the claim to the end of the
 * re-arm: never two (the property of SCEN 15, asserted everywhere).
 */
#define SCAN_END(t) (SVC_OF(t) * NSLOT + NEXEC + 1)
inline execute(t, slot) {
	do
	:: true ->
		/* run_entry: hand the expiry over, or claim it */
		ho = 0;
		do
		:: true ->
			atomic { TOUCH(t); w = WORD(t) };
			sk = SCAN_END(t);
#if MUT != 25
			if
			:: NEXEC > 0 && w % 8 == EXPIRED ->
				sk = SVC_OF(t) * NSLOT;
				do
				:: sk < SCAN_END(t) && (sk == slot || running[sk] != t || tag[sk] == T_NORUN) -> sk++
				:: sk < SCAN_END(t) && sk != slot && running[sk] == t && tag[sk] != T_NORUN -> break
				:: sk == SCAN_END(t) -> break
				od
			:: else -> skip
			fi;
#endif
			if
			:: sk < SCAN_END(t) ->
				/* ours is no run from here: the runner's claim of
				 * what it is handed need not wait for this slot to
				 * let go (runner_of takes a T_HELD slot for a claim
				 * about to be marked) */
				tag[slot] = T_NORUN;
				atomic {
					if
					:: running[sk] == t && !again[sk] && tag[sk] == T_RUN -> again[sk] = 1; ho = 1
					:: else -> skip   /* its run ended, or it has not
							     marked its claim yet: look again */
					fi
				};
				if
				:: ho -> w = 0; sk = 0; break
				:: else -> skip
				fi
			:: else ->
				/* the slot's tag for the CAS: T_HELD if it may
				 * claim, T_NORUN if it only gives up a stopped
				 * entry */
#if MUT == 31
				tag[slot] = T_HELD;   /* a slot that gives up stays T_HELD */
#else
				tag[slot] = (w % 8 == EXPIRED -> T_HELD : T_NORUN);
#endif
				/* the claim: the CAS from the word read above */
				atomic {
					if
					:: WORD(t) == w ->
						TOUCH(t);
						old = tm[t].st;
						BEGIN_STEP(t);
						tm[t].entry = 0;
						if
						:: old == EXPIRED ->
							tm[t].st = (tm[t].periodic -> RUNNING : IDLE);
							assert(inrun[t] == 0);  /* never two runs */
							inrun[t] = 1;
							slotrun[slot] = 1;
							rdue = tm[t].next_due;
							rearm_ok = tm[t].periodic
						:: else -> skip
						fi;
						STEP(t, execute);
						w = 0; sk = 0;
						break
					:: else -> skip   /* the CAS failed: again */
					fi
				}
			fi
		od;
		if
		:: !ho && old == EXPIRED ->
			tag[slot] = T_RUN;   /* running_claimed */
			tm[t].ran++;
			me = slot;
			callback(t);
			me = NONE;
			if
			:: rearm_ok -> intail = 1; rearm(t); intail = 0
			:: else -> skip
			fi;
			inrun[t] = 0;
			rdue = 0;
			rearm_ok = 0
		:: else -> skip
		fi;
		old = 0;
		/* running_let_go: empty the slot, unless an expiry was handed
		 * to it meanwhile (run it: around again) */
		atomic {
			slotrun[slot] = 0;
			if
			:: again[slot] -> again[slot] = 0; tag[slot] = T_HELD
			:: else -> running[slot] = NONE; tag[slot] = T_RUN; break
			fi
		}
	od;
#if SCEN == 17
	/* the wake a re-arm owes the loop, made once the slot let go */
	if
	:: wo -> wo = 0; woken = 1
	:: else -> skip
	fi
#else
	skip
#endif
}

inline dispatch(sid) {
	i = 0;
	do
	:: i < nbatch[sid] && BATCH(sid, i) == NONE -> i++
	:: i < nbatch[sid] && BATCH(sid, i) != NONE ->
#if NEXEC > 0
		lock(q_mu);
		if
		:: rlen < RCAP && !stop_exec ->
			assert_single_entry(BATCH(sid, i));
			ring[(rhead + rlen) % RCAP] = BATCH(sid, i);
			rlen++;
			BATCH(sid, i) = NONE;
			unlock(q_mu);
			i++
		:: else ->
			unlock(q_mu);
			t2 = BATCH(sid, i);
			BATCH(sid, i) = NONE;
			atomic { running[SCANNER_OF(sid)] = t2; tag[SCANNER_OF(sid)] = T_HELD };
			execute(t2, SCANNER_OF(sid));
			i++
		fi
#else
		t2 = BATCH(sid, i);
		BATCH(sid, i) = NONE;
		atomic { running[SCANNER_OF(sid)] = t2; tag[SCANNER_OF(sid)] = T_HELD };
		execute(t2, SCANNER_OF(sid));
		i++
#endif
	:: else -> break
	od;
	nbatch[sid] = 0
}

/* manual mode's poll of service sid (the scenario's own process) */
inline poll(sid) {
	lock(scan_mu[sid]);
	if
	:: closing -> skip
	:: else -> scan(sid); dispatch(sid)
	fi;
	unlock(scan_mu[sid])
}

#define LOCALS byte old, s, rc, was, i, j, k, cur, hop, t2, next, skipslot, h; \
	bool entered, res, c, oinb, otomb, mine; byte me = NONE; bool taken[NT]; \
	int siga, sigb, d; byte w, sk, rdue, ho; bool rearm_ok, intail, wo

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
		lock(scan_mu[0]);
		scan(0);
		dispatch(0);
		unlock(scan_mu[0]);
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
#if MUT == 27
			/* the slot stored after the unlock: the entry is in
			 * neither the ring nor a slot for a moment */
			unlock(q_mu);
			if
			:: t2 != NONE -> atomic { running[e] = t2; tag[e] = T_HELD }; execute(t2, e)
			:: else -> skip
			fi
#else
			if
			:: t2 != NONE -> atomic { running[e] = t2; tag[e] = T_HELD }
			:: else -> skip
			fi;
			unlock(q_mu);
			if
			:: t2 != NONE -> execute(t2, e)
			:: else -> skip
			fi
#endif
		:: rlen == 0 && stop_exec -> unlock(q_mu); break
		:: rlen == 0 && !stop_exec -> unlock(q_mu); (rlen > 0 || stop_exec)
		fi
	od;
	exec_done++
}

/* The user's hand_back, run like a callback in the hand-back slot. */
inline hand_back(t) {
#if SCEN == 10
	/* the teardown of an object that owns both timers: the hand-back of
	 * the first cancel_syncs the second (still on the list) and frees it */
	if
	:: t == 0 ->
		me = HANDBACK;
		cancel_sync(1);
		me = NONE;
		hb_result = rc;
		if
		:: rc != R_EDEADLK -> tm[1].freed = 1
		:: else -> skip
		fi
	:: else -> skip
	fi
#else
	skip
#endif
}

inline shutdown() {
	lock(scan_mu[0]);
	closing = 1;
	unlock(scan_mu[0]);
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
	lock(wheel_mu[0]);
	drain_inboxes(0);
	/* collect_pending: every linked timer is unlinked; a PENDING one goes
	 * on the private list, flagged F_ENTRY and still PENDING (a cancel may
	 * still stop it) */
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
					BEGIN_STEP(i);
#if MUT == 16
					/* today's: claimed for the hand-back at once */
					tm[i].st = IDLE;
#endif
#if MUT != 3
					tm[i].entry = 1;
#endif
					STEP(i, collect);
					coll[i] = 1
				:: else ->
					BEGIN_STEP(i); tm[i].tomb = 0; STEP(i, clear_tomb)
				fi
			:: else -> skip
			fi
		}
		i++
	:: else -> break
	od;
	unlock(wheel_mu[0]);
	/* the hand-back loop, in the hand-back slot (h: the C code's own
	 * frame; cancel_sync in hand_back has its own i) */
	h = 0;
	do
	:: h < NT ->
		if
		:: coll[h] ->
			coll[h] = 0;
#if MUT == 16
			/* today's: F_ENTRY cleared, hand_back */
			running[HANDBACK] = h;
			atomic { TOUCH(h); tm[h].entry = 0 };
			tm[h].handed++;
			hand_back(h);
			running[HANDBACK] = NONE
#else
#if MUT != 3
			running[HANDBACK] = h;   /* the slot before the claim */
#endif
			atomic {
				TOUCH(h);
				if
				:: tm[h].st == PENDING ->
					BEGIN_STEP(h); tm[h].st = IDLE; tm[h].entry = 0;
					STEP(h, hand_back); res = 1
				:: else -> res = 0
				fi
			}
			if
			:: res ->
				tm[h].handed++;
				hand_back(h);
				running[HANDBACK] = NONE
			:: else ->
				/* a cancel stopped it first: not handed back;
				 * let go of it, the tombstone flag before the
				 * entry (cancel_sync waits for F_ENTRY) */
				running[HANDBACK] = NONE;
				lock(wheel_mu[0]);
				atomic { TOUCH(h); BEGIN_STEP(h); tm[h].tomb = 0; STEP(h, clear_tomb) };
				atomic { TOUCH(h); BEGIN_STEP(h); tm[h].entry = 0; STEP(h, release_entry) };
				unlock(wheel_mu[0])
			fi
#endif
		:: else -> skip
		fi;
		h++
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

#if SCEN == 9
/* the poller of the second service */
proctype poller(byte sid)
{
	LOCALS;
	poll(sid)
}
#endif

#if SCEN == 10
bool other_done;
byte hb_result = NONE;

/* The owner's other thread: cancel_sync the first timer, then free it,
 * racing shutdown's collect and hand-back loop. */
proctype other()
{
	LOCALS;
	cancel_sync(0);
	tm[0].freed = 1;
	other_done = 1
}
#endif

#if SCEN == 14
bool rescheduled, stopped_first;

proctype windower()
{
	LOCALS;
	add_or_reschedule_range(0, 3, 1, 1);
	stopped_first = rc == R_STOPPED;
	rescheduled = 1
}
#endif

#if SCEN == 15
/* Another thread of the owner: reschedules the timer, due at once, while
 * (or after) its run 1 runs. */
proctype rescheduler()
{
	LOCALS;
	cb_started[0];
	add_or_reschedule(0, 0, 1);
	/* a one-shot's run may be over: then it was IDLE (R_OK) */
	assert(rc == R_RUNNING || rc == R_STOPPED || (s15_mode == 3 && rc == R_OK));
	resched_done = 1
}
#endif

#if SCEN == 11
bool added, stop_done;

proctype adder()
{
	LOCALS;
	add_or_reschedule(0, 2, 0);
	added = 1
}

/* The purgatory's completer: stop the timeout once the add made it
 * PENDING (its push may not have happened yet), and free it if stopped. */
proctype stopper()
{
	LOCALS;
	tm[0].st == PENDING;
	stop_pending(0);
	if
	:: rc == R_STOPPED -> tm[0].freed = 1
	:: else -> skip
	fi;
	stop_done = 1
}
#endif

#if SCEN == 12 || SCEN == 13
#ifndef OPS12
#define OPS12 3
#endif
bool owner_done;

/* tw_service_timer_reinit / periodic_reinit: only an IDLE timer, the
 * periodic flag as the caller says (kept, set or cleared). */
inline reinit(t) {
	atomic {
		TOUCH(t);
		if
		:: tm[t].st == IDLE ->
			BEGIN_STEP(t);
			if
			:: skip
			:: tm[t].periodic = 1
			:: tm[t].periodic = 0
			fi;
			STEP(t, reinit)
		:: else -> skip
		fi
	}
}

/* The owner of one timer doing any of the calls, OPS12 of them in turn,
 * while a poller and an executor run it. */
proctype owner()
{
	LOCALS;
	byte n = 0;
	do
	:: n < OPS12 ->
		if
		:: true -> add_or_reschedule(0, 1, 0)
		:: true -> add_or_reschedule(0, 2, 1)
		:: true -> cancel_state(0)
		:: true -> cancel_sync(0)
		:: true -> stop_pending(0)
		:: true -> reinit(0)
		fi;
		n++
	:: else -> break
	od;
	owner_done = 1
}

#if SCEN == 12
proctype poller(byte sid)
{
	LOCALS;
	byte n = 0;
	do
	:: n < 3 -> poll(sid); n++
	:: n < 3 && now < 2 -> now++
	:: else -> break
	od
}
#endif
#endif

#if SCEN == 1
proctype kicker()
{
	LOCALS;
	kick()
}
#endif

#if SCEN == 17
/* An event loop driving a manual service as service.h says: read the
 * wake-up, poll, ask tw_service_next_expiry (kick_pending cleared under
 * wheel_mu before the drain), sleep until the answer, a wake or the end. */
proctype loop()
{
	LOCALS;
	do
	:: stop_loop -> break
	:: else ->
		woken = 0;
		poll(0);
		lock(wheel_mu[0]);
#if MUT != 29
		kick_pending = 0;
#endif
		drain_inboxes(0);
#if MUT == 29
		/* cleared after the drain: a push the drain missed may have
		 * read the last question's kick_pending and not woken it */
		kick_pending = 0;
#endif
		atomic {
			next = MAXT;
			i = 0;
			do
			:: i < NT ->
				if
				:: tm[i].in_wheel && tm[i].due < next -> next = tm[i].due
				:: else -> skip
				fi;
				i++
			:: else -> break
			od
		}
		unlock(wheel_mu[0]);
		/* epoll_wait: the eventfd, the timeout, or the end */
		(woken || stop_loop || (next != MAXT && now >= next))
	od;
	loop_done = 1
}

proctype clock()
{
	do
	:: now < 3 -> now++
	:: else -> break
	od
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
		:: i < NSLOTS -> running[i] = NONE; waiting[i] = NONE; i++
		:: else -> break
		od;
		ring[0] = NONE;
		ring[1] = NONE;
		i = 0;
		do
		:: i < NSVC * NT -> batch[i] = NONE; i++
		:: else -> break
		od;
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
	poll(0);
	add_or_reschedule(1, 0, 0);
	poll(0);
	cb_finished[0];
	shutdown();
#elif SCEN == 4
	/* x's callback waits for a re-add of x, cancel_syncs x, frees it. */
	tm[0].cb = CB_SELF;
	run executor(0);
	add_or_reschedule(0, 0, 0);
	poll(0);
	cb_started[0];
	add_or_reschedule(0, 1, 0);
	readd_done = 1;
	cb_finished[0];
	poll(0);
	shutdown();
#elif SCEN == 5
	/* two callbacks cancel_sync each other */
	tm[0].cb = CB_SYNC_OTHER;
	tm[1].cb = CB_SYNC_OTHER;
	run executor(0);
	run executor(1);
	add_or_reschedule(0, 0, 0);
	add_or_reschedule(1, 0, 0);
	poll(0);
	cb_finished[0] && cb_finished[1];
	assert(cb_result[0] == R_EDEADLK || cb_result[1] == R_EDEADLK);
	shutdown();
#elif SCEN == 16
	/* a ring of one: y fills it, x runs on the poller and cancel_syncs
	 * y, which the executor may have taken off the ring meanwhile. No
	 * cycle of waits: it must not get TW_EDEADLK. */
	tm[1].cb = CB_SYNC_OTHER;
	run executor(0);
	add_or_reschedule(0, 0, 0);
	add_or_reschedule(1, 0, 0);
	poll(0);
	cb_finished[1];
	assert(cb_result[1] != R_EDEADLK);
	shutdown();
#elif SCEN == 6
	/* a plain cancel of an expired timer, then reinit and re-add */
	run executor(0);
	add_or_reschedule(0, 0, 0);
	poll(0);
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
	poll(0);
	shutdown();
#elif SCEN == 9
	/* two services, a timer each (timer 1 in service 1); their
	 * callbacks cancel_sync each other's timer: a ring across services */
	tm[1].svc = 1;
	tm[0].cb = CB_SYNC_OTHER;
	tm[1].cb = CB_SYNC_OTHER;
	add_or_reschedule(0, 0, 0);
	add_or_reschedule(1, 0, 0);
	run poller(1);
	poll(0);
	cb_finished[0] && cb_finished[1];
	assert(cb_result[0] == R_EDEADLK || cb_result[1] == R_EDEADLK);
#elif SCEN == 10
	/* shutdown's private list: two timers pending at shutdown; the
	 * hand_back of timer 0 cancel_syncs timer 1, still on the list, and
	 * frees it; another thread cancel_syncs timer 0 and frees it */
	add_or_reschedule(0, 5, 0);
	add_or_reschedule(1, 5, 0);
	run other();
	shutdown();
	other_done;
#elif SCEN == 12
	/* the word's reach: one timer, one-shot or periodic, whose owner
	 * makes any three calls (add, reschedule, cancel, cancel_sync,
	 * stop_pending, reinit) while a poller polls and the clock moves and
	 * an executor runs what expired; then shutdown. Reaches the steps of
	 * the word that the other scenarios' bounds leave out (a timer
	 * re-added, cancelled or reinit while an entry of its last expiry
	 * waits; a stop of a timer already placed) */
	if
	:: tm[0].periodic = 1
	:: skip
	fi;
	run executor(0);
	run owner();
	run poller(0);
	owner_done;
	poll(0);
	shutdown();
#elif SCEN == 13
	/* The step relation, not a property: the timer starts in any word
	 * (any state, any flags, its inbox push made or not yet, linked in
	 * the wheel or not, its entry queued or held elsewhere, the clock
	 * before or at its due time) and one call, poll or shutdown runs
	 * from there beside an executor. What the model's code then does to
	 * the word, step by step, is recorded (-DRECORD): the table of what
	 * each transition does from every word (model/service.transitions),
	 * which a bounded scenario's reach alone would leave short of what a
	 * long run of the C code meets. Many of these starts are no state a
	 * run can reach, so its assertions and end states mean nothing here:
	 * model/check.sh runs it with both ignored (pan -A -E). */
	atomic {
		if
		:: tm[0].st = IDLE
		:: tm[0].st = ADDING
		:: tm[0].st = PENDING
		:: tm[0].st = EXPIRED
		:: tm[0].st = RUNNING
		fi;
		if :: tm[0].inbox = 1 :: skip fi;
		if :: tm[0].entry = 1 :: skip fi;
		if :: tm[0].periodic = 1 :: skip fi;
		if :: tm[0].tomb = 1 :: skip fi;
		if :: tm[0].inbox -> tm[0].stacked = 1 :: skip fi;
		if :: tm[0].in_wheel = 1; tm[0].due = 1 :: skip fi;
		if :: tm[0].entry -> ring[0] = 0; rlen = 1 :: skip fi;
		tm[0].next_due = 1;
		tm[0].adds = 1;
		if :: now = 1 :: skip fi
	}
	run executor(0);
	if
	:: true -> add_or_reschedule(0, 1, 0)
	:: true -> add_or_reschedule(0, 2, 1)
	:: true -> cancel_state(0)
	:: true -> cancel_sync(0)
	:: true -> stop_pending(0)
	:: true -> reinit(0)
	:: true -> poll(0)
	:: true -> shutdown()
	:: true -> take_entry(0)  /* as a cancel_sync whose timer was re-added */
	fi
#elif SCEN == 14
	/* windows (tw_service_reschedule_range): timer 0, due at 1, is
	 * rescheduled to the window [3, 4] while polls drain, place and fire
	 * what is due with the clock at 2, then at 4: it runs at 1 and in
	 * [3, 4], or, stopped by the reschedule, in [3, 4] only. Apply's two loads
	 * (due time, window) may straddle the reschedule: the never-early
	 * assertion of the scan holds all the same. */
	add_or_reschedule(0, 1, 0);
	run windower();
	now = 2;
	poll(0);
	poll(0);
	rescheduled;
	poll(0);
	/* it ran at 1 only if the reschedule came after that run */
	assert(tm[0].ran == 1 - stopped_first);
	now = 4;
	poll(0);
	assert(tm[0].ran == 2 - stopped_first);
	shutdown();
#elif SCEN == 15
	/* a timer never runs beside itself: a periodic timer, two
	 * executors; while its run 1 runs it is rescheduled due at once (by
	 * another thread: mode 0, or by run 1 itself: mode 1) and polled, so
	 * that expiry comes during run 1 (or after, by the interleaving). Run
	 * 2 cancels itself and frees itself. Mode 2: another thread
	 * reschedules it and run 1 then cancel_syncs itself and frees itself
	 * (the expiry may have been handed to its own thread). Checked: never
	 * two runs at once (inrun, at every claim), nothing touches the timer
	 * after its free, every add ends once, no thread waits for ever. */
	tm[0].cb = CB_TWICE;
	if
	:: s15_mode = 0
	:: s15_mode = 1
	:: s15_mode = 2
	:: s15_mode = 3   /* mode 0 with a one-shot timer */
	fi;
	tm[0].periodic = (s15_mode != 3);
	run executor(0);
	run executor(1);
	if
	:: s15_mode != 1 -> run rescheduler()
	:: else -> skip
	fi;
	add_or_reschedule(0, 0, 0);
	poll(0);
	resched_done;
	/* poll until the run that frees it has: a push may land after a
	 * poll's drain (then the next poll places it). Only while there is
	 * something to poll for, so that a thread waiting for ever is still
	 * an end state SPIN reports, not a loop of polls. */
	do
	:: tm[0].freed -> break
	:: !tm[0].freed && (tm[0].stacked || tm[0].in_wheel) -> poll(0)
	od;
	shutdown();
	assert(tm[0].ran == (s15_mode == 2 -> 1 : 2));
#elif SCEN == 17
	/* a manual service's loop and one executor: a periodic timer whose
	 * run the poll queues; the loop asks (maybe while the run is under
	 * way: nothing in the wheel) and sleeps. The executor's re-arm must
	 * wake it, or the second run never comes (every process blocked). */
	tm[0].periodic = 1;
	run executor(0);
	run loop();
	run clock();
	add_or_reschedule(0, 0, 0);
	tm[0].ran == 2;
	stop_loop = 1;
	loop_done;
	shutdown();
#elif SCEN == 11
	/* stop_pending racing the add it stops: the add's push comes after
	 * the CAS that made the timer PENDING; then polls drain and fire */
	run adder();
	run stopper();
	added && stop_done;
	poll(0);
	now = 2;
	poll(0);
	shutdown();
#elif SCEN == 8
	/* tombstones: a placed timer is cancelled (plain) by one thread and
	 * cancel_synced and freed by another, while polls drain the inboxes
	 * and fire what is due, tombstones included */
	add_or_reschedule(0, 2, 0);
	poll(0);
	run churner();
	run syncer();
	poll(0);
	if
	:: now = 2
	:: skip
	fi;
	poll(0);
	synced;
	poll(0);
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
#if SCEN != 13   /* no run: nothing to count */
	check_accounts()
#endif
}
