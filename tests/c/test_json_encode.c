/* Tests for json_encode.c: json_format_number on the edges and on random
 * doubles (each reads back as the same double, with the fewest digits that
 * do), and the encoder against lua-cjson 2.1.0 on random values without
 * numbers cjson would round (the same text, or the same error). */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "json_encode.h"
#include "task.h"

static const char *fmt(double x) {
  static char out[JSON_NUMBER_MAX];
  memset(out, 'z', sizeof out);
  size_t n = json_format_number(x, out);
  ASSERT_INT_EQ((int)strlen(out), (int)n);
  return out;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* x's text reads back as x, has no more digits than needed, and is JSON. */
static void check_round_trip(double x) {
  const char *s = fmt(x);
  double back = strtod(s, NULL);
  if (!same_bits(back, x)) TEST_FAIL_("%.17g written %s reads back as %.17g", x, s, back);
  if (x != floor(x)) {
    /* significant digits: leading zeros of 0.00x do not count */
    char shorter[JSON_NUMBER_MAX];
    int digits = 0;
    for (const char *p = s; *p && *p != 'e'; p++)
      if (*p >= '1' && *p <= '9')
        digits++;
      else if (*p == '0' && digits > 0)
        digits++;
    snprintf(shorter, sizeof shorter, "%.*g", digits - 1, x);
    if (digits > 15 && strtod(shorter, NULL) == x)
      TEST_FAIL_("%.17g written %s, but %s (fewer digits) reads back the same", x, s, shorter);
  } else if (strpbrk(s, ".eE")) {
    TEST_FAIL_("the integer %.17g written %s", x, s);
  }
  /* JSON's grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
  const char *p = s + (*s == '-');
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (*p >= '0' && *p <= '9') p++;
  else
    TEST_FAIL_("%s is not JSON", s);
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9')) TEST_FAIL_("%s is not JSON", s);
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) TEST_FAIL_("%s is not JSON", s);
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p) TEST_FAIL_("%s is not JSON", s);
}

TEST_IMPL(json_encode_numbers) {
  static const struct {
    double x;
    const char *want;
  } cases[] = {
      {0, "0"},
      {-0.0, "-0"},
      {1, "1"},
      {-1, "-1"},
      {9007199254740991.0, "9007199254740991"},
      {9007199254740992.0, "9007199254740992"},
      {9007199254740994.0, "9007199254740994"},
      {-9007199254740994.0, "-9007199254740994"},
      {123456789012345.0, "123456789012345"},
      {1234567890123456.0, "1234567890123456"},
      {12345678901234567.0, "12345678901234568"},
      {1e20, "100000000000000000000"},
      {1e23, "99999999999999991611392"},
      {9223372036854775808.0, "9223372036854775808"},
      {-9223372036854775808.0, "-9223372036854775808"},
      {18446744073709551616.0, "18446744073709551616"},
      {0.1, "0.1"},
      {1.5, "1.5"},
      {-2.25, "-2.25"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0 / 3, "0.3333333333333333"},
      {2.0 / 3, "0.6666666666666666"},
      {1e-7, "1e-07"},
      {5e-324, "4.94065645841247e-324"},
      {123456.789, "123456.789"},
      {1234567890123.5, "1234567890123.5"},
      {4503599627370495.5, "4503599627370495.5"},
      {DBL_MIN, "2.2250738585072014e-308"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *got = fmt(cases[i].x);
    if (strcmp(got, cases[i].want) != 0)
      TEST_FAIL_("%.17g: got %s, want %s", cases[i].x, got, cases[i].want);
    check_round_trip(cases[i].x);
  }
  /* the largest doubles: every digit of the integer, nothing else */
  ASSERT_INT_EQ((int)strlen(fmt(1e308)), 309);
  ASSERT_INT_EQ((int)strlen(fmt(-DBL_MAX)), 310);
  check_round_trip(1e308);
  check_round_trip(DBL_MAX);
  check_round_trip(-DBL_MAX);
  char out[JSON_NUMBER_MAX];
  ASSERT_INT_EQ((int)json_format_number(NAN, out), 0);
  ASSERT_INT_EQ((int)json_format_number(INFINITY, out), 0);
  ASSERT_INT_EQ((int)json_format_number(-INFINITY, out), 0);
}

/* xorshift64*: the same sequence on every run and machine. */
static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static uint64_t rnd64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

TEST_IMPL(json_encode_numbers_read_back_the_same) {
  for (int i = 0; i < 200000; i++) {
    uint64_t bits = rnd64();
    double x;
    switch (i % 4) {
      case 0: memcpy(&x, &bits, sizeof x); break;                /* any double */
      case 1: x = (double)(int64_t)(bits >> (bits & 63)); break; /* integers of every size */
      case 2: x = (double)(bits % 100000000) / 100; break;       /* cents */
      default: x = ldexp((double)(bits >> 11), (int)(bits % 200) - 160); /* fractions */
    }
    if (!isfinite(x)) continue;
    check_round_trip(x);
    check_round_trip(-x);
  }
}

/* In a locale with a decimal comma the text is JSON still. */
TEST_IMPL(json_encode_numbers_in_a_comma_locale) {
  const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE"};
  int found = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && !found; i++)
    found = setlocale(LC_NUMERIC, names[i]) != NULL && localeconv()->decimal_point[0] == ',';
  if (!found) setlocale(LC_NUMERIC, "C");
  ASSERT_STR_EQ(fmt(0.1), "0.1");
  ASSERT_STR_EQ(fmt(0.1 + 0.2), "0.30000000000000004");
  ASSERT_STR_EQ(fmt(-1.5), "-1.5");
  setlocale(LC_NUMERIC, "C");
}

