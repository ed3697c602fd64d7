/* sweeper: the delay set's sweep (see sweeper.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "outcome.h"
#include "scripts.h"
#include "sweeper.h"

/* Appended to the delay set's key: where the sweep puts members it cannot read. */
#define UNREADABLE_SUFFIX ":unreadable"

struct sweeper {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  sweeper_swept_fn *swept;
  void *data;
  bool running;         /* between sweeper_start and sweeper_stop */
  unsigned pending;     /* sweeps sent and not answered */
  char *retry_key;      /* where due entries go (for this group only) */
  char *delay_key;      /* the group's delay set (outcome_delay_key) */
  char *unreadable_key; /* where members it cannot read go */
  ltimer *timer;
  uint64_t next_at; /* clock_now when the timer fires; UINT64_MAX: it does not */
  bool asked;       /* sweeper_soon while a sweep was out: ask_ms after its answer */
  uint64_t ask_ms;
  struct bk_args args;
  struct fault fault;
};

/* The next sweep in ms, or sooner if one was asked for meanwhile. */
static void schedule(sweeper *sw, uint64_t ms) {
  if (sw->asked && sw->ask_ms < ms) ms = sw->ask_ms;
  sw->asked = false;
  sw->next_at = clock_now(sw->clock) + ms;
  timer_start(sw->timer, ms);
}

/* How long until the next sweep after one that took `taken` and reported
 * the first member left due at next_due (Unix ms, -1: the set is empty). */
static uint64_t next_wait(sweeper *sw, long long taken, long long next_due) {
  if (taken >= SWEEP_COUNT) return 0; /* a full sweep may have left more that are due */
  if (next_due < 0) return SWEEP_IDLE_MS;
  uint64_t wall = clock_wall(sw->clock);
  if ((uint64_t)next_due <= wall) return 0;
  uint64_t wait = (uint64_t)next_due - wall;
  return wait < SWEEP_IDLE_MS ? wait : SWEEP_IDLE_MS;
}

static void sweep_done(void *data, const bk_reply *r, const char *err) {
  sweeper *sw = data;
  const struct handler_spec *spec = sw->spec;
  sw->pending--;
  if (r && r->type == BK_ARRAY && r->elements == 4 && r->element[0]->type == BK_INTEGER &&
      r->element[1]->type == BK_INTEGER && r->element[2]->type == BK_INTEGER &&
      r->element[3]->type == BK_INTEGER) {
    long long taken = r->element[0]->integer, unreadable = r->element[1]->integer;
    char n[24];
    if (r->element[2]->integer > 0) {
      snprintf(n, sizeof n, "%lld", r->element[2]->integer);
      log_line(LOG_DEBUG, spec->name, "acknowledged entries trimmed from the retry stream",
               "stream", spec->stream, "group", spec->group, "consumer", spec->consumer,
               LOG_NUMBER "entries", n, "retry_stream", sw->retry_key, NULL);
    }
    if (taken > unreadable) {
      snprintf(n, sizeof n, "%lld", taken - unreadable);
      log_line(LOG_DEBUG, spec->name, "delayed entries back on the retry stream", "stream",
               spec->stream, "group", spec->group, "consumer", spec->consumer, LOG_NUMBER "entries",
               n, NULL);
    }
    if (unreadable > 0) {
      snprintf(n, sizeof n, "%lld", unreadable);
      log_line(LOG_ERROR, spec->name,
               "unreadable members of the delay set moved aside, not delivered", "stream",
               spec->stream, "group", spec->group, LOG_NUMBER "members", n, "moved_to",
               sw->unreadable_key, NULL);
    }
    fault_ok(&sw->fault, clock_now(sw->clock), spec);
    if (sw->running) schedule(sw, next_wait(sw, taken, r->element[3]->integer));
  } else {
    char why[256], keys[512], detail[1024];
    bk_reply_text(r, err, why, sizeof why);
    /* Redis's text names neither the script nor the keys it was given. */
    snprintf(keys, sizeof keys, "%s %s %s", sw->delay_key, sw->retry_key, sw->unreadable_key);
    enum log_level level = LOG_DEBUG; /* a lost connection: said elsewhere */
    if (r) {
      snprintf(detail, sizeof detail, "EVAL on %s: %s", keys, why);
      level = fault_failed(&sw->fault, clock_now(sw->clock), LOG_WARN, detail);
    }
    if (sw->running) {
      log_line(level, spec->name, "the delay-set sweep failed, retrying", "stream", spec->stream,
               "group", spec->group, "consumer", spec->consumer, "command", "EVAL", "script",
               "the delay-set sweep", "keys", keys, "error", why, NULL);
      schedule(sw, SWEEP_MS);
    }
  }
  sw->swept(sw->data); /* a claiming read may have waited for this sweep */
}

