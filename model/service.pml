/* SPDX-License-Identifier: MIT */
/*
 * service.pml -- the timer service's protocol on locked shards
 * (src/service/, core.h's essay), for SPIN.
 *
 * What is modelled, one to one with the C code (docs/model.md):
 *   one shard's mutex, under which every change of a timer's state word is
 *   made (IDLE PENDING QUEUED TAKEN DEFERRED HANDING, and the flags
 *   F_PERIODIC, F_RAN, F_SHUT); the runners' batch slots and the claim (an
 *   exchange of the slot, racing a cancel's compare-and-swap of it); each
 *   runner's running mark and its RUN_AGAIN tag (a deferred add), stored
 *   before the claim and cleared at the run's end (a compare-and-swap with
 *   executors, a store without); the run's end (a deferred add filed or run
 *   again, a periodic re-arm); cancel, cancel_sync and timer_shutdown with
 *   their wait; reinit; the ring check of callbacks waiting for each other; the
 *   reaper's kick (reaper_sees under the shard's mutex, kicked under
 *   reaper_mu); shutdown's close, collection and hand-back.
 * What is not: time (any pending timer may expire at any scan: the wheel
 *   is checked by its own tests), which shard a thread adds to (one shard:
 *   every call on a timer takes that timer's shard mutex, so shards do not
 *   meet in the protocol), the owner id (its claim is one compare-and-swap
 *   of a word nobody else writes, made by the first add or, earlier, by
 *   tw_service_timer_bind()), counters but the per-timer ones below,
 *   and the C11 memory orders (SPIN interleaves sequentially consistent
 *   steps; the one store-load pair without a fence, a run's end clearing
 *   its mark against a waiter counting itself, is covered in the C code
 *   by the waiter's 1 ms look, and here by the waiter looking again).
 *
 * Properties:
 *   safety    every add ends exactly once: adds = ran + stopped + handed
 *             back, per timer, at the end of every run; a timer never runs
 *             beside itself (inrun <= 1); nothing in the service touches a
 *             timer after its owner freed it (TOUCH); a cancel answers
 *             RUNNING only while a run of the timer is under way.
 *   liveness  no thread waits for ever: the scenarios wait for the runs
 *             they expect, so a lost wake-up, a lost add or a deadlock
 *             leaves processes blocked, which SPIN reports as an invalid
 *             end state.
 *
 * Scenarios (SCEN):
 *   1 the reaper and its kicks: a producer adds two timers while the
 *     reaper scans and sleeps; both must run (no executors).
 *   2 claim against cancel: the scanner takes t into its batch and runs
 *     it while another thread cancels, cancel_syncs or reschedules it,
 *     then tears it down and frees it; t's callback may re-add itself.
 *   3 one run at a time: a periodic timer on two executors, rescheduled
 *     or added during its runs by another thread and by its own callback;
 *     three runs, then timer_shutdown and free.
 *   4 timer_shutdown against a callback that re-adds itself (keep-alive),
 *     from another thread on one executor, or from the callback itself
 *     while another thread adds it (a deferred add the teardown stops).
 *   5 two callbacks on two executors cancel_sync each other (a ring):
 *     one gets TW_EDEADLK, nobody hangs; another thread may add both
 *     again during their runs, and a ring's answer then still tells its
 *     caller of the add its cancel stopped (TW_EDEADLK_STOPPED).
 *   6 shutdown's hand-back: a hand_back cancel_syncs the other pending
 *     timer while another thread cancel_syncs and frees the first.
 *   7 a batch of two on the scanner (no executors): the first callback
 *     cancel_syncs the second and frees it.
 *   8 (no property) the step relation: one call from every word, for the
 *     table of transitions (reinit among the calls).
 *   9 a manual service's event loop (ask, poll or sleep until woken) and
 *     one executor, whose callback adds its timer again during its run:
 *     the run's end files it and must wake the loop.
 *  10 a full batch on the scanner (no executors; a batch of one): the
 *     advance expires two timers, one into the batch and then either the
 *     wheel stops (the batch runs with the mutex let go, the advance goes
 *     on and takes the second into the batch) or it does not (the second
 *     onto the expired list), while another thread reschedules the second
 *     (to a window: time is abstract), cancels the first or adds it
 *     again; no call of another thread meets the advance half done
 *     (lock()'s assertion), and every add ends once.
 *  14 a full queue with one executor (a queue of one, a batch of one): the
 *     advance expires one timer onto the executors' list, which is then
 *     full, and the next into the scanner's own batch (expired and taken
 *     at once), and the wheel stops or not; the batch runs beside the
 *     executor, whose callbacks, as the scanner's, may add their timer
 *     again, while another thread reschedules, adds, cancels or tears
 *     down and frees either timer; what the advance expires after the
 *     stop goes where the list's room says.
 * Mutations (MUT), each a bug the model must find (model/check.sh):
 *   1 a failed claim that only clears its mark (a deferred add is lost)
 *   2 a run's end that runs a deferred add as IDLE, not TAKEN (a periodic
 *     timer's next period is lost)
 *   3 adds during a run filed in the wheel with executors (no deferral:
 *     a run beside itself)
 *   4 a cancel of a taken timer without the batch slot's CAS (the runner
 *     runs a stopped timer)
 *   5 the running mark stored after the claim (a cancel_sync returns
 *     while the callback starts: a freed timer run)
 *   6 timer_shutdown without F_SHUT (a re-add during its wait: freed
 *     while pending)
 *   7 an add that does not kick a reaper that saw nothing pending
 *   8 cancel_sync waiting for its own callback
 *   9 no ring check (two callbacks wait for each other for ever)
 *  10 shutdown's hand-back without the hand-back runner's mark
 *  11 a stop of a taken timer that leaves F_RAN (a later cancel answers
 *     RUNNING for a run that never happens)
 *  12 a stop of a deferred add that leaves the run's mark tagged (the
 *     run's end reads the timer its callback tore down and freed)
 *  13 a run's end that files a deferred add without waking a manual loop
 *     (the loop sleeps past it)
 *  14 a full batch run at once, the mutex let go in the middle of the
 *     advance (another thread's reschedule meets a wheel half advanced)
 *  15 a timer taken past a full queue that names the first executor as
 *     its runner, not the scanner (a cancel_sync finds no slot to take
 *     back and no run, returns, and its owner frees what the scanner is
 *     about to run)
 *  16 a run's end on the scanning thread that runs a due deferred add
 *     (or a period that came during the run) again at once, as an
 *     executor's does (a callback that adds its own timer due keeps a
 *     poll going)
 *  17 a ring's TW_EDEADLK that hides the add its cancel stopped (no
 *     caller learns how that add ended)
 */

