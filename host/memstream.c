/* memstream: the keyspace, stream IDs and entries of the in-memory server,
 * and the stream-level commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM,
 * XINFO STREAM, DEL, EXISTS, FLUSHALL. Replies and error texts follow
 * redis-streams.md word for word; see memstream.h for the data model. */
#include "memstream.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memreply.h"

#define TRIM_NODE 100          /* entries per "node" for approximate (~) trimming */
#define TRIM_DEFAULT_LIMIT 10000 /* 100 x stream-node-max-entries */

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
  free(s->groups);
  free(s->key);
  free(s);
}

void memdb_free(struct memdb *db) {
  for (size_t i = 0; i < db->nkeys; i++) stream_free(db->keys[i]);
  for (size_t i = 0; i < db->nsig; i++) free(db->sig[i]);
  free(db->keys);
  free(db->sig);
  free(db->siglen);
  memset(db, 0, sizeof *db);
}

static int bytecmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

/* Index of key, or of where it would go (*found = 0). */
static size_t key_slot(struct memdb *db, const char *key, size_t len, int *found) {
  size_t lo = 0, hi = db->nkeys;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = bytecmp(db->keys[mid]->key, db->keys[mid]->keylen, key, len);
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

void ms_signal(struct memdb *db, const char *key, size_t len) {
  for (size_t i = 0; i < db->nsig; i++)
    if (bytecmp(db->sig[i], db->siglen[i], key, len) == 0) return;
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

static bool parse_u64(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0) return false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  *out = v;
  return true;
}

bool ms_parse_id(const char *s, size_t len, msid *out, uint64_t missing_seq, bool strict,
                 bool *seq_star) {
  if (seq_star) *seq_star = false;
  if (len == 1 && (s[0] == '-' || s[0] == '+')) {
    if (strict) return false;
    out->ms = out->seq = s[0] == '-' ? 0 : UINT64_MAX;
    return true;
  }
  const char *dash = memchr(s, '-', len);
  if (dash == NULL) {
    out->seq = missing_seq;
    return parse_u64(s, len, &out->ms);
  }
  size_t mslen = (size_t)(dash - s), seqlen = len - mslen - 1;
  if (!parse_u64(s, mslen, &out->ms)) return false;
  if (seq_star && seqlen == 1 && dash[1] == '*') {
    out->seq = 0;
    *seq_star = true;
    return true;
  }
  return parse_u64(dash + 1, seqlen, &out->seq);
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

static void remove_entries(struct ms_stream *s, size_t from, size_t count) {
  for (size_t i = from; i < from + count; i++) entry_free(s->e[i]);
  memmove(s->e + from, s->e + from + count, (s->n - from - count) * sizeof *s->e);
  s->n -= count;
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

/* Exact trimming removes entry by entry; `~` removes only whole "nodes" of
 * TRIM_NODE entries from the head, as Redis' radix tree of listpacks does, so
 * a small stream usually keeps everything. Returns the number removed. */
static long long trim(struct ms_stream *s, const struct trim_args *t) {
  size_t removable = 0;
  if (t->strategy == 1) {
    if ((long long)s->n > t->maxlen) removable = s->n - (size_t)t->maxlen;
  } else {
    removable = ms_lower_bound(s, t->minid);
  }
  if (t->approx) removable -= removable % TRIM_NODE;
  if (t->limit && removable > (size_t)t->limit) {
    removable = (size_t)t->limit;
    if (t->approx) removable -= removable % TRIM_NODE;
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
  bk_reply *a = mr_arr();
  if (count == 0) return a;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) return a;
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
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  return mr_int(s ? trim(s, &t) : 0);
}

/* ---- XINFO STREAM ---- */

bk_reply *ms_xinfo_stream(struct memdb *db, struct ms_call *c) {
  if (c->argc > 3) return ms_err_syntax(); /* FULL is not emulated */
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  if (s == NULL) return mr_err("ERR no such key");
  /* The radix tree is emulated as one node per TRIM_NODE entries. */
  long long nodes = (long long)((s->n + TRIM_NODE - 1) / TRIM_NODE);
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

/* ---- DEL, EXISTS, FLUSHALL ---- */

bk_reply *ms_cmd_del(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++) n += delete_key(db, c->argv[i], c->argvlen[i]);
  return mr_int(n);
}

bk_reply *ms_cmd_exists(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++) n += ms_lookup(db, c->argv[i], c->argvlen[i]) != NULL;
  return mr_int(n);
}

bk_reply *ms_cmd_flushall(struct memdb *db, struct ms_call *c) {
  if (c->argc > 2 || (c->argc == 2 && !ms_arg_is(c, 1, "ASYNC") && !ms_arg_is(c, 1, "SYNC")))
    return ms_err_syntax();
  while (db->nkeys) delete_key(db, db->keys[0]->key, db->keys[0]->keylen);
  return mr_status("OK");
}
