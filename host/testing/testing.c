/* testing: luastream_testing, the C half of require "luastream.testing".
 *
 * Runs the real host (host.c: subscriptions, lanes, runtime, outcomes) in the
 * busted process on the in-memory broker and a virtual clock. Time moves only
 * when a spec settles or advances it, and each call returns once every
 * consequence (reads, handler runs, outcomes) has happened. Deliveries are
 * recorded in C as they finish and turned into Lua tables only when a spec
 * asks, in the state that asks, so no Lua value ever crosses between the
 * handlers' states and busted's.
 *
 *   local core = require "luastream_testing"
 *   local app = core.app(dir, {version = "8.4.0", consumer = "c"})  -- or raises
 *   local app = core.app(dir, {redis = "redis://127.0.0.1:6379"})   -- a real server
 *   local other = core.app(dir, {with = app})  -- a second host on the same broker and clock
 *
 * With a real server time is real: advance is refused, and settle runs the
 * loop until the host is idle and every group it reads has been handed all of
 * its stream.
 *   app:command("XADD", "s", "*", "data", "{}")  -> reply (nil, err on error)
 *   app:settle()  app:advance(ms)  app:pause(ms)  app:stall(ms)  app:now()
 *   app:deliveries([handler]) -> { {handler, id, fields = {k, v, ...}, deliveries, idle_ms,
 *                                   outcome, reason, error, version}, ... }
 *   app:logs() -> { line, ... }   app:stop()
 *   app:ready() -> true, or false and why (host_is_ready: /readyz's answer)
 *   app:reload([force])  app:reload_soon()   -- hot reload (host_reload, host_reload_soon)
 *   app:command_on(url, "GET", "k")  -> reply: on the server handlers reach
 *                                   with ls.redis.connect(url)
 *   app:server_down(url, down)      -- that in-memory server (nil: the host's) has an outage (or ends it)
 *   app:slow(command, ms [, url])   -- that command is answered ms late (0: none is)
 *
 * ls.redis.connect(url) in a handler reaches, per distinct URL (as redacted:
 * the password does not tell servers apart), a server of the app's world: a
 * fresh in-memory Redis on the same clock, or with {redis = URL} a real
 * connection to url.
 *
 * ls.http requests go to the world's stub client (http_stub.h) on its
 * clock, which asks opts.http_answer, a function of the spec's state, for
 * each one (see world_http_answer); testing.lua keeps the stubs and the
 * requests made.
 *   app:http_passthrough(on)  -- {redis = URL} only: unanswered requests go
 *                                to real servers (http_curl)
 *
 * ls.pg reaches a real PostgreSQL only, the one opts.postgres names (a
 * libpq connection string or URL; opts.pg_once_table, opts.pg_timeout in
 * ms): there is no SQL in memory. Its client runs on a libuv loop of its
 * own (the real server's with {redis = URL}), which settle and advance run
 * while queries are outstanding, between turns of the virtual clock: a
 * query takes no virtual time. Without opts.postgres ls.pg raises, saying
 * so. */
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "broker.h"
#include "broker_memory.h"
#include "clock.h"
#include "clock_virtual.h"
#include "duration.h"
#include "entry.h"
#include "flow_keys.h"
#include "host.h"
#include "http.h"
#include "http_curl.h"
#include "http_stub.h"
#include "json_decode.h"
#include "json_encode.h"
#include "log.h"
#include "metrics.h"
#include "stall_broker.h"
#include "pg.h"
#include "pg_pool.h"
#include "corelib.h"
#include "runtime.h"
#include "scripts.h"
#include "servers.h"
#include "subscription.h"
#include "url.h"

#define APP_MT "luastream.testing.app"
#define WALL_START_MS 1767225600000ULL /* 2026-01-01T00:00:00Z: stable ids */
#define REAL_WAIT_MS 10000             /* a real server must answer within this */

struct delivery {
  char *handler, *id, *outcome, *reason, *error, *version;
  long long deliveries, idle_ms; /* claimed entries; else -1 */
  size_t nfields;
  char **field; /* copies */
  size_t *field_len;
};

/* What the hosts of one spec share: the broker, its clock, and the log. A
 * second host joins with opts.with (two hosts on one broker); the world goes
 * when its last app does. Each world keeps its own log records: two apps
 * made apart never see each other's lines. */
/* Another server of a world: what ls.redis.connect(url) reaches. */
struct world_server {
  char *key; /* the URL redacted */
  broker *b;
  bk_conn *conn; /* the spec's own (command_on) */
};

struct world {
  uv_loop_t *loop; /* only with a real server (opts.redis); else NULL */
  lclock *clock;
  broker *b;
  struct world_server *servers; /* ls.redis.connect's, made on first use */
  size_t nservers;
  http_client *http;   /* every host's: the stubs (http_stub.h) */
  int http_answer_ref; /* opts.http_answer in the spec's state, or LUA_NOREF */
  bool http_pass;      /* unanswered requests go to real servers */
  pg_pool *pg;         /* opts.postgres's, else NULL */
  uv_loop_t *pg_loop;  /* pg's loop: loop, or one of its own on the virtual clock */
  char *pg_once_table;
  lua_State *L; /* the spec's state, inside the call now running the world */
  int apps;     /* apps using it */
  char **logs;  /* every line its hosts logged */
  size_t nlogs, logcap;
};

struct app {
  struct world *w;
  host *host;
  /* The host's view of the world's clock and its door to the world's
   * broker, through which app:stall stops this host alone (on a real
   * server: the world's own). */
  lclock *clock;
  broker *b;
  bk_conn *conn; /* the spec's own connection (publish, inspect) */
  bool stopped;
  struct delivery *deliveries;
  size_t ndeliveries, cap;
  size_t errors_seen; /* handler errors already raised to the spec */
  bool raise_errors;  /* a handler error fails the settle/advance that ran it */
  int nresults;
  bool replied;
};

