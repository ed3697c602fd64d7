/* jobs: entries in coroutines; see jobs.h. */
#include "jobs.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "clock.h"
#include "entry.h"
#include "http.h"
#include "pg.h"
#include "watchdog.h"
#include "wire.h"

enum job_op { OP_NONE, OP_SLEEP, OP_CALL, OP_HTTP, OP_PG };

/* One ls.redis.call, ls.http request or ls.pg query in flight: what the broker's or the
 * HTTP client's callback holds. Either calls back exactly once, possibly long after the job stopped waiting for
 * it (it timed out, was abandoned, or its state closed): job is then NULL and
 * the reply is dropped without touching Lua. Records are kept on a free list,
 * so steady calls allocate nothing. */
struct call {
  struct rt_job *job; /* the job waiting for this reply, else NULL */
  struct call *next;  /* the free list */
};

#define CALLS_KEPT 256 /* spare records kept for reuse */
static struct call *spare_calls;
static size_t nspare_calls;

static struct call *call_get(void) {
  struct call *c = spare_calls;
  if (c) {
    spare_calls = c->next;
    nspare_calls--;
    return c;
  }
  return malloc(sizeof *c);
}

void jobs_calls_trim(void) {
  while (spare_calls) {
    struct call *c = spare_calls;
    spare_calls = c->next;
    free(c);
  }
  nspare_calls = 0;
}

static void call_put(struct call *c) {
  if (nspare_calls >= CALLS_KEPT) {
    free(c);
    return;
  }
  c->next = spare_calls;
  spare_calls = c;
  nspare_calls++;
}

/* One entry running in its own coroutine. */
struct rt_job {
  struct jobs *pool;
  lua_State *co;   /* the coroutine; anchored by co_ref */
  int co_ref;      /* registry ref keeping co alive */
  double seq;      /* which delivery this is (core.entry checks it) */
  struct entry *e; /* borrowed from the caller until done */
  rt_done_fn *done;
  void *data;
  enum job_op op;    /* what the coroutine waits for, OP_NONE while running */
  ltimer *timer;     /* ls.sleep, a call's timeout; created on first use */
  struct call *call; /* OP_CALL, OP_HTTP: the call in flight */
  uint64_t call_timeout_ms;
  char call_name[192]; /* the command (and another server's URL), or method and URL */
  /* A call's answer while the job runs after it (job_call_reply,
   * job_http_response): the reply or response (the broker's or the
   * client's, valid until the coroutine next yields), else why not. */
  const bk_reply *reply;
  const struct http_response *response;
  const char *reply_err;
  bool reply_fatal; /* the HTTP client says the request itself is at fault */
  char reply_why[320];
  const pg_result *pg_res;    /* OP_PG's answer, the pool's until the coroutine yields */
  pg_session *session;        /* ls.pg.transaction's connection, held until job_pg_end */
  struct rt_job *prev, *next; /* the pool's running jobs, for jobs_abandon */
};

void jobs_init(struct jobs *j, lua_State *L, const struct handler_spec *spec, const char *version,
               const struct rt_env *env) {
  memset(j, 0, sizeof *j);
  j->L = L;
  j->spec = spec;
  j->version = version;
  j->env = env;
  j->dispatch_ref = LUA_NOREF;
}

/* The job stops waiting for its call, if any: the reply will be dropped. */
static void call_detach(struct rt_job *job) {
  if (job->call) job->call->job = NULL;
  job->call = NULL;
}

/* The job's transaction connection goes back to the pool (closed when a
 * transaction is still open on it: that ends the transaction). */
static void session_end(struct rt_job *job) {
  if (job->session) pg_session_close(job->session);
  job->session = NULL;
}

static void job_destroy(struct jobs *j, struct rt_job *job) {
  call_detach(job);
  session_end(job);
  luaL_unref(j->L, LUA_REGISTRYINDEX, job->co_ref); /* the coroutine is garbage now */
  if (job->timer) timer_free(job->timer);
  free(job);
}

void jobs_free(struct jobs *j) {
  while (j->idle) {
    struct rt_job *job = j->idle;
    j->idle = job->next;
    job_destroy(j, job);
  }
  free(j->scratch);
  free(j->scratch_len);
  free(j->scratch_writes);
  j->scratch = NULL;
  j->scratch_len = NULL;
  j->scratch_writes = NULL;
}

