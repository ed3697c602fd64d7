/* status_rules: what `luastream status` calls a problem, and how it writes
 * a length of time, as pure functions (no I/O) so that the rules are tested
 * on their own.
 *
 * The rules, for one group of one stream (docs/operations.md, "status"):
 *   - a consumer is stalled when it holds pending entries and no running
 *     host holds its name: its lease (lease.h) is gone, or was last renewed
 *     longer ago than STATUS_LEASE_LATE_MS. Not its idle time: on Redis 7.0
 *     an empty blocking read does not reset it, so a host that reads and
 *     finds nothing looks idle;
 *   - entries wait unread when the group is behind (lag above 0) and none of
 *     its consumers has read within the stall limit: the handler's min_idle
 *     (past it, a claiming read may take entries over), else
 *     STATUS_STALL_DEFAULT_MS (or it has none): a read that brings entries
 *     resets a consumer's idle time on every version. One look cannot tell
 *     a growing lag from a passing one, but a lag that no one is reading is
 *     one;
 *   - entries are pending unretried when none of the group's handlers claims
 *     pending entries (all read `new`) and the first pending entry has been
 *     idle past the stall limit: a `new` read takes an entry again only when
 *     the host of its consumer starts again under the same name;
 *   - under --watch, a lag grows when it rose at each of the last
 *     STATUS_LAG_RISES refreshes: a steady rise, not the ups and downs of a
 *     group that keeps up in batches. */
#ifndef LUASTREAM_STATUS_RULES_H
#define LUASTREAM_STATUS_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "lease.h"

#define STATUS_STALL_DEFAULT_MS 60000 /* the stall limit when no min_idle is known */
/* A running host renews its leases every LEASE_RENEW_MS: one renewal may be
 * late (a busy loop, a reconnect), a whole interval more is a host that is
 * stopped, paused or stalled. */
#define STATUS_LEASE_LATE_MS (2 * LEASE_RENEW_MS)
#define STATUS_LEASE_NONE (-2) /* PTTL of a key that does not exist */
#define STATUS_LAG_RISES 3     /* refreshes in a row a lag must rise */
#define STATUS_LAG_HISTORY (STATUS_LAG_RISES + 1)

/* ms as a person reads it at a glance: "0ms", "850ms", "1.2s", "42s", "3m",
 * "2h", "5d" (below 10 of a unit, one decimal: "1.5m", "2.5h"). Negative:
 * "-". Returns out. */
const char *status_format_ms(long long ms, char *out, size_t len);
/* Unix ms as "2026-12-07 22:30:00 UTC". Returns out. */
const char *status_format_utc(long long ms, char *out, size_t len);

/* The stall limit for a handler's min_idle in ms (<= 0: not set). */
long long status_stall_after(long long min_idle_ms);

/* How long ago a lease with ttl_ms left to live (PTTL) was taken or last
 * renewed; -1 when there is none (STATUS_LEASE_NONE). */
long long status_lease_age(long long ttl_ms);

/* A consumer with pending entries and its lease's PTTL. */
bool status_consumer_stalled(long long pending, long long lease_ttl_ms);

/* claims: a handler of the group claims pending entries; oldest_idle_ms: the
 * idle time of its first pending entry, -1 when nothing is pending. */
bool status_pending_unretried(bool claims, long long oldest_idle_ms, long long stall_after_ms);

/* waiting: entries not yet delivered (the lag, or 1 when Redis cannot count
 * them but the group's last delivered id is behind the stream's last id);
 * freshest_idle_ms: the smallest idle time of the group's consumers, -1 when
 * it has none. */
bool status_waiting_unread(long long waiting, long long freshest_idle_ms, long long stall_after_ms);

/* lags: the group's lag at the last n refreshes, oldest first, -1 where it
 * was unknown. True when the newest STATUS_LAG_RISES + 1 are all known and
 * each is above the one before. */
bool status_lag_growing(const long long *lags, int n);

#endif
