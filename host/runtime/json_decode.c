/* json_decode: a JSON decoder that pushes the Lua value as it reads the bytes.
 *
 * It reproduces lua-cjson 2.1.0's decoder (cjson.safe, decode_invalid_numbers
 * off) rule for rule, because handlers and their specs were written against
 * it: whitespace is space, tab, CR and LF only; strings may hold raw control
 * bytes and any non-UTF-8 bytes (cjson checks neither) but no NUL; numbers are
 * what strtod reads after cjson's own refusals (a leading '+', leading zeros,
 * hex, inf and nan), so "-.5" and "1." are numbers; tables
 * are filled in document order (their pairs() order is Lua's, as with any
 * table, and may differ from cjson's). Error messages are cjson's, down to its
 * token names ("Expected comma or array end but found T_STRING at character
 * 9"): they are what users have seen in logs and dead letters so far.
 *
 * Two deliberate differences, both about numbers a double cannot hold (cjson
 * changes them without a word): an integer literal (no fraction, no
 * exponent) above 2^53 in magnitude becomes a string of its exact digits,
 * and a number beyond the largest double ("1e400", inf in cjson) is refused
 * (JSON_DECODE_RANGE).
 *
 * The parse is iterative, not recursive: open containers live on the Lua
 * stack (a table, and for an object the key being filled) and their kind and
 * next array index in a small array of ints, so 1000 levels of nesting cost
 * no C recursion. Only the error path scans a token twice (to name it the way
 * cjson does), and a body json_scan_flat() gives up on is parsed again from
 * the start by parse(). */
#include "json_decode.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* Slots a new table starts with (objects: hash, arrays: array part). */
#define PRESIZE 4
/* Escaped strings whose decoded bytes fit here are built on the C stack;
 * longer ones go through a luaL_Buffer. */
#define UNESCAPE_BUF 256
/* Numbers strtod must read are copied here to be NUL-terminated; longer ones
 * (hundreds of digits: never seen outside of tests) become a Lua string. */
#define NUMBER_BUF 64
/* Free Lua stack slots made sure of at the start and at every '{' or '[':
 * the container's table and key, a value, and room for the pieces a
 * luaL_Buffer keeps on the stack (a long escaped string, a long number in a
 * locale whose decimal point is not '.'). The stack grows by at most 2 slots
 * per level, so each check covers everything until the next level opens. */
#define STACK_NEED LUA_MINSTACK

struct decoder {
  lua_State *L;
  const char *text, *end; /* the input: [text, end) */
  char *err;
  size_t errlen;
};

/* ---- character classes ---- */

enum {
  WS = 1,       /* JSON's whitespace */
  STR_STOP = 2, /* ends a run of plain string bytes */
  INT_STOP = 4, /* after digits, makes them more than a plain integer (or hex) */
};

static const unsigned char cls[256] = {
    [' '] = WS,       ['\t'] = WS,       ['\n'] = WS,       ['\r'] = WS,
    ['"'] = STR_STOP, ['\\'] = STR_STOP, ['\0'] = STR_STOP, ['.'] = INT_STOP,
    ['e'] = INT_STOP, ['E'] = INT_STOP,  ['x'] = INT_STOP,  ['X'] = INT_STOP,
};

/* The single-character escapes; 'u' is handled on its own. */
static const char unescape_char[256] = {
    ['"'] = '"',  ['\\'] = '\\', ['/'] = '/',  ['b'] = '\b',
    ['f'] = '\f', ['n'] = '\n',  ['r'] = '\r', ['t'] = '\t',
};

static inline const char *skip_ws(const char *p, const char *end) {
  while (p < end && (cls[(unsigned char)*p] & WS)) p++;
  return p;
}

static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Skips the bytes of a string up to its first '"', '\\' or NUL, or to near
 * the end of the input: 8 bytes at a time, with the classic "has a zero byte"
 * test on w, w ^ '"' and w ^ '\\' in every byte. Its lowest set bit is exact
 * (only bits above a match can be false), so on a little-endian machine it
 * also says which byte stopped the run. The caller finishes byte by byte. */
