/* corelib: luastream.core; see corelib.h.
 *
 * log writes through the host's log module; sleep arms the job's timer and
 * yields (job_sleep), and the timer resumes the coroutine. It may be called
 * only from the job's own coroutine, which is checked, not assumed. message
 * decodes the running entry's body, entry hands its id and fields to ctx.
 * redis sends a handler's command on the host's calls connection (job_call)
 * or on the one it keeps for another server (ls.redis.connect, whose URL
 * redis_connect checks) and yields until the reply, which redis_result then
 * converts inside the coroutine (redis_reply.h), where an error fails only
 * this entry.
 * (ctx:publish needs no C: its entries are written with the outcome.) */
#include <lauxlib.h>
#include <ctype.h>
#include <lua.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command_keys.h"
#include "cron.h"
#include "tz.h"
#include "duration.h"
#include "entry.h"
#include "json_decode.h"
#include "keyslot.h"
#include "json_encode.h"
#include "log.h"
#include "corelib.h"
#include "admin_commands.h"
#include "corelib_http.h"
#include "corelib_pg.h"
#include "jobs.h"
#include "redis_reply.h"
#include "scripts.h"
#include "runtime.h"
#include "schema.h"
#include "url.h"
#include "trace.h"
#include "wire.h"

#ifndef LUASTREAM_VERSION
#define LUASTREAM_VERSION "0.0.0"
#endif

