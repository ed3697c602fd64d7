/* backoff: doubling waits up to a cap (backoff.h). */
#include "backoff.h"

uint64_t backoff_next(uint64_t prev_ms, uint64_t min_ms, uint64_t max_ms) {
  if (prev_ms == 0) return min_ms < max_ms ? min_ms : max_ms;
  return prev_ms >= max_ms / 2 ? max_ms : prev_ms * 2;
}

uint64_t backoff_nth(int n, uint64_t min_ms, uint64_t max_ms) {
  uint64_t ms = 0;
  for (int i = 0; i < (n > 1 ? n : 1) && ms < max_ms; i++) ms = backoff_next(ms, min_ms, max_ms);
  return ms;
}
