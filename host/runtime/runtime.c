/* runtime: handler files in Lua states, entries in coroutines.
 *
 * Loading: a fresh lua_State per file, luastream's Lua library requirable
 * (embedded_lua.h), the file compiled as text only (no precompiled bytecode) and
 * run under a protected call, its returned table checked by
 * luastream.handler.validate. A handler file is code with the host's rights, so
 * loading contains what it can: os.exit raises an error (at load and in
 * handlers), and the load runs with the JIT off under a count hook that ends
 * it at a deadline (LuaJIT checks hooks only outside compiled traces).
 * Memory: the state's allocator (lmem.c) holds it to the file's `memory`
 * (the top level to RT_MEMORY_DEFAULT); a state that went past it is
 * replaced by a fresh one made from the source kept since the load, so the
 * handler goes on in the version it was running whatever the file holds now.
 * Running: the handler's jobs (jobs.c) run entries in coroutines of its
 * state, with luastream.core (corelib.c) as their host functions; here, the
 * generations of a file (hot reload) and when a state closes. */
#include <lauxlib.h>
#include <lua.h>
#include <errno.h>
#include <fcntl.h>
#include <luajit.h>
#include <lualib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "corelib.h"
#include "embedded_lua.h"
#include "handler_name.h"
#include "jobs.h"
#include "json_decode.h"
#include "json_encode.h"
#include "trust.h"
#include "lmem.h"
#include "log.h"
#include "runtime.h"
#include "schema.h"
#include "watchdog.h"

struct handler {
  lua_State *L;
  struct handler_spec spec;
  const struct rt_env *env;     /* owned by the host; NULL when only validating */
  struct jobs jobs;             /* the entries running on L */
  struct core core;             /* what luastream.core works on */
  char version[RT_VERSION_LEN]; /* short content hash of the file (handler_version) */
  struct handler *older;        /* generations this one replaced that still run jobs */
  struct handler *newer;        /* the generation that replaced this one, NULL for the newest */
  bool jit_off;                 /* the file called jit.off() at load: the engine stays off */
  char *source;                 /* the file's bytes as loaded: a fresh state is made of them */
  size_t source_len;
};

/* The registry slot of the validated spec table, from load to bind. */
static const char spec_key;

/* ---- protected calls ---- */

/* Message handler: appends a traceback to string errors.  [-1, +1] */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Calls the function under nargs arguments with a traceback handler.
 * [-(nargs+1), +nresults] on success, [-(nargs+1), +1] (the message) on error. */
static int pcall_traced(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return rc;
}

/* An error outside any protected call: the state cannot go on, and the
 * process ends (status 70) rather than running on with a handler that does
 * nothing. */
static int panic(lua_State *L) { lmem_fatal(lmem_of(L)->name, "lua panic", lua_tostring(L, -1)); }

/* ---- loading ---- */

/* How the validated spec table (luastream.handler's validate, which owns the
 * fields and their defaults) maps onto struct handler_spec. No defaults here:
 * a field validate always fills must be there, and a key this list does not
 * name fails the load, so Lua and C cannot drift apart unseen. */
enum spec_kind {
  SPEC_STRING, /* char *: the string, NULL when absent */
  SPEC_INT,    /* int: a number, always set */
  SPEC_SIZE,   /* size_t: a number, always set */
  SPEC_BOOL,   /* bool: a boolean, always set */
  SPEC_READ,   /* enum read_mode: "new", "claiming" or "reclaim", always set */
  SPEC_MS,     /* int64_t: a number of ms, -1 when absent */
  SPEC_CAP,    /* int: a number, 0 when absent (no cap) */
  SPEC_RATE,   /* struct spec_rate: {interval = us, burst = n}, zeros when absent */
  SPEC_SCHEMA, /* struct schema *: compiled from the table (schema.h), NULL when absent */
  SPEC_LUA,    /* stays in Lua (handle) */
};

