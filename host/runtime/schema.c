/* schema: message schemas, compiled from Lua tables and checked on JSON text
 * (see schema.h).
 *
 * A compiled schema is a tree of nodes, one per schema table. The checker
 * walks the JSON text with the tree beside it: a value whose node has
 * nothing to say about it (no node, or one without rules for its kind) is
 * skipped without being read, so a payment's schema costs a pass over its
 * few members and nothing for what the schema leaves open. The recursion
 * follows the schema, not the text: it is at most SCHEMA_MAX_DEPTH deep,
 * whatever the body's nesting (skipping is iterative). */
#include "schema.h"

#include <lauxlib.h>
#include <locale.h>
#include <lua.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_decode.h"

/* ---- the tree ---- */

enum {
  TY_OBJECT = 1,
  TY_ARRAY = 2,
  TY_STRING = 4,
  TY_NUMBER = 8,
  TY_INTEGER = 16, /* a number with no fractional part */
  TY_BOOLEAN = 32,
  TY_NULL = 64,
};
static const struct {
  const char *name, *article;
  unsigned bit;
} type_names[] = {
    {"object", "an ", TY_OBJECT}, {"array", "an ", TY_ARRAY},     {"string", "a ", TY_STRING},
    {"number", "a ", TY_NUMBER},  {"integer", "an ", TY_INTEGER}, {"boolean", "a ", TY_BOOLEAN},
    {"null", "", TY_NULL},
};
#define NTYPES (sizeof type_names / sizeof type_names[0])

enum format { FMT_NONE, FMT_DATE_TIME, FMT_UUID };
enum additional { ADD_ANY, ADD_NONE, ADD_SCHEMA };
enum {
  HAS_MIN = 1,
  HAS_MAX = 2,
  HAS_XMIN = 4,
  HAS_XMAX = 8,
  HAS_MIN_LEN = 16,
  HAS_MAX_LEN = 32,
  HAS_MIN_ITEMS = 64,
  HAS_MAX_ITEMS = 128,
};

/* An enum or const value: scalars only. */
struct sval {
  unsigned type; /* TY_STRING, TY_NUMBER, TY_BOOLEAN or TY_NULL */
  double num;    /* TY_NUMBER; TY_BOOLEAN: 1 or 0 */
  char *s;       /* TY_STRING */
  size_t len;
};

/* A property named by properties or required. */
struct name {
  char *s;
  size_t len;
  struct schema *schema; /* NULL: any value */
  bool required;
};

struct schema {
  unsigned types; /* 0: any */
  unsigned has;   /* HAS_* */
  double min, max, xmin, xmax;
  size_t min_len, max_len, min_items, max_items;
  bool has_pattern;
  regex_t re;
  char *pattern;
  enum format format;
  struct schema *items; /* NULL: any */
  struct name *names;
  int nnames;
  enum additional additional;
  struct schema *additional_schema;
  struct sval *enumv;
  int nenum;
  bool is_const;
  /* What the checker must read: members (names or additionalProperties
   * given), items (items, minItems or maxItems), strings' content. */
  bool object_rules, array_rules, string_rules;
};

void schema_free(schema *s) {
  if (s == NULL) return;
  if (s->has_pattern) regfree(&s->re);
  free(s->pattern);
  schema_free(s->items);
  for (int i = 0; i < s->nnames; i++) {
    free(s->names[i].s);
    schema_free(s->names[i].schema);
  }
  free(s->names);
  schema_free(s->additional_schema);
  for (int i = 0; i < s->nenum; i++) free(s->enumv[i].s);
  free(s->enumv);
  free(s);
}

void schema_scratch_free(struct schema_scratch *sc) {
  free(sc->buf);
  sc->buf = NULL;
  sc->cap = 0;
}

/* ---- compiling ---- */

static const char *const annotations[] = {"title", "description", "examples", "$comment"};
static const char *const keywords[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "minItems",
    "maxItems",
};

static int bad(struct schema_error *err, const char *at, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->why, sizeof err->why, fmt, ap);
  va_end(ap);
  snprintf(err->at, sizeof err->at, "%s", at);
  snprintf(err->key, sizeof err->key, "%s", key ? key : "");
  return -1;
}

static bool identifier(const char *s, size_t n) {
  if (n == 0 || (!((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z') && s[0] != '_')) return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

/* path + ".name" or path + "[\"name\"]" (the name escaped as in JSON). */
static void path_join(char *out, size_t len, const char *path, const char *name, size_t n) {
  size_t at = (size_t)snprintf(out, len, "%s", path);
  if (at >= len) return;
  if (identifier(name, n)) {
    snprintf(out + at, len - at, ".%.*s", (int)n, name);
    return;
  }
  at += (size_t)snprintf(out + at, len - at, "[\"");
  for (size_t i = 0; i < n && at + 8 < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c == '"' || c == '\\')
      at += (size_t)snprintf(out + at, len - at, "\\%c", c);
    else if (c < 0x20)
      at += (size_t)snprintf(out + at, len - at, "\\u%04x", c);
    else
      out[at++] = (char)c;
  }
  if (at < len) snprintf(out + at, len - at, "\"]");
}

static const char *lua_kind(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  if (t == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == NULL) return "json.null";
  return lua_typename(L, t);
}

/* The number at idx as a count (0 .. 2^53), or -1. */
static double count_at(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TNUMBER) return -1;
  double v = lua_tonumber(L, idx);
  return v >= 0 && v <= 9007199254740992.0 && v == floor(v) ? v : -1;
}

/* The list at idx: a table with keys 1..n only. Returns n, or -1. */
static int list_len(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return -1;
  int n = (int)lua_objlen(L, idx), keys = 0;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return -1;
    }
    keys++;
  }
  return keys == n ? n : -1;
}

static bool is_null(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == NULL;
}

/* An enum or const value at idx into v. */
static int scalar_at(lua_State *L, int idx, struct sval *v) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      v->type = TY_STRING;
      v->s = malloc(n + 1);
      if (v->s == NULL) return -2;
      memcpy(v->s, s, n + 1);
      v->len = n;
      return 0;
    }
    case LUA_TNUMBER:
      v->type = TY_NUMBER;
      v->num = lua_tonumber(L, idx);
      return isfinite(v->num) ? 0 : -1;
    case LUA_TBOOLEAN:
      v->type = TY_BOOLEAN;
      v->num = lua_toboolean(L, idx);
      return 0;
    default:
      if (!is_null(L, idx)) return -1;
      v->type = TY_NULL;
      return 0;
  }
}

