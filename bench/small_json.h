/* small_json.h: the JSON decoder of the hand-written clients (raw_client.c,
 * tls_client.c), so that both do the same decoding work per entry as
 * luastream's host does before a handler runs.
 *
 * decode() validates one JSON value and, for a top-level object, fills the
 * list of its members: the key (unescaped), the value's type, its text
 * (strings unescaped into the scratch buffer) and, for numbers, the value;
 * doc_get() finds a member. One includer per program: the functions are
 * static. */
#ifndef BENCH_SMALL_JSON_H
#define BENCH_SMALL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 32

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_OBJECT, J_ARRAY };

struct jfield {
  const char *key;
  size_t keylen;
  enum jtype type;
  const char *str; /* J_STRING: unescaped text */
  size_t len;
  double num; /* J_NUMBER */
};

struct jdoc {
  struct jfield field[MAX_FIELDS];
  int nfields;
  char scratch[1024]; /* unescaped strings */
  size_t used;
};

struct jparser {
  const char *p, *end;
  struct jdoc *doc;
  int depth;
};

static void skip_ws(struct jparser *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string at j->p (the opening quote); its unescaped text into the scratch
 * buffer when out is not NULL. */
static bool parse_string(struct jparser *j, const char **out, size_t *outlen) {
  j->p++;
  const char *start = j->p;
  /* Fast path: no escapes, the text is used in place. */
  while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20) j->p++;
  if (j->p < j->end && *j->p == '"') {
    if (out) *out = start, *outlen = (size_t)(j->p - start);
    j->p++;
    return true;
  }
  struct jdoc *d = j->doc;
  char *w = d->scratch + d->used, *wend = d->scratch + sizeof d->scratch;
  if ((size_t)(j->p - start) > (size_t)(wend - w)) return false;
  memcpy(w, start, (size_t)(j->p - start));
  char *begin = w;
  w += j->p - start;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p++;
    if (c < 0x20) return false;
    if (c != '\\') {
      if (w == wend) return false;
      *w++ = (char)c;
      continue;
    }
    if (j->p == j->end) return false;
    char e = *j->p++;
    char lit = e == '"'    ? '"'
               : e == '\\' ? '\\'
               : e == '/'  ? '/'
               : e == 'b'  ? '\b'
               : e == 'f'  ? '\f'
               : e == 'n'  ? '\n'
               : e == 'r'  ? '\r'
               : e == 't'  ? '\t'
                           : 0;
    if (lit) {
      if (w == wend) return false;
      *w++ = lit;
      continue;
    }
    if (e != 'u' || j->end - j->p < 4) return false;
    unsigned cp = 0;
    for (int i = 0; i < 4; i++) {
      int h = hexval(j->p[i]);
      if (h < 0) return false;
      cp = cp << 4 | (unsigned)h;
    }
    j->p += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
      if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') return false;
      unsigned lo = 0;
      for (int i = 2; i < 6; i++) {
        int h = hexval(j->p[i]);
        if (h < 0) return false;
        lo = lo << 4 | (unsigned)h;
      }
      if (lo < 0xDC00 || lo > 0xDFFF) return false;
      j->p += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return false;
    }
    if (wend - w < 4) return false;
    if (cp < 0x80) {
      *w++ = (char)cp;
    } else if (cp < 0x800) {
      *w++ = (char)(0xC0 | cp >> 6);
      *w++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *w++ = (char)(0xE0 | cp >> 12);
      *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
      *w++ = (char)(0xF0 | cp >> 18);
      *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
      *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *w++ = (char)(0x80 | (cp & 0x3F));
    }
  }
  if (j->p == j->end) return false;
  j->p++;
  if (out) *out = begin, *outlen = (size_t)(w - begin);
  d->used = (size_t)(w - d->scratch);
  return true;
}

