/* schema_compile: a handler's `schema` or `reply_schema` Lua table into the
 * tree schema.c checks bodies with (schema_tree.h): every keyword read and
 * refused with the path and why when it is not one luastream supports, each
 * pattern compiled once (regcomp). */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"
#include "schema_tree.h"

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
void schema_path_join(char *out, size_t len, const char *path, const char *name, size_t n) {
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
  /* Hung on its parent first: when the Lua API raises out of memory midway,
   * schema_compile frees the tree from its root. */
  *out = s;
  if (compile_node(L, idx, at, depth, s, err) != 0) {
    schema_free(s);
    *out = NULL;
    return -1;
  }
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
    schema_path_join(sub, sizeof sub, props, k, n);
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
    int at_name = schema_find_name(s, k, len);
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

struct compile_call {
  struct schema *root; /* what is built so far, whole (compile_sub) */
  struct schema_error *err;
  int rc;
};

/* [-2, +0] the schema table and the struct compile_call. */
static int compile_protected(lua_State *L) {
  struct compile_call *cc = lua_touserdata(L, 2);
  cc->rc = compile_sub(L, 1, "$", 0, &cc->root, cc->err);
  return 0;
}

schema *schema_compile(lua_State *L, int idx, struct schema_error *err) {
  struct compile_call cc = {.root = NULL, .err = err, .rc = -1};
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  err->at[0] = err->key[0] = err->why[0] = '\0';
  /* Under a protected call: the Lua API raises when memory runs out, and
   * what was compiled by then is freed before the error goes on. */
  lua_pushcfunction(L, compile_protected);
  lua_pushvalue(L, idx);
  lua_pushlightuserdata(L, &cc);
  if (lua_pcall(L, 2, 0, 0) != 0) {
    schema_free(cc.root);
    lua_error(L);
  }
  return cc.rc == 0 ? cc.root : NULL;
}
