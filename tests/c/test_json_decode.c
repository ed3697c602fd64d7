/* Tests for json_decode.c: each rule on hand-picked inputs, then a
 * differential test against lua-cjson 2.1.0 (cjson.safe with
 * decode_invalid_numbers(false), the decoder it replaces) loaded in the same
 * lua_State: the same accept/reject decision and message for every input, and
 * for accepted ones the same value (tables: the same keys and values).
 * Every input is also decoded twice with the state's shape cache
 * (json_shapes.h), for a shape's first sighting and its constructor, and must
 * give the same decision, message and value as without.
 *
 * Every input is decoded from a heap copy of exactly its length, so that
 * AddressSanitizer catches a read past the end (the decoder must not rely on
 * a NUL terminator). */
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

#include "json_decode.h"
#include "task.h"

static char err[256];

/* same(a, b): nil, or where and how a (cjson's) and b (ours) differ. Tables
 * must hold the same keys with the same values (in any pairs() order). */
static const char same_lua[] =
    "local function same(a, b, path)\n"
    "  if type(a) ~= type(b) then return path .. ': ' .. type(a) .. ' vs ' .. type(b) end\n"
    "  if type(a) == 'number' then\n"
    "    if a ~= b or 1 / a ~= 1 / b then\n"
    "      return path .. (': %.17g vs %.17g'):format(a, b)\n"
    "    end\n"
    "  elseif type(a) == 'table' then\n"
    "    if getmetatable(a) ~= getmetatable(b) then return path .. ': metatables' end\n"
    "    if #a ~= #b then return path .. ': lengths ' .. #a .. ' vs ' .. #b end\n"
    "    for k, v in pairs(a) do\n"
    "      local why = same(v, b[k], path .. '.' .. tostring(k))\n"
    "      if why then return why end\n"
    "    end\n"
    "    for k in pairs(b) do\n"
    "      if a[k] == nil then return path .. ': key ' .. tostring(k) .. ' only in ours' end\n"
    "    end\n"
    "  elseif a ~= b then\n"
    "    return path .. ': ' .. ('%q'):format(tostring(a)) .. ' vs ' .. ('%q'):format(tostring(b))\n"
    "  end\n"
    "end\n"
    "return function(a, b) return same(a, b, '$') end\n";

/* The shape cache of the state new_state made last. */
static json_shapes *shapes;

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  if (luaL_dostring(L, same_lua) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  lua_setfield(L, LUA_REGISTRYINDEX, "test.same");
  json_shapes_free(shapes);
  ASSERT_NOT_NULL(shapes = json_shapes_new());
  return L;
}

static void close_state(lua_State *L) {
  lua_close(L);
  json_shapes_free(shapes);
  shapes = NULL;
}

/* Fails unless the values at a and b are the same (same()). */
static void assert_same(lua_State *L, int a, int b, const char *what) {
  lua_getfield(L, LUA_REGISTRYINDEX, "test.same");
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  if (lua_pcall(L, 2, 1, 0) != 0) TEST_FAIL_("same() raised: %s", lua_tostring(L, -1));
  if (!lua_isnil(L, -1)) TEST_FAIL_("%s: %s", what, lua_tostring(L, -1));
  lua_pop(L, 1);
}

/* The table json_scan_flat's record stands for, pushed. */
static void push_flat(lua_State *L, const struct json_flat *rec) {
  lua_newtable(L);
  for (int i = 0; i < rec->n; i++) {
    lua_pushlstring(L, rec->key[i].s, rec->key[i].len);
    switch (rec->type[i]) {
      case JSON_FLAT_NUMBER: lua_pushnumber(L, rec->num[i]); break;
      case JSON_FLAT_STRING: lua_pushlstring(L, rec->str[i], rec->len[i]); break;
      case JSON_FLAT_TRUE: lua_pushboolean(L, 1); break;
      case JSON_FLAT_FALSE: lua_pushboolean(L, 0); break;
      case JSON_FLAT_NULL: lua_pushlightuserdata(L, NULL); break;
      default: TEST_FAIL_("json_scan_flat: value %d has type %d", i, rec->type[i]);
    }
    lua_rawset(L, -3);
  }
}

/* json_decode_push on an exact-size heap copy of text[0..len); checks that
 * the stack grew by one value on success and not at all on failure, that
 * decoding with the shape cache, twice, gives the same, and that what
 * json_scan_flat accepts json_decode_push decodes to the same table. */
static int decode(lua_State *L, const char *text, size_t len) {
  char *copy = malloc(len ? len : 1);
  ASSERT_NOT_NULL(copy);
  memcpy(copy, text, len);
  int top = lua_gettop(L);
  err[0] = '\0';
  int rc = json_decode_push(L, NULL, copy, len, err, sizeof err);
  ASSERT(rc == 0 || rc == -1 || rc == JSON_DECODE_RANGE);
  ASSERT_INT_EQ(lua_gettop(L), top + (rc == 0 ? 1 : 0));
  if (rc == 0) ASSERT_STR_EQ(err, "");
  for (int i = 0; i < 2; i++) {
    char shaped_err[sizeof err] = "";
    int shaped_rc = json_decode_push(L, shapes, copy, len, shaped_err, sizeof shaped_err);
    if (shaped_rc != rc || strcmp(shaped_err, err) != 0)
      TEST_FAIL_("decode(%.*s) with shapes: %d \"%s\", without: %d \"%s\"", (int)len, text,
                 shaped_rc, shaped_err, rc, err);
    ASSERT_INT_EQ(lua_gettop(L), top + (rc == 0 ? 2 : 0));
    if (rc == 0) {
      assert_same(L, top + 1, top + 2, "with shapes");
      lua_pop(L, 1);
    }
  }
  struct json_flat rec;
  if (json_scan_flat(copy, len, &rec)) {
    if (rc != 0)
      TEST_FAIL_("json_scan_flat accepts %.*s, json_decode_push refuses: %s", (int)len, text, err);
    push_flat(L, &rec);
    assert_same(L, top + 1, top + 2, "json_scan_flat");
    lua_pop(L, 1);
  }
  free(copy);
  return rc;
}

static void decode_ok(lua_State *L, const char *text) {
  if (decode(L, text, strlen(text)) != 0) TEST_FAIL_("decode(%s) failed: %s", text, err);
}

static void decode_err_n(lua_State *L, const char *text, size_t len, const char *want) {
  if (decode(L, text, len) == 0)
    TEST_FAIL_("decode(%.*s) succeeded, wanted: %s", (int)len, text, want);
  if (strcmp(err, want) != 0)
    TEST_FAIL_("decode(%.*s):\n  got  %s\n  want %s", (int)len, text, err, want);
}

static void decode_err(lua_State *L, const char *text, const char *want) {
  decode_err_n(L, text, strlen(text), want);
}

/* Runs a Lua chunk that checks the value on top of the stack (as `v`, with
 * `null` bound to cjson.null's value) and pops it. */
