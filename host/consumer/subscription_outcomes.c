/* subscription_outcomes.c: what a subscription writes once a handler has
 * decided (see subscription.h): acks coalesced into one XACK per loop turn;
 * writes, replies, retry copies, dead letters and delays each sent with the
 * entry's ack as one MULTI/EXEC (the commands come from outcome.c); and the
 * sweeper that moves due entries of the group's delay set onto the group's
 * retry stream and trims what the group has acknowledged there. Acks and
 * re-stamps go to the key the entry was read from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outcome.h"
#include "scripts.h"
#include "subscription_private.h"

/* ---- outcomes cut off by a lost connection ---- */

/* An outcome in flight: its transaction also as one SCRIPT_REDO call, copied
 * into a single block so it outlives the entry and the handler it came from,
 * ready to send again when the connection is cut before the reply. Answered
 * blocks wait in s->spare_redo for the next outcomes of their size. */
struct redo {
  struct redo *next;
  subscription *s;
  char id[ID_MAX];
  const char *what;      /* for the log: "retry", "reply", "dead letter", ... (static) */
  int ncmds;             /* commands of the outcome: 1 goes alone, more in MULTI/EXEC */
  int queued;            /* MULTI/EXEC: queued commands answered so far */
  int refused;           /* the first one Redis refused while queueing, -1 none */
  char *refusal;         /* ... and its error (malloc'd), for the log instead of EXECABORT */
  size_t cap;            /* bytes after the struct */
  int argc;
  const char **argv;
  size_t *argvlen;
};

#define REDO_SPARE_MAX 256 /* answered blocks kept: about a batch of replies */
#define REDO_MIN_CAP 1024
#define REDO_KEEP_MAX (64u << 10) /* larger blocks (big bodies) are not kept */

/* A block with room for cap bytes after the struct: a spare one if the
 * newest spare is big enough. */
static struct redo *redo_alloc(subscription *s, size_t cap) {
  struct redo *r = s->spare_redo;
  if (r) {
    s->spare_redo = r->next;
    s->nspare_redo--;
    if (r->cap >= cap) return r;
    free(r);
  }
  if (cap < REDO_MIN_CAP) cap = REDO_MIN_CAP;
  r = malloc(sizeof *r + cap);
  if (r) r->cap = cap;
  return r;
}

/* r was answered (or given up): keep it for later outcomes. */
static void redo_release(subscription *s, struct redo *r) {
  s->outcomes_unwritten--;
  free(r->refusal);
  r->refusal = NULL;
  if (s->nspare_redo == REDO_SPARE_MAX || r->cap > REDO_KEEP_MAX) {
    free(r);
    return;
  }
  r->next = s->spare_redo;
  s->spare_redo = r;
  s->nspare_redo++;
}

/* n (>= 0) in decimal into buf (12 bytes), NUL-terminated; its length. */
static size_t format_count(char *buf, int n) {
  char rev[12];
  size_t len = 0;
  do rev[len++] = (char)('0' + n % 10);
  while ((n /= 10) > 0);
  for (size_t i = 0; i < len; i++) buf[i] = rev[len - 1 - i];
  buf[len] = '\0';
  return len;
}

