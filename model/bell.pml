/*
 * bell.pml -- src/service/bell.h, where the reaper sleeps until a kick and
 * an executor until work is posted: no ring is lost.
 *
 * A sleeper holds the mutex, finds its condition false, notes the ring
 * count, counts itself a sleeper, lets go of the mutex and sleeps on the
 * ring count (a futex: the kernel puts it to sleep only if the count is
 * still what it noted, in one step), then, woken, uncounts itself and
 * takes the mutex again and looks at its condition again. A ringer makes
 * the condition true under the mutex, then (holding it or not) adds one
 * to the ring count and, if a sleeper is counted, wakes one (or every
 * one). Each step here is one atomic instruction or one locked section;
 * the counts are changed by locked instructions and read after one, so
 * SPIN's interleavings of whole steps are the orders x86 allows.
 *
 * The sleepers are executors: each takes one piece of posted work at a
 * time and ends when told to stop with none left. The poster posts WORK
 * pieces, one ring each, then the stop, with a ring for every sleeper.
 * Property: every process ends (a sleeper asleep for ever with work
 * posted, or the stop, is an invalid end state), and all the work was
 * taken.
 *
 * SCEN 1: one sleeper, two pieces, each rung after the mutex is let go
 * (the executors' hand-off, wake_executor); SCEN 2: two sleepers, the
 * same; SCEN 3: one sleeper, each piece rung with the mutex held (the
 * reaper's kick). MUT 1 (every scenario): the sleeper notes the ring
 * count after it let go of the mutex, right before its sleep, so a ring
 * in between is taken for the count it sleeps on; MUT 2 (scenario 2):
 * the stop wakes one sleeper, not every one. SPIN must find the sleeper
 * left asleep in each. (Which order the ringer moves the count and looks
 * at the sleepers in does not matter: a sleeper counts itself under the
 * mutex, before the change the ring follows.)
 */
#ifndef SCEN
#define SCEN 1
#endif
#ifndef MUT
#define MUT 0
#endif
#if SCEN == 2
#define NS 2
#else
#define NS 1
#endif
#define WORK 2

bool mu;             /* the mutex: held or not */
byte work;           /* posted, not taken */
byte taken;
bool stop;
byte rings;          /* the futex word */
byte sleepers;
bool asleep[NS];     /* on the futex */

inline lock() { atomic { !mu -> mu = true } }
inline unlock() { mu = false }

/* futex_wake of one sleeper, or of all */
inline wake(all) {
	atomic {
		k = 0;
		do
		:: k < NS && asleep[k] -> asleep[k] = false; if :: !all -> break :: else -> k++ fi
		:: k < NS && !asleep[k] -> k++
		:: else -> break
		od
	}
}

inline ring(all) {
	rings++;
	if :: sleepers > 0 -> wake(all) :: else -> skip fi
}

proctype sleeper(byte i)
{
	byte seen, k;

	lock();
	do
	:: work > 0 -> work--; taken++; unlock(); lock()
	:: work == 0 && stop -> break
	:: work == 0 && !stop ->
#if MUT != 1
		seen = rings;
#endif
		sleepers++;
		unlock();
#if MUT == 1
		seen = rings;
#endif
		atomic { if :: rings == seen -> asleep[i] = true :: else -> skip fi }
		!asleep[i];
		sleepers--;
		lock()
	od;
	unlock()
}

active proctype poster()
{
	byte n = 0, k;

	do
	:: n < WORK ->
		lock();
		work++;
#if SCEN == 3
		ring(false);
		unlock();
#else
		unlock();
		ring(false);
#endif
		n++
	:: else -> break
	od;
	lock();
	stop = true;
#if MUT != 2
	ring(true);
#else
	ring(false);
#endif
	unlock()
}

active proctype checker()
{
	timeout -> assert(taken == WORK && work == 0)
}

init
{
	byte k = 0;
	atomic {
		do
		:: k < NS -> run sleeper(k); k++
		:: else -> break
		od
	}
}
