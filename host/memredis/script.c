/* script: EVAL on an embedded LuaJIT state, the way Redis 7 runs scripts.
 *
 * One lua_State per broker, built once: the base, table, string, math and bit
 * libraries, the `redis` table, and Redis 7's own error handler (written in
 * Lua, it turns any error into {err=..., source=..., line=...} and is what
 * gives errors their "script: ..., on @user_script:N." suffix). Each EVAL
 * compiles the body under the chunk name "@user_script", sets KEYS and ARGV,
 * and converts the result with Redis' RESP2 rules. The command callback and
 * its context sit in two statics for the duration of one EVAL: scripts do not
 * nest and the harness is single-threaded. */
#include "script.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memreply.h"
#include "sha1.h"

/* Arguments of one redis.call: far above what a script can pass (unpack
 * stops at Lua's C stack, 8000 values, in LuaJIT as in Redis' Lua 5.1), so
 * only Lua's own limits apply, as in Redis. */
#define MAX_ARGS 100000

/* A script EVAL ran or SCRIPT LOAD loaded, for EVALSHA (Redis keeps
 * them until SCRIPT FLUSH). */
struct cached {
  char sha[41];
  char *text;
  size_t len;
};

struct memscript {
  lua_State *L;
  struct cached *cache;
  size_t ncache, capcache;
};

static memscript_call_fn *cur_call; /* set during memscript_eval */
static memscript_known_fn *cur_known;
static void *cur_ctx;
static int cur_line; /* the script line running, from a line hook */

/* ---- replies to Lua (RESP2 rules) ---- */

/* [-0, +1] */
static void push_error_table(lua_State *L, const char *msg, size_t len) {
  lua_newtable(L);
  lua_pushlstring(L, msg, len);
  lua_setfield(L, -2, "err");
}

/* [-0, +1] integer -> number, bulk -> string, nil -> false, status -> {ok=},
 * error -> {err=}, array -> table. */
static void push_reply(lua_State *L, const bk_reply *r) {
  luaL_checkstack(L, 4, "reply nested too deeply");
  switch (r->type) {
    case BK_INTEGER: lua_pushnumber(L, (lua_Number)r->integer); break;
    case BK_STRING: lua_pushlstring(L, r->str, r->len); break;
    case BK_STATUS:
      lua_newtable(L);
      lua_pushlstring(L, r->str, r->len);
      lua_setfield(L, -2, "ok");
      break;
    case BK_ERROR: push_error_table(L, r->str, r->len); break;
    case BK_ARRAY:
      lua_createtable(L, (int)r->elements, 0);
      for (size_t i = 0; i < r->elements; i++) {
        push_reply(L, r->element[i]);
        lua_rawseti(L, -2, (int)i + 1);
      }
      break;
    default: lua_pushboolean(L, 0); break;
  }
}

/* ---- Lua to replies ---- */

/* Redis' Lua (5.1) runs out of stack at LUAI_MAXCSTACK slots: a table
 * nested deeper (or one that contains itself) ends in an error element there,
 * as Redis' "reached lua stack limit", not in a crash. */
#define REPLY_STACK_LIMIT 8000

/* [-0, +0] The value at the top of the stack as a reply. Raises nothing:
 * it runs after the script's pcall. Fields are read raw, as Redis does,
 * so a metatable cannot run code here. */
static bk_reply *to_reply(lua_State *L) {
  switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      return mr_bulk(s, len);
    }
    case LUA_TBOOLEAN: return lua_toboolean(L, -1) ? mr_int(1) : mr_nil();
    case LUA_TNUMBER: {
      /* Out of range (or NaN) as x86 converts it, without C's undefined cast. */
      lua_Number n = lua_tonumber(L, -1);
      return mr_int(n > -9223372036854775808.0 && n < 9223372036854775808.0 ? (long long)n
                                                                            : LLONG_MIN);
    }
    case LUA_TTABLE: break;
    default: return mr_nil();
  }
  if (lua_gettop(L) + 4 > REPLY_STACK_LIMIT || !lua_checkstack(L, 4))
    return mr_err("reached lua stack limit");
  lua_pushliteral(L, "err");
  lua_rawget(L, -2);
  if (lua_type(L, -1) == LUA_TSTRING) {
    bk_reply *r = mr_err("%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return r;
  }
  lua_pop(L, 1);
  lua_pushliteral(L, "ok");
  lua_rawget(L, -2);
  if (lua_type(L, -1) == LUA_TSTRING) {
    bk_reply *r = mr_status(lua_tostring(L, -1));
    lua_pop(L, 1);
    return r;
  }
  lua_pop(L, 1);
  bk_reply *a = mr_arr();
  for (int j = 1;; j++) { /* up to the first nil */
    lua_rawgeti(L, -1, j);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      break;
    }
    mr_push(a, to_reply(L));
    lua_pop(L, 1);
  }
  return a;
}