static struct redo *redo_new(subscription *s, const char *key, const char *id, const char *what,
                             const struct txn *t) {
  static size_t script_len;
  if (script_len == 0) script_len = strlen(SCRIPT_REDO);
  char counts[TXN_MAX][12];
  size_t count_len[TXN_MAX];
  int argc = 6;
  size_t bytes = strlen(key) + strlen(s->spec->group) + strlen(id) + 3;
  for (int i = 0; i < t->n; i++) {
    count_len[i] = format_count(counts[i], t->cmd[i].argc);
    argc += 1 + t->cmd[i].argc;
    bytes += count_len[i] + 1;
    for (int k = 0; k < t->cmd[i].argc; k++) bytes += t->cmd[i].argvlen[k] + 1;
  }
  struct redo *r = redo_alloc(s, (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes);
  if (r == NULL) return NULL;
  s->outcomes_unwritten++;
  r->next = NULL;
  r->s = s;
  sub__copy_id(r->id, id);
  r->what = what;
  r->ncmds = t->n;
  r->queued = 0;
  r->refused = -1;
  r->refusal = NULL;
  r->argc = 0;
  r->argv = (const char **)(r + 1);
  r->argvlen = (size_t *)(r->argv + argc);
  char *p = (char *)(r->argvlen + argc);
#define ARG(str, n)                                                                  \
  do {                                                                               \
    size_t n_ = (n);                                                                 \
    memcpy(p, (str), n_);                                                            \
    p[n_] = '\0';                                                                    \
    r->argv[r->argc] = p;                                                            \
    r->argvlen[r->argc++] = n_;                                                      \
    p += n_ + 1;                                                                     \
  } while (0)
  r->argv[r->argc] = "EVAL", r->argvlen[r->argc++] = 4;
  r->argv[r->argc] = SCRIPT_REDO, r->argvlen[r->argc++] = script_len;
  r->argv[r->argc] = "1", r->argvlen[r->argc++] = 1;
  ARG(key, strlen(key)); /* where the entry is pending */
  ARG(s->spec->group, strlen(s->spec->group));
  ARG(id, strlen(id));
  for (int i = 0; i < t->n; i++) {
    ARG(counts[i], count_len[i]);
    for (int k = 0; k < t->cmd[i].argc; k++) ARG(t->cmd[i].argv[k], t->cmd[i].argvlen[k]);
  }
#undef ARG
  return r;
}

/* Keeps r to send again once the command connection is back. */
static void redo_later(subscription *s, struct redo *r) {
  r->next = NULL;
  if (s->redo == NULL) s->redo_tail = &s->redo;
  *s->redo_tail = r;
  s->redo_tail = &r->next;
  if (!s->flush_armed) {
    s->flush_armed = true;
    timer_start(s->flush_timer, BACKOFF_MIN_MS);
  }
}

void sub__redo_free(subscription *s) {
  struct redo *lists[] = {s->redo, s->spare_redo};
  for (int i = 0; i < 2; i++) {
    while (lists[i]) {
      struct redo *r = lists[i];
      lists[i] = r->next;
      free(r->refusal);
      free(r);
    }
  }
  s->redo = s->spare_redo = NULL;
  s->nspare_redo = 0;
}

static void send_redo(subscription *s, struct redo *r);

/* The name and key (its first argument) of command i of r's outcome, from
 * the SCRIPT_REDO arguments: EVAL script 1 key group id, then per command
 * its argc and argv. */
static void redo_cmd(const struct redo *r, int i, const char **name, const char **key) {
  int p = 6;
  for (int j = 0; j < i && p < r->argc; j++) p += 1 + atoi(r->argv[p]);
  *name = p + 1 < r->argc ? r->argv[p + 1] : "?";
  *key = p + 2 < r->argc ? r->argv[p + 2] : "";
}

/* "key key ...": where r's entry is pending and every key its commands
 * write, for a failed SCRIPT_REDO (Redis's text names none). */
static void redo_keys(const struct redo *r, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s", r->argv[3]);
  for (int i = 0; i < r->ncmds && n >= 0 && (size_t)n < len; i++) {
    const char *name, *key;
    redo_cmd(r, i, &name, &key);
    n += snprintf(buf + n, len - (size_t)n, " %s", key);
  }
}


/* ---- acks: coalesced, one XACK per loop turn ---- */

/* One XACK in flight. Answered batches wait in s->spare_batches with their
 * id arrays, which the next flush swaps with the queued ones: acking
 * allocates nothing once warm. */
struct ack_batch {
  subscription *s;
  unsigned char key;   /* KEY_STREAM or KEY_RETRY: one XACK per key */
  size_t n, cap;
  char (*ids)[ID_MAX];
  struct ack_batch *next;
};

void sub__ack_batches_free(subscription *s) {
  while (s->spare_batches) {
    struct ack_batch *b = s->spare_batches;
    s->spare_batches = b->next;
    free(b->ids);
    free(b);
  }
}

static void add_ack(subscription *s, unsigned char key, const char *id);

static void ack_done(void *data, const bk_reply *r, const char *err) {
  struct ack_batch *batch = data;
  subscription *s = batch->s;
  s->writes_pending--;
  if ((r == NULL || r->type != BK_INTEGER) && s->abandoned) {
    /* Past the shutdown deadline nothing is retried: the entries stay
     * pending (handled, to be delivered again elsewhere). */
    char why[256];
    sub__reply_text(r, err, why, sizeof why);
    char count[24];
    snprintf(count, sizeof count, "%zu", batch->n);
    sub__log(s, LOG_WARN, "shutdown deadline: ack unconfirmed, entries may stay pending",
             "entries", count, "error", why);
  } else if (r == NULL || r->type != BK_INTEGER) {
    char why[256], detail[1024];
    sub__reply_text(r, err, why, sizeof why);
    char count[24];
    snprintf(count, sizeof count, "%zu", batch->n);
    const char *key = batch->key == KEY_RETRY ? s->retry_key : s->spec->stream;
    enum log_level level = LOG_WARN;
    if (r) { /* the server refused it (a lost connection is not counted) */
      snprintf(detail, sizeof detail, "XACK on %s: %s", key, why);
      level = sub__work_failed(s, WORK_ACKS, LOG_WARN, detail);
    }
    log_line(level, s->spec->name, "ack failed, will retry", "stream", s->spec->stream, "group",
             s->spec->group, "consumer", s->spec->consumer, "entries", count, "command", "XACK",
             "key", key, "error", why, NULL);
    /* Put them back: acked later, never dropped, and not at once: an error
     * such as READONLY lasts until the server changes. */
    for (size_t i = 0; i < batch->n; i++) add_ack(s, batch->key, batch->ids[i]);
    s->flush_armed = true;
    timer_start(s->flush_timer, BACKOFF_MIN_MS);
  } else {
    /* Entries are being written again: an earlier outcome that failed once
     * (its entry logged and left pending) no longer makes the host unready. */
    if (s->work[WORK_ACKS].failing) sub__work_ok(s, WORK_ACKS);
    if (s->work[WORK_OUTCOMES].failing) sub__work_ok(s, WORK_OUTCOMES);
  }
  batch->n = 0;
  batch->next = s->spare_batches;
  s->spare_batches = batch;
  sub__progress(s); /* a claiming read may have waited for these acks */
}

/* One XACK of the ids queued for key k; -1 when it cannot go out now. */
static int send_acks(subscription *s, unsigned char k) {
  struct ack_queue *q = &s->acks[k];
  struct ack_batch *batch = s->spare_batches;
  if (batch) s->spare_batches = batch->next;
  else if ((batch = calloc(1, sizeof *batch)) == NULL) return -1;
  batch->s = s;
  batch->key = k;
  struct bk_args *a = &s->args;
  bk_args_reset(a);
  bk_args_str(a, "XACK");
  bk_args_str(a, k == KEY_RETRY ? s->retry_key : s->spec->stream);
  bk_args_str(a, s->spec->group);
  for (size_t i = 0; i < q->n; i++) bk_args_str(a, q->ids[i]);
  if (bk_command(s->b, s->cmd, a->argc, a->argv, a->argvlen, ack_done, batch) != 0) {
    batch->next = s->spare_batches;
    s->spare_batches = batch;
    return -1;
  }
  s->writes_pending++;
  /* The batch keeps the ids sent (ack_done may queue them again); the
   * queue takes the batch's old array for the next ones. */
  char(*ids)[ID_MAX] = batch->ids;
  size_t cap = batch->cap;
  batch->ids = q->ids;
  batch->cap = q->cap;
  batch->n = q->n;
  q->ids = ids;
  q->cap = cap;
  s->nacks -= q->n;
  q->n = 0;
  return 0;
}

void sub__flush_acks(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  s->flush_armed = false;
  if ((s->nacks == 0 && s->redo == NULL) || s->abandoned) return;
  if (!bk_connected(s->b, s->cmd)) { /* keep them; try again shortly */
    s->flush_armed = true;
    timer_start(s->flush_timer, BACKOFF_MIN_MS);
    return;
  }
  /* Cut-off outcomes first, in the order they were made. */
  struct redo *redo = s->redo;
  s->redo = NULL;
  while (redo) {
    struct redo *next = redo->next;
    send_redo(s, redo);
    redo = next;
  }
  for (unsigned char k = 0; k < NKEYS; k++)
    if (s->acks[k].n && send_acks(s, k) != 0) {
      s->flush_armed = true;
      timer_start(s->flush_timer, BACKOFF_MIN_MS);
      return;
    }
}

/* Adds id (read from key) to the next XACK of that key. */
static void add_ack(subscription *s, unsigned char key, const char *id) {
  struct ack_queue *q = &s->acks[key];
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    void *p = realloc(q->ids, cap * sizeof *q->ids);
    if (p == NULL) {
      sub__log(s, LOG_ERROR, "out of memory: entry left pending", "id", id, NULL, NULL);
      return;
    }
    q->ids = p;
    q->cap = cap;
  }
  sub__copy_id(q->ids[q->n++], id);
  s->nacks++;
}

