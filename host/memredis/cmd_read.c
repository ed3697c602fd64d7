/* cmd_read: XREADGROUP on the in-memory server, the one command that can
 * block.
 *
 * A call either returns a reply, or (BLOCK given, nothing to serve, not in a
 * script or MULTI) returns NULL with call->blocked set, and broker_memory parks
 * the client. How a parked client wakes differs by version: 8.4 simply
 * runs the whole command again (ms_cmd_xreadgroup), 7.0 serves the one stream
 * that was signaled (ms_xreadgroup_wake70). With CLAIM (8.4) the client also
 * wakes when a pending entry turns claimable: ms_xreadgroup_claim_due says
 * when. Semantics and error texts: those of Redis 7.0 and 8.4. */
#include "commands.h"
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "memreply.h"
#include "stream.h"

#define WAKE70_DEFAULT_COUNT 1000 /* 7.0 serves a woken client at most this many */

struct xrg {
  const char *group, *cons;
  size_t glen, clen;
  long long count; /* 0: no limit */
  long long block; /* -1: no BLOCK */
  long long claim; /* -1: no CLAIM */
  bool noack;
  int sa, n; /* keys at argv[sa ..], ids at argv[sa + n ..] */
};

/* Parses the options; NULL, or the error reply. */
static bk_reply *parse(struct memdb *db, const struct ms_call *c, struct xrg *o) {
  memset(o, 0, sizeof *o);
  o->block = o->claim = -1;
  for (int i = 1; i < c->argc; i++) {
    int more = c->argc - i - 1;
    if (ms_arg_is(c, i, "BLOCK") && more) {
      if (c->script && !MS_V74(db))
        return mr_err("ERR %.*s command is not allowed with BLOCK option from scripts",
                      (int)c->argvlen[0], c->argv[0]);
      i++;
      if (!ms_parse_ll(c->argv[i], c->argvlen[i], &o->block))
        return mr_err("ERR timeout is not an integer or out of range");
      if (o->block < 0) return mr_err("ERR timeout is negative");
    } else if (ms_arg_is(c, i, "COUNT") && more) {
      i++;
      if (!ms_parse_ll(c->argv[i], c->argvlen[i], &o->count)) return ms_err_int();
      if (o->count < 0) o->count = 0;
    } else if (ms_arg_is(c, i, "STREAMS") && more) {
      o->sa = i + 1;
      if ((c->argc - o->sa) % 2)
        return MS_V72(db) ? mr_err(
                                "ERR Unbalanced 'xreadgroup' list of streams: for each stream "
                                "key an ID or '>' must be specified.")
                          : mr_err(
                                "ERR Unbalanced XREAD list of streams: for each stream key an "
                                "ID or '$' must be specified.");
      o->n = (c->argc - o->sa) / 2;
      break;
    } else if (ms_arg_is(c, i, "GROUP") && more >= 2) {
      o->group = c->argv[i + 1];
      o->glen = c->argvlen[i + 1];
      o->cons = c->argv[i + 2];
      o->clen = c->argvlen[i + 2];
      i += 2;
    } else if (ms_arg_is(c, i, "NOACK")) {
      o->noack = true;
    } else if (MS_V84(db) && ms_arg_is(c, i, "CLAIM") && more) {
      i++;
      if (!ms_parse_ll(c->argv[i], c->argvlen[i], &o->claim))
        return mr_err("ERR min-idle-time is not an integer");
      if (o->claim < 0) return mr_err("ERR min-idle-time must be a positive integer");
    } else {
      return ms_err_syntax();
    }
  }
  if (o->sa == 0) return ms_err_syntax();
  if (o->group == NULL) return mr_err("ERR Missing GROUP option for XREADGROUP");
  return NULL;
}

/* ">", or the maximal id, which is what Redis turns ">" into: both read
 * new entries. */
