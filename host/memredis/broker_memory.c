/* broker_memory: the broker seam on an in-memory Redis streams server, for the
 * test harness. The host runs unmodified against it on a virtual clock.
 *
 * Each connection keeps a FIFO of the commands it was given. Nothing runs
 * inside bk_command: it copies the argv, queues it and arms one 0-ms "pump"
 * timer on the clock. The pump runs queued commands in global arrival order
 * and fires each callback right after its command, so replies settle with
 * clock_virtual_settle / clock_virtual_advance. A connection whose head command
 * is a blocked XREADGROUP runs nothing else until that command is answered,
 * as with a real server. A parked client is answered by a write to one of its
 * keys (the keys XADD, DEL, FLUSHALL and XGROUP DESTROY signal, see memdb),
 * by its BLOCK timer, or on 8.4 with CLAIM by a timer armed at the moment a
 * pending entry turns claimable; the answer is stored on the command and
 * delivered by the pump.
 *
 * This file owns connections, the command table (names, arities, which
 * commands a script may call), MULTI/EXEC and blocking; the commands
 * themselves are in the cmd_*.c files (commands.h) on the keyspace of db.h,
 * EVAL in script.c. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker_memory.h"
#include "clock.h"
#include "clock_virtual.h"
#include "memreply.h"
#include "commands.h"
#include "db.h"
#include "script.h"

struct mcmd {
  struct mcmd *next;
  uint64_t seq; /* arrival order across all connections */
  int argc;
  char **argv; /* owned copies */
  size_t *argvlen;
  bk_reply_cb *cb;
  void *data;
  bk_reply *reply; /* set once answered while parked; the pump delivers it */
};

struct mbroker;

struct mconn {
  struct mbroker *b;
  struct mconn *next; /* the broker's list, in open order */
  char name[64];
  bk_state_cb *state_cb; /* NULL allowed */
  bk_fault_cb *fault_cb; /* NULL allowed */
  void *data;
  struct mcmd *head, *tail;
  int reported; /* what state_cb was last told: -1 nothing yet, 0 down, 1 up */
  bool closed;
  int busy;                       /* inside one of its callbacks: freed only when it returns */
  bool multi, dirty;              /* inside MULTI; a queueing error aborts the EXEC */
  struct mcmd *mq_head, *mq_tail; /* commands queued by MULTI */
  bool blocked;                   /* head is a parked XREADGROUP */
  uint64_t block_seq;             /* order in which clients blocked */
  struct ms_block blk;
  ltimer *timeout; /* BLOCK ms */
  bk_reply *held;  /* a slow command's reply (broker_memory_set_slow), due at timeout */
  ltimer *claim;   /* 8.4 CLAIM: a pending entry turns claimable */
};

#define NCOMMANDS_MAX 128 /* entries of the command table, at most */

struct mbroker {
  broker base;           /* first: a broker * is an mbroker * */
  lclock *clock;         /* borrowed */
  uint64_t wall0, mono0; /* wall time = wall0 + (now - mono0) */
  struct memdb db;
  memscript *script;
  struct mconn *conns;
  ltimer *pump;
  bool pump_armed;
  uint64_t seq, block_seq;
  bool down;
  int nopen;
  uint64_t calls[NCOMMANDS_MAX]; /* per entry of commands[]: INFO commandstats */
  char slow[32];                 /* broker_memory_set_slow: this command ... */
  uint64_t slow_ms;              /* ... is answered this late (0: none is) */
};

static void arm_pump(struct mbroker *b);
static void rearm_claims(struct mbroker *b);

static uint64_t wall_now(struct mbroker *b) { return b->wall0 + (clock_now(b->clock) - b->mono0); }

/* ---- the command table ---- */

enum { F_NOSCRIPT = 1 };

struct subdef {
  const char *name;
  int arity;
};

struct cmddef {
  const char *name; /* lower case, as Redis names it in errors */
  int arity;        /* Redis' rule: n exact, -n at least n */
  ms_cmd_fn *fn;    /* NULL: handled here (MULTI, EXEC, DISCARD, EVAL) */
  int flags;
  const struct subdef *subs;
};

