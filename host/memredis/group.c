/* group: consumer groups, consumers, PELs and the entries_read / lag rules
 * of Redis 7.0 and 8.4 (see group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "memreply.h"

/* ---- groups, consumers, NACKs ---- */

static size_t group_slot(struct ms_stream *s, const char *name, size_t len, int *found) {
  size_t i = 0;
  *found = 0;
  for (; i < s->ngroups; i++) {
    int c = ms_bytecmp(s->groups[i]->name, s->groups[i]->len, name, len);
    if (c == 0) *found = 1;
    if (c >= 0) break;
  }
  return i;
}

struct ms_group *ms_group_find(struct ms_stream *s, const char *name, size_t len) {
  int found;
  size_t i = group_slot(s, name, len, &found);
  return found ? s->groups[i] : NULL;
}

struct ms_group *ms_group_add(struct ms_stream *s, const char *name, size_t len) {
  int found;
  size_t i = group_slot(s, name, len, &found);
  if (found) return NULL;
  struct ms_group *g = mr_alloc(sizeof *g);
  g->name = mr_memdup(name, len);
  g->len = len;
  g->entries_read = -1;
  if (s->ngroups == s->gcap) {
    s->gcap = s->gcap ? s->gcap * 2 : 4;
    s->groups = mr_realloc(s->groups, s->gcap * sizeof *s->groups);
  }
  memmove(s->groups + i + 1, s->groups + i, (s->ngroups - i) * sizeof *s->groups);
  s->groups[i] = g;
  s->ngroups++;
  return g;
}

static void consumer_free(struct ms_consumer *c) {
  free(c->name);
  free(c);
}

static void group_free(struct ms_group *g) {
  for (size_t i = 0; i < g->ncons; i++) consumer_free(g->cons[i]);
  free(g->cons);
  free(g->pel);
  free(g->name);
  free(g);
}

static size_t consumer_slot(struct ms_group *g, const char *name, size_t len, int *found) {
  size_t i = 0;
  *found = 0;
  for (; i < g->ncons; i++) {
    int c = ms_bytecmp(g->cons[i]->name, g->cons[i]->len, name, len);
    if (c == 0) *found = 1;
    if (c >= 0) break;
  }
  return i;
}

struct ms_consumer *ms_consumer_find(struct ms_group *g, const char *name, size_t len) {
  int found;
  size_t i = consumer_slot(g, name, len, &found);
  return found ? g->cons[i] : NULL;
}

struct ms_consumer *ms_consumer_get(struct ms_group *g, const char *name, size_t len, uint64_t now,
                                    int *created) {
  int found;
  size_t i = consumer_slot(g, name, len, &found);
  if (created) *created = !found;
  if (found) return g->cons[i];
  struct ms_consumer *c = mr_alloc(sizeof *c);
  c->name = mr_memdup(name, len);
  c->len = len;
  c->seen_time = now;
  c->active_time = -1;
  if (g->ncons == g->conscap) {
    g->conscap = g->conscap ? g->conscap * 2 : 4;
    g->cons = mr_realloc(g->cons, g->conscap * sizeof *g->cons);
  }
  memmove(g->cons + i + 1, g->cons + i, (g->ncons - i) * sizeof *g->cons);
  g->cons[i] = c;
  g->ncons++;
  return c;
}

