/* lmem: the allocator of the handlers' Lua states (see lmem.h). */
#include "lmem.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define CLASS_BYTES 16
#define CLASSES (LUA_MEMORY_SMALL / CLASS_BYTES)

struct free_block {
  struct free_block *next;
};

struct pool {
  struct free_block *free[CLASSES]; /* class c holds blocks of (c + 1) * 16 bytes */
  size_t kept;                      /* bytes on the lists */
};

/* The class of a small block of size bytes (1..LUA_MEMORY_SMALL). */
static inline size_t class_of(size_t size) { return (size - 1) / CLASS_BYTES; }

/* Not inlined: bench/instructions counts its calls as the Lua allocations. */
__attribute__((noinline)) static void *take(struct pool *pool, size_t size) {
  if (size > LUA_MEMORY_SMALL) return malloc(size);
  size_t c = class_of(size);
  struct free_block *b = pool->free[c];
  if (b == NULL) return malloc((c + 1) * CLASS_BYTES);
  pool->free[c] = b->next;
  pool->kept -= (c + 1) * CLASS_BYTES;
  return b;
}

static void give_back(struct pool *pool, void *p, size_t size) {
  if (size > LUA_MEMORY_SMALL) {
    free(p);
    return;
  }
  size_t c = class_of(size), bytes = (c + 1) * CLASS_BYTES;
  if (pool->kept + bytes > LUA_MEMORY_KEEP) {
    free(p);
    return;
  }
  struct free_block *b = p;
  b->next = pool->free[c];
  pool->free[c] = b;
  pool->kept += bytes;
}

/* lua_Alloc: osize is the block's size whenever p is not NULL. */
static void *pool_alloc(void *ud, void *p, size_t osize, size_t nsize) {
  struct pool *pool = ud;
  if (nsize == 0) {
    if (p) give_back(pool, p, osize);
    return NULL;
  }
  if (p == NULL) return take(pool, nsize);
  if (osize > LUA_MEMORY_SMALL && nsize > LUA_MEMORY_SMALL) return realloc(p, nsize);
  if (osize <= LUA_MEMORY_SMALL && nsize <= LUA_MEMORY_SMALL && class_of(osize) == class_of(nsize))
    return p;
  void *q = take(pool, nsize);
  /* Lua counts on a shrink to succeed: the larger block serves (it is filed
   * under the smaller size when freed, which wastes its tail, no more). */
  if (q == NULL) return nsize < osize ? p : NULL;
  memcpy(q, p, osize < nsize ? osize : nsize);
  give_back(pool, p, osize);
  return q;
}

lua_State *lmem_newstate(void) {
  struct pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return NULL;
  lua_State *L = lua_newstate(pool_alloc, pool);
  if (L) return L;
  /* A LuaJIT that takes no allocator (x86-64 without GC64): its own. */
  free(pool);
  return luaL_newstate();
}

void lmem_close(lua_State *L) {
  void *ud;
  bool pooled = lua_getallocf(L, &ud) == pool_alloc;
  lua_close(L);
  if (!pooled) return;
  struct pool *pool = ud;
  for (size_t c = 0; c < CLASSES; c++) {
    while (pool->free[c]) {
      struct free_block *b = pool->free[c];
      pool->free[c] = b->next;
      free(b);
    }
  }
  free(pool);
}