static bk_reply *cmd_ping(struct memdb *db, struct ms_call *c) {
  (void)db;
  if (c->argc > 2) return mr_err("ERR wrong number of arguments for 'ping' command");
  return c->argc == 2 ? mr_bulk(c->argv[1], c->argvlen[1]) : mr_status("PONG");
}

/* DEBUG SLEEP seconds: the connection's reply comes after that much virtual
 * time. A real server stops altogether meanwhile; here only this connection
 * waits, which is what a client of it sees. Other DEBUG subcommands are not
 * modelled. */
static bk_reply *cmd_debug(struct memdb *db, struct ms_call *c) {
  (void)db;
  if (!ms_arg_is(c, 1, "sleep") || c->argc != 3)
    return mr_err("ERR the in-memory Redis of luastream.testing models only DEBUG SLEEP seconds");
  char num[64];
  size_t n = c->argvlen[2] < sizeof num - 1 ? c->argvlen[2] : sizeof num - 1;
  memcpy(num, c->argv[2], n);
  num[n] = '\0';
  char *end;
  double sec = strtod(num, &end);
  if (c->argvlen[2] == 0 || *end != '\0' || !(sec == sec))
    return mr_err("ERR value is not a valid float");
  if (sec <= 0 || c->multi || c->script) return mr_status("OK"); /* no wait inside EXEC */
  double ms = sec * 1000.0;
  c->blocked = true;
  c->block = (struct ms_block){.timeout_ms = ms < 1      ? 1
                                             : ms > 1e12 ? (long long)1e12
                                                         : (long long)ms,
                               .claim_ms = -1,
                               .ok_at_timeout = true};
  return NULL;
}

static bk_reply *cmd_info(struct memdb *db, struct ms_call *c) {
  char buf[256];
  if (c->argc > 1 && !ms_arg_is(c, 1, "server") && !ms_arg_is(c, 1, "all") &&
      !ms_arg_is(c, 1, "default") && !ms_arg_is(c, 1, "everything"))
    return mr_bulk("", 0);
  int n = snprintf(buf, sizeof buf,
                   "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\n"
                   "os:luastream in-memory broker\r\n",
                   db->version_text);
  return mr_bulk(buf, (size_t)n);
}

/* TIME: [seconds, microseconds] of the broker's (virtual) wall clock, both
 * bulk strings as Redis sends them; the clock counts whole ms. */
static bk_reply *cmd_time(struct memdb *db, struct ms_call *c) {
  (void)db;
  char sec[24], usec[24];
  int ns = snprintf(sec, sizeof sec, "%llu", (unsigned long long)(c->now / 1000));
  int nu = snprintf(usec, sizeof usec, "%llu", (unsigned long long)(c->now % 1000 * 1000));
  bk_reply *a = mr_arr();
  mr_push(a, mr_bulk(sec, (size_t)ns));
  return mr_push(a, mr_bulk(usec, (size_t)nu));
}

static const struct subdef xgroup_subs[] = {{"create", -5},     {"setid", -5},
                                            {"destroy", 4},     {"createconsumer", 5},
                                            {"delconsumer", 5}, {NULL, 0}};
static const struct subdef xinfo_subs[] = {
    {"stream", -3}, {"groups", 3}, {"consumers", 4}, {NULL, 0}};

static const struct subdef script_subs[] = {{"load", 3}, {"exists", -3}, {"flush", -2}, {NULL, 0}};

