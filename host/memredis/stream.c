/* stream: entries, nodes and trimming of one stream (see stream.h). */
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#include "memreply.h"

enum { FLAG_DELETED = 1, FLAG_SAMEFIELDS = 2 }; /* an entry's flags in its listpack */

/* ---- listpack sizes (Redis 7.0's listpack.c) ---- */

static size_t lp_backlen(size_t l) {
  return l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
}

static size_t lp_int(long long v) {
  size_t enc = v >= 0 && v <= 127                        ? 1
               : v >= -4096 && v <= 4095                 ? 2
               : v >= -32768 && v <= 32767               ? 3
               : v >= -8388608 && v <= 8388607           ? 4
               : v >= -2147483648LL && v <= 2147483647LL ? 5
                                                         : 9;
  return enc + lp_backlen(enc);
}

/* A string element: stored as an integer when it reads as one. */
static size_t lp_str(const char *s, size_t len) {
  long long v;
  if (ms_parse_ll(s, len, &v)) return lp_int(v);
  size_t enc = len < 64 ? 1 + len : len < 4096 ? 2 + len : 5 + len;
  return enc + lp_backlen(enc);
}

#define LP_EMPTY 7 /* header and terminator */

/* ---- entries ---- */

static void entry_free(struct ms_entry *e) {
  for (size_t i = 0; i < e->nvals; i++) free(e->val[i]);
  free(e->val);
  free(e->vlen);
  free(e);
}

static void node_clear(struct ms_node *nd) {
  for (size_t i = 0; i < nd->nfields; i++) free(nd->field[i]);
  free(nd->field);
  free(nd->flen);
}

struct ms_stream *ms_stream_new(void) {
  return mr_alloc(sizeof(struct ms_stream));
}

void ms_stream_free(struct ms_stream *s) {
  for (size_t i = 0; i < s->n; i++) entry_free(s->e[i]);
  for (size_t i = 0; i < s->nnodes; i++) node_clear(&s->nodes[i]);
  free(s->e);
  free(s->nodes);
  free(s->groups);
  free(s);
}

size_t ms_lower_bound(const struct ms_stream *s, msid id) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ms_idcmp(s->e[mid]->id, id) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct ms_entry *ms_find_entry(const struct ms_stream *s, msid id) {
  size_t i = ms_lower_bound(s, id);
  return i < s->n && ms_idcmp(s->e[i]->id, id) == 0 ? s->e[i] : NULL;
}

msid ms_first_id(const struct ms_stream *s) {
  msid zero = {0, 0};
  return s->n ? s->e[0]->id : zero;
}

msid ms_last_valid_id(const struct ms_stream *s) {
  msid zero = {0, 0};
  return s->n ? s->e[s->n - 1]->id : zero;
}

bk_reply *ms_reply_fields(const struct ms_entry *e) {
  bk_reply *a = mr_arr();
  for (size_t i = 0; i < e->nvals; i++) mr_push(a, mr_bulk(e->val[i], e->vlen[i]));
  return a;
}

bk_reply *ms_reply_entry(const struct ms_entry *e) {
  bk_reply *a = mr_arr();
  mr_push(a, ms_reply_id(e->id));
  return mr_push(a, ms_reply_fields(e));
}

/* ---- nodes ---- */

static size_t node_index(const struct ms_stream *s, uint64_t no) {
  size_t i = 0;
  while (i < s->nnodes && s->nodes[i].no != no) i++;
  return i;
}

static void node_remove(struct ms_stream *s, size_t j) {
  node_clear(&s->nodes[j]);
  memmove(s->nodes + j, s->nodes + j + 1, (s->nnodes - j - 1) * sizeof *s->nodes);
  s->nnodes--;
}

/* Opens a node whose master entry holds the field names of vals. */
static struct ms_node *node_open(struct ms_stream *s, msid id, int nvals, const char **vals,
                                 const size_t *lens) {
  if (s->nnodes == s->nodecap) {
    s->nodecap = s->nodecap ? s->nodecap * 2 : 4;
    s->nodes = mr_realloc(s->nodes, s->nodecap * sizeof *s->nodes);
  }
  struct ms_node *nd = &s->nodes[s->nnodes++];
  memset(nd, 0, sizeof *nd);
  nd->no = ++s->node_seq;
  nd->master = id;
  nd->nfields = (size_t)nvals / 2;
  nd->field = mr_alloc(nd->nfields * sizeof *nd->field);
  nd->flen = mr_alloc(nd->nfields * sizeof *nd->flen);
  /* count, deleted, number of master fields, the fields, a 0 terminator */
  nd->bytes = LP_EMPTY + lp_int(1) + lp_int(0) + lp_int((long long)nd->nfields) + lp_int(0);
  for (size_t i = 0; i < nd->nfields; i++) {
    nd->field[i] = mr_memdup(vals[2 * i], lens[2 * i]);
    nd->flen[i] = lens[2 * i];
    nd->bytes += lp_str(vals[2 * i], lens[2 * i]);
  }
  return nd;
}

