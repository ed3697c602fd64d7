/* reader_drain: what a stream's reader (stream_reader_internal.h) has
 * outstanding, and when a stopping one has drained: nothing running,
 * unwritten or unanswered, the consumer lease released last. Also its log
 * lines and the ACL refusals it reports (sr_denied). */
#include <stdio.h>

#include "stream_reader_internal.h"

/* Commands sent and not answered: the reader's (the lease's), the
 * writer's, the sweeper's, the group setup's, the pruner's, the
 * heartbeat's. */
unsigned sr_outstanding(const stream_reader *s) {
  return s->writes_pending + writer_pending(s->w) + sweeper_pending(s->sweeper) +
         group_pending(s->group) + (s->pruner ? prune_pending(s->pruner) : 0) +
         (s->heartbeat ? heartbeat_pending(s->heartbeat) : 0) +
         (s->pause ? pause_pending(s->pause) : 0) + (s->permits ? permits_pending(s->permits) : 0) +
         (s->key_rate ? key_rate_pending(s->key_rate) : 0) +
         (s->inflight ? inflight_pending(s->inflight) : 0) +
         (s->key_slots ? key_slots_pending(s->key_slots) : 0);
}

void sr_log(stream_reader *s, enum log_level level, const char *msg, const char *k1, const char *v1,
            const char *k2, const char *v2) {
  log_line(level, s->spec->name, msg, "stream", s->spec->stream, "group", s->spec->group,
           "consumer", s->spec->consumer, k1, v1, k2, v2, NULL);
}

/* The ACL refused what a reader that never read needs: waiting cannot
 * help, so the host is told (at start-up it stops, saying what to grant).
 * Returns whether it was such a refusal. */
bool sr_acl_refused(stream_reader *s, const char *command, const char *key, const char *why) {
  if (s->started || !bk_error_is_denied(why)) return false;
  snprintf(s->denied, sizeof s->denied, "%s on %s: %s", command, key, why);
  s->on_event(s->data, s, SUB_EV_DENIED);
  return true;
}

const char *sr_denied(const stream_reader *s) { return s->denied; }

static void lease_given_back(void *data) {
  stream_reader *s = data;
  s->writes_pending--;
  s->lease_released = true;
  sr_maybe_drained(s);
}

/* Sends SUB_EV_DRAINED once a stopping reader has nothing left. */
void sr_maybe_drained(stream_reader *s) {
  if (s->state != SR_STOPPING) return;
  if (s->lanes.running || writer_queued(s->w) || sr_outstanding(s) || s->read_pending) return;
  if (s->lease && !s->lease_released) { /* the name is free once all is written */
    if (!s->lease_releasing) {
      s->lease_releasing = true;
      s->writes_pending++;
      lease_release(s->lease, lease_given_back, s);
    }
    return;
  }
  s->state = SR_DRAINED;
  if (s->heartbeat) heartbeat_stop(s->heartbeat); /* nothing is held any more */
  sr_log(s, LOG_INFO, "subscription stopped", NULL, NULL, NULL, NULL);
  s->on_event(s->data, s, SUB_EV_DRAINED);
}
