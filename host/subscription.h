/* subscription: one handler file's consumer in its group.
 *
 * It creates the group when missing (BUSYGROUP means it exists and keeps its
 * cursor; start_at moves it), then runs the read loop of its mode on a
 * connection of its own, so a blocking read never delays anyone's writes.
 * Entries go onto lanes; finished entries become outcomes written on the
 * shared command connection: acks coalesced into one XACK per loop turn,
 * retries as one MULTI/EXEC (copy + ack), replies as an XADD then an ack.
 * Reading pauses while the lanes hold more than half a batch. */
#ifndef LUASTREAM_SUBSCRIPTION_H
#define LUASTREAM_SUBSCRIPTION_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "runtime.h"

typedef struct subscription subscription;

enum sub_event {
  SUB_EV_READING, /* the group exists and the read loop runs (again) */
  SUB_EV_DRAINED, /* stopped: nothing left running or unwritten; sent once */
};
typedef void sub_event_fn(void *data, subscription *s, enum sub_event ev);

/* h is owned by the subscription from here on (released with it). cmd is the
 * shared connection for writes; the subscription opens its own for reads. */
subscription *sub_new(handler *h, broker *b, bk_conn *cmd, lclock *clock,
                      sub_event_fn *on_event, void *data);
/* Creates the group when missing and starts reading. */
void sub_start(subscription *s);
/* Stops reading; running handlers finish and their outcomes are written, then
 * SUB_EV_DRAINED is sent. Entries read but not started stay pending in Redis. */
void sub_stop(subscription *s);
bool sub_reading(const subscription *s);
const struct handler_spec *sub_spec(const subscription *s);
/* Only after drained (or before start). */
void sub_free(subscription *s);

#endif