size_t ms_pel_slot(const struct ms_group *g, msid id) {
  size_t lo = 0, hi = g->npel;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ms_idcmp(g->pel[mid].id, id) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct ms_nack *ms_nack_find(struct ms_group *g, msid id) {
  size_t i = ms_pel_slot(g, id);
  return i < g->npel && ms_idcmp(g->pel[i].id, id) == 0 ? &g->pel[i] : NULL;
}

struct ms_nack *ms_nack_add(struct ms_group *g, msid id) {
  size_t i = ms_pel_slot(g, id);
  if (g->npel == g->pelcap) {
    g->pelcap = g->pelcap ? g->pelcap * 2 : 16;
    g->pel = mr_realloc(g->pel, g->pelcap * sizeof *g->pel);
  }
  memmove(g->pel + i + 1, g->pel + i, (g->npel - i) * sizeof *g->pel);
  g->npel++;
  memset(&g->pel[i], 0, sizeof g->pel[i]);
  g->pel[i].id = id;
  return &g->pel[i];
}

void ms_nack_del(struct ms_group *g, struct ms_nack *n) {
  size_t i = (size_t)(n - g->pel);
  memmove(g->pel + i, g->pel + i + 1, (g->npel - i - 1) * sizeof *g->pel);
  g->npel--;
}

long long ms_consumer_pending(const struct ms_group *g, const struct ms_consumer *c) {
  long long n = 0;
  for (size_t i = 0; i < g->npel; i++) n += g->pel[i].owner == c;
  return n;
}

/* ---- entries_read and lag (the 8.x rules) ---- */

/* Is there an XDEL tombstone at or after start inside the stream? */
static bool tombstones_after(const struct ms_stream *s, msid start) {
  if (s->n == 0 || ms_id_is_zero(s->max_deleted)) return false;
  if (ms_idcmp(ms_first_id(s), s->max_deleted) > 0) return false;
  return ms_idcmp(start, s->max_deleted) <= 0;
}

/* How many entries were added up to id, if that can be known; else -1. */
static long long estimate_read(const struct ms_stream *s, msid id) {
  if (s->entries_added == 0) return 0;
  if (s->n == 0 && ms_idcmp(id, s->last_id) <= 0) return (long long)s->entries_added;
  int cmp_last = ms_idcmp(id, s->last_id);
  if (cmp_last == 0) return (long long)s->entries_added;
  if (cmp_last > 0) return -1;
  msid first = ms_first_id(s);
  int cmp_first = ms_idcmp(id, first);
  if (ms_id_is_zero(s->max_deleted) || ms_idcmp(s->max_deleted, first) < 0) {
    if (cmp_first < 0) return (long long)(s->entries_added - s->n);
    if (cmp_first == 0) return (long long)(s->entries_added - s->n + 1);
  }
  return -1;
}

/* a + b as Redis computes it: signed overflow wraps around there. */
static long long wrap_add(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}

static long long wrap_sub(long long a, long long b) {
  return (long long)((unsigned long long)a - (unsigned long long)b);
}

void ms_group_delivered(struct ms_stream *s, struct ms_group *g, msid id) {
  if (ms_idcmp(id, g->last_id) <= 0) return;
  if (g->entries_read != -1 && !tombstones_after(s, id))
    g->entries_read = wrap_add(g->entries_read, 1); /* ENTRIESREAD may have set it to LLONG_MAX */
  else if (s->entries_added)
    g->entries_read = estimate_read(s, id);
  g->last_id = id;
}

/* -1 stands for nil. */
long long ms_group_lag(const struct ms_stream *s, const struct ms_group *g, bool v80, bool *valid) {
  *valid = true;
  if (s->entries_added == 0) return 0;
  if (v80) {
    /* 8.0's fixes: an emptied stream lags 0, and a group behind the first
     * entry, every tombstone being before it too, lags by the length. 7.0
     * goes on to entries_added - entries_read, which leaves a lag on an
     * empty stream and can be negative after ENTRIESREAD (checked live). */
    msid first = ms_first_id(s);
    if (s->n == 0) return 0;
    if (ms_idcmp(g->last_id, first) < 0 && ms_idcmp(s->max_deleted, first) < 0)
      return (long long)s->n;
  }
  if (g->entries_read != -1 && !tombstones_after(s, g->last_id))
    return wrap_sub((long long)s->entries_added, g->entries_read);
  long long read = estimate_read(s, g->last_id);
  if (read == -1) {
    *valid = false;
    return 0;
  }
  return (long long)s->entries_added - read;
}

void ms_group_remove(struct ms_stream *s, struct ms_group *g) {
  size_t i = 0;
  while (s->groups[i] != g) i++;
  memmove(s->groups + i, s->groups + i + 1, (s->ngroups - i - 1) * sizeof *s->groups);
  s->ngroups--;
  group_free(g);
}

void ms_groups_free(struct ms_stream *s) {
  for (size_t i = 0; i < s->ngroups; i++) group_free(s->groups[i]);
  free(s->groups);
  s->groups = NULL;
  s->ngroups = s->gcap = 0;
}

long long ms_consumer_del(struct ms_group *g, const char *name, size_t len) {
  int found;
  size_t ci = consumer_slot(g, name, len, &found);
  if (!found) return -1;
  struct ms_consumer *victim = g->cons[ci];
  long long pending = 0;
  for (size_t i = 0; i < g->npel;) {
    if (g->pel[i].owner == victim) {
      ms_nack_del(g, &g->pel[i]);
      pending++;
    } else {
      i++;
    }
  }
  memmove(g->cons + ci, g->cons + ci + 1, (g->ncons - ci - 1) * sizeof *g->cons);
  g->ncons--;
  consumer_free(victim);
  return pending;
}
