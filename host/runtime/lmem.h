/* lmem: the allocator of the handlers' Lua states, and their memory limit.
 *
 * Per message LuaJIT allocates and frees a few small blocks: the message
 * table and its hash part, short strings, a reply's tables. Its own allocator
 * (dlmalloc-like, coalescing neighbours) spends about 120 instructions on each
 * such pair. Lua tells its allocator the size of every block it frees or
 * resizes, so small blocks are kept here on a free list per size class,
 * without a header: a few instructions to take one or give it back. Larger
 * blocks, and small ones freed while LUA_MEMORY_KEEP bytes are kept already,
 * go to malloc and free. A state is used from one thread, as Lua requires.
 *
 * The same sizes give each state's use of memory (the bytes Lua holds, not
 * what the pool keeps for reuse), so the allocator enforces the handler's
 * `memory` limit: while the limit is enforced (lmem_enforce), a growth past
 * it is refused and Lua raises "not enough memory" in the code that asked,
 * and the state is marked exceeded for good; the runtime then fails what
 * ran on it and makes a fresh state. A malloc that fails under the limit
 * (the process as a whole is out of memory: `ulimit -v`, the cgroup's limit
 * on a machine without overcommit) is not the handler's to recover from:
 * the process logs it, naming the handler, and exits with LMEM_EXIT_STATUS,
 * for a supervisor to restart it. */
#ifndef LUASTREAM_LUA_MEMORY_H
#define LUASTREAM_LUA_MEMORY_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Blocks up to this size are pooled, in classes 16 bytes apart. */
#define LUA_MEMORY_SMALL 512
/* Bytes of free small blocks a state keeps; the rest are freed. */
#define LUA_MEMORY_KEEP (1024 * 1024)
/* A process whose malloc failed for a Lua state exits with this (EX_SOFTWARE,
 * as the watchdog's). */
#define LMEM_EXIT_STATUS 70

/* A state's memory: what the allocator counts and checks. */
struct lmem {
  size_t used;      /* bytes the state holds (as Lua counts them) */
  size_t limit;     /* the state's limit */
  size_t cap;       /* growth past this is refused: limit while enforced, else SIZE_MAX */
  bool exceeded;    /* a growth was refused for the limit */
  const char *name; /* the handler, named when the process exits; borrowed, may be NULL */
  bool counted;     /* false: the state is on LuaJIT's own allocator, nothing is counted */
};

/* A new Lua state (as luaL_newstate, but no panic function) on a new pool
 * with the limit limit, enforced (lmem_enforce); name (borrowed: it must
 * outlive the state) is the handler the exit for a failed malloc names.
 * NULL when out of memory or when the limit is below what a state needs. A
 * LuaJIT that takes no allocator (x86-64 builds without GC64) gets a state
 * on its own allocator, where no limit applies (lmem_of(L)->counted is
 * false). */
lua_State *lmem_newstate(size_t limit, const char *name);

/* The memory record of L (from lmem_newstate). */
struct lmem *lmem_of(lua_State *L);

/* Closes L (from lmem_newstate) and frees its pool. */
void lmem_close(lua_State *L);

/* Whether growth past m->limit is refused (on) or only counted (off): the
 * runtime enforces it while user code runs under a protected call, and
 * lifts it around the host's own unprotected use of the state, where an
 * allocation error would be a panic. */
static inline void lmem_enforce(struct lmem *m, bool on) { m->cap = on ? m->limit : SIZE_MAX; }

/* Sets the limit (and the cap, when enforced). */
static inline void lmem_set_limit(struct lmem *m, size_t limit) {
  bool on = m->cap != SIZE_MAX;
  m->limit = limit;
  lmem_enforce(m, on);
}

/* Logs that the state of handler name (may be NULL) cannot go on (what:
 * "lua panic", "out of memory"; error: the detail, may be NULL), naming
 * the handler, and exits the process with LMEM_EXIT_STATUS. */
_Noreturn void lmem_fatal(const char *name, const char *what, const char *error);

#endif
