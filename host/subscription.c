/* subscription: group creation, the `new` read loop, and outcomes.
 *
 * State lives in struct subscription; every broker callback carries the
 * subscription (or a small request struct) and fires exactly once, also on
 * teardown, so counting outstanding requests is enough to know when a stopping
 * subscription has drained. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "lanes.h"
#include "log.h"
#include "outcome.h"
#include "scripts.h"
#include "subscription.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define BLOCK_MS 2000
/* Bounds of recovery_wait_ms: how long a claiming read blocks and how often
 * reclaim polls. */
#define RECOVERY_WAIT_MAX_MS 1000
#define RECOVERY_WAIT_MIN_MS 50
#define ID_MAX 48 /* "ms-seq" of two 64-bit numbers, NUL included */
#define SWEEP_MS 1000   /* how often the delay set is looked at */
#define SWEEP_COUNT 100 /* most entries one sweep moves */

enum sub_state { SUB_IDLE, SUB_CREATING, SUB_READING, SUB_STOPPING, SUB_DRAINED };

struct subscription {
  handler *h;
  const struct handler_spec *spec;
  broker *b;
  bk_conn *cmd;             /* shared: outcomes and group commands */
  bk_conn *reader;          /* ours: blocking reads */
  lclock *clock;
  sub_event_fn *on_event;
  void *data;

  enum sub_state state;
  struct lanes lanes;
  bool read_pending;        /* an XREADGROUP is outstanding */
  bool dispatching;         /* inside dispatch(): jobs finishing at once must not recurse */
  bool waiting;             /* retry_timer runs (backoff or reclaim poll): do not read before */
  bool native_claim;        /* claiming: the server has XREADGROUP ... CLAIM (8.4+) */
  bool block_next;          /* claim script found nothing: next read blocks on `>` */
  char cursor[ID_MAX];      /* reclaim: where the next XAUTOCLAIM starts */
  char last_read[ID_MAX];   /* the newest id a read has brought, "" before any */
  ltimer *retry_timer;      /* backoff before re-creating the group or reading again */
  uint64_t backoff_ms;
  unsigned writes_pending;  /* outcome commands sent and not answered */

  char (*acks)[ID_MAX];     /* ids finished and not yet in an XACK */
  size_t nacks, acks_cap;
  ltimer *flush_timer;      /* flushes acks at the next loop turn */
  ltimer *sweep_timer;      /* moves due entries of the delay set back */
  char *delay_key;          /* the group's delay set (outcome_delay_key) */
  bool flush_armed;
};

static void read_next(subscription *s);
static void dispatch(subscription *s);
static void ensure_group(subscription *s);
static void progress(subscription *s);

/* ---- logging ---- */

static void sub_log(subscription *s, enum log_level level, const char *msg, const char *k1,
                    const char *v1, const char *k2, const char *v2) {
  log_line(level, s->spec->name, msg, "stream", s->spec->stream, "group", s->spec->group,
           "consumer", s->spec->consumer, k1, v1, k2, v2, NULL);
}

static void reply_text(const bk_reply *r, const char *err, char *buf, size_t len) {
  if (r == NULL)
    snprintf(buf, len, "%s", err ? err : "no reply");
  else if (r->type == BK_ERROR)
    snprintf(buf, len, "%.*s", (int)r->len, r->str);
  else
    snprintf(buf, len, "unexpected reply type %d", r->type);
}

/* ---- drain bookkeeping ---- */

static void maybe_drained(subscription *s) {
  if (s->state != SUB_STOPPING) return;
  if (s->lanes.running || s->nacks || s->writes_pending || s->read_pending) return;
  s->state = SUB_DRAINED;
  sub_log(s, LOG_INFO, "subscription stopped", NULL, NULL, NULL, NULL);
  s->on_event(s->data, s, SUB_EV_DRAINED);
}

/* ---- backoff ---- */

static void retry_fire(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  s->waiting = false;
  if (s->state == SUB_CREATING)
    ensure_group(s);
  else if (s->state == SUB_READING)
    read_next(s);
}

static void backoff(subscription *s) {
  uint64_t ms = s->backoff_ms ? s->backoff_ms : BACKOFF_MIN_MS;
  s->backoff_ms = ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms * 2;
  s->waiting = true;
  timer_start(s->retry_timer, ms);
}

