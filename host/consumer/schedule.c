/* schedule: a scheduled handler's ticks: when they are due, the lease and
 * done mark through SCRIPT_TICK, the tick as a job of the handler (see
 * schedule.h). */
#include "schedule.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "entry.h"
#include "log.h"
#include "metrics.h"
#include "scripts.h"
#include "tz.h"

/* A call that could not be sent (not connected) is tried again after this. */
#define SCHED_RETRY_MS 1000
/* How far past a busy lease's end the next look goes. */
#define SCHED_BUSY_MARGIN_MS 50
/* The most ticks a catch-up walks to find the newest SCHED_CATCH_UP_MAX. */
#define SCHED_WALK_MAX 1000000

enum sched_state {
  ST_WAITING, /* for the next tick's timer */
  ST_TAKING,  /* a take call out */
  ST_RUNNING, /* the tick's job runs */
  ST_MARKING, /* its done call out */
};

struct schedule {
  handler *h;
  const struct handler_spec *spec;
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  ltimer *timer; /* the next tick, a look again, a retry */
  ltimer *renew; /* the running tick's lease */
  char *key, *owner;
  struct cron cron;
  struct tz *tz;
  sched_event_fn *on_event;
  void *data;
  enum sched_state state;
  bool started, stopping, drained;
  bool renew_out;     /* a renewal's take is out (answered apart from the state) */
  bool ran_ok;        /* the tick whose done mark is out returned (else raised) */
  bool relook;        /* the timer is a look again at due_ms, another host's lease ended */
  int64_t next_ms;    /* the next tick after the last one looked at */
  int64_t due_ms;     /* the newest tick due at the last look */
  int64_t known_done; /* the newest tick done, as the server last said (0: none) */
  /* The tick another host held the lease of when this one looked (its
   * holder may have died running it): run first once the lease ends. */
  int64_t orphan;
  int64_t queue[SCHED_CATCH_UP_MAX];
  size_t nqueue, qhead; /* ticks to run, queue[qhead .. nqueue-1] */
  struct entry *e;      /* the running tick's */
  /* The done call of the tick just run, copied: sent again until answered
   * (after a reconnect), as the writer does with outcomes; the script
   * skips a tick already done. */
  int held_argc;
  const char **held_argv;
  size_t *held_len;
  char *held_buf;
  bool resend;    /* the timer sends the held done call again */
  bool abandoned; /* the shutdown deadline: nothing is sent again */
  struct bk_args args;
  char tick_text[24];
};

/* The key of schedule name (malloc'd), NULL when out of memory. */
static char *sched_key(const char *name) {
  size_t n = strlen(SCHED_KEY_PREFIX) + strlen(name) + 3;
  char *k = malloc(n);
  if (k) snprintf(k, n, SCHED_KEY_PREFIX "{%s}", name);
  return k;
}

/* The first tick strictly after t. */
static int64_t after(const schedule *s, int64_t t) {
  if (s->spec->every_ms > 0) return cron_every_next(s->spec->every_ms, t);
  int64_t n = cron_next(&s->cron, s->tz, t);
  return n < 0 ? INT64_MAX : n;
}

/* The newest tick at or before now, 0 when none within a year. */
static int64_t newest_due(const schedule *s, int64_t now) {
  if (s->spec->every_ms > 0) return now - (now % s->spec->every_ms);
  static const int64_t back[] = {3600000, 86400000, 31 * 86400000LL, 366 * 86400000LL};
  for (size_t i = 0; i < sizeof back / sizeof back[0]; i++) {
    int64_t t = after(s, now - back[i]);
    if (t > now) continue;
    for (long walked = 0; walked < SCHED_WALK_MAX; walked++) {
      int64_t n = after(s, t);
      if (n > now) break;
      t = n;
    }
    return t;
  }
  return 0;
}

/* ---- metrics ---- */

static void count(const schedule *s, const char *outcome) {
  static const char *const labels[] = {"handler", "outcome"};
  struct metric_family *f = metrics_family(
      "luastream_ticks_total",
      "Ticks of scheduled handlers run by this host, by outcome: ok, error (the tick raised), "
      "duplicate (it ran again after another run marked it done: its writes were dropped), "
      "unwritten (its done mark could not be written)",
      METRIC_COUNTER, 2, labels, NULL, 0);
  const char *values[] = {s->spec->name, outcome};
  metric_add(metrics_series(f, values), 1);
}

