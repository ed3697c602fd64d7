/* cmd_set: the set commands of the in-memory server: SADD, SREM,
 * SISMEMBER, SMEMBERS, SCARD, with Redis 7.0's replies and checks
 * (t_set.c). SMEMBERS lists members in the order set.h keeps: sorted for
 * a set of integers (an intset), else insertion order. A set that empties
 * is deleted. */
#include "commands.h"
#include "memreply.h"

#define KEY c->argv[1], c->argvlen[1]

bk_reply *ms_cmd_sadd(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_SET);
  if (err) return err;
  struct ms_set *s = ms_set_create(db, KEY);
  long long added = 0;
  for (int i = 2; i < c->argc; i++) added += ms_set_add(s, c->argv[i], c->argvlen[i]);
  return mr_int(added);
}

bk_reply *ms_cmd_srem(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_SET);
  if (err) return err;
  struct ms_set *s = ms_set_lookup(db, KEY);
  long long removed = 0;
  for (int i = 2; s && i < c->argc; i++) {
    removed += ms_set_rem(s, c->argv[i], c->argvlen[i]);
    if (s->n == 0) {
      ms_key_delete(db, KEY);
      s = NULL;
    }
  }
  return mr_int(removed);
}

bk_reply *ms_cmd_sismember(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_SET);
  if (err) return err;
  struct ms_set *s = ms_set_lookup(db, KEY);
  return mr_int(s && ms_set_find(s, c->argv[2], c->argvlen[2]) < s->n);
}

bk_reply *ms_cmd_smembers(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_SET);
  if (err) return err;
  struct ms_set *s = ms_set_lookup(db, KEY);
  bk_reply *a = mr_arr();
  for (size_t i = 0; s && i < s->n; i++) mr_push(a, mr_bulk(s->v[i].m, s->v[i].len));
  return a;
}

bk_reply *ms_cmd_scard(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_SET);
  if (err) return err;
  struct ms_set *s = ms_set_lookup(db, KEY);
  return mr_int(s ? (long long)s->n : 0);
}
