/* Differential test of the in-memory Redis (host/memredis) against a real
 * redis-server 7.0.15.
 *
 * A seeded generator sends random sequences of the stream commands (XADD,
 * XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XGROUP and its subcommands,
 * XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO STREAM, GROUPS and
 * CONSUMERS), of ZADD, ZINCRBY and ZRANGE, of the string and key commands
 * (SET with NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL; GET, GETDEL, INCR,
 * INCRBY, DECR, DECRBY, MGET, MSET, APPEND, STRLEN, EXPIRE and PEXPIRE with
 * NX and XX, TTL, PTTL, PERSIST, TYPE, EXISTS, DEL), and of the hash (HSET,
 * HSETNX, HGET, HMGET, HGETALL, HINCRBY, HDEL, HEXISTS, HLEN), set (SADD,
 * SREM, SISMEMBER, SMEMBERS, SCARD) and list (LPUSH, RPUSH, LPOP, RPOP,
 * LRANGE, LLEN) commands, with edge-case arguments (ids 0-0, 0-1, the maximal
 * id, $, >, +, -, exclusive bounds, negative, huge and malformed counts,
 * MAXLEN and MINID with = and ~ and LIMIT, ENTRIESREAD, JUSTID, NOMKSTREAM,
 * FORCE, LASTID, increments and counters at the int64 bounds and malformed,
 * non-positive, overflowing and past expiry times, conflicting options,
 * missing and extra arguments, keys of the wrong type, big values that fill
 * a 4 KB node, duplicate fields and members, LRANGE indices out of range,
 * commands run through EVAL), to the memory broker configured as "7.0.15"
 * and to the server, and compares every reply exactly as conformance.h
 * renders it: ids, field order, error texts, nil against empty array,
 * integer against string, except SMEMBERS of a set that is not an intset,
 * compared sorted (see coll_key). Four things are normalised, as in the conformance
 * scenarios: ids generated from the clock become <idN> in order of
 * appearance (the generator refers to them the same way), idle times become
 * <t> (two clocks never agree to the ms; the generator uses idle thresholds
 * far from any boundary), a positive TTL or PTTL becomes <ttl> (the
 * server's clock moves during a run, the virtual one stands still: the
 * generator sets no time to live that runs out, only far, past and invalid
 * ones), and radix-tree-nodes beyond one node, which the
 * memory broker only estimates (stream.h). The other commands of the
 * in-memory server (ZREM, ZCARD, ZSCORE, ZRANGEBYSCORE, EXPIRE GT and LT,
 * FLUSHALL, PING, INFO, MULTI/EXEC/DISCARD) and keys expiring as time
 * passes are compared in the conformance scenarios (test_conformance.c,
 * test_memredis_strings.c) only.
 *
 * `differential` (./dev test) runs a few fixed seeds, a few thousand
 * commands in all. A long run is one command:
 *
 *   LUASTREAM_DIFF_SEED=7 LUASTREAM_DIFF_COMMANDS=200000 build-test/unit_tests differential
 *
 * (without LUASTREAM_DIFF_SEED it runs seeds 1, 2, 3 ...; no time limit then).
 * On a mismatch it prints the seed, the command number, the command and
 * both replies, then shrinks the sequence (dropping commands as long as the
 * last one still differs, for a few seconds) and prints the shorter list
 * with both sides' replies, ready to become a conformance scenario. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conformance.h"
#include "redis_server.h"
#include "task.h"

#define SHORT_SEEDS 4
#define SHORT_COMMANDS 2000
#define SHRINK_SECONDS 8
#define MAXID "18446744073709551615-18446744073709551615"

static struct redis_server srv;

/* ---- the generator ---- */

struct gen {
  uint64_t state;
  int ids;          /* <idN> named so far (the memory side's count) */
  uint64_t s2_ms;   /* s2 takes explicit ids: the ms part it is at */
  char s2_last[48]; /* the last id an XADD to s2 named */
  char next[96];    /* a follow-up the generator planned: its arguments, spaces between */
};