static char *dupn(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

static char *dups(const char *s) { return s ? dupn(s, strlen(s)) : NULL; }

/* ---- recording ---- */

static void record(void *data, const struct handler_spec *spec, const struct entry *e,
                   const struct rt_result *res) {
  struct app *a = data;
  if (a->ndeliveries == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    struct delivery *d = realloc(a->deliveries, cap * sizeof *d);
    if (d == NULL) abort(); /* a test harness out of memory has nothing better to do */
    a->deliveries = d;
    a->cap = cap;
  }
  struct delivery *d = &a->deliveries[a->ndeliveries++];
  memset(d, 0, sizeof *d);
  d->handler = dups(spec->name);
  d->id = dups(e->id);
  d->outcome = dups(rt_outcome_name(res->kind));
  d->reason = dups(res->reason);
  d->error = res->text ? dupn(res->text, res->text_len) : NULL;
  d->version = dups(res->version);
  d->deliveries = e->deliveries;
  d->idle_ms = e->idle_ms;
  d->nfields = e->nfields;
  d->field = calloc(e->nfields ? e->nfields : 1, sizeof *d->field);
  d->field_len = calloc(e->nfields ? e->nfields : 1, sizeof *d->field_len);
  for (size_t i = 0; i < e->nfields; i++) {
    d->field[i] = dupn(e->field[i], e->field_len[i]);
    d->field_len[i] = e->field_len[i];
  }
}

static void capture_log(void *data, enum log_level level, const char *line, size_t len) {
  (void)level;
  struct world *w = data;
  if (w->nlogs == w->logcap) {
    size_t cap = w->logcap ? w->logcap * 2 : 64;
    char **l = realloc(w->logs, cap * sizeof *l);
    if (l == NULL) abort();
    w->logs = l;
    w->logcap = cap;
  }
  w->logs[w->nlogs++] = dupn(line, len);
}

/* The log is process-wide (log.h): every entry into an app points it at that
 * app's world, so what its hosts log lands in its records, stamped with its
 * clock's (virtual) time. */
static void world_log_here(struct world *w) {
  log_set_sink(capture_log, w);
  log_set_clock(w->clock);
}

/* Where the log went before a world took it for a moment (collection runs
 * inside any call, so it must hand the log back as it found it). */
struct log_route {
  log_sink_fn *sink;
  void *data;
  lclock *clock;
};

static struct log_route log_route_save(void) {
  struct log_route r;
  r.sink = log_get_sink(&r.data);
  r.clock = log_get_clock();
  return r;
}

/* Restores r, unless it led to `gone`, a world now freed: then the default. */
static void log_route_restore(struct log_route r, const struct world *gone) {
  if (gone && r.data == gone) {
    log_set_sink(NULL, NULL);
    log_set_clock(NULL);
    return;
  }
  log_set_sink(r.sink, r.data);
  log_set_clock(r.clock);
}

/* Drops one app's hold on w; the last one frees it (its last lines its own). */
/* Worlds alive: the metrics registry (process-wide, metrics.h) is emptied
 * when the last goes, so that nothing of it outlives the module. */
static int worlds;

static void world_settle(struct world *w);

static void world_unref(struct world *w, lua_State *L) {
  if (--w->apps > 0) return;
  struct log_route prev = log_route_save();
  world_log_here(w);
  for (size_t i = 0; i < w->nservers; i++) /* every host using them is gone */
    if (w->servers[i].conn) bk_conn_close(w->servers[i].b, w->servers[i].conn);
  http_close(w->http); /* requests of abandoned handlers: their timers go before the clock */
  http_free(w->http);
  rt_trim(); /* the records of those requests came back after host_free trimmed them */
  luaL_unref(L, LUA_REGISTRYINDEX, w->http_answer_ref);
  if (w->b) {
    if (w->loop)
      uv_run(w->loop, UV_RUN_NOWAIT);
    else
      world_settle(w);
    broker_free(w->b);
  }
  for (size_t i = 0; i < w->nservers; i++) {
    broker_free(w->servers[i].b);
    free(w->servers[i].key);
  }
  free(w->servers);
  if (w->pg) { /* every host using it is gone: its queries are let go */
    pg_pool_free(w->pg);
    if (w->pg_loop != w->loop) {
      uv_run(w->pg_loop, UV_RUN_DEFAULT); /* close callbacks: the pool is freed in the last */
      uv_loop_close(w->pg_loop);
      free(w->pg_loop);
    }
  }
  free(w->pg_once_table);
  log_set_clock(NULL);
  if (w->clock) w->clock->ops->free(w->clock);
  if (w->loop) {
    uv_run(w->loop, UV_RUN_DEFAULT); /* close callbacks */
    uv_loop_close(w->loop);
    free(w->loop);
  }
  log_route_restore(prev, w);
  for (size_t i = 0; i < w->nlogs; i++) free(w->logs[i]);
  free(w->logs);
  free(w);
  if (--worlds == 0) metrics_reset(); /* no host is left to count in it */
}

/* ---- running the clock ---- */

/* Runs everything due on the virtual clock, and PostgreSQL's loop while
 * queries are outstanding (each answer may start more work, and more
 * queries). The pool's deadlines bound each turn. */
static void world_settle(struct world *w) {
  clock_virtual_settle(w->clock);
  while (w->pg && !w->loop && pg_pool_busy(w->pg)) {
    uv_run(w->pg_loop, UV_RUN_ONCE);
    clock_virtual_settle(w->clock);
  }
}

/* Raises the first handler error not yet raised, with its traceback. */
static void raise_new_errors(lua_State *L, struct app *a) {
  if (!a->raise_errors) return;
  for (size_t i = a->errors_seen; i < a->ndeliveries; i++) {
    struct delivery *d = &a->deliveries[i];
    if (strcmp(d->outcome, "error") != 0) continue;
    a->errors_seen = a->ndeliveries;
    luaL_error(L, "handler %s failed on entry %s (%s):\n%s", d->handler, d->id, d->reason,
               d->error ? d->error : "");
  }
  a->errors_seen = a->ndeliveries;
}

static struct app *check_app(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  if (a->stopped) luaL_error(L, "this app has been stopped");
  world_log_here(a->w);
  a->w->L = L;
  return a;
}

/* ---- a real server: the libuv loop until something holds ---- */

static void tick(uv_timer_t *t) { (void)t; }

/* Runs the loop until done(a) or REAL_WAIT_MS pass; returns done(a). */
static bool run_until(struct app *a, bool (*done)(struct app *)) {
  uv_timer_t ticker; /* wakes the loop so the condition is looked at */
  uv_timer_init(a->w->loop, &ticker);
  uv_timer_start(&ticker, tick, 2, 2);
  uint64_t deadline = uv_now(a->w->loop) + REAL_WAIT_MS;
  bool ok;
  while (!(ok = done(a)) && uv_now(a->w->loop) < deadline) uv_run(a->w->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&ticker, NULL);
  uv_run(a->w->loop, UV_RUN_NOWAIT);
  return ok;
}

static bool got_reply(struct app *a) { return a->replied; }

static void command_done(void *data, const bk_reply *r, const char *err);

/* A command the spec waits for. On the heap: a reply that comes after the
 * waiter gave up (a blocking command, a slow server) finds `a` NULL and is
 * dropped instead of landing on a stack that has moved on. */
struct waiter {
  struct app *a;        /* NULL once abandoned */
  lua_State *L;         /* command(): where the reply is pushed */
  struct info_query *q; /* group_caught_up(): where the value goes */
};

/* Sends argv on the spec's connection and runs the clock or loop until the
 * reply came. Returns false when it could not be sent or got no reply. */
static bool wait_reply_on(struct app *a, broker *b, bk_conn *conn, struct waiter *w, int argc,
                          const char **argv, const size_t *argvlen, bk_reply_cb *cb) {
  a->replied = false;
  if (bk_command(b, conn, argc, argv, argvlen, cb, w) != 0) {
    free(w);
    return false;
  }
  if (a->w->loop)
    run_until(a, got_reply);
  else
    world_settle(a->w);
  if (!a->replied) {
    w->a = NULL; /* the callback frees it when (if) the reply comes */
    return false;
  }
  free(w);
  return true;
}

static bool wait_reply(struct app *a, struct waiter *w, int argc, const char **argv,
                       const size_t *argvlen, bk_reply_cb *cb) {
  return wait_reply_on(a, a->w->b, a->conn, w, argc, argv, argvlen, cb);
}

/* Pushes the reply of args on L (1 or 2 values, counted in a->nresults). */
static bool roundtrip_on(lua_State *L, struct app *a, broker *b, bk_conn *conn,
                         struct bk_args *args) {
  struct waiter *w = calloc(1, sizeof *w);
  if (w == NULL) return false;
  w->a = a;
  w->L = L;
  return wait_reply_on(a, b, conn, w, args->argc, args->argv, args->argvlen, command_done);
}

/* The value of key in a flat [key, value, ...] reply, or NULL. */
static const bk_reply *field_of(const bk_reply *r, const char *key) {
  for (size_t i = 0; r && r->type == BK_ARRAY && i + 1 < r->elements; i += 2)
    if (r->element[i]->type == BK_STRING && strcmp(r->element[i]->str, key) == 0)
      return r->element[i + 1];
  return NULL;
}

/* One XINFO question: the id under `key`, in the reply itself (XINFO
 * STREAM) or in the element whose name is `group` (XINFO GROUPS). */
struct info_query {
  const char *group; /* NULL for XINFO STREAM */
  const char *key;
  char value[64]; /* "" when not found */
};

static void info_done(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct waiter *w = data;
  if (w->a == NULL) {
    free(w);
    return;
  }
  struct info_query *q = w->q;
  w->a->replied = true;
  const bk_reply *found = NULL;
  if (q->group == NULL) {
    found = field_of(r, q->key);
  } else {
    for (size_t i = 0; r && r->type == BK_ARRAY && i < r->elements && !found; i++) {
      const bk_reply *name = field_of(r->element[i], "name");
      if (name && name->type == BK_STRING && strcmp(name->str, q->group) == 0)
        found = field_of(r->element[i], q->key);
    }
  }
  if (found && found->type == BK_STRING) snprintf(q->value, sizeof q->value, "%s", found->str);
}

static void ask_info(struct app *a, struct info_query *q, const char *what, const char *stream) {
  const char *argv[] = {"XINFO", what, stream};
  size_t len[] = {5, strlen(what), strlen(stream)};
  q->value[0] = '\0';
  struct waiter *w = calloc(1, sizeof *w);
  if (w == NULL) return;
  w->a = a;
  w->q = q;
  wait_reply(a, w, 3, argv, len, info_done);
}

/* Has group been handed every entry of stream? Asked of the server. */
static bool group_caught_up(struct app *a, const char *stream, const char *group) {
  struct info_query delivered = {group, "last-delivered-id", ""};
  struct info_query generated = {NULL, "last-generated-id", ""};
  ask_info(a, &delivered, "GROUPS", stream);
  ask_info(a, &generated, "STREAM", stream);
  return delivered.value[0] && strcmp(delivered.value, generated.value) == 0;
}

static bool host_quiet(struct app *a) {
  for (size_t i = 0; i < host_subscriptions(a->host); i++) {
    subscription *s = host_subscription(a->host, i);
    if (s == NULL || !sub_idle(s)) return false;
  }
  return true;
}

/* Quiet, and every group that reads new entries has been handed its whole
 * stream; twice in a row, a round trip apart, so a read reply already on its
 * way has time to land. */
static void settle_real(lua_State *L, struct app *a) {
  uint64_t deadline = uv_now(a->w->loop) + REAL_WAIT_MS;
  int quiet_checks = 0;
  while (quiet_checks < 2) {
    if (uv_now(a->w->loop) > deadline)
      luaL_error(L, "the host did not settle within %d ms", REAL_WAIT_MS);
    if (!run_until(a, host_quiet)) continue;
    bool all = true;
    for (size_t i = 0; all && i < host_subscriptions(a->host); i++) {
      subscription *s = host_subscription(a->host, i);
      for (size_t p = 0; all && p < sub_parts(s); p++) {
        const struct handler_spec *spec = sub_part_spec(s, p);
        if (spec->read != READ_RECLAIM) all = group_caught_up(a, spec->stream, spec->group);
      }
    }
    quiet_checks = all && host_quiet(a) ? quiet_checks + 1 : 0;
  }
}

static int app_settle(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop)
    settle_real(L, a);
  else
    world_settle(a->w);
  raise_new_errors(L, a);
  return 0;
}