/* How long a recovering subscription may go without looking for idle
 * entries: half of min_idle, at most a second, so an abandoned entry is back
 * within min_idle plus a second. */
static uint64_t recovery_wait_ms(const subscription *s) {
  uint64_t ms = (uint64_t)s->spec->min_idle_ms / 2;
  if (ms > RECOVERY_WAIT_MAX_MS) ms = RECOVERY_WAIT_MAX_MS;
  if (ms < RECOVERY_WAIT_MIN_MS) ms = RECOVERY_WAIT_MIN_MS;
  return ms;
}

/* reclaim: nothing idle long enough yet; look again in a while. */
static void poll_later(subscription *s) {
  s->waiting = true;
  timer_start(s->retry_timer, recovery_wait_ms(s));
}

/* ---- acks: coalesced, one XACK per loop turn ---- */

struct ack_batch {
  subscription *s;
  size_t n;
  char (*ids)[ID_MAX];
};

static void add_ack(subscription *s, const char *id);

static void ack_done(void *data, const bk_reply *r, const char *err) {
  struct ack_batch *batch = data;
  subscription *s = batch->s;
  s->writes_pending--;
  if (r == NULL || r->type != BK_INTEGER) {
    char why[256];
    reply_text(r, err, why, sizeof why);
    char count[24];
    snprintf(count, sizeof count, "%zu", batch->n);
    sub_log(s, LOG_WARN, "ack failed, will retry", "entries", count, "error", why);
    /* Put them back: acked later, never dropped, and not at once: an error
     * such as READONLY lasts until the server changes. */
    for (size_t i = 0; i < batch->n; i++) add_ack(s, batch->ids[i]);
    s->flush_armed = true;
    timer_start(s->flush_timer, BACKOFF_MIN_MS);
  }
  free(batch->ids);
  free(batch);
  maybe_drained(s);
}

static void flush_acks(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  s->flush_armed = false;
  if (s->nacks == 0) return;
  if (!bk_connected(s->b, s->cmd)) { /* keep them; try again shortly */
    s->flush_armed = true;
    timer_start(s->flush_timer, BACKOFF_MIN_MS);
    return;
  }
  struct ack_batch *batch = malloc(sizeof *batch);
  struct bk_args a;
  bk_args_init(&a);
  if (batch == NULL) goto later;
  batch->s = s;
  batch->n = s->nacks;
  batch->ids = s->acks;
  bk_args_str(&a, "XACK");
  bk_args_str(&a, s->spec->stream);
  bk_args_str(&a, s->spec->group);
  for (size_t i = 0; i < batch->n; i++) bk_args_str(&a, batch->ids[i]);
  if (bk_command(s->b, s->cmd, a.argc, a.argv, a.argvlen, ack_done, batch) != 0) goto later;
  bk_args_free(&a);
  s->writes_pending++;
  s->acks = NULL; /* the batch owns them now */
  s->nacks = s->acks_cap = 0;
  return;
later:
  bk_args_free(&a);
  free(batch);
  s->flush_armed = true;
  timer_start(s->flush_timer, BACKOFF_MIN_MS);
}

/* Adds id to the next XACK. */
static void add_ack(subscription *s, const char *id) {
  if (s->nacks == s->acks_cap) {
    size_t cap = s->acks_cap ? s->acks_cap * 2 : 64;
    void *p = realloc(s->acks, cap * sizeof *s->acks);
    if (p == NULL) {
      sub_log(s, LOG_ERROR, "out of memory: entry left pending", "id", id, NULL, NULL);
      return;
    }
    s->acks = p;
    s->acks_cap = cap;
  }
  snprintf(s->acks[s->nacks++], ID_MAX, "%s", id);
}

/* Adds id to the XACK that goes out at the next loop turn. */
static void queue_ack(subscription *s, const char *id) {
  add_ack(s, id);
  if (!s->flush_armed) {
    s->flush_armed = true;
    timer_start(s->flush_timer, 0);
  }
}

/* ---- outcomes ---- */

struct write_req {
  subscription *s;
  char id[ID_MAX];
  const char *what; /* for the log: "retry", "reply", "dead letter", ... */
};

