/* corelib_http: the C half of ls.http in luastream.core (corelib_http.h).
 *
 * core.http sends a request with the host's HTTP client (job_http) and
 * yields until its answer, which core.http_result then turns into Lua values
 * inside the coroutine, where an error fails only this entry; the header
 * lines become a table only when the handler reads them. The Lua half
 * (luastream.lua) checks the options and builds the header lines. */
#include "corelib_http.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "http.h"
#include "jobs.h"
#include "json_decode.h"
#include "runtime.h"

#define HEADERS_STACK 32

static struct core *self(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* Raises "<the handler's line>: <message>": core.http is called by
 * luastream.lua's http_request, itself in tail position of ls.http.*, so
 * level 2 is the handler (0 is core.http). */
static int raise_at_handler(lua_State *L, const char *fmt, const char *a, const char *b) {
  luaL_where(L, 2);
  lua_pushfstring(L, fmt, a, b);
  lua_concat(L, 2);
  return lua_error(L);
}

/* core.http(name, method, url, {"Name: value", ...}, body|nil, timeout_ms,
 * max_body, follow_redirects): timeout_ms and max_body 0 take the host's
 * defaults. name is the Lua function, for errors. Does not yield when
 * nothing was sent: http_result says why. */
static int core_http(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  struct rt_job *job = jobs_running_on(self(L)->jobs, L);
  if (job == NULL)
    return raise_at_handler(L,
                            "%s may only be called while handling an entry, from the "
                            "handler's own coroutine (not while the file loads)%s",
                            name, "");
  const struct rt_env *env = self(L)->jobs->env;
  struct http_request req = {.method = luaL_checkstring(L, 2), .url = luaL_checkstring(L, 3)};
  luaL_checktype(L, 4, LUA_TTABLE);
  if (!lua_isnil(L, 5)) req.body = luaL_checklstring(L, 5, &req.body_len);
  lua_Number timeout = luaL_checknumber(L, 6), max_body = luaL_checknumber(L, 7);
  req.follow_redirects = lua_toboolean(L, 8);
  uint64_t def_timeout = env && env->http_timeout_ms ? env->http_timeout_ms : RT_HTTP_TIMEOUT_MS;
  size_t def_max = env && env->http_max_body ? env->http_max_body : RT_HTTP_MAX_BODY;
  /* at most a day: past it the cast would be undefined, and nothing waits a day */
  req.timeout_ms = timeout > 0 ? (timeout < 86400000 ? (uint64_t)timeout : 86400000) : def_timeout;
  req.max_body = max_body > 0 ? (max_body < 1e15 ? (size_t)max_body : (size_t)1e15) : def_max;

  size_t n = lua_objlen(L, 4);
  const char *stack_headers[HEADERS_STACK];
  const char **headers = stack_headers;
  if (n > HEADERS_STACK && (headers = malloc(n * sizeof *headers)) == NULL)
    return luaL_error(L, "%s: out of memory", name);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, 4, (int)i + 1);
    /* a string only: lua_tostring would turn a number into a new string the
     * table does not keep */
    headers[i] = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1); /* the table keeps the string alive */
    if (headers[i] == NULL) {
      if (headers != stack_headers) free(headers);
      return luaL_error(L, "%s: header line %d is not a string", name, (int)i + 1);
    }
  }
  req.headers = headers;
  req.nheaders = n;
  char err[256];
  int rc = http_request_check(&req, err, sizeof err) == 0 ? job_http(job, &req) : -4;
  if (headers != stack_headers) free(headers);
  if (rc == -4) return raise_at_handler(L, "%s: %s", name, err);
  if (rc == -1)
    return raise_at_handler(L, "%s: this host offers no HTTP client to handlers%s", name, "");
  if (rc == -2) return raise_at_handler(L, "%s: out of memory%s", name, "");
  if (rc == -3) return 0;
  return lua_yield(L, 0);
}

/* core.http_headers(text) -> {lower-case name = value} of header lines
 * ("Name: value\r\n" each); a name given more than once gets its values
 * joined with ", " (RFC 9110, 5.3). Called when a handler first reads
 * res.headers: most never do. */
static int core_http_headers(lua_State *L) {
  size_t len;
  const char *p = luaL_checklstring(L, 1, &len), *end = p + len;
  lua_createtable(L, 0, 8);
  luaL_Buffer b;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end;
    const char *colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon && colon > p) {
      const char *v = colon + 1, *ve = line_end;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      luaL_buffinit(L, &b);
      for (const char *k = p; k < colon; k++) luaL_addchar(&b, (char)tolower((unsigned char)*k));
      luaL_pushresult(&b); /* name */
      lua_pushvalue(L, -1);
      lua_rawget(L, -3); /* name, old */
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushlstring(L, v, (size_t)(ve - v));
      } else {
        lua_pushliteral(L, ", ");
        lua_pushlstring(L, v, (size_t)(ve - v));
        lua_concat(L, 3);
      }
      lua_rawset(L, -3);
    }
    p = eol ? eol + 1 : end;
  }
  return 1;
}

/* core.http_retry_after(text) -> the ms to wait that the Retry-After fields
 * among the header lines say (http_retry_after_lines), counted from now on
 * the host's wall clock (virtual in the test harness), or nil when there is
 * none, one is malformed or two disagree. Called when a handler first reads
 * res.retry_after. */
static int core_http_retry_after(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const struct rt_env *env = self(L)->jobs->env;
  uint64_t wall;
  if (env && env->clock) {
    wall = clock_wall(env->clock);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    wall = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  }
  uint64_t ms;
  if (http_retry_after_lines(text, len, wall, &ms) == 1)
    lua_pushnumber(L, (lua_Number)ms);
  else
    lua_pushnil(L);
  return 1;
}

/* core.http_result() -> status, header lines, body of the job's last core.http,
 * or nil and why (a timeout, a refused connection, TLS, a body over
 * max_body), and true after them when the client says the request itself
 * is at fault (http.h: the test harness has no answer for it), which the
 * Lua half raises. */
static int core_http_result(lua_State *L) {
  struct rt_job *job = jobs_running_on(self(L)->jobs, L);
  if (job == NULL) return luaL_error(L, "ls.http: no request of this coroutine");
  const char *err;
  bool fatal;
  const struct http_response *res = job_http_response(job, &err, &fatal);
  if (res == NULL) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    if (!fatal) return 2;
    lua_pushboolean(L, 1);
    return 3;
  }
  lua_pushinteger(L, (lua_Integer)res->status);
  lua_pushlstring(L, res->headers, res->headers_len);
  lua_pushlstring(L, res->body, res->body_len);
  return 3;
}

void core_http_open(lua_State *L, struct core *c) {
  static const luaL_Reg fns[] = {{"http", core_http},
                                 {"http_result", core_http_result},
                                 {"http_headers", core_http_headers},
                                 {"http_retry_after", core_http_retry_after},
                                 {"json_decode", json_decode_lua},
                                 {NULL, NULL}};
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushlightuserdata(L, c);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
}
