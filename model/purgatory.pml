/* SPDX-License-Identifier: MIT */
/*
 * purgatory.pml -- the purgatory's protocol (src/purgatory/), for SPIN.
 *
 * Modelled: one operation on one key (its watch entry in the key's list
 * under the shard lock; the op's own lock around try_complete); the
 * exactly-once flag (completed, a CAS); the reference count and on_release
 * (the count reaching zero and on_release beginning are two steps); the
 * timeout, armed through the service and run by it (abstracted: the
 * service model checks the service itself; here a timer is NONE, ARMED,
 * EXPIRED (its entry in the reaper's batch), RUNNING or DONE; the
 * completion's stop_pending stops an ARMED one and never waits, and the
 * service's shutdown hands back what is still ARMED);
 * try_complete_else_watch, check_and_complete, force_complete from outside
 * try_complete, cancel_for_key, expiry, shutdown (with the count of calls
 * in flight) and destroy.
 *
 * Properties:
 *   the op ends exactly once: completed by its condition or by its
 *   timeout (on_complete, then on_expiration) or handed back, never two,
 *   and an op whose watch failed (TW_ENOMEM) never completes;
 *   on_release runs exactly once, after which nothing touches the op; no
 *   timeout is left to the service's shutdown (its reference would leak);
 *   a check_and_complete after the condition came true completes the op
 *   (no lost wake-up); no thread waits for ever (invalid end states).
 *
 * Scenarios (SCEN): 1 a key check racing try_complete_else_watch; 2
 * shutdown racing try_complete_else_watch and the timeout; 3 force_complete
 * from outside racing a key check and the timeout; 4 everything at once:
 * watch, condition and key check, timeout, cancel_for_key, shutdown; 5 a
 * watch that fails on its second key (out of memory), or on its first,
 * claims the op and takes back its first entry, racing force_complete
 * from outside and a key check; 6 a
 * key check completes the op while its timeout waits in the reaper's
 * batch behind another op's, whose on_expiration checks the same key; 7
 * a completion that makes a purge due, which drops the last reference of
 * Z, an op that shares the op's lock; 8 force_complete from outside
 * racing the op's first watch, which may be refused once it claimed the
 * op (a tolerance in kafka mode), and a key check (op->purgatory:
 * owner); 9
 * a key check that has the op ahead in its walk, with no reference of
 * its own, while the op is completed from outside, another key check
 * would unlink its entry and a cancel_for_key meets the list pinned; 10
 * two checks of several keys at once (tw_purgatory_check_and_complete_keys)
 * whose keys are the op's and a second key in another shard, named in
 * opposite orders: each takes both shards' locks for its first step, in
 * the shards' order whatever the keys' order, while the watch takes one;
 * 11 tw_op_safe_try_complete racing the op's first watch, the condition
 * true (its try_complete force_completes); 12 a cancel_for_key racing
 * the op's watch, whose claim makes a purge due that releases Z (as in
 * 7) on the canceller's thread; 13 a force_complete from outside, which
 * makes a purge due and never purges, then a key check that completes
 * nothing and purges, releasing Z.
 * Mutations (MUT), each a bug put back that SPIN must find: 2 no second
 * check after the watch (a lost wake-up); 4 shutdown not waiting for the
 * calls in flight; 9 the reference taken after force_complete's claim;
 * 10 the service's shutdown handing an armed timeout back to nobody (a
 * completer between its claim and its cancel leaks the timeout's
 * reference, so on_release never runs); 14 the failed watch taking back
 * an entry a key check already dropped; 17 the completion waiting for
 * the timeout (cancel_sync: an expired entry, a running callback); 18 a
 * reference taken by a plain increment from zero; 19 the purge inside
 * claim() under the caller's lock; 22 on_release under the shutdown
 * lock; 23 a force_complete that takes the op for never watched by a
 * load (a watch then starts under it); 24 a watch that names the
 * purgatory before its first reference; 25 a watch that fails without
 * claiming its op (a key check that took it completes it after
 * TW_ENOMEM); 26 an unlink that does not defer to the key's checks in
 * progress (the entry's reference, the last, dropped while a check
 * still has the op ahead in its walk); 27 a check of several keys that
 * locks their shards in the keys' order (two such checks wait for each
 * other for ever); 28 a check that is not the last one out of the list
 * unlinking the entry it noted on its way out (another check still has
 * the op ahead in its walk); 29 a safe_try_complete that found the op
 * unwatched and does not look again under the op's lock (the watch
 * completes it meanwhile; the force's reference, dropped after the
 * watch's, is the last: on_release under that lock); 30 a
 * cancel_for_key whose claims do not count towards a purge (the entries
 * a cancelled op has on other keys stay until those are checked: Z is
 * never released); 31 a key check that purges only if it completed
 * something (the purge a force_complete from outside made due waits for
 * a call that completes: Z is never released); 32 a check that noted
 * nothing looking at the list's mark a step before it lets go of its pin
 * without the lock (a claim that pinned the list too marks it and lets
 * go first in between: the mark is left with no one to take it, and the
 * entry with it); 33 a check that is not the last out marking the list a
 * step after it let go of its pin (another check leaves last in between,
 * unmarked). docs/model.md says where each was found.
 *
 * The key's list is pinned by the checks in progress on it (walkers,
 * under the shard lock): while it is, nothing unlinks an entry from it;
 * a check walks it without the lock, and an unlinker that meets a pin
 * marks the list dirty instead; the last check out unlinks the completed
 * entries. So an op ahead of a check's walk keeps its entry's reference
 * until the check has let go of the list, and the check takes none of
 * its own.
 */

