/* zset: sorted-set members (see zset.h). */
#include "zset.h"

#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "memreply.h"

struct ms_zset *ms_zset_new(void) {
  return mr_alloc(sizeof(struct ms_zset));
}

void ms_zset_free(struct ms_zset *z) {
  for (size_t k = 0; k < z->n; k++) free(z->v[k].m);
  free(z->v);
  free(z);
}

/* ---- members ---- */

/* Score order, then member bytes. */
static int zcmp(double score, const char *m, size_t len, const struct ms_zmember *e) {
  if (score != e->score) return score < e->score ? -1 : 1;
  return ms_bytecmp(m, len, e->m, e->len);
}

size_t ms_zset_find(const struct ms_zset *z, const char *m, size_t len) {
  for (size_t i = 0; i < z->n; i++)
    if (z->v[i].len == len && memcmp(z->v[i].m, m, len) == 0) return i;
  return z->n;
}

/* Takes e.m. A score of -0 is kept as 0: Redis writes a small set's scores
 * into a listpack as text, integers by ll2string, which drops the sign (a
 * set big enough for a skiplist would keep it; not modelled). */
void ms_zset_insert(struct ms_zset *z, struct ms_zmember e) {
  size_t lo = 0, hi = z->n;
  /* cppcheck-suppress duplicateConditionalAssign ; intended: -0 == 0 holds, and the assignment makes it +0 */
  if (e.score == 0) e.score = 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (zcmp(e.score, e.m, e.len, &z->v[mid]) > 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (z->n == z->cap) {
    z->cap = z->cap ? z->cap * 2 : 8;
    z->v = mr_realloc(z->v, z->cap * sizeof *z->v);
  }
  memmove(z->v + lo + 1, z->v + lo, (z->n - lo) * sizeof *z->v);
  z->v[lo] = e;
  z->n++;
}

struct ms_zmember ms_zset_take(struct ms_zset *z, size_t i) {
  struct ms_zmember e = z->v[i];
  memmove(z->v + i, z->v + i + 1, (z->n - i - 1) * sizeof *z->v);
  z->n--;
  return e;
}

size_t ms_zset_first_from(const struct ms_zset *z, double min, bool excl) {
  size_t i = 0;
  while (i < z->n && (excl ? z->v[i].score <= min : z->v[i].score < min)) i++;
  return i;
}

size_t ms_zset_end_at(const struct ms_zset *z, double max, bool excl) {
  size_t i = z->n;
  while (i > 0 && (excl ? z->v[i - 1].score >= max : z->v[i - 1].score > max)) i--;
  return i;
}
