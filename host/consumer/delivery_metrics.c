/* delivery_metrics: see delivery_metrics.h. */
#include "delivery_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "wire.h"

static const char *const LABELS[] = {"handler", "stream", "group"};
static const char *const OUTCOME_LABELS[] = {"handler", "stream", "group", "outcome"};
static const char *const REASON_LABELS[] = {"handler", "stream", "group", "reason"};
/* Handlers run from microseconds (a decode and an ack) to seconds (a call
 * to another service). */
static const double DURATION_BOUNDS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,  5,     10};

static struct metric *series(const char *name, const char *help, enum metric_type type,
                             char *const *labels) {
  struct metric_family *f = metrics_family(name, help, type, 3, LABELS, NULL, 0);
  return metrics_series(f, (const char *const *)labels);
}

static struct metric_family *dead_letters_family(void) {
  return metrics_family("luastream_dead_letters_total", "Dead letters written, by reason",
                        METRIC_COUNTER, 4, REASON_LABELS, NULL, 0);
}

void dm_init(struct delivery_metrics *m, const char *name, const char *stream, const char *group,
             bool dead_letter) {
  memset(m, 0, sizeof *m);
  const char *given[3] = {name, stream, group};
  for (int i = 0; i < 3; i++)
    if ((m->labels[i] = strdup(given[i])) == NULL) {
      dm_free(m);
      return;
    }
  struct metric_family *f =
      metrics_family("luastream_deliveries_total",
                     "Deliveries that finished, by outcome: what the handler returned, invalid "
                     "(bad input), dead_letter (past max_deliveries)",
                     METRIC_COUNTER, 4, OUTCOME_LABELS, NULL, 0);
  /* The outcome label is the outcome's name (rt_outcome_name), but for
   * dead_letter, which is no outcome of a handler. */
  const char *outcomes[DM_OUTCOMES] = {[DM_DEAD_LETTER] = "dead_letter"};
  for (int k = 0; k < RT_OUTCOMES; k++) outcomes[dm_outcome_of(k)] = rt_outcome_name(k);
  for (int o = 0; o < DM_OUTCOMES; o++) {
    const char *values[4] = {name, stream, group, outcomes[o]};
    m->outcome[o] = metrics_series(f, values);
  }
  f = metrics_family("luastream_handler_duration_seconds",
                     "How long handlers ran per delivery, waits included (on the host's clock)",
                     METRIC_HISTOGRAM, 3, LABELS, DURATION_BOUNDS,
                     (int)(sizeof DURATION_BOUNDS / sizeof *DURATION_BOUNDS));
  m->duration = metrics_series(f, (const char *const *)m->labels);
  m->reads = series("luastream_reads_total", "Reads that brought entries (batches)", METRIC_COUNTER,
                    m->labels);
  m->entries_read = series("luastream_entries_read_total", "Entries the reads brought",
                           METRIC_COUNTER, m->labels);
  m->retries = series("luastream_retries_scheduled_total",
                      "Entries to be delivered again (ls.retry)", METRIC_COUNTER, m->labels);
  m->delays = series("luastream_delays_scheduled_total",
                     "Entries to be delivered again after a delay (ls.retry_after)", METRIC_COUNTER,
                     m->labels);
  m->skipped = series("luastream_outcomes_skipped_total",
                      "Outcomes that found their entry acknowledged by another consumer and "
                      "wrote nothing",
                      METRIC_COUNTER, m->labels);
  m->in_flight = series("luastream_entries_in_flight",
                        "Entries read and not finished: running or waiting for a lane",
                        METRIC_GAUGE, m->labels);
  m->lanes_busy = series("luastream_lanes_busy", "Lanes running an entry", METRIC_GAUGE, m->labels);
  m->paused = series("luastream_paused",
                     "1 while the group is paused (luastream pause, ls.pause or the breaker) as "
                     "this host last saw it",
                     METRIC_GAUGE, m->labels);
  m->breaker_trips = series("luastream_breaker_trips_total",
                            "Pauses of the group this host's breaker started (ls.pause or the "
                            "breaker rule)",
                            METRIC_COUNTER, m->labels);
  if (!dead_letter) return;
  f = dead_letters_family();
  for (int r = 0; r < WIRE_REASONS; r++) {
    const char *values[4] = {name, stream, group, wire_reasons[r].text};
    metrics_series(f, values);
  }
}

void dm_free(struct delivery_metrics *m) {
  for (int i = 0; i < 3; i++) {
    free(m->labels[i]);
    m->labels[i] = NULL;
  }
}

enum dm_outcome dm_outcome_of(enum rt_outcome kind) {
  switch (kind) {
    case RT_ACK: return DM_ACK;
    case RT_RETRY: return DM_RETRY;
    case RT_RETRY_AFTER: return DM_RETRY_AFTER;
    case RT_REPLY: return DM_REPLY;
    case RT_REJECT: return DM_REJECT;
    case RT_INVALID: return DM_INVALID;
    case RT_PAUSE: return DM_PAUSE;
    case RT_ERROR: break;
  }
  return DM_ERROR;
}

void dm_dead_letter(struct delivery_metrics *m, const char *reason) {
  if (m == NULL || m->labels[0] == NULL) return;
  const char *values[4] = {m->labels[0], m->labels[1], m->labels[2], reason ? reason : "unknown"};
  metric_add(metrics_series(dead_letters_family(), values), 1);
}
