/* lmem: the allocator of the handlers' Lua states.
 *
 * Per message LuaJIT allocates and frees a few small blocks: the message
 * table and its hash part, short strings, a reply's tables. Its own allocator
 * (dlmalloc-like, coalescing neighbours) spends about 120 instructions on each
 * such pair. Lua tells its allocator the size of every block it frees or
 * resizes, so small blocks are kept here on a free list per size class,
 * without a header: a few instructions to take one or give it back. Larger
 * blocks, and small ones freed while LUA_MEMORY_KEEP bytes are kept already,
 * go to malloc and free. A state is used from one thread, as Lua requires. */
#ifndef LUASTREAM_LUA_MEMORY_H
#define LUASTREAM_LUA_MEMORY_H

#include <lua.h>

/* Blocks up to this size are pooled, in classes 16 bytes apart. */
#define LUA_MEMORY_SMALL 512
/* Bytes of free small blocks a state keeps; the rest are freed. */
#define LUA_MEMORY_KEEP (1024 * 1024)

/* A new Lua state (as luaL_newstate, but no panic function) on a new pool;
 * on LuaJIT's own allocator when this LuaJIT takes none (x86-64 builds
 * without GC64). NULL when out of memory. */
lua_State *lmem_newstate(void);

/* Closes L (from lmem_newstate) and frees its pool. */
void lmem_close(lua_State *L);

#endif