static bool is_new_id(const struct ms_call *c, int i) {
  msid id;
  if (ms_arg_char(c, i, '>')) return true;
  return ms_parse_id(c->argv[i], c->argvlen[i], &id, 0, true, NULL) && ms_id_is_max(id);
}

static bk_reply *err_nogroup(const struct ms_call *c, const struct xrg *o, int k) {
  return mr_err(
      "NOGROUP No such key '%.*s' or consumer group '%.*s' in XREADGROUP with GROUP "
      "option",
      (int)c->argvlen[o->sa + k], c->argv[o->sa + k], (int)o->glen, o->group);
}

/* One stream of the call, as found by the per-stream checks. */
struct target {
  struct ms_stream *s;
  struct ms_group *g;
  bool fresh; /* ">" */
  msid after; /* history: entries of the caller's PEL after this id */
};

/* ---- serving ---- */

static void seen(struct ms_consumer *k, uint64_t now, bool delivered) {
  k->seen_time = now;
  if (delivered) k->active_time = (int64_t)now;
}

/* History: the caller's own pending entries after t->after. BLOCK, NOACK and
 * CLAIM do not apply; deleted entries come back as [id, nil], untouched. */
static bk_reply *serve_history(const struct ms_call *c, const struct xrg *o, struct target *t) {
  struct ms_consumer *me = ms_consumer_get(t->g, o->cons, o->clen, c->now, NULL);
  bk_reply *list = mr_arr();
  long long left = o->count;
  bool delivered = false;
  for (size_t i = 0; i < t->g->npel && (o->count == 0 || left > 0); i++) {
    struct ms_nack *n = &t->g->pel[i];
    if (n->owner != me || ms_idcmp(n->id, t->after) <= 0) continue;
    const struct ms_entry *e = ms_find_entry(t->s, n->id);
    bk_reply *item = mr_arr();
    mr_push(item, ms_reply_id(n->id));
    if (e) {
      mr_push(item, ms_reply_fields(e));
      n->delivery_time = c->now;
      n->delivery_count++;
      delivered = true;
    } else {
      mr_push(item, mr_nil());
    }
    mr_push(list, item);
    left--;
  }
  seen(me, c->now, delivered);
  return list;
}

/* New entries after the group's last_id, at most max (0: no limit), appended
 * to list; extra adds the two CLAIM fields (0, 0). Returns how many. */
static long long read_new(const struct ms_call *c, const struct xrg *o, struct target *t,
                          struct ms_consumer **me, long long max, bool extra, bk_reply *list) {
  long long got = 0;
  for (size_t i = ms_lower_bound(t->s, t->g->last_id); i < t->s->n && (max == 0 || got < max);
       i++) {
    const struct ms_entry *e = t->s->e[i];
    if (ms_idcmp(e->id, t->g->last_id) <= 0) continue;
    if (*me == NULL) *me = ms_consumer_get(t->g, o->cons, o->clen, c->now, NULL);
    ms_group_delivered(t->s, t->g, e->id);
    if (!o->noack) {
      /* Already pending (SETID moved back, XCLAIM FORCE): it moves to the
       * caller and starts counting again. */
      struct ms_nack *n = ms_nack_find(t->g, e->id);
      if (n == NULL) n = ms_nack_add(t->g, e->id);
      n->owner = *me;
      n->delivery_time = c->now;
      n->delivery_count = 1;
    }
    bk_reply *item = ms_reply_entry(e);
    if (extra) {
      mr_push(item, mr_int(0));
      mr_push(item, mr_int(0));
    }
    mr_push(list, item);
    got++;
  }
  return got;
}

struct cand {
  msid id;
  uint64_t time;
};

static int by_time(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->time != y->time) return x->time < y->time ? -1 : 1;
  return ms_idcmp(x->id, y->id);
}

/* CLAIM phase: idle-enough pending entries, longest idle first, up to max
 * (0: no limit), with [id, fields, idle, deliveries before]. Entries gone from
 * the stream are skipped and stay pending (what the spec leaves open). */
