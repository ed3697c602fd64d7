/* Tests for cron.c and tz.c: cron expressions, the next tick, `every`, and
 * time zones read from the system's tzdata (daylight-saving gaps and
 * repeats in Europe/Berlin and America/New_York, the POSIX footer past the
 * TZif table). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"
#include "task.h"
#include "tz.h"

static char why[256];

/* "YYYY-MM-DDTHH:MM" UTC as Unix ms. */
static int64_t at(const char *iso) {
  struct tm tm = {0};
  if (strptime(iso, "%Y-%m-%dT%H:%M", &tm) == NULL) TEST_FAIL_("bad time %s", iso);
  return (int64_t)timegm(&tm) * 1000;
}

static const char *iso(int64_t ms) {
  static char buf[32];
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M", &tm);
  return buf;
}

static struct tz *zone(const char *name) {
  struct tz *z = NULL;
  if (tz_load(name, &z, why, sizeof why) != 0) TEST_FAIL_("tz_load %s: %s", name, why);
  return z;
}

/* The next tick of expr after `from` in zone (NULL: UTC), as text. */
static const char *next(const char *expr, const struct tz *z, const char *from) {
  struct cron c;
  if (cron_parse(expr, &c, why, sizeof why) != 0) TEST_FAIL_("\"%s\" refused: %s", expr, why);
  int64_t n = cron_next(&c, z, at(from));
  if (n < 0) TEST_FAIL_("\"%s\": no next tick", expr);
  return iso(n);
}

static const char *refused(const char *expr) {
  struct cron c;
  why[0] = '\0';
  if (cron_parse(expr, &c, why, sizeof why) == 0) TEST_FAIL_("\"%s\" accepted", expr);
  return why;
}

TEST_IMPL(cron_refuses_bad_expressions) {
  ASSERT_STR_EQ(refused("61 * * * *"), "minute: 61 is out of range 0-59");
  ASSERT_STR_EQ(refused("* 24 * * *"), "hour: 24 is out of range 0-23");
  ASSERT_STR_EQ(refused("* * 0 * *"), "day-of-month: 0 is out of range 1-31");
  ASSERT_CONTAINS(refused("* * * *"), "has 4 fields, needs 5");
  ASSERT_CONTAINS(refused("* * * * * *"), "has more than 5 fields");
  ASSERT_CONTAINS(refused(""), "has 0 fields");
  ASSERT_CONTAINS(refused("* * * foo *"), "month: \"foo\" is not a number or a name such as jan");
  ASSERT_STR_EQ(refused("5-1 * * * *"), "minute: the range 5-1 runs backwards");
  ASSERT_STR_EQ(refused("*/0 * * * *"), "minute: step 0 is out of range 1-59");
  ASSERT_CONTAINS(refused("1x * * * *"), "is not a value, range or step");
  ASSERT_CONTAINS(refused("0 0 30 2 *"), "never matches");
  ASSERT_CONTAINS(refused("@often"), "is not one of @yearly");
  ASSERT_CONTAINS(refused("*/ * * * *"), "a step needs a number");
}

TEST_IMPL(cron_next_steps_lists_ranges) {
  ASSERT_STR_EQ(next("*/5 * * * *", NULL, "2026-01-01T00:02"), "2026-01-01T00:05");
  ASSERT_STR_EQ(next("*/5 * * * *", NULL, "2026-01-01T00:05"), "2026-01-01T00:10");
  ASSERT_STR_EQ(next("*/5 * * * *", NULL, "2026-01-01T23:59"), "2026-01-02T00:00");
  ASSERT_STR_EQ(next("7,19 * * * *", NULL, "2026-01-01T00:08"), "2026-01-01T00:19");
  ASSERT_STR_EQ(next("10-20/5 * * * *", NULL, "2026-01-01T00:16"), "2026-01-01T00:20");
  ASSERT_STR_EQ(next("10-20/5 * * * *", NULL, "2026-01-01T00:20"), "2026-01-01T01:10");
  ASSERT_STR_EQ(next("50/5 * * * *", NULL, "2026-01-01T00:56"), "2026-01-01T01:50");
  ASSERT_STR_EQ(next("0 9 * * *", NULL, "2026-01-01T09:00"), "2026-01-02T09:00");
  ASSERT_STR_EQ(next("@hourly", NULL, "2026-01-01T09:30"), "2026-01-01T10:00");
  ASSERT_STR_EQ(next("@monthly", NULL, "2026-01-15T00:00"), "2026-02-01T00:00");
  ASSERT_STR_EQ(next("@yearly", NULL, "2026-01-15T00:00"), "2027-01-01T00:00");
  /* End of year rollover, 31-day months only. */
  ASSERT_STR_EQ(next("0 0 31 * *", NULL, "2026-04-01T00:00"), "2026-05-31T00:00");
}