void sub__queue_ack(subscription *s, const struct entry *e) {
  if (s->abandoned) return; /* nothing is written past the deadline: it stays pending */
  add_ack(s, e->key, e->id);
  if (!s->flush_armed) {
    s->flush_armed = true;
    timer_start(s->flush_timer, 0);
  }
}

/* ---- outcomes ---- */

static void redo_done(void *data, const bk_reply *r, const char *err) {
  struct redo *req = data;
  subscription *s = req->s;
  s->writes_pending--;
  if (r == NULL && !s->abandoned) {
    redo_later(s, req); /* lost again: once more when it is back */
    sub__progress(s);
    return;
  }
  if (r && r->type == BK_INTEGER) {
    log_line(LOG_INFO, s->spec->name,
             r->integer ? "outcome written after reconnecting"
                        : "outcome had been written before the connection dropped",
             "stream", s->spec->stream, "group", s->spec->group, "id", req->id, "outcome",
             req->what, NULL);
  } else {
    char why[256], keys[512];
    sub__reply_text(r, err, why, sizeof why);
    redo_keys(req, keys, sizeof keys);
    log_line(LOG_ERROR, s->spec->name, "outcome not written, entry left pending", "stream",
             s->spec->stream, "group", s->spec->group, "id", req->id, "outcome", req->what,
             "command", "EVAL", "script", "the outcome written again after a lost connection",
             "keys", keys, "error", why, NULL);
  }
  redo_release(s, req);
  sub__progress(s);
}

