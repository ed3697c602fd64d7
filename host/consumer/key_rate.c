/* key_rate: see key_rate.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_keys.h"
#include "grow.h"
#include "key_rate.h"
#include "log.h"
#include "scripts.h"
#include "sha1.h"

#define NUM_MAX 24

struct key_rate {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  key_gate *g;
  key_rate_ready_fn *ready;
  void *data;
  char *prefix;                     /* flow_key("rate", stream, group, NULL) */
  char interval[40], tolerance[40]; /* SCRIPT_RATE's ARGV, formatted once */
  uint64_t interval_ms;             /* between two permits of a key, rounded down */
  unsigned pending;
  bool stopped;
  struct fault fault; /* calls the server keeps refusing (readiness, the log) */
  ltimer *timer;
  uint64_t timer_at;       /* when the timer fires (UINT64_MAX: not armed) */
  int ids[KEY_RATE_BATCH]; /* the keys of the call out */
  int nids;
  char *buf;        /* the call's key names and numbers */
  size_t first_len; /* the call's first key name, at buf */
  size_t cap;
  struct bk_args args;
};

size_t key_rate_name_max(const char *prefix) {
  return strlen(prefix) + strlen(":keyh:") + (KEY_RATE_RAW_MAX > 40 ? KEY_RATE_RAW_MAX : 40);
}

size_t key_rate_name(const char *prefix, const char *k, size_t len, char *out) {
  size_t n = strlen(prefix);
  memcpy(out, prefix, n);
  if (len <= KEY_RATE_RAW_MAX) {
    memcpy(out + n, ":key:", 5);
    memcpy(out + n + 5, k, len);
    return n + 5 + len;
  }
  char hex[41];
  sha1_hex(k, len, hex);
  memcpy(out + n, ":keyh:", 6);
  memcpy(out + n + 6, hex, 40);
  return n + 6 + 40;
}

static void arm(key_rate *kr, uint64_t after) {
  uint64_t at = clock_now(kr->clock) + after;
  if (kr->timer_at <= at) return; /* fires sooner already */
  kr->timer_at = at;
  timer_start(kr->timer, after);
}

void key_rate_kick(key_rate *kr) {
  if (!kr->stopped && !kr->pending) arm(kr, 0);
}

/* After an answer: the next call when a key waiting may be asked for. */
static void next(key_rate *kr) {
  uint64_t now = clock_now(kr->clock), soonest = UINT64_MAX;
  for (int id = gate_next_key(kr->g, 0); id >= 0; id = gate_next_key(kr->g, id + 1)) {
    struct gate_key *k = gate_key_at(kr->g, id);
    if (!k->asking && k->next_at < soonest) soonest = k->next_at;
  }
  if (soonest != UINT64_MAX) arm(kr, soonest > now ? soonest - now : 0);
}

/* The call out was refused: the log and the fault name its one key, or the
 * prefix of its several (Redis does not say which of them it refused). */
static void log_failed(key_rate *kr, const bk_reply *r, const char *err) {
  char why[256], name[400], detail[800], nkeys[NUM_MAX];
  bk_reply_text(r, err, why, sizeof why);
  snprintf(nkeys, sizeof nkeys, "%d", kr->nids);
  bool one = kr->nids == 1;
  if (one)
    snprintf(name, sizeof name, "%.*s", (int)kr->first_len, kr->buf);
  else
    snprintf(name, sizeof name, "%s", kr->prefix);
  enum log_level level = LOG_DEBUG; /* a lost connection: the read says so */
  if (r) {
    if (one)
      snprintf(detail, sizeof detail, "EVAL (rate_per_key) on %s: %s", name, why);
    else
      snprintf(detail, sizeof detail, "EVAL (rate_per_key) on %s keys under %s: %s", nkeys, name,
               why);
    level = fault_failed(&kr->fault, clock_now(kr->clock), LOG_ERROR, detail);
  }
  log_line(level, kr->spec->name, "rate_per_key: taking permits failed, keys wait", "stream",
           kr->spec->stream, "group", kr->spec->group, one ? "key" : "key_prefix", name,
           LOG_NUMBER "keys", nkeys, "error", why, NULL);
}

static void answered(void *data, const bk_reply *r, const char *err) {
  key_rate *kr = data;
  kr->pending--;
  if (kr->stopped) return kr->ready(kr->data); /* a drain may wait for this answer */
  uint64_t now = clock_now(kr->clock);
  bool ok = r && r->type == BK_ARRAY && r->elements == (size_t)kr->nids * 3;
  for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type == BK_INTEGER;
  if (!ok)
    log_failed(kr, r, err);
  else
    fault_ok(&kr->fault, now, kr->spec);
  for (int i = 0; i < kr->nids; i++) {
    struct gate_key *k = gate_key_at(kr->g, kr->ids[i]);
    /* Not asking: the gate was drained meanwhile (a pause, a stop) and the
     * id may name another key now; the answer is not its. */
    if (!k->asking) continue;
    k->asking = false;
    if (!ok) {
      k->next_at = now + KEY_RATE_RETRY_MS;
      continue;
    }
    long long granted = r->element[3 * i]->integer, wait = r->element[3 * i + 1]->integer;
    long long left = r->element[3 * i + 2]->integer;
    if (granted <= 0) {
      k->next_at = now + (wait > 0 ? (uint64_t)wait : 1);
      continue;
    }
    /* Granted all the limiter had: the next permit comes an interval on
     * (about: asked then, it may be refused with the exact wait). */
    k->next_at = left > 0 ? now : now + kr->interval_ms;
    gate_release(kr->g, kr->ids[i], (size_t)granted); /* may end the key, and k with it */
  }
  kr->nids = 0;
  next(kr);
  kr->ready(kr->data);
}