/* ---- the redis table ---- */

/* [-n, +1] redis.call / redis.pcall: raise says whether an error reply
 * raises (call) or is returned as {err=...} (pcall). Redis sets no small
 * limit on the arguments of one call: Lua's stack is the limit. */
static int generic_call(lua_State *L, int raise) {
  int argc = lua_gettop(L);
  const char *why = NULL;
  const char **argv = NULL;
  size_t *argvlen = NULL;
  char(*num)[32] = NULL; /* numbers printed, one slot per argument */
  if (argc == 0) why = "ERR Please specify at least one argument for this redis lib call";
  if (argc > MAX_ARGS) why = "ERR Too many arguments for this redis lib call";
  if (why == NULL) {
    argv = malloc((size_t)argc * sizeof *argv);
    argvlen = malloc((size_t)argc * sizeof *argvlen);
    num = malloc((size_t)argc * sizeof *num);
    if (argv == NULL || argvlen == NULL || num == NULL)
      why = "ERR Out of memory for the arguments of this redis lib call";
  }
  for (int i = 0; why == NULL && i < argc; i++) {
    int t = lua_type(L, i + 1);
    if (t == LUA_TNUMBER) {
      /* Redis prints numbers in their shortest form: 10, not 10.0. */
      lua_Number n = lua_tonumber(L, i + 1);
      if (n > -9e18 && n < 9e18 && n == (lua_Number)(long long)n)
        snprintf(num[i], sizeof num[i], "%lld", (long long)n);
      else
        snprintf(num[i], sizeof num[i], "%.17g", (double)n);
      argv[i] = num[i];
      argvlen[i] = strlen(num[i]);
    } else if (t == LUA_TSTRING) {
      argv[i] = lua_tolstring(L, i + 1, &argvlen[i]);
    } else {
      why = "ERR Lua redis lib command arguments must be strings or integers";
    }
  }
  bk_reply *r = why ? NULL : cur_call(cur_ctx, argc, argv, argvlen);
  /* freed before anything that can raise: lua_error does not return */
  free(argv);
  free(argvlen);
  free(num);
  /* The arguments are done with: their slots make room for the reply, as in
   * Redis (a call with thousands of them leaves none otherwise). */
  lua_settop(L, 0);
  if (why) {
    push_error_table(L, why, strlen(why));
    return raise ? lua_error(L) : 1;
  }
  int failed = r->type == BK_ERROR;
  push_reply(L, r);
  mr_free(r); /* before lua_error: it does not return */
  if (failed && raise) return lua_error(L);
  return 1;
}

static int l_call(lua_State *L) { return generic_call(L, 1); }

/* redis.acl_check_cmd(cmd, ...): raises for a command Redis does not have
 * (with its text), else true: the in-memory broker has no ACL. */
static int l_acl_check_cmd(lua_State *L) {
  int argc = lua_gettop(L);
  const char *argv[2] = {NULL, NULL};
  size_t len[2] = {0, 0};
  for (int i = 0; i < argc && i < 2; i++)
    if (lua_type(L, i + 1) == LUA_TSTRING) argv[i] = lua_tolstring(L, i + 1, &len[i]);
  if (argc == 0 || argv[0] == NULL || !cur_known(cur_ctx, argc, argv, len)) {
    const char *why = "ERR Invalid command passed to redis.acl_check_cmd()";
    push_error_table(L, why, strlen(why));
    return lua_error(L);
  }
  lua_pushboolean(L, 1);
  return 1;
}
static int l_pcall(lua_State *L) { return generic_call(L, 0); }

static int l_reply(lua_State *L, const char *field) {
  luaL_checkstring(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, field);
  return 1;
}

static int l_status_reply(lua_State *L) { return l_reply(L, "ok"); }
static int l_error_reply(lua_State *L) { return l_reply(L, "err"); }
static int l_log(lua_State *L) {
  (void)L;
  return 0;
}

/* Redis 7.0's handler (script_lua.c), word for word in spirit: errors raised
 * from a C function are attributed to the Lua line that called it. */
