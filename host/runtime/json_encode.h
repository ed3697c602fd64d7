/* json_encode: the JSON encoder of replies, ctx:publish and log fields
 * (require "luastream.json_encode", wrapped by luastream.json).
 *
 * Values are written as lua-cjson 2.1.0 (cjson.safe, encode_invalid_numbers
 * off) writes them, which handlers were written against, except numbers:
 * cjson prints 14 significant digits, which turns 123456789012345 into
 * 1.2345678901234e+14. Here every number reads back as the same double. */
#ifndef LUASTREAM_JSON_ENCODE_H
#define LUASTREAM_JSON_ENCODE_H

#include <stddef.h>

#include <lua.h>

/* Room json_format_number needs: the integer part of the largest double
 * (309 digits), a sign and the NUL. */
#define JSON_NUMBER_MAX 320

/* Writes x as a JSON number into out (JSON_NUMBER_MAX bytes, NUL-terminated)
 * and returns its length, or 0 for NaN and infinities (not JSON). An integral
 * value is written as the integer it is, without exponent or fraction (2^53
 * as 9007199254740992, 1e20 as 100000000000000000000); -0 as "-0", which
 * reads back as -0. Any other number with the fewest digits (15, 16 or 17)
 * that read back as the same double: 0.1 as 0.1, 0.1 + 0.2 as
 * 0.30000000000000004. The decimal point is '.' in any locale. */
size_t json_format_number(double x, char *out);

/* The module: pushes encode(value) -> JSON text, or nil and a message such as
 * "Cannot serialise function: type not supported" (cjson.safe's); raises only
 * when called without exactly one argument, or when memory runs out. Tables
 * are arrays when every key is a positive integer (missing items up to the
 * largest are null) unless the array is excessively sparse (more than 10
 * items and more than half missing: an error); else objects, whose keys must
 * be strings or numbers. Nesting deeper than 1000 is an error. nil and
 * cjson.null (light userdata NULL) are null. Metatables are not consulted. */
int luaopen_luastream_json_encode(lua_State *L);

#endif
