// SPDX-License-Identifier: MIT
//
// wheel_bench's driver for ratas (github.com/jsnell/ratas), built only when
// TW_BENCH_RATAS names a checkout of it: its header-only timer-wheel.h is
// included from there. Nothing of it is in this repository.
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

void churn(const size_t *pick, const int64_t *due, size_t n)
{
	for (size_t i = 0; i < n; i++)
		at(&events[pick[i]], due[i]);
}

void advance_to(int64_t now)
{
	Tick target = static_cast<Tick>(now);

	if (target > wheel->now())
		wheel->advance(target - wheel->now());
}

bool next(int64_t *when)
{
	const Tick none = std::numeric_limits<Tick>::max();
	Tick delta = wheel->ticks_to_next_event(none);

	if (delta == none)
		return false;
	*when = static_cast<int64_t>(wheel->now() + (delta ? delta : 1));
	return true;
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
	"ratas", setup, insert, cancel, churn, advance_to, next, fired, teardown
};
