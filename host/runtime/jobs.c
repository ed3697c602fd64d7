/* jobs: entries in coroutines, from start to done, and the one place a
 * job is resumed; see jobs.h. How a job waits is in jobs_wait_*.c. */
#include "jobs.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "jobs_wait.h"
#include "log.h"
#include "watchdog.h"
#include "wire.h"

void jobs_init(struct jobs *j, lua_State *L, const struct handler_spec *spec, const char *version,
               const struct rt_env *env) {
  memset(j, 0, sizeof *j);
  j->L = L;
  j->spec = spec;
  j->version = version;
  j->env = env;
  j->dispatch_ref = LUA_NOREF;
}

static void job_destroy(struct jobs *j, struct rt_job *job) {
  wait_detach(job);
  wait_session_end(job);
  luaL_unref(j->L, LUA_REGISTRYINDEX, job->co_ref); /* the coroutine is garbage now */
  if (job->timer) timer_free(job->timer);
  free(job->batch);
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
  j->scratch_cap = j->scratch_writes_cap = 0;
}

void jobs_on_memory(struct jobs *j, jobs_renew_fn *renew, void *data) {
  j->renew = renew;
  j->renew_data = data;
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

/* Puts job on its pool's list of running jobs, counted. */
static void job_link(struct rt_job *job) {
  struct jobs *j = job->pool;
  j->count++;
  job->next = j->running;
  if (j->running) j->running->prev = job;
  j->running = job;
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
    struct entry **batch = job->batch;
    size_t nbatch = job->nbatch;
    job->batch = NULL; /* kept for the calls below */
    job_unlink(job);
    /* Unanchored, the suspended coroutine is garbage; lua_close frees it at
     * the latest. Its timer goes now, so ls.sleep never resumes it. */
    job_destroy(j, job);
    j->count--;
    n++;
    if (nbatch == 0 && abandoned) abandoned(data, e);
    for (size_t i = 0; i < nbatch && abandoned; i++) abandoned(data, batch[i]);
    free(batch);
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

/* The job's entry is done with and reported (finish_report took it off the
 * running list). A coroutine that returned can run the next entry
 * (reusable); one that raised or was left suspended cannot. */
static void job_end(struct rt_job *job, bool reusable) {
  struct jobs *j = job->pool;
  j->count--;
  if (reusable && !j->drained) {
    /* A wait the handler caught (ls.sleep under a C boundary raises after
     * arming the timer) must not fire on the idle job. */
    if (job->timer) timer_stop(job->timer);
    wait_reset(job);
    wait_session_end(job);
    lua_settop(job->co, 0);
    job->e = NULL;
    job->nbatch = 0;
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

/* report, to each entry of a call of handle_batch alike (a raise, the
 * memory limit), in order; the same as report for a handle's job. The
 * text must not live in the state: a done callback may renew it. */
static void report_each(struct rt_job *job, const struct rt_result *res) {
  if (job->nbatch == 0) {
    report(job, res);
    return;
  }
  struct rt_result r = *res;
  for (size_t i = 0, n = job->nbatch; i < n; i++) {
    r.batch_left = n - 1 - i;
    job->e = job->batch[i];
    report(job, &r);
  }
}

/* Reports a finished job. It leaves the running list first: the done
 * callback may start the next entry, and if that one goes past the memory
 * limit, fail_on_memory fails what is running then, which this job no longer
 * is (its done is called once). It still counts (count) until job_end, so no
 * drain frees the pool under it. False when the state was renewed meanwhile:
 * the job's coroutine went with the old state, and only job_forget may
 * follow. */
static bool finish_report(struct rt_job *job, const struct rt_result *res) {
  struct jobs *j = job->pool;
  unsigned long renewals = j->renewals;
  job_unlink(job);
  report(job, res);
  /* cppcheck-suppress knownConditionTrueFalse ; false positive: the done callback may renew the state */
  return j->renewals == renewals;
}

/* Frees a job that no Lua state holds any more (its state was renewed), and
 * counts it done. The caller checks for a drain. */
static void job_discard(struct rt_job *job) {
  job->pool->count--;
  if (job->timer) timer_free(job->timer);
  free(job->batch);
  free(job);
}

/* job_end for a job whose state was renewed while it was reported: its
 * coroutine and registry ref were the old state's, closed with it. */
static void job_forget(struct rt_job *job) {
  struct jobs *j = job->pool;
  wait_session_end(job);
  job_discard(job);
  drain_if_done(j);
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

/* An outcome the dispatcher gave, from index at of co's stack on (see of()
 * in luastream/outcome.lua): an outcome code (core.outcomes, enum
 * rt_outcome), then what that outcome carries; for an error, a reason code
 * (core.reasons, enum wire_reason) and the message. */
static struct rt_result result_at(struct rt_job *job, lua_State *co, int at) {
  struct rt_result res = {.kind = RT_ACK};
  long long kind = lua_isnoneornil(co, at) ? RT_ACK : code_at(co, at);
  switch (kind) {
    case RT_ACK:
    case RT_REPLY:
      res.kind = (enum rt_outcome)kind;
      if (read_writes(job->pool, co, at + 1, &res) != 0) {
        res = (struct rt_result){
            .kind = RT_ERROR, .reason = REASON_HANDLER_ERROR, .text = "out of memory"};
        res.text_len = strlen(res.text);
      }
      break;
    case RT_RETRY: res.kind = RT_RETRY; break;
    case RT_RETRY_AFTER:
      res.kind = RT_RETRY_AFTER;
      res.delay_ms = (int64_t)lua_tonumber(co, at + 1);
      break;
    case RT_REJECT:
      res.kind = RT_REJECT;
      res.text = lua_tolstring(co, at + 1, &res.text_len);
      break;
    case RT_PAUSE:
      res.kind = RT_PAUSE;
      res.delay_ms = (int64_t)lua_tonumber(co, at + 1);
      res.text = lua_tolstring(co, at + 2, &res.text_len);
      break;
    case RT_ERROR:
    case RT_INVALID:
      res.kind = (enum rt_outcome)kind;
      res.reason = wire_reason_text(code_at(co, at + 1));
      res.text = lua_tolstring(co, at + 2, &res.text_len);
      if (res.reason == NULL) res = bad_code("the dispatcher returned an error without a reason");
      break;
    default: res = bad_code("the dispatcher returned no outcome code"); break;
  }
  return res;
}

/* A call of handle_batch returned: the dispatcher's one result is a list of
 * each entry's outcome, {code, ...} as result_at reads them, reported in
 * order (each done may start more work, even renew the state: the entries
 * after that fail as the state's memory did). */
static void finish_batch(struct rt_job *job) {
  struct jobs *j = job->pool;
  lua_State *co = job->co;
  unsigned long renewals = j->renewals;
  bool list = lua_istable(co, 1);
  job_unlink(job);
  for (size_t i = 0, n = job->nbatch; i < n; i++) {
    struct rt_result res;
    if (j->renewals != renewals) {
      res = (struct rt_result){.kind = RT_ERROR, .reason = REASON_MEMORY};
      res.text =
          "the handler's Lua state went past its memory limit while this call's outcomes "
          "were applied";
    } else if (!list) {
      res = bad_code("the batch dispatcher returned no list of outcomes");
    } else {
      lua_settop(co, 1);
      lua_rawgeti(co, 1, (int)i + 1); /* 2: {code, ...} */
      if (lua_istable(co, 2)) {
        for (int k = 1; k <= 3; k++) lua_rawgeti(co, 2, k); /* 3, 4, 5 */
        res = result_at(job, co, 3);
      } else {
        res = bad_code("the batch dispatcher returned no outcome for an entry");
      }
    }
    if (res.text && !res.text_len) res.text_len = strlen(res.text);
    res.batch_left = n - 1 - i;
    job->e = job->batch[i];
    report(job, &res);
  }
  if (j->renewals == renewals)
    job_end(job, true);
  else
    job_forget(job);
}

/* The dispatcher returned; its results are on co's stack (result_at). */
static void finish_returned(struct rt_job *job) {
  if (job->nbatch) {
    finish_batch(job);
    return;
  }
  struct rt_result res = result_at(job, job->co, 1);
  if (finish_report(job, &res))
    job_end(job, true);
  else
    job_forget(job);
}

static void finish_failed(struct rt_job *job, const char *why) {
  lua_State *L = job->pool->L;
  int top = lua_gettop(L);
  const char *msg = why ? why : lua_tostring(job->co, -1);
  if (msg == NULL)
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(job->co, -1));
  luaL_traceback(L, job->co, msg, 0);
  struct rt_result res = {.kind = RT_ERROR, .reason = REASON_HANDLER_ERROR};
  res.text = lua_tolstring(L, -1, &res.text_len);
  bool kept;
  if (job->nbatch) { /* the text is copied: a done may renew the state */
    char *copy = malloc(res.text_len + 1);
    if (copy) memcpy(copy, res.text, res.text_len + 1);
    res.text = copy ? copy : "out of memory";
    res.text_len = copy ? res.text_len : strlen(res.text);
    struct jobs *j = job->pool;
    unsigned long renewals = j->renewals;
    job_unlink(job);
    report_each(job, &res);
    free(copy);
    /* cppcheck-suppress knownConditionTrueFalse ; false positive: a done callback may renew the state */
    kept = j->renewals == renewals;
  } else {
    kept = finish_report(job, &res);
  }
  if (!kept) {
    job_forget(job); /* L was closed with the message on it */
    return;
  }
  lua_settop(L, top); /* before job_end, which may close the state */
  job_end(job, false);
}

/* The state went past its memory limit while culprit ran: every running
 * job (culprit among them) fails with reason memory, and the pool goes on in
 * a fresh state (jobs_on_memory). The jobs leave the state before it is
 * renewed, and are reported after, so that a done callback that starts the
 * next entry starts it on the fresh state. */
static void fail_on_memory(struct jobs *j, const struct rt_job *culprit) {
  size_t limit = j->mem->limit, n = 0;
  struct rt_job *failed = j->running;
  j->running = NULL;
  for (struct rt_job *job = failed; job; job = job->next, n++) {
    if (job->timer) timer_stop(job->timer);
    wait_detach(job); /* an answer on its way is dropped */
    wait_session_end(job);
    job->op = OP_NONE;
    job->co = NULL; /* the state's, like co_ref: gone with it */
    job->co_ref = LUA_NOREF;
  }
  char limit_text[24], count[24];
  snprintf(limit_text, sizeof limit_text, "%zu", limit);
  snprintf(count, sizeof count, "%zu", n);
  log_line(LOG_WARN, j->spec->name,
           "handler state went past its memory limit: the entries running on it fail, a fresh "
           "state of the same version takes over",
           "stream", j->spec->stream, "group", j->spec->group, "id",
           culprit->e ? culprit->e->id : NULL, LOG_NUMBER "limit", limit_text, LOG_NUMBER "failed",
           count, "version", j->version, NULL);
  if (!j->drained && j->renew) {
    j->renewals++; /* a job being reported now sees its state went (finish_report) */
    j->renew(j->renew_data);
  }
  char ran[320], beside[320];
  snprintf(ran, sizeof ran,
           "the handler's Lua state went past its memory limit (memory = %zu bytes) while this "
           "entry ran",
           limit);
  snprintf(beside, sizeof beside,
           "the handler's Lua state went past its memory limit (memory = %zu bytes) while entry "
           "%s ran beside this one",
           limit, culprit->e ? culprit->e->id : "?");
  /* Each counts as running until reported, as in job_end: a release from
   * a done callback cannot drain the pool under this loop. */
  while (failed) {
    struct rt_job *job = failed;
    failed = job->next;
    const char *text = job == culprit ? ran : beside;
    struct rt_result res = {
        .kind = RT_ERROR, .reason = REASON_MEMORY, .text = text, .text_len = strlen(text)};
    report_each(job, &res);
    job_discard(job);
  }
  drain_if_done(j); /* may free the pool */
}

/* The one place a job's coroutine is resumed. */
static void run(struct rt_job *job, int nargs) {
  struct jobs *j = job->pool;
  const struct handler_spec *s = j->spec;
  j->current = job;
  watchdog_enter(s->name, s->path, s->stream, s->group, job->e ? job->e->id : NULL);
  lmem_enforce(j->mem, true);
  int rc = lua_resume(job->co, nargs);
  lmem_enforce(j->mem, false);
  watchdog_leave();
  j->current = NULL;
  if (j->mem->exceeded) {
    /* Whatever the coroutine did after (a pcall in the handler may have
     * caught "not enough memory"): the delivery failed. */
    job->reply = NULL;
    job->response = NULL;
    job->pg_res = NULL;
    fail_on_memory(j, job);
    return;
  }
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
  wait_detach(job);
  job->op = OP_NONE;
  if (rc == 0) {
    finish_returned(job);
  } else {
    finish_failed(job, NULL);
  }
}

int jobs_start_batch(struct jobs *j, struct entry *const *entries, size_t n, int p,
                     rt_done_fn *done, void *data) {
  if (n == 0) return -1;
  struct rt_job *job = job_get(j);
  if (job == NULL) return -1;
  if (n > job->batch_cap) {
    struct entry **b = realloc(job->batch, n * sizeof *b);
    if (b == NULL) {
      job->next = j->idle; /* back, unused */
      j->idle = job;
      return -1;
    }
    job->batch = b;
    job->batch_cap = n;
  }
  memcpy(job->batch, entries, n * sizeof *entries);
  job->nbatch = n;
  job->e = entries[0];
  job->done = done;
  job->data = data;
  /* Entry k is job number seq + k (jobs_entry). */
  job->seq = j->last_seq + 1;
  j->last_seq += (double)n;
  job_link(job);

  lua_State *co = job->co;
  lua_rawgeti(co, LUA_REGISTRYINDEX, j->dispatch_ref);
  lua_pushnumber(co, job->seq);
  if (p < 0)
    lua_pushnil(co);
  else
    lua_pushinteger(co, p);
  lua_pushinteger(co, (lua_Integer)n);
  run(job, 3);
  return 0;
}

int jobs_start(struct jobs *j, struct entry *e, int p, rt_done_fn *done, void *data) {
  struct rt_job *job = job_get(j);
  if (job == NULL) return -1;
  job->e = e;
  job->done = done;
  job->data = data;
  job->seq = ++j->last_seq;
  job_link(job);

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
  const struct rt_job *c = j->current;
  if (c == NULL) return NULL;
  if (c->seq == seq && c->nbatch == 0) return c->e;
  /* a call of handle_batch: entry k is number seq + k */
  if (c->nbatch && seq >= c->seq && seq < c->seq + (double)c->nbatch)
    return c->batch[(size_t)(seq - c->seq)];
  return NULL;
}

/* ---- for the ways a job waits ---- */

/* The job's timer: a sleep is over, or a call waited too long. */
static void timer_done(ltimer *t, void *data) {
  (void)t;
  struct rt_job *job = data;
  if (job->timed_out) {
    wait_detach(job);
    job->timed_out(job);
    job->timed_out = NULL;
  }
  job->op = OP_NONE;
  run(job, 0);
}

ltimer *jobs_timer(struct rt_job *job) {
  const struct rt_env *env = job->pool->env;
  lclock *clock = env ? env->clock : NULL;
  if (job->timer == NULL && clock) job->timer = timer_new(clock, timer_done, job);
  return job->timer;
}

void jobs_resume(struct rt_job *job) { run(job, 0); }

const struct entry *job_entry(const struct rt_job *job) { return job->e; }