/* ---- the encoder against cjson ---- */

/* Random values (numbers only those cjson writes exactly: integers below
 * 10^14 and short fractions), encoded by both: the same text or error. */
static const char differ_lua[] =
    "local ours, cjson = ...\n"
    "local seed = 12345\n"
    "local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end\n"
    "local strings = { '', 'pay', 'a/b', '\"', '\\\\', '\\0', '\\1\\31\\127', '\\200\\255', 'caf\\195\\169',\n"
    "  '\\n\\r\\t\\b\\f', 'acct-42' }\n"
    "local function value(depth)\n"
    "  local k = rnd(depth > 4 and 6 or 10)\n"
    "  if k == 0 then return rnd(2) == 0 end\n"
    "  if k == 1 then return (rnd(2000001) - 1000000) end\n"
    "  if k == 2 then return (rnd(20001) - 10000) / 4 end\n"
    "  if k == 3 then local s = {} for i = 1, rnd(4) do s[i] = strings[rnd(#strings) + 1] end return table.concat(s) end\n"
    "  if k == 4 then return cjson_null end\n"
    "  if k == 5 then return rnd(100000000000000) end\n"
    "  local t = {}\n"
    "  if k < 8 then\n"
    "    for i = 1, rnd(6) do t[i] = value(depth + 1) end\n"
    "    if rnd(5) == 0 then t[rnd(14) + 1] = value(depth + 1) end\n"
    "  else\n"
    "    for _ = 1, rnd(6) do\n"
    "      local key = rnd(3) == 0 and (rnd(2) == 0 and rnd(5) - 2 or rnd(8) / 2) or strings[rnd(#strings) + 1]\n"
    "      t[key] = value(depth + 1)\n"
    "    end\n"
    "    if rnd(30) == 0 then t[true] = 1 end\n"
    "    if rnd(30) == 0 then t.f = print end\n"
    "  end\n"
    "  return t\n"
    "end\n"
    "local n, errors = 0, 0\n"
    "for i = 1, 20000 do\n"
    "  local v = value(0)\n"
    "  local a, ae = ours(v)\n"
    "  local b, be = cjson(v)\n"
    "  if a ~= b or ae ~= be then\n"
    "    error(('case %d: ours %s %s, cjson %s %s'):format(i, tostring(a), tostring(ae), tostring(b), tostring(be)))\n"
    "  end\n"
    "  n = n + 1\n"
    "  if not a then errors = errors + 1 end\n"
    "end\n"
    "return n, errors\n";

TEST_IMPL(json_encode_matches_cjson) {
  lua_State *L = luaL_newstate();
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  if (luaL_dostring(L,
                    "local j = require('cjson.safe').new() j.encode_invalid_numbers(false) "
                    "cjson_null = j.null return j.encode") != 0)
    TEST_FAIL_("cannot load cjson.safe: %s", lua_tostring(L, -1));
  if (luaL_loadstring(L, differ_lua) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  luaopen_luastream_json_encode(L);
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 2, 2, 0) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  fprintf(stderr, "  json_encode_matches_cjson: %d values, %d refused by both\n",
          (int)lua_tonumber(L, -2), (int)lua_tonumber(L, -1));
  ASSERT(lua_tonumber(L, -1) > 0);
  lua_close(L);
}