static void send_redo(subscription *s, struct redo *r) {
  if (bk_command(s->b, s->cmd, r->argc, r->argv, r->argvlen, redo_done, r) == 0)
    s->writes_pending++;
  else
    redo_later(s, r);
}

static void write_done(void *data, const bk_reply *r, const char *err) {
  struct redo *req = data;
  subscription *s = req->s;
  s->writes_pending--;
  if (r == NULL && !s->abandoned) {
    /* Cut off: whether EXEC ran is unknown. SCRIPT_REDO finds out (is the
     * entry still pending?) and writes it all again only if it did not. */
    log_line(LOG_WARN, s->spec->name, "outcome unconfirmed (connection lost), written again once back",
             "stream", s->spec->stream, "group", s->spec->group, "id", req->id, "outcome",
             req->what, "error", err, NULL);
    redo_later(s, req);
    sub__progress(s);
    return;
  }
  const bk_reply *failed = r && (r->type == BK_ERROR || r->type == BK_NIL) ? r : NULL;
  int cmd = failed && failed->type == BK_ERROR && req->ncmds == 1 ? 0 : -1; /* sent alone */
  bool acked = false;
  if (r && r->type == BK_ARRAY && r->elements) {
    /* EXEC runs every queued command even after one fails (no rollback):
     * the XACK, always last, says whether the entry is still pending. */
    for (size_t i = 0; i < r->elements && !failed; i++)
      if (r->element[i]->type == BK_ERROR) failed = r->element[i], cmd = (int)i;
    const bk_reply *last = r->element[r->elements - 1];
    acked = last->type == BK_INTEGER && last->integer > 0;
  }
  if (failed || r == NULL) {
    char why[256];
    sub__reply_text(failed, failed && failed->type == BK_NIL ? "transaction aborted" : err, why,
               sizeof why);
    /* EXECABORT says only that something was refused: say what, on which
     * key, with the refusal's own text. */
    const char *name = NULL, *key = NULL;
    if (req->refusal && failed && failed->type == BK_ERROR && bk_reply_is_error(failed, "EXECABORT")) {
      cmd = req->refused;
      snprintf(why, sizeof why, "%s", req->refusal);
    }
    if (cmd >= 0) redo_cmd(req, cmd, &name, &key);
    else if (failed && failed->type == BK_ERROR && req->ncmds > 1 &&
             !bk_reply_is_error(failed, "EXECABORT"))
      name = "EXEC"; /* refused itself (no +exec) */
    if (r) {
      char detail[1024];
      snprintf(detail, sizeof detail, "%s on %s: %s", name ? name : "MULTI/EXEC",
               key ? key : req->argv[3], why);
      sub__work_failed(s, WORK_OUTCOMES, LOG_ERROR, detail);
    }
    log_line(LOG_ERROR, s->spec->name,
             acked          ? "outcome partly written: entry acked, a write failed"
             : s->abandoned ? "shutdown deadline: outcome unconfirmed, entry may stay pending"
                            : "outcome not written, entry left pending",
             "stream", s->spec->stream, "group", s->spec->group, "id", req->id, "outcome",
             req->what, "command", name, "key", key, "error", why, NULL);
  } else if (s->work[WORK_OUTCOMES].failing) {
    sub__work_ok(s, WORK_OUTCOMES);
  }
  redo_release(s, req);
  sub__progress(s); /* a claiming read may have waited for this write */
}

