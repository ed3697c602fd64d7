/* apply: carrying out the policy's decisions (see apply.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"

#include "delivery_metrics.h"
#include "log.h"
#include "outcome.h"
#include "policy.h"
#include "trace.h"

struct applier {
  writer *w;
  lclock *clock;
  const struct handler_spec *spec;
  const char *retry_key;
  struct delivery_metrics *metrics;
  apply_reading_fn *reading;
  void *data;
  ltimer *retry_log_timer; /* ends the interval whose retries are counted (log_retries) */
  bool retry_log_armed;
  uint64_t retries_unlogged; /* retries in this interval not logged yet */
  uint64_t retries_total;    /* retries since the subscription started */
};

/* The key an entry was read from. */
static const char *entry_key(const applier *a, const struct entry *e) {
  return e->key == ENTRY_KEY_RETRY ? a->retry_key : a->spec->stream;
}

/* ---- retries, logged per interval ---- */

static void log_retries(ltimer *t, void *data) {
  applier *a = data;
  if (a->retries_unlogged == 0) {
    a->retry_log_armed = false; /* quiet: the next retry is logged at once */
    return;
  }
  const struct handler_spec *sp = a->spec;
  char count[24], total[24];
  snprintf(count, sizeof count, "%llu", (unsigned long long)a->retries_unlogged);
  snprintf(total, sizeof total, "%llu", (unsigned long long)a->retries_total);
  log_line(LOG_INFO, sp->name, "entries retried", "stream", sp->stream, "group", sp->group,
           "consumer", sp->consumer, LOG_NUMBER "count", count, LOG_NUMBER "total", total, NULL);
  a->retries_unlogged = 0;
  if (a->reading(a->data))
    timer_start(t, APPLY_RETRY_LOG_MS);
  else
    a->retry_log_armed = false;
}

/* The trace id of e's traceparent into buf (TRACE_ID_LEN + 1 bytes), for
 * the log lines about e; NULL (no trace_id= field) when it has no valid one. */
static const char *trace_of(const struct entry *e, char *buf) {
  size_t len = 0;
  const char *tp = entry_get(e, HDR_TRACEPARENT, &len);
  return tp && trace_id_of(tp, len, buf) ? buf : NULL;
}

/* after_ms: the delay of ls.retry_after, or -1 for ls.retry (or a retry
 * the handler did not ask for). */
static void count_retry(applier *a, const struct entry *e, long long deliveries, int64_t after_ms) {
  a->retries_total++;
  if (a->retry_log_armed) {
    a->retries_unlogged++;
    return;
  }
  const struct handler_spec *sp = a->spec;
  char n[24], delay[24], trace[TRACE_ID_LEN + 1];
  snprintf(n, sizeof n, "%lld", deliveries);
  snprintf(delay, sizeof delay, "%lld", (long long)after_ms);
  log_line(LOG_INFO, sp->name, after_ms >= 0 ? "entry retried after a delay" : "entry retried",
           "stream", sp->stream, "group", sp->group, "consumer", sp->consumer, "id", e->id,
           "trace_id", trace_of(e, trace), LOG_NUMBER "deliveries", n, LOG_NUMBER "delay_ms",
           after_ms >= 0 ? delay : NULL, NULL);
  a->retry_log_armed = true;
  timer_start(a->retry_log_timer, APPLY_RETRY_LOG_MS);
}

/* ---- carrying out what was decided ---- */

/* What the policy needs to know of e and the handler file. */
static void policy_input(const applier *a, const struct entry *e, struct policy_in *in) {
  *in = (struct policy_in){
      .before = policy_deliveries_before(a->spec->read, e->deliveries, entry_carried_deliveries(e)),
      .read = a->spec->read,
      .min_idle_ms = a->spec->min_idle_ms,
      .max_deliveries = a->spec->max_deliveries,
      .dead_letter = a->spec->dead_letter != NULL,
  };
}

/* Logs and writes what d says for e. res: the handler's result (NULL when
 * it did not run); version: the handler's; error, error_len: the handler's
 * text, unless the policy worded the error itself. */
