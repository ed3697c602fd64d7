/* cmd_keys: the keyspace commands of the in-memory server, for a key of
 * any type: EXPIRE, PEXPIRE (NX, XX, GT, LT), TTL, PTTL, PERSIST, DEL,
 * EXISTS, TYPE, FLUSHALL. A time to live belongs to the key, whatever it
 * holds (db.h); broker_memory removes every key whose time has come
 * (ms_expire) before each command runs, so a key is gone for every command
 * (EXISTS, TYPE, a script's GET) from its expiry on, as on a server. The
 * string commands are in cmd_string.c. */
#include <limits.h>
#include <stdlib.h>

#include "commands.h"
#include "memreply.h"

/* ---- EXPIRE, PEXPIRE, TTL, PTTL, PERSIST ---- */

/* EXPIRE / PEXPIRE key time [NX|XX|GT|LT], in the order Redis 7.0's
 * expireGenericCommand checks: the options, the time, its overflow, then
 * the key. A time already past deletes the key (and answers 1). */
static bk_reply *expire_generic(struct memdb *db, struct ms_call *c, bool seconds,
                                const char *name) {
  bool nx = false, xx = false, gt = false, lt = false;
  for (int j = 3; j < c->argc; j++) {
    if (ms_arg_is(c, j, "NX"))
      nx = true;
    else if (ms_arg_is(c, j, "XX"))
      xx = true;
    else if (ms_arg_is(c, j, "GT"))
      gt = true;
    else if (ms_arg_is(c, j, "LT"))
      lt = true;
    else
      return mr_err("ERR Unsupported option %.*s", (int)c->argvlen[j], c->argv[j]);
  }
  if (nx && (xx || gt || lt))
    return mr_err("ERR NX and XX, GT or LT options at the same time are not compatible");
  if (gt && lt) return mr_err("ERR GT and LT options at the same time are not compatible");
  long long when;
  if (!ms_parse_ll(c->argv[2], c->argvlen[2], &when)) return ms_err_int();
  if (seconds) {
    if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
      return mr_err("ERR invalid expire time in '%s' command", name);
    when *= 1000;
  }
  long long now = (long long)c->now;
  if (when > LLONG_MAX - now) return mr_err("ERR invalid expire time in '%s' command", name);
  when += now;
  const char *key = c->argv[1];
  size_t len = c->argvlen[1];
  if (ms_key_type(db, key, len) == MS_NONE) return mr_int(0);
  uint64_t at = ms_key_expire_at(db, key, len);
  long long current = at ? (long long)at : -1; /* -1: no time to live, "infinite" */
  if (nx && current != -1) return mr_int(0);
  if (xx && current == -1) return mr_int(0);
  if (gt && (current == -1 || when <= current)) return mr_int(0);
  if (lt && current != -1 && when >= current) return mr_int(0);
  if (when <= now)
    ms_key_delete(db, key, len);
  else
    ms_key_set_expire(db, key, len, (uint64_t)when);
  return mr_int(1);
}

bk_reply *ms_cmd_expire(struct memdb *db, struct ms_call *c) {
  return expire_generic(db, c, true, "expire");
}

bk_reply *ms_cmd_pexpire(struct memdb *db, struct ms_call *c) {
  return expire_generic(db, c, false, "pexpire");
}

/* Time left: -2 when there is no key, -1 without a time to live; TTL rounds
 * to the nearest second, as Redis does. */
static bk_reply *ttl_generic(struct memdb *db, struct ms_call *c, bool ms) {
  if (ms_key_type(db, c->argv[1], c->argvlen[1]) == MS_NONE) return mr_int(-2);
  uint64_t at = ms_key_expire_at(db, c->argv[1], c->argvlen[1]);
  if (at == 0) return mr_int(-1);
  long long left = at > c->now ? (long long)(at - c->now) : 0;
  return mr_int(ms ? left : (left + 500) / 1000);
}

bk_reply *ms_cmd_ttl(struct memdb *db, struct ms_call *c) { return ttl_generic(db, c, false); }
bk_reply *ms_cmd_pttl(struct memdb *db, struct ms_call *c) { return ttl_generic(db, c, true); }

/* 1 when a time to live was removed; 0 without one or without the key. */
bk_reply *ms_cmd_persist(struct memdb *db, struct ms_call *c) {
  if (ms_key_expire_at(db, c->argv[1], c->argvlen[1]) == 0) return mr_int(0);
  ms_key_set_expire(db, c->argv[1], c->argvlen[1], 0);
  return mr_int(1);
}

/* ---- DEL, EXISTS, TYPE, FLUSHALL ---- */

bk_reply *ms_cmd_del(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++) n += ms_key_delete(db, c->argv[i], c->argvlen[i]);
  return mr_int(n);
}

bk_reply *ms_cmd_exists(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++) n += ms_key_type(db, c->argv[i], c->argvlen[i]) != MS_NONE;
  return mr_int(n);
}

bk_reply *ms_cmd_type(struct memdb *db, struct ms_call *c) {
  return mr_status(ms_type_name(ms_key_type(db, c->argv[1], c->argvlen[1])));
}

bk_reply *ms_cmd_flushall(struct memdb *db, struct ms_call *c) {
  if (c->argc > 2 || (c->argc == 2 && !ms_arg_is(c, 1, "ASYNC") && !ms_arg_is(c, 1, "SYNC")))
    return ms_err_syntax();
  ms_flush(db);
  return mr_status("OK");
}
