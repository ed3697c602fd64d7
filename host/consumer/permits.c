/* permits: see permits.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "flow_keys.h"
#include "log.h"
#include "permits.h"
#include "scripts.h"

struct permits {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  permits_ready_fn *ready;
  void *data;
  char *key;
  char interval[40], tolerance[40]; /* SCRIPT_RATE's ARGV, formatted once */
  long long chunk;                  /* permits one take asks for */
  uint64_t valid_ms;                /* how long permits are kept unused */
  double held; /* permits in hand, usable until expires_ms; below 0: owed (permits.h) */
  uint64_t expires_ms;
  unsigned pending; /* takes out */
  bool waiting;     /* the timer runs: no take before it fires */
  bool stopped;
  struct fault fault; /* takes refused by the server (readiness, the log) */
  bool woke;          /* the timer fired: the next take is one that waited */
  bool asked;         /* the take out is one that waited */
  bool lost;          /* a take that waited for the permits was refused: others took them */
  ltimer *timer;
  struct bk_args args;
};

static void fire(ltimer *t, void *data) {
  (void)t;
  permits *p = data;
  p->waiting = false;
  p->woke = true;
  if (!p->stopped) p->ready(p->data);
}

static void wait_for(permits *p, uint64_t ms) {
  p->waiting = true;
  timer_start(p->timer, ms ? ms : 1);
}

static void take_done(void *data, const bk_reply *r, const char *err) {
  permits *p = data;
  p->pending--;
  if (p->stopped) return p->ready(p->data); /* a drain may wait for this answer */
  bool ok = r && r->type == BK_ARRAY && r->elements >= 2 && r->element[0]->type == BK_INTEGER &&
            r->element[1]->type == BK_INTEGER;
  if (!ok) {
    char why[256], detail[400];
    bk_reply_text(r, err, why, sizeof why);
    enum log_level level = LOG_DEBUG; /* a lost connection: the read says so */
    if (r) {
      snprintf(detail, sizeof detail, "EVAL (rate) on %s: %s", p->key, why);
      level = fault_failed(&p->fault, clock_now(p->clock), LOG_ERROR, detail);
    }
    log_line(level, p->spec->name, "rate limit: taking permits failed, reading waits", "stream",
             p->spec->stream, "group", p->spec->group, "key", p->key, "error", why, NULL);
    wait_for(p, PERMITS_RETRY_MS);
    return;
  }
  fault_ok(&p->fault, clock_now(p->clock), p->spec);
  long long granted = r->element[0]->integer, wait = r->element[1]->integer;
  /* Hosts refused together ask again together when the permits are free,
   * and on the virtual clock always in the same order: one that waited and
   * still found none asks for fewer next time (see take), so it takes
   * permits as they come rather than after the others. */
  p->lost = granted <= 0 && p->asked;
  if (granted > 0) {
    uint64_t now = clock_now(p->clock);
    if (p->held > 0 && p->expires_ms <= now) p->held = 0; /* dropped, not used late */
    p->held += (double)granted;
    p->expires_ms = now + p->valid_ms;
    p->ready(p->data);
  } else {
    wait_for(p, wait > 0 ? (uint64_t)wait : 1);
  }
}

static void take(permits *p) {
  long long owed = p->held < 0 ? (long long)-p->held : 0;
  long long want = p->chunk + owed;
  /* Under load a take waits until half a chunk is free (one command for
   * many permits): the permits that come meanwhile stay in the limiter,
   * which holds up to the burst, so a take a little late loses none. */
  long long least = ((long long)p->spec->rate.burst < want ? (long long)p->spec->rate.burst : want);
  least = p->lost ? 1 : (least + 1) / 2;
  if (least < owed + 1) least = owed + 1;
  if ((double)least > p->spec->rate.burst) least = (long long)p->spec->rate.burst;
  if (least < 1) least = 1;
  p->asked = p->woke;
  p->woke = false;
  struct bk_args *a = &p->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_RATE);
  bk_args_str(a, "1");
  bk_args_str(a, p->key);
  bk_args_str(a, p->interval);
  bk_args_str(a, p->tolerance);
  bk_args_num(a, want);
  bk_args_num(a, least);
  if (bk_command(p->b, p->cmd, a->argc, a->argv, a->argvlen, take_done, p) == 0)
    p->pending++;
  else
    wait_for(p, PERMITS_RETRY_MS);
}

long long permits_count(permits *p, int nkeys) {
  uint64_t now = clock_now(p->clock);
  if (p->held > 0 && p->expires_ms <= now) p->held = 0; /* kept too long: dropped */
  if (p->held >= nkeys) return (long long)(p->held / nkeys);
  if (p->held >= 1) return 1; /* all keys full brings nkeys - 1 more: owed (permits.h) */
  if (!p->stopped && !p->pending && !p->waiting) take(p);
  return 0;
}

void permits_spend(permits *p, size_t n) { p->held -= (double)n; }

unsigned permits_pending(const permits *p) { return p->pending; }
double permits_held(const permits *p) { return p->held; }
const char *permits_key(const permits *p) { return p->key; }
const struct fault *permits_fault(const permits *p) { return &p->fault; }

void permits_set_spec(permits *p, const struct handler_spec *spec) { p->spec = spec; }

void permits_stop(permits *p) {
  p->stopped = true;
  p->held = 0;
  p->waiting = false;
  timer_stop(p->timer);
}

permits *permits_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                     const char *base_stream, permits_ready_fn *ready, void *data) {
  permits *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  bk_args_init(&p->args);
  p->b = b;
  p->cmd = cmd;
  p->clock = clock;
  p->spec = spec;
  p->ready = ready;
  p->data = data;
  double interval = spec->rate.interval_us, burst = spec->rate.burst;
  snprintf(p->interval, sizeof p->interval, "%.3f", interval);
  snprintf(p->tolerance, sizeof p->tolerance, "%.3f", interval * burst);
  /* A 20th of a second's permits, at least 1, at most the burst. */
  double chunk = floor(1e6 / interval / 20);
  if (chunk > burst) chunk = burst;
  if (chunk < 1) chunk = 1;
  p->chunk = (long long)chunk;
  p->valid_ms = PERMITS_VALID_MS;
  p->fault.name = "the rate limit's permits";
  p->key = flow_key("rate", base_stream, spec->group, NULL);
  p->timer = timer_new(clock, fire, p);
  if (p->key == NULL || p->timer == NULL) {
    permits_free(p);
    return NULL;
  }
  return p;
}

void permits_free(permits *p) {
  if (p == NULL) return;
  if (p->timer) timer_free(p->timer);
  bk_args_free(&p->args);
  free(p->key);
  free(p);
}