static const struct spec_field {
  const char *name;
  enum spec_kind kind;
  size_t offset;
  /* Not named by handler_spec_diff, its change restarting nothing:
   * start_at applies once, when the host starts (it moves a group's cursor
   * at start-up only); memory is the state's, and a reload makes a new
   * state with the new limit. */
  bool no_restart;
} spec_fields[] = {
#define F(name, kind) \
  { #name, kind, offsetof(struct handler_spec, name), false }
    F(stream, SPEC_STRING),
    F(group, SPEC_STRING),
    F(read, SPEC_READ),
    {"min_idle", SPEC_MS, offsetof(struct handler_spec, min_idle_ms), false},
    /* read by the heartbeat at each beat (heartbeat_set_spec) */
    {"max_run", SPEC_MS, offsetof(struct handler_spec, max_run_ms), true},
    F(consumer, SPEC_STRING),
    F(start, SPEC_STRING),
    {"start_at", SPEC_STRING, offsetof(struct handler_spec, start_at), true},
    F(workers, SPEC_INT),
    F(max_in_flight, SPEC_CAP),
    F(max_in_flight_per_key, SPEC_CAP),
    F(by_key, SPEC_BOOL),
    F(batch, SPEC_INT),
    F(batch_max, SPEC_CAP),
    {"batch_wait", SPEC_MS, offsetof(struct handler_spec, batch_wait_ms), false},
    F(claim_fallback, SPEC_BOOL),
    F(reply_to, SPEC_STRING),
    F(dead_letter, SPEC_STRING),
    F(max_deliveries, SPEC_CAP),
    F(max_body, SPEC_SIZE),
    F(trim, SPEC_BOOL),
    F(trim_max_len, SPEC_CAP),
    F(reply_max_len, SPEC_CAP),
    F(dead_letter_max_len, SPEC_CAP),
    F(partitions, SPEC_CAP),
    {"memory", SPEC_SIZE, offsetof(struct handler_spec, memory), true},
    F(rate, SPEC_RATE),
    F(rate_per_key, SPEC_RATE),
    /* read at each use (pause.h, breaker.h) */
    {"breaker_failures", SPEC_CAP, offsetof(struct handler_spec, breaker_failures), true},
    {"breaker_within", SPEC_MS, offsetof(struct handler_spec, breaker_within_ms), true},
    {"breaker_pause", SPEC_MS, offsetof(struct handler_spec, breaker_pause_ms), true},
    {"breaker_max_pause", SPEC_MS, offsetof(struct handler_spec, breaker_max_pause_ms), true},
    {"every", SPEC_MS, offsetof(struct handler_spec, every_ms), false},
    F(cron, SPEC_STRING),
    F(tz, SPEC_STRING),
    F(catch_up, SPEC_BOOL),
    {"name", SPEC_STRING, offsetof(struct handler_spec, tick_name), false},
    /* each handler's own, read as it runs an entry: a reload brings its own */
    {"schema", SPEC_SCHEMA, offsetof(struct handler_spec, schema), true},
    {"reply_schema", SPEC_SCHEMA, offsetof(struct handler_spec, reply_schema), true},
#undef F
    {"handle", SPEC_LUA, 0, false},
    {"tick", SPEC_LUA, 0, false},
    {"handle_batch", SPEC_LUA, 0, false},
};

/* The Lua name of f (a duration's member holds ms: min_idle_ms). */
static const char *spec_name(const struct spec_field *f) { return f->name; }

/* A rate field as validate leaves it (of type t, on top of the stack):
 * {interval = us per permit, burst = permits}, or nil.  [-0, +0] */
static int read_rate(lua_State *L, int t, struct spec_rate *r) {
  *r = (struct spec_rate){0, 0};
  if (t == LUA_TNIL) return 0;
  if (t != LUA_TTABLE) return -1;
  lua_getfield(L, -1, "interval");
  lua_getfield(L, -2, "burst");
  int rc = lua_type(L, -2) == LUA_TNUMBER && lua_type(L, -1) == LUA_TNUMBER ? 0 : -1;
  r->interval_us = lua_tonumber(L, -2);
  r->burst = lua_tonumber(L, -1);
  lua_pop(L, 2);
  return rc != 0 || !(r->interval_us > 0) || !(r->burst >= 1) ? -1 : 0;
}

/* Copies field f of the table at idx into s. Returns 0, -1 when the value is
 * not what validate makes, -2 when out of memory.  [-0, +0] */
static int read_field(lua_State *L, int idx, const struct spec_field *f, struct handler_spec *s) {
  void *at = (char *)s + f->offset;
  lua_getfield(L, idx, spec_name(f));
  int t = lua_type(L, -1), rc = 0;
  switch (f->kind) {
    case SPEC_STRING:
      *(char **)at = NULL;
      if (t == LUA_TSTRING && (*(char **)at = strdup(lua_tostring(L, -1))) == NULL)
        rc = -2;
      else if (t != LUA_TSTRING && t != LUA_TNIL)
        rc = -1;
      break;
    case SPEC_INT:
    case SPEC_CAP:
      if (t == LUA_TNUMBER)
        *(int *)at = (int)lua_tonumber(L, -1);
      else if (f->kind == SPEC_CAP && t == LUA_TNIL)
        *(int *)at = 0;
      else
        rc = -1;
      break;
    case SPEC_SIZE:
      if (t == LUA_TNUMBER)
        *(size_t *)at = (size_t)lua_tonumber(L, -1);
      else
        rc = -1;
      break;
    case SPEC_BOOL:
      if (t == LUA_TBOOLEAN)
        *(bool *)at = lua_toboolean(L, -1);
      else
        rc = -1;
      break;
    case SPEC_MS:
      if (t == LUA_TNUMBER)
        *(int64_t *)at = (int64_t)lua_tonumber(L, -1);
      else if (t == LUA_TNIL)
        *(int64_t *)at = -1;
      else
        rc = -1;
      break;
    case SPEC_READ: {
      const char *v = t == LUA_TSTRING ? lua_tostring(L, -1) : "";
      int m = 0;
      while (m < READ_MODES && strcmp(v, rt_read_mode_name(m)) != 0) m++;
      if (m < READ_MODES)
        *(enum read_mode *)at = (enum read_mode)m;
      else
        rc = -1;
      break;
    }
    case SPEC_RATE: rc = read_rate(L, t, at); break;
    case SPEC_SCHEMA:
      *(struct schema **)at = NULL;
      if (t == LUA_TTABLE) {
        struct schema_error why;
        if ((*(struct schema **)at = schema_compile(L, -1, &why)) == NULL) rc = -1;
      } else if (t != LUA_TNIL) {
        rc = -1;
      }
      break;
    case SPEC_LUA: break;
  }
  lua_pop(L, 1);
  return rc;
}

#define NSPEC_FIELDS (sizeof spec_fields / sizeof spec_fields[0])

/* Whether field f holds the same value in a and b. */
static bool same_field(const struct spec_field *f, const struct handler_spec *a,
                       const struct handler_spec *b) {
  const void *x = (const char *)a + f->offset, *y = (const char *)b + f->offset;
  switch (f->kind) {
    case SPEC_STRING: {
      const char *p = *(char *const *)x, *q = *(char *const *)y;
      return p == q || (p && q && strcmp(p, q) == 0);
    }
    case SPEC_INT:
    case SPEC_CAP: return *(const int *)x == *(const int *)y;
    case SPEC_SIZE: return *(const size_t *)x == *(const size_t *)y;
    case SPEC_BOOL: return *(const bool *)x == *(const bool *)y;
    case SPEC_MS: return *(const int64_t *)x == *(const int64_t *)y;
    case SPEC_READ: return *(const enum read_mode *)x == *(const enum read_mode *)y;
    case SPEC_RATE: {
      const struct spec_rate *p = x, *q = y;
      return p->interval_us == q->interval_us && p->burst == q->burst;
    }
    case SPEC_SCHEMA: /* never compared: no_restart */
    case SPEC_LUA: break;
  }
  return true;
}

const char *handler_spec_diff(const struct handler_spec *a, const struct handler_spec *b, char *out,
                              size_t len) {
  size_t at = 0;
  if (len) out[0] = '\0';
  for (size_t i = 0; i < NSPEC_FIELDS && len; i++) {
    const struct spec_field *f = &spec_fields[i];
    if (f->no_restart || same_field(f, a, b)) continue;
    int n = snprintf(out + at, len - at, "%s%s", at ? "," : "", spec_name(f));
    if (n < 0 || (size_t)n >= len - at) {
      out[at] = '\0'; /* no part of a name */
      break;
    }
    at += (size_t)n;
  }
  return out;
}

/* Copies the validated spec table at idx into h->spec. Returns 0, or -1 with
 * a message in err.  [-0, +0] */
static int read_spec(lua_State *L, int idx, struct handler *h, char *err, size_t errlen) {
  struct handler_spec *s = &h->spec;
  for (size_t i = 0; i < NSPEC_FIELDS; i++) {
    int rc = read_field(L, idx, &spec_fields[i], s);
    if (rc == -2) {
      snprintf(err, errlen, "%s: out of memory", s->path);
      return -1;
    }
    if (rc != 0) {
      snprintf(err, errlen,
               "%s: the host cannot read field '%s' of the validated spec "
               "(luastream.handler and the host disagree)",
               s->path, spec_name(&spec_fields[i]));
      return -1;
    }
  }
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    size_t i = 0;
    while (i < NSPEC_FIELDS && strcmp(spec_name(&spec_fields[i]), key) != 0) i++;
    if (i == NSPEC_FIELDS) {
      snprintf(err, errlen,
               "%s: the validated spec has a field the host does not know: '%s' "
               "(luastream.handler and the host disagree)",
               s->path, key);
      lua_pop(L, 1);
      return -1;
    }
  }
  if (s->start && (spec_scheduled(s) || (s->stream && s->group))) return 0;
  snprintf(err, errlen, "%s: the validated spec lacks stream, group or start", s->path);
  return -1;
}

