/* cmd_group: the consumer-group commands of the in-memory server: XGROUP,
 * XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO (GROUPS, CONSUMERS; STREAM is
 * in cmd_stream.c). XREADGROUP is in cmd_read.c, the groups themselves in
 * group.c. Semantics and error texts follow Redis 7.0 and 8.4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "group.h"
#include "memreply.h"

/* What XAUTOCLAIM's up-front allocation of COUNT ids may take. The server
 * gets what its address space can map, touched or not: on x86-64 Linux a
 * COUNT of 10^12 (16 TB) passes and one of 10^13 (160 TB, beyond the 128 TiB
 * of user address space) is refused (checked live on 7.0.15). The line is
 * drawn between the two; the differential test stays off that range. */
#define XAUTOCLAIM_MAX_ALLOC (1ULL << 46)

/* ---- XGROUP ---- */

static bk_reply *err_nogroup_named(const struct ms_call *c, int gi, int ki) {
  return mr_err("NOGROUP No such consumer group '%.*s' for key name '%.*s'", (int)c->argvlen[gi],
                c->argv[gi], (int)c->argvlen[ki], c->argv[ki]);
}

static bk_reply *err_nogroup_keyed(const struct ms_call *c) {
  return mr_err("NOGROUP No such key '%.*s' or consumer group '%.*s'", (int)c->argvlen[1],
                c->argv[1], (int)c->argvlen[2], c->argv[2]);
}

static bk_reply *sub_syntax(const struct ms_call *c) {
  return mr_err("ERR unknown subcommand or wrong number of arguments for '%.*s'. Try XGROUP HELP.",
                (int)c->argvlen[1], c->argv[1]);
}

/* XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER key group ...
 * (subcommand names and arities are checked by the dispatcher). */
