/* cron: when a scheduled handler's ticks are (the fields `every` and `cron`).
 *
 * `every = P`: ticks at the multiples of P since the Unix epoch (UTC), so
 * every = "5m" ticks at :00, :05, ... whatever host or start time.
 *
 * `cron = "m h dom mon dow"`: the standard five fields, each a comma list
 * of `*`, N, N-M, each with an optional /step (`*` /step from the field's
 * first value; N/step from N to the field's last), months also jan..dec,
 * days of week also sun..sat (0 and 7 are Sunday), names in any case; and
 * @yearly, @monthly, @weekly, @daily, @hourly. When both day fields are
 * restricted (neither starts with `*`), a day matches when either does
 * (`0 0 1 * mon`: the first of the month and every Monday), as in Vixie
 * cron; else both must. The fields are read in the zone's local time
 * (tz.h; NULL: UTC). Daylight-saving time:
 *  - a local time that does not exist (clocks jump forward over it) runs at
 *    the first instant after the gap (02:30 on the day Berlin jumps from
 *    02:00 to 03:00 runs at 03:00), once however many times the gap holds;
 *  - a local time that happens twice (clocks go back) runs once, at the
 *    first (Berlin's 02:30 on the last Sunday of October runs in summer
 *    time, 00:30 UTC, not again an hour later).
 * Times are Unix ms. */
#ifndef LUASTREAM_CRON_H
#define LUASTREAM_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tz;

struct cron {
  uint64_t minute;       /* bit m: minute m (0-59) */
  uint32_t hour;         /* 0-23 */
  uint32_t dom;          /* 1-31 */
  uint16_t month;        /* 1-12 */
  uint8_t dow;           /* 0-6, Sunday 0 */
  bool dom_any, dow_any; /* the field starts with `*` */
};

/* Parses expr into *c. Returns 0, or -1 with why ("minute: 61 is out of range
 * 0-59", "has 4 fields, needs 5: minute hour day-of-month month day-of-week")
 * also for an expression that can never match (`0 0 31 2 *`). */
int cron_parse(const char *expr, struct cron *c, char *why, size_t whylen);

/* The first tick strictly after after_ms (Unix ms), in zone z (NULL: UTC);
 * -1 when none within 400 years, the calendar's cycle (cannot happen for
 * what cron_parse accepts). */
int64_t cron_next(const struct cron *c, const struct tz *z, int64_t after_ms);

/* `every`: the first multiple of period_ms strictly after after_ms. */
int64_t cron_every_next(int64_t period_ms, int64_t after_ms);

#endif
