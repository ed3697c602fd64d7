/* heartbeat: keeping the claim on held entries (see heartbeat.h). */
#include "heartbeat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "scripts.h"

/* An id and its two numbers, to sort by. */
struct sorted_id {
  uint64_t ms, seq;
  const char *id;
};

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
  ltimer *timer;            /* without a lease: its own beats */
  struct lease_rider rider; /* with one: its sections ride the lease's renewals */
  bool beating;             /* started and not stopped */
  unsigned pending;         /* its own beats sent and not answered (0 or 1) */
  bool warned;              /* a failed beat was logged at warn; quiet until one works */
  struct bk_args args;
  struct sorted_id *order; /* one key's held ids, ascending, at each beat */
  size_t order_cap;
};

uint64_t heartbeat_interval_ms(const struct handler_spec *spec) {
  uint64_t every = spec->min_idle_ms > 0 ? (uint64_t)spec->min_idle_ms / 3 : 0;
  return every > 0 ? every : 1;
}

/* lease_rider_answered_fn, and a beat of its own's: the answer to a beat,
 * the rider's section (an array, or a string: its error), or a failed
 * call's reply (an error, or NULL: no answer). */
static void beat_answered(void *data, const bk_reply *r, const char *err) {
  heartbeat *hb = data;
  if (r && r->type == BK_ARRAY) {
    hb->warned = false;
  } else if (r) { /* a server error: a lost connection is the reconnect's to tell */
    char why[256];
    if (r->type == BK_STRING)
      snprintf(why, sizeof why, "%.*s", (int)r->len, r->str);
    else
      bk_reply_text(r, err, why, sizeof why);
    log_line(hb->warned ? LOG_DEBUG : LOG_WARN, hb->spec->name,
             "keeping the claim on held entries failed: other hosts may take them after min_idle",
             "stream", hb->spec->stream, "group", hb->spec->group, "command", "EVAL", "script",
             "the heartbeat", "error", why, NULL);
    hb->warned = true;
  }
  hb->answered(hb->data);
}

/* A beat of its own (no lease): its whole reply is {renewals, {section}}. */
static void beat_done(void *data, const bk_reply *r, const char *err) {
  heartbeat *hb = data;
  hb->pending--;
  if (r && r->type == BK_ARRAY) {
    const bk_reply *riders = r->elements == 2 ? r->element[1] : NULL;
    r = riders && riders->type == BK_ARRAY && riders->elements == 1 ? riders->element[0] : NULL;
  }
  beat_answered(hb, r, err);
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

static int by_id(const void *a, const void *b) {
  const struct sorted_id *x = a, *y = b;
  if (x->ms != y->ms) return x->ms < y->ms ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* key 0 or 1's ids this beat keeps (kept): "count id...", ascending, as
 * the script's XPENDING over their range needs (out of memory to sort them,
 * in the set's order: the script then re-stamps only some of them). Returns
 * the count. */
static long long add_key(heartbeat *hb, struct bk_args *args, unsigned char key) {
  struct held *h = hb->held;
  if (hb->order_cap < h->n) {
    struct sorted_id *order = realloc(hb->order, h->n * sizeof *order);
    if (order) {
      hb->order = order;
      hb->order_cap = h->n;
    }
  }
  bool sorted = hb->order_cap >= h->n;
  size_t n = 0;
  for (size_t i = 0; i < h->cap; i++) {
    if (h->slots[i].key != key || !kept(hb, i)) continue;
    if (sorted) {
      char *end;
      struct sorted_id *o = &hb->order[n];
      o->id = h->slots[i].id;
      o->ms = strtoull(o->id, &end, 10);
      o->seq = *end == '-' ? strtoull(end + 1, NULL, 10) : 0;
    }
    n++;
  }
  bk_args_num(args, (long long)n);
  if (sorted) {
    qsort(hb->order, n, sizeof *hb->order, by_id);
    for (size_t i = 0; i < n; i++) bk_args_str(args, hb->order[i].id);
  } else {
    for (size_t i = 0; i < h->cap; i++) /* kept() is false now for what it just noted */
      if (h->slots[i].key == key && kept(hb, i)) bk_args_str(args, h->slots[i].id);
  }
  return (long long)n;
}

/* Its section of SCRIPT_KEEPALIVE's ARGV, after the leased flag: group
 * consumer 2 (count id...) for the stream and the retry stream. Returns the
 * number of ids. */
static long long section(heartbeat *hb, struct bk_args *args) {
  bk_args_str(args, hb->spec->group);
  bk_args_str(args, hb->spec->consumer);
  bk_args_num(args, 2);
  long long ids = add_key(hb, args, 0);
  return ids + add_key(hb, args, 1);
}

/* lease_rider_add_fn: its section, when something is held and kept. */
static bool rider_add(void *data, struct lease_rider *r) {
  heartbeat *hb = data;
  if (!hb->beating || hb->held->n == 0) return false;
  bk_args_reset(&r->keys);
  bk_args_reset(&r->args);
  bk_args_str(&r->keys, hb->spec->stream);
  bk_args_str(&r->keys, hb->retry_key);
  return section(hb, &r->args) > 0; /* 0: every one held ran past max_run */
}

/* A beat of its own, without a lease: SCRIPT_KEEPALIVE with no lease and its
 * one section. */
static void beat(ltimer *t, void *data) {
  (void)t;
  heartbeat *hb = data;
  if (!hb->beating) return;
  timer_start(hb->timer, heartbeat_interval_ms(hb->spec));
  if (hb->pending || hb->held->n == 0) return; /* the last one is still out, or nothing held */
  struct bk_args *a = &hb->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_KEEPALIVE);
  bk_args_str(a, "2");
  bk_args_str(a, hb->spec->stream);
  bk_args_str(a, hb->retry_key);
  bk_args_str(a, ""); /* no lease: its value and ttl are not read */
  bk_args_str(a, "0");
  bk_args_str(a, "0"); /* leases */
  bk_args_str(a, "1"); /* riders */
  bk_args_str(a, "0"); /* not leased */
  if (section(hb, a) == 0) return;
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
  lease_rider_init(&hb->rider);
  hb->rider.every_ms = heartbeat_interval_ms(spec);
  hb->rider.add = rider_add;
  hb->rider.answered = beat_answered;
  hb->rider.data = hb;
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

void heartbeat_set_spec(heartbeat *hb, const struct handler_spec *spec) {
  hb->spec = spec;
  hb->rider.every_ms = heartbeat_interval_ms(spec);
}

void heartbeat_start(heartbeat *hb, lease *l) {
  if (hb->beating) return;
  hb->beating = true;
  if (l)
    lease_ride(l, &hb->rider);
  else
    timer_start(hb->timer, heartbeat_interval_ms(hb->spec));
}

void heartbeat_stop(heartbeat *hb) {
  hb->beating = false;
  timer_stop(hb->timer);
  lease_unride(&hb->rider);
}

unsigned heartbeat_pending(const heartbeat *hb) { return hb->pending + hb->rider.pending; }

void heartbeat_free(heartbeat *hb) {
  if (hb == NULL) return;
  if (hb->timer) timer_free(hb->timer);
  lease_rider_free(&hb->rider);
  bk_args_free(&hb->args);
  free(hb->order);
  free(hb);
}
