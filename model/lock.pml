/*
 * lock.pml -- src/lock.h, the lock the service's and the purgatory's
 * shards and ops take, on a machine that reorders as x86 does (TSO).
 *
 * What TSO allows and this models: a thread's store waits in its store
 * buffer, seen by the thread itself at once and by the others only when
 * the buffer drains, at any moment; a thread's load reads memory (or its
 * own buffer); a locked instruction drains the thread's buffer first;
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) drains every thread's.
 * The unlock of a lock nobody waited for lately (fenced == 0) is a plain
 * store of held = 0 (into the buffer) and a load of the waiters, which may
 * thus read memory before the store is seen: the order that can strand a
 * sleeper. A waiter is counted until it has the lock; one that finds
 * fenced at 0 sets it (to FMAX) and runs the barrier; one that finds it
 * set relies on the unlocks, which while it is set store held = 0 as a
 * locked instruction would (the buffer drained) before they look at the
 * waiters, and count it down, one an unlock that finds nobody waiting,
 * back to the plain store. Before each sleep a waiter sets the flag and
 * reads the word in one instruction (a fetch_or); an unlock that sees
 * waiters takes the flag (an exchange) and wakes one sleeper if it was
 * set; a waiter that gets the lock while others are counted sets it
 * again. The futex wait is atomic in the kernel: it sleeps only if the
 * word (held and the flag) is still what the waiter saw; the kernel's
 * futex_wake orders its caller's earlier stores before it looks for
 * sleepers (its smp_mb, the ordering futex(2) promises).
 *
 * Property: every thread finishes its rounds (SPIN's end states: a thread
 * asleep for ever is an invalid end state), and never two inside.
 *
 * SCEN 1: two threads, three rounds each (enough for a lock to be
 * fenced, counted back to plain and contended again: FMAX is 1 here);
 * SCEN 2: three threads, one round each. MUT 1:
 * a waiter that sleeps without the barrier; MUT 2: an unlock in fenced
 * mode that stores held = 0 plainly (the buffer not drained before the
 * look); MUT 3: a waiter that gets the lock while another sleeps and
 * does not set the flag again (the unlock that woke it took the flag for
 * both) -- SPIN must find the stranded sleeper in each.
 */
#ifndef SCEN
#define SCEN 1
#endif
#ifndef MUT
#define MUT 0
#endif
#if SCEN == 1
#define NT 2
#define ROUNDS 3
#else
#define NT 3
#define ROUNDS 1
#endif
#define FMAX 1

byte held;           /* memory: 0 or 1 */
byte fenced;         /* memory: unlocks left in fenced mode */
byte waiters;        /* memory */
bool pend_h[NT];     /* thread i's buffered store of held = 0 */
bool pend_f[NT];     /* thread i's buffered store of fenced = fval[i] */
byte fval[NT];
byte npending;
bool asleep[NT];     /* on the futex */
byte inside;
bool flag;           /* a sleeper may need a wake (the old SLEEPERS) */

/* Thread i's buffer drains in order: fenced's store, then held's. */
#define DRAIN_F(i) if :: pend_f[i] -> fenced = fval[i]; pend_f[i] = false; npending-- :: else -> skip fi
#define DRAIN_H(i) if :: pend_h[i] -> held = 0; pend_h[i] = false; npending-- :: else -> skip fi
#define DRAIN(i) DRAIN_F(i); DRAIN_H(i)
/* futex wake: one sleeper, if any, the caller's buffer drained first */
#define WAKE(i) \
	atomic { \
		DRAIN(i); \
		if \
		:: flag -> \
			flag = false; \
			k = 0; \
			do \
			:: k < NT && asleep[k] -> asleep[k] = false; break \
			:: k < NT && !asleep[k] -> k++ \
			:: else -> break \
			od \
		:: else -> skip \
		fi \
	}

proctype thread(byte i)
{
	byte round = 0, seen, seenf, k, old, f;
	bool got;

	do
	:: round == ROUNDS -> break
	:: else ->
		/* acquire: a CAS of held (drains the buffer first) */
		atomic { DRAIN(i); if :: held == 0 -> held = 1; goto in :: else -> skip fi }
		/* the contended path (after the spin, which the model leaves
		 * out: it only tries the CAS): counted until it has the lock,
		 * fenced set (an exchange), the barrier if it was plain */
		atomic { DRAIN(i); waiters++ }
		atomic { DRAIN(i); old = fenced; fenced = FMAX }
#if MUT != 1
		if
		:: old == 0 ->
			atomic {   /* membarrier */
				k = 0;
				do
				:: k < NT -> DRAIN(k); k++
				:: else -> break
				od
			}
		:: else -> skip
		fi;
#endif
		do
		:: atomic { DRAIN(i); if :: held == 0 -> held = 1; got = true :: else -> got = false fi }
			if
			:: got -> break
			:: else -> skip
			fi;
			/* a fetch_or of the word: the flag set, the word seen */
			atomic { DRAIN(i); flag = true; seen = held; seenf = true }
			/* the futex wait: sleeps only while the word is seen */
			atomic { if :: held == seen && flag == seenf && seen == 1 -> asleep[i] = true :: else -> skip fi }
			!asleep[i]
		od;
		atomic { DRAIN(i); waiters-- };
		/* taken after a wait: others may sleep, so this unlock wakes */
#if MUT != 3
		atomic { DRAIN(i); if :: waiters > 0 -> flag = true :: else -> skip fi };
#endif
in:
		inside++;
		assert(inside == 1);
		inside--;
		/* release */
		f = fenced;
		if
		:: f == 0 ->
			/* the store into the buffer, then the look */
			atomic { pend_h[i] = true; npending++ }
			if
			:: waiters > 0 -> WAKE(i)
			:: else -> skip
			fi
		:: else ->
			/* counted down by an unlock that finds nobody waiting */
			if
			:: waiters == 0 -> atomic { pend_f[i] = true; fval[i] = f - 1; npending++ }
			:: else -> skip
			fi;
#if MUT != 2
			atomic { DRAIN(i); held = 0 }   /* a locked store */
#else
			atomic { pend_h[i] = true; npending++ }
#endif
			if
			:: waiters > 0 -> WAKE(i)
			:: else -> skip
			fi
		fi;
		round++
	od
}

/* The buffers drain by themselves, at any moment, each in order. */
active proctype drain()
{
	byte k;

end:	do
	:: atomic {
		npending > 0 -> k = 0;
		do
		:: k < NT && pend_f[k] -> DRAIN_F(k); break
		:: k < NT && !pend_f[k] && pend_h[k] -> DRAIN_H(k); break
		:: k < NT -> k++
		:: else -> break
		od
	   }
	od
}

init
{
	byte k = 0;

	atomic {
		do
		:: k < NT -> run thread(k); k++
		:: else -> break
		od
	}
}