static int compile_node(lua_State *L, int idx, const char *at, int depth, struct schema *s,
                        struct schema_error *err);

/* The schema at idx (a table of keywords) into *out. */
static int compile_sub(lua_State *L, int idx, const char *at, int depth, struct schema **out,
                       struct schema_error *err) {
  if (depth > SCHEMA_MAX_DEPTH)
    return bad(err, at, NULL, "schemas nest deeper than %d levels", SCHEMA_MAX_DEPTH);
  if (lua_type(L, idx) != LUA_TTABLE)
    return bad(err, at, NULL, "a schema must be a table of keywords, got %s", lua_kind(L, idx));
  struct schema *s = calloc(1, sizeof *s);
  if (s == NULL) return bad(err, at, NULL, "out of memory");
  if (compile_node(L, idx, at, depth, s, err) != 0) {
    schema_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

static int compile_type(lua_State *L, int v, const char *at, struct schema *s,
                        struct schema_error *err) {
  int n = lua_type(L, v) == LUA_TSTRING ? 1 : list_len(L, v);
  if (n < 1)
    return bad(err, at, "type",
               "type must be a type name or a list of them (object, array, string, number, "
               "integer, boolean, null), got %s",
               lua_kind(L, v));
  for (int i = 1; i <= n; i++) {
    if (lua_type(L, v) == LUA_TSTRING)
      lua_pushvalue(L, v);
    else
      lua_rawgeti(L, v, i);
    const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    size_t t = 0;
    while (name && t < NTYPES && strcmp(name, type_names[t].name) != 0) t++;
    if (name == NULL || t == NTYPES) {
      lua_pop(L, 1);
      return bad(err, at, "type",
                 "type '%s' is not a JSON Schema type (object, array, string, number, integer, "
                 "boolean, null)",
                 name ? name : lua_kind(L, -1));
    }
    s->types |= type_names[t].bit;
    lua_pop(L, 1);
  }
  return 0;
}

static int find_name(const struct schema *s, const char *k, size_t n) {
  for (int i = 0; i < s->nnames; i++) {
    const struct name *nm = &s->names[i];
    if (nm->len == n && (n == 0 || (nm->s[0] == k[0] && memcmp(nm->s, k, n) == 0))) return i;
  }
  return -1;
}

static int add_name(struct schema *s, const char *k, size_t n, const char *at,
                    struct schema_error *err) {
  if (s->nnames == SCHEMA_MAX_NAMES)
    return bad(err, at, "properties", "an object schema may name at most %d properties",
               SCHEMA_MAX_NAMES);
  if ((s->nnames & (s->nnames - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to double */
    struct name *more = realloc(s->names, sizeof *more * (size_t)(s->nnames ? 2 * s->nnames : 4));
    if (more == NULL) return bad(err, at, NULL, "out of memory");
    s->names = more;
  }
  struct name *nm = &s->names[s->nnames];
  *nm = (struct name){.s = malloc(n + 1), .len = n};
  if (nm->s == NULL) return bad(err, at, NULL, "out of memory");
  memcpy(nm->s, k, n);
  nm->s[n] = '\0';
  return s->nnames++;
}

static int compile_properties(lua_State *L, int v, const char *at, int depth, struct schema *s,
                              struct schema_error *err) {
  if (lua_type(L, v) != LUA_TTABLE)
    return bad(err, at, "properties", "properties must be a table of schemas by name, got %s",
               lua_kind(L, v));
  lua_pushnil(L);
  while (lua_next(L, v) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 2);
      return bad(err, at, "properties", "properties must be keyed by names (strings)");
    }
    size_t n;
    const char *k = lua_tolstring(L, -2, &n);
    char sub[256], props[256];
    snprintf(props, sizeof props, "%s.properties", at);
    path_join(sub, sizeof sub, props, k, n);
    int i = add_name(s, k, n, at, err);
    if (i < 0 || compile_sub(L, lua_gettop(L), sub, depth + 1, &s->names[i].schema, err) != 0) {
      if (i >= 0 && err->key[0] == '\0') snprintf(err->key, sizeof err->key, "%s", k);
      lua_pop(L, 2);
      return -1;
    }
    lua_pop(L, 1);
  }
  return 0;
}

static int compile_required(lua_State *L, int v, const char *at, struct schema *s,
                            struct schema_error *err) {
  int n = list_len(L, v);
  if (n < 0)
    return bad(err, at, "required", "required must be a list of property names, got %s",
               lua_kind(L, v));
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, v, i);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      return bad(err, at, "required", "required must list property names (strings)");
    }
    size_t len;
    const char *k = lua_tolstring(L, -1, &len);
    int at_name = find_name(s, k, len);
    if (at_name < 0) at_name = add_name(s, k, len, at, err);
    lua_pop(L, 1);
    if (at_name < 0) return -1;
    s->names[at_name].required = true;
  }
  return 0;
}

