/* http: what every HTTP client checks the same way; see http.h. */
#include "http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool has_scheme(const char *url, const char *scheme) {
  size_t n = strlen(scheme);
  return strncasecmp(url, scheme, n) == 0 && url[n] != '\0';
}

/* No control characters and no spaces: what a URL or a header name may not
 * hold (libcurl would send some of them as they are). */
static bool plain(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || *s == 0x7f) return false;
  return true;
}

int http_request_check(const struct http_request *req, char *err, size_t errlen) {
  const char *m = req->method;
  if (m == NULL || *m == '\0' || strlen(m) > 16) {
    snprintf(err, errlen, "the method must be a word such as GET or POST");
    return -1;
  }
  for (const char *p = m; *p; p++)
    if (*p < 'A' || *p > 'Z') {
      snprintf(err, errlen, "the method must be upper-case letters, got \"%.16s\"", m);
      return -1;
    }
  if (strcmp(m, "HEAD") == 0 && req->body) {
    snprintf(err, errlen, "a HEAD request has no body");
    return -1;
  }
  if (req->url == NULL || !(has_scheme(req->url, "http://") || has_scheme(req->url, "https://"))) {
    snprintf(err, errlen, "the URL must start with http:// or https://");
    return -1;
  }
  if (!plain(req->url)) {
    snprintf(err, errlen, "the URL holds a space or a control character (encode it)");
    return -1;
  }
  for (size_t i = 0; i < req->nheaders; i++) {
    const char *h = req->headers[i], *colon = strchr(h, ':');
    if (colon == NULL || colon == h) {
      snprintf(err, errlen, "header line %zu is not \"Name: value\"", i + 1);
      return -1;
    }
    for (const char *p = h; p < colon; p++)
      if ((unsigned char)*p <= ' ' || *p == 0x7f) {
        snprintf(err, errlen, "header name \"%.*s\" holds a space or a control character",
                 (int)(colon - h < 64 ? colon - h : 64), h);
        return -1;
      }
    for (const char *p = colon + 1; *p; p++)
      if (*p == '\r' || *p == '\n') {
        snprintf(err, errlen, "the value of header \"%.*s\" holds a line break",
                 (int)(colon - h < 64 ? colon - h : 64), h);
        return -1;
      }
  }
  return 0;
}

const char *http_redact_url(const char *url, char *out, size_t len) {
  if (len == 0) return out;
  const char *start = strstr(url, "://");
  const char *host = start ? start + 3 : url;
  size_t hostpart = strcspn(host, "/?#");
  const char *at = NULL; /* the last '@' of the authority ends the userinfo */
  for (const char *p = host; p < host + hostpart; p++)
    if (*p == '@') at = p;
  const char *colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
  if (colon == NULL)
    snprintf(out, len, "%s", url);
  else
    snprintf(out, len, "%.*s***%s", (int)(colon + 1 - url), url, at);
  return out;
}

/* ---------------------------------------------------------- Retry-After */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil); m 1..12. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

/* The year of a day counted as days_from_civil does (its inverse, year only). */
static int64_t year_of_day(int64_t z) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  return (int64_t)yoe + era * 400 + (mp >= 10); /* January and February: the next year */
}

struct cursor {
  const char *p, *end;
};

static bool take(struct cursor *c, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return false;
  c->p += n;
  return true;
}