static bool same_fields(const struct ms_node *nd, int nvals, const char **vals,
                        const size_t *lens) {
  if ((size_t)nvals / 2 != nd->nfields) return false;
  for (size_t i = 0; i < nd->nfields; i++)
    if (ms_bytecmp(nd->field[i], nd->flen[i], vals[2 * i], lens[2 * i]) != 0) return false;
  return true;
}

void ms_stream_append(struct ms_stream *s, msid id, int nvals, const char **vals,
                      const size_t *lens) {
  size_t totelelen = 0;
  for (int i = 0; i < nvals; i++) totelelen += lens[i];
  struct ms_node *nd = s->nnodes ? &s->nodes[s->nnodes - 1] : NULL;
  if (nd &&
      (nd->bytes + totelelen >= MS_NODE_MAX_BYTES || nd->live + nd->deleted >= MS_NODE_MAX_ENTRIES))
    nd = NULL;
  bool same = true;
  if (nd == NULL)
    nd = node_open(s, id, nvals, vals, lens);
  else
    same = same_fields(nd, nvals, vals, lens);
  long long nfields = nvals / 2;
  nd->bytes += lp_int(same ? FLAG_SAMEFIELDS : 0) + lp_int((long long)(id.ms - nd->master.ms)) +
               lp_int((long long)(id.seq - nd->master.seq));
  if (!same) nd->bytes += lp_int(nfields);
  for (int i = 0; i < nvals; i++)
    if (!same || i % 2) nd->bytes += lp_str(vals[i], lens[i]);
  nd->bytes += lp_int(nfields + 3 + (same ? 0 : nfields + 1)); /* lp-count */
  nd->live++;
  nd->last = id;

  struct ms_entry *e = mr_alloc(sizeof *e);
  e->id = id;
  e->node = nd->no;
  e->nvals = (size_t)nvals;
  e->val = mr_alloc((size_t)nvals * sizeof *e->val);
  e->vlen = mr_alloc((size_t)nvals * sizeof *e->vlen);
  for (int i = 0; i < nvals; i++) {
    e->val[i] = mr_memdup(vals[i], lens[i]);
    e->vlen[i] = lens[i];
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->e = mr_realloc(s->e, s->cap * sizeof *s->e);
  }
  s->e[s->n++] = e;
  s->last_id = id;
  s->entries_added++;
}

/* Drops entries [from, from + count) from the array (their nodes are the
 * caller's business). */
static void drop_entries(struct ms_stream *s, size_t from, size_t count) {
  for (size_t i = from; i < from + count; i++) entry_free(s->e[i]);
  memmove(s->e + from, s->e + from + count, (s->n - from - count) * sizeof *s->e);
  s->n -= count;
}

bool ms_stream_delete(struct ms_stream *s, msid id) {
  size_t i = ms_lower_bound(s, id);
  if (i == s->n || ms_idcmp(s->e[i]->id, id) != 0) return false;
  size_t j = node_index(s, s->e[i]->node);
  drop_entries(s, i, 1);
  if (--s->nodes[j].live == 0)
    node_remove(s, j); /* its last live entry: the whole node goes */
  else
    s->nodes[j].deleted++;
  if (ms_idcmp(id, s->max_deleted) > 0) s->max_deleted = id;
  return true;
}

/* streamTrim: whole nodes from the head while the rule allows (a node goes
 * if the stream keeps MAXLEN entries without it, or if its last id, deleted
 * or not, is below MINID), LIMIT stopping before a node that would take the
 * count past it; then, unless `~`, entries of the next node, which stays
 * even if none of its entries is left. */
long long ms_stream_trim(struct ms_stream *s, const struct ms_trim *t) {
  long long deleted = 0;
  long long limit = t->limit;
  if (t->strategy == 0) return 0;
  while (s->nnodes) {
    if (t->strategy == 1 && (long long)s->n <= t->maxlen) break;
    struct ms_node *nd = &s->nodes[0];
    long long entries = (long long)nd->live;
    if (limit && deleted + entries > limit) break;
    bool whole = t->strategy == 1 ? (long long)s->n - entries >= t->maxlen
                                  : ms_idcmp(nd->last, t->minid) < 0;
    if (whole) {
      drop_entries(s, 0, nd->live);
      node_remove(s, 0);
      deleted += entries;
      continue;
    }
    if (t->approx) break;
    size_t k = 0;
    while (k < nd->live && (t->strategy == 1 ? (long long)(s->n - k) > t->maxlen
                                             : ms_idcmp(s->e[k]->id, t->minid) < 0))
      k++;
    drop_entries(s, 0, k);
    nd->live -= k;
    nd->deleted += k;
    deleted += (long long)k;
    break;
  }
  return deleted;
}
