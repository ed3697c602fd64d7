/* grow: doubling arrays and buffers (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow(void *p, size_t *cap, size_t need, size_t size, size_t first) {
  if (p != NULL && need <= *cap) return p;
  size_t n = *cap ? *cap : first ? first : 1;
  while (n < need) {
    if (n > SIZE_MAX / 2) return NULL;
    n *= 2;
  }
  if (size && n > SIZE_MAX / size) return NULL;
  void *q = realloc(p, size ? n * size : 1);
  if (q == NULL) return NULL;
  *cap = n;
  return q;
}