static void carry_out(applier *a, const struct entry *e, const struct policy_out *d,
                      const struct rt_result *res, const char *version, const char *error,
                      size_t error_len) {
  const struct handler_spec *sp = a->spec;
  const char *retry_stream = e->key == ENTRY_KEY_RETRY ? a->retry_key : NULL;
  if (d->why[0]) {
    error = d->why;
    error_len = strlen(d->why);
  }
  char count[24] = ""; /* for the log lines below only: an ack needs no text */
  char trace[TRACE_ID_LEN + 1];
  const char *trace_id = d->note != POLICY_NOTE_NONE ? trace_of(e, trace) : NULL;
  if (d->note >= POLICY_NOTE_DEAD_LETTERED) snprintf(count, sizeof count, "%lld", d->deliveries);
  switch (d->note) {
    case POLICY_NOTE_NONE: break;
    case POLICY_NOTE_RETRIED:
      count_retry(a, e, d->deliveries, res && res->kind == RT_RETRY_AFTER ? res->delay_ms : -1);
      break;
    case POLICY_NOTE_TOO_MANY_WRITES:
      log_line(LOG_ERROR, sp->name,
               "too many writes by one delivery (ctx:write, ctx:publish, the reply), left pending",
               "stream", sp->stream, "group", sp->group, "id", e->id, "trace_id", trace_id, NULL);
      break;
    case POLICY_NOTE_DEAD_LETTERED:
      log_line(LOG_WARN, sp->name, "entry dead-lettered", "stream", sp->stream, "group", sp->group,
               "retry_stream", retry_stream, "id", e->id, "trace_id", trace_id, "reason", d->reason,
               LOG_NUMBER "deliveries", count, "dead_letter", sp->dead_letter, "version", version,
               NULL);
      break;
    case POLICY_NOTE_REJECTED_ACKED:
    case POLICY_NOTE_BAD_INPUT_LEFT:
    case POLICY_NOTE_LIMIT_LEFT:
      log_line(LOG_ERROR, sp->name,
               d->note == POLICY_NOTE_REJECTED_ACKED
                   ? "entry rejected, acked (no dead_letter stream)"
               : d->note == POLICY_NOTE_BAD_INPUT_LEFT
                   ? "bad entry left pending"
                   : "delivery limit reached, entry left pending (no dead_letter stream)",
               "stream", sp->stream, "group", sp->group, "retry_stream", retry_stream, "id", e->id,
               "trace_id", trace_id, "reason", d->reason, LOG_NUMBER "deliveries", count, "version",
               version, "error", error, NULL);
      break;
  }
  struct delivery_metrics *m = a->metrics;
  if (m) {
    bool delay = d->action == POLICY_DELAY || d->action == POLICY_RESTAMP;
    if (delay)
      metric_add(m->delays, 1);
    else if (d->note == POLICY_NOTE_RETRIED)
      metric_add(m->retries, 1);
    if (d->action == POLICY_DEAD_LETTER) dm_dead_letter(m, d->reason);
  }
  struct txn *t;
  const char *what;
  switch (d->action) {
    case POLICY_RUN:
    case POLICY_LEAVE: return;
    case POLICY_ACK:
      writer_ack(a->w, e->key, e->id); /* coalesced with the others */
      return;
    case POLICY_RESTAMP: /* stays pending: no ack */
      t = writer_txn(a->w);
      outcome_restamp(t, sp, entry_key(a, e), e, d->delay_ms);
      writer_outcome(a->w, e->key, e->id, "retry_after", false);
      return;
    case POLICY_WRITE:
      t = writer_txn(a->w);
      if (outcome_writes(t, res) != 0) return; /* the policy let through only what fits */
      what = res->kind == RT_REPLY ? "reply" : "writes";
      break;
    case POLICY_RETRY_COPY:
      t = writer_txn(a->w);
      outcome_retry_copy(t, a->retry_key, e, d->deliveries, entry_source_id(e));
      what = "retry";
      break;
    case POLICY_DELAY:
      t = writer_txn(a->w);
      outcome_delay(t, sp, e, d->deliveries, entry_source_id(e),
                    clock_wall(a->clock) + (uint64_t)d->delay_ms);
      what = "retry_after";
      break;
    case POLICY_DEAD_LETTER:
      t = writer_txn(a->w);
      outcome_dead_letter(t, sp, e, entry_source_id(e), d->reason, error, error_len, d->deliveries,
                          clock_wall(a->clock));
      what = "dead letter";
      break;
    default: return;
  }
  writer_outcome(a->w, e->key, e->id, what, true); /* with its ack */
}

