/* pause: a group's pause as one reader sees it (see pause.h). */
#include "pause.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_keys.h"
#include "log.h"
#include "scripts.h"

enum seen { SEEN_NONE, SEEN_RUN, SEEN_PAUSE, SEEN_PROBE };

struct pause {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  struct delivery_metrics *metrics;
  pause_changed_fn *changed;
  void *data;
  char *key;
  char prober[LEASE_IDENTITY_MAX + 16]; /* the identity, and the partition */
  char host[128];                       /* "HOST pid N", for people */
  struct lease_rider rider;
  bool looking;           /* started, not stopped */
  bool denied;            /* the ACL refuses the look: runs as if never paused */
  bool failing;           /* a look failed: logged once until one works */
  enum seen seen;         /* what the last answered look said */
  uint64_t asked_ms;      /* when the look out was made */
  uint64_t seen_ms;       /* when the last answered look was made */
  uint64_t wanted_ms;     /* when the gate was last asked: looks go while it is */
  bool probing;           /* the probe entry runs here */
  bool waited;            /* the gate said wait since the last look: told when it may go */
  uint64_t idle_until_ms; /* its probe read found nothing: it only looks until then */
  unsigned pending;       /* trip and close calls out */
  char reason[256];       /* the last look's, while paused */
  char by[512];           /* who paused it */
  char kind[16];          /* "manual" or "breaker" */
  long long left_ms;      /* the last look's time left, -1: until resumed */
  struct bk_args args;    /* trips and closes */
};

static void p_log(pause *p, enum log_level level, const char *msg, const char *k1, const char *v1,
                  const char *k2, const char *v2, const char *k3, const char *v3) {
  log_line(level, p->spec->name, msg, "stream", p->spec->stream, "group", p->spec->group, k1, v1,
           k2, v2, k3, v3, NULL);
}

/* ---- looking ---- */

/* lease_rider_add_fn: the section "p" prober probe_ms, its key the pause's. */
static bool add_look(void *data, struct lease_rider *r) {
  pause *p = data;
  if (!p->looking) return false;
  /* Running, and no entry asked to start lately (idle): no look of its own
   * is needed until one does, and then its wait is one look; it goes with
   * the lease renewals (status, metrics and /readyz see a pause within
   * LEASE_RENEW_MS). */
  uint64_t now = clock_fresh(p->clock);
  if (p->seen == SEEN_RUN && now - p->wanted_ms > PAUSE_FRESH_MS && !r->renewal) return false;
  bk_args_reset(&r->keys);
  bk_args_reset(&r->args);
  bk_args_str(&r->keys, p->key);
  bk_args_str(&r->args, now < p->idle_until_ms ? "" : p->prober);
  bk_args_num(&r->args, PAUSE_PROBE_MS);
  /* A look says how things stood when Redis ran it, which is after now:
   * counting freshness from now is on the safe side. */
  p->asked_ms = now;
  return true;
}

static void copy_str(char *dst, size_t len, const bk_reply *r) {
  if (r && (r->type == BK_STRING || r->type == BK_STATUS))
    snprintf(dst, len, "%.*s", (int)r->len, r->str);
  else
    dst[0] = '\0';
}

/* What a look found changed: logged and told once per transition. */
static void seen(pause *p, enum seen now) {
  enum seen was = p->seen;
  p->seen = now;
  metric_set(p->metrics ? p->metrics->paused : NULL, now == SEEN_PAUSE || now == SEEN_PROBE);
  if (now == was) return;
  char left[32];
  snprintf(left, sizeof left, "%lldms", p->left_ms);
  if (now == SEEN_PAUSE && was != SEEN_PROBE)
    p_log(p, LOG_WARN, "subscription paused: no handler starts until it is resumed", "reason",
          p->reason, "by", p->by, "left", p->left_ms < 0 ? "until resumed" : left);
  else if (now == SEEN_PROBE)
    p_log(p, LOG_INFO, "breaker half-open: this host runs one entry to probe", "reason", p->reason,
          NULL, NULL, NULL, NULL);
  else if (now == SEEN_RUN && was != SEEN_NONE)
    p_log(p, LOG_INFO, "subscription resumed", NULL, NULL, NULL, NULL, NULL, NULL);
  if (now == SEEN_PAUSE) p->changed(p->data, true); /* was not paused: see above */
}

/* lease_rider_answered_fn: the look's answer (pause.h's keepalive section),
 * a string (its error), or the failed call's reply (NULL: no answer). */
