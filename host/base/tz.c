/* tz: TZif files and their POSIX TZ footer (see tz.h). */
#include "tz.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A POSIX TZ rule's date: Jn (1-365, February 29 never counted), n (0-365)
 * or Mm.w.d (day d of week w of month m; w 5: the last), at secs local. */
struct rule_date {
  char kind; /* 'J', 'n' or 'M' */
  int n, m, w, d;
  int32_t secs;
};

struct tz {
  size_t ntimes;
  int64_t *times;       /* transitions, ascending */
  unsigned char *index; /* the type in force from each transition */
  int32_t *offset;      /* of each type */
  int32_t first;        /* before the first transition */
  /* The footer: std_off alone when has_dst is false. */
  bool has_footer, has_dst;
  int32_t std_off, dst_off;
  struct rule_date start, end;
};

#define TZ_FILE_MAX (1u << 20)
#define TZ_TIMES_MAX 100000u

int64_t tz_days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void tz_civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int tz_days_in_month(int64_t y, int m) {
  static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return mdays[m - 1] + (m == 2 && leap(y));
}

/* ---- the POSIX TZ footer ---- */

static const char *skip_name(const char *p) {
  if (*p == '<') {
    while (*p && *p != '>') p++;
    return *p == '>' ? p + 1 : NULL;
  }
  const char *s = p;
  while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) p++;
  return p - s >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]] into *secs (hours up to 167, as POSIX and v3 allow). */
static const char *read_hms(const char *p, int32_t *secs) {
  int sign = 1;
  if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
  int part[3] = {0, 0, 0}, i = 0;
  for (; i < 3; i++) {
    if (*p < '0' || *p > '9') return NULL;
    int v = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 3) v = v * 10 + (*p++ - '0'), digits++;
    part[i] = v;
    if (*p != ':') break;
    p++;
  }
  if (part[0] > 167 || part[1] > 59 || part[2] > 59) return NULL;
  *secs = sign * (part[0] * 3600 + part[1] * 60 + part[2]);
  return p;
}

static const char *read_int(const char *p, int *v, int lo, int hi) {
  if (*p < '0' || *p > '9') return NULL;
  int n = 0;
  while (*p >= '0' && *p <= '9' && n <= hi) n = n * 10 + (*p++ - '0');
  if (n < lo || n > hi) return NULL;
  *v = n;
  return p;
}

static const char *read_date(const char *p, struct rule_date *r) {
  r->secs = 7200;
  if (*p == 'J') {
    r->kind = 'J';
    p = read_int(p + 1, &r->n, 1, 365);
  } else if (*p == 'M') {
    r->kind = 'M';
    p = read_int(p + 1, &r->m, 1, 12);
    if (p && *p == '.')
      p = read_int(p + 1, &r->w, 1, 5);
    else
      p = NULL;
    if (p && *p == '.')
      p = read_int(p + 1, &r->d, 0, 6);
    else
      p = NULL;
  } else {
    r->kind = 'n';
    p = read_int(p, &r->n, 0, 365);
  }
  if (p && *p == '/') p = read_hms(p + 1, &r->secs);
  return p;
}

static int parse_footer(struct tz *z, const char *s) {
  const char *p = skip_name(s);
  int32_t off;
  if (p == NULL || (p = read_hms(p, &off)) == NULL) return -1;
  z->std_off = -off;
  z->has_footer = true;
  if (*p == '\0') return 0;
  if ((p = skip_name(p)) == NULL) return -1;
  z->dst_off = z->std_off + 3600;
  if (*p != ',' && *p != '\0') {
    if ((p = read_hms(p, &off)) == NULL) return -1;
    z->dst_off = -off;
  }
  if (*p != ',') return -1; /* a DST name without rules: nothing says when */
  if ((p = read_date(p + 1, &z->start)) == NULL || *p != ',') return -1;
  if ((p = read_date(p + 1, &z->end)) == NULL || *p != '\0') return -1;
  z->has_dst = true;
  return 0;
}

