/* heartbeat: keeping the claim on held entries (see heartbeat.h). */
#include "heartbeat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
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
  const struct held *held;
  heartbeat_answered_fn *answered;
  void *data;
  ltimer *timer;
  bool beating;     /* started and not stopped */
  unsigned pending; /* 0 or 1 */
  bool warned;      /* a failed beat was logged at warn; quiet until one works */
  struct bk_args args;
  struct sorted_id *order; /* one key's held ids, ascending, at each beat */
  size_t order_cap;
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

static int by_id(const void *a, const void *b) {
  const struct sorted_id *x = a, *y = b;
  if (x->ms != y->ms) return x->ms < y->ms ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* key 0 or 1's ids: "count id...", from the held set, ascending, as the
 * script's XPENDING over their range needs (out of memory to sort them, in
 * the set's order: the script then re-stamps only some of them). */
static void add_key(heartbeat *hb, unsigned char key) {
  const struct held *h = hb->held;
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
    const struct held_id *slot = &h->slots[i];
    if (slot->id[0] == '\0' || slot->key != key) continue;
    if (sorted) {
      char *end;
      struct sorted_id *o = &hb->order[n];
      o->id = slot->id;
      o->ms = strtoull(slot->id, &end, 10);
      o->seq = *end == '-' ? strtoull(end + 1, NULL, 10) : 0;
    }
    n++;
  }
  bk_args_num(&hb->args, (long long)n);
  if (sorted) {
    qsort(hb->order, n, sizeof *hb->order, by_id);
    for (size_t i = 0; i < n; i++) bk_args_str(&hb->args, hb->order[i].id);
    return;
  }
  for (size_t i = 0; i < h->cap; i++)
    if (h->slots[i].id[0] != '\0' && h->slots[i].key == key) bk_args_str(&hb->args, h->slots[i].id);
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
  add_key(hb, 0);
  add_key(hb, 1);
  if (bk_command(hb->b, hb->cmd, a->argc, a->argv, a->argvlen, beat_done, hb) == 0) hb->pending++;
}

heartbeat *heartbeat_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                         const char *retry_key, const struct held *held,
                         heartbeat_answered_fn *answered, void *data) {
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
  free(hb->order);
  free(hb);
}
