/* Tests for lmem.c: the pool's allocator called as Lua calls it (new
 * blocks, resizes within and across size classes and to and from the large
 * sizes malloc serves, frees), a freed block served again to its class, and
 * a whole Lua state living on it, closed with nothing left behind (ASan). */
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
  lua_State *L = lmem_newstate();
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
  lua_State *L = lmem_newstate();
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
  lua_State *L = lmem_newstate();
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