static int app_advance(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop)
    return luaL_error(L,
                      "advance needs the in-memory broker: a real server's clock cannot be moved");
  lua_Number ms = luaL_checknumber(L, 2);
  luaL_argcheck(L, ms >= 0, 2, "cannot move the clock back");
  world_settle(a->w);
  clock_virtual_advance(a->w->clock, (uint64_t)ms);
  world_settle(a->w);
  raise_new_errors(L, a);
  return 0;
}

/* app:pause(ms): the process stops for ms (SIGSTOP, a paused VM, a stalled
 * loop): the clock jumps and nothing runs; what fell due runs late at the
 * next settle, which is left to the spec (so it can act "meanwhile", e.g.
 * start a second host, whose first commands then go before the late ones). */
static int app_pause(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop)
    return luaL_error(L, "pause needs the in-memory broker: a real server's clock cannot be moved");
  lua_Number ms = luaL_checknumber(L, 2);
  luaL_argcheck(L, ms >= 0, 2, "cannot move the clock back");
  world_settle(a->w);
  clock_virtual_jump(a->w->clock, (uint64_t)ms);
  return 0;
}

/* app:stall(ms): this host's process stops for ms while the others run
 * (SIGSTOP, a paused VM or a stuck loop on one machine): its timers that
 * fall due and what its server answers wait (clock_virtual_stall,
 * stall_broker.h) while the clock advances for everyone else; then they run
 * late, in order, and everything due settles. */
