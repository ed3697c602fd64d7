/* cmd_stream: the stream-level commands of the in-memory server: XADD, XLEN,
 * XRANGE, XREVRANGE, XDEL, XTRIM and XINFO STREAM (see commands.h). */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "memreply.h"
#include "stream.h"

/* ---- trimming (XADD and XTRIM) ---- */

/* XADD's and XTRIM's options. */
struct trim_args {
  struct ms_trim t;
  bool nomkstream; /* XADD only */
  bool id_given, seq_star;
  msid id;
};

/* Parses trimming options from argv[i]; for XADD also NOMKSTREAM and the ID.
 * Returns the index after the ID (XADD) or argc, or -1 with *err set. */
static int parse_trim(const struct ms_call *c, int i, bool xadd, struct trim_args *a,
                      bk_reply **err) {
  bool limit_given = false;
  struct ms_trim *t = &a->t;
  memset(a, 0, sizeof *a);
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
        *err = mr_err(
            "ERR syntax error, MAXLEN and MINID options at the same time are not "
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
      a->nomkstream = true;
    } else if (xadd) {
      /* The first token that is no option is the ID. */
      if (!ms_parse_id(o, olen, &a->id, 0, true, &a->seq_star)) {
        *err = ms_err_badid();
        return -1;
      }
      a->id_given = true;
      i++;
      goto done;
    } else {
      *err = ms_err_syntax();
      return -1;
    }
  }
done:
  if (limit_given && t->strategy == 0) {
    *err = mr_err(
        "ERR syntax error, LIMIT cannot be used without specifying a trimming "
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
  if (!limit_given) t->limit = t->approx ? MS_TRIM_DEFAULT_LIMIT : 0;
  return i;
}

/* ---- XADD ---- */

/* XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT n]] <*|id> field value ... */
bk_reply *ms_cmd_xadd(struct memdb *db, struct ms_call *c) {
  struct trim_args t;
  bk_reply *err = NULL;
  int fields = parse_trim(c, 2, true, &t, &err);
  if (fields < 0) return err;
  int nvals = c->argc - fields;
  if (nvals < 2 || nvals % 2) return ms_err_arity("xadd");
  if (t.id_given && !t.seq_star && t.id.ms == 0 && t.id.seq == 0)
    return mr_err("ERR The ID specified in XADD must be greater than 0-0");
  if ((err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM))) return err;
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
        /* 7.0.15 forgets errno on this path and so words it as a size
         * problem (checked live); the 8.x source says "smaller". Which
         * release between fixed it is not known. */
        if (s->last_id.seq == UINT64_MAX && !MS_V80(db))
          return mr_err("ERR Elements are too large to be stored");
        if (s->last_id.seq == UINT64_MAX) goto too_small;
        id.seq = s->last_id.seq + 1;
      } else {
        id.seq = 0;
      }
    }
    if (ms_idcmp(id, s->last_id) <= 0) goto too_small;
  }
  ms_stream_append(s, id, nvals, c->argv + fields, c->argvlen + fields);
  ms_stream_trim(s, &t.t);
  ms_signal(db, c->argv[1], c->argvlen[1]);
  return ms_reply_id(id);
too_small: /* never on a new stream: any id but 0-0 is above its 0-0 */
  return mr_err(
      "ERR The ID specified in XADD is equal or smaller than the target stream top "
      "item");
}

/* ---- XLEN, XRANGE, XREVRANGE, XDEL, XTRIM ---- */

bk_reply *ms_cmd_xlen(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
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
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  if (s == NULL) return mr_arr();
  /* COUNT 0 on an existing key is a null array, not an empty one: every
   * version so far (checked live on 7.0.15). */
  if (count == 0) return mr_nil();
  bk_reply *a = mr_arr();
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
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM);
  if (err) return err;
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
    if (ms_stream_delete(s, ids[j])) deleted++;
  }
  free(ids);
  return mr_int(deleted);
}

/* XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT n] */
bk_reply *ms_cmd_xtrim(struct memdb *db, struct ms_call *c) {
  struct trim_args t;
  bk_reply *err = NULL;
  if (parse_trim(c, 2, false, &t, &err) < 0) return err;
  if ((err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_STREAM))) return err;
  struct ms_stream *s = ms_lookup(db, c->argv[1], c->argvlen[1]);
  return mr_int(s ? ms_stream_trim(s, &t.t) : 0);
}

/* ---- XINFO STREAM ---- */

bk_reply *ms_xinfo_stream(struct memdb *db, struct ms_call *c) {
  if (c->argc > 3) { /* [FULL [COUNT n]]: FULL is not emulated */
    bool full = (c->argc == 4 || c->argc == 6) && ms_arg_is(c, 3, "FULL") &&
                (c->argc == 4 || ms_arg_is(c, 4, "COUNT"));
    if (!full)
      return mr_err(
          "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try XINFO "
          "HELP.",
          (int)c->argvlen[1], c->argv[1]);
    return mr_err("ERR XINFO STREAM FULL is not supported by the in-memory broker");
  }
  struct ms_stream *s = ms_lookup(db, c->argv[2], c->argvlen[2]);
  if (s == NULL) return mr_err("ERR no such key");
  /* radix-tree-keys is the number of nodes; radix-tree-nodes is right for
   * up to one node (a server's count for more depends on its radix tree,
   * see stream.h). */
  long long nodes = (long long)s->nnodes;
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
