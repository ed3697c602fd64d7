/* key_slots: see key_slots.h. Each key with slots here or entries waiting
 * has a record (its bytes copied, its Redis key's name, its slots' states);
 * a key's slots are fungible, as max_in_flight's (inflight.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow_keys.h"
#include "grow.h"
#include "inflight.h"
#include "key_rate.h"
#include "key_slots.h"
#include "key_table.h"
#include "log.h"
#include "scripts.h"
#include "wire.h"

#define FIRST_KEYS 64

enum kstate { K_FREE, K_ASKED, K_RUNNING, K_RELEASE, K_RELEASING, K_UNSURE };

struct krec {
  bool used;
  char *key; /* the partition key's bytes (owned) */
  size_t len;
  char *name; /* its semaphore's key in Redis */
  size_t name_len;
  unsigned char *state; /* nslots of enum kstate */
  uint64_t next_at;     /* refused: not asked again before */
  bool in_call;
  int gate_id; /* in the call: its id in the gate when asked, -1 none */
};

struct key_slots {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  key_gate *g;
  key_slots_ready_fn *ready;
  void *data;
  char *prefix; /* flow_key("inflight", base stream, group) */
  char *holder;
  int nslots;
  char **member; /* holder#n */
  struct key_table keys;
  struct krec *rec; /* by id, keys.cap of them */
  ltimer *timer;
  bool pending, stopped, lapsed_logged;
  struct fault fault; /* calls the server keeps refusing (readiness, the log) */
  uint64_t sent_ms, renewed_ms, retry_ms;
  int ids[KEY_SLOTS_BATCH]; /* the records of the call out */
  int nids;
  struct bk_args args;
};

static int count(const struct krec *r, int n, enum kstate st) {
  int c = 0;
  for (int i = 0; i < n; i++) c += r->state[i] == st;
  return c;
}

static bool move_one(struct krec *r, int n, enum kstate from, enum kstate to) {
  for (int i = 0; i < n; i++)
    if (r->state[i] == from) {
      r->state[i] = (unsigned char)to;
      return true;
    }
  return false;
}

static bool room(key_slots *ks) {
  if (ks->keys.count < ks->keys.cap) return true;
  size_t cap = ks->keys.cap * 2;
  struct krec *rec = realloc(ks->rec, cap * sizeof *rec);
  if (rec == NULL) return false;
  memset(rec + ks->keys.cap, 0, (cap - ks->keys.cap) * sizeof *rec);
  ks->rec = rec;
  return key_table_grow(&ks->keys, cap) == 0;
}

/* The record of key, made when missing; -1 out of memory. */
static int record(key_slots *ks, const char *key, size_t len) {
  int id = key_table_find(&ks->keys, key, len);
  if (id >= 0) return id;
  if (!room(ks)) return -1;
  struct krec r = {.used = true, .len = len, .gate_id = -1};
  r.key = malloc(len + 1);
  r.name = malloc(key_rate_name_max(ks->prefix));
  r.state = calloc((size_t)ks->nslots, 1);
  if (r.key == NULL || r.name == NULL || r.state == NULL) {
    free(r.key);
    free(r.name);
    free(r.state);
    return -1;
  }
  memcpy(r.key, key, len);
  r.key[len] = '\0';
  r.name_len = key_rate_name(ks->prefix, key, len, r.name);
  if ((id = key_table_add(&ks->keys, r.key, len)) < 0) {
    free(r.key);
    free(r.name);
    free(r.state);
    return -1;
  }
  ks->rec[id] = r;
  return id;
}

static void drop(key_slots *ks, int id) {
  struct krec *r = &ks->rec[id];
  key_table_remove(&ks->keys, id);
  free(r->key);
  free(r->name);
  free(r->state);
  *r = (struct krec){0};
}

/* The gate's id of record r's key as send found it, if its entries still
 * wait there under it; else -1 (none wait, or the key left the gate and came
 * back under another id meanwhile: its slots are then given back and asked
 * for again). O(1): no scan of the gate per key. */
