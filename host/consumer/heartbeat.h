/* heartbeat: keeps a subscription's claim (a claiming or reclaim one, or a
 * `new` one given min_idle) on the entries it holds (held.h: in a lane or a
 * handler here): at least every min_idle / 3, its section of a
 * SCRIPT_KEEPALIVE call (scripts.h) re-stamps their idle time, so that
 * claiming and reclaim reads, this host's and other hosts', take only the
 * entries of a host that stopped, stalled past that or lost Redis, however
 * long a handler runs. It never takes back an entry another consumer claimed
 * meanwhile (the script checks the owner), nor while its consumer lease is
 * not this process's. One section at a time; none while nothing is held.
 *
 * With a consumer lease, its sections ride the lease's renewals (lease_ride):
 * the keepalive's one call per slot renews the leases there and carries the
 * heartbeats that are due. Without one (the C tests' readers), it sends its
 * own calls of the same script, with no lease to renew or check.
 *
 * The heartbeat needs the event loop to turn: a handler that never yields
 * holds it for up to --watchdog, so min_idle must exceed that plus one
 * heartbeat for such handlers (min_idle_margin.h).
 *
 * With max_run, an entry whose handler has run longer (held_started says
 * since when) is logged at warn and counted (luastream_handler_overran_total)
 * at the first beat past it, and no longer re-stamped: another consumer's
 * claiming or reclaim read may take it once idle min_idle, so a runaway
 * handler does not hold its entry for ever. The handler is not stopped. */
#ifndef LUASTREAM_HEARTBEAT_H
#define LUASTREAM_HEARTBEAT_H

#include "broker.h"
#include "clock.h"
#include "held.h"
#include "lease.h"
#include "runtime.h"

typedef struct heartbeat heartbeat;

/* A heartbeat was answered (the subscription may have waited for it to
 * drain). */
typedef void heartbeat_answered_fn(void *data);

/* For the entries of held (borrowed, read at each beat, its overran flags
 * set) read from spec's
 * stream (key 0) and retry_key (key 1), both borrowed; spec is replaced by
 * heartbeat_set_spec when the handler is swapped. NULL when out of memory
 * or when spec has no min_idle (nothing to keep). */
heartbeat *heartbeat_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                         const char *retry_key, struct held *held, heartbeat_answered_fn *answered,
                         void *data);
void heartbeat_set_spec(heartbeat *hb, const struct handler_spec *spec);
/* Beats every min_idle / 3 from now on, until heartbeat_stop: riding l
 * (the subscription's consumer lease), or on its own when l is NULL. */
void heartbeat_start(heartbeat *hb, lease *l);
void heartbeat_stop(heartbeat *hb);
/* Beats sent and not answered (0 or 1). */
unsigned heartbeat_pending(const heartbeat *hb);
/* The interval between beats, ms. */
uint64_t heartbeat_interval_ms(const struct handler_spec *spec);
void heartbeat_free(heartbeat *hb);

#endif