static int compile_enum(lua_State *L, int v, const char *at, const char *key, struct schema *s,
                        struct schema_error *err) {
  bool is_const = strcmp(key, "const") == 0;
  int n = is_const ? 1 : list_len(L, v);
  if (n < 1)
    return bad(err, at, key, "enum must be a non-empty list of values, got %s", lua_kind(L, v));
  s->enumv = calloc((size_t)n, sizeof *s->enumv);
  if (s->enumv == NULL) return bad(err, at, NULL, "out of memory");
  s->is_const = is_const;
  for (int i = 1; i <= n; i++) {
    if (is_const)
      lua_pushvalue(L, v);
    else
      lua_rawgeti(L, v, i);
    int rc = scalar_at(L, -1, &s->enumv[s->nenum]);
    const char *kind = lua_kind(L, -1);
    lua_pop(L, 1);
    if (rc == -2) return bad(err, at, NULL, "out of memory");
    s->nenum++;
    if (rc != 0)
      return bad(err, at, key,
                 "%s values must be strings, numbers, booleans or json.null, got %s (objects, "
                 "arrays, NaN and infinities are not supported)",
                 key, kind);
  }
  return 0;
}

/* \d and \D mean a digit in ECMA-262 and a plain letter in POSIX: refused
 * rather than matched differently. */
static const char *ecma_only(const char *p, size_t n) {
  for (size_t i = 0; i + 1 < n; i++) {
    if (p[i] != '\\') continue;
    if (p[i + 1] == 'd' || p[i + 1] == 'D') return "\\d (use [0-9] or [[:digit:]])";
    i++;
  }
  for (size_t i = 0; i + 1 < n; i++)
    if (p[i] == '(' && p[i + 1] == '?' && (i == 0 || p[i - 1] != '\\'))
      return "(?...) groups (lookaround, non-capturing)";
  return NULL;
}

static int compile_pattern(lua_State *L, int v, const char *at, struct schema *s,
                           struct schema_error *err) {
  if (lua_type(L, v) != LUA_TSTRING)
    return bad(err, at, "pattern", "pattern must be a string, got %s", lua_kind(L, v));
  size_t n;
  const char *p = lua_tolstring(L, v, &n);
  if (strlen(p) != n) return bad(err, at, "pattern", "pattern must not hold a NUL byte");
  const char *ecma = ecma_only(p, n);
  if (ecma)
    return bad(err, at, "pattern",
               "pattern /%s/: %s is ECMA-262, not a POSIX extended regular expression", p, ecma);
  int rc = regcomp(&s->re, p, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[160];
    regerror(rc, &s->re, why, sizeof why);
    return bad(err, at, "pattern", "pattern /%s/ is not a POSIX extended regular expression: %s", p,
               why);
  }
  s->has_pattern = true;
  s->pattern = strdup(p);
  if (s->pattern == NULL) return bad(err, at, NULL, "out of memory");
  return 0;
}

static int compile_keyword(lua_State *L, int v, const char *key, const char *at, int depth,
                           struct schema *s, struct schema_error *err) {
  static const struct {
    const char *name;
    unsigned flag;
    size_t offset;
  } bounds[] = {
      {"minimum", HAS_MIN, offsetof(struct schema, min)},
      {"maximum", HAS_MAX, offsetof(struct schema, max)},
      {"exclusiveMinimum", HAS_XMIN, offsetof(struct schema, xmin)},
      {"exclusiveMaximum", HAS_XMAX, offsetof(struct schema, xmax)},
      {"minLength", HAS_MIN_LEN, offsetof(struct schema, min_len)},
      {"maxLength", HAS_MAX_LEN, offsetof(struct schema, max_len)},
      {"minItems", HAS_MIN_ITEMS, offsetof(struct schema, min_items)},
      {"maxItems", HAS_MAX_ITEMS, offsetof(struct schema, max_items)},
  };
  for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
    if (strcmp(key, bounds[i].name) != 0) continue;
    s->has |= bounds[i].flag;
    if (i < 4) {
      if (lua_type(L, v) == LUA_TBOOLEAN)
        return bad(err, at, key,
                   "%s must be a number (the boolean form of JSON Schema draft 4 is not "
                   "supported), got boolean",
                   key);
      if (lua_type(L, v) != LUA_TNUMBER || !isfinite(lua_tonumber(L, v)))
        return bad(err, at, key, "%s must be a number, got %s", key, lua_kind(L, v));
      double d = lua_tonumber(L, v);
      memcpy((char *)s + bounds[i].offset, &d, sizeof d);
    } else {
      double c = count_at(L, v);
      if (c < 0)
        return bad(err, at, key, "%s must be a whole number from 0, got %s", key,
                   lua_type(L, v) == LUA_TNUMBER ? lua_tostring(L, v) : lua_kind(L, v));
      size_t z = (size_t)c;
      memcpy((char *)s + bounds[i].offset, &z, sizeof z);
    }
    return 0;
  }
  if (strcmp(key, "type") == 0) return compile_type(L, v, at, s, err);
  if (strcmp(key, "enum") == 0 || strcmp(key, "const") == 0)
    return compile_enum(L, v, at, key, s, err);
  if (strcmp(key, "pattern") == 0) return compile_pattern(L, v, at, s, err);
  if (strcmp(key, "format") == 0) {
    const char *f = lua_type(L, v) == LUA_TSTRING ? lua_tostring(L, v) : NULL;
    if (f && strcmp(f, "date-time") == 0)
      s->format = FMT_DATE_TIME;
    else if (f && strcmp(f, "uuid") == 0)
      s->format = FMT_UUID;
    else
      return bad(err, at, "format", "format '%s' is not supported (supported: date-time, uuid)",
                 f ? f : lua_kind(L, v));
    return 0;
  }
  if (strcmp(key, "additionalProperties") == 0) {
    if (lua_type(L, v) == LUA_TBOOLEAN) {
      s->additional = lua_toboolean(L, v) ? ADD_ANY : ADD_NONE;
      return 0;
    }
    char sub[256];
    snprintf(sub, sizeof sub, "%s.additionalProperties", at);
    if (lua_type(L, v) != LUA_TTABLE)
      return bad(err, at, key, "additionalProperties must be true, false or a schema, got %s",
                 lua_kind(L, v));
    s->additional = ADD_SCHEMA;
    return compile_sub(L, v, sub, depth + 1, &s->additional_schema, err);
  }
  return 0; /* the rest after the loop: properties, required, items */
}