/* The bytes of the open file fd: a NUL-terminated heap copy in *buf, its
 * length in *len. Returns 0, or -1 with errno set. */
static int read_fd(int fd, char **buf, size_t *len) {
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  while (b) {
    ssize_t got = read(fd, b + n, cap - n - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int saved = errno;
      free(b);
      errno = saved;
      return -1;
    }
    if (got == 0) break;
    n += (size_t)got;
    if (n < cap - 1) continue;
    char *grown = realloc(b, cap *= 2);
    if (grown == NULL) {
      free(b);
      errno = ENOMEM;
    }
    b = grown;
  }
  if (b == NULL) return -1;
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
}

/* The file's bytes (read_fd), after trust_check_fd on the descriptor they
 * are read from: what was checked is what loads. Returns 0; -1 with errno
 * set; -2 with err when the check refuses the file. */
static int read_file(const char *path, const struct trust *trust, char **buf, size_t *len,
                     char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (trust_check_fd(trust, path, fd, err, errlen) != 0) {
    close(fd);
    return -2;
  }
  int rc = read_fd(fd, buf, len);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc;
}

/* require's searcher for Lua modules, in place of Lua's own: the same
 * templates of package.path, but each file is read through read_file, so the
 * trust check (trust.h) sees the descriptor the module is compiled from.
 * [-1, +1] name -> chunk, or the places looked at */
