/* json_encode: cjson 2.1.0's encoder, with numbers that read back the same.
 *
 * The text is built in a buffer on the C stack while it fits, then in a Lua
 * userdata (kept at stack index 2) that doubles as it grows: whatever raises
 * on the way (only running out of memory can) leaves nothing to free. Values
 * are read with raw access only, so no Lua code runs during an encode.
 *
 * One difference from cjson besides numbers: a table whose positive integer
 * keys go beyond INT_MAX is an object here (cjson overflows an int on them
 * and may silently drop items). */
#include "json_encode.h"

#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* Output that fits here needs no allocation. */
#define STACK_BUF 2048
/* cjson's defaults: encode_max_depth, encode_sparse_array(false, 2, 10). */
#define MAX_DEPTH 1000
#define SPARSE_RATIO 2
#define SPARSE_SAFE 10
/* The stack index of the growing buffer (the argument is 1). */
#define BUF_INDEX 2

/* ---- numbers ---- */

/* Writes the digits of u backwards ending at end; returns where they start. */
static char *utoa_back(uint64_t u, char *end) {
  do {
    *--end = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  return end;
}

size_t json_format_number(double x, char *out) {
  if (!isfinite(x)) return 0;
  /* 2^63 either way: the range an int64 holds, both bounds exact doubles. */
  if (x > -9223372036854775808.0 && x < 9223372036854775808.0) {
    int64_t i = (int64_t)x;
    if ((double)i == x) {
      if (i == 0) {
        if (signbit(x)) return (size_t)(memcpy(out, "-0", 3), 2);
        return (size_t)(memcpy(out, "0", 2), 1);
      }
      char tmp[24], *end = tmp + sizeof tmp;
      uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
      char *s = utoa_back(u, end);
      if (i < 0) *--s = '-';
      size_t n = (size_t)(end - s);
      memcpy(out, s, n);
      out[n] = '\0';
      return n;
    }
  }
  int n;
  if (x == floor(x)) {
    /* Beyond 2^63 every double is an integer; glibc prints it exactly. */
    n = snprintf(out, JSON_NUMBER_MAX, "%.0f", x);
  } else {
    /* The shortest of 15, 16 and 17 significant digits that reads back the
     * same (17 always does). */
    for (int prec = 15;; prec++) {
      n = snprintf(out, JSON_NUMBER_MAX, "%.*g", prec, x);
      if (prec == 17 || strtod(out, NULL) == x) break;
    }
    char dp = localeconv()->decimal_point[0];
    if (dp != '.') {
      char *d = memchr(out, dp, (size_t)n);
      if (d) *d = '.';
    }
  }
  return n > 0 ? (size_t)n : 0;
}

/* ---- the text ---- */

struct encoder {
  lua_State *L;
  char *buf;
  size_t len, cap;
  char err[128];
};

/* Makes room for n more bytes. */
static void reserve(struct encoder *e, size_t n) {
  if (n <= e->cap - e->len) return;
  size_t cap = e->cap * 2;
  if (cap < e->len + n) cap = e->len + n;
  char *grown = lua_newuserdata(e->L, cap);
  memcpy(grown, e->buf, e->len);
  lua_replace(e->L, BUF_INDEX); /* the old block is garbage now */
  e->buf = grown;
  e->cap = cap;
}

static inline void put(struct encoder *e, const char *s, size_t n) {
  reserve(e, n);
  memcpy(e->buf + e->len, s, n);
  e->len += n;
}

static inline void putc1(struct encoder *e, char c) {
  reserve(e, 1);
  e->buf[e->len++] = c;
}

/* cjson's escapes: control bytes, '"', '\\', '/' and DEL; other bytes (UTF-8
 * or not) as they are. */
static const char *const escape[256] = {
    "\\u0000", "\\u0001", "\\u0002",      "\\u0003",       "\\u0004",     "\\u0005",
    "\\u0006", "\\u0007", "\\b",          "\\t",           "\\n",         "\\u000b",
    "\\f",     "\\r",     "\\u000e",      "\\u000f",       "\\u0010",     "\\u0011",
    "\\u0012", "\\u0013", "\\u0014",      "\\u0015",       "\\u0016",     "\\u0017",
    "\\u0018", "\\u0019", "\\u001a",      "\\u001b",       "\\u001c",     "\\u001d",
    "\\u001e", "\\u001f", ['"'] = "\\\"", ['\\'] = "\\\\", ['/'] = "\\/", [127] = "\\u007f",
};

static void put_string(struct encoder *e, const char *s, size_t n) {
  putc1(e, '"');
  const char *run = s, *end = s + n;
  for (const char *p = s; p < end; p++) {
    const char *esc = escape[(unsigned char)*p];
    if (esc) {
      put(e, run, (size_t)(p - run));
      put(e, esc, strlen(esc));
      run = p + 1;
    }
  }
  put(e, run, (size_t)(end - run));
  putc1(e, '"');
}

static bool fail(struct encoder *e, const char *type, const char *why) {
  snprintf(e->err, sizeof e->err, "Cannot serialise %s: %s", type, why);
  return false;
}

static bool put_number(struct encoder *e, double x) {
  reserve(e, JSON_NUMBER_MAX);
  size_t n = json_format_number(x, e->buf + e->len);
  if (n == 0) return fail(e, "number", "must not be NaN or Inf");
  e->len += n;
  return true;
}

/* ---- values ---- */

/* The table on top as cjson sees it: its length as an array (> 0), 0 for an
 * object (or the empty table, written {}), -1 for an error. */
static int array_length(struct encoder *e) {
  lua_State *L = e->L;
  double max = 0;
  int items = 0;
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {
    double k;
    if (lua_type(L, -2) == LUA_TNUMBER && (k = lua_tonumber(L, -2)) >= 1 && floor(k) == k &&
        k <= INT_MAX) {
      if (k > max) max = k;
      items++;
      lua_pop(L, 1);
      continue;
    }
    lua_pop(L, 2);
    return 0;
  }
  if (max > (double)items * SPARSE_RATIO && max > SPARSE_SAFE) {
    fail(e, "table", "excessively sparse array");
    return -1;
  }
  return (int)max;
}

static bool put_value(struct encoder *e, int depth);

static bool put_table(struct encoder *e, int depth) {
  lua_State *L = e->L;
  /* key, value and the buffer's next block */
  if (depth > MAX_DEPTH || !lua_checkstack(L, 4)) {
    snprintf(e->err, sizeof e->err, "Cannot serialise, excessive nesting (%d)", depth);
    return false;
  }
  int n = array_length(e);
  if (n < 0) return false;
  if (n > 0) {
    putc1(e, '[');
    for (int i = 1; i <= n; i++) {
      if (i > 1) putc1(e, ',');
      lua_rawgeti(L, -1, i);
      if (!put_value(e, depth)) return false;
      lua_pop(L, 1);
    }
    putc1(e, ']');
    return true;
  }
  putc1(e, '{');
  bool first = true;
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {
    if (!first) putc1(e, ',');
    first = false;
    switch (lua_type(L, -2)) {
      case LUA_TSTRING: {
        size_t len;
        const char *k = lua_tolstring(L, -2, &len);
        put_string(e, k, len);
        break;
      }
      case LUA_TNUMBER:
        putc1(e, '"');
        if (!put_number(e, lua_tonumber(L, -2))) return false;
        putc1(e, '"');
        break;
      default:
        return fail(e, lua_typename(L, lua_type(L, -2)), "table key must be a number or string");
    }
    putc1(e, ':');
    if (!put_value(e, depth)) return false;
    lua_pop(L, 1);
  }
  putc1(e, '}');
  return true;
}

/* Writes the value on top of the stack (left there). */
static bool put_value(struct encoder *e, int depth) {
  lua_State *L = e->L;
  switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      put_string(e, s, len);
      return true;
    }
    case LUA_TNUMBER: return put_number(e, lua_tonumber(L, -1));
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, -1))
        put(e, "true", 4);
      else
        put(e, "false", 5);
      return true;
    case LUA_TTABLE: return put_table(e, depth + 1);
    case LUA_TNIL: put(e, "null", 4); return true;
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, -1) == NULL) {
        put(e, "null", 4);
        return true;
      }
      /* fall through */
    default: return fail(e, lua_typename(L, lua_type(L, -1)), "type not supported");
  }
}

/* encode(value) -> text | nil, message */
static int encode(lua_State *L) {
  luaL_argcheck(L, lua_gettop(L) == 1, 1, "expected 1 argument");
  char stack_buf[STACK_BUF];
  struct encoder e = {.L = L, .buf = stack_buf, .len = 0, .cap = sizeof stack_buf};
  lua_pushnil(L); /* BUF_INDEX: the buffer once it outgrows stack_buf */
  lua_pushvalue(L, 1);
  if (!put_value(&e, 0)) {
    lua_pushnil(L);
    lua_pushstring(L, e.err);
    return 2;
  }
  lua_pushlstring(L, e.buf, e.len);
  return 1;
}

int luaopen_luastream_json_encode(lua_State *L) {
  lua_pushcfunction(L, encode);
  return 1;
}