static uint64_t next(struct gen *g) { /* splitmix64 */
  uint64_t z = (g->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static int pick(struct gen *g, int n) { return (int)(next(g) % (uint64_t)n); }
static bool chance(struct gen *g, int percent) { return pick(g, 100) < percent; }

struct cmd {
  int argc;
  char *argv[CF_MAXARGS + 1];
};

static void add(struct cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct cmd *c, const char *fmt, ...) {
  if (c->argc == CF_MAXARGS) return;
  va_list ap;
  va_start(ap, fmt);
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  c->argv[c->argc++] = strdup(buf);
}

static void cmd_clear(struct cmd *c) {
  for (int i = 0; i < c->argc; i++) free(c->argv[i]);
  c->argc = 0;
}

static const char *oneof(struct gen *g, const char *const *list) {
  int n = 0;
  while (list[n]) n++;
  return list[pick(g, n)];
}

static const char *stream_key(struct gen *g) {
  static const char *const keys[] = {"s1", "s1", "s1", "s1", "s1", "s1",  "s1",   "s2",
                                     "s2", "s2", "s2", "s2", "z",  "str", "none", NULL};
  return oneof(g, keys);
}

/* A key for the commands of any type; never s1, which they could delete. */
static const char *any_key(struct gen *g) {
  static const char *const keys[] = {"s2",   "z", "z",  "str", "str", "none",
                                     "none", "h", "si", "st",  "l",   NULL};
  return oneof(g, keys);
}

static const char *group(struct gen *g) {
  static const char *const groups[] = {"g1", "g1", "g1", "g2", "g2", "nogroup", NULL};
  return oneof(g, groups);
}

static const char *consumer(struct gen *g) {
  static const char *const cons[] = {"c1", "c1", "c2", "c2", "c3", NULL};
  return oneof(g, cons);
}

/* A count-like argument: mostly small, sometimes absurd or malformed. */
static void add_count(struct gen *g, struct cmd *c) {
  static const char *const odd[] = {"0",
                                    "-1",
                                    "-5",
                                    "9223372036854775807",
                                    "9223372036854775808",
                                    "-9223372036854775808",
                                    "576460752303423487",
                                    "576460752303423488",
                                    "1000000000000",
                                    "10000000000000",
                                    "100000000000000000",
                                    "abc",
                                    "1.5",
                                    "",
                                    "01",
                                    "+3",
                                    NULL};
  if (chance(g, 80))
    add(c, "%d", 1 + pick(g, 12));
  else
    add(c, "%s", oneof(g, odd));
}

/* An id: kinds of ids a command may meet, valid or not. */
static void add_id(struct gen *g, struct cmd *c, bool range) {
  static const char *const edge[] = {"0-0",
                                     "0-1",
                                     "0",
                                     MAXID,
                                     "18446744073709551615",
                                     "18446744073709551616-0",
                                     "1-18446744073709551616",
                                     "-",
                                     "+",
                                     "$",
                                     ">",
                                     "abc",
                                     "1-abc",
                                     "-1",
                                     "1-",
                                     "",
                                     NULL};
  int r = pick(g, 100);
  const char *prefix = range && chance(g, 25) ? "(" : "";
  if (r < 12 && g->s2_last[0]) /* XDEL it, then MINID = it: the emptied node Redis keeps */
    add(c, "%s%s", prefix, g->s2_last);
  else if (r < 40 && g->ids > 0) /* one of the last 40 generated */
    add(c, "%s<id%d>", prefix, g->ids > 40 ? g->ids - pick(g, 40) : 1 + pick(g, g->ids));
  else if (r < 70) /* near s2's top */
    add(c, "%s%llu-%d", prefix,
        (unsigned long long)(g->s2_ms > 3 ? g->s2_ms - (uint64_t)pick(g, 4) : g->s2_ms),
        pick(g, 3));
  else if (r < 75)
    add(c, "%s%llu", prefix, (unsigned long long)g->s2_ms);
  else
    add(c, "%s%s", prefix, oneof(g, edge));
}

/* small: one short pair. The listpack bytes of an entry depend on its id,
 * and generated ids differ between the two clocks: a stream with generated
 * ids must not come near the 4 KB a node may hold, or the two sides would
 * split nodes differently for a reason of the test's own. */
static void add_fields(struct gen *g, struct cmd *c, bool small) {
  static const char *const names[] = {"f", "f", "f", "g", "1", "-1", "1000000", "x y", NULL};
  int pairs = small || chance(g, 70) ? 1 : 2 + pick(g, 2);
  for (int i = 0; i < pairs; i++) {
    add(c, "%s", small || (i == 0 && chance(g, 85)) ? "f" : oneof(g, names));
    int r = pick(g, 100);
    if (r < 25 && !small) { /* big: a few of these fill a 4 KB node */
      char big[1600];
      int len = 300 + pick(g, 1200);
      memset(big, 'a' + pick(g, 26), (size_t)len);
      big[len] = '\0';
      add(c, "%s", big);
    } else if (r < 40) {
      add(c, "%d", pick(g, 100000) - 50);
    } else {
      add(c, "v%d", pick(g, 1000));
    }
  }
  if (!small && chance(g, 3)) add(c, "odd"); /* a field without a value */
}

static void add_trim(struct gen *g, struct cmd *c, bool required) {
  if (!required && chance(g, 70)) return;
  bool maxlen = chance(g, 65);
  add(c, "%s", maxlen ? "MAXLEN" : "MINID");
  if (chance(g, 60)) add(c, "%s", chance(g, 60) ? "~" : "=");
  if (maxlen) {
    static const char *const lens[] = {"0",   "1",   "5",   "50", "99",  "100",
                                       "101", "150", "250", "-1", "abc", NULL};
    add(c, "%s", oneof(g, lens));
  } else {
    add_id(g, c, false);
  }
  if (chance(g, 15)) {
    add(c, "LIMIT");
    add_count(g, c);
  }
}

static void gen_xadd(struct gen *g, struct cmd *c) {
  static const char *const s1_ids[] = {"0-0", "0-1", "1-1", "5-*", "abc", "", NULL};
  const char *key = stream_key(g);
  add(c, "XADD");
  add(c, "%s", key);
  if (chance(g, 8)) add(c, "NOMKSTREAM");
  add_trim(g, c, false);
  int r = pick(g, 100);
  /* Only s1 takes generated ids, and s1 is never deleted nor given the
   * maximal id: ids from two clocks compare only by order of appearance,
   * so no generated id may come twice on one side (the virtual clock stands
   * still). */
  if (strcmp(key, "s1") == 0) {
    if (r < 92)
      add(c, "*");
    else if (r < 96 && g->ids > 0)
      add(c, "<id%d>", g->ids);
    else
      add(c, "%s", oneof(g, s1_ids));
  } else if (r < 85) {
    g->s2_ms += (uint64_t)pick(g, 3);
    if (chance(g, 30))
      add(c, "%llu-*", (unsigned long long)g->s2_ms);
    else
      add(c, "%llu-%d", (unsigned long long)g->s2_ms, pick(g, 3));
    snprintf(g->s2_last, sizeof g->s2_last, "%s", c->argv[c->argc - 1]);
    if (strchr(g->s2_last, '*')) strchr(g->s2_last, '*')[0] = '0';
  } else {
    add_id(g, c, false);
  }
  add_fields(g, c, strcmp(key, "s1") == 0);
}

static void gen_range(struct gen *g, struct cmd *c) {
  add(c, chance(g, 60) ? "XRANGE" : "XREVRANGE");
  add(c, "%s", stream_key(g));
  if (chance(g, 50)) {
    add(c, "-");
    add(c, "+");
    if (strcmp(c->argv[0], "XREVRANGE") == 0) {
      strcpy(c->argv[2], "+");
      strcpy(c->argv[3], "-");
    }
  } else {
    add_id(g, c, true);
    add_id(g, c, true);
  }
  if (chance(g, 50)) {
    add(c, "COUNT");
    add_count(g, c);
  }
}

static void gen_xgroup(struct gen *g, struct cmd *c) {
  int r = pick(g, 100);
  add(c, "XGROUP");
  if (r < 50) {
    add(c, "CREATE");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
    if (chance(g, 50))
      add(c, "$");
    else
      add_id(g, c, false);
    if (chance(g, 50)) add(c, "MKSTREAM");
    if (chance(g, 25)) {
      add(c, "ENTRIESREAD");
      add_count(g, c);
    }
  } else if (r < 70) {
    add(c, "SETID");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
    if (chance(g, 30))
      add(c, "$");
    else
      add_id(g, c, false);
    if (chance(g, 25)) {
      add(c, "ENTRIESREAD");
      add_count(g, c);
    }
  } else if (r < 80) {
    add(c, "DESTROY");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
  } else if (r < 90) {
    add(c, "CREATECONSUMER");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
    add(c, "%s", consumer(g));
  } else {
    add(c, "DELCONSUMER");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
    add(c, "%s", consumer(g));
  }
}

static void gen_xreadgroup(struct gen *g, struct cmd *c) {
  add(c, "XREADGROUP");
  if (chance(g, 97)) {
    add(c, "GROUP");
    add(c, "%s", group(g));
    add(c, "%s", consumer(g));
  }
  if (chance(g, 50)) {
    add(c, "COUNT");
    add_count(g, c);
  }
  if (chance(g, 15)) add(c, "NOACK");
  add(c, "STREAMS");
  int n = chance(g, 80) ? 1 : 2;
  for (int i = 0; i < n; i++) add(c, "%s", stream_key(g));
  for (int i = 0; i < n; i++) {
    if (chance(g, 55))
      add(c, ">");
    else if (chance(g, 30))
      add(c, "%s", chance(g, 50) ? "0" : MAXID);
    else
      add_id(g, c, false);
  }
}

static void gen_xpending(struct gen *g, struct cmd *c) {
  add(c, "XPENDING");
  add(c, "%s", stream_key(g));
  add(c, "%s", group(g));
  if (chance(g, 30)) return;
  if (chance(g, 20)) {
    add(c, "IDLE");
    add(c, "%s", chance(g, 50) ? "0" : chance(g, 50) ? "1000000000" : "abc");
  }
  if (chance(g, 50)) {
    add(c, "-");
    add(c, "+");
  } else {
    add_id(g, c, true);
    add_id(g, c, true);
  }
  add_count(g, c);
  if (chance(g, 30)) add(c, "%s", consumer(g));
}

static void gen_xclaim(struct gen *g, struct cmd *c) {
  static const char *const idle[] = {"0", "0", "1000000000", "2000000000", "-5", "abc", NULL};
  add(c, "XCLAIM");
  add(c, "%s", stream_key(g));
  add(c, "%s", group(g));
  add(c, "%s", consumer(g));
  add(c, "%s", oneof(g, idle));
  int n = 1 + pick(g, 3);
  for (int i = 0; i < n; i++) add_id(g, c, false);
  for (int i = 0, opts = pick(g, 3); i < opts; i++) {
    int r = pick(g, 7);
    if (r == 0) {
      add(c, "IDLE");
      add(c, "%s", oneof(g, idle));
    } else if (r == 1) {
      add(c, "TIME");
      add(c, "%s", chance(g, 50) ? "1000" : "99999999999999");
    } else if (r == 2) {
      add(c, "RETRYCOUNT");
      add_count(g, c);
    } else if (r == 3) {
      add(c, "FORCE");
    } else if (r == 4) {
      add(c, "JUSTID");
    } else if (r == 5) {
      add(c, "LASTID");
      add_id(g, c, false);
    } else {
      add(c, "BOGUS");
    }
  }
}

static void gen_xautoclaim(struct gen *g, struct cmd *c) {
  static const char *const idle[] = {"0", "0", "1000000000", "-5", "abc", NULL};
  add(c, "XAUTOCLAIM");
  add(c, "%s", stream_key(g));
  add(c, "%s", group(g));
  add(c, "%s", consumer(g));
  add(c, "%s", oneof(g, idle));
  if (chance(g, 50))
    add(c, "0-0");
  else
    add_id(g, c, true);
  if (chance(g, 50)) {
    add(c, "COUNT");
    add_count(g, c);
  }
  if (chance(g, 25)) add(c, "JUSTID");
}

static void gen_other(struct gen *g, struct cmd *c) {
  int r = pick(g, 100);
  if (r < 12) {
    add(c, "XLEN");
    add(c, "%s", stream_key(g));
  } else if (r < 27) {
    add(c, "XDEL");
    add(c, "%s", stream_key(g));
    if (strcmp(c->argv[1], "s2") == 0 && g->s2_last[0] && chance(g, 30)) {
      /* the top entry; then trimming up to it empties its node, which
       * exact trimming keeps */
      add(c, "%s", g->s2_last);
      if (chance(g, 60))
        snprintf(g->next, sizeof g->next, "XTRIM s2 MINID %s%s", chance(g, 50) ? "= " : "",
                 g->s2_last);
    } else {
      for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add_id(g, c, false);
    }
  } else if (r < 42) {
    add(c, "XTRIM");
    add(c, "%s", stream_key(g));
    add_trim(g, c, !chance(g, 5));
  } else if (r < 57) {
    add(c, "XINFO");
    add(c, "STREAM");
    add(c, "%s", stream_key(g));
  } else if (r < 65) {
    add(c, "XINFO");
    add(c, "GROUPS");
    add(c, "%s", stream_key(g));
  } else if (r < 73) {
    add(c, "XINFO");
    add(c, "CONSUMERS");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
  } else if (r < 80) {
    add(c, "XACK");
    add(c, "%s", stream_key(g));
    add(c, "%s", group(g));
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add_id(g, c, false);
  } else if (r < 92) {
    add(c, "ZADD");
    add(c, "%s", chance(g, 80) ? "z" : any_key(g));
    add(c, "%d", pick(g, 10));
    add(c, "m%d", pick(g, 5));
  } else {
    add(c, "ZRANGE");
    add(c, "%s", any_key(g));
    add(c, "0");
    add(c, "-1");
  }
}

/* A key for the string and key commands: mostly strings, sometimes another
 * type or none. */
static const char *str_key(struct gen *g) {
  static const char *const keys[] = {"str", "str", "n", "n", "n", "s2", "z", "none", NULL};
  return oneof(g, keys);
}

/* An integer argument of INCRBY / DECRBY, or a value SET gives a counter. */
static void add_int(struct gen *g, struct cmd *c) {
  static const char *const odd[] = {"9223372036854775807",
                                    "-9223372036854775807",
                                    "-9223372036854775808",
                                    "9223372036854775808",
                                    "4611686018427387904",
                                    "-4611686018427387905",
                                    "9223372036854775806",
                                    "abc",
                                    "1.5",
                                    "",
                                    "+1",
                                    "+3",
                                    "01",
                                    "-0",
                                    " 1",
                                    "0",
                                    "-1",
                                    NULL};
  if (chance(g, 55))
    add(c, "%d", pick(g, 200) - 100);
  else
    add(c, "%s", oneof(g, odd));
}

/* A time to live for SET or EXPIRE. Only times the two clocks cannot
 * disagree on: none that runs out during a run (the virtual clock stands
 * still while the server's moves), past ones (EXAT 1, a non-positive
 * EXPIRE: the key is gone at once on both sides) and invalid ones. */
static void add_ttl(struct gen *g, struct cmd *c) {
  static const char *const times[] = {"100000000",
                                      "100000000",
                                      "2000000000",
                                      "0",
                                      "-1",
                                      "-100",
                                      "abc",
                                      "",
                                      "1.5",
                                      "9223372036854775807",
                                      "9223372036854775",
                                      "-9223372036854775808",
                                      NULL};
  add(c, "%s", oneof(g, times));
}

static void gen_string(struct gen *g, struct cmd *c) {
  int r = pick(g, 100);
  if (r < 25) { /* SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL], in any order */
    static const char *const opts[] = {"NX",   "XX",   "GET", "KEEPTTL", "EX", "PX",
                                       "EXAT", "PXAT", "nx",  "bogus",   NULL};
    static const char *const abs[] = {
        "1", "1000", "4102444800", "4102444800000", "9223372036854775807", "0", NULL};
    add(c, "SET");
    add(c, "%s", chance(g, 70) ? "str" : str_key(g));
    if (chance(g, 40))
      add_int(g, c);
    else
      add(c, "x%d", pick(g, 10));
    for (int i = 0, n = pick(g, 4); i < n; i++) {
      const char *o = oneof(g, opts);
      add(c, "%s", o);
      if (!strcmp(o, "EX") || !strcmp(o, "PX"))
        add_ttl(g, c);
      else if (!strcmp(o, "EXAT") || !strcmp(o, "PXAT"))
        add(c, "%s", oneof(g, abs));
    }
  } else if (r < 40) {
    static const char *const incr[] = {"INCR", "DECR", "INCRBY", "DECRBY", NULL};
    const char *cmd = oneof(g, incr);
    add(c, "%s", cmd);
    add(c, "%s", chance(g, 80) ? "n" : str_key(g));
    if (strlen(cmd) == 6) add_int(g, c);
  } else if (r < 48) {
    add(c, "%s", chance(g, 70) ? "GET" : "GETDEL");
    add(c, "%s", str_key(g));
  } else if (r < 54) {
    add(c, "MGET");
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add(c, "%s", str_key(g));
  } else if (r < 58) {
    add(c, "MSET");
    for (int i = 0, n = 1 + pick(g, 2); i < n; i++) {
      add(c, "%s", str_key(g));
      add_int(g, c);
    }
  } else if (r < 63) {
    add(c, "%s", chance(g, 50) ? "APPEND" : "STRLEN");
    add(c, "%s", str_key(g));
    if (!strcmp(c->argv[0], "APPEND")) add(c, "%s", chance(g, 50) ? "1" : "ab");
  } else if (r < 75) {
    /* NX and XX only: GT and LT compare two times taken from each side's
     * clock (test_memredis_strings.c checks them) */
    static const char *const flags[] = {"NX", "XX", "nx", "GT", "FOO", NULL};
    add(c, "%s", chance(g, 50) ? "EXPIRE" : "PEXPIRE");
    add(c, "%s", str_key(g));
    add_ttl(g, c);
    for (int i = 0, n = chance(g, 60) ? 0 : 1 + pick(g, 2); i < n; i++) {
      const char *f = oneof(g, flags);
      if (!strcmp(f, "GT") && n == 1) f = "XX";
      add(c, "%s", f);
    }
  } else if (r < 85) {
    static const char *const ttl[] = {"TTL", "PTTL", "PERSIST", NULL};
    add(c, "%s", oneof(g, ttl));
    add(c, "%s", str_key(g));
  } else if (r < 90) {
    add(c, "TYPE");
    add(c, "%s", str_key(g));
  } else if (r < 95) {
    add(c, "EXISTS");
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add(c, "%s", str_key(g));
  } else {
    add(c, "DEL");
    for (int i = 0, n = 1 + pick(g, 2); i < n; i++) add(c, "%s", any_key(g));
  }
}

/* ---- hashes, sets, lists ---- */

/* Keys the collection commands meet: h (a hash), si (a set of integers
 * only: an intset, listed sorted), st (a set of any members, which Redis
 * 7.0 keeps in a hashtable: SMEMBERS on it is compared sorted, see step),
 * l (a list), and keys of other types or none. Hashes stay under 10 fields
 * of short values and sets under 20 members, so that Redis keeps them in
 * the encodings whose order the in-memory server follows (listpack,
 * intset). */
static const char *coll_key(struct gen *g, const char *own, bool writes) {
  static const char *const other[] = {"h", "st", "l", "z", "str", "s2", "none", NULL};
  /* a write creates its type on a missing key: only at keys that exist */
  static const char *const existing[] = {"str", "s2", NULL};
  return chance(g, 85) ? own : oneof(g, writes ? existing : other);
}

static void gen_hash(struct gen *g, struct cmd *c) {
  static const char *const fields[] = {"f1", "f1", "f2", "f3", "n", "n", "1", "x y", NULL};
  int r = pick(g, 100);
  const char *key = coll_key(g, "h", r < 52);
  if (r < 25) {
    add(c, "HSET");
    add(c, "%s", key);
    for (int i = 0, n = 1 + (chance(g, 70) ? 0 : pick(g, 3)); i < n; i++) {
      add(c, "%s", oneof(g, fields));
      if (chance(g, 40))
        add_int(g, c);
      else
        add(c, "v%d", pick(g, 100));
    }
    if (chance(g, 3)) add(c, "f9"); /* a field without a value */
  } else if (r < 32) {
    add(c, "HSETNX");
    add(c, "%s", key);
    add(c, "%s", oneof(g, fields));
    add(c, "w%d", pick(g, 100));
  } else if (r < 52) {
    add(c, "HINCRBY");
    add(c, "%s", key);
    add(c, "%s", oneof(g, fields));
    add_int(g, c);
  } else if (r < 60) {
    add(c, "HGET");
    add(c, "%s", key);
    add(c, "%s", oneof(g, fields));
  } else if (r < 66) {
    add(c, "HMGET");
    add(c, "%s", key);
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add(c, "%s", oneof(g, fields));
  } else if (r < 78) {
    add(c, "HGETALL");
    add(c, "%s", key);
  } else if (r < 90) {
    add(c, "HDEL");
    add(c, "%s", key);
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add(c, "%s", oneof(g, fields));
  } else if (r < 95) {
    add(c, "HEXISTS");
    add(c, "%s", key);
    add(c, "%s", oneof(g, fields));
  } else {
    add(c, "HLEN");
    add(c, "%s", key);
  }
}

static void gen_set(struct gen *g, struct cmd *c) {
  static const char *const ints[] = {"0",
                                     "1",
                                     "2",
                                     "-1",
                                     "7",
                                     "100",
                                     "-100",
                                     "65536",
                                     "9223372036854775807",
                                     "-9223372036854775808",
                                     NULL};
  static const char *const any[] = {"a",  "b",  "c",          "x y", "1", "2", "-1", "01",
                                    "+3", "-0", "2147483648", "",    "m", "n", NULL};
  bool isint = chance(g, 50);
  int r = pick(g, 100);
  const char *key = coll_key(g, isint ? "si" : "st", r < 35);
  const char *const *members = strcmp(key, "si") == 0 ? ints : any;
  if (r < 35) {
    add(c, "SADD");
    add(c, "%s", key);
    for (int i = 0, n = 1 + (chance(g, 60) ? 0 : pick(g, 4)); i < n; i++)
      add(c, "%s", oneof(g, members));
  } else if (r < 55) {
    add(c, "SREM");
    add(c, "%s", key);
    for (int i = 0, n = 1 + pick(g, 3); i < n; i++) add(c, "%s", oneof(g, members));
  } else if (r < 67) {
    add(c, "SISMEMBER");
    add(c, "%s", key);
    add(c, "%s", oneof(g, members));
  } else if (r < 90) {
    add(c, "SMEMBERS");
    add(c, "%s", key);
  } else {
    add(c, "SCARD");
    add(c, "%s", key);
  }
}

static void gen_list(struct gen *g, struct cmd *c) {
  static const char *const idx[] = {"0",
                                    "-1",
                                    "1",
                                    "-2",
                                    "2",
                                    "5",
                                    "-5",
                                    "100",
                                    "-100",
                                    "9223372036854775807",
                                    "-9223372036854775808",
                                    "9223372036854775808",
                                    "abc",
                                    "",
                                    NULL};
  int r = pick(g, 100);
  const char *key = coll_key(g, "l", r < 30);
  if (r < 30) {
    add(c, chance(g, 50) ? "LPUSH" : "RPUSH");
    add(c, "%s", key);
    for (int i = 0, n = 1 + (chance(g, 60) ? 0 : pick(g, 4)); i < n; i++)
      add(c, "e%d", pick(g, 50));
  } else if (r < 60) {
    add(c, chance(g, 50) ? "LPOP" : "RPOP");
    add(c, "%s", key);
    if (chance(g, 50))
      add_count(g, c);
    else if (chance(g, 20))
      add_int(g, c);
  } else if (r < 88) {
    add(c, "LRANGE");
    add(c, "%s", key);
    if (chance(g, 40)) {
      add(c, "0");
      add(c, "-1");
    } else {
      add(c, "%s", oneof(g, idx));
      add(c, "%s", oneof(g, idx));
    }
  } else {
    add(c, "LLEN");
    add(c, "%s", key);
  }
}

static void gen_zincrby(struct gen *g, struct cmd *c) {
  static const char *const incr[] = {"1",   "2.5", "-3", "0",  "inf",  "-inf", "1e308",
                                     "abc", "",    "NX", "XX", "INCR", "nan",  NULL};
  add(c, "ZINCRBY");
  add(c, "%s", chance(g, 80) ? "z" : any_key(g));
  add(c, "%s", chance(g, 60) ? "1" : oneof(g, incr));
  add(c, "m%d", pick(g, 5));
}

static void gen_coll(struct gen *g, struct cmd *c) {
  int r = pick(g, 100);
  if (r < 35)
    gen_hash(g, c);
  else if (r < 65)
    gen_set(g, c);
  else if (r < 93)
    gen_list(g, c);
  else
    gen_zincrby(g, c);
}

/* One random command into c. */
static void generate(struct gen *g, struct cmd *c) {
  if (g->next[0]) {
    for (char *w = strtok(g->next, " "); w; w = strtok(NULL, " ")) add(c, "%s", w);
    g->next[0] = '\0';
    c->argv[c->argc] = NULL;
    return;
  }
  int r = pick(g, 100);
  if (chance(g, 25))
    gen_coll(g, c);
  else if (r < 14)
    gen_string(g, c);
  else if (r < 30)
    gen_xadd(g, c);
  else if (r < 38)
    gen_range(g, c);
  else if (r < 48)
    gen_xgroup(g, c);
  else if (r < 60)
    gen_xreadgroup(g, c);
  else if (r < 67)
    gen_xpending(g, c);
  else if (r < 72)
    gen_xclaim(g, c);
  else if (r < 77)
    gen_xautoclaim(g, c);
  else
    gen_other(g, c);
  if (chance(g, 3) && c->argc > 1) { /* a missing argument */
    free(c->argv[--c->argc]);
  } else if (chance(g, 2) && strcmp(c->argv[1], "si") != 0) { /* si: integers only */
    add(c, "junk");
  }
  if (chance(g, 3) && c->argc + 3 <= CF_MAXARGS) { /* through a script */
    memmove(c->argv + 3, c->argv, (size_t)c->argc * sizeof *c->argv);
    c->argv[0] = strdup("EVAL");
    c->argv[1] = strdup(chance(g, 50) ? "return redis.call(unpack(ARGV))"
                                      : "return redis.pcall(unpack(ARGV))");
    c->argv[2] = strdup("0");
    c->argc += 3;
  }
  c->argv[c->argc] = NULL;
}

/* ---- running ---- */

struct run {
  struct cf_side *mem, *real;
  struct cf_norm *nm, *nr;
};

static void run_start(struct run *r) {
  r->nm = cf_norm_new(true);
  r->nr = cf_norm_new(true);
  cf_side_reset(r->mem);
  cf_side_reset(r->real);
}

static void run_stop(struct run *r) {
  cf_side_finish(r->mem);
  cf_side_finish(r->real);
  cf_norm_free(r->nm);
  cf_norm_free(r->nr);
}

static char *concat(char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  a = realloc(a, la + lb + 1);
  memcpy(a + la, b, lb + 1);
  return a;
}

/* A time left (":N", N > 0) becomes ":<ttl>": the server's clock moves
 * during a run and the virtual one stands still, so only -2, -1 and
 * "some time left" can agree (the generator sets no time that runs out). */
static char *mask_ttl(char *reply) {
  if (reply[0] != ':' || atoll(reply + 1) <= 0) return reply;
  free(reply);
  return strdup(":<ttl>");
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A flat array reply "[a,b,c]" with its items sorted (in place). */
static void sort_items(char *line) {
  size_t len = strlen(line);
  if (len < 3 || line[0] != '[' || line[len - 1] != ']' || strchr(line + 1, '[')) return;
  char *body = strndup(line + 1, len - 2), *items[256];
  int n = 0;
  for (char *p = body, *comma; n < 256; p = comma + 1) {
    items[n++] = p;
    if ((comma = strchr(p, ',')) == NULL) break;
    *comma = '\0';
  }
  qsort(items, (size_t)n, sizeof *items, cmp_str);
  char *out = line + 1;
  for (int i = 0; i < n; i++) out += sprintf(out, "%s%s", i ? "," : "", items[i]);
  strcpy(out, "]");
  free(body);
}

/* Runs one command on both sides; true if the replies agree. A command
 * that changes a stream without saying how (XADD's trimming, XDEL, XTRIM)
 * is followed by XINFO STREAM on its key, whose reply is compared too: a
 * divergence shows at the command that made it. */
static bool step(struct run *r, const struct cmd *c, char **m, char **s) {
  *m = cf_side_run(r->mem, r->nm, (const char *const *)c->argv);
  *s = cf_side_run(r->real, r->nr, (const char *const *)c->argv);
  /* an empty bulk string (HGET of a field set to "") renders as nothing */
  if (*m == NULL) *m = strdup("");
  if (*s == NULL) *s = strdup("");
  int at = c->argc > 4 && strcmp(c->argv[0], "EVAL") == 0 ? 3 : 0;
  if (at < c->argc && (strcmp(c->argv[at], "TTL") == 0 || strcmp(c->argv[at], "PTTL") == 0)) {
    *m = mask_ttl(*m);
    *s = mask_ttl(*s);
  }
  /* Redis 7.0 lists a set that is not an intset in its hashtable's order */
  if (at + 1 < c->argc && strcmp(c->argv[at], "SMEMBERS") == 0 &&
      strcmp(c->argv[at + 1], "si") != 0) {
    sort_items(*m);
    sort_items(*s);
  }
  if (strcmp(*m, *s) != 0) return false;
  if (at + 1 < c->argc && (strcmp(c->argv[at], "XADD") == 0 || strcmp(c->argv[at], "XDEL") == 0 ||
                           strcmp(c->argv[at], "XTRIM") == 0)) {
    const char *probe[] = {"XINFO", "STREAM", c->argv[at + 1], NULL};
    char *pm = cf_side_run(r->mem, r->nm, probe), *ps = cf_side_run(r->real, r->nr, probe);
    bool same = strcmp(pm, ps) == 0;
    *m = concat(concat(*m, " | then XINFO STREAM -> "), pm);
    *s = concat(concat(*s, " | then XINFO STREAM -> "), ps);
    free(pm);
    free(ps);
    return same;
  }
  return true;
}

static void show(const struct cmd *c, FILE *f) {
  for (int i = 0; i < c->argc; i++) {
    const char *a = c->argv[i];
    size_t len = strlen(a);
    if (i) fputc(' ', f);
    if (len > 60) /* the generator's big values: one letter repeated */
      fprintf(f, "<%c x%zu>", a[0], len);
    else if (len == 0 || strpbrk(a, " \"") || a[0] == '<')
      fprintf(f, "\"%s\"", a);
    else
      fputs(a, f);
  }
}

/* Replays list[0..n) with keep[] marking the commands used: true if the last
 * kept one still differs (and nothing before it does). */
static bool replays_failing(struct run *r, struct cmd *list, const bool *keep, int n) {
  bool failing = false;
  run_start(r);
  for (int i = 0; i < n; i++) {
    if (!keep[i]) continue;
    char *m, *s;
    bool same = step(r, &list[i], &m, &s);
    free(m);
    free(s);
    if (!same) {
      failing = i == n - 1;
      break;
    }
  }
  run_stop(r);
  return failing;
}

/* Drops chunks of commands while the last one keeps differing, for at most
 * SHRINK_SECONDS; prints what is left, with both sides' replies. */
static void shrink(struct run *r, struct cmd *list, int n) {
  bool *keep = malloc((size_t)n * sizeof *keep);
  for (int i = 0; i < n; i++) keep[i] = true;
  time_t until = time(NULL) + SHRINK_SECONDS;
  for (int chunk = n / 2; chunk >= 1 && time(NULL) < until; chunk /= 2) {
    for (int from = n - 1 - chunk; from >= 0 && time(NULL) < until; from -= chunk) {
      int lo = from < 0 ? 0 : from;
      bool any = false;
      for (int i = lo; i < from + chunk && i < n - 1; i++) any |= keep[i];
      if (!any) continue;
      bool *trial = malloc((size_t)n * sizeof *trial);
      memcpy(trial, keep, (size_t)n * sizeof *trial);
      for (int i = lo; i < from + chunk && i < n - 1; i++) trial[i] = false;
      if (replays_failing(r, list, trial, n)) memcpy(keep, trial, (size_t)n * sizeof *keep);
      free(trial);
    }
  }
  int kept = 0;
  for (int i = 0; i < n; i++) kept += keep[i];
  fprintf(stderr, "\nshrunk to %d command(s) (memory | redis-server):\n", kept);
  run_start(r);
  for (int i = 0; i < n; i++) {
    if (!keep[i]) continue;
    char *m, *s;
    bool same = step(r, &list[i], &m, &s);
    fprintf(stderr, "  #%d ", i + 1);
    show(&list[i], stderr);
    if (same)
      fprintf(stderr, "\n      -> %.300s\n", m);
    else
      fprintf(stderr, "\n      memory       -> %s\n      redis-server -> %s\n", m, s);
    free(m);
    free(s);
  }
  run_stop(r);
  free(keep);
}

/* Runs `count` commands of seed `seed`; fails the test at the first reply
 * that differs. */
static void differential(struct run *r, uint64_t seed, int count) {
  struct gen g = {.state = seed * 0x2545F4914F6CDD1DULL + 1, .ids = 0, .s2_ms = 1};
  struct cmd *list = calloc((size_t)count, sizeof *list);
  run_start(r);
  for (int i = 0; i < count; i++) {
    g.ids = cf_norm_ids(r->nm);
    generate(&g, &list[i]);
    char *m, *s;
    if (step(r, &list[i], &m, &s)) {
      free(m);
      free(s);
      continue;
    }
    fprintf(stderr, "differential: seed %llu, command #%d of %d differs\n  command      ",
            (unsigned long long)seed, i + 1, count);
    show(&list[i], stderr);
    fprintf(stderr, "\n  memory       %s\n  redis-server %s\n", m, s);
    fprintf(stderr,
            "replay: LUASTREAM_DIFF_SEED=%llu LUASTREAM_DIFF_COMMANDS=%d build-test/unit_tests "
            "differential\n",
            (unsigned long long)seed, i + 1);
    if (getenv("LUASTREAM_DIFF_ALL")) {
      fprintf(stderr, "the whole sequence:\n");
      for (int k = 0; k <= i; k++) {
        fprintf(stderr, "  #%d ", k + 1);
        show(&list[k], stderr);
        fputc('\n', stderr);
      }
    }
    run_stop(r);
    shrink(r, list, i + 1);
    TEST_FAIL_("differential: seed %llu, command #%d: memory %.200s, redis-server %.200s",
               (unsigned long long)seed, i + 1, m, s);
  }
  run_stop(r);
  for (int i = 0; i < count; i++) cmd_clear(&list[i]);
  free(list);
}

TEST_IMPL(differential) {
  const char *ncmd = getenv("LUASTREAM_DIFF_COMMANDS"), *nseed = getenv("LUASTREAM_DIFF_SEED");
  ASSERT_OK(redis_server_start(&srv, NULL));
  struct run r = {.mem = cf_memory("7.0.15"), .real = cf_redis(srv.url)};
  if (ncmd || nseed) {
    alarm(0); /* a long run: no time limit */
    int count = ncmd ? atoi(ncmd) : SHORT_COMMANDS;
    if (nseed) {
      differential(&r, strtoull(nseed, NULL, 10), count);
    } else {
      for (uint64_t seed = 1;; seed++) {
        fprintf(stderr, "differential: seed %llu\n", (unsigned long long)seed);
        differential(&r, seed, count);
      }
    }
  } else {
    for (uint64_t seed = 1; seed <= SHORT_SEEDS; seed++) differential(&r, seed, SHORT_COMMANDS);
  }
  cf_side_free(r.mem);
  cf_side_free(r.real);
  redis_server_stop(&srv);
}
