/* set: members in Redis' listing order (see set.h). */
#include "set.h"

#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "memreply.h"

/* set-max-intset-entries, Redis' default */
#define INTSET_MAX 512

struct ms_set *ms_set_new(void) {
  struct ms_set *s = mr_alloc(sizeof *s);
  memset(s, 0, sizeof *s);
  s->intset = true;
  return s;
}

void ms_set_free(struct ms_set *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i].m);
  free(s->v);
  free(s);
}

size_t ms_set_find(const struct ms_set *s, const char *m, size_t len) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i].len == len && memcmp(s->v[i].m, m, len) == 0) return i;
  return s->n;
}

int ms_set_add(struct ms_set *s, const char *m, size_t len) {
  if (ms_set_find(s, m, len) < s->n) return 0;
  long long ll = 0;
  /* Redis tests integers with string2ll: "01", "+1" and "-0" are strings */
  if (s->intset && (!ms_parse_ll(m, len, &ll) || s->n + 1 > INTSET_MAX)) s->intset = false;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 4;
    s->v = mr_realloc(s->v, s->cap * sizeof *s->v);
  }
  size_t at = s->n;
  if (s->intset)
    for (at = 0; at < s->n && s->v[at].ll < ll;) at++;
  memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof *s->v);
  s->v[at] = (struct ms_smember){mr_memdup(m, len), len, ll};
  s->n++;
  return 1;
}

int ms_set_rem(struct ms_set *s, const char *m, size_t len) {
  size_t i = ms_set_find(s, m, len);
  if (i == s->n) return 0;
  free(s->v[i].m);
  memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
  s->n--;
  return 1;
}
