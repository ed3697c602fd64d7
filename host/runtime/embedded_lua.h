/* embedded_lua: luastream's Lua library (lua/luastream.lua and the modules
 * of lua/luastream/ a handler state uses) compiled into the program, so a
 * copied or installed binary needs no Lua file on disk: require "luastream",
 * "luastream.handler" and "luastream.json" find the embedded text through
 * package.preload.
 *
 * LUASTREAM_LUA_DIR, when set and not empty, names a folder to load the
 * library from instead, for working on lua/ without rebuilding: each module
 * is read from its file there (a missing one fails naming the folder; no
 * other copy is mixed in), and the folder goes first on package.path for a
 * module added since the build. */
#ifndef LUASTREAM_EMBEDDED_LUA_H
#define LUASTREAM_EMBEDDED_LUA_H

#include <lua.h>

/* Makes the library requirable in L (package.preload).  [-0, +0] */
void embedded_lua_open(lua_State *L);

#endif
