/* redis_reply: replies as Lua values; see redis_reply.h. */
#include "redis_reply.h"

#include <lauxlib.h>

static void push_tagged(lua_State *L, const char *tag, const bk_reply *r) {
  lua_createtable(L, 0, 1);
  lua_pushlstring(L, r->str ? r->str : "", r->str ? r->len : 0);
  lua_setfield(L, -2, tag);
}

void redis_reply_push(lua_State *L, const bk_reply *r) {
  luaL_checkstack(L, 3, "redis reply nested too deep");
  switch (r->type) {
    case BK_STRING: lua_pushlstring(L, r->str ? r->str : "", r->str ? r->len : 0); break;
    case BK_INTEGER: lua_pushnumber(L, (lua_Number)r->integer); break;
    case BK_ARRAY:
      lua_createtable(L, r->elements > 0x7fffffff ? 0x7fffffff : (int)r->elements, 0);
      for (size_t i = 0; i < r->elements; i++) {
        redis_reply_push(L, r->element[i]);
        lua_rawseti(L, -2, (int)i + 1);
      }
      break;
    case BK_STATUS: push_tagged(L, "ok", r); break;
    case BK_ERROR: push_tagged(L, "err", r); break;
    default: /* BK_NIL, and any type a later protocol adds */ lua_pushboolean(L, 0); break;
  }
}
