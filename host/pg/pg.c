/* pg: what the seam offers every implementation (pg.h): the redaction of
 * connection settings and the conversions of values to and from text, pure
 * functions with no libpq in them. */
#include "pg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends n bytes of s to out at *at, keeping room for the NUL. */
static void put(char *out, size_t len, size_t *at, const char *s, size_t n) {
  if (len == 0) return;
  size_t room = len - 1 - *at;
  if (n > room) n = room;
  memcpy(out + *at, s, n);
  *at += n;
  out[*at] = '\0';
}

/* The secrets a connection string may hold: the password, and the client
 * key's passphrase. */
static size_t secret_keyword(const char *p) {
  if (strncmp(p, "password", 8) == 0) return 8;
  if (strncmp(p, "sslpassword", 11) == 0) return 11;
  return 0;
}

/* The keyword/value form: password = value, value quoted ('...' with \'
 * and \\) or a run of non-space characters. */
static const char *redact_keywords(const char *s, char *out, size_t len) {
  size_t at = 0;
  if (len) out[0] = '\0';
  const char *p = s;
  while (*p) {
    bool word_start = p == s || p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n';
    size_t kw = word_start ? secret_keyword(p) : 0;
    if (kw) {
      const char *q = p + kw;
      while (*q == ' ' || *q == '\t') q++;
      if (*q == '=') {
        q++;
        while (*q == ' ' || *q == '\t') q++;
        put(out, len, &at, p, kw);
        put(out, len, &at, "=***", 4);
        if (*q == '\'') {
          for (q++; *q && *q != '\''; q++)
            if (*q == '\\' && q[1]) q++;
          if (*q) q++;
        } else {
          while (*q && *q != ' ' && *q != '\t' && *q != '\n') q++;
        }
        p = q;
        continue;
      }
    }
    put(out, len, &at, p, 1);
    p++;
  }
  return out;
}

/* The URL form: postgresql://user:password@host/db?password=... */
static const char *redact_url(const char *s, char *out, size_t len) {
  size_t at = 0;
  if (len) out[0] = '\0';
  const char *rest = strstr(s, "://") + 3;
  put(out, len, &at, s, (size_t)(rest - s));
  /* the userinfo ends at the last '@' before the path */
  const char *end = rest + strcspn(rest, "/?#");
  const char *atsign = NULL;
  for (const char *q = rest; q < end; q++)
    if (*q == '@') atsign = q;
  const char *p = rest;
  if (atsign) {
    const char *colon = memchr(rest, ':', (size_t)(atsign - rest));
    if (colon) {
      put(out, len, &at, rest, (size_t)(colon - rest));
      put(out, len, &at, ":***", 4);
      p = atsign;
    }
  }
  /* the query string: password=... up to the next & */
  const char *query = strchr(p, '?');
  if (query == NULL) {
    put(out, len, &at, p, strlen(p));
    return out;
  }
  put(out, len, &at, p, (size_t)(query + 1 - p));
  p = query + 1;
  while (*p) {
    size_t n = strcspn(p, "&");
    size_t kw = secret_keyword(p);
    if (kw && p[kw] == '=') {
      put(out, len, &at, p, kw);
      put(out, len, &at, "=***", 4);
    } else {
      put(out, len, &at, p, n);
    }
    p += n;
    if (*p == '&') put(out, len, &at, p++, 1);
  }
  return out;
}

const char *pg_redact(const char *conninfo, char *out, size_t len) {
  if (conninfo == NULL) conninfo = "";
  if (strncmp(conninfo, "postgresql://", 13) == 0 || strncmp(conninfo, "postgres://", 11) == 0)
    return redact_url(conninfo, out, len);
  return redact_keywords(conninfo, out, len);
}

const char *pg_sql_head(const char *sql, char *out, size_t max) {
  size_t at = 0;
  if (max == 0) return out;
  out[0] = '\0';
  const char *p = sql;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  bool space = false, cut = false;
  for (; *p; p++) {
    bool ws = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r';
    if (ws) {
      space = true;
      continue;
    }
    if (at + (space ? 1 : 0) + 1 + 4 > max) {
      cut = true;
      break;
    }
    if (space && at) out[at++] = ' ';
    space = false;
    out[at++] = *p;
  }
  if (cut && max > 4) { /* below 5 bytes " ..." does not fit: nothing is shown */
    /* back to the end of a word, so no value is shown half */
    while (at > 0 && out[at - 1] != ' ') at--;
    if (at > 0) at--;
    memcpy(out + at, " ...", 4);
    at += 4;
  }
  out[at] = '\0';
  return out;
}

bool pg_sqlstate_of(const char *text, char state[6]) {
  state[0] = '\0';
  if (text == NULL) return false;
  for (int i = 0; i < 5; i++)
    if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'A' && text[i] <= 'Z'))) return false;
  if (text[5] != ':' || text[6] != ' ') return false;
  memcpy(state, text, 5);
  state[5] = '\0';
  return true;
}

