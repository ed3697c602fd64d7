/* jobs_wait_sleep: ls.sleep, a job waiting on its timer; see jobs.h. */
#include "jobs_wait.h"

int job_sleep(struct rt_job *job, uint64_t ms) {
  const struct rt_env *env = job->pool->env;
  wait_reset(job);
  if (env == NULL || env->clock == NULL) return -1;
  ltimer *t = jobs_timer(job);
  if (t == NULL) return -2;
  timer_start(t, ms);
  job->op = OP_SLEEP;
  return 0;
}