static int gate_id_of(key_slots *ks, const struct krec *r) {
  int id = r->gate_id;
  if (id < 0) return -1;
  const struct gate_key *k = gate_key_at(ks->g, id);
  if (k->head == NULL || k->len != r->len || memcmp(k->key, r->key, r->len) != 0) return -1;
  return id;
}

/* Slots r wants now: one per entry of its key waiting, up to those free. */
static int wanted(const key_slots *ks, const struct krec *r, int gate_id) {
  if (ks->stopped || gate_id < 0) return 0;
  int n = (int)gate_key_at(ks->g, gate_id)->n;
  int room_ = ks->nslots - count(r, ks->nslots, K_RUNNING) - count(r, ks->nslots, K_RELEASE);
  return n < room_ ? n : room_ < 0 ? 0 : room_;
}

static void schedule(key_slots *ks, uint64_t after) {
  uint64_t now = clock_now(ks->clock);
  if (ks->retry_ms > now + after) after = ks->retry_ms - now;
  timer_start(ks->timer, after);
}

/* When a call has something to carry next (0: now), or UINT64_MAX. */
static uint64_t next_in(key_slots *ks) {
  uint64_t now = clock_now(ks->clock), in = UINT64_MAX;
  bool running = false;
  for (size_t id = 0; id < ks->keys.cap; id++) {
    struct krec *r = &ks->rec[id];
    if (!r->used) continue;
    if (count(r, ks->nslots, K_RELEASE) || count(r, ks->nslots, K_UNSURE)) return 0;
    running |= count(r, ks->nslots, K_RUNNING) > 0;
  }
  if (!ks->stopped)
    for (int gid = gate_next_key(ks->g, 0); gid >= 0; gid = gate_next_key(ks->g, gid + 1)) {
      const struct gate_key *k = gate_key_at(ks->g, gid);
      int id = key_table_find(&ks->keys, k->key, k->len);
      uint64_t at = id >= 0 ? ks->rec[id].next_at : 0;
      if (id >= 0 && wanted(ks, &ks->rec[id], gid) == 0) continue;
      uint64_t i = at > now ? at - now : 0;
      if (i < in) in = i;
    }
  if (running) {
    uint64_t due = ks->renewed_ms + INFLIGHT_RENEW_MS, i = due > now ? due - now : 0;
    if (i < in) in = i;
  }
  return in;
}

static void plan(key_slots *ks) {
  if (ks->pending) return;
  uint64_t in = next_in(ks);
  if (in == UINT64_MAX)
    timer_stop(ks->timer);
  else
    schedule(ks, in);
}

static bool flags(const bk_reply *r) {
  if (r->type != BK_ARRAY) return false;
  for (size_t i = 0; i < r->elements; i++)
    if (r->element[i]->type != BK_INTEGER) return false;
  return true;
}

/* The call out was refused: the log and the fault name its one key, or the
 * prefix of its several (Redis does not say which of them it refused). */
static void log_failed(key_slots *ks, const bk_reply *r, const char *err) {
  char why[256], name[400], detail[800], nkeys[24];
  bk_reply_text(r, err, why, sizeof why);
  snprintf(nkeys, sizeof nkeys, "%d", ks->nids);
  bool one = ks->nids == 1;
  if (one)
    snprintf(name, sizeof name, "%.*s", (int)ks->rec[ks->ids[0]].name_len,
             ks->rec[ks->ids[0]].name);
  else
    snprintf(name, sizeof name, "%s", ks->prefix);
  enum log_level level = LOG_DEBUG; /* a lost connection: the read says so */
  if (r) {
    if (one)
      snprintf(detail, sizeof detail, "EVAL (max_in_flight_per_key) on %s: %s", name, why);
    else
      snprintf(detail, sizeof detail, "EVAL (max_in_flight_per_key) on %s keys under %s: %s", nkeys,
               name, why);
    level = fault_failed(&ks->fault, clock_now(ks->clock), LOG_WARN, detail);
  }
  log_line(level, ks->spec->name, "max_in_flight_per_key: the slots call failed, keys wait",
           "stream", ks->spec->stream, "group", ks->spec->group, one ? "key" : "key_prefix", name,
           LOG_NUMBER "keys", nkeys, "error", why, NULL);
}

