/* inflight: a subscription's fleet-wide concurrency cap (see inflight.h).
 *
 * Slots here are fungible: a finished handler gives back any slot that is
 * running, so no entry needs to remember its slot; only their number matters
 * and each member's state. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow_keys.h"
#include "inflight.h"
#include "log.h"
#include "scripts.h"

#define WAITER_MAX 600

enum slot_state {
  SLOT_FREE,      /* not held, not asked for */
  SLOT_ASKED,     /* wanted in the outstanding call */
  SLOT_RUNNING,   /* held, a handler runs with it */
  SLOT_RELEASE,   /* to release in the next call */
  SLOT_RELEASING, /* released in the outstanding call */
  SLOT_UNSURE,    /* asked for, and the answer was lost or came too late: maybe held */
};

struct inflight {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  inflight_start_fn *start;
  inflight_answered_fn *answered;
  void *data;
  char *key, *wait_key, *holder;
  int nslots;
  enum slot_state *state;
  char **member;
  struct entry *head, *tail; /* waiting for a slot */
  size_t nwaiting;
  ltimer *timer;
  bool pending;            /* a call is outstanding */
  bool stopping;           /* no more wants; failed releases lapse */
  uint64_t sent_ms;        /* when the outstanding call went out (clock_fresh) */
  uint64_t renewed_ms;     /* when the last call that renewed went out */
  uint64_t denied_ms;      /* when the last answer denied a slot */
  bool denied;             /* the last answer denied a slot */
  bool lapsed_logged;      /* a lost slot was logged (once per run of them) */
  uint64_t retry_ms;       /* after a failed call: no call before this */
  char waiter[WAITER_MAX]; /* this reader's place among the waiting, "" for none */
  struct bk_args args;
  struct fault fault;
};

static void schedule(inflight *f);

static int count(const inflight *f, enum slot_state st) {
  int n = 0;
  for (int i = 0; i < f->nslots; i++) n += f->state[i] == st;
  return n;
}

/* Moves one slot in state `from` to `to`; false when there is none. */
static bool move_one(inflight *f, enum slot_state from, enum slot_state to) {
  for (int i = 0; i < f->nslots; i++)
    if (f->state[i] == from) {
      f->state[i] = to;
      return true;
    }
  return false;
}

static void push_front(inflight *f, struct entry *e) {
  e->next = f->head;
  f->head = e;
  if (f->tail == NULL) f->tail = e;
  f->nwaiting++;
}

static struct entry *pop_front(inflight *f) {
  struct entry *e = f->head;
  if (e == NULL) return NULL;
  f->head = e->next;
  if (f->head == NULL) f->tail = NULL;
  e->next = NULL;
  f->nwaiting--;
  return e;
}

/* Slots wanted now: one per entry waiting, as many as are not running here. */
static int wanted(const inflight *f) {
  if (f->stopping) return 0;
  int room = f->nslots - count(f, SLOT_RUNNING) - count(f, SLOT_RELEASE);
  int n = f->nwaiting < (size_t)room ? (int)f->nwaiting : room;
  return n < 0 ? 0 : n;
}

static void log_failed(inflight *f, const bk_reply *r, const char *err) {
  char why[256], detail[400];
  bk_reply_text(r, err, why, sizeof why);
  enum log_level level = LOG_DEBUG; /* a lost connection: the read says so */
  if (r) {
    snprintf(detail, sizeof detail, "EVAL (max_in_flight) on %s: %s", f->key, why);
    level = fault_failed(&f->fault, clock_now(f->clock), LOG_WARN, detail);
  }
  log_line(level, f->spec->name, "max_in_flight: the slots call failed, entries wait", "stream",
           f->spec->stream, "group", f->spec->group, "key", f->key, "error", why, NULL);
}

static bool is_flags(const bk_reply *r) {
  if (r->type != BK_ARRAY) return false;
  for (size_t i = 0; i < r->elements; i++)
    if (r->element[i]->type != BK_INTEGER) return false;
  return true;
}

