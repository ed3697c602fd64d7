/* jobs_wait_redis: a job waiting for a Redis reply (ls.redis.call, and
 * ls.redis.connect(url).call), with its timer as the timeout; see jobs.h. */
#include <stdio.h>

#include "jobs_wait.h"

/* The timer fired first: the reply, if it ever comes, is dropped. */
static void timed_out(struct rt_job *job) {
  snprintf(job->reply_why, sizeof job->reply_why,
           "redis %s: no reply within %llums (the command may still run on the server)",
           job->call_name, (unsigned long long)job->call_timeout_ms);
  job->reply_err = job->reply_why;
}

static void call_done(void *data, const bk_reply *r, const char *err) {
  struct rt_job *job = wait_answered(data);
  if (job == NULL) return;
  job->reply = r;
  if (r == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "redis %s: %s", job->call_name,
             err ? err : "no reply");
    job->reply_err = job->reply_why;
  }
  jobs_resume(job);
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
  char err[256] = "";
  if (env->connect(env->connect_data, url, &b, &conn, err, sizeof err) != 0) {
    snprintf(job->reply_why, sizeof job->reply_why, "redis %.*s (%s): %s", (int)argvlen[0], argv[0],
             server, err);
    job->reply_err = job->reply_why;
    return -3;
  }
  if (b == NULL || conn == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "redis %.*s (%s): not connected (%s)",
             (int)argvlen[0], argv[0], server, err[0] ? err : "the host is not running");
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
  /* The timer first: once the request is sent, nothing may fail unsaid. */
  ltimer *timer = jobs_timer(job);
  if (timer == NULL) return -2;
  struct call *c = wait_call_new(job);
  if (c == NULL) return -2;
  int n = argvlen[0] < 32 ? (int)argvlen[0] : 32;
  if (server)
    snprintf(job->call_name, sizeof job->call_name, "%.*s (%s)", n, argv[0], server);
  else
    snprintf(job->call_name, sizeof job->call_name, "%.*s", n, argv[0]);
  if (bk_command(b, conn, argc, argv, argvlen, call_done, c) != 0) {
    wait_call_drop(c);
    /* Why the connection is down, when the broker knows: a TLS certificate
     * that does not verify is not cured by waiting. */
    char fault[256];
    bk_conn_fault(b, conn, fault, sizeof fault);
    snprintf(job->reply_why, sizeof job->reply_why,
             "redis %s: not connected%s%.200s (the host reconnects by itself)", job->call_name,
             fault[0] ? ": " : "", fault);
    job->reply_err = job->reply_why;
    return -3;
  }
  wait_arm(job, c, OP_CALL, timer, timeout_ms, timed_out);
  return 0;
}

const bk_reply *job_call_reply(struct rt_job *job, const char **err) {
  const bk_reply *r = job->reply;
  *err = r ? NULL : job->reply_err ? job->reply_err : "redis: no call was made";
  job->reply = NULL;
  job->reply_err = NULL;
  return r;
}