TEST_IMPL(cron_names_and_days) {
  /* 2026-01-01 is a Thursday. */
  ASSERT_STR_EQ(next("0 9 * * mon-fri", NULL, "2026-01-02T10:00"), "2026-01-05T09:00");
  ASSERT_STR_EQ(next("0 9 * JAN-mar Sat", NULL, "2026-03-29T00:00"), "2027-01-02T09:00");
  /* Sunday is 0 and 7. */
  ASSERT_STR_EQ(next("0 0 * * 7", NULL, "2026-01-01T00:00"), "2026-01-04T00:00");
  ASSERT_STR_EQ(next("0 0 * * 0", NULL, "2026-01-01T00:00"), "2026-01-04T00:00");
  ASSERT_STR_EQ(next("0 0 * * 5-7", NULL, "2026-01-03T00:00"), "2026-01-04T00:00");
  /* N/step runs to the field's end, 7 (Sunday) for days of week, as 5-7. */
  ASSERT_STR_EQ(next("0 0 * * 5/1", NULL, "2026-01-03T00:00"), "2026-01-04T00:00");
  ASSERT_STR_EQ(next("0 0 * * 7/1", NULL, "2026-01-01T00:00"), "2026-01-04T00:00");
  ASSERT_STR_EQ(next("0 0 * * 5/2", NULL, "2026-01-02T00:00"), "2026-01-04T00:00");
  /* Both day fields restricted: either matches (Friday the 2nd comes first). */
  ASSERT_STR_EQ(next("0 0 13 * fri", NULL, "2026-01-01T00:00"), "2026-01-02T00:00");
  ASSERT_STR_EQ(next("0 0 13 * fri", NULL, "2026-01-10T00:00"), "2026-01-13T00:00");
  /* One starts with '*': both must (a Friday the 13th: February 2026). */
  ASSERT_STR_EQ(next("0 0 13 * */1", NULL, "2026-01-14T00:00"), "2026-02-13T00:00");
  ASSERT_STR_EQ(next("0 0 */1 * fri", NULL, "2026-01-03T00:00"), "2026-01-09T00:00");
}

TEST_IMPL(cron_leap_years) {
  ASSERT_STR_EQ(next("0 0 29 2 *", NULL, "2026-03-01T00:00"), "2028-02-29T00:00");
  /* 2100 is not a leap year, 2000 was. */
  ASSERT_STR_EQ(next("0 0 29 feb *", NULL, "2096-03-01T00:00"), "2104-02-29T00:00");
  ASSERT_STR_EQ(next("0 0 29 feb *", NULL, "1999-01-01T00:00"), "2000-02-29T00:00");
  ASSERT_STR_EQ(next("0 12 28 2 *", NULL, "2100-02-28T12:00"), "2101-02-28T12:00");
  /* Both day fields, one starting with '*': a Sunday the 29th of February,
   * 40 years apart around 2100. */
  ASSERT_STR_EQ(next("0 0 29 2 */7", NULL, "2026-01-01T00:00"), "2032-02-29T00:00");
  ASSERT_STR_EQ(next("0 0 29 2 */7", NULL, "2088-03-01T00:00"), "2128-02-29T00:00");
  /* Never, in any 400-year cycle of the calendar: refused. */
  ASSERT_CONTAINS(refused("0 0 31 4 */7"), "never matches");
  ASSERT_CONTAINS(refused("0 0 30 2 */1"), "never matches");
}