static void write_done(void *data, const bk_reply *r, const char *err) {
  struct write_req *req = data;
  subscription *s = req->s;
  s->writes_pending--;
  const bk_reply *failed = r && (r->type == BK_ERROR || r->type == BK_NIL) ? r : NULL;
  bool acked = false;
  if (r && r->type == BK_ARRAY && r->elements) {
    /* EXEC runs every queued command even after one fails (no rollback):
     * the XACK, always last, says whether the entry is still pending. */
    for (size_t i = 0; i < r->elements && !failed; i++)
      if (r->element[i]->type == BK_ERROR) failed = r->element[i];
    const bk_reply *last = r->element[r->elements - 1];
    acked = last->type == BK_INTEGER && last->integer > 0;
  }
  if (failed || r == NULL) {
    char why[256];
    reply_text(failed, failed && failed->type == BK_NIL ? "transaction aborted" : err, why,
               sizeof why);
    log_line(LOG_ERROR, s->spec->name,
             acked ? "outcome partly written: entry acked, a write failed"
                   : "outcome not written, entry left pending",
             "stream", s->spec->stream, "group", s->spec->group, "id", req->id, "outcome",
             req->what, "error", why, NULL);
  }
  free(req);
  maybe_drained(s);
}

static void ignore_reply(void *data, const bk_reply *r, const char *err) {
  (void)r, (void)err;
  subscription *s = data;
  s->writes_pending--;
  maybe_drained(s);
}

/* Sends t: one command alone, several as MULTI ... EXEC (the EXEC reply says
 * whether all of it was written). Frees t. */
static void send_txn(subscription *s, const struct entry *e, const char *what, struct txn *t) {
  struct write_req *req = malloc(sizeof *req);
  bool multi = t->n > 1;
  const char *exec = "EXEC", *multi_cmd = "MULTI";
  size_t exec_len = 4, multi_len = 5;
  if (req == NULL) goto fail;
  req->s = s;
  snprintf(req->id, sizeof req->id, "%s", e->id);
  req->what = what;
  if (multi) {
    if (bk_command(s->b, s->cmd, 1, &multi_cmd, &multi_len, ignore_reply, s) != 0) goto fail;
    s->writes_pending++;
    /* MULTI was accepted: the connection is up and the rest goes out with it. */
    for (int i = 0; i < t->n; i++) {
      bk_command(s->b, s->cmd, t->cmd[i].argc, t->cmd[i].argv, t->cmd[i].argvlen, ignore_reply, s);
      s->writes_pending++;
    }
    bk_command(s->b, s->cmd, 1, &exec, &exec_len, write_done, req);
  } else if (bk_command(s->b, s->cmd, t->cmd[0].argc, t->cmd[0].argv, t->cmd[0].argvlen,
                        write_done, req) != 0) {
    goto fail;
  }
  s->writes_pending++;
  txn_free(t);
  return;
fail:
  free(req);
  txn_free(t);
  log_line(LOG_ERROR, s->spec->name, "outcome not written (not connected), entry left pending",
           "stream", s->spec->stream, "group", s->spec->group, "id", e->id, "outcome", what, NULL);
}

/* Deliveries of e before this one, whatever the read mode: the count a copy
 * or a delayed entry carries in its header, plus what Redis counted for this
 * id (accept_entry folded the header into e->deliveries for claimed reads). */
static long long deliveries_before(const subscription *s, const struct entry *e) {
  if (s->spec->read == READ_NEW) {
    const char *carried = entry_get(e, HDR_DELIVERY_COUNT, NULL);
    return carried ? strtoll(carried, NULL, 10) : 0;
  }
  /* claiming reports deliveries before this one; reclaim Redis's count after
   * the claim, this one included. */
  return s->spec->read == READ_RECLAIM ? e->deliveries - 1 : e->deliveries;
}

/* Dead-letters e: its copy on the dead-letter stream and its ack in one
 * transaction. Without a dead-letter stream, a rejected entry is logged and
 * acked, anything else logged and left pending: never lost silently. */