/* The UTC instant of rule date r in year y, its local time at offset off. */
static int64_t rule_instant(const struct rule_date *r, int64_t y, int32_t off) {
  int64_t day;
  if (r->kind == 'J')
    day = tz_days_from_civil(y, 1, 1) + r->n - 1 + (leap(y) && r->n >= 60);
  else if (r->kind == 'n')
    day = tz_days_from_civil(y, 1, 1) + r->n;
  else {
    int64_t first = tz_days_from_civil(y, r->m, 1);
    int wday = (int)((first % 7 + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    int64_t d = first + (r->d - wday + 7) % 7 + (int64_t)(r->w - 1) * 7;
    int len = tz_days_in_month(y, r->m);
    while (d >= first + len) d -= 7; /* week 5: the last */
    day = d;
  }
  return day * 86400 + r->secs - off;
}

/* The footer's offset at t, and its next change after t. */
static int32_t footer_at(const struct tz *z, int64_t t, int64_t *next) {
  if (!z->has_dst) {
    if (next) *next = INT64_MAX;
    return z->std_off;
  }
  int64_t y;
  int m, d;
  tz_civil_from_days(floor_div(t, 86400), &y, &m, &d);
  int64_t best = INT64_MAX;
  int32_t off = z->std_off;
  /* The year before decides what is in force at the start of y (southern
   * zones are in DST across the new year). */
  int64_t last = INT64_MIN;
  for (int64_t yy = y - 1; yy <= y + 1; yy++) {
    int64_t s = rule_instant(&z->start, yy, z->std_off), e = rule_instant(&z->end, yy, z->dst_off);
    int64_t ev[2] = {s, e};
    int32_t to[2] = {z->dst_off, z->std_off};
    if (e < s) {
      ev[0] = e, ev[1] = s;
      to[0] = z->std_off, to[1] = z->dst_off;
    }
    for (int i = 0; i < 2; i++) {
      if (ev[i] <= t && ev[i] > last) last = ev[i], off = to[i];
      if (ev[i] > t && ev[i] < best) best = ev[i];
    }
  }
  if (next) *next = best;
  return off;
}

/* ---- TZif ---- */

static int64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  if (n == 4) return (int32_t)(uint32_t)v;
  return (int64_t)v;
}

static int fail(char *err, size_t errlen, const char *why) {
  snprintf(err, errlen, "%s", why);
  return -1;
}

int tz_parse(const unsigned char *buf, size_t len, struct tz **out, char *err, size_t errlen) {
  *out = NULL;
  if (len < 44 || memcmp(buf, "TZif", 4) != 0) return fail(err, errlen, "not a TZif file");
  int version = buf[4];
  size_t at = 0;
  int tsize = 4;
  for (int pass = 0; pass < 2; pass++) {
    if (len - at < 44 || memcmp(buf + at, "TZif", 4) != 0)
      return fail(err, errlen, "truncated TZif file");
    const unsigned char *h = buf + at + 20;
    uint64_t isut = (uint32_t)be(h, 4), isstd = (uint32_t)be(h + 4, 4),
             leapcnt = (uint32_t)be(h + 8, 4), timecnt = (uint32_t)be(h + 12, 4),
             typecnt = (uint32_t)be(h + 16, 4), charcnt = (uint32_t)be(h + 20, 4);
    if (timecnt > TZ_TIMES_MAX || typecnt == 0 || typecnt > 256 || leapcnt > TZ_TIMES_MAX ||
        isut > typecnt || isstd > typecnt || charcnt > 65536)
      return fail(err, errlen, "TZif header out of range");
    uint64_t body = timecnt * (uint64_t)tsize + timecnt + typecnt * 6 + charcnt +
                    leapcnt * (uint64_t)(tsize + 4) + isstd + isut;
    if (len - at - 44 < body) return fail(err, errlen, "truncated TZif file");
    /* A zone with leap seconds (right/...) counts them in its transition
     * times and has no footer: its local times would be off by them, and by
     * whole hours past its table. */
    if (leapcnt > 0)
      return fail(err, errlen,
                  "a zone with leap seconds (right/...) is not supported: give the zone's name "
                  "without right/");
    if (pass == 0 && version >= '2') { /* the 64-bit block follows */
      at += 44 + body;
      tsize = 8;
      continue;
    }
    const unsigned char *p = buf + at + 44;
    struct tz *z = calloc(1, sizeof *z);
    if (z == NULL) return fail(err, errlen, "out of memory");
    z->ntimes = timecnt;
    z->times = malloc((timecnt ? timecnt : 1) * sizeof *z->times);
    z->index = malloc(timecnt ? timecnt : 1);
    z->offset = malloc(typecnt * sizeof *z->offset);
    if (!z->times || !z->index || !z->offset) {
      tz_free(z);
      return fail(err, errlen, "out of memory");
    }
    for (size_t i = 0; i < timecnt; i++) z->times[i] = be(p + i * (size_t)tsize, tsize);
    p += timecnt * (size_t)tsize;
    for (size_t i = 0; i < timecnt; i++) {
      z->index[i] = p[i];
      if (p[i] >= typecnt || (i && z->times[i] <= z->times[i - 1])) {
        tz_free(z);
        return fail(err, errlen, "TZif transitions out of order");
      }
    }
    p += timecnt;
    for (size_t i = 0; i < typecnt; i++) {
      int64_t off = be(p + i * 6, 4);
      if (off <= -90000 || off >= 90000) {
        tz_free(z);
        return fail(err, errlen, "TZif offset out of range");
      }
      z->offset[i] = (int32_t)off;
    }
    z->first = z->offset[0];
    const unsigned char *end = buf + at + 44 + body;
    if (tsize == 8 && (size_t)(buf + len - end) >= 2 && *end == '\n') {
      const unsigned char *nl = memchr(end + 1, '\n', (size_t)(buf + len - end - 1));
      if (nl && nl > end + 1) {
        char footer[128];
        size_t n = (size_t)(nl - end - 1);
        if (n >= sizeof footer || memchr(end + 1, '\0', n) != NULL) {
          tz_free(z);
          return fail(err, errlen, "TZif footer too long");
        }
        memcpy(footer, end + 1, n);
        footer[n] = '\0';
        if (parse_footer(z, footer) != 0) {
          tz_free(z);
          return fail(err, errlen, "TZif footer not understood");
        }
      }
    }
    *out = z;
    return 0;
  }
  return fail(err, errlen, "truncated TZif file");
}

static bool name_ok(const char *name) {
  if (name[0] == '\0' || name[0] == '/' || strstr(name, "..") || strlen(name) > 200) return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
          strchr("/_+-", *p)))
      return false;
  return true;
}

