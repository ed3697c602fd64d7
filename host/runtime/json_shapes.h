/* json_shapes: Lua constructors for the object shapes a handler keeps seeing.
 *
 * The bodies of one stream nearly always share their top-level keys, in the
 * same order. For such a shape a small Lua function is compiled,
 *   function(v1, v2, v3) return {["id"] = v1, ["account"] = v2, ...} end
 * which LuaJIT runs by copying a template table that already holds the keys
 * (TDUP) and storing the values into their slots: no key is interned,
 * hashed or inserted per message, which is most of what building the same
 * table through the C API costs. json_decode uses it for flat objects.
 *
 * A shape is compiled the second time it is seen, so one-off shapes (maps
 * keyed by ids) cost a copy of their keys and no compile; a state keeps
 * JSON_SHAPES of them, the least recently used replaced, uncompiled ones
 * first. Compiles are budgeted: one per JSON_SHAPES_COMPILE_EVERY flat
 * objects decoded, with at most JSON_SHAPES of them saved up for a burst, so
 * shapes that keep changing cost a compile per 64 messages at worst. The
 * constructors live in the state's registry: a json_shapes belongs to one
 * Lua state (any of its threads) and is freed after that state is closed. */
#ifndef LUASTREAM_JSON_SHAPES_H
#define LUASTREAM_JSON_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#define JSON_SHAPES 8
/* Objects with more keys, or longer keys together, are built the plain way. */
#define JSON_SHAPE_MAX_KEYS 32
#define JSON_SHAPE_MAX_KEY_BYTES 1024
#define JSON_SHAPES_COMPILE_EVERY 64

/* A key of the object being decoded: its bytes, in place in the body. */
struct json_key {
  const char *s;
  size_t len;
};

typedef struct json_shapes json_shapes;

/* NULL when out of memory. */
json_shapes *json_shapes_new(void);
void json_shapes_free(json_shapes *shapes);

/* Pushes the constructor for objects with exactly these keys in this order
 * and returns 1; or returns 0 with nothing pushed (first sighting, a shape
 * too large, the compile budget spent, out of memory): build the table the
 * plain way. Raises only on memory errors of the Lua API. [-0, +0|1] */
int json_shapes_push(json_shapes *shapes, lua_State *L, const struct json_key *keys, int nkeys);

/* The slot of a shape that has a constructor (json_shapes_push compiled one),
 * with that constructor's generation in *gen (a slot compiles anew when it
 * takes another shape); -1 for any other shape. Learns no new shape, but
 * counts as a use (least recently used shapes go first): bodies read through
 * luastream_flat (corelib.c) build their tables in Lua, with a constructor of
 * their own per slot and generation. Touches no Lua state. */
int json_shapes_ready(json_shapes *shapes, const struct json_key *keys, int nkeys, uint32_t *gen);

/* How many shapes have a constructor now. */
int json_shapes_compiled(const json_shapes *shapes);

#endif
