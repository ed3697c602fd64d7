/* slots: the host's handler files and what runs each (see slots.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "handler_name.h"
#include "slots.h"

/* The handler a slot runs or is about to run, or NULL. */
static handler *slot_handler(const struct slot *sl) {
  if (sl->next) return sl->next;
  if (sl->loaded) return sl->loaded;
  return NULL;
}

const struct handler_spec *slot_spec(const struct slot *sl) {
  handler *hd = slot_handler(sl);
  if (hd) return handler_spec(hd);
  return sl->sub ? sub_spec(sl->sub) : NULL;
}

const char *slot_version(const struct slot *sl) {
  handler *hd = slot_handler(sl);
  if (hd) return handler_version(hd);
  return sl->sub ? sub_version(sl->sub) : NULL;
}

const char *slot_name(const struct slot *sl, char *buf, size_t len) {
  size_t n;
  const char *base = handler_name_of(sl->path, &n);
  snprintf(buf, len, "%.*s", (int)n, base);
  return buf;
}

struct slot *slot_add(struct slots *ss, const char *path) {
  struct slot *grown = grow(ss->v, &ss->cap, ss->n + 1, sizeof *grown, 8);
  if (grown == NULL) return NULL;
  ss->v = grown;
  struct slot *sl = &ss->v[ss->n];
  memset(sl, 0, sizeof *sl);
  if ((sl->path = strdup(path)) == NULL) return NULL;
  ss->n++;
  return sl;
}

void slot_delete(struct slots *ss, size_t i) {
  struct slot *sl = &ss->v[i];
  free(sl->path);
  free(sl->consumer);
  memmove(sl, sl + 1, (ss->n - i - 1) * sizeof *sl);
  ss->n--;
}

struct slot *slot_find(struct slots *ss, const char *path) {
  for (size_t i = 0; i < ss->n; i++)
    if (strcmp(ss->v[i].path, path) == 0) return &ss->v[i];
  return NULL;
}
