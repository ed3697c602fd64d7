/* hash: fields in insertion order (see hash.h). */
#include "hash.h"

#include <stdlib.h>
#include <string.h>

#include "memreply.h"

struct ms_hash *ms_hash_new(void) {
  return mr_alloc(sizeof(struct ms_hash));
}

void ms_hash_free(struct ms_hash *h) {
  for (size_t i = 0; i < h->n; i++) {
    free(h->v[i].f);
    free(h->v[i].v);
  }
  free(h->v);
  free(h);
}

struct ms_hfield *ms_hash_get(struct ms_hash *h, const char *f, size_t flen) {
  for (size_t i = 0; i < h->n; i++)
    if (h->v[i].flen == flen && memcmp(h->v[i].f, f, flen) == 0) return &h->v[i];
  return NULL;
}

int ms_hash_set(struct ms_hash *h, const char *f, size_t flen, const char *v, size_t vlen) {
  struct ms_hfield *e = ms_hash_get(h, f, flen);
  if (e) {
    free(e->v);
    e->v = mr_memdup(v, vlen);
    e->vlen = vlen;
    return 0;
  }
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 4;
    h->v = mr_realloc(h->v, h->cap * sizeof *h->v);
  }
  h->v[h->n++] = (struct ms_hfield){mr_memdup(f, flen), mr_memdup(v, vlen), flen, vlen};
  return 1;
}

int ms_hash_del(struct ms_hash *h, const char *f, size_t flen) {
  struct ms_hfield *e = ms_hash_get(h, f, flen);
  if (e == NULL) return 0;
  free(e->f);
  free(e->v);
  size_t i = (size_t)(e - h->v);
  memmove(h->v + i, h->v + i + 1, (h->n - i - 1) * sizeof *h->v);
  h->n--;
  return 1;
}
