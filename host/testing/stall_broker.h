/* stall_broker: one host's door to the harness's shared broker, through
 * which that host can be stalled (app:stall) while the others run.
 *
 * Everything goes through to the broker beneath: commands run on the
 * server as they would while a real process is stopped (those it sent
 * before the stall, a blocked read answered when an entry arrives). What
 * comes back (replies, a connection going up or down) is held while the
 * host is stalled, as a stopped process's socket holds it, and delivered in
 * order from a 0-ms timer on the host's clock view when the stall ends:
 * after the timers that fell due meanwhile, as a loop that resumes runs its
 * timers before it polls. Faults are told at once. */
#ifndef LUASTREAM_STALL_BROKER_H
#define LUASTREAM_STALL_BROKER_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"

/* inner and clock are borrowed (clock: the host's view, clock_virtual.h).
 * NULL when out of memory. Free after every connection was closed. */
broker *stall_broker_new(broker *inner, lclock *clock);
/* true: from now on hold what comes back; false: deliver what was held (at
 * the next settle) and hold nothing more. */
void stall_broker_stall(broker *b, bool stalled);

#endif