static int search_module(lua_State *L) {
  const struct handler *h = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_gsub(L, luaL_checkstring(L, 1), ".", "/"); /* 2 */
  lua_getglobal(L, "package");                                       /* 3 */
  lua_getfield(L, 3, "path");                                        /* 4 */
  lua_pushliteral(L, "");                                            /* 5: the places tried */
  const char *templates = lua_tostring(L, 4);
  for (const char *t = templates ? templates : ""; *t;) {
    const char *end = strchr(t, ';');
    size_t n = end ? (size_t)(end - t) : strlen(t);
    lua_pushlstring(L, t, n);
    t += end ? n + 1 : n;
    const char *path = luaL_gsub(L, lua_tostring(L, -1), "?", name);
    char *buf = NULL, err[1024];
    size_t len = 0;
    int rc =
        n == 0 ? -1 : read_file(path, h->env ? h->env->trust : NULL, &buf, &len, err, sizeof err);
    if (rc == -2) { /* at the line of the require, wherever it is */
      int where = 0;
      for (int level = 1; level < 16 && !where; level++) {
        luaL_where(L, level);
        where = lua_objlen(L, -1) > 0;
        if (!where) lua_pop(L, 1);
      }
      lua_pushfstring(L, "module '%s' not loaded: %s", lua_tostring(L, 1), err);
      if (where) lua_concat(L, 2);
      return lua_error(L);
    }
    if (rc != 0) {
      if (n) {
        lua_pushfstring(L, "%s\n\tno file '%s'", lua_tostring(L, 5), path);
        lua_replace(L, 5);
      }
      lua_settop(L, 5);
      continue;
    }
    lua_pushfstring(L, "@%s", path);
    int bad = luaL_loadbuffer(L, buf, len, lua_tostring(L, -1));
    free(buf);
    if (bad)
      return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", lua_tostring(L, 1),
                        path, lua_tostring(L, -1));
    return 1;
  }
  return 1;
}

/* Makes luastream's Lua library requirable (embedded_lua.h); Lua modules
 * are found in the handler's own folder only (search_module), never
 * relative to the working directory; C modules only at the absolute places
 * of package.cpath (no ./?.so).  [-0, +0] */
static void set_lua_path(lua_State *L, struct handler *h) {
  const char *handler_path = h->spec.path;
  lua_getglobal(L, "package");
  if (handler_path) {
    const char *slash = strrchr(handler_path, '/');
    if (slash)
      lua_pushlstring(L, handler_path, (size_t)(slash - handler_path)); /* no %.*s in Lua */
    else
      lua_pushliteral(L, ".");
    lua_pushliteral(L, "/?.lua");
    lua_concat(L, 2);
  } else {
    lua_pushliteral(L, "");
  }
  lua_setfield(L, -2, "path");
  lua_getfield(L, -1, "cpath");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char *cpath = lua_tostring(L, -1);
  for (const char *t = cpath ? cpath : ""; *t;) {
    const char *end = strchr(t, ';');
    size_t n = end ? (size_t)(end - t) : strlen(t);
    if (t[0] == '/') {
      luaL_addlstring(&b, t, n);
      luaL_addchar(&b, ';');
    }
    t += end ? n + 1 : n;
  }
  luaL_pushresult(&b);
  lua_setfield(L, -3, "cpath");
  lua_pop(L, 1);
  lua_getfield(L, -1, "loaders");
  lua_pushlightuserdata(L, h);
  lua_pushcclosure(L, search_module, 1);
  lua_rawseti(L, -2, 2); /* Lua's own file searcher */
  lua_pop(L, 2);
  embedded_lua_open(L);
}

static int preload_core(lua_State *L) {
  struct handler *h = lua_touserdata(L, lua_upvalueindex(1));
  return core_open(L, &h->core);
}

/* ---- containment ---- */

/* os.exit, for handler states: the host's exit is not the handler's to take. */
static int no_exit(lua_State *L) {
  return luaL_error(L, "os.exit is not available to handlers: return an outcome or raise an error");
}

/* The load under way (loads run one at a time, on the loop thread): what the
 * count hook checks. */
struct load_guard {
  const char *path;
  uint64_t deadline_ns; /* CLOCK_MONOTONIC */
  uint64_t limit_ms;
  bool expired;
  bool jit_off; /* the file called jit.off() (jit_engine) */
};
static struct load_guard *loading;

#define LOAD_HOOK_COUNT 1000 /* instructions between two looks at the clock */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The innermost line of the handler file itself on L's stack, else 1. */
static int file_line(lua_State *L, const char *path) {
  lua_Debug ar;
  for (int level = 0; level < 64 && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar)) break;
    if (ar.source[0] == '@' && strcmp(ar.source + 1, path) == 0 && ar.currentline > 0)
      return ar.currentline;
  }
  return 1;
}

