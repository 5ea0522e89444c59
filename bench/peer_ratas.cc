// SPDX-License-Identifier: MIT
//
// wheel_bench's driver for ratas (github.com/jsnell/ratas), built only when
// TW_BENCH_RATAS names a checkout of it: its header-only timer-wheel.h is
// included from there and inlined into the loops here, built with -O3
// -DNDEBUG (bench/CMakeLists.txt). Nothing of it is in this repository.
#include <limits>
#include <new>

#include "peer.h"
#include "timer-wheel.h"

namespace {

long nfired;

struct Fire {
	void operator()() const { ++nfired; }
};
typedef TimerEvent<Fire> Event;

TimerWheel *wheel;
Event *events;
size_t nevents;

void setup(size_t n)
{
	wheel = new TimerWheel(0);
	events = static_cast<Event *>(::operator new(n * sizeof(Event)));
	for (size_t i = 0; i < n; i++)
		new (&events[i]) Event(Fire());
	nevents = n;
	nfired = 0;
}

// ratas schedules relative to its clock, and only into the future.
inline void at(Event *e, int64_t due)
{
	Tick now = wheel->now();
	Tick when = static_cast<Tick>(due);

	wheel->schedule(e, when > now ? when - now : 1);
}

void insert(const int64_t *due, size_t n)
{
	for (size_t i = 0; i < n; i++)
		at(&events[i], due[i]);
}

void cancel(const size_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		events[order[i]].cancel();
}

// schedule() on a scheduled event moves it.
void churn(const size_t *pick, const int64_t *due, size_t c)
{
	for (size_t j = 0; j < c; j++)
		at(&events[pick[j]], due[j]);
}

inline void advance(int64_t now)
{
	Tick target = static_cast<Tick>(now);

	if (target > wheel->now())
		wheel->advance(target - wheel->now());
}

void expire_step(long *advances, long *idle)
{
	const Tick none = std::numeric_limits<Tick>::max();
	long a = 0, z = 0;

	for (;;) {
		Tick delta = wheel->ticks_to_next_event(none);
		long before = nfired;

		if (delta == none)
			break;
		wheel->advance(delta ? delta : 1);
		a++;
		z += nfired == before;
	}
	*advances = a;
	*idle = z;
}

void expire_jump(int64_t now)
{
	advance(now);
}

void idle_reset(const size_t *pick, size_t n, size_t every, int64_t delay)
{
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		wheel->schedule(&events[pick[i]], static_cast<Tick>(delay));
		if (--k == 0) {
			k = every;
			wheel->advance(1);
		}
	}
}

void idle_reset_window(const size_t *pick, size_t n, size_t every,
		       int64_t delay, int64_t width)
{
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		wheel->schedule_in_range(&events[pick[i]], static_cast<Tick>(delay),
					 static_cast<Tick>(delay + width));
		if (--k == 0) {
			k = every;
			wheel->advance(1);
		}
	}
}

long fired()
{
	return nfired;
}

void teardown()
{
	for (size_t i = 0; i < nevents; i++)
		events[i].~Event();
	::operator delete(events);
	delete wheel;
}

} // namespace

extern "C" const struct peer_ops peer_ratas = {
	"ratas", setup, insert, cancel, churn, expire_step, NULL, expire_jump,
	idle_reset, advance, fired, teardown, nullptr, idle_reset_window
};