/* An entry read cut (entry.h: too large to hold whole) is bad input the
 * handler never sees, decided as the runtime decides a body over max_body. */
static void too_large(applier *a, const struct entry *e, const char *version) {
  char text[200];
  if (e->body_size > a->spec->max_body)
    snprintf(text, sizeof text, "body is %llu bytes, over max_body (%zu)",
             (unsigned long long)e->body_size, a->spec->max_body);
  else
    snprintf(text, sizeof text,
             "entry is %llu bytes in all (with %u a field), over max_body (%zu) plus %u bytes of "
             "headers",
             (unsigned long long)e->entry_size, ENTRY_PAIR_COST, a->spec->max_body,
             ENTRY_HEADERS_MAX);
  struct policy_in in;
  policy_input(a, e, &in);
  in.kind = RT_INVALID;
  in.reason = REASON_INPUT_TOO_LARGE;
  struct policy_out d;
  policy_decide(&in, &d);
  dm_count(a->metrics, dm_outcome_of(RT_INVALID));
  carry_out(a, e, &d, NULL, version, text, strlen(text));
}

bool apply_admit(applier *a, const struct entry *e, const char *version) {
  if (e->entry_size) {
    too_large(a, e, version);
    return false;
  }
  long long before =
      policy_deliveries_before(a->spec->read, e->deliveries, entry_carried_deliveries(e));
  if (policy_may_run(before, a->spec->max_deliveries)) return true;
  struct policy_in in;
  policy_input(a, e, &in);
  struct policy_out d;
  policy_admit(&in, &d);
  if (d.action == POLICY_RUN) return true;
  if (d.action == POLICY_DEAD_LETTER) dm_count(a->metrics, DM_DEAD_LETTER);
  carry_out(a, e, &d, NULL, version, NULL, 0); /* delivered max_deliveries times without an ack */
  return false;
}

void apply_finished(applier *a, const struct entry *e, const struct rt_result *res) {
  if (policy_plain_ack(res->kind, res->nwrites)) {
    dm_count(a->metrics, DM_ACK);
    writer_ack(a->w, e->key, e->id); /* coalesced with the others */
    return;
  }
  struct policy_in in;
  policy_input(a, e, &in);
  in.kind = res->kind;
  in.reason = res->reason;
  in.delay_ms = res->delay_ms;
  in.nwrites = res->nwrites;
  struct policy_out d;
  policy_decide(&in, &d);
  /* the delivery cap turned a retry or an error into a dead letter */
  bool capped = d.action == POLICY_DEAD_LETTER && res->kind != RT_REJECT && res->kind != RT_INVALID;
  dm_count(a->metrics, capped ? DM_DEAD_LETTER : dm_outcome_of(res->kind));
  if (d.handler_failed) {
    char trace[TRACE_ID_LEN + 1];
    log_line(LOG_ERROR, a->spec->name, "handler failed, entry left pending", "stream",
             a->spec->stream, "group", a->spec->group, "retry_stream",
             e->key == ENTRY_KEY_RETRY ? a->retry_key : NULL, "id", e->id, "trace_id",
             trace_of(e, trace), "reason", res->reason, "version", res->version, "error", res->text,
             NULL);
  }
  carry_out(a, e, &d, res, res->version, res->text, res->text_len);
}

applier *apply_new(writer *w, lclock *clock, const struct handler_spec *spec, const char *retry_key,
                   struct delivery_metrics *m, apply_reading_fn *reading, void *data) {
  applier *a = calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  a->w = w;
  a->clock = clock;
  a->spec = spec;
  a->retry_key = retry_key;
  a->metrics = m;
  a->reading = reading;
  a->data = data;
  a->retry_log_timer = timer_new(clock, log_retries, a);
  if (a->retry_log_timer == NULL) {
    free(a);
    return NULL;
  }
  return a;
}

void apply_set_spec(applier *a, const struct handler_spec *spec) { a->spec = spec; }

void apply_stop(applier *a) {
  timer_stop(a->retry_log_timer);
  log_retries(a->retry_log_timer, a); /* the count so far, not lost with the timer */
}

void apply_free(applier *a) {
  if (a == NULL) return;
  timer_free(a->retry_log_timer);
  free(a);
}