#ifndef SCEN
#define SCEN 2
#endif
#ifndef MUT
#define MUT 0
#endif

#define NT 2          /* timers */
#define NONE 255
#define IDLE 0
#define PENDING 1
#define QUEUED 2
#define TAKEN 3
#define DEFERRED 4
#define HANDING 5

/* Results of a cancel. */
#define R_IDLE 0
#define R_STOPPED 1
#define R_RUNNING 2
#define R_EDEADLK 3
#define R_EDEADLK_STOPPED 4 /* a ring, where the stop ended an add */

/* Runners: executors 0 .. NE-1, the scanner SC, shutdown's hand-back HB. */
#if SCEN == 3 || SCEN == 5
#define NE 2
#elif SCEN == 4 || SCEN == 6 || SCEN == 9 || SCEN == 14
#define NE 1
#else
#define NE 0
#endif
#define SC NE
#define HB (NE + 1)
#define NR (NE + 2)

typedef timer {
	byte st;
	bit per;       /* F_PERIODIC */
	bit ran;       /* F_RAN */
	bit shut;      /* F_SHUT */
	byte runner;   /* t->runner */
	byte adds, runs, stopped, handed;
	bit freed;     /* its owner freed it */
	byte inrun;    /* runs under way (claimed, mark not yet cleared) */
}
timer tm[NT];

byte lk = NONE;               /* the shard's mutex */
byte advancing = NONE;        /* the scanner whose advance of the shard's
				 wheel is under way (SCEN 10) */
bit slot[NR * NT];            /* runner r's batch holds t, unclaimed */
byte running[NR];             /* each runner's mark */
bit again[NR];                /* its RUN_AGAIN tag */
bit closed;                   /* shutdown began (shard closed) */
bit reaper_sees_pending;      /* the reaper saw a pending timer (it will
				 wake on its own: run.c's wait_until()
				 sleeps until the timer's time, and for one
				 at the end of time until the clock can read
				 INT64_MAX); else an add must kick: every
				 add, one due at INT64_MAX too (timer.c's
				 reaper_idle), as times are not modelled */
bit kicked, stop_reaper;
byte waiting_on[NR];          /* cancel_sync waits of callbacks: the
				 timer the callback of runner r waits for */
byte sync_mu = NONE;          /* sync_waits_mu */
byte done;                    /* processes finished */

#define S(r, t) slot[(r) * NT + (t)]
/* Time is abstract, so a periodic timer could run for ever: its runs are
 * bounded (a pending timer past the bound stays pending). */
#define MAXRUNS 3
/* A scanner only wakes when a timer may expire (or be run): one that
 * loops for nothing would hide a timer lost in a state nobody acts on
 * (SPIN reports blocked processes, not a loop that makes no progress). */
#define DUE ((tm[0].st == PENDING && tm[0].runs < MAXRUNS) || tm[0].st == QUEUED || \
	     (tm[1].st == PENDING && tm[1].runs < MAXRUNS) || tm[1].st == QUEUED)

/* Nobody but the scanner itself takes the mutex while an advance is half
 * done: the wheel's levels are behind the time it advances to. */
inline lock() { atomic { lk == NONE -> lk = _pid; assert(advancing == NONE || advancing == _pid) } }
#define INIT_RUNNERS \
	i = 0; do :: i < NR -> running[i] = NONE; waiting_on[i] = NONE; i++ :: else -> break od; i = 0
inline unlock() { assert(lk == _pid); lk = NONE }
inline TOUCH(t) { assert(!tm[t].freed) }

/*
 * Code and model, one machine. The word's low bits as
 * src/service/state.h lays them out: the state in bits 0-2, +8
 * F_PERIODIC, +16 F_RAN, +32 F_SHUT. Every step below that changes a
 * timer's word is bracketed by BEGIN_STEP(t) and STEP(t, name), name as
 * the C code's transition; with -DRECORD, STEP prints each (name, from,
 * to) the first time SPIN reaches it, and model/check.sh gathers them
 * into model/service.transitions, the table the C test-point build
 * checks each of its own transitions against (transitions.c).
 */
