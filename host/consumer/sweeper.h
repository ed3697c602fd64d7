/* sweeper: moves the due entries of a group's delay set back onto the
 * group's retry stream, and trims from the retry stream what the group has
 * acknowledged (SCRIPT_SWEEP, scripts.h), every SWEEP_MS while it runs and at
 * once again after a full sweep. Members it cannot read go to the delay
 * set's key + ":unreadable". Any host of the group may sweep: the script
 * moves each member once.
 *
 * It knows nothing of its subscription: it reports each answered sweep
 * through one callback. */
#ifndef LUASTREAM_SWEEPER_H
#define LUASTREAM_SWEEPER_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "runtime.h"

#define SWEEP_MS 1000   /* how often the delay set is looked at */
#define SWEEP_COUNT 100 /* most entries one sweep moves */

typedef struct sweeper sweeper;

/* A sweep was answered (done or failed). */
typedef void sweeper_swept_fn(void *data);

/* Sweeps the delay set of spec's stream and group (outcome_delay_key) into
 * retry_key (copied) on cmd. spec is borrowed: sweeper_set_spec replaces it
 * when the handler is swapped. */
sweeper *sweeper_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                     const char *retry_key, sweeper_swept_fn *swept, void *data);
void sweeper_set_spec(sweeper *sw, const struct handler_spec *spec);
/* Sweeps now and then every SWEEP_MS until sweeper_stop. */
void sweeper_start(sweeper *sw);
/* No more sweeps; one outstanding is still answered (sweeper_pending). */
void sweeper_stop(sweeper *sw);
/* Sweeps sent and not answered. */
unsigned sweeper_pending(const sweeper *sw);
const struct fault *sweeper_fault(const sweeper *sw);
void sweeper_free(sweeper *sw);

#endif
