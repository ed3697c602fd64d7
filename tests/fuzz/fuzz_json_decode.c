/* fuzz_json_decode: json_decode_push on any bytes against lua-cjson 2.1.0
 * (cjson.safe, decode_invalid_numbers(false)): the same decision, message
 * and value but for the documented differences (integers above 2^53 as
 * strings, numbers out of range refused, a NUL after the value refused);
 * the shape cache and json_scan_flat agree with the plain decoder. */
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>

#include "fuzz.h"
#include "lmem.h"
#include "json_decode.h"

/* compare(cjson_ok, cjson_value, ours, rc, text, cjson_err, err): nil, or
 * what differs. Tables must hold the same keys and values; where cjson has a
 * number and ours a string, it must be an integer literal above 2^53 that
 * reads as that number. */
static const char COMPARE_LUA[] =
    "local function big(s)\n"
    "  local d = s:match('^%-?([1-9]%d*)$')\n"
    "  return d ~= nil and (#d > 16 or (#d == 16 and d > '9007199254740992'))\n"
    "end\n"
    "local function same(a, b, path)\n"
    "  if type(a) == 'number' and type(b) == 'string' and big(b) and tonumber(b) == a then return end\n"
    "  if type(a) ~= type(b) then return path .. ': ' .. type(a) .. ' vs ' .. type(b) end\n"
    "  if type(a) == 'number' then\n"
    "    if a ~= b or 1 / a ~= 1 / b then return path .. (': %.17g vs %.17g'):format(a, b) end\n"
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
    "local decode = require('cjson.safe').new()\n"
    "decode.decode_invalid_numbers(false)\n"
    "return decode.decode, function(a, b) return same(a, b, '$') end\n";

static lua_State *L;

/* at exit, so that LeakSanitizer sees nothing left (the state's memory is
 * malloc'd, lmem.h, which LeakSanitizer sees, unlike LuaJIT's own) */
static void close_state(void) { lmem_close(L); }
static json_shapes *shapes;
static int inputs;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_no_leak_check_per_input(argc, argv);
  L = lmem_newstate(SIZE_MAX, NULL);
  if (L == NULL) abort();
  atexit(close_state);
  luaL_openlibs(L);
  if (luaL_dostring(L, COMPARE_LUA) != 0) {
    fprintf(stderr, "fuzz_json_decode: %s\n", lua_tostring(L, -1));
    abort();
  }
  /* stack: 1 cjson's decode, 2 same */
  return 0;
}

/* same(a, b) on the values at stack indexes a and b; aborts on a difference. */
static void check_same(int a, int b, const char *what, const char *text, size_t len) {
  int top = lua_gettop(L);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  FUZZ_CHECK(lua_pcall(L, 2, 1, 0) == 0, "same() raised: %s", lua_tostring(L, -1));
  FUZZ_CHECK(lua_isnil(L, -1), "%s: %s (input %.*s)", what, lua_tostring(L, -1), (int)len, text);
  lua_settop(L, top);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (shapes == NULL || ++inputs % 4096 == 0) { /* a bounded cache */
    json_shapes_free(shapes);
    if ((shapes = json_shapes_new()) == NULL) abort();
  }
  char *text = fuzz_copy(data, size);
  const int top = 2;
  lua_settop(L, top);

  lua_pushvalue(L, 1);
  lua_pushlstring(L, text, size);
  FUZZ_CHECK(lua_pcall(L, 1, 2, 0) == 0, "cjson raised: %s", lua_tostring(L, -1));
  int cjson_ok = !lua_isnil(L, -2);
  char want[256];
  snprintf(want, sizeof want, "%s", cjson_ok ? "" : lua_tostring(L, -1));
  lua_pop(L, 1); /* cjson's value (or nil) at top + 1 */
  const char *nul = memchr(text, '\0', size);
  if (cjson_ok && nul) { /* the NUL difference */
    cjson_ok = 0;
    snprintf(want, sizeof want, "Expected the end but found invalid token at character %zu",
             (size_t)(nul - text) + 1);
  }

  char err[256] = "";
  int rc = json_decode_push(L, NULL, text, size, err, sizeof err);
  FUZZ_CHECK(rc == 0 || rc == -1 || rc == JSON_DECODE_RANGE, "rc %d", rc);
  FUZZ_CHECK(lua_gettop(L) == top + 1 + (rc == 0), "stack %d after rc %d", lua_gettop(L), rc);
  if (rc == JSON_DECODE_RANGE) {
    /* cjson reads inf there: it accepts, or refuses at or after the number */
    const char *at_ours = strstr(err, "at character "), *at_cjson = strstr(want, "at character ");
    long ours = at_ours ? atol(at_ours + 13) : 0, theirs = at_cjson ? atol(at_cjson + 13) : 0;
    FUZZ_CHECK(ours >= 1 && (size_t)ours <= size, "%s", err);
    char num[512];
    snprintf(num, sizeof num, "%.*s", (int)(size - (size_t)ours + 1), text + ours - 1);
    FUZZ_CHECK(isinf(strtod(num, NULL)), "%s: strtod reads a finite number", err);
    FUZZ_CHECK(cjson_ok || ours <= theirs, "we refuse %s after cjson's error %s", err, want);
  } else if (rc == 0) {
    FUZZ_CHECK(cjson_ok, "cjson refuses (%s), we accept %.*s", want, (int)size, text);
    check_same(top + 1, top + 2, "values differ", text, size);
  } else {
    FUZZ_CHECK(!cjson_ok, "cjson accepts, we refuse: %s", err);
    FUZZ_CHECK(strcmp(err, want) == 0, "messages differ: cjson %s, ours %s", want, err);
  }

  /* the shape cache: twice (a shape's first sighting, then its constructor) */
  for (int i = 0; i < 2; i++) {
    char shaped_err[256] = "";
    int shaped = json_decode_push(L, shapes, text, size, shaped_err, sizeof shaped_err);
    FUZZ_CHECK(shaped == rc && strcmp(shaped_err, err) == 0, "with shapes %d %s, without %d %s",
               shaped, shaped_err, rc, err);
    if (rc == 0) {
      check_same(top + 2, lua_gettop(L), "with shapes", text, size);
      lua_pop(L, 1);
    }
  }
  struct json_flat rec;
  if (json_scan_flat(text, size, &rec)) {
    FUZZ_CHECK(rc == 0, "json_scan_flat accepts, json_decode_push refuses: %s", err);
    FUZZ_CHECK(rec.n >= 0 && rec.n <= JSON_SHAPE_MAX_KEYS, "%d keys", rec.n);
  }
  lua_settop(L, top);
  free(text);
  return 0;
}
