/* writer: acks coalesced per loop turn, outcomes as transactions, and the
 * outcomes cut off by a lost connection sent again (see writer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "log.h"
#include "scripts.h"
#include "writer.h"

#define ID_MAX 48         /* "ms-seq" of two 64-bit numbers, NUL included */
#define RETRY_SOON_MS 100 /* a write that cannot go out now is tried again this soon */
#define NKEYS 2           /* the stream and the retry stream (entry key) */

/* Ids finished and not yet in an XACK, for one key. */
struct ack_queue {
  char (*ids)[ID_MAX];
  size_t n, cap;
};

struct writer {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  char *retry_key;
  writer_event_fn *on_event;
  void *data;
  bool abandoned;           /* shutdown deadline: nothing more written */
  unsigned pending;         /* commands sent and not answered */
  size_t unwritten;         /* outcomes (not plain acks) not written yet */
  struct redo *redo, **redo_tail; /* outcomes cut off by a lost connection, to send again */
  struct redo *spare_redo;  /* answered outcome blocks, kept for reuse */
  size_t nspare_redo;
  struct txn txn;           /* builds each outcome's transaction, reused */
  struct ack_queue acks[NKEYS]; /* ids finished and not yet in an XACK, per key */
  size_t nacks;             /* of both keys */
  struct ack_batch *spare_batches; /* answered XACK batches, kept with their arrays */
  struct bk_args args;      /* builds the XACKs, reused */
  ltimer *flush_timer;      /* flushes acks at the next loop turn */
  bool flush_armed;
  struct fault work[WRITER_NWORK];
};

/* Copies an entry id (NUL-terminated, parsed as ms-seq so shorter than
 * ID_MAX) into dst: a plain copy, as this runs for every entry. */
static void copy_id(char dst[ID_MAX], const char *id) {
  size_t n = strlen(id);
  if (n >= ID_MAX) n = ID_MAX - 1;
  memcpy(dst, id, n);
  dst[n] = '\0';
}

static const char *key_name(const writer *w, unsigned char key) {
  return key == ENTRY_KEY_RETRY ? w->retry_key : w->spec->stream;
}

static void arm_flush(writer *w, uint64_t ms) {
  w->flush_armed = true;
  timer_start(w->flush_timer, ms);
}

/* ---- outcomes cut off by a lost connection ---- */

/* An outcome in flight: its transaction also as one SCRIPT_REDO call, copied
 * into a single block so it outlives the entry and the handler it came from,
 * ready to send again when the connection is cut before the reply. Answered
 * blocks wait in w->spare_redo for the next outcomes of their size. */
