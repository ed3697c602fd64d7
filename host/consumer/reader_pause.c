/* reader_pause: the group's pause (pause.h) and the breaker (breaker.h) as
 * a stream's reader (stream_reader_internal.h) applies them: whether an
 * entry may start, the probe, and what a finished delivery means to them
 * (ls.pause, a probe's outcome, a failure toward the breaker's rule). */
#include <stdio.h>
#include <string.h>

#include "stream_reader_internal.h"

/* Whether the next entry may start: not while the group is paused, or not
 * known to run (pause.h); half-open, the one entry that starts is the
 * probe (*probe). */
bool sr_may_start(stream_reader *s, bool *probe) {
  *probe = false;
  if (s->pause == NULL) return true;
  switch (pause_gate(s->pause)) {
    case PAUSE_GO: return true;
    case PAUSE_PROBE: *probe = true; return true;
    case PAUSE_WAIT: break;
  }
  return false;
}

/* The breaker's part in a finished delivery (pause.h): ls.pause trips it
 * (the entry goes back uncounted: handed back as never started); a probe's
 * outcome closes it or trips it again; a failure counts toward the rule
 * (breaker.h). Whether the outcome is applied as usual (not for ls.pause). */
bool sr_breaker_saw(stream_reader *s, const struct entry *e, const struct rt_result *res) {
  bool failed = res->kind == RT_RETRY || res->kind == RT_RETRY_AFTER || res->kind == RT_ERROR;
  const char *why = res->kind == RT_RETRY         ? "retry"
                    : res->kind == RT_RETRY_AFTER ? "retry_after"
                    : res->text                   ? res->text
                                                  : "error";
  size_t why_len = res->kind == RT_ERROR && res->text ? res->text_len : strlen(why);
  if (s->probe == e) {
    s->probe = NULL;
    if (res->kind != RT_PAUSE) pause_probe_done(s->pause, !failed, why);
  }
  if (res->kind == RT_PAUSE) {
    dm_count(&s->metrics, DM_PAUSE);
    if (!sr_hand_back(s, e, false))
      sr_log(s, LOG_WARN, "ls.pause: the entry stays pending (the consumer name is not known held)",
             "id", e->id, NULL, NULL);
    if (s->pause)
      pause_trip(s->pause, res->delay_ms, res->text ? res->text : "",
                 res->text ? res->text_len : 0);
    return false;
  }
  if (failed && s->pause &&
      breaker_failed(&s->breaker, s->spec->breaker_failures, s->spec->breaker_within_ms, why,
                     why_len, clock_now(s->clock))) {
    char reason[300];
    int n = snprintf(reason, sizeof reason, "%d failures within %lld ms: %.*s",
                     s->spec->breaker_failures, (long long)s->spec->breaker_within_ms,
                     (int)(why_len < 200 ? why_len : 200), why);
    pause_trip(s->pause, -1, reason, n > 0 ? (size_t)n : 0);
  }
  return true;
}