static const char err_handler[] =
    "local dbg = debug\n"
    "debug = nil\n"
    "function __redis__err__handler(err)\n"
    "  local i = dbg.getinfo(2,'nSl')\n"
    "  if i and i.what == 'C' then\n"
    "    i = dbg.getinfo(3,'nSl')\n"
    "  end\n"
    "  if type(err) ~= 'table' then\n"
    "    err = {err='ERR ' .. tostring(err)}\n"
    "  end\n"
    "  if i then\n"
    "    err['source'] = i.source\n"
    "    err['line'] = i.currentline\n"
    "  end\n"
    "  return err\n"
    "end\n";

memscript *memscript_new(void) {
  memscript *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  lua_State *L = m->L = luaL_newstate();
  if (L == NULL) {
    free(m);
    return NULL;
  }
  static const lua_CFunction libs[] = {luaopen_base, luaopen_table, luaopen_string,
                                       luaopen_math, luaopen_bit,   luaopen_debug};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    lua_pushcfunction(L, libs[i]);
    lua_call(L, 0, 0);
  }
  static const luaL_Reg redis[] = {{"call", l_call},
                                   {"acl_check_cmd", l_acl_check_cmd},
                                   {"pcall", l_pcall},
                                   {"status_reply", l_status_reply},
                                   {"error_reply", l_error_reply},
                                   {"log", l_log},
                                   {NULL, NULL}};
  lua_newtable(L);
  luaL_register(L, NULL, redis);
  static const char *const levels[] = {"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"};
  for (int i = 0; i < 4; i++) {
    lua_pushinteger(L, i);
    lua_setfield(L, -2, levels[i]);
  }
  lua_setglobal(L, "redis");
  if (luaL_dostring(L, err_handler) != 0) {
    lua_close(L);
    free(m);
    return NULL;
  }
  return m;
}

void memscript_free(memscript *m) {
  if (m == NULL) return;
  memscript_flush(m);
  free(m->cache);
  lua_close(m->L);
  free(m);
}

/* sha: 40 lowercase hex digits. */
static const struct cached *cache_find(const memscript *m, const char *sha) {
  for (size_t i = 0; i < m->ncache; i++)
    if (memcmp(m->cache[i].sha, sha, 40) == 0) return &m->cache[i];
  return NULL;
}

static void cache_add(memscript *m, const char *sha, const char *text, size_t len) {
  if (cache_find(m, sha)) return;
  if (m->ncache == m->capcache) {
    m->capcache = m->capcache ? 2 * m->capcache : 8;
    m->cache = mr_realloc(m->cache, m->capcache * sizeof *m->cache);
  }
  struct cached *c = &m->cache[m->ncache];
  c->text = mr_memdup(text, len);
  c->len = len;
  memcpy(c->sha, sha, 41);
  m->ncache++;
}

/* A SHA as given (any case) into 40 lowercase digits; false if not 40 long. */
static bool sha_arg(const char *s, size_t len, char out[41]) {
  if (len != 40) return false;
  for (size_t i = 0; i < 40; i++) out[i] = (char)tolower((unsigned char)s[i]);
  out[40] = '\0';
  return true;
}

/* Compiles text as EVAL does; NULL when it compiles, else the error. */
static bk_reply *compile_error(lua_State *L, const char *text, size_t len) {
  bk_reply *r = NULL;
  if (luaL_loadbuffer(L, text, len, "@user_script") != 0)
    r = mr_err("ERR Error compiling script (new function): %s", lua_tostring(L, -1));
  lua_settop(L, 0);
  return r;
}

bk_reply *memscript_load(memscript *m, const char *text, size_t len) {
  bk_reply *err = compile_error(m->L, text, len);
  if (err) return err;
  char sha[41];
  sha1_hex(text, len, sha);
  cache_add(m, sha, text, len);
  return mr_bulk(sha, 40);
}

bk_reply *memscript_exists(memscript *m, int argc, const char **argv, const size_t *argvlen) {
  bk_reply *r = mr_arr();
  for (int i = 2; i < argc; i++) {
    char sha[41];
    mr_push(r, mr_int(sha_arg(argv[i], argvlen[i], sha) && cache_find(m, sha) != NULL));
  }
  return r;
}

void memscript_flush(memscript *m) {
  for (size_t i = 0; i < m->ncache; i++) free(m->cache[i].text);
  m->ncache = 0;
}

