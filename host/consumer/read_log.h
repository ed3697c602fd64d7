/* read_log: what a subscription's failed read means, and the log lines of
 * its reads (a failure, pending entries the server dropped).
 *
 * No I/O besides logging, no state: it uses log.h and read_plan.h (to name
 * the read), nothing else of the consumer layer; the subscription calls it,
 * never the other way. */
#ifndef LUASTREAM_READ_LOG_H
#define LUASTREAM_READ_LOG_H

#include <stdbool.h>

#include "broker.h"
#include "read_plan.h"
#include "runtime.h"

/* A read of kind failed (r: Redis's error reply, or NULL with err): logs it,
 * and returns true when the group or the stream is gone (NOGROUP, or
 * UNBLOCKED when a blocked read's key was deleted) and must be created again;
 * false when the read is only retried after a backoff. */
bool read_log_failed(const struct handler_spec *spec, const char *retry_key, enum read_kind kind,
                     const bk_reply *r, const char *err);
/* Logs each pair of key and id a script read reports dropped from the pending
 * list because the entry is no longer in the stream (read_reply_parse_claimed's
 * deleted; NULL: none). */
void read_log_deleted(const struct handler_spec *spec, const bk_reply *deleted);

#endif