struct redo {
  struct redo *next;
  writer *w;
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
static struct redo *redo_alloc(writer *w, size_t cap) {
  struct redo *r = w->spare_redo;
  if (r) {
    w->spare_redo = r->next;
    w->nspare_redo--;
    if (r->cap >= cap) return r;
    free(r);
  }
  if (cap < REDO_MIN_CAP) cap = REDO_MIN_CAP;
  r = malloc(sizeof *r + cap);
  if (r) r->cap = cap;
  return r;
}

/* r was answered (or given up): keep it for later outcomes. */
static void redo_release(writer *w, struct redo *r) {
  w->unwritten--;
  free(r->refusal);
  r->refusal = NULL;
  if (w->nspare_redo == REDO_SPARE_MAX || r->cap > REDO_KEEP_MAX) {
    free(r);
    return;
  }
  r->next = w->spare_redo;
  w->spare_redo = r;
  w->nspare_redo++;
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

static struct redo *redo_new(writer *w, const char *key, const char *id, const char *what,
                             const struct txn *t) {
  static size_t script_len;
  if (script_len == 0) script_len = strlen(SCRIPT_REDO);
  const char *group = w->spec->group;
  char counts[TXN_MAX][12];
  size_t count_len[TXN_MAX];
  int argc = 6;
  size_t bytes = strlen(key) + strlen(group) + strlen(id) + 3;
  for (int i = 0; i < t->n; i++) {
    count_len[i] = format_count(counts[i], t->cmd[i].argc);
    argc += 1 + t->cmd[i].argc;
    bytes += count_len[i] + 1;
    for (int k = 0; k < t->cmd[i].argc; k++) bytes += t->cmd[i].argvlen[k] + 1;
  }
  struct redo *r = redo_alloc(w, (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes);
  if (r == NULL) return NULL;
  w->unwritten++;
  r->next = NULL;
  r->w = w;
  copy_id(r->id, id);
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
  ARG(group, strlen(group));
  ARG(id, strlen(id));
  for (int i = 0; i < t->n; i++) {
    ARG(counts[i], count_len[i]);
    for (int k = 0; k < t->cmd[i].argc; k++) ARG(t->cmd[i].argv[k], t->cmd[i].argvlen[k]);
  }
#undef ARG
  return r;
}

/* Keeps r to send again once the command connection is back. */
static void redo_later(writer *w, struct redo *r) {
  r->next = NULL;
  if (w->redo == NULL) w->redo_tail = &w->redo;
  *w->redo_tail = r;
  w->redo_tail = &r->next;
  if (!w->flush_armed) arm_flush(w, RETRY_SOON_MS);
}

static void redo_free_all(writer *w) {
  struct redo *lists[] = {w->redo, w->spare_redo};
  for (int i = 0; i < 2; i++) {
    while (lists[i]) {
      struct redo *r = lists[i];
      lists[i] = r->next;
      free(r->refusal);
      free(r);
    }
  }
  w->redo = w->spare_redo = NULL;
  w->nspare_redo = 0;
}

static void send_redo(writer *w, struct redo *r);

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

/* One XACK in flight. Answered batches wait in w->spare_batches with their
 * id arrays, which the next flush swaps with the queued ones: acking
 * allocates nothing once warm. */
struct ack_batch {
  writer *w;
  unsigned char key;   /* entry key: one XACK per key */
  size_t n, cap;
  char (*ids)[ID_MAX];
  struct ack_batch *next;
};

static void ack_batches_free(writer *w) {
  while (w->spare_batches) {
    struct ack_batch *b = w->spare_batches;
    w->spare_batches = b->next;
    free(b->ids);
    free(b);
  }
}

static void add_ack(writer *w, unsigned char key, const char *id);

static void ack_done(void *data, const bk_reply *r, const char *err) {
  struct ack_batch *batch = data;
  writer *w = batch->w;
  const struct handler_spec *spec = w->spec;
  w->pending--;
  if ((r == NULL || r->type != BK_INTEGER) && w->abandoned) {
    /* Past the shutdown deadline nothing is retried: the entries stay
     * pending (handled, to be delivered again elsewhere). */
    char why[256];
    bk_reply_text(r, err, why, sizeof why);
    char count[24];
    snprintf(count, sizeof count, "%zu", batch->n);
    log_line(LOG_WARN, spec->name, "shutdown deadline: ack unconfirmed, entries may stay pending",
             "stream", spec->stream, "group", spec->group, "consumer", spec->consumer, "entries",
             count, "error", why, NULL);
  } else if (r == NULL || r->type != BK_INTEGER) {
    char why[256], detail[1024];
    bk_reply_text(r, err, why, sizeof why);
    char count[24];
    snprintf(count, sizeof count, "%zu", batch->n);
    const char *key = key_name(w, batch->key);
    enum log_level level = LOG_WARN;
    if (r) { /* the server refused it (a lost connection is not counted) */
      snprintf(detail, sizeof detail, "XACK on %s: %s", key, why);
      level = fault_failed(&w->work[WRITER_ACKS], clock_now(w->clock), LOG_WARN, detail);
    }
    log_line(level, spec->name, "ack failed, will retry", "stream", spec->stream, "group",
             spec->group, "consumer", spec->consumer, "entries", count, "command", "XACK", "key",
             key, "error", why, NULL);
    /* Put them back: acked later, never dropped, and not at once: an error
     * such as READONLY lasts until the server changes. */
    for (size_t i = 0; i < batch->n; i++) add_ack(w, batch->key, batch->ids[i]);
    arm_flush(w, RETRY_SOON_MS);
  } else {
    /* Entries are being written again: an earlier outcome that failed once
     * (its entry logged and left pending) no longer makes the host unready. */
    fault_ok(&w->work[WRITER_ACKS], clock_now(w->clock), spec);
    fault_ok(&w->work[WRITER_OUTCOMES], clock_now(w->clock), spec);
  }
  batch->n = 0;
  batch->next = w->spare_batches;
  w->spare_batches = batch;
  w->on_event(w->data, WRITER_WRITTEN); /* a claiming read may have waited for these acks */
}

/* One XACK of the ids queued for key k; -1 when it cannot go out now. */
static int send_acks(writer *w, unsigned char k) {
  struct ack_queue *q = &w->acks[k];
  struct ack_batch *batch = w->spare_batches;
  if (batch) w->spare_batches = batch->next;
  else if ((batch = calloc(1, sizeof *batch)) == NULL) return -1;
  batch->w = w;
  batch->key = k;
  struct bk_args *a = &w->args;
  bk_args_reset(a);
  bk_args_str(a, "XACK");
  bk_args_str(a, key_name(w, k));
  bk_args_str(a, w->spec->group);
  for (size_t i = 0; i < q->n; i++) bk_args_str(a, q->ids[i]);
  if (bk_command(w->b, w->cmd, a->argc, a->argv, a->argvlen, ack_done, batch) != 0) {
    batch->next = w->spare_batches;
    w->spare_batches = batch;
    return -1;
  }
  w->pending++;
  /* The batch keeps the ids sent (ack_done may queue them again); the
   * queue takes the batch's old array for the next ones. */
  char(*ids)[ID_MAX] = batch->ids;
  size_t cap = batch->cap;
  batch->ids = q->ids;
  batch->cap = q->cap;
  batch->n = q->n;
  q->ids = ids;
  q->cap = cap;
  w->nacks -= q->n;
  q->n = 0;
  return 0;
}

static void flush(ltimer *t, void *data) {
  (void)t;
  writer *w = data;
  w->flush_armed = false;
  if ((w->nacks == 0 && w->redo == NULL) || w->abandoned) return;
  if (!bk_connected(w->b, w->cmd)) { /* keep them; try again shortly */
    arm_flush(w, RETRY_SOON_MS);
    return;
  }
  /* Cut-off outcomes first, in the order they were made. */
  struct redo *redo = w->redo;
  w->redo = NULL;
  while (redo) {
    struct redo *next = redo->next;
    send_redo(w, redo);
    redo = next;
  }
  for (unsigned char k = 0; k < NKEYS; k++)
    if (w->acks[k].n && send_acks(w, k) != 0) {
      arm_flush(w, RETRY_SOON_MS);
      return;
    }
}

/* Adds id (read from key) to the next XACK of that key. */
static void add_ack(writer *w, unsigned char key, const char *id) {
  struct ack_queue *q = &w->acks[key];
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    void *p = realloc(q->ids, cap * sizeof *q->ids);
    if (p == NULL) {
      log_line(LOG_ERROR, w->spec->name, "out of memory: entry left pending", "stream",
               w->spec->stream, "group", w->spec->group, "consumer", w->spec->consumer, "id", id,
               NULL);
      return;
    }
    q->ids = p;
    q->cap = cap;
  }
  copy_id(q->ids[q->n++], id);
  w->nacks++;
}

void writer_ack(writer *w, unsigned char key, const char *id) {
  if (w->abandoned) return; /* nothing is written past the deadline: it stays pending */
  add_ack(w, key, id);
  if (!w->flush_armed) arm_flush(w, 0);
}

void writer_flush(writer *w) {
  if (w->nacks || w->redo) flush(w->flush_timer, w);
}

size_t writer_abandon(writer *w) {
  w->abandoned = true;
  /* Acks that could not go out yet (the server away): writing them now
   * would mean waiting for it, which the deadline forbids. */
  timer_stop(w->flush_timer);
  w->flush_armed = false;
  size_t unacked = w->nacks;
  w->nacks = 0;
  for (int k = 0; k < NKEYS; k++) w->acks[k].n = 0;
  return unacked;
}

/* ---- outcomes ---- */

static void redo_done(void *data, const bk_reply *r, const char *err) {
  struct redo *req = data;
  writer *w = req->w;
  const struct handler_spec *spec = w->spec;
  w->pending--;
  if (r == NULL && !w->abandoned) {
    redo_later(w, req); /* lost again: once more when it is back */
    w->on_event(w->data, WRITER_WRITTEN);
    return;
  }
  if (r && r->type == BK_INTEGER) {
    log_line(LOG_INFO, spec->name,
             r->integer ? "outcome written after reconnecting"
                        : "outcome had been written before the connection dropped",
             "stream", spec->stream, "group", spec->group, "id", req->id, "outcome", req->what,
             NULL);
  } else {
    char why[256], keys[512];
    bk_reply_text(r, err, why, sizeof why);
    redo_keys(req, keys, sizeof keys);
    log_line(LOG_ERROR, spec->name, "outcome not written, entry left pending", "stream",
             spec->stream, "group", spec->group, "id", req->id, "outcome", req->what, "command",
             "EVAL", "script", "the outcome written again after a lost connection", "keys", keys,
             "error", why, NULL);
  }
  redo_release(w, req);
  w->on_event(w->data, WRITER_WRITTEN);
}

static void send_redo(writer *w, struct redo *r) {
  if (bk_command(w->b, w->cmd, r->argc, r->argv, r->argvlen, redo_done, r) == 0)
    w->pending++;
  else
    redo_later(w, r);
}

static void write_done(void *data, const bk_reply *r, const char *err) {
  struct redo *req = data;
  writer *w = req->w;
  const struct handler_spec *spec = w->spec;
  w->pending--;
  if (r == NULL && !w->abandoned) {
    /* Cut off: whether EXEC ran is unknown. SCRIPT_REDO finds out (is the
     * entry still pending?) and writes it all again only if it did not. */
    log_line(LOG_WARN, spec->name, "outcome unconfirmed (connection lost), written again once back",
             "stream", spec->stream, "group", spec->group, "id", req->id, "outcome", req->what,
             "error", err, NULL);
    redo_later(w, req);
    w->on_event(w->data, WRITER_WRITTEN);
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
    bk_reply_text(failed, failed && failed->type == BK_NIL ? "transaction aborted" : err, why,
               sizeof why);
    /* EXECABORT says only that something was refused: say what, on which
     * key, with the refusal's own text. */
    const char *name = NULL, *key = NULL;
    if (req->refusal && failed && failed->type == BK_ERROR &&
        bk_reply_is_error(failed, "EXECABORT")) {
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
      fault_failed(&w->work[WRITER_OUTCOMES], clock_now(w->clock), LOG_ERROR, detail);
    }
    log_line(LOG_ERROR, spec->name,
             acked          ? "outcome partly written: entry acked, a write failed"
             : w->abandoned ? "shutdown deadline: outcome unconfirmed, entry may stay pending"
                            : "outcome not written, entry left pending",
             "stream", spec->stream, "group", spec->group, "id", req->id, "outcome", req->what,
             "command", name, "key", key, "error", why, NULL);
  } else {
    fault_ok(&w->work[WRITER_OUTCOMES], clock_now(w->clock), spec);
  }
  redo_release(w, req);
  w->on_event(w->data, WRITER_WRITTEN); /* a claiming read may have waited for this write */
}

static void ignore_reply(void *data, const bk_reply *r, const char *err) {
  (void)r, (void)err;
  writer *w = data;
  w->pending--;
  w->on_event(w->data, WRITER_REPLY);
}

/* A queued command's reply (+QUEUED, or the error that makes EXEC abort):
 * the first refusal is kept for write_done's log line. */
static void queued_reply(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct redo *req = data;
  writer *w = req->w;
  w->pending--;
  if (r && r->type == BK_ERROR && req->refused < 0) {
    req->refused = req->queued;
    req->refusal = malloc(r->len + 1);
    if (req->refusal) {
      memcpy(req->refusal, r->str, r->len);
      req->refusal[r->len] = '\0';
    }
  }
  req->queued++;
  w->on_event(w->data, WRITER_REPLY);
}

struct txn *writer_txn(writer *w) {
  txn_reset(&w->txn);
  return &w->txn;
}

void writer_send(writer *w, unsigned char key, const char *id, const char *what) {
  const struct handler_spec *spec = w->spec;
  struct txn *t = &w->txn;
  struct redo *req = redo_new(w, key_name(w, key), id, what, t);
  const char *exec = "EXEC", *multi_cmd = "MULTI";
  size_t exec_len = 4, multi_len = 5;
  if (req == NULL) {
    log_line(LOG_ERROR, spec->name, "outcome not written (out of memory), entry left pending",
             "stream", spec->stream, "group", spec->group, "id", id, "outcome", what, NULL);
    return;
  }
  if (t->n > 1) {
    if (bk_command(w->b, w->cmd, 1, &multi_cmd, &multi_len, ignore_reply, w) != 0) goto later;
    w->pending++;
    /* MULTI was accepted: the connection is up and the rest goes out with it. */
    for (int i = 0; i < t->n; i++) {
      bk_command(w->b, w->cmd, t->cmd[i].argc, t->cmd[i].argv, t->cmd[i].argvlen, queued_reply,
                 req);
      w->pending++;
    }
    bk_command(w->b, w->cmd, 1, &exec, &exec_len, write_done, req);
  } else if (bk_command(w->b, w->cmd, t->cmd[0].argc, t->cmd[0].argv, t->cmd[0].argvlen,
                        write_done, req) != 0) {
    goto later;
  }
  w->pending++;
  return;
later: /* not connected now: written once the connection is back */
  log_line(LOG_WARN, spec->name, "outcome waits for the connection", "stream", spec->stream,
           "group", spec->group, "id", id, "outcome", what, NULL);
  redo_later(w, req);
}

/* ---- life cycle and state ---- */

writer *writer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                   const char *retry_key, writer_event_fn *on_event, void *data) {
  writer *w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  bk_args_init(&w->args);
  txn_init(&w->txn);
  w->b = b;
  w->cmd = cmd;
  w->clock = clock;
  w->spec = spec;
  w->on_event = on_event;
  w->data = data;
  w->work[WRITER_ACKS].name = "acks";
  w->work[WRITER_OUTCOMES].name = "writing outcomes";
  w->retry_key = strdup(retry_key);
  w->flush_timer = timer_new(clock, flush, w);
  if (w->retry_key == NULL || w->flush_timer == NULL) {
    writer_free(w);
    return NULL;
  }
  return w;
}

void writer_set_spec(writer *w, const struct handler_spec *spec) { w->spec = spec; }

void writer_free(writer *w) {
  if (w == NULL) return;
  if (w->flush_timer) timer_free(w->flush_timer);
  redo_free_all(w);
  ack_batches_free(w);
  for (int k = 0; k < NKEYS; k++) free(w->acks[k].ids);
  bk_args_free(&w->args);
  txn_free(&w->txn);
  free(w->retry_key);
  free(w);
}

size_t writer_queued_acks(const writer *w) { return w->nacks; }
unsigned writer_pending(const writer *w) { return w->pending; }
size_t writer_unwritten(const writer *w) { return w->unwritten; }
bool writer_has_redo(const writer *w) { return w->redo != NULL; }
const struct fault *writer_fault(const writer *w, enum writer_work work) { return &w->work[work]; }
