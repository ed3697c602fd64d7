/* cmd_zset: the sorted-set commands of the in-memory server: ZADD
 * (with NX, XX, GT, LT, CH, INCR), ZINCRBY, ZREM, ZCARD, ZSCORE, ZRANGEBYSCORE and
 * ZRANGE (by index, or BYSCORE; REV; not BYLEX). Parsing, the order of the
 * checks and the error texts follow Redis 7.0's t_zset.c (checked live
 * against 7.0.15, tests/c/test_conformance.c); see zset.h for the data
 * model. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "memreply.h"
#include "zset.h"

/* ---- numbers ---- */

/* A score argument: Redis' string2d. strtod's syntax (inf, 1e3, 0x10 ...),
 * all of it, no leading space, no NaN, no overflow or underflow to zero. */
static bool parse_score(const char *s, size_t len, double *out) {
  char *copy = mr_memdup(s, len), *end;
  errno = 0;
  double d = strtod(copy, &end);
  bool ok = len > 0 && !(copy[0] == ' ' || (copy[0] >= '\t' && copy[0] <= '\r')) &&
            (size_t)(end - copy) == len && !isnan(d) &&
            !(errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || d == 0));
  free(copy);
  *out = d;
  return ok;
}

/* A ZRANGEBYSCORE bound: Redis' zslParseRange, laxer than a score. "(" makes
 * it exclusive; strtod must reach the end (an embedded NUL ends it); "" is
 * 0, " 1" and "1e400" (inf) pass, NaN does not. */
static bool parse_bound(const char *s, size_t len, double *out, bool *excl) {
  char *copy = mr_memdup(s, len), *end;
  *excl = copy[0] == '(';
  *out = strtod(copy + *excl, &end);
  bool ok = *end == '\0' && !isnan(*out);
  free(copy);
  return ok;
}

/* A score as Redis replies it: 7.0 prints "%.17g" (0.1 is
 * "0.10000000000000001"); 7.2 switched to the shortest form that reads back
 * the same, still without an exponent for integers below 10^17. */
static bk_reply *reply_score(const struct memdb *db, double d) {
  char buf[64];
  if (isinf(d)) return mr_str(d > 0 ? "inf" : "-inf");
  if (!MS_V72(db)) {
    snprintf(buf, sizeof buf, "%.17g", d);
  } else if (d == floor(d) && fabs(d) < 1e17) {
    snprintf(buf, sizeof buf, "%.0f", d);
  } else {
    for (int p = 1; p <= 17; p++) {
      snprintf(buf, sizeof buf, "%.*g", p, d);
      if (strtod(buf, NULL) == d) break;
    }
  }
  return mr_str(buf);
}

/* ---- ZADD ---- */

/* ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...] */
bk_reply *ms_cmd_zadd(struct memdb *db, struct ms_call *c) {
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
  int i = 2;
  for (;; i++) {
    if (ms_arg_is(c, i, "NX"))
      nx = true;
    else if (ms_arg_is(c, i, "XX"))
      xx = true;
    else if (ms_arg_is(c, i, "GT"))
      gt = true;
    else if (ms_arg_is(c, i, "LT"))
      lt = true;
    else if (ms_arg_is(c, i, "CH"))
      ch = true;
    else if (ms_arg_is(c, i, "INCR"))
      incr = true;
    else
      break;
  }
  int pairs = (c->argc - i) / 2;
  if (pairs == 0 || (c->argc - i) % 2) return ms_err_syntax();
  if (nx && xx) return mr_err("ERR XX and NX options at the same time are not compatible");
  if ((gt && nx) || (lt && nx) || (gt && lt))
    return mr_err("ERR GT, LT, and/or NX options at the same time are not compatible");
  if (incr && pairs > 1) return mr_err("ERR INCR option supports a single increment-element pair");
  double *scores = mr_alloc((size_t)pairs * sizeof *scores);
  for (int k = 0; k < pairs; k++) {
    if (!parse_score(c->argv[i + 2 * k], c->argvlen[i + 2 * k], &scores[k])) {
      free(scores);
      return mr_err("ERR value is not a valid float");
    }
  }
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_ZSET);
  struct ms_zset *z = ms_zset_lookup(db, c->argv[1], c->argvlen[1]);
  if (err || (z == NULL && xx)) {
    free(scores);
    return err ? err : incr ? mr_nil() : mr_int(0);
  }
  if (z == NULL) z = ms_zset_create(db, c->argv[1], c->argvlen[1]);
  long long added = 0, updated = 0;
  bool done = false; /* INCR: the member was written */
  double score = 0;
  for (int k = 0; k < pairs; k++) {
    const char *m = c->argv[i + 2 * k + 1];
    size_t mlen = c->argvlen[i + 2 * k + 1];
    size_t at = ms_zset_find(z, m, mlen);
    score = scores[k];
    if (at == z->n) {
      if (xx) continue;
      struct ms_zmember e = {score, mr_memdup(m, mlen), mlen};
      ms_zset_insert(z, e);
      added++;
      done = true;
      continue;
    }
    double cur = z->v[at].score;
    if (nx) continue;
    if (incr) {
      score += cur;
      if (isnan(score)) { /* inf + -inf; nothing was added: INCR takes one pair */
        free(scores);
        return mr_err("ERR resulting score is not a number (NaN)");
      }
    }
    if ((lt && score >= cur) || (gt && score <= cur)) continue;
    done = true;
    if (score != cur) {
      struct ms_zmember e = ms_zset_take(z, at);
      e.score = score;
      ms_zset_insert(z, e);
      updated++;
    }
  }
  free(scores);
  if (incr) return done ? reply_score(db, score) : mr_nil();
  return mr_int(ch ? added + updated : added);
}

/* ZINCRBY key increment member: Redis runs it as ZADD with INCR, option
 * parsing included (an increment spelled "NX" is an option, and then the
 * pairs do not add up: a syntax error). */
bk_reply *ms_cmd_zincrby(struct memdb *db, struct ms_call *c) {
  const char *argv[] = {c->argv[0], c->argv[1], "INCR", c->argv[2], c->argv[3]};
  size_t argvlen[] = {c->argvlen[0], c->argvlen[1], 4, c->argvlen[2], c->argvlen[3]};
  struct ms_call z = *c;
  z.argc = 5;
  z.argv = argv;
  z.argvlen = argvlen;
  return ms_cmd_zadd(db, &z);
}

/* ---- ZREM, ZCARD, ZSCORE ---- */

bk_reply *ms_cmd_zrem(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_ZSET);
  if (err) return err;
  struct ms_zset *z = ms_zset_lookup(db, c->argv[1], c->argvlen[1]);
  long long removed = 0;
  for (int i = 2; z && i < c->argc; i++) {
    size_t at = ms_zset_find(z, c->argv[i], c->argvlen[i]);
    if (at == z->n) continue;
    free(ms_zset_take(z, at).m);
    removed++;
    if (z->n == 0) {
      ms_key_delete(db, c->argv[1], c->argvlen[1]);
      z = NULL;
    }
  }
  return mr_int(removed);
}

bk_reply *ms_cmd_zcard(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_ZSET);
  if (err) return err;
  struct ms_zset *z = ms_zset_lookup(db, c->argv[1], c->argvlen[1]);
  return mr_int(z ? (long long)z->n : 0);
}

bk_reply *ms_cmd_zscore(struct memdb *db, struct ms_call *c) {
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_ZSET);
  if (err) return err;
  struct ms_zset *z = ms_zset_lookup(db, c->argv[1], c->argvlen[1]);
  size_t at = z ? ms_zset_find(z, c->argv[2], c->argvlen[2]) : 0;
  return z && at < z->n ? reply_score(db, z->v[at].score) : mr_nil();
}

/* ---- ZRANGE, ZRANGEBYSCORE ---- */

/* Redis' zrangeGenericCommand: ZRANGE key start stop [BYSCORE|BYLEX] [REV]
 * [LIMIT offset count] [WITHSCORES]; ZRANGEBYSCORE is the BYSCORE form
 * without the BYSCORE and REV words. Options first, then the range, then
 * the key. */
