/* breaker: the breaker rule (see breaker.h). */
#include "breaker.h"

#include <stdlib.h>
#include <string.h>

void breaker_init(struct breaker *b) { memset(b, 0, sizeof *b); }

void breaker_free(struct breaker *b) {
  for (int i = 0; i < BREAKER_REASONS; i++) free(b->r[i].at);
  breaker_init(b);
}

/* The rule changed size (a reload): every count starts again. */
static bool resize(struct breaker *b, int failures) {
  if (b->failures == failures) return true;
  breaker_free(b);
  for (int i = 0; i < BREAKER_REASONS; i++) {
    b->r[i].at = calloc((size_t)failures, sizeof *b->r[i].at);
    if (b->r[i].at == NULL) {
      breaker_free(b);
      return false;
    }
  }
  b->failures = failures;
  return true;
}

/* The reason's counts, or a slot for it: an empty one (never used, or
 * emptied by a trip), else the one used longest ago. */
static struct breaker_reason *find(struct breaker *b, const char *text, size_t len) {
  struct breaker_reason *free_slot = NULL, *oldest = &b->r[0];
  for (int i = 0; i < BREAKER_REASONS; i++) {
    struct breaker_reason *r = &b->r[i];
    if (r->n && strlen(r->text) == len && memcmp(r->text, text, len) == 0) return r;
    if (r->n == 0 && free_slot == NULL) free_slot = r;
    if (r->used_ms < oldest->used_ms) oldest = r;
  }
  if (free_slot) oldest = free_slot;
  oldest->n = oldest->next = 0;
  memcpy(oldest->text, text, len);
  oldest->text[len] = '\0';
  return oldest;
}

bool breaker_failed(struct breaker *b, int failures, int64_t within_ms, const char *reason,
                    size_t len, uint64_t now_ms) {
  if (failures <= 0 || failures > BREAKER_FAILURES_MAX || !resize(b, failures)) return false;
  const char *nl = memchr(reason, '\n', len);
  if (nl) len = (size_t)(nl - reason);
  if (len > BREAKER_REASON_MAX) len = BREAKER_REASON_MAX;
  struct breaker_reason *r = find(b, reason, len);
  r->used_ms = now_ms;
  r->at[r->next] = now_ms;
  r->next = (r->next + 1) % (size_t)failures;
  if (r->n < (size_t)failures) r->n++;
  /* the oldest of the last `failures` is where the ring goes next */
  if (r->n < (size_t)failures || now_ms - r->at[r->next] > (uint64_t)within_ms) return false;
  r->n = r->next = 0;
  return true;
}