#ifndef SCEN
#define SCEN 4
#endif
#ifndef MUT
#define MUT 0
#endif

#define T_NONE 0
#define T_ARMED 1       /* PENDING: in the wheel (or on shutdown's list) */
#define T_RUNNING 2     /* on_timeout runs */
#define T_DONE 3
#define T_EXPIRED 4     /* EXPIRED: its entry waits in the reaper's batch */
#define T_CANCELLED 5   /* a cancel stopped it while EXPIRED: its entry
			   still waits, and dispatch drops it unrun */

/* who calls the service's cancel_sync (cancel_sync_timer) */
#define W_OUTSIDE 0     /* any other thread */
#define W_SELF 1        /* the timeout's own callback: no wait for itself */
#define W_SCANNER 2     /* the reaper, in another callback of its batch:
			   it takes the entry back from its own batch */

#define R_STOPPED 1
#define R_OTHER 0

bool completed, ready;
byte refs, linked;
bool released;           /* on_release has begun: the op may be freed */
byte completes, expires, handed, releases;

bool op_mu, sh_mu;
bool sh2_mu;             /* SCEN 10: the second key's shard, after sh_mu in
			    the shards' order */
bool keys_reversed[8];   /* SCEN 10: a check names the second key first */
byte walkers;            /* key checks (and pinned claims) on the list */
bool dirty;              /* an unlink was deferred to the last one out */
byte shutdown_holder = 255; /* the process holding shutdown_mu; 255: none */
bool in_list;            /* its watch entry is in the key's list */

byte timer = T_NONE;
byte delayed;
bool svc_closed;
byte svc_handed;         /* MUT 10: timeouts handed back to nobody */

/* op->purgatory (opstate.h): NONE after init; the first watch claims it
 * (STARTING, watch_start), takes its first reference, then names the
 * purgatory (WATCHED, watch_name); a completion from outside that finds
 * NONE marks it NEVER (watched) in the same step (mark_never); a watch
 * refused once it claimed the op (a tolerance on a kafka-mode purgatory,
 * which only the claimer reads: SCEN 8) gives it back before its first
 * reference (STARTING -> NONE, watch_refused). Each of the four is a
 * STEP: the word is then OWNERWORD, the op's with the owner in bits 4-5. */
#define O_NONE 0
#define O_STARTING 1
#define O_WATCHED 2
#define O_NEVER 3
byte owner = O_NONE;

bool closing;
byte in_flight;          /* try_complete_else_watch calls (the stripes) */
byte tcew_result = 9;    /* 9: not returned yet; 5: shut down */
bool watched_ok;

/* The op's state as src/purgatory/opstate.h abstracts it, one small word
 * both sides compute at each change: the count (0 ZERO, 1 ONE, 2 MANY:
 * two or more), +4 completed, +8 released (on_release has begun). Every
 * step below that changes completed, refs or released is bracketed by
 * BEGIN_STEP and STEP(name), name as the C code's transition (opstate.h's
 * tr_*). Built with -DRECORD (model/check.sh does, in the runs that must
 * pass), STEP prints each (name, from, to) the first time SPIN reaches it,
 * a step that leaves the word as it was (a put MANY -> MANY) included:
 * each is a call that changes a field, and the C code reports those too.
 * check.sh gathers them into model/purgatory.transitions, the table the C
 * test-point build checks each of its own steps against
 * (src/purgatory/transitions.c). Z's count (scenario 7) is another op's
 * and is not recorded. The two scratch globals are 0 outside a step (each
 * step is inside one atomic), so no stored state differs by them. */
