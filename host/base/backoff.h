/* backoff: the one way the host spaces out attempts after failures: a wait
 * that doubles after each failure, from a first wait up to a cap (reconnects,
 * a subscription's retries, worker restarts). */
#ifndef LUASTREAM_BACKOFF_H
#define LUASTREAM_BACKOFF_H

#include <stdint.h>

/* The wait after prev_ms (0: none yet): min_ms first, then twice the last
 * one, at most max_ms. */
uint64_t backoff_next(uint64_t prev_ms, uint64_t min_ms, uint64_t max_ms);

/* The wait after the nth failure in a row (n <= 1: the first): min_ms
 * doubled n - 1 times, at most max_ms. */
uint64_t backoff_nth(int n, uint64_t min_ms, uint64_t max_ms);

#endif