static int app_stall(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop)
    return luaL_error(L, "stall needs the in-memory broker: a real server's clock cannot be moved");
  lua_Number ms = luaL_checknumber(L, 2);
  luaL_argcheck(L, ms >= 0, 2, "cannot move the clock back");
  luaL_argcheck(L, a->host != NULL, 1, "the app has stopped");
  world_settle(a->w);
  clock_virtual_stall(a->clock, true);
  stall_broker_stall(a->b, true);
  clock_virtual_advance(a->w->clock, (uint64_t)ms);
  world_settle(a->w);
  clock_virtual_stall(a->clock, false);
  stall_broker_stall(a->b, false);
  world_settle(a->w);
  raise_new_errors(L, a);
  return 0;
}

/* app:metrics(): the host's metrics page (metrics.h; one registry for the
 * whole process: the hosts of one broker count into the same series). */
static int app_metrics(lua_State *L) {
  check_app(L);
  size_t len = 0;
  char *page = metrics_page(&len);
  if (page == NULL) return luaL_error(L, "out of memory");
  lua_pushlstring(L, page, len);
  free(page);
  return 1;
}

/* app:reload([force]): what a changed handler directory or SIGHUP does
 * (host_reload), then everything due settles. */
static int app_reload(lua_State *L) {
  struct app *a = check_app(L);
  host_reload(a->host, lua_toboolean(L, 2));
  if (a->w->loop)
    uv_run(a->w->loop, UV_RUN_NOWAIT);
  else
    world_settle(a->w);
  raise_new_errors(L, a);
  return 0;
}

/* app:reload_soon(): what a file event does (host_reload_soon: after 200 ms
 * of quiet on the clock); nothing settles. */
static int app_reload_soon(lua_State *L) {
  struct app *a = check_app(L);
  host_reload_soon(a->host);
  return 0;
}

static int app_now(lua_State *L) {
  struct app *a = check_app(L);
  lua_pushnumber(L, (lua_Number)clock_now(a->w->clock));
  return 1;
}

/* ---- commands ---- */

/* [-0, +1] the reply as Lua: strings, numbers, arrays; nil for nil */
static void push_reply(lua_State *L, const bk_reply *r) {
  luaL_checkstack(L, 4, "reply too deep");
  switch (r->type) {
    case BK_STRING:
    case BK_STATUS:
    case BK_ERROR: lua_pushlstring(L, r->str, r->len); break;
    case BK_INTEGER: lua_pushnumber(L, (lua_Number)r->integer); break;
    case BK_ARRAY:
      lua_createtable(L, (int)r->elements, 0);
      for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type == BK_NIL)
          lua_pushboolean(L, 0); /* a hole would end the array */
        else
          push_reply(L, r->element[i]);
        lua_rawseti(L, -2, (int)i + 1);
      }
      break;
    default: lua_pushnil(L);
  }
}

static void command_done(void *data, const bk_reply *r, const char *err) {
  struct waiter *w = data;
  struct app *a = w->a;
  if (a == NULL) {
    free(w);
    return;
  }
  lua_State *L = w->L;
  a->replied = true;
  if (r && r->type != BK_ERROR) {
    push_reply(L, r);
    a->nresults = 1;
  } else {
    lua_pushnil(L);
    if (r)
      lua_pushlstring(L, r->str, r->len);
    else
      lua_pushstring(L, err ? err : "no reply");
    a->nresults = 2;
  }
}

/* Sends the command at stack index first.. on conn of b, for app:command
 * and app:command_on. */
