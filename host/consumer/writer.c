/* writer: acks coalesced per loop turn, other outcomes gathered into one
 * script call per key and turn, and sent again when cut off (see writer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "delivery_metrics.h"
#include "log.h"
#include "outcome_batch.h"
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
  struct delivery_metrics *metrics;
  char *retry_key;
  writer_written_fn *on_written;
  void *data;
  bool abandoned;                            /* shutdown deadline: nothing more written */
  unsigned pending;                          /* commands sent and not answered */
  size_t unwritten;                          /* outcomes (not plain acks) not written yet */
  struct outcome_batch *open[NKEYS];         /* outcomes of this loop turn, per key */
  struct outcome_batch *ready, **ready_tail; /* batches to send, in order (cut-off ones too) */
  struct outcome_batch *spare_outcomes;      /* answered batches, kept with their buffers */
  size_t nspare_outcomes;
  struct txn txn;                  /* builds each outcome's commands, reused */
  struct ack_queue acks[NKEYS];    /* ids finished and not yet in an XACK, per key */
  size_t nacks;                    /* of both keys */
  struct ack_batch *spare_batches; /* answered XACK batches, kept with their arrays */
  struct bk_args args;             /* builds the XACKs, reused */
  ltimer *flush_timer;             /* flushes acks at the next loop turn */
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

/* ---- outcomes: gathered per key, one SCRIPT_OUTCOME call per batch ---- */

#define BATCH_ITEMS_MAX 256        /* outcomes per script call: keeps each call short */
#define BATCH_BYTES_MAX (1u << 20) /* ... and its arguments about a megabyte */
#define BATCH_SPARE_MAX 4
#define BATCH_KEEP_BYTES (4u << 20) /* larger buffers (big bodies) are not kept */

/* An empty batch for key k: a spare one if there is one. */
static struct outcome_batch *batch_new(writer *w, unsigned char k) {
  struct outcome_batch *b = w->spare_outcomes;
  if (b) {
    w->spare_outcomes = b->next;
    w->nspare_outcomes--;
  } else if ((b = outcome_batch_new()) == NULL) {
    return NULL;
  }
  b->owner = w;
  b->next = NULL;
  b->key = k;
  if (outcome_batch_start(b, key_name(w, k), w->spec->group, w->spec->consumer) != 0) {
    outcome_batch_free(b);
    return NULL;
  }
  return b;
}

/* b was answered (or given up): keep it for later outcomes. */
static void batch_release(writer *w, struct outcome_batch *b) {
  w->unwritten -= b->nitems;
  if (w->nspare_outcomes == BATCH_SPARE_MAX || outcome_batch_capacity(b) > BATCH_KEEP_BYTES) {
    outcome_batch_free(b);
    return;
  }
  b->next = w->spare_outcomes;
  w->spare_outcomes = b;
  w->nspare_outcomes++;
}

/* Queues b to go out at the next flush, after those queued before it. */
static void batch_ready(writer *w, struct outcome_batch *b) {
  b->next = NULL;
  *w->ready_tail = b;
  w->ready_tail = &b->next;
}

static bool outcomes_queued(const writer *w) { return w->ready || w->open[0] || w->open[1]; }

static void outcomes_free(writer *w) {
  struct outcome_batch *lists[] = {w->ready, w->spare_outcomes, w->open[0], w->open[1]};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    while (lists[i]) {
      struct outcome_batch *b = lists[i];
      lists[i] = b->next;
      outcome_batch_free(b);
    }
  w->ready = w->spare_outcomes = w->open[0] = w->open[1] = NULL;
}

/* ---- acks: coalesced, one XACK per loop turn ---- */

/* One XACK in flight. Answered batches wait in w->spare_batches with their
 * id arrays, which the next flush swaps with the queued ones: acking
 * allocates nothing once warm. */
