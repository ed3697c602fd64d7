/* jobs_wait: call records and the reset of a job's wait; see jobs_wait.h. */
#include "jobs_wait.h"

#include <stdlib.h>

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

void wait_call_drop(struct call *c) {
  if (nspare_calls >= CALLS_KEPT) {
    free(c);
    return;
  }
  c->next = spare_calls;
  spare_calls = c;
  nspare_calls++;
}

struct call *wait_call_new(struct rt_job *job) {
  struct call *c = call_get();
  if (c == NULL) return NULL;
  c->job = job;
  c->next = NULL;
  return c;
}

void wait_arm(struct rt_job *job, struct call *c, enum job_op op, ltimer *timer,
              uint64_t timeout_ms, void (*timed_out)(struct rt_job *job)) {
  job->call_timeout_ms = timeout_ms;
  job->call = c;
  job->timed_out = timed_out;
  timer_start(timer, timeout_ms);
  job->op = op;
}

struct rt_job *wait_answered(struct call *c) {
  struct rt_job *job = c->job;
  wait_call_drop(c);
  if (job == NULL) return NULL;
  job->call = NULL;
  if (job->timer) timer_stop(job->timer); /* ls.pg's deadline is the pool's */
  job->op = OP_NONE;
  return job;
}

void wait_detach(struct rt_job *job) {
  if (job->call) job->call->job = NULL;
  job->call = NULL;
}

void wait_reset(struct rt_job *job) {
  wait_detach(job);
  job->timed_out = NULL;
  job->pg_res = NULL;
  job->reply = NULL;
  job->response = NULL;
  job->reply_err = NULL;
  job->reply_fatal = false;
  job->op = OP_NONE;
}

void wait_session_end(struct rt_job *job) {
  if (job->session) pg_session_close(job->session);
  job->session = NULL;
}
