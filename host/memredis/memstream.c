/* memstream: the keyspace, stream IDs and entries of the in-memory server,
 * and the stream-level commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM,
 * XINFO STREAM, and the keyspace ones: DEL, EXISTS, TYPE, FLUSHALL. Replies and error texts follow
 * redis-streams.md word for word; see memstream.h for the data model. */
#include "memstream.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memreply.h"

#define TRIM_DEFAULT_LIMIT (100 * MS_NODE_ENTRIES) /* 100 x stream-node-max-entries */

/* ---- keyspace ---- */

void memdb_init(struct memdb *db, const char *version) {
  memset(db, 0, sizeof *db);
  memdb_set_version(db, version);
}

void memdb_set_version(struct memdb *db, const char *version) {
  if (version == NULL) version = "8.4.0";
  snprintf(db->version_text, sizeof db->version_text, "%s", version);
  db->version = bk_version_parse(version, strlen(version));
}

static void entry_free(struct ms_entry *e) {
  for (size_t i = 0; i < e->nvals; i++) free(e->val[i]);
  free(e->val);
  free(e->vlen);
  free(e);
}

static void stream_free(struct ms_stream *s) {
  for (size_t i = 0; i < s->n; i++) entry_free(s->e[i]);
  for (size_t i = 0; i < s->ngroups; i++) ms_group_free(s->groups[i]);
  free(s->e);
  free(s->nodes);
  free(s->groups);
  free(s->key);
  free(s);
}

void memdb_free(struct memdb *db) {
  for (size_t i = 0; i < db->nkeys; i++) stream_free(db->keys[i]);
  while (db->nzsets) ms_zset_delete(db, db->zsets[0]->key, db->zsets[0]->keylen);
  memstring_free_all(db);
  for (size_t i = 0; i < db->nsig; i++) free(db->sig[i]);
  free(db->keys);
  free(db->zsets);
  free(db->sig);
  free(db->siglen);
  memset(db, 0, sizeof *db);
}

int ms_bytecmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

/* Index of key, or of where it would go (*found = 0). */
static size_t key_slot(struct memdb *db, const char *key, size_t len, int *found) {
  size_t lo = 0, hi = db->nkeys;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = ms_bytecmp(db->keys[mid]->key, db->keys[mid]->keylen, key, len);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = 0;
  return lo;
}

struct ms_stream *ms_lookup(struct memdb *db, const char *key, size_t len) {
  int found;
  size_t i = key_slot(db, key, len, &found);
  return found ? db->keys[i] : NULL;
}

struct ms_stream *ms_create(struct memdb *db, const char *key, size_t len) {
  int found;
  size_t i = key_slot(db, key, len, &found);
  if (found) return db->keys[i];
  if (ms_zset_lookup(db, key, len)) {
    fprintf(stderr, "memstream: stream created over the sorted set '%.*s'\n", (int)len, key);
    abort();
  }
  struct ms_stream *s = mr_alloc(sizeof *s);
  s->key = mr_memdup(key, len);
  s->keylen = len;
  if (db->nkeys == db->cap) {
    db->cap = db->cap ? db->cap * 2 : 8;
    db->keys = mr_realloc(db->keys, db->cap * sizeof *db->keys);
  }
  memmove(db->keys + i + 1, db->keys + i, (db->nkeys - i) * sizeof *db->keys);
  db->keys[i] = s;
  db->nkeys++;
  return s;
}

static int delete_key(struct memdb *db, const char *key, size_t len) {
  int found;
  size_t i = key_slot(db, key, len, &found);
  if (!found) return 0;
  ms_signal(db, key, len); /* blocked readers learn the key is gone */
  stream_free(db->keys[i]);
  memmove(db->keys + i, db->keys + i + 1, (db->nkeys - i - 1) * sizeof *db->keys);
  db->nkeys--;
  return 1;
}

enum ms_type ms_key_type(struct memdb *db, const char *key, size_t len) {
  if (ms_lookup(db, key, len)) return MS_STREAM;
  if (ms_string_lookup(db, key, len)) return MS_STRING;
  return ms_zset_lookup(db, key, len) ? MS_ZSET : MS_NONE;
}

