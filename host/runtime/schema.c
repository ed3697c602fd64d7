/* schema: message schemas checked on JSON text (see schema.h); compiled
 * from Lua tables by schema_compile.c.
 *
 * A compiled schema is a tree of nodes, one per schema table. The checker
 * walks the JSON text with the tree beside it: a value whose node has
 * nothing to say about it (no node, or one without rules for its kind) is
 * skipped without being read, so a payment's schema costs a pass over its
 * few members and nothing for what the schema leaves open. The recursion
 * follows the schema, not the text: it is at most SCHEMA_MAX_DEPTH deep,
 * whatever the body's nesting (skipping is iterative). */
#include "schema.h"

#include <locale.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_decode.h"
#include "schema_tree.h"
#include "tz.h"

void schema_scratch_free(struct schema_scratch *sc) {
  free(sc->buf);
  sc->buf = NULL;
  sc->cap = 0;
}

/* ---- values ---- */

/* A value of the body being checked. Strings and numbers point into the text
 * (or the entry): strings without their quotes, escaped when esc. */
struct val {
  unsigned type; /* one TY_* but TY_INTEGER */
  bool integral; /* TY_NUMBER: no fractional part */
  bool big;      /* TY_NUMBER: an integer literal above 2^53, compared through big_value */
  double num;    /* TY_NUMBER: the double the decoder makes of it; TY_BOOLEAN: 1 or 0 */
  long double big_value;
  const char *s; /* TY_STRING */
  size_t len;
  bool esc;
};

/* A step of the path to the value being checked: a key (in JSON text when
 * esc) or an array index (key NULL). */
struct seg {
  const char *key;
  size_t len;
  size_t index;
  bool esc;
};

struct ck {
  struct schema_scratch *sc;
  const char *end;
  char *err;
  size_t errlen;
  int depth;
  struct seg path[SCHEMA_MAX_DEPTH + 2];
  bool oom;
};

static bool grow(struct ck *c, size_t need) {
  if (need <= c->sc->cap) return true;
  size_t cap = c->sc->cap ? c->sc->cap : 256;
  while (cap < need) cap *= 2;
  char *b = realloc(c->sc->buf, cap);
  if (b == NULL) {
    c->oom = true;
    return false;
  }
  c->sc->buf = b;
  c->sc->cap = cap;
  return true;
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int ch = (unsigned char)p[i], h;
    if (ch >= '0' && ch <= '9')
      h = ch - '0';
    else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
      h = (ch | 0x20) - 'a' + 10;
    else
      return -1;
    v = v << 4 | h;
  }
  return v;
}

/* The decoded bytes of JSON string text [p, p + n) into out (room for n
 * bytes: no escape decodes longer than it is written). Returns the length,
 * or (size_t)-1 for a bad escape. */