static void sweep(ltimer *t, void *data) {
  (void)t;
  sweeper *sw = data;
  sw->next_at = UINT64_MAX;
  if (!sw->running) return;
  struct bk_args *a = &sw->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_SWEEP);
  bk_args_str(a, "3");
  bk_args_str(a, sw->delay_key);
  bk_args_str(a, sw->retry_key); /* due entries come back for this group only */
  bk_args_str(a, sw->unreadable_key);
  bk_args_num(a, (long long)clock_wall(sw->clock));
  bk_args_num(a, SWEEP_COUNT);
  bk_args_str(a, sw->spec->group); /* whose acknowledged entries the retry stream drops */
  if (bk_command(sw->b, sw->cmd, a->argc, a->argv, a->argvlen, sweep_done, sw) == 0)
    sw->pending++;
  else
    schedule(sw, SWEEP_MS);
}

sweeper *sweeper_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                     const char *retry_key, sweeper_swept_fn *swept, void *data) {
  sweeper *sw = calloc(1, sizeof *sw);
  if (sw == NULL) return NULL;
  bk_args_init(&sw->args);
  sw->b = b;
  sw->cmd = cmd;
  sw->clock = clock;
  sw->spec = spec;
  sw->swept = swept;
  sw->data = data;
  sw->fault.name = "the delay-set sweep";
  sw->next_at = UINT64_MAX;
  sw->retry_key = strdup(retry_key);
  sw->delay_key = outcome_delay_key(spec);
  if (sw->delay_key) {
    size_t n = strlen(sw->delay_key) + sizeof UNREADABLE_SUFFIX;
    if ((sw->unreadable_key = malloc(n)) != NULL)
      snprintf(sw->unreadable_key, n, "%s" UNREADABLE_SUFFIX, sw->delay_key);
  }
  sw->timer = timer_new(clock, sweep, sw);
  if (!sw->retry_key || !sw->delay_key || !sw->unreadable_key || !sw->timer) {
    sweeper_free(sw);
    return NULL;
  }
  return sw;
}

void sweeper_set_spec(sweeper *sw, const struct handler_spec *spec) { sw->spec = spec; }

void sweeper_start(sweeper *sw) {
  sw->running = true;
  sw->asked = false;
  schedule(sw, 0);
}

void sweeper_soon(sweeper *sw, uint64_t ms) {
  if (!sw->running) return;
  if (sw->pending) {
    if (!sw->asked || ms < sw->ask_ms) sw->ask_ms = ms;
    sw->asked = true;
    return;
  }
  if (sw->next_at != UINT64_MAX && sw->next_at <= clock_now(sw->clock) + ms) return;
  schedule(sw, ms);
}

void sweeper_stop(sweeper *sw) {
  sw->running = false;
  sw->next_at = UINT64_MAX;
  timer_stop(sw->timer);
}

unsigned sweeper_pending(const sweeper *sw) { return sw->pending; }
const struct fault *sweeper_fault(const sweeper *sw) { return &sw->fault; }

void sweeper_free(sweeper *sw) {
  if (sw == NULL) return;
  if (sw->timer) timer_free(sw->timer);
  bk_args_free(&sw->args);
  free(sw->retry_key);
  free(sw->delay_key);
  free(sw->unreadable_key);
  free(sw);
}