/* A number: JSON's grammar, the value from an integer fast path or strtod. */
static bool parse_number(struct jparser *j, double *out) {
  const char *s = j->p;
  bool neg = false, integral = true;
  if (j->p < j->end && *j->p == '-') neg = true, j->p++;
  if (j->p == j->end) return false;
  if (*j->p == '0') {
    j->p++;
  } else if (*j->p >= '1' && *j->p <= '9') {
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  } else {
    return false;
  }
  if (j->p < j->end && *j->p == '.') {
    integral = false;
    j->p++;
    const char *digits = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p == digits) return false;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    integral = false;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    const char *digits = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p == digits) return false;
  }
  size_t n = (size_t)(j->p - s);
  if (integral && n - neg <= 15) {
    int64_t v = 0;
    for (const char *c = s + neg; c < j->p; c++) v = v * 10 + (*c - '0');
    *out = (double)(neg ? -v : v);
    return true;
  }
  char buf[64];
  if (n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  *out = strtod(buf, NULL);
  return true;
}

static bool parse_value(struct jparser *j, enum jtype *type, const char **str, size_t *len,
                        double *num);

/* An object or array; members of the top-level object go into the doc. */
static bool parse_container(struct jparser *j, bool object, bool top) {
  if (++j->depth > 64) return false;
  j->p++;
  skip_ws(j);
  if (j->p < j->end && *j->p == (object ? '}' : ']')) {
    j->p++;
    j->depth--;
    return true;
  }
  for (;;) {
    skip_ws(j);
    struct jfield f = {0};
    if (object) {
      if (j->p == j->end || *j->p != '"') return false;
      if (!parse_string(j, &f.key, &f.keylen)) return false;
      skip_ws(j);
      if (j->p == j->end || *j->p != ':') return false;
      j->p++;
      skip_ws(j);
    }
    if (!parse_value(j, &f.type, &f.str, &f.len, &f.num)) return false;
    if (top && object && j->doc->nfields < MAX_FIELDS) j->doc->field[j->doc->nfields++] = f;
    skip_ws(j);
    if (j->p == j->end) return false;
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p != (object ? '}' : ']')) return false;
    j->p++;
    j->depth--;
    return true;
  }
}

static bool literal(struct jparser *j, const char *word, size_t n) {
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return false;
  j->p += n;
  return true;
}

static bool parse_value(struct jparser *j, enum jtype *type, const char **str, size_t *len,
                        double *num) {
  if (j->p == j->end) return false;
  switch (*j->p) {
    case '{': *type = J_OBJECT; return parse_container(j, true, false);
    case '[': *type = J_ARRAY; return parse_container(j, false, false);
    case '"': *type = J_STRING; return parse_string(j, str, len);
    case 't': *type = J_TRUE; return literal(j, "true", 4);
    case 'f': *type = J_FALSE; return literal(j, "false", 5);
    case 'n': *type = J_NULL; return literal(j, "null", 4);
    default: *type = J_NUMBER; return parse_number(j, num);
  }
}

/* Decodes text into doc; false when it is not one JSON value. */
static bool decode(const char *text, size_t len, struct jdoc *doc) {
  struct jparser j = {text, text + len, doc, 0};
  doc->nfields = 0;
  doc->used = 0;
  skip_ws(&j);
  if (j.p == j.end) return false;
  bool ok;
  if (*j.p == '{') {
    ok = parse_container(&j, true, true);
  } else {
    enum jtype t;
    const char *s;
    size_t n;
    double v;
    ok = parse_value(&j, &t, &s, &n, &v);
  }
  skip_ws(&j);
  return ok && j.p == j.end;
}

static const struct jfield *doc_get(const struct jdoc *d, const char *key) {
  size_t n = strlen(key);
  for (int i = d->nfields - 1; i >= 0; i--) /* the last one wins, as in a Lua table */
    if (d->field[i].keylen == n && memcmp(d->field[i].key, key, n) == 0) return &d->field[i];
  return NULL;
}

#endif