static struct core *self(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* The running job, or a Lua error when called at load time or from a
 * coroutine the handler made itself. */
static struct rt_job *current_job(lua_State *L, const char *what) {
  struct rt_job *job = jobs_running_on(self(L)->jobs, L);
  if (job == NULL)
    luaL_error(L, "%s may only be called while handling an entry, from the handler's own coroutine",
               what);
  return job;
}

#define LOG_PAIRS_STACK 32

/* core.log(level, msg, {k1, v1, k2, v2, ...} [, numeric])  [-0, +0]
 * numeric[i] true: pair i's value is a number's JSON text, written as a
 * number on JSON lines. */
static int core_log(lua_State *L) {
  int level = log_level_parse(luaL_checkstring(L, 1));
  const char *msg = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  bool has_numeric = !lua_isnoneornil(L, 4);
  if (has_numeric) luaL_checktype(L, 4, LUA_TTABLE);
  if (level < 0) return luaL_argerror(L, 1, "unknown log level");
  if (level < (int)log_get_level()) return 0;
  size_t n = lua_objlen(L, 3) / 2;
  const char *stack_kv[2 * LOG_PAIRS_STACK];
  size_t stack_len[2 * LOG_PAIRS_STACK];
  unsigned char stack_num[LOG_PAIRS_STACK];
  const char **kv = stack_kv;
  size_t *kvlen = stack_len;
  unsigned char *numeric = stack_num;
  if (n + 2 > LOG_PAIRS_STACK) { /* two more: version= and trace_id= */
    kv = malloc(2 * (n + 2) * sizeof *kv);
    kvlen = malloc(2 * (n + 2) * sizeof *kvlen);
    numeric = malloc(n + 2);
    if (kv == NULL || kvlen == NULL || numeric == NULL) {
      free(kv);
      free(kvlen);
      free(numeric);
      return luaL_error(L, "ls.log: out of memory");
    }
  }
  for (size_t i = 0; i < 2 * n; i++) {
    lua_rawgeti(L, 3, (int)i + 1);
    /* Only a string stays anchored by the table once popped: a number would
     * be converted in the popped slot. luastream.lua passes strings. */
    if (lua_type(L, -1) == LUA_TSTRING) {
      kv[i] = lua_tolstring(L, -1, &kvlen[i]);
    } else {
      kv[i] = "?";
      kvlen[i] = 1;
    }
    lua_pop(L, 1);
  }
  for (size_t i = 0; i < n; i++) {
    numeric[i] = 0;
    if (!has_numeric) continue;
    lua_rawgeti(L, 4, (int)i + 1);
    numeric[i] = lua_toboolean(L, -1) ? 1 : 0;
    lua_pop(L, 1);
  }
  /* The script version of the generation that logs, last. */
  kv[2 * n] = "version";
  kvlen[2 * n] = 7;
  numeric[n] = 0;
  const struct jobs *j = self(L)->jobs;
  kv[2 * n + 1] = j->version;
  kvlen[2 * n + 1] = strlen(j->version);
  size_t pairs = n + 1;
  /* The trace of the entry the job runs, when it came with a valid one. */
  char trace[TRACE_ID_LEN + 1];
  struct rt_job *job = jobs_running_on(j, L);
  const struct entry *e = job ? job_entry(job) : NULL;
  size_t tlen = 0;
  const char *tp = e ? entry_get(e, HDR_TRACEPARENT, &tlen) : NULL;
  if (tp && trace_id_of(tp, tlen, trace)) {
    kv[2 * pairs] = "trace_id";
    kvlen[2 * pairs] = 8;
    kv[2 * pairs + 1] = trace;
    kvlen[2 * pairs + 1] = TRACE_ID_LEN;
    numeric[pairs] = 0;
    pairs++;
  }
  log_line_pairs((enum log_level)level, j->spec->name, msg, pairs, kv, kvlen, numeric);
  if (kv != stack_kv) {
    free(kv);
    free(kvlen);
    free(numeric);
  }
  return 0;
}

/* core.sleep(ms)  yields; resumes with no values */
static int core_sleep(lua_State *L) {
  lua_Number ms = luaL_checknumber(L, 1);
  struct rt_job *job = current_job(L, "ls.sleep");
  int rc = job_sleep(job, ms > 0 ? (uint64_t)ms : 0);
  if (rc == -1) return luaL_error(L, "ls.sleep: no clock in this host");
  if (rc != 0) return luaL_error(L, "ls.sleep: out of memory");
  return lua_yield(L, 0);
}

/* core.now() -> ms on the host's monotonic clock (virtual in the test
 * harness): for ls.rate's permits held ahead, which stay valid briefly. */
static int core_now(lua_State *L) {
  const struct rt_env *env = self(L)->jobs->env;
  if (env == NULL || env->clock == NULL)
    return luaL_error(L, "luastream.core.now: no clock in this host");
  lua_pushnumber(L, (lua_Number)clock_fresh(env->clock));
  return 1;
}

#define CALL_ARGS_STACK 32

/* Commands a handler may not send on the connection all handlers share:
 * those that change the connection itself for everyone (its mode, db, user,
 * protocol, or which reply answers which command), and those that block it,
 * holding up every other handler's calls behind them. */
static const struct {
  const char *name;
  const char *why;
} refused_commands[] = {
#define SHARED "it would change the connection every handler shares"
#define BLOCKS "it blocks the connection every handler shares; poll instead"
    {"SUBSCRIBE", SHARED},   {"PSUBSCRIBE", SHARED},   {"SSUBSCRIBE", SHARED},
    {"UNSUBSCRIBE", SHARED}, {"PUNSUBSCRIBE", SHARED}, {"SUNSUBSCRIBE", SHARED},
    {"MONITOR", SHARED},     {"CLIENT", SHARED},       {"MULTI", SHARED},
    {"EXEC", SHARED},        {"DISCARD", SHARED},      {"WATCH", SHARED},
    {"UNWATCH", SHARED},     {"SELECT", SHARED},       {"AUTH", SHARED},
    {"HELLO", SHARED},       {"RESET", SHARED},        {"QUIT", SHARED},
    {"SYNC", SHARED},        {"PSYNC", SHARED},        {"REPLCONF", SHARED},
    {"READONLY", SHARED},    {"READWRITE", SHARED},    {"ASKING", SHARED},
    {"BLPOP", BLOCKS},       {"BRPOP", BLOCKS},        {"BRPOPLPUSH", BLOCKS},
    {"BLMOVE", BLOCKS},      {"BLMPOP", BLOCKS},       {"BZPOPMIN", BLOCKS},
    {"BZPOPMAX", BLOCKS},    {"BZMPOP", BLOCKS},       {"WAIT", BLOCKS},
    {"WAITAOF", BLOCKS},
#undef SHARED
#undef BLOCKS
};

static bool word_is(const char *s, size_t len, const char *word) {
  size_t n = strlen(word);
  if (len != n) return false;
  for (size_t i = 0; i < n; i++)
    if ((s[i] & ~0x20) != word[i]) return false; /* ASCII upper case; word is upper case */
  return true;
}

/* Why a handler may not send the command at stack index first..top, or NULL. */
static const char *refused(lua_State *L, int first) {
  size_t len;
  const char *cmd = lua_tolstring(L, first, &len);
  for (size_t i = 0; i < sizeof refused_commands / sizeof refused_commands[0]; i++)
    if (word_is(cmd, len, refused_commands[i].name)) return refused_commands[i].why;
  /* XREAD / XREADGROUP ... BLOCK ms */
  if (word_is(cmd, len, "XREAD") || word_is(cmd, len, "XREADGROUP"))
    for (int i = first + 1; i <= lua_gettop(L); i++) {
      size_t alen;
      /* strings only: lua_tolstring would rewrite a number in place, inexactly */
      const char *a = lua_type(L, i) == LUA_TSTRING ? lua_tolstring(L, i, &alen) : NULL;
      if (a && word_is(a, alen, "STREAMS")) break; /* keys and ids from here on */
      if (a && word_is(a, alen, "BLOCK"))
        return "BLOCK blocks the connection every handler shares; read without it";
    }
  return NULL;
}

/* Raises "<where the handler called>: <message>": the position of the
 * handler's own line, not of luastream.lua's wrapper. */
static int raise_in_handler(lua_State *L, const char *fmt, ...) {
  luaL_where(L, 2);
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

/* Checks the command at stack index first..top for handler function name:
 * a string first, not refused (extra: more refused names, NULL-terminated),
 * each argument a string or a number, and turns the numbers into strings in
 * place (as Redis scripting writes them: an integral one as the integer it
 * is). Raises with the handler's line otherwise. */
static void check_command(lua_State *L, const char *name, int first, const char *const *extra,
                          const char *extra_why) {
  if (lua_gettop(L) < first) luaL_error(L, "%s: no command given", name);
  if (lua_type(L, first) != LUA_TSTRING) luaL_error(L, "%s: the command must be a string", name);
  const char *why = refused(L, first);
  size_t len, sublen = 0;
  const char *cmd = lua_tolstring(L, first, &len);
  /* strings only: lua_tolstring would rewrite a number in place */
  const char *sub =
      lua_type(L, first + 1) == LUA_TSTRING ? lua_tolstring(L, first + 1, &sublen) : NULL;
  const char *admin = why ? NULL : admin_command(cmd, len, sub, sublen);
  if (admin)
    raise_in_handler(L,
                     "%s: %s%s%s is not available to handlers: it is the server's administration "
                     "(Redis's @admin commands, and those that empty, swap or overwrite whole "
                     "databases)",
                     name, cmd, strchr(admin, '|') ? " " : "", strchr(admin, '|') ? sub : "");
  for (const char *const *e = extra; e && *e && !why; e++)
    if (word_is(cmd, len, *e)) why = extra_why;
  if (why) raise_in_handler(L, "%s: %s is not available to handlers: %s", name, cmd, why);
  for (int i = first; i <= lua_gettop(L); i++) {
    int t = lua_type(L, i);
    if (t == LUA_TNUMBER) {
      char num[JSON_NUMBER_MAX];
      lua_Number v = lua_tonumber(L, i);
      size_t n = json_format_number(v == 0 ? 0 : v, num); /* -0 as 0: Redis wants an integer */
      if (n == 0) luaL_error(L, "%s: argument %d is not a finite number", name, i - first + 1);
      lua_pushlstring(L, num, n);
      lua_replace(L, i); /* anchored on the stack until the command is sent */
    } else if (t != LUA_TSTRING) {
      luaL_error(L, "%s: argument %d must be a string or a number, got %s", name, i - first + 1,
                 luaL_typename(L, i));
    }
  }
}

/* Commands that cannot, or must not, run inside the script that writes an
 * outcome: scripts, and the server's administration. */
static const char *const not_in_scripts[] = {"EVAL",         "EVALSHA",  "EVAL_RO",   "EVALSHA_RO",
                                             "FCALL",        "FCALL_RO", "SCRIPT",    "FUNCTION",
                                             "CONFIG",       "ACL",      "SAVE",      "BGSAVE",
                                             "BGREWRITEAOF", "SHUTDOWN", "REPLICAOF", "SLAVEOF",
                                             "FAILOVER",     "DEBUG",    "MIGRATE",   NULL};

/* core.command(name, cmd, ...) -> {cmd, arg, ...}: a command checked as
 * core.redis checks it (numbers as strings), for ctx:write, which sends it
 * with the ack. */
static int core_command(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  check_command(L, name, 2, not_in_scripts,
                "scripts and the server's administration do not run in the script that writes "
                "the ack");
  int n = lua_gettop(L) - 1;
  if (n > RT_COMMAND_ARGS_MAX)
    return luaL_error(L, "%s: %d arguments, more than a command written with the ack may have (%d)",
                      name, n, RT_COMMAND_ARGS_MAX);
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, i + 1);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

/* core.slot_check(name, command, stream [, tag]) -> nil, or why command's
 * keys cannot be written with the ack of an entry of stream (the partition's
 * key for a partitioned handler): on Redis Cluster the outcome script runs on
 * the node of the stream's slot, and Redis refuses keys of another slot in it
 * (after the ack would have gone: so the handler hears it now). With tag
 * ("{NAME}"), stream is a schedule's key, written with a tick's done mark. */
static int core_slot_check(lua_State *L) {
  struct core *c = lua_touserdata(L, lua_upvalueindex(1));
  const struct rt_env *env = c->jobs ? c->jobs->env : NULL;
  if (env == NULL || !env->cluster) return 0;
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *stream = luaL_checkstring(L, 3);
  const char *tag = luaL_optstring(L, 4, NULL);
  int argc = (int)lua_objlen(L, 2);
  /* every argument may be a key (DEL k1 k2 ...): as many slots as arguments */
  const char **argv =
      lua_newuserdata(L, (size_t)argc * (sizeof(char *) + sizeof(size_t) + sizeof(int)) + 1);
  size_t *argvlen = (size_t *)(void *)(argv + argc);
  int *keys = (int *)(void *)(argvlen + argc);
  for (int i = 0; i < argc; i++) {
    lua_rawgeti(L, 2, i + 1);
    argv[i] = lua_tolstring(L, -1, &argvlen[i]); /* strings already: anchored by the table */
    lua_pop(L, 1);
    if (argv[i] == NULL) return 0;
  }
  unsigned want = keyslot_of(stream, strlen(stream));
  int n = command_keys(argc, argv, argvlen, keys, argc);
  for (int i = 0; i < n && i < argc; i++) {
    unsigned slot = keyslot_of(argv[keys[i]], argvlen[keys[i]]);
    if (slot == want) continue;
    if (tag)
      lua_pushfstring(L,
                      "%s: key \"%s\" (hash slot %d) is not in the slot of the schedule's key "
                      "\"%s\" (hash slot %d): on Redis Cluster what a tick writes goes with its "
                      "done mark and must share that slot; give the key the hash tag %s",
                      name, argv[keys[i]], (int)slot, stream, (int)want, tag);
    else
      lua_pushfstring(
          L,
          "%s: key \"%s\" (hash slot %d) is not in the slot of stream \"%s\" (hash slot "
          "%d): on Redis Cluster what is written with the ack must share the stream's "
          "slot; give the key the stream's hash tag",
          name, argv[keys[i]], (int)slot, stream, (int)want);
    return 1;
  }
  return 0;
}

/* core.redis(url, server, name, timeout_ms, cmd, ...)  sends the command
 * (checked and converted by check_command) on the host's calls connection
 * (url nil) or on the one it keeps for url (a client of ls.redis.connect,
 * whose closures anchor url and server, its redacted form for messages), and
 * yields until its answer, which core.redis_result gives. Does not yield when
 * nothing was sent (not connected): redis_result says why. timeout_ms 0: the
 * host's default. name is the Lua function, for errors. */
static int core_redis(lua_State *L) {
  const char *url = lua_isnil(L, 1) ? NULL : luaL_checkstring(L, 1);
  const char *server = url ? luaL_checkstring(L, 2) : NULL;
  const int first = 3;
  const char *name = luaL_checkstring(L, first);
  struct rt_job *job = jobs_running_on(self(L)->jobs, L);
  if (job == NULL)
    return raise_in_handler(L,
                            "%s may only be called while handling an entry, from the "
                            "handler's own coroutine (not while the file loads)",
                            name);
  lua_Number timeout = luaL_checknumber(L, first + 1);
  int cmd = first + 2; /* the command's index; its arguments follow */
  check_command(L, name, cmd, NULL, NULL);
  int argc = lua_gettop(L) - cmd + 1;
  const char *stack_argv[CALL_ARGS_STACK];
  size_t stack_len[CALL_ARGS_STACK];
  const char **argv = stack_argv;
  size_t *argvlen = stack_len;
  if (argc > CALL_ARGS_STACK) {
    argv = malloc((size_t)argc * sizeof *argv);
    argvlen = malloc((size_t)argc * sizeof *argvlen);
    if (argv == NULL || argvlen == NULL) {
      free(argv);
      free(argvlen);
      return luaL_error(L, "%s: out of memory", name);
    }
  }
  for (int i = 0; i < argc; i++) argv[i] = lua_tolstring(L, i + cmd, &argvlen[i]);
  /* at most a day: past it the cast would be undefined, and nothing waits a day */
  uint64_t timeout_ms = timeout > 0 ? (timeout < 86400000 ? (uint64_t)timeout : 86400000) : 0;
  int rc = url ? job_call_on(job, url, server, argc, argv, argvlen, timeout_ms)
               : job_call(job, argc, argv, argvlen, timeout_ms);
  if (argv != stack_argv) {
    free(argv);
    free(argvlen);
  }
  if (rc == -1) return luaL_error(L, "%s: this host offers no Redis connection to handlers", name);
  if (rc == -2) return luaL_error(L, "%s: out of memory", name);
  if (rc == -3) return 0;
  return lua_yield(L, 0);
}

/* core.redis_connect(url) -> url redacted (the password as "***"), or raises
 * naming what is wrong with url: what ls.redis.connect checks, at load too.
 * Tells the host (rt_env.connect), which keeps one connection per url. */
static int core_redis_connect(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  struct redis_url parsed;
  char err[URL_TEXT_MAX + 128];
  const struct rt_env *env = self(L)->jobs->env;
  broker *b;
  bk_conn *conn;
  if (url_parse(url, &parsed, err, sizeof err) != 0 ||
      (env && env->connect &&
       env->connect(env->connect_data, url, &b, &conn, err, sizeof err) != 0))
    return raise_in_handler(L, "ls.redis.connect: %s", err);
  lua_pushstring(L, parsed.redacted);
  return 1;
}

/* core.redis_result() -> the reply of the job's last core.redis converted
 * (redis_reply.h), or nil and a message: the text of an error reply, a
 * timeout, a lost connection. */
static int core_redis_result(lua_State *L) {
  struct rt_job *job = current_job(L, "ls.redis");
  const char *err;
  const bk_reply *r = job_call_reply(job, &err);
  if (r != NULL && r->type != BK_ERROR) {
    redis_reply_push(L, r);
    return 1;
  }
  lua_pushnil(L);
  if (r)
    lua_pushlstring(L, r->str ? r->str : "", r->str ? r->len : 0);
  else
    lua_pushstring(L, err);
  return 2;
}

/* The entry of job number seq (argument 1), which must be the running one:
 * the entry a job reads is the host's until the job ends.  Raises otherwise. */
static const struct entry *entry_by_seq(lua_State *L) {
  lua_Number seq = luaL_checknumber(L, 1);
  const struct entry *e = jobs_entry(self(L)->jobs, seq);
  if (e == NULL)
    luaL_error(L,
               "ctx.id, ctx.headers and ctx.fields can be read only while the handler "
               "runs (first read them before it returns)");
  return e;
}

/* core.entry(seq [, fields]) -> id [, {name, value, ...}, deliveries, idle_ms]
 * of the entry that job seq runs (deliveries and idle_ms are -1 unless it was
 * claimed or read again from the own pending list): what ctx.id, ctx.headers and ctx.fields are built from when
 * first read. */
static int core_entry(lua_State *L) {
  const struct entry *e = entry_by_seq(L);
  lua_pushstring(L, e->id);
  if (!lua_toboolean(L, 2)) return 1;
  lua_createtable(L, (int)e->nfields, 0);
  for (size_t i = 0; i < e->nfields; i++) {
    lua_pushlstring(L, e->field[i], e->field_len[i]);
    lua_rawseti(L, -2, (int)i + 1);
  }
  lua_pushnumber(L, (lua_Number)e->deliveries);
  lua_pushnumber(L, (lua_Number)e->idle_ms);
  return 4;
}

/* The field name at e->field[i] is name (len bytes). */
static bool field_is(const struct entry *e, size_t i, const char *name, size_t len) {
  return e->field_len[i] == len && memcmp(e->field[i], name, len) == 0;
}

/* core.field(seq, name) -> the value of the entry's field name (the last of
 * a duplicated name), or nil: one header without building them all. */
static int core_field(lua_State *L) {
  const struct entry *e = entry_by_seq(L);
  size_t len;
  const char *name = luaL_checklstring(L, 2, &len);
  for (size_t i = e->nfields; i >= 2; i -= 2) {
    if (field_is(e, i - 2, name, len)) {
      lua_pushlstring(L, e->field[i - 1], e->field_len[i - 1]);
      return 1;
    }
  }
  lua_pushnil(L);
  return 1;
}

/* core.source_id(seq) -> the id on the source stream of the entry job seq
 * runs (entry_source_id): what a reply's original-id names, also when the
 * entry is a retry copy or a delayed entry read from the retry stream. */
/* core.deliveries(seq) -> the deliveries of the entry before this one, as
 * the host counts them for max_deliveries: Redis's count on a claimed read
 * (reclaim's includes this delivery), plus what a copy on the retry stream
 * carries; a producer's delivery-count header on the shared stream counts
 * for nothing. */
static int core_deliveries(lua_State *L) {
  const struct handler_spec *spec = self(L)->jobs->spec;
  const struct entry *e = entry_by_seq(L);
  long long n = entry_carried_deliveries(e);
  if (e->deliveries >= 0) n = e->deliveries - (spec->read == READ_RECLAIM ? 1 : 0);
  lua_pushnumber(L, (lua_Number)n);
  return 1;
}

/* core.traceparent(seq) -> a child of the running entry's traceparent (a
 * new parent id), or nil when it has none that is valid: for the entries a
 * handler writes because of it (replies, ctx:publish). */
static int core_traceparent(lua_State *L) {
  const struct entry *e = entry_by_seq(L);
  size_t len = 0;
  const char *tp = entry_get(e, HDR_TRACEPARENT, &len);
  char child[TRACEPARENT_LEN + 1];
  if (tp && trace_child(tp, len, child))
    lua_pushlstring(L, child, TRACEPARENT_LEN);
  else
    lua_pushnil(L);
  return 1;
}

static int core_source_id(lua_State *L) {
  lua_pushstring(L, entry_source_id(entry_by_seq(L)));
  return 1;
}

static bool contains(const char *s, size_t len, const char *word, size_t wlen) {
  for (size_t i = 0; i + wlen <= len; i++)
    if (memcmp(s + i, word, wlen) == 0) return true;
  return false;
}

/* Whether the JSON text matches s (field: its name, for an error): true, or
 * false with the first failing path and rule in why. Raises when the text
 * cannot be checked (not JSON, out of memory). */
static bool schema_matches(lua_State *L, struct core *c, const struct schema *s, const char *field,
                           const char *text, size_t len, char *why, size_t whylen) {
  int rc = schema_check_json(s, text, len, &c->scratch, why, whylen);
  if (rc < 0) luaL_error(L, "checking against field '%s': %s", field, why);
  return rc == 1;
}

/* The decoded body on top, checked against the spec's schema on its text:
 * returns 1 with it kept when it matches, else 3 results (nil, the reason,
 * the first failing path and rule) with it popped. */
static int schema_body(lua_State *L, struct core *c, const char *body, size_t body_len) {
  const struct schema *s = c->jobs->spec->schema;
  char why[300];
  if (s == NULL || schema_matches(L, c, s, "schema", body, body_len, why, sizeof why)) return 1;
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_pushinteger(L, WIRE_INPUT_SCHEMA);
  lua_pushstring(L, why);
  return 3;
}

/* core.schema_mismatch(field, text) -> nil when the JSON text matches the
 * handler's schema of that field ("schema" or "reply_schema"; none set:
 * nil), else the first failing path and rule: for a reply, and for the
 * field table of an entry without a `data` field (as JSON). */
static int core_schema_mismatch(lua_State *L) {
  struct core *c = self(L);
  const char *field = luaL_checkstring(L, 1);
  size_t len;
  const char *text = luaL_checklstring(L, 2, &len);
  const struct schema *s =
      strcmp(field, "reply_schema") == 0 ? c->jobs->spec->reply_schema : c->jobs->spec->schema;
  char why[300];
  if (s == NULL || schema_matches(L, c, s, field, text, len, why, sizeof why)) return 0;
  lua_pushstring(L, why);
  return 1;
}

int core_schema_check(lua_State *L) {
  luaL_checkany(L, 1);
  struct schema_error err;
  schema *s = schema_compile(L, 1, &err);
  if (s) {
    schema_free(s);
    return 0;
  }
  lua_pushstring(L, err.at);
  lua_pushstring(L, err.key);
  lua_pushstring(L, err.why);
  return 3;
}

/* core.message(seq) -> the message of the entry job seq runs (read by
 * luastream/message.lua for dispatcher() in luastream/handler.lua): the decoded JSON body, or the text
 * of a body whose content-type is not JSON; nil for an entry without a `data`
 * field; nil, reason, text for bad input (reason: an enum wire_reason code,
 * core.reasons.INPUT_*: two `data` fields, a body over
 * max_body, not JSON, a number out of range).
 * The dispatcher calls it first thing, so decoding runs inside the job's
 * coroutine: an error there (out of memory) fails this entry, not the host. */
static int core_message(lua_State *L) {
  struct core *c = self(L);
  size_t max_body = c->jobs->spec->max_body;
  const struct entry *e = entry_by_seq(L);
  const char *body = NULL, *type = NULL;
  size_t body_len = 0, type_len = 0;
  int bodies = 0;
  /* One pass for both (entry_get would walk the fields twice); the last
   * content-type wins, as there. Two bodies are bad input: which one the
   * producer meant cannot be known (Redis keeps both). */
  for (size_t i = 0; i + 1 < e->nfields; i += 2) {
    if (field_is(e, i, HDR_DATA, sizeof HDR_DATA - 1)) {
      bodies++;
      body = e->field[i + 1];
      body_len = e->field_len[i + 1];
    } else if (field_is(e, i, HDR_CONTENT_TYPE, sizeof HDR_CONTENT_TYPE - 1)) {
      type = e->field[i + 1];
      type_len = e->field_len[i + 1];
    }
  }
  if (body == NULL) return 0;
  if (bodies > 1) {
    lua_pushnil(L);
    lua_pushinteger(L, WIRE_INPUT_DUPLICATE);
    lua_pushfstring(L, "entry has %d data fields: which one is the body cannot be known", bodies);
    return 3;
  }
  if (body_len > max_body) {
    lua_pushnil(L);
    lua_pushinteger(L, WIRE_INPUT_TOO_LARGE);
    lua_pushfstring(L, "body is %d bytes, over max_body (%d)", (int)body_len, (int)max_body);
    return 3;
  }
  if (type != NULL && !contains(type, type_len, "json", 4)) {
    lua_pushlstring(L, body, body_len);
    return 1;
  }
  char err[160];
  int rc = json_decode_push(L, c->shapes, body, body_len, err, sizeof err);
  if (rc == 0) return schema_body(L, c, body, body_len);
  lua_pushnil(L);
  if (rc == JSON_DECODE_RANGE) {
    lua_pushinteger(L, WIRE_INPUT_NUMBER);
    lua_pushfstring(L, "body has a number no double can hold: %s", err);
  } else {
    lua_pushinteger(L, WIRE_INPUT_DECODE);
    lua_pushfstring(L, "body is not valid JSON: %s", err);
  }
  return 3;
}

/* For luastream.handler, through the FFI (core.flat_fn): reads the body of
 * entry seq into rec when it is a flat object whose shape has a constructor
 * (json_shapes_ready) and returns 1; else returns 0 and the dispatcher asks
 * core.message, which decides everything else (no body, two bodies, a
 * content-type field of any value, over max_body, not JSON, a number out of
 * range, nested, escaped, a new shape). A C
 * function called through the FFI must not call Lua: this one only reads. */
static int luastream_flat(struct core *c, double seq, struct json_flat *rec) {
  const struct entry *e = jobs_entry(c->jobs, seq);
  if (e == NULL) return 0;
  const char *body = NULL;
  size_t body_len = 0;
  for (size_t i = 0; i + 1 < e->nfields; i += 2) {
    if (field_is(e, i, HDR_CONTENT_TYPE, sizeof HDR_CONTENT_TYPE - 1)) return 0;
    if (field_is(e, i, HDR_DATA, sizeof HDR_DATA - 1)) {
      if (body != NULL) return 0;
      body = e->field[i + 1];
      body_len = e->field_len[i + 1];
    }
  }
  if (body == NULL || body_len > c->jobs->spec->max_body || !json_scan_flat(body, body_len, rec))
    return 0;
  rec->slot = json_shapes_ready(c->shapes, rec->key, rec->n, &rec->gen);
  if (rec->slot < 0) return 0;
  /* One that does not match goes to core.message, which says why. */
  const struct schema *s = c->jobs->spec->schema;
  if (s && !schema_match_flat(s, rec, &c->scratch)) return 0;
  c->flat_reads++;
  return 1;
}

int core_cron_check(lua_State *L) {
  struct cron c;
  char why[256];
  if (cron_parse(luaL_checkstring(L, 1), &c, why, sizeof why) == 0) return 0;
  lua_pushstring(L, why);
  return 1;
}

int core_tz_check(lua_State *L) {
  struct tz *z = NULL;
  char why[600];
  if (tz_load(luaL_checkstring(L, 1), &z, why, sizeof why) == 0) {
    tz_free(z);
    return 0;
  }
  lua_pushstring(L, why);
  return 1;
}

int core_duration(lua_State *L) {
  char why[160];
  double ms = 0;
  int rc;
  if (lua_type(L, 1) == LUA_TNUMBER) {
    ms = lua_tonumber(L, 1);
    rc = duration_check_ms(ms, why, sizeof why);
  } else if (lua_type(L, 1) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    rc = duration_parse(s, len, &ms, why, sizeof why);
  } else {
    snprintf(why, sizeof why,
             "must be a number of milliseconds or a duration such as \"30s\", got %s",
             luaL_typename(L, 1));
    rc = -1;
  }
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushnumber(L, ms);
  return 1;
}

/* t[key] = {NAME = "text", ...} from names, or {NAME = i, ...} (the index
 * in names: the code) when codes. */
static void set_names(lua_State *L, int idx, const char *key, const struct wire_name *names,
                      bool codes) {
  size_t n = 0;
  while (names[n].name) n++;
  lua_createtable(L, 0, (int)n);
  for (size_t i = 0; i < n; i++) {
    if (codes)
      lua_pushinteger(L, (lua_Integer)i);
    else
      lua_pushstring(L, names[i].text);
    lua_setfield(L, -2, names[i].name);
  }
  lua_setfield(L, idx < 0 ? idx - 1 : idx, key);
}

/* t.outcomes = {ACK = RT_ACK, ...}: the names of rt_outcome_name,
 * upper-cased. */
static void set_outcomes(lua_State *L, int idx) {
  lua_createtable(L, 0, RT_OUTCOMES);
  for (int k = 0; k < RT_OUTCOMES; k++) {
    char name[32];
    const char *s = rt_outcome_name(k);
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof name; i++) name[i] = (char)toupper((unsigned char)s[i]);
    name[i] = '\0';
    lua_pushinteger(L, k);
    lua_setfield(L, -2, name);
  }
  lua_setfield(L, idx < 0 ? idx - 1 : idx, "outcomes");
}

int core_partition(lua_State *L) {
  size_t len;
  const char *key = luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  if (n < 1 || n > 1024) return luaL_error(L, "partitions must be from 1 to 1024");
  lua_pushinteger(L, (lua_Integer)keyslot_partition(key, len, (unsigned)n));
  return 1;
}

void core_set_wire_names(lua_State *L, int idx) {
  set_names(L, idx, "headers", wire_headers, false);
  set_names(L, idx, "reasons", wire_reasons, true);
  set_outcomes(L, idx);
}

int core_open(lua_State *L, struct core *c) {
  static const luaL_Reg fns[] = {{"log", core_log},
                                 {"sleep", core_sleep},
                                 {"now", core_now},
                                 {"entry", core_entry},
                                 {"field", core_field},
                                 {"message", core_message},
                                 {"schema_mismatch", core_schema_mismatch},
                                 {"source_id", core_source_id},
                                 {"deliveries", core_deliveries},
                                 {"redis", core_redis},
                                 {"redis_result", core_redis_result},
                                 {"command", core_command},
                                 {"slot_check", core_slot_check},
                                 {"redis_connect", core_redis_connect},
                                 {"traceparent", core_traceparent},
                                 {NULL, NULL}};
  lua_createtable(L, 0, 32);
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushlightuserdata(L, c);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
  core_http_open(L, c);
  core_pg_open(L, c);
  lua_pushcfunction(L, core_duration);
  lua_setfield(L, -2, "duration");
  lua_pushcfunction(L, core_cron_check);
  lua_setfield(L, -2, "cron_check");
  lua_pushcfunction(L, core_tz_check);
  lua_setfield(L, -2, "tz_check");
  lua_pushcfunction(L, core_partition);
  lua_setfield(L, -2, "partition");
  lua_pushcfunction(L, core_schema_check);
  lua_setfield(L, -2, "schema_check");
  lua_pushliteral(L, LUASTREAM_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushlightuserdata(L, (void *)(uintptr_t)luastream_flat);
  lua_setfield(L, -2, "flat_fn");
  lua_pushlightuserdata(L, c);
  lua_setfield(L, -2, "flat_arg");
  lua_pushnumber(L, (lua_Number)sizeof(struct json_flat));
  lua_setfield(L, -2, "flat_size");
  lua_pushinteger(L, RT_COMMAND_ARGS_MAX);
  lua_setfield(L, -2, "command_args_max");
  lua_pushstring(L, SCRIPT_RATE); /* ls.rate.take's rule: the handler fields' (scripts.h) */
  lua_setfield(L, -2, "rate_script");
  core_set_wire_names(L, -1);
  return 1;
}
