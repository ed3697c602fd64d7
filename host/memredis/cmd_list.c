/* cmd_list: the list commands of the in-memory server: LPUSH, RPUSH, LPOP
 * and RPOP (with an optional count), LRANGE, LLEN, with Redis 7.0's
 * replies, checks and error texts (t_list.c). A list that empties is
 * deleted. */
#include <stdlib.h>

#include "commands.h"
#include "memreply.h"

#define KEY c->argv[1], c->argvlen[1]

static bk_reply *push(struct memdb *db, struct ms_call *c, bool head) {
  bk_reply *err = ms_check_type(db, KEY, MS_LIST);
  if (err) return err;
  struct ms_list *l = ms_list_create(db, KEY);
  for (int i = 2; i < c->argc; i++) ms_list_push(l, head, c->argv[i], c->argvlen[i]);
  return mr_int((long long)l->n);
}

bk_reply *ms_cmd_lpush(struct memdb *db, struct ms_call *c) { return push(db, c, true); }
bk_reply *ms_cmd_rpush(struct memdb *db, struct ms_call *c) { return push(db, c, false); }

/* LPOP/RPOP key [count]: the count is parsed first (any count that is not
 * a non-negative integer gets the one error text, as in Redis); without a
 * count one element or nil, with one an array (nil when there is no key,
 * empty for a count of 0). */
static bk_reply *pop(struct memdb *db, struct ms_call *c, bool head) {
  bool hascount = c->argc == 3;
  long long count = 0;
  if (c->argc > 3) return ms_err_arity(head ? "lpop" : "rpop");
  if (hascount) {
    if (!ms_parse_ll(c->argv[2], c->argvlen[2], &count) || count < 0)
      return mr_err("ERR value is out of range, must be positive");
  }
  bk_reply *err = ms_check_type(db, KEY, MS_LIST);
  if (err) return err;
  struct ms_list *l = ms_list_lookup(db, KEY);
  if (l == NULL) return mr_nil();
  if (!hascount) {
    struct ms_lelem e = ms_list_pop(l, head);
    bk_reply *r = mr_bulk(e.p, e.len);
    free(e.p);
    if (l->n == 0) ms_key_delete(db, KEY);
    return r;
  }
  bk_reply *a = mr_arr();
  for (long long k = 0; k < count && l->n > 0; k++) {
    struct ms_lelem e = ms_list_pop(l, head);
    mr_push(a, mr_bulk(e.p, e.len));
    free(e.p);
  }
  if (l->n == 0) ms_key_delete(db, KEY);
  return a;
}

bk_reply *ms_cmd_lpop(struct memdb *db, struct ms_call *c) { return pop(db, c, true); }
bk_reply *ms_cmd_rpop(struct memdb *db, struct ms_call *c) { return pop(db, c, false); }

/* LRANGE key start stop: indices parsed before the key is looked at;
 * negative ones count from the tail; out-of-range ones are clamped. */
bk_reply *ms_cmd_lrange(struct memdb *db, struct ms_call *c) {
  long long start, stop;
  if (!ms_parse_ll(c->argv[2], c->argvlen[2], &start) ||
      !ms_parse_ll(c->argv[3], c->argvlen[3], &stop))
    return ms_err_int();
  bk_reply *err = ms_check_type(db, KEY, MS_LIST);
  if (err) return err;
  struct ms_list *l = ms_list_lookup(db, KEY);
  bk_reply *a = mr_arr();
  if (l == NULL) return a;
  long long n = (long long)l->n;
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  if (start < 0) start = 0;
  if (start > stop || start >= n) return a;
  if (stop >= n) stop = n - 1;
  for (long long i = start; i <= stop; i++) mr_push(a, mr_bulk(l->v[i].p, l->v[i].len));
  return a;
}

bk_reply *ms_cmd_llen(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, KEY, MS_LIST);
  if (err) return err;
  struct ms_list *l = ms_list_lookup(db, KEY);
  return mr_int(l ? (long long)l->n : 0);
}