/* Takes job off its pool's list of running jobs. */
static void job_unlink(struct rt_job *job) {
  struct jobs *j = job->pool;
  if (job->prev)
    job->prev->next = job->next;
  else
    j->running = job->next;
  if (job->next) job->next->prev = job->prev;
  job->prev = job->next = NULL;
}

/* Tells the owner of a released pool that no job runs any more. The pool may
 * be freed by the call: nothing may touch it after. */
static void drain_if_done(struct jobs *j) {
  if (j->drained && j->count == 0) j->drained(j->drained_data);
}

void jobs_release(struct jobs *j, jobs_drained_fn *drained, void *data) {
  j->drained = drained;
  j->drained_data = data;
  drain_if_done(j);
}

size_t jobs_abandon(struct jobs *j, rt_abandon_fn *abandoned) {
  size_t n = 0;
  /* From a loop callback only: a running coroutine cannot be dropped under
   * its own feet, and run() would touch the job after it returns. */
  if (j->current) return 0;
  while (j->running) {
    struct rt_job *job = j->running;
    struct entry *e = job->e;
    void *data = job->data;
    job_unlink(job);
    /* Unanchored, the suspended coroutine is garbage; lua_close frees it at
     * the latest. Its timer goes now, so ls.sleep never resumes it. */
    job_destroy(j, job);
    j->count--;
    n++;
    if (abandoned) abandoned(data, e);
  }
  drain_if_done(j);
  return n;
}

/* A job for the next entry: an idle one, else a new one with a new coroutine. */
static struct rt_job *job_get(struct jobs *j) {
  struct rt_job *job = j->idle;
  if (job) {
    j->idle = job->next;
    job->next = NULL;
    return job;
  }
  job = calloc(1, sizeof *job);
  if (job == NULL) return NULL;
  job->pool = j;
  job->co = lua_newthread(j->L);
  job->co_ref = luaL_ref(j->L, LUA_REGISTRYINDEX);
  return job;
}

/* The job's entry is done with. A coroutine that returned can run the next
 * entry (reusable); one that raised or was left suspended cannot. */
static void job_end(struct rt_job *job, bool reusable) {
  struct jobs *j = job->pool;
  job_unlink(job);
  j->count--;
  if (reusable && !j->drained) {
    /* A wait the handler caught (ls.sleep under a C boundary raises after
     * arming the timer) must not fire on the idle job. */
    if (job->timer) timer_stop(job->timer);
    call_detach(job);
    session_end(job);
    job->op = OP_NONE;
    job->pg_res = NULL;
    job->reply = NULL;
    job->response = NULL;
    job->reply_err = NULL;
    job->reply_fatal = false;
    lua_settop(job->co, 0);
    job->e = NULL;
    job->done = NULL;
    job->data = NULL;
    job->next = j->idle;
    j->idle = job;
  } else {
    job_destroy(j, job);
  }
  drain_if_done(j);
}

static void report(struct rt_job *job, const struct rt_result *res) {
  const struct jobs *j = job->pool;
  struct rt_result r = *res;
  r.version = j->version;
  if (j->env && j->env->on_delivery)
    j->env->on_delivery(j->env->on_delivery_data, j->spec, job->e, &r);
  job->done(job->data, job->e, &r);
}

static int ensure_scratch(struct jobs *j, size_t nfields, size_t nwrites) {
  if (nfields > j->scratch_cap) {
    size_t cap = nfields < 16 ? 16 : nfields * 2;
    const char **f = realloc(j->scratch, cap * sizeof *f);
    if (f) j->scratch = f;
    size_t *l = realloc(j->scratch_len, cap * sizeof *l);
    if (l) j->scratch_len = l;
    if (!f || !l) return -1;
    j->scratch_cap = cap;
  }
  if (nwrites > j->scratch_writes_cap) {
    size_t cap = nwrites < 4 ? 4 : nwrites * 2;
    struct rt_write *w = realloc(j->scratch_writes, cap * sizeof *w);
    if (w == NULL) return -1;
    j->scratch_writes = w;
    j->scratch_writes_cap = cap;
  }
  return 0;
}

/* Reads the writes table at idx ({ {cmd, arg, ...}, ... }, strings) into
 * the pool's scratch arrays; the strings stay anchored by the table. */
