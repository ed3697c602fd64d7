/* list: elements head first (see list.h). */
#include "list.h"

#include <stdlib.h>
#include <string.h>

#include "memreply.h"

struct ms_list *ms_list_new(void) {
  return mr_alloc(sizeof(struct ms_list));
}

void ms_list_free(struct ms_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i].p);
  free(l->v);
  free(l);
}

void ms_list_push(struct ms_list *l, bool head, const char *p, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 4;
    l->v = mr_realloc(l->v, l->cap * sizeof *l->v);
  }
  size_t at = head ? 0 : l->n;
  memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof *l->v);
  l->v[at] = (struct ms_lelem){mr_memdup(p, len), len};
  l->n++;
}

struct ms_lelem ms_list_pop(struct ms_list *l, bool head) {
  struct ms_lelem e = l->v[head ? 0 : l->n - 1];
  l->n--;
  if (head) memmove(l->v, l->v + 1, l->n * sizeof *l->v);
  return e;
}