static const struct cmddef commands[] = {
    {"ping", -1, cmd_ping, 0, NULL},
    {"info", -1, cmd_info, 0, NULL},
    {"time", 1, cmd_time, 0, NULL},
    {"xadd", -5, ms_cmd_xadd, 0, NULL},
    {"xlen", 2, ms_cmd_xlen, 0, NULL},
    {"xrange", -4, ms_cmd_xrange, 0, NULL},
    {"xrevrange", -4, ms_cmd_xrevrange, 0, NULL},
    {"xdel", -3, ms_cmd_xdel, 0, NULL},
    {"xtrim", -4, ms_cmd_xtrim, 0, NULL},
    {"xgroup", -2, ms_cmd_xgroup, 0, xgroup_subs},
    {"xreadgroup", -7, ms_cmd_xreadgroup, 0, NULL},
    {"xack", -4, ms_cmd_xack, 0, NULL},
    {"xpending", -3, ms_cmd_xpending, 0, NULL},
    {"xclaim", -6, ms_cmd_xclaim, 0, NULL},
    {"xautoclaim", -6, ms_cmd_xautoclaim, 0, NULL},
    {"xinfo", -2, ms_cmd_xinfo, 0, xinfo_subs},
    {"zadd", -4, ms_cmd_zadd, 0, NULL},
    {"zrem", -3, ms_cmd_zrem, 0, NULL},
    {"zcard", 2, ms_cmd_zcard, 0, NULL},
    {"zscore", 3, ms_cmd_zscore, 0, NULL},
    {"zrange", -4, ms_cmd_zrange, 0, NULL},
    {"zrangebyscore", -4, ms_cmd_zrangebyscore, 0, NULL},
    {"zincrby", 4, ms_cmd_zincrby, 0, NULL},
    {"hset", -4, ms_cmd_hset, 0, NULL},
    {"hsetnx", 4, ms_cmd_hsetnx, 0, NULL},
    {"hget", 3, ms_cmd_hget, 0, NULL},
    {"hmget", -3, ms_cmd_hmget, 0, NULL},
    {"hgetall", 2, ms_cmd_hgetall, 0, NULL},
    {"hincrby", 4, ms_cmd_hincrby, 0, NULL},
    {"hdel", -3, ms_cmd_hdel, 0, NULL},
    {"hexists", 3, ms_cmd_hexists, 0, NULL},
    {"hlen", 2, ms_cmd_hlen, 0, NULL},
    {"sadd", -3, ms_cmd_sadd, 0, NULL},
    {"srem", -3, ms_cmd_srem, 0, NULL},
    {"sismember", 3, ms_cmd_sismember, 0, NULL},
    {"smembers", 2, ms_cmd_smembers, 0, NULL},
    {"scard", 2, ms_cmd_scard, 0, NULL},
    {"lpush", -3, ms_cmd_lpush, 0, NULL},
    {"rpush", -3, ms_cmd_rpush, 0, NULL},
    {"lpop", -2, ms_cmd_lpop, 0, NULL},
    {"rpop", -2, ms_cmd_rpop, 0, NULL},
    {"lrange", 4, ms_cmd_lrange, 0, NULL},
    {"llen", 2, ms_cmd_llen, 0, NULL},
    {"get", 2, ms_cmd_get, 0, NULL},
    {"set", -3, ms_cmd_set, 0, NULL},
    {"getdel", 2, ms_cmd_getdel, 0, NULL},
    {"incr", 2, ms_cmd_incr, 0, NULL},
    {"incrby", 3, ms_cmd_incrby, 0, NULL},
    {"decr", 2, ms_cmd_decr, 0, NULL},
    {"decrby", 3, ms_cmd_decrby, 0, NULL},
    {"mget", -2, ms_cmd_mget, 0, NULL},
    {"mset", -3, ms_cmd_mset, 0, NULL},
    {"append", 3, ms_cmd_append, 0, NULL},
    {"strlen", 2, ms_cmd_strlen, 0, NULL},
    {"expire", -3, ms_cmd_expire, 0, NULL},
    {"pexpire", -3, ms_cmd_pexpire, 0, NULL},
    {"ttl", 2, ms_cmd_ttl, 0, NULL},
    {"pttl", 2, ms_cmd_pttl, 0, NULL},
    {"persist", 2, ms_cmd_persist, 0, NULL},
    {"del", -2, ms_cmd_del, 0, NULL},
    {"exists", -2, ms_cmd_exists, 0, NULL},
    {"type", 2, ms_cmd_type, 0, NULL},
    {"flushall", -1, ms_cmd_flushall, 0, NULL},
    {"debug", -2, cmd_debug, F_NOSCRIPT, NULL},
    {"multi", 1, NULL, F_NOSCRIPT, NULL},
    {"exec", 1, NULL, F_NOSCRIPT, NULL},
    {"discard", 1, NULL, F_NOSCRIPT, NULL},
    {"eval", -3, NULL, F_NOSCRIPT, NULL},
    {"evalsha", -3, NULL, F_NOSCRIPT, NULL},
    {"script", -2, NULL, F_NOSCRIPT, script_subs},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])
_Static_assert(NCOMMANDS <= NCOMMANDS_MAX, "raise NCOMMANDS_MAX");

