/* min_idle_margin: min_idle against --watchdog (see min_idle_margin.h). */
#include "min_idle_margin.h"

#include <stdio.h>

#include "heartbeat.h"

bool min_idle_margin_short(const struct handler_spec *spec, uint64_t watchdog_ms) {
  if (spec->min_idle_ms <= 0) return false;
  uint64_t min_idle = (uint64_t)spec->min_idle_ms;
  return min_idle < watchdog_ms + heartbeat_interval_ms(spec);
}

/* m >= watchdog + m / 3 holds from m = 1.5 x watchdog on */
uint64_t min_idle_margin_enough(uint64_t watchdog_ms) {
  return watchdog_ms + (watchdog_ms + 1) / 2;
}

void min_idle_margin_advice(uint64_t watchdog_ms, char *out, size_t len) {
  snprintf(out, len,
           "if this handler may run that long without yielding (ls.sleep, ls.redis.call and "
           "ls.http yield), set min_idle to at least %llums or lower --watchdog",
           (unsigned long long)min_idle_margin_enough(watchdog_ms));
}
