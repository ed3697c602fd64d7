/* Tests for schema.c: each keyword matching and failing, the paths of
 * nested objects and arrays, lengths in code points, patterns, formats,
 * numbers beyond 2^53, and the refusals of what is not supported. Every body
 * is checked from a heap copy of exactly its length (AddressSanitizer sees a
 * read past its end), and every body json_scan_flat reads is also checked
 * as its flat record, which must give the same verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "json_decode.h"
#include "schema.h"
#include "task.h"

static lua_State *L;
static struct schema_scratch sc;

/* The schema of the Lua table expression src, or NULL with err filled. */
static schema *compile(const char *src, struct schema_error *err) {
  if (L == NULL) {
    L = luaL_newstate();
    luaL_openlibs(L);
  }
  char chunk[4096];
  snprintf(chunk, sizeof chunk, "local null = ... return %s", src);
  if (luaL_loadstring(L, chunk) != 0) TEST_FAIL_("bad Lua in test: %s", lua_tostring(L, -1));
  lua_pushlightuserdata(L, NULL);
  lua_call(L, 1, 1);
  int top = lua_gettop(L);
  schema *s = schema_compile(L, -1, err);
  ASSERT_INT_EQ(lua_gettop(L), top);
  lua_pop(L, 1);
  return s;
}

/* body against schema src: NULL when it must match, else the error. */
static void expect(const char *src, const char *body, const char *want) {
  struct schema_error e;
  schema *s = compile(src, &e);
  if (s == NULL) TEST_FAIL_("schema %s does not compile: %s: %s", src, e.at, e.why);
  size_t n = strlen(body);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, body, n);
  char err[300];
  int rc = schema_check_json(s, copy, n, &sc, err, sizeof err);
  if (want == NULL && rc != 1) TEST_FAIL_("%s against %s: %d %s", body, src, rc, err);
  if (want && rc != 0) TEST_FAIL_("%s against %s: %d, wanted a mismatch (%s)", body, src, rc, want);
  if (want) ASSERT_STR_EQ(err, want);
  struct json_flat rec;
  if (json_scan_flat(copy, n, &rec)) {
    int flat = schema_match_flat(s, &rec, &sc);
    if (flat != (rc == 1))
      TEST_FAIL_("%s against %s: flat record says %d, text %d", body, src, flat, rc);
  }
  free(copy);
  schema_free(s);
}

/* src must not compile: at, key and a piece of why. */
static void refused(const char *src, const char *at, const char *key, const char *why) {
  struct schema_error e;
  schema *s = compile(src, &e);
  if (s) TEST_FAIL_("%s compiled", src);
  ASSERT_STR_EQ(e.at, at);
  ASSERT_STR_EQ(e.key, key);
  ASSERT_CONTAINS(e.why, why);
}

static void done(void) {
  schema_scratch_free(&sc);
  if (L) lua_close(L);
  L = NULL;
}

TEST_IMPL(schema_type) {
  expect("{type = 'object'}", "{}", NULL);
  expect("{type = 'object'}", "[]", "$: must be an object, got array");
  expect("{type = 'array'}", "[]", NULL);
  expect("{type = 'array'}", "{}", "$: must be an array, got object");
  expect("{type = 'string'}", "\"x\"", NULL);
  expect("{type = 'string'}", "1", "$: must be a string, got number");
  expect("{type = 'number'}", "1.5", NULL);
  expect("{type = 'integer'}", "2", NULL);
  expect("{type = 'integer'}", "2.0", NULL); /* no fractional part */
  expect("{type = 'integer'}", "1e3", NULL);
  expect("{type = 'integer'}", "2.5", "$: must be an integer, got number");
  expect("{type = 'integer'}", "12345678901234567890123", NULL);
  expect("{type = 'string'}", "12345678901234567890", "$: must be a string, got number");
  expect("{type = 'boolean'}", "false", NULL);
  expect("{type = 'boolean'}", "null", "$: must be a boolean, got null");
  expect("{type = 'null'}", "null", NULL);
  expect("{type = {'string', 'null'}}", "null", NULL);
  expect("{type = {'string', 'integer', 'null'}}", "true",
         "$: must be a string, an integer or null, got boolean");
  expect("{}", "[1, {\"a\": [true]}]", NULL);
  done();
}

