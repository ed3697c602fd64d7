/* lmem: the allocator of the handlers' Lua states (see lmem.h). */
#include "lmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "log.h"
#include "log_writer.h"

#define CLASS_BYTES 16
#define CLASSES (LUA_MEMORY_SMALL / CLASS_BYTES)
/* How long the log lines still buffered may take before the exit. */
#define FATAL_LOG_DRAIN_MS 1000

struct free_block {
  struct free_block *next;
};

struct pool {
  struct lmem mem;                  /* first: lmem_of hands it out */
  struct free_block *free[CLASSES]; /* class c holds blocks of (c + 1) * 16 bytes */
  size_t kept;                      /* bytes on the lists */
};

/* The class of a small block of size bytes (1..LUA_MEMORY_SMALL). */
static inline size_t class_of(size_t size) { return (size - 1) / CLASS_BYTES; }

_Noreturn void lmem_fatal(const char *name, const char *what, const char *error) {
  char status[8];
  snprintf(status, sizeof status, "%d", LMEM_EXIT_STATUS);
  log_line(LOG_ERROR, name,
           "a handler's Lua state cannot go on, exiting for a supervisor to restart the host",
           "failure", what, "error", error, LOG_NUMBER "exit_status", status, NULL);
  /* At once: no atexit handlers, no cleanup that would allocate; only a
   * moment for the log lines still buffered. Entries not acked stay pending. */
  log_writer_stop(FATAL_LOG_DRAIN_MS);
  _exit(LMEM_EXIT_STATUS);
}

/* malloc failed under the limit: the process is out of memory. */
_Noreturn static void out_of_memory(const struct pool *pool, size_t size) {
  char error[160];
  snprintf(error, sizeof error,
           "malloc of %zu bytes failed with the state at %zu bytes, under its limit of %zu: "
           "the process is out of memory",
           size, pool->mem.used, pool->mem.limit);
  lmem_fatal(pool->mem.name, "out of memory", error);
}

/* Not inlined: bench/instructions counts its calls as the Lua allocations.
 * NULL when malloc fails. */
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
  if (p == NULL) osize = 0;
  if (nsize == 0) {
    if (p) {
      pool->mem.used -= osize;
      give_back(pool, p, osize);
    }
    return NULL;
  }
  bool grows = nsize > osize;
  if (grows) {
    /* Past the limit: refused, and Lua raises "not enough memory". (used
     * may be over cap already: the host's own use while not enforced.) */
    size_t after = pool->mem.used + (nsize - osize);
    if (after > pool->mem.cap) {
      pool->mem.exceeded = true;
      return NULL;
    }
    pool->mem.used = after;
  } else {
    pool->mem.used -= osize - nsize;
  }
  if (p == NULL) {
    void *q = take(pool, nsize);
    if (q == NULL) out_of_memory(pool, nsize);
    return q;
  }
  if (osize > LUA_MEMORY_SMALL && nsize > LUA_MEMORY_SMALL) {
    void *q = realloc(p, nsize);
    if (q) return q;
    if (grows) out_of_memory(pool, nsize);
    return p; /* Lua counts on a shrink to succeed: the larger block serves */
  }
  if (osize <= LUA_MEMORY_SMALL && nsize <= LUA_MEMORY_SMALL && class_of(osize) == class_of(nsize))
    return p;
  void *q = take(pool, nsize);
  if (q == NULL) {
    if (grows) out_of_memory(pool, nsize);
    /* A shrink: the larger block serves (it is filed under the smaller size
     * when freed, which wastes its tail, no more). */
    return p;
  }
  memcpy(q, p, osize < nsize ? osize : nsize);
  give_back(pool, p, osize);
  return q;
}

/* The record of states on LuaJIT's own allocator: nothing counted, never
 * exceeded (lmem_set_limit may write it: nothing reads it). */
static struct lmem unlimited = {.limit = SIZE_MAX, .cap = SIZE_MAX};

lua_State *lmem_newstate(size_t limit, const char *name) {
  struct pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return NULL;
  pool->mem.limit = pool->mem.cap = limit;
  pool->mem.name = name;
  pool->mem.counted = true;
  lua_State *L = lua_newstate(pool_alloc, pool);
  if (L) return L;
  /* Asked for memory and failed: the limit is below what a state needs. */
  bool asked = pool->mem.used > 0 || pool->mem.exceeded;
  free(pool);
  if (asked) return NULL;
  /* A LuaJIT that takes no allocator (x86-64 without GC64): its own, and
   * no limit. */
  return luaL_newstate();
}

struct lmem *lmem_of(lua_State *L) {
  void *ud;
  return lua_getallocf(L, &ud) == pool_alloc ? ud : &unlimited;
}

void lmem_close(lua_State *L) {
  void *ud;
  bool pooled = lua_getallocf(L, &ud) == pool_alloc;
  if (pooled) lmem_enforce(ud, false); /* finalizers may allocate */
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
