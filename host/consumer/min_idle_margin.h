/* min_idle_margin: whether a handler's min_idle (claiming, reclaim, or a `new`
 * one given it) leaves room for the heartbeat (heartbeat.h) when a handler
 * does not yield.
 *
 * The heartbeat re-stamps held entries every min_idle / 3, but only when the
 * event loop turns: a handler that runs without yielding (no ls.sleep,
 * ls.redis.call, ls.http, ...) holds the loop for up to --watchdog before
 * the process is ended. If min_idle is below --watchdog plus one heartbeat,
 * an entry whose handler is still running can look abandoned, and another
 * consumer takes it and runs it a second time. `luastream check` and the
 * host at start warn of it (it is not refused: handlers that always yield
 * soon are safe with a short min_idle). No I/O. */
#ifndef LUASTREAM_MIN_IDLE_MARGIN_H
#define LUASTREAM_MIN_IDLE_MARGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* Whether spec claims (claiming or reclaim) with a min_idle below
 * watchdog_ms plus one heartbeat (heartbeat_interval_ms). */
bool min_idle_margin_short(const struct handler_spec *spec, uint64_t watchdog_ms);
/* A min_idle (ms) that is enough for watchdog_ms: 1.5 times it. */
uint64_t min_idle_margin_enough(uint64_t watchdog_ms);
/* Why it matters (a log line's msg, the same for every handler). */
#define MIN_IDLE_MARGIN_MSG                                                                  \
  "min_idle is below --watchdog plus one heartbeat (min_idle / 3): a handler that runs "     \
  "without yielding holds the event loop, and with it the heartbeat that keeps its entries " \
  "claimed, for up to --watchdog, so another consumer may take an entry that is still "      \
  "running and run it twice"
/* What to do about it, for watchdog_ms. */
void min_idle_margin_advice(uint64_t watchdog_ms, char *out, size_t len);

#endif