static int compile_node(lua_State *L, int idx, const char *at, int depth, struct schema *s,
                        struct schema_error *err) {
  if (lua_objlen(L, idx) > 0)
    return bad(err, at, NULL,
               "a schema is a table of keywords, not a list (items takes one schema: tuples are "
               "not supported)");
  lua_checkstack(L, 8);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    int v = lua_gettop(L);
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 2);
      return bad(err, at, NULL, "a schema is a table of keywords, found a %s key",
                 lua_typename(L, lua_type(L, -1)));
    }
    const char *key = lua_tostring(L, -2);
    bool known = false;
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0] && !known; i++)
      known = strcmp(key, keywords[i]) == 0;
    bool annotation = false;
    for (size_t i = 0; i < sizeof annotations / sizeof annotations[0] && !known; i++)
      annotation = annotation || strcmp(key, annotations[i]) == 0;
    if (!known && !annotation) {
      bad(err, at, key, "keyword '%s' is not supported (supported: %s)", key, SCHEMA_KEYWORDS);
      lua_pop(L, 2);
      return -1;
    }
    if (annotation && strcmp(key, "examples") != 0 && lua_type(L, v) != LUA_TSTRING) {
      bad(err, at, key, "%s must be a string, got %s", key, lua_kind(L, v));
      lua_pop(L, 2);
      return -1;
    }
    if (known && compile_keyword(L, v, key, at, depth, s, err) != 0) {
      lua_pop(L, 2);
      return -1;
    }
    lua_pop(L, 1);
  }
  lua_getfield(L, idx, "properties");
  int rc = lua_isnil(L, -1) ? 0 : compile_properties(L, lua_gettop(L), at, depth, s, err);
  lua_pop(L, 1);
  if (rc != 0) return -1;
  lua_getfield(L, idx, "required");
  rc = lua_isnil(L, -1) ? 0 : compile_required(L, lua_gettop(L), at, s, err);
  lua_pop(L, 1);
  if (rc != 0) return -1;
  lua_getfield(L, idx, "items");
  if (!lua_isnil(L, -1)) {
    char sub[256];
    snprintf(sub, sizeof sub, "%s.items", at);
    if (lua_type(L, -1) != LUA_TTABLE)
      rc = bad(err, at, "items", "items must be a schema, got %s", lua_kind(L, -1));
    else
      rc = compile_sub(L, lua_gettop(L), sub, depth + 1, &s->items, err);
  }
  lua_pop(L, 1);
  if (rc != 0) return -1;
  s->object_rules = s->nnames > 0 || s->additional != ADD_ANY;
  s->array_rules = s->items || (s->has & (HAS_MIN_ITEMS | HAS_MAX_ITEMS));
  s->string_rules = s->has_pattern || s->format || (s->has & (HAS_MIN_LEN | HAS_MAX_LEN));
  return 0;
}

schema *schema_compile(lua_State *L, int idx, struct schema_error *err) {
  struct schema *s = NULL;
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  err->at[0] = err->key[0] = err->why[0] = '\0';
  if (compile_sub(L, idx, "$", 0, &s, err) != 0) return NULL;
  return s;
}

/* ---- values ---- */

/* A value of the body being checked. Strings and numbers point into the text
 * (or the entry): strings without their quotes, escaped when esc. */
struct val {
  unsigned type; /* one TY_* but TY_INTEGER */
  bool integral; /* TY_NUMBER: no fractional part */
  bool big;      /* TY_NUMBER: an integer literal above 2^53, compared through big_value */
  double num;    /* TY_NUMBER: the double the decoder makes of it; TY_BOOLEAN: 1 or 0 */
  long double big_value;
  const char *s; /* TY_STRING */
  size_t len;
  bool esc;
};

/* A step of the path to the value being checked: a key (in JSON text when
 * esc) or an array index (key NULL). */
struct seg {
  const char *key;
  size_t len;
  size_t index;
  bool esc;
};

struct ck {
  struct schema_scratch *sc;
  const char *end;
  char *err;
  size_t errlen;
  int depth;
  struct seg path[SCHEMA_MAX_DEPTH + 2];
  bool oom;
};

static bool grow(struct ck *c, size_t need) {
  if (need <= c->sc->cap) return true;
  size_t cap = c->sc->cap ? c->sc->cap : 256;
  while (cap < need) cap *= 2;
  char *b = realloc(c->sc->buf, cap);
  if (b == NULL) {
    c->oom = true;
    return false;
  }
  c->sc->buf = b;
  c->sc->cap = cap;
  return true;
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int ch = (unsigned char)p[i], h;
    if (ch >= '0' && ch <= '9')
      h = ch - '0';
    else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
      h = (ch | 0x20) - 'a' + 10;
    else
      return -1;
    v = v << 4 | h;
  }
  return v;
}