static bk_reply *zrange(struct memdb *db, struct ms_call *c, bool byscore_cmd) {
  bool byscore = byscore_cmd, bylex = false, rev = false, withscores = false;
  long long offset = 0, limit = -1;
  for (int j = 4; j < c->argc; j++) {
    if (ms_arg_is(c, j, "WITHSCORES")) {
      withscores = true;
    } else if (ms_arg_is(c, j, "LIMIT") && c->argc - j - 1 >= 2) {
      if (!ms_parse_ll(c->argv[j + 1], c->argvlen[j + 1], &offset) ||
          !ms_parse_ll(c->argv[j + 2], c->argvlen[j + 2], &limit))
        return ms_err_int();
      j += 2;
    } else if (!byscore_cmd && !rev && ms_arg_is(c, j, "REV")) {
      rev = true;
    } else if (!byscore_cmd && !byscore && !bylex && ms_arg_is(c, j, "BYLEX")) {
      bylex = true;
    } else if (!byscore_cmd && !byscore && !bylex && ms_arg_is(c, j, "BYSCORE")) {
      byscore = true;
    } else {
      return ms_err_syntax();
    }
  }
  if (limit != -1 && !byscore && !bylex)
    return mr_err(
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE "
        "or BYLEX");
  if (withscores && bylex)
    return mr_err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
  if (bylex) return mr_err("ERR BYLEX is not supported by the in-memory broker");
  int lo_arg = rev && byscore ? 3 : 2, hi_arg = rev && byscore ? 2 : 3; /* REV: [max, min] */
  long long start = 0, stop = 0;
  double min = 0, max = 0;
  bool minex = false, maxex = false;
  if (!byscore && (!ms_parse_ll(c->argv[2], c->argvlen[2], &start) ||
                   !ms_parse_ll(c->argv[3], c->argvlen[3], &stop)))
    return ms_err_int();
  if (byscore && (!parse_bound(c->argv[lo_arg], c->argvlen[lo_arg], &min, &minex) ||
                  !parse_bound(c->argv[hi_arg], c->argvlen[hi_arg], &max, &maxex)))
    return mr_err("ERR min or max is not a float");
  bk_reply *err = ms_check_type(db, c->argv[1], c->argvlen[1], MS_ZSET);
  if (err) return err;
  struct ms_zset *z = ms_zset_lookup(db, c->argv[1], c->argvlen[1]);
  bk_reply *a = mr_arr();
  if (z == NULL) return a;
  long long n = (long long)z->n;
  /* The selected positions, [from, to) in the order they are listed. */
  long long from, to;
  if (!byscore) {
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    if (start < 0) start = 0;
    if (start > stop || start >= n) return a;
    if (stop >= n) stop = n - 1;
    from = start;
    to = stop + 1;
  } else {
    from = (long long)ms_zset_first_from(z, min, minex);
    to = (long long)ms_zset_end_at(z, max, maxex);
    if (offset < 0 || from >= to) return a;
    long long avail = to - from - offset;
    if (avail <= 0) return a;
    if (limit >= 0 && limit < avail) avail = limit;
    /* the offset counts from the first listed: the highest when REV */
    if (rev)
      to -= offset, from = to - avail;
    else
      from += offset, to = from + avail;
  }
  for (long long k = 0; k < to - from; k++) {
    /* REV by index counts positions from the end; REV by score lists the
     * window backwards */
    const struct ms_zmember *e = !rev      ? &z->v[from + k]
                                 : byscore ? &z->v[to - 1 - k]
                                           : &z->v[n - 1 - (from + k)];
    mr_push(a, mr_bulk(e->m, e->len));
    if (withscores) mr_push(a, reply_score(db, e->score));
  }
  return a;
}

bk_reply *ms_cmd_zrange(struct memdb *db, struct ms_call *c) { return zrange(db, c, false); }
bk_reply *ms_cmd_zrangebyscore(struct memdb *db, struct ms_call *c) { return zrange(db, c, true); }
