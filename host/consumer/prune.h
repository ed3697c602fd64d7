/* prune: removes a group's idle consumers, those with nothing pending, idle
 * for PRUNE_IDLE_MS (24 h) and without a live lease (lease.h), from the
 * stream and from the group's retry stream, each key on its own
 * (SCRIPT_PRUNE, scripts.h): once its subscription reads, then every
 * PRUNE_EVERY_MS while it does, and PRUNE_RETRY_MS after a server error so
 * that readiness sees it work again once fixed.
 *
 * It never calls its subscription: it asks only whether it still reads and
 * reports each answer through one callback. */
#ifndef LUASTREAM_PRUNE_H
#define LUASTREAM_PRUNE_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "runtime.h"

#define PRUNE_IDLE_MS (24ULL * 3600 * 1000)
#define PRUNE_EVERY_MS (3600ULL * 1000)
#define PRUNE_RETRY_MS 5000

typedef struct pruner pruner;

/* Whether the subscription reads: a prune goes out, and the next is armed,
 * only while it does. */
typedef bool prune_reading_fn(void *data);
/* A prune was answered (done or failed). */
typedef void prune_answered_fn(void *data);

/* For the group of spec (borrowed: prune_set_spec replaces it when the
 * handler is swapped) on cmd; retry_key: the group's retry stream
 * (borrowed). */
pruner *prune_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                  const char *retry_key, prune_reading_fn *reading, prune_answered_fn *answered,
                  void *data);
void prune_set_spec(pruner *p, const struct handler_spec *spec);
/* The subscription reads: the first prune goes out now; the timer keeps it
 * going while the subscription reads. A later call (reading again after the
 * group was made again) sends one now only if a prune fell due meanwhile. */
void prune_start(pruner *p);
void prune_stop(pruner *p);
/* Prunes sent and not answered. */
unsigned prune_pending(const pruner *p);
const struct fault *prune_fault(const pruner *p);
void prune_free(pruner *p);

#endif
