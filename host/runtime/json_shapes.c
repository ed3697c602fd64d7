/* json_shapes: Lua constructors for the object shapes a handler keeps seeing
 * (see json_shapes.h). */
#include "json_shapes.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

struct shape {
  unsigned char *keys; /* each key as its length (2 bytes, native order) and its bytes */
  size_t cap;
  int nkeys;     /* 0: a free slot */
  int ref;       /* the constructor in the registry; LUA_NOREF until compiled */
  uint64_t used; /* shapes->decodes when last matched */
  uint32_t gen;  /* counts the constructors compiled into this slot */
};

/* The compile budget: a flat object decoded earns one credit, a compile
 * costs JSON_SHAPES_COMPILE_EVERY, and at most JSON_SHAPES compiles' worth
 * is saved up. */
#define CREDIT_MAX (JSON_SHAPES * JSON_SHAPES_COMPILE_EVERY)

struct json_shapes {
  struct shape slot[JSON_SHAPES];
  int last; /* the slot matched last, tried first */
  uint64_t decodes;
  unsigned credit; /* see CREDIT_MAX */
};

json_shapes *json_shapes_new(void) {
  json_shapes *shapes = calloc(1, sizeof *shapes);
  if (shapes == NULL) return NULL;
  for (int i = 0; i < JSON_SHAPES; i++) shapes->slot[i].ref = LUA_NOREF;
  shapes->credit = CREDIT_MAX;
  return shapes;
}

void json_shapes_free(json_shapes *shapes) {
  if (shapes == NULL) return;
  for (int i = 0; i < JSON_SHAPES; i++) free(shapes->slot[i].keys);
  free(shapes);
}

static bool matches(const struct shape *sh, const struct json_key *keys, int nkeys) {
  if (sh->nkeys != nkeys) return false;
  const unsigned char *k = sh->keys;
  for (int i = 0; i < nkeys; i++) {
    uint16_t len;
    memcpy(&len, k, sizeof len);
    if (len != keys[i].len || memcmp(k + sizeof len, keys[i].s, len) != 0) return false;
    k += sizeof len + len;
  }
  return true;
}

/* The slot holding this shape (the last one matched first), or NULL. */
static struct shape *find(json_shapes *shapes, const struct json_key *keys, int nkeys) {
  if (matches(&shapes->slot[shapes->last], keys, nkeys)) return &shapes->slot[shapes->last];
  for (int i = 0; i < JSON_SHAPES; i++)
    if (matches(&shapes->slot[i], keys, nkeys)) {
      shapes->last = i;
      return &shapes->slot[i];
    }
  return NULL;
}

/* The slot a new shape takes: a free one, else the least recently used of
 * the uncompiled ones, else of all. */
static struct shape *victim(json_shapes *shapes) {
  struct shape *best = NULL;
  for (int i = 0; i < JSON_SHAPES; i++) {
    struct shape *sh = &shapes->slot[i];
    if (sh->nkeys == 0) return sh;
    bool better = best == NULL || (sh->ref == LUA_NOREF && best->ref != LUA_NOREF) ||
                  ((sh->ref == LUA_NOREF) == (best->ref == LUA_NOREF) && sh->used < best->used);
    if (better) best = sh;
  }
  return best;
}

/* Takes sh for this shape, uncompiled. false when out of memory. The slot
 * is emptied first: luaL_unref may raise (memory), and must not leave the
 * old constructor behind new keys. */
static bool remember(lua_State *L, struct shape *sh, const struct json_key *keys, int nkeys,
                     size_t size) {
  int old = sh->ref;
  sh->ref = LUA_NOREF;
  sh->nkeys = 0;
  if (old != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, old);
  if (size > sh->cap) {
    unsigned char *k = realloc(sh->keys, size);
    if (k == NULL) return false;
    sh->keys = k;
    sh->cap = size;
  }
  unsigned char *k = sh->keys;
  for (int i = 0; i < nkeys; i++) {
    uint16_t len = (uint16_t)keys[i].len;
    memcpy(k, &len, sizeof len);
    memcpy(k + sizeof len, keys[i].s, len);
    k += sizeof len + len;
  }
  sh->nkeys = nkeys;
  return true;
}

/* Compiles the constructor for keys into the registry: its ref, or LUA_NOREF
 * when loading it failed (out of memory). Each key byte is written as a
 * decimal escape, so any key (raw control bytes, quotes, non-UTF-8) is a
 * valid Lua string literal. */
static int compile(lua_State *L, const struct json_key *keys, int nkeys) {
  char src[64 + JSON_SHAPE_MAX_KEYS * 16 + JSON_SHAPE_MAX_KEY_BYTES * 4];
  size_t n = 0;
  n += (size_t)snprintf(src + n, sizeof src - n, "return function(");
  for (int i = 0; i < nkeys; i++)
    n += (size_t)snprintf(src + n, sizeof src - n, i ? ",v%d" : "v%d", i + 1);
  n += (size_t)snprintf(src + n, sizeof src - n, ") return {");
  for (int i = 0; i < nkeys; i++) {
    src[n++] = '[';
    src[n++] = '"';
    for (size_t b = 0; b < keys[i].len; b++)
      n += (size_t)snprintf(src + n, sizeof src - n, "\\%u", (unsigned char)keys[i].s[b]);
    n += (size_t)snprintf(src + n, sizeof src - n, "\"]=v%d,", i + 1);
  }
  n += (size_t)snprintf(src + n, sizeof src - n, "} end");
  if (luaL_loadbuffer(L, src, n, "=(json shape)") != 0 || lua_pcall(L, 0, 1, 0) != 0) {
    lua_pop(L, 1);
    return LUA_NOREF;
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

int json_shapes_push(json_shapes *shapes, lua_State *L, const struct json_key *keys, int nkeys) {
  if (nkeys <= 0 || nkeys > JSON_SHAPE_MAX_KEYS) return 0;
  shapes->decodes++;
  if (shapes->credit < CREDIT_MAX) shapes->credit++;
  struct shape *sh = find(shapes, keys, nkeys);
  if (sh == NULL) { /* first sighting: remembered, not compiled */
    size_t bytes = 0;
    for (int i = 0; i < nkeys; i++) bytes += keys[i].len;
    if (bytes > JSON_SHAPE_MAX_KEY_BYTES) return 0;
    sh = victim(shapes);
    if (remember(L, sh, keys, nkeys, bytes + (size_t)nkeys * sizeof(uint16_t)))
      sh->used = shapes->decodes;
    return 0;
  }
  sh->used = shapes->decodes;
  if (sh->ref == LUA_NOREF) {
    if (shapes->credit < JSON_SHAPES_COMPILE_EVERY) return 0;
    shapes->credit -= JSON_SHAPES_COMPILE_EVERY;
    if ((sh->ref = compile(L, keys, nkeys)) == LUA_NOREF) return 0;
    sh->gen++;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, sh->ref);
  return 1;
}

int json_shapes_compiled(const json_shapes *shapes) {
  int n = 0;
  for (int i = 0; i < JSON_SHAPES; i++) n += shapes->slot[i].ref != LUA_NOREF;
  return n;
}

int json_shapes_ready(json_shapes *shapes, const struct json_key *keys, int nkeys, uint32_t *gen) {
  if (nkeys <= 0 || nkeys > JSON_SHAPE_MAX_KEYS) return -1;
  struct shape *sh = find(shapes, keys, nkeys);
  if (sh == NULL || sh->ref == LUA_NOREF) return -1;
  sh->used = ++shapes->decodes;
  *gen = sh->gen;
  return (int)(sh - shapes->slot);
}
