/* clock_virtual: the test harness's clock (a backend of clock.h). */
#ifndef LUASTREAM_CLOCK_VIRTUAL_H
#define LUASTREAM_CLOCK_VIRTUAL_H

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

#endif