bk_reply *ms_check_type(struct memdb *db, const char *key, size_t len, enum ms_type want) {
  enum ms_type t = ms_key_type(db, key, len);
  return t == MS_NONE || t == want ? NULL : ms_err_wrongtype();
}

void ms_signal(struct memdb *db, const char *key, size_t len) {
  for (size_t i = 0; i < db->nsig; i++)
    if (ms_bytecmp(db->sig[i], db->siglen[i], key, len) == 0) return;
  if (db->nsig == db->sigcap) {
    db->sigcap = db->sigcap ? db->sigcap * 2 : 8;
    db->sig = mr_realloc(db->sig, db->sigcap * sizeof *db->sig);
    db->siglen = mr_realloc(db->siglen, db->sigcap * sizeof *db->siglen);
  }
  db->sig[db->nsig] = mr_memdup(key, len);
  db->siglen[db->nsig++] = len;
}

char *memdb_pop_signal(struct memdb *db, size_t *len) {
  if (db->nsig == 0) return NULL;
  char *k = db->sig[0];
  *len = db->siglen[0];
  db->nsig--;
  memmove(db->sig, db->sig + 1, db->nsig * sizeof *db->sig);
  memmove(db->siglen, db->siglen + 1, db->nsig * sizeof *db->siglen);
  return k;
}

/* ---- ids and arguments ---- */

int ms_idcmp(msid a, msid b) {
  if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
  if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
  return 0;
}

bool ms_arg_is(const struct ms_call *c, int i, const char *word) {
  size_t n = strlen(word);
  return i < c->argc && c->argvlen[i] == n && strncasecmp(c->argv[i], word, n) == 0;
}

