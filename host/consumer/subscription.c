/* subscription: group creation, the read loops of the three modes,
 * dispatching entries onto lanes, and the life cycle (see subscription.h).
 * What happens once a handler has decided is in subscription_outcomes.c.
 *
 * Every broker callback carries the subscription (or a small request struct)
 * and fires exactly once, also on teardown, so counting outstanding requests
 * is enough to know when a stopping subscription has drained. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outcome.h"
#include "read_reply.h"
#include "scripts.h"
#include "subscription_private.h"

static void read_next(subscription *s);
static void dispatch(subscription *s);
static void ensure_group(subscription *s);

/* ---- logging ---- */

void sub__log(subscription *s, enum log_level level, const char *msg, const char *k1,
                    const char *v1, const char *k2, const char *v2) {
  log_line(level, s->spec->name, msg, "stream", s->spec->stream, "group", s->spec->group,
           "consumer", s->spec->consumer, k1, v1, k2, v2, NULL);
}

void sub__reply_text(const bk_reply *r, const char *err, char *buf, size_t len) {
  if (r == NULL)
    snprintf(buf, len, "%s", err ? err : "no reply");
  else if (r->type == BK_ERROR)
    snprintf(buf, len, "%.*s", (int)r->len, r->str);
  else
    snprintf(buf, len, "unexpected reply type %d", r->type);
}

/* ---- periodic work that fails (readiness) ---- */

static const char *const WORK_NAME[NWORK] = {
    [WORK_ACKS] = "acks",
    [WORK_OUTCOMES] = "writing outcomes",
    [WORK_SWEEP] = "the delay-set sweep",
    [WORK_LEASE] = "the consumer lease",
    [WORK_PRUNE] = "the idle-consumer prune",
};

enum log_level sub__work_failed(subscription *s, enum sub_work w, enum log_level level,
                                const char *detail) {
  struct work_fault *f = &s->work[w];
  uint64_t now = clock_now(s->clock);
  bool news = !f->failing || strncmp(f->detail, detail, sizeof f->detail - 1) != 0 ||
              now - f->logged_ms >= WORK_RELOG_MS;
  if (!f->failing) f->since_ms = now;
  f->failing = true;
  snprintf(f->detail, sizeof f->detail, "%s", detail);
  if (!news) return LOG_DEBUG;
  f->logged_ms = now;
  return level;
}

void sub__work_ok(subscription *s, enum sub_work w) {
  struct work_fault *f = &s->work[w];
  if (!f->failing) return;
  f->failing = false;
  char msg[64], ms[24];
  snprintf(msg, sizeof msg, "%s works again", WORK_NAME[w]);
  snprintf(ms, sizeof ms, "%llu", (unsigned long long)(clock_now(s->clock) - f->since_ms));
  sub__log(s, LOG_INFO, msg, "failed_ms", ms, NULL, NULL);
}

/* The ACL refused what a subscription that never read needs: waiting cannot
 * help, so the host is told (at start-up it stops, saying what to grant).
 * Returns whether it was such a refusal. */
static bool denied(subscription *s, const char *command, const char *key, const char *why) {
  if (s->started || !bk_error_is_denied(why)) return false;
  snprintf(s->denied, sizeof s->denied, "%s on %s: %s", command, key, why);
  s->on_event(s->data, s, SUB_EV_DENIED);
  return true;
}

const char *sub_denied(const subscription *s) { return s->denied; }

/* ---- drain bookkeeping ---- */

static void lease_given_back(void *data) {
  subscription *s = data;
  s->writes_pending--;
  s->lease_released = true;
  sub__maybe_drained(s);
}

