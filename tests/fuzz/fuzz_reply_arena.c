/* fuzz_reply_arena: hiredis' reader with the arena's object functions
 * (reply_arena.c) on any bytes from a server, fed in chunks (the first byte
 * sets their size): it builds the same replies, and fails at the same
 * point, as hiredis' own functions, with nothing leaked; each reply then
 * goes to Lua as a handler would receive it (redis_reply.c). */
#include <hiredis/hiredis.h>
#include <lauxlib.h>
#include <lualib.h>

#include "fuzz.h"
#include "lmem.h"
#include "redis_reply.h"
#include "reply_arena.h"

/* Arrays above this many elements are skipped: hiredis 0.14 callocs any
 * count a server sends, and an 8 GB calloc is not the arena's problem. */
#define MAX_COUNT 100000

static void same(const redisReply *a, const redisReply *b, int depth) {
  FUZZ_CHECK((a == NULL) == (b == NULL), "depth %d: one reply missing", depth);
  if (a == NULL) return;
  FUZZ_CHECK(a->type == b->type && a->integer == b->integer && a->len == b->len &&
                 a->elements == b->elements && (a->element == NULL) == (b->element == NULL),
             "depth %d: type %d/%d", depth, a->type, b->type);
  FUZZ_CHECK((a->str == NULL) == (b->str == NULL), "depth %d: str", depth);
  if (a->str) FUZZ_CHECK(memcmp(a->str, b->str, a->len + 1) == 0, "depth %d: string", depth);
  if (a->element)
    for (size_t i = 0; i < a->elements; i++) same(a->element[i], b->element[i], depth + 1);
}

static int push(lua_State *L) {
  redis_reply_push(L, lua_touserdata(L, 1));
  return 1;
}

static lua_State *L;

static void close_state(void) { lmem_close(L); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_no_leak_check_per_input(argc, argv);
  if ((L = lmem_newstate(SIZE_MAX, NULL)) == NULL) abort();
  atexit(close_state);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  char *text = fuzz_strdup(data, size);
  for (size_t i = 0; i < size; i++)
    if (text[i] == '*' && strtoull(text + i + 1, NULL, 10) > MAX_COUNT) {
      free(text);
      return 0;
    }
  free(text);
  size_t chunk = data[0] % 16 + 1;
  data++, size--;
  redisReader *plain = redisReaderCreate(), *r = redisReaderCreate();
  struct reply_arena *a = reply_arena_new();
  if (plain == NULL || r == NULL || a == NULL) abort();
  reply_arena_attach(a, r);
  for (size_t at = 0; at < size; at += chunk) {
    size_t n = size - at < chunk ? size - at : chunk;
    FUZZ_CHECK(redisReaderFeed(plain, (const char *)data + at, n) ==
                   redisReaderFeed(r, (const char *)data + at, n),
               "feed");
    for (;;) {
      void *want = NULL, *got = NULL;
      int rc_want = redisReaderGetReply(plain, &want), rc_got = redisReaderGetReply(r, &got);
      FUZZ_CHECK(rc_want == rc_got, "hiredis %d, arena %d: %s", rc_want, rc_got, r->errstr);
      same(want, got, 0);
      if (got) {
        lua_settop(L, 0);
        lua_pushcfunction(L, push);
        lua_pushlightuserdata(L, got);
        lua_pcall(L, 1, 1, 0); /* a reply too large for a table raises */
        lua_settop(L, 0);
      }
      if (want) freeReplyObject(want);
      if (got) r->fn->freeObject(got); /* as hiredis' async context frees them */
      if (rc_got != REDIS_OK) goto done;
      if (got == NULL) break;
    }
  }
done:
  redisReaderFree(plain);
  redisReaderFree(r);
  reply_arena_free(a);
  return 0;
}