static int read_writes(struct jobs *j, lua_State *co, int idx, struct rt_result *res) {
  if (!lua_istable(co, idx)) return 0;
  size_t nwrites = lua_objlen(co, idx), nargs = 0;
  for (size_t w = 1; w <= nwrites; w++) {
    lua_rawgeti(co, idx, (int)w);
    nargs += lua_objlen(co, -1);
    lua_pop(co, 1);
  }
  if (ensure_scratch(j, nargs, nwrites) != 0) return -1;
  size_t at = 0;
  for (size_t w = 0; w < nwrites; w++) {
    struct rt_write *out = &j->scratch_writes[w];
    lua_rawgeti(co, idx, (int)w + 1); /* ... write */
    out->argc = lua_objlen(co, -1);
    out->argv = j->scratch + at;
    out->argvlen = j->scratch_len + at;
    for (size_t i = 0; i < out->argc; i++, at++) {
      lua_rawgeti(co, -1, (int)i + 1);
      j->scratch[at] = lua_tolstring(co, -1, &j->scratch_len[at]);
      lua_pop(co, 1);
    }
    lua_pop(co, 1);
  }
  res->nwrites = nwrites;
  res->writes = j->scratch_writes;
  return 0;
}

/* The code at idx of co's stack, or -1 when it holds no integer. */
static long long code_at(lua_State *co, int idx) {
  if (lua_type(co, idx) != LUA_TNUMBER) return -1;
  lua_Number n = lua_tonumber(co, idx);
  return n >= 0 && n < 1024 && n == (lua_Number)(long long)n ? (long long)n : -1;
}

/* A result the dispatcher should not have given: bad-return, with why. */
static struct rt_result bad_code(const char *text) {
  return (struct rt_result){
      .kind = RT_ERROR, .reason = REASON_BAD_RETURN, .text = text, .text_len = strlen(text)};
}

/* The dispatcher returned; its results are on co's stack (see outcome() in
 * luastream/handler.lua): an outcome code (core.outcomes, enum rt_outcome),
 * then what that outcome carries; for an error, a reason code
 * (core.reasons, enum wire_reason) and the message. */
static void finish_returned(struct rt_job *job) {
  lua_State *co = job->co;
  struct rt_result res = {.kind = RT_ACK};
  long long kind = lua_isnoneornil(co, 1) ? RT_ACK : code_at(co, 1);
  switch (kind) {
    case RT_ACK:
    case RT_REPLY:
      res.kind = (enum rt_outcome)kind;
      if (read_writes(job->pool, co, 2, &res) != 0) {
        res = (struct rt_result){
            .kind = RT_ERROR, .reason = REASON_HANDLER_ERROR, .text = "out of memory"};
        res.text_len = strlen(res.text);
      }
      break;
    case RT_RETRY: res.kind = RT_RETRY; break;
    case RT_RETRY_AFTER:
      res.kind = RT_RETRY_AFTER;
      res.delay_ms = (int64_t)lua_tonumber(co, 2);
      break;
    case RT_REJECT:
      res.kind = RT_REJECT;
      res.text = lua_tolstring(co, 2, &res.text_len);
      break;
    case RT_ERROR:
    case RT_INVALID:
      res.kind = (enum rt_outcome)kind;
      res.reason = wire_reason_text(code_at(co, 2));
      res.text = lua_tolstring(co, 3, &res.text_len);
      if (res.reason == NULL) res = bad_code("the dispatcher returned an error without a reason");
      break;
    default: res = bad_code("the dispatcher returned no outcome code"); break;
  }
  report(job, &res);
  job_end(job, true);
}

static void finish_failed(struct rt_job *job, const char *why) {
  lua_State *L = job->pool->L;
  const char *msg = why ? why : lua_tostring(job->co, -1);
  if (msg == NULL)
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(job->co, -1));
  luaL_traceback(L, job->co, msg, 0);
  struct rt_result res = {.kind = RT_ERROR, .reason = REASON_HANDLER_ERROR};
  res.text = lua_tolstring(L, -1, &res.text_len);
  report(job, &res);
  lua_settop(L, 0); /* before job_end, which may close the state */
  job_end(job, false);
}

/* The one place a job's coroutine is resumed. */
static void run(struct rt_job *job, int nargs) {
  struct jobs *j = job->pool;
  const struct handler_spec *s = j->spec;
  j->current = job;
  watchdog_enter(s->name, s->path, s->stream, s->group, job->e ? job->e->id : NULL);
  int rc = lua_resume(job->co, nargs);
  watchdog_leave();
  j->current = NULL;
  /* A call's reply is the broker's only during its callback (a response the
   * client's): whatever the coroutine did not take of it is gone now. */
  job->reply = NULL;
  job->response = NULL;
  job->pg_res = NULL;
  if (rc == LUA_YIELD) {
    if (job->op != OP_NONE) return; /* waiting: a loop callback resumes it */
    finish_failed(job, "coroutine.yield called in a handler: only ls.sleep and ls.redis may wait");
    return;
  }
  /* Finished with a wait still armed (its yield raised across a C boundary
   * and the handler caught it): nothing may resume this coroutine again. */
  if (job->timer) timer_stop(job->timer);
  call_detach(job);
  job->op = OP_NONE;
  if (rc == 0) {
    finish_returned(job);
  } else {
    finish_failed(job, NULL);
  }
}

