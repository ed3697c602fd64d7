/* clock_virtual: the test harness's clock (a backend of clock.h). */
#ifndef LUASTREAM_CLOCK_VIRTUAL_H
#define LUASTREAM_CLOCK_VIRTUAL_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"

/* Time moves only when told.
 * now_ms (and fresh_ms) starts at 0 and wall_ms is wall_start_ms + now_ms. Timers fire only
 * inside clock_virtual_advance / clock_virtual_settle, in (due time, arming
 * order) order, each with now_ms equal to its own due time. All timers must be
 * freed before the clock. Returns NULL when out of memory. */
lclock *clock_virtual_new(uint64_t wall_start_ms);
/* Moves now forward by ms, firing every timer that falls due up to the new
 * time, including timers armed by those callbacks within the window. Returns
 * the new now_ms. */
uint64_t clock_virtual_advance(lclock *c, uint64_t ms);
/* Moves now forward by ms without firing anything, as when the whole process
 * is stopped (SIGSTOP, a paused VM) or its loop stalls: the timers that fell
 * due fire late, at the next settle or advance, in (due time, arming order)
 * order, all at the new now. */
void clock_virtual_jump(lclock *c, uint64_t ms);
/* Fires everything due at the current time (0-ms timers, again and again,
 * until none is due). Aborts after a million firings: a 0-ms timer that keeps
 * re-arming itself would otherwise hang the test. */
void clock_virtual_settle(lclock *c);

/* One host's view of clock c (a virtual clock), for harnesses that run
 * several hosts on one clock: the same time, and timers on c's heap, which
 * fire in the same order, except while the view is stalled
 * (clock_virtual_stall): its timers that fall due then wait, and fire when
 * the stall ends, at the next settle or advance, in the order they fell
 * due, all at the time it ends; the other hosts' timers run meanwhile.
 * Freed with c (freeing the view does nothing), so that a timer that
 * outlives its host never points at a freed view. NULL when out of memory. */
lclock *clock_virtual_view(lclock *c);
/* Stalls (true) or resumes (false) a view of clock_virtual_view: a host
 * whose process is stopped or whose loop is stuck while the others run. */
void clock_virtual_stall(lclock *view, bool stalled);

#endif