/* The decoded bytes of JSON string text [p, p + n) into out (room for n
 * bytes: no escape decodes longer than it is written). Returns the length,
 * or (size_t)-1 for a bad escape. */
static size_t unescape(const char *p, size_t n, char *out) {
  size_t o = 0;
  const char *end = p + n;
  while (p < end) {
    if (*p != '\\') {
      out[o++] = *p++;
      continue;
    }
    if (end - p < 2) return (size_t)-1;
    char e = p[1];
    static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    const char *m = NULL;
    for (size_t i = 0; i + 1 < sizeof simple; i += 2)
      if (simple[i] == e) m = &simple[i + 1];
    if (m) {
      out[o++] = *m;
      p += 2;
      continue;
    }
    if (e != 'u' || end - p < 6) return (size_t)-1;
    int hi = hex4(p + 2);
    if (hi < 0) return (size_t)-1;
    uint32_t cp = (uint32_t)hi;
    p += 6;
    if ((hi & 0xFC00) == 0xD800) {
      int lo = end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
      if (lo < 0 || (lo & 0xFC00) != 0xDC00) return (size_t)-1;
      cp = ((((uint32_t)hi & 0x3FF) << 10) | ((uint32_t)lo & 0x3FF)) + 0x10000;
      p += 6;
    } else if ((hi & 0xFC00) == 0xDC00) {
      return (size_t)-1;
    }
    if (cp < 0x80) {
      out[o++] = (char)cp;
    } else if (cp < 0x800) {
      out[o++] = (char)(0xC0 | cp >> 6);
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[o++] = (char)(0xE0 | cp >> 12);
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else {
      out[o++] = (char)(0xF0 | cp >> 18);
      out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  return o;
}

/* The string's decoded bytes: in place when it has no escapes and needs no
 * NUL, else in the scratch (NUL-terminated). NULL when out of memory or a
 * bad escape. */
static const char *bytes_of(struct ck *c, const struct val *v, size_t *n, bool nul) {
  if (!v->esc && !nul) {
    *n = v->len;
    return v->s;
  }
  if (!grow(c, v->len + 1)) return NULL;
  size_t len = v->len;
  if (v->esc) {
    len = unescape(v->s, v->len, c->sc->buf);
    if (len == (size_t)-1) return NULL;
  } else {
    memcpy(c->sc->buf, v->s, len);
  }
  c->sc->buf[len] = '\0';
  *n = len;
  return c->sc->buf;
}

/* UTF-8 code points: bytes that do not continue a sequence. */
static size_t code_points(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

/* ---- formats ---- */

static bool digits(const char *s, int n, int *v) {
  *v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    *v = *v * 10 + (s[i] - '0');
  }
  return true;
}

/* RFC 3339's date-time: 2026-12-08T01:45:00Z, with an optional fraction of
 * a second and Z or an offset (+01:00); T and Z in either case; a leap
 * second (:60) allowed. */
static bool is_date_time(const char *s, size_t n) {
  int y, mo, d, h, mi, sec, oh, om;
  if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
      !digits(s + 8, 2, &d) || (s[10] | 0x20) != 't' || !digits(s + 11, 2, &h) || s[13] != ':' ||
      !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
    return false;
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > days[mo - 1] + (mo == 2 && leap) || h > 23 || mi > 59 ||
      sec > 60)
    return false;
  size_t i = 19;
  if (s[i] == '.') { /* n >= 20 */
    size_t first = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == first) return false;
  }
  if (i < n && (s[i] | 0x20) == 'z') return i + 1 == n;
  if (i + 6 != n) return false; /* +HH:MM */
  if ((s[i] != '+' && s[i] != '-') || !digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
      !digits(s + i + 4, 2, &om))
    return false;
  return oh <= 23 && om <= 59;
}

/* 8-4-4-4-12 hex digits, either case (RFC 9562's text form, any version). */
static bool is_uuid(const char *s, size_t n) {
  if (n != 36) return false;
  for (size_t i = 0; i < 36; i++) {
    char ch = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (ch != '-') return false;
    } else if (!((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f'))) {
      return false;
    }
  }
  return true;
}

/* ---- mismatches ---- */

/* "%.15g" unless it does not read back, then 16 or 17 digits. */
static void fmt_num(char *out, size_t len, double v) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, len, "%.*g", prec, v);
    if (strtod(out, NULL) == v) return;
  }
}

static size_t put_path(const struct ck *c, char *out, size_t len) {
  size_t at = (size_t)snprintf(out, len, "$");
  for (int i = 1; i <= c->depth && at < len; i++) {
    const struct seg *g = &c->path[i];
    if (g->key == NULL) {
      at += (size_t)snprintf(out + at, len - at, "[%zu]", g->index);
    } else if (g->esc) { /* already JSON text */
      at += (size_t)snprintf(out + at, len - at, "[\"%.*s\"]", (int)(g->len > 200 ? 200 : g->len),
                             g->key);
    } else {
      char one[256];
      path_join(one, sizeof one, "", g->key, g->len > 200 ? 200 : g->len);
      at += (size_t)snprintf(out + at, len - at, "%s", one);
    }
  }
  return at < len ? at : len;
}

static int mismatch(struct ck *c, const char *fmt, ...) {
  if (c->errlen == 0) return 0;
  size_t at = put_path(c, c->err, c->errlen);
  if (at + 2 < c->errlen) {
    at += (size_t)snprintf(c->err + at, c->errlen - at, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + at, c->errlen - at, fmt, ap);
    va_end(ap);
  }
  return 0;
}

