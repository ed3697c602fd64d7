/* held: the entries a subscription with min_idle (claiming, reclaim, or a
 * `new` one given it) holds here, in a lane or a handler, by key and id.
 *
 * A claiming read also returns this consumer's own entries once idle
 * min_idle, and an entry waiting behind others ages as if abandoned: the
 * subscription asks held_has before it takes a claimed entry on, so that
 * entry still runs once. A hash set (open addressing, linear probing): a
 * claiming read of tens of thousands of entries takes each one on in
 * constant time, never a scan of the others. No I/O; it calls nothing of
 * the consumer layer. */
#ifndef LUASTREAM_HELD_H
#define LUASTREAM_HELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "entry.h"

#define HELD_ID_MAX 48 /* "ms-seq" of two 64-bit numbers, NUL included */

/* An id and the key it was read from; whether its handler runs, since
 * when, and whether it ran past max_run (heartbeat.h). */
struct held_id {
  char id[HELD_ID_MAX];
  unsigned char key;
  bool running;        /* held_started: in a handler, not in a lane */
  bool overran;        /* past max_run: logged, and no longer kept claimed */
  uint64_t started_ms; /* when its handler started, on the subscription's clock */
};

/* Zeroed is empty. cap is 0 or a power of two; an empty slot's id is "". */
struct held {
  struct held_id *slots;
  size_t n, cap;
};

bool held_has(const struct held *h, const struct entry *e);
/* false on OOM (nothing added). */
bool held_add(struct held *h, const struct entry *e);
/* e, held, starts running at now_ms (nothing when e is not held). */
void held_started(struct held *h, const struct entry *e, uint64_t now_ms);
/* Removes e's key and id if held (the order of the rest may change). */
void held_remove(struct held *h, const struct entry *e);
void held_free(struct held *h);

#endif