#define WORD(t) (tm[t].st + 8 * tm[t].per + 16 * tm[t].ran + 32 * tm[t].shut)
byte step_from, step_to;
#ifdef RECORD
c_decl {
	static unsigned char tw_step_seen[16][64][64];
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
#define T_defer 1
#define T_stop 2
#define T_ran 3
#define T_expire 4
#define T_take 5
#define T_rearm 6
#define T_place 7
#define T_again 8
#define T_collect 9
#define T_hand_back 10
#define T_settle 11
#define T_shut 12
#define T_reinit 13

/* ---- under the shard's mutex ---- */

/* An add's kick (timer.c, link_pending): the reaper saw nothing pending,
 * so it may sleep until kicked. */
/* A manual service's wake-up (tw__svc_wake_loop): the first call after
 * the loop's question wakes it. */
bit wake_armed, woken;
inline wake_loop() {
	atomic { if :: wake_armed -> wake_armed = 0; woken = 1 :: else -> skip fi }
}

inline kick_if_needed() {
#if MUT != 7
	if
	:: !reaper_sees_pending -> reaper_sees_pending = 1; kicked = 1
	:: else -> skip
	fi
#else
	skip
#endif
}

/* tw__svc_stop_locked: res gets the cancel's answer. */
inline stop_locked(t, res) {
	TOUCH(t);
	if
	:: tm[t].st == PENDING || tm[t].st == QUEUED || tm[t].st == HANDING ->
		atomic { BEGIN_STEP(t); tm[t].st = IDLE; tm[t].stopped++; STEP(t, stop) };
		res = R_STOPPED
	:: tm[t].st == DEFERRED ->
		/* the run's end has nothing to do: its mark untagged */
#if MUT != 12
		atomic { if :: running[tm[t].runner] == t -> again[tm[t].runner] = 0 :: else -> skip fi };
#endif
		atomic { BEGIN_STEP(t); tm[t].st = IDLE; tm[t].stopped++; STEP(t, stop) };
		res = R_STOPPED
	:: tm[t].st == TAKEN ->
#if MUT == 4
		if
		:: true ->
#else
		if
		:: atomic { S(tm[t].runner, t) -> S(tm[t].runner, t) = 0 } ->
#endif
#if MUT == 1 || MUT == 11
			atomic { BEGIN_STEP(t); tm[t].st = IDLE; tm[t].stopped++; STEP(t, stop) };
#else
			atomic { BEGIN_STEP(t); tm[t].st = IDLE; tm[t].ran = 0; tm[t].stopped++; STEP(t, stop) };
#endif
			res = R_STOPPED
		:: else ->
			atomic { BEGIN_STEP(t); tm[t].st = IDLE; STEP(t, ran) };
			idle_result(t, res)
		fi
	:: tm[t].st == IDLE -> idle_result(t, res)
	fi
}

/* What a cancel of an IDLE timer answers: RUNNING while the runner its
 * last expiry went to still marks it (not the hand-back's). */
inline idle_result(t, res) {
	atomic {
		if
		:: tm[t].ran && running[tm[t].runner] == t && tm[t].runner != HB ->
			assert(tm[t].inrun > 0); res = R_RUNNING
		:: else -> res = R_IDLE
		fi
	}
}

/* tw__svc_file: an IDLE timer added (res: OK 0). With executors an add
 * of a timer whose run is under way waits for that run's end. */
inline file(t) {
	going = tm[t].ran && running[tm[t].runner] == t;
#if MUT != 3
	if
	:: going && NE > 0 ->
		atomic {
			if
			:: running[tm[t].runner] == t ->
				again[tm[t].runner] = 1;
				BEGIN_STEP(t); tm[t].st = DEFERRED; tm[t].adds++; STEP(t, defer);
				going = 2
			:: else -> going = 0
			fi
		}
	:: else -> skip
	fi;
#endif
	if
	:: going != 2 ->
		atomic {
			BEGIN_STEP(t); tm[t].st = PENDING; tm[t].adds++;
			if
			:: !going -> tm[t].ran = 0
			:: else -> skip
			fi;
			STEP(t, add)
		};
		kick_if_needed()
	:: else -> skip
	fi;
	going = 0
}

/* tw_service_add / reschedule: res 0 added, 9 refused. */
inline add(t, resched, res) {
	lock();
	TOUCH(t);
	if
	:: closed || tm[t].shut -> res = 9
	:: !resched && (tm[t].st == PENDING || tm[t].st == QUEUED ||
	   tm[t].st == DEFERRED || tm[t].st == HANDING ||
	   (tm[t].st == TAKEN && S(tm[t].runner, t))) -> res = 9
	:: else ->
		stop_locked(t, res);
		file(t);
		res = 0
	fi;
	unlock();
	if
	:: res == 0 -> wake_loop()
	:: else -> skip
	fi
}

/* tw_service_timer_reinit / periodic_reinit (lifecycle.c): a one-shot's
 * finished run gives it back IDLE first; busy while pending, taken and not
 * run, or a periodic run nobody cancelled; else F_PERIODIC as asked and
 * F_SHUT lifted. res: 0 done, 9 busy. */
inline reinit(t, per_to, res) {
	lock();
	TOUCH(t);
	if
	:: tm[t].st == TAKEN && !tm[t].per && !S(tm[t].runner, t) ->
		atomic { BEGIN_STEP(t); tm[t].st = IDLE; STEP(t, ran) }
	:: else -> skip
	fi;
	if
	:: tm[t].st == PENDING || tm[t].st == QUEUED || tm[t].st == DEFERRED ||
	   tm[t].st == HANDING ||
	   (tm[t].st == TAKEN && (S(tm[t].runner, t) || tm[t].per)) -> res = 9
	:: else ->
		atomic { BEGIN_STEP(t); tm[t].per = per_to; tm[t].shut = 0; STEP(t, reinit) };
		res = 0
	fi;
	unlock()
}

/* ---- a run ---- */

/* The callback of t, run by runner r: what each scenario's callbacks do
 * (below, callback()); self is t. */

/* run_end: the run of t on r is over (cl: it was claimed, and counts in
 * inrun until its mark clears); again_run set to run t again. */
inline run_end(t, r, rearm) {
	if
	:: !rearm && NE == 0 ->
		atomic { running[r] = NONE; if :: cl -> tm[t].inrun-- :: else -> skip fi };
		again_run = 0
	:: !rearm && NE > 0 ->
		atomic {
			if
			:: !again[r] -> running[r] = NONE; again_run = 0;
				if :: cl -> tm[t].inrun-- :: else -> skip fi
			:: else -> again_run = 1
			fi
		}
	:: else -> again_run = 1
	fi;
	if
	:: again_run ->
		again_run = 0;
		lock();
		TOUCH(t);
		if
		:: tm[t].st == DEFERRED ->
			if
#if MUT == 16
			:: true ->
#else
			:: r != SC -> /* due: run again here, taken and claimed
				      * (the scanning thread files it for its
				      * next scan: a poll stays bounded; so
				      * does an executor where another expired
				      * timer waits, the branch below) */
#endif
#if MUT == 2
				atomic { BEGIN_STEP(t); tm[t].st = IDLE; STEP(t, again) };
#else
				atomic { BEGIN_STEP(t); tm[t].st = TAKEN; STEP(t, again) };
#endif
				again_run = 1
			:: true -> /* not due yet: filed */
				atomic { BEGIN_STEP(t); tm[t].st = PENDING; tm[t].ran = 0; STEP(t, place) };
				kick_if_needed();
#if MUT != 13
				filed = 1
#else
				skip
#endif
			fi
		:: rearm && tm[t].st == TAKEN && tm[t].runner == r && !S(r, t) ->
			if
			:: closed || tm[t].shut ->
				atomic { BEGIN_STEP(t); tm[t].st = IDLE; STEP(t, ran) }
			:: NE > 0 && r != SC && !(closed || tm[t].shut) && tm[t].runs < MAXRUNS ->
				/* its next period came during the run: run
				 * again here (a new add, still TAKEN); with
				 * another expired timer waiting, the code
				 * files it instead, the branch below */
				tm[t].adds++;
				again_run = 1
			:: !(closed || tm[t].shut) ->
				atomic { BEGIN_STEP(t); tm[t].st = PENDING; tm[t].ran = 0; tm[t].adds++; STEP(t, rearm) };
				kick_if_needed();
				filed = 1
			fi
		:: else -> skip
		fi;
		atomic {
			if
			:: again_run -> running[r] = t;
				if :: !cl -> tm[t].inrun++ :: else -> skip fi
			:: else -> running[r] = NONE;
				if :: cl -> tm[t].inrun-- :: else -> skip fi
			fi;
			again[r] = 0
		};
		unlock();
		/* a manual loop did not see what this end filed */
		if
		:: filed -> wake_loop(); filed = 0
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* Claim and run what runner r took of t (its batch slot); a claim a
 * cancel won is ended as a run too (it may have drawn a deferred add). */
inline run_slot(t, r) {
#if MUT == 5
	if
	:: atomic { S(r, t) -> S(r, t) = 0; tm[t].inrun++ } -> cl = 1
	:: else -> cl = 0
	fi;
	running[r] = t;
#else
	running[r] = t;           /* the mark before the claim */
	if
	:: atomic { S(r, t) -> S(r, t) = 0; tm[t].inrun++ } -> cl = 1
	:: else -> cl = 0
	fi;
#endif
	do
	:: cl ->
		TOUCH(t);
		assert(tm[t].inrun == 1);
		/* The scanning thread runs a claim's callback once: what
		 * the run adds or re-arms waits for a scan, so that no
		 * callback keeps a poll going. */
		assert(r != SC || nr == 0);
		nr++;
		rearm = tm[t].per;
		callback(t, r);
		tm[t].runs++;
		run_end(t, r, rearm);
		if
		:: again_run -> again_run = 0
		:: else -> break
		fi
	:: !cl ->
#if MUT == 1
		running[r] = NONE;
		break
#else
		run_end(t, r, 0);
		if
		:: again_run -> again_run = 0; cl = 1
		:: else -> break
		fi
#endif
	od;
	cl = 0;
	nr = 0
}

/* Under the mutex: every PENDING timer may be due (time is abstract);
 * take into runner r's batch what is QUEUED. */
inline expire_some() {
	i = 0;
	do
	:: i < NT ->
		if
		:: tm[i].st == PENDING && tm[i].runs < MAXRUNS -> TOUCH(i);
			atomic { BEGIN_STEP(i); tm[i].st = QUEUED; STEP(i, expire) }
		:: true -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* Every PENDING timer due (a scenario that needs them all expired). */
inline expire_all() {
	i = 0;
	do
	:: i < NT ->
		if
		:: tm[i].st == PENDING -> TOUCH(i);
			atomic { BEGIN_STEP(i); tm[i].st = QUEUED; STEP(i, expire) }
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

inline take_all(r) {
	i = 0;
	do
	:: i < NT ->
		if
		:: tm[i].st == QUEUED -> TOUCH(i);
			atomic { BEGIN_STEP(i); tm[i].st = TAKEN; tm[i].ran = 1; tm[i].runner = r; S(r, i) = 1; STEP(i, take) }
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* An executor's share when few wait: one timer. */
inline take_one(r) {
	if
	:: tm[0].st == QUEUED -> TOUCH(0);
		atomic { BEGIN_STEP(0); tm[0].st = TAKEN; tm[0].ran = 1; tm[0].runner = r; S(r, 0) = 1; STEP(0, take) }
	:: tm[1].st == QUEUED -> TOUCH(1);
		atomic { BEGIN_STEP(1); tm[1].st = TAKEN; tm[1].ran = 1; tm[1].runner = r; S(r, 1) = 1; STEP(1, take) }
	fi
}

inline run_batch(r) {
	j = 0;
	do
	:: j < NT ->
		if
		:: S(r, j) -> run_slot(j, r)
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	j = 0
}

/* ---- cancel_sync and timer_shutdown ---- */

/* Under sync_mu: whether the wait of the callback on runner me for t
 * closes a ring (sync.c's closes_ring, for the runners of one service).
 * A target added again since its waiter's stop is no edge: that waiter
 * returns at its next look. */
inline closes_ring(me, t, ring) {
	cur = t; hops = 0; ring = 0;
	do
	:: hops > NR -> break
	:: else ->
		if
		:: !(tm[cur].ran && running[tm[cur].runner] == cur) ||
		   tm[cur].st != IDLE -> break
		:: tm[cur].runner == me -> ring = 1; break
		:: else ->
			holder = tm[cur].runner;
			if
			:: waiting_on[holder] != NONE -> cur = waiting_on[holder]; hops++
			:: else -> break
			fi
		fi
	od;
	cur = 0; hops = 0; holder = 0
}

/* cancel_sync (down 0) or timer_shutdown (down 1) of t; me is the runner
 * whose callback calls it (NONE: another thread). */
inline cancel_sync(t, down, me, res) {
	lock();
	TOUCH(t);
	stop_locked(t, res);
#if MUT != 6
	if
	::  down && !tm[t].shut -> atomic { BEGIN_STEP(t); tm[t].shut = 1; STEP(t, shut) }
	:: else -> skip
	fi;
#endif
	unlock();
	do
	:: true ->
		lock();
		TOUCH(t);
		if
		:: tm[t].st != IDLE -> unlock(); break /* added again */
		:: else -> skip
		fi;
		wr = tm[t].runner;
		g = tm[t].ran && running[wr] == t;
		if
		:: !g && tm[t].ran -> atomic { BEGIN_STEP(t); tm[t].ran = 0; STEP(t, settle) }
		:: else -> skip
		fi;
		unlock();
#if MUT == 8
		if
		:: !g -> break
		:: else -> skip
		fi;
#else
		if
		:: !g || (me != NONE && wr == me) -> break
		:: else -> skip
		fi;
#endif
#if MUT != 9
		if
		:: me != NONE ->
			atomic { sync_mu == NONE -> sync_mu = _pid };
			waiting_on[me] = t;
			closes_ring(me, t, ring);
			sync_mu = NONE;
			if
			:: ring ->
				/* the caller still learns of the add the
				 * stop ended */
				if
#if MUT != 17
				:: res == R_STOPPED -> res = R_EDEADLK_STOPPED
#endif
				:: else -> res = R_EDEADLK
				fi;
				break
			:: else -> skip
			fi
		:: else -> skip
		fi;
#else
		if
		:: me != NONE -> waiting_on[me] = t
		:: else -> skip
		fi;
#endif
		/* the wait: until the mark is gone (or look again) */
		running[wr] != t || !tm[t].ran
	od;
	if
	:: me != NONE -> waiting_on[me] = NONE
	:: else -> skip
	fi;
	wr = 0; g = 0
}

/* ---- the scenarios' callbacks ---- */

#if SCEN == 2 || SCEN == 4
byte readd[NT];         /* the callback re-adds its timer (this often) */
bit added1;             /* SCEN 4: t1 added during its run */
#endif
#if SCEN == 3
byte resched_by_cb;
#endif
#if SCEN == 9
bit readd9 = 1;
#endif
#if SCEN == 5
byte r5[NT];
bit added5;     /* the adder is done (or chose not to add) */
byte learned5;  /* stops the callbacks' callers learned of */
#endif
#if SCEN == 7
byte r7;
#endif
#if SCEN == 14
bit readd14[NT];
#endif

inline callback(t, r) {
#if SCEN == 2 || SCEN == 4
	if
	:: readd[t] -> readd[t]--; add(t, 0, res2)
	:: else -> skip
	fi;
#if SCEN == 4
	if
	:: t == 1 -> /* tears itself down, and frees itself as its last act,
		      * once another thread has added it meanwhile */
		(added1);
		cancel_sync(t, 1, r, res2);
		assert(res2 != R_EDEADLK && res2 != R_EDEADLK_STOPPED);
		tm[t].freed = 1
	:: else -> skip
	fi
#endif
#elif SCEN == 9
	if
	:: readd9 -> readd9 = 0; add(t, 0, res2); assert(res2 == 0)
	:: else -> skip
	fi
#elif SCEN == 3
	if
	:: resched_by_cb < 1 -> resched_by_cb++; add(t, 1, res2)
	:: true -> skip
	fi
#elif SCEN == 5
	(added5);
	cancel_sync(1 - t, 0, r, res2);
	if
	:: res2 == R_STOPPED || res2 == R_EDEADLK_STOPPED -> learned5++
	:: else -> skip
	fi;
	r5[t] = res2
#elif SCEN == 14
	if
	:: !readd14[t] -> readd14[t] = 1; add(t, 0, res2)
	:: true -> skip
	fi
#elif SCEN == 7
	if
	:: t == 0 -> cancel_sync(1, 0, r, res2); r7 = res2;
		if
		:: res2 == R_STOPPED || res2 == R_IDLE -> tm[1].freed = 1
		:: else -> skip
		fi
	:: else -> skip
	fi
#else
	skip
#endif
}

/* ---- the threads ---- */

#define LOCALS byte i, j, res, res2, going, rearm, again_run, cur, hops, holder, ring, wr, g, cl, filed, nr

/* An executor: take a batch under the mutex, run it; exit when stopped
 * and nothing is queued. */
proctype executor(byte e)
{
	LOCALS;
	do
	:: lock();
		if
		:: tm[0].st == QUEUED || tm[1].st == QUEUED ->
			take_one(e); unlock(); run_batch(e)
		:: else ->
			if
			:: closed -> unlock(); break
			:: else -> unlock(); (tm[0].st == QUEUED || tm[1].st == QUEUED || closed)
			fi
		fi
	od;
	done++
}

#if SCEN == 1
/* The reaper without executors: clear kicked, scan (expire and run), then
 * sleep until kicked when it saw nothing pending. */
proctype reaper()
{
	LOCALS;
	do
	:: stop_reaper -> break
	:: else ->
		kicked = 0;
		lock();
		expire_some();
		take_all(SC);
		reaper_sees_pending = tm[0].st == PENDING || tm[1].st == PENDING;
		unlock();
		run_batch(SC);
		/* sleep: until the next expiry (a pending timer: it wakes on
		 * its own), a kick, or stop */
		(kicked || stop_reaper || reaper_sees_pending)
	od;
	done++
}

proctype producer()
{
	LOCALS;
	add(0, 0, res);
	assert(res == 0);
	add(1, 0, res);
	assert(res == 0);
	(tm[0].runs == 1 && tm[1].runs == 1);
	stop_reaper = 1;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		run reaper(); run producer()
	}
	(done == 2);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped);
	assert(tm[1].adds == tm[1].runs + tm[1].stopped)
}
#endif

#if SCEN == 2
/* The scanner (no executors) expires and runs t; another thread stops it
 * in one of three ways, then tears it down and frees it. */
proctype scanner()
{
	LOCALS;
	do
	:: DUE -> lock(); expire_some(); take_all(SC); unlock(); run_batch(SC)
	:: tm[0].freed -> break
	od;
	done++
}

proctype user()
{
	LOCALS;
	if
	:: lock(); stop_locked(0, res); unlock()
	:: cancel_sync(0, 0, NONE, res)
	:: add(0, 1, res)
	fi;
	cancel_sync(0, 1, NONE, res);
	assert(tm[0].st == IDLE && !(tm[0].ran && running[tm[0].runner] == 0));
	tm[0].freed = 1;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1;
		if :: readd[0] = 1 :: skip fi;
		run scanner(); run user()
	}
	(done == 2);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped)
}
#endif

#if SCEN == 3
/* A periodic timer on two executors; the scanner expires it; another
 * thread adds or reschedules it during its runs; after three runs (or
 * more) timer_shutdown, and it is freed. */
proctype scanner()
{
	LOCALS;
	do
	:: DUE -> lock(); expire_some(); unlock()
	:: tm[0].freed -> break
	od;
	closed = 1;
	done++
}

proctype user()
{
	LOCALS;
	if
	:: add(0, 1, res)
	:: skip
	fi;
	(tm[0].runs >= 1);
	if
	:: add(0, 0, res)
	:: add(0, 1, res)
	:: skip
	fi;
	(tm[0].runs >= 3);
	cancel_sync(0, 1, NONE, res);
	assert(tm[0].inrun == 0);
	tm[0].freed = 1;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1; tm[0].per = 1;
		run executor(0); run executor(1); run scanner(); run user()
	}
	(done == 4);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped)
}
#endif