/* Count hook of a load: past the deadline, every instruction raises, so a
 * pcall in the file cannot swallow the error and go on. */
static void load_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  struct load_guard *g = loading;
  if (g == NULL) return;
  if (!g->expired) {
    if (now_ns() < g->deadline_ns) return;
    g->expired = true;
    lua_sethook(L, load_hook, LUA_MASKCOUNT, 1);
  }
  char limit[24]; /* lua_pushfstring has no %llu */
  snprintf(limit, sizeof limit, "%llu", (unsigned long long)g->limit_ms);
  /* Not luaL_error: the position is the file's, not the hooked function's caller. */
  lua_pushfstring(L,
                  "%s:%d: still running after %sms at load (--load-timeout): a handler "
                  "file's top level must return its table promptly; loops belong in handle",
                  g->path, file_line(L, g->path), limit);
  lua_error(L);
}

/* jit.on() / jit.off() without arguments switch the whole engine: during the
 * load (JIT off for the hook's sake) the file's choice is recorded and
 * applied once the load is over; any other call goes through. The load under
 * way is found through `loading`, not an upvalue a file could change
 * (debug.setupvalue). */
static int jit_engine(lua_State *L) {
  if (lua_gettop(L) == 0 && loading) {
    loading->jit_off = !lua_toboolean(L, lua_upvalueindex(2));
    return 0;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* debug.sethook while a file loads would take the load deadline's hook away. */
static int sethook_guarded(lua_State *L) {
  if (loading)
    return luaL_error(L,
                      "debug.sethook is not available while a handler file loads: "
                      "the load deadline (--load-timeout) uses the hook");
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* os.exit out; jit.on and jit.off wrapped (jit_engine); debug.sethook refused
 * during the load (sethook_guarded).  [-0, +0] */
static void contain(lua_State *L) {
  lua_getglobal(L, "os");
  lua_pushcfunction(L, no_exit);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
  lua_getglobal(L, "jit");
  if (lua_istable(L, -1)) {
    static const char *const names[] = {"off", "on"};
    for (int on = 0; on < 2; on++) {
      lua_getfield(L, -1, names[on]);
      lua_pushboolean(L, on);
      lua_pushcclosure(L, jit_engine, 2);
      lua_setfield(L, -2, names[on]);
    }
  }
  lua_pop(L, 1);
  lua_getglobal(L, "debug");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "sethook");
    lua_pushcclosure(L, sethook_guarded, 1);
    lua_setfield(L, -2, "sethook");
  }
  lua_pop(L, 1);
}

/* ---- versions ---- */

/* FNV-1a 64 of the bytes, its first 8 hex digits into out. */
static void version_of(const char *buf, size_t len, char *out) {
  uint64_t hash = 14695981039346656037ULL;
  for (size_t i = 0; i < len; i++) {
    hash ^= (unsigned char)buf[i];
    hash *= 1099511628211ULL;
  }
  snprintf(out, RT_VERSION_LEN, "%08llx", (unsigned long long)(hash >> 32));
}

int handler_file_version(const char *path, char *out) {
  char *buf;
  size_t len;
  if (read_file(path, NULL, &buf, &len, NULL, 0) != 0) return -1;
  version_of(buf, len, out);
  free(buf);
  return 0;
}

const char *handler_version(const handler *h) { return h->version; }

/* The file's source, read once: what is compiled is what is hashed. */
struct source {
  const char *buf;
  size_t len;
};

/* The load itself, run under lua_pcall.  [-2, +1] h source -> validated spec table */
static int load_protected(lua_State *L) {
  struct handler *h = lua_touserdata(L, 1);
  const struct source *src = lua_touserdata(L, 2);
  lua_settop(L, 0);
  luaL_openlibs(L);
  /* JIT off (luaopen_jit has just turned it on): a loop compiled to a trace
   * would never see the hook. */
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  contain(L);
  set_lua_path(L, h);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushlightuserdata(L, h);
  lua_pushcclosure(L, preload_core, 1);
  lua_setfield(L, -2, "luastream.core");
  lua_pushcfunction(L, luaopen_luastream_json_encode);
  lua_setfield(L, -2, "luastream.json_encode");
  lua_pop(L, 2);

  lua_getglobal(L, "require");
  lua_pushliteral(L, "luastream.handler");
  lua_call(L, 1, 1);               /* handler module */
  lua_getfield(L, -1, "validate"); /* module validate */
  lua_pushfstring(L, "@%s", h->spec.path);
  int rc = luaL_loadbufferx(L, src->buf, src->len, lua_tostring(L, -1), "t");
  lua_remove(L, -2); /* module validate chunk|message */
  if (rc != 0) {
    const char *msg = lua_tostring(L, -1);
    if (msg && strstr(msg, "wrong mode"))
      luaL_error(L, "%s:1: precompiled bytecode is not accepted: a handler file must be Lua source",
                 h->spec.path);
    lua_error(L); /* syntax errors and unreadable files already name the file */
  }
  /* From here on the file's code runs (its chunk, then any metamethod
   * validate meets): under the deadline. luastream's own modules, loaded
   * above, are spared the hook's cost. */
  lua_sethook(L, load_hook, LUA_MASKCOUNT, LOAD_HOOK_COUNT);
  if (pcall_traced(L, 0, 1) != 0) {
    /* First line only: `file:line: message`; the traceback points into us. */
    const char *msg = lua_tostring(L, -1);
    const char *nl = msg ? strchr(msg, '\n') : NULL;
    if (nl) lua_pushlstring(L, msg, (size_t)(nl - msg));
    lua_error(L);
  }
  lua_pushstring(L, h->spec.path);
  lua_pushlstring(L, src->buf, src->len); /* module validate value path source */
  lua_call(L, 3, 1);                      /* module spec */
  return 1;
}

static char *basename_noext(const char *path) {
  size_t n;
  const char *base = handler_name_of(path, &n);
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, base, n);
    s[n] = '\0';
  }
  return s;
}