bk_reply *ms_cmd_xgroup(struct memdb *db, struct ms_call *c) {
  bool create = ms_arg_is(c, 1, "CREATE"), setid = ms_arg_is(c, 1, "SETID");
  bool mkstream = false;
  long long entries_read = -1;
  for (int i = 5; i < c->argc;) {
    if (create && ms_arg_is(c, i, "MKSTREAM")) {
      mkstream = true;
      i++;
    } else if ((create || setid) && ms_arg_is(c, i, "ENTRIESREAD") && i + 1 < c->argc) {
      if (!ms_parse_ll(c->argv[i + 1], c->argvlen[i + 1], &entries_read)) return ms_err_int();
      if (entries_read < -1) return mr_err("ERR value for ENTRIESREAD must be positive or -1");
      i += 2;
    } else {
      return sub_syntax(c);
    }
  }
  bk_reply *err = ms_check_type(db, c->argv[2], c->argvlen[2], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  struct ms_group *g = NULL;
  if (!mkstream) {
    if (s == NULL)
      return mr_err(
          "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE "
          "you may want to use the MKSTREAM option to create an empty stream "
          "automatically.");
    g = ms_group_find(s, c->argv[3], c->argvlen[3]);
    if (g == NULL && !create && !ms_arg_is(c, 1, "DESTROY")) return err_nogroup_named(c, 3, 2);
  }
  if (create || setid) {
    if ((create && c->argc > 8) || (setid && c->argc != 5 && c->argc != 7)) return sub_syntax(c);
    msid id = {0, 0};
    if (ms_arg_char(c, 4, '$')) {
      if (s) id = s->last_id;
    } else if (!ms_parse_id(c->argv[4], c->argvlen[4], &id, 0, create, NULL)) {
      return ms_err_badid();
    }
    /* 8.2.2 caps ENTRIESREAD at entries_added; 7.0 lets lag go negative. */
    if (db->version >= 80202 && s && entries_read > (long long)s->entries_added)
      entries_read = (long long)s->entries_added;
    if (setid) {
      g->last_id = id;
      g->entries_read = entries_read;
      return mr_status("OK");
    }
    if (s == NULL) s = ms_create(db, c->argv[2], c->argvlen[2]);
    g = ms_group_add(s, c->argv[3], c->argvlen[3]);
    if (g == NULL) return mr_err("BUSYGROUP Consumer Group name already exists");
    g->last_id = id;
    g->entries_read = entries_read;
    return mr_status("OK");
  }
  if (ms_arg_is(c, 1, "DESTROY")) {
    if (g == NULL) return mr_int(0);
    ms_group_remove(s, g);
    ms_signal(db, c->argv[2], c->argvlen[2]); /* blocked readers of the group get an error */
    return mr_int(1);
  }
  if (ms_arg_is(c, 1, "CREATECONSUMER")) {
    int created;
    ms_consumer_get(g, c->argv[4], c->argvlen[4], c->now, &created);
    return mr_int(created);
  }
  /* DELCONSUMER: its pending entries leave the group PEL, unacked and lost. */
  long long pending = ms_consumer_del(g, c->argv[4], c->argvlen[4]);
  return mr_int(pending < 0 ? 0 : pending);
}

/* ---- XACK ---- */

/* XACK key group id...: missing key or group acks nothing, without even
 * looking at the IDs; one bad ID acks nothing. */
bk_reply *ms_cmd_xack(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  struct ms_group *g = s ? ms_group_find(s, c->argv[2], c->argvlen[2]) : NULL;
  if (g == NULL) return mr_int(0);
  int n = c->argc - 3;
  msid *ids = mr_alloc((size_t)n * sizeof *ids);
  for (int j = 0; j < n; j++) {
    if (!ms_parse_id(c->argv[j + 3], c->argvlen[j + 3], &ids[j], 0, true, NULL)) {
      free(ids);
      return ms_err_badid();
    }
  }
  long long acked = 0;
  for (int j = 0; j < n; j++) {
    struct ms_nack *nack = ms_nack_find(g, ids[j]);
    if (nack) {
      ms_nack_del(g, nack);
      acked++;
    }
  }
  free(ids);
  return mr_int(acked);
}

/* ---- XPENDING ---- */

static long long idle_of(uint64_t now, uint64_t delivery_time) {
  return now > delivery_time ? (long long)(now - delivery_time) : 0;
}

/* XPENDING key group [[IDLE ms] start end count [consumer]] */
bk_reply *ms_cmd_xpending(struct memdb *db, struct ms_call *c) {
  msid start = {0, 0}, end = {0, 0};
  long long count = 0, minidle = 0;
  const char *cname = NULL;
  size_t cnamelen = 0;
  if (c->argc != 3 && (c->argc < 6 || c->argc > 9)) return ms_err_syntax();
  if (c->argc >= 6) {
    int si = 3;
    bool sx, ex;
    if (ms_arg_is(c, 3, "IDLE")) {
      if (!ms_parse_ll(c->argv[4], c->argvlen[4], &minidle)) return ms_err_int();
      if (c->argc < 8) return ms_err_syntax();
      si += 2;
    }
    if (!ms_parse_ll(c->argv[si + 2], c->argvlen[si + 2], &count)) return ms_err_int();
    if (count < 0) count = 0;
    if (!ms_parse_range_id(c->argv[si], c->argvlen[si], &start, &sx, 0)) return ms_err_badid();
    if (sx && !ms_id_incr(&start)) return mr_err("ERR invalid start ID for the interval");
    if (!ms_parse_range_id(c->argv[si + 1], c->argvlen[si + 1], &end, &ex, UINT64_MAX))
      return ms_err_badid();
    if (ex && !ms_id_decr(&end)) return mr_err("ERR invalid end ID for the interval");
    if (si + 3 < c->argc) {
      cname = c->argv[si + 3];
      cnamelen = c->argvlen[si + 3];
    }
  }
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  struct ms_group *g = s ? ms_group_find(s, c->argv[2], c->argvlen[2]) : NULL;
  if (g == NULL) return err_nogroup_keyed(c);

  bk_reply *a = mr_arr();
  if (c->argc == 3) {
    mr_push(a, mr_int((long long)g->npel));
    if (g->npel == 0) {
      mr_push(a, mr_nil());
      mr_push(a, mr_nil());
      return mr_push(a, mr_nil());
    }
    mr_push(a, ms_reply_id(g->pel[0].id));
    mr_push(a, ms_reply_id(g->pel[g->npel - 1].id));
    bk_reply *cons = mr_arr();
    for (size_t i = 0; i < g->ncons; i++) {
      long long n = ms_consumer_pending(g, g->cons[i]);
      if (n == 0) continue;
      char buf[24];
      int len = snprintf(buf, sizeof buf, "%lld", n); /* a bulk string, not an integer */
      bk_reply *pair = mr_arr();
      mr_push(pair, mr_bulk(g->cons[i]->name, g->cons[i]->len));
      mr_push(pair, mr_bulk(buf, (size_t)len));
      mr_push(cons, pair);
    }
    return mr_push(a, cons);
  }
  struct ms_consumer *owner = NULL;
  if (cname) {
    owner = ms_consumer_find(g, cname, cnamelen);
    if (owner == NULL) return a;
  }
  for (size_t i = ms_pel_slot(g, start); count && i < g->npel; i++) {
    const struct ms_nack *n = &g->pel[i];
    if (ms_idcmp(n->id, end) > 0) break;
    if (owner && n->owner != owner) continue;
    if (minidle && (long long)(c->now - n->delivery_time) < minidle) continue;
    bk_reply *e = mr_arr();
    mr_push(e, ms_reply_id(n->id));
    mr_push(e, mr_bulk(n->owner->name, n->owner->len));
    mr_push(e, mr_int(idle_of(c->now, n->delivery_time)));
    mr_push(e, mr_int((long long)n->delivery_count));
    mr_push(a, e);
    count--;
  }
  return a;
}

/* ---- XCLAIM ---- */

/* XCLAIM key group consumer min-idle-time id... [IDLE ms] [TIME ms]
 *        [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id] */
bk_reply *ms_cmd_xclaim(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  struct ms_group *g = s ? ms_group_find(s, c->argv[2], c->argvlen[2]) : NULL;
  long long minidle, retrycount = -1, deliverytime = -1;
  bool force = false, justid = false;
  msid lastid = {0, 0}, scratch;
  if (g == NULL) return err_nogroup_keyed(c);
  if (!ms_parse_ll(c->argv[4], c->argvlen[4], &minidle))
    return mr_err("ERR Invalid min-idle-time argument for XCLAIM");
  if (minidle < 0) minidle = 0;
  int j = 5;
  while (j < c->argc && ms_parse_id(c->argv[j], c->argvlen[j], &scratch, 0, true, NULL)) j++;
  int last_id_arg = j - 1;
  for (; j < c->argc; j++) {
    bool more = j + 1 < c->argc;
    if (ms_arg_is(c, j, "FORCE")) {
      force = true;
    } else if (ms_arg_is(c, j, "JUSTID")) {
      justid = true;
    } else if (ms_arg_is(c, j, "IDLE") && more) {
      j++;
      if (!ms_parse_ll(c->argv[j], c->argvlen[j], &deliverytime))
        return mr_err("ERR Invalid IDLE option argument for XCLAIM");
      /* A negative idle time is a time in the future, which means now
       * below (Redis gets there by overflowing; saturate instead). */
      deliverytime = deliverytime < 0 ? (long long)c->now : (long long)c->now - deliverytime;
    } else if (ms_arg_is(c, j, "TIME") && more) {
      j++;
      if (!ms_parse_ll(c->argv[j], c->argvlen[j], &deliverytime))
        return mr_err("ERR Invalid TIME option argument for XCLAIM");
    } else if (ms_arg_is(c, j, "RETRYCOUNT") && more) {
      j++;
      if (!ms_parse_ll(c->argv[j], c->argvlen[j], &retrycount))
        return mr_err("ERR Invalid RETRYCOUNT option argument for XCLAIM");
    } else if (ms_arg_is(c, j, "LASTID") && more) {
      j++;
      if (!ms_parse_id(c->argv[j], c->argvlen[j], &lastid, 0, true, NULL)) return ms_err_badid();
    } else {
      return mr_err("ERR Unrecognized XCLAIM option '%.*s'", (int)c->argvlen[j], c->argv[j]);
    }
  }
  if (ms_idcmp(lastid, g->last_id) > 0) g->last_id = lastid;
  /* A bogus time (the future, negative) means now rather than an error. */
  if (deliverytime < 0 || deliverytime > (long long)c->now) deliverytime = (long long)c->now;

  struct ms_consumer *me = NULL;
  if (MS_V72(db)) {
    me = ms_consumer_get(g, c->argv[3], c->argvlen[3], c->now, NULL);
    me->seen_time = c->now;
  }
  bk_reply *a = mr_arr();
  for (j = 5; j <= last_id_arg; j++) {
    msid id;
    ms_parse_id(c->argv[j], c->argvlen[j], &id, 0, true, NULL);
    struct ms_nack *n = ms_nack_find(g, id);
    const struct ms_entry *e = ms_find_entry(s, id);
    if (e == NULL) {
      if (n) ms_nack_del(g, n); /* gone from the stream: gone from the PEL */
      continue;
    }
    if (n == NULL && force) {
      n = ms_nack_add(g, id);
      n->delivery_count = 1;
    }
    if (n == NULL) continue;
    if (n->owner && minidle && (long long)(c->now - n->delivery_time) < minidle) continue;
    if (me == NULL) me = ms_consumer_get(g, c->argv[3], c->argvlen[3], c->now, NULL);
    me->seen_time = c->now;
    me->active_time = (int64_t)c->now;
    n->owner = me;
    n->delivery_time = (uint64_t)deliverytime;
    if (retrycount >= 0)
      n->delivery_count = (uint64_t)retrycount;
    else if (!justid)
      n->delivery_count++;
    mr_push(a, justid ? ms_reply_id(id) : ms_reply_entry(e));
  }
  return a;
}

/* ---- XAUTOCLAIM ---- */

/* XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID] */
bk_reply *ms_cmd_xautoclaim(struct memdb *db, struct ms_call *c) {
  long long minidle, count = 100;
  bool justid = false, sx;
  msid start;
  if (!ms_parse_ll(c->argv[4], c->argvlen[4], &minidle))
    return mr_err("ERR Invalid min-idle-time argument for XAUTOCLAIM");
  if (minidle < 0) minidle = 0;
  if (!ms_parse_range_id(c->argv[5], c->argvlen[5], &start, &sx, 0)) return ms_err_badid();
  if (sx && !ms_id_incr(&start)) return mr_err("ERR invalid start ID for the interval");
  for (int j = 6; j < c->argc; j++) {
    if (ms_arg_is(c, j, "COUNT") && j + 1 < c->argc) {
      if (!ms_parse_ll(c->argv[j + 1], c->argvlen[j + 1], &count) || count < 1 ||
          count > (long long)(0x7fffffffffffffffLL / 16))
        return mr_err("ERR COUNT must be > 0");
      j++;
    } else if (ms_arg_is(c, j, "JUSTID")) {
      justid = true;
    } else {
      return ms_err_syntax();
    }
  }
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  struct ms_group *g = s ? ms_group_find(s, c->argv[2], c->argvlen[2]) : NULL;
  if (g == NULL) return err_nogroup_keyed(c);
  /* Redis allocates COUNT stream ids up front: a COUNT it may take but
   * cannot allocate (modelled as more than XAUTOCLAIM_MAX_ALLOC bytes) is
   * refused, after the key and group checks. */
  if ((unsigned long long)count > XAUTOCLAIM_MAX_ALLOC / sizeof(msid))
    return mr_err(
        "ERR Insufficient memory, failed allocating transient memory, COUNT too "
        "high.");

  struct ms_consumer *me = NULL;
  if (MS_V72(db)) {
    me = ms_consumer_get(g, c->argv[3], c->argvlen[3], c->now, NULL);
    me->seen_time = c->now;
  }
  long long attempts = count * 10;
  bk_reply *claimed = mr_arr(), *deleted = mr_arr();
  size_t i = ms_pel_slot(g, start);
  while (attempts-- && count && i < g->npel) {
    struct ms_nack *n = &g->pel[i];
    const struct ms_entry *e = ms_find_entry(s, n->id);
    if (e == NULL) {
      mr_push(deleted, ms_reply_id(n->id));
      ms_nack_del(g, n); /* i now points at the next one */
      count--;
      continue;
    }
    i++;
    if (minidle && (long long)(c->now - n->delivery_time) < minidle) continue;
    if (me == NULL) me = ms_consumer_get(g, c->argv[3], c->argvlen[3], c->now, NULL);
    me->seen_time = c->now;
    me->active_time = (int64_t)c->now;
    n->owner = me;
    n->delivery_time = c->now;
    if (!justid) n->delivery_count++;
    mr_push(claimed, justid ? ms_reply_id(n->id) : ms_reply_entry(e));
    count--;
  }
  msid cursor = {0, 0};
  if (i < g->npel) cursor = g->pel[i].id;
  bk_reply *a = mr_arr();
  mr_push(a, ms_reply_id(cursor));
  mr_push(a, claimed);
  return mr_push(a, deleted);
}

/* ---- XINFO ---- */

static bk_reply *xinfo_groups(struct memdb *db, struct ms_call *c) {
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  bk_reply *a = mr_arr();
  for (size_t i = 0; i < s->ngroups; i++) {
    struct ms_group *g = s->groups[i];
    bool valid;
    long long lag = ms_group_lag(s, g, MS_V80(db), &valid);
    bk_reply *e = mr_arr();
    mr_push(e, mr_str("name"));
    mr_push(e, mr_bulk(g->name, g->len));
    mr_push(e, mr_str("consumers"));
    mr_push(e, mr_int((long long)g->ncons));
    mr_push(e, mr_str("pending"));
    mr_push(e, mr_int((long long)g->npel));
    mr_push(e, mr_str("last-delivered-id"));
    mr_push(e, ms_reply_id(g->last_id));
    mr_push(e, mr_str("entries-read"));
    mr_push(e, g->entries_read == -1 ? mr_nil() : mr_int(g->entries_read));
    mr_push(e, mr_str("lag"));
    mr_push(e, valid ? mr_int(lag) : mr_nil());
    mr_push(a, e);
  }
  return a;
}

static bk_reply *xinfo_consumers(struct memdb *db, struct ms_call *c) {
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  struct ms_group *g = ms_group_find(s, c->argv[3], c->argvlen[3]);
  if (g == NULL) return err_nogroup_named(c, 3, 2);
  bk_reply *a = mr_arr();
  for (size_t i = 0; i < g->ncons; i++) {
    struct ms_consumer *k = g->cons[i];
    bk_reply *e = mr_arr();
    mr_push(e, mr_str("name"));
    mr_push(e, mr_bulk(k->name, k->len));
    mr_push(e, mr_str("pending"));
    mr_push(e, mr_int(ms_consumer_pending(g, k)));
    mr_push(e, mr_str("idle"));
    mr_push(e, mr_int(idle_of(c->now, k->seen_time)));
    if (MS_V72(db)) {
      mr_push(e, mr_str("inactive"));
      mr_push(e, mr_int(k->active_time < 0 ? -1 : idle_of(c->now, (uint64_t)k->active_time)));
    }
    mr_push(a, e);
  }
  return a;
}

/* XINFO STREAM|GROUPS|CONSUMERS (subcommands checked by the dispatcher). */
bk_reply *ms_cmd_xinfo(struct memdb *db, struct ms_call *c) {
  /* Every subcommand looks its key up first: missing, then of another type. */
  if (ms_key_type(db, c->argv[2], c->argvlen[2]) == MS_NONE) return mr_err("ERR no such key");
  bk_reply *err = ms_check_type(db, c->argv[2], c->argvlen[2], MS_STREAM);
  if (err) return err;
  if (ms_arg_is(c, 1, "STREAM")) return ms_xinfo_stream(db, c);
  if (ms_arg_is(c, 1, "GROUPS")) return xinfo_groups(db, c);
  return xinfo_consumers(db, c);
}