bool ms_parse_ll(const char *s, size_t len, long long *out) {
  size_t i = 0;
  int neg = 0;
  unsigned long long v = 0;
  if (len == 0 || len > 20) return false;
  if (len == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  if (s[0] == '-') {
    neg = 1;
    i++;
    if (i == len) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false; /* no leading zeros, no "-0" */
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10) return false;
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (neg) {
    if (v > (unsigned long long)LLONG_MAX + 1) return false;
    *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
  } else {
    if (v > LLONG_MAX) return false;
    *out = (long long)v;
  }
  return true;
}

/* Redis' string2ull: its strict integer syntax first, then strtoull, so
 * "01", "+3" and " 5" pass while "-5" does not (but " -5" wraps around, as
 * strtoull has it). s is NUL-terminated. */
static bool string2ull(const char *s, uint64_t *out) {
  long long ll;
  if (ms_parse_ll(s, strlen(s), &ll)) {
    if (ll < 0) return false;
    *out = (uint64_t)ll;
    return true;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == EINVAL || errno == ERANGE || !(*s != '\0' && *end == '\0')) return false;
  *out = v;
  return true;
}

/* streamGenericParseIDOrReply, step by step: a C string of at most 127
 * bytes (an embedded NUL ends it), split at the first '-'. */
bool ms_parse_id(const char *s, size_t len, msid *out, uint64_t missing_seq, bool strict,
                 bool *seq_star) {
  char buf[128];
  if (seq_star) *seq_star = false;
  if (len > sizeof buf - 1) return false;
  memcpy(buf, s, len);
  buf[len] = '\0';
  if ((buf[0] == '-' || buf[0] == '+') && buf[1] == '\0') {
    if (strict) return false;
    out->ms = out->seq = buf[0] == '-' ? 0 : UINT64_MAX;
    return true;
  }
  char *dash = strchr(buf, '-');
  if (dash) *dash = '\0';
  if (!string2ull(buf, &out->ms)) return false;
  if (dash == NULL) {
    out->seq = missing_seq;
    return true;
  }
  if (seq_star && strcmp(dash + 1, "*") == 0) {
    out->seq = 0;
    *seq_star = true;
    return true;
  }
  return string2ull(dash + 1, &out->seq);
}

bool ms_parse_range_id(const char *s, size_t len, msid *out, bool *excl, uint64_t missing_seq) {
  *excl = len > 1 && s[0] == '(';
  if (*excl) return ms_parse_id(s + 1, len - 1, out, missing_seq, true, NULL);
  return ms_parse_id(s, len, out, missing_seq, false, NULL);
}

bool ms_id_incr(msid *id) {
  if (id->seq == UINT64_MAX) {
    if (id->ms == UINT64_MAX) return false;
    id->ms++;
    id->seq = 0;
  } else {
    id->seq++;
  }
  return true;
}

bool ms_id_decr(msid *id) {
  if (id->seq == 0) {
    if (id->ms == 0) return false;
    id->ms--;
    id->seq = UINT64_MAX;
  } else {
    id->seq--;
  }
  return true;
}

bk_reply *ms_err_syntax(void) { return mr_err("ERR syntax error"); }
bk_reply *ms_err_int(void) { return mr_err("ERR value is not an integer or out of range"); }
bk_reply *ms_err_wrongtype(void) {
  return mr_err("WRONGTYPE Operation against a key holding the wrong kind of value");
}
bk_reply *ms_err_badid(void) {
  return mr_err("ERR Invalid stream ID specified as stream command argument");
}

static bk_reply *err_arity(const char *cmd) {
  return mr_err("ERR wrong number of arguments for '%s' command", cmd);
}

bk_reply *ms_reply_id(msid id) {
  char buf[48];
  int n = snprintf(buf, sizeof buf, "%llu-%llu", (unsigned long long)id.ms,
                   (unsigned long long)id.seq);
  return mr_bulk(buf, (size_t)n);
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

/* ---- entries ---- */

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

/* Drops the nodes left without a live entry (nodes and entries are both in
 * id order). */
static void prune_nodes(struct ms_stream *s) {
  size_t kept = 0, i = 0;
  for (size_t j = 0; j < s->nnodes; j++) {
    while (i < s->n && s->e[i]->node < s->nodes[j].no) i++;
    if (i < s->n && s->e[i]->node == s->nodes[j].no) s->nodes[kept++] = s->nodes[j];
  }
  s->nnodes = kept;
}

static void remove_entries(struct ms_stream *s, size_t from, size_t count) {
  for (size_t i = from; i < from + count; i++) entry_free(s->e[i]);
  memmove(s->e + from, s->e + from + count, (s->n - from - count) * sizeof *s->e);
  s->n -= count;
  prune_nodes(s);
}

/* Appends e to the last node, or to a new one when there is none or it is
 * full. */
static void place_in_node(struct ms_stream *s, struct ms_entry *e) {
  struct ms_node *tail = s->nnodes ? &s->nodes[s->nnodes - 1] : NULL;
  if (tail == NULL || tail->fill >= MS_NODE_ENTRIES) {
    if (s->nnodes == s->nodecap) {
      s->nodecap = s->nodecap ? s->nodecap * 2 : 4;
      s->nodes = mr_realloc(s->nodes, s->nodecap * sizeof *s->nodes);
    }
    tail = &s->nodes[s->nnodes++];
    memset(tail, 0, sizeof *tail);
    tail->no = ++s->node_seq;
  }
  tail->fill++;
  tail->last = e->id;
  e->node = tail->no;
}

/* ---- trimming (XADD and XTRIM) ---- */

struct trim_args {
  int strategy;        /* 0 none, 1 MAXLEN, 2 MINID */
  bool approx;         /* ~ */
  long long maxlen;
  msid minid;
  long long limit;     /* entries; 0 no limit */
  bool nomkstream;     /* XADD only */
  bool id_given, seq_star;
  msid id;
};

/* Parses trimming options from argv[i]; for XADD also NOMKSTREAM and the ID.
 * Returns the index after the ID (XADD) or argc, or -1 with *err set. */
static int parse_trim(const struct ms_call *c, int i, bool xadd, struct trim_args *t,
                      bk_reply **err) {
  bool limit_given = false;
  memset(t, 0, sizeof *t);
  for (; i < c->argc; i++) {
    int more = c->argc - 1 - i;
    const char *o = c->argv[i];
    size_t olen = c->argvlen[i];
    if (xadd && olen == 1 && o[0] == '*') {
      i++;
      goto done;
    } else if ((ms_arg_is(c, i, "MAXLEN") || ms_arg_is(c, i, "MINID")) && more) {
      bool maxlen = ms_arg_is(c, i, "MAXLEN");
      if (t->strategy) {
        *err = mr_err("ERR syntax error, MAXLEN and MINID options at the same time are not "
                      "compatible");
        return -1;
      }
      t->approx = false;
      const char *op = c->argv[i + 1];
      if (more >= 2 && c->argvlen[i + 1] == 1 && (op[0] == '~' || op[0] == '=')) {
        t->approx = op[0] == '~';
        i++;
      }
      i++;
      if (maxlen) {
        if (!ms_parse_ll(c->argv[i], c->argvlen[i], &t->maxlen)) {
          *err = ms_err_int();
          return -1;
        }
        if (t->maxlen < 0) {
          *err = mr_err("ERR The MAXLEN argument must be >= 0.");
          return -1;
        }
        t->strategy = 1;
      } else {
        if (!ms_parse_id(c->argv[i], c->argvlen[i], &t->minid, 0, true, NULL)) {
          *err = ms_err_badid();
          return -1;
        }
        t->strategy = 2;
      }
    } else if (ms_arg_is(c, i, "LIMIT") && more) {
      i++;
      if (!ms_parse_ll(c->argv[i], c->argvlen[i], &t->limit)) {
        *err = ms_err_int();
        return -1;
      }
      if (t->limit < 0) {
        *err = mr_err("ERR The LIMIT argument must be >= 0.");
        return -1;
      }
      limit_given = true;
    } else if (xadd && ms_arg_is(c, i, "NOMKSTREAM")) {
      t->nomkstream = true;
    } else if (xadd) {
      /* The first token that is no option is the ID. */
      if (!ms_parse_id(o, olen, &t->id, 0, true, &t->seq_star)) {
        *err = ms_err_badid();
        return -1;
      }
      t->id_given = true;
      i++;
      goto done;
    } else {
      *err = ms_err_syntax();
      return -1;
    }
  }
done:
  if (limit_given && t->strategy == 0) {
    *err = mr_err("ERR syntax error, LIMIT cannot be used without specifying a trimming "
                  "strategy");
    return -1;
  }
  if (!xadd && t->strategy == 0) {
    *err = ms_err_syntax();
    return -1;
  }
  if (limit_given && !t->approx) {
    *err = mr_err("ERR syntax error, LIMIT cannot be used without the special ~ option");
    return -1;
  }
  if (!limit_given) t->limit = t->approx ? TRIM_DEFAULT_LIMIT : 0;
  return i;
}

/* Exact trimming removes entry by entry. `~` removes only whole nodes from
 * the head (see ms_node), as Redis does: a node goes if the stream keeps
 * MAXLEN entries without it, or if its last id is below MINID, and LIMIT
 * stops before a node that would take the count past it. So a small stream
 * usually keeps everything. Returns the number removed. */
static long long trim(struct ms_stream *s, const struct trim_args *t) {
  size_t removable = 0;
  if (!t->approx && t->strategy == 1) {
    if ((long long)s->n > t->maxlen) removable = s->n - (size_t)t->maxlen;
  } else if (!t->approx) {
    removable = ms_lower_bound(s, t->minid);
  } else {
    size_t i = 0;
    for (size_t j = 0; j < s->nnodes; j++) {
      size_t live = 0;
      while (i + live < s->n && s->e[i + live]->node == s->nodes[j].no) live++;
      if (t->limit && removable + live > (size_t)t->limit) break;
      bool whole = t->strategy == 1 ? (long long)(s->n - removable - live) >= t->maxlen
                                    : ms_idcmp(s->nodes[j].last, t->minid) < 0;
      if (!whole) break;
      removable += live;
      i += live;
    }
  }
  remove_entries(s, 0, removable);
  return (long long)removable;
}

/* ---- XADD ---- */

/* XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT n]] <*|id> field value ... */
bk_reply *ms_cmd_xadd(struct memdb *db, struct ms_call *c) {
  struct trim_args t;
  bk_reply *err = NULL;
  int fields = parse_trim(c, 2, true, &t, &err);
  if (fields < 0) return err;
  int nvals = c->argc - fields;
  if (nvals < 2 || nvals % 2) return err_arity("xadd");
  if (t.id_given && !t.seq_star && t.id.ms == 0 && t.id.seq == 0)
    return mr_err("ERR The ID specified in XADD must be greater than 0-0");
  if ((err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM))) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) {
    if (t.nomkstream) return mr_nil();
    s = ms_create(db, c->argv[1], c->argvlen[1]);
  }
  if (s->last_id.ms == UINT64_MAX && s->last_id.seq == UINT64_MAX)
    return mr_err("ERR The stream has exhausted the last possible ID, unable to add more items");
  msid id;
  if (!t.id_given) {
    if (c->now > s->last_id.ms) {
      id.ms = c->now;
      id.seq = 0;
    } else {
      id = s->last_id;
      ms_id_incr(&id);
    }
  } else {
    id = t.id;
    if (t.seq_star) {
      if (id.ms == s->last_id.ms) {
        /* 7.0.15 forgets errno on this path and so words it as a size
         * problem (checked live); the 8.x source says "smaller". Which
         * release between fixed it is not known. */
        if (s->last_id.seq == UINT64_MAX && !MS_V80(db))
          return mr_err("ERR Elements are too large to be stored");
        if (s->last_id.seq == UINT64_MAX) goto too_small;
        id.seq = s->last_id.seq + 1;
      } else {
        id.seq = 0;
      }
    }
    if (ms_idcmp(id, s->last_id) <= 0) goto too_small;
  }
  struct ms_entry *e = mr_alloc(sizeof *e);
  e->id = id;
  e->nvals = (size_t)nvals;
  e->val = mr_alloc((size_t)nvals * sizeof *e->val);
  e->vlen = mr_alloc((size_t)nvals * sizeof *e->vlen);
  for (int i = 0; i < nvals; i++) {
    e->val[i] = mr_memdup(c->argv[fields + i], c->argvlen[fields + i]);
    e->vlen[i] = c->argvlen[fields + i];
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->e = mr_realloc(s->e, s->cap * sizeof *s->e);
  }
  s->e[s->n++] = e;
  place_in_node(s, e);
  s->last_id = id;
  s->entries_added++;
  if (t.strategy) trim(s, &t);
  ms_signal(db, s->key, s->keylen);
  return ms_reply_id(id);
too_small: /* never on a new stream: any id but 0-0 is above its 0-0 */
  return mr_err("ERR The ID specified in XADD is equal or smaller than the target stream top "
                "item");
}