#if SCEN == 4
/* Timer 0's callback re-adds it (keep-alive) while another thread tears
 * it down; timer 1's callback tears itself down and frees itself. */
proctype scanner()
{
	LOCALS;
	do
	:: DUE -> lock(); expire_some(); unlock()
	:: tm[0].freed && tm[1].freed -> break
	od;
	closed = 1;
	done++
}

#if SCEN == 4
/* adds t1 once more, maybe during its run (deferred) */
proctype adder()
{
	LOCALS;
	(tm[1].inrun == 1);
	add(1, 0, res);
	assert(res == 0); /* deferred: the run goes on */
	added1 = 1;
	done++
}
#endif

proctype user()
{
	LOCALS;
	(tm[0].runs >= 1 || tm[0].st == PENDING);
	cancel_sync(0, 1, NONE, res);
	assert(tm[0].inrun == 0 && tm[0].st == IDLE);
	tm[0].freed = 1;
	(tm[1].freed);
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1; readd[0] = 2;
		tm[1].st = PENDING; tm[1].adds = 1;
		run executor(0); run scanner(); run user(); run adder()
	}
	(done == 4);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped);
	assert(tm[1].adds == tm[1].runs + tm[1].stopped)
}
#endif

#if SCEN == 5
/* Until nothing is pending, deferred or running (a deferred add is filed
 * at its run's end). */
