/* fuzz_json_encode: the encoder on any Lua value (built from the bytes by
 * BUILD_LUA): it refuses exactly what lua-cjson 2.1.0 refuses, with the
 * same message; what it writes decodes (json_decode_push) to the value
 * cjson's text decodes to, and decode(encode(x)) == x for every x decoded. */
#include <lauxlib.h>
#include <lualib.h>

#include "fuzz.h"
#include "lmem.h"
#include "json_decode.h"
#include "json_encode.h"

/* Called with (ours, decode, bytes): builds a value from the bytes, encodes
 * it with ours and with cjson, and returns nil or what differs. */
static const char CHECK_LUA[] =
    "local ours, decode = ...\n"
    "local ffi = require('ffi')\n"
    "local cjson = require('cjson.safe').new()\n"
    "cjson.encode_invalid_numbers(false)\n"
    "local KEYS = {0, 1, 2, 3, 4, 5, 7, 10, 11, 12, 20, 25, -1, 1.5, 'a', 'b', '', '1', 'x\\0y', '\\226\\130\\172'}\n"
    "local function build(s)\n"
    "  local i = 0\n"
    "  local function byte() i = i + 1; return s:byte(i) or 0 end\n"
    "  local function value(depth)\n"
    "    local b = byte()\n"
    "    local kind = b % 12\n"
    "    if kind == 0 then return byte() - 128\n"
    "    elseif kind == 1 then\n"
    "      local u = ffi.new('union { uint8_t b[8]; double d; }')\n"
    "      for k = 0, 7 do u.b[k] = byte() end\n"
    /* LuaJIT's FFI passes a NaN's payload on as is, which a Lua value
     * reads as another type (NaN-boxing): the one NaN Lua makes instead */
    "      if u.b[7] % 128 == 127 and u.b[6] >= 240 then\n"
    "        local m = u.b[6] % 16\n"
    "        for k = 0, 5 do m = m + u.b[k] end\n"
    "        if m ~= 0 then return 0 / 0 end\n"
    "      end\n"
    "      return u.d\n"
    "    elseif kind == 2 then\n"
    "      local n = byte() % 32\n"
    "      local t = {}\n"
    "      for k = 1, n do t[k] = string.char(byte()) end\n"
    "      return table.concat(t)\n"
    "    elseif kind == 3 then return b >= 128\n"
    "    elseif kind == 4 then return cjson.null\n"
    "    elseif kind == 5 and depth < 1100 then\n"
    "      local n = byte() % 8\n"
    "      local t = {}\n"
    "      for k = 1, n do t[k] = value(depth + 1) end\n"
    "      return t\n"
    "    elseif kind == 6 and depth < 1100 then\n"
    "      local n = byte() % 8\n"
    "      local t = {}\n"
    "      for k = 1, n do t[KEYS[byte() % #KEYS + 1]] = value(depth + 1) end\n"
    "      return t\n"
    "    elseif kind == 7 then\n"
    "      local n = 995 + byte() % 10\n" /* nesting around the limit of 1000 */
    "      local t = {}\n"
    "      local inner = t\n"
    "      for k = 2, n do local c = {}; inner[1] = c; inner = c end\n"
    "      return t\n"
    "    elseif kind == 8 then return print\n"
    "    elseif kind == 9 then return 2^byte() * (b >= 128 and -1 or 1) + byte() - 128\n"
    "    elseif kind == 10 then return (byte() - 128) / (byte() + 1)\n"
    "    else return nil end\n"
    "  end\n"
    "  return value(0)\n"
    "end\n"
    /* close(a, b): a from our text, b from cjson's (14 significant digits) */
    "local function close(a, b, path)\n"
    "  if type(a) == 'string' and type(b) == 'number' then a = tonumber(a) end\n"
    "  if type(a) ~= type(b) then return path .. ': ' .. type(a) .. ' vs ' .. type(b) end\n"
    "  if type(a) == 'number' then\n"
    "    if math.abs(a - b) > 1e-13 * math.max(math.abs(a), math.abs(b)) then\n"
    "      return path .. (': %.17g vs %.17g'):format(a, b)\n"
    "    end\n"
    "  elseif type(a) == 'table' then\n"
    "    for k, v in pairs(b) do\n"
    "      local why = close(a[k], v, path .. '.' .. tostring(k))\n"
    "      if why then return why end\n"
    "    end\n"
    "    for k in pairs(a) do if b[k] == nil then return path .. ': key ' .. tostring(k) end end\n"
    "  elseif a ~= b then return path .. ': ' .. tostring(a) .. ' vs ' .. tostring(b) end\n"
    "end\n"
    "local function same(a, b, path)\n"
    "  if type(a) ~= type(b) then return path .. ': ' .. type(a) .. ' vs ' .. type(b) end\n"
    "  if type(a) == 'number' then\n"
    "    if a ~= b or 1 / a ~= 1 / b then return path .. (': %.17g vs %.17g'):format(a, b) end\n"
    "  elseif type(a) == 'table' then\n"
    "    for k, v in pairs(a) do\n"
    "      local why = same(v, b[k], path .. '.' .. tostring(k))\n"
    "      if why then return why end\n"
    "    end\n"
    "    for k in pairs(b) do if a[k] == nil then return path .. ': key ' .. tostring(k) end end\n"
    "  elseif a ~= b then return path .. ': ' .. tostring(a) .. ' vs ' .. tostring(b) end\n"
    "end\n"
    "return function(bytes)\n"
    "  local v = build(bytes)\n"
    "  local text, err = ours(v)\n"
    "  local ctext, cerr = cjson.encode(v)\n"
    "  if (text == nil) ~= (ctext == nil) or err ~= cerr then\n"
    "    return ('ours %s %s, cjson %s %s'):format(tostring(text), tostring(err), tostring(ctext), tostring(cerr))\n"
    "  end\n"
    "  if text == nil then return nil end\n"
    "  local x, xerr = decode(text)\n"
    "  if x == nil then return 'our text does not decode: ' .. xerr .. ': ' .. text end\n"
    "  local why = close(x, decode(ctext), '$')\n"
    "  if why then return 'ours ' .. text .. ', cjson ' .. ctext .. ': ' .. why end\n"
    "  local again, aerr = ours(x)\n"
    "  if again == nil then return 're-encoding fails: ' .. aerr end\n"
    "  local y = decode(again)\n"
    "  why = same(x, y, '$')\n"
    "  if why then return 'round trip ' .. text .. ' -> ' .. again .. ': ' .. why end\n"
    "end\n";

static lua_State *L;

/* at exit, so that LeakSanitizer sees nothing left (the state's memory is
 * malloc'd, lmem.h, which LeakSanitizer sees, unlike LuaJIT's own) */
static void close_state(void) { lmem_close(L); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_no_leak_check_per_input(argc, argv);
  if ((L = lmem_newstate(SIZE_MAX, NULL)) == NULL) abort();
  atexit(close_state);
  luaL_openlibs(L);
  if (luaL_loadstring(L, CHECK_LUA) != 0) {
    fprintf(stderr, "fuzz_json_encode: %s\n", lua_tostring(L, -1));
    abort();
  }
  luaopen_luastream_json_encode(L);
  lua_pushcfunction(L, json_decode_lua);
  FUZZ_CHECK(lua_pcall(L, 2, 1, 0) == 0, "%s", lua_tostring(L, -1));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  lua_pushlstring(L, (const char *)data, size);
  FUZZ_CHECK(lua_pcall(L, 1, 1, 0) == 0, "raised: %s", lua_tostring(L, -1));
  FUZZ_CHECK(lua_isnil(L, -1), "%s", lua_tostring(L, -1));
  lua_settop(L, 1);
  return 0;
}