static long long claim(const struct ms_call *c, const struct xrg *o, struct target *t,
                       struct ms_consumer **me, bk_reply *list) {
  struct cand *cand = mr_alloc((t->g->npel + 1) * sizeof *cand);
  size_t nc = 0;
  for (size_t i = 0; i < t->g->npel; i++) {
    const struct ms_nack *n = &t->g->pel[i];
    uint64_t idle = c->now > n->delivery_time ? c->now - n->delivery_time : 0;
    if (idle < (uint64_t)o->claim || ms_find_entry(t->s, n->id) == NULL) continue;
    cand[nc].id = n->id;
    cand[nc++].time = n->delivery_time;
  }
  qsort(cand, nc, sizeof *cand, by_time);
  long long got = 0;
  for (size_t i = 0; i < nc && (o->count == 0 || got < o->count); i++) {
    struct ms_nack *n = ms_nack_find(t->g, cand[i].id);
    if (*me == NULL) *me = ms_consumer_get(t->g, o->cons, o->clen, c->now, NULL);
    bk_reply *item = ms_reply_entry(ms_find_entry(t->s, n->id));
    mr_push(item, mr_int((long long)(c->now - n->delivery_time)));
    mr_push(item, mr_int((long long)n->delivery_count));
    mr_push(list, item);
    n->owner = *me;
    n->delivery_time = c->now;
    n->delivery_count++;
    got++;
  }
  free(cand);
  return got;
}

static bool has_new(const struct target *t) {
  return t->s->n && ms_idcmp(ms_last_valid_id(t->s), t->g->last_id) > 0;
}

static void add_pair(bk_reply **out, const struct ms_call *c, int keyarg, bk_reply *list) {
  if (*out == NULL) *out = mr_arr();
  bk_reply *pair = mr_arr();
  mr_push(pair, mr_bulk(c->argv[keyarg], c->argvlen[keyarg]));
  mr_push(pair, list);
  mr_push(*out, pair);
}

/* ---- the command ---- */

/* XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] [CLAIM ms] STREAMS k... id... */
bk_reply *ms_cmd_xreadgroup(struct memdb *db, struct ms_call *c) {
  struct xrg o;
  bk_reply *err = parse(db, c, &o);
  if (err) return err;
  struct target *t = mr_alloc((size_t)o.n * sizeof *t);
  for (int k = 0; k < o.n; k++) {
    int ki = o.sa + k, ii = o.sa + o.n + k;
    /* key by key: its type, its group, then its id */
    if ((err = ms_check_type(db, c->argv[ki], c->argvlen[ki], MS_STREAM))) goto done;
    t[k].s = ms_lookup(db, c->argv[ki], c->argvlen[ki]);
    t[k].g = t[k].s ? ms_group_find(t[k].s, o.group, o.glen) : NULL;
    if (t[k].g == NULL) {
      err = err_nogroup(c, &o, k);
      goto done;
    }
    t[k].fresh = is_new_id(c, ii);
    if (ms_arg_char(c, ii, '$')) {
      err = mr_err(
          "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read "
          "the history of this consumer by specifying a proper ID, or use the > ID to "
          "get new messages. The $ ID would just return an empty result set.");
      goto done;
    }
    if (MS_V74(db) && ms_arg_char(c, ii, '+')) {
      err = mr_err(
          "ERR The + ID is meaningless in the context of XREADGROUP: you want to read "
          "the history of this consumer by specifying a proper ID, or use the > ID to "
          "get new messages. The + ID would just return an empty result set.");
      goto done;
    }
    if (!t[k].fresh && !ms_parse_id(c->argv[ii], c->argvlen[ii], &t[k].after, 0, true, NULL)) {
      err = ms_err_badid();
      goto done;
    }
    /* 7.2+ creates the consumer as soon as the group is found. */
    if (MS_V72(db)) seen(ms_consumer_get(t[k].g, o.cons, o.clen, c->now, NULL), c->now, false);
  }

  bk_reply *out = NULL;
  for (int k = 0; k < o.n; k++) {
    if (!t[k].fresh) {
      add_pair(&out, c, o.sa + k, serve_history(c, &o, &t[k]));
      continue;
    }
    struct ms_consumer *me = NULL;
    bk_reply *list = mr_arr();
    long long got = o.claim >= 0 ? claim(c, &o, &t[k], &me, list) : 0;
    if ((o.count == 0 || got < o.count) && has_new(&t[k]))
      got += read_new(c, &o, &t[k], &me, o.count ? o.count - got : 0, o.claim >= 0, list);
    if (got == 0) { /* nothing claimable, nothing new: not served */
      mr_free(list);
      continue;
    }
    seen(me, c->now, got > 0);
    add_pair(&out, c, o.sa + k, list);
  }
  free(t);
  if (out) return out;
  if (o.block >= 0 && !c->script && !c->multi) {
    c->blocked = true;
    c->block.timeout_ms = o.block;
    c->block.claim_ms = o.claim;
    c->block.first_key = o.sa;
    c->block.nkeys = o.n;
    return NULL;
  }
  return mr_nil();
done:
  free(t);
  return err;
}