static size_t unescape(const char *p, size_t n, char *out) {
  size_t o = 0;
  const char *end = p + n;
  while (p < end) {
    if (*p != '\\') {
      out[o++] = *p++;
      continue;
    }
    if (end - p < 2) return (size_t)-1;
    char e = p[1];
    static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    const char *m = NULL;
    for (size_t i = 0; i + 1 < sizeof simple; i += 2)
      if (simple[i] == e) m = &simple[i + 1];
    if (m) {
      out[o++] = *m;
      p += 2;
      continue;
    }
    if (e != 'u' || end - p < 6) return (size_t)-1;
    int hi = hex4(p + 2);
    if (hi < 0) return (size_t)-1;
    uint32_t cp = (uint32_t)hi;
    p += 6;
    if ((hi & 0xFC00) == 0xD800) {
      int lo = end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
      if (lo < 0 || (lo & 0xFC00) != 0xDC00) return (size_t)-1;
      cp = ((((uint32_t)hi & 0x3FF) << 10) | ((uint32_t)lo & 0x3FF)) + 0x10000;
      p += 6;
    } else if ((hi & 0xFC00) == 0xDC00) {
      return (size_t)-1;
    }
    if (cp < 0x80) {
      out[o++] = (char)cp;
    } else if (cp < 0x800) {
      out[o++] = (char)(0xC0 | cp >> 6);
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[o++] = (char)(0xE0 | cp >> 12);
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else {
      out[o++] = (char)(0xF0 | cp >> 18);
      out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  return o;
}

/* The string's decoded bytes: in place when it has no escapes and needs no
 * NUL, else in the scratch (NUL-terminated). NULL when out of memory or a
 * bad escape. */
static const char *bytes_of(struct ck *c, const struct val *v, size_t *n, bool nul) {
  if (!v->esc && !nul) {
    *n = v->len;
    return v->s;
  }
  if (!grow(c, v->len + 1)) return NULL;
  size_t len = v->len;
  if (v->esc) {
    len = unescape(v->s, v->len, c->sc->buf);
    if (len == (size_t)-1) return NULL;
  } else {
    memcpy(c->sc->buf, v->s, len);
  }
  c->sc->buf[len] = '\0';
  *n = len;
  return c->sc->buf;
}

/* UTF-8 code points: bytes that do not continue a sequence. */
static size_t code_points(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

/* ---- formats ---- */

static bool digits(const char *s, int n, int *v) {
  *v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    *v = *v * 10 + (s[i] - '0');
  }
  return true;
}

/* RFC 3339's date-time: 2026-12-08T01:45:00Z, with an optional fraction of
 * a second and Z or an offset (+01:00); T and Z in either case; a leap
 * second (:60) only at 23:59 UTC, where leap seconds are inserted (RFC 3339
 * 5.7: 15:59:60-08:00 is one, 23:59:60+01:00 is not). */
static bool is_date_time(const char *s, size_t n) {
  int y, mo, d, h, mi, sec, oh, om;
  if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
      !digits(s + 8, 2, &d) || (s[10] | 0x20) != 't' || !digits(s + 11, 2, &h) || s[13] != ':' ||
      !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > tz_days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
    return false;
  size_t i = 19;
  if (s[i] == '.') { /* n >= 20 */
    size_t first = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == first) return false;
  }
  int offset = 0; /* minutes east of UTC */
  if (i < n && (s[i] | 0x20) == 'z') {
    if (i + 1 != n) return false;
  } else {
    if (i + 6 != n) return false; /* +HH:MM */
    if ((s[i] != '+' && s[i] != '-') || !digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
        !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
      return false;
    offset = (s[i] == '-' ? -1 : 1) * (oh * 60 + om);
  }
  return sec < 60 || ((h * 60 + mi - offset) % 1440 + 1440) % 1440 == 23 * 60 + 59;
}

/* 8-4-4-4-12 hex digits, either case (RFC 9562's text form, any version). */
static bool is_uuid(const char *s, size_t n) {
  if (n != 36) return false;
  for (size_t i = 0; i < 36; i++) {
    char ch = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (ch != '-') return false;
    } else if (!((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f'))) {
      return false;
    }
  }
  return true;
}

/* ---- mismatches ---- */

/* "%.15g" unless it does not read back, then 16 or 17 digits. */
static void fmt_num(char *out, size_t len, double v) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, len, "%.*g", prec, v);
    if (strtod(out, NULL) == v) return;
  }
}

static size_t put_path(const struct ck *c, char *out, size_t len) {
  size_t at = (size_t)snprintf(out, len, "$");
  for (int i = 1; i <= c->depth && at < len; i++) {
    const struct seg *g = &c->path[i];
    if (g->key == NULL) {
      at += (size_t)snprintf(out + at, len - at, "[%zu]", g->index);
    } else if (g->esc) { /* JSON text: named as decoded, as the schema names it */
      char dec[256], one[256];
      size_t n = g->len < sizeof dec ? unescape(g->key, g->len, dec) : (size_t)-1;
      if (n != (size_t)-1) {
        schema_path_join(one, sizeof one, "", dec, n > 200 ? 200 : n);
        at += (size_t)snprintf(out + at, len - at, "%s", one);
      } else { /* too long to decode here: as written */
        at += (size_t)snprintf(out + at, len - at, "[\"%.*s\"]", (int)(g->len > 200 ? 200 : g->len),
                               g->key);
      }
    } else {
      char one[256];
      schema_path_join(one, sizeof one, "", g->key, g->len > 200 ? 200 : g->len);
      at += (size_t)snprintf(out + at, len - at, "%s", one);
    }
  }
  return at < len ? at : len;
}

static int mismatch(struct ck *c, const char *fmt, ...) {
  if (c->errlen == 0) return 0;
  size_t at = put_path(c, c->err, c->errlen);
  if (at + 2 < c->errlen) {
    at += (size_t)snprintf(c->err + at, c->errlen - at, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + at, c->errlen - at, fmt, ap);
    va_end(ap);
  }
  return 0;
}

static const char *type_of(const struct val *v) {
  for (size_t t = 0; t < NTYPES; t++)
    if (type_names[t].bit == v->type) return type_names[t].name;
  return "?";
}

static int type_mismatch(struct ck *c, const struct schema *s, const struct val *v) {
  char want[160];
  size_t at = 0;
  int n = 0, total = 0;
  for (size_t t = 0; t < NTYPES; t++) total += (s->types & type_names[t].bit) != 0;
  for (size_t t = 0; t < NTYPES && at < sizeof want; t++) {
    if (!(s->types & type_names[t].bit)) continue;
    n++;
    at += (size_t)snprintf(want + at, sizeof want - at, "%s%s%s",
                           n == 1       ? ""
                           : n == total ? " or "
                                        : ", ",
                           type_names[t].article, type_names[t].name);
  }
  return mismatch(c, "must be %s, got %s", want, type_of(v));
}

static void fmt_sval(char *out, size_t len, const struct sval *e) {
  switch (e->type) {
    case TY_STRING: snprintf(out, len, "\"%.*s\"", (int)(e->len > 60 ? 60 : e->len), e->s); break;
    case TY_NUMBER: fmt_num(out, len, e->num); break;
    case TY_BOOLEAN: snprintf(out, len, "%s", e->num ? "true" : "false"); break;
    default: snprintf(out, len, "null");
  }
}

static int enum_mismatch(struct ck *c, const struct schema *s) {
  char list[400];
  size_t at = 0;
  for (int i = 0; i < s->nenum && at + 80 < sizeof list; i++) {
    char one[80];
    fmt_sval(one, sizeof one, &s->enumv[i]);
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", one);
    if (i == 7 && i + 1 < s->nenum) {
      snprintf(list + at, sizeof list - at, ", ...");
      break;
    }
  }
  return mismatch(c, s->is_const ? "must be %s" : "must be one of %s", list);
}

static int bound_mismatch(struct ck *c, const char *op, double bound) {
  char b[40];
  fmt_num(b, sizeof b, bound);
  return mismatch(c, "must be %s %s", op, b);
}

/* No fractional part: every double of 2^52 or more is whole; below that a
 * conversion tells (cheaper than floor, a libm call). */
static bool integral(double d) {
  if (!(d > -4503599627370496.0 && d < 4503599627370496.0)) return isfinite(d);
  return (double)(long long)d == d;
}

static int num_cmp(const struct val *v, double bound) {
  if (v->big) return v->big_value < bound ? -1 : v->big_value > bound ? 1 : 0;
  return v->num < bound ? -1 : v->num > bound ? 1 : 0;
}

/* ---- checking one value ---- */

/* The rules of s that do not need to look inside the value (v's own type;
 * objects and arrays are walked by the caller). Returns 1, 0 (mismatch) or
 * -1 (out of memory). */
static int check_scalar(struct ck *c, const struct schema *s, const struct val *v) {
  if (s->types) {
    unsigned bits = v->type | (v->type == TY_NUMBER && v->integral ? TY_INTEGER : 0);
    if (!(s->types & bits)) return type_mismatch(c, s, v);
  }
  if (s->nenum) {
    bool found = false;
    for (int i = 0; i < s->nenum && !found; i++) {
      const struct sval *e = &s->enumv[i];
      if (e->type != v->type) continue;
      if (e->type == TY_STRING) {
        size_t n;
        const char *b = bytes_of(c, v, &n, false);
        if (b == NULL) return c->oom ? -1 : mismatch(c, "holds a bad escape");
        found = n == e->len && memcmp(b, e->s, n) == 0;
      } else {
        found = e->type == TY_NULL ||
                (e->type == TY_NUMBER ? num_cmp(v, e->num) == 0 : e->num == v->num);
      }
    }
    if (!found) return enum_mismatch(c, s);
  }
  if (v->type == TY_NUMBER && (s->has & (HAS_MIN | HAS_MAX | HAS_XMIN | HAS_XMAX))) {
    if ((s->has & HAS_MIN) && num_cmp(v, s->min) < 0) return bound_mismatch(c, ">=", s->min);
    if ((s->has & HAS_XMIN) && num_cmp(v, s->xmin) <= 0) return bound_mismatch(c, ">", s->xmin);
    if ((s->has & HAS_MAX) && num_cmp(v, s->max) > 0) return bound_mismatch(c, "<=", s->max);
    if ((s->has & HAS_XMAX) && num_cmp(v, s->xmax) >= 0) return bound_mismatch(c, "<", s->xmax);
  }
  if (v->type == TY_STRING && s->string_rules) {
    size_t n;
    const char *b = bytes_of(c, v, &n, s->has_pattern);
    if (b == NULL) return c->oom ? -1 : mismatch(c, "holds a bad escape");
    if (s->has & (HAS_MIN_LEN | HAS_MAX_LEN)) {
      size_t k = code_points(b, n);
      if ((s->has & HAS_MIN_LEN) && k < s->min_len)
        return mismatch(c, "must be at least %zu characters long, got %zu", s->min_len, k);
      if ((s->has & HAS_MAX_LEN) && k > s->max_len)
        return mismatch(c, "must be at most %zu characters long, got %zu", s->max_len, k);
    }
    if (s->format == FMT_DATE_TIME && !is_date_time(b, n))
      return mismatch(c, "must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
    if (s->format == FMT_UUID && !is_uuid(b, n))
      return mismatch(c, "must be a UUID (such as 123e4567-e89b-12d3-a456-426614174000)");
    /* regexec reads up to a NUL: a string holding one never matches. */
    if (s->has_pattern && (memchr(b, '\0', n) || regexec(&s->re, b, 0, NULL, 0) != 0))
      return mismatch(c, "must match the pattern %s", s->pattern);
  }
  return 1;
}

/* ---- reading the text ---- */

static const unsigned char ws[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && ws[(unsigned char)*p]) p++;
  return p;
}

/* The string whose opening quote is at p: its bytes into v; returns the
 * byte after its closing quote, or NULL. */
static const char *read_string(const char *p, const char *end, struct val *v) {
  const char *q = ++p;
  bool esc = false;
  while (q < end && *q != '"') {
    if (*q == '\\') {
      esc = true;
      q++;
    }
    q++;
  }
  if (q >= end) return NULL;
  *v = (struct val){.type = TY_STRING, .s = p, .len = (size_t)(q - p), .esc = esc};
  return q + 1;
}

/* The number at p; NULL when it is none. */
static const char *read_number(struct ck *c, const char *p, const char *end, struct val *v) {
  const char *q = p;
  bool integer = true;
  size_t ndigits = 0;
  uint64_t whole = 0;
  if (q < end && *q == '-') q++;
  for (; q < end; q++) {
    char ch = *q;
    if (ch >= '0' && ch <= '9') {
      if (integer) {
        if (ndigits < 19) whole = whole * 10 + (uint64_t)(ch - '0');
        ndigits++;
      }
    } else if (ch == '.' || ch == 'e' || ch == 'E' || ((ch == '+' || ch == '-') && !integer)) {
      integer = false;
    } else {
      break;
    }
  }
  size_t n = (size_t)(q - p);
  if (n == 0 || !grow(c, n + 1)) return NULL;
  char *buf = c->sc->buf;
  memcpy(buf, p, n);
  buf[n] = '\0';
  char dp = localeconv()->decimal_point[0];
  if (dp != '.') {
    char *dot = memchr(buf, '.', n);
    if (dot) *dot = dp;
  }
  char *stop;
  *v = (struct val){.type = TY_NUMBER, .num = strtod(buf, &stop)};
  if (stop == buf) return NULL;
  /* As json_decode: an integer literal above 2^53 is kept exact. */
  if (integer && (ndigits > 16 || (ndigits == 16 && whole > 9007199254740992ULL))) {
    v->big = true;
    v->big_value = strtold(buf, NULL);
  }
  v->integral = v->big || integral(v->num);
  return q;
}

/* Skips the value at p without looking at it. */
static const char *skip_value(const char *p, const char *end) {
  int depth = 0;
  do {
    p = skip_ws(p, end);
    if (p >= end) return NULL;
    switch (*p) {
      case '"': {
        struct val v;
        if (!(p = read_string(p, end, &v))) return NULL;
        break;
      }
      case '{':
      case '[': depth++, p++; break;
      case '}':
      case ']': depth--, p++; break;
      case ',':
      case ':':
        if (depth == 0) return NULL;
        p++;
        break;
      default:
        while (p < end && !ws[(unsigned char)*p] && *p != ',' && *p != ':' && *p != '}' &&
               *p != ']' && *p != '"' && *p != '{' && *p != '[')
          p++;
    }
  } while (depth > 0);
  return depth == 0 ? p : NULL;
}

static int check_value(struct ck *c, const struct schema *s, const char **pp);

#define NOT_JSON (-2)

static int check_members(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp + 1, c->end), *end = c->end;
  uint64_t seen[SCHEMA_MAX_NAMES / 64] = {0};
  if (p < end && *p == '}') {
    p++;
  } else {
    for (;;) {
      struct val k;
      if (p >= end || *p != '"' || !(p = read_string(p, end, &k))) return NOT_JSON;
      p = skip_ws(p, end);
      if (p >= end || *p != ':') return NOT_JSON;
      p++;
      int i = -1;
      size_t kn;
      const char *kb = bytes_of(c, &k, &kn, false);
      if (kb == NULL) return c->oom ? -1 : NOT_JSON;
      i = schema_find_name(s, kb, kn);
      const struct schema *sub = NULL;
      c->path[++c->depth] = (struct seg){.key = k.s, .len = k.len, .esc = k.esc};
      if (i >= 0) {
        seen[i / 64] |= 1ULL << (i % 64);
        sub = s->names[i].schema;
      } else if (s->additional == ADD_NONE) {
        return mismatch(c, "is not allowed (additionalProperties is false)");
      } else if (s->additional == ADD_SCHEMA) {
        sub = s->additional_schema;
      }
      int rc = check_value(c, sub, &p);
      if (rc != 1) return rc;
      c->depth--;
      p = skip_ws(p, end);
      if (p < end && *p == ',') {
        p = skip_ws(p + 1, end);
        continue;
      }
      if (p < end && *p == '}') {
        p++;
        break;
      }
      return NOT_JSON;
    }
  }
  for (int i = 0; i < s->nnames; i++) {
    if (!s->names[i].required || (seen[i / 64] >> (i % 64) & 1)) continue;
    c->path[++c->depth] = (struct seg){.key = s->names[i].s, .len = s->names[i].len};
    return mismatch(c, "is required");
  }
  *pp = p;
  return 1;
}