proctype scanner()
{
	LOCALS;
	lock(); expire_some(); unlock();
	do
	:: tm[0].st == PENDING || tm[1].st == PENDING -> lock(); expire_some(); unlock()
	:: tm[0].st != PENDING && tm[1].st != PENDING &&
	   tm[0].st != DEFERRED && tm[1].st != DEFERRED &&
	   !tm[0].inrun && !tm[1].inrun && added5 -> break
	od;
	done++
}

/* Adds each timer again while both run (deferred behind its run), so
 * that each callback's cancel_sync stops an add; or adds nothing. */
proctype adder()
{
	LOCALS;
	if
	:: tm[0].inrun && tm[1].inrun ->
		add(0, 0, res); assert(res == 0);
		add(1, 0, res); assert(res == 0)
	:: true -> skip
	fi;
	added5 = 1
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		r5[0] = NONE; r5[1] = NONE;
		tm[0].st = PENDING; tm[0].adds = 1;
		tm[1].st = PENDING; tm[1].adds = 1;
		run executor(0); run executor(1); run scanner(); run adder()
	}
	/* each callback ran (and got its answer), or was stopped by the
	 * other's cancel_sync before its run */
	(done == 1 && (r5[0] != NONE || tm[0].stopped) &&
	 (r5[1] != NONE || tm[1].stopped));
	closed = 1;
	(done == 3);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped);
	assert(tm[1].adds == tm[1].runs + tm[1].stopped);
	/* every stop reached a caller: a ring's answer does not hide it */
	assert(learned5 == tm[0].stopped + tm[1].stopped)
}
#endif

