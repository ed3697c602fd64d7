/* breaker: the breaker rule of a handler (its `breaker` field): failures
 * failures of the same reason within within_ms, on this host, trip the
 * breaker (pause.h). A reason is the first line of what the handler raised
 * (or "retry", "retry_after" for those outcomes), at most BREAKER_REASON_MAX
 * bytes; the BREAKER_REASONS most recent reasons are followed. Pure: time
 * is given. */
#ifndef LUASTREAM_BREAKER_H
#define LUASTREAM_BREAKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BREAKER_REASONS 8
#define BREAKER_REASON_MAX 200
#define BREAKER_FAILURES_MAX 1000

struct breaker_reason {
  char text[BREAKER_REASON_MAX + 1];
  uint64_t *at; /* a ring of the last failures' times */
  size_t next, n;
  uint64_t used_ms; /* last failure: the oldest reason makes room */
};

struct breaker {
  struct breaker_reason r[BREAKER_REASONS];
  int failures; /* the ring size of each reason */
};

void breaker_init(struct breaker *b);
void breaker_free(struct breaker *b);
/* A failure of reason (len bytes; only its first line counts) at now_ms
 * under the rule failures within within_ms (failures 0: no rule). Whether
 * it makes failures of that reason within within_ms: the breaker trips, and
 * the count starts again. */
bool breaker_failed(struct breaker *b, int failures, int64_t within_ms, const char *reason,
                    size_t len, uint64_t now_ms);

#endif