static void spec_free(struct handler_spec *s) {
  free(s->path);
  free(s->name);
  free(s->stream);
  free(s->group);
  free(s->consumer);
  free(s->start);
  free(s->start_at);
  free(s->reply_to);
  free(s->dead_letter);
  free(s->cron);
  free(s->tz);
  free(s->tick_name);
  schema_free(s->schema);
  schema_free(s->reply_schema);
}

static void handler_destroy(struct handler *h) {
  /* Out of the generation chain (handler_replace). */
  if (h->newer) h->newer->older = h->older;
  if (h->older) h->older->newer = h->newer;
  if (h->L) jobs_free(&h->jobs);
  if (h->L) lmem_close(h->L);
  json_shapes_free(h->core.shapes); /* after the state that holds its constructors */
  schema_scratch_free(&h->core.scratch);
  spec_free(&h->spec);
  free(h->source);
  free(h);
}

/* A released handler's last job ended. */
static void drained(void *data) { handler_destroy(data); }

static void renew(void *data);

/* Makes h->L (closed or NULL before) and runs the file's source in it:
 * loaded, validated, the JIT as the file left it. Returns 0 with the
 * validated spec table on the stack, or -1 with the message in err (h->L
 * may be left open: handler_destroy closes it).  [-0, +1] */
static int load_state(struct handler *h, char *err, size_t errlen) {
  const char *path = h->spec.path;
  h->L = lmem_newstate(RT_MEMORY_DEFAULT, h->spec.name);
  if (h->L == NULL) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  struct lmem *mem = lmem_of(h->L);
  lmem_enforce(mem, false); /* only around the protected calls below and in jobs.c */
  static bool warned;
  if (!mem->counted && !warned) {
    warned = true;
    log_line(LOG_WARN, NULL,
             "this LuaJIT takes no allocator (x86-64 without GC64): handlers' memory limits are "
             "not enforced",
             NULL);
  }
  h->jobs.L = h->L;
  h->jobs.mem = mem;
  lua_atpanic(h->L, panic);
  struct source src = {.buf = h->source, .len = h->source_len};
  uint64_t limit_ms =
      h->env && h->env->load_timeout_ms ? h->env->load_timeout_ms : RT_LOAD_TIMEOUT_MS;
  struct load_guard guard = {
      .path = path, .limit_ms = limit_ms, .deadline_ns = now_ns() + limit_ms * 1000000u};
  loading = &guard;
  watchdog_enter(h->spec.name, path, NULL, NULL, NULL);
  /* A C function under pcall, so even setup errors come back as messages. */
  lua_pushcfunction(h->L, load_protected);
  lua_pushlightuserdata(h->L, h);
  lua_pushlightuserdata(h->L, &src);
  lmem_enforce(mem, true);
  int rc = lua_pcall(h->L, 2, 1, 0);
  lmem_enforce(mem, false);
  watchdog_leave();
  lua_sethook(h->L, NULL, 0, 0);
  h->jit_off = guard.jit_off;
  loading = NULL;
  if (rc != 0) {
    const char *msg = lua_tostring(h->L, -1);
    if (mem->exceeded)
      snprintf(err, errlen,
               "%s:1: the file's top level went past %u bytes of memory at load (a file loads "
               "under that limit; its `memory` applies once it has loaded): %s",
               path, (unsigned)RT_MEMORY_DEFAULT, msg ? msg : "not enough memory");
    else
      snprintf(err, errlen, "%s", msg ? msg : "unknown error while loading");
    return -1;
  }
  /* cppcheck-suppress badBitmaskCheck ; LUAJIT_MODE_ENGINE is 0 by design: luajit.h's documented mode|flag idiom */
  luaJIT_setmode(h->L, 0, LUAJIT_MODE_ENGINE | (h->jit_off ? LUAJIT_MODE_OFF : LUAJIT_MODE_ON));
  return 0;
}

/* The loaded state takes the file's own limit, and keeps the validated spec
 * table at the top of its stack for bind. Returns 0, or -1 with err when it
 * holds more than that already.  [-1, +0] */