#if SCEN == 6
/* shutdown's hand-back of two pending timers; hand_back of timer 0
 * cancel_syncs timer 1 (still on the list, or handed back already); a
 * user thread cancel_syncs timer 0 and frees it. */
bit handing_done;
proctype shutdown()
{
	LOCALS;
	lock(); closed = 1; unlock();
	lock();
	i = 0;
	do
	:: i < NT ->
		if
		:: tm[i].st == PENDING -> TOUCH(i);
			atomic { BEGIN_STEP(i); tm[i].st = HANDING; STEP(i, collect) }
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	unlock();
	j = 0;
	do
	:: j < NT ->
		lock();
		if
		:: tm[j].st == HANDING ->
			TOUCH(j);
			tm[j].runner = HB;
#if MUT != 10
			running[HB] = j;
#endif
			atomic { BEGIN_STEP(j); tm[j].st = IDLE; tm[j].ran = 1; tm[j].handed++; STEP(j, hand_back) };
			unlock();
			TOUCH(j);
			if
			:: j == 0 -> cancel_sync(1, 0, HB, res)
			:: else -> skip
			fi;
			TOUCH(j);
			running[HB] = NONE
		:: else -> unlock()
		fi;
		j++
	:: else -> break
	od;
	handing_done = 1;
	done++
}

