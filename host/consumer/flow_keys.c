/* flow_keys: see flow_keys.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_keys.h"

char *flow_key(const char *kind, const char *stream, const char *group, const char *suffix) {
  size_t n = strlen("luastream:") + strlen(kind) + 2 * strlen(stream) + strlen(group) +
             (suffix ? strlen(suffix) : 0) + 8;
  char *k = malloc(n);
  if (k == NULL) return NULL;
  const char *open = strchr(stream, '{');
  const char *close = open ? strchr(open + 1, '}') : NULL;
  int w;
  if (close && close > open + 1)
    w = snprintf(k, n, "luastream:%s:%.*s:%s:%s", kind, (int)(close - open + 1), open, stream,
                 group);
  else
    w = snprintf(k, n, "luastream:%s:{%s}:%s", kind, stream, group);
  if (suffix) snprintf(k + w, n - (size_t)w, ":%s", suffix);
  return k;
}