static int command_at(lua_State *L, struct app *a, broker *b, bk_conn *conn, int first) {
  int argc = lua_gettop(L) - first + 1;
  luaL_argcheck(L, argc >= 1, first, "a command name is needed");
  struct bk_args args;
  bk_args_init(&args);
  for (int i = first; i <= lua_gettop(L); i++) {
    size_t len;
    const char *s = luaL_checklstring(L, i, &len);
    bk_args_add(&args, s, len);
  }
  int top = lua_gettop(L);
  bool ok = roundtrip_on(L, a, b, conn, &args);
  bk_args_free(&args);
  if (!ok) {
    lua_settop(L, top);
    return luaL_error(L, "the command got no reply (not connected, or a blocking command)");
  }
  raise_new_errors(L, a);
  return a->nresults;
}

/* app:command(name, arg...) -> reply | nil, error; runs the clock to the reply */
static int app_command(lua_State *L) {
  struct app *a = check_app(L);
  return command_at(L, a, a->w->b, a->conn, 2);
}

/* ---- other servers (ls.redis.connect) ---- */

/* The server of w that url reaches, made on first use (NULL: out of
 * memory). */
static struct world_server *world_server(struct world *w, const struct redis_url *url) {
  for (size_t i = 0; i < w->nservers; i++)
    if (strcmp(w->servers[i].key, url->redacted) == 0) return &w->servers[i];
  struct world_server *v = realloc(w->servers, (w->nservers + 1) * sizeof *v);
  if (v == NULL) return NULL;
  w->servers = v;
  struct world_server *ws = &v[w->nservers];
  *ws = (struct world_server){.key = dups(url->redacted)};
  ws->b = w->loop ? broker_redis_new(w->loop, url) : broker_memory_new(w->clock, NULL);
  if (ws->b) ws->conn = bk_conn_open(ws->b, "spec", NULL, NULL);
  if (ws->key == NULL || ws->b == NULL || ws->conn == NULL) {
    if (ws->conn) bk_conn_close(ws->b, ws->conn);
    if (ws->b) broker_free(ws->b);
    free(ws->key);
    return NULL;
  }
  w->nservers++;
  return ws;
}

/* servers_backend.open of every host of a world: the world keeps them. */
static broker *open_world_server(void *data, const struct redis_url *url) {
  struct world_server *ws = world_server(data, url);
  return ws ? ws->b : NULL;
}

static struct world_server *check_server(lua_State *L, struct app *a) {
  struct redis_url url;
  char err[URL_TEXT_MAX + 128];
  if (url_parse(luaL_checkstring(L, 2), &url, err, sizeof err) != 0) luaL_error(L, "%s", err);
  struct world_server *ws = world_server(a->w, &url);
  if (ws == NULL) luaL_error(L, "out of memory");
  return ws;
}

static broker *up_b; /* conn_up's question */
static bk_conn *up_conn;
static bool conn_up(struct app *a) {
  (void)a;
  return bk_connected(up_b, up_conn);
}

/* app:command_on(url, name, arg...) -> reply | nil, error: on the server
 * ls.redis.connect(url) reaches. */
static int app_command_on(lua_State *L) {
  struct app *a = check_app(L);
  struct world_server *ws = check_server(L, a);
  broker *b = ws->b; /* ws may move while the loop runs (a handler connects) */
  bk_conn *conn = ws->conn;
  if (a->w->loop) { /* a real connection comes up in its own time */
    up_b = b;
    up_conn = conn;
    run_until(a, conn_up);
  } else {
    world_settle(a->w);
  }
  return command_at(L, a, b, conn, 3);
}

/* app:server_down(url, down): an outage of that in-memory server starts
 * (true) or ends (false), as broker_memory_set_down; everything settles. */
static int app_server_down(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop) return luaL_error(L, "server_down needs the in-memory broker");
  /* nil: the host's own server */
  broker *b = lua_isnil(L, 2) ? a->w->b : check_server(L, a)->b;
  broker_memory_set_down(b, lua_toboolean(L, 3));
  world_settle(a->w);
  raise_new_errors(L, a);
  return 0;
}

/* app:slow(command, ms [, url]): each such command on the in-memory server
 * (the host's, or the one ls.redis.connect(url) reaches) is answered ms
 * late from now on, as broker_memory_set_slow; nil or 0 ms: none is. */
static int app_slow(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop) return luaL_error(L, "slow needs the in-memory broker");
  const char *command = luaL_optstring(L, 2, NULL);
  lua_Number ms = luaL_optnumber(L, 3, 0);
  broker *b = a->w->b;
  if (!lua_isnoneornil(L, 4)) {
    lua_pushvalue(L, 4);
    lua_replace(L, 2); /* check_server reads the url there */
    b = check_server(L, a)->b;
  }
  broker_memory_set_slow(b, command, ms > 0 ? (uint64_t)ms : 0);
  return 0;
}

/* ---- HTTP: the stubs answer ---- */

/* [-0, +1] req as the table opts.http_answer gets: {method, url, headers =
 * {lower-case name = value}, body} (a name given twice: values joined with
 * ", ", as ls.http does for responses). */
static void push_request(lua_State *L, const struct http_request *req) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, req->method);
  lua_setfield(L, -2, "method");
  lua_pushstring(L, req->url);
  lua_setfield(L, -2, "url");
  lua_createtable(L, 0, (int)req->nheaders);
  for (size_t i = 0; i < req->nheaders; i++) {
    const char *line = req->headers[i], *colon = strchr(line, ':');
    if (colon == NULL || colon == line) continue; /* http_request_check let it through: "Name;" */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *k = line; k < colon; k++) luaL_addchar(&b, (char)tolower((unsigned char)*k));
    luaL_pushresult(&b);
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    lua_pushvalue(L, -1);
    lua_rawget(L, -3);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_pushstring(L, v);
    } else {
      lua_pushliteral(L, ", ");
      lua_pushstring(L, v);
      lua_concat(L, 3);
    }
    lua_rawset(L, -3);
  }
  lua_setfield(L, -2, "headers");
  if (req->body) {
    lua_pushlstring(L, req->body, req->body_len);
    lua_setfield(L, -2, "body");
  }
}