static int check_items(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp + 1, c->end), *end = c->end;
  size_t n = 0;
  if (p < end && *p == ']') {
    p++;
  } else {
    for (;; n++) {
      c->path[++c->depth] = (struct seg){.index = n};
      int rc = check_value(c, s->items, &p);
      if (rc != 1) return rc;
      c->depth--;
      p = skip_ws(p, end);
      if (p < end && *p == ',') {
        p++;
        continue;
      }
      if (p < end && *p == ']') {
        p++;
        n++;
        break;
      }
      return NOT_JSON;
    }
  }
  if ((s->has & HAS_MIN_ITEMS) && n < s->min_items)
    return mismatch(c, "must hold at least %zu items, got %zu", s->min_items, n);
  if ((s->has & HAS_MAX_ITEMS) && n > s->max_items)
    return mismatch(c, "must hold at most %zu items, got %zu", s->max_items, n);
  *pp = p;
  return 1;
}

/* Checks the value at *pp against s (NULL: anything) and moves *pp past it.
 * Returns 1, 0 (mismatch, in c->err), -1 (out of memory) or NOT_JSON. */
static int check_value(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp, c->end), *end = c->end;
  if (p >= end) return NOT_JSON;
  if (s == NULL) {
    *pp = skip_value(p, end);
    return *pp ? 1 : NOT_JSON;
  }
  struct val v = {0};
  const char *next = NULL;
  switch (*p) {
    case '{': v.type = TY_OBJECT; break;
    case '[': v.type = TY_ARRAY; break;
    case '"': next = read_string(p, end, &v); break;
    case 't':
    case 'f':
      v = (struct val){.type = TY_BOOLEAN, .num = *p == 't'};
      next = end - p >= (*p == 't' ? 4 : 5) ? p + (*p == 't' ? 4 : 5) : NULL;
      break;
    case 'n':
      v.type = TY_NULL;
      next = end - p >= 4 ? p + 4 : NULL;
      break;
    default:
      next = read_number(c, p, end, &v);
      if (next == NULL && c->oom) return -1;
  }
  if (v.type != TY_OBJECT && v.type != TY_ARRAY && next == NULL) return NOT_JSON;
  int rc = check_scalar(c, s, &v);
  if (rc != 1) return rc;
  if (v.type == TY_OBJECT && s->object_rules) {
    *pp = p;
    return check_members(c, s, pp);
  }
  if (v.type == TY_ARRAY && s->array_rules) {
    *pp = p;
    return check_items(c, s, pp);
  }
  if (v.type == TY_OBJECT || v.type == TY_ARRAY) next = skip_value(p, end);
  if (next == NULL) return NOT_JSON;
  *pp = next;
  return 1;
}