/* The last and next run gauges: rebuilt at each page from the schedules
 * running (sched_metrics_clear, then sched_collect_metrics of each), so a
 * removed schedule's leave with it. */
static struct metric_family *times_family(bool last) {
  static const char *const labels[] = {"handler"};
  return last
             ? metrics_family(
                   "luastream_tick_last_run_timestamp_seconds",
                   "The scheduled time of the newest tick done, on any host, as this host last saw it",
                   METRIC_GAUGE, 1, labels, NULL, 0)
             : metrics_family("luastream_tick_next_run_timestamp_seconds",
                              "When the next tick is due", METRIC_GAUGE, 1, labels, NULL, 0);
}

static void gauge(const schedule *s, bool last, int64_t ms) {
  const char *values[] = {s->spec->name};
  metric_set(metrics_series(times_family(last), values), (double)ms / 1000.0);
}

static void show_times(const schedule *s) {
  if (s->known_done > 0) gauge(s, true, s->known_done);
  if (s->next_ms > 0 && s->next_ms != INT64_MAX) gauge(s, false, s->next_ms);
}

void sched_metrics_clear(void) {
  metrics_clear(times_family(true));
  metrics_clear(times_family(false));
}

void sched_collect_metrics(const schedule *s) {
  if (s->started && !s->drained) show_times(s);
}

/* ---- the state machine ---- */

static void arm(schedule *s, int64_t at_ms) {
  int64_t now = (int64_t)clock_wall(s->clock);
  timer_start(s->timer, at_ms > now ? (uint64_t)(at_ms - now) : 0);
}

static void settle_stop(schedule *s) {
  if (!s->stopping || s->drained || s->state != ST_WAITING || s->renew_out) return;
  s->drained = true;
  timer_stop(s->timer);
  timer_stop(s->renew);
  s->on_event(s->data, s, SCHED_EV_DRAINED);
}

/* Waits for the next tick after the newest due. */
static void wait_next(schedule *s) {
  s->state = ST_WAITING;
  s->nqueue = s->qhead = 0;
  if (s->stopping) return settle_stop(s);
  s->next_ms = after(s, s->due_ms > 0 ? s->due_ms : (int64_t)clock_wall(s->clock));
  show_times(s);
  if (s->next_ms != INT64_MAX) arm(s, s->next_ms);
}

static void send_take_as(schedule *s, int64_t tick, bool resume);
static void send_take(schedule *s, int64_t tick) { send_take_as(s, tick, false); }
static void run_next(schedule *s);

static int eval(schedule *s, bk_reply_cb *cb) {
  return bk_command(s->b, s->cmd, s->args.argc, s->args.argv, s->args.argvlen, cb, s);
}

static void args_start(schedule *s, const char *op, int64_t tick) {
  bk_args_reset(&s->args);
  bk_args_str(&s->args, "EVAL");
  bk_args_str(&s->args, SCRIPT_TICK);
  bk_args_str(&s->args, "1");
  bk_args_str(&s->args, s->key);
  bk_args_str(&s->args, op);
  bk_args_num(&s->args, tick);
  bk_args_str(&s->args, s->owner);
}

static long long element_int(const bk_reply *r, size_t i) {
  if (r == NULL || r->type != BK_ARRAY || i >= r->elements) return 0;
  const bk_reply *e = r->element[i];
  return e->type == BK_INTEGER ? e->integer : 0;
}

/* The ticks a take of due found to run, after done (the newest done). */
static void plan(schedule *s, int64_t done) {
  s->nqueue = s->qhead = 0;
  if (!s->spec->catch_up || done <= 0) {
    s->queue[s->nqueue++] = s->due_ms;
    return;
  }
  /* The newest SCHED_CATCH_UP_MAX ticks after done, oldest first (a ring
   * while walking). */
  int64_t ring[SCHED_CATCH_UP_MAX];
  size_t n = 0;
  int64_t t = done;
  for (long walked = 0; walked < SCHED_WALK_MAX; walked++) {
    t = after(s, t);
    if (t > s->due_ms) break;
    ring[n % SCHED_CATCH_UP_MAX] = t;
    n++;
  }
  if (n == 0) {
    s->queue[s->nqueue++] = s->due_ms;
    return;
  }
  size_t keep = n < SCHED_CATCH_UP_MAX ? n : SCHED_CATCH_UP_MAX;
  if (n > SCHED_CATCH_UP_MAX) {
    char missed[24], running[24];
    snprintf(missed, sizeof missed, "%zu", n - keep);
    snprintf(running, sizeof running, "%zu", keep);
    log_line(LOG_WARN, s->spec->name, "catch_up: older missed ticks skipped", LOG_NUMBER "skipped",
             missed, LOG_NUMBER "running", running, NULL);
  }
  for (size_t i = n - keep; i < n; i++) s->queue[s->nqueue++] = ring[i % SCHED_CATCH_UP_MAX];
  if (s->queue[s->nqueue - 1] != s->due_ms && s->nqueue < SCHED_CATCH_UP_MAX)
    s->queue[s->nqueue++] = s->due_ms; /* the walk stopped short */
}