static void ignore_reply(void *data, const bk_reply *r, const char *err) {
  (void)r, (void)err;
  subscription *s = data;
  s->writes_pending--;
  sub__maybe_drained(s);
}

/* A queued command's reply (+QUEUED, or the error that makes EXEC abort):
 * the first refusal is kept for write_done's log line. */
static void queued_reply(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct redo *req = data;
  subscription *s = req->s;
  s->writes_pending--;
  if (r && r->type == BK_ERROR && req->refused < 0) {
    req->refused = req->queued;
    req->refusal = malloc(r->len + 1);
    if (req->refusal) {
      memcpy(req->refusal, r->str, r->len);
      req->refusal[r->len] = '\0';
    }
  }
  req->queued++;
  sub__maybe_drained(s);
}

/* Sends t: one command alone, several as MULTI ... EXEC (the EXEC reply says
 * whether all of it was written). t is the subscription's, reset at its next
 * use (txn_begin). */
static void send_txn(subscription *s, const struct entry *e, const char *what, struct txn *t) {
  struct redo *req = redo_new(s, sub__key(s, e), e->id, what, t);
  const char *exec = "EXEC", *multi_cmd = "MULTI";
  size_t exec_len = 4, multi_len = 5;
  if (req == NULL) {
    log_line(LOG_ERROR, s->spec->name, "outcome not written (out of memory), entry left pending",
             "stream", s->spec->stream, "group", s->spec->group, "id", e->id, "outcome", what,
             NULL);
    return;
  }
  if (t->n > 1) {
    if (bk_command(s->b, s->cmd, 1, &multi_cmd, &multi_len, ignore_reply, s) != 0) goto later;
    s->writes_pending++;
    /* MULTI was accepted: the connection is up and the rest goes out with it. */
    for (int i = 0; i < t->n; i++) {
      bk_command(s->b, s->cmd, t->cmd[i].argc, t->cmd[i].argv, t->cmd[i].argvlen, queued_reply, req);
      s->writes_pending++;
    }
    bk_command(s->b, s->cmd, 1, &exec, &exec_len, write_done, req);
  } else if (bk_command(s->b, s->cmd, t->cmd[0].argc, t->cmd[0].argv, t->cmd[0].argvlen,
                        write_done, req) != 0) {
    goto later;
  }
  s->writes_pending++;
  return;
later: /* not connected now: written once the connection is back */
  log_line(LOG_WARN, s->spec->name, "outcome waits for the connection", "stream",
           s->spec->stream, "group", s->spec->group, "id", e->id, "outcome", what, NULL);
  redo_later(s, req);
}

