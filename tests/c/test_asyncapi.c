/* The AsyncAPI document of loaded handlers (runtime/asyncapi.c) and the copy
 * of a handler's validated spec it is built from (handler_spec_push in
 * runtime.c). The document's content is tests/spec/asyncapi_spec.lua's and,
 * through the binary and the official parser, tests/integration/asyncapi_spec.lua's. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "asyncapi.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

static handler *load(const char *name, const char *text) {
  handler *h = NULL;
  const char *path = write_file(name, text);
  if (handler_load(path, NULL, &h, load_error, sizeof load_error) != 0)
    TEST_FAIL_("handler_load(%s) failed: %s", name, load_error);
  return h;
}

static const char ORDERS[] =
    "local s = { type = \"object\", required = { \"id\" },\n"
    "  properties = { id = { type = \"string\", pattern = \"^o-[0-9]+$\" } } }\n"
    "return { stream = \"orders\", group = \"billing\", reply_to = \"billed\",\n"
    "  min_idle = \"30s\", schema = s, handle = function() end }\n";

static const char LOOP[] =
    "local s = { type = \"object\" }\n"
    "s.properties = { next = s }\n"
    "return { stream = \"s\", group = \"g\", schema = s,\n"
    "  handle = function() end }\n";

/* The copy holds the fields and the schema's tables, not the functions
 * (handle). */
TEST_IMPL(asyncapi_spec_push) {
  handler *h = load("orders.lua", ORDERS);
  lua_State *L = luaL_newstate();
  ASSERT_OK(handler_spec_push(h, L));
  ASSERT_INT_EQ(lua_type(L, -1), LUA_TTABLE);
  lua_getfield(L, -1, "stream");
  ASSERT_STR_EQ(lua_tostring(L, -1), "orders");
  lua_getfield(L, -2, "min_idle");
  ASSERT_INT_EQ((int)lua_tonumber(L, -1), 30000);
  lua_getfield(L, -3, "handle");
  ASSERT(lua_isnil(L, -1));
  lua_pop(L, 3);
  lua_getfield(L, -1, "schema");
  lua_getfield(L, -1, "properties");
  lua_getfield(L, -1, "id");
  lua_getfield(L, -1, "pattern");
  ASSERT_STR_EQ(lua_tostring(L, -1), "^o-[0-9]+$");
  lua_pop(L, 3);
  lua_getfield(L, -1, "required");
  lua_rawgeti(L, -1, 1);
  ASSERT_STR_EQ(lua_tostring(L, -1), "id");
  lua_close(L);
  handler_release(h);
  LEAK_CHECK();
}

/* The deepest schema luastream check accepts (SCHEMA_MAX_DEPTH properties
 * deep, a required list at the bottom) is copied whole. */
static const char DEEP[] =
    "local s = { type = \"object\" }\n"
    "local t = s\n"
    "for i = 1, 32 do\n"
    "  t.properties = { n = { type = \"object\", required = { \"leaf\" } } }\n"
    "  t = t.properties.n\n"
    "end\n"
    "return { stream = \"s\", group = \"g\", schema = s, handle = function() end }\n";

TEST_IMPL(asyncapi_spec_push_deepest_schema) {
  handler *h = load("deep.lua", DEEP);
  lua_State *L = luaL_newstate();
  ASSERT_OK(handler_spec_push(h, L));
  lua_getfield(L, -1, "schema");
  for (int i = 0; i < 32; i++) {
    lua_getfield(L, -1, "properties");
    lua_getfield(L, -1, "n");
    ASSERT_INT_EQ(lua_type(L, -1), LUA_TTABLE);
    lua_replace(L, -3); /* the stack stays short */
    lua_pop(L, 1);
  }
  lua_getfield(L, -1, "required");
  lua_rawgeti(L, -1, 1);
  ASSERT_STR_EQ(lua_tostring(L, -1), "leaf");
  lua_close(L);
  handler_release(h);
  LEAK_CHECK();
}

/* A schema that holds itself never reaches the copy: the load refuses it,
 * naming the file. */
TEST_IMPL(asyncapi_spec_loop_refused_at_load) {
  handler *h = NULL;
  const char *path = write_file("loop.lua", LOOP);
  ASSERT(handler_load(path, NULL, &h, load_error, sizeof load_error) != 0);
  ASSERT_NULL(h);
  ASSERT_NOT_NULL(strstr(load_error, "loop.lua"));
  ASSERT_NOT_NULL(strstr(load_error, "nest deeper than"));
  LEAK_CHECK();
}

TEST_IMPL(asyncapi_document) {
  handler *hs[2] = {load("a_orders.lua", ORDERS),
                    load("b_audit.lua",
                         "return { stream = \"events\", group = \"audit\",\n"
                         "  partitions = 2, handle = function() end }\n")};
  struct rt_asyncapi_server server = {.host = "db:6380", .db = 1, .tls = true, .password = true};
  struct rt_asyncapi o = {.title = "T", .version = "2.0.0", .dir = "d", .server = &server};
  char *text = NULL, err[512];
  size_t len = 0;
  ASSERT_OK(rt_asyncapi(hs, 2, &o, &text, &len, err, sizeof err));
  ASSERT_INT_EQ(strlen(text), len);
  ASSERT(strncmp(text, "{\n  \"asyncapi\": \"3.0.0\",\n", 25) == 0);
  ASSERT_NOT_NULL(strstr(text, "\"address\": \"events:{partition_tag}\""));
  ASSERT_NOT_NULL(strstr(text, "\"x-luastream-group\": \"billing\""));
  ASSERT_NOT_NULL(strstr(text, "\"protocol\": \"rediss\""));
  ASSERT_NOT_NULL(strstr(text, "\"pattern\": \"^o-[0-9]+$\""));
  free(text);
  o.yaml = true;
  ASSERT_OK(rt_asyncapi(hs, 2, &o, &text, &len, err, sizeof err));
  ASSERT(strncmp(text, "asyncapi: \"3.0.0\"\ninfo:\n  title: T\n", 34) == 0);
  free(text);
  handler_release(hs[0]);
  handler_release(hs[1]);
  LEAK_CHECK();
}
