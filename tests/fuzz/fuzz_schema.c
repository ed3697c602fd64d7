/* fuzz_schema: schema_check_json on any bytes, against schemas that use
 * every keyword. What the decoder takes (json_decode_push) the checker must
 * read (a verdict, never "not JSON"), and where json_scan_flat reads the
 * body the flat record must get the same verdict; anything else may be
 * refused, but never read out of bounds. */
#include <lauxlib.h>
#include <lualib.h>

#include "fuzz.h"
#include "json_decode.h"
#include "lmem.h"
#include "schema.h"

static const char *const SCHEMAS[] = {
    "return {type = 'object', required = {'id', 'amount_cents'}, properties = {"
    " id = {type = {'integer', 'string'}}, account = {type = 'string', minLength = 1,"
    " maxLength = 8, pattern = '^[a-z]+(-[0-9]+)?$'}, amount_cents = {type = 'integer',"
    " minimum = 0, exclusiveMaximum = 1e12}, currency = {enum = {'EUR', 'USD', 1, true, null}},"
    " at = {format = 'date-time'}, ref = {format = 'uuid'}, fixed = {const = 'x'}}}",
    "return {items = {type = {'object', 'array', 'null'}, minItems = 1, maxItems = 3,"
    " properties = {a = {items = {type = 'number', maximum = 10, exclusiveMinimum = -1}}},"
    " additionalProperties = {type = 'string', maxLength = 2}}}",
    "return {type = 'array', items = {additionalProperties = false, properties = {k = {}}}}",
    "return {}",
};
#define NSCHEMAS (sizeof SCHEMAS / sizeof SCHEMAS[0])

static lua_State *L;
static schema *compiled[NSCHEMAS];
static struct schema_scratch sc;

static void close_all(void) {
  for (size_t i = 0; i < NSCHEMAS; i++) schema_free(compiled[i]);
  schema_scratch_free(&sc);
  lmem_close(L);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_no_leak_check_per_input(argc, argv);
  L = lmem_newstate(SIZE_MAX, NULL);
  if (L == NULL) abort();
  atexit(close_all);
  luaL_openlibs(L);
  for (size_t i = 0; i < NSCHEMAS; i++) {
    struct schema_error err;
    if (luaL_loadstring(L, SCHEMAS[i]) != 0) abort();
    lua_pushlightuserdata(L, NULL);
    lua_setglobal(L, "null");
    lua_call(L, 0, 1);
    compiled[i] = schema_compile(L, -1, &err);
    if (compiled[i] == NULL) {
      fprintf(stderr, "schema %zu: %s: %s\n", i, err.at, err.why);
      abort();
    }
    lua_pop(L, 1);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_copy(data, size);
  char err[256];
  lua_settop(L, 0);
  int decoded = json_decode_push(L, NULL, text, size, err, sizeof err) == 0;
  lua_settop(L, 0);
  struct json_flat rec;
  int flat = json_scan_flat(text, size, &rec);
  for (size_t i = 0; i < NSCHEMAS; i++) {
    char why[300];
    int rc = schema_check_json(compiled[i], text, size, &sc, why, sizeof why);
    FUZZ_CHECK(rc >= -1 && rc <= 1, "rc %d", rc);
    if (decoded) FUZZ_CHECK(rc != -1, "schema %zu: the decoder took it, the checker: %s", i, why);
    if (rc == 0) FUZZ_CHECK(why[0] == '$', "schema %zu: a mismatch without its path: %s", i, why);
    if (flat && decoded) {
      int match = schema_match_flat(compiled[i], &rec, &sc);
      FUZZ_CHECK(match == (rc == 1), "schema %zu: flat %d, text %d (%s)", i, match, rc, why);
    }
  }
  free(text);
  return 0;
}
