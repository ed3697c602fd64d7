/* permits: the handler field rate for one stream reader. Entries are read
 * only with permits in hand, taken from the group's limiter in Redis
 * (SCRIPT_RATE: GCRA on the server's TIME, key flow_key("rate", stream,
 * group, NULL), the handler's base stream: every partition and every host
 * share it), so an entry waiting for a permit is never read, and never
 * counted as a delivery.
 *
 * Permits come in chunks (a 20th of a second's, at least what one read
 * needs, at most the burst): a busy reader sends at most one take per read,
 * and under load a take waits for a whole chunk. Permits a read did not use
 * are kept for the next one for a bounded time (PERMITS_VALID_MS), then
 * dropped, never used late. A read covers several keys with COUNT per key
 * (the stream and its retry stream): it asks for at most held / nkeys per
 * key, so that even with every key full it brings no more entries than
 * permits held. With fewer than nkeys permits held (one permit of a burst
 * of 1, or the odd one left), it asks for 1 per key: if more than one key
 * has an entry then, the extra entries are owed, and the next read waits
 * until the limiter has granted them too. So every entry read costs one
 * permit, and only an entry of the retry stream read beside one of the
 * stream ever runs a permit early (never more than nkeys - 1 per read). */
#ifndef LUASTREAM_PERMITS_H
#define LUASTREAM_PERMITS_H

#include <stddef.h>

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "runtime.h"

#define PERMITS_VALID_MS 100
/* After a failed take (server down, script refused), the next one. */
#define PERMITS_RETRY_MS 1000

typedef struct permits permits;
/* Permits came (or the wait for them is over): a read may go out. */
typedef void permits_ready_fn(void *data);

/* For spec->rate (interval_us > 0) on the group's limiter of base_stream
 * (the handler's stream, not a partition's). NULL when out of memory. */
permits *permits_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                     const char *base_stream, permits_ready_fn *ready, void *data);
/* The most entries per key the next read over nkeys keys may ask for: 0
 * when there are not permits enough yet (a take goes out, or a timer runs,
 * and ready is called once that changes). */
long long permits_count(permits *p, int nkeys);
/* A read brought n entries: their permits are spent. */
void permits_spend(permits *p, size_t n);
/* Takes sent and not answered (their callbacks come also on teardown). */
unsigned permits_pending(const permits *p);
/* After a reload (the rate is the same: a change restarts the reader). */
void permits_set_spec(permits *p, const struct handler_spec *spec);
/* No take or timer any more (stopping); permits held are dropped. */
void permits_stop(permits *p);
/* Held now (tests, metrics). */
double permits_held(const permits *p);
const char *permits_key(const permits *p);
/* Takes the server keeps refusing (readiness). */
const struct fault *permits_fault(const permits *p);
void permits_free(permits *p);

#endif