/* ---- XLEN, XRANGE, XREVRANGE, XDEL, XTRIM ---- */

bk_reply *ms_cmd_xlen(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  return mr_int(s ? (long long)s->n : 0);
}

static bk_reply *range(struct memdb *db, struct ms_call *c, bool rev) {
  int si = rev ? 3 : 2, ei = rev ? 2 : 3;
  msid start, end;
  bool sx, ex;
  long long count = -1;
  if (!ms_parse_range_id(c->argv[si], c->argvlen[si], &start, &sx, 0)) return ms_err_badid();
  if (sx && !ms_id_incr(&start)) return mr_err("ERR invalid start ID for the interval");
  if (!ms_parse_range_id(c->argv[ei], c->argvlen[ei], &end, &ex, UINT64_MAX)) return ms_err_badid();
  if (ex && !ms_id_decr(&end)) return mr_err("ERR invalid end ID for the interval");
  for (int j = 4; j < c->argc; j++) {
    if (ms_arg_is(c, j, "COUNT") && j + 1 < c->argc) {
      if (!ms_parse_ll(c->argv[j + 1], c->argvlen[j + 1], &count)) return ms_err_int();
      if (count < 0) count = 0;
      j++;
    } else {
      return ms_err_syntax();
    }
  }
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) return mr_arr();
  /* COUNT 0 on an existing key is a null array, not an empty one: every
   * version so far (checked live on 7.0.15). */
  if (count == 0) return mr_nil();
  bk_reply *a = mr_arr();
  size_t lo = ms_lower_bound(s, start), hi = lo;
  while (hi < s->n && ms_idcmp(s->e[hi]->id, end) <= 0) hi++;
  for (size_t k = 0; k < hi - lo && (count < 0 || (long long)k < count); k++)
    mr_push(a, ms_reply_entry(s->e[rev ? hi - 1 - k : lo + k]));
  return a;
}