static int settle_state(struct handler *h, char *err, size_t errlen) {
  struct lmem *mem = lmem_of(h->L);
  lmem_set_limit(mem, h->spec.memory);
  if (mem->used > h->spec.memory) {
    snprintf(err, errlen,
             "%s: holds %zu bytes once loaded, more than its field 'memory' allows (%zu bytes)",
             h->spec.path, mem->used, h->spec.memory);
    return -1;
  }
  /* The spec table keeps `handle`; the registry keeps the spec for bind.
   * The dispatcher reads the version from it (the handler-version header). */
  lua_pushstring(h->L, h->version);
  lua_setfield(h->L, -2, "version");
  lua_pushlightuserdata(h->L, (void *)&spec_key);
  lua_insert(h->L, -2);
  lua_rawset(h->L, LUA_REGISTRYINDEX);
  lua_settop(h->L, 0);
  return 0;
}

int handler_load(const char *path, const struct rt_env *env, handler **out, char *err,
                 size_t errlen) {
  struct handler *h = calloc(1, sizeof *h);
  if (h == NULL) goto oom;
  h->env = env;
  h->spec.path = strdup(path);
  h->spec.name = basename_noext(path);
  h->core.shapes = json_shapes_new();
  if (!h->spec.path || !h->spec.name || !h->core.shapes) goto oom;
  jobs_init(&h->jobs, NULL, &h->spec, h->version, env);
  jobs_on_memory(&h->jobs, renew, h);
  h->core.jobs = &h->jobs;
  int read = read_file(path, env ? env->trust : NULL, &h->source, &h->source_len, err, errlen);
  if (read != 0) {
    if (read == -1)
      snprintf(err, errlen, "%s:1: cannot read the handler file: %s", path, strerror(errno));
    handler_destroy(h);
    return -1;
  }
  version_of(h->source, h->source_len, h->version);
  if (load_state(h, err, errlen) != 0 || read_spec(h->L, lua_gettop(h->L), h, err, errlen) != 0 ||
      settle_state(h, err, errlen) != 0) {
    handler_destroy(h);
    return -1;
  }
  *out = h;
  return 0;
oom:
  snprintf(err, errlen, "%s: out of memory", path);
  if (h) handler_destroy(h);
  return -1;
}

const struct handler_spec *handler_spec(const handler *h) { return &h->spec; }
size_t handler_jobs(const handler *h) { return h->jobs.count; }
size_t handler_flat_reads(const handler *h) { return h->core.flat_reads; }

/* The dispatcher of the bound consumer (h->spec.consumer) into
 * jobs.dispatch_ref. Returns 0, or -1 with the message on the stack. */
