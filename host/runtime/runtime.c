/* runtime: handler files in Lua states, entries in coroutines.
 *
 * Loading: a fresh lua_State per file, luastream's Lua library requirable
 * (embedded_lua.h), the file compiled as text only (no precompiled bytecode) and
 * run under a protected call, its returned table checked by
 * luastream.handler.validate. A handler file is code with the host's rights, so
 * loading contains what it can: os.exit raises an error (at load and in
 * handlers), and the load runs with the JIT off under a count hook that ends
 * it at a deadline (LuaJIT checks hooks only outside compiled traces).
 * Running: one job per entry, each with a
 * coroutine of the handler's state resumed only in run(); finished jobs are
 * kept with their coroutines for the next entries, so a steady stream of
 * entries allocates no C memory and no new coroutines. Host functions that
 * wait (hostlib.c) yield and resume through rt_job_resume. */
#include <lauxlib.h>
#include <lua.h>
#include <errno.h>
#include <luajit.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "embedded_lua.h"
#include "entry.h"
#include "json_decode.h"
#include "json_encode.h"
#include "lmem.h"
#include "log.h"
#include "runtime_private.h"
#include "watchdog.h"

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

static int panic(lua_State *L) {
  log_line(LOG_ERROR, NULL, "lua panic", "error", lua_tostring(L, -1), NULL);
  abort();
}

/* ---- loading ---- */

static char *dup_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  char *s = lua_isstring(L, -1) ? strdup(lua_tostring(L, -1)) : NULL;
  lua_pop(L, 1);
  return s;
}

static lua_Number num_field(lua_State *L, int idx, const char *name, lua_Number dflt) {
  lua_getfield(L, idx, name);
  lua_Number n = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : dflt;
  lua_pop(L, 1);
  return n;
}

/* Copies the validated spec table at idx into h->spec.  [-0, +0] */
static int read_spec(lua_State *L, int idx, struct handler *h) {
  struct handler_spec *s = &h->spec;
  s->stream = dup_field(L, idx, "stream");
  s->group = dup_field(L, idx, "group");
  s->consumer = dup_field(L, idx, "consumer");
  s->start = dup_field(L, idx, "start");
  s->start_at = dup_field(L, idx, "start_at");
  s->reply_to = dup_field(L, idx, "reply_to");
  s->dead_letter = dup_field(L, idx, "dead_letter");
  s->max_deliveries = (int)num_field(L, idx, "max_deliveries", 0);
  char *read = dup_field(L, idx, "read");
  s->read = read == NULL || strcmp(read, "new") == 0 ? READ_NEW
            : strcmp(read, "claiming") == 0          ? READ_CLAIMING
                                                     : READ_RECLAIM;
  free(read);
  s->min_idle_ms = (int64_t)num_field(L, idx, "min_idle", -1);
  s->batch = (int)num_field(L, idx, "batch", 100);
  s->workers = (int)num_field(L, idx, "workers", 1);
  s->max_body = (size_t)num_field(L, idx, "max_body", 1048576);
  lua_getfield(L, idx, "by_key");
  s->by_key = lua_toboolean(L, -1);
  lua_getfield(L, idx, "claim_fallback");
  s->claim_fallback = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return s->stream && s->group && s->start ? 0 : -1;
}

/* Makes luastream's Lua library requirable (embedded_lua.h), then puts the
 * handler's own folder (when given) first on package.path so a handler can
 * require its siblings. */
static void set_lua_path(lua_State *L, const char *handler_path) {
  if (handler_path) {
    const char *slash = strrchr(handler_path, '/');
    int hlen = slash ? (int)(slash - handler_path) : 1;
    const char *hdir = slash ? handler_path : ".";
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");                       /* package oldpath */
    lua_pushlstring(L, hdir, (size_t)hlen);            /* lua_pushfstring has no %.*s */
    lua_pushliteral(L, "/?.lua;");
    lua_pushvalue(L, -3);                              /* package oldpath hdir pat oldpath */
    lua_concat(L, 3);                                  /* package oldpath newpath */
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
  }
  embedded_lua_open(L);
}

