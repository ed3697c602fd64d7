/* memstring: the string keys of the in-memory server (GET, SET with NX, XX,
 * PX and EX, PEXPIRE, PTTL) and key expiry, for the consumer leases the host
 * keeps (lease.h). Expiry is on the broker's wall clock: memstring_expire
 * removes every key whose time has come before each command runs, so a key
 * is gone for every command (EXISTS, TYPE, a script's GET) from its expiry
 * on, as on a server. Only strings can carry a time to live here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memreply.h"
#include "memstream.h"

static size_t str_slot(struct memdb *db, const char *key, size_t len, int *found) {
  size_t lo = 0, hi = db->nstrs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = ms_bytecmp(db->strs[mid]->key, db->strs[mid]->keylen, key, len);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = 0;
  return lo;
}

struct ms_string *ms_string_lookup(struct memdb *db, const char *key, size_t len) {
  int found;
  size_t i = str_slot(db, key, len, &found);
  return found ? db->strs[i] : NULL;
}

static void string_free(struct ms_string *s) {
  free(s->key);
  free(s->val);
  free(s);
}

int ms_string_delete(struct memdb *db, const char *key, size_t len) {
  int found;
  size_t i = str_slot(db, key, len, &found);
  if (!found) return 0;
  string_free(db->strs[i]);
  memmove(db->strs + i, db->strs + i + 1, (db->nstrs - i - 1) * sizeof *db->strs);
  db->nstrs--;
  return 1;
}

void memstring_expire(struct memdb *db, uint64_t now) {
  for (size_t i = 0; i < db->nstrs;) {
    struct ms_string *s = db->strs[i];
    if (s->expire_at && s->expire_at <= now) ms_string_delete(db, s->key, s->keylen);
    else i++;
  }
}

void memstring_free_all(struct memdb *db) {
  for (size_t i = 0; i < db->nstrs; i++) string_free(db->strs[i]);
  free(db->strs);
  db->strs = NULL;
  db->nstrs = db->strcap = 0;
}

/* Sets key to val, dropping its time to live unless keep. */
static struct ms_string *string_set(struct memdb *db, const char *key, size_t len, const char *val,
                                    size_t vlen) {
  int found;
  size_t i = str_slot(db, key, len, &found);
  struct ms_string *s;
  if (found) {
    s = db->strs[i];
    free(s->val);
  } else {
    s = mr_alloc(sizeof *s);
    s->key = mr_memdup(key, len);
    s->keylen = len;
    if (db->nstrs == db->strcap) {
      db->strcap = db->strcap ? db->strcap * 2 : 8;
      db->strs = mr_realloc(db->strs, db->strcap * sizeof *db->strs);
    }
    memmove(db->strs + i + 1, db->strs + i, (db->nstrs - i) * sizeof *db->strs);
    db->strs[i] = s;
    db->nstrs++;
  }
  s->val = mr_memdup(val, vlen);
  s->vlen = vlen;
  s->expire_at = 0;
  return s;
}

bk_reply *ms_cmd_get(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STRING);
  if (err) return err;
  struct ms_string *s = ms_string_lookup(db, c->argv[1], c->argvlen[1]);
  return s ? mr_bulk(s->val, s->vlen) : mr_nil();
}

/* SET key value [NX|XX] [PX ms|EX s]: a key of any type is replaced. */
bk_reply *ms_cmd_set(struct memdb *db, struct ms_call *c) {
  bool nx = false, xx = false;
  long long ttl = 0;
  for (int j = 3; j < c->argc; j++) {
    if (ms_arg_is(c, j, "NX") && !xx) nx = true;
    else if (ms_arg_is(c, j, "XX") && !nx) xx = true;
    else if ((ms_arg_is(c, j, "PX") || ms_arg_is(c, j, "EX")) && ttl == 0 && j + 1 < c->argc) {
      bool ex = ms_arg_is(c, j, "EX");
      if (!ms_parse_ll(c->argv[j + 1], c->argvlen[j + 1], &ttl)) return ms_err_int();
      if (ttl <= 0) return mr_err("ERR invalid expire time in 'set' command");
      if (ex) ttl *= 1000;
      j++;
    } else {
      return ms_err_syntax();
    }
  }
  bool exists = ms_key_type(db, c->argv[1], c->argvlen[1]) != MS_NONE;
  if ((nx && exists) || (xx && !exists)) return mr_nil();
  if (exists && ms_key_type(db, c->argv[1], c->argvlen[1]) != MS_STRING) {
    const char *argv[] = {"DEL", c->argv[1]};
    size_t len[] = {3, c->argvlen[1]};
    struct ms_call del = {.argc = 2, .argv = argv, .argvlen = len, .now = c->now};
    mr_free(ms_cmd_del(db, &del));
  }
  struct ms_string *s = string_set(db, c->argv[1], c->argvlen[1], c->argv[2], c->argvlen[2]);
  if (ttl) s->expire_at = c->now + (uint64_t)ttl;
  return mr_status("OK");
}

/* PEXPIRE key ms: 1 when set; a time already past deletes the key. Only
 * strings carry a time to live here: on another type it answers 0. */
bk_reply *ms_cmd_pexpire(struct memdb *db, struct ms_call *c) {
  long long ms;
  if (!ms_parse_ll(c->argv[2], c->argvlen[2], &ms)) return ms_err_int();
  struct ms_string *s = ms_string_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) return mr_int(0);
  if (ms <= 0) {
    ms_string_delete(db, c->argv[1], c->argvlen[1]);
    return mr_int(1);
  }
  s->expire_at = c->now + (uint64_t)ms;
  return mr_int(1);
}

/* PTTL key: ms left, -1 without a time to live, -2 when there is no key. */
bk_reply *ms_cmd_pttl(struct memdb *db, struct ms_call *c) {
  enum ms_type t = ms_key_type(db, c->argv[1], c->argvlen[1]);
  if (t == MS_NONE) return mr_int(-2);
  struct ms_string *s = ms_string_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL || s->expire_at == 0) return mr_int(-1);
  return mr_int((long long)(s->expire_at - c->now));
}