int jobs_start(struct jobs *j, struct entry *e, int p, rt_done_fn *done, void *data) {
  struct rt_job *job = job_get(j);
  if (job == NULL) return -1;
  job->e = e;
  job->done = done;
  job->data = data;
  job->seq = ++j->last_seq;
  j->count++;
  job->next = j->running;
  if (j->running) j->running->prev = job;
  j->running = job;

  lua_State *co = job->co;
  lua_rawgeti(co, LUA_REGISTRYINDEX, j->dispatch_ref);
  lua_pushnumber(co, job->seq);
  if (p < 0) {
    run(job, 1);
  } else {
    lua_pushinteger(co, p);
    run(job, 2);
  }
  return 0;
}

/* ---- for host functions ---- */

struct rt_job *jobs_running_on(const struct jobs *j, const lua_State *co) {
  return j->current && j->current->co == co ? j->current : NULL;
}

struct entry *jobs_entry(const struct jobs *j, double seq) {
  return j->current && j->current->seq == seq ? j->current->e : NULL;
}

/* The job's timer: a sleep is over, or a call waited too long. */
static void timer_done(ltimer *t, void *data) {
  (void)t;
  struct rt_job *job = data;
  if (job->op == OP_CALL) {
    call_detach(job);
    snprintf(job->reply_why, sizeof job->reply_why,
             "redis %s: no reply within %llums (the command may still run on the server)",
             job->call_name, (unsigned long long)job->call_timeout_ms);
    job->reply_err = job->reply_why;
  } else if (job->op == OP_HTTP) {
    call_detach(job);
    snprintf(job->reply_why, sizeof job->reply_why, "http %s: no response within %llums",
             job->call_name, (unsigned long long)job->call_timeout_ms);
    job->reply_err = job->reply_why;
  }
  job->op = OP_NONE;
  run(job, 0);
}

/* Arms the job's timer; false when there is no clock or no memory. */
static int arm(struct rt_job *job, uint64_t ms) {
  const struct rt_env *env = job->pool->env;
  lclock *clock = env ? env->clock : NULL;
  if (clock == NULL) return -1;
  if (job->timer == NULL) job->timer = timer_new(clock, timer_done, job);
  if (job->timer == NULL) return -2;
  timer_start(job->timer, ms);
  return 0;
}

/* A new wait: a call the handler gave up on (its yield raised and was
 * caught) is forgotten, and so is the last call's answer. */
static void wait_reset(struct rt_job *job) {
  call_detach(job);
  job->pg_res = NULL;
  job->reply = NULL;
  job->response = NULL;
  job->reply_err = NULL;
  job->reply_fatal = false;
  job->op = OP_NONE;
}

int job_sleep(struct rt_job *job, uint64_t ms) {
  wait_reset(job);
  int rc = arm(job, ms);
  if (rc == 0) job->op = OP_SLEEP;
  return rc;
}

/* The job a call's answer is for, done waiting; NULL when nobody waits for
 * it any more (the answer is dropped). The call record is free again. */
static struct rt_job *call_answered(struct call *c) {
  struct rt_job *job = c->job;
  call_put(c);
  if (job == NULL) return NULL;
  job->call = NULL;
  if (job->timer) timer_stop(job->timer); /* ls.pg's deadline is the pool's */
  job->op = OP_NONE;
  return job;
}

static void call_done(void *data, const bk_reply *r, const char *err) {
  struct rt_job *job = call_answered(data);
  if (job == NULL) return;
  job->reply = r;
  if (r == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "redis %s: %s", job->call_name,
             err ? err : "no reply");
    job->reply_err = job->reply_why;
  }
  run(job, 0);
  /* The reply is the broker's only during this callback. The job may be
   * gone or reused by now, but then its answer was cleared (job_end). */
}

/* Sends argv on conn of b for job (see job_call); server: NULL for the
 * host's own, else the redacted URL that messages name. */