static int preload_core(lua_State *L) {
  struct handler *h = lua_touserdata(L, lua_upvalueindex(1));
  return rt_open_core(L, h);
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
  uint64_t deadline_ns;   /* CLOCK_MONOTONIC */
  uint64_t limit_ms;
  bool expired;
  bool jit_off;           /* the file called jit.off() (jit_engine) */
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
  lua_pushfstring(L, "%s:%d: still running after %sms at load (--load-timeout): a handler "
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
    return luaL_error(L, "debug.sethook is not available while a handler file loads: "
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

/* The file's bytes: a NUL-terminated heap copy in *buf, its length in *len.
 * Returns 0, or -1 with errno set. */
static int read_file(const char *path, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    char *grown = realloc(b, cap *= 2);
    if (grown == NULL) {
      free(b);
      b = NULL;
      errno = ENOMEM;
    }
    b = grown;
  }
  int failed = b == NULL || ferror(f);
  int saved = errno;
  fclose(f);
  if (failed) {
    free(b);
    errno = saved ? saved : EIO;
    return -1;
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
}

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
  if (read_file(path, &buf, &len) != 0) return -1;
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
  set_lua_path(L, h->spec.path);
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
  lua_call(L, 1, 1);                                   /* handler module */
  lua_getfield(L, -1, "validate");                     /* module validate */
  lua_pushfstring(L, "@%s", h->spec.path);
  int rc = luaL_loadbufferx(L, src->buf, src->len, lua_tostring(L, -1), "t");
  lua_remove(L, -2);                                   /* module validate chunk|message */
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
  lua_pushstring(L, h->spec.path);                     /* module validate value path */
  lua_call(L, 2, 1);                                   /* module spec */
  return 1;
}

static char *basename_noext(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
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
}

static void job_destroy(struct handler *h, struct rt_job *job);

static void handler_destroy(struct handler *h) {
  /* Out of the generation chain (handler_replace). */
  if (h->newer) h->newer->older = h->older;
  if (h->older) h->older->newer = h->newer;
  while (h->idle) {
    struct rt_job *job = h->idle;
    h->idle = job->next;
    job_destroy(h, job);
  }
  if (h->L) lmem_close(h->L);
  json_shapes_free(h->shapes); /* after the state that holds its constructors */
  spec_free(&h->spec);
  free(h->scratch);
  free(h->scratch_len);
  free(h->scratch_writes);
  free(h);
}

int handler_load(const char *path, const struct rt_env *env, handler **out, char *err,
                 size_t errlen) {
  struct handler *h = calloc(1, sizeof *h);
  if (h == NULL) goto oom;
  h->dispatch_ref = LUA_NOREF;
  h->env = env;
  h->spec.path = strdup(path);
  h->spec.name = basename_noext(path);
  h->L = lmem_newstate();
  h->shapes = json_shapes_new();
  if (!h->spec.path || !h->spec.name || !h->L || !h->shapes) goto oom;
  lua_atpanic(h->L, panic);

  struct source src;
  char *buf = NULL;
  if (read_file(path, &buf, &src.len) != 0) {
    snprintf(err, errlen, "%s:1: cannot read the handler file: %s", path, strerror(errno));
    handler_destroy(h);
    return -1;
  }
  src.buf = buf;
  version_of(buf, src.len, h->version);
  uint64_t limit_ms = env && env->load_timeout_ms ? env->load_timeout_ms : RT_LOAD_TIMEOUT_MS;
  struct load_guard guard = {.path = path, .limit_ms = limit_ms,
                             .deadline_ns = now_ns() + limit_ms * 1000000u};
  loading = &guard;
  watchdog_enter(h->spec.name, path, NULL, NULL, NULL);
  /* A C function under pcall, so even setup errors come back as messages. */
  lua_pushcfunction(h->L, load_protected);
  lua_pushlightuserdata(h->L, h);
  lua_pushlightuserdata(h->L, &src);
  int rc = lua_pcall(h->L, 2, 1, 0);
  watchdog_leave();
  lua_sethook(h->L, NULL, 0, 0);
  h->jit_off = guard.jit_off;
  loading = NULL;
  free(buf);
  if (rc == 0)
    luaJIT_setmode(h->L, 0, LUAJIT_MODE_ENGINE | (h->jit_off ? LUAJIT_MODE_OFF : LUAJIT_MODE_ON));
  if (rc != 0) {
    const char *msg = lua_tostring(h->L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "unknown error while loading");
    handler_destroy(h);
    return -1;
  }
  if (read_spec(h->L, lua_gettop(h->L), h) != 0) {
    snprintf(err, errlen, "%s: out of memory", path);
    handler_destroy(h);
    return -1;
  }
  /* The spec table keeps `handle`; the registry keeps the spec for bind.
   * The dispatcher reads the version from it (the handler-version header). */
  lua_pushstring(h->L, h->version);
  lua_setfield(h->L, -2, "version");
  lua_setfield(h->L, LUA_REGISTRYINDEX, "luastream.spec");
  lua_settop(h->L, 0);
  *out = h;
  return 0;
oom:
  snprintf(err, errlen, "%s: out of memory", path);
  if (h) handler_destroy(h);
  return -1;
}

const struct handler_spec *handler_spec(const handler *h) { return &h->spec; }
size_t handler_jobs(const handler *h) { return h->jobs; }
size_t handler_flat_reads(const handler *h) { return h->flat_reads; }

int handler_bind(handler *h, const char *consumer) {
  lua_State *L = h->L;
  int top = lua_gettop(L);
  free(h->spec.consumer);
  h->spec.consumer = strdup(consumer);
  if (h->spec.consumer == NULL) return -1;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luastream.handler");
  if (pcall_traced(L, 1, 1) != 0) goto error;
  lua_getfield(L, -1, "dispatcher");
  lua_getfield(L, LUA_REGISTRYINDEX, "luastream.spec");
  lua_pushstring(L, consumer);
  if (pcall_traced(L, 2, 1) != 0) goto error;
  if (h->dispatch_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, h->dispatch_ref);
  h->dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, top);
  return 0;
error:
  log_line(LOG_ERROR, h->spec.name, "cannot prepare handler", "error", lua_tostring(L, -1), NULL);
  lua_settop(L, top);
  return -1;
}

/* Takes job off its handler's list of running jobs. */
static void job_unlink(struct rt_job *job) {
  struct handler *h = job->h;
  if (job->prev) job->prev->next = job->next;
  else h->running = job->next;
  if (job->next) job->next->prev = job->prev;
  job->prev = job->next = NULL;
}

void handler_release(handler *h) {
  h->released = true;
  if (h->jobs == 0) handler_destroy(h);
}

void handler_replace(handler *old, handler *next) {
  next->older = old;
  old->newer = next;
  handler_release(old); /* may close it now, which unlinks it again */
}

static size_t abandon_jobs(handler *h, rt_abandon_fn *abandoned);

size_t handler_abandon(handler *h, rt_abandon_fn *abandoned) {
  size_t n = 0;
  /* Older generations first: each is released, so it closes once dropped. */
  for (struct handler *g = h->older, *next; g; g = next) {
    next = g->older;
    n += abandon_jobs(g, abandoned);
  }
  return n + abandon_jobs(h, abandoned);
}

static size_t abandon_jobs(handler *h, rt_abandon_fn *abandoned) {
  size_t n = 0;
  /* From a loop callback only: a running coroutine cannot be dropped under
   * its own feet, and run() would touch the job after it returns. */
  if (h->current) return 0;
  while (h->running) {
    struct rt_job *job = h->running;
    struct entry *e = job->e;
    void *data = job->data;
    job_unlink(job);
    /* Unanchored, the suspended coroutine is garbage; lua_close frees it at
     * the latest. Its timer goes now, so ls.sleep never resumes it. */
    job_destroy(h, job);
    h->jobs--;
    n++;
    if (abandoned) abandoned(data, e);
  }
  if (h->released) handler_destroy(h);
  return n;
}

/* ---- jobs ---- */

static void job_destroy(struct handler *h, struct rt_job *job) {
  luaL_unref(h->L, LUA_REGISTRYINDEX, job->co_ref); /* the coroutine is garbage now */
  if (job->timer) timer_free(job->timer);
  free(job);
}

/* A job for the next entry: an idle one, else a new one with a new coroutine. */
static struct rt_job *job_get(struct handler *h) {
  struct rt_job *job = h->idle;
  if (job) {
    h->idle = job->next;
    job->next = NULL;
    return job;
  }
  job = calloc(1, sizeof *job);
  if (job == NULL) return NULL;
  job->h = h;
  job->co = lua_newthread(h->L);
  job->co_ref = luaL_ref(h->L, LUA_REGISTRYINDEX);
  return job;
}

/* The job's entry is done with. A coroutine that returned can run the next
 * entry (reusable); one that raised or was left suspended cannot. */
static void job_end(struct rt_job *job, bool reusable) {
  struct handler *h = job->h;
  job_unlink(job);
  h->jobs--;
  if (reusable && !h->released) {
    /* A wait the handler caught (ls.sleep under a C boundary raises after
     * arming the timer) must not fire on the idle job. */
    if (job->timer) timer_stop(job->timer);
    job->op = OP_NONE;
    lua_settop(job->co, 0);
    job->e = NULL;
    job->done = NULL;
    job->data = NULL;
    job->next = h->idle;
    h->idle = job;
  } else {
    job_destroy(h, job);
  }
  if (h->released && h->jobs == 0) handler_destroy(h);
}

static void report(struct rt_job *job, const struct rt_result *res) {
  const struct rt_env *env = job->h->env;
  struct rt_result r = *res;
  r.version = job->h->version;
  if (env && env->on_delivery) env->on_delivery(env->on_delivery_data, &job->h->spec, job->e, &r);
  job->done(job->data, job->e, &r);
}

static int ensure_scratch(struct handler *h, size_t nfields, size_t nwrites) {
  if (nfields > h->scratch_cap) {
    size_t cap = nfields < 16 ? 16 : nfields * 2;
    const char **f = realloc(h->scratch, cap * sizeof *f);
    if (f) h->scratch = f;
    size_t *l = realloc(h->scratch_len, cap * sizeof *l);
    if (l) h->scratch_len = l;
    if (!f || !l) return -1;
    h->scratch_cap = cap;
  }
  if (nwrites > h->scratch_writes_cap) {
    size_t cap = nwrites < 4 ? 4 : nwrites * 2;
    struct rt_write *w = realloc(h->scratch_writes, cap * sizeof *w);
    if (w == NULL) return -1;
    h->scratch_writes = w;
    h->scratch_writes_cap = cap;
  }
  return 0;
}

/* Reads the writes table at idx ({ {stream, {f, v, ...}}, ... }) into the
 * handler's scratch arrays; the strings stay anchored by the table. */
static int read_writes(struct handler *h, lua_State *co, int idx, struct rt_result *res) {
  if (!lua_istable(co, idx)) return 0;
  size_t nwrites = lua_objlen(co, idx), nfields = 0;
  for (size_t w = 1; w <= nwrites; w++) {
    lua_rawgeti(co, idx, (int)w);
    lua_rawgeti(co, -1, 2);
    nfields += lua_objlen(co, -1);
    lua_pop(co, 2);
  }
  if (ensure_scratch(h, nfields, nwrites) != 0) return -1;
  size_t at = 0;
  for (size_t w = 0; w < nwrites; w++) {
    struct rt_write *out = &h->scratch_writes[w];
    lua_rawgeti(co, idx, (int)w + 1);              /* ... write */
    lua_rawgeti(co, -1, 1);
    out->stream = lua_tostring(co, -1);
    lua_pop(co, 1);
    lua_rawgeti(co, -1, 2);                        /* ... write fields */
    out->nfields = lua_objlen(co, -1);
    out->field = h->scratch + at;
    out->field_len = h->scratch_len + at;
    for (size_t i = 0; i < out->nfields; i++, at++) {
      lua_rawgeti(co, -1, (int)i + 1);
      h->scratch[at] = lua_tolstring(co, -1, &h->scratch_len[at]);
      lua_pop(co, 1);
    }
    lua_pop(co, 2);
  }
  res->nwrites = nwrites;
  res->writes = h->scratch_writes;
  return 0;
}

/* The dispatcher returned; its results are on co's stack (see outcome() in
 * luastream/handler.lua): kind, then what that kind carries. */
static void finish_returned(struct rt_job *job) {
  lua_State *co = job->co;
  struct rt_result res = {.kind = RT_ACK};
  const char *kind = lua_tostring(co, 1);
  if (kind == NULL || strcmp(kind, "ack") == 0 || strcmp(kind, "reply") == 0) {
    res.kind = kind && kind[0] == 'r' ? RT_REPLY : RT_ACK;
    if (read_writes(job->h, co, 2, &res) != 0) {
      res = (struct rt_result){.kind = RT_ERROR, .reason = REASON_HANDLER_ERROR, .text = "out of memory"};
      res.text_len = strlen(res.text);
    }
  } else if (strcmp(kind, "retry") == 0) {
    res.kind = RT_RETRY;
  } else if (strcmp(kind, "retry_after") == 0) {
    res.kind = RT_RETRY_AFTER;
    res.delay_ms = (int64_t)lua_tonumber(co, 2);
  } else if (strcmp(kind, "reject") == 0) {
    res.kind = RT_REJECT;
    res.text = lua_tolstring(co, 2, &res.text_len);
  } else {
    res.kind = strcmp(kind, "invalid") == 0 ? RT_INVALID : RT_ERROR;
    res.reason = lua_tostring(co, 2);
    res.text = lua_tolstring(co, 3, &res.text_len);
  }
  report(job, &res);
  job_end(job, true);
}

static void finish_failed(struct rt_job *job, const char *why) {
  lua_State *L = job->h->L;
  const char *msg = why ? why : lua_tostring(job->co, -1);
  if (msg == NULL) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(job->co, -1));
  luaL_traceback(L, job->co, msg, 0);
  struct rt_result res = {.kind = RT_ERROR, .reason = REASON_HANDLER_ERROR};
  res.text = lua_tolstring(L, -1, &res.text_len);
  report(job, &res);
  lua_settop(L, 0); /* before job_end, which may close the state */
  job_end(job, false);
}

