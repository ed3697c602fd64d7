/* jobs_wait_http: a job waiting for an HTTP response (ls.http), with its
 * timer as the timeout on the host's clock; see jobs.h. */
#include <stdio.h>

#include "jobs_wait.h"

/* The timer fired first: the response, if it ever comes, is dropped. */
static void timed_out(struct rt_job *job) {
  snprintf(job->reply_why, sizeof job->reply_why, "http %s: no response within %llums",
           job->call_name, (unsigned long long)job->call_timeout_ms);
  job->reply_err = job->reply_why;
}

static void http_done(void *data, const struct http_response *res, const char *err, bool fatal) {
  struct rt_job *job = wait_answered(data);
  if (job == NULL) return;
  job->response = res;
  if (res == NULL) {
    snprintf(job->reply_why, sizeof job->reply_why, "http %s: %s", job->call_name,
             err ? err : "no response");
    job->reply_err = job->reply_why;
    job->reply_fatal = fatal;
  }
  jobs_resume(job);
}

int job_http(struct rt_job *job, const struct http_request *req) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->http == NULL || env->clock == NULL) return -1;
  /* The timer first: once the request is sent, nothing may fail unsaid. */
  ltimer *timer = jobs_timer(job);
  if (timer == NULL) return -2;
  struct call *c = wait_call_new(job);
  if (c == NULL) return -2;
  char url[160];
  snprintf(job->call_name, sizeof job->call_name, "%s %s", req->method,
           http_redact_url(req->url, url, sizeof url));
  if (http_request(env->http, req, http_done, c) != 0) {
    wait_call_drop(c);
    snprintf(job->reply_why, sizeof job->reply_why,
             "http %s: not sent (out of memory, or the host is stopping)", job->call_name);
    job->reply_err = job->reply_why;
    return -3;
  }
  /* The client has the same limit; the job's timer keeps it on the host's
   * clock (the virtual one in the harness). */
  wait_arm(job, c, OP_HTTP, timer, req->timeout_ms, timed_out);
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
