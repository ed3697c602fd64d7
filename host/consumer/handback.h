/* handback: a stopping subscription gives back, in one call, the entries it
 * holds and will not finish, so that another consumer runs them now rather
 * than after min_idle (or, on a `new` group, where nothing claims, only when
 * this consumer's name reads its own pending list again):
 *
 *  - claiming and reclaim (SCRIPT_HANDBACK): each id still this consumer's
 *    becomes claimable at once (idle since the epoch); the next claiming or
 *    reclaim read of any host takes it.
 *  - `new` (SCRIPT_HANDBACK_RETRY): each entry still this consumer's and
 *    still in its stream is copied to the group's retry stream and acked, in
 *    the same script, as a retry is; the next `>` read of the group runs the
 *    copy.
 *
 * started says which entries these are. Read and never started (at SIGTERM,
 * or a reload that stops the subscription): uncounted, the next delivery sees
 * the count this one would have seen, and none of max_deliveries is used.
 * Abandoned at the shutdown deadline: their handlers ran, so the delivery
 * counts. An entry another consumer claimed meanwhile is left to it. */
#ifndef LUASTREAM_HANDBACK_H
#define LUASTREAM_HANDBACK_H

#include <stdbool.h>

#include "broker.h"
#include "entry.h"
#include "runtime.h"

/* The hand-back was answered (the subscription may wait for it to drain). */
typedef void handback_answered_fn(void *data);

/* Sends the hand-back of the entries of list (linked by next, read from
 * spec's stream, key 0, or retry_key, key 1) on cmd. list, spec and
 * retry_key are borrowed for this call only (the names logged with the
 * answer are copied: a reload may free spec first). Whether it went out; answered is then called once, when it is
 * answered (a failure is logged here). */
bool handback_send(broker *b, bk_conn *cmd, const struct handler_spec *spec, const char *retry_key,
                   const struct entry *list, bool started, handback_answered_fn *answered,
                   void *data);

#endif