proctype user()
{
	LOCALS;
	cancel_sync(0, 0, NONE, res);
	tm[0].freed = 1;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1;
		tm[1].st = PENDING; tm[1].adds = 1;
		run executor(0); run shutdown(); run user()
	}
	(done == 3);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped + tm[0].handed);
	assert(tm[1].adds == tm[1].runs + tm[1].stopped + tm[1].handed)
}
#endif

#if SCEN == 7
/* Two timers expire together on the scanner (no executors); the first
 * callback cancel_syncs the second and frees it. */
proctype scanner()
{
	LOCALS;
	lock();
	expire_all();
	take_all(SC);
	unlock();
	run_batch(SC);
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		r7 = NONE;
		tm[0].st = PENDING; tm[0].adds = 1;
		tm[1].st = PENDING; tm[1].adds = 1;
		run scanner()
	}
	(done == 1);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped);
	assert(tm[1].adds == tm[1].runs + tm[1].stopped)
}
#endif

#if SCEN == 8
/* Not a property: the step relation. One timer in any word the protocol
 * can reach (TAKEN and DEFERRED only with F_RAN; F_SHUT only IDLE), its
 * runner marking it or not (tagged or not), its batch slot holding it or
 * not; then one call of the protocol's. model/check.sh runs it with
 * assertions and end states ignored, for the table: every step any call
 * makes from any word. */
proctype stepper()
{
	LOCALS;
	byte w;
	atomic {
		if :: tm[0].st = IDLE :: tm[0].st = PENDING :: tm[0].st = QUEUED
		   :: tm[0].st = TAKEN :: tm[0].st = DEFERRED :: tm[0].st = HANDING fi;
		if :: tm[0].per = 0 :: tm[0].per = 1 fi;
		if :: tm[0].ran = 0 :: tm[0].ran = 1 fi;
		if :: tm[0].st == TAKEN || tm[0].st == DEFERRED -> tm[0].ran = 1 :: else -> skip fi;
		if :: tm[0].st == IDLE -> if :: tm[0].shut = 0 :: tm[0].shut = 1 fi :: else -> skip fi;
		tm[0].runner = 0;
		if :: running[0] = 0 :: running[0] = NONE fi;
		if :: running[0] == 0 -> if :: again[0] = 1 :: skip fi :: else -> skip fi;
		if :: tm[0].st == TAKEN -> if :: S(0, 0) = 1 :: skip fi :: else -> skip fi;
		tm[0].inrun = 1
	};
	if
	:: add(0, 0, res)
	:: add(0, 1, res)
	:: lock(); stop_locked(0, res); unlock()
	:: cancel_sync(0, 0, NONE, res)
	:: cancel_sync(0, 1, NONE, res)
	:: reinit(0, 0, res)
	:: reinit(0, 1, res)
	:: lock(); expire_all(); take_one(0); unlock()
	:: cl = 1; run_end(0, 0, 0)
	:: cl = 1; run_end(0, 0, 1)
	:: lock();
		if
		:: tm[0].st == PENDING ->
			atomic { BEGIN_STEP(0); tm[0].st = HANDING; STEP(0, collect) }
		:: tm[0].st == HANDING ->
			atomic { BEGIN_STEP(0); tm[0].st = IDLE; tm[0].ran = 1; tm[0].handed++; STEP(0, hand_back) }
		:: else -> skip
		fi;
		unlock()
	fi
}

init {
	byte i;
	atomic { INIT_RUNNERS; run stepper() }
}
#endif

#if SCEN == 9
/* A manual service's event loop and one executor: the loop asks (arming
 * the wake-up), polls when something is pending, else sleeps until woken.
 * The timer's callback adds it again during its run (deferred to the
 * run's end); both runs must happen. */
proctype eventloop()
{
	LOCALS;
	do
	:: tm[0].runs == 2 -> break
	:: else ->
		woken = 0;           /* the loop reads its wake-up first */
		wake_armed = 1;      /* the question */
		lock();
		g = tm[0].st == PENDING;
		unlock();
		if
		:: g -> lock(); expire_all(); unlock()   /* sleeps until due, polls */
		:: !g -> (woken || tm[0].runs == 2)     /* sleeps until woken */
		fi
	od;
	closed = 1;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1;
		run executor(0); run eventloop()
	}
	(done == 2);
	assert(tm[0].adds == tm[0].runs + tm[0].stopped)
}
#endif

#if SCEN == 10
/* The scanner's advance (no executors) with a batch of one, then what it
 * expired run a batch at a time, the mutex let go for each. */
inline expire_one(t) {
	if
	:: tm[t].st == PENDING -> TOUCH(t);
		atomic { BEGIN_STEP(t); tm[t].st = QUEUED; STEP(t, expire) }
	:: else -> skip
	fi
}

inline take_into_batch(t) {
	if
	:: tm[t].st == QUEUED -> TOUCH(t);
		atomic { BEGIN_STEP(t); tm[t].st = TAKEN; tm[t].ran = 1; tm[t].runner = SC; S(SC, t) = 1; STEP(t, take) };
		g = 1
	:: else -> skip
	fi
}