static inline const char *skip_plain(const char *q, const char *end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  while (end - q >= 8) {
    uint64_t w, x, y;
    memcpy(&w, q, 8);
    x = w ^ (ones * '"');
    y = w ^ (ones * '\\');
    uint64_t hit = (((w - ones) & ~w) | ((x - ones) & ~x) | ((y - ones) & ~y)) & highs;
    if (hit) return q + (__builtin_ctzll(hit) >> 3);
    q += 8;
  }
#else
  (void)end;
#endif
  return q;
}

static bool literal(const char *p, const char *end, const char *word, size_t n) {
  return (size_t)(end - p) >= n && memcmp(p, word, n) == 0;
}

/* ---- errors ---- */

static int fail(struct decoder *d, const char *expected, const char *found, const char *at) {
  if (d->errlen)
    snprintf(d->err, d->errlen, "Expected %s but found %s at character %zu", expected, found,
             (size_t)(at - d->text) + 1);
  return -1;
}

static const char *check_string(const char *p, const char *end, const char **close, size_t *outlen,
                                const char **why);
enum number_kind {
  NUM_DOUBLE,       /* a double: exact, or the nearest one (fractions, exponents) */
  NUM_BIG_INTEGER,  /* an integer literal above 2^53 in magnitude: kept as its digits */
  NUM_OUT_OF_RANGE, /* beyond the largest double: refused (JSON_DECODE_RANGE) */
};

static const char *scan_number(lua_State *L, const char *p, const char *end, double *value,
                               enum number_kind *kind);

/* Reports that the token at p (whitespace skipped) is not what the context
 * wanted, naming it as cjson's tokenizer would: by its type, or by what is
 * wrong with it, at the position cjson gives (inside a bad string, the
 * offending byte or escape). */
static int fail_token(struct decoder *d, const char *expected, const char *p) {
  const char *end = d->end, *found = "invalid token", *at = p, *why;
  if (p == end || *p == '\0') return fail(d, expected, "T_END", p);
  switch (*p) {
    case '{': found = "T_OBJ_BEGIN"; break;
    case '}': found = "T_OBJ_END"; break;
    case '[': found = "T_ARR_BEGIN"; break;
    case ']': found = "T_ARR_END"; break;
    case ',': found = "T_COMMA"; break;
    case ':': found = "T_COLON"; break;
    case '"': {
      const char *bad = check_string(p, end, NULL, NULL, &why);
      found = bad ? why : "T_STRING";
      if (bad) at = bad;
      break;
    }
    case 't':
      if (literal(p, end, "true", 4)) found = "T_BOOLEAN";
      break;
    case 'f':
      if (literal(p, end, "false", 5)) found = "T_BOOLEAN";
      break;
    case 'n':
      if (literal(p, end, "null", 4)) found = "T_NULL";
      break;
    default:
      if (*p == '-' || is_digit(*p))
        found = scan_number(NULL, p, end, NULL, NULL) ? "T_NUMBER" : "invalid number";
  }
  return fail(d, expected, found, at);
}

/* ---- strings ---- */

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = (unsigned char)p[i], h;
    if (c >= '0' && c <= '9') {
      h = c - '0';
    } else {
      c |= 0x20;
      if (c < 'a' || c > 'f') return -1;
      h = c - 'a' + 10;
    }
    v = v << 4 | h;
  }
  return v;
}

/* The \uXXXX escape at p (the backslash), with its low half when it is a high
 * surrogate: returns the bytes it spans (6 or 12) and the code point, or 0
 * when cjson refuses it (bad hex, a lone or reversed surrogate). */
static int unicode_escape(const char *p, const char *end, uint32_t *cp) {
  if (end - p < 6) return 0;
  int hi = hex4(p + 2);
  if (hi < 0) return 0;
  if ((hi & 0xF800) != 0xD800) {
    *cp = (uint32_t)hi;
    return 6;
  }
  if (hi & 0x400) return 0; /* a low surrogate first */
  if (end - p < 12 || p[6] != '\\' || p[7] != 'u') return 0;
  int lo = hex4(p + 8);
  if (lo < 0 || (lo & 0xFC00) != 0xDC00) return 0;
  *cp = ((((uint32_t)hi & 0x3FF) << 10) | ((uint32_t)lo & 0x3FF)) + 0x10000;
  return 12;
}