static void looked(void *data, const bk_reply *r, const char *err) {
  pause *p = data;
  if (r && r->type == BK_ARRAY && r->elements >= 1 && r->element[0]->type == BK_STRING) {
    char state[8];
    copy_str(state, sizeof state, r->element[0]);
    enum seen now = strcmp(state, "run") == 0     ? SEEN_RUN
                    : strcmp(state, "probe") == 0 ? SEEN_PROBE
                                                  : SEEN_PAUSE;
    if (now != SEEN_RUN && r->elements >= 6) {
      copy_str(p->reason, sizeof p->reason, r->element[1]);
      p->left_ms = r->element[2]->type == BK_INTEGER ? r->element[2]->integer : -1;
      copy_str(p->kind, sizeof p->kind, r->element[3]);
      copy_str(p->by, sizeof p->by, r->element[4]);
    }
    if (p->failing)
      p_log(p, LOG_INFO, "the group's pause is read again", NULL, NULL, NULL, NULL, NULL, NULL);
    p->failing = p->denied = false;
    p->seen_ms = p->asked_ms;
    enum seen was = p->seen;
    seen(p, now);
    /* what waited may start, and reading go on */
    if (now != SEEN_PAUSE && (p->waited || was == SEEN_PAUSE || was == SEEN_NONE)) {
      p->waited = false;
      p->changed(p->data, false);
    }
    return;
  }
  if (r == NULL) return; /* no answer: the connection's to tell; fresh no more soon */
  char why[512];
  if (r->type == BK_STRING)
    snprintf(why, sizeof why, "%.*s", (int)r->len, r->str);
  else
    bk_reply_text(r, err, why, sizeof why);
  bool denied = bk_error_is_denied(why);
  if (!p->failing)
    p_log(p, LOG_ERROR,
          denied
              ? "the redis user may not read the group's pause: the subscription runs as if never "
                "paused (allow the key in the ACL: see docs/operations.md)"
              : "reading the group's pause failed: no handler starts until it works",
          "key", p->key, "error", why, NULL, NULL);
  p->failing = true;
  p->denied = denied;
  if (denied && p->waited) { /* what waited for a look goes on */
    p->waited = false;
    p->changed(p->data, false);
  }
}

/* ---- trips and closes ---- */

static void call_done(void *data, const bk_reply *r, const char *err);

struct call {
  pause *p;
  bool trip;
  char reason[256];
};

static void send(pause *p, bool trip, const char *reason, int64_t want_ms) {
  struct call *c = calloc(1, sizeof *c);
  if (c == NULL) return;
  c->p = p;
  c->trip = trip;
  snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
  char by[sizeof p->host + 300]; /* the arguments point into it until sent */
  snprintf(by, sizeof by, "the breaker of %s on %s", p->spec->name, p->host);
  struct bk_args *a = &p->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_PAUSE);
  bk_args_num(a, 1);
  bk_args_str(a, p->key);
  bk_args_str(a, trip ? "trip" : "close");
  bk_args_str(a, p->prober);
  if (trip) {
    bk_args_num(a, want_ms);
    bk_args_num(a, p->spec->breaker_max_pause_ms);
    bk_args_str(a, c->reason);
    bk_args_str(a, by);
  }
  if (bk_command(p->b, p->cmd, a->argc, a->argv, a->argvlen, call_done, c) != 0) {
    free(c);
    return;
  }
  p->pending++;
}

static void call_done(void *data, const bk_reply *r, const char *err) {
  struct call *c = data;
  pause *p = c->p;
  p->pending--;
  if (r == NULL || r->type == BK_ERROR) {
    char why[512];
    bk_reply_text(r, err, why, sizeof why);
    p_log(p, LOG_ERROR,
          c->trip ? "the breaker could not pause the group" : "the breaker could not close", "key",
          p->key, "error", why, NULL, NULL);
  } else if (c->trip && r->type == BK_ARRAY && r->elements == 3 &&
             r->element[0]->type == BK_INTEGER && r->element[0]->integer == 1) {
    char ms[32], trips[24];
    snprintf(ms, sizeof ms, "%lldms", r->element[1]->integer);
    snprintf(trips, sizeof trips, "%lld", r->element[2]->integer);
    metric_add(p->metrics ? p->metrics->breaker_trips : NULL, 1);
    p_log(p, LOG_WARN, "breaker opened: the group pauses on every host", "reason", c->reason,
          "pause", ms, "trips", trips);
  } else if (!c->trip && r->type == BK_INTEGER && r->integer == 1) {
    p_log(p, LOG_INFO, "breaker closed: the probe succeeded, every host resumes", NULL, NULL, NULL,
          NULL, NULL, NULL);
    seen(p, SEEN_RUN); /* not half-open here any more: no second probe */
    p->changed(p->data, false);
  }
  free(c);
  if (p->looking) lease_rider_soon(&p->rider); /* see what it did now */
}

/* ---- the gate ---- */