static void call_done(void *data, const bk_reply *r, const char *err) {
  inflight *f = data;
  f->pending = false;
  bool ok = r && r->type == BK_ARRAY && r->elements == 3 && is_flags(r->element[0]) &&
            is_flags(r->element[1]) && r->element[2]->type == BK_STRING &&
            r->element[2]->len < WAITER_MAX &&
            r->element[1]->elements == (size_t)count(f, SLOT_ASKED);
  if (!ok) {
    if (r == NULL || r->type == BK_ERROR)
      log_failed(f, r, err);
    else
      log_failed(f, NULL, "unexpected reply");
    /* A stopping reader sends nothing again: what it held lapses. */
    for (int i = 0; i < f->nslots; i++) {
      if (f->state[i] == SLOT_ASKED) f->state[i] = f->stopping ? SLOT_FREE : SLOT_UNSURE;
      if (f->state[i] == SLOT_RELEASING) f->state[i] = f->stopping ? SLOT_FREE : SLOT_RELEASE;
    }
    f->retry_ms = clock_now(f->clock) + INFLIGHT_POLL_MS;
    schedule(f);
    f->answered(f->data);
    return;
  }
  fault_ok(&f->fault, clock_now(f->clock), f->spec);
  const bk_reply *renewed = r->element[0], *granted = r->element[1];
  memcpy(f->waiter, r->element[2]->str, r->element[2]->len);
  f->waiter[r->element[2]->len] = '\0';
  bool lapsed = false;
  for (size_t i = 0; i < renewed->elements; i++) lapsed |= renewed->element[i]->integer == 0;
  if (lapsed && !f->lapsed_logged) {
    log_line(LOG_WARN, f->spec->name,
             "max_in_flight: slots of running handlers lapsed (the host was paused or cut off "
             "past the lease) and were taken by others: more than max_in_flight may run until "
             "these finish",
             "stream", f->spec->stream, "group", f->spec->group, "key", f->key, NULL);
  }
  f->lapsed_logged = lapsed;
  /* A grant answered long after its call (the process paused meanwhile) may
   * have lapsed already: asked for again rather than trusted. */
  bool fresh = clock_fresh(f->clock) - f->sent_ms < INFLIGHT_GRANT_VALID_MS;
  int ngrant = 0;
  size_t a = 0;
  f->denied = false;
  for (int i = 0; i < f->nslots; i++) {
    if (f->state[i] == SLOT_RELEASING) f->state[i] = SLOT_FREE;
    if (f->state[i] != SLOT_ASKED) continue;
    if (granted->element[a++]->integer != 1) {
      f->state[i] = SLOT_FREE;
      f->denied = true;
    } else if (!fresh) {
      f->state[i] = SLOT_UNSURE;
    } else {
      f->state[i] = SLOT_RUNNING;
      ngrant++;
    }
  }
  if (f->denied || !fresh) f->denied_ms = clock_now(f->clock);
  if (!fresh) f->denied = true;
  /* Start what was granted. A handler may finish at once (inflight_done
   * then gives back one running slot: they are all alike). */
  for (int k = 0; k < ngrant; k++) {
    struct entry *e = pop_front(f);
    if (e == NULL) { /* stopped meanwhile */
      move_one(f, SLOT_RUNNING, SLOT_RELEASE);
      continue;
    }
    if (!f->start(f->data, e)) {
      push_front(f, e);
      move_one(f, SLOT_RUNNING, SLOT_UNSURE);
      f->denied = true;
      f->denied_ms = clock_now(f->clock);
    }
  }
  schedule(f);
  f->answered(f->data);
}