static void job_done(void *data, struct entry *e, const struct rt_result *res);

static void held_free(schedule *s) {
  free(s->held_argv);
  free(s->held_len);
  free(s->held_buf);
  s->held_argv = NULL;
  s->held_len = NULL;
  s->held_buf = NULL;
  s->held_argc = 0;
}

/* s->args copied into held (one buffer for the bytes). 0, or -1 when out of
 * memory. */
static int hold_args(schedule *s) {
  held_free(s);
  size_t bytes = 0;
  for (int i = 0; i < s->args.argc; i++) bytes += s->args.argvlen[i];
  s->held_argv = malloc((size_t)s->args.argc * sizeof *s->held_argv);
  s->held_len = malloc((size_t)s->args.argc * sizeof *s->held_len);
  s->held_buf = malloc(bytes ? bytes : 1);
  if (!s->held_argv || !s->held_len || !s->held_buf) {
    held_free(s);
    return -1;
  }
  char *at = s->held_buf;
  for (int i = 0; i < s->args.argc; i++) {
    if (s->args.argvlen[i]) memcpy(at, s->args.argv[i], s->args.argvlen[i]);
    s->held_argv[i] = at;
    s->held_len[i] = s->args.argvlen[i];
    at += s->args.argvlen[i];
  }
  s->held_argc = s->args.argc;
  return 0;
}

static void start_job(schedule *s, int64_t tick) {
  char id[40];
  int n = snprintf(id, sizeof id, "%" PRId64 "-0", tick);
  s->e = entry_new(id, (size_t)n, 0, NULL, NULL);
  s->state = ST_RUNNING;
  timer_start(s->renew, SCHED_LEASE_MS / 3);
  if (s->e == NULL || handler_run(s->h, s->e, job_done, s) != 0) {
    log_line(LOG_ERROR, s->spec->name, "out of memory: tick not run", NULL);
    entry_free(s->e);
    s->e = NULL;
    timer_stop(s->renew);
    s->qhead = s->nqueue;
    wait_next(s);
  }
}

static void take_done(void *data, const bk_reply *r, const char *err) {
  schedule *s = data;
  char why[512];
  if (r == NULL || r->type != BK_ARRAY || r->elements < 2) {
    bk_reply_text(r, err, why, sizeof why);
    log_line(LOG_WARN, s->spec->name, "tick lease not taken: trying again", "key", s->key, "error",
             why, NULL);
    s->state = ST_WAITING;
    if (s->stopping) return settle_stop(s);
    arm(s, (int64_t)clock_wall(s->clock) + SCHED_RETRY_MS);
    return;
  }
  long long got = element_int(r, 0);
  int64_t done = element_int(r, 1);
  if (done > s->known_done) s->known_done = done;
  if (s->stopping) {
    s->state = ST_WAITING;
    return settle_stop(s);
  }
  if (got == -2) { /* early by the server's clock: the same tick once it is due there */
    s->state = ST_WAITING;
    s->relook = true;
    arm(s, (int64_t)clock_wall(s->clock) + element_int(r, 2));
    return;
  }
  if (got < 0) { /* another host runs it: look again once its lease ends */
    s->state = ST_WAITING;
    s->orphan = element_int(r, 3);
    int64_t now = (int64_t)clock_wall(s->clock);
    int64_t again = now + element_int(r, 2) + SCHED_BUSY_MARGIN_MS;
    int64_t next = after(s, s->due_ms);
    show_times(s);
    s->relook = again < next;
    arm(s, again < next ? again : next);
    return;
  }
  if (got == 0) { /* done already */
    s->qhead++;
    return run_next(s);
  }
  if (s->nqueue == 0) { /* the first take of a look: what to run */
    plan(s, done);
    /* A tick whose holder's lease ended undone (it died running it) runs
     * first; with catch_up the plan has it already. */
    if (!s->spec->catch_up && s->orphan > done && s->orphan < s->queue[0]) {
      s->queue[1] = s->queue[0];
      s->queue[0] = s->orphan;
      s->nqueue = 2;
    }
    s->orphan = 0;
  }
  start_job(s, s->queue[s->qhead]);
}