static bool word_is(const char *s, size_t len, const char *word) {
  return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

static const struct cmddef *lookup(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (word_is(name, len, commands[i].name)) return &commands[i];
  return NULL;
}

static bool arity_ok(int arity, int argc) { return arity > 0 ? argc == arity : argc >= -arity; }

/* The checks Redis makes before running (or queueing) a command: it exists,
 * its arity, its subcommand. NULL when it passes. */
static bk_reply *check(const struct cmddef *d, int argc, const char **argv, const size_t *len,
                       bool script) {
  if (d == NULL) {
    if (script) return mr_err("ERR Unknown Redis command called from script");
    /* Redis's own prefix, so that code matching it still does; then where
     * to go instead of Redis's list of arguments. */
    return mr_err(
        "ERR unknown command '%.*s' (the in-memory Redis of luastream.testing does "
        "not have it: testing.app(dir, {redis = URL}) runs on a real server)",
        (int)(len[0] < 128 ? len[0] : 128), argv[0]);
  }
  if (!arity_ok(d->arity, argc))
    return script ? mr_err("ERR Wrong number of args calling Redis command from script")
                  : mr_err("ERR wrong number of arguments for '%s' command", d->name);
  if (d->subs) {
    const struct subdef *s = d->subs;
    while (s->name && !word_is(argv[1], len[1], s->name)) s++;
    char upper[16];
    size_t k = 0;
    for (; k < sizeof upper - 1 && d->name[k]; k++) upper[k] = (char)toupper(d->name[k]);
    upper[k] = '\0';
    if (s->name == NULL)
      return mr_err("ERR unknown subcommand '%.*s'. Try %s HELP.",
                    (int)(len[1] < 128 ? len[1] : 128), argv[1], upper);
    if (!arity_ok(s->arity, argc))
      return script ? mr_err("ERR Wrong number of args calling Redis command from script")
                    : mr_err("ERR wrong number of arguments for '%s|%s' command", d->name, s->name);
  }
  if (script && (d->flags & F_NOSCRIPT))
    return mr_err("ERR This Redis command is not allowed from script");
  return NULL;
}

/* ---- running commands ---- */

static bk_reply *run(struct mbroker *b, int argc, const char **argv, const size_t *len, bool script,
                     bool multi, struct ms_call *call);

/* memscript_known_fn: the command, and its subcommand if it has them. */
static int script_knows(void *ctx, int argc, const char **argv, const size_t *len) {
  (void)ctx;
  const struct cmddef *d = lookup(argv[0], len[0]);
  if (d == NULL || !d->subs) return d != NULL;
  if (argc < 2 || argv[1] == NULL) return 1; /* the container command itself */
  const struct subdef *s = d->subs;
  while (s->name && !word_is(argv[1], len[1], s->name)) s++;
  return s->name != NULL;
}

static bk_reply *script_call(void *ctx, int argc, const char **argv, const size_t *len) {
  struct ms_call call;
  return run(ctx, argc, argv, len, true, false, &call);
}

/* EVAL, EVALSHA, SCRIPT. */
static bk_reply *run_script_command(struct mbroker *b, const struct cmddef *d, int argc,
                                    const char **argv, const size_t *len) {
  if (strcmp(d->name, "eval") == 0)
    return memscript_eval(b->script, argc, argv, len, script_call, script_knows, b);
  if (strcmp(d->name, "evalsha") == 0)
    return memscript_evalsha(b->script, argc, argv, len, script_call, script_knows, b);
  if (word_is(argv[1], len[1], "load")) return memscript_load(b->script, argv[2], len[2]);
  if (word_is(argv[1], len[1], "exists")) return memscript_exists(b->script, argc, argv, len);
  /* flush [SYNC|ASYNC] */
  if (argc > 3 ||
      (argc == 3 && !word_is(argv[2], len[2], "sync") && !word_is(argv[2], len[2], "async")))
    return mr_err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
  memscript_flush(b->script);
  return mr_status("OK");
}

/* INFO commandstats: the calls of each command run so far (scripts' calls
 * included, as Redis counts them); no times, no subcommands. */
static bk_reply *commandstats(struct mbroker *b) {
  size_t cap = 64, n = 0;
  char *buf = mr_alloc(cap);
  n += (size_t)snprintf(buf, cap, "# Commandstats\r\n");
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (b->calls[i] == 0) continue;
    char line[160];
    int k = snprintf(line, sizeof line,
                     "cmdstat_%s:calls=%llu,usec=0,usec_per_call=0.00,rejected_calls=0,"
                     "failed_calls=0\r\n",
                     commands[i].name, (unsigned long long)b->calls[i]);
    if (n + (size_t)k + 1 > cap) buf = mr_realloc(buf, cap = 2 * (n + (size_t)k + 1));
    memcpy(buf + n, line, (size_t)k + 1);
    n += (size_t)k;
  }
  bk_reply *r = mr_bulk(buf, n);
  free(buf);
  return r;
}