static int call_send(struct rt_job *job, broker *b, bk_conn *conn, const char *server, int argc,
                     const char **argv, const size_t *argvlen, uint64_t timeout_ms);

int job_call(struct rt_job *job, int argc, const char **argv, const size_t *argvlen,
             uint64_t timeout_ms) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->broker == NULL || env->calls == NULL || env->clock == NULL) return -1;
  return call_send(job, env->broker, env->calls, NULL, argc, argv, argvlen, timeout_ms);
}

int job_call_on(struct rt_job *job, const char *url, const char *server, int argc,
                const char **argv, const size_t *argvlen, uint64_t timeout_ms) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->connect == NULL || env->clock == NULL) return -1;
  broker *b = NULL;
  bk_conn *conn = NULL;
  char err[256];
  if (env->connect(env->connect_data, url, &b, &conn, err, sizeof err) != 0) {
    snprintf(job->reply_why, sizeof job->reply_why, "redis %.*s (%s): %s", (int)argvlen[0], argv[0],
             server, err);
    job->reply_err = job->reply_why;
    return -3;
  }
  if (b == NULL || conn == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why,
             "redis %.*s (%s): not connected (the host is not running)", (int)argvlen[0], argv[0],
             server);
    job->reply_err = job->reply_why;
    return -3;
  }
  return call_send(job, b, conn, server, argc, argv, argvlen, timeout_ms);
}

static int call_send(struct rt_job *job, broker *b, bk_conn *conn, const char *server, int argc,
                     const char **argv, const size_t *argvlen, uint64_t timeout_ms) {
  const struct rt_env *env = job->pool->env;
  if (timeout_ms == 0)
    timeout_ms = env->call_timeout_ms ? env->call_timeout_ms : RT_CALL_TIMEOUT_MS;
  /* The timer first: once the command is sent, nothing may fail unsaid. */
  if (job->timer == NULL) job->timer = timer_new(env->clock, timer_done, job);
  if (job->timer == NULL) return -2;
  struct call *c = call_get();
  if (c == NULL) return -2;
  c->job = job;
  c->next = NULL;
  int n = argvlen[0] < 32 ? (int)argvlen[0] : 32;
  if (server)
    snprintf(job->call_name, sizeof job->call_name, "%.*s (%s)", n, argv[0], server);
  else
    snprintf(job->call_name, sizeof job->call_name, "%.*s", n, argv[0]);
  if (bk_command(b, conn, argc, argv, argvlen, call_done, c) != 0) {
    call_put(c);
    snprintf(job->reply_why, sizeof job->reply_why,
             "redis %s: not connected (the host reconnects by itself)", job->call_name);
    job->reply_err = job->reply_why;
    return -3;
  }
  job->call_timeout_ms = timeout_ms;
  job->call = c;
  timer_start(job->timer, timeout_ms);
  job->op = OP_CALL;
  return 0;
}

const bk_reply *job_call_reply(struct rt_job *job, const char **err) {
  const bk_reply *r = job->reply;
  *err = r ? NULL : job->reply_err ? job->reply_err : "redis: no call was made";
  job->reply = NULL;
  job->reply_err = NULL;
  return r;
}

static void http_done(void *data, const struct http_response *res, const char *err, bool fatal) {
  struct rt_job *job = call_answered(data);
  if (job == NULL) return;
  job->response = res;
  if (res == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "http %s: %s", job->call_name,
             err ? err : "no response");
    job->reply_err = job->reply_why;
    job->reply_fatal = fatal;
  }
  run(job, 0);
}

int job_http(struct rt_job *job, const struct http_request *req) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->http == NULL || env->clock == NULL) return -1;
  if (job->timer == NULL) job->timer = timer_new(env->clock, timer_done, job);
  if (job->timer == NULL) return -2;
  struct call *c = call_get();
  if (c == NULL) return -2;
  c->job = job;
  c->next = NULL;
  char url[160];
  snprintf(job->call_name, sizeof job->call_name, "%s %s", req->method,
           http_redact_url(req->url, url, sizeof url));
  if (http_request(env->http, req, http_done, c) != 0) {
    call_put(c);
    snprintf(job->reply_why, sizeof job->reply_why,
             "http %s: not sent (out of memory, or the host is stopping)", job->call_name);
    job->reply_err = job->reply_why;
    return -3;
  }
  /* The client has the same limit; the job's timer keeps it on the host's
   * clock (the virtual one in the harness). */
  job->call_timeout_ms = req->timeout_ms;
  job->call = c;
  timer_start(job->timer, req->timeout_ms);
  job->op = OP_HTTP;
  return 0;
}

