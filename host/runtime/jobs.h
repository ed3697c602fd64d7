/* jobs: a handler's entries running in coroutines of its Lua state.
 *
 * One job per entry, each with a coroutine resumed in exactly one place (run()
 * in jobs.c). A job whose coroutine returned goes back to an idle list with
 * its coroutine and its timer, so the next entry allocates nothing. A job
 * waits (ls.sleep) by arming its timer and yielding; the timer's callback
 * resumes it. A Redis call (ls.redis.call) waits the same way for the
 * broker's reply, with the timer as its timeout; a reply that comes after
 * the job stopped waiting is dropped; an HTTP request (ls.http) waits
 * likewise, and so does a PostgreSQL query (ls.pg), whose deadline is the
 * pool's. The dispatcher's return values (codes: core.outcomes and
 * core.reasons) become an rt_result for the job's done callback. The pool
 * knows nothing of loading or generations: runtime.c owns those, and is
 * told through a callback when a released pool has no job left.
 *
 * Files: jobs.c (the pool, a job from start to done, the one resume, the
 * job's timer); one file per way of waiting, jobs_wait_sleep.c (ls.sleep),
 * jobs_wait_redis.c (ls.redis), jobs_wait_http.c (ls.http), jobs_wait_pg.c
 * (ls.pg); what they share, jobs_wait.c (the job record, in jobs_wait.h,
 * and call records). */
#ifndef LUASTREAM_JOBS_H
#define LUASTREAM_JOBS_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmem.h"
#include "runtime.h"

struct rt_job;

typedef void jobs_drained_fn(void *data);
typedef void jobs_renew_fn(void *data);

/* The jobs of one handler state. Fields are read by host functions
 * (corelib.c); only jobs.c changes them, but for dispatch_ref (set by
 * handler_bind). */
struct jobs {
  lua_State *L;
  struct lmem *mem;                /* L's memory: enforced while a job runs */
  const struct handler_spec *spec; /* for the watchdog, host functions, on_delivery */
  const char *version;             /* into every result (rt_result.version) */
  const struct rt_env *env;        /* clock for ls.sleep; on_delivery; may be NULL */
  int dispatch_ref;       /* registry ref of the dispatch function, LUA_NOREF before bind */
  size_t count;           /* running jobs (started and not finished) */
  struct rt_job *running; /* those not being reported, linked through prev/next */
  struct rt_job *current; /* the job whose coroutine is running now, else NULL */
  struct rt_job *idle;    /* finished jobs kept for reuse, linked through next */
  double last_seq;        /* the seq of the newest job */
  const char **scratch;   /* write field pointers, reused across jobs */
  size_t *scratch_len;
  size_t scratch_cap;
  struct rt_write *scratch_writes;
  size_t scratch_writes_cap;
  jobs_drained_fn *drained; /* set by jobs_release */
  void *drained_data;
  jobs_renew_fn *renew; /* set by jobs_on_memory */
  void *renew_data;
  unsigned long renewals; /* how often renew gave the pool a fresh state */
};

/* An empty pool on L; spec, version and env are borrowed. */
void jobs_init(struct jobs *j, lua_State *L, const struct handler_spec *spec, const char *version,
               const struct rt_env *env);
/* Frees the idle jobs and the scratch arrays; call before L is closed, when
 * no job runs. */
void jobs_free(struct jobs *j);

/* When L goes past its memory limit (mem->exceeded, seen after a job's
 * resume), every running job is taken off it and fails with reason
 * REASON_MEMORY (each done called once, after renew), and, unless the pool
 * was released, renew(data) gives the pool a fresh state: it frees the
 * idle jobs (jobs_free), closes L and sets L, mem and dispatch_ref anew. */
void jobs_on_memory(struct jobs *j, jobs_renew_fn *renew, void *data);

/* Starts the dispatch function on entry e of partition p (< 0: none; see
 * handler_run_partition). */
int jobs_start(struct jobs *j, struct entry *e, int p, rt_done_fn *done, void *data);
/* Starts the dispatch function on a call of handle_batch: entries[0 .. n-1]
 * of partition p (see handler_run_batch). */
int jobs_start_batch(struct jobs *j, struct entry *const *entries, size_t n, int p,
                     rt_done_fn *done, void *data);

/* From now on a finished job is not kept; once no job runs, drained(data) is
 * called (at once when none runs now). The pool must not be used after. */
void jobs_release(struct jobs *j, jobs_drained_fn *drained, void *data);

/* Drops every running job (see handler_abandon); 0 when called from inside a
 * job. Calls drained when the pool was released. */
size_t jobs_abandon(struct jobs *j, rt_abandon_fn *abandoned);

/* ---- for host functions (luastream.core) ---- */

/* The running job when its coroutine is co, else NULL (at load time, or from
 * a coroutine the handler made itself). */
struct rt_job *jobs_running_on(const struct jobs *j, const lua_State *co);
/* The entry of the running job when it is job number seq, else NULL: the
 * entry a job reads is the host's only until the job ends. */
struct entry *jobs_entry(const struct jobs *j, double seq);
/* The entry job runs (a running job's, from jobs_running_on). */
const struct entry *job_entry(const struct rt_job *job);

/* ---- for the ways a job waits (jobs_wait_*.c) ---- */