TEST_IMPL(schema_objects) {
  const char *s =
      "{type = 'object', required = {'id', 'amount_cents'}, properties = {"
      " id = {type = 'integer'}, amount_cents = {type = 'integer', minimum = 0},"
      " account = {type = 'string'}}}";
  expect(s, "{\"id\":1,\"account\":\"acme\",\"amount_cents\":500}", NULL);
  expect(s, "{\"id\":1,\"account\":\"acme\",\"amount_cents\":-1}", "$.amount_cents: must be >= 0");
  expect(s, "{\"id\":1,\"account\":\"acme\"}", "$.amount_cents: is required");
  expect(s, "{\"id\":1,\"account\":7,\"amount_cents\":1}",
         "$.account: must be a string, got number");
  expect(s, "{\"id\":1,\"amount_cents\":1,\"extra\":{\"deep\":[1,2,{\"x\":\"}\"}]}}", NULL);
  /* escaped keys are matched decoded, and shown as written */
  expect(s, "{\"\\u0069d\":1,\"amount_cents\":1}", NULL);
  expect(s, "{\"id\":1,\"amount_\\u0063ents\":\"x\"}",
         "$[\"amount_\\u0063ents\"]: must be an integer, got string");
  /* every occurrence of a key is checked */
  expect(s, "{\"id\":\"x\",\"id\":1,\"amount_cents\":1}", "$.id: must be an integer, got string");
  const char *closed = "{properties = {a = {}}, additionalProperties = false}";
  expect(closed, "{\"a\":1}", NULL);
  expect(closed, "{\"a\":1,\"b c\":2}",
         "$[\"b c\"]: is not allowed (additionalProperties is false)");
  const char *typed = "{additionalProperties = {type = 'string'}}";
  expect(typed, "{\"a\":\"x\",\"b\":\"y\"}", NULL);
  expect(typed, "{\"a\":\"x\",\"b\":1}", "$.b: must be a string, got number");
  /* required without properties; keywords of objects say nothing of arrays */
  expect("{required = {'x'}}", "{\"y\":1}", "$.x: is required");
  expect("{required = {'x'}}", "[1]", NULL);
  done();
}

TEST_IMPL(schema_arrays_and_paths) {
  const char *s =
      "{properties = {items = {type = 'array', minItems = 1, maxItems = 3, items = {"
      " type = 'object', required = {'sku'}, properties = {sku = {type = 'string'},"
      " qty = {type = 'integer', exclusiveMinimum = 0}}}}}}";
  expect(s, "{\"items\":[{\"sku\":\"a\"},{\"sku\":\"b\",\"qty\":2}]}", NULL);
  expect(s, "{\"items\":[{\"sku\":\"a\"},{\"sku\":\"b\"},{\"qty\":1}]}",
         "$.items[2].sku: is required");
  expect(s, "{\"items\":[{\"sku\":\"a\",\"qty\":0}]}", "$.items[0].qty: must be > 0");
  expect(s, "{\"items\":[]}", "$.items: must hold at least 1 items, got 0");
  expect(s, "{\"items\":[{\"sku\":\"a\"},{\"sku\":\"a\"},{\"sku\":\"a\"},{\"sku\":\"a\"}]}",
         "$.items: must hold at most 3 items, got 4");
  expect("{items = {items = {type = 'null'}}}", "[[null],[null, 1]]",
         "$[1][1]: must be null, got number");
  done();
}

TEST_IMPL(schema_numbers) {
  expect("{minimum = 1.5, maximum = 10}", "1.5", NULL);
  expect("{minimum = 1.5, maximum = 10}", "10", NULL);
  expect("{minimum = 1.5, maximum = 10}", "1.25", "$: must be >= 1.5");
  expect("{minimum = 1.5, maximum = 10}", "10.5", "$: must be <= 10");
  expect("{exclusiveMaximum = 10}", "10", "$: must be < 10");
  expect("{exclusiveMaximum = 10}", "9.999", NULL);
  expect("{maximum = 0.1}", "0.30000000000000004", "$: must be <= 0.1");
  /* beyond 2^53, compared exactly (2^53 + 1 > 2^53) */
  expect("{maximum = 9007199254740992}", "9007199254740992", NULL);
  expect("{maximum = 9007199254740992}", "9007199254740993", "$: must be <= 9007199254740992");
  expect("{minimum = 0}", "\"-5\"", NULL); /* a string: minimum says nothing */
  done();
}