int tz_load_from(const char *dir, const char *name, struct tz **out, char *err, size_t errlen) {
  *out = NULL;
  if (strcmp(name, "UTC") == 0) {
    struct tz *z = calloc(1, sizeof *z);
    if (z == NULL) return fail(err, errlen, "out of memory");
    *out = z;
    return 0;
  }
  if (!name_ok(name)) {
    snprintf(err, errlen,
             "unknown time zone \"%s\": give a name of the tz database such as \"Europe/Berlin\"",
             name);
    return -1;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "unknown time zone \"%s\": %s: %s", name, path, strerror(errno));
    return -1;
  }
  unsigned char *buf = malloc(TZ_FILE_MAX);
  size_t len = buf ? fread(buf, 1, TZ_FILE_MAX, f) : 0;
  fclose(f);
  if (buf == NULL) return fail(err, errlen, "out of memory");
  char why[128];
  int rc = tz_parse(buf, len, out, why, sizeof why);
  free(buf);
  if (rc != 0) snprintf(err, errlen, "unknown time zone \"%s\": %s: %s", name, path, why);
  return rc;
}

int tz_load(const char *name, struct tz **out, char *err, size_t errlen) {
  return tz_load_from(TZ_DIR, name, out, err, errlen);
}

void tz_free(struct tz *z) {
  if (z == NULL) return;
  free(z->times);
  free(z->index);
  free(z->offset);
  free(z);
}

/* The index of the last transition at or before t, or -1. */
static long last_at(const struct tz *z, int64_t t) {
  size_t lo = 0, hi = z->ntimes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (z->times[mid] <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (long)lo - 1;
}

int32_t tz_offset(const struct tz *z, int64_t t) {
  if (z->ntimes == 0) return z->has_footer ? footer_at(z, t, NULL) : z->first;
  long i = last_at(z, t);
  if (i < 0) return z->first;
  if ((size_t)i == z->ntimes - 1 && z->has_footer) return footer_at(z, t, NULL);
  return z->offset[z->index[i]];
}

int64_t tz_next_change(const struct tz *z, int64_t t) {
  long i = z->ntimes ? last_at(z, t) : -1;
  int64_t next;
  for (int tries = 0; tries < 1000; tries++) {
    if ((size_t)(i + 1) < z->ntimes)
      next = z->times[i + 1];
    else if (z->has_footer)
      footer_at(z, t, &next); /* t is past the table here */
    else
      return INT64_MAX;
    /* A transition to the same offset changes nothing here. */
    if (next == INT64_MAX || tz_offset(z, next) != tz_offset(z, next - 1)) return next;
    t = next;
    i = z->ntimes ? last_at(z, t) : -1;
  }
  return INT64_MAX;
}