/* resume: only when the schedule ran before (a start-up's look at the
 * tick missed while no host ran). */
static void send_take_as(schedule *s, int64_t tick, bool resume) {
  s->state = ST_TAKING;
  args_start(s, "take", tick);
  bk_args_num(&s->args, SCHED_LEASE_MS);
  if (resume) bk_args_str(&s->args, "resume");
  if (eval(s, take_done) != 0) {
    s->state = ST_WAITING;
    if (s->stopping) return settle_stop(s);
    arm(s, (int64_t)clock_wall(s->clock) + SCHED_RETRY_MS);
  }
}

/* The next tick of the queue, or the wait for the next one. */
static void run_next(schedule *s) {
  if (s->stopping || s->qhead >= s->nqueue) return wait_next(s);
  send_take(s, s->queue[s->qhead]);
}

static void mark_done(void *data, const bk_reply *r, const char *err);

/* Sends the held done call; not connected: again after SCHED_RETRY_MS. */
static void send_held(schedule *s) {
  if (bk_command(s->b, s->cmd, s->held_argc, s->held_argv, s->held_len, mark_done, s) == 0) return;
  s->resend = true;
  arm(s, (int64_t)clock_wall(s->clock) + SCHED_RETRY_MS);
}

static void mark_done(void *data, const bk_reply *r, const char *err) {
  schedule *s = data;
  char why[512];
  if (r == NULL && !s->abandoned && s->held_argc > 0) {
    /* The connection went with the call unanswered: it may have run or
     * not; the same call again says which (a tick done is not done twice). */
    log_line(LOG_WARN, s->spec->name, "tick done mark unanswered: sending it again", "tick",
             s->tick_text, "error", err ? err : "connection lost", NULL);
    s->resend = true;
    arm(s, (int64_t)clock_wall(s->clock) + SCHED_RETRY_MS);
    return;
  }
  held_free(s);
  /* Done already, by this host: the same call sent again after its answer
   * was lost; the first one applied the writes. */
  bool mine = element_int(r, 0) == 0 && element_int(r, 2) == 1;
  if (r == NULL || r->type != BK_ARRAY || r->elements < 2) {
    bk_reply_text(r, err, why, sizeof why);
    log_line(LOG_ERROR, s->spec->name, "tick done mark not written: the tick may run again", "tick",
             s->tick_text, "key", s->key, "error", why, NULL);
    count(s, "unwritten");
  } else if (element_int(r, 0) == 0 && !mine) {
    log_line(LOG_WARN, s->spec->name,
             "tick ran again after it was done (this host paused past its lease?): its writes "
             "were dropped",
             LOG_NUMBER "tick", s->tick_text, NULL);
    count(s, "duplicate");
  } else {
    count(s, s->ran_ok ? "ok" : "error");
    const bk_reply *failed = r->element[1];
    if (!mine && failed->type == BK_STRING && failed->len > 0)
      log_line(LOG_ERROR, s->spec->name, "tick write failed", LOG_NUMBER "tick", s->tick_text,
               "error", failed->str, NULL);
    int64_t tick = strtoll(s->tick_text, NULL, 10);
    if (tick > s->known_done) s->known_done = tick;
  }
  s->qhead++;
  run_next(s);
}

