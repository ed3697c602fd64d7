/* corelib_pg: the C half of ls.pg in luastream.core (corelib_pg.h).
 *
 * core.pg_query sends a query with the host's pool (job_pg_query) and
 * yields until its answer, which core.pg_result then turns into rows inside
 * the coroutine. Parameters are sent as text, never spliced into the SQL.
 * The Lua half (luastream/pg.lua) makes transactions and ctx:pg_once of
 * these. */
#include "corelib_pg.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "pg.h"
#include "runtime.h"

#define PARAMS_STACK 16
#define PARAMS_MAX 65535 /* the protocol's limit */
#define VALUE_STACK 256  /* a value converted in a stack buffer up to this */

static struct core *self(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* Raises "<the handler's line>: <name>: <message>". core.pg_query is called
 * by pg.lua's run, in tail position of ls.pg.query and tx:query, so level 2
 * is the handler's line. */
static int raise_at_handler(lua_State *L, const char *name, const char *msg) {
  luaL_where(L, 2);
  lua_pushfstring(L, "%s: %s", name, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

static struct rt_job *running_job(lua_State *L, const char *name) {
  struct rt_job *job = jobs_running_on(self(L)->jobs, L);
  if (job == NULL)
    raise_at_handler(L, name,
                     "may only be called while handling an entry, from the handler's "
                     "own coroutine (not while the file loads)");
  return job;
}

static int raise_missing(lua_State *L, const char *name) {
  const struct rt_env *env = self(L)->jobs->env;
  return raise_at_handler(L, name, env && env->pg_missing ? env->pg_missing : RT_PG_MISSING);
}

/* A statement from the stack: the SQL at index 2, its parameters from index
 * 5 on (ls.pg.null at index 4), as text; numbers are replaced on the stack
 * by their text, which keeps it alive. Raises at the handler's line on what
 * cannot be sent. q->params is params, or an allocation the caller frees
 * (when it is not params). */
static void statement_from_stack(lua_State *L, const char *name, struct pg_query *q,
                                 const char **params) {
  size_t sql_len;
  const char *sql = luaL_checklstring(L, 2, &sql_len);
  if (strlen(sql) != sql_len) raise_at_handler(L, name, "the SQL text holds a NUL byte");
  int n = lua_gettop(L) - 4;
  if (n > PARAMS_MAX) raise_at_handler(L, name, "more than 65535 parameters");
  if (n > PARAMS_STACK && (params = malloc((size_t)n * sizeof *params)) == NULL)
    luaL_error(L, "%s: out of memory", name);
  char why[160] = "";
  for (int i = 0; i < n && !why[0]; i++) {
    int idx = 5 + i;
    size_t len;
    char num[64];
    switch (lua_type(L, idx)) {
      case LUA_TSTRING:
        params[i] = lua_tolstring(L, idx, &len);
        if (strlen(params[i]) != len)
          snprintf(why, sizeof why,
                   "parameter %d holds a NUL byte (text cannot; send bytes to a "
                   "bytea as hex: '\\x' .. hex)",
                   i + 1);
        break;
      case LUA_TNUMBER:
        pg_format_number(lua_tonumber(L, idx), num, sizeof num);
        lua_pushstring(L, num);
        lua_replace(L, idx);
        params[i] = lua_tostring(L, idx);
        break;
      case LUA_TBOOLEAN: params[i] = lua_toboolean(L, idx) ? "true" : "false"; break;
      case LUA_TNIL: params[i] = NULL; break;
      default:
        if (lua_rawequal(L, idx, 4)) {
          params[i] = NULL; /* ls.pg.null */
          break;
        }
        snprintf(why, sizeof why,
                 "parameter %d is a %s (strings, numbers, booleans, ls.pg.null "
                 "or nil)",
                 i + 1, luaL_typename(L, idx));
    }
  }
  *q = (struct pg_query){.sql = sql, .nparams = n, .params = params};
  if (why[0]) {
    if (n > PARAMS_STACK) free(params);
    raise_at_handler(L, name, why);
  }
}

/* Pushes nil, err and err's SQLSTATE, the three values of a failure
 * (docs/handlers.md, "Errors"). The code is the one err starts with:
 * job_pg_result and job_pg_session (jobs.h) give a failure only as that text,
 * "SQLSTATE: message (the query's first words)", with the server's code or
 * one of PostgreSQL's client-side codes (pg.h); core_pg_defer writes it the
 * same way. nil only for a text without one. Returns 3.
 * [-0, +3] */
static int push_failure(lua_State *L, const char *err) {
  char state[6];
  lua_pushnil(L);
  lua_pushstring(L, err);
  if (pg_sqlstate_of(err, state))
    lua_pushstring(L, state);
  else
    lua_pushnil(L);
  return 3;
}

/* core.pg_query(name, sql, on_session, null, p1, ..., pn): yields until the
 * answer; does not yield when nothing was sent (pg_result says why). */
static int core_pg_query(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  bool on_session = lua_toboolean(L, 3);
  struct rt_job *job = running_job(L, name);
  const char *stack_params[PARAMS_STACK];
  struct pg_query q;
  statement_from_stack(L, name, &q, stack_params);
  int rc = job_pg_query(job, &q, on_session);
  if (q.params != stack_params) free((void *)q.params);
  if (rc == -1) return raise_missing(L, name);
  if (rc == -2) return raise_at_handler(L, name, "out of memory");
  if (rc == -4) return raise_at_handler(L, name, "the transaction is over");
  if (rc == -3) return 0;
  return lua_yield(L, 0);
}

/* core.pg_defer(name, sql, _, null, p1, ..., pn) -> true, or nil, why and
 * its SQLSTATE (08006):
 * the statement goes with the transaction's next query or its COMMIT. */
static int core_pg_defer(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  struct rt_job *job = running_job(L, name);
  const char *stack_params[PARAMS_STACK];
  struct pg_query q;
  statement_from_stack(L, name, &q, stack_params);
  const char *err = NULL;
  int rc = job_pg_defer(job, &q, &err);
  if (q.params != stack_params) free((void *)q.params);
  if (rc == -4) return raise_at_handler(L, name, "the transaction is over");
  if (rc != 0) {
    lua_pushfstring(L, "%s: %s", PG_STATE_LOST, err);
    return push_failure(L, lua_tostring(L, -1));
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* Pushes a value of type oid from its text. */
static void push_value(lua_State *L, uint32_t oid, const char *text, size_t len) {
  char stack_buf[VALUE_STACK + PG_VALUE_SLACK];
  char *buf = len <= VALUE_STACK ? stack_buf : malloc(len + PG_VALUE_SLACK);
  if (buf == NULL) luaL_error(L, "ls.pg: out of memory");
  struct pg_value v;
  pg_value_from_text(oid, text, len, buf, &v);
  switch (v.kind) {
    case PG_VALUE_NUMBER: lua_pushnumber(L, v.number); break;
    case PG_VALUE_BOOLEAN: lua_pushboolean(L, v.boolean); break;
    default: lua_pushlstring(L, v.str, v.len); break;
  }
  if (buf != stack_buf) free(buf);
}

/* core.pg_result(null) -> rows of the job's last query ({ {col = value}, ...,
 * affected = n }, NULL as null), or nil, "SQLSTATE: message (query)" and
 * the SQLSTATE. */
static int core_pg_result(lua_State *L) {
  struct rt_job *job = running_job(L, "ls.pg");
  const char *err;
  const struct pg_result *res = job_pg_result(job, &err);
  if (res == NULL) return push_failure(L, err);
  int nrows = pg_result_rows(res), ncols = pg_result_columns(res);
  luaL_checkstack(L, ncols + 8, "ls.pg: too many columns");
  int names = lua_gettop(L) + 1;
  for (int c = 0; c < ncols; c++) lua_pushstring(L, pg_result_name(res, c));
  lua_createtable(L, nrows, 1);
  int rows = lua_gettop(L);
  for (int r = 0; r < nrows; r++) {
    lua_createtable(L, 0, ncols);
    for (int c = 0; c < ncols; c++) {
      lua_pushvalue(L, names + c);
      size_t len;
      const char *text = pg_result_value(res, r, c, &len);
      if (text == NULL)
        lua_pushvalue(L, 1);
      else
        push_value(L, pg_result_type(res, c), text, len);
      lua_rawset(L, -3);
    }
    lua_rawseti(L, rows, r + 1);
  }
  lua_pushnumber(L, pg_result_affected(res));
  lua_setfield(L, rows, "affected");
  return 1;
}

/* core.pg_begin(name): yields until a connection is checked out for the
 * job; pg_begun says whether one was. */
static int core_pg_begin(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  struct rt_job *job = running_job(L, name);
  int rc = job_pg_begin(job);
  if (rc == -1) return raise_missing(L, name);
  if (rc == -2) return raise_at_handler(L, name, "out of memory");
  if (rc == -4) return raise_at_handler(L, name, "already inside a transaction (use its tx:query)");
  if (rc == -3) return 0;
  return lua_yield(L, 0);
}

/* core.pg_begun() -> true, or nil, why no connection came and its
 * SQLSTATE. */
static int core_pg_begun(lua_State *L) {
  const char *err;
  if (job_pg_session(running_job(L, "ls.pg.transaction"), &err)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  return push_failure(L, err);
}

/* core.pg_end(): the job's transaction connection goes back to the pool. */
static int core_pg_end(lua_State *L) {
  job_pg_end(running_job(L, "ls.pg.transaction"));
  return 0;
}

/* core.pg_discard(): the transaction's tx:exec statements not sent yet are
 * dropped (it rolls back). */
static int core_pg_discard(lua_State *L) {
  job_pg_discard(running_job(L, "ls.pg.transaction"));
  return 0;
}

/* core.pg_once_table() -> the table ctx:pg_once records entries in. */
static int core_pg_once_table(lua_State *L) {
  const struct rt_env *env = self(L)->jobs->env;
  lua_pushstring(L, env && env->pg_once_table ? env->pg_once_table : RT_PG_ONCE_TABLE);
  return 1;
}

void core_pg_open(lua_State *L, struct core *c) {
  static const luaL_Reg fns[] = {{"pg_query", core_pg_query},
                                 {"pg_result", core_pg_result},
                                 {"pg_begin", core_pg_begin},
                                 {"pg_begun", core_pg_begun},
                                 {"pg_end", core_pg_end},
                                 {"pg_once_table", core_pg_once_table},
                                 {"pg_defer", core_pg_defer},
                                 {"pg_discard", core_pg_discard},
                                 {NULL, NULL}};
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushlightuserdata(L, c);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
}