TEST_IMPL(schema_strings) {
  expect("{minLength = 2, maxLength = 3}", "\"ab\"", NULL);
  expect("{minLength = 2, maxLength = 3}", "\"a\"", "$: must be at least 2 characters long, got 1");
  expect("{minLength = 2, maxLength = 3}", "\"abcd\"",
         "$: must be at most 3 characters long, got 4");
  /* code points, not bytes: "né€😀" is 4 characters in 10 bytes */
  expect("{maxLength = 4}", "\"n\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", NULL);
  expect("{maxLength = 3}", "\"n\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
         "$: must be at most 3 characters long, got 4");
  /* escapes count as what they decode to: \u00e9 is one, a surrogate pair one */
  expect("{maxLength = 2, minLength = 2}", "\"\\u00e9\\ud83d\\ude00\"", NULL);
  expect("{enum = {'a', 'b c'}}", "\"b c\"", NULL);
  expect("{enum = {'a', 'b c'}}", "\"b\\u0020c\"", NULL);
  expect("{enum = {'a', 'b c'}}", "\"c\"", "$: must be one of \"a\", \"b c\"");
  expect("{enum = {1, true, null}}", "1.0", NULL);
  expect("{enum = {1, true, null}}", "null", NULL);
  expect("{enum = {1, true, null}}", "false", "$: must be one of 1, true, null");
  expect("{enum = {'x'}}", "{}", "$: must be one of \"x\"");
  expect("{const = 'EUR'}", "\"EUR\"", NULL);
  expect("{const = 'EUR'}", "\"USD\"", "$: must be \"EUR\"");
  done();
}

TEST_IMPL(schema_patterns) {
  const char *s = "{pattern = '^[a-z]+-[0-9]{3}$'}";
  expect(s, "\"acct-001\"", NULL);
  expect(s, "\"acct-01\"", "$: must match the pattern ^[a-z]+-[0-9]{3}$");
  /* unanchored: found anywhere, as in JSON Schema */
  expect("{pattern = '[0-9]'}", "\"abc7def\"", NULL);
  expect("{pattern = '[[:alpha:]]+'}", "\"42\"", "$: must match the pattern [[:alpha:]]+");
  /* escapes are undone before matching */
  expect("{pattern = '^a\"b$'}", "\"a\\\"b\"", NULL);
  /* a NUL never matches, even a pattern that takes anything */
  expect("{pattern = '.*'}", "\"a\\u0000b\"", "$: must match the pattern .*");
  expect("{pattern = '.*'}", "\"\"", NULL);
  expect("{pattern = 'x'}", "5", NULL); /* a number: pattern says nothing */
  done();
}