struct ack_batch {
  writer *w;
  unsigned char key; /* entry key: one XACK per key */
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
             "stream", spec->stream, "group", spec->group, "consumer", spec->consumer,
             LOG_NUMBER "entries", count, "error", why, NULL);
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
             spec->group, "consumer", spec->consumer, LOG_NUMBER "entries", count, "command",
             "XACK", "key", key, "error", why, NULL);
    /* Put them back: acked later, never dropped, and not at once: an error
     * such as READONLY lasts until the server changes. */
    for (size_t i = 0; i < batch->n; i++) add_ack(w, batch->key, batch->ids[i]);
    arm_flush(w, RETRY_SOON_MS);
  } else {
    if (r->integer < (long long)batch->n) { /* taken over while they ran here, and finished */
      char count[24];
      snprintf(count, sizeof count, "%lld", (long long)batch->n - r->integer);
      log_line(LOG_INFO, spec->name, "entries already acknowledged by another consumer", "stream",
               spec->stream, "group", spec->group, "consumer", spec->consumer, LOG_NUMBER "entries",
               count, NULL);
    }
    /* Entries are being written again: an earlier outcome that failed once
     * (its entry logged and left pending) no longer makes the host unready. */
    fault_ok(&w->work[WRITER_ACKS], clock_now(w->clock), spec);
    fault_ok(&w->work[WRITER_OUTCOMES], clock_now(w->clock), spec);
  }
  batch->n = 0;
  batch->next = w->spare_batches;
  w->spare_batches = batch;
  w->on_written(w->data, false); /* a claiming read may have waited for these acks */
}

