/* embedded_lua: luastream's Lua library (lua/luastream.lua and the modules
 * of lua/luastream/ a handler state uses) compiled into the program, so a
 * copied or installed binary needs no Lua file on disk: require "luastream",
 * "luastream.handler" and "luastream.json" find the embedded text through
 * package.preload.
 *
 * LUASTREAM_LUA_DIR, when set and not empty, names a folder to load the
 * library from instead (its ?.lua and ?/init.lua go first on package.path
 * and nothing is preloaded): for working on lua/ without rebuilding. */
#ifndef LUASTREAM_EMBEDDED_LUA_H
#define LUASTREAM_EMBEDDED_LUA_H

#include <lua.h>

/* Makes the library requirable in L: the embedded modules on package.preload,
 * or LUASTREAM_LUA_DIR first on package.path.  [-0, +0] */
void embedded_lua_open(lua_State *L);

#endif
