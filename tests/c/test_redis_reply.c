/* Tests for redis_reply.c: replies as Lua values, as Redis scripting converts
 * them (checked by Lua code on the pushed value), and a reply nested deeper
 * than the Lua stack allows raising a Lua error instead of crashing. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "redis_reply.h"
#include "task.h"

static bk_reply str(int type, const char *s) {
  return (bk_reply){.type = type, .str = (char *)s, .len = strlen(s)};
}

/* Pushes the reply at upvalue-less argument 1 (light userdata): run under lua_pcall. */
static int push_protected_fn(lua_State *L) {
  redis_reply_push(L, lua_touserdata(L, 1));
  return 1;
}

static void check(lua_State *L, const bk_reply *r, const char *lua_check) {
  lua_pushcfunction(L, push_protected_fn);
  lua_pushlightuserdata(L, (void *)r);
  ASSERT_INT_EQ(lua_pcall(L, 1, 1, 0), 0);
  lua_setglobal(L, "v");
  if (luaL_dostring(L, lua_check) != 0) TEST_FAIL_("%s: %s", lua_check, lua_tostring(L, -1));
}

TEST_IMPL(redis_reply_converts_as_redis_scripting) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  bk_reply s = str(BK_STRING, "hello"), empty = str(BK_STRING, "");
  bk_reply bin = {.type = BK_STRING, .str = "a\0b", .len = 3};
  bk_reply i = {.type = BK_INTEGER, .integer = -42},
           big = {.type = BK_INTEGER, .integer = 1LL << 53};
  bk_reply nil = {.type = BK_NIL}, ok = str(BK_STATUS, "OK"), err = str(BK_ERROR, "ERR wrong");
  check(L, &s, "assert(v == 'hello')");
  check(L, &empty, "assert(v == '')");
  check(L, &bin, "assert(v == 'a\\0b')");
  check(L, &i, "assert(v == -42)");
  check(L, &big, "assert(v == 2^53)");
  check(L, &nil, "assert(v == false)");
  check(L, &ok, "assert(type(v) == 'table' and v.ok == 'OK' and next(v, 'ok') == nil)");
  check(L, &err, "assert(type(v) == 'table' and v.err == 'ERR wrong')");

  bk_reply none = {.type = BK_ARRAY};
  check(L, &none, "assert(type(v) == 'table' and next(v) == nil)");
  bk_reply *inner_el[] = {&empty, &nil};
  bk_reply inner = {.type = BK_ARRAY, .elements = 2, .element = inner_el};
  bk_reply *outer_el[] = {&s, &i, &nil, &ok, &err, &inner};
  bk_reply outer = {.type = BK_ARRAY, .elements = 6, .element = outer_el};
  check(L, &outer,
        "assert(#v == 6 and v[1] == 'hello' and v[2] == -42 and v[3] == false and "
        "v[4].ok == 'OK' and v[5].err == 'ERR wrong' and #v[6] == 2 and "
        "v[6][1] == '' and v[6][2] == false)");
  lua_close(L);
}

TEST_IMPL(redis_reply_too_deep_raises) {
  lua_State *L = luaL_newstate();
  enum { DEPTH = 100000 };
  bk_reply *levels = calloc(DEPTH, sizeof *levels);
  bk_reply **links = calloc(DEPTH, sizeof *links);
  ASSERT_NOT_NULL(levels);
  ASSERT_NOT_NULL(links);
  for (int k = 0; k < DEPTH; k++) {
    levels[k].type = BK_ARRAY;
    if (k + 1 < DEPTH) {
      links[k] = &levels[k + 1];
      levels[k].elements = 1;
      levels[k].element = &links[k];
    }
  }
  lua_pushcfunction(L, push_protected_fn);
  lua_pushlightuserdata(L, levels);
  ASSERT(lua_pcall(L, 1, 1, 0) != 0);
  ASSERT_CONTAINS(lua_tostring(L, -1), "redis reply nested too deep");
  lua_close(L);
  free(levels);
  free(links);
}