void sub__maybe_drained(subscription *s) {
  if (s->state != SUB_STOPPING) return;
  if (s->lanes.running || s->nacks || s->writes_pending || s->read_pending) return;
  if (s->redo && !s->abandoned) return; /* cut-off outcomes still to write */
  if (s->lease && !s->lease_released) { /* the name is free once all is written */
    if (!s->lease_releasing) {
      s->lease_releasing = true;
      s->writes_pending++;
      lease_release(s->lease, lease_given_back, s);
    }
    return;
  }
  s->state = SUB_DRAINED;
  sub__log(s, LOG_INFO, "subscription stopped", NULL, NULL, NULL, NULL);
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

/* ---- the consumer name: known to be ours ---- */

/* Whether an entry may be handed to a handler, or a read go out, under the
 * consumer name now: only while the lease is known valid (lease_valid).
 * After a pause or a stalled loop longer than that, another process may
 * hold the name and run these same entries: they wait (pending in Redis),
 * a renewal goes out at once, and LEASE_CONFIRMED resumes; LEASE_LOST
 * stops the subscription, leaving them to the new holder. */
static bool name_held(subscription *s) {
  if (s->lease == NULL || lease_valid(s->lease)) return true;
  if (!s->lease_unconfirmed) {
    s->lease_unconfirmed = true;
    char limit[32];
    snprintf(limit, sizeof limit, "%dms", LEASE_VALID_MS);
    sub__log(s, LOG_WARN,
             "consumer lease not confirmed recently (process paused or loop stalled): entries wait "
             "until it is renewed",
             "lease", lease_key_of(s->lease), "limit", limit);
  }
  lease_confirm(s->lease);
  return false;
}

/* ---- running entries on lanes ---- */

static void dispatch(subscription *s) {
  if (s->dispatching) return; /* re-entered from a job that finished at once */
  s->dispatching = true;
  struct entry *e;
  int lane;
  while (s->state == SUB_READING && s->lanes.queued && name_held(s) &&
         (e = lanes_pop(&s->lanes, &lane)) != NULL) {
    e->owner_data = (void *)(intptr_t)lane;
    if (handler_run(s->h, e, sub__job_done, s) != 0) {
      sub__log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
      sub__held_remove(s, e);
      entry_free(e);
      lanes_done(&s->lanes, lane);
    }
  }
  s->dispatching = false;
}

/* Called after every job (through the lanes) and every read. */
void sub__progress(subscription *s) {
  dispatch(s);
  read_next(s);
  sub__maybe_drained(s);
}

/* ---- reading ---- */

/* ---- entries held here: in a lane or a handler (claiming and reclaim) ---- */

static bool held_has(const subscription *s, const struct entry *e) {
  for (size_t i = 0; i < s->nheld; i++)
    if (s->held[i].key == e->key && strcmp(s->held[i].id, e->id) == 0) return true;
  return false;
}

static bool held_add(subscription *s, const struct entry *e) {
  if (s->nheld == s->held_cap) {
    size_t cap = s->held_cap ? s->held_cap * 2 : 64;
    void *p = realloc(s->held, cap * sizeof *s->held);
    if (p == NULL) return false;
    s->held = p;
    s->held_cap = cap;
  }
  s->held[s->nheld].key = e->key;
  sub__copy_id(s->held[s->nheld++].id, e->id);
  return true;
}

void sub__held_remove(subscription *s, const struct entry *e) {
  for (size_t i = 0; i < s->nheld; i++) {
    if (s->held[i].key != e->key || strcmp(s->held[i].id, e->id) != 0) continue;
    s->held[i] = s->held[--s->nheld];
    return;
  }
}

static void accept_entry(subscription *s, struct entry *e) {
  if (s->spec->read != READ_NEW) {
    if (held_has(s, e)) {
      /* Claimed back while this host still holds it: it aged past min_idle
       * waiting in a lane or running. It is not abandoned; it runs once. */
      entry_free(e);
      return;
    }
    if (!held_add(s, e)) {
      sub__log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
      entry_free(e);
      return;
    }
  }
  /* A copy or delayed entry on the retry stream carries its earlier
   * deliveries; a claimed read counts only those of this id: together they
   * are the entry's count. On the shared stream luastream's header names are
   * a producer's data and change nothing here (entry_carried_deliveries). */
  if (e->deliveries >= 0) e->deliveries += entry_carried_deliveries(e);
  long long before = s->spec->max_deliveries ? sub__deliveries_before(s, e) : 0;
  if (s->spec->max_deliveries && before >= s->spec->max_deliveries) {
    /* Delivered max_deliveries times without an ack (handlers that failed or
     * killed the host each time): not handed to the handler again. */
    char why[64];
    snprintf(why, sizeof why, "delivered %lld times without an ack", before);
    sub__dead_letter(s, e, REASON_MAX_DELIVERIES, why, strlen(why), before, handler_version(s->h));
    sub__held_remove(s, e);
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
    log_line(LOG_WARN, s->spec->name, "pending entry no longer in the stream, dropped", "stream",
             deleted->element[i]->element[0]->str, "group", s->spec->group, "consumer",
             s->spec->consumer, "id", deleted->element[i]->element[1]->str, NULL);
}

/* Which command the next read sends. READ_OWN (SCRIPT_OWN) is a history
 * read that reports what Redis counted, so max_deliveries ends a loop of
 * crashes on `new` as it does on claiming reads. */
enum read_kind { READ_PLAIN, READ_OWN, READ_CLAIM_NATIVE, READ_CLAIM_SCRIPT, READ_RECLAIM_SCRIPT };

static bool is_script(enum read_kind kind) {
  return kind == READ_OWN || kind == READ_CLAIM_SCRIPT || kind == READ_RECLAIM_SCRIPT;
}

static enum read_kind next_read_kind(const subscription *s) {
  switch (s->spec->read) {
  case READ_CLAIMING:
    if (s->native_claim) return READ_CLAIM_NATIVE;
    return s->block_next ? READ_PLAIN : READ_CLAIM_SCRIPT;
  case READ_RECLAIM:
    return READ_RECLAIM_SCRIPT;
  case READ_NEW:
    if (s->recover) return READ_OWN;
    break;
  }
  return READ_PLAIN;
}

/* Whether this read may go out while the last batch still runs (read-ahead):
 * only a `new` subscription's read of `>`. Reads that claim wait for the
 * acks of what ran here (see read_next), and the own pending list is read
 * with nothing in flight. */
static bool reads_ahead(const subscription *s, enum read_kind kind) {
  return kind == READ_PLAIN && s->spec->read == READ_NEW;
}

/* Starts reading this consumer's own pending entries from the beginning. */
static void recover_own(subscription *s) {
  if (s->spec->read != READ_NEW) return;
  s->recover = true;
  for (int k = 0; k < NKEYS; k++) strcpy(s->own_cursor[k], "0-0");
}

static void read_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->read_pending = false;
  if (s->state != SUB_READING) {
    sub__maybe_drained(s);
    return;
  }
  char why[256];
  if (r == NULL || r->type == BK_ERROR) {
    if (!s->read_failing) {
      s->read_failing = true;
      s->failing_since_ms = clock_now(s->clock);
    }
    sub__reply_text(r, err, why, sizeof why);
    enum read_kind kind = next_read_kind(s);
    bool script = kind == READ_CLAIM_SCRIPT || kind == READ_RECLAIM_SCRIPT;
    char keys[512];
    snprintf(keys, sizeof keys, "%s %s", s->spec->stream, s->retry_key);
    if (group_gone(r)) {
      sub__log(s, LOG_ERROR, "group or stream disappeared, creating it again", "error", why, NULL,
              NULL);
      s->state = SUB_CREATING;
    } else {
      log_line(LOG_WARN, s->spec->name, "read failed, retrying", "stream", s->spec->stream,
               "group", s->spec->group, "consumer", s->spec->consumer, "command",
               script ? "EVAL" : "XREADGROUP", "script",
               kind == READ_CLAIM_SCRIPT     ? "the claiming read (claim_fallback)"
               : kind == READ_RECLAIM_SCRIPT ? "the reclaim read"
                                             : NULL,
               "keys", keys, "error", why, NULL);
    }
    backoff(s);
    return;
  }
  enum read_kind kind = next_read_kind(s);
  struct entry *list = NULL;
  size_t count = 0;
  const bk_reply *deleted = NULL;
  char cursor[NKEYS][ID_MAX];
  const char *keys[NKEYS] = {s->spec->stream, s->retry_key};
  int rc = is_script(kind)
               ? entry_parse_claimed(r, keys, NKEYS, cursor[0], ID_MAX, &list, &count, &deleted,
                                     why, sizeof why)
               : entry_parse_streams(r, keys, NKEYS, &list, &count, NULL, why, sizeof why);
  if (rc != 0) {
    sub__log(s, LOG_ERROR, "unreadable reply to a read, retrying", "error", why, NULL, NULL);
    backoff(s);
    return;
  }
  s->backoff_ms = 0;
  s->read_failing = false;
  log_deleted(s, deleted);
  if (kind == READ_CLAIM_SCRIPT) s->block_next = count == 0;
  if (kind == READ_PLAIN && s->spec->read == READ_CLAIMING) s->block_next = false;
  if (kind == READ_OWN) {
    bool moved = false;
    for (int k = 0; k < NKEYS; k++) moved |= strcmp(cursor[k], s->own_cursor[k]) != 0;
    memcpy(s->own_cursor, cursor, sizeof cursor);
    if (!moved) s->recover = false; /* the own pending list is read: on to `>` */
    if (count) {
      char n[24];
      snprintf(n, sizeof n, "%zu", count);
      sub__log(s, LOG_INFO, "entries delivered here earlier and never acked, handled now",
               "entries", n, NULL, NULL);
    }
  }
  if (kind == READ_RECLAIM_SCRIPT) {
    memcpy(s->cursor, cursor, sizeof cursor);
    /* A full pass of both keys found nothing claimable: wait instead of spinning. */
    if (count == 0 && strcmp(cursor[KEY_STREAM], "0-0") == 0 &&
        strcmp(cursor[KEY_RETRY], "0-0") == 0)
      poll_later(s);
  }
  while (list) {
    struct entry *e = list;
    list = e->next;
    e->next = NULL;
    if (kind != READ_OWN && e->deliveries <= 0 && e->key == KEY_STREAM)
      sub__copy_id(s->last_read, e->id);
    if (kind == READ_PLAIN && s->spec->read == READ_CLAIMING) {
      /* A claiming subscription's blocking `>` read: new entries, which the
       * claiming read reports as idle 0, delivered 0 times before. */
      e->deliveries = 0;
      e->idle_ms = 0;
    }
    accept_entry(s, e);
  }
  /* Read ahead: the next read goes out, and leaves at once, before this
   * batch runs, so the server answers it while the handlers work. */
  if (reads_ahead(s, kind)) read_next(s);
  sub__progress(s);
}

static void add_read_args(subscription *s, struct bk_args *a, enum read_kind kind, long long count) {
  if (is_script(kind)) {
    bk_args_str(a, "EVAL");
    bk_args_str(a, kind == READ_OWN            ? SCRIPT_OWN
                   : kind == READ_CLAIM_SCRIPT ? SCRIPT_CLAIM
                                               : SCRIPT_RECLAIM);
    bk_args_str(a, "2");
    bk_args_str(a, s->spec->stream);
    bk_args_str(a, s->retry_key);
    bk_args_str(a, s->spec->group);
    bk_args_str(a, s->spec->consumer);
    if (kind != READ_OWN) bk_args_num(a, s->spec->min_idle_ms);
    bk_args_num(a, count);
    if (kind != READ_CLAIM_SCRIPT)
      for (int k = 0; k < NKEYS; k++)
        bk_args_str(a, kind == READ_OWN ? s->own_cursor[k] : s->cursor[k]);
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
  /* Both keys in one read, COUNT per key: the stream and the retry stream. */
  bk_args_str(a, "STREAMS");
  bk_args_str(a, s->spec->stream);
  bk_args_str(a, s->retry_key);
  bk_args_str(a, ">");
  bk_args_str(a, ">");
}

static void read_next(subscription *s) {
  if (s->state != SUB_READING || s->read_pending || s->waiting) return;
  /* Held here: on lanes, running, or finished with an outcome not yet
   * written (plain acks aside: one small XACK per loop turn). */
  size_t in_flight = lanes_in_flight(&s->lanes) + s->outcomes_unwritten;
  size_t batch = (size_t)s->spec->batch;
  enum read_kind kind = next_read_kind(s);
  bool ahead = reads_ahead(s, kind);
  /* Ahead: a batch more while at most one is held, so at most 2 x batch
   * are held here. Otherwise the lanes fill up to one batch and are read
   * again once half empty. Resumes when the lanes or the writes catch up.
   * COUNT is per key: a read that also finds entries on the retry stream
   * may bring up to one batch more from there. */
  if (in_flight > (ahead ? batch : batch / 2)) return;
  /* A read that claims waits until what finished here is written: an entry
   * handled in about min_idle would otherwise come back before its ack. */
  if (s->spec->read != READ_NEW && (s->nacks || s->writes_pending || s->redo)) return;
  /* The own pending list holds what runs here too: read it only once all
   * of that is finished and written. */
  if (kind == READ_OWN && (in_flight || s->nacks || s->writes_pending || s->redo)) return;
  if (!bk_connected(s->b, s->reader)) return; /* resumes from reader_state */
  /* A read assigns entries to the name (and a claiming one takes them over). */
  if (!name_held(s)) return;
  struct bk_args *a = &s->args;
  bk_args_reset(a);
  add_read_args(s, a, kind, (long long)(ahead ? batch : batch - in_flight));
  if (bk_command(s->b, s->reader, a->argc, a->argv, a->argvlen, read_done, s) == 0) {
    s->read_pending = true;
    s->read_sent_ms = clock_now(s->clock);
    /* hiredis writes only when the loop turns, which may be after a whole
     * batch of handlers: the read leaves now instead. */
    bk_flush(s->b, s->reader);
  }
}

static void reader_state(void *data, bk_conn *c, int up) {
  (void)c;
  subscription *s = data;
  /* Reads that failed because the connection went are not the server
   * refusing them: readiness starts counting afresh. */
  if (up) s->read_failing = false;
  if (up && s->was_down) recover_own(s); /* a read reply may have been lost */
  s->was_down = !up;
  if (up) read_next(s);
}

/* ---- idle consumers ---- */

static void prune_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  bool ok = r && r->type == BK_ARRAY;
  if (s->state == SUB_READING)
    timer_start(s->prune_timer, ok || !r ? PRUNE_EVERY_MS : PRUNE_RETRY_MS);
  if (ok) {
    sub__work_ok(s, WORK_PRUNE);
    for (size_t i = 0; i < r->elements; i++) {
      const bk_reply *e = r->element[i]; /* [key, name] */
      if (e->type != BK_ARRAY || e->elements != 2 || e->element[0]->type != BK_STRING ||
          e->element[1]->type != BK_STRING)
        continue;
      const char *name = e->element[1]->str;
      if (strcmp(e->element[0]->str, s->retry_key) == 0)
        log_line(LOG_INFO, s->spec->name, "idle consumer removed from the group", "stream",
                 s->spec->stream, "group", s->spec->group, "retry_stream", s->retry_key,
                 "removed", name, NULL);
      else
        log_line(LOG_INFO, s->spec->name, "idle consumer removed from the group", "stream",
                 s->spec->stream, "group", s->spec->group, "removed", name, NULL);
    }
  } else {
    char why[256], detail[1024];
    sub__reply_text(r, err, why, sizeof why);
    /* A lost connection: tried again in an hour, nothing to report. */
    enum log_level level = LOG_DEBUG;
    if (r) {
      snprintf(detail, sizeof detail,
               "EVAL on %s and %s (XINFO CONSUMERS, EXISTS %s*, XGROUP DELCONSUMER): %s",
               s->spec->stream, s->retry_key, s->lease_prefix, why);
      level = sub__work_failed(s, WORK_PRUNE, LOG_WARN, detail);
    }
    log_line(level, s->spec->name, "removing idle consumers failed, retrying", "stream",
             s->spec->stream, "group", s->spec->group, "command", "EVAL", "script",
             "the idle-consumer prune", "key", s->spec->stream, "lease_keys", s->lease_prefix,
             "error", why, NULL);
  }
  sub__maybe_drained(s);
}

static void prune(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  if (s->state != SUB_READING) return;
  char idle[24];
  snprintf(idle, sizeof idle, "%llu", (unsigned long long)PRUNE_IDLE_MS);
  const char *argv[] = {"EVAL",        SCRIPT_PRUNE,   "2",  s->spec->stream,
                        s->retry_key,  s->spec->group, idle, s->lease_prefix};
  size_t len[8];
  for (int i = 0; i < 8; i++) len[i] = strlen(argv[i]);
  if (bk_command(s->b, s->cmd, 8, argv, len, prune_done, s) == 0)
    s->writes_pending++;
  else
    timer_start(s->prune_timer, PRUNE_EVERY_MS);
}

/* ---- the consumer lease ---- */

static void on_lease(void *data, enum lease_event ev, const char *holder, long long wait_ms) {
  subscription *s = data;
  const char *key = lease_key_of(s->lease);
  char wait[32];
  switch (ev) {
  case LEASE_FAILED: { /* holder: Redis's error */
    char detail[1024];
    snprintf(detail, sizeof detail, "EVAL on %s: %s", key, holder);
    enum log_level level = sub__work_failed(s, WORK_LEASE, LOG_ERROR, detail);
    log_line(level, s->spec->name, "the consumer lease failed, retrying", "stream",
             s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer, "command",
             "EVAL", "script", "the consumer lease", "key", key, "error", holder, NULL);
    denied(s, "EVAL (the consumer lease)", key, holder);
    return;
  }
  case LEASE_RENEWED:
    sub__work_ok(s, WORK_LEASE);
    return;
  case LEASE_TAKEN:
    sub__work_ok(s, WORK_LEASE);
    if (s->state != SUB_LEASING) return;
    sub__log(s, LOG_DEBUG, "consumer lease taken", "lease", key, NULL, NULL);
    return ensure_group(s);
  case LEASE_TAKEOVER:
    sub__log(s, LOG_WARN, "consumer lease taken over from a process that is gone", "holder",
             holder, "lease", key);
    return;
  case LEASE_RETAKEN:
    sub__work_ok(s, WORK_LEASE);
    sub__log(s, LOG_WARN, "consumer lease had expired (paused or Redis unreachable); taken again",
             "lease", key, NULL, NULL);
    return;
  case LEASE_CONFIRMED:
    if (s->lease_unconfirmed)
      sub__log(s, LOG_INFO, "consumer lease renewed: entries run again", "lease", key, NULL, NULL);
    s->lease_unconfirmed = false;
    if (s->state == SUB_READING) sub__progress(s);
    return;
  case LEASE_WAITING:
    snprintf(wait, sizeof wait, "%lldms", wait_ms);
    sub__log(s, LOG_WARN,
             "consumer name held by another process: waiting for its lease to expire in case it "
             "crashed",
             "holder", holder, "wait", wait);
    return;
  case LEASE_REFUSED:
  case LEASE_LOST:
    if (s->state == SUB_STOPPING || s->state == SUB_DRAINED) return;
    log_line(LOG_ERROR, s->spec->name,
             ev == LEASE_REFUSED ? "consumer name in use by a live process"
                                 : "consumer lease lost to another process: stopped reading",
             "stream", s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer,
             "holder", holder, "lease", key, "hint",
             "give each process its own name: --instance N (one number per process on a machine) "
             "or --consumer NAME",
             NULL);
    s->on_event(s->data, s, ev == LEASE_REFUSED ? SUB_EV_REFUSED : SUB_EV_LOST);
    sub_stop(s);
    return;
  }
}

/* ---- group creation ---- */

static void start_reading(subscription *s) {
  s->state = SUB_READING;
  s->create_fault[0] = '\0';
  if (!s->started) recover_own(s); /* a host back under the same name */
  s->started = true;
  s->backoff_ms = 0;
  static const char *const mode[] = {"new", "claiming", "reclaim"};
  const char *how = s->spec->read != READ_CLAIMING ? NULL
                    : s->native_claim             ? "XREADGROUP CLAIM"
                                                  : "claim script (claim_fallback)";
  sub__log(s, LOG_INFO, "subscription reading", "read", mode[s->spec->read], "via", how);
  s->on_event(s->data, s, SUB_EV_READING);
  timer_start(s->sweep_timer, 0);
  if (s->prune_timer && !s->pruned) {
    s->pruned = true;
    timer_start(s->prune_timer, 0);
  }
  sub__progress(s); /* entries read before the group was lost run now */
}

static const char *start_id(const char *start) {
  if (strcmp(start, "new") == 0) return "$";
  if (strcmp(start, "beginning") == 0) return "0";
  return start;
}

/* Where a group created now starts: start_at applies at start-up only; a
 * group lost and created again mid-run starts at `start`, so another host
 * that finds it existing does not rewind it. */
static const char *creation_start(const subscription *s) {
  return s->spec->start_at && !s->started ? s->spec->start_at : s->spec->start;
}

static void setid_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (s->state != SUB_CREATING) return sub__maybe_drained(s);
  if (r && r->type == BK_STATUS) {
    sub__log(s, LOG_INFO, "group cursor moved", "start_at", s->spec->start_at, NULL, NULL);
    return start_reading(s);
  }
  char why[256];
  sub__reply_text(r, err, why, sizeof why);
  snprintf(s->create_fault, sizeof s->create_fault, "XGROUP SETID on %s: %s", s->spec->stream, why);
  log_line(LOG_ERROR, s->spec->name, "cannot move the group cursor (start_at), retrying", "stream",
           s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer, "command",
           "XGROUP SETID", "key", s->spec->stream, "error", why, NULL);
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

/* Logs a refused XGROUP CREATE on key; readiness says it too. */

static void create_failed(subscription *s, const char *msg, const char *key, const char *why) {
  snprintf(s->create_fault, sizeof s->create_fault, "XGROUP CREATE on %s: %s", key, why);
  log_line(LOG_ERROR, s->spec->name, msg, "stream", s->spec->stream, "group", s->spec->group,
           "consumer", s->spec->consumer, "command", "XGROUP CREATE", "key", key, "error", why,
           NULL);
  denied(s, "XGROUP CREATE", key, why);
}

/* The stream's XGROUP CREATE: its verdict waits for the retry stream's,
 * which the same connection answers next (create_retry_done decides). */
static void create_stream_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (s->state != SUB_CREATING) return sub__maybe_drained(s);
  s->stream_created = r && r->type == BK_STATUS;
  s->stream_create_failed = !s->stream_created && !(r && bk_reply_is_error(r, "BUSYGROUP"));
  if (s->stream_create_failed) sub__reply_text(r, err, s->create_error, sizeof s->create_error);
  if (s->create_alone) { /* the retry stream's could not be sent: try both again */
    if (!s->stream_create_failed)
      snprintf(s->create_error, sizeof s->create_error, "not connected");
    create_failed(s, "cannot create the group on the retry stream, retrying", s->retry_key,
                  s->create_error);
    backoff(s);
  }
}