static void job_done(void *data, struct entry *e, const struct rt_result *res) {
  schedule *s = data;
  int64_t tick = s->queue[s->qhead];
  entry_free(e);
  s->e = NULL;
  timer_stop(s->renew);
  snprintf(s->tick_text, sizeof s->tick_text, "%" PRId64, tick);
  bool ok = res->kind == RT_ACK;
  char error[1024] = "";
  if (!ok) {
    snprintf(error, sizeof error, "%.*s", (int)(res->text_len < 1000 ? res->text_len : 1000),
             res->text ? res->text : "");
    log_line(LOG_ERROR, s->spec->name, "tick failed", LOG_NUMBER "tick", s->tick_text, "error",
             res->text ? res->text : "", NULL);
  }
  s->ran_ok = ok;
  bool last = s->qhead + 1 >= s->nqueue || s->stopping;
  int64_t next = after(s, s->due_ms);
  args_start(s, "done", tick);
  bk_args_str(&s->args, ok ? "ok" : "error");
  bk_args_str(&s->args, error);
  bk_args_num(&s->args, next == INT64_MAX ? 0 : next);
  bk_args_str(&s->args, last ? "1" : "0");
  bk_args_num(&s->args, SCHED_LEASE_MS);
  size_t nwrites = ok ? res->nwrites : 0;
  char *counts = nwrites ? malloc(nwrites * 24) : NULL;
  if (nwrites && counts == NULL) nwrites = 0; /* out of memory: the mark alone */
  bk_args_num(&s->args, (long long)nwrites);
  /* The argument counts: bk_args_num holds 8 numbers, so they go in a
   * buffer of their own (the broker copies the command as it is sent). */
  for (size_t i = 0; i < nwrites; i++) {
    const struct rt_write *w = &res->writes[i];
    int len = snprintf(counts + i * 24, 24, "%zu", w->argc);
    bk_args_add(&s->args, counts + i * 24, (size_t)len);
    for (size_t a = 0; a < w->argc; a++) bk_args_add(&s->args, w->argv[a], w->argvlen[a]);
  }
  s->state = ST_MARKING;
  if (hold_args(s) == 0) {
    free(counts);
    send_held(s);
    return;
  }
  int sent = eval(s, mark_done); /* out of memory for the copy: sent once */
  free(counts);
  if (sent != 0) {
    log_line(LOG_ERROR, s->spec->name,
             "tick done mark not written (not connected): the tick may run again",
             LOG_NUMBER "tick", s->tick_text, NULL);
    count(s, "unwritten");
    s->qhead++;
    run_next(s);
  }
}

static void renew_fire(ltimer *t, void *data);
static void renew_done(void *data, const bk_reply *r, const char *err) {
  (void)err;
  schedule *s = data;
  s->renew_out = false;
  if (r && r->type == BK_ARRAY && element_int(r, 0) < 0)
    log_line(LOG_WARN, s->spec->name,
             "tick lease lost while the tick runs (this host was slow): another host may run it "
             "too; its writes apply once",
             NULL);
  if (s->state == ST_RUNNING) timer_start(s->renew, SCHED_LEASE_MS / 3);
  settle_stop(s);
}

static void renew_fire(ltimer *t, void *data) {
  (void)t;
  schedule *s = data;
  if (s->state != ST_RUNNING || s->renew_out) return;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_TICK);
  bk_args_str(&a, "1");
  bk_args_str(&a, s->key);
  bk_args_str(&a, "take");
  bk_args_num(&a, s->queue[s->qhead]);
  bk_args_str(&a, s->owner);
  bk_args_num(&a, SCHED_LEASE_MS);
  if (bk_command(s->b, s->cmd, a.argc, a.argv, a.argvlen, renew_done, s) == 0)
    s->renew_out = true;
  else
    timer_start(s->renew, SCHED_LEASE_MS / 3);
  bk_args_free(&a);
}

/* A tick is due: the newest due now is looked at. */
static void fire(ltimer *t, void *data) {
  (void)t;
  schedule *s = data;
  if (s->resend) {
    s->resend = false;
    if (s->state == ST_MARKING && !s->abandoned) return send_held(s);
    return;
  }
  if (s->state != ST_WAITING || s->stopping) return;
  int64_t now = (int64_t)clock_wall(s->clock);
  int64_t due = s->due_ms;
  bool relook = s->relook;
  s->relook = false;
  if (relook && after(s, due) > now) { /* the same tick, its holder's lease over */
    s->nqueue = s->qhead = 0;
    return send_take(s, due);
  }
  if (s->next_ms > now) return arm(s, s->next_ms);
  int64_t t0 = newest_due(s, now);
  if (t0 <= 0 || t0 > now) return wait_next(s);
  s->due_ms = t0;
  s->nqueue = s->qhead = 0;
  send_take(s, t0);
}