/* Runs one command (not MULTI, EXEC or DISCARD). NULL: it blocked, and
 * call->block says how. */
static bk_reply *run(struct mbroker *b, int argc, const char **argv, const size_t *len, bool script,
                     bool multi, struct ms_call *call) {
  const struct cmddef *d = lookup(argv[0], len[0]);
  bk_reply *err = check(d, argc, argv, len, script);
  if (err) return err;
  b->calls[d - commands]++;
  if (d->fn == NULL) /* MULTI, EXEC and DISCARD never get here */
    return run_script_command(b, d, argc, argv, len);
  if (d->fn == cmd_info && argc == 2 && word_is(argv[1], len[1], "commandstats"))
    return commandstats(b);
  ms_expire(&b->db, wall_now(b)); /* keys whose time ran out are gone */
  memset(call, 0, sizeof *call);
  call->argc = argc;
  call->argv = argv;
  call->argvlen = len;
  call->now = wall_now(b);
  call->script = script;
  call->multi = multi;
  return d->fn(&b->db, call);
}

static void cmd_free(struct mcmd *m) {
  for (int i = 0; i < m->argc; i++) free(m->argv[i]);
  free(m->argv);
  free(m->argvlen);
  mr_free(m->reply);
  free(m);
}

static struct ms_call head_call(struct mbroker *b, struct mconn *c) {
  struct ms_call call;
  memset(&call, 0, sizeof call);
  call.argc = c->head->argc;
  call.argv = (const char **)c->head->argv;
  call.argvlen = c->head->argvlen;
  call.now = wall_now(b);
  return call;
}

/* Leaves MULTI, dropping what it queued (EXEC, DISCARD, close). */
static void drop_multi(struct mconn *c) {
  while (c->mq_head) {
    struct mcmd *q = c->mq_head;
    c->mq_head = q->next;
    cmd_free(q);
  }
  c->mq_tail = NULL;
  c->multi = c->dirty = false;
}

/* EXEC: the queued commands as one step; runtime errors are elements. */
static bk_reply *exec_multi(struct mbroker *b, struct mconn *c) {
  bk_reply *r;
  if (c->dirty) {
    r = mr_err("EXECABORT Transaction discarded because of previous errors.");
  } else {
    r = mr_arr();
    for (struct mcmd *q = c->mq_head; q; q = q->next) {
      struct ms_call call;
      mr_push(r, run(b, q->argc, (const char **)q->argv, q->argvlen, false, true, &call));
    }
  }
  drop_multi(c);
  return r;
}