static void create_retry_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (s->state != SUB_CREATING) return sub__maybe_drained(s);
  if (!(r && (r->type == BK_STATUS || bk_reply_is_error(r, "BUSYGROUP")))) {
    char why[256];
    sub__reply_text(r, err, why, sizeof why);
    create_failed(s, "cannot create the group on the retry stream, retrying", s->retry_key, why);
    return backoff(s);
  }
  if (r->type == BK_STATUS)
    sub__log(s, LOG_INFO, "group created on the retry stream", "retry_stream", s->retry_key, NULL,
             NULL);
  if (s->stream_create_failed) {
    create_failed(s, "cannot create the group, retrying", s->spec->stream, s->create_error);
    return backoff(s);
  }
  bool created = s->stream_created;
  if (created) sub__log(s, LOG_INFO, "group created", "start", creation_start(s), NULL, NULL);
  /* start_at moves an existing group, at start-up only: a new one already
   * starts there. */
  if (!created && s->spec->start_at && !s->started) return move_cursor(s);
  start_reading(s);
}

/* Creates the group on the stream (at its start) and on the retry stream
 * (from the beginning: everything there was written for this group), each
 * with MKSTREAM; BUSYGROUP means it exists and keeps its cursor. */
static void ensure_group(subscription *s) {
  s->state = SUB_CREATING;
  /* A group created again has a new pending list: scan it from the start. */
  for (int k = 0; k < NKEYS; k++) strcpy(s->cursor[k], "0-0");
  s->block_next = false;
  s->create_alone = false;
  const char *start = start_id(creation_start(s));
  const char *argv[] = {"XGROUP", "CREATE", s->spec->stream, s->spec->group, start, "MKSTREAM"};
  size_t len[6];
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(s->b, s->cmd, 6, argv, len, create_stream_done, s) != 0) return backoff(s);
  s->writes_pending++;
  argv[2] = s->retry_key;
  argv[4] = "0";
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(s->b, s->cmd, 6, argv, len, create_retry_done, s) == 0)
    s->writes_pending++;
  else
    s->create_alone = true;
}