/* ---- values ---- */

enum {
  OID_BOOL = 16,
  OID_BYTEA = 17,
  OID_INT8 = 20,
  OID_INT2 = 21,
  OID_INT4 = 23,
  OID_OID = 26,
  OID_FLOAT4 = 700,
  OID_FLOAT8 = 701,
  OID_TIMESTAMP = 1114,
  OID_TIMESTAMPTZ = 1184,
  OID_NUMERIC = 1700
};

#define EXACT_INT_MAX 9007199254740992ULL /* 2^53 */

/* An integer literal ("-?digits") up to 2^53 in magnitude, into *out. */
static bool exact_integer(const char *s, size_t len, double *out) {
  size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  if (i == len || len - i > 16) return false;
  uint64_t v = 0;
  for (size_t k = i; k < len; k++) {
    if (s[k] < '0' || s[k] > '9') return false;
    v = v * 10 + (uint64_t)(s[k] - '0'); /* at most 16 digits: no overflow */
  }
  if (v > EXACT_INT_MAX) return false;
  *out = s[0] == '-' ? -(double)v : (double)v;
  return true;
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* "YYYY-MM-DD HH:MM:SS[.f]" and, with zone, "+HH[:MM[:SS]]" after it (always
 * +00 under TimeZone UTC, which becomes "Z"). Anything else (infinity, BC
 * years, years past 9999) stays as the server wrote it. */
static bool iso_timestamp(const char *s, size_t len, bool zone, char *buf, size_t *out_len) {
  if (len < 19 || s[10] != ' ' || s[4] != '-' || s[13] != ':') return false;
  size_t end = 19;
  if (end < len && s[end] == '.')
    for (end++; end < len && is_digit(s[end]); end++) {}
  memcpy(buf, s, end);
  buf[10] = 'T';
  size_t at = end;
  if (zone) {
    const char *z = s + end;
    size_t zl = len - end;
    if (zl == 3 && strncmp(z, "+00", 3) == 0) {
      buf[at++] = 'Z';
    } else if (zl == 3 && (z[0] == '+' || z[0] == '-')) {
      memcpy(buf + at, z, 3);
      memcpy(buf + at + 3, ":00", 3);
      at += 6;
    } else if (zl == 6 && (z[0] == '+' || z[0] == '-') && z[3] == ':') {
      memcpy(buf + at, z, zl); /* +05:30 */
      at += zl;
    } else {
      return false; /* a BC year, seconds in the offset: as the server wrote it */
    }
  } else if (end != len) {
    return false;
  }
  buf[at] = '\0';
  *out_len = at;
  return true;
}

void pg_value_from_text(uint32_t oid, const char *text, size_t len, char *buf, struct pg_value *v) {
  *v = (struct pg_value){.kind = PG_VALUE_STRING, .str = text, .len = len};
  switch (oid) {
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
    case OID_OID:
    case OID_NUMERIC:
      if (exact_integer(text, len, &v->number)) v->kind = PG_VALUE_NUMBER;
      return;
    case OID_FLOAT4:
    case OID_FLOAT8: {
      char *end;
      double d = strtod(text, &end); /* "NaN", "Infinity", "-Infinity" included */
      if (end == text + len && len > 0) {
        v->kind = PG_VALUE_NUMBER;
        v->number = d;
      }
      return;
    }
    case OID_BOOL:
      v->kind = PG_VALUE_BOOLEAN;
      v->boolean = len > 0 && text[0] == 't';
      return;
    case OID_BYTEA:
      if (len >= 2 && text[0] == '\\' && text[1] == 'x' && len % 2 == 0) {
        size_t n = 0;
        for (size_t i = 2; i < len; i += 2) {
          int hi = hex(text[i]), lo = hex(text[i + 1]);
          if (hi < 0 || lo < 0) return; /* not the hex format: the text as is */
          buf[n++] = (char)(hi << 4 | lo);
        }
        v->str = buf;
        v->len = n;
      }
      return;
    case OID_TIMESTAMP:
    case OID_TIMESTAMPTZ: {
      size_t n;
      if (iso_timestamp(text, len, oid == OID_TIMESTAMPTZ, buf, &n)) {
        v->str = buf;
        v->len = n;
      }
      return;
    }
    default: return;
  }
}

size_t pg_format_number(double x, char *out, size_t len) {
  int n;
  if (isnan(x))
    n = snprintf(out, len, "NaN");
  else if (isinf(x))
    n = snprintf(out, len, x > 0 ? "Infinity" : "-Infinity");
  else if (x == floor(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0)
    n = snprintf(out, len, "%lld", (long long)x);
  else {
    n = 0;
    for (int prec = 15; prec <= 17; prec++) {
      n = snprintf(out, len, "%.*g", prec, x);
      if (strtod(out, NULL) == x) break;
    }
  }
  return n < 0 ? 0 : (size_t)n;
}
