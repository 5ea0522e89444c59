/* SPDX-License-Identifier: MIT */
/*
 * purgatory.pml -- the purgatory's protocol (src/purgatory.c), for SPIN.
 *
 * Modelled: one operation on one key (its watch entry in the key's list
 * under the shard lock; the op's own lock around try_complete); the
 * exactly-once flag (completed, a CAS); the reference count and on_release;
 * the timeout, armed through the service and run by it (abstracted: the
 * service model checks the service itself; here a timer is NONE, ARMED,
 * RUNNING or DONE, cancel_sync stops an ARMED one or waits for a RUNNING
 * one, and the service's shutdown hands back what is still ARMED);
 * try_complete_else_watch, check_and_complete, force_complete from outside
 * try_complete, cancel_for_key, expiry, shutdown (with the count of calls
 * in flight) and destroy.
 *
 * Properties:
 *   the op ends exactly once: completed by its condition or by its
 *   timeout (on_complete, then on_expiration) or handed back, never two;
 *   on_release runs exactly once, after which nothing touches the op; no
 *   timeout is left to the service's shutdown (its reference would leak);
 *   a check_and_complete after the condition came true completes the op
 *   (no lost wake-up); no thread waits for ever (invalid end states).
 *
 * Scenarios (SCEN): 1 a key check racing try_complete_else_watch; 2
 * shutdown racing try_complete_else_watch and the timeout; 3 force_complete
 * from outside racing a key check and the timeout; 4 everything at once:
 * watch, condition and key check, timeout, cancel_for_key, shutdown; 5 a
 * watch that fails on its second key (out of memory) and takes back its
 * first entry, racing force_complete from outside and a key check.
 * Mutations (MUT): 2 and 4 put back issue 13's bugs 2 and 4; 9 puts back
 * the reference taken after force_complete's claim; 10 the service's
 * shutdown handing an armed timeout back to nobody (found by this model:
 * a completer between its claim and its cancel leaked the timeout's
 * reference, so on_release never ran); 14 the failed watch taking back an
 * entry a key check already dropped (found in the code while removing the
 * entry's list pointer).
 */

#ifndef SCEN
#define SCEN 4
#endif
#ifndef MUT
#define MUT 0
#endif

#define T_NONE 0
#define T_ARMED 1
#define T_RUNNING 2
#define T_DONE 3

#define R_STOPPED 1
#define R_OTHER 0

bool completed, ready;
byte refs, linked;
bool released;
byte completes, expires, handed, releases;

bool op_mu, sh_mu;
bool in_list;            /* its watch entry is in the key's list */

byte timer = T_NONE;
byte delayed;
bool svc_closed;
byte svc_handed;         /* MUT 10: timeouts handed back to nobody */

bool closing;
byte in_flight;          /* try_complete_else_watch calls (the stripes) */
byte tcew_result = 9;    /* 9: not returned yet; 5: shut down */
bool watched_ok;

#define lock(m)   atomic { !m -> m = 1 }
#define unlock(m) m = 0

inline op_get() {
	atomic { assert(!released); refs++ }
}

inline op_put() {
	atomic {
		assert(refs > 0);
		refs--;
		if
		:: refs == 0 -> released = 1; releases++
		:: else -> skip
		fi
	}
}

/* The service's cancel_sync of the op's timer; self: from on_timeout. */
inline cancel_sync_timer(self) {
	atomic {
		if
		:: timer == T_ARMED -> timer = T_NONE; r = R_STOPPED
		:: else -> r = R_OTHER
		fi
	}
	if
	:: r != R_STOPPED && !self -> (timer != T_RUNNING)
	:: else -> skip
	fi
}