/* The subscription's transaction builder, emptied for the next outcome. */
static struct txn *txn_begin(subscription *s) {
  txn_reset(&s->txn);
  return &s->txn;
}

/* Deliveries of e before this one, whatever the read mode: the count a copy
 * or a delayed entry carries in its header, plus what Redis counted for this
 * id (accept_entry folded the header into e->deliveries for claimed reads
 * and the own pending list's). */
long long sub__deliveries_before(const subscription *s, const struct entry *e) {
  /* `new`: a `>` read brings entries never delivered to this group (a copy
   * on the retry stream carries its count); the own pending list's read
   * (SCRIPT_OWN) reports, like claiming, the deliveries before this one. */
  if (s->spec->read == READ_NEW)
    return e->deliveries >= 0 ? e->deliveries : entry_carried_deliveries(e);
  /* claiming reports deliveries before this one; reclaim Redis's count after
   * the claim, this one included. */
  return s->spec->read == READ_RECLAIM ? e->deliveries - 1 : e->deliveries;
}

/* Dead-letters e: its copy on the dead-letter stream and its ack in one
 * transaction. Without a dead-letter stream, a rejected entry is logged and
 * acked, anything else logged and left pending: never lost silently. */
void sub__dead_letter(subscription *s, const struct entry *e, const char *reason,
                      const char *error, size_t error_len, long long deliveries,
                      const char *version) {
  char count[24];
  snprintf(count, sizeof count, "%lld", deliveries);
  if (s->spec->dead_letter == NULL) {
    bool reject = strcmp(reason, REASON_REJECTED) == 0;
    bool bad_input = wire_reason_is_bad_input(reason);
    log_line(LOG_ERROR, s->spec->name,
             reject      ? "entry rejected, acked (no dead_letter stream)"
             : bad_input ? "bad entry left pending"
                         : "delivery limit reached, entry left pending (no dead_letter stream)",
             "stream", s->spec->stream, "group", s->spec->group, "retry_stream",
             e->key == KEY_RETRY ? s->retry_key : NULL, "id", e->id, "reason", reason,
             "deliveries", count, "version", version, "error", error, NULL);
    if (reject) sub__queue_ack(s, e);
    return;
  }
  log_line(LOG_WARN, s->spec->name, "entry dead-lettered", "stream", s->spec->stream, "group",
           s->spec->group, "retry_stream", e->key == KEY_RETRY ? s->retry_key : NULL, "id", e->id,
           "reason", reason, "deliveries", count, "dead_letter", s->spec->dead_letter, "version",
           version, NULL);
  struct txn *t = txn_begin(s);
  outcome_dead_letter(t, s->spec, e, sub__original_id(e), reason, error, error_len, deliveries,
                      clock_wall(s->clock));
  outcome_ack(t, s->spec, sub__key(s, e), e);
  send_txn(s, e, "dead letter", t);
}

/* Delivers e again after delay_ms, durably. A claimed entry that may wait
 * pending (delay within min_idle) is re-stamped to turn claimable on time;
 * anything else moves to the group's delay set with its ack, and a sweeper
 * (any host's) puts it on the group's retry stream when due. */
static void delay(subscription *s, const struct entry *e, int64_t delay_ms, long long deliveries) {
  struct txn *t = txn_begin(s);
  if (s->spec->read != READ_NEW && delay_ms <= s->spec->min_idle_ms) {
    outcome_restamp(t, s->spec, sub__key(s, e), e, delay_ms);
  } else {
    outcome_delay(t, s->spec, e, deliveries, sub__original_id(e),
                  clock_wall(s->clock) + (uint64_t)delay_ms);
    outcome_ack(t, s->spec, sub__key(s, e), e);
  }
  send_txn(s, e, "retry_after", t);
}