static size_t utf8_len(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

static size_t utf8_encode(uint32_t cp, char *out) {
  size_t n = utf8_len(cp);
  switch (n) {
    case 1: out[0] = (char)cp; break;
    case 2:
      out[0] = (char)(0xC0 | cp >> 6);
      out[1] = (char)(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = (char)(0xE0 | cp >> 12);
      out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[2] = (char)(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = (char)(0xF0 | cp >> 18);
      out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[3] = (char)(0x80 | (cp & 0x3F));
  }
  return n;
}

/* Checks the string whose opening quote is at p. Returns NULL if cjson takes
 * it, with its closing quote in *close and its decoded length in *outlen (both
 * optional); else where cjson reports the problem, and *why names it. A NUL
 * ends the string early, as the end of the input does: cjson reads C strings. */
static const char *check_string(const char *p, const char *end, const char **close, size_t *outlen,
                                const char **why) {
  size_t n = 0;
  for (p++;;) {
    if (p == end || *p == '\0') {
      *why = "unexpected end of string";
      return p;
    }
    if (*p == '"') break;
    if (*p != '\\') {
      n++;
      p++;
    } else if (p + 1 < end && p[1] == 'u') {
      uint32_t cp;
      int span = unicode_escape(p, end, &cp);
      if (!span) {
        *why = "invalid unicode escape code";
        return p;
      }
      n += utf8_len(cp);
      p += span;
    } else if (p + 1 < end && unescape_char[(unsigned char)p[1]]) {
      n++;
      p += 2;
    } else {
      *why = "invalid escape code";
      return p;
    }
  }
  if (close) *close = p;
  if (outlen) *outlen = n;
  return NULL;
}

struct unescaped {
  char buf[UNESCAPE_BUF];
  size_t n;
  luaL_Buffer *lb; /* NULL while buf is used */
};

static void put(struct unescaped *u, const char *s, size_t n) {
  if (u->lb) {
    luaL_addlstring(u->lb, s, n);
  } else {
    memcpy(u->buf + u->n, s, n);
    u->n += n;
  }
}

/* The slow path of push_string: a string with escapes (or a bad one). */
static int push_escaped(struct decoder *d, const char **pp, const char *expected) {
  const char *close, *why;
  size_t outlen;
  const char *bad = check_string(*pp, d->end, &close, &outlen, &why);
  if (bad) return fail(d, expected, why, bad);

  struct unescaped u = {.n = 0, .lb = NULL};
  luaL_Buffer lb;
  if (outlen > sizeof u.buf) {
    luaL_buffinit(d->L, &lb);
    u.lb = &lb;
  }
  const char *p = *pp + 1, *run = p;
  while (p < close) {
    if (*p != '\\') {
      p++;
      continue;
    }
    put(&u, run, (size_t)(p - run));
    if (p[1] == 'u') {
      uint32_t cp;
      char utf8[4];
      p += unicode_escape(p, close, &cp);
      put(&u, utf8, utf8_encode(cp, utf8));
    } else {
      put(&u, &unescape_char[(unsigned char)p[1]], 1);
      p += 2;
    }
    run = p;
  }
  put(&u, run, (size_t)(p - run));
  if (u.lb)
    luaL_pushresult(u.lb);
  else
    lua_pushlstring(d->L, u.buf, u.n);
  *pp = close + 1;
  return 0;
}

/* Pushes the string whose opening quote is at *pp and moves *pp past its
 * closing quote. Strings without escapes (nearly all) are pushed in place.
 * [-0, +1 on success] */
static inline int push_string(struct decoder *d, const char **pp, const char *expected) {
  const char *start = *pp + 1, *q = start, *end = d->end;
  q = skip_plain(q, end);
  while (q < end && !(cls[(unsigned char)*q] & STR_STOP)) q++;
  if (q < end && *q == '"') {
    lua_pushlstring(d->L, start, (size_t)(q - start));
    *pp = q + 1;
    return 0;
  }
  return push_escaped(d, pp, expected);
}

/* ---- numbers ---- */

/* Powers of ten a double holds exactly. */
static const double pow10_exact[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* strtod on [p, stop) in the C locale's notation. Handlers never set a locale,
 * but a C module might; cjson copes the same way (fpconv.c). [-0, +0] */
static double strtod_span(lua_State *L, const char *p, const char *stop) {
  size_t n = (size_t)(stop - p);
  char dp = localeconv()->decimal_point[0];
  if (n < NUMBER_BUF) {
    char buf[NUMBER_BUF];
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (dp != '.') {
      char *dot = memchr(buf, '.', n);
      if (dot) *dot = dp;
    }
    return strtod(buf, NULL);
  }
  lua_pushlstring(L, p, n); /* for its terminating NUL */
  if (dp != '.') {
    char dps[2] = {dp, '\0'};
    luaL_gsub(L, lua_tostring(L, -1), ".", dps);
  }
  double v = strtod(lua_tostring(L, -1), NULL);
  lua_settop(L, dp != '.' ? -3 : -2);
  return v;
}

/* 2^53: integers up to this magnitude are exact in a double, and so is
 * every integer a handler computes from them. */
#define EXACT_INT_MAX 9007199254740992ULL

/* Scans the number at p (a '-' or a digit) as cjson does: its refusals first,
 * then the longest prefix strtod reads: -? (digits (. digits?)? | . digits)
 * ([eE] [+-]? digits)?, the exponent only when it has digits. Returns its end,
 * or NULL for "invalid number". With value (and kind), also converts it:
 * exactly, when at most 15 significant digits and a power of ten up to 22
 * make it one correctly rounded operation on exact doubles (Clinger's fast
 * path), else through strtod, so the result is always the one strtod gives.
 * Two kinds are not converted, so that no number changes without a word: an
 * integer literal (no fraction, no exponent) above 2^53 in magnitude, which
 * a double would round (NUM_BIG_INTEGER: the caller keeps its text), and a
 * number beyond the largest double (NUM_OUT_OF_RANGE). Without a Lua state
 * (json_scan_flat), a number strtod must read from NUMBER_BUF characters or
 * more is refused too (strtod_span copies it into a Lua string). */
static const char *scan_number(lua_State *L, const char *p, const char *end, double *value,
                               enum number_kind *kind) {
  const char *start = p;
  bool neg = *p == '-';
  if (neg) p++;
  /* cjson refuses hex and leading zeros before strtod could read them. */
  if (p < end && *p == '0' && p + 1 < end && ((p[1] | 0x20) == 'x' || is_digit(p[1]))) return NULL;

  uint64_t m = 0;      /* the significant digits, while there are at most 15 */
  uint64_t whole = 0;  /* the integer part, while it has at most 19 digits */
  int sig = 0;         /* significant digits seen */
  int digits = 0;      /* all mantissa digits seen */
  long e10 = 0;        /* the power of ten m is to be scaled by */
  bool integer = true; /* no fraction and no exponent */
  for (; p < end && is_digit(*p); p++, digits++) {
    if (digits < 19) whole = whole * 10 + (uint64_t)(*p - '0');
    if (m == 0 && *p == '0') continue;
    if (++sig <= 15) m = m * 10 + (uint64_t)(*p - '0');
  }
  if (p < end && *p == '.') {
    integer = false;
    for (p++; p < end && is_digit(*p); p++, digits++) {
      e10--;
      if (m == 0 && *p == '0') continue;
      if (++sig <= 15) m = m * 10 + (uint64_t)(*p - '0');
    }
  }
  if (digits == 0) return NULL; /* "-", "-.", "-x", "-inf"... */
  if (p < end && (*p | 0x20) == 'e') {
    const char *q = p + 1;
    bool eneg = false;
    if (q < end && (*q == '+' || *q == '-')) eneg = *q++ == '-';
    if (q < end && is_digit(*q)) {
      long x = 0;
      for (; q < end && is_digit(*q); q++)
        if (x < 100000) x = x * 10 + (*q - '0'); /* beyond: inf or 0 either way */
      e10 += eneg ? -x : x;
      p = q;
      integer = false;
    }
  }
  if (!value) return p;
  /* Leading zeros are refused above, so digits is the integer's length. */
  if (integer && (digits > 16 || (digits == 16 && whole > EXACT_INT_MAX))) {
    *kind = NUM_BIG_INTEGER;
    return p;
  }
  *kind = NUM_DOUBLE;

  double v;
  if (m == 0) {
    v = 0.0;
  } else if (sig <= 15 && e10 >= -22 && e10 <= 22 && (FLT_EVAL_METHOD == 0 || e10 == 0)) {
    v = e10 < 0 ? (double)m / pow10_exact[-e10] : (double)m * pow10_exact[e10];
  } else {
    if (L == NULL && p - start >= NUMBER_BUF) return NULL;
    /* strtod gives +-HUGE_VAL (inf) only for a finite literal too large. */
    v = strtod_span(L, start, p);
    if (isinf(v)) *kind = NUM_OUT_OF_RANGE;
    *value = v;
    return p;
  }
  *value = neg ? -v : v;
  return p;
}

/* ---- the parser ---- */

/* Reads the number at p (a '-' or a digit) into *v and its kind, and returns
 * its end, or NULL when cjson refuses it. Plain integers of up to 15 digits
 * (nearly all numbers in bodies) are read here; the rest, and what looks like
 * one, by scan_number (see there for the kinds, and what json_scan_flat, with
 * L NULL, gives up on). */
static inline const char *read_number(lua_State *L, const char *p, const char *end, double *v,
                                      enum number_kind *kind) {
  const char *q = p + (*p == '-'), *digits = q;
  uint64_t m = 0;
  const char *stop = end - q > 16 ? q + 16 : end;
  for (unsigned dv; q < stop && (dv = (unsigned char)*q - '0') < 10; q++) m = m * 10 + dv;
  if (q > digits && q - digits <= 15 && (*digits != '0' || q - digits == 1) &&
      (q == end || !(cls[(unsigned char)*q] & INT_STOP))) {
    *v = digits > p ? -(double)m : (double)m;
    *kind = NUM_DOUBLE;
    return q;
  }
  return scan_number(L, p, end, v, kind);
}

/* The general parser. On failure the stack is cut back to base. */
static int parse(struct decoder *d, int base) {
  lua_State *L = d->L;
  const char *p = d->text, *text = d->text, *end = d->end;
  char *err = d->err;
  size_t errlen = d->errlen;
  /* Per open container (1..depth): 0 for an object, else the array's next
   * index. The Lua stack holds the container's table and, for an object
   * being filled, the key of the value being read. */
  int next[JSON_DECODE_MAX_DEPTH + 1];
  int depth = 0;
  int rc = -1; /* what failing returns */

value: /* a value is next: push it */
  p = skip_ws(p, end);
  if (p == end) goto unexpected_value;
  switch (*p) {
    case '"':
      if (push_string(d, &p, "value") != 0) goto failed;
      break;
    case '{':
    case '[':
      if (++depth > JSON_DECODE_MAX_DEPTH || !lua_checkstack(L, STACK_NEED)) {
        if (errlen)
          snprintf(err, errlen, "Found too many nested data structures (%d) at character %zu",
                   depth, (size_t)(p - text) + 1);
        goto failed;
      }
      /* Room for a few keys or items from the start: a payment-sized object
     * is filled without the hash part growing three times on the way. */
      if (*p == '{')
        lua_createtable(L, 0, PRESIZE);
      else
        lua_createtable(L, PRESIZE, 0);
      next[depth] = *p++ == '{' ? 0 : 1;
      p = skip_ws(p, end);
      if (p < end && *p == (next[depth] ? ']' : '}')) {
        p++;
        depth--;
        break;
      }
      if (next[depth]) goto value;
      goto key;
    case 't':
      if (!literal(p, end, "true", 4)) goto unexpected_value;
      lua_pushboolean(L, 1);
      p += 4;
      break;
    case 'f':
      if (!literal(p, end, "false", 5)) goto unexpected_value;
      lua_pushboolean(L, 0);
      p += 5;
      break;
    case 'n':
      if (!literal(p, end, "null", 4)) goto unexpected_value;
      lua_pushlightuserdata(L, NULL); /* cjson.null */
      p += 4;
      break;
    default: {
      double v;
      const char *q;
      enum number_kind kind;
      if (*p != '-' && !is_digit(*p)) goto unexpected_value;
      if (!(q = read_number(L, p, end, &v, &kind))) {
        fail(d, "value", "invalid number", p);
        goto failed;
      }
      if (kind == NUM_BIG_INTEGER) {
        lua_pushlstring(L, p, (size_t)(q - p));
      } else if (kind == NUM_OUT_OF_RANGE) {
        if (errlen)
          snprintf(err, errlen, "Number out of range at character %zu: %.*s%s",
                   (size_t)(p - text) + 1, q - p > 40 ? 40 : (int)(q - p), p,
                   q - p > 40 ? "..." : "");
        rc = JSON_DECODE_RANGE;
        goto failed;
      } else {
        lua_pushnumber(L, v);
      }
      p = q;
    }
  }

  /* A value is on top: store it in its container; a closing bracket makes
   * that container the value to store in the one around it. */
  while (depth > 0) {
    p = skip_ws(p, end);
    if (next[depth] == 0) { /* table key value */
      lua_rawset(L, -3);
      if (p < end && *p == ',') {
        p++;
        goto key;
      }
      if (p < end && *p == '}') {
        p++;
        depth--;
        continue;
      }
      fail_token(d, "comma or object end", p);
      goto failed;
    }
    lua_rawseti(L, -2, next[depth]++); /* table value */
    if (p < end && *p == ',') {
      p++;
      goto value;
    }
    if (p < end && *p == ']') {
      p++;
      depth--;
      continue;
    }
    fail_token(d, "comma or array end", p);
    goto failed;
  }

  p = skip_ws(p, end);
  if (p != end) {
    /* cjson stops at a NUL and accepts; here it is garbage like any other. */
    if (*p == '\0')
      fail(d, "the end", "invalid token", p);
    else
      fail_token(d, "the end", p);
    goto failed;
  }
  return 0;

key: /* in an object, after '{' or ',': a key and its colon are next */
  p = skip_ws(p, end);
  if (p == end || *p != '"') {
    fail_token(d, "object key string", p);
    goto failed;
  }
  if (push_string(d, &p, "object key string") != 0) goto failed;
  p = skip_ws(p, end);
  if (p == end || *p != ':') {
    fail_token(d, "colon", p);
    goto failed;
  }
  p++;
  goto value;

unexpected_value:
  fail_token(d, "value", p);
failed:
  lua_settop(L, base);
  return rc;
}

/* The usual body, a flat object json_scan_flat reads: its values are pushed
 * in order above a slot for the table, then the shape's constructor
 * (json_shapes.h) makes the table, or, for a shape not compiled yet, they are
 * stored under their keys in document order (a repeated key: the last wins,
 * as in parse()). Anything else, invalid input included, is parse()'s. */
static int decode_flat(struct decoder *d, json_shapes *shapes) {
  lua_State *L = d->L;
  const int base = lua_gettop(L);
  struct json_flat rec;
  if (!json_scan_flat(d->text, (size_t)(d->end - d->text), &rec)) return parse(d, base);
  lua_pushnil(L); /* the table's slot */
  for (int i = 0; i < rec.n; i++) {
    switch (rec.type[i]) {
      case JSON_FLAT_NUMBER: lua_pushnumber(L, rec.num[i]); break;
      case JSON_FLAT_STRING: lua_pushlstring(L, rec.str[i], rec.len[i]); break;
      case JSON_FLAT_TRUE: lua_pushboolean(L, 1); break;
      case JSON_FLAT_FALSE: lua_pushboolean(L, 0); break;
      default: lua_pushlightuserdata(L, NULL); /* cjson.null */
    }
  }
  if (json_shapes_push(shapes, L, rec.key, rec.n)) {
    lua_replace(L, base + 1);
    lua_call(L, rec.n, 1);
    return 0;
  }
  lua_createtable(L, 0, rec.n > PRESIZE ? rec.n : PRESIZE);
  for (int i = 0; i < rec.n; i++) {
    lua_pushlstring(L, rec.key[i].s, rec.key[i].len);
    lua_pushvalue(L, base + 2 + i);
    lua_rawset(L, -3);
  }
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
  return 0;
}

int json_decode_push(lua_State *L, json_shapes *shapes, const char *text, size_t len, char *err,
                     size_t errlen) {
  struct decoder d = {L, text, text + len, err, errlen};
  /* cjson's check, kept for its message: a NUL in the first two bytes. */
  if (len >= 2 && (text[0] == '\0' || text[1] == '\0')) {
    if (errlen) snprintf(err, errlen, "JSON parser does not support UTF-16 or UTF-32");
    return -1;
  }
  /* The flat path holds a value per key on the stack and the table; without
   * that room, parse() alone. */
  if (shapes && !lua_checkstack(L, JSON_SHAPE_MAX_KEYS + 4)) shapes = NULL;
  if (!lua_checkstack(L, STACK_NEED)) {
    if (errlen) snprintf(err, errlen, "no Lua stack left to decode JSON");
    return -1;
  }
  return shapes ? decode_flat(&d, shapes) : parse(&d, lua_gettop(L));
}

int json_scan_flat(const char *text, size_t len, struct json_flat *rec) {
  const char *p = text, *end = text + len;
  int n = 0;
  if (len >= 2 && (text[0] == '\0' || text[1] == '\0')) return 0;
  p = skip_ws(p, end);
  if (p == end || *p != '{') return 0;
  p = skip_ws(p + 1, end);
  if (p == end || *p != '"') return 0;
  for (;;) {
    /* p is at a key's opening quote */
    const char *k = p + 1, *q = skip_plain(k, end);
    while (q < end && !(cls[(unsigned char)*q] & STR_STOP)) q++;
    if (q == end || *q != '"' || n == JSON_SHAPE_MAX_KEYS) return 0;
    rec->key[n] = (struct json_key){k, (size_t)(q - k)};
    p = skip_ws(q + 1, end);
    if (p == end || *p != ':') return 0;
    p = skip_ws(p + 1, end);
    if (p == end) return 0;
    switch (*p) {
      case '"': {
        const char *v = p + 1, *w = skip_plain(v, end);
        while (w < end && !(cls[(unsigned char)*w] & STR_STOP)) w++;
        if (w == end || *w != '"') return 0; /* an escape: the C API path unescapes */
        rec->type[n] = JSON_FLAT_STRING;
        rec->str[n] = v;
        rec->len[n] = (size_t)(w - v);
        p = w + 1;
        break;
      }
      case 't':
        if (!literal(p, end, "true", 4)) return 0;
        rec->type[n] = JSON_FLAT_TRUE;
        p += 4;
        break;
      case 'f':
        if (!literal(p, end, "false", 5)) return 0;
        rec->type[n] = JSON_FLAT_FALSE;
        p += 5;
        break;
      case 'n':
        if (!literal(p, end, "null", 4)) return 0;
        rec->type[n] = JSON_FLAT_NULL;
        p += 4;
        break;
      default: {
        const char *q2;
        enum number_kind kind;
        if ((*p != '-' && !is_digit(*p)) ||
            !(q2 = read_number(NULL, p, end, &rec->num[n], &kind)) || kind == NUM_OUT_OF_RANGE)
          return 0;
        if (kind == NUM_BIG_INTEGER) { /* its digits, as parse() pushes them */
          rec->type[n] = JSON_FLAT_STRING;
          rec->str[n] = p;
          rec->len[n] = (size_t)(q2 - p);
        } else {
          rec->type[n] = JSON_FLAT_NUMBER;
        }
        p = q2;
      }
    }
    n++;
    p = skip_ws(p, end);
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      if (p == end || *p != '"') return 0;
      continue;
    }
    if (p < end && *p == '}') break;
    return 0;
  }
  if (skip_ws(p + 1, end) != end) return 0;
  rec->n = n;
  return 1;
}

int json_decode_lua(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  char err[160];
  if (json_decode_push(L, NULL, text, len, err, sizeof err) == 0) return 1;
  lua_pushnil(L);
  lua_pushstring(L, err);
  return 2;
}