/* One XACK of the ids queued for key k; -1 when it cannot go out now. */
static int send_acks(writer *w, unsigned char k) {
  struct ack_queue *q = &w->acks[k];
  struct ack_batch *batch = w->spare_batches;
  if (batch)
    w->spare_batches = batch->next;
  else if ((batch = calloc(1, sizeof *batch)) == NULL)
    return -1;
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

static void send_ready(writer *w);

static void flush(ltimer *t, void *data) {
  (void)t;
  writer *w = data;
  w->flush_armed = false;
  if ((w->nacks == 0 && !outcomes_queued(w)) || w->abandoned) return;
  if (!bk_connected(w->b, w->cmd)) { /* keep them; try again shortly */
    arm_flush(w, RETRY_SOON_MS);
    return;
  }
  send_ready(w); /* cut-off outcomes first, then this turn's, in the order they were made */
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
  if (w->nacks || outcomes_queued(w)) flush(w->flush_timer, w);
}

size_t writer_abandon(writer *w) {
  /* What could not go out yet (the server away): writing it now would mean
   * waiting for it, which the deadline forbids. */
  size_t unwritten = writer_queued(w);
  w->abandoned = true;
  timer_stop(w->flush_timer);
  w->flush_armed = false;
  w->nacks = 0;
  for (int k = 0; k < NKEYS; k++) {
    w->acks[k].n = 0;
    if (w->open[k]) batch_release(w, w->open[k]);
    w->open[k] = NULL;
  }
  while (w->ready) {
    struct outcome_batch *b = w->ready;
    w->ready = b->next;
    batch_release(w, b);
  }
  w->ready_tail = &w->ready;
  return unwritten;
}

/* ---- outcomes ---- */

/* The entry of item it had nothing written: say so and why. */
static void item_failed(writer *w, const struct outcome_item *it, const char *msg,
                        const char *command, const char *key, const char *why, bool count) {
  const struct handler_spec *spec = w->spec;
  enum log_level level = LOG_ERROR;
  if (count) { /* the server refused it (a lost connection is not counted) */
    char detail[1024];
    snprintf(detail, sizeof detail, "%s on %s: %s", command, key, why);
    level = fault_failed(&w->work[WRITER_OUTCOMES], clock_now(w->clock), LOG_ERROR, detail);
  }
  log_line(level, spec->name, msg, "stream", spec->stream, "group", spec->group, "id", it->id,
           "outcome", it->what, "command", command, "key", key, "error", why, NULL);
}

/* What SCRIPT_OUTCOME answered for item it: 1, 0 or "N error". Returns
 * whether Redis refused something of it. */
static bool item_answered(writer *w, const struct outcome_batch *b, const struct outcome_item *it,
                          const bk_reply *r) {
  const struct handler_spec *spec = w->spec;
  const char *key = key_name(w, b->key);
  if (r->type == BK_INTEGER && r->integer == 1) {
    if (b->resent)
      log_line(LOG_INFO, spec->name, "outcome written after reconnecting", "stream", spec->stream,
               "group", spec->group, "id", it->id, "outcome", it->what, NULL);
    return false;
  }
  if (r->type == BK_INTEGER && r->integer == 0) {
    if (it->ack && !b->resent && w->metrics) metric_add(w->metrics->skipped, 1);
    const char *msg = b->resent ? "outcome had been written before the connection dropped, or by "
                                  "another consumer"
                      : it->ack ? "already acknowledged by another consumer; effects skipped"
                                : "no longer pending here (acknowledged or claimed by another "
                                  "consumer); outcome skipped";
    log_line(b->resent ? LOG_INFO : LOG_WARN, spec->name, msg, "stream", spec->stream, "group",
             spec->group, "consumer", spec->consumer, "id", it->id, "outcome", it->what, NULL);
    return false;
  }
  char why[512];
  long c = 0;
  bool parsed = false;
  if (r->type == BK_STRING) {
    snprintf(why, sizeof why, "%.*s", (int)r->len, r->str);
    char *end;
    c = strtol(why, &end, 10);
    parsed = end != why && *end == ' ';
    if (parsed) memmove(why, end + 1, strlen(end + 1) + 1);
  }
  if (!parsed) {
    bk_reply_text(r, NULL, why, sizeof why);
    item_failed(w, it, "outcome not written, entry left pending", "EVAL", key, why, true);
  } else if (c == 0) {
    item_failed(w, it, "outcome not written, entry left pending", it->ack ? "XACK" : "XPENDING",
                key, why, true);
  } else if (c < 0) { /* refused before anything was written */
    const char *name, *cmd_key;
    outcome_batch_cmd(b, it, -c, &name, &cmd_key);
    item_failed(w, it, "outcome not written, entry left pending", name, cmd_key, why, true);
  } else {
    const char *name, *cmd_key;
    outcome_batch_cmd(b, it, c, &name, &cmd_key);
    item_failed(w, it, "outcome partly written: entry acked, a write failed", name, cmd_key, why,
                true);
  }
  return true;
}

static void outcomes_done(void *data, const bk_reply *r, const char *err) {
  struct outcome_batch *b = data;
  writer *w = b->owner;
  w->pending--;
  if (r == NULL && !w->abandoned) {
    /* Cut off: whether the script ran is unknown. Sent again as it is: it
     * writes only what is still pending. */
    char count[24];
    snprintf(count, sizeof count, "%zu", b->nitems);
    log_line(LOG_WARN, w->spec->name,
             "outcomes unconfirmed (connection lost), written again once back", "stream",
             w->spec->stream, "group", w->spec->group, LOG_NUMBER "entries", count, "error", err,
             NULL);
    b->resent = true;
    batch_ready(w, b);
    if (!w->flush_armed) arm_flush(w, RETRY_SOON_MS);
    w->on_written(w->data, false);
    return;
  }
  bool delays = b->delays;
  if (r && r->type == BK_ARRAY && r->elements == b->nitems) {
    bool refused = false;
    for (size_t i = 0; i < b->nitems; i++)
      refused |= item_answered(w, b, &b->items[i], r->element[i]);
    if (!refused) fault_ok(&w->work[WRITER_OUTCOMES], clock_now(w->clock), w->spec);
  } else {
    char why[256];
    bk_reply_text(r, err, why, sizeof why);
    for (size_t i = 0; i < b->nitems; i++)
      item_failed(w, &b->items[i],
                  w->abandoned && r == NULL
                      ? "shutdown deadline: outcome unconfirmed, entry may stay pending"
                      : "outcome not written, entry left pending",
                  "EVAL", key_name(w, b->key), why, r != NULL && i == 0);
  }
  batch_release(w, b);
  w->on_written(w->data, delays); /* a claiming read may have waited for this write */
}

/* Sends b; -1 when it cannot go out now. */
static int send_batch(writer *w, struct outcome_batch *b) {
  int argc;
  const char **argv;
  const size_t *argvlen;
  if (outcome_batch_argv(b, &argc, &argv, &argvlen) != 0 ||
      bk_command(w->b, w->cmd, argc, argv, argvlen, outcomes_done, b) != 0)
    return -1;
  w->pending++;
  return 0;
}

/* Sends the batches ready, in order; those that cannot go out stay. */
static void send_ready(writer *w) {
  for (unsigned char k = 0; k < NKEYS; k++)
    if (w->open[k]) {
      batch_ready(w, w->open[k]);
      w->open[k] = NULL;
    }
  while (w->ready) {
    struct outcome_batch *b = w->ready;
    if (send_batch(w, b) != 0) {
      arm_flush(w, RETRY_SOON_MS);
      return;
    }
    w->ready = b->next;
    if (w->ready == NULL) w->ready_tail = &w->ready;
  }
}

struct txn *writer_txn(writer *w) {
  outcome_txn_reset(&w->txn);
  return &w->txn;
}

void writer_outcome(writer *w, unsigned char key, const char *id, const char *what, bool ack) {
  const struct handler_spec *spec = w->spec;
  if (w->abandoned) return; /* nothing is written past the deadline: it stays pending */
  struct outcome_batch *b = w->open[key];
  if (b == NULL && (b = w->open[key] = batch_new(w, key)) == NULL) goto oom;
  if (outcome_batch_add(b, &w->txn, id, what, ack) != 0) goto oom;
  w->unwritten++;
  if (b->nitems == BATCH_ITEMS_MAX || b->nbytes >= BATCH_BYTES_MAX) {
    batch_ready(w, b);
    w->open[key] = NULL;
  }
  if (!w->flush_armed) arm_flush(w, 0);
  return;
oom:
  log_line(LOG_ERROR, spec->name, "outcome not written (out of memory), entry left pending",
           "stream", spec->stream, "group", spec->group, "id", id, "outcome", what, NULL);
}

/* ---- life cycle and state ---- */

writer *writer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                   const char *retry_key, writer_written_fn *on_written, void *data) {
  writer *w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  bk_args_init(&w->args);
  outcome_txn_init(&w->txn);
  w->b = b;
  w->cmd = cmd;
  w->clock = clock;
  w->spec = spec;
  w->on_written = on_written;
  w->ready_tail = &w->ready;
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

void writer_set_metrics(writer *w, struct delivery_metrics *m) { w->metrics = m; }

void writer_set_spec(writer *w, const struct handler_spec *spec) { w->spec = spec; }

void writer_free(writer *w) {
  if (w == NULL) return;
  if (w->flush_timer) timer_free(w->flush_timer);
  outcomes_free(w);
  ack_batches_free(w);
  for (int k = 0; k < NKEYS; k++) free(w->acks[k].ids);
  bk_args_free(&w->args);
  outcome_txn_free(&w->txn);
  free(w->retry_key);
  free(w);
}

size_t writer_queued(const writer *w) {
  size_t n = w->nacks;
  for (int k = 0; k < NKEYS; k++)
    if (w->open[k]) n += w->open[k]->nitems;
  for (const struct outcome_batch *b = w->ready; b; b = b->next) n += b->nitems;
  return n;
}

unsigned writer_pending(const writer *w) { return w->pending; }
size_t writer_unwritten(const writer *w) { return w->unwritten; }
const struct fault *writer_fault(const writer *w, enum writer_work work) { return &w->work[work]; }
