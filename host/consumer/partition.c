/* partition: the keys of a partitioned stream (see partition.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition.h"

int partition_key_into(const char *name, int p, char *out, size_t len) {
  int n = snprintf(out, len, "%s:{%d}", name, p);
  return n < 0 || (size_t)n >= len ? -1 : n;
}

char *partition_key(const char *name, int p) {
  size_t len = strlen(name) + 16;
  char *k = malloc(len);
  if (k) partition_key_into(name, p, k, len);
  return k;
}

void partition_spec_free(struct handler_spec *s) {
  free(s->stream);
  free(s->reply_to);
  free(s->dead_letter);
  s->stream = s->reply_to = s->dead_letter = NULL;
}

int partition_spec(const struct handler_spec *base, int p, struct handler_spec *out) {
  *out = *base;
  out->stream = partition_key(base->stream, p);
  out->reply_to = base->reply_to ? partition_key(base->reply_to, p) : NULL;
  out->dead_letter = base->dead_letter ? partition_key(base->dead_letter, p) : NULL;
  if (out->stream == NULL || (base->reply_to && out->reply_to == NULL) ||
      (base->dead_letter && out->dead_letter == NULL)) {
    partition_spec_free(out);
    return -1;
  }
  return 0;
}

int partition_each(const struct handler_spec *base,
                   void (*fn)(void *data, const struct handler_spec *s), void *data) {
  if (base->partitions <= 0) {
    fn(data, base);
    return 0;
  }
  for (int p = 0; p < base->partitions; p++) {
    struct handler_spec part;
    if (partition_spec(base, p, &part) != 0) return -1;
    fn(data, &part);
    partition_spec_free(&part);
  }
  return 0;
}