/* ---- retries, logged per interval ---- */

/* The first retry after a quiet interval is logged with its id; the ones
 * that follow within RETRY_LOG_MS are counted and logged as one line when it
 * ends, so a handler that always retries shows in the log without a line per
 * delivery. */
void sub__log_retries(ltimer *t, void *data) {
  subscription *s = data;
  if (s->retries_unlogged == 0) {
    s->retry_log_armed = false; /* quiet: the next retry is logged at once */
    return;
  }
  char count[24], total[24];
  snprintf(count, sizeof count, "%llu", (unsigned long long)s->retries_unlogged);
  snprintf(total, sizeof total, "%llu", (unsigned long long)s->retries_total);
  sub__log(s, LOG_INFO, "entries retried", "count", count, "total", total);
  s->retries_unlogged = 0;
  if (s->state == SUB_READING) timer_start(t, RETRY_LOG_MS);
  else s->retry_log_armed = false;
}

static void count_retry(subscription *s, const struct entry *e, long long deliveries) {
  s->retries_total++;
  if (s->retry_log_armed) {
    s->retries_unlogged++;
    return;
  }
  char n[24];
  snprintf(n, sizeof n, "%lld", deliveries);
  sub__log(s, LOG_INFO, "entry retried", "id", e->id, "deliveries", n);
  s->retry_log_armed = true;
  timer_start(s->retry_log_timer, RETRY_LOG_MS);
}

/* A retry of either kind; past max_deliveries it becomes a dead letter. */
static void retry(subscription *s, const struct entry *e, const struct rt_result *res) {
  long long deliveries = sub__deliveries_before(s, e) + 1; /* this one counts */
  int cap = s->spec->max_deliveries;
  if (cap && deliveries >= cap) {
    char why[64];
    snprintf(why, sizeof why, "retried on delivery %lld of %d", deliveries, cap);
    sub__dead_letter(s, e, REASON_MAX_DELIVERIES, why, strlen(why), deliveries, res->version);
    return;
  }
  count_retry(s, e, deliveries);
  if (res->kind == RT_RETRY_AFTER) {
    delay(s, e, res->delay_ms, deliveries);
  } else if (s->spec->read == READ_NEW) {
    struct txn *t = txn_begin(s);
    outcome_retry_copy(t, s->retry_key, e, deliveries, sub__original_id(e));
    outcome_ack(t, s->spec, sub__key(s, e), e);
    send_txn(s, e, "retry", t);
  }
  /* claiming and reclaim: nothing to write, the entry stays pending and is
   * claimed again once idle min_idle. */
}

void sub__job_done(void *data, struct entry *e, const struct rt_result *res) {
  subscription *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  struct txn *t;
  switch (res->kind) {
  case RT_ACK:
  case RT_REPLY:
    if (res->nwrites == 0) {
      sub__queue_ack(s, e); /* coalesced with the others */
      break;
    }
    t = txn_begin(s);
    if (outcome_writes(t, res) != 0) {
      log_line(LOG_ERROR, s->spec->name, "too many entries published by one delivery, left pending",
               "stream", s->spec->stream, "group", s->spec->group, "id", e->id, NULL);
      break;
    }
    outcome_ack(t, s->spec, sub__key(s, e), e);
    send_txn(s, e, res->kind == RT_REPLY ? "reply" : "publish", t);
    break;
  case RT_RETRY:
  case RT_RETRY_AFTER:
    retry(s, e, res);
    break;
  case RT_REJECT:
    sub__dead_letter(s, e, REASON_REJECTED, res->text, res->text_len, sub__deliveries_before(s, e) + 1,
                     res->version);
    break;
  case RT_ERROR: {
    log_line(LOG_ERROR, s->spec->name, "handler failed, entry left pending", "stream",
             s->spec->stream, "group", s->spec->group, "retry_stream",
             e->key == KEY_RETRY ? s->retry_key : NULL, "id", e->id, "reason", res->reason,
             "version", res->version, "error", res->text, NULL);
    /* The last delivery max_deliveries allows failed: dead-letter it now,
     * with the error that ended it. */
    long long deliveries = sub__deliveries_before(s, e) + 1;
    if (s->spec->max_deliveries && deliveries >= s->spec->max_deliveries)
      sub__dead_letter(s, e, REASON_HANDLER_ERROR, res->text, res->text_len, deliveries, res->version);
    break;
  }
  case RT_INVALID: /* the handler never saw it: logged (and dead-lettered) by dead_letter */
    sub__dead_letter(s, e, res->reason, res->text, res->text_len, sub__deliveries_before(s, e) + 1,
                     res->version);
    break;
  }
  sub__held_remove(s, e);
  entry_free(e);
  lanes_done(&s->lanes, lane);
  sub__progress(s);
}