#define OPWORD(r) (((r) > 1 -> 2 : (r)) + 4 * completed + 8 * released)
#define OWNERWORD(r) (OPWORD(r) + 16 * owner)
byte step_from, step_to;
#ifdef RECORD
c_decl {
	static unsigned char tw_op_step_seen[10][64][64];
	static void tw_op_step(int id, const char *name, int from, int to)
	{
		if (tw_op_step_seen[id][from][to])
			return;
		tw_op_step_seen[id][from][to] = 1;
		printf("STEP %s %d %d\n", name, from, to);
	}
}
#define BEGIN_STEP step_from = OPWORD(refs)
#define STEP(name) step_to = OPWORD(refs); \
	c_code { tw_op_step(S_##name, #name, now.step_from, now.step_to); }; \
	step_from = 0; step_to = 0
#define BEGIN_OWNER_STEP step_from = OWNERWORD(refs)
#define OWNER_STEP(name) step_to = OWNERWORD(refs); \
	c_code { tw_op_step(S_##name, #name, now.step_from, now.step_to); }; \
	step_from = 0; step_to = 0
/* A put's word, with the completed flag its process loaded before it. */
#define PUTWORD(r) (((r) > 1 -> 2 : (r)) + 4 * put_completed[_pid] + 8 * released)
bit put_completed[16];
#define BEGIN_PUT_STEP step_from = PUTWORD(refs)
#define PUT_STEP step_to = PUTWORD(refs); \
	c_code { tw_op_step(S_ref_put, "ref_put", now.step_from, now.step_to); }; \
	step_from = 0; step_to = 0; put_completed[_pid] = 0;
#else
#define BEGIN_PUT_STEP skip
#define PUT_STEP
#define BEGIN_STEP skip
#define STEP(name) skip
#define BEGIN_OWNER_STEP skip
#define OWNER_STEP(name) skip
#endif
#define S_ref_first 0
#define S_ref_get 1
#define S_ref_get_unless_zero 2
#define S_ref_put 3
#define S_release 4
#define S_claim 5
#define S_watch_start 6
#define S_watch_name 7
#define S_mark_never 8
#define S_watch_refused 9

#define lock(m)   atomic { !m -> m = 1 }
#define unlock(m) m = 0
/* The op's lock, taken by a key check that holds no reference: the op
 * must not have been released under it. */
#define lock_alive(m)   atomic { !m -> assert(!released); m = 1 }
#define unlock_alive(m) atomic { assert(!released); m = 0 }

/* May the entry be unlinked now (under sh_mu)? Only when no check pins
 * the list. MUT 26: whatever the pins. */
#if MUT == 26
#define MAY_UNLINK true
#else
#define MAY_UNLINK (walkers == 0)
#endif

/* A purge is due: the count of completions past the interval, which any
 * call's end looks at (maybe_purge), whichever call made it (SCEN 7, 12). */
bool purge_due;

#if SCEN == 7 || SCEN == 12 || SCEN == 13
#define PURGE_LOCALS byte zputs; bool zlast;
#else
#define PURGE_LOCALS
#endif

#if SCEN == 7 || SCEN == 12 || SCEN == 13
/* Z: another op, completed, that shares X's lock (op_mu); its last
 * reference is its watch entry on another key, which a purge drops. */
byte zrefs = 1, zreleases;
bool z_linked = 1;

inline z_put() {
	atomic { zrefs--; zlast = (zrefs == 0) }
	if
	:: zlast -> zlast = 0; atomic { !op_mu -> zreleases++ } /* Z's
		on_release takes its op's lock, X's */
	:: else -> skip
	fi
}
#endif

/* A reference taken by a holder of another (a live count). */
inline op_get() {
	atomic { assert(!released && refs > 0); BEGIN_STEP; refs++; STEP(ref_get) }
}

/* on_release, the user's: it takes its op's lock first (natural when that
 * lock guards what the op leaves), so it blocks for ever if its own thread
 * holds that lock; and nothing may refer to the op any more, the
 * service's timer included. */
inline on_release() {
	atomic {
		!op_mu ->
		assert(releases == 0);   /* at most once */
		/* never under the purgatory's shutdown lock: a second
		 * shutdown, called by a thread that holds a lock on_release
		 * takes, waits for it: a hang) */
		assert(shutdown_holder != _pid);
		assert(!in_list && timer != T_ARMED && timer != T_EXPIRED &&
		       timer != T_CANCELLED);
		BEGIN_STEP;
		released = 1;
		STEP(release);
		releases++
	}
}

/* The count reaching zero and on_release beginning are two steps: in
 * between, the op looks unreleased to everyone. The C code reports a put
 * with the completed flag it loaded just before the decrement (after a
 * put that is not the last, the op may be freed by another thread's last
 * put, so nothing of it may be read then): the recording runs load it as
 * a step of its own, so that a claim between the load and the decrement
 * gives the rows the code reports then. */
inline op_put() {
#ifdef RECORD
	put_completed[_pid] = completed;
#endif
	atomic {
		assert(refs > 0);
		BEGIN_PUT_STEP;
		refs--;
		PUT_STEP
		last = (refs == 0)
	}
	if
	:: last -> last = 0; on_release()
	:: else -> skip
	fi
}

/* The service's cancel_sync of the op's timer (who: W_*). It stops an
 * armed or expired one; it waits for a running callback (not for its
 * own) and for an entry still in a batch or queue (unless it is the
 * reaper's own batch: then it takes the entry back). */
inline cancel_sync_timer(who) {
	atomic {
		if
		:: timer == T_ARMED -> timer = T_NONE; r = R_STOPPED
		:: timer == T_EXPIRED && who == W_SCANNER -> timer = T_NONE; r = R_STOPPED
		:: timer == T_EXPIRED && who != W_SCANNER -> timer = T_CANCELLED; r = R_STOPPED
		:: timer == T_CANCELLED && who == W_SCANNER -> timer = T_NONE; r = R_OTHER
		:: else -> r = R_OTHER
		fi
	}
	if
	:: who != W_SELF -> (timer != T_RUNNING && timer != T_CANCELLED)
	:: else -> skip
	fi
}

/* tw__service_stop_pending: one CAS from PENDING (F_ENTRY clear) to IDLE
 * and an unlink under wheel_mu, a leaf lock; it never waits. A timeout
 * that is not PENDING (its entry in a batch, running, or on shutdown's
 * list) is left alone: its callback, or shutdown's hand-back, finds the
 * op completed and drops the timeout's reference itself. */
inline stop_pending() {
	atomic {
		if
		:: timer == T_ARMED -> timer = T_NONE; r = R_STOPPED
		:: else -> r = R_OTHER
		fi
	}
}

/* Kafka's purge (SCEN 7 and 12 only; elsewhere purge_interval is never
 * reached), at the end of each of the purgatory's own calls, by the first
 * that finds it due (the count's look, then the purging flag's CAS):
 * one thread walks every list and drops the entries of completed ops,
 * X's on its key and Z's, the other op that shares X's lock (op_mu), on
 * its own key. Dropping Z's entry drops its last reference. */
inline maybe_purge() {
#if SCEN == 7 || SCEN == 12 || SCEN == 13
	if
	:: atomic { purge_due -> purge_due = 0 } ->
		lock(sh_mu);
		if
		:: in_list && completed && MAY_UNLINK -> unlink_entry()
		/* the look at the pins and the mark: one swap of the word */
		:: atomic { in_list && completed && !MAY_UNLINK -> dirty = 1 }
		:: else -> skip
		fi;
		if
		:: z_linked -> z_linked = 0; zputs++
		:: else -> skip
		fi;
		unlock(sh_mu);
		put_all();
		if
		:: zputs > 0 -> zputs = 0; z_put()
		:: else -> skip
		fi
	:: else -> skip
	fi
#else
	skip
#endif
}

/* claim(): win the race to complete, and run on_complete (a cancel or
 * shutdown claims inline and hands the op back); who: as for
 * cancel_sync_timer. */
inline claim(who) {
	/* Who may hold references: a watch that is starting is waited out
	 * (its next two steps); an op nobody watches is marked never watched
	 * in the same step, so that no watch starts under this call. */
	atomic {
		owner != O_STARTING ->
		if
#if MUT == 23
		/* the first version: never watched, decided by a load */
		:: owner == O_NONE -> unwatched = 1
#else
		:: owner == O_NONE ->
			BEGIN_OWNER_STEP; owner = O_NEVER; OWNER_STEP(mark_never);
			unwatched = 1
#endif
		:: owner == O_NEVER -> unwatched = 1
		:: else -> unwatched = 0
		fi
	}
	if
	:: unwatched ->
		/* no references, no timeout, no on_release: not the model's
		 * op word (the C code reports no step either) */
		atomic {
			if
			:: completed -> won = 0
			:: else -> completed = 1; won = 1
			fi
		}
		if
		:: won -> atomic { assert(!released); completes++ }
		:: else -> skip
		fi
	:: else ->
#if MUT != 9
	/* The call's reference first, then the exactly-once CAS. The
	 * caller's precondition (purgatory.h): the op's memory is valid, that
	 * is on_release has not begun when the call starts; a caller that
	 * finds it begun does not call. The reference is got unless the count
	 * is zero: a zero count is on its way to on_release, and the call
	 * returns false. */
	atomic {
		if
		:: released -> started = 0
#if MUT == 18
		/* a plain increment: 0 -> 1 brings the count back to life */
		:: !released -> BEGIN_STEP; refs++; STEP(ref_get_unless_zero); started = 1
#else
		:: !released && refs == 0 -> started = 0
		:: !released && refs > 0 ->
			BEGIN_STEP; refs++; STEP(ref_get_unless_zero); started = 1
#endif
		fi
	}
	won = 0;
	if
	:: started ->
		atomic {
			if
			:: completed -> won = 0
			:: else -> BEGIN_STEP; completed = 1; STEP(claim); won = 1
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
		:: else -> BEGIN_STEP; completed = 1; STEP(claim); won = 1
		fi
	}
	if
	:: won -> op_get()
	:: else -> skip
	fi;
#endif
	if
	:: won ->
#if MUT == 17
		/* today's: cancel_sync, which waits for the timeout's entry in
		 * the reaper's batch and for its running callback */
		cancel_sync_timer(who);
#else
		stop_pending();
#endif
		if
		:: r == R_STOPPED -> delayed--; op_put()
		:: else -> skip
		fi;
		atomic { assert(!released); completes++ };
#if SCEN == 7 || SCEN == 12 || SCEN == 13
		purge_due = 1;
#endif
#if MUT == 19
		/* today's: the purge inside claim, under the caller's lock */
		maybe_purge();
#endif
		op_put()
	:: else -> skip
	fi
	fi
}

/* The caller's condition, under the op's lock. */
inline try_complete(done, who) {
	if
	:: ready -> claim(who); done = won
	:: else -> done = 0
	fi
}

/* The entry's reference and count are taken before it is linked (the C
 * code takes every key's at once, under the op's lock), so an unlink
 * that follows the link always has one to drop. */
inline watch() {
	op_get();
	linked++;
	lock(sh_mu);
	in_list = 1;
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
	bool done, won, started, unwatched, failed, withdrawn, last;
	byte r, puts;
	PURGE_LOCALS

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
	/* completed before its watch: refused (TW_EINVAL) */
	atomic {
		if
		:: completed -> tcew_result = 7; in_flight--
		:: else -> skip
		fi
	}
	if
	:: tcew_result == 7 -> goto out
	:: else -> skip
	fi;
	/* one watch per init: the claim of the op, unless a completion from
	 * outside marked it never watched since the check above */
	atomic {
		if
		:: owner == O_NONE ->
			BEGIN_OWNER_STEP;
#if MUT == 24
			owner = O_WATCHED; /* the first version: named at once */
#else
			owner = O_STARTING;
#endif
			OWNER_STEP(watch_start)
		:: else -> tcew_result = 7; in_flight--
		fi
	}
	if
	:: tcew_result == 7 -> goto out
	:: else -> skip
	fi;
#if SCEN == 8
	/* a kafka-mode purgatory and an op with a tolerance: refused once
	 * claimed (TW_EINVAL), the claim given back before any reference; a
	 * completion from outside waiting for this watch's next steps then
	 * finds the op nobody's and marks it never watched */
	if
	:: atomic {
		BEGIN_OWNER_STEP; owner = O_NONE; OWNER_STEP(watch_refused);
		tcew_result = 7; in_flight--
	   }
	   goto out
	:: skip
	fi;
#endif
	/* this call's: the first */
	atomic { assert(!released); BEGIN_STEP; refs++; STEP(ref_first) }
	/* named only now that it holds a reference */
	atomic { BEGIN_OWNER_STEP; owner = O_WATCHED; OWNER_STEP(watch_name) }
	lock(op_mu);
	try_complete(done, W_OUTSIDE);
#if SCEN == 5
	/* out of memory: its second key's list cannot be allocated, or
	 * already its first's (nothing watched) */
	if
	:: !done -> watch()
	:: !done -> skip
	:: else -> skip
	fi;
	failed = !done;
#else
	if
	:: !done -> watch()
	:: else -> skip
	fi;
#endif
#if MUT != 2
	if
	:: !done && !failed -> try_complete(done, W_OUTSIDE)
	:: else -> skip
	fi;
#endif
#if MUT != 25
	/* a watch that failed claims the op before it lets go of its lock,
	 * so that nothing completes it after TW_ENOMEM; a completion from
	 * outside the op's lock that claimed it first makes the call one
	 * that watched (its result 0) */
	if
	:: failed ->
		atomic {
			if
			:: !completed -> BEGIN_STEP; completed = 1; STEP(claim); withdrawn = 1
			:: else -> withdrawn = 0
			fi
		}
	:: else -> skip
	fi;
#else
	/* a failed watch that lets go of its op uncompleted (the claim
	 * left out): a key check then completes it after TW_ENOMEM */
	withdrawn = failed;
#endif
	unlock(op_mu);
	maybe_purge();
	if
	:: failed ->
		/* take back the first key's entry -- unless a key check
		 * dropped it since (the op may have been forced meanwhile) */
		lock(sh_mu);
#if MUT != 14
		if
		:: in_list && MAY_UNLINK -> unlink_entry()
		:: atomic { in_list && !MAY_UNLINK -> dirty = 1 }
		:: else -> skip
		fi;
#else
		unlink_entry();
#endif
		unlock(sh_mu);
		put_all();
		if
		:: withdrawn ->
			in_flight--;
			op_put();
			tcew_result = 6;
			goto out
		:: else -> skip
		fi
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
				/* completed before its timeout was armed */
#if MUT == 17
				cancel_sync_timer(W_OUTSIDE);
#else
				stop_pending();
#endif
				if
				:: r == R_STOPPED -> delayed--; op_put()
				:: else -> skip
				fi
			:: else -> skip
			fi
		fi
	:: else -> skip
	fi;
	/* the stripe is let go last: shutdown waits for the put too */
	op_put();
	in_flight--;
	tcew_result = done;
out:
	skip
}

/* tw_purgatory_check_and_complete of the op's key (who: W_SCANNER from
 * the reaper, in another op's on_expiration). Under the shard lock the
 * pin, and whether the op's entry is in the list (the C code notes the
 * list's last entry and walks up to it); then, with no lock held, the
 * walk's look at the op's flag (no reference: its entry's, which nothing
 * unlinks while the list is pinned, keeps it) and, uncompleted, the look
 * at the condition without the op's lock (the op's kind's may_complete,
 * which the model's op has: false, and the op is not tried) and the try
 * under the op's lock; then the way out. A check that noted nothing
 * (found the op uncompleted and did not complete it) lets go of its pin
 * with no lock, by one compare-and-swap of the word that holds the pins
 * and the mark (one atomic step here), unless that leaves it the last
 * one out of a dirty list (MUT 32: the look at the mark a step of its
 * own before a plain decrement, so that a mark a claim or a purge makes
 * in between is left with no one to take it); otherwise under the lock,
 * where the last check out unlinks the completed entry and one that is
 * not the last marks the list dirty for it. Then the purge, if due, with
 * no pin held. The C code's gate (watch.c: a check that finds the list
 * dirty and pinned lets go of the lock and yields, for a bounded time,
 * before it pins it) only delays this first step: its schedules
 * are the model's already, so it is not modelled. */
/* A check's first step takes its key's shard lock; a check of several
 * keys (SCEN 10) takes both shards' locks, in the shards' order (MUT 27:
 * in the order its caller named the keys). */
#if SCEN == 10
inline lock_check_shards() {
	if
	:: MUT == 27 && keys_reversed[_pid] -> lock(sh2_mu); lock(sh_mu)
	:: else -> lock(sh_mu); lock(sh2_mu)
	fi
}
inline unlock_check_shards() {
	unlock(sh2_mu);
	unlock(sh_mu)
}
#else
inline lock_check_shards() {
	lock(sh_mu)
}
inline unlock_check_shards() {
	unlock(sh_mu)
}
#endif

inline check_key(who) {
	lock_check_shards();
	walkers++;
	snap = in_list;
	unlock_check_shards();
	/* the walk, with no lock held: the pin keeps the entry in the list
	 * and its reference with it */
	if
	:: snap ->
		atomic { assert(!released && in_list); trying = !completed; cleaned = completed };
		/* may_complete: the condition looked at without the op's
		 * lock; no, and the op is not tried */
		if
		:: trying -> atomic { assert(!released); trying = ready }
		:: else -> skip
		fi;
		if
		:: trying ->
			lock_alive(op_mu);
			try_complete(done, who);
			unlock_alive(op_mu)
		:: else -> skip
		fi
	:: else -> skip
	fi;
	/* the way out: the entry noted (found completed, or completed by
	 * this check) goes with the last check out; one that is not the
	 * last marks the list for it (MUT 28: unlinks it anyway) */
#if MUT == 32
	leaving = done || cleaned || dirty;
#else
	if
	:: done || cleaned -> leaving = 1
	:: else ->
		atomic {
			if
			:: walkers == 1 && dirty -> leaving = 1
			:: else -> walkers--; leaving = 0
			fi
		}
	fi;
#endif
	if
	:: leaving ->
		lock(sh_mu);
		/* the pin let go of and, by one that is not the last out, the
		 * mark made: one compare-and-swap of the word (MUT 33: the mark
		 * a step after the decrement, where another check's way out
		 * without the lock may leave the list meanwhile, unmarked) */
#if MUT == 33
		walkers--;
		lastout = (walkers == 0);
		if
		:: !lastout && (done || cleaned) -> dirty = 1
		:: else -> skip
		fi;
#else
		atomic {
			walkers--;
			lastout = (walkers == 0);
			if
			:: !lastout && (done || cleaned) && MUT != 28 -> dirty = 1
			:: else -> skip
			fi
		}
#endif
		if
		:: lastout ->
			if
			:: in_list && completed -> unlink_entry()
			:: else -> skip
			fi;
			dirty = 0
		:: !lastout && (done || cleaned) && MUT == 28 ->
			if
			:: in_list -> unlink_entry()
			:: else -> skip
			fi
		:: else -> skip
		fi;
		lastout = 0;
		unlock(sh_mu);
		put_all()
#if MUT == 32
	:: else -> walkers--
#else
	:: else -> skip
#endif
	fi;
	leaving = 0;
#if MUT == 31
	/* the old way: only a check that completed something purges */
	if
	:: done -> maybe_purge()
	:: else -> skip
	fi
#else
	maybe_purge()
#endif
}

/* the key's check, once the condition is true */
proctype checker()
{
	bool done, won, snap, trying, cleaned, started, unwatched, last, leaving, lastout;
	byte r, puts;
	PURGE_LOCALS

	ready = 1;
	check_key(W_OUTSIDE)
}

/* a check of the op's key and a second key at once, once the condition
 * is true (SCEN 10); reversed: the second key named first */
proctype multi_checker(bool reversed)
{
	bool done, won, snap, trying, cleaned, started, unwatched, last, leaving, lastout;
	byte r, puts;
	PURGE_LOCALS

	keys_reversed[_pid] = reversed;
	ready = 1;
	check_key(W_OUTSIDE)
}

/* a check of the key while the condition is still false (SCEN 9) */
proctype idle_checker()
{
	bool done, won, snap, trying, cleaned, started, unwatched, last, leaving, lastout;
	byte r, puts;
	PURGE_LOCALS

	check_key(W_OUTSIDE)
}

/* the service's reaper: it expires the op's timeout (its entry goes in
 * the batch), dispatches the batch, and runs on_timeout */
proctype expirer()
{
	bool won, started, unwatched, last, done, snap, trying, cleaned, leaving, lastout;
	byte r, puts;
	PURGE_LOCALS

	if
	:: atomic { timer == T_ARMED -> timer = T_EXPIRED }
	:: atomic {
		/* it will never fire: stopped, handed back, or never armed */
		timer != T_ARMED && tcew_result != 9 && (completed || svc_closed ||
		tcew_result == 5) -> goto gone }
	fi;
#if SCEN == 6
	/* Z's timeout expired in the same advance, ahead of this one in the
	 * batch: its on_expiration checks X's key (check_and_complete) */
	check_key(W_SCANNER);
#endif
	/* execute: the entry's CAS, on the timer in the op */
	if
	:: atomic { timer == T_EXPIRED -> assert(!released); timer = T_RUNNING }
	:: atomic { timer == T_CANCELLED -> assert(!released); timer = T_DONE };
		goto gone   /* stopped meanwhile: the entry is dropped unrun */
	:: atomic { timer == T_NONE -> skip };
		goto gone   /* its entry taken back by this thread (SCEN 6) */
	fi;
	delayed--;
	/* the claim of the timeout's own callback (claim_by_timeout): the
	 * timeout's reference keeps the op, and its timer is the one
	 * running, so no reference is taken and nothing is stopped */
	atomic {
		if
		:: completed -> won = 0
		:: else -> BEGIN_STEP; completed = 1; STEP(claim); won = 1
		fi
	}
	if
	:: won -> atomic { assert(!released); completes++; expires++ }
	:: else -> skip
	fi;
	maybe_purge();
	op_put();
	timer = T_DONE;
gone:
	skip
}

/* cancel_for_key and shutdown: claim what is on the list, hand it back.
 * A list no check pins: the op claimed with a reference of the claim's,
 * its entry unlinked. A pinned one: the claimer pins it too, claims
 * without a reference (the entry, which stays, keeps the op), marks the
 * list dirty, hands back, and lets go of its pin as a check does, under
 * the lock. */
/* defer: shutdown's, which drops the references it collects only after
 * it lets go of shutdown_mu (held counts them) */
inline claim_list_and_hand_back(defer) {
	lock(sh_mu);
	if
	:: in_list && MAY_UNLINK ->
		atomic {
			if
			:: !completed -> BEGIN_STEP; completed = 1; STEP(claim); claimed = 1
			:: else -> claimed = 0
			fi
		}
		if
		:: claimed -> op_get()
		:: else -> skip
		fi;
		unlink_entry()
	:: in_list && !MAY_UNLINK ->
		walkers++;
		pinned = 1;
		atomic {
			if
			:: !completed -> BEGIN_STEP; completed = 1; STEP(claim); claimed = 1
			:: else -> claimed = 0
			fi
		}
		dirty = 1
	:: else -> skip
	fi;
	unlock(sh_mu);
	if
	:: claimed ->
#if MUT == 17
		cancel_sync_timer(W_OUTSIDE);
#else
		stop_pending();
#endif
		if
		:: r == R_STOPPED -> delayed--; op_put()
		:: else -> skip
		fi;
		atomic { assert(!released); handed++ };
#if (SCEN == 7 || SCEN == 12 || SCEN == 13) && MUT != 30
		/* a cancel completes the op too: it counts towards a purge */
		purge_due = 1;
#endif
		if
		:: pinned -> skip
		:: !pinned && defer -> held++
		:: else -> op_put()
		fi;
		claimed = 0
	:: else -> skip
	fi;
	if
	:: pinned ->
		lock(sh_mu);
		walkers--;
		if
		:: walkers == 0 ->
			if
			:: in_list && completed -> unlink_entry()
			:: else -> skip
			fi;
			dirty = 0
		:: else -> skip
		fi;
		unlock(sh_mu);
		pinned = 0
	:: else -> skip
	fi;
	if
	:: defer -> held = held + puts; puts = 0
	:: else -> put_all(); maybe_purge() /* cancel_for_key: no lock held */
	fi
}

proctype canceller()
{
	bool claimed, pinned, last;
	byte r, puts, held;
	PURGE_LOCALS

	claim_list_and_hand_back(0)
}

bool shut_done;

proctype shutdown()
{
	bool claimed, pinned, last;
	byte r, puts, held;
	PURGE_LOCALS

	atomic { shutdown_holder == 255 -> shutdown_holder = _pid };
	closing = 1;
#if MUT != 4
	(in_flight == 0);
#endif
#if MUT == 22
	/* the old order: the references dropped under shutdown_mu */
	claim_list_and_hand_back(0);
#else
	claim_list_and_hand_back(1);
#endif
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
			:: !completed -> BEGIN_STEP; completed = 1; STEP(claim); claimed = 1
			:: else -> claimed = 0
			fi
		}
		if
		:: claimed -> atomic { assert(!released); handed++ }
		:: else -> skip
		fi;
#if MUT == 22
		op_put()
#else
		held++
#endif
#endif
	:: else -> skip
	fi;
	/* the reaper stops after its batch: what expired has run */
	(timer != T_RUNNING && timer != T_EXPIRED && timer != T_CANCELLED);
	shutdown_holder = 255;
	/* the references collected, dropped with no lock held */
	do
	:: held > 0 -> held--; op_put()
	:: else -> break
	od;
	shut_done = 1
}

/* force_complete from outside try_complete; it never purges (it may run
 * under its caller's lock): the purgatory's next call does */
proctype forcer()
{
	bool won, started, unwatched, last;
	byte r, puts;
	PURGE_LOCALS

	claim(W_OUTSIDE);
	/* purgatory.h: false for everyone else (it was completed) and for an
	 * op on its way to on_release -- which is completed too: a failed
	 * watch (scenario 5) claims its op before it lets go of it, and a
	 * force during the first watch that found no reference yet and did
	 * nothing would fail here */
	assert(won || completed)
}

/*
 * tw_op_safe_try_complete from outside, the condition true (SCEN 11): a
 * look at who watches the op (a watch that is starting waited out) and,
 * watched, a reference unless the count is zero (zero: nothing, false);
 * the op's lock; not watched at the first look, the same look again under
 * the lock (MUT 29: not again); try_complete, which force_completes (a
 * claim from outside, under the lock); the unlock; its reference dropped.
 * The caller keeps the op's memory valid across its own call
 * (purgatory.h), so the lock is taken with no check that on_release has
 * not begun: the second look then finds the count at zero.
 */
inline safe_look(held, gone) {
	atomic { owner != O_STARTING -> held = (owner == O_WATCHED) };
	if
	:: held ->
		atomic {
			if
			:: refs > 0 -> BEGIN_STEP; refs++; STEP(ref_get_unless_zero)
			:: else -> held = 0; gone = 1
			fi
		}
	:: else -> skip
	fi
}

proctype safe_trier()
{
	bool done, won, started, unwatched, last, held, gone;
	byte r, puts;
	PURGE_LOCALS

	safe_look(held, gone);
	if
	:: gone -> goto out
	:: else -> skip
	fi;
	lock(op_mu);
#if MUT != 29
	if
	:: !held -> safe_look(held, gone)
	:: else -> skip
	fi;
#endif
	if
	:: gone -> unlock(op_mu); goto out
	:: else -> skip
	fi;
	try_complete(done, W_OUTSIDE);
	unlock(op_mu);
	if
	:: held -> op_put(); maybe_purge()
	:: else -> skip
	fi;
out:
	skip
}

init
{
	byte puts;
	bool last;

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
#elif SCEN == 6
	/* the op is watched and its timeout armed; then its condition comes
	 * true and its key is checked, while the reaper expires its timeout
	 * in one batch behind Z's, whose on_expiration checks the key too */
	run tcew();
	(tcew_result != 9);
	run checker();
	run expirer();
#elif SCEN == 7
	/* the condition comes true and the key is checked while the op is
	 * watched; a purge is due at its completion, and Z, sharing its lock,
	 * is released by it */
	run tcew();
	run checker();
	_nr_pr == 1;
	assert(completes == 1 && zreleases == 1);
	run shutdown();
#elif SCEN == 12
	/* a cancel_for_key racing the op's watch, its condition false: a
	 * cancel that claims the op makes a purge due, as a completion does,
	 * and that purge releases Z, an op sharing the op's lock, on the
	 * canceller's thread, which holds no lock by then (a cancel that
	 * came before the entry claims nothing; shutdown hands the op back) */
	run tcew();
	run canceller();
	_nr_pr == 1;
	assert(handed == 0 || zreleases == 1);
	run shutdown();
#elif SCEN == 13
	/* the op is watched, its condition false; a force_complete from
	 * outside completes it and makes a purge due but does not purge; a
	 * key check that then completes nothing purges, releasing Z */
	run tcew();
	_nr_pr == 1;
	run forcer();
	_nr_pr == 1;
	run idle_checker();
	_nr_pr == 1;
	assert(completes == 1 && zreleases == 1);
	run shutdown();
#elif SCEN == 8
	/* force_complete from outside racing the op's first watch, and a key
	 * check (op->purgatory's steps) */
	run tcew();
	run forcer();
	run checker();
#elif SCEN == 9
	/* the op is watched, its condition false; a key check has it ahead
	 * in its walk while it is completed from outside, another check
	 * finds it completed, and a cancel_for_key meets the pinned list */
	run tcew();
	(tcew_result != 9);
	run idle_checker();
	run forcer();
	run idle_checker();
	run canceller();
#elif SCEN == 10
	/* the op is watched; its condition comes true and two checks of its
	 * key and another, naming them in opposite orders, race each other
	 * and the end of the watch */
	run tcew();
	run multi_checker(0);
	run multi_checker(1);
#elif SCEN == 11
	/* the condition already true: the op's first watch completes it by
	 * its own try_complete, racing a safe_try_complete from outside */
	ready = 1;
	run tcew();
	run safe_trier();
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
	shut_done || SCEN == 3 || SCEN == 5 || SCEN == 6 || SCEN == 8 || SCEN == 9 ||
	SCEN == 10 || SCEN == 11;
	assert(walkers == 0);
	/* a mark is never lost: the last one out took it */
	assert(!dirty);
	if
	:: in_list -> in_list = 0; linked--; op_put()
	:: else -> skip
	fi;
	/* exactly once */
	if
	:: tcew_result == 6 ->
		/* failed (TW_ENOMEM): nothing armed, and it never completes:
		 * the watch claimed it; released once */
		assert(completed && timer == T_NONE && expires == 0 && handed == 0);
		assert(completes == 0);
		assert(releases == 1)
	:: tcew_result == 7 ->
		/* refused: completed from outside before its watch (or, SCEN
		 * 8, after a refused one: by the forcer), never watched, so no
		 * on_release */
		assert(completed && completes == 1 && handed == 0);
		assert(timer == T_NONE && releases == 0)
	:: tcew_result != 5 && tcew_result != 6 && tcew_result != 7 ->
		assert(completed);
		assert(completes + handed == 1);
		assert(expires <= completes);
		assert(releases == 1)
	:: else ->
		assert(completes + handed == 0 && releases == 0)
	fi;
	assert(refs == 0)
}