static void dead_letter(subscription *s, const struct entry *e, const char *reason,
                        const char *error, size_t error_len, long long deliveries) {
  char count[24];
  snprintf(count, sizeof count, "%lld", deliveries);
  if (s->spec->dead_letter == NULL) {
    bool reject = strcmp(reason, "rejected") == 0;
    bool bad_input = !strcmp(reason, "decode-error") || !strcmp(reason, "too-large") ||
                     !strcmp(reason, "no-fields");
    log_line(LOG_ERROR, s->spec->name,
             reject      ? "entry rejected, acked (no dead_letter stream)"
             : bad_input ? "bad entry left pending"
                         : "delivery limit reached, entry left pending (no dead_letter stream)",
             "stream", s->spec->stream, "group", s->spec->group, "id", e->id, "reason", reason,
             "deliveries", count, "error", error, NULL);
    if (reject) queue_ack(s, e->id);
    return;
  }
  log_line(LOG_WARN, s->spec->name, "entry dead-lettered", "stream", s->spec->stream, "group",
           s->spec->group, "id", e->id, "reason", reason, "deliveries", count, "dead_letter",
           s->spec->dead_letter, NULL);
  struct txn t;
  txn_init(&t);
  outcome_dead_letter(&t, s->spec, e, reason, error, error_len, deliveries, clock_wall(s->clock));
  outcome_ack(&t, s->spec, e);
  send_txn(s, e, "dead letter", &t);
}

/* Delivers e again after delay_ms, durably. A claimed entry that may wait
 * pending (delay within min_idle) is re-stamped to turn claimable on time;
 * anything else moves to the group's delay set with its ack, and a sweeper
 * (any host's) puts it back on the stream when due. */
static void delay(subscription *s, const struct entry *e, int64_t delay_ms, long long deliveries) {
  struct txn t;
  txn_init(&t);
  if (s->spec->read != READ_NEW && delay_ms <= s->spec->min_idle_ms) {
    outcome_restamp(&t, s->spec, e, delay_ms);
  } else {
    outcome_delay(&t, s->spec, e, deliveries, clock_wall(s->clock) + (uint64_t)delay_ms);
    outcome_ack(&t, s->spec, e);
  }
  send_txn(s, e, "retry_after", &t);
}

/* A retry of either kind; past max_deliveries it becomes a dead letter. */
static void retry(subscription *s, const struct entry *e, const struct rt_result *res) {
  long long deliveries = deliveries_before(s, e) + 1; /* this one counts */
  int cap = s->spec->max_deliveries;
  if (cap && deliveries >= cap) {
    char why[64];
    snprintf(why, sizeof why, "retried on delivery %lld of %d", deliveries, cap);
    dead_letter(s, e, "max-deliveries", why, strlen(why), deliveries);
  } else if (res->kind == RT_RETRY_AFTER) {
    delay(s, e, res->delay_ms, deliveries);
  } else if (s->spec->read == READ_NEW) {
    struct txn t;
    txn_init(&t);
    outcome_retry_copy(&t, s->spec, e, deliveries);
    outcome_ack(&t, s->spec, e);
    send_txn(s, e, "retry", &t);
  }
  /* claiming and reclaim: nothing to write, the entry stays pending and is
   * claimed again once idle min_idle. */
}

static void job_done(void *data, struct entry *e, const struct rt_result *res) {
  subscription *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  struct txn t;
  switch (res->kind) {
  case RT_ACK:
  case RT_REPLY:
    if (res->nwrites == 0) {
      queue_ack(s, e->id); /* coalesced with the others */
      break;
    }
    txn_init(&t);
    if (outcome_writes(&t, res) != 0) {
      txn_free(&t);
      log_line(LOG_ERROR, s->spec->name, "too many entries published by one delivery, left pending",
               "stream", s->spec->stream, "group", s->spec->group, "id", e->id, NULL);
      break;
    }
    outcome_ack(&t, s->spec, e);
    send_txn(s, e, res->kind == RT_REPLY ? "reply" : "publish", &t);
    break;
  case RT_RETRY:
  case RT_RETRY_AFTER:
    retry(s, e, res);
    break;
  case RT_REJECT:
    dead_letter(s, e, "rejected", res->text, res->text_len, deliveries_before(s, e) + 1);
    break;
  case RT_ERROR: {
    log_line(LOG_ERROR, s->spec->name, "handler failed, entry left pending", "stream",
             s->spec->stream, "group", s->spec->group, "id", e->id, "reason", res->reason,
             "error", res->text, NULL);
    /* The last delivery max_deliveries allows failed: dead-letter it now,
     * with the error that ended it. */
    long long deliveries = deliveries_before(s, e) + 1;
    if (s->spec->max_deliveries && deliveries >= s->spec->max_deliveries)
      dead_letter(s, e, "handler-error", res->text, res->text_len, deliveries);
    break;
  }
  case RT_INVALID: /* the handler never saw it: logged (and dead-lettered) by dead_letter */
    dead_letter(s, e, res->reason, res->text, res->text_len, deliveries_before(s, e) + 1);
    break;
  }
  entry_free(e);
  lanes_done(&s->lanes, lane);
  progress(s);
}