bk_reply *ms_cmd_xrange(struct memdb *db, struct ms_call *c) { return range(db, c, false); }
bk_reply *ms_cmd_xrevrange(struct memdb *db, struct ms_call *c) { return range(db, c, true); }

/* XDEL key id...: never touches a PEL; records the highest deleted id. */
bk_reply *ms_cmd_xdel(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) return mr_int(0);
  int n = c->argc - 2;
  msid *ids = mr_alloc((size_t)n * sizeof *ids);
  for (int j = 0; j < n; j++) {
    if (!ms_parse_id(c->argv[j + 2], c->argvlen[j + 2], &ids[j], 0, true, NULL)) {
      free(ids);
      return ms_err_badid(); /* all parsed before any is deleted */
    }
  }
  long long deleted = 0;
  for (int j = 0; j < n; j++) {
    size_t i = ms_lower_bound(s, ids[j]);
    if (i == s->n || ms_idcmp(s->e[i]->id, ids[j]) != 0) continue;
    remove_entries(s, i, 1);
    if (ms_idcmp(ids[j], s->max_deleted) > 0) s->max_deleted = ids[j];
    deleted++;
  }
  free(ids);
  return mr_int(deleted);
}

/* XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT n] */
bk_reply *ms_cmd_xtrim(struct memdb *db, struct ms_call *c) {
  struct trim_args t;
  bk_reply *err = NULL;
  if (parse_trim(c, 2, false, &t, &err) < 0) return err;
  if ((err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM))) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  return mr_int(s ? trim(s, &t) : 0);
}