/* ---- life cycle ---- */

subscription *sub_new(handler *h, broker *b, bk_conn *cmd, lclock *clock, const char *identity,
                      sub_event_fn *on_event, void *data) {
  subscription *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  bk_args_init(&s->args);
  txn_init(&s->txn);
  s->h = h;
  s->spec = handler_spec(h);
  s->b = b;
  s->cmd = cmd;
  s->clock = clock;
  s->on_event = on_event;
  s->data = data;
  s->retry_timer = timer_new(clock, retry_fire, s);
  s->flush_timer = timer_new(clock, sub__flush_acks, s);
  s->sweep_timer = timer_new(clock, sub__sweep, s);
  s->retry_log_timer = timer_new(clock, sub__log_retries, s);
  s->retry_key = outcome_retry_key(s->spec);
  s->delay_key = outcome_delay_key(s->spec);
  if (s->delay_key) {
    size_t n = strlen(s->delay_key) + sizeof UNREADABLE_SUFFIX;
    if ((s->unreadable_key = malloc(n)) != NULL)
      snprintf(s->unreadable_key, n, "%s" UNREADABLE_SUFFIX, s->delay_key);
  }
  bool leased_ok = true;
  if (identity) {
    s->identity = strdup(identity);
    s->prune_timer = timer_new(clock, prune, s);
    s->lease_prefix = lease_key(s->spec->stream, s->spec->group, "");
    leased_ok = s->identity && s->prune_timer && s->lease_prefix;
  }
  if (!leased_ok || !s->retry_timer || !s->flush_timer || !s->sweep_timer ||
      !s->retry_log_timer || !s->retry_key || !s->delay_key || !s->unreadable_key ||
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
  if (s->identity == NULL) return ensure_group(s);
  s->lease = lease_new(s->b, s->cmd, s->clock, s->spec->stream, s->spec->group, s->spec->consumer,
                       s->identity, on_lease, s);
  if (s->lease == NULL) {
    sub__log(s, LOG_ERROR, "out of memory: subscription not started", NULL, NULL, NULL, NULL);
    s->on_event(s->data, s, SUB_EV_REFUSED);
    return sub_stop(s);
  }
  s->state = SUB_LEASING;
  lease_take(s->lease);
}

void sub_stop(subscription *s) {
  if (s->state == SUB_STOPPING || s->state == SUB_DRAINED) return;
  s->state = SUB_STOPPING;
  timer_stop(s->retry_timer);
  timer_stop(s->sweep_timer);
  timer_stop(s->retry_log_timer);
  sub__log_retries(s->retry_log_timer, s); /* the count so far, not lost with the timer */
  if (s->prune_timer) timer_stop(s->prune_timer);
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
    sub__log(s, LOG_INFO, "entries read but not started stay pending", "entries", count, NULL, NULL);
  }
  if (s->reader) {
    bk_conn_close(s->b, s->reader); /* a blocked read completes with an error */
    s->reader = NULL;
  }
  /* Acks still queued go out now rather than at the next turn. */
  if (s->nacks || s->redo) sub__flush_acks(s->flush_timer, s);
  sub__maybe_drained(s);
}