const struct http_response *job_http_response(struct rt_job *job, const char **err, bool *fatal) {
  const struct http_response *r = job->response;
  *err = r ? NULL : job->reply_err ? job->reply_err : "http: no request was made";
  *fatal = r == NULL && job->reply_fatal;
  job->response = NULL;
  job->reply_err = NULL;
  job->reply_fatal = false;
  return r;
}

const struct entry *job_entry(const struct rt_job *job) { return job->e; }

/* ---- ls.pg ---- */

static void pg_done(void *data, const pg_result *res, const struct pg_error *err) {
  struct rt_job *job = call_answered(data);
  if (job == NULL) return;
  job->pg_res = res;
  if (res == NULL) {
    char head[48];
    snprintf(job->reply_why, sizeof job->reply_why, "%s: %.240s (%.48s)", err->sqlstate,
             err->message, err->sql ? pg_sql_head(err->sql, head, sizeof head) : job->call_name);
    job->reply_err = job->reply_why;
  }
  run(job, 0);
}

static void pg_session_ready(void *data, pg_session *s, const struct pg_error *err) {
  struct rt_job *job = call_answered(data);
  if (job == NULL) {
    if (s) pg_session_close(s); /* nobody wants it any more */
    return;
  }
  job->session = s;
  if (s == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "%s: %.240s (%.48s)", err->sqlstate,
             err->message, job->call_name);
    job->reply_err = job->reply_why;
  }
  run(job, 0);
}

/* A call record for job's next wait on the pool. */
static struct call *pg_call(struct rt_job *job) {
  struct call *c = call_get();
  if (c == NULL) return NULL;
  c->job = job;
  c->next = NULL;
  return c;
}

int job_pg_query(struct rt_job *job, const struct pg_query *q, bool on_session) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->pg == NULL) return -1;
  if (on_session && job->session == NULL) return -4;
  pg_sql_head(q->sql, job->call_name, 48);
  struct call *c = pg_call(job);
  if (c == NULL) return -2;
  char err[256];
  int rc = on_session ? pg_session_query(job->session, q, pg_done, c, err, sizeof err)
                      : pg_query(env->pg, q, pg_done, c, err, sizeof err);
  if (rc != 0) {
    call_put(c);
    snprintf(job->reply_why, sizeof job->reply_why, "%s: %.200s (%.48s)", PG_STATE_LOST, err,
             job->call_name);
    job->reply_err = job->reply_why;
    return -3;
  }
  job->call = c;
  job->op = OP_PG;
  return 0;
}

int job_pg_defer(struct rt_job *job, const struct pg_query *q, const char **err) {
  if (job->session == NULL) return -4;
  if (pg_session_defer(job->session, q, job->reply_why, sizeof job->reply_why) != 0) {
    *err = job->reply_why;
    return -3;
  }
  return 0;
}

const pg_result *job_pg_result(struct rt_job *job, const char **err) {
  const pg_result *r = job->pg_res;
  *err = r ? NULL : job->reply_err ? job->reply_err : "ls.pg: no query was made";
  job->pg_res = NULL;
  job->reply_err = NULL;
  return r;
}

int job_pg_begin(struct rt_job *job) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->pg == NULL) return -1;
  if (job->session) return -4;
  if ((job->session = pg_session_take(env->pg)) != NULL) return -3;
  snprintf(job->call_name, sizeof job->call_name, "BEGIN");
  struct call *c = pg_call(job);
  if (c == NULL) return -2;
  char err[256];
  if (pg_session_open(env->pg, 0, pg_session_ready, c, err, sizeof err) != 0) {
    call_put(c);
    snprintf(job->reply_why, sizeof job->reply_why, "%s: %.200s (BEGIN)", PG_STATE_CONNECT, err);
    job->reply_err = job->reply_why;
    return -3;
  }
  job->call = c;
  job->op = OP_PG;
  return 0;
}

bool job_pg_session(struct rt_job *job, const char **err) {
  *err = job->session ? NULL : job->reply_err ? job->reply_err : "ls.pg: no transaction";
  job->reply_err = NULL;
  return job->session != NULL;
}

void job_pg_end(struct rt_job *job) { session_end(job); }

void job_pg_discard(struct rt_job *job) {
  if (job->session) pg_session_discard(job->session);
}
