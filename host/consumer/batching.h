/* batching: a handle_batch subscription's entries gathered into calls.
 *
 * Each entry still takes a lane of its own off the lanes (lanes.h), so
 * per-key order, the key gates, max_in_flight, the heartbeat and the
 * hand-backs see entries as they do for handle; what changes is that the
 * entries started are gathered here into the forming call, which goes to
 * the handler (launch) once it holds batch_max entries, or at the end of a
 * dispatch turn when batch_wait is 0, or once batch_wait has passed since
 * its first entry came. At most `calls_max` (workers) calls run at once; the
 * next call forms meanwhile. No I/O, no Lua: time is the clock seam's. */
#ifndef LUASTREAM_BATCHING_H
#define LUASTREAM_BATCHING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

struct entry;

/* Hands a call's entries (1 .. max, in the order they were added) to the
 * handler; the array is the batcher's, valid during the call only. The
 * caller reports the call's end with batching_call_done (also when the
 * launch failed). */
typedef void batch_launch_fn(void *data, struct entry *const *entries, size_t n);
/* Whether a call may start now (the subscription reads, its consumer name
 * known held): asked before each launch, also when batch_wait ends. A call
 * refused waits for the next batching_go. */
typedef bool batch_may_fn(void *data);

typedef struct batching batching;

/* max: batch_max (>= 1); wait_ms: batch_wait (0: a call takes what there is
 * when a dispatch turn ends); calls_max: calls running at once (>= 1);
 * may: NULL, or what a launch waits for. NULL when out of memory. */
batching *batching_new(lclock *clock, int max, int64_t wait_ms, int calls_max,
                       batch_launch_fn *launch, batch_may_fn *may, void *data);
void batching_free(batching *b); /* entries still forming are the caller's */

/* Whether the forming call has room for one more entry. */
bool batching_room(const batching *b);
/* Adds e, started on its lane, to the forming call, which must have room
 * (batching_room; a caller that starts entries later, as max_in_flight's
 * slots come, counts those waiting as taken). */
void batching_add(batching *b, struct entry *e);
/* A dispatch turn ended: launches the forming call if it may go now (full,
 * batch_wait 0 or passed) and a call may start (fewer than calls_max run,
 * and may says so). Returns the calls launched
 * (0 also when called from inside a launch). */
int batching_go(batching *b);
/* A call launched earlier has reported its last entry (or failed to start). */
void batching_call_done(batching *b);
/* Entries in the forming call, and calls running. */
size_t batching_forming(const batching *b);
int batching_calls(const batching *b);
/* Takes every entry of the forming call (never started in a handler: a
 * pause, a stop), linked through e->next in the order they came. */
struct entry *batching_take(batching *b);

#endif
