/* cmd_hash: the hash commands of the in-memory server: HSET (several
 * pairs), HSETNX, HGET, HMGET, HGETALL, HINCRBY, HDEL, HEXISTS, HLEN.
 * Parsing, the order of the checks and the error texts follow Redis 7.0's
 * t_hash.c; HGETALL lists fields in insertion order, as Redis does for a
 * hash small enough for a listpack (hash.h). A hash that empties is
 * deleted. */
#include <limits.h>
#include <stdio.h>

#include "commands.h"
#include "memreply.h"

#define KEY c->argv[1], c->argvlen[1]

/* HSET key field value [field value ...]: how many fields are new. */
bk_reply *ms_cmd_hset(struct memdb *db, struct ms_call *c) {
  if (c->argc % 2 == 1) return ms_err_arity("hset");
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_create(db, KEY);
  long long added = 0;
  for (int i = 2; i < c->argc; i += 2)
    added += ms_hash_set(h, c->argv[i], c->argvlen[i], c->argv[i + 1], c->argvlen[i + 1]);
  return mr_int(added);
}

bk_reply *ms_cmd_hsetnx(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_create(db, KEY);
  if (ms_hash_get(h, c->argv[2], c->argvlen[2])) return mr_int(0);
  ms_hash_set(h, c->argv[2], c->argvlen[2], c->argv[3], c->argvlen[3]);
  return mr_int(1);
}

bk_reply *ms_cmd_hget(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  struct ms_hfield *e = h ? ms_hash_get(h, c->argv[2], c->argvlen[2]) : NULL;
  return e ? mr_bulk(e->v, e->vlen) : mr_nil();
}

bk_reply *ms_cmd_hmget(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  bk_reply *a = mr_arr();
  for (int i = 2; i < c->argc; i++) {
    struct ms_hfield *e = h ? ms_hash_get(h, c->argv[i], c->argvlen[i]) : NULL;
    mr_push(a, e ? mr_bulk(e->v, e->vlen) : mr_nil());
  }
  return a;
}

bk_reply *ms_cmd_hgetall(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  bk_reply *a = mr_arr();
  for (size_t i = 0; h && i < h->n; i++) {
    mr_push(a, mr_bulk(h->v[i].f, h->v[i].flen));
    mr_push(a, mr_bulk(h->v[i].v, h->v[i].vlen));
  }
  return a;
}

/* HINCRBY key field increment: the increment is parsed before the key's
 * type is looked at; a field that holds no integer, or a sum out of the
 * 64-bit range, is an error and changes nothing. */
bk_reply *ms_cmd_hincrby(struct memdb *db, struct ms_call *c) {
  long long incr, cur = 0;
  if (!ms_parse_ll(c->argv[3], c->argvlen[3], &incr)) return ms_err_int();
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  struct ms_hfield *e = h ? ms_hash_get(h, c->argv[2], c->argvlen[2]) : NULL;
  if (e && !ms_parse_ll(e->v, e->vlen, &cur)) return mr_err("ERR hash value is not an integer");
  if ((incr < 0 && cur < 0 && incr < LLONG_MIN - cur) ||
      (incr > 0 && cur > 0 && incr > LLONG_MAX - cur))
    return mr_err("ERR increment or decrement would overflow");
  cur += incr;
  char buf[24];
  int n = snprintf(buf, sizeof buf, "%lld", cur);
  if (h == NULL) h = ms_hash_create(db, KEY);
  ms_hash_set(h, c->argv[2], c->argvlen[2], buf, (size_t)n);
  return mr_int(cur);
}

bk_reply *ms_cmd_hdel(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  long long removed = 0;
  for (int i = 2; h && i < c->argc; i++) {
    removed += ms_hash_del(h, c->argv[i], c->argvlen[i]);
    if (h->n == 0) {
      ms_key_delete(db, KEY);
      h = NULL;
    }
  }
  return mr_int(removed);
}

bk_reply *ms_cmd_hexists(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  return mr_int(h && ms_hash_get(h, c->argv[2], c->argvlen[2]));
}

bk_reply *ms_cmd_hlen(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_HASH);
  if (err) return err;
  struct ms_hash *h = ms_hash_lookup(db, KEY);
  return mr_int(h ? (long long)h->n : 0);
}