static const char *type_of(const struct val *v) {
  for (size_t t = 0; t < NTYPES; t++)
    if (type_names[t].bit == v->type) return type_names[t].name;
  return "?";
}

static int type_mismatch(struct ck *c, const struct schema *s, const struct val *v) {
  char want[160];
  size_t at = 0;
  int n = 0, total = 0;
  for (size_t t = 0; t < NTYPES; t++) total += (s->types & type_names[t].bit) != 0;
  for (size_t t = 0; t < NTYPES && at < sizeof want; t++) {
    if (!(s->types & type_names[t].bit)) continue;
    n++;
    at += (size_t)snprintf(want + at, sizeof want - at, "%s%s%s",
                           n == 1       ? ""
                           : n == total ? " or "
                                        : ", ",
                           type_names[t].article, type_names[t].name);
  }
  return mismatch(c, "must be %s, got %s", want, type_of(v));
}

static void fmt_sval(char *out, size_t len, const struct sval *e) {
  switch (e->type) {
    case TY_STRING: snprintf(out, len, "\"%.*s\"", (int)(e->len > 60 ? 60 : e->len), e->s); break;
    case TY_NUMBER: fmt_num(out, len, e->num); break;
    case TY_BOOLEAN: snprintf(out, len, "%s", e->num ? "true" : "false"); break;
    default: snprintf(out, len, "null");
  }
}

static int enum_mismatch(struct ck *c, const struct schema *s) {
  char list[400];
  size_t at = 0;
  for (int i = 0; i < s->nenum && at + 80 < sizeof list; i++) {
    char one[80];
    fmt_sval(one, sizeof one, &s->enumv[i]);
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", one);
    if (i == 7 && i + 1 < s->nenum) {
      snprintf(list + at, sizeof list - at, ", ...");
      break;
    }
  }
  return mismatch(c, s->is_const ? "must be %s" : "must be one of %s", list);
}

static int bound_mismatch(struct ck *c, const char *op, double bound) {
  char b[40];
  fmt_num(b, sizeof b, bound);
  return mismatch(c, "must be %s %s", op, b);
}

/* No fractional part: every double of 2^52 or more is whole; below that a
 * conversion tells (cheaper than floor, a libm call). */
static bool integral(double d) {
  if (!(d > -4503599627370496.0 && d < 4503599627370496.0)) return isfinite(d);
  return (double)(long long)d == d;
}

static int num_cmp(const struct val *v, double bound) {
  if (v->big) return v->big_value < bound ? -1 : v->big_value > bound ? 1 : 0;
  return v->num < bound ? -1 : v->num > bound ? 1 : 0;
}

/* ---- checking one value ---- */

/* The rules of s that do not need to look inside the value (v's own type;
 * objects and arrays are walked by the caller). Returns 1, 0 (mismatch) or
 * -1 (out of memory). */
static int check_scalar(struct ck *c, const struct schema *s, const struct val *v) {
  if (s->types) {
    unsigned bits = v->type | (v->type == TY_NUMBER && v->integral ? TY_INTEGER : 0);
    if (!(s->types & bits)) return type_mismatch(c, s, v);
  }
  if (s->nenum) {
    bool found = false;
    for (int i = 0; i < s->nenum && !found; i++) {
      const struct sval *e = &s->enumv[i];
      if (e->type != v->type) continue;
      if (e->type == TY_STRING) {
        size_t n;
        const char *b = bytes_of(c, v, &n, false);
        if (b == NULL) return c->oom ? -1 : mismatch(c, "holds a bad escape");
        found = n == e->len && memcmp(b, e->s, n) == 0;
      } else {
        found = e->type == TY_NULL ||
                (e->type == TY_NUMBER ? num_cmp(v, e->num) == 0 : e->num == v->num);
      }
    }
    if (!found) return enum_mismatch(c, s);
  }
  if (v->type == TY_NUMBER && (s->has & (HAS_MIN | HAS_MAX | HAS_XMIN | HAS_XMAX))) {
    if ((s->has & HAS_MIN) && num_cmp(v, s->min) < 0) return bound_mismatch(c, ">=", s->min);
    if ((s->has & HAS_XMIN) && num_cmp(v, s->xmin) <= 0) return bound_mismatch(c, ">", s->xmin);
    if ((s->has & HAS_MAX) && num_cmp(v, s->max) > 0) return bound_mismatch(c, "<=", s->max);
    if ((s->has & HAS_XMAX) && num_cmp(v, s->xmax) >= 0) return bound_mismatch(c, "<", s->xmax);
  }
  if (v->type == TY_STRING && s->string_rules) {
    size_t n;
    const char *b = bytes_of(c, v, &n, s->has_pattern);
    if (b == NULL) return c->oom ? -1 : mismatch(c, "holds a bad escape");
    if (s->has & (HAS_MIN_LEN | HAS_MAX_LEN)) {
      size_t k = code_points(b, n);
      if ((s->has & HAS_MIN_LEN) && k < s->min_len)
        return mismatch(c, "must be at least %zu characters long, got %zu", s->min_len, k);
      if ((s->has & HAS_MAX_LEN) && k > s->max_len)
        return mismatch(c, "must be at most %zu characters long, got %zu", s->max_len, k);
    }
    if (s->format == FMT_DATE_TIME && !is_date_time(b, n))
      return mismatch(c, "must be a date-time (RFC 3339, such as 2026-12-08T01:45:00Z)");
    if (s->format == FMT_UUID && !is_uuid(b, n))
      return mismatch(c, "must be a UUID (such as 123e4567-e89b-12d3-a456-426614174000)");
    /* regexec reads up to a NUL: a string holding one never matches. */
    if (s->has_pattern && (memchr(b, '\0', n) || regexec(&s->re, b, 0, NULL, 0) != 0))
      return mismatch(c, "must match the pattern %s", s->pattern);
  }
  return 1;
}