static void check(lua_State *L, const char *lua) {
  char chunk[1024];
  snprintf(chunk, sizeof chunk, "local v, null = ... ; %s", lua);
  if (luaL_loadstring(L, chunk) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  lua_insert(L, -2);
  lua_pushlightuserdata(L, NULL);
  if (lua_pcall(L, 2, 0, 0) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
}

static void decodes_as(lua_State *L, const char *text, const char *lua) {
  decode_ok(L, text);
  check(L, lua);
}

static double decode_number(lua_State *L, const char *text) {
  decode_ok(L, text);
  ASSERT_INT_EQ(lua_type(L, -1), LUA_TNUMBER);
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---- the rules, one by one ---- */

TEST_IMPL(json_decode_scalars) {
  lua_State *L = new_state();
  decodes_as(L, "true", "assert(v == true)");
  decodes_as(L, "false", "assert(v == false)");
  decodes_as(L, "null", "assert(type(v) == 'userdata' and v == null)");
  decodes_as(L, "\"pay\"", "assert(v == 'pay')");
  decodes_as(L, "\"\"", "assert(v == '')");
  decodes_as(L, "42", "assert(v == 42)");
  decodes_as(L, " \t\r\n 7 \n", "assert(v == 7)");
  decode_ok(L, "null");
  ASSERT(lua_islightuserdata(L, -1) && lua_touserdata(L, -1) == NULL);
  close_state(L);
}

TEST_IMPL(json_decode_objects) {
  lua_State *L = new_state();
  decodes_as(
      L,
      "{\"id\":\"pay-000001\",\"amount_cents\":1234,\"currency\":\"EUR\",\"account\":\"acct-42\"}",
      "assert(v.id == 'pay-000001' and v.amount_cents == 1234 and v.currency == 'EUR'"
      " and v.account == 'acct-42')");
  decodes_as(L, "{}", "assert(type(v) == 'table' and next(v) == nil and getmetatable(v) == nil)");
  decodes_as(L, "{\"a\":1,\"a\":2,\"b\":3,\"a\":4}", "assert(v.a == 4 and v.b == 3)");
  decodes_as(L, "{\"n\":null}", "assert(v.n == null and type(v.n) == 'userdata')");
  decodes_as(L, "{\"1\":true}", "assert(v['1'] == true and v[1] == nil)");
  decodes_as(L, "{\"\":0}", "assert(v[''] == 0)");
  decodes_as(L, "{\"o\":{\"p\":{\"q\":[1,{\"r\":\"s\"}]}}}", "assert(v.o.p.q[2].r == 's')");
  decodes_as(L, " { \"k\" : \"v\" , \"l\" : [ ] } ", "assert(v.k == 'v' and #v.l == 0)");
  close_state(L);
}

TEST_IMPL(json_decode_arrays) {
  lua_State *L = new_state();
  decodes_as(L, "[]", "assert(type(v) == 'table' and next(v) == nil and getmetatable(v) == nil)");
  decodes_as(L, "[1,\"two\",true,null,[3],{}]",
             "assert(#v == 6 and v[1] == 1 and v[2] == 'two' and v[3] == true and v[4] == null"
             " and v[5][1] == 3 and next(v[6]) == nil and v[0] == nil and v[7] == nil)");
  decodes_as(L, "[null,null]", "assert(#v == 2 and v[1] == null and v[2] == null)");
  decodes_as(L, "[[[]]]", "assert(#v == 1 and #v[1] == 1 and #v[1][1] == 0)");
  /* Long enough to grow the table's array part several times. */
  char big[8192];
  size_t n = 0;
  big[n++] = '[';
  for (int i = 1; i <= 1000; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "%s%d", i > 1 ? "," : "", i);
  big[n++] = ']';
  big[n] = '\0';
  decodes_as(L, big, "assert(#v == 1000) for i = 1, 1000 do assert(v[i] == i) end");
  close_state(L);
}

TEST_IMPL(json_decode_strings) {
  lua_State *L = new_state();
  decodes_as(L, "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "assert(v == '\"\\\\/\\b\\f\\n\\r\\t')");
  decodes_as(L, "\"a\\u0041\\u00e9\\u20AC\"", "assert(v == 'aA\\195\\169\\226\\130\\172')");
  decodes_as(L, "\"\\ud83d\\ude00\"", "assert(v == '\\240\\159\\152\\128')"); /* U+1F600 */
  decodes_as(L, "\"\\uDBFF\\uDFFF\"", "assert(v == '\\244\\143\\191\\191')"); /* U+10FFFF */
  decodes_as(L, "\"x\\u0000y\"", "assert(v == 'x\\0y' and #v == 3)");
  decodes_as(L, "\"\\uFFFF\"", "assert(v == '\\239\\191\\191')");
  /* cjson checks neither raw control bytes nor UTF-8: both pass through. */
  decodes_as(L, "\"tab\there\nnl\x01\x1f\"", "assert(v == 'tab\\there\\nnl\\1\\31')");
  decodes_as(L, "\"\xff\xfe caf\xc3\xa9\"", "assert(v == '\\255\\254 caf\\195\\169')");
  decodes_as(L, "{\"k\\u0065y\":1}", "assert(v.key == 1)");

  decode_err(L, "\"\\x\"", "Expected value but found invalid escape code at character 2");
  decode_err(L, "\"ab\\", "Expected value but found invalid escape code at character 4");
  decode_err(L, "\"\\U0041\"", "Expected value but found invalid escape code at character 2");
  decode_err(L, "\"\\u12\"", "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\u12", "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\u12g4\"",
             "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\ud800\"",
             "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\udc00\\ud800\"",
             "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\ud800\\u0041\"",
             "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"\\ud800\\ud800\"",
             "Expected value but found invalid unicode escape code at character 2");
  decode_err(L, "\"x\\ud800\\n\"",
             "Expected value but found invalid unicode escape code at character 3");
  decode_err(L, "\"abc", "Expected value but found unexpected end of string at character 5");
  decode_err_n(L, "\"a\0b\"", 5,
               "Expected value but found unexpected end of string at character 3");
  decode_err(L, "{\"a\\q\":1}",
             "Expected object key string but found invalid escape code at character 4");
  decode_err(L, "{\"a\":\"\\q\"}", "Expected value but found invalid escape code at character 7");
  close_state(L);
}

/* Decoded strings longer than the decoder's stack buffer take the luaL_Buffer
 * path; around its size, either path must give the same bytes. */
TEST_IMPL(json_decode_long_strings) {
  lua_State *L = new_state();
  for (size_t n = 250; n <= 262; n++) {
    char text[600], want[300];
    size_t t = 0;
    text[t++] = '"';
    for (size_t i = 0; i < n; i++) {
      want[i] = (char)('a' + i % 26);
      if (i % 50 == 0) {
        t += (size_t)snprintf(text + t, sizeof text - t, "\\u%04x", want[i]);
      } else {
        text[t++] = want[i];
      }
    }
    text[t++] = '"';
    ASSERT_OK(decode(L, text, t));
    size_t got;
    const char *s = lua_tolstring(L, -1, &got);
    ASSERT_INT_EQ(got, n);
    ASSERT(memcmp(s, want, n) == 0);
    lua_pop(L, 1);
  }
  /* 100 KB of escapes: many luaL_Buffer pieces. */
  size_t n = 100000, t = 0;
  char *text = malloc(2 * n + 2);
  ASSERT_NOT_NULL(text);
  text[t++] = '"';
  for (size_t i = 0; i < n; i++) {
    text[t++] = '\\';
    text[t++] = 'n';
  }
  text[t++] = '"';
  ASSERT_OK(decode(L, text, t));
  free(text);
  size_t got;
  const char *s = lua_tolstring(L, -1, &got);
  ASSERT_INT_EQ(got, n);
  for (size_t i = 0; i < n; i++) ASSERT(s[i] == '\n');
  close_state(L);
}

TEST_IMPL(json_decode_numbers) {
  lua_State *L = new_state();
  /* What strtod gives (the rule), on fast-path and strtod-path inputs alike. */
  static const char *const same_as_strtod[] = {
      "0",
      "-0",
      "1",
      "-1",
      "1234",
      "999999999999999",
      "9007199254740992",
      "0.1",
      "0.3",
      "1.5",
      "-2.25",
      "3.14159",
      "123456.789012345",
      "1e5",
      "1E5",
      "1e+5",
      "1e-5",
      "2.5e-3",
      "1e22",
      "1e23",
      "123e-22",
      "1e-23",
      "0.0000001",
      "1e308",
      "1.7976931348623157e308",
      "2.2250738585072014e-308",
      "4.9e-324",
      "1e-400",
      "0e99999",
      "1e-100000000000000000000",
      "-.5",
      "0.",
      "1.",
      "1.e5",
      "-0.0",
      "0.000",
      "89255.0e-22",
      "8.988465674311579e+307",
      "0.1000000000000000055511151231257827021181583404541015625",
      "1.00000000000000011102230246251565404236316680908203125",
      "123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890.0",
      "12345678901234567e0",
      "12345678901234567.0",
      "9007199254740993.0",
      /* 16 digits: one rounding to a double, a second in the scaling would be
     * one too many (these come out wrong if the fast path took them). */
      "9541352740099505e6",
      "970.4755302980305",
      "9331273258469299e-18",
      "9458938454789077e16",
  };
  for (size_t i = 0; i < sizeof same_as_strtod / sizeof *same_as_strtod; i++) {
    const char *s = same_as_strtod[i];
    double got = decode_number(L, s), want = strtod(s, NULL);
    if (!same_bits(got, want)) TEST_FAIL_("%s: got %.17g, strtod %.17g", s, got, want);
  }
  ASSERT(signbit(decode_number(L, "-0")));
  ASSERT(signbit(decode_number(L, "-0.0e5")));
  ASSERT(!signbit(decode_number(L, "0")));

  static const char *const invalid[] = {"-",    "-x",  "-inf", "-Infinity", "-nan",
                                        "01",   "-01", "00",   "0x1",       "0X1",
                                        "-0x1", "-.",  "-e5",  "- 1",       "--1"};
  for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
    decode_err(L, invalid[i], "Expected value but found invalid number at character 1");
  decode_err(L, "+1", "Expected value but found invalid token at character 1");
  decode_err(L, ".5", "Expected value but found invalid token at character 1");
  decode_err(L, "Infinity", "Expected value but found invalid token at character 1");
  decode_err(L, "NaN", "Expected value but found invalid token at character 1");
  decode_err(L, "nan", "Expected value but found invalid token at character 1");
  /* strtod reads the longest number it can; the rest is the next token. */
  decode_err(L, "1e", "Expected the end but found invalid token at character 2");
  decode_err(L, "1e+", "Expected the end but found invalid token at character 2");
  decode_err(L, "1.5.3", "Expected the end but found invalid token at character 4");
  decode_err(L, "[1-2]", "Expected comma or array end but found T_NUMBER at character 3");
  decode_err(L, "[0x10]", "Expected value but found invalid number at character 2");
  close_state(L);
}

/* strtod's notation is the locale's: a decimal comma must not turn 1.5 into
 * 1. Meaningful only where such a locale exists; to make one:
 * localedef -i de_DE -f UTF-8 /tmp/loc/de_DE.UTF-8 and run with LOCPATH=/tmp/loc. */
/* Numbers a double cannot hold are never changed silently: integer literals
 * above 2^53 keep their digits (as strings), numbers beyond the largest
 * double are refused with their own result. */
TEST_IMPL(json_decode_numbers_a_double_cannot_hold) {
  lua_State *L = new_state();
  static const char *const exact[] = {"9007199254740991", "9007199254740992", "-9007199254740992",
                                      "123456789012345",  "1234567890123456", "-1234567890123456"};
  for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
    double got = decode_number(L, exact[i]);
    if (got != strtod(exact[i], NULL)) TEST_FAIL_("%s: got %.17g", exact[i], got);
  }
  static const char *const digits[] = {
      "9007199254740993",
      "-9007199254740993",
      "9007199254740994",
      "9999999999999999",
      "12345678901234567",
      "1234567890123456789",
      "-1234567890123456789",
      "18446744073709551616",
      "123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890",
  };
  for (size_t i = 0; i < sizeof digits / sizeof *digits; i++) {
    decode_ok(L, digits[i]);
    ASSERT_INT_EQ(lua_type(L, -1), LUA_TSTRING);
    ASSERT_STR_EQ(lua_tostring(L, -1), digits[i]);
    lua_pop(L, 1);
  }
  /* in containers, and in the flat objects json_scan_flat reads */
  decodes_as(L, "[9007199254740993, 9007199254740992, -0]",
             "assert(v[1] == '9007199254740993' and v[2] == 2^53 and v[3] == 0 and 1/v[3] < 0)");
  decodes_as(
      L, "{\"id\":1234567890123456789,\"amount\":123456789012345,\"x\":0.1}",
      "assert(v.id == '1234567890123456789' and v.amount == 123456789012345 and v.x == 0.1)");
  decodes_as(L, "{\"a\":{\"id\":-12345678901234567}}", "assert(v.a.id == '-12345678901234567')");
  struct json_flat rec;
  const char *flat = "{\"id\":12345678901234567,\"n\":1}";
  ASSERT(json_scan_flat(flat, strlen(flat), &rec));
  ASSERT_INT_EQ(rec.type[0], JSON_FLAT_STRING);
  ASSERT_INT_EQ((int)rec.len[0], 17);
  ASSERT(memcmp(rec.str[0], "12345678901234567", 17) == 0);
  ASSERT_INT_EQ(rec.type[1], JSON_FLAT_NUMBER);
  /* fractions and exponents are rounded to the nearest double, as always */
  ASSERT(decode_number(L, "12345678901234567.0") == 12345678901234568.0);
  ASSERT(decode_number(L, "1e308") == 1e308);
  ASSERT(decode_number(L, "1.7976931348623157e308") == DBL_MAX);
  ASSERT(decode_number(L, "1e-400") == 0);

  static const struct {
    const char *text, *msg;
  } range[] = {
      {"1e400", "Number out of range at character 1: 1e400"},
      {"-1e400", "Number out of range at character 1: -1e400"},
      {"1.8e308", "Number out of range at character 1: 1.8e308"},
      {"[1, 1e999]", "Number out of range at character 5: 1e999"},
      {"{\"amount\":-1e400}", "Number out of range at character 11: -1e400"},
      {"{\"a\":1e100000000000000000000}",
       "Number out of range at character 6: 1e100000000000000000000"},
      {"1"
       "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
       "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
       "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
       "000000000000000000000000.0",
       "Number out of range at character 1: 1000000000000000000000000000000000000000..."},
  };
  for (size_t i = 0; i < sizeof range / sizeof *range; i++) {
    int top = lua_gettop(L);
    ASSERT_INT_EQ(decode(L, range[i].text, strlen(range[i].text)), JSON_DECODE_RANGE);
    ASSERT_STR_EQ(err, range[i].msg);
    ASSERT_INT_EQ(lua_gettop(L), top);
    /* with shapes too (decode() compares), and the scanner leaves it to the parser */
    ASSERT(!json_scan_flat(range[i].text, strlen(range[i].text), &rec));
  }
  /* the first problem is reported, whichever it is */
  decode_err(L, "[1, }, 1e400]", "Expected value but found T_OBJ_END at character 5");
  ASSERT_INT_EQ(decode(L, "[1e400, }]", 10), JSON_DECODE_RANGE);
  close_state(L);
}

TEST_IMPL(json_decode_numbers_in_a_comma_locale) {
  const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE"};
  int found = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && !found; i++)
    found = setlocale(LC_NUMERIC, names[i]) != NULL && localeconv()->decimal_point[0] == ',';
  if (!found) setlocale(LC_NUMERIC, "C"); /* then only the C locale is checked */
  lua_State *L = new_state();
  ASSERT(decode_number(L, "1.5") == 1.5);
  ASSERT(decode_number(L, "1.50000000000000000001") == 1.5); /* through strtod */
  double v =
      decode_number(L, "0.100000000000000000000000000000000000000000000000000000000000000000001");
  ASSERT(v == 0.1); /* the long copy */
  setlocale(LC_NUMERIC, "C");
  close_state(L);
}

TEST_IMPL(json_decode_whitespace) {
  lua_State *L = new_state();
  decodes_as(L, "\t\n\r [\t1\n,\r2 ]\t\n\r ", "assert(#v == 2)");
  /* JSON's four, no more: cjson refuses form feed and vertical tab. */
  decode_err(L, "\f1", "Expected value but found invalid token at character 1");
  decode_err(L, "\v1", "Expected value but found invalid token at character 1");
  decode_err(L,
             "[1,\xa0"
             "2]",
             "Expected value but found invalid token at character 4");
  decode_err(L, "", "Expected value but found T_END at character 1");
  decode_err(L, "   ", "Expected value but found T_END at character 4");
  close_state(L);
}

TEST_IMPL(json_decode_depth) {
  lua_State *L = new_state();
  char text[2 * (JSON_DECODE_MAX_DEPTH + 1) + 1];
  /* 1000 levels of arrays, then of objects: accepted. */
  memset(text, '[', JSON_DECODE_MAX_DEPTH);
  memset(text + JSON_DECODE_MAX_DEPTH, ']', JSON_DECODE_MAX_DEPTH);
  ASSERT_OK(decode(L, text, 2 * JSON_DECODE_MAX_DEPTH));
  check(L, "local n = 0 while v do n = n + 1 v = v[1] end assert(n == 1000)");
  char *obj = malloc(7 * JSON_DECODE_MAX_DEPTH + 8);
  ASSERT_NOT_NULL(obj);
  size_t n = 0;
  for (int i = 0; i < JSON_DECODE_MAX_DEPTH; i++) n += (size_t)sprintf(obj + n, "{\"k\":");
  obj[n++] = '1';
  for (int i = 0; i < JSON_DECODE_MAX_DEPTH; i++) obj[n++] = '}';
  ASSERT_OK(decode(L, obj, n));
  check(
      L,
      "local n = 0 while type(v) == 'table' do n = n + 1 v = v.k end assert(n == 1000 and v == 1)");
  free(obj);
  /* 1001: refused, where the 1001st opens, as cjson says it. */
  memset(text, '[', JSON_DECODE_MAX_DEPTH + 1);
  memset(text + JSON_DECODE_MAX_DEPTH + 1, ']', JSON_DECODE_MAX_DEPTH + 1);
  decode_err_n(L, text, sizeof text - 1,
               "Found too many nested data structures (1001) at character 1001");
  obj = malloc(5 * (JSON_DECODE_MAX_DEPTH + 1) + 2);
  ASSERT_NOT_NULL(obj);
  n = 0;
  for (int i = 0; i <= JSON_DECODE_MAX_DEPTH; i++) n += (size_t)sprintf(obj + n, "{\"k\":");
  obj[n++] = '1';
  decode_err_n(L, obj, n, "Found too many nested data structures (1001) at character 5001");
  free(obj);
  /* Depth is nesting, not the number of containers. */
  char *flat = malloc(3 * 5000 + 2);
  ASSERT_NOT_NULL(flat);
  n = 0;
  flat[n++] = '[';
  for (int i = 0; i < 5000; i++) n += (size_t)sprintf(flat + n, "%s[]", i ? "," : "");
  flat[n++] = ']';
  ASSERT_OK(decode(L, flat, n));
  check(L, "assert(#v == 5000)");
  free(flat);
  close_state(L);
}

TEST_IMPL(json_decode_syntax_errors) {
  lua_State *L = new_state();
  static const char *const cases[][2] = {
      {"[1,]", "Expected value but found T_ARR_END at character 4"},
      {"[,1]", "Expected value but found T_COMMA at character 2"},
      {"[1 2]", "Expected comma or array end but found T_NUMBER at character 4"},
      {"[1,2", "Expected comma or array end but found T_END at character 5"},
      {"[1}", "Expected comma or array end but found T_OBJ_END at character 3"},
      {"[", "Expected value but found T_END at character 2"},
      {"]", "Expected value but found T_ARR_END at character 1"},
      {"{\"a\":1,}", "Expected object key string but found T_OBJ_END at character 8"},
      {"{\"a\" 1}", "Expected colon but found T_NUMBER at character 6"},
      {"{\"a\"", "Expected colon but found T_END at character 5"},
      {"{\"a\":}", "Expected value but found T_OBJ_END at character 6"},
      {"{1:2}", "Expected object key string but found T_NUMBER at character 2"},
      {"{a:1}", "Expected object key string but found invalid token at character 2"},
      {"{null:1}", "Expected object key string but found T_NULL at character 2"},
      {"{[]:1}", "Expected object key string but found T_ARR_BEGIN at character 2"},
      {"{\"a\":1 \"b\":2}", "Expected comma or object end but found T_STRING at character 8"},
      {"{\"a\":1 \"b\\x\":2}",
       "Expected comma or object end but found invalid escape code at character 10"},
      {"{\"a\":1]", "Expected comma or object end but found T_ARR_END at character 7"},
      {"{\"a\"::1}", "Expected value but found T_COLON at character 6"},
      {"{\"a\":1,,}", "Expected object key string but found T_COMMA at character 8"},
      {"{\"a\":1 true}", "Expected comma or object end but found T_BOOLEAN at character 8"},
      {"{\"a\":1 {", "Expected comma or object end but found T_OBJ_BEGIN at character 8"},
      {"{\"a\":1 -x", "Expected comma or object end but found invalid number at character 8"},
      {"{\"a\":1 -5", "Expected comma or object end but found T_NUMBER at character 8"},
      {"tru", "Expected value but found invalid token at character 1"},
      {"nul", "Expected value but found invalid token at character 1"},
      {"True", "Expected value but found invalid token at character 1"},
      {"truex", "Expected the end but found invalid token at character 5"},
      {"true false", "Expected the end but found T_BOOLEAN at character 6"},
      {"{} {}", "Expected the end but found T_OBJ_BEGIN at character 4"},
      {"1 x", "Expected the end but found invalid token at character 3"},
      {"\"a\" \"b", "Expected the end but found unexpected end of string at character 7"},
      {"'a'", "Expected value but found invalid token at character 1"},
      {"/* */ 1", "Expected value but found invalid token at character 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) decode_err(L, cases[i][0], cases[i][1]);
  close_state(L);
}

/* A NUL is the end of the text for cjson, which reads C strings. Before and
 * inside a value that gives the same errors here; after the value cjson
 * accepts, this decoder refuses (the one place they differ on purpose). */
TEST_IMPL(json_decode_nul_bytes) {
  lua_State *L = new_state();
  decode_err_n(L, "\0", 1, "Expected value but found T_END at character 1");
  decode_err_n(L, " \0", 2, "JSON parser does not support UTF-16 or UTF-32");
  decode_err_n(L, "\0{", 2, "JSON parser does not support UTF-16 or UTF-32");
  decode_err_n(L, "[1\0]", 4, "Expected comma or array end but found T_END at character 3");
  decode_err_n(L, "{\"a\":\0}", 7, "Expected value but found T_END at character 6");
  decode_err_n(L, "{}\0", 3, "Expected the end but found invalid token at character 3");
  decode_err_n(L, "{} \0xx", 6, "Expected the end but found invalid token at character 4");
  decode_err_n(L, "12\0", 3, "Expected the end but found invalid token at character 3");
  close_state(L);
}

/* The text need not be NUL-terminated: every token cut at the end of the
 * buffer (the heap copies make ASan check the reads). */
TEST_IMPL(json_decode_cut_at_the_end) {
  lua_State *L = new_state();
  const char *doc = "{\"a\":[true,false,null,-1.5e+3,\"x\\u00e9\\ud83d\\ude00\\n\"],\"b\":{}}";
  size_t n = strlen(doc);
  for (size_t len = 0; len < n; len++) ASSERT_INT_EQ(decode(L, doc, len), -1);
  ASSERT_OK(decode(L, doc, n));
  close_state(L);
}

TEST_IMPL(json_decode_keeps_the_stack_on_error) {
  lua_State *L = new_state();
  lua_pushstring(L, "below");
  decode_err(L, "{\"a\":[1,2,{\"b\":\"c\"",
             "Expected comma or object end but found T_END at character 19");
  decode_err(L, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x",
             "Expected value but found invalid token at character 41");
  ASSERT_INT_EQ(lua_gettop(L), 1);
  ASSERT_STR_EQ(lua_tostring(L, 1), "below");
  /* err may be small or absent. */
  char tiny[8];
  ASSERT_INT_EQ(json_decode_push(L, NULL, "[", 1, tiny, sizeof tiny), -1);
  ASSERT_STR_EQ(tiny, "Expecte");
  ASSERT_INT_EQ(json_decode_push(L, NULL, "[", 1, NULL, 0), -1);
  ASSERT_INT_EQ(lua_gettop(L), 1);
  close_state(L);
}

/* ---- flat objects and their shapes (json_shapes.h) ---- */

/* Decodes text with the state's shape cache and checks the value with lua. */
static void shaped_as(lua_State *L, const char *text, const char *lua) {
  if (json_decode_push(L, shapes, text, strlen(text), err, sizeof err) != 0)
    TEST_FAIL_("decode(%s) failed: %s", text, err);
  check(L, lua);
}

/* {"k1":1,...,"kN":N} with the keys named after prefix. */
static const char *object_of(char *buf, size_t cap, const char *prefix, int n) {
  size_t at = (size_t)snprintf(buf, cap, "{");
  for (int i = 1; i <= n; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s\"%s%d\":%d", i > 1 ? "," : "", prefix, i, i);
  snprintf(buf + at, cap - at, "}");
  return buf;
}

TEST_IMPL(json_decode_shapes_compile_on_the_second_sighting) {
  lua_State *L = new_state();
  const char *payment =
      "{\"id\":7,\"account\":\"acct-007\",\"amount_cents\":1234,\"ok\":true,\"n\":null}";
  const char *check_payment =
      "assert(v.id == 7 and v.account == 'acct-007' and v.amount_cents == 1234"
      " and v.ok == true and v.n == null)";
  shaped_as(L, payment, check_payment);
  ASSERT_INT_EQ(json_shapes_compiled(shapes), 0);
  shaped_as(L, payment, check_payment);
  ASSERT_INT_EQ(json_shapes_compiled(shapes), 1);
  /* Same keys, other values: the constructor makes a new table each time. */
  shaped_as(L, "{\"id\":9,\"account\":\"ab\",\"amount_cents\":-1.5,\"ok\":false,\"n\":0}",
            "assert(v.id == 9 and v.account == 'ab' and v.amount_cents == -1.5 and v.ok == false"
            " and v.n == 0)");
  /* An escaped string is the general parser's: the same table. */
  shaped_as(L, "{\"id\":8,\"account\":\"a\\\"b\",\"amount_cents\":-1.5,\"ok\":false,\"n\":0}",
            "assert(v.id == 8 and v.account == 'a\"b' and v.amount_cents == -1.5 and v.ok == false"
            " and v.n == 0)");
  /* The same keys in another order are another shape. */
  shaped_as(L, "{\"account\":\"x\",\"id\":1,\"amount_cents\":2,\"ok\":true,\"n\":null}",
            "assert(v.id == 1)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), 1);
  /* Keys any bytes but an escape: written into the constructor as escapes. */
  const char *odd = "{\"]]=\x01\xff\":1,\"end\\\\\":2}";
  decodes_as(L, odd, "assert(v[']]=\\1\\255'] == 1)");
  shaped_as(L, "{\"]]=\x01\xff\":1,\"a b\":2,\"\":3}",
            "assert(v[']]=\\1\\255'] == 1 and v['a b'] == 2 and v[''] == 3)");
  shaped_as(L, "{\"]]=\x01\xff\":1,\"a b\":2,\"\":3}",
            "assert(v[']]=\\1\\255'] == 1 and v['a b'] == 2 and v[''] == 3)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), 2);
  /* A repeated key: the last one wins, as without shapes. */
  shaped_as(L, "{\"a\":1,\"b\":2,\"a\":3}", "assert(v.a == 3 and v.b == 2)");
  shaped_as(L, "{\"a\":1,\"b\":2,\"a\":3}", "assert(v.a == 3 and v.b == 2)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), 3);
  close_state(L);
}

/* json_shapes_ready names a shape's slot once it has a constructor, not
 * before, and not after the slot went to another shape. */
TEST_IMPL(json_decode_shapes_ready_once_compiled) {
  lua_State *L = new_state();
  const char *text = "{\"id\":1,\"name\":\"x\"}";
  struct json_flat rec;
  uint32_t gen = 0, gen2 = 0;
  ASSERT_INT_EQ(json_scan_flat(text, strlen(text), &rec), 1);
  ASSERT_INT_EQ(rec.n, 2);
  ASSERT_INT_EQ(json_shapes_ready(shapes, rec.key, rec.n, &gen), -1);
  shaped_as(L, text, "assert(v.id == 1)");
  ASSERT_INT_EQ(json_shapes_ready(shapes, rec.key, rec.n, &gen), -1); /* seen once */
  shaped_as(L, text, "assert(v.id == 1)");
  int slot = json_shapes_ready(shapes, rec.key, rec.n, &gen);
  ASSERT(slot >= 0 && slot < JSON_SHAPES);
  /* every slot taken and compiled by other shapes: ours, the least recently
   * used, goes */
  char buf[128], prefix[8];
  for (int i = 0; i < JSON_SHAPES; i++) {
    snprintf(prefix, sizeof prefix, "s%d_", i);
    shaped_as(L, object_of(buf, sizeof buf, prefix, 1), "assert(next(v))");
    shaped_as(L, object_of(buf, sizeof buf, prefix, 1), "assert(next(v))");
  }
  ASSERT_INT_EQ(json_shapes_ready(shapes, rec.key, rec.n, &gen), -1); /* evicted */
  shaped_as(L, text, "assert(v.id == 1)");
  shaped_as(L, text, "assert(v.id == 1)");
  for (int i = 0; i < JSON_SHAPES * JSON_SHAPES_COMPILE_EVERY; i++)
    shaped_as(L, text, "assert(v.id == 1)");
  int slot2 = json_shapes_ready(shapes, rec.key, rec.n, &gen2);
  ASSERT(slot2 >= 0);
  /* compiled again: back in its old slot, its constructor is another one */
  if (slot2 == slot) ASSERT(gen2 != gen);
  close_state(L);
}

TEST_IMPL(json_decode_shapes_hand_over_to_the_parser) {
  lua_State *L = new_state();
  char buf[1024];
  /* Each twice through decode(): with and without shapes, the same. */
  for (int round = 0; round < 2; round++) {
    decodes_as(L, "{\"a\":1,\"b\":{\"c\":[2,{\"d\":3}]},\"e\":4}",
               "assert(v.a == 1 and v.b.c[2].d == 3 and v.e == 4)");
    decodes_as(L, "{\"a\":1,\"b\\n\":2,\"c\":3}",
               "assert(v.a == 1 and v['b\\n'] == 2 and v.c == 3)");
    decodes_as(L, "{\"a\":[],\"b\":{}}", "assert(#v.a == 0 and next(v.b) == nil)");
    decodes_as(
        L, object_of(buf, sizeof buf, "k", JSON_SHAPE_MAX_KEYS),
        "local n = 0 for k, x in pairs(v) do n = n + 1 assert(k == 'k' .. x) end assert(n == 32)");
    decodes_as(
        L, object_of(buf, sizeof buf, "k", JSON_SHAPE_MAX_KEYS + 1),
        "local n = 0 for k, x in pairs(v) do n = n + 1 assert(k == 'k' .. x) end assert(n == 33)");
    decodes_as(L, object_of(buf, sizeof buf, "k", 50), "assert(v.k50 == 50)");
    decode_err(L, "{\"a\":1,\"b\":}", "Expected value but found T_OBJ_END at character 12");
    decode_err(L, "{\"a\":1,}", "Expected object key string but found T_OBJ_END at character 8");
    decode_err(L, "{\"a\":1} x", "Expected the end but found invalid token at character 9");
    decode_err(L, "{\"a\":1,\"b\":{\"c\":}}", "Expected value but found T_OBJ_END at character 17");
    decode_err(L, "{\"a\":tru}", "Expected value but found invalid token at character 6");
    decode_err(L, "{\"a\" 1}", "Expected colon but found T_NUMBER at character 6");
  }
  /* Keys longer than a shape holds together: built the plain way, no constructor. */
  static char big[JSON_SHAPE_MAX_KEY_BYTES + 64];
  memset(big, 'k', sizeof big);
  memcpy(big, "{\"", 2);
  memcpy(big + JSON_SHAPE_MAX_KEY_BYTES + 3, "\":1}", 5);
  big[JSON_SHAPE_MAX_KEY_BYTES + 8] = '\0';
  int compiled = json_shapes_compiled(shapes);
  shaped_as(L, big, "local k, x = next(v) assert(#k == 1025 and x == 1)");
  shaped_as(L, big, "local k, x = next(v) assert(#k == 1025 and x == 1)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), compiled);
  close_state(L);
}

TEST_IMPL(json_decode_shapes_compile_the_largest_shape) {
  lua_State *L = new_state();
  /* JSON_SHAPE_MAX_KEYS keys of JSON_SHAPE_MAX_KEY_BYTES bytes together, all
   * but one byte of each 0xff: the longest constructor source. */
  enum { KEYLEN = JSON_SHAPE_MAX_KEY_BYTES / JSON_SHAPE_MAX_KEYS };
  static char text[JSON_SHAPE_MAX_KEYS * (KEYLEN + 8) + 8];
  size_t at = 0;
  text[at++] = '{';
  for (int i = 0; i < JSON_SHAPE_MAX_KEYS; i++) {
    if (i) text[at++] = ',';
    text[at++] = '"';
    memset(text + at, 0xff, KEYLEN - 1);
    at += KEYLEN - 1;
    text[at++] = (char)('0' + i);
    at += (size_t)sprintf(text + at, "\":%d", i);
  }
  text[at++] = '}';
  text[at] = '\0';
  const char *want =
      "local n = 0 for k, x in pairs(v) do n = n + 1"
      " assert(#k == 32 and k:byte(32) == 48 + x and k:byte(1) == 255) end"
      " assert(n == 32)";
  int compiled = json_shapes_compiled(shapes);
  shaped_as(L, text, want);
  shaped_as(L, text, want);
  ASSERT_INT_EQ(json_shapes_compiled(shapes), compiled + 1);
  close_state(L);
}

TEST_IMPL(json_decode_shapes_are_bounded) {
  lua_State *L = new_state();
  char buf[256], prefix[8], want[64];
  /* JSON_SHAPES shapes, each seen twice: all compiled. */
  for (int s = 0; s < JSON_SHAPES; s++) {
    snprintf(prefix, sizeof prefix, "s%d_", s);
    snprintf(want, sizeof want, "assert(v.s%d_2 == 2)", s);
    shaped_as(L, object_of(buf, sizeof buf, prefix, 2), want);
    shaped_as(L, object_of(buf, sizeof buf, prefix, 2), want);
  }
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES);
  /* One more takes the least recently used slot; with JSON_SHAPES compiled
   * already, a compile waits for JSON_SHAPES_COMPILE_EVERY decodes each. */
  shaped_as(L, object_of(buf, sizeof buf, "new_", 2), "assert(v.new_1 == 1)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES - 1);
  shaped_as(L, object_of(buf, sizeof buf, "new_", 2), "assert(v.new_1 == 1)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES - 1);
  for (int i = 0; i < JSON_SHAPES * JSON_SHAPES_COMPILE_EVERY; i++)
    shaped_as(L, object_of(buf, sizeof buf, "s1_", 2), "assert(v.s1_1 == 1)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES - 1);
  shaped_as(L, object_of(buf, sizeof buf, "new_", 2), "assert(v.new_2 == 2)");
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES);
  /* Shapes seen once each never compile; they take one slot between them
   * (the least recently used), and the other constructors stay. */
  for (int i = 0; i < 1000; i++) {
    snprintf(prefix, sizeof prefix, "u%d_", i);
    shaped_as(L, object_of(buf, sizeof buf, prefix, 1), "assert(next(v) ~= nil)");
  }
  ASSERT_INT_EQ(json_shapes_compiled(shapes), JSON_SHAPES - 1);
  close_state(L);
}

/* ---- the differential test against cjson ---- */

/* Wraps same() (passed as ...): where a is a number and b a string, b must
 * be the digits of an integer literal above 2^53 that reads as a. */
static const char big_integers_lua[] =
    "local same = ...\n"
    "local function big(s)\n"
    "  local d = s:match('^%-?([1-9]%d*)$')\n"
    "  return d ~= nil and (#d > 16 or (#d == 16 and d > '9007199254740992'))\n"
    "end\n"
    "local function fold(a, b)\n"
    "  if type(a) == 'number' and type(b) == 'string' then\n"
    "    if big(b) and tonumber(b) == a then return a end\n"
    "    return b\n"
    "  end\n"
    "  if type(a) == 'table' and type(b) == 'table' then\n"
    "    local c = {}\n"
    "    for k, v in pairs(b) do c[k] = fold(a[k], v) end\n"
    "    return c\n"
    "  end\n"
    "  return b\n"
    "end\n"
    "return function(a, b) return same(a, fold(a, b)) end\n";

struct differ {
  lua_State *L;
  int cjson_decode; /* stack index of cjson.safe's decode */
  int same;         /* stack index of same() */
  int cases, accepted, failures;
};

static void show(const char *text, size_t len) {
  fputs("  input: \"", stderr);
  for (size_t i = 0; i < len && i < 300; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == '"' || c == '\\')
      fprintf(stderr, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(stderr, "\\x%02x", c);
    else
      fputc(c, stderr);
  }
  fprintf(stderr, "\"%s (%zu bytes)\n", len > 300 ? "..." : "", len);
}

/* Decodes text with cjson and with json_decode_push and records any
 * difference in decision, message or value. */
static void compare(struct differ *df, const char *text, size_t len) {
  lua_State *L = df->L;
  int top = lua_gettop(L);
  df->cases++;
  lua_pushvalue(L, df->cjson_decode);
  lua_pushlstring(L, text, len);
  if (lua_pcall(L, 1, 2, 0) != 0) TEST_FAIL_("cjson raised: %s", lua_tostring(L, -1));
  int cjson_ok = !lua_isnil(L, -2);
  char want[256];
  snprintf(want, sizeof want, "%s", cjson_ok ? "" : lua_tostring(L, -1));
  lua_pop(L, 1); /* cjson's value (or nil) stays at top + 1 */

  /* The deliberate difference: a NUL after the value. */
  const char *nul = memchr(text, '\0', len);
  if (cjson_ok && nul) {
    cjson_ok = 0;
    snprintf(want, sizeof want, "Expected the end but found invalid token at character %zu",
             (size_t)(nul - text) + 1);
  }

  int rc = decode(L, text, len);
  const char *why = NULL;
  char msg[600];
  /* The deliberate difference for numbers out of range: where we report
   * one, strtod reads inf, and cjson accepts the input (with an inf, unless
   * a repeated key replaced it) or refuses it at or after the number. */
  if (rc == JSON_DECODE_RANGE) {
    const char *at_ours = strstr(err, "at character "), *at_cjson = strstr(want, "at character ");
    long ours = at_ours ? atol(at_ours + 13) : 0, theirs = at_cjson ? atol(at_cjson + 13) : 0;
    char num[512] = "";
    if (ours >= 1 && (size_t)ours <= len)
      snprintf(num, sizeof num, "%.*s", (int)(len - (size_t)ours + 1), text + ours - 1);
    if (!isinf(strtod(num, NULL))) {
      snprintf(msg, sizeof msg, "we refuse a number out of range (%s), strtod reads %.17g", err,
               strtod(num, NULL));
      why = msg;
    } else if (!cjson_ok && ours > theirs) {
      snprintf(msg, sizeof msg, "we refuse a number out of range (%s) after cjson's error (%s)",
               err, want);
      why = msg;
    }
    if (!why) df->accepted++;
  } else if (cjson_ok && rc != 0) {
    snprintf(msg, sizeof msg, "cjson accepts, we refuse: %s", err);
    why = msg;
  } else if (!cjson_ok && rc == 0) {
    snprintf(msg, sizeof msg, "cjson refuses (%s), we accept", want);
    why = msg;
  } else if (!cjson_ok && strcmp(err, want) != 0) {
    snprintf(msg, sizeof msg, "messages differ:\n    cjson %s\n    ours  %s", want, err);
    why = msg;
  } else if (cjson_ok) {
    df->accepted++;
    lua_pushvalue(L, df->same);
    lua_pushvalue(L, top + 1);
    lua_pushvalue(L, top + 2);
    if (lua_pcall(L, 2, 1, 0) != 0) TEST_FAIL_("same() raised: %s", lua_tostring(L, -1));
    if (!lua_isnil(L, -1)) {
      snprintf(msg, sizeof msg, "values differ: %s", lua_tostring(L, -1));
      why = msg;
    }
  }
  if (why) {
    if (++df->failures <= 20) {
      fprintf(stderr, "%s\n", why);
      show(text, len);
    }
  }
  lua_settop(L, top);
}

/* {"a":VALUE}: the value as the member of a flat object (json_scan_flat's
 * numbers), compared the same way. */
static void compare_in_object(struct differ *df, const char *value, size_t len) {
  char buf[160];
  if (len + 7 > sizeof buf) return;
  memcpy(buf, "{\"a\":", 5);
  memcpy(buf + 5, value, len);
  buf[5 + len] = '}';
  compare(df, buf, len + 6);
}

/* xorshift64*: the same sequence on every run and machine. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32) % n;
}

struct text {
  char *p;
  size_t len, cap;
};

static void add(struct text *t, const char *s, size_t n) {
  if (t->len + n > t->cap) {
    t->cap = (t->len + n) * 2;
    t->p = realloc(t->p, t->cap);
    ASSERT_NOT_NULL(t->p);
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
}
static void adds(struct text *t, const char *s) { add(t, s, strlen(s)); }

static void gen_ws(struct text *t) {
  static const char ws[] = " \t\n\r";
  if (rnd(3) == 0)
    for (uint32_t n = rnd(4) + 1; n > 0; n--) add(t, &ws[rnd(4)], 1);
}

/* A number as a JSON writer would print it, or one in the corners of the
 * grammar cjson and strtod share. */
static void gen_number(struct text *t) {
  static const char *const odd[] = {"-0",
                                    "0.0",
                                    "1e400",
                                    "-1e400",
                                    "4.9e-324",
                                    "1e-400",
                                    "2.2250738585072011e-308",
                                    "9007199254740993",
                                    "0.1",
                                    "-.5",
                                    "1.",
                                    "1.e3",
                                    "0e0",
                                    "1E+2",
                                    "123456789012345678",
                                    "1e22",
                                    "1e23",
                                    "5e-324",
                                    "1.7976931348623157e308",
                                    "-0.0e-0"};
  char buf[64];
  switch (rnd(6)) {
    case 0: adds(t, odd[rnd(sizeof odd / sizeof *odd)]); return;
    case 1: snprintf(buf, sizeof buf, "%d", (int)rnd(2000001) - 1000000); break;
    case 2:
      snprintf(buf, sizeof buf, "%.*g", (int)rnd(17) + 1,
               ((double)rnd(1u << 30) - (1 << 29)) / (rnd(1000) + 1));
      break;
    case 3:
      snprintf(buf, sizeof buf, "%.17g", ldexp((double)rnd(1u << 31), (int)rnd(400) - 200));
      break;
    case 4: snprintf(buf, sizeof buf, "%u.%0*u", rnd(100000), (int)rnd(8) + 1, rnd(100000)); break;
    default: snprintf(buf, sizeof buf, "%ue%s%u", rnd(1000), rnd(2) ? "-" : "", rnd(30));
  }
  adds(t, buf);
}

static void gen_string(struct text *t) {
  static const char *const pieces[] = {
      "a",
      "pay",
      "acct-42",
      " ",
      "\\\"",
      "\\\\",
      "\\/",
      "\\b",
      "\\f",
      "\\n",
      "\\r",
      "\\t",
      "\\u0041",
      "\\u00e9",
      "\\u20ac",
      "\\uFFFF",
      "\\u0000",
      "\\ud83d\\ude00",
      "\\uDBFF\\uDFFF",
      "\xc3\xa9",
      "\xe2\x82\xac",
      "\xf0\x9f\x98\x80",
      "\x01",
      "\x1f",
      "\t",
      "\x7f",
      "\xff",
  };
  add(t, "\"", 1);
  for (uint32_t n = rnd(8); n > 0; n--) adds(t, pieces[rnd(sizeof pieces / sizeof *pieces)]);
  if (rnd(40) == 0) /* past the decoder's stack buffer */
    for (int i = 0; i < 300; i++) adds(t, i % 7 ? "x" : "\\n");
  add(t, "\"", 1);
}

static void gen_value(struct text *t, int depth) {
  uint32_t kind = rnd(depth > 6 ? 6 : 9);
  gen_ws(t);
  switch (kind) {
    case 0: adds(t, "null"); break;
    case 1: adds(t, rnd(2) ? "true" : "false"); break;
    case 2:
    case 3: gen_number(t); break;
    case 4:
    case 5: gen_string(t); break;
    case 6:
    case 7: {
      static const char *const keys[] = {"\"id\"", "\"a\"",         "\"b\"", "\"amount_cents\"",
                                         "\"\"",   "\"k\\u0065y\"", "\"1\"", "\"x y\""};
      add(t, "{", 1);
      for (uint32_t i = 0, n = rnd(6); i < n; i++) { /* keys repeat: the last one wins */
        if (i) add(t, ",", 1);
        gen_ws(t);
        adds(t, keys[rnd(sizeof keys / sizeof *keys)]);
        gen_ws(t);
        add(t, ":", 1);
        gen_value(t, depth + 1);
      }
      gen_ws(t);
      add(t, "}", 1);
      break;
    }
    default:
      add(t, "[", 1);
      for (uint32_t i = 0, n = rnd(7); i < n; i++) {
        if (i) add(t, ",", 1);
        gen_value(t, depth + 1);
      }
      gen_ws(t);
      add(t, "]", 1);
  }
  gen_ws(t);
}

/* One random edit: a cut, a swap of neighbours, a byte replaced, inserted or
 * deleted (bytes drawn mostly from JSON's own syntax, NUL included). */
static size_t mutate(char *s, size_t len, size_t cap) {
  static const char bytes[] =
      "\"\\{}[],:0-+.eE1x \t\nu\0d8\xff"
      "ntf";
  char b = bytes[rnd(sizeof bytes - 1)];
  if (len == 0) return 0;
  size_t i = rnd((uint32_t)len);
  switch (rnd(5)) {
    case 0: return i;
    case 1:
      if (i + 1 < len) {
        char c = s[i];
        s[i] = s[i + 1];
        s[i + 1] = c;
      }
      return len;
    case 2: s[i] = b; return len;
    case 3:
      if (len + 1 > cap) return len;
      memmove(s + i + 1, s + i, len - i);
      s[i] = b;
      return len + 1;
    default: memmove(s + i, s + i + 1, len - i - 1); return len - 1;
  }
}

/* Inputs written to probe each rule and where cjson's and strtod's grammars
 * meet. */
static const char *const tricky[] = {
    "",
    " ",
    "{}",
    "[]",
    "null",
    "true",
    "false",
    "0",
    "-0",
    "\"\"",
    "{\"a\":1}",
    "[1,2,3]",
    "-.5",
    "0.",
    "1.e5",
    ".5",
    "-",
    "-x",
    "-inf",
    "+1",
    "01",
    "-01",
    "0x1",
    "1e",
    "1e+",
    "1e-",
    "1E5",
    "1e05",
    "-0.0",
    "0e0",
    "00",
    "1.5.3",
    "1..5",
    "1ee5",
    "1e5e5",
    "-e",
    "2.",
    "2.e",
    "1e99999",
    "-1e99999",
    "1e-99999",
    "Infinity",
    "-Infinity",
    "NaN",
    "nan",
    "inf",
    "infinity",
    "[1,]",
    "[,]",
    "[,1]",
    "[1 2]",
    "{\"a\":1,}",
    "{\"a\" 1}",
    "{1:2}",
    "{\"a\"}",
    "{\"a\":}",
    "{,}",
    "{\"a\":1,,\"b\":2}",
    "[1,2",
    "{\"a\":1",
    "[",
    "{",
    "]",
    "}",
    ":",
    ",",
    "\"",
    "\"\\x\"",
    "\"\\",
    "\"\\u",
    "\"\\u1",
    "\"\\u123",
    "\"\\u1234",
    "\"\\u1234\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\ud800\\u0041\"",
    "\"\\ud800\\udbff\"",
    "\"\\ud800\\udc00\"",
    "\"\\ud800\\",
    "\"\\ud800\\u",
    "\"\\ud800\\udc0\"",
    "\"\\uD83D\\uDE00\"",
    "\"\\u0000\"",
    "\"\\/\"",
    "\"\\'\"",
    "\"\\a\"",
    "\"\\0\"",
    "truex",
    "true false",
    "nul",
    "nulll",
    "fals",
    "falsey",
    "True",
    "NULL",
    "[true,false,null]",
    "{\"a\":[{\"b\":[{}]}]}",
    "1 x",
    "1 2",
    "\t\r\n 1 \t",
    "\f1",
    "\v1",
    "\"abc",
    "\"a\nb\"",
    "\"\x01\"",
    "\"\xff\"",
    "[1,2]]",
    "{}}",
    "{\"a\":1 \"b\"}",
    "-0x",
    "--1",
    "-+1",
    "+-1",
    "- 1",
    "1 .5",
    "[-]",
    "[-.]",
    "[.5]",
    "{\"a\":-}",
    "[1e]",
    "[1e,2]",
    "[0.]",
    "[-0.e-0]",
    "123456789012345678901234567890",
    "0.000000000000000000000000000000000000000000000000001",
    "[\"\\u00e9\",\"\\u20AC\"]",
    "{\"\":\"\"}",
    "{\"a\":1,\"a\":2}",
    "/**/1",
    "'a'",
    "[1,,2]",
    "[[[[]]]]",
    "{\"a\":{\"b\":{}}}",
};

TEST_IMPL(json_decode_matches_cjson) {
  lua_State *L = new_state();
  luaL_dostring(
      L, "local j = require('cjson.safe').new() j.decode_invalid_numbers(false) return j.decode");
  if (!lua_isfunction(L, -1))
    TEST_FAIL_("cannot load cjson.safe: %s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  if (luaL_dostring(L, same_lua) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  /* The deliberate difference for integers above 2^53: ours are strings of
   * the literal's digits, cjson's the nearest doubles. */
  if (luaL_loadstring(L, big_integers_lua) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  lua_pushvalue(L, 2);
  if (lua_pcall(L, 1, 1, 0) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  lua_replace(L, 2);
  struct differ df = {.L = L, .cjson_decode = 1, .same = 2};

  for (size_t i = 0; i < sizeof tricky / sizeof *tricky; i++)
    compare(&df, tricky[i], strlen(tricky[i]));
  /* The tricky inputs with a NUL or a stray byte here and there. */
  for (size_t i = 0; i < sizeof tricky / sizeof *tricky; i++) {
    char buf[128];
    size_t n = strlen(tricky[i]);
    for (size_t at = 0; at <= n && n + 1 < sizeof buf; at++) {
      memcpy(buf, tricky[i], at);
      buf[at] = '\0';
      memcpy(buf + at + 1, tricky[i] + at, n - at);
      compare(&df, buf, n + 1);
    }
  }

  /* Random documents, each as written and after a few random edits. */
  struct text t = {0};
  for (int i = 0; i < 4000; i++) {
    t.len = 0;
    gen_value(&t, 0);
    compare(&df, t.p, t.len);
    for (int m = 0; m < 3; m++) {
      char buf[4096];
      if (t.len + 8 > sizeof buf) break;
      memcpy(buf, t.p, t.len);
      size_t n = t.len;
      for (uint32_t k = rnd(3) + 1; k > 0; k--) n = mutate(buf, n, sizeof buf);
      compare(&df, buf, n);
    }
  }
  /* Random number-like strings: both grammars and the fast path's edges. */
  static const char chars[] = "0123456789000-+.eE";
  for (int i = 0; i < 20000; i++) {
    char buf[40];
    size_t n = rnd(sizeof buf - 1) + 1;
    for (size_t k = 0; k < n; k++) buf[k] = chars[rnd(sizeof chars - 1)];
    if (rnd(2)) buf[0] = (char)('1' + rnd(9));
    compare(&df, buf, n);
    compare_in_object(&df, buf, n);
  }
  /* Numbers around the fast path's limits: 14 to 17 significant digits
   * scaled by up to 10^25 either way. */
  for (int i = 0; i < 20000; i++) {
    char buf[64], digits[24];
    uint32_t nd = 14 + rnd(4);
    for (uint32_t k = 0; k < nd; k++) digits[k] = (char)('0' + rnd(10));
    digits[0] = (char)('1' + rnd(9));
    uint32_t point = rnd(nd + 1);
    int n = snprintf(buf, sizeof buf, "%s%.*s%s%.*s", rnd(2) ? "-" : "", (int)point, digits,
                     point < nd ? "." : "", (int)(nd - point), digits + point);
    if (rnd(2)) n += snprintf(buf + n, sizeof buf - (size_t)n, "e%d", (int)rnd(51) - 25);
    compare(&df, buf, (size_t)n);
    compare_in_object(&df, buf, (size_t)n);
  }
  /* Numbers around the length the scanner leaves to the general parser. */
  for (int digits = 60; digits <= 90; digits++) {
    char buf[128];
    memset(buf, '7', (size_t)digits);
    buf[1] = '.';
    compare_in_object(&df, buf, (size_t)digits);
  }
  free(t.p);
  fprintf(stderr, "  json_decode_matches_cjson: %d inputs, %d accepted by both, %d differences\n",
          df.cases, df.accepted, df.failures);
  ASSERT_INT_EQ(df.failures, 0);
  close_state(L);
}
