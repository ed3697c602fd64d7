/* cron: cron expressions and the next tick (see cron.h). */
#include "cron.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tz.h"

struct field_def {
  const char *name;
  int lo, hi;
  const char *const *names; /* lo .. lo + count - 1 */
  int nnames;
};

static const char *const MONTHS[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                     "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const DAYS[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static const struct field_def FIELDS[5] = {
    {"minute", 0, 59, NULL, 0},   {"hour", 0, 23, NULL, 0},       {"day-of-month", 1, 31, NULL, 0},
    {"month", 1, 12, MONTHS, 12}, {"day-of-week", 0, 7, DAYS, 7},
};

static const struct {
  const char *name, *expr;
} MACROS[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
              {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
              {"@hourly", "0 * * * *"}};

/* A value of field f at *p: a number or a name. */
static int value(const struct field_def *f, const char **p, int *v, char *why, size_t whylen) {
  const char *s = *p;
  if (isdigit((unsigned char)*s)) {
    long n = 0;
    while (isdigit((unsigned char)*s) && n < 1000) n = n * 10 + (*s++ - '0');
    if (n < f->lo || n > f->hi) {
      snprintf(why, whylen, "%s: %ld is out of range %d-%d", f->name, n, f->lo, f->hi);
      return -1;
    }
    *v = (int)n;
    *p = s;
    return 0;
  }
  for (int i = 0; i < f->nnames; i++)
    if (strncasecmp(s, f->names[i], 3) == 0 && !isalpha((unsigned char)s[3])) {
      *v = f->names == DAYS ? i : f->lo + i;
      *p = s + 3;
      return 0;
    }
  size_t n = strcspn(s, ",-/");
  snprintf(why, whylen, "%s: \"%.*s\" is not a %s%s", f->name, (int)(n > 20 ? 20 : n), s,
           f->nnames ? "number or a name such as " : "number", f->nnames ? f->names[0] : "");
  return -1;
}

/* One field's text (len bytes) into the bits of *bits. */
static int field(const struct field_def *f, const char *text, size_t len, uint64_t *bits, char *why,
                 size_t whylen) {
  char buf[128];
  if (len >= sizeof buf) {
    snprintf(why, whylen, "%s: too long", f->name);
    return -1;
  }
  memcpy(buf, text, len);
  buf[len] = '\0';
  *bits = 0;
  for (char *item = buf, *next; item; item = next) {
    next = strchr(item, ',');
    if (next) *next++ = '\0';
    const char *p = item;
    int lo, hi, step = 1;
    if (*p == '*') {
      lo = f->lo, hi = f->hi == 7 ? 6 : f->hi;
      p++;
    } else {
      if (value(f, &p, &lo, why, whylen) != 0) return -1;
      hi = lo;
      if (*p == '-') {
        p++;
        if (value(f, &p, &hi, why, whylen) != 0) return -1;
        if (hi < lo) {
          snprintf(why, whylen, "%s: the range %d-%d runs backwards", f->name, lo, hi);
          return -1;
        }
      } else if (*p == '/') {
        hi = f->hi; /* N/step: from N to the last (7 for days of week: 5/1 ends on Sunday) */
      }
    }
    if (*p == '/') {
      p++;
      long n = 0;
      if (!isdigit((unsigned char)*p)) {
        snprintf(why, whylen, "%s: a step needs a number after '/'", f->name);
        return -1;
      }
      while (isdigit((unsigned char)*p) && n < 1000) n = n * 10 + (*p++ - '0');
      if (n < 1 || n > f->hi) {
        snprintf(why, whylen, "%s: step %ld is out of range 1-%d", f->name, n, f->hi);
        return -1;
      }
      step = (int)n;
    }
    if (*p != '\0') {
      snprintf(why, whylen, "%s: \"%s\" is not a value, range or step (such as 5, 1-5, */15)",
               f->name, item);
      return -1;
    }
    for (int v = lo; v <= hi; v += step) *bits |= 1ull << (f->hi == 7 && v == 7 ? 0 : v);
  }
  return 0;
}

/* The Gregorian calendar repeats every 400 years, 146097 days (whole weeks):
 * a day that matches at all matches within any span of that many days. */
#define CYCLE_DAYS 146097

static bool day_matches(const struct cron *c, int64_t days, int m, int d);

int cron_parse(const char *expr, struct cron *c, char *why, size_t whylen) {
  memset(c, 0, sizeof *c);
  while (isspace((unsigned char)*expr)) expr++;
  if (*expr == '@') {
    size_t n = strcspn(expr, " \t\n");
    const char *rest = expr + n;
    while (isspace((unsigned char)*rest)) rest++;
    for (size_t i = 0; i < sizeof MACROS / sizeof MACROS[0]; i++)
      if (strlen(MACROS[i].name) == n && strncasecmp(expr, MACROS[i].name, n) == 0 && !*rest)
        return cron_parse(MACROS[i].expr, c, why, whylen);
    snprintf(why, whylen, "\"%.*s\" is not one of @yearly, @monthly, @weekly, @daily, @hourly",
             (int)(n > 20 ? 20 : n), expr);
    return -1;
  }
  const char *part[6];
  size_t len[6];
  int n = 0;
  for (const char *p = expr; *p;) {
    if (n == 6) break;
    part[n] = p;
    while (*p && !isspace((unsigned char)*p)) p++;
    len[n] = (size_t)(p - part[n]);
    n++;
    while (isspace((unsigned char)*p)) p++;
  }
  if (n != 5) {
    snprintf(why, whylen,
             "has %s%d field%s, needs 5: minute hour day-of-month month day-of-week (such as "
             "\"*/5 * * * *\")",
             n == 6 ? "more than " : "", n == 6 ? 5 : n, n == 1 ? "" : "s");
    return -1;
  }
  uint64_t bits[5];
  for (int i = 0; i < 5; i++)
    if (field(&FIELDS[i], part[i], len[i], &bits[i], why, whylen) != 0) return -1;
  c->minute = bits[0];
  c->hour = (uint32_t)bits[1];
  c->dom = (uint32_t)bits[2];
  c->month = (uint16_t)bits[3];
  c->dow = (uint8_t)bits[4];
  c->dom_any = part[2][0] == '*';
  c->dow_any = part[4][0] == '*';
  /* Days of month no month chosen has (the 30th of February): with the day of
   * week unrestricted nothing would ever run. */
  if (c->dow_any) {
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool some = false;
    for (int m = 1; m <= 12 && !some; m++)
      if (c->month >> m & 1)
        for (int d = 1; d <= mdays[m - 1] && !some; d++) some = c->dom >> d & 1;
    if (!some) {
      snprintf(why, whylen, "never matches: no month chosen has the days of month chosen");
      return -1;
    }
  }
  /* Some date must match: when both day fields must (one starts with `*`),
   * a day of month that is that day of week may come decades apart (a
   * Sunday the 29th of February), or never. */
  for (int64_t day = 0;; day++) {
    if (day == CYCLE_DAYS) {
      snprintf(why, whylen,
               "never matches: no date has both the day of month and the day of week chosen");
      return -1;
    }
    int64_t y;
    int m, d;
    tz_civil_from_days(day, &y, &m, &d);
    if (day_matches(c, day, m, d)) break;
  }
  return 0;
}

static bool day_matches(const struct cron *c, int64_t days, int m, int d) {
  if (!(c->month >> m & 1)) return false;
  int wday = (int)((days % 7 + 11) % 7); /* 1970-01-01 was a Thursday */
  bool dom = c->dom >> d & 1, dow = c->dow >> wday & 1;
  if (c->dom_any || c->dow_any) return dom && dow;
  return dom || dow;
}

static int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* The UTC second of local time l (seconds) in z: the first of two when it
 * happens twice, the end of the gap when it does not happen. */
static int64_t to_utc(const struct tz *z, int64_t l) {
  if (z == NULL) return l;
  int32_t oa = tz_offset(z, l - 90000), ob = tz_offset(z, l + 90000);
  int64_t ua = l - oa, ub = l - ob;
  bool va = tz_offset(z, ua) == oa, vb = tz_offset(z, ub) == ob;
  if (va && vb) return ua < ub ? ua : ub;
  if (va) return ua;
  if (vb) return ub;
  return tz_next_change(z, (ua < ub ? ua : ub));
}

int64_t cron_next(const struct cron *c, const struct tz *z, int64_t after_ms) {
  int64_t t = floor_div(after_ms, 1000);
  int64_t local = t + (z ? tz_offset(z, t) : 0);
  int64_t from = floor_div(local, 60) + 1; /* local minutes */
  int64_t day = floor_div(from, 1440);
  int minute_of_day = (int)(from - day * 1440);
  for (int64_t i = 0; i <= CYCLE_DAYS; i++, day++, minute_of_day = 0) {
    int64_t y;
    int m, d;
    tz_civil_from_days(day, &y, &m, &d);
    if (!day_matches(c, day, m, d)) continue;
    for (int h = minute_of_day / 60; h < 24; h++) {
      if (!(c->hour >> h & 1)) continue;
      for (int mi = h == minute_of_day / 60 ? minute_of_day % 60 : 0; mi < 60; mi++) {
        if (!(c->minute >> mi & 1)) continue;
        int64_t u = to_utc(z, day * 86400 + h * 3600 + mi * 60);
        if (u * 1000 > after_ms) return u * 1000;
      }
    }
  }
  return -1;
}

int64_t cron_every_next(int64_t period_ms, int64_t after_ms) {
  return (floor_div(after_ms, period_ms) + 1) * period_ms;
}