int schema_check_json(const schema *s, const char *text, size_t len, struct schema_scratch *sc,
                      char *err, size_t errlen) {
  struct ck c = {.sc = sc, .end = text + len, .err = err, .errlen = errlen};
  const char *p = text;
  if (errlen) err[0] = '\0';
  int rc = check_value(&c, s, &p);
  if (rc == 1 && skip_ws(p, c.end) != c.end) rc = NOT_JSON;
  if (rc == 1 || rc == 0) return rc;
  if (errlen) snprintf(err, errlen, "%s", c.oom || rc == -1 ? "out of memory" : "not JSON");
  return -1;
}

/* ---- the flat record ---- */

int schema_match_flat(const schema *s, const struct json_flat *rec, struct schema_scratch *sc) {
  /* Only what a check without messages reads: this runs on every body of
   * the fast path, and the path alone is a kilobyte to clear. */
  struct ck c;
  c.sc = sc;
  c.end = NULL;
  c.err = NULL;
  c.errlen = 0;
  c.depth = 0;
  c.oom = false;
  struct val obj = {.type = TY_OBJECT};
  if (check_scalar(&c, s, &obj) != 1) return 0;
  if (!s->object_rules) return 1;
  uint64_t seen[SCHEMA_MAX_NAMES / 64] = {0};
  for (int k = 0; k < rec->n; k++) {
    int i = schema_find_name(s, rec->key[k].s, rec->key[k].len);
    const struct schema *sub = NULL;
    if (i >= 0) {
      seen[i / 64] |= 1ULL << (i % 64);
      sub = s->names[i].schema;
    } else if (s->additional == ADD_NONE) {
      return 0;
    } else if (s->additional == ADD_SCHEMA) {
      sub = s->additional_schema;
    }
    if (sub == NULL) continue;
    struct val v; /* field by field: big_value is read only when big */
    v.big = v.esc = v.integral = false;
    v.num = 0;
    v.s = NULL;
    v.len = 0;
    switch (rec->type[k]) {
      case JSON_FLAT_NUMBER:
        v.type = TY_NUMBER;
        v.num = rec->num[k];
        v.integral = integral(v.num);
        break;
      case JSON_FLAT_STRING:
        v.type = TY_STRING;
        v.s = rec->str[k];
        v.len = rec->len[k];
        /* A JSON string's bytes follow its quote; an integer literal above
         * 2^53, typed a string by json_scan_flat, starts right after ':' or
         * whitespace. */
        const char *before = rec->str[k] - 1; /* in the text: after '{' at least */
        if (*before != '"' && read_number(&c, rec->str[k], rec->str[k] + rec->len[k], &v) == NULL)
          return 0;
        break;
      case JSON_FLAT_TRUE:
        v.type = TY_BOOLEAN;
        v.num = 1;
        break;
      case JSON_FLAT_FALSE: v.type = TY_BOOLEAN; break;
      default: v.type = TY_NULL;
    }
    if (check_scalar(&c, sub, &v) != 1) return 0;
  }
  for (int i = 0; i < s->nnames; i++)
    if (s->names[i].required && !(seen[i / 64] >> (i % 64) & 1)) return 0;
  return 1;
}