/* [-0, +0] out from the answer table at the top of L: {status, headers =
 * {name = value}, body, delay (ms), error}, checked by testing.lua. */
static void read_answer(lua_State *L, struct http_stub_answer *out) {
  lua_getfield(L, -1, "error");
  if (lua_isstring(L, -1)) {
    out->kind = HTTP_STUB_FAIL;
    out->error = dups(lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  lua_getfield(L, -1, "delay");
  lua_Number delay = lua_tonumber(L, -1);
  out->delay_ms = delay > 0 ? (uint64_t)delay : 0;
  lua_pop(L, 1);
  if (out->kind == HTTP_STUB_FAIL) return;
  out->kind = HTTP_STUB_RESPOND;
  lua_getfield(L, -1, "status");
  out->status = lua_isnumber(L, -1) ? (long)lua_tonumber(L, -1) : 200;
  lua_pop(L, 1);
  lua_getfield(L, -1, "body");
  size_t len = 0;
  const char *body = lua_tolstring(L, -1, &len);
  if (body) {
    out->body = dupn(body, len);
    out->body_len = len;
  }
  lua_pop(L, 1);
  lua_getfield(L, -1, "headers");
  if (lua_istable(L, -1)) {
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
      if (lua_type(L, -2) == LUA_TSTRING && k && v) {
        size_t add = strlen(k) + strlen(v) + 4;
        char *h = realloc(out->headers, n + add + 1);
        if (h) {
          out->headers = h;
          n += (size_t)snprintf(h + n, add + 1, "%s: %s\r\n", k, v);
        }
      }
      lua_pop(L, 1);
    }
    out->headers_len = n;
  }
  lua_pop(L, 1);
}

/* http_stub's answer function: opts.http_answer(req) in the spec's state.
 * nil: no stub matches (a fault, or with http_passthrough a real request);
 * a table: the answer; an error: a fault naming it. */
static void world_http_answer(void *data, const struct http_request *req,
                              struct http_stub_answer *out) {
  struct world *w = data;
  lua_State *L = w->L;
  out->kind = HTTP_STUB_FAULT;
  if (L == NULL || w->http_answer_ref == LUA_NOREF) {
    out->error = dups("no stub matches this request (declare one with app:http_stub)");
    return;
  }
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 8)) {
    out->error = dups("the spec's Lua stack is full");
    return;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, w->http_answer_ref);
  push_request(L, req);
  if (lua_pcall(L, 1, 1, 0) != 0) {
    const char *why = lua_tostring(L, -1);
    char text[1024];
    snprintf(text, sizeof text, "the stub failed: %s",
             why ? why : "(an error that is not a string)");
    out->error = dups(text);
  } else if (lua_istable(L, -1)) {
    read_answer(L, out);
  } else if (w->http_pass) {
    out->kind = HTTP_STUB_PASS;
  } else {
    out->error = dups("no stub matches this request (declare one with app:http_stub)");
  }
  lua_settop(L, top);
}

/* app:http_passthrough(on): with a real server, requests no stub matches go
 * to real HTTP servers (libcurl on the world's loop) instead of failing. */
static int app_http_passthrough(lua_State *L) {
  struct app *a = check_app(L);
  if (a->w->loop == NULL)
    return luaL_error(L,
                      "http_passthrough needs an app on a real server: testing.app(dir, "
                      "{redis = URL}) (in memory, every request needs a stub)");
  bool on = lua_toboolean(L, 2);
  if (on && !a->w->http_pass) {
    char err[256];
    http_client *real = http_curl_new(a->w->loop, &(struct http_curl_options){0}, err, sizeof err);
    if (real == NULL) return luaL_error(L, "%s", err);
    http_stub_pass_to(a->w->http, real);
  }
  a->w->http_pass = on;
  return 0;
}

/* ---- what happened ---- */

