/* apply: carries out what the policy (policy.h) decides for an entry of one
 * subscription: the log line that goes with the decision, and the outcome
 * built (outcome.h) and handed to the writer (writer.h): an ack, the
 * result's writes, a retry copy, a re-stamp, the delay set or a dead letter.
 * Retries are logged per interval: the first after a quiet interval with its
 * id, the ones that follow within APPLY_RETRY_LOG_MS as one count when it
 * ends, so a handler that always retries shows in the log without a line per
 * delivery.
 *
 * It calls policy, outcome and writer, never its subscription: it asks the
 * subscription only whether it still reads (apply_reading_fn), and says
 * through apply_admit's return value whether an entry may run. */
#ifndef LUASTREAM_APPLY_H
#define LUASTREAM_APPLY_H

#include <stdbool.h>

#include "clock.h"
#include "entry.h"
#include "runtime.h"
#include "writer.h"

#define APPLY_RETRY_LOG_MS 10000

typedef struct applier applier;

/* Whether the subscription is reading: the retry count's interval starts
 * again only while it is (else the next retry is logged at once). */
typedef bool apply_reading_fn(void *data);

/* Carries out decisions for the consumer of spec through w. spec and
 * retry_key (the group's retry stream, the key of entries whose entry key is
 * ENTRY_KEY_RETRY) are borrowed: apply_set_spec replaces spec when the
 * handler is swapped. */
struct delivery_metrics;
/* m (borrowed; NULL for none) counts the outcomes. */
applier *apply_new(writer *w, lclock *clock, const struct handler_spec *spec, const char *retry_key,
                   struct delivery_metrics *m, apply_reading_fn *reading, void *data);
void apply_set_spec(applier *a, const struct handler_spec *spec);
/* An entry just read (its deliveries complete): true when it may run;
 * false when the policy decided otherwise (delivered max_deliveries times
 * without an ack, or read cut as too large: reason too-large, its dead
 * letter cut too), whose outcome is then carried out. version: the script
 * version of the handler it would run on. */
bool apply_admit(applier *a, const struct entry *e, const char *version);
/* A delivery of e finished with res: decides and carries out its outcome. */
void apply_finished(applier *a, const struct entry *e, const struct rt_result *res);
/* Stopping: the retries counted so far are logged now, not lost with the
 * interval. */
void apply_stop(applier *a);
void apply_free(applier *a);

#endif