/* Exactly n digits; with pad, the first may be a space instead (asctime's day). */
static bool number(struct cursor *c, int n, bool pad, int *out) {
  if (c->end - c->p < n) return false;
  int v = 0;
  for (int i = 0; i < n; i++) {
    char ch = c->p[i];
    if (i == 0 && pad && ch == ' ' && n > 1) continue;
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  if (pad && c->p[n - 1] == ' ') return false;
  c->p += n;
  *out = v;
  return true;
}

/* Index of the name c starts with (case-sensitive, as RFC 9110 says), or -1. */
static int name(struct cursor *c, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (take(c, names[i])) return i;
  return -1;
}

static const char *const DAYS[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const LONG_DAYS[] = {"Monday,", "Tuesday,",  "Wednesday,", "Thursday,",
                                        "Friday,", "Saturday,", "Sunday,"};
static const char *const MONTHS[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* "HH:MM:SS" (a leap second's 60 allowed) into seconds of the day. */
static bool time_of_day(struct cursor *c, int *secs) {
  int h, m, s;
  if (!number(c, 2, false, &h) || !take(c, ":") || !number(c, 2, false, &m) || !take(c, ":") ||
      !number(c, 2, false, &s))
    return false;
  if (h > 23 || m > 59 || s > 60) return false;
  *secs = h * 3600 + m * 60 + s;
  return true;
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* An HTTP-date as Unix seconds (RFC 9110, 5.6.7: the three forms). */
static bool http_date(const char *p, const char *end, uint64_t wall_ms, int64_t *unix_secs) {
  struct cursor c = {p, end};
  int day, month, year, secs;
  int64_t y;
  if (name(&c, LONG_DAYS, 7) >= 0) { /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
    if (!take(&c, " ") || !number(&c, 2, false, &day) || !take(&c, "-") ||
        (month = name(&c, MONTHS, 12)) < 0 || !take(&c, "-") || !number(&c, 2, false, &year) ||
        !take(&c, " ") || !time_of_day(&c, &secs) || !take(&c, " GMT"))
      return false;
    int64_t now_year = year_of_day((int64_t)(wall_ms / 86400000u));
    y = now_year - now_year % 100 + year;
    if (y > now_year + 50) y -= 100;
  } else if (name(&c, DAYS, 7) >= 0) {
    if (take(&c, ", ")) { /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
      if (!number(&c, 2, false, &day) || !take(&c, " ") || (month = name(&c, MONTHS, 12)) < 0 ||
          !take(&c, " ") || !number(&c, 4, false, &year) || !take(&c, " ") ||
          !time_of_day(&c, &secs) || !take(&c, " GMT"))
        return false;
    } else if (take(&c, " ")) { /* asctime: Sun Nov  6 08:49:37 1994 */
      if ((month = name(&c, MONTHS, 12)) < 0 || !take(&c, " ") || !number(&c, 2, true, &day) ||
          !take(&c, " ") || !time_of_day(&c, &secs) || !take(&c, " ") ||
          !number(&c, 4, false, &year))
        return false;
    } else {
      return false;
    }
    y = year;
  } else {
    return false;
  }
  if (c.p != c.end) return false;
  static const unsigned char mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int last = mdays[month] + (month == 1 && leap(y));
  if (day < 1 || day > last) return false;
  *unix_secs = days_from_civil(y, (unsigned)month + 1, (unsigned)day) * 86400 + secs;
  return true;
}

int http_retry_after(const char *value, size_t len, uint64_t wall_ms, uint64_t *wait_ms) {
  const char *p = value, *end = value + len;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if (p == end) return -1;
  const uint64_t max_secs = HTTP_RETRY_AFTER_MAX_MS / 1000;
  if (*p >= '0' && *p <= '9') { /* delta-seconds: 1*DIGIT */
    uint64_t secs = 0;
    for (const char *q = p; q < end; q++) {
      if (*q < '0' || *q > '9') return -1;
      if (secs <= max_secs) secs = secs * 10 + (uint64_t)(*q - '0');
    }
    *wait_ms = (secs < max_secs ? secs : max_secs) * 1000;
    return 0;
  }
  int64_t at;
  if (!http_date(p, end, wall_ms, &at)) return -1;
  int64_t now = (int64_t)(wall_ms / 1000), now_ms = (int64_t)(wall_ms % 1000);
  if (at <= now) {
    *wait_ms = 0;
  } else if ((uint64_t)(at - now) > max_secs) {
    *wait_ms = HTTP_RETRY_AFTER_MAX_MS;
  } else {
    *wait_ms = (uint64_t)((at - now) * 1000 - now_ms);
  }
  return 0;
}

int http_retry_after_lines(const char *lines, size_t len, uint64_t wall_ms, uint64_t *wait_ms) {
  static const char field[] = "retry-after";
  const char *p = lines, *end = lines + len;
  int found = 0;
  uint64_t first = 0;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end;
    const char *colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon && (size_t)(colon - p) == sizeof field - 1 &&
        strncasecmp(p, field, sizeof field - 1) == 0) {
      const char *v = colon + 1, *ve = line_end;
      if (ve > v && ve[-1] == '\r') ve--;
      uint64_t ms;
      if (http_retry_after(v, (size_t)(ve - v), wall_ms, &ms) != 0) return -1;
      if (found && ms != first) return -1;
      first = ms;
      found = 1;
    }
    p = eol ? eol + 1 : end;
  }
  if (found) *wait_ms = first;
  return found;
}