TEST_IMPL(schema_formats) {
  const char *dt = "{format = 'date-time'}";
  expect(dt, "\"2026-12-08T01:45:00Z\"", NULL);
  expect(dt, "\"2026-12-08t01:45:00.123456z\"", NULL);
  expect(dt, "\"2024-02-29T23:59:60+05:30\"", NULL);
  expect(dt, "\"2025-02-29T00:00:00Z\"",
         "$: must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
  expect(dt, "\"2026-12-08 01:45:00Z\"",
         "$: must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
  expect(dt, "\"2026-12-08T01:45:00\"",
         "$: must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
  expect(dt, "\"2026-12-08T24:00:00Z\"",
         "$: must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
  expect(dt, "\"2026-12-08T01:45:00.Z\"",
         "$: must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
  const char *uuid = "{format = 'uuid'}";
  expect(uuid, "\"123e4567-e89b-12d3-a456-426614174000\"", NULL);
  expect(uuid, "\"123E4567-E89B-12D3-A456-426614174000\"", NULL);
  expect(uuid, "\"123e4567e89b12d3a456426614174000\"",
         "$: must be a UUID (such as 123e4567-e89b-12d3-a456-426614174000)");
  expect(uuid, "\"123e4567-e89b-12d3-a456-42661417400g\"",
         "$: must be a UUID (such as 123e4567-e89b-12d3-a456-426614174000)");
  done();
}

TEST_IMPL(schema_annotations) {
  expect(
      "{title = 'Payment', description = 'one payment', ['$comment'] = 'x', examples = {{id = 1}},"
      " properties = {id = {description = 'the id', type = 'integer'}}}",
      "{\"id\":1}", NULL);
  done();
}

TEST_IMPL(schema_refusals) {
  refused("{properties = {amount = {oneOf = {}}}}", "$.properties.amount", "oneOf",
          "keyword 'oneOf' is not supported (supported: type, properties");
  refused("{items = {['$ref'] = '#/x'}}", "$.items", "$ref", "keyword '$ref' is not supported");
  refused("{minimum = '0'}", "$", "minimum", "minimum must be a number, got string");
  refused("{maximum = 0/0}", "$", "maximum", "maximum must be a number");
  refused("{exclusiveMinimum = true}", "$", "exclusiveMinimum", "boolean form");
  refused("{minLength = 1.5}", "$", "minLength", "minLength must be a whole number from 0");
  refused("{maxItems = -1}", "$", "maxItems", "maxItems must be a whole number from 0");
  refused("{pattern = '('}", "$", "pattern",
          "pattern /(/ is not a POSIX extended regular expression");
  refused("{pattern = '^\\\\d+$'}", "$", "pattern", "\\d (use [0-9] or [[:digit:]])");
  refused("{pattern = '(?=a)'}", "$", "pattern", "(?...) groups");
  refused("{pattern = 'a\\0b'}", "$", "pattern", "NUL");
  refused("{format = 'email'}", "$", "format",
          "format 'email' is not supported (supported: date-time, uuid)");
  refused("{type = 'float'}", "$", "type", "type 'float' is not a JSON Schema type");
  refused("{type = {}}", "$", "type", "type must be a type name or a list of them");
  refused("{enum = {}}", "$", "enum", "enum must be a non-empty list");
  refused("{enum = {{}}}", "$", "enum",
          "enum values must be strings, numbers, booleans or json.null");
  refused("{required = {1}}", "$", "required", "required must list property names");
  refused("{required = 'id'}", "$", "required", "required must be a list of property names");
  refused("{properties = {[1] = {}}}", "$", "properties", "properties must be keyed by names");
  refused("{properties = {a = 'string'}}", "$.properties.a", "a",
          "a schema must be a table of keywords, got string");
  refused("{properties = {['a b'] = {type = 1}}}", "$.properties[\"a b\"]", "type", "type must be");
  refused("{items = {{type = 'string'}}}", "$.items", "", "not a list");
  refused("{additionalProperties = 'no'}", "$", "additionalProperties",
          "additionalProperties must be true, false or a schema");
  refused("{additionalProperties = {minimum = 'x'}}", "$.additionalProperties", "minimum",
          "minimum must be a number");
  refused("{title = 5}", "$", "title", "title must be a string");
  refused("'object'", "$", "", "a schema must be a table of keywords, got string");
  /* nesting */
  char deep[2048] = "";
  for (int i = 0; i < SCHEMA_MAX_DEPTH + 1; i++) strcat(deep, "{items = ");
  strcat(deep, "{}");
  for (int i = 0; i < SCHEMA_MAX_DEPTH + 1; i++) strcat(deep, "}");
  struct schema_error e;
  ASSERT_NULL(compile(deep, &e));
  ASSERT_CONTAINS(e.why, "schemas nest deeper than 32 levels");
  done();
}

TEST_IMPL(schema_not_json) {
  struct schema_error e;
  schema *s = compile("{properties = {a = {type = 'string'}}}", &e);
  ASSERT_NOT_NULL(s);
  char err[100];
  ASSERT_INT_EQ(schema_check_json(s, "{\"a\":", 5, &sc, err, sizeof err), -1);
  ASSERT_STR_EQ(err, "not JSON");
  ASSERT_INT_EQ(schema_check_json(s, "{\"a\":\"x\"} x", 11, &sc, err, sizeof err), -1);
  ASSERT_INT_EQ(schema_check_json(s, "", 0, &sc, err, sizeof err), -1);
  ASSERT_INT_EQ(schema_check_json(s, "{\"a\":\"x", 7, &sc, err, sizeof err), -1);
  schema_free(s);
  done();
}