/* ---- XINFO STREAM ---- */

bk_reply *ms_xinfo_stream(struct memdb *db, struct ms_call *c) {
  if (c->argc > 3) return ms_err_syntax(); /* FULL is not emulated */
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  if (s == NULL) return mr_err("ERR no such key");
  /* radix-tree-keys is the number of nodes; radix-tree-nodes is right for
   * up to one node (a server's count for more depends on its radix tree). */
  long long nodes = (long long)s->nnodes;
  bk_reply *a = mr_arr();
  mr_push(a, mr_str("length"));
  mr_push(a, mr_int((long long)s->n));
  mr_push(a, mr_str("radix-tree-keys"));
  mr_push(a, mr_int(nodes));
  mr_push(a, mr_str("radix-tree-nodes"));
  mr_push(a, mr_int(nodes + 1));
  mr_push(a, mr_str("last-generated-id"));
  mr_push(a, ms_reply_id(s->last_id));
  mr_push(a, mr_str("max-deleted-entry-id"));
  mr_push(a, ms_reply_id(s->max_deleted));
  mr_push(a, mr_str("entries-added"));
  mr_push(a, mr_int((long long)s->entries_added));
  mr_push(a, mr_str("recorded-first-entry-id"));
  mr_push(a, ms_reply_id(ms_first_id(s)));
  mr_push(a, mr_str("groups"));
  mr_push(a, mr_int((long long)s->ngroups));
  mr_push(a, mr_str("first-entry"));
  mr_push(a, s->n ? ms_reply_entry(s->e[0]) : mr_nil());
  mr_push(a, mr_str("last-entry"));
  mr_push(a, s->n ? ms_reply_entry(s->e[s->n - 1]) : mr_nil());
  return a;
}

/* ---- DEL, EXISTS, TYPE, FLUSHALL ---- */

bk_reply *ms_cmd_del(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++)
    n += delete_key(db, c->argv[i], c->argvlen[i]) || ms_zset_delete(db, c->argv[i], c->argvlen[i]) ||
         ms_string_delete(db, c->argv[i], c->argvlen[i]);
  return mr_int(n);
}

bk_reply *ms_cmd_exists(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++) n += ms_key_type(db, c->argv[i], c->argvlen[i]) != MS_NONE;
  return mr_int(n);
}

bk_reply *ms_cmd_type(struct memdb *db, struct ms_call *c) {
  static const char *const names[] = {"none", "stream", "zset", "string"};
  return mr_status(names[ms_key_type(db, c->argv[1], c->argvlen[1])]);
}

bk_reply *ms_cmd_flushall(struct memdb *db, struct ms_call *c) {
  if (c->argc > 2 || (c->argc == 2 && !ms_arg_is(c, 1, "ASYNC") && !ms_arg_is(c, 1, "SYNC")))
    return ms_err_syntax();
  while (db->nkeys) delete_key(db, db->keys[0]->key, db->keys[0]->keylen);
  while (db->nzsets) ms_zset_delete(db, db->zsets[0]->key, db->zsets[0]->keylen);
  memstring_free_all(db);
  return mr_status("OK");
}
