/* cmd_string: the string commands of the in-memory server: GET, SET (NX,
 * XX, GET, EX, PX, EXAT, PXAT, KEEPTTL), GETDEL, INCR, INCRBY, DECR, DECRBY,
 * MGET, MSET, APPEND, STRLEN. Parsing, the order of the checks, the error
 * texts and what happens to a key's time to live follow Redis 7.0's
 * t_string.c (checked live against 7.0.15): SET and MSET drop it (unless
 * KEEPTTL), INCR, DECR and APPEND keep it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "memreply.h"

/* The string at argv[i] into *out (NULL when there is no key), or the
 * WRONGTYPE error. */
static bk_reply *string_at(struct memdb *db, struct ms_call *c, int i, struct ms_string **out) {
  bk_reply *err = ms_check_type(db, c->argv[i], c->argvlen[i], MS_STRING);
  if (err) return err;
  *out = ms_string_lookup(db, c->argv[i], c->argvlen[i]);
  return NULL;
}

/* Stores val at key, replacing a value of any type. keep_ttl: the key's
 * time to live stays (KEEPTTL, INCR, APPEND); otherwise it is dropped. */
static void put(struct memdb *db, const char *key, size_t len, const char *val, size_t vlen,
                bool keep_ttl) {
  uint64_t at = keep_ttl ? ms_key_expire_at(db, key, len) : 0;
  enum ms_type t = ms_key_type(db, key, len);
  if (t != MS_NONE && t != MS_STRING) ms_key_delete(db, key, len);
  struct ms_string *s = ms_string_create(db, key, len);
  char *copy = mr_memdup(val, vlen);
  free(s->val);
  s->val = copy;
  s->vlen = vlen;
  ms_key_set_expire(db, key, len, at);
}

bk_reply *ms_cmd_get(struct memdb *db, struct ms_call *c) {
  struct ms_string *s;
  bk_reply *err = string_at(db, c, 1, &s);
  if (err) return err;
  return s ? mr_bulk(s->val, s->vlen) : mr_nil();
}

enum {
  SET_NX = 1,
  SET_XX = 2,
  SET_GET = 4,
  SET_KEEPTTL = 8,
  SET_EX = 16,
  SET_PX = 32,
  SET_EXAT = 64,
  SET_PXAT = 128,
};
#define SET_UNITS (SET_EX | SET_PX | SET_EXAT | SET_PXAT)

/* The absolute expiry (Unix ms) SET's time argument names, or the error.
 * Redis refuses a non-positive time and one that overflows once converted
 * to absolute ms. */
static bk_reply *set_expire_at(struct ms_call *c, int arg, int unit, uint64_t *at) {
  long long t;
  if (!ms_parse_ll(c->argv[arg], c->argvlen[arg], &t)) return ms_err_int();
  bool seconds = unit == SET_EX || unit == SET_EXAT;
  if (t <= 0 || (seconds && t > LLONG_MAX / 1000))
    return mr_err("ERR invalid expire time in 'set' command");
  if (seconds) t *= 1000;
  if (unit == SET_EX || unit == SET_PX) {
    if (t > LLONG_MAX - (long long)c->now)
      return mr_err("ERR invalid expire time in 'set' command");
    t += (long long)c->now;
  }
  *at = (uint64_t)t;
  return NULL;
}

/* SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]. As in
 * Redis, an option may repeat (the last time wins) but NX excludes XX and
 * one kind of time excludes the others and KEEPTTL; every option is parsed
 * before the time is read, and the time before GET looks at the type. */
bk_reply *ms_cmd_set(struct memdb *db, struct ms_call *c) {
  static const struct {
    const char *word;
    int flag;
  } units[] = {{"EX", SET_EX}, {"PX", SET_PX}, {"EXAT", SET_EXAT}, {"PXAT", SET_PXAT}};
  int flags = 0, unit = 0, time_arg = -1;
  for (int j = 3; j < c->argc; j++) {
    bool has_next = j + 1 < c->argc;
    if (ms_arg_is(c, j, "NX") && !(flags & SET_XX)) {
      flags |= SET_NX;
      continue;
    }
    if (ms_arg_is(c, j, "XX") && !(flags & SET_NX)) {
      flags |= SET_XX;
      continue;
    }
    if (ms_arg_is(c, j, "GET")) {
      flags |= SET_GET;
      continue;
    }
    if (ms_arg_is(c, j, "KEEPTTL") && !(flags & SET_UNITS)) {
      flags |= SET_KEEPTTL;
      continue;
    }
    int u = 0;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
      if (ms_arg_is(c, j, units[k].word)) u = units[k].flag;
    if (u && has_next && !(flags & (SET_KEEPTTL | (SET_UNITS & ~u)))) {
      flags |= u;
      unit = u;
      time_arg = ++j;
      continue;
    }
    return ms_err_syntax();
  }
  uint64_t at = 0;
  if (time_arg >= 0) {
    bk_reply *err = set_expire_at(c, time_arg, unit, &at);
    if (err) return err;
  }
  const char *key = c->argv[1];
  size_t klen = c->argvlen[1];
  bk_reply *old = NULL;
  if (flags & SET_GET) {
    struct ms_string *s;
    bk_reply *err = string_at(db, c, 1, &s);
    if (err) return err;
    old = s ? mr_bulk(s->val, s->vlen) : mr_nil();
  }
  bool found = ms_key_type(db, key, klen) != MS_NONE;
  if (((flags & SET_NX) && found) || ((flags & SET_XX) && !found)) return old ? old : mr_nil();
  put(db, key, klen, c->argv[2], c->argvlen[2], flags & SET_KEEPTTL);
  if (at) ms_key_set_expire(db, key, klen, at); /* a time already past: gone at the next command */
  return old ? old : mr_status("OK");
}