/* rt_abandon_fn: an entry whose handler was dropped at the deadline. It was
 * never acked, so it stays pending in Redis. */
static void drop_job(void *data, struct entry *e) {
  subscription *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  entry_free(e);
  lanes_done(&s->lanes, lane);
}

size_t sub_abandon(subscription *s, size_t *unacked) {
  *unacked = 0;
  if (s->state != SUB_STOPPING) return 0;
  s->abandoned = true;
  /* Acks that could not go out yet (the server away): writing them now
   * would mean waiting for it, which the deadline forbids. */
  timer_stop(s->flush_timer);
  s->flush_armed = false;
  *unacked = s->nacks;
  s->nacks = 0;
  for (int k = 0; k < NKEYS; k++) s->acks[k].n = 0;
  size_t n = handler_abandon(s->h, drop_job);
  if (n || *unacked) {
    char running[24], acks[24];
    snprintf(running, sizeof running, "%zu", n);
    snprintf(acks, sizeof acks, "%zu", *unacked);
    sub__log(s, LOG_WARN, "shutdown deadline: handlers abandoned, entries stay pending",
             "unfinished", running, "unacked", *unacked ? acks : NULL);
  }
  sub__maybe_drained(s);
  return n;
}

bool sub_reading(const subscription *s) { return s->state == SUB_READING; }
bool sub_drained(const subscription *s) { return s->state == SUB_DRAINED; }