proctype scanner()
{
	LOCALS;
	lock();
	advancing = _pid;
	expire_one(0);
	take_into_batch(0); /* the batch is full: a stop asked */
#if MUT == 14
	unlock();
	run_batch(SC);
	lock();
	g = 0;
#endif
	if
	:: g ->
		/* The wheel stops (exact mode, a level-1 bucket): the
		 * advance is over for now, the wheel whole, the rest still
		 * pending in it; the batch runs, then the advance goes on. */
		advancing = NONE;
		unlock();
		run_batch(SC);
		lock();
		g = 0;
		advancing = _pid;
		expire_one(1);
		take_into_batch(1)
	:: true ->
		/* It does not stop (kafka mode, or no level-1 bucket fired
		 * after the ask): the rest onto the expired list. */
		expire_one(1)
	fi;
	advancing = NONE;
	do
	:: g -> unlock(); run_batch(SC); lock(); g = 0
	:: else ->
		if
		:: tm[0].st == QUEUED -> take_into_batch(0)
		:: tm[1].st == QUEUED -> take_into_batch(1)
		:: else -> break
		fi
	od;
	unlock();
	done++
}

proctype user()
{
	LOCALS;
	if
	:: add(1, 1, res)                      /* reschedule_range */
	:: lock(); stop_locked(0, res); unlock() /* cancel */
	:: add(0, 0, res)                      /* add again */
	fi;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1;
		tm[1].st = PENDING; tm[1].adds = 1;
		run scanner(); run user()
	}
	(done == 2);
	/* What the reschedule or the add filed after the scan stays pending. */
	assert(tm[0].adds == tm[0].runs + tm[0].stopped + (tm[0].st == PENDING -> 1 : 0));
	assert(tm[1].adds == tm[1].runs + tm[1].stopped + (tm[1].st == PENDING -> 1 : 0))
}
#endif

#if SCEN == 14
/* The scanner's advance with one executor and a queue of one (run.c,
 * scan_shard and tw__svc_fire): a timer expires onto the executors' list
 * while it has room (QUEUED); once it holds queue_capacity, the next one
 * goes into the scanner's own batch (expired and taken in one step), and
 * a full batch (here of one) asks the wheel to stop. */
#define NQUEUED ((tm[0].st == QUEUED -> 1 : 0) + (tm[1].st == QUEUED -> 1 : 0))

inline spill_expire(t) {
	if
	:: tm[t].st == PENDING && tm[t].runs < MAXRUNS -> TOUCH(t);
		if
		:: NQUEUED < 1 || g ->
			/* room on the list, or the batch full already (the
			 * wheel did not stop): onto the list */
			atomic { BEGIN_STEP(t); tm[t].st = QUEUED; STEP(t, expire) }
		:: else ->
			atomic { BEGIN_STEP(t); tm[t].st = QUEUED; STEP(t, expire) };
#if MUT == 15
			atomic { BEGIN_STEP(t); tm[t].st = TAKEN; tm[t].ran = 1; tm[t].runner = 0; S(SC, t) = 1; STEP(t, take) };
#else
			atomic { BEGIN_STEP(t); tm[t].st = TAKEN; tm[t].ran = 1; tm[t].runner = SC; S(SC, t) = 1; STEP(t, take) };
#endif
			g = 1
		fi
	:: else -> skip
	fi
}

inline take_into_batch14(t) {
	TOUCH(t);
	atomic { BEGIN_STEP(t); tm[t].st = TAKEN; tm[t].ran = 1; tm[t].runner = SC; S(SC, t) = 1; STEP(t, take) };
	g = 1
}

proctype scanner()
{
	LOCALS;
	lock();
	advancing = _pid;
	spill_expire(0); /* onto the list, which is then full */
	spill_expire(1); /* into the batch, which is then full: a stop asked */
#if MUT == 14
	unlock();
	run_batch(SC);
	lock();
	g = 0;
#endif
	if
	:: g ->
		/* The wheel stops: the batch runs with the mutex let go,
		 * beside the executor, which takes what the list holds;
		 * then the advance goes on, and what was added meanwhile
		 * may be due. */
		advancing = NONE;
		unlock();
		run_batch(SC);
		lock();
		g = 0;
		advancing = _pid;
		spill_expire(0);
		spill_expire(1)
	:: true -> skip /* it does not stop (nothing else fired) */
	fi;
	advancing = NONE;
	/* The batch, then back-pressure: what is past the list's
	 * capacity, from the list. */
	do
	:: g -> unlock(); run_batch(SC); lock(); g = 0
	:: else ->
		if
		:: NQUEUED > 1 && tm[0].st == QUEUED -> take_into_batch14(0)
		:: NQUEUED > 1 && tm[1].st == QUEUED -> take_into_batch14(1)
		:: else -> break
		fi
	od;
	unlock();
	done++
}

proctype user()
{
	LOCALS;
	if
	:: add(1, 1, res)                        /* reschedule the batch's */
	:: add(1, 0, res)                        /* add it again */
	:: lock(); stop_locked(1, res); unlock() /* cancel it */
	:: lock(); stop_locked(0, res); unlock() /* cancel the list's */
	:: add(0, 1, res)                        /* reschedule it */
	:: cancel_sync(1, 1, NONE, res);         /* tear the batch's down */
		tm[1].freed = 1                  /* and free it */
	:: cancel_sync(0, 1, NONE, res);         /* the list's */
		tm[0].freed = 1
	fi;
	done++
}

init {
	byte i;
	atomic {
		INIT_RUNNERS;
		tm[0].st = PENDING; tm[0].adds = 1;
		tm[1].st = PENDING; tm[1].adds = 1;
		run scanner(); run user(); run executor(0)
	}
	(done == 2);
	closed = 1; /* the executor exits once nothing is queued */
	(done == 3);
	/* What an add filed after the scan stays pending. */
	assert(tm[0].adds == tm[0].runs + tm[0].stopped + (tm[0].st == PENDING -> 1 : 0));
	assert(tm[1].adds == tm[1].runs + tm[1].stopped + (tm[1].st == PENDING -> 1 : 0))
}
#endif
