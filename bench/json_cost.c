/* json_cost: instructions per decode of the benchmark's payment body, for
 * callgrind: lua-cjson (cjson.safe, as luastream.json sets it up) against
 * json_decode_push.
 *
 *   json_cost cjson|cjson-str|ours|shaped N
 *
 * cjson: json.decode(body) called from C with the body already a Lua string;
 * cjson-str: the same plus making the body a Lua string each time (cjson needs
 * one, json_decode_push reads the bytes); ours: json_decode_push on the bytes;
 * shaped: the same with a shape cache (json_shapes.h), as the host decodes.
 * Each decoded value is dropped at once, so the GC's share is counted too.
 * Only measured() is counted: the difference between two runs, divided by
 * the difference in N, is the cost of one decode, e.g. (build-bench/ as
 * bench/build.sh makes it, or any build with -DLUASTREAM_BENCH=ON)
 *
 *   valgrind --tool=callgrind --toggle-collect=measured build-bench/bench/json_cost ours 10000
 *   valgrind --tool=callgrind --toggle-collect=measured build-bench/bench/json_cost ours 20000
 *
 * (on commit of json_decode.c: cjson 5,909, cjson-str 6,010, ours 3,282; with
 * json_shapes.c, in a state on LuaJIT's allocator: ours 2,659, shaped 2,232). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "json_decode.h"
#include "payment.h"

static json_shapes *shapes;

__attribute__((noinline)) static void decodes(lua_State *L, const char *mode, long n,
                                              const char *body, size_t len) {
  char err[128];
  for (long i = 0; i < n; i++) {
    if (mode[0] == 'o' || mode[0] == 's') {
      if (json_decode_push(L, mode[0] == 's' ? shapes : NULL, body, len, err, sizeof err) != 0)
        abort();
    } else {
      lua_pushvalue(L, 1);
      if (mode[5] == '-')
        lua_pushlstring(L, body, len);
      else
        lua_pushvalue(L, 2);
      lua_call(L, 1, 1);
      if (!lua_istable(L, -1)) abort();
    }
    lua_settop(L, 2);
  }
}

/* The measured part: only what this calls is counted. */
__attribute__((noinline)) static void measured(lua_State *L, const char *mode, long n,
                                               const char *body, size_t len) {
  decodes(L, mode, n, body, len);
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "cjson") && strcmp(argv[1], "cjson-str") &&
                    strcmp(argv[1], "ours") && strcmp(argv[1], "shaped"))) {
    fprintf(stderr, "usage: json_cost cjson|cjson-str|ours|shaped N\n");
    return 2;
  }
  char body[96], key[16];
  int keylen;
  size_t len = (size_t)payment_format(1, body, sizeof body, key, sizeof key, &keylen);
  lua_State *L = luaL_newstate();
  shapes = json_shapes_new();
  if (L == NULL || shapes == NULL) return 1;
  luaL_openlibs(L);
  if (luaL_dostring(
          L,
          "local j = require('cjson.safe').new() j.decode_invalid_numbers(false) return j.decode"))
    return 1;
  lua_pushlstring(L, body, len);
  decodes(L, argv[1], 100, body, len); /* warm: interned keys, table sizes, GC pace */
  measured(L, argv[1], atol(argv[2]), body, len);
  printf("%s: %s\n", argv[1], body);
  lua_close(L);
  json_shapes_free(shapes);
  return 0;
}