/* app:deliveries([handler]) */
static int app_deliveries(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  const char *only = luaL_optstring(L, 2, NULL);
  lua_newtable(L);
  int n = 0;
  for (size_t i = 0; i < a->ndeliveries; i++) {
    struct delivery *d = &a->deliveries[i];
    if (only && strcmp(only, d->handler) != 0) continue;
    lua_createtable(L, 0, 7);
    lua_pushstring(L, d->handler);
    lua_setfield(L, -2, "handler");
    lua_pushstring(L, d->id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, d->outcome);
    lua_setfield(L, -2, "outcome");
    if (d->reason) {
      lua_pushstring(L, d->reason);
      lua_setfield(L, -2, "reason");
    }
    if (d->error) {
      lua_pushstring(L, d->error);
      lua_setfield(L, -2, "error");
    }
    if (d->version) {
      lua_pushstring(L, d->version);
      lua_setfield(L, -2, "version");
    }
    lua_pushnumber(L, (lua_Number)d->deliveries);
    lua_setfield(L, -2, "deliveries");
    lua_pushnumber(L, (lua_Number)d->idle_ms);
    lua_setfield(L, -2, "idle_ms");
    lua_createtable(L, (int)d->nfields, 0);
    for (size_t f = 0; f < d->nfields; f++) {
      lua_pushlstring(L, d->field[f], d->field_len[f]);
      lua_rawseti(L, -2, (int)f + 1);
    }
    lua_setfield(L, -2, "fields");
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

/* The lines of every host of the app's world. */
static int app_logs(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  lua_createtable(L, (int)a->w->nlogs, 0);
  for (size_t i = 0; i < a->w->nlogs; i++) {
    lua_pushstring(L, a->w->logs[i]);
    lua_rawseti(L, -2, (int)i + 1);
  }
  return 1;
}

/* app:ready() -> true, or false and why: what /readyz would answer. */
static int app_ready(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  char why[1024];
  bool ok = a->host != NULL && host_is_ready(a->host, why, sizeof why);
  lua_pushboolean(L, ok);
  if (ok) return 1;
  lua_pushstring(L, a->host ? why : "stopped");
  return 2;
}

/* ---- life cycle ---- */

static void host_stopped(void *data) { ((struct app *)data)->stopped = true; }
static bool is_stopped(struct app *a) { return a->stopped; }

static bool host_ready(struct app *a) {
  if (a->stopped) return true; /* the version gate said no */
  for (size_t i = 0; i < host_subscriptions(a->host); i++) {
    subscription *s = host_subscription(a->host, i);
    if (s == NULL || !sub_reading(s)) return false;
  }
  return true;
}

static void app_release(struct app *a) {
  if (a->host) {
    if (!a->stopped) {
      /* As at a shutdown deadline: handlers still waiting on the clock
       * (which does not move by itself here) are abandoned, their entries
       * left pending; everything finished is written first. */
      if (a->w->loop) {
        host_stop_within(a->host, REAL_WAIT_MS);
        run_until(a, is_stopped);
      } else {
        host_stop_within(a->host, 0);
        world_settle(a->w);
      }
    }
    host_free(a->host);
    a->host = NULL;
  }
  if (a->b && a->b != a->w->b) broker_free(a->b); /* the view goes with the world's clock */
  a->b = NULL;
  if (a->conn) {
    bk_conn_close(a->w->b, a->conn);
    a->conn = NULL;
  }
  a->stopped = true; /* the world stays until collected: its log can still be read */
}

static int app_stop(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  if (a->w) {
    world_log_here(a->w);
    a->w->L = L;
  }
  app_release(a);
  return 0;
}

static int app_gc(lua_State *L) {
  struct app *a = luaL_checkudata(L, 1, APP_MT);
  struct world *w = a->w;
  struct log_route prev = log_route_save();
  if (w) {
    world_log_here(w);
    w->L = L;
  }
  app_release(a);
  const struct world *gone = w && w->apps == 1 ? w : NULL;
  if (w) world_unref(w, L);
  a->w = NULL;
  log_route_restore(prev, gone);
  for (size_t i = 0; i < a->ndeliveries; i++) {
    struct delivery *d = &a->deliveries[i];
    for (size_t f = 0; f < d->nfields; f++) free(d->field[f]);
    free(d->field);
    free(d->field_len);
    free(d->handler);
    free(d->id);
    free(d->outcome);
    free(d->reason);
    free(d->error);
    free(d->version);
  }
  free(a->deliveries);
  return 0;
}

static const char *opt_string(lua_State *L, int idx, const char *name) {
  if (lua_isnoneornil(L, idx)) return NULL;
  lua_getfield(L, idx, name);
  const char *s = lua_tostring(L, -1); /* anchored by the options table */
  lua_pop(L, 1);
  return s;
}

/* core.app(dir [, {version =, consumer =, instance =, hostname =,
 *                  handler_errors = "raise" | "record",
 *                  redis = URL, with = app,
 *                  postgres = CONNINFO, pg_once_table = NAME, pg_timeout = ms}]) */
static int core_app(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  const char *redis = opt_string(L, 2, "redis");
  const char *version = opt_string(L, 2, "version");
  const char *consumer = opt_string(L, 2, "consumer");
  const char *hostname = opt_string(L, 2, "hostname");
  int instance = -1;
  if (!lua_isnoneornil(L, 2)) {
    lua_getfield(L, 2, "instance");
    if (!lua_isnil(L, -1)) instance = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  const char *errors = opt_string(L, 2, "handler_errors");
  const char *postgres = opt_string(L, 2, "postgres");
  const char *once_table = opt_string(L, 2, "pg_once_table");
  lua_Number pg_timeout = 0;
  if (!lua_isnoneornil(L, 2)) {
    lua_getfield(L, 2, "pg_timeout");
    if (!lua_isnil(L, -1)) pg_timeout = luaL_checknumber(L, -1);
    lua_pop(L, 1);
  }
  struct app *with = NULL;
  if (!lua_isnoneornil(L, 2)) {
    lua_getfield(L, 2, "with");
    if (!lua_isnil(L, -1)) {
      with = luaL_testudata(L, -1, APP_MT);
      if (with == NULL || with->w == NULL) return luaL_argerror(L, 2, "with must be a running app");
    }
    lua_pop(L, 1);
  }
  if (errors && strcmp(errors, "raise") && strcmp(errors, "record"))
    return luaL_argerror(L, 2, "handler_errors must be \"raise\" or \"record\"");
  if (version && bk_version_parse(version, strlen(version)) < 0)
    return luaL_argerror(L, 2, "version must look like \"8.4.0\"");

  struct app *a = lua_newuserdata(L, sizeof *a);
  memset(a, 0, sizeof *a);
  luaL_getmetatable(L, APP_MT);
  lua_setmetatable(L, -2);
  a->raise_errors = errors == NULL || strcmp(errors, "raise") == 0;
  if (with) {
    if (redis || version || postgres)
      return luaL_argerror(L, 2, "with shares another app's broker: no redis, version or postgres");
    a->w = with->w;
    a->w->apps++;
  } else {
    a->w = calloc(1, sizeof *a->w);
    if (a->w == NULL) return luaL_error(L, "out of memory");
    a->w->apps = 1;
    worlds++;
    a->w->http_answer_ref = LUA_NOREF;
    if (!lua_isnoneornil(L, 2)) {
      lua_getfield(L, 2, "http_answer");
      if (lua_isfunction(L, -1))
        a->w->http_answer_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      else
        lua_pop(L, 1);
    }
    if (redis) {
      struct redis_url url;
      char err[512];
      if (version)
        return luaL_argerror(L, 2, "version applies to the in-memory broker, not with redis");
      if (url_parse(redis, &url, err, sizeof err) != 0) return luaL_error(L, "%s", err);
      a->w->loop = malloc(sizeof *a->w->loop);
      if (a->w->loop == NULL || uv_loop_init(a->w->loop) != 0)
        return luaL_error(L, "cannot start a loop");
      a->w->clock = clock_uv_new(a->w->loop);
      a->w->b = a->w->clock ? broker_redis_new(a->w->loop, &url) : NULL;
    } else {
      a->w->clock = clock_virtual_new(WALL_START_MS);
      a->w->b = a->w->clock ? broker_memory_new(a->w->clock, version) : NULL;
    }
    if (a->w->b == NULL) return luaL_error(L, "out of memory");
    a->w->http = http_stub_new(a->w->clock, world_http_answer, a->w);
    if (a->w->http == NULL) return luaL_error(L, "out of memory");
    if (postgres) {
      a->w->pg_loop = a->w->loop;
      if (a->w->pg_loop == NULL) {
        a->w->pg_loop = malloc(sizeof *a->w->pg_loop);
        if (a->w->pg_loop == NULL || uv_loop_init(a->w->pg_loop) != 0) {
          free(a->w->pg_loop);
          a->w->pg_loop = NULL;
          return luaL_error(L, "cannot start a loop");
        }
      }
      char err[512];
      struct pg_options po = {
          .conninfo = postgres, .size = 4, .timeout_ms = pg_timeout > 0 ? (uint64_t)pg_timeout : 0};
      a->w->pg = pg_pool_new(a->w->pg_loop, &po, err, sizeof err);
      if (a->w->pg == NULL) return luaL_error(L, "postgres: %s", err);
      if (once_table && (a->w->pg_once_table = dups(once_table)) == NULL)
        return luaL_error(L, "out of memory");
    }
  }
  world_log_here(a->w);
  a->w->L = L;

  char *problems = NULL;
  /* Each app is a process of its own, on a machine of its own: a name
   * another app holds is waited for as one held elsewhere. */
  char machine[64];
  snprintf(machine, sizeof machine, "testing/app-%p", (void *)a);
  struct host_names names = {
      .consumer = consumer, .instance = instance, .hostname = hostname, .machine = machine};
  if (a->w->loop) {
    a->clock = a->w->clock;
    a->b = a->w->b;
  } else {
    a->clock = clock_virtual_view(a->w->clock);
    a->b = a->clock ? stall_broker_new(a->w->b, a->clock) : NULL;
    if (a->b == NULL) return luaL_error(L, "out of memory");
  }
  a->host = host_new(dir, a->b, a->clock, &names, 0, NULL, &problems);
  if (a->host == NULL) {
    lua_pushstring(L, problems ? problems : "cannot load the handlers");
    free(problems);
    app_release(a);
    return lua_error(L);
  }
  host_on_delivery(a->host, record, a);
  host_set_http(a->host, a->w->http, 0, 0);
  host_set_pg(a->host, a->w->pg,
              "no PostgreSQL in this spec: pass {postgres = URL} to testing.app for a real one "
              "(docs/testing.md)",
              a->w->pg_once_table);
  host_set_servers(a->host, &(struct servers_backend){open_world_server, NULL, a->w});
  a->conn = bk_conn_open(a->w->b, "spec", NULL, NULL);
  host_start(a->host, host_stopped, a);
  if (a->w->loop) {
    if (!run_until(a, host_ready)) {
      app_release(a);
      return luaL_error(L, "the host did not start reading from %s within %d ms", redis,
                        REAL_WAIT_MS);
    }
  } else {
    world_settle(a->w);
  }
  const char *why = host_failed(a->host);
  if (why) {
    lua_pushstring(L, why);
    app_release(a);
    return lua_error(L);
  }
  return 1;
}

/* core.pause_key(stream, group): a group's pause key (pause.h), for
 * app:pause_group. */
static int core_pause_key(lua_State *L) {
  char *k = flow_key("pause", luaL_checkstring(L, 1), luaL_checkstring(L, 2), NULL);
  if (k == NULL) return luaL_error(L, "out of memory");
  lua_pushstring(L, k);
  free(k);
  return 1;
}

int luaopen_luastream_testing(lua_State *L) {
  static const luaL_Reg methods[] = {{"settle", app_settle},
                                     {"advance", app_advance},
                                     {"pause", app_pause},
                                     {"stall", app_stall},
                                     {"metrics", app_metrics},
                                     {"now", app_now},
                                     {"command", app_command},
                                     {"deliveries", app_deliveries},
                                     {"logs", app_logs},
                                     {"stop", app_stop},
                                     {"reload", app_reload},
                                     {"reload_soon", app_reload_soon},
                                     {"ready", app_ready},
                                     {"command_on", app_command_on},
                                     {"server_down", app_server_down},
                                     {"slow", app_slow},
                                     {"http_passthrough", app_http_passthrough},
                                     {NULL, NULL}};
  luaL_newmetatable(L, APP_MT);
  lua_newtable(L);
  luaL_register(L, NULL, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, app_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, core_app);
  lua_setfield(L, -2, "app");
  lua_pushcfunction(L, json_decode_lua);
  lua_setfield(L, -2, "json_decode");
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
  lua_pushcfunction(L, core_pause_key);
  lua_setfield(L, -2, "pause_key");
  lua_pushstring(L, SCRIPT_PAUSE); /* what `luastream pause` and `resume` send */
  lua_setfield(L, -2, "pause_script");
  core_set_wire_names(L, -1); /* headers and reasons, for lua/luastream.lua */
  /* luastream.json's encoder in the spec's own state, as in a host's. */
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, luaopen_luastream_json_encode);
    lua_setfield(L, -2, "luastream.json_encode");
  }
  lua_pop(L, 2);
  return 1;
}