/* One call for the keys waiting that may be asked for now. */
static void ask(ltimer *t, void *data) {
  (void)t;
  key_rate *kr = data;
  kr->timer_at = UINT64_MAX;
  if (kr->stopped || kr->pending) return;
  uint64_t now = clock_now(kr->clock);
  size_t prefix_max = key_rate_name_max(kr->prefix), need = 0;
  kr->nids = 0;
  for (int id = gate_next_key(kr->g, 0); id >= 0 && kr->nids < KEY_RATE_BATCH;
       id = gate_next_key(kr->g, id + 1)) {
    struct gate_key *k = gate_key_at(kr->g, id);
    if (k->asking || k->next_at > now) continue;
    kr->ids[kr->nids++] = id;
    need += prefix_max + 2 * NUM_MAX;
  }
  if (kr->nids == 0) return next(kr);
  char *buf = grow(kr->buf, &kr->cap, need, 1, 4096);
  if (buf == NULL) {
    kr->nids = 0;
    return arm(kr, KEY_RATE_RETRY_MS);
  }
  kr->buf = buf;
  /* Names first, then the numbers, all in buf (which no longer moves). */
  size_t at = 0, name_at[KEY_RATE_BATCH], name_len[KEY_RATE_BATCH];
  for (int i = 0; i < kr->nids; i++) {
    struct gate_key *k = gate_key_at(kr->g, kr->ids[i]);
    name_at[i] = at;
    name_len[i] = key_rate_name(kr->prefix, k->key, k->len, buf + at);
    at += name_len[i];
    if (i == 0) kr->first_len = name_len[0];
  }
  struct bk_args *a = &kr->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_RATE);
  char nkeys[NUM_MAX];
  snprintf(nkeys, sizeof nkeys, "%d", kr->nids);
  bk_args_str(a, nkeys);
  for (int i = 0; i < kr->nids; i++) bk_args_add(a, buf + name_at[i], name_len[i]);
  bk_args_str(a, kr->interval);
  bk_args_str(a, kr->tolerance);
  long long burst = (long long)kr->spec->rate_per_key.burst;
  for (int i = 0; i < kr->nids; i++) {
    struct gate_key *k = gate_key_at(kr->g, kr->ids[i]);
    long long want = (long long)k->n < burst ? (long long)k->n : burst;
    int w = snprintf(buf + at, NUM_MAX, "%lld", want > 0 ? want : 1);
    bk_args_add(a, buf + at, (size_t)w);
    at += (size_t)w + 1;
    bk_args_add(a, "1", 1);
    k->asking = true;
  }
  if (bk_command(kr->b, kr->cmd, a->argc, a->argv, a->argvlen, answered, kr) == 0) {
    kr->pending++;
    return;
  }
  for (int i = 0; i < kr->nids; i++) gate_key_at(kr->g, kr->ids[i])->asking = false;
  kr->nids = 0;
  arm(kr, KEY_RATE_RETRY_MS);
}

unsigned key_rate_pending(const key_rate *kr) { return kr->pending; }
const struct fault *key_rate_fault(const key_rate *kr) { return &kr->fault; }
void key_rate_set_spec(key_rate *kr, const struct handler_spec *spec) { kr->spec = spec; }

void key_rate_stop(key_rate *kr) {
  kr->stopped = true;
  timer_stop(kr->timer);
  kr->timer_at = UINT64_MAX;
}

key_rate *key_rate_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                       key_gate *g, key_rate_ready_fn *ready, void *data) {
  key_rate *kr = calloc(1, sizeof *kr);
  if (kr == NULL) return NULL;
  bk_args_init(&kr->args);
  kr->b = b;
  kr->cmd = cmd;
  kr->clock = clock;
  kr->spec = spec;
  kr->g = g;
  kr->ready = ready;
  kr->data = data;
  kr->timer_at = UINT64_MAX;
  kr->fault.name = "rate_per_key's permits";
  double interval = spec->rate_per_key.interval_us;
  snprintf(kr->interval, sizeof kr->interval, "%.3f", interval);
  kr->interval_ms = (uint64_t)(interval / 1000);
  snprintf(kr->tolerance, sizeof kr->tolerance, "%.3f", interval * spec->rate_per_key.burst);
  kr->prefix = flow_key("rate", spec->stream, spec->group, NULL);
  kr->timer = timer_new(clock, ask, kr);
  if (kr->prefix == NULL || kr->timer == NULL) {
    key_rate_free(kr);
    return NULL;
  }
  return kr;
}

void key_rate_free(key_rate *kr) {
  if (kr == NULL) return;
  if (kr->timer) timer_free(kr->timer);
  bk_args_free(&kr->args);
  free(kr->buf);
  free(kr->prefix);
  free(kr);
}
