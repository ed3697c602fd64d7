/* jobs_wait_pg: a job waiting on the PostgreSQL pool (ls.pg: a query, a
 * transaction's connection, its queries), whose deadline is the pool's;
 * see jobs.h. */
#include <stdio.h>

#include "jobs_wait.h"

static void pg_done(void *data, const pg_result *res, const struct pg_error *err) {
  struct rt_job *job = wait_answered(data);
  if (job == NULL) return;
  job->pg_res = res;
  if (res == NULL) {
    char head[48];
    snprintf(job->reply_why, sizeof job->reply_why, "%s: %.240s (%.48s)", err->sqlstate,
             err->message, err->sql ? pg_sql_head(err->sql, head, sizeof head) : job->call_name);
    job->reply_err = job->reply_why;
  }
  jobs_resume(job);
}

static void pg_session_ready(void *data, pg_session *s, const struct pg_error *err) {
  struct rt_job *job = wait_answered(data);
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
  jobs_resume(job);
}

int job_pg_query(struct rt_job *job, const struct pg_query *q, bool on_session) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->pg == NULL) return -1;
  if (on_session && job->session == NULL) return -4;
  pg_sql_head(q->sql, job->call_name, 48);
  struct call *c = wait_call_new(job);
  if (c == NULL) return -2;
  char err[256];
  int rc = on_session ? pg_session_query(job->session, q, pg_done, c, err, sizeof err)
                      : pg_query(env->pg, q, pg_done, c, err, sizeof err);
  if (rc != 0) {
    wait_call_drop(c);
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
  struct call *c = wait_call_new(job);
  if (c == NULL) return -2;
  char err[256];
  if (pg_session_open(env->pg, 0, pg_session_ready, c, err, sizeof err) != 0) {
    wait_call_drop(c);
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

void job_pg_end(struct rt_job *job) { wait_session_end(job); }

void job_pg_discard(struct rt_job *job) {
  if (job->session) pg_session_discard(job->session);
}
