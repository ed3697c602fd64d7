/* Tests for lmem.c: the pool's allocator called as Lua calls it (new
 * blocks, resizes within and across size classes and to and from the large
 * sizes malloc serves, frees), a freed block served again to its class, and
 * a whole Lua state living on it, closed with nothing left behind (ASan);
 * the memory limit: what a state holds counted as Lua counts it, growth past
 * the limit refused (Lua raises) while enforced and only counted while not,
 * shrinks always served. */
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lmem.h"
#include "task.h"

/* The state's allocator, to call it directly. */
static lua_Alloc allocator(lua_State *L, void **ud) { return lua_getallocf(L, ud); }

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}

static void expect(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 7)) TEST_FAIL_("byte %zu of %zu changed", i, n);
}

TEST_IMPL(lmem_resizes_keep_the_bytes) {
  lua_State *L = lmem_newstate(SIZE_MAX, NULL);
  ASSERT_NOT_NULL(L);
  void *ud;
  lua_Alloc f = allocator(L, &ud);
  /* Through every class and past LUA_MEMORY_SMALL, up and back down. */
  static const size_t sizes[] = {1,   8,   16,   17,  31,  32,  33, 100, 256, 511, 512,
                                 513, 600, 4096, 513, 512, 300, 64, 17,  16,  1};
  size_t n = sizes[0];
  unsigned char *p = f(ud, NULL, 0, n);
  ASSERT_NOT_NULL(p);
  ASSERT_INT_EQ((uintptr_t)p % 16, 0);
  fill(p, n, 3);
  for (size_t i = 1; i < sizeof sizes / sizeof *sizes; i++) {
    size_t m = sizes[i];
    p = f(ud, p, n, m);
    ASSERT_NOT_NULL(p);
    ASSERT_INT_EQ((uintptr_t)p % 16, 0);
    expect(p, n < m ? n : m, 3);
    fill(p, m, 3);
    n = m;
  }
  ASSERT_NULL(f(ud, p, n, 0));
  lmem_close(L);
}

TEST_IMPL(lmem_serves_a_freed_block_to_its_class) {
  lua_State *L = lmem_newstate(SIZE_MAX, NULL);
  ASSERT_NOT_NULL(L);
  void *ud;
  lua_Alloc f = allocator(L, &ud);
  void *a = f(ud, NULL, 0, 60);
  ASSERT_NOT_NULL(a);
  f(ud, a, 60, 0);
  void *b = f(ud, NULL, 0, 49); /* 49..64 bytes: a's class */
  ASSERT(b == a);
  void *c = f(ud, NULL, 0, 64);
  ASSERT(c != a);
  /* Resizing within the class keeps the block. */
  ASSERT(f(ud, b, 49, 64) == b);
  f(ud, b, 64, 0);
  f(ud, c, 64, 0);
  lmem_close(L);
}