bk_reply *ms_cmd_getdel(struct memdb *db, struct ms_call *c) {
  struct ms_string *s;
  bk_reply *err = string_at(db, c, 1, &s);
  if (err) return err;
  if (s == NULL) return mr_nil();
  bk_reply *r = mr_bulk(s->val, s->vlen);
  ms_key_delete(db, c->argv[1], c->argvlen[1]);
  return r;
}

/* ---- INCR, INCRBY, DECR, DECRBY ---- */

/* Adds incr to the integer at argv[1] (0 when there is no key), keeping
 * its time to live. */
static bk_reply *incr_by(struct memdb *db, struct ms_call *c, long long incr) {
  struct ms_string *s;
  bk_reply *err = string_at(db, c, 1, &s);
  if (err) return err;
  long long v = 0;
  if (s && !ms_parse_ll(s->val, s->vlen, &v)) return ms_err_int();
  if ((incr < 0 && v < 0 && incr < LLONG_MIN - v) || (incr > 0 && v > 0 && incr > LLONG_MAX - v))
    return mr_err("ERR increment or decrement would overflow");
  v += incr;
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%lld", v);
  put(db, c->argv[1], c->argvlen[1], buf, (size_t)n, true);
  return mr_int(v);
}

bk_reply *ms_cmd_incr(struct memdb *db, struct ms_call *c) { return incr_by(db, c, 1); }
bk_reply *ms_cmd_decr(struct memdb *db, struct ms_call *c) { return incr_by(db, c, -1); }

/* The increment is read before the key's type is looked at. */
bk_reply *ms_cmd_incrby(struct memdb *db, struct ms_call *c) {
  long long n;
  if (!ms_parse_ll(c->argv[2], c->argvlen[2], &n)) return ms_err_int();
  return incr_by(db, c, n);
}

bk_reply *ms_cmd_decrby(struct memdb *db, struct ms_call *c) {
  long long n;
  if (!ms_parse_ll(c->argv[2], c->argvlen[2], &n)) return ms_err_int();
  if (n == LLONG_MIN) return mr_err("ERR decrement would overflow"); /* -n does not exist */
  return incr_by(db, c, -n);
}

/* ---- MGET, MSET, APPEND, STRLEN ---- */

/* A key that is missing or holds another type is nil. */
bk_reply *ms_cmd_mget(struct memdb *db, struct ms_call *c) {
  bk_reply *r = mr_arr();
  for (int i = 1; i < c->argc; i++) {
    struct ms_string *s = ms_string_lookup(db, c->argv[i], c->argvlen[i]);
    mr_push(r, s ? mr_bulk(s->val, s->vlen) : mr_nil());
  }
  return r;
}

bk_reply *ms_cmd_mset(struct memdb *db, struct ms_call *c) {
  if (c->argc % 2 == 0) return ms_err_arity("mset"); /* a key without a value */
  for (int i = 1; i < c->argc; i += 2)
    put(db, c->argv[i], c->argvlen[i], c->argv[i + 1], c->argvlen[i + 1], false);
  return mr_status("OK");
}

bk_reply *ms_cmd_append(struct memdb *db, struct ms_call *c) {
  struct ms_string *s;
  bk_reply *err = string_at(db, c, 1, &s);
  if (err) return err;
  size_t old = s ? s->vlen : 0, add = c->argvlen[2];
  char *buf = mr_alloc(old + add + 1);
  if (old) memcpy(buf, s->val, old);
  memcpy(buf + old, c->argv[2], add);
  put(db, c->argv[1], c->argvlen[1], buf, old + add, true);
  free(buf);
  return mr_int((long long)(old + add));
}

bk_reply *ms_cmd_strlen(struct memdb *db, struct ms_call *c) {
  struct ms_string *s;
  bk_reply *err = string_at(db, c, 1, &s);
  if (err) return err;
  return mr_int(s ? (long long)s->vlen : 0);
}