enum pause_gate pause_gate(pause *p) {
  if (p->denied) return PAUSE_GO;
  uint64_t now = clock_fresh(p->clock);
  p->wanted_ms = now;
  if (p->seen == SEEN_NONE || now - p->seen_ms > PAUSE_FRESH_MS) {
    lease_rider_soon(&p->rider);
  } else {
    if (p->seen == SEEN_RUN) return PAUSE_GO;
    if (p->seen == SEEN_PROBE && !p->probing && p->pending == 0) return PAUSE_PROBE;
  }
  p->waited = true;
  return PAUSE_WAIT;
}

enum pause_gate pause_read_gate(const pause *p) {
  if (p->denied || p->seen == SEEN_NONE || p->seen == SEEN_RUN) return PAUSE_GO;
  if (p->seen == SEEN_PROBE && !p->probing && p->pending == 0) return PAUSE_PROBE;
  return PAUSE_WAIT;
}

void pause_probe_started(pause *p) { p->probing = true; }
bool pause_probing(const pause *p) { return p->probing; }

void pause_probe_done(pause *p, bool ok, const char *why) {
  p->probing = false;
  if (ok)
    send(p, false, NULL, 0);
  else
    pause_trip(p, -1, why, strlen(why));
}

bool pause_probe_fresh(pause *p) {
  if (p->denied) return true;
  return p->seen == SEEN_PROBE && p->pending == 0 &&
         clock_fresh(p->clock) - p->seen_ms <= PAUSE_FRESH_MS;
}

void pause_probe_dropped(pause *p) { p->probing = false; }

void pause_probe_idle(pause *p) { p->idle_until_ms = clock_fresh(p->clock) + 2 * PAUSE_PROBE_MS; }

void pause_trip(pause *p, int64_t delay_ms, const char *reason, size_t reason_len) {
  const char *nl = memchr(reason, '\n', reason_len); /* a traceback's first line */
  if (nl) reason_len = (size_t)(nl - reason);
  char text[256];
  snprintf(text, sizeof text, "%.*s", (int)(reason_len < 255 ? reason_len : 255), reason);
  int64_t want = delay_ms >= 0 ? delay_ms : p->spec->breaker_pause_ms;
  if (want > p->spec->breaker_max_pause_ms) want = p->spec->breaker_max_pause_ms;
  if (want < 1) want = 1;
  /* Seen paused from now: nothing else starts here before the next look,
   * and what waits here is given back. */
  p->probing = false;
  snprintf(p->reason, sizeof p->reason, "%s", text);
  snprintf(p->by, sizeof p->by, "the breaker of %s on %s", p->spec->name, p->host);
  snprintf(p->kind, sizeof p->kind, "breaker");
  p->left_ms = want;
  send(p, true, text, want);
  seen(p, SEEN_PAUSE);
}

bool pause_seen(const pause *p, char *why, size_t len) {
  if (p->seen != SEEN_PAUSE && p->seen != SEEN_PROBE) return false;
  if (p->seen == SEEN_PROBE || (p->left_ms < 0 && strcmp(p->kind, "breaker") == 0))
    snprintf(why, len, "breaker half-open (%s): one entry probes", p->reason);
  else if (p->left_ms < 0)
    snprintf(why, len, "paused by %s until resumed: %s", p->by, p->reason);
  else
    snprintf(why, len, "paused by %s for %lld ms more: %s", p->by, p->left_ms, p->reason);
  return true;
}

/* ---- life cycle ---- */

pause *pause_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                 const char *identity, int partition, struct delivery_metrics *metrics,
                 pause_changed_fn *changed, void *data) {
  pause *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->b = b;
  p->cmd = cmd;
  p->clock = clock;
  p->spec = spec;
  p->metrics = metrics;
  p->changed = changed;
  p->data = data;
  p->left_ms = -1;
  snprintf(p->prober, sizeof p->prober, "%s#%d", identity, partition);
  lease_holder_text(identity, p->host, sizeof p->host);
  bk_args_init(&p->args);
  lease_rider_init(&p->rider);
  p->rider.every_ms = PAUSE_LOOK_MS;
  p->rider.section = "p";
  p->rider.add = add_look;
  p->rider.answered = looked;
  p->rider.data = p;
  p->key = flow_key("pause", spec->stream, spec->group, NULL);
  p->rider.slot_key = p->key;
  p->rider.with_renewals = true;
  if (p->key == NULL) {
    pause_free(p);
    return NULL;
  }
  return p;
}

void pause_start(pause *p, lease *l) {
  p->looking = true;
  lease_ride(l, &p->rider);
  lease_rider_soon(&p->rider);
}

void pause_stop(pause *p) {
  p->looking = false;
  lease_unride(&p->rider);
  metric_set(p->metrics ? p->metrics->paused : NULL, 0);
}

void pause_set_spec(pause *p, const struct handler_spec *spec) { p->spec = spec; }
unsigned pause_pending(const pause *p) { return p->pending; }

void pause_free(pause *p) {
  if (p == NULL) return;
  lease_rider_free(&p->rider);
  bk_args_free(&p->args);
  free(p->key);
  free(p);
}
