/* sweeper: moves the due entries of a group's delay set back onto the
 * group's retry stream, and trims from the retry stream what the group has
 * acknowledged (SCRIPT_SWEEP, scripts.h). Members it cannot read go to the
 * delay set's key + ":unreadable". Any host of the group may sweep: the
 * script moves each member once.
 *
 * When: at start; at once again after a full sweep; when the member due
 * first (the sweep reports it) falls due; when asked (sweeper_soon: this
 * host wrote a delay, or acknowledged an entry of the retry stream, which a
 * sweep trims); SWEEP_MS after a failed one; and at least every
 * SWEEP_IDLE_MS. So an idle group with an empty delay set costs one sweep a
 * minute, a delay this host wrote comes back when due, and one written by
 * another host that then stopped sweeping (it died) is moved at most
 * SWEEP_IDLE_MS after it was written, or when due if later.
 *
 * It knows nothing of its subscription: it reports each answered sweep
 * through one callback. */
#ifndef LUASTREAM_SWEEPER_H
#define LUASTREAM_SWEEPER_H

#include <stdbool.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "runtime.h"

#define SWEEP_MS 1000       /* after a failed sweep, the next */
#define SWEEP_IDLE_MS 60000 /* the longest between two sweeps */
#define SWEEP_COUNT 100     /* most entries one sweep moves */

typedef struct sweeper sweeper;

/* A sweep was answered (done or failed). */
typedef void sweeper_swept_fn(void *data);

/* Sweeps the delay set of spec's stream and group (outcome_delay_key) into
 * retry_key (copied) on cmd. spec is borrowed: sweeper_set_spec replaces it
 * when the handler is swapped. */
sweeper *sweeper_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                     const char *retry_key, sweeper_swept_fn *swept, void *data);
void sweeper_set_spec(sweeper *sw, const struct handler_spec *spec);
/* Sweeps now and then as above until sweeper_stop. */
void sweeper_start(sweeper *sw);
/* A sweep within ms (sooner if one is due sooner). Asked while a sweep is
 * out, it comes after that one's answer: a sweep sent before a write was
 * answered may not have seen it. Nothing when stopped. */
void sweeper_soon(sweeper *sw, uint64_t ms);
/* No more sweeps; one outstanding is still answered (sweeper_pending). */
void sweeper_stop(sweeper *sw);
/* Sweeps sent and not answered. */
unsigned sweeper_pending(const sweeper *sw);
const struct fault *sweeper_fault(const sweeper *sw);
void sweeper_free(sweeper *sw);

#endif
