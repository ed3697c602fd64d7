/* status_rules: the problems `luastream status` flags, and its durations
 * (status_rules.h). */
#include "status_rules.h"

#include <stdio.h>
#include <time.h>

const char *status_format_ms(long long ms, char *out, size_t len) {
  static const struct {
    long long ms;
    const char *unit;
  } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  if (ms < 0) {
    snprintf(out, len, "-");
    return out;
  }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (ms < units[i].ms) continue;
    /* tenths, rounded down: "59.99s" must not read "60.0s" */
    long long tenths = ms * 10 / units[i].ms;
    if (tenths < 100 && tenths % 10 != 0)
      snprintf(out, len, "%lld.%lld%s", tenths / 10, tenths % 10, units[i].unit);
    else
      snprintf(out, len, "%lld%s", ms / units[i].ms, units[i].unit);
    return out;
  }
  snprintf(out, len, "%lldms", ms);
  return out;
}

long long status_stall_after(long long min_idle_ms) {
  return min_idle_ms > 0 ? min_idle_ms : STATUS_STALL_DEFAULT_MS;
}

long long status_lease_age(long long ttl_ms) {
  if (ttl_ms == STATUS_LEASE_NONE) return -1;
  /* -1, a key without a time to live, is no lease of a host's: not late */
  return ttl_ms < 0 || ttl_ms > LEASE_TTL_MS ? 0 : LEASE_TTL_MS - ttl_ms;
}

bool status_consumer_stalled(long long pending, long long lease_ttl_ms) {
  long long age = status_lease_age(lease_ttl_ms);
  return pending > 0 && (age < 0 || age > STATUS_LEASE_LATE_MS);
}

bool status_pending_unretried(bool claims, long long oldest_idle_ms, long long stall_after_ms) {
  return !claims && oldest_idle_ms > stall_after_ms;
}

bool status_waiting_unread(long long waiting, long long freshest_idle_ms,
                           long long stall_after_ms) {
  return waiting > 0 && (freshest_idle_ms < 0 || freshest_idle_ms > stall_after_ms);
}

bool status_lag_growing(const long long *lags, int n) {
  if (n < STATUS_LAG_RISES + 1) return false;
  for (int i = n - STATUS_LAG_RISES; i < n; i++)
    if (lags[i - 1] < 0 || lags[i] <= lags[i - 1]) return false;
  return true;
}

const char *status_format_utc(long long ms, char *out, size_t len) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return out;
}