/* ---- wake-ups ---- */

bk_reply *ms_xreadgroup_wake70(struct memdb *db, struct ms_call *c, int keyidx) {
  struct xrg o;
  bk_reply *err = parse(db, c, &o);
  if (err) return err;
  struct target t = {0};
  t.s = ms_lookup(db, c->argv[keyidx], c->argvlen[keyidx]);
  if (t.s == NULL) return mr_err("UNBLOCKED the stream key no longer exists");
  t.g = ms_group_find(t.s, o.group, o.glen);
  if (t.g == NULL)
    return mr_err("NOGROUP the consumer group this client was blocked on no longer exists");
  /* 7.0 compares with the last id ever generated: entries added and deleted
   * meanwhile wake the client with an empty list. */
  if (ms_idcmp(t.s->last_id, t.g->last_id) <= 0) return NULL;
  struct ms_consumer *me = NULL;
  bk_reply *list = mr_arr();
  long long got = read_new(c, &o, &t, &me, o.count ? o.count : WAKE70_DEFAULT_COUNT, false, list);
  if (me == NULL) me = ms_consumer_get(t.g, o.cons, o.clen, c->now, NULL);
  seen(me, c->now, got > 0);
  bk_reply *out = NULL;
  add_pair(&out, c, keyidx, list);
  return out;
}

int64_t ms_xreadgroup_claim_due(struct memdb *db, struct ms_call *c, long long claim_ms) {
  struct xrg o;
  bk_reply *err = parse(db, c, &o);
  int64_t due = -1;
  if (err) {
    mr_free(err);
    return -1;
  }
  for (int k = 0; k < o.n; k++) {
    if (!is_new_id(c, o.sa + o.n + k)) continue;
    struct ms_stream *s = ms_lookup(db, c->argv[o.sa + k], c->argvlen[o.sa + k]);
    struct ms_group *g = s ? ms_group_find(s, o.group, o.glen) : NULL;
    for (size_t i = 0; g && i < g->npel; i++) {
      /* Entries gone from the stream are never claimed: waking for them
       * would spin. */
      if (ms_find_entry(s, g->pel[i].id) == NULL) continue;
      /* Saturated: a huge min-idle wrapping round would be due at once. */
      uint64_t dt = g->pel[i].delivery_time;
      int64_t at = (uint64_t)claim_ms > (uint64_t)INT64_MAX - dt
                       ? INT64_MAX
                       : (int64_t)(dt + (uint64_t)claim_ms);
      if (due < 0 || at < due) due = at;
    }
  }
  return due;
}
