/* json_decode: decodes an entry body (JSON) straight into a Lua value.
 *
 * The same values and the same accept/reject decisions as lua-cjson 2.1.0
 * (cjson.safe with decode_invalid_numbers(false), what handlers used before)
 * and the same error messages, without cjson's temporary malloc'd buffer: the
 * input is read in place and values are pushed as they are parsed. Tables
 * start with room for a few keys, so pairs() may visit keys in another order
 * than in cjson's (Lua promises no order). One deliberate difference: a NUL
 * byte after the value is trailing garbage here, where cjson stops reading at
 * it and accepts. */
#ifndef LUASTREAM_JSON_DECODE_H
#define LUASTREAM_JSON_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "json_shapes.h"

/* Containers nested deeper than this are refused (cjson's decode_max_depth). */
#define JSON_DECODE_MAX_DEPTH 1000
/* json_decode_push's result for valid JSON with a number out of range. */
#define JSON_DECODE_RANGE (-2)

/* Decodes text[0..len) (need not be NUL-terminated) and pushes the value:
 * objects become tables, arrays sequences from 1 (no metatable), null the
 * light userdata NULL (cjson.null), numbers doubles, except an integer
 * literal (no fraction, no exponent) above 2^53 in magnitude, which a double
 * would round: it becomes a string of its exact digits ("12345678901234567").
 * Returns 0 with exactly one value pushed, or with the stack as it was and a
 * message in err: -1 for invalid JSON, such as "Expected value but found
 * invalid token at character 1" (positions count bytes from 1, as cjson's
 * do), JSON_DECODE_RANGE for a number beyond the largest double ("Number out
 * of range at character 7: 1e400"), which cjson would make inf.
 *
 * With shapes (NULL for none), a top-level object json_scan_flat reads is
 * built by the constructor compiled for its keys (json_shapes.h): the same
 * table, made for about half the instructions.
 *
 * Raises no Lua error of its own, but the Lua API it calls does when memory
 * runs out: call it where errors are caught (from a lua_CFunction, or under
 * lua_pcall). Allocates nothing but the Lua values it pushes (and, with
 * shapes, a copy of a new shape's keys and its constructor). */
int json_decode_push(lua_State *L, json_shapes *shapes, const char *text, size_t len, char *err,
                     size_t errlen);

/* The same as a Lua function: decode(text) -> the value, or nil and the
 * message (res:json() of ls.http, and the test harness's decoder). */
int json_decode_lua(lua_State *L);

/* A flat object read without Lua: its keys and values point into the text.
 * luastream.handler reads it through the FFI (see luastream_flat in
 * corelib.c); the Lua declaration there must match this one. */
enum { JSON_FLAT_NUMBER = 1, JSON_FLAT_STRING, JSON_FLAT_TRUE, JSON_FLAT_FALSE, JSON_FLAT_NULL };
struct json_flat {
  int32_t slot, n; /* set by luastream_flat / json_scan_flat */
  uint32_t gen, pad;
  uint8_t type[JSON_SHAPE_MAX_KEYS];
  double num[JSON_SHAPE_MAX_KEYS];
  const char *str[JSON_SHAPE_MAX_KEYS]; /* strings: their bytes in the text */
  size_t len[JSON_SHAPE_MAX_KEYS];
  struct json_key key[JSON_SHAPE_MAX_KEYS];
};

/* The Lua declaration (luastream/message.lua) assumes this layout. */
_Static_assert(JSON_SHAPE_MAX_KEYS == 32, "struct luastream_json_flat has arrays of 32");
_Static_assert(
    offsetof(struct json_flat, type) == 16 && offsetof(struct json_flat, num) == 48 &&
        offsetof(struct json_flat, str) == 304 && offsetof(struct json_flat, len) == 560 &&
        offsetof(struct json_flat, key) == 816 && sizeof(struct json_flat) == 1328,
    "struct json_flat no longer matches struct luastream_json_flat in luastream/message.lua");

/* Reads text as json_decode_push would when it is an object of at most
 * JSON_SHAPE_MAX_KEYS plain keys whose values are strings without escapes,
 * numbers shorter than 64 characters (and integer literals of any length
 * above 2^53, typed JSON_FLAT_STRING with their digits, as json_decode_push
 * pushes them), true, false or null: returns 1 with
 * rec's keys and values (in document order), else 0 and rec undefined. It
 * accepts nothing json_decode_push refuses, and the values are the ones it
 * would push. Touches no Lua state. */
int json_scan_flat(const char *text, size_t len, struct json_flat *rec);

#endif
