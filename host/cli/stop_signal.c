/* stop_signal: first stop, the same one repeated, or exit now (stop_signal.h). */
#include "stop_signal.h"

enum stop_signal_kind stop_signal_take(struct stop_signals *s, int signum, uint64_t now_ms) {
  if (s->count == 0) {
    s->count = 1;
    s->first = signum;
    s->first_ms = now_ms;
    return STOP_FIRST;
  }
  if (s->count == 1 && signum == s->first && now_ms - s->first_ms < STOP_SIGNAL_SAME_MS)
    return STOP_AGAIN;
  s->count++;
  return STOP_NOW;
}

void stop_signal_begun(struct stop_signals *s) {
  s->count = 1;
  s->first = 0; /* no signal is the same as this one */
}