/* ---- the delay set ---- */

static void sweep(ltimer *t, void *data);

static void sweep_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (r && r->type == BK_INTEGER) {
    if (r->integer > 0) {
      char moved[24];
      snprintf(moved, sizeof moved, "%lld", r->integer);
      sub_log(s, LOG_DEBUG, "delayed entries back on the stream", "entries", moved, NULL, NULL);
    }
    /* A full sweep may have left more that are due. */
    if (s->state == SUB_READING) timer_start(s->sweep_timer, r->integer >= SWEEP_COUNT ? 0 : SWEEP_MS);
  } else {
    char why[256];
    reply_text(r, err, why, sizeof why);
    if (s->state == SUB_READING) {
      sub_log(s, LOG_WARN, "sweeping the delay set failed, retrying", "error", why, NULL, NULL);
      timer_start(s->sweep_timer, SWEEP_MS);
    }
  }
  maybe_drained(s);
}

static void sweep(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  if (s->state != SUB_READING) return;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_SWEEP);
  bk_args_str(&a, "2");
  bk_args_str(&a, s->delay_key);
  bk_args_str(&a, s->spec->stream);
  bk_args_num(&a, (long long)clock_wall(s->clock));
  bk_args_num(&a, SWEEP_COUNT);
  if (bk_command(s->b, s->cmd, a.argc, a.argv, a.argvlen, sweep_done, s) == 0)
    s->writes_pending++;
  else
    timer_start(s->sweep_timer, SWEEP_MS);
  bk_args_free(&a);
}

/* ---- running entries on lanes ---- */

static void dispatch(subscription *s) {
  if (s->dispatching) return; /* re-entered from a job that finished at once */
  s->dispatching = true;
  struct entry *e;
  int lane;
  while (s->state == SUB_READING && (e = lanes_pop(&s->lanes, &lane)) != NULL) {
    e->owner_data = (void *)(intptr_t)lane;
    if (handler_run(s->h, e, job_done, s) != 0) {
      sub_log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
      entry_free(e);
      lanes_done(&s->lanes, lane);
    }
  }
  s->dispatching = false;
}

/* Called after every job (through the lanes) and every read. */
static void progress(subscription *s) {
  dispatch(s);
  read_next(s);
  maybe_drained(s);
}

/* ---- reading ---- */

static void accept_entry(subscription *s, struct entry *e) {
  size_t glen;
  const char *group = entry_get(e, HDR_RETRY_GROUP, &glen);
  if (group && (glen != strlen(s->spec->group) || memcmp(group, s->spec->group, glen) != 0)) {
    /* Another group's retry copy: not a new entry for us. */
    queue_ack(s, e->id);
    entry_free(e);
    return;
  }
  /* A copy or delayed entry carries its earlier deliveries; a claimed read
   * counts only those of this id: together they are the entry's count. */
  const char *carried = entry_get(e, HDR_DELIVERY_COUNT, NULL);
  if (carried && e->deliveries >= 0) e->deliveries += strtoll(carried, NULL, 10);
  long long before = deliveries_before(s, e);
  if (s->spec->max_deliveries && before >= s->spec->max_deliveries) {
    /* Delivered max_deliveries times without an ack (handlers that failed or
     * killed the host each time): not handed to the handler again. */
    char why[64];
    snprintf(why, sizeof why, "delivered %lld times without an ack", before);
    dead_letter(s, e, "max-deliveries", why, strlen(why), before);
    entry_free(e);
    return;
  }
  size_t klen = 0;
  const char *key = s->spec->by_key ? entry_get(e, HDR_PARTITION_KEY, &klen) : NULL;
  lanes_push(&s->lanes, e, key, klen);
}

