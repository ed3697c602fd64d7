/* reader_health: what a stream's reader (stream_reader_internal.h) says of
 * itself: its state, readiness (sr_healthy: why it is not ready, stuck
 * reads and failing work included), the group's pause as it saw it, whether
 * it is idle, and its gauges. */
#include <stdio.h>

#include "stream_reader_internal.h"

/* Readiness (sr_healthy): a read outstanding, or reads failing on a live
 * connection, for STUCK_FACTOR times the read's own wait
 * (plan_read_wait_ms) and at least STUCK_MIN_MS, means the reader is stuck. */
#define STUCK_FACTOR 3
#define STUCK_MIN_MS 1000

bool sr_reading(const stream_reader *s) { return s->state == SR_READING; }
bool sr_stopping(const stream_reader *s) { return s->state == SR_STOPPING; }
bool sr_drained(const stream_reader *s) { return s->state == SR_DRAINED; }
bool sr_name_lost(const stream_reader *s) { return s->name_lost; }

bool sr_note(const stream_reader *s, char *why, size_t len) {
  return s->pause && pause_seen(s->pause, why, len);
}

bool sr_healthy(const stream_reader *s, char *why, size_t len) {
  switch (s->state) {
    case SR_IDLE: snprintf(why, len, "not started"); return false;
    case SR_LEASING:
      if (s->lease_fault.failing)
        snprintf(why, len, "waiting for the consumer name's lease: %s failing: %s",
                 s->lease_fault.name, s->lease_fault.detail);
      else
        snprintf(why, len, "waiting for the consumer name's lease");
      return false;
    case SR_CREATING:
      if (group_fault(s->group)[0])
        snprintf(why, len, "creating group: %s", group_fault(s->group));
      else
        snprintf(why, len, "creating group");
      return false;
    case SR_STOPPING:
    case SR_DRAINED: snprintf(why, len, "stopping"); return false;
    case SR_READING: break;
  }
  uint64_t now = clock_now(s->clock);
  const struct fault *lf = &s->lease_fault;
  static const struct fault no_prune; /* without a lease nothing is pruned */
  if (s->lease_unconfirmed && !lease_valid(s->lease)) {
    if (lf->failing) /* the renewal is refused, not late: say why */
      snprintf(why, len, "stuck: %s failing for %llu ms: %s", lf->name,
               (unsigned long long)(now - lf->since_ms), lf->detail);
    else
      snprintf(why, len,
               "waiting for the consumer lease's renewal (process paused or loop stalled)");
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
  uint64_t limit = STUCK_FACTOR * plan_read_wait_ms(&s->plan);
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
  const struct fault *work[] = {writer_fault(s->w, WRITER_ACKS),
                                writer_fault(s->w, WRITER_OUTCOMES),
                                sweeper_fault(s->sweeper),
                                &s->lease_fault,
                                s->pruner ? prune_fault(s->pruner) : &no_prune,
                                s->inflight ? inflight_fault(s->inflight) : &no_prune,
                                s->permits ? permits_fault(s->permits) : &no_prune,
                                s->key_rate ? key_rate_fault(s->key_rate) : &no_prune,
                                s->key_slots ? key_slots_fault(s->key_slots) : &no_prune};
  for (size_t w = 0; w < sizeof work / sizeof work[0]; w++) {
    const struct fault *f = work[w];
    if (f->failing && now - f->since_ms > limit) {
      snprintf(why, len, "stuck: %s failing for %llu ms: %s", f->name,
               (unsigned long long)(now - f->since_ms), f->detail);
      return false;
    }
  }
  return true;
}

bool sr_idle(const stream_reader *s) {
  return s->state == SR_READING && lanes_in_flight(&s->lanes) == 0 && writer_queued(s->w) == 0 &&
         sr_outstanding(s) == 0 && (s->gate == NULL || gate_waiting(s->gate) == 0) &&
         (s->key_cap == NULL || gate_waiting(s->key_cap) == 0);
}

const char *sr_last_read(const stream_reader *s) { return s->last_read; }
const struct handler_spec *sr_spec(const stream_reader *s) { return s->spec; }
int sr_partition(const stream_reader *s) { return s->partition; }

void sr_collect_metrics(stream_reader *s, bool add) {
  if (!add) {
    metric_set(s->metrics.in_flight, 0);
    metric_set(s->metrics.lanes_busy, 0);
  }
  metric_add(s->metrics.in_flight,
             (double)(lanes_in_flight(&s->lanes) + (s->gate ? gate_waiting(s->gate) : 0) +
                      (s->key_cap ? gate_waiting(s->key_cap) : 0)));
  metric_add(s->metrics.lanes_busy, (double)s->lanes.running);
}