static void send(inflight *f) {
  if (f->pending) return;
  int want = wanted(f);
  int unsure = count(f, SLOT_UNSURE);
  /* Slots maybe held and not needed go back. */
  for (int i = f->nslots - 1; i >= 0 && unsure > (f->stopping ? 0 : want); i--)
    if (f->state[i] == SLOT_UNSURE) {
      f->state[i] = SLOT_RELEASE;
      unsure--;
    }
  int release = count(f, SLOT_RELEASE), renew = count(f, SLOT_RUNNING);
  uint64_t now = clock_now(f->clock);
  bool renew_due = renew > 0 && now - f->renewed_ms >= INFLIGHT_RENEW_MS;
  bool drop_place = want == 0 && f->waiter[0] != '\0';
  if (release == 0 && want == 0 && !renew_due && !drop_place) return schedule(f);
  struct bk_args *a = &f->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_INFLIGHT);
  bk_args_str(a, "2");
  bk_args_str(a, f->key);
  bk_args_str(a, f->wait_key);
  bk_args_num(a, f->spec->max_in_flight);
  bk_args_num(a, INFLIGHT_TTL_MS);
  bk_args_num(a, INFLIGHT_WAIT_TTL_MS);
  bk_args_str(a, f->waiter);
  bk_args_str(a, f->holder);
  bk_args_num(a, release);
  bk_args_num(a, renew);
  bk_args_num(a, want);
  for (int i = 0; i < f->nslots; i++)
    if (f->state[i] == SLOT_RELEASE) {
      bk_args_str(a, f->member[i]);
      f->state[i] = SLOT_RELEASING;
    }
  for (int i = 0; i < f->nslots; i++)
    if (f->state[i] == SLOT_RUNNING) bk_args_str(a, f->member[i]);
  /* Slots maybe held first: asked for again, they are granted again. */
  int asked = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < f->nslots && asked < want; i++)
      if (f->state[i] == (pass == 0 ? SLOT_UNSURE : SLOT_FREE)) {
        bk_args_str(a, f->member[i]);
        f->state[i] = SLOT_ASKED;
        asked++;
      }
  f->sent_ms = clock_fresh(f->clock);
  if (bk_command(f->b, f->cmd, a->argc, a->argv, a->argvlen, call_done, f) != 0) {
    /* Not connected: as a failed call, without an answer to wait for. */
    for (int i = 0; i < f->nslots; i++) {
      if (f->state[i] == SLOT_ASKED) f->state[i] = SLOT_UNSURE;
      if (f->state[i] == SLOT_RELEASING) f->state[i] = f->stopping ? SLOT_FREE : SLOT_RELEASE;
    }
    f->retry_ms = now + INFLIGHT_POLL_MS;
    schedule(f);
    if (f->stopping) f->answered(f->data);
    return;
  }
  f->pending = true;
  if (renew > 0) f->renewed_ms = now;
}

static void fire(ltimer *t, void *data) {
  (void)t;
  send(data);
}

/* Arms the timer for the next call: at once for releases and new wants,
 * after INFLIGHT_POLL_MS when the last answer denied, at the renewal when
 * handlers run, else not at all. */
static void schedule(inflight *f) {
  if (f->pending) return; /* the answer schedules */
  uint64_t now = clock_now(f->clock);
  int64_t in = -1;
  int want = wanted(f);
  if (count(f, SLOT_RELEASE) > 0 || (f->stopping && count(f, SLOT_UNSURE) > 0) ||
      (want == 0 && f->waiter[0] != '\0'))
    in = 0;
  else if (want > 0)
    in = !f->denied || now - f->denied_ms >= INFLIGHT_POLL_MS
             ? 0
             : (int64_t)(INFLIGHT_POLL_MS - (now - f->denied_ms));
  else if (count(f, SLOT_RUNNING) > 0)
    in = now - f->renewed_ms >= INFLIGHT_RENEW_MS
             ? 0
             : (int64_t)(INFLIGHT_RENEW_MS - (now - f->renewed_ms));
  else if (count(f, SLOT_UNSURE) > 0)
    in = 0; /* maybe held, not needed: released */
  if (in >= 0 && f->retry_ms > now + (uint64_t)in) in = (int64_t)(f->retry_ms - now);
  if (in >= 0)
    timer_start(f->timer, (uint64_t)in);
  else
    timer_stop(f->timer);
}