static bool group_gone(const bk_reply *r) {
  /* Plain replies start with the code; a script's error carries it inside.
   * Reply strings are NUL-terminated. */
  return r && r->type == BK_ERROR &&
         (bk_reply_is_error(r, "UNBLOCKED") || strstr(r->str, "NOGROUP") != NULL);
}

static void log_deleted(subscription *s, const bk_reply *deleted) {
  for (size_t i = 0; deleted && i < deleted->elements; i++)
    sub_log(s, LOG_WARN, "pending entry no longer in the stream, dropped", "id",
            deleted->element[i]->str, NULL, NULL);
}

/* Which command the next read sends. */
enum read_kind { READ_PLAIN, READ_CLAIM_NATIVE, READ_CLAIM_SCRIPT, READ_RECLAIM_SCRIPT };

static enum read_kind next_read_kind(const subscription *s) {
  switch (s->spec->read) {
  case READ_CLAIMING:
    if (s->native_claim) return READ_CLAIM_NATIVE;
    return s->block_next ? READ_PLAIN : READ_CLAIM_SCRIPT;
  case READ_RECLAIM:
    return READ_RECLAIM_SCRIPT;
  case READ_NEW:
    break;
  }
  return READ_PLAIN;
}

static void read_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->read_pending = false;
  if (s->state != SUB_READING) {
    maybe_drained(s);
    return;
  }
  char why[256];
  if (r == NULL || r->type == BK_ERROR) {
    reply_text(r, err, why, sizeof why);
    if (group_gone(r)) {
      sub_log(s, LOG_ERROR, "group or stream disappeared, creating it again", "error", why, NULL,
              NULL);
      s->state = SUB_CREATING;
    } else {
      sub_log(s, LOG_WARN, "read failed, retrying", "error", why, NULL, NULL);
    }
    backoff(s);
    return;
  }
  enum read_kind kind = next_read_kind(s);
  struct entry *list = NULL;
  size_t count = 0;
  const bk_reply *deleted = NULL;
  char cursor[ID_MAX];
  int rc = kind == READ_CLAIM_SCRIPT || kind == READ_RECLAIM_SCRIPT
               ? entry_parse_claimed(r, cursor, sizeof cursor, &list, &count, &deleted, why,
                                     sizeof why)
               : entry_parse_read(r, &list, &count, NULL, why, sizeof why);
  if (rc != 0) {
    sub_log(s, LOG_ERROR, "unreadable reply to a read, retrying", "error", why, NULL, NULL);
    backoff(s);
    return;
  }
  s->backoff_ms = 0;
  log_deleted(s, deleted);
  if (kind == READ_CLAIM_SCRIPT) s->block_next = count == 0;
  if (kind == READ_PLAIN && s->spec->read == READ_CLAIMING) s->block_next = false;
  if (kind == READ_RECLAIM_SCRIPT) {
    memcpy(s->cursor, cursor, sizeof cursor);
    /* A full pass found nothing claimable: wait instead of spinning. */
    if (count == 0 && strcmp(cursor, "0-0") == 0) poll_later(s);
  }
  while (list) {
    struct entry *e = list;
    list = e->next;
    e->next = NULL;
    if (e->deliveries <= 0) snprintf(s->last_read, sizeof s->last_read, "%s", e->id);
    if (kind == READ_PLAIN && s->spec->read == READ_CLAIMING) {
      /* A claiming subscription's blocking `>` read: new entries, which the
       * claiming read reports as idle 0, delivered 0 times before. */
      e->deliveries = 0;
      e->idle_ms = 0;
    }
    accept_entry(s, e);
  }
  progress(s);
}