/* claim(): win the race to complete (run_cb) or to cancel. */
inline claim(run_cb, self) {
#if MUT != 9
	/* The caller's precondition (purgatory.h): the op is not released
	 * when the call starts; a caller from outside that finds it released
	 * does not call. From then on the call's own reference keeps it. */
	atomic {
		if
		:: released -> started = 0
		:: else -> refs++; started = 1
		fi
	}
	won = 0;
	if
	:: started ->
		atomic {
			if
			:: completed -> won = 0
			:: else -> completed = 1; won = 1
			fi
		}
		if
		:: !won -> op_put()
		:: else -> skip
		fi
	:: else -> skip
	fi;
#else
	/* the reference after the claim */
	atomic {
		if
		:: released -> won = 0
		:: completed -> won = 0
		:: else -> completed = 1; won = 1
		fi
	}
	if
	:: won -> op_get()
	:: else -> skip
	fi;
#endif
	if
	:: won ->
		cancel_sync_timer(self);
		if
		:: r == R_STOPPED -> delayed--; op_put()
		:: else -> skip
		fi;
		if
		:: run_cb -> atomic { assert(!released); completes++ }
		:: else -> skip
		fi;
		op_put()
	:: else -> skip
	fi
}

/* The caller's condition, under the op's lock. */
inline try_complete(done) {
	if
	:: ready -> claim(1, 0); done = won
	:: else -> done = 0
	fi
}

inline watch() {
	lock(sh_mu);
	in_list = 1;
	linked++;
	op_get();
	unlock(sh_mu)
}

inline unlink_entry() {
	/* under sh_mu; the reference is dropped after it. An entry in no
	 * list has no neighbours to unlink from: in C, a crash. */
	assert(in_list);
	in_list = 0;
	linked--;
	puts++
}

inline put_all() {
	do
	:: puts > 0 -> puts--; op_put()
	:: else -> break
	od
}

proctype tcew()
{
	bool done, won, started, failed;
	byte r, puts;

	atomic {
		if
		:: closing -> tcew_result = 5
		:: else -> in_flight++
		fi
	}
	if
	:: tcew_result == 5 -> goto out
	:: else -> skip
	fi;
	op_get();
	lock(op_mu);
	try_complete(done);
	if
	:: !done -> watch()
	:: else -> skip
	fi;
#if SCEN == 5
	/* its second key's list cannot be allocated (out of memory) */
	failed = !done;
#endif
#if MUT != 2
	if
	:: !done && !failed -> try_complete(done)
	:: else -> skip
	fi;
#endif
	unlock(op_mu);
	if
	:: failed ->
		/* take back the first key's entry -- unless a key check
		 * dropped it since (the op may have been forced meanwhile) */
		lock(sh_mu);
#if MUT != 14
		if
		:: in_list -> unlink_entry()
		:: else -> skip
		fi;
#else
		unlink_entry();
#endif
		unlock(sh_mu);
		put_all();
		in_flight--;
		op_put();
		tcew_result = 6;
		goto out
	:: else -> skip
	fi;
	watched_ok = 1;
	if
	:: !done && !completed ->
		delayed++;
		op_get();
		atomic {
			if
			:: svc_closed -> r = 0
			:: else -> timer = T_ARMED; r = 1
			fi
		}
		if
		:: !r -> delayed--; op_put()
		:: else ->
			if
			:: completed ->
				cancel_sync_timer(0);
				if
				:: r == R_STOPPED -> delayed--; op_put()
				:: else -> skip
				fi
			:: else -> skip
			fi
		fi
	:: else -> skip
	fi;
	in_flight--;
	op_put();
	tcew_result = done;
out:
	skip
}

/* the key's check: try every op on its list */
proctype checker()
{
	bool done, won, snap, started;
	byte r, puts;

	ready = 1;
	lock(sh_mu);
	if
	:: in_list && completed -> unlink_entry()
	:: in_list && !completed -> snap = 1; op_get()
	:: else -> skip
	fi;
	unlock(sh_mu);
	put_all();
	if
	:: snap ->
		if
		:: !completed ->
			lock(op_mu);
			try_complete(done);
			unlock(op_mu)
		:: else -> skip
		fi;
		lock(sh_mu);
		if
		:: in_list && completed -> unlink_entry()
		:: else -> skip
		fi;
		unlock(sh_mu);
		put_all();
		op_put()
	:: else -> skip
	fi
}

