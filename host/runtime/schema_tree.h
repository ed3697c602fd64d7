/* schema_tree: a compiled message schema, the tree schema_compile.c builds
 * from a Lua table and schema.c checks bodies with (internal to those two;
 * everyone else sees schema.h). One node per schema table. */
#ifndef LUASTREAM_SCHEMA_TREE_H
#define LUASTREAM_SCHEMA_TREE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "schema.h"

enum {
  TY_OBJECT = 1,
  TY_ARRAY = 2,
  TY_STRING = 4,
  TY_NUMBER = 8,
  TY_INTEGER = 16, /* a number with no fractional part */
  TY_BOOLEAN = 32,
  TY_NULL = 64,
};
/* The names of the types, for compiling `type` and for messages. */
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

/* path + ".name", or path + "[\"name\"]" for a name that is not an
 * identifier (escaped as in JSON), into out: the paths of messages. */
void schema_path_join(char *out, size_t len, const char *path, const char *name, size_t n);
/* The index in s->names of the property named by the n bytes at k, or -1
 * (inline: the checker asks it for each member of a body). */
static inline int schema_find_name(const struct schema *s, const char *k, size_t n) {
  for (int i = 0; i < s->nnames; i++) {
    const struct name *nm = &s->names[i];
    if (nm->len == n && (n == 0 || (nm->s[0] == k[0] && memcmp(nm->s, k, n) == 0))) return i;
  }
  return -1;
}

#endif