static void add_read_args(subscription *s, struct bk_args *a, enum read_kind kind, long long count) {
  if (kind == READ_CLAIM_SCRIPT || kind == READ_RECLAIM_SCRIPT) {
    bk_args_str(a, "EVAL");
    bk_args_str(a, kind == READ_CLAIM_SCRIPT ? SCRIPT_CLAIM : SCRIPT_RECLAIM);
    bk_args_str(a, "1");
    bk_args_str(a, s->spec->stream);
    bk_args_str(a, s->spec->group);
    bk_args_str(a, s->spec->consumer);
    bk_args_num(a, s->spec->min_idle_ms);
    if (kind == READ_RECLAIM_SCRIPT) bk_args_str(a, s->cursor);
    bk_args_num(a, count);
    return;
  }
  bk_args_str(a, "XREADGROUP");
  bk_args_str(a, "GROUP");
  bk_args_str(a, s->spec->group);
  bk_args_str(a, s->spec->consumer);
  bk_args_str(a, "COUNT");
  bk_args_num(a, count);
  bk_args_str(a, "BLOCK");
  /* Before 8.4 a blocked read does not wake when a pending entry turns
   * claimable; on 8.4 how soon it wakes is not documented: cap both. */
  bk_args_num(a, s->spec->read == READ_NEW ? BLOCK_MS : (long long)recovery_wait_ms(s));
  if (kind == READ_CLAIM_NATIVE) {
    bk_args_str(a, "CLAIM");
    bk_args_num(a, s->spec->min_idle_ms);
  }
  bk_args_str(a, "STREAMS");
  bk_args_str(a, s->spec->stream);
  bk_args_str(a, ">");
}

static void read_next(subscription *s) {
  if (s->state != SUB_READING || s->read_pending || s->waiting) return;
  size_t in_flight = lanes_in_flight(&s->lanes);
  size_t batch = (size_t)s->spec->batch;
  if (in_flight > batch / 2) return; /* resumes when the lanes catch up */
  if (!bk_connected(s->b, s->reader)) return; /* resumes from reader_state */
  struct bk_args a;
  bk_args_init(&a);
  add_read_args(s, &a, next_read_kind(s), (long long)(batch - in_flight));
  if (bk_command(s->b, s->reader, a.argc, a.argv, a.argvlen, read_done, s) == 0)
    s->read_pending = true;
  bk_args_free(&a);
}

static void reader_state(void *data, bk_conn *c, int up) {
  (void)c;
  subscription *s = data;
  if (up) read_next(s);
}

/* ---- group creation ---- */

static void start_reading(subscription *s) {
  s->state = SUB_READING;
  s->backoff_ms = 0;
  static const char *const mode[] = {"new", "claiming", "reclaim"};
  const char *how = s->spec->read != READ_CLAIMING ? NULL
                    : s->native_claim             ? "XREADGROUP CLAIM"
                                                  : "claim script (claim_fallback)";
  sub_log(s, LOG_INFO, "subscription reading", "read", mode[s->spec->read], "via", how);
  s->on_event(s->data, s, SUB_EV_READING);
  timer_start(s->sweep_timer, 0);
  progress(s); /* entries read before the group was lost run now */
}

static const char *start_id(const char *start) {
  if (strcmp(start, "new") == 0) return "$";
  if (strcmp(start, "beginning") == 0) return "0";
  return start;
}

static void setid_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (s->state != SUB_CREATING) return maybe_drained(s);
  if (r && r->type == BK_STATUS) {
    sub_log(s, LOG_INFO, "group cursor moved", "start_at", s->spec->start_at, NULL, NULL);
    return start_reading(s);
  }
  char why[256];
  reply_text(r, err, why, sizeof why);
  sub_log(s, LOG_ERROR, "cannot move the group cursor (start_at), retrying", "error", why, NULL,
          NULL);
  backoff(s);
}

static void move_cursor(subscription *s) {
  const char *argv[] = {"XGROUP", "SETID", s->spec->stream, s->spec->group,
                        start_id(s->spec->start_at)};
  size_t len[5];
  for (int i = 0; i < 5; i++) len[i] = strlen(argv[i]);
  if (bk_command(s->b, s->cmd, 5, argv, len, setid_done, s) == 0)
    s->writes_pending++;
  else
    backoff(s);
}