static int bind_dispatcher(struct handler *h) {
  lua_State *L = h->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luastream.handler");
  if (pcall_traced(L, 1, 1) != 0) return -1;
  lua_getfield(L, -1, "dispatcher");
  lua_pushlightuserdata(L, (void *)&spec_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_pushstring(L, h->spec.consumer);
  if (pcall_traced(L, 2, 1) != 0) return -1;
  if (h->jobs.dispatch_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, h->jobs.dispatch_ref);
  h->jobs.dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int handler_bind(handler *h, const char *consumer) {
  lua_State *L = h->L;
  int top = lua_gettop(L);
  free(h->spec.consumer);
  h->spec.consumer = strdup(consumer);
  if (h->spec.consumer == NULL) return -1;
  if (bind_dispatcher(h) != 0) {
    log_line(LOG_ERROR, h->spec.name, "cannot prepare handler", "error", lua_tostring(L, -1), NULL);
    lua_settop(L, top);
    return -1;
  }
  lua_settop(L, top);
  return 0;
}

/* jobs.c's call when the state went past its memory limit, its jobs taken
 * off it: a fresh state of the same source (not the file as it is now) and
 * the same consumer takes its place. A version that loaded once and does not
 * load again (its top level depends on something that changed) leaves the
 * handler nothing to run on: the process exits (lmem_fatal). */
static void renew(void *data) {
  struct handler *h = data;
  char err[1024];
  jobs_free(&h->jobs); /* the idle coroutines are the old state's */
  h->jobs.dispatch_ref = LUA_NOREF;
  lmem_close(h->L);
  h->L = NULL;
  json_shapes_free(h->core.shapes);
  h->core.shapes = json_shapes_new();
  if (h->core.shapes == NULL)
    lmem_fatal(h->spec.name, "cannot make a fresh state", "out of memory");
  if (load_state(h, err, sizeof err) != 0 || settle_state(h, err, sizeof err) != 0)
    lmem_fatal(h->spec.name, "cannot make a fresh state", err);
  if (h->spec.consumer && bind_dispatcher(h) != 0)
    lmem_fatal(h->spec.name, "cannot make a fresh state", lua_tostring(h->L, -1));
  lua_settop(h->L, 0);
}

void handler_release(handler *h) { jobs_release(&h->jobs, drained, h); }

void handler_replace(handler *old, handler *next) {
  next->older = old;
  old->newer = next;
  handler_release(old); /* may close it now, which unlinks it again */
}

size_t handler_abandon(handler *h, rt_abandon_fn *abandoned) {
  size_t n = 0;
  /* Older generations first: each is released, so it closes once dropped. */
  for (struct handler *g = h->older, *next; g; g = next) {
    next = g->older;
    n += jobs_abandon(&g->jobs, abandoned);
  }
  return n + jobs_abandon(&h->jobs, abandoned);
}

int handler_run(handler *h, struct entry *e, rt_done_fn *done, void *data) {
  return jobs_start(&h->jobs, e, -1, done, data);
}

int handler_run_partition(handler *h, struct entry *e, int p, rt_done_fn *done, void *data) {
  return jobs_start(&h->jobs, e, p, done, data);
}

int handler_run_batch(handler *h, struct entry *const *entries, size_t n, int p, rt_done_fn *done,
                      void *data) {
  return jobs_start_batch(&h->jobs, entries, n, p, done, data);
}

/* ---- the validated spec, copied out ---- */

/* Tables nested deeper than any valid spec's are refused (a table that holds
 * itself). The deepest: a schema SCHEMA_MAX_DEPTH properties deep, two tables
 * a level (properties, the property's schema), under the spec and its schema,
 * with a list (required, enum) at the bottom. */
#define COPY_DEPTH_MAX (2 * SCHEMA_MAX_DEPTH + 4)

/* Whether the value at idx of L is one copy_value copies. */
static bool copyable(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  return t == LUA_TBOOLEAN || t == LUA_TNUMBER || t == LUA_TSTRING || t == LUA_TTABLE;
}

/* Pushes onto to a copy of the value at the top of from: booleans, numbers,
 * strings and tables of them, keyed by strings and numbers; any other value
 * (a function, userdata) is left out of its table, and is nil at the top.
 * Raw access only: no code of the handler file runs. Returns 0, or -1 when
 * tables nest deeper than COPY_DEPTH_MAX. Out of memory in to raises there.
 * [-0, +1] on to, [-0, +0] on from */
static int copy_value(lua_State *from, lua_State *to, int depth) {
  switch (lua_type(from, -1)) {
    case LUA_TBOOLEAN: lua_pushboolean(to, lua_toboolean(from, -1)); return 0;
    case LUA_TNUMBER: lua_pushnumber(to, lua_tonumber(from, -1)); return 0;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(from, -1, &n);
      lua_pushlstring(to, s, n);
      return 0;
    }
    case LUA_TTABLE: break;
    default: lua_pushnil(to); return 0;
  }
  if (depth >= COPY_DEPTH_MAX || !lua_checkstack(from, 4)) {
    lua_pushnil(to);
    return -1;
  }
  luaL_checkstack(to, 4, "copying a handler's spec");
  lua_newtable(to);
  lua_pushnil(from);
  while (lua_next(from, -2) != 0) { /* from: table key value */
    int kt = lua_type(from, -2);
    if ((kt == LUA_TSTRING || kt == LUA_TNUMBER) && copyable(from, -1)) {
      lua_pushvalue(from, -2); /* a copy: lua_tolstring must not change lua_next's key */
      copy_value(from, to, depth + 1);
      lua_pop(from, 1);
      if (copy_value(from, to, depth + 1) != 0) {
        lua_pop(from, 2);
        lua_pop(to, 2);
        return -1;
      }
      lua_rawset(to, -3);
    }
    lua_pop(from, 1);
  }
  return 0;
}

int handler_spec_push(const handler *h, lua_State *L) {
  lua_State *from = h->L;
  int top = lua_gettop(from);
  lua_pushlightuserdata(from, (void *)&spec_key);
  lua_rawget(from, LUA_REGISTRYINDEX);
  int rc = lua_istable(from, -1) ? copy_value(from, L, 0) : -1;
  if (rc != 0) {
    lua_settop(L, lua_gettop(L) - 1); /* the partial copy */
    lua_pushnil(L);
  }
  lua_settop(from, top);
  return rc;
}

/* ---- JSON check for the CLI ---- */

struct json_check {
  bool ok;
  char *err;
  size_t errlen;
};

/* The check itself, under lua_pcall: a Lua error (out of memory) comes back
 * as a result, not as a longjmp through the caller.  [-3, +0] */
static int json_valid_protected(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  size_t len = (size_t)lua_tonumber(L, 2);
  struct json_check *c = lua_touserdata(L, 3);
  c->ok = json_decode_push(L, NULL, text, len, c->err, c->errlen) == 0;
  return 0;
}

bool rt_json_valid(const char *text, size_t len, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  struct json_check c = {.err = err, .errlen = errlen};
  lua_pushcfunction(L, json_valid_protected);
  lua_pushlightuserdata(L, (void *)text);
  lua_pushnumber(L, (lua_Number)len);
  lua_pushlightuserdata(L, &c);
  if (lua_pcall(L, 3, 0, 0) != 0) {
    const char *msg = lua_tostring(L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "out of memory");
    c.ok = false;
  }
  lua_close(L);
  return c.ok;
}

void rt_trim(void) { jobs_calls_trim(); }
