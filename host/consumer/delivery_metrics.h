/* delivery_metrics: one subscription's series in the host's metrics
 * (metrics.h), labelled handler, stream and group: deliveries by outcome,
 * the handler's duration, reads and the entries they brought, retries and
 * delays scheduled, dead letters by reason, and two gauges set when the
 * page is built (entries in flight, lanes busy); whether the group is
 * paused (pause.h) and the breaker's trips.
 *
 * A delivery's outcome is what the handler returned (ack, retry,
 * retry_after, reply, reject, error; invalid when bad input kept it from the
 * handler), except dead_letter when the delivery cap dead-lettered it (the
 * handler retried or failed once too often, or it was read again past the
 * cap). Dead letters are counted by reason on their own, and so are the
 * outcomes that found their entry already acknowledged by another consumer
 * (skipped: written nothing), which the delivery was counted under too.
 *
 * Every counter series exists from dm_init on, at 0, dead letters too (each
 * reason, for a subscription with a dead_letter stream): Prometheus cannot
 * see the first increase of a series whose first sample is already 1. */
#ifndef LUASTREAM_DELIVERY_METRICS_H
#define LUASTREAM_DELIVERY_METRICS_H

#include <stdbool.h>

#include "metrics.h"
#include "runtime.h"

enum dm_outcome {
  DM_ACK,
  DM_RETRY,
  DM_RETRY_AFTER,
  DM_REPLY,
  DM_REJECT,
  DM_ERROR,
  DM_INVALID,
  DM_DEAD_LETTER,
  DM_PAUSE,
  DM_OUTCOMES
};

struct delivery_metrics {
  struct metric *outcome[DM_OUTCOMES];
  struct metric *duration; /* seconds, histogram */
  struct metric *reads;    /* reads that brought entries */
  struct metric *entries_read;
  struct metric *retries, *delays;
  struct metric *skipped;                /* outcomes that found the entry acknowledged elsewhere */
  struct metric *in_flight, *lanes_busy; /* set by the subscription's collector */
  struct metric *paused;                 /* 1 while this host sees the group paused */
  struct metric *breaker_trips;          /* pauses this host's breaker started */
  char *labels[3];                       /* handler, stream, group: for dead letters' series */
};

/* The series of a subscription of handler `name` reading stream as group
 * (copied), with those of its dead letters when dead_letter. Series that
 * cannot be made (out of memory) stay NULL: updates through them do
 * nothing. */
void dm_init(struct delivery_metrics *m, const char *name, const char *stream, const char *group,
             bool dead_letter);
void dm_free(struct delivery_metrics *m);

static inline void dm_count(struct delivery_metrics *m, enum dm_outcome o) {
  if (m) metric_add(m->outcome[o], 1);
}
/* The outcome of a result the policy did not dead-letter. */
enum dm_outcome dm_outcome_of(enum rt_outcome kind);
/* A dead letter written for reason (a REASON_* of wire.h). */
void dm_dead_letter(struct delivery_metrics *m, const char *reason);

#endif
