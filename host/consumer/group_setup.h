/* group_setup: creates a subscription's group where it is missing, on the
 * stream (at `start`) and on the group's retry stream (from the beginning:
 * everything there was written for this group), each with MKSTREAM;
 * BUSYGROUP means it exists and keeps its cursor. At start-up, start_at
 * moves the cursor of a group that existed (XGROUP SETID); a group created
 * now already starts there.
 *
 * It sends on the shared command connection, logs what happens and reports
 * each answer through one callback; it never calls its subscription, which
 * decides what follows (reading, a backoff, a stop). */
#ifndef LUASTREAM_GROUP_SETUP_H
#define LUASTREAM_GROUP_SETUP_H

#include <stdbool.h>

#include "broker.h"
#include "runtime.h"

typedef struct group_setup group_setup;

enum group_event {
  GROUP_ANSWERED, /* an answer that decides nothing yet (or came after group_stop) */
  GROUP_READY,    /* the group exists on both keys, its cursor where it should be */
  GROUP_FAILED,   /* not done (logged): try again after a while */
  /* XGROUP CREATE refused on key with Redis's text why (logged): try again
   * after a while, unless the ACL refused it */
  GROUP_CREATE_REFUSED,
};
/* key and why: only for GROUP_CREATE_REFUSED, valid during the call. */
typedef void group_event_fn(void *data, enum group_event ev, const char *key, const char *why);

/* For the consumer of spec (borrowed: group_set_spec replaces it when the
 * handler is swapped); retry_key: the group's retry stream (borrowed). */
group_setup *group_new(broker *b, bk_conn *cmd, const struct handler_spec *spec,
                       const char *retry_key, group_event_fn *on_event, void *data);
void group_set_spec(group_setup *g, const struct handler_spec *spec);
/* Sends the two XGROUP CREATE. started: the subscription has read before
 * (or takes over from one that has), so start_at is spent: a group lost
 * and created again starts at `start` and an existing one is not moved.
 * Returns -1 when nothing could be sent (try again after a while). */
int group_create(group_setup *g, bool started);
/* The subscription stops: answers still outstanding are only counted. */
void group_stop(group_setup *g);
/* Commands sent and not answered. */
unsigned group_pending(const group_setup *g);
/* The last failure since group_create ("<command> on <key>: <error>"), ""
 * when none. */
const char *group_fault(const group_setup *g);
void group_free(group_setup *g);

#endif