TEST_IMPL(lmem_runs_a_state) {
  lua_State *L = lmem_newstate(SIZE_MAX, NULL);
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  /* Strings of every small size and larger, tables that grow through the
   * classes and past them, garbage collected several times over. */
  const char *chunk =
      "local keep, total = {}, 0\n"
      "for round = 1, 20 do\n"
      "  local t = {}\n"
      "  for i = 1, 2000 do\n"
      "    local s = string.rep('x', i % 700) .. round\n"
      "    t[i] = { s = s, n = i, [s] = #s }\n"
      "    total = total + #s\n"
      "  end\n"
      "  keep[round % 3] = t\n"
      "  collectgarbage()\n"
      "end\n"
      "assert(#keep[1] == 2000 and keep[1][1999].n == 1999)\n"
      "return total\n";
  if (luaL_dostring(L, chunk) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  double want = 0;
  for (int round = 1; round <= 20; round++)
    for (int i = 1; i <= 2000; i++) want += i % 700 + (round < 10 ? 1 : 2);
  ASSERT(lua_tonumber(L, -1) == want);
  lmem_close(L);
}

/* Bytes f's pool holds after each call, as Lua asked for them. */
TEST_IMPL(lmem_counts_what_lua_holds) {
  lua_State *L = lmem_newstate(SIZE_MAX, NULL);
  ASSERT_NOT_NULL(L);
  struct lmem *m = lmem_of(L);
  void *ud;
  lua_Alloc f = allocator(L, &ud);
  size_t base = m->used;
  ASSERT(base > 0); /* the state itself */
  void *p = f(ud, NULL, 0, 100);
  ASSERT_INT_EQ(m->used, base + 100);
  p = f(ud, p, 100, 600);
  ASSERT_INT_EQ(m->used, base + 600);
  p = f(ud, p, 600, 50);
  ASSERT_INT_EQ(m->used, base + 50);
  p = f(ud, p, 50, 40); /* the same class */
  ASSERT_INT_EQ(m->used, base + 40);
  f(ud, p, 40, 0);
  ASSERT_INT_EQ(m->used, base);
  lmem_close(L);
}

TEST_IMPL(lmem_refuses_growth_past_the_limit) {
  lua_State *L = lmem_newstate(1u << 20, "h");
  ASSERT_NOT_NULL(L);
  struct lmem *m = lmem_of(L);
  ASSERT_STR_EQ(m->name, "h");
  void *ud;
  lua_Alloc f = allocator(L, &ud);
  size_t room = m->limit - m->used;
  void *big = f(ud, NULL, 0, room); /* up to the limit exactly */
  ASSERT_NOT_NULL(big);
  ASSERT(!m->exceeded);
  ASSERT_NULL(f(ud, NULL, 0, 1)); /* one byte more */
  ASSERT(m->exceeded);
  ASSERT_INT_EQ(m->used, m->limit);
  /* Past the limit growth is refused, a shrink served. */
  ASSERT_NULL(f(ud, big, room, room + 1));
  void *smaller = f(ud, big, room, 1000);
  ASSERT_NOT_NULL(smaller);
  ASSERT_INT_EQ(m->used, m->limit - room + 1000);
  /* Not enforced: counted, not refused. */
  lmem_enforce(m, false);
  void *over = f(ud, NULL, 0, 2u << 20);
  ASSERT_NOT_NULL(over);
  ASSERT(m->used > m->limit);
  /* Enforced again while over: any growth is refused, freeing works. */
  lmem_enforce(m, true);
  ASSERT_NULL(f(ud, NULL, 0, 16));
  f(ud, over, 2u << 20, 0);
  f(ud, smaller, 1000, 0);
  ASSERT(m->used < m->limit);
  lmem_close(L);
}

/* A script growing a table until the state's limit: Lua raises "not enough
 * memory", which a pcall can catch; the state stays usable and closes clean. */
TEST_IMPL(lmem_limit_raises_in_lua) {
  lua_State *L = lmem_newstate(8u << 20, "grower");
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  struct lmem *m = lmem_of(L);
  const char *chunk =
      "local t = {}\n"
      "local ok, err = pcall(function()\n"
      "  for i = 1, 1e9 do t[i] = string.rep('x', 64) .. i end\n"
      "end)\n"
      "local n = #t\n"
      "t = nil\n"
      "collectgarbage()\n"
      "return ok, err, n\n";
  if (luaL_loadstring(L, chunk) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  if (lua_pcall(L, 0, 3, 0) != 0) TEST_FAIL_("%s", lua_tostring(L, -1));
  ASSERT(!lua_toboolean(L, -3));
  ASSERT_STR_EQ(lua_tostring(L, -2), "not enough memory");
  ASSERT(lua_tonumber(L, -1) > 10000);
  ASSERT(m->exceeded);
  ASSERT(m->used < m->limit / 2); /* the table was collected */
  lmem_close(L);
}

TEST_IMPL(lmem_limit_below_a_state) { ASSERT_NULL(lmem_newstate(1000, "tiny")); }