schedule *sched_new(handler *h, broker *b, bk_conn *cmd, lclock *clock, const char *owner,
                    sched_event_fn *on_event, void *data) {
  schedule *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->h = h;
  s->spec = handler_spec(h);
  s->b = b;
  s->cmd = cmd;
  s->clock = clock;
  s->on_event = on_event;
  s->data = data;
  bk_args_init(&s->args);
  char why[600];
  if (s->spec->cron && cron_parse(s->spec->cron, &s->cron, why, sizeof why) != 0) {
    log_line(LOG_ERROR, s->spec->name, "schedule not started", "cron", s->spec->cron, "error", why,
             NULL);
    sched_free(s);
    return NULL;
  }
  if (s->spec->cron && s->spec->tz && tz_load(s->spec->tz, &s->tz, why, sizeof why) != 0) {
    log_line(LOG_ERROR, s->spec->name, "schedule not started", "tz", s->spec->tz, "error", why,
             NULL);
    sched_free(s);
    return NULL;
  }
  s->key = sched_key(spec_schedule_name(s->spec));
  s->owner = strdup(owner);
  s->timer = timer_new(clock, fire, s);
  s->renew = timer_new(clock, renew_fire, s);
  if (!s->key || !s->owner || !s->timer || !s->renew) {
    sched_free(s);
    return NULL;
  }
  return s;
}

void sched_start(schedule *s) {
  s->started = true;
  s->state = ST_WAITING;
  int64_t now = (int64_t)clock_wall(s->clock);
  s->next_ms = after(s, now);
  show_times(s);
  char next[24];
  snprintf(next, sizeof next, "%" PRId64, s->next_ms);
  log_line(LOG_INFO, s->spec->name, "schedule running", "key", s->key, LOG_NUMBER "next_tick", next,
           NULL);
  s->on_event(s->data, s, SCHED_EV_RUNNING);
  if (s->stopping) return;
  /* Ticks missed while no host ran: the newest due runs now (with catch_up,
   * each after the newest done), unless the schedule never ran. */
  int64_t due = newest_due(s, now);
  if (due > 0) {
    s->due_ms = due;
    s->nqueue = s->qhead = 0;
    send_take_as(s, due, true);
  } else if (s->next_ms != INT64_MAX) {
    arm(s, s->next_ms);
  }
}

void sched_stop(schedule *s) {
  if (s->stopping) return;
  s->stopping = true;
  if (s->state == ST_WAITING) timer_stop(s->timer);
  if (!s->started) {
    s->drained = true;
    s->on_event(s->data, s, SCHED_EV_DRAINED);
    return;
  }
  settle_stop(s);
}

static void dropped(void *data, struct entry *e) {
  schedule *s = data;
  entry_free(e);
  s->e = NULL;
}

size_t sched_abandon(schedule *s) {
  if (!s->stopping) return 0;
  s->abandoned = true;
  if (s->state == ST_MARKING && s->resend) { /* waiting to send it again: given up */
    s->resend = false;
    timer_stop(s->timer);
    log_line(LOG_ERROR, s->spec->name,
             "shutdown deadline: tick done mark not written, the tick may run again", "tick",
             s->tick_text, NULL);
    count(s, "unwritten");
    held_free(s);
    s->state = ST_WAITING;
    settle_stop(s);
    return 0;
  }
  if (s->state != ST_RUNNING) return 0;
  size_t n = handler_abandon(s->h, dropped);
  timer_stop(s->renew);
  s->state = ST_WAITING;
  settle_stop(s);
  return n;
}

bool sched_drained(const schedule *s) { return s->drained; }
bool sched_running(const schedule *s) { return s->started && !s->stopping; }
bool sched_idle(const schedule *s) { return s->state == ST_WAITING && !s->renew_out; }
void sched_swap_handler(schedule *s, handler *h) {
  s->h = h;
  s->spec = handler_spec(h);
}
int64_t sched_next(const schedule *s) { return s->next_ms; }

void sched_free(schedule *s) {
  if (s == NULL) return;
  if (s->timer) timer_free(s->timer);
  if (s->renew) timer_free(s->renew);
  bk_args_free(&s->args);
  held_free(s);
  tz_free(s->tz);
  free(s->key);
  free(s->owner);
  free(s);
}