/* The one place a job's coroutine is resumed. */
static void run(struct rt_job *job, int nargs) {
  struct handler *h = job->h;
  h->current = job;
  watchdog_enter(h->spec.name, h->spec.path, h->spec.stream, h->spec.group,
                 job->e ? job->e->id : NULL);
  int rc = lua_resume(job->co, nargs);
  watchdog_leave();
  h->current = NULL;
  if (rc == LUA_YIELD) {
    if (job->op != OP_NONE) return; /* waiting: a loop callback resumes it */
    finish_failed(job, "coroutine.yield called in a handler: only ls.sleep may wait");
  } else if (rc == 0) {
    finish_returned(job);
  } else {
    finish_failed(job, NULL);
  }
}

void rt_job_resume(struct rt_job *job, int nargs) {
  job->op = OP_NONE;
  run(job, nargs);
}

int handler_run(handler *h, struct entry *e, rt_done_fn *done, void *data) {
  struct rt_job *job = job_get(h);
  if (job == NULL) return -1;
  job->e = e;
  job->done = done;
  job->data = data;
  job->seq = ++h->last_seq;
  h->jobs++;
  job->next = h->running;
  if (h->running) h->running->prev = job;
  h->running = job;

  lua_State *co = job->co;
  lua_rawgeti(co, LUA_REGISTRYINDEX, h->dispatch_ref);
  lua_pushnumber(co, job->seq);
  run(job, 1);
  return 0;
}

/* ---- JSON check for the CLI ---- */

bool rt_json_valid(const char *text, size_t len, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  bool ok = json_decode_push(L, NULL, text, len, err, errlen) == 0;
  lua_close(L);
  return ok;
}