/* ---- reading the text ---- */

static const unsigned char ws[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && ws[(unsigned char)*p]) p++;
  return p;
}

/* The string whose opening quote is at p: its bytes into v; returns the
 * byte after its closing quote, or NULL. */
static const char *read_string(const char *p, const char *end, struct val *v) {
  const char *q = ++p;
  bool esc = false;
  while (q < end && *q != '"') {
    if (*q == '\\') {
      esc = true;
      q++;
    }
    q++;
  }
  if (q >= end) return NULL;
  *v = (struct val){.type = TY_STRING, .s = p, .len = (size_t)(q - p), .esc = esc};
  return q + 1;
}

/* The number at p; NULL when it is none. */
static const char *read_number(struct ck *c, const char *p, const char *end, struct val *v) {
  const char *q = p;
  bool integer = true;
  size_t ndigits = 0;
  uint64_t whole = 0;
  if (q < end && *q == '-') q++;
  for (; q < end; q++) {
    char ch = *q;
    if (ch >= '0' && ch <= '9') {
      if (integer) {
        if (ndigits < 19) whole = whole * 10 + (uint64_t)(ch - '0');
        ndigits++;
      }
    } else if (ch == '.' || ch == 'e' || ch == 'E' || ((ch == '+' || ch == '-') && !integer)) {
      integer = false;
    } else {
      break;
    }
  }
  size_t n = (size_t)(q - p);
  if (n == 0 || !grow(c, n + 1)) return NULL;
  char *buf = c->sc->buf;
  memcpy(buf, p, n);
  buf[n] = '\0';
  char dp = localeconv()->decimal_point[0];
  if (dp != '.') {
    char *dot = memchr(buf, '.', n);
    if (dot) *dot = dp;
  }
  char *stop;
  *v = (struct val){.type = TY_NUMBER, .num = strtod(buf, &stop)};
  if (stop == buf) return NULL;
  /* As json_decode: an integer literal above 2^53 is kept exact. */
  if (integer && (ndigits > 16 || (ndigits == 16 && whole > 9007199254740992ULL))) {
    v->big = true;
    v->big_value = strtold(buf, NULL);
  }
  v->integral = v->big || integral(v->num);
  return q;
}

/* Skips the value at p without looking at it. */
static const char *skip_value(const char *p, const char *end) {
  int depth = 0;
  do {
    p = skip_ws(p, end);
    if (p >= end) return NULL;
    switch (*p) {
      case '"': {
        struct val v;
        if (!(p = read_string(p, end, &v))) return NULL;
        break;
      }
      case '{':
      case '[': depth++, p++; break;
      case '}':
      case ']': depth--, p++; break;
      case ',':
      case ':':
        if (depth == 0) return NULL;
        p++;
        break;
      default:
        while (p < end && !ws[(unsigned char)*p] && *p != ',' && *p != ':' && *p != '}' &&
               *p != ']' && *p != '"' && *p != '{' && *p != '[')
          p++;
    }
  } while (depth > 0);
  return depth == 0 ? p : NULL;
}

static int check_value(struct ck *c, const struct schema *s, const char **pp);

#define NOT_JSON (-2)

static int check_members(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp + 1, c->end), *end = c->end;
  uint64_t seen[SCHEMA_MAX_NAMES / 64] = {0};
  if (p < end && *p == '}') {
    p++;
  } else {
    for (;;) {
      struct val k;
      if (p >= end || *p != '"' || !(p = read_string(p, end, &k))) return NOT_JSON;
      p = skip_ws(p, end);
      if (p >= end || *p != ':') return NOT_JSON;
      p++;
      int i = -1;
      size_t kn;
      const char *kb = bytes_of(c, &k, &kn, false);
      if (kb == NULL) return c->oom ? -1 : NOT_JSON;
      i = find_name(s, kb, kn);
      const struct schema *sub = NULL;
      c->path[++c->depth] = (struct seg){.key = k.s, .len = k.len, .esc = k.esc};
      if (i >= 0) {
        seen[i / 64] |= 1ULL << (i % 64);
        sub = s->names[i].schema;
      } else if (s->additional == ADD_NONE) {
        return mismatch(c, "is not allowed (additionalProperties is false)");
      } else if (s->additional == ADD_SCHEMA) {
        sub = s->additional_schema;
      }
      int rc = check_value(c, sub, &p);
      if (rc != 1) return rc;
      c->depth--;
      p = skip_ws(p, end);
      if (p < end && *p == ',') {
        p = skip_ws(p + 1, end);
        continue;
      }
      if (p < end && *p == '}') {
        p++;
        break;
      }
      return NOT_JSON;
    }
  }
  for (int i = 0; i < s->nnames; i++) {
    if (!s->names[i].required || (seen[i / 64] >> (i % 64) & 1)) continue;
    c->path[++c->depth] = (struct seg){.key = s->names[i].s, .len = s->names[i].len};
    return mismatch(c, "is required");
  }
  *pp = p;
  return 1;
}