/* ---- the delay set ---- */

static void sweep_done(void *data, const bk_reply *r, const char *err) {
  subscription *s = data;
  s->writes_pending--;
  if (r && r->type == BK_ARRAY && r->elements == 3 && r->element[0]->type == BK_INTEGER &&
      r->element[1]->type == BK_INTEGER && r->element[2]->type == BK_INTEGER) {
    long long taken = r->element[0]->integer, unreadable = r->element[1]->integer;
    char n[24];
    if (r->element[2]->integer > 0) {
      snprintf(n, sizeof n, "%lld", r->element[2]->integer);
      sub__log(s, LOG_DEBUG, "acknowledged entries trimmed from the retry stream", "entries", n,
               "retry_stream", s->retry_key);
    }
    if (taken > unreadable) {
      snprintf(n, sizeof n, "%lld", taken - unreadable);
      sub__log(s, LOG_DEBUG, "delayed entries back on the retry stream", "entries", n, NULL, NULL);
    }
    if (unreadable > 0) {
      snprintf(n, sizeof n, "%lld", unreadable);
      log_line(LOG_ERROR, s->spec->name,
               "unreadable members of the delay set moved aside, not delivered", "stream",
               s->spec->stream, "group", s->spec->group, "members", n, "moved_to",
               s->unreadable_key, NULL);
    }
    sub__work_ok(s, WORK_SWEEP);
    /* A full sub__sweep may have left more that are due. */
    if (s->state == SUB_READING) timer_start(s->sweep_timer, taken >= SWEEP_COUNT ? 0 : SWEEP_MS);
  } else {
    char why[256], keys[512], detail[1024];
    sub__reply_text(r, err, why, sizeof why);
    /* Redis's text names neither the script nor the keys it was given. */
    snprintf(keys, sizeof keys, "%s %s %s", s->delay_key, s->retry_key, s->unreadable_key);
    enum log_level level = LOG_DEBUG; /* a lost connection: said elsewhere */
    if (r) {
      snprintf(detail, sizeof detail, "EVAL on %s: %s", keys, why);
      level = sub__work_failed(s, WORK_SWEEP, LOG_WARN, detail);
    }
    if (s->state == SUB_READING) {
      log_line(level, s->spec->name, "the delay-set sweep failed, retrying", "stream",
               s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer, "command",
               "EVAL", "script", "the delay-set sweep", "keys", keys, "error", why, NULL);
      timer_start(s->sweep_timer, SWEEP_MS);
    }
  }
  sub__progress(s); /* a claiming read may have waited for this sweep */
}

void sub__sweep(ltimer *t, void *data) {
  (void)t;
  subscription *s = data;
  if (s->state != SUB_READING) return;
  struct bk_args *a = &s->args;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_SWEEP);
  bk_args_str(a, "3");
  bk_args_str(a, s->delay_key);
  bk_args_str(a, s->retry_key); /* due entries come back for this group only */
  bk_args_str(a, s->unreadable_key);
  bk_args_num(a, (long long)clock_wall(s->clock));
  bk_args_num(a, SWEEP_COUNT);
  bk_args_str(a, s->spec->group); /* whose acknowledged entries the retry stream drops */
  if (bk_command(s->b, s->cmd, a->argc, a->argv, a->argvlen, sweep_done, s) == 0)
    s->writes_pending++;
  else
    timer_start(s->sweep_timer, SWEEP_MS);
}