static void create_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (s->state != SUB_CREATING) return maybe_drained(s);
  bool created = r && r->type == BK_STATUS;
  if (created || (r && bk_reply_is_error(r, "BUSYGROUP"))) {
    if (created) sub_log(s, LOG_INFO, "group created", "start", s->spec->start, NULL, NULL);
    /* start_at moves an existing group only: a new one already starts there. */
    if (!created && s->spec->start_at) return move_cursor(s);
    return start_reading(s);
  }
  char why[256];
  reply_text(r, err, why, sizeof why);
  sub_log(s, LOG_ERROR, "cannot create the group, retrying", "error", why, NULL, NULL);
  backoff(s);
}

static void ensure_group(subscription *s) {
  s->state = SUB_CREATING;
  /* A group created again has a new pending list: scan it from the start. */
  strcpy(s->cursor, "0-0");
  s->block_next = false;
  const char *start = start_id(s->spec->start_at ? s->spec->start_at : s->spec->start);
  const char *argv[] = {"XGROUP", "CREATE", s->spec->stream, s->spec->group, start, "MKSTREAM"};
  size_t len[6];
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(s->b, s->cmd, 6, argv, len, create_done, s) == 0)
    s->writes_pending++;
  else
    backoff(s);
}

/* ---- life cycle ---- */

subscription *sub_new(handler *h, broker *b, bk_conn *cmd, lclock *clock,
                      sub_event_fn *on_event, void *data) {
  subscription *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->h = h;
  s->spec = handler_spec(h);
  s->b = b;
  s->cmd = cmd;
  s->clock = clock;
  s->on_event = on_event;
  s->data = data;
  s->retry_timer = timer_new(clock, retry_fire, s);
  s->flush_timer = timer_new(clock, flush_acks, s);
  s->sweep_timer = timer_new(clock, sweep, s);
  s->delay_key = outcome_delay_key(s->spec);
  if (!s->retry_timer || !s->flush_timer || !s->sweep_timer || !s->delay_key ||
      lanes_init(&s->lanes, s->spec->workers, s->spec->by_key) != 0) {
    sub_free(s);
    return NULL;
  }
  return s;
}

void sub_start(subscription *s, long server_version) {
  s->native_claim = server_version >= SUB_CLAIM_VERSION;
  char name[300];
  snprintf(name, sizeof name, "%s/read", s->spec->name);
  s->reader = bk_conn_open(s->b, name, reader_state, s);
  ensure_group(s);
}

void sub_stop(subscription *s) {
  if (s->state == SUB_STOPPING || s->state == SUB_DRAINED) return;
  s->state = SUB_STOPPING;
  timer_stop(s->retry_timer);
  timer_stop(s->sweep_timer);
  /* Entries read but not started stay pending: another consumer recovers them. */
  struct entry *left = lanes_drain_queued(&s->lanes);
  size_t n = 0;
  while (left) {
    struct entry *e = left;
    left = e->next;
    entry_free(e);
    n++;
  }
  if (n) {
    char count[24];
    snprintf(count, sizeof count, "%zu", n);
    sub_log(s, LOG_INFO, "entries read but not started stay pending", "entries", count, NULL, NULL);
  }
  if (s->reader) {
    bk_conn_close(s->b, s->reader); /* a blocked read completes with an error */
    s->reader = NULL;
  }
  /* Acks still queued go out now rather than at the next turn. */
  if (s->nacks) flush_acks(s->flush_timer, s);
  maybe_drained(s);
}

bool sub_reading(const subscription *s) { return s->state == SUB_READING; }

bool sub_idle(const subscription *s) {
  return s->state == SUB_READING && lanes_in_flight(&s->lanes) == 0 && s->nacks == 0 &&
         s->writes_pending == 0;
}

const char *sub_last_read(const subscription *s) { return s->last_read; }
const struct handler_spec *sub_spec(const subscription *s) { return s->spec; }

void sub_free(subscription *s) {
  if (s == NULL) return;
  if (s->reader) bk_conn_close(s->b, s->reader);
  if (s->retry_timer) timer_free(s->retry_timer);
  if (s->flush_timer) timer_free(s->flush_timer);
  if (s->sweep_timer) timer_free(s->sweep_timer);
  free(s->delay_key);
  struct entry *left = s->lanes.lane ? lanes_drain_queued(&s->lanes) : NULL;
  while (left) {
    struct entry *e = left;
    left = e->next;
    entry_free(e);
  }
  lanes_free(&s->lanes);
  free(s->acks);
  handler_release(s->h);
  free(s);
}