TEST_IMPL(cron_daylight_saving_berlin) {
  struct tz *z = zone("Europe/Berlin");
  /* Winter: 09:00 CET is 08:00 UTC; summer: 07:00 UTC. */
  ASSERT_STR_EQ(next("0 9 * * *", z, "2026-01-10T12:00"), "2026-01-11T08:00");
  ASSERT_STR_EQ(next("0 9 * * *", z, "2026-07-10T12:00"), "2026-07-11T07:00");
  /* 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC). 02:30 does not
   * exist: it runs at the end of the gap, then at 02:30 CEST the day after. */
  ASSERT_STR_EQ(next("30 2 * * *", z, "2026-03-28T12:00"), "2026-03-29T01:00");
  ASSERT_STR_EQ(next("30 2 * * *", z, "2026-03-29T01:00"), "2026-03-30T00:30");
  /* Every 15 minutes across the gap: 01:45 CET, then once at 03:00 CEST
   * (the gap's 02:00 .. 02:45 and 03:00 itself are one instant), 03:15. */
  ASSERT_STR_EQ(next("*/15 * * * *", z, "2026-03-29T00:30"), "2026-03-29T00:45");
  ASSERT_STR_EQ(next("*/15 * * * *", z, "2026-03-29T00:45"), "2026-03-29T01:00");
  ASSERT_STR_EQ(next("*/15 * * * *", z, "2026-03-29T01:00"), "2026-03-29T01:15");
  /* 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00 UTC). 02:30
   * happens twice: it runs once, at the first (00:30 UTC). */
  ASSERT_STR_EQ(next("30 2 * * *", z, "2026-10-24T12:00"), "2026-10-25T00:30");
  ASSERT_STR_EQ(next("30 2 * * *", z, "2026-10-25T00:30"), "2026-10-26T01:30");
  /* Every 30 minutes: the repeated hour (01:00 .. 02:00 UTC) runs nothing. */
  ASSERT_STR_EQ(next("*/30 * * * *", z, "2026-10-25T00:00"), "2026-10-25T00:30");
  ASSERT_STR_EQ(next("*/30 * * * *", z, "2026-10-25T00:30"), "2026-10-25T02:00");
  ASSERT_STR_EQ(next("*/30 * * * *", z, "2026-10-25T02:00"), "2026-10-25T02:30");
  tz_free(z);
}

TEST_IMPL(cron_daylight_saving_new_york) {
  struct tz *z = zone("America/New_York");
  /* 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00 UTC). */
  ASSERT_STR_EQ(next("0 2 * * *", z, "2026-03-07T12:00"), "2026-03-08T07:00");
  ASSERT_STR_EQ(next("0 2 * * *", z, "2026-03-08T07:00"), "2026-03-09T06:00");
  /* 2026-11-01: 02:00 EDT goes back to 01:00 EST (06:00 UTC); 01:30 runs
   * once, at 05:30 UTC (EDT). */
  ASSERT_STR_EQ(next("30 1 * * *", z, "2026-10-31T12:00"), "2026-11-01T05:30");
  ASSERT_STR_EQ(next("30 1 * * *", z, "2026-11-01T05:30"), "2026-11-02T06:30");
  tz_free(z);
}

TEST_IMPL(tz_offsets_and_footer) {
  struct tz *z = zone("Europe/Berlin");
  ASSERT_INT_EQ(tz_offset(z, at("2026-01-01T00:00") / 1000), 3600);
  ASSERT_INT_EQ(tz_offset(z, at("2026-07-01T00:00") / 1000), 7200);
  ASSERT_INT_EQ(tz_offset(z, at("2026-03-29T00:59") / 1000), 3600);
  ASSERT_INT_EQ(tz_offset(z, at("2026-03-29T01:00") / 1000), 7200);
  ASSERT_STR_EQ(iso(tz_next_change(z, at("2026-01-01T00:00") / 1000) * 1000), "2026-03-29T01:00");
  /* Past the file's table (2037 at most): the POSIX footer's rule. */
  ASSERT_INT_EQ(tz_offset(z, at("2050-07-01T00:00") / 1000), 7200);
  ASSERT_INT_EQ(tz_offset(z, at("2050-12-01T00:00") / 1000), 3600);
  ASSERT_STR_EQ(iso(tz_next_change(z, at("2050-01-01T00:00") / 1000) * 1000), "2050-03-27T01:00");
  ASSERT_STR_EQ(iso(tz_next_change(z, at("2050-04-01T00:00") / 1000) * 1000), "2050-10-30T01:00");
  ASSERT_STR_EQ(next("0 12 1 7 *", z, "2050-01-01T00:00"), "2050-07-01T10:00");
  ASSERT_STR_EQ(next("30 2 * * *", z, "2050-03-26T12:00"), "2050-03-27T01:00");
  tz_free(z);
  z = zone("UTC");
  ASSERT_INT_EQ(tz_offset(z, 0), 0);
  ASSERT_STR_EQ(next("0 9 * * *", z, "2026-01-10T12:00"), "2026-01-11T09:00");
  tz_free(z);
  /* A southern zone: in daylight-saving time across the new year. */
  z = zone("Australia/Sydney");
  ASSERT_INT_EQ(tz_offset(z, at("2050-01-01T00:00") / 1000), 39600);
  ASSERT_INT_EQ(tz_offset(z, at("2050-07-01T00:00") / 1000), 36000);
  tz_free(z);
}

