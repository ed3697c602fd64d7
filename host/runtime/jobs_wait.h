/* jobs_wait: the record of a job and what every way of waiting shares
 * (private to the jobs files: jobs.c and jobs_wait_*.c).
 *
 * A job waits in one of four ways, one file each: its timer (ls.sleep,
 * jobs_wait_sleep.c), a Redis call (jobs_wait_redis.c), an HTTP request
 * (jobs_wait_http.c) or a PostgreSQL query or transaction
 * (jobs_wait_pg.c). Each arms what it waits on, sets job->op and returns;
 * the caller yields; the answer's callback (or the timer) resumes the job
 * through jobs_resume (jobs.c), the one place a job is resumed. The pieces
 * here are shared by all of them: the call records an answer finds its
 * job through, and the reset of a job's wait. They call nothing of jobs.c,
 * and jobs.c calls nothing of the backends, so no two files call each
 * other. */
#ifndef LUASTREAM_JOBS_WAIT_H
#define LUASTREAM_JOBS_WAIT_H

#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"
#include "http.h"
#include "jobs.h"
#include "pg.h"

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

/* One entry running in its own coroutine. */
struct rt_job {
  struct jobs *pool;
  lua_State *co;   /* the coroutine; anchored by co_ref */
  int co_ref;      /* registry ref keeping co alive */
  double seq;      /* which delivery this is (core.entry checks it) */
  struct entry *e; /* borrowed from the caller until done */
  /* A call of handle_batch (jobs_start_batch): its entries, borrowed, the
   * k-th job number seq + k (e the first, else the one being reported);
   * nbatch 0 for a handle's job. The array is kept for reuse. */
  struct entry **batch;
  size_t nbatch, batch_cap;
  rt_done_fn *done;
  void *data;
  enum job_op op;    /* what the coroutine waits for, OP_NONE while running */
  ltimer *timer;     /* ls.sleep, a call's timeout; created on first use */
  struct call *call; /* OP_CALL, OP_HTTP, OP_PG: the call in flight */
  /* What the timer firing during a call means (the backend's message, set
   * with the call); NULL: a sleep is over. */
  void (*timed_out)(struct rt_job *job);
  uint64_t call_timeout_ms;
  char call_name[192]; /* the command (and another server's URL), or method and URL */
  /* A call's answer while the job runs after it (job_call_reply,
   * job_http_response): the reply or response (the broker's or the
   * client's, valid until the coroutine next yields), else why not. */
  const bk_reply *reply;
  const struct http_response *response;
  const char *reply_err;
  bool reply_fatal; /* the HTTP client says the request itself is at fault */
  char reply_why[512];
  const pg_result *pg_res;    /* OP_PG's answer, the pool's until the coroutine yields */
  pg_session *session;        /* ls.pg.transaction's connection, held until job_pg_end */
  struct rt_job *prev, *next; /* the pool's running jobs, for jobs_abandon */
};

/* A call record for job's next wait (free again when answered); NULL when
 * out of memory. */
struct call *wait_call_new(struct rt_job *job);
/* The call c was sent: job waits for its answer, timed_out running if
 * timeout_ms pass first on timer (jobs_timer's, made before the send). */
void wait_arm(struct rt_job *job, struct call *c, enum job_op op, ltimer *timer,
              uint64_t timeout_ms, void (*timed_out)(struct rt_job *job));
/* Gives back a record whose call was never sent. */
void wait_call_drop(struct call *c);
/* The job a call's answer is for, done waiting (its timer stopped); NULL
 * when nobody waits for it any more (the answer is dropped). The record is
 * free again. */
struct rt_job *wait_answered(struct call *c);
/* The job stops waiting for its call, if any: the reply will be dropped. */
void wait_detach(struct rt_job *job);
/* A new wait: a call the handler gave up on (its yield raised and was
 * caught) is forgotten, and so is the last call's answer. */
void wait_reset(struct rt_job *job);
/* The job's transaction connection goes back to the pool (closed when a
 * transaction is still open on it: that ends the transaction). */
void wait_session_end(struct rt_job *job);

#endif