static void answered(void *data, const bk_reply *r, const char *err) {
  key_slots *ks = data;
  ks->pending = false;
  uint64_t now = clock_now(ks->clock);
  bool ok = r && r->type == BK_ARRAY && r->elements == (size_t)ks->nids;
  for (int i = 0; ok && i < ks->nids; i++) {
    const bk_reply *k = r->element[i];
    ok = k->type == BK_ARRAY && k->elements == 2 && flags(k->element[0]) && flags(k->element[1]) &&
         k->element[1]->elements == (size_t)count(&ks->rec[ks->ids[i]], ks->nslots, K_ASKED);
  }
  if (!ok) {
    log_failed(ks, r, err);
    ks->retry_ms = now + INFLIGHT_POLL_MS;
  } else {
    fault_ok(&ks->fault, now, ks->spec);
  }
  bool fresh = clock_fresh(ks->clock) - ks->sent_ms < INFLIGHT_GRANT_VALID_MS, lapsed = false;
  for (int i = 0; i < ks->nids; i++) {
    int id = ks->ids[i];
    struct krec *rec = &ks->rec[id];
    rec->in_call = false;
    int grant = 0;
    size_t a = 0;
    const bk_reply *answer = ok && r ? r->element[i] : NULL;
    const bk_reply *granted = answer ? answer->element[1] : NULL;
    if (answer)
      for (size_t j = 0; j < answer->element[0]->elements; j++)
        lapsed |= answer->element[0]->element[j]->integer == 0;
    for (int s = 0; s < ks->nslots; s++) {
      if (rec->state[s] == K_RELEASING) rec->state[s] = ok || ks->stopped ? K_FREE : K_RELEASE;
      if (rec->state[s] != K_ASKED) continue;
      if (!ok)
        rec->state[s] = ks->stopped ? K_FREE : K_UNSURE;
      else if (granted == NULL || granted->element[a++]->integer != 1)
        rec->state[s] = K_FREE;
      else if (!fresh)
        rec->state[s] = K_UNSURE;
      else {
        rec->state[s] = K_RUNNING;
        grant++;
      }
    }
    if (ok && (size_t)grant < a) rec->next_at = now + INFLIGHT_POLL_MS; /* refused some */
    if (!fresh) rec->next_at = now + INFLIGHT_POLL_MS;
    int gid = gate_id_of(ks, rec);
    int waiting = gid >= 0 ? (int)gate_key_at(ks->g, gid)->n : 0;
    for (int k = waiting; k < grant; k++) move_one(rec, ks->nslots, K_RUNNING, K_RELEASE);
    if (grant > 0 && gid >= 0) /* onto the lanes; may end the gate's key */
      gate_release(ks->g, gid, (size_t)(grant < waiting ? grant : waiting));
  }
  if (lapsed && !ks->lapsed_logged)
    log_line(LOG_WARN, ks->spec->name,
             "max_in_flight_per_key: slots of running handlers lapsed (the host was paused or "
             "cut off past the lease) and were taken by others: more than max_in_flight_per_key "
             "may run until these finish",
             "stream", ks->spec->stream, "group", ks->spec->group, NULL);
  ks->lapsed_logged = lapsed;
  /* Records with nothing held and nothing waiting go. */
  for (int i = 0; i < ks->nids; i++) {
    struct krec *rec = &ks->rec[ks->ids[i]];
    if (rec->used && count(rec, ks->nslots, K_FREE) == ks->nslots && gate_id_of(ks, rec) < 0)
      drop(ks, ks->ids[i]);
  }
  ks->nids = 0;
  plan(ks);
  ks->ready(ks->data);
}

/* Small numbers as static strings (the counts of one key's members). */
static const char *small(int n) {
  static char digits[1025][6]; /* a key's slots: at most workers (1024) */
  static bool made;
  if (!made) {
    for (int i = 0; i <= 1024; i++) snprintf(digits[i], sizeof digits[i], "%d", i);
    made = true;
  }
  return n >= 0 && n <= 1024 ? digits[n] : "0";
}