inflight *inflight_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                       const char *base_stream, int partition, inflight_start_fn *start,
                       inflight_answered_fn *answered, void *data) {
  inflight *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  bk_args_init(&f->args);
  f->b = b;
  f->cmd = cmd;
  f->clock = clock;
  f->spec = spec;
  f->start = start;
  f->answered = answered;
  f->data = data;
  f->fault.name = "the max_in_flight slots";
  int lanes = handler_spec_lanes(spec);
  f->nslots = lanes < spec->max_in_flight ? lanes : spec->max_in_flight;
  if (f->nslots < 1) f->nslots = 1;
  f->key = flow_key("inflight", base_stream, spec->group, NULL);
  f->wait_key = flow_key("inflight", base_stream, spec->group, "waiting");
  /* The token tells apart readers of one consumer name over time (a
   * process that comes back under it must not renew the slots of the one
   * before) and the harness's hosts, which share one process. */
  static unsigned serial;
  char holder[512];
  snprintf(holder, sizeof holder, "%s/%d/%lx.%llx.%u", spec->consumer ? spec->consumer : "",
           partition, (unsigned long)getpid(), (unsigned long long)clock_wall(clock), ++serial);
  f->holder = strdup(holder);
  f->state = calloc((size_t)f->nslots, sizeof *f->state);
  f->member = calloc((size_t)f->nslots, sizeof *f->member);
  f->timer = timer_new(clock, fire, f);
  if (!f->key || !f->wait_key || !f->holder || !f->state || !f->member || !f->timer) {
    inflight_free(f);
    return NULL;
  }
  for (int i = 0; i < f->nslots; i++) {
    char m[600];
    snprintf(m, sizeof m, "%s#%d", holder, i);
    if ((f->member[i] = strdup(m)) == NULL) {
      inflight_free(f);
      return NULL;
    }
  }
  return f;
}

void inflight_set_spec(inflight *f, const struct handler_spec *spec) { f->spec = spec; }

void inflight_admit(inflight *f, struct entry *e) {
  e->next = NULL;
  if (f->tail)
    f->tail->next = e;
  else
    f->head = e;
  f->tail = e;
  f->nwaiting++;
  schedule(f);
}

void inflight_done(inflight *f) {
  move_one(f, SLOT_RUNNING, SLOT_RELEASE);
  schedule(f);
}

struct entry *inflight_take_waiting(inflight *f) {
  struct entry *list = f->head;
  f->head = f->tail = NULL;
  f->nwaiting = 0;
  schedule(f);
  return list;
}

void inflight_stop(inflight *f) {
  f->stopping = true;
  schedule(f);
}

unsigned inflight_pending(const inflight *f) {
  if (f->pending) return 1;
  return count(f, SLOT_RELEASE) > 0 || (f->stopping && count(f, SLOT_UNSURE) > 0);
}

size_t inflight_waiting(const inflight *f) { return f->nwaiting; }
size_t inflight_held(const inflight *f) { return (size_t)count(f, SLOT_RUNNING); }
const struct fault *inflight_fault(const inflight *f) { return &f->fault; }
const char *inflight_key(const inflight *f) { return f->key; }

void inflight_free(inflight *f) {
  if (f == NULL) return;
  while (f->head) entry_free(pop_front(f)); /* a reader freed without stopping */
  if (f->timer) timer_free(f->timer);
  for (int i = 0; f->member && i < f->nslots; i++) free(f->member[i]);
  free(f->member);
  free(f->state);
  free(f->key);
  free(f->wait_key);
  free(f->holder);
  bk_args_free(&f->args);
  free(f);
}
