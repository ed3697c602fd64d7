/* policy: what a finished delivery comes to (see policy.h). */
#include <stdio.h>
#include <string.h>

#include "outcome.h"
#include "policy.h"
#include "wire.h"

/* Field by field: this runs for every finished entry, and why[] is written only for
 * the rare dead letter. */
static void reset(struct policy_out *out) {
  out->action = POLICY_LEAVE;
  out->note = POLICY_NOTE_NONE;
  out->handler_failed = false;
  out->reason = NULL;
  out->deliveries = 0;
  out->delay_ms = 0;
  out->why[0] = '\0';
}

/* Onto the dead-letter stream with its ack; without one, a rejected entry
 * is acked, anything else left pending (both logged). */
static void dead_letter(const struct policy_in *in, const char *reason, long long deliveries,
                        struct policy_out *out) {
  out->reason = reason;
  out->deliveries = deliveries;
  if (in->dead_letter) {
    out->action = POLICY_DEAD_LETTER;
    out->note = POLICY_NOTE_DEAD_LETTERED;
  } else if (strcmp(reason, REASON_REJECTED) == 0) {
    out->action = POLICY_ACK;
    out->note = POLICY_NOTE_REJECTED_ACKED;
  } else {
    out->action = POLICY_LEAVE;
    out->note =
        wire_reason_is_bad_input(reason) ? POLICY_NOTE_BAD_INPUT_LEFT : POLICY_NOTE_LIMIT_LEFT;
  }
}

void policy_admit(const struct policy_in *in, struct policy_out *out) {
  reset(out);
  out->action = POLICY_RUN;
  if (policy_may_run(in->before, in->max_deliveries)) return;
  /* Delivered max_deliveries times without an ack (handlers that failed or
   * killed the host each time): not handed to the handler again. */
  snprintf(out->why, sizeof out->why, "delivered %lld times without an ack", in->before);
  dead_letter(in, REASON_MAX_DELIVERIES, in->before, out);
}

/* A retry of either kind; past max_deliveries it becomes a dead letter. */
static void retry(const struct policy_in *in, long long deliveries, struct policy_out *out) {
  int cap = in->max_deliveries;
  if (cap && deliveries >= cap) {
    snprintf(out->why, sizeof out->why, "retried on delivery %lld of %d", deliveries, cap);
    dead_letter(in, REASON_MAX_DELIVERIES, deliveries, out);
    return;
  }
  out->note = POLICY_NOTE_RETRIED;
  out->deliveries = deliveries;
  if (in->kind == RT_RETRY_AFTER) {
    out->delay_ms = in->delay_ms;
    out->action =
        in->read != READ_NEW && in->delay_ms <= in->min_idle_ms ? POLICY_RESTAMP : POLICY_DELAY;
  } else {
    /* claiming and reclaim: nothing to write, the entry stays pending and
     * is claimed again once idle min_idle. */
    out->action = in->read == READ_NEW ? POLICY_RETRY_COPY : POLICY_LEAVE;
  }
}

void policy_decide(const struct policy_in *in, struct policy_out *out) {
  reset(out);
  long long deliveries = in->before + 1; /* this one counts */
  out->deliveries = deliveries;
  switch (in->kind) {
    case RT_ACK:
    case RT_REPLY:
      if (policy_plain_ack(in->kind, in->nwrites)) {
        out->action = POLICY_ACK;
      } else if (in->nwrites + 2 > TXN_MAX) { /* at most TXN_MAX - 2: the documented 30 */
        out->action = POLICY_LEAVE;
        out->note = POLICY_NOTE_TOO_MANY_WRITES;
      } else {
        out->action = POLICY_WRITE;
      }
      return;
    case RT_RETRY:
    case RT_RETRY_AFTER: retry(in, deliveries, out); return;
    case RT_REJECT: dead_letter(in, REASON_REJECTED, deliveries, out); return;
    case RT_ERROR:
      out->handler_failed = true;
      /* The last delivery max_deliveries allows failed: dead-letter it now,
       * with the error that ended it (a handler error; memory when the
       * state went past its limit). */
      if (in->max_deliveries && deliveries >= in->max_deliveries)
        dead_letter(in,
                    in->reason && strcmp(in->reason, REASON_MEMORY) == 0 ? REASON_MEMORY
                                                                         : REASON_HANDLER_ERROR,
                    deliveries, out);
      return;
    case RT_INVALID: /* the handler never saw it */
      dead_letter(in, in->reason, deliveries, out);
      return;
    case RT_PAUSE: /* the reader gives it back uncounted (pause.h) */
      out->action = POLICY_LEAVE;
      return;
  }
}