static int check_items(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp + 1, c->end), *end = c->end;
  size_t n = 0;
  if (p < end && *p == ']') {
    p++;
  } else {
    for (;; n++) {
      c->path[++c->depth] = (struct seg){.index = n};
      int rc = check_value(c, s->items, &p);
      if (rc != 1) return rc;
      c->depth--;
      p = skip_ws(p, end);
      if (p < end && *p == ',') {
        p++;
        continue;
      }
      if (p < end && *p == ']') {
        p++;
        n++;
        break;
      }
      return NOT_JSON;
    }
  }
  if ((s->has & HAS_MIN_ITEMS) && n < s->min_items)
    return mismatch(c, "must hold at least %zu items, got %zu", s->min_items, n);
  if ((s->has & HAS_MAX_ITEMS) && n > s->max_items)
    return mismatch(c, "must hold at most %zu items, got %zu", s->max_items, n);
  *pp = p;
  return 1;
}

/* Checks the value at *pp against s (NULL: anything) and moves *pp past it.
 * Returns 1, 0 (mismatch, in c->err), -1 (out of memory) or NOT_JSON. */
static int check_value(struct ck *c, const struct schema *s, const char **pp) {
  const char *p = skip_ws(*pp, c->end), *end = c->end;
  if (p >= end) return NOT_JSON;
  if (s == NULL) {
    *pp = skip_value(p, end);
    return *pp ? 1 : NOT_JSON;
  }
  struct val v = {0};
  const char *next = NULL;
  switch (*p) {
    case '{': v.type = TY_OBJECT; break;
    case '[': v.type = TY_ARRAY; break;
    case '"': next = read_string(p, end, &v); break;
    case 't':
    case 'f':
      v = (struct val){.type = TY_BOOLEAN, .num = *p == 't'};
      next = end - p >= (*p == 't' ? 4 : 5) ? p + (*p == 't' ? 4 : 5) : NULL;
      break;
    case 'n':
      v.type = TY_NULL;
      next = end - p >= 4 ? p + 4 : NULL;
      break;
    default:
      next = read_number(c, p, end, &v);
      if (next == NULL && c->oom) return -1;
  }
  if (v.type != TY_OBJECT && v.type != TY_ARRAY && next == NULL) return NOT_JSON;
  int rc = check_scalar(c, s, &v);
  if (rc != 1) return rc;
  if (v.type == TY_OBJECT && s->object_rules) {
    *pp = p;
    return check_members(c, s, pp);
  }
  if (v.type == TY_ARRAY && s->array_rules) {
    *pp = p;
    return check_items(c, s, pp);
  }
  if (v.type == TY_OBJECT || v.type == TY_ARRAY) next = skip_value(p, end);
  if (next == NULL) return NOT_JSON;
  *pp = next;
  return 1;
}

int schema_check_json(const schema *s, const char *text, size_t len, struct schema_scratch *sc,
                      char *err, size_t errlen) {
  struct ck c = {.sc = sc, .end = text + len, .err = err, .errlen = errlen};
  const char *p = text;
  if (errlen) err[0] = '\0';
  int rc = check_value(&c, s, &p);
  if (rc == 1 && skip_ws(p, c.end) != c.end) rc = NOT_JSON;
  if (rc == 1 || rc == 0) return rc;
  if (errlen) snprintf(err, errlen, "%s", c.oom || rc == -1 ? "out of memory" : "not JSON");
  return -1;
}

/* ---- the flat record ---- */

int schema_match_flat(const schema *s, const struct json_flat *rec, struct schema_scratch *sc) {
  /* Only what a check without messages reads: this runs on every body of
   * the fast path, and the path alone is a kilobyte to clear. */
  struct ck c;
  c.sc = sc;
  c.end = NULL;
  c.err = NULL;
  c.errlen = 0;
  c.depth = 0;
  c.oom = false;
  struct val obj = {.type = TY_OBJECT};
  if (check_scalar(&c, s, &obj) != 1) return 0;
  if (!s->object_rules) return 1;
  uint64_t seen[SCHEMA_MAX_NAMES / 64] = {0};
  for (int k = 0; k < rec->n; k++) {
    int i = find_name(s, rec->key[k].s, rec->key[k].len);
    const struct schema *sub = NULL;
    if (i >= 0) {
      seen[i / 64] |= 1ULL << (i % 64);
      sub = s->names[i].schema;
    } else if (s->additional == ADD_NONE) {
      return 0;
    } else if (s->additional == ADD_SCHEMA) {
      sub = s->additional_schema;
    }
    if (sub == NULL) continue;
    struct val v; /* field by field: big_value is read only when big */
    v.big = v.esc = v.integral = false;
    v.num = 0;
    v.s = NULL;
    v.len = 0;
    switch (rec->type[k]) {
      case JSON_FLAT_NUMBER:
        v.type = TY_NUMBER;
        v.num = rec->num[k];
        v.integral = integral(v.num);
        break;
      case JSON_FLAT_STRING:
        v.type = TY_STRING;
        v.s = rec->str[k];
        v.len = rec->len[k];
        /* A JSON string's bytes follow its quote; an integer literal above
         * 2^53, typed a string by json_scan_flat, starts right after ':' or
         * whitespace. */
        const char *before = rec->str[k] - 1; /* in the text: after '{' at least */
        if (*before != '"' && read_number(&c, rec->str[k], rec->str[k] + rec->len[k], &v) == NULL)
          return 0;
        break;
      case JSON_FLAT_TRUE:
        v.type = TY_BOOLEAN;
        v.num = 1;
        break;
      case JSON_FLAT_FALSE: v.type = TY_BOOLEAN; break;
      default: v.type = TY_NULL;
    }
    if (check_scalar(&c, sub, &v) != 1) return 0;
  }
  for (int i = 0; i < s->nnames; i++)
    if (s->names[i].required && !(seen[i / 64] >> (i % 64) & 1)) return 0;
  return 1;
}
