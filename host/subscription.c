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
  const char *what; /* for the log: "retry", "reply" */
  bool ack_after;   /* queue an ack when the write succeeded */
};

static void write_done(void *data, const bk_reply *r, const char *err) {
  struct write_req *req = data;
  subscription *s = req->s;
  s->writes_pending--;
  bool ok = r && r->type != BK_ERROR && r->type != BK_NIL;
  /* EXEC: every queued command must have succeeded too. */
  for (size_t i = 0; ok && r->type == BK_ARRAY && i < r->elements; i++)
    if (r->element[i]->type == BK_ERROR) r = r->element[i], ok = false;
  if (ok && req->ack_after) queue_ack(s, req->id);
  if (!ok) {
    char why[256];
    reply_text(r, r && r->type == BK_NIL ? "transaction aborted" : err, why, sizeof why);
    log_line(LOG_ERROR, s->spec->name, "outcome not written, entry left pending", "stream",
             s->spec->stream, "group", s->spec->group, "id", req->id, "outcome", req->what,
             "error", why, NULL);
  }
  free(req);
  maybe_drained(s);
}

static struct write_req *write_req_new(subscription *s, const struct entry *e, const char *what,
                                       bool ack_after) {
  struct write_req *req = malloc(sizeof *req);
  if (req == NULL) return NULL;
  req->s = s;
  snprintf(req->id, sizeof req->id, "%s", e->id);
  req->what = what;
  req->ack_after = ack_after;
  return req;
}

static void ignore_reply(void *data, const bk_reply *r, const char *err) {
  (void)r, (void)err;
  subscription *s = data;
  s->writes_pending--;
  maybe_drained(s);
}

/* Sends one command whose reply only matters through a later EXEC. */
static int send_quiet(subscription *s, struct bk_args *a) {
  if (bk_command(s->b, s->cmd, a->argc, a->argv, a->argvlen, ignore_reply, s) != 0) return -1;
  s->writes_pending++;
  return 0;
}

/* Retry on `new`: a copy addressed to our group carrying the delivery count,
 * and the ack of the original, in one MULTI/EXEC. */
static void retry_copy(subscription *s, const struct entry *e) {
  size_t clen = 0;
  const char *count = entry_get(e, HDR_DELIVERY_COUNT, &clen);
  char next[24];
  snprintf(next, sizeof next, "%lld", (count ? strtoll(count, NULL, 10) : 0) + 1);
  const char *orig = entry_get(e, HDR_ORIGINAL_ID, NULL);

  struct write_req *req = write_req_new(s, e, "retry", false);
  struct bk_args a;
  bk_args_init(&a);
  if (req == NULL) goto fail;
  bk_args_str(&a, "MULTI");
  if (send_quiet(s, &a) != 0) goto fail;
  bk_args_reset(&a);
  bk_args_str(&a, "XADD");
  bk_args_str(&a, s->spec->stream);
  bk_args_str(&a, "*");
  for (size_t i = 0; i + 1 < e->nfields; i += 2) {
    const char *f = e->field[i];
    if (!strcmp(f, HDR_DELIVERY_COUNT) || !strcmp(f, HDR_RETRY_GROUP) || !strcmp(f, HDR_ORIGINAL_ID))
      continue; /* rewritten below */
    bk_args_add(&a, f, e->field_len[i]);
    bk_args_add(&a, e->field[i + 1], e->field_len[i + 1]);
  }
  bk_args_str(&a, HDR_DELIVERY_COUNT);
  bk_args_str(&a, next);
  bk_args_str(&a, HDR_RETRY_GROUP);
  bk_args_str(&a, s->spec->group);
  bk_args_str(&a, HDR_ORIGINAL_ID);
  bk_args_str(&a, orig ? orig : e->id);
  /* MULTI was accepted, so the connection is up and stays ours this turn. */
  send_quiet(s, &a);
  bk_args_reset(&a);
  bk_args_str(&a, "XACK");
  bk_args_str(&a, s->spec->stream);
  bk_args_str(&a, s->spec->group);
  bk_args_str(&a, e->id);
  send_quiet(s, &a);
  bk_args_reset(&a);
  bk_args_str(&a, "EXEC");
  bk_command(s->b, s->cmd, a.argc, a.argv, a.argvlen, write_done, req);
  s->writes_pending++;
  bk_args_free(&a);
  return;
fail:
  bk_args_free(&a);
  free(req);
  sub_log(s, LOG_ERROR, "retry not written (not connected), entry left pending", "id", e->id,
          NULL, NULL);
}

static void publish_reply(subscription *s, const struct entry *e, const struct rt_result *res) {
  struct write_req *req = write_req_new(s, e, "reply", true);
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XADD");
  bk_args_str(&a, res->stream);
  bk_args_str(&a, "*");
  for (size_t i = 0; i < res->nfields; i++) bk_args_add(&a, res->field[i], res->field_len[i]);
  if (req && bk_command(s->b, s->cmd, a.argc, a.argv, a.argvlen, write_done, req) == 0) {
    s->writes_pending++;
  } else {
    free(req);
    sub_log(s, LOG_ERROR, "reply not written (not connected), entry left pending", "id", e->id,
            NULL, NULL);
  }
  bk_args_free(&a);
}

static void job_done(void *data, struct entry *e, const struct rt_result *res) {
  subscription *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  switch (res->kind) {
  case RT_ACK:
    queue_ack(s, e->id);
    break;
  case RT_RETRY:
    /* A claimed entry stays pending under its own id: the next claiming or
     * reclaim read takes it again once it has been idle min_idle. */
    if (s->spec->read == READ_NEW) retry_copy(s, e);
    break;
  case RT_REPLY:
    publish_reply(s, e, res);
    break;
  case RT_ERROR:
    log_line(LOG_ERROR, s->spec->name, "handler failed, entry left pending", "stream",
             s->spec->stream, "group", s->spec->group, "id", e->id, "reason", res->reason,
             "error", res->text, NULL);
    break;
  case RT_INVALID:
    log_line(LOG_ERROR, s->spec->name, "bad entry left pending", "stream", s->spec->stream,
             "group", s->spec->group, "id", e->id, "reason", res->reason, "error", res->text,
             NULL);
    break;
  }
  entry_free(e);
  lanes_done(&s->lanes, lane);
  progress(s);
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
  if (!s->retry_timer || !s->flush_timer ||
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