/* Adds record id to the call being built: its counts and members. */
static void add(key_slots *ks, int id, int gid, bool renew_due) {
  struct krec *r = &ks->rec[id];
  int want = wanted(ks, r, gid);
  int unsure = count(r, ks->nslots, K_UNSURE);
  for (int s = ks->nslots - 1; s >= 0 && unsure > want; s--)
    if (r->state[s] == K_UNSURE) {
      r->state[s] = K_RELEASE;
      unsure--;
    }
  int release = count(r, ks->nslots, K_RELEASE);
  int renew = renew_due ? count(r, ks->nslots, K_RUNNING) : 0;
  if (release + renew + want == 0) return;
  struct bk_args *a = &ks->args; /* this key's ARGV (send puts KEYS in front) */
  bk_args_str(a, small(release));
  bk_args_str(a, small(renew));
  bk_args_str(a, small(want));
  for (int s = 0; s < ks->nslots; s++)
    if (r->state[s] == K_RELEASE) {
      bk_args_str(a, ks->member[s]);
      r->state[s] = K_RELEASING;
    }
  for (int s = 0; s < ks->nslots && renew; s++)
    if (r->state[s] == K_RUNNING) bk_args_str(a, ks->member[s]);
  int asked = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < ks->nslots && asked < want; s++)
      if (r->state[s] == (pass == 0 ? K_UNSURE : K_FREE)) {
        bk_args_str(a, ks->member[s]);
        r->state[s] = K_ASKED;
        asked++;
      }
  r->in_call = true;
  r->gate_id = gid;
  ks->ids[ks->nids++] = id;
}

static void send(ltimer *t, void *data) {
  (void)t;
  key_slots *ks = data;
  if (ks->pending) return;
  uint64_t now = clock_now(ks->clock);
  bool renew_due = now - ks->renewed_ms >= INFLIGHT_RENEW_MS;
  /* The keys first (KEYS), then ARGV: built in two passes over the same
   * records, the first deciding which go. */
  ks->nids = 0;
  struct bk_args *a = &ks->args;
  bk_args_reset(a);
  /* Each key waiting gets a record, which notes its gate id. */
  for (size_t id = 0; id < ks->keys.cap; id++) ks->rec[id].gate_id = -1;
  if (!ks->stopped)
    for (int gid = gate_next_key(ks->g, 0); gid >= 0; gid = gate_next_key(ks->g, gid + 1)) {
      const struct gate_key *k = gate_key_at(ks->g, gid);
      int id = record(ks, k->key, k->len);
      if (id < 0) break; /* out of memory: they wait for the next turn */
      ks->rec[id].gate_id = gid;
    }
  for (size_t id = 0; id < ks->keys.cap && ks->nids < KEY_SLOTS_BATCH; id++) {
    struct krec *r = &ks->rec[id];
    if (!r->used || r->in_call) continue;
    int gid = r->gate_id;
    bool due = r->next_at <= now;
    if (!due && !count(r, ks->nslots, K_RELEASE) && !count(r, ks->nslots, K_UNSURE) && !renew_due)
      continue;
    if (!due) gid = -1; /* refused lately: release and renew only */
    add(ks, (int)id, gid, renew_due);
  }
  if (ks->nids == 0) {
    bk_args_reset(a);
    return plan(ks);
  }
  /* The records' names (KEYS) in front of what add() gathered. */
  struct bk_args cmd;
  bk_args_init(&cmd);
  bk_args_str(&cmd, "EVAL");
  bk_args_str(&cmd, SCRIPT_INFLIGHT_KEYS);
  bk_args_num(&cmd, ks->nids);
  for (int i = 0; i < ks->nids; i++)
    bk_args_add(&cmd, ks->rec[ks->ids[i]].name, ks->rec[ks->ids[i]].name_len);
  bk_args_num(&cmd, ks->spec->max_in_flight_per_key);
  bk_args_num(&cmd, INFLIGHT_TTL_MS);
  for (int i = 0; i < a->argc; i++) bk_args_add(&cmd, a->argv[i], a->argvlen[i]);
  ks->sent_ms = clock_fresh(ks->clock);
  int rc = bk_command(ks->b, ks->cmd, cmd.argc, cmd.argv, cmd.argvlen, answered, ks);
  bk_args_free(&cmd);
  if (renew_due) ks->renewed_ms = now;
  if (rc == 0) {
    ks->pending = true;
    return;
  }
  answered(ks, NULL, "not connected"); /* as a failed call */
}

