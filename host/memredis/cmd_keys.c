/* cmd_keys: the string and keyspace commands of the in-memory server: GET,
 * SET (NX, XX, PX, EX), PEXPIRE, PTTL for the consumer leases the host keeps
 * (lease.h), and DEL, EXISTS, TYPE, FLUSHALL. Expiry is on the broker's wall
 * clock: broker_memory removes every string whose time has come (ms_expire)
 * before each command runs, so a key is gone for every command (EXISTS,
 * TYPE, a script's GET) from its expiry on, as on a server. Only strings can
 * carry a time to live here. */
#include <stdlib.h>

#include "commands.h"
#include "memreply.h"

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
  if (exists && ms_key_type(db, c->argv[1], c->argvlen[1]) != MS_STRING)
    ms_key_delete(db, c->argv[1], c->argvlen[1]);
  struct ms_string *s = ms_string_create(db, c->argv[1], c->argvlen[1]);
  free(s->val);
  s->val = mr_memdup(c->argv[2], c->argvlen[2]);
  s->vlen = c->argvlen[2];
  s->expire_at = ttl ? c->now + (uint64_t)ttl : 0; /* SET drops an earlier time to live */
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
    ms_key_delete(db, c->argv[1], c->argvlen[1]);
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

/* ---- DEL, EXISTS, TYPE, FLUSHALL ---- */

bk_reply *ms_cmd_del(struct memdb *db, struct ms_call *c) {
  long long n = 0;
  for (int i = 1; i < c->argc; i++)
    n += ms_key_delete(db, c->argv[i], c->argvlen[i]);
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