/* the service running the op's timeout (on_timeout) */
proctype expirer()
{
	bool won, started;
	byte r, puts;

	if
	:: atomic { timer == T_ARMED -> timer = T_RUNNING }
	:: atomic {
		/* it will never fire: stopped, handed back, or never armed */
		timer != T_ARMED && tcew_result != 9 && (completed || svc_closed ||
		tcew_result == 5) -> goto gone }
	fi;
	delayed--;
	claim(1, 1);
	if
	:: won -> atomic { assert(!released); expires++ }
	:: else -> skip
	fi;
	op_put();
	timer = T_DONE;
gone:
	skip
}

/* cancel_for_key and shutdown: claim what is on the list, hand it back */
inline claim_list_and_hand_back() {
	lock(sh_mu);
	if
	:: in_list ->
		atomic {
			if
			:: !completed -> completed = 1; claimed = 1
			:: else -> claimed = 0
			fi
		}
		if
		:: claimed -> op_get()
		:: else -> skip
		fi;
		unlink_entry()
	:: else -> skip
	fi;
	unlock(sh_mu);
	if
	:: claimed ->
		cancel_sync_timer(0);
		if
		:: r == R_STOPPED -> delayed--; op_put()
		:: else -> skip
		fi;
		atomic { assert(!released); handed++ };
		op_put();
		claimed = 0
	:: else -> skip
	fi;
	put_all()
}

proctype canceller()
{
	bool claimed;
	byte r, puts;

	claim_list_and_hand_back()
}

bool shut_done;

proctype shutdown()
{
	bool claimed;
	byte r, puts;

	closing = 1;
#if MUT != 4
	(in_flight == 0);
#endif
	claim_list_and_hand_back();
	/* the service's shutdown: a running timeout finishes; an armed one
	 * (its op's completer is between its claim and its cancel) comes back
	 * to timeout_handed_back, which drops the timeout's reference */
	svc_closed = 1;
	if
	:: atomic { timer == T_ARMED -> timer = T_NONE };
#if MUT == 10
		svc_handed++ /* handed back to nobody: the reference leaks */
#else
		delayed--;
		atomic {
			if
			:: !completed -> completed = 1; claimed = 1
			:: else -> claimed = 0
			fi
		}
		if
		:: claimed -> atomic { assert(!released); handed++ }
		:: else -> skip
		fi;
		op_put()
#endif
	:: else -> skip
	fi;
	(timer != T_RUNNING);
	shut_done = 1
}

proctype forcer()
{
	bool won, started;
	byte r, puts;

	claim(1, 0)
}

init
{
	byte puts;

#if SCEN == 1
	/* the condition comes true and the key is checked while the op is
	 * being watched; no timeout fires */
	run tcew();
	run checker();
	_nr_pr == 1;
	assert(completes == 1);
	run shutdown();
#elif SCEN == 2
	run tcew();
	run expirer();
	run shutdown();
#elif SCEN == 3
	run tcew();
	(tcew_result != 9);
	run forcer();
	run checker();
	run expirer();
#elif SCEN == 5
	/* a watch that fails half-way, racing a key check and a forcer
	 * that knows of the op once it is on the key's list */
	run tcew();
	run checker();
	(in_list || tcew_result != 9);
	run forcer();
#else
	run tcew();
	run checker();
	run expirer();
	run canceller();
	run shutdown();
#endif
	/* destroy: once everything else has stopped */
	_nr_pr == 1;
	shut_done || SCEN == 3 || SCEN == 5;
	if
	:: in_list -> in_list = 0; linked--; op_put()
	:: else -> skip
	fi;
	/* exactly once */
	if
	:: tcew_result == 6 ->
		/* failed: nothing armed; forced or completed at most once,
		 * released either way */
		assert(timer == T_NONE && expires == 0 && handed == 0);
		assert(completes <= 1);
		assert(releases == 1)
	:: tcew_result != 5 && tcew_result != 6 ->
		assert(completed);
		assert(completes + handed == 1);
		assert(expires <= completes);
		assert(releases == 1)
	:: else ->
		assert(completes + handed == 0 && releases == 0)
	fi;
	assert(refs == 0)
}