/* Runs c's head command. Sets head->reply, or parks c. */
static void execute(struct mbroker *b, struct mconn *c) {
  struct mcmd *h = c->head;
  const char **argv = (const char **)h->argv;
  const struct cmddef *d = lookup(argv[0], h->argvlen[0]);
  bk_reply *r = check(d, h->argc, argv, h->argvlen, false);
  bool is_multi = d && !strcmp(d->name, "multi"), is_exec = d && !strcmp(d->name, "exec"),
       is_discard = d && !strcmp(d->name, "discard");
  if (c->multi) {
    if (r) {
      c->dirty = true; /* EXEC will answer EXECABORT */
    } else if (is_multi) {
      r = mr_err("ERR MULTI calls can not be nested");
    } else if (is_exec) {
      r = exec_multi(b, c);
    } else if (is_discard) {
      drop_multi(c);
      r = mr_status("OK");
    } else {
      /* The queue takes the argv; the command keeps its callback. */
      struct mcmd *q = mr_alloc(sizeof *q);
      q->argc = h->argc;
      q->argv = h->argv;
      q->argvlen = h->argvlen;
      h->argc = 0;
      h->argv = NULL;
      h->argvlen = NULL;
      if (c->mq_tail)
        c->mq_tail->next = q;
      else
        c->mq_head = q;
      c->mq_tail = q;
      r = mr_status("QUEUED");
    }
  } else if (r == NULL && is_multi) {
    c->multi = true;
    r = mr_status("OK");
  } else if (r == NULL && is_exec) {
    r = mr_err("ERR EXEC without MULTI");
  } else if (r == NULL && is_discard) {
    r = mr_err("ERR DISCARD without MULTI");
  } else if (r == NULL) {
    struct ms_call call;
    r = run(b, h->argc, argv, h->argvlen, false, false, &call);
    if (r && b->slow_ms && word_is(argv[0], h->argvlen[0], b->slow)) { /* its reply, later */
      c->held = r;
      r = NULL;
      call.block = (struct ms_block){.timeout_ms = (long long)b->slow_ms, .claim_ms = -1};
    }
    if (r == NULL) { /* park */
      c->blocked = true;
      c->block_seq = ++b->block_seq;
      c->blk = call.block;
      if (c->blk.timeout_ms > 0) timer_start(c->timeout, (uint64_t)c->blk.timeout_ms);
    }
  }
  h->reply = r;
}

/* ---- blocked clients ---- */

static void answer(struct mconn *c, bk_reply *r) {
  c->head->reply = r;
  c->blocked = false;
  timer_stop(c->timeout);
  timer_stop(c->claim);
  arm_pump(c->b);
}

/* Runs a parked command again (8.4 semantics); answers it if it served. */
static void rerun(struct mbroker *b, struct mconn *c) {
  struct ms_call call = head_call(b, c);
  bk_reply *r = ms_cmd_xreadgroup(&b->db, &call);
  if (r) answer(c, r);
}

static int waits_on(const struct mconn *c, const char *key, size_t len) {
  for (int i = c->blk.first_key; i < c->blk.first_key + c->blk.nkeys; i++)
    if (c->head->argvlen[i] == len && memcmp(c->head->argv[i], key, len) == 0) return i;
  return -1;
}

/* Serves the clients parked on each signaled key, in the order they blocked. */
static void serve_signals(struct mbroker *b) {
  size_t len;
  char *key;
  while ((key = memdb_pop_signal(&b->db, &len)) != NULL) {
    uint64_t after = 0;
    for (;;) {
      struct mconn *next = NULL;
      for (struct mconn *c = b->conns; c; c = c->next)
        if (!c->closed && c->blocked && c->block_seq > after && waits_on(c, key, len) >= 0 &&
            (next == NULL || c->block_seq < next->block_seq))
          next = c;
      if (next == NULL) break;
      after = next->block_seq;
      if (MS_V72(&b->db)) {
        rerun(b, next);
      } else {
        struct ms_call call = head_call(b, next);
        bk_reply *r = ms_xreadgroup_wake70(&b->db, &call, waits_on(next, key, len));
        if (r) answer(next, r);
      }
    }
    free(key);
  }
  rearm_claims(b);
}

/* 8.4 CLAIM: each parked claiming client gets a timer at the moment its
 * earliest pending entry turns claimable. Recomputed after every command,
 * since any of them may have changed a PEL. */
static void rearm_claims(struct mbroker *b) {
  uint64_t now = wall_now(b);
  for (struct mconn *c = b->conns; c; c = c->next) {
    if (c->closed || !c->blocked || c->blk.claim_ms < 0) continue;
    struct ms_call call = head_call(b, c);
    int64_t due = ms_xreadgroup_claim_due(&b->db, &call, c->blk.claim_ms);
    if (due < 0)
      timer_stop(c->claim);
    else
      timer_start(c->claim, (uint64_t)due > now ? (uint64_t)due - now : 0);
  }
}

static void on_claim_due(ltimer *t, void *data) {
  (void)t;
  struct mconn *c = data;
  if (!c->blocked) return;
  rerun(c->b, c);
  rearm_claims(c->b);
}

