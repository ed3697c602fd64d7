/* schema: the message schemas of handler files (the fields `schema` and
 * `reply_schema`), compiled once at load and checked on each body.
 *
 * A schema is a Lua table in JSON Schema form, a subset: type, properties,
 * required, additionalProperties, enum, const, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, format
 * (date-time, uuid), items, minItems, maxItems, and the annotations title,
 * description, examples and $comment (not checked). Any other keyword is
 * refused when the schema is compiled. Keywords apply to the values of their
 * type only, as in JSON Schema (minimum says nothing about a string).
 *
 * Bodies are checked on their JSON text, as the producer wrote it, not on the
 * Lua value the handler gets: an integer literal above 2^53 (a string of
 * digits for the handler, json_decode.h) is an integer here, and `[]` is an
 * array and `{}` an object, which an empty Lua table cannot say. The text is
 * one the decoder took (or the encoder wrote); anything else is refused as
 * not JSON. Strings are compared, measured and matched as decoded (escapes
 * undone): lengths count UTF-8 code points (bytes that do not continue a
 * sequence); `pattern` is a POSIX extended regular expression
 * (regcomp(REG_EXTENDED | REG_NOSUB), bytes, the C locale), found anywhere in
 * the string unless anchored, and a string holding a NUL byte never matches
 * one (regexec stops at the NUL). Numbers are compared as doubles, integer
 * literals beyond 2^53 as long doubles (exact up to 2^64 where long double
 * has a 64-bit mantissa). A key that appears twice in an object is checked
 * each time (the handler gets the last). */
#ifndef LUASTREAM_SCHEMA_H
#define LUASTREAM_SCHEMA_H

#include <stddef.h>

/* No Lua header: the cli layer checks bodies (`publish --check`) too. */
struct lua_State;
struct json_flat;

/* How deep schemas may nest (properties, items, additionalProperties), and
 * how many names (properties and required ones together) one object may
 * have: the checker keeps a bit per name on the C stack. */
#define SCHEMA_MAX_DEPTH 32
#define SCHEMA_MAX_NAMES 256
/* The keywords a schema may use, for messages. */
#define SCHEMA_KEYWORDS                                                                \
  "type, properties, required, additionalProperties, enum, const, minimum, maximum, "  \
  "exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, format, items, " \
  "minItems, maxItems; annotations: title, description, examples, $comment"

typedef struct schema schema;

/* Where compiling a schema failed: the path of the schema that holds the
 * problem ("$", "$.properties.amount", "$.items"), the keyword or property
 * name nearest to it (for finding its line; "" when none) and why. */
struct schema_error {
  char at[256];
  char key[128];
  char why[512];
};

/* Compiles the Lua table at idx (which is left as it was). Returns the
 * schema, or NULL with *err filled in (also when out of memory). Raises only
 * memory errors of the Lua API.  [-0, +0] */
schema *schema_compile(struct lua_State *L, int idx, struct schema_error *err);
void schema_free(schema *s);

/* Room the checks reuse for decoded strings (grown as needed, kept between
 * checks; zero it to start, schema_scratch_free at the end). */
struct schema_scratch {
  char *buf;
  size_t cap;
};
void schema_scratch_free(struct schema_scratch *sc);

/* Checks the JSON text [text, text + len). Returns 1 when it matches; 0 when
 * it does not, with the first failing path and rule in err
 * ("$.amount_cents: must be >= 0", "$.items[2].sku: is required"; array
 * indexes count from 0, as in JSON Path); -1 when the text is not JSON or
 * memory ran out (err says which). */
int schema_check_json(const schema *s, const char *text, size_t len, struct schema_scratch *sc,
                      char *err, size_t errlen);

/* Whether the flat object json_scan_flat read from text into rec matches:
 * the same verdict as schema_check_json on that text, without the detail
 * (a caller wanting it checks the text). */
int schema_match_flat(const schema *s, const struct json_flat *rec, struct schema_scratch *sc);

#endif