void sub_keep_cursor(subscription *s) { s->started = true; }

void sub_swap_handler(subscription *s, handler *h) {
  handler_replace(s->h, h);
  s->h = h;
  s->spec = handler_spec(h);
}

const char *sub_version(const subscription *s) { return handler_version(s->h); }

/* How long the current read may wait on the server: BLOCK, or the recovery
 * wait a claiming read blocks for and reclaim polls at. */
static uint64_t read_wait_ms(const subscription *s) {
  return s->spec->read == READ_NEW ? BLOCK_MS : recovery_wait_ms(s);
}

bool sub_healthy(const subscription *s, char *why, size_t len) {
  switch (s->state) {
  case SUB_IDLE:
    snprintf(why, len, "not started");
    return false;
  case SUB_LEASING:
    if (s->work[WORK_LEASE].failing)
      snprintf(why, len, "waiting for the consumer name's lease: %s failing: %s",
               WORK_NAME[WORK_LEASE], s->work[WORK_LEASE].detail);
    else
      snprintf(why, len, "waiting for the consumer name's lease");
    return false;
  case SUB_CREATING:
    if (s->create_fault[0])
      snprintf(why, len, "creating group: %s", s->create_fault);
    else
      snprintf(why, len, "creating group");
    return false;
  case SUB_STOPPING:
  case SUB_DRAINED:
    snprintf(why, len, "stopping");
    return false;
  case SUB_READING:
    break;
  }
  uint64_t now = clock_now(s->clock);
  const struct work_fault *lf = &s->work[WORK_LEASE];
  if (s->lease_unconfirmed && !lease_valid(s->lease)) {
    if (lf->failing) /* the renewal is refused, not late: say why */
      snprintf(why, len, "stuck: %s failing for %llu ms: %s", WORK_NAME[WORK_LEASE],
               (unsigned long long)(now - lf->since_ms), lf->detail);
    else
      snprintf(why, len, "waiting for the consumer lease's renewal (process paused or loop stalled)");
    return false;
  }
  if (s->reader == NULL || !bk_connected(s->b, s->reader)) {
    char fault[256];
    if (s->reader && bk_conn_fault(s->b, s->reader, fault, sizeof fault) == BK_FAULT_DENIED)
      snprintf(why, len, "read connection down: redis %s", fault);
    else
      snprintf(why, len, "read connection down");
    return false;
  }
  uint64_t limit = STUCK_FACTOR * read_wait_ms(s);
  if (limit < STUCK_MIN_MS) limit = STUCK_MIN_MS;
  if (s->read_pending && now - s->read_sent_ms > limit) {
    snprintf(why, len, "stuck: a read unanswered for %llu ms",
             (unsigned long long)(now - s->read_sent_ms));
    return false;
  }
  if (s->read_failing && now - s->failing_since_ms > limit) {
    snprintf(why, len, "stuck: reads failing for %llu ms",
             (unsigned long long)(now - s->failing_since_ms));
    return false;
  }
  /* Work that keeps failing as long as a read may: not doing its job. */
  for (int w = 0; w < NWORK; w++) {
    const struct work_fault *f = &s->work[w];
    if (f->failing && now - f->since_ms > limit) {
      snprintf(why, len, "stuck: %s failing for %llu ms: %s", WORK_NAME[w],
               (unsigned long long)(now - f->since_ms), f->detail);
      return false;
    }
  }
  return true;
}

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
  if (s->retry_log_timer) timer_free(s->retry_log_timer);
  if (s->prune_timer) timer_free(s->prune_timer);
  lease_free(s->lease);
  free(s->identity);
  free(s->lease_prefix);
  free(s->retry_key);
  free(s->delay_key);
  free(s->unreadable_key);
  struct entry *left = s->lanes.lane ? lanes_drain_queued(&s->lanes) : NULL;
  while (left) {
    struct entry *e = left;
    left = e->next;
    entry_free(e);
  }
  lanes_free(&s->lanes);
  sub__redo_free(s);
  sub__ack_batches_free(s);
  for (int k = 0; k < NKEYS; k++) free(s->acks[k].ids);
  bk_args_free(&s->args);
  txn_free(&s->txn);
  free(s->held);
  handler_release(s->h);
  free(s);
}