static void on_block_timeout(ltimer *t, void *data) {
  (void)t;
  struct mconn *c = data;
  if (!c->blocked) return;
  bk_reply *held = c->held;
  c->held = NULL;
  answer(c, held ? held : c->blk.ok_at_timeout ? mr_status("OK") : mr_nil());
}

/* ---- connections ---- */

static void reap(struct mconn *c) {
  if (!c->closed || c->busy) return;
  struct mbroker *b = c->b;
  for (struct mconn **p = &b->conns; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  free(c);
}

/* Completes every queued command with err (close, outage). */
static void fail_all(struct mconn *c, const char *err) {
  c->blocked = false;
  mr_free(c->held);
  c->held = NULL;
  timer_stop(c->timeout);
  timer_stop(c->claim);
  drop_multi(c);
  while (c->head) {
    struct mcmd *h = c->head;
    c->head = h->next;
    if (c->head == NULL) c->tail = NULL;
    c->busy++;
    if (h->cb) h->cb(h->data, NULL, err);
    c->busy--;
    cmd_free(h);
  }
}

static void deliver(struct mconn *c) {
  struct mcmd *h = c->head;
  c->head = h->next;
  if (c->head == NULL) c->tail = NULL;
  c->busy++;
  if (h->cb) h->cb(h->data, h->reply, NULL);
  c->busy--;
  cmd_free(h);
  reap(c);
}

#define MEM_DOWN "server down (broker_memory_set_down)"

/* Tells the one connection whose state changed, if any. Returns 1 if it did. */
static int report_state(struct mbroker *b) {
  for (struct mconn *c = b->conns; c; c = c->next) {
    int up = !b->down;
    if (c->closed || c->reported == up) continue;
    if (!up) fail_all(c, "connection lost: " MEM_DOWN);
    c->reported = up;
    c->busy++;
    if (c->state_cb) c->state_cb(c->data, (bk_conn *)c, up);
    if (!up && c->fault_cb && !c->closed)
      c->fault_cb(c->data, (bk_conn *)c, BK_FAULT_DOWN, MEM_DOWN);
    c->busy--;
    reap(c);
    return 1;
  }
  return 0;
}

/* The 0-ms timer: state changes, then commands in arrival order. Commands
 * queued by callbacks in this turn wait for the next one. */
static void pump(ltimer *t, void *data) {
  (void)t;
  struct mbroker *b = data;
  b->pump_armed = false;
  uint64_t limit = b->seq;
  while (report_state(b)) {}
  for (;;) {
    struct mconn *next = NULL;
    for (struct mconn *c = b->conns; c; c = c->next) {
      struct mcmd *h = c->head;
      if (c->closed || h == NULL) continue;
      bool ready = h->reply != NULL || (!c->blocked && !b->down && h->seq <= limit);
      if (ready && (next == NULL || h->seq < next->head->seq)) next = c;
    }
    if (next == NULL) break;
    if (next->head->reply == NULL) {
      execute(b, next);
      serve_signals(b);
      if (next->blocked) continue;
    }
    deliver(next);
  }
  for (struct mconn *c = b->conns; c; c = c->next)
    if (!c->closed && c->head && !c->blocked && !b->down) arm_pump(b);
}

static void arm_pump(struct mbroker *b) {
  if (b->pump_armed) return;
  b->pump_armed = true;
  timer_start(b->pump, 0);
}

/* ---- broker_ops ---- */

static bk_conn *mem_open(broker *bb, const char *name, bk_state_cb *state_cb, void *data) {
  struct mbroker *b = (struct mbroker *)bb;
  struct mconn *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->timeout = timer_new(b->clock, on_block_timeout, c);
  c->claim = timer_new(b->clock, on_claim_due, c);
  if (c->timeout == NULL || c->claim == NULL) {
    if (c->timeout) timer_free(c->timeout);
    if (c->claim) timer_free(c->claim);
    free(c);
    return NULL;
  }
  c->b = b;
  snprintf(c->name, sizeof c->name, "%s", name ? name : "");
  c->state_cb = state_cb;
  c->data = data;
  c->reported = -1;
  struct mconn **p = &b->conns;
  while (*p) p = &(*p)->next;
  *p = c;
  b->nopen++;
  arm_pump(b); /* "up" is reported from the pump, never from here */
  return (bk_conn *)c;
}

static int mem_command(bk_conn *bc, int argc, const char **argv, const size_t *argvlen,
                       bk_reply_cb *cb, void *data) {
  struct mconn *c = (struct mconn *)bc;
  struct mbroker *b = c->b;
  if (c->closed || b->down || argc < 1) return -1;
  struct mcmd *m = mr_alloc(sizeof *m);
  m->seq = ++b->seq;
  m->argc = argc;
  m->argv = mr_alloc((size_t)argc * sizeof *m->argv);
  m->argvlen = mr_alloc((size_t)argc * sizeof *m->argvlen);
  for (int i = 0; i < argc; i++) {
    m->argv[i] = mr_memdup(argv[i], argvlen[i]);
    m->argvlen[i] = argvlen[i];
  }
  m->cb = cb;
  m->data = data;
  if (c->tail)
    c->tail->next = m;
  else
    c->head = m;
  c->tail = m;
  arm_pump(b);
  return 0;
}

static int mem_connected(bk_conn *bc) {
  struct mconn *c = (struct mconn *)bc;
  return !c->closed && !c->b->down;
}

/* Commands run from the pump: nothing waits to be written. */
static void mem_flush(bk_conn *bc) { (void)bc; }

static void mem_close(bk_conn *bc) {
  struct mconn *c = (struct mconn *)bc;
  if (c == NULL || c->closed) return;
  c->closed = true;
  c->b->nopen--;
  c->busy++; /* callbacks below may not free c under us */
  fail_all(c, "connection closed");
  c->busy--;
  timer_free(c->timeout);
  timer_free(c->claim);
  reap(c);
}

static void mem_free(broker *bb) {
  struct mbroker *b = (struct mbroker *)bb;
  if (b == NULL) return;
  if (b->nopen != 0) {
    fprintf(stderr, "broker_memory: freed with %d connections open\n", b->nopen);
    abort();
  }
  while (b->conns) { /* closed inside their own callbacks and not reaped yet */
    struct mconn *c = b->conns;
    b->conns = c->next;
    free(c);
  }
  timer_free(b->pump);
  memscript_free(b->script);
  memdb_free(&b->db);
  free(b);
}

/* Only an outage fails a connection here: the in-memory server asks for no
 * credentials. */
static enum bk_fault mem_fault(bk_conn *bc, char *why, size_t len) {
  struct mconn *c = (struct mconn *)bc;
  if (c->closed || !c->b->down) return BK_FAULT_NONE;
  if (len) snprintf(why, len, "%s", MEM_DOWN);
  return BK_FAULT_DOWN;
}

static void mem_on_fault(bk_conn *bc, bk_fault_cb *cb) { ((struct mconn *)bc)->fault_cb = cb; }

static const struct broker_ops memory_ops = {
    .conn_open = mem_open,
    .command = mem_command,
    .connected = mem_connected,
    .flush = mem_flush,
    .conn_close = mem_close,
    .free = mem_free,
    .fault = mem_fault,
    .on_fault = mem_on_fault,
};

broker *broker_memory_new(lclock *clock, const char *version) {
  struct mbroker *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->base.ops = &memory_ops;
  snprintf(b->base.name, sizeof b->base.name, "memory");
  b->clock = clock;
  b->wall0 = clock_wall(clock);
  b->mono0 = clock_now(clock);
  b->pump = timer_new(clock, pump, b);
  b->script = memscript_new();
  if (b->pump == NULL || b->script == NULL) {
    if (b->pump) timer_free(b->pump);
    memscript_free(b->script);
    free(b);
    return NULL;
  }
  memdb_init(&b->db, version);
  return &b->base;
}

void broker_memory_set_version(broker *bb, const char *version) {
  memdb_set_version(&((struct mbroker *)bb)->db, version);
}

void broker_memory_set_slow(broker *bb, const char *command, uint64_t ms) {
  struct mbroker *b = (struct mbroker *)bb;
  snprintf(b->slow, sizeof b->slow, "%s", command ? command : "");
  b->slow_ms = command && *command ? ms : 0;
}

void broker_memory_set_down(broker *bb, bool down) {
  struct mbroker *b = (struct mbroker *)bb;
  b->down = down;
  arm_pump(b); /* connections hear of it from the pump */
}
