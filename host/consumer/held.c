/* held: the entries held in a lane or a handler (see held.h). */
#include <stdlib.h>
#include <string.h>

#include "held.h"

bool held_has(const struct held *h, const struct entry *e) {
  for (size_t i = 0; i < h->n; i++)
    if (h->ids[i].key == e->key && strcmp(h->ids[i].id, e->id) == 0) return true;
  return false;
}

bool held_add(struct held *h, const struct entry *e) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    void *p = realloc(h->ids, cap * sizeof *h->ids);
    if (p == NULL) return false;
    h->ids = p;
    h->cap = cap;
  }
  /* A plain copy, as this runs for every entry: ids are parsed as ms-seq,
   * so shorter than HELD_ID_MAX. */
  struct held_id *dst = &h->ids[h->n++];
  size_t n = strlen(e->id);
  if (n >= HELD_ID_MAX) n = HELD_ID_MAX - 1;
  memcpy(dst->id, e->id, n);
  dst->id[n] = '\0';
  dst->key = e->key;
  return true;
}

void held_remove(struct held *h, const struct entry *e) {
  for (size_t i = 0; i < h->n; i++) {
    if (h->ids[i].key != e->key || strcmp(h->ids[i].id, e->id) != 0) continue;
    h->ids[i] = h->ids[--h->n];
    return;
  }
}

void held_free(struct held *h) {
  free(h->ids);
  h->ids = NULL;
  h->n = h->cap = 0;
}