TEST_IMPL(tz_refuses_unknown_names) {
  struct tz *z = NULL;
  ASSERT_INT_EQ(tz_load("Europe/Atlantis", &z, why, sizeof why), -1);
  ASSERT_CONTAINS(why, "unknown time zone \"Europe/Atlantis\"");
  ASSERT_INT_EQ(tz_load("../../etc/passwd", &z, why, sizeof why), -1);
  ASSERT_CONTAINS(why, "unknown time zone");
  ASSERT_INT_EQ(tz_load("/etc/passwd", &z, why, sizeof why), -1);
  ASSERT_INT_EQ(tz_load("", &z, why, sizeof why), -1);
  ASSERT_NULL(z);
  /* A zone with leap seconds (right/...): refused, its times would be off. */
  static const unsigned char leaps[44 + 6 + 4 + 8] = {'T',
                                                      'Z',
                                                      'i',
                                                      'f',
                                                      0,
                                                      [20 + 11] = 1 /* leapcnt */,
                                                      [20 + 19] = 1 /* typecnt */,
                                                      [20 + 23] = 4 /* charcnt */,
                                                      [50] = 'U',
                                                      'T',
                                                      'C',
                                                      0,
                                                      [54 + 3] = 27,
                                                      [54 + 7] = 1};
  ASSERT_INT_EQ(tz_parse(leaps, sizeof leaps, &z, why, sizeof why), -1);
  ASSERT_CONTAINS(why, "a zone with leap seconds (right/...) is not supported");
  ASSERT_NULL(z);
  static const unsigned char junk[] = "TZif2 not really a zone file at all, just some words";
  ASSERT_INT_EQ(tz_parse(junk, sizeof junk, &z, why, sizeof why), -1);
  ASSERT_NULL(z);
}

TEST_IMPL(cron_every_aligned_to_epoch) {
  ASSERT_INT_EQ(cron_every_next(300000, 0), 300000);
  ASSERT_INT_EQ(cron_every_next(300000, 299999), 300000);
  ASSERT_INT_EQ(cron_every_next(300000, 300000), 600000);
  ASSERT_STR_EQ(iso(cron_every_next(300000, at("2026-01-01T00:02"))), "2026-01-01T00:05");
  ASSERT_STR_EQ(iso(cron_every_next(3600000, at("2026-01-01T00:02"))), "2026-01-01T01:00");
}

/* Every prefix of a real zone file, and the file with each header count
 * made huge: refused or read, never read past the bytes (ASan). */
TEST_IMPL(tz_parse_truncated_and_bad_counts) {
  FILE *f = fopen(TZ_DIR "/Europe/Berlin", "rb");
  if (f == NULL) TEST_FAIL_("cannot open %s", TZ_DIR "/Europe/Berlin");
  static unsigned char file[1 << 16];
  size_t n = fread(file, 1, sizeof file, f);
  fclose(f);
  struct tz *z = NULL;
  ASSERT_INT_EQ(tz_parse(file, n, &z, why, sizeof why), 0);
  tz_free(z);
  for (size_t cut = 0; cut < n; cut++) {
    unsigned char *copy = malloc(cut ? cut : 1); /* exactly cut bytes: ASan sees any overread */
    memcpy(copy, file, cut);
    if (tz_parse(copy, cut, &z, why, sizeof why) == 0) {
      tz_offset(z, 1800000000);
      tz_next_change(z, 1800000000);
      tz_free(z);
    }
    free(copy);
  }
  for (size_t field = 20; field < 44; field += 4) {
    unsigned char *copy = malloc(n);
    memcpy(copy, file, n);
    memset(copy + field, 0xff, 4);
    ASSERT_INT_EQ(tz_parse(copy, n, &z, why, sizeof why), -1);
    ASSERT_NULL(z);
    free(copy);
  }
}