key_slots *key_slots_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                         const char *base_stream, int partition, key_gate *g,
                         key_slots_ready_fn *ready, void *data) {
  key_slots *ks = calloc(1, sizeof *ks);
  if (ks == NULL) return NULL;
  bk_args_init(&ks->args);
  ks->b = b;
  ks->cmd = cmd;
  ks->clock = clock;
  ks->spec = spec;
  ks->g = g;
  ks->ready = ready;
  ks->data = data;
  int lanes = handler_spec_lanes(spec);
  ks->nslots = lanes < spec->max_in_flight_per_key ? lanes : spec->max_in_flight_per_key;
  if (ks->nslots < 1) ks->nslots = 1;
  ks->prefix = flow_key("inflight", base_stream, spec->group, NULL);
  ks->fault.name = "the max_in_flight_per_key slots";
  static unsigned serial;
  char holder[512];
  snprintf(holder, sizeof holder, "%s/%d/%lx.%llx.k%u", spec->consumer ? spec->consumer : "",
           partition, (unsigned long)getpid(), (unsigned long long)clock_wall(clock), ++serial);
  ks->holder = strdup(holder);
  ks->member = calloc((size_t)ks->nslots, sizeof *ks->member);
  ks->rec = calloc(FIRST_KEYS, sizeof *ks->rec);
  ks->timer = timer_new(clock, send, ks);
  if (!ks->prefix || !ks->holder || !ks->member || !ks->rec || !ks->timer ||
      key_table_init(&ks->keys, FIRST_KEYS) != 0) {
    key_slots_free(ks);
    return NULL;
  }
  for (int i = 0; i < ks->nslots; i++) {
    char m[600];
    snprintf(m, sizeof m, "%s#%d", holder, i);
    if ((ks->member[i] = strdup(m)) == NULL) {
      key_slots_free(ks);
      return NULL;
    }
  }
  return ks;
}

void key_slots_kick(key_slots *ks) {
  /* No scan per entry: send looks at every key once per turn. */
  if (!ks->stopped && !ks->pending) schedule(ks, 0);
}

void key_slots_done(key_slots *ks, const struct entry *e) {
  size_t len = 0;
  const char *key = entry_get(e, HDR_PARTITION_KEY, &len);
  if (key == NULL || len == 0) return;
  int id = key_table_find(&ks->keys, key, len);
  if (id < 0 || !move_one(&ks->rec[id], ks->nslots, K_RUNNING, K_RELEASE)) return;
  if (!ks->pending) schedule(ks, 0);
}

const struct fault *key_slots_fault(const key_slots *ks) { return &ks->fault; }

unsigned key_slots_pending(const key_slots *ks) {
  if (ks->pending) return 1;
  for (size_t id = 0; id < ks->keys.cap; id++) {
    const struct krec *r = &ks->rec[id];
    if (r->used && (count(r, ks->nslots, K_RELEASE) || count(r, ks->nslots, K_UNSURE))) return 1;
  }
  return 0;
}

void key_slots_set_spec(key_slots *ks, const struct handler_spec *spec) { ks->spec = spec; }

void key_slots_stop(key_slots *ks) {
  ks->stopped = true;
  plan(ks);
}

void key_slots_free(key_slots *ks) {
  if (ks == NULL) return;
  if (ks->timer) timer_free(ks->timer);
  for (size_t id = 0; ks->rec && id < ks->keys.cap; id++)
    if (ks->rec[id].used) drop(ks, (int)id);
  key_table_free(&ks->keys);
  free(ks->rec);
  for (int i = 0; ks->member && i < ks->nslots; i++) free(ks->member[i]);
  free(ks->member);
  free(ks->holder);
  free(ks->prefix);
  bk_args_free(&ks->args);
  free(ks);
}
