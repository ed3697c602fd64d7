/* heartbeat: keeping the claim on held entries (see heartbeat.h). */
#include "heartbeat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "scripts.h"

struct heartbeat {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  const char *retry_key;
  struct held *held;
  struct metric *overran; /* luastream_handler_overran_total of this subscription */
  heartbeat_answered_fn *answered;
  void *data;
  ltimer *timer;
  bool beating;     /* started and not stopped */
  unsigned pending; /* 0 or 1 */
  bool warned;      /* a failed beat was logged at warn; quiet until one works */
  struct bk_args args;
};

uint64_t heartbeat_interval_ms(const struct handler_spec *spec) {
  uint64_t every = spec->min_idle_ms > 0 ? (uint64_t)spec->min_idle_ms / 3 : 0;
  return every > 0 ? every : 1;
}

static void beat_done(void *data, const bk_reply *r, const char *err) {
  heartbeat *hb = data;
  hb->pending--;
  if (r && r->type == BK_ARRAY) {
    hb->warned = false;
  } else if (r) { /* a server error: a lost connection is the reconnect's to tell */
    char why[256];
    bk_reply_text(r, err, why, sizeof why);
    log_line(hb->warned ? LOG_DEBUG : LOG_WARN, hb->spec->name,
             "keeping the claim on held entries failed: other hosts may take them after min_idle",
             "stream", hb->spec->stream, "group", hb->spec->group, "command", "EVAL", "script",
             "the heartbeat", "error", why, NULL);
    hb->warned = true;
  }
  hb->answered(hb->data);
}

/* The entry of slot h, running longer than max_run since this beat: logged
 * and counted once, and kept claimed no more (the handler runs on). */
static void overran(heartbeat *hb, struct held_id *h, uint64_t ran_ms) {
  h->overran = true;
  metric_add(hb->overran, 1);
  char ran[32], limit[32];
  snprintf(ran, sizeof ran, "%llu", (unsigned long long)ran_ms);
  snprintf(limit, sizeof limit, "%lld", (long long)hb->spec->max_run_ms);
  log_line(LOG_WARN, hb->spec->name,
           "handler ran longer than max_run: its entry is no longer kept claimed, and another "
           "consumer's claiming or reclaim read may take it once idle min_idle (the handler is "
           "not stopped)",
           "stream", h->key == 0 ? hb->spec->stream : hb->retry_key, "group", hb->spec->group, "id",
           h->id, LOG_NUMBER "ran_ms", ran, LOG_NUMBER "max_run_ms", limit, NULL);
}

/* Whether slot i holds an entry this beat keeps claimed: held, and not
 * running past max_run (which it notes once, overran). */
static bool kept(heartbeat *hb, size_t i) {
  struct held_id *h = &hb->held->slots[i];
  if (h->id[0] == '\0' || h->overran) return false;
  if (!h->running || hb->spec->max_run_ms <= 0) return true;
  uint64_t ran_ms = clock_now(hb->clock) - h->started_ms;
  if (ran_ms <= (uint64_t)hb->spec->max_run_ms) return true;
  overran(hb, h, ran_ms);
  return false;
}

/* key 0 or 1's ids: "count id...", from the held set. */
static long long add_key(heartbeat *hb, unsigned char key) {
  long long n = 0;
  for (size_t i = 0; i < hb->held->cap; i++) n += kept(hb, i) && hb->held->slots[i].key == key;
  bk_args_num(&hb->args, n);
  for (size_t i = 0; i < hb->held->cap; i++)
    if (kept(hb, i) && hb->held->slots[i].key == key) bk_args_str(&hb->args, hb->held->slots[i].id);
  return n;
}

static void beat(ltimer *t, void *data) {
  (void)t;
  heartbeat *hb = data;
  if (!hb->beating) return;
  timer_start(hb->timer, heartbeat_interval_ms(hb->spec));
  if (hb->pending || hb->held->n == 0) return; /* the last one is still out, or nothing held */
  struct bk_args *a = &hb->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_HEARTBEAT);
  bk_args_str(a, "2");
  bk_args_str(a, hb->spec->stream);
  bk_args_str(a, hb->retry_key);
  bk_args_str(a, hb->spec->group);
  bk_args_str(a, hb->spec->consumer);
  long long ids = add_key(hb, 0);
  ids += add_key(hb, 1);
  if (ids == 0) return; /* every one held ran past max_run */
  if (bk_command(hb->b, hb->cmd, a->argc, a->argv, a->argvlen, beat_done, hb) == 0) hb->pending++;
}

heartbeat *heartbeat_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                         const char *retry_key, struct held *held, heartbeat_answered_fn *answered,
                         void *data) {
  if (spec->min_idle_ms <= 0) return NULL;
  heartbeat *hb = calloc(1, sizeof *hb);
  if (hb == NULL) return NULL;
  hb->b = b;
  hb->cmd = cmd;
  hb->clock = clock;
  hb->spec = spec;
  hb->retry_key = retry_key;
  hb->held = held;
  hb->answered = answered;
  hb->data = data;
  bk_args_init(&hb->args);
  /* At 0 from the start: Prometheus cannot see the first increase of a
   * series whose first sample is already 1. */
  static const char *const labels[] = {"handler", "stream", "group"};
  struct metric_family *f = metrics_family(
      "luastream_handler_overran_total",
      "Entries whose handler ran longer than max_run, and were no longer kept claimed",
      METRIC_COUNTER, 3, labels, NULL, 0);
  hb->overran = metrics_series(f, (const char *const[]){spec->name, spec->stream, spec->group});
  if ((hb->timer = timer_new(clock, beat, hb)) == NULL) {
    heartbeat_free(hb);
    return NULL;
  }
  return hb;
}

void heartbeat_set_spec(heartbeat *hb, const struct handler_spec *spec) { hb->spec = spec; }

void heartbeat_start(heartbeat *hb) {
  if (hb->beating) return;
  hb->beating = true;
  timer_start(hb->timer, heartbeat_interval_ms(hb->spec));
}

void heartbeat_stop(heartbeat *hb) {
  hb->beating = false;
  timer_stop(hb->timer);
}

unsigned heartbeat_pending(const heartbeat *hb) { return hb->pending; }

void heartbeat_free(heartbeat *hb) {
  if (hb == NULL) return;
  if (hb->timer) timer_free(hb->timer);
  bk_args_free(&hb->args);
  free(hb);
}
