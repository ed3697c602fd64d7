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
  double held;                      /* permits in hand, usable until expires_ms */
  uint64_t expires_ms;
  unsigned pending; /* takes out */
  bool waiting;     /* the timer runs: no take before it fires */
  bool stopped;
  bool failing; /* the last take failed: logged once until one succeeds */
  ltimer *timer;
  struct bk_args args;
};

static void fire(ltimer *t, void *data) {
  (void)t;
  permits *p = data;
  p->waiting = false;
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
    const char *why = err ? err : r && r->type == BK_ERROR ? r->str : "unexpected reply";
    if (!p->failing)
      log_line(LOG_ERROR, p->spec->name, "rate limit: taking permits failed, reading waits",
               "stream", p->spec->stream, "group", p->spec->group, "key", p->key, "error", why,
               NULL);
    p->failing = true;
    wait_for(p, PERMITS_RETRY_MS);
    return;
  }
  if (p->failing)
    log_line(LOG_INFO, p->spec->name, "rate limit: taking permits works again", "stream",
             p->spec->stream, "group", p->spec->group, "key", p->key, NULL);
  p->failing = false;
  long long granted = r->element[0]->integer, wait = r->element[1]->integer;
  if (granted > 0) {
    uint64_t now = clock_now(p->clock);
    if (p->expires_ms <= now) p->held = 0; /* what was left is dropped, not used late */
    p->held += (double)granted;
    p->expires_ms = now + p->valid_ms;
    p->ready(p->data);
  } else {
    wait_for(p, wait > 0 ? (uint64_t)wait : 1);
  }
}

static void take(permits *p, long long need) {
  long long want = p->chunk > need ? p->chunk : need;
  want -= (long long)p->held;
  if (want < 1) want = 1;
  /* Under load a take waits until a whole chunk is free (one command for
   * many permits), but never for more than the burst can hold at once. */
  long long least = want;
  if ((double)least > p->spec->rate.burst) least = (long long)p->spec->rate.burst;
  if (least < 1) least = 1;
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
  if (!p->stopped && !p->pending && !p->waiting) take(p, nkeys);
  return 0;
}

void permits_spend(permits *p, size_t n) {
  p->held -= (double)n;
  if (p->held < 0) p->held = 0;
}

unsigned permits_pending(const permits *p) { return p->pending; }
double permits_held(const permits *p) { return p->held; }
const char *permits_key(const permits *p) { return p->key; }

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
  /* A 20th of a second's permits, at least 2 (a read covers two keys), at
   * most the burst. */
  double chunk = floor(1e6 / interval / 20);
  if (chunk < 2) chunk = 2;
  if (chunk > burst) chunk = burst;
  p->chunk = (long long)chunk;
  /* At low rates a read's two permits come one interval apart: the first
   * is kept until the second comes. */
  double valid = ceil(2 * interval / 1000);
  p->valid_ms = valid > PERMITS_VALID_MS ? (uint64_t)valid : PERMITS_VALID_MS;
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