/* [-0, +0] Sets global `name` to a table of argv[from .. from+n-1]. */
static void set_list(lua_State *L, const char *name, const char **argv, const size_t *argvlen,
                     int from, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushlstring(L, argv[from + i], argvlen[from + i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, name);
}

/* LuaJIT drops the frame of a function that tail-calls a C function
 * (`return redis.call(...)`), where Lua 5.1 keeps it, so the error handler
 * cannot always find the script line: a line hook tracks it instead. */
static void line_hook(lua_State *L, lua_Debug *ar) {
  if (lua_getinfo(L, "S", ar) && strcmp(ar->source, "@user_script") == 0)
    cur_line = ar->currentline;
}

/* [-0, +0] The error object at the top as Redis 7 replies it. */
static bk_reply *error_reply(lua_State *L, const char *sha) {
  if (!lua_istable(L, -1)) {
    const char *msg = lua_tostring(L, -1);
    return mr_err("ERR Error running script %s, %.100s", sha, msg ? msg : "execution failure");
  }
  lua_getfield(L, -1, "err");
  const char *err = lua_tostring(L, -1);
  bk_reply *r = cur_line > 0
                    ? mr_err("%s script: %s, on @user_script:%d.", err ? err : "ERR", sha, cur_line)
                    : mr_err("%s", err ? err : "ERR");
  lua_pop(L, 1);
  return r;
}

/* EVAL's and EVALSHA's numkeys (argv[2]): NULL when good, else the error. */
static bk_reply *numkeys_error(int argc, const char **argv, const size_t *argvlen,
                               long long *numkeys) {
  char nbuf[32];
  if (argvlen[2] == 0 || argvlen[2] >= sizeof nbuf)
    return mr_err("ERR value is not an integer or out of range");
  memcpy(nbuf, argv[2], argvlen[2]);
  nbuf[argvlen[2]] = '\0';
  char *end;
  *numkeys = strtoll(nbuf, &end, 10);
  if (*end != '\0' || (nbuf[0] == '0' && nbuf[1]) || nbuf[0] == '+' || nbuf[0] == ' ')
    return mr_err("ERR value is not an integer or out of range");
  if (*numkeys > argc - 3) return mr_err("ERR Number of keys can't be greater than number of args");
  if (*numkeys < 0) return mr_err("ERR Number of keys can't be negative");
  return NULL;
}

bk_reply *memscript_evalsha(memscript *m, int argc, const char **argv, const size_t *argvlen,
                            memscript_call_fn *call, memscript_known_fn *known, void *ctx) {
  long long numkeys;
  bk_reply *bad = numkeys_error(argc, argv, argvlen, &numkeys);
  if (bad) return bad;
  char sha[41];
  const struct cached *c = sha_arg(argv[1], argvlen[1], sha) ? cache_find(m, sha) : NULL;
  if (c == NULL) return mr_err("NOSCRIPT No matching script. Please use EVAL.");
  const char **v = mr_alloc((size_t)argc * sizeof *v);
  size_t *vlen = mr_alloc((size_t)argc * sizeof *vlen);
  memcpy(v, argv, (size_t)argc * sizeof *v);
  memcpy(vlen, argvlen, (size_t)argc * sizeof *vlen);
  v[1] = c->text;
  vlen[1] = c->len;
  bk_reply *r = memscript_eval(m, argc, v, vlen, call, known, ctx);
  free(v);
  free(vlen);
  return r;
}

bk_reply *memscript_eval(memscript *m, int argc, const char **argv, const size_t *argvlen,
                         memscript_call_fn *call, memscript_known_fn *known, void *ctx) {
  lua_State *L = m->L;
  char sha[41];
  long long numkeys;
  bk_reply *bad = numkeys_error(argc, argv, argvlen, &numkeys);
  if (bad) return bad;

  sha1_hex(argv[1], argvlen[1], sha);
  lua_settop(L, 0);
  lua_getglobal(L, "__redis__err__handler");
  if (luaL_loadbuffer(L, argv[1], argvlen[1], "@user_script") != 0) {
    bk_reply *r = mr_err("ERR Error compiling script (new function): %s", lua_tostring(L, -1));
    lua_settop(L, 0);
    return r;
  }
  cache_add(m, sha, argv[1], argvlen[1]); /* Redis keeps what EVAL compiled, for EVALSHA */
  set_list(L, "KEYS", argv, argvlen, 3, (int)numkeys);
  set_list(L, "ARGV", argv, argvlen, 3 + (int)numkeys, argc - 3 - (int)numkeys);
  cur_call = call;
  cur_known = known;
  cur_ctx = ctx;
  cur_line = 0;
  lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  int rc = lua_pcall(L, 0, 1, 1);
  lua_sethook(L, NULL, 0, 0);
  cur_call = NULL;
  cur_known = NULL;
  cur_ctx = NULL;
  bk_reply *r = rc == 0 ? to_reply(L) : error_reply(L, sha);
  lua_settop(L, 0);
  lua_gc(L, LUA_GCSTEP, 0);
  return r;
}
