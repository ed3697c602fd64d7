/* asyncapi: the AsyncAPI document of loaded handlers (asyncapi.h). */
#include "asyncapi.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded_lua.h"
#include "handler_name.h"
#include "trace.h"
#include "wire.h"

struct build {
  handler *const *hs;
  size_t n;
  const struct rt_asyncapi *o;
  char *out;
  size_t len;
};

static void set_string(lua_State *L, const char *key, const char *value) {
  if (value == NULL) return;
  lua_pushstring(L, value);
  lua_setfield(L, -2, key);
}

static void set_bool(lua_State *L, const char *key, bool value) {
  lua_pushboolean(L, value);
  lua_setfield(L, -2, key);
}

/* The handlers as luastream.asyncapi takes them: {path =, file =, name =,
 * spec =} each.  [-0, +1] */
static void push_handlers(lua_State *L, const struct build *b) {
  lua_createtable(L, (int)b->n, 0);
  for (size_t i = 0; i < b->n; i++) {
    const struct handler_spec *s = handler_spec(b->hs[i]);
    lua_createtable(L, 0, 3);
    set_string(L, "path", s->path);
    set_string(L, "file", handler_name_file(s->path));
    set_string(L, "name", s->name);
    if (handler_spec_push(b->hs[i], L) != 0)
      luaL_error(L,
                 "%s: the table the file returns nests deeper than a valid spec (or holds itself)",
                 s->path);
    lua_setfield(L, -2, "spec");
    lua_rawseti(L, -2, (int)i + 1);
  }
}

/* The options: title, version, dir, the wire names (wire.h) and the server.
 * [-0, +1] */
static void push_options(lua_State *L, const struct rt_asyncapi *o) {
  lua_createtable(L, 0, 6);
  set_string(L, "title", o->title);
  set_string(L, "version", o->version);
  set_string(L, "dir", o->dir);
  lua_newtable(L);
  for (const struct wire_name *w = wire_headers; w->name; w++) set_string(L, w->name, w->text);
  set_string(L, "TRACEPARENT", HDR_TRACEPARENT);
  lua_setfield(L, -2, "headers");
  lua_newtable(L);
  for (int i = 0; wire_reasons[i].name; i++) {
    lua_pushstring(L, wire_reasons[i].text);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "reasons");
  const struct rt_asyncapi_server *s = o->server;
  if (s) {
    lua_createtable(L, 0, 7);
    set_string(L, "host", s->host);
    set_string(L, "socket", s->socket);
    set_string(L, "service", s->service);
    lua_pushinteger(L, s->db);
    lua_setfield(L, -2, "db");
    set_bool(L, "tls", s->tls);
    set_bool(L, "password", s->password);
    set_bool(L, "client_cert", s->client_cert);
    lua_setfield(L, -2, "server");
  }
}

/* The build, under lua_pcall.  [-1, +0] build */
static int build_protected(lua_State *L) {
  struct build *b = lua_touserdata(L, 1);
  lua_settop(L, 0);
  luaL_openlibs(L);
  embedded_lua_open(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luastream.asyncapi");
  lua_call(L, 1, 1); /* M */
  lua_getfield(L, 1, b->o->yaml ? "yaml" : "json");
  lua_getfield(L, 1, "document");
  push_handlers(L, b);
  push_options(L, b->o);
  lua_call(L, 2, 1); /* M write doc */
  lua_call(L, 1, 1); /* M text */
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  if (text == NULL) return luaL_error(L, "luastream.asyncapi wrote no text");
  b->out = malloc(len + 1);
  if (b->out == NULL) return luaL_error(L, "not enough memory");
  memcpy(b->out, text, len + 1);
  b->len = len;
  return 0;
}

int rt_asyncapi(handler *const *hs, size_t n, const struct rt_asyncapi *o, char **out, size_t *len,
                char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    snprintf(err, errlen, "asyncapi: out of memory");
    return -1;
  }
  struct build b = {.hs = hs, .n = n, .o = o};
  lua_pushcfunction(L, build_protected);
  lua_pushlightuserdata(L, &b);
  int rc = lua_pcall(L, 1, 0, 0);
  if (rc != 0) {
    const char *msg = lua_tostring(L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "asyncapi: not enough memory");
    free(b.out);
    b.out = NULL;
  }
  lua_close(L);
  if (b.out == NULL) return -1;
  *out = b.out;
  *len = b.len;
  return 0;
}