/* The job's timer, made on first use (on the host's clock): when it fires
 * the job's call, if any, has timed out, and the job is resumed. NULL when
 * the host has no clock, or out of memory. */
ltimer *jobs_timer(struct rt_job *job);
/* Resumes job with no values: its wait is over (jobs.c's run, the one
 * place a job's coroutine is resumed). */
void jobs_resume(struct rt_job *job);

/* ---- ls.sleep (jobs_wait_sleep.c) ---- */

/* ls.sleep: arms job's timer for ms; the caller must then yield the job's
 * coroutine (lua_yield), and the timer resumes it with no values. Returns 0,
 * -1 when the host has no clock, -2 when out of memory. */
int job_sleep(struct rt_job *job, uint64_t ms);

/* ---- ls.redis (jobs_wait_redis.c) ---- */

struct bk_reply;
/* ls.redis.call: sends argv (copied before this returns) on the host's calls
 * connection (rt_env) and waits at most timeout_ms (0: the host's default);
 * the caller must then yield, and the job is resumed with no values once the
 * reply came, the timeout passed or the connection failed: job_call_reply
 * then says which. Returns 0, -1 when the host offers no Redis (or no
 * clock), -2 when out of memory, -3 when the connection is not up (nothing
 * was sent; job_call_reply says so, and the caller must not yield). */
int job_call(struct rt_job *job, int argc, const char **argv, const size_t *argvlen,
             uint64_t timeout_ms);
/* ls.redis.connect(url).call: job_call on the connection the host keeps
 * for url (rt_env.connect); server (the redacted url) is named in messages.
 * Returns as job_call; -3 also when the host has no connection for url
 * (not running, a bad url): job_call_reply says why. */
int job_call_on(struct rt_job *job, const char *url, const char *server, int argc,
                const char **argv, const size_t *argvlen, uint64_t timeout_ms);
/* The answer to the job's last call, once: the reply (valid until the
 * coroutine next yields or returns), or NULL with *err saying why there is
 * none ("redis GET: no reply within 5000ms ...", "redis GET: connection
 * lost: ..."). */
const struct bk_reply *job_call_reply(struct rt_job *job, const char **err);

/* ---- ls.http (jobs_wait_http.c) ---- */

struct http_request;
struct http_response;
/* ls.http.request: sends req (checked by the caller with
 * http_request_check; copied before this returns) with the host's HTTP
 * client (rt_env.http) and waits at most req->timeout_ms; the caller must
 * then yield, and the job is resumed with no values once the response
 * came, the timeout passed or the request failed: job_http_response then
 * says which. Returns 0, -1 when the host offers no HTTP client (or no
 * clock), -2 when out of memory, -3 when the client refused it (nothing was
 * sent; job_http_response says so, and the caller must not yield). */
int job_http(struct rt_job *job, const struct http_request *req);
/* The answer to the job's last request, once: the response (valid until
 * the coroutine next yields or returns), or NULL with *err saying why there
 * is none ("http POST https://...: no response within 10000ms") and *fatal
 * true when the client said the request itself is at fault (http.h). */
const struct http_response *job_http_response(struct rt_job *job, const char **err, bool *fatal);

/* ---- ls.pg (jobs_wait_pg.c) ---- */

struct pg_query;
struct pg_result;
/* ls.pg.query (on_session false: any connection of the host's pool,
 * rt_env.pg) or tx:query (on_session: the job's transaction connection,
 * job_pg_begin): sends q (copied before this returns); the caller must then
 * yield, and the job is resumed with no values once the pool answered,
 * within the query's deadline (the pool's own, on the loop: the server's
 * time is real even under a virtual clock). job_pg_result then says what
 * came. Returns 0, -1 when the host offers no PostgreSQL, -2 when out of
 * memory, -3 when not sent (job_pg_result says why; the caller must not
 * yield), -4 when on_session and the job holds no transaction connection. */
int job_pg_query(struct rt_job *job, const struct pg_query *q, bool on_session);
/* tx:exec: q (copied) goes with the transaction's next query or its COMMIT
 * (pg_session_defer). 0, -4 outside a transaction, -3 with *err when the
 * connection was lost. */
int job_pg_defer(struct rt_job *job, const struct pg_query *q, const char **err);
/* Drops the transaction's statements deferred and not sent yet. */
void job_pg_discard(struct rt_job *job);
/* The answer to the job's last query, once: the result (valid until the
 * coroutine next yields or returns), or NULL with *err as "SQLSTATE:
 * message (the query's first words)". */
const struct pg_result *job_pg_result(struct rt_job *job, const char **err);
/* ls.pg.transaction: checks a connection out of the pool for the job; the
 * caller yields as for job_pg_query, then job_pg_session says whether it
 * came. Returns as job_pg_query (-3 also when one was free at once: no
 * yield); -4 when the job already holds one. The
 * connection goes back with job_pg_end, or when the job ends. */
int job_pg_begin(struct rt_job *job);
bool job_pg_session(struct rt_job *job, const char **err);
void job_pg_end(struct rt_job *job);

/* ---- call records (jobs_wait.c) ---- */

/* Frees the spare records of handlers' calls (at exit, so that nothing
 * is left allocated). */
void jobs_calls_trim(void);

#endif
