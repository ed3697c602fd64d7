/* writer: how a subscription's outcomes reach Redis, on the shared command
 * connection.
 *
 * Plain acks are coalesced into one XACK per key per loop turn; a failed
 * XACK puts its ids back and goes out again shortly, never dropped. Any other
 * outcome (a handler's writes, replies, retry copies, dead letters, delays)
 * is a list of commands the caller builds in writer_txn (outcome.h builders)
 * and queues with writer_outcome. The outcomes of one key and loop turn go
 * out as one SCRIPT_OUTCOME call (scripts.h), which acks each entry and
 * writes its commands only if that ack removed it from the pending list: an
 * outcome is all written with its ack, or not at all, and never twice, even
 * when another consumer took the entry over and finished it too. A call cut
 * off by a lost connection is sent again as it is once the connection is
 * back (the script skips what was written).
 *
 * The writer knows nothing of its subscription: it reports through one
 * callback, and the subscription asks what is outstanding. */
#ifndef LUASTREAM_WRITER_H
#define LUASTREAM_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "outcome.h"
#include "runtime.h"

typedef struct writer writer;

/* A write was answered (or given up, or put back to go out again): the
 * subscription may run and read more. delays: the answered write added to
 * the delay set (outcome_delay), so its sweep may look at it now. */
typedef void writer_written_fn(void *data, bool delays);

/* The work whose failures readiness watches (writer_fault). */
enum writer_work { WRITER_ACKS, WRITER_OUTCOMES, WRITER_NWORK };

/* Writes for the consumer of spec (its names for logs, its group) on cmd.
 * retry_key: the group's retry stream (copied), the key of entries whose
 * entry key is ENTRY_KEY_RETRY. spec is borrowed: writer_set_spec replaces it
 * when the handler is swapped. */
writer *writer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                   const char *retry_key, writer_written_fn *on_written, void *data);
void writer_set_spec(writer *w, const struct handler_spec *spec);
/* m (borrowed; NULL for none) counts outcomes skipped because another
 * consumer had acknowledged their entry. */
struct delivery_metrics;
void writer_set_metrics(writer *w, struct delivery_metrics *m);
void writer_free(writer *w);

/* Adds id (read from entry key `key`) to the XACK that goes out at the next
 * loop turn. Nothing once abandoned: the entry stays pending. */
void writer_ack(writer *w, unsigned char key, const char *id);
/* The writer's command list, emptied for the next outcome. */
struct txn *writer_txn(writer *w);
/* Queues writer_txn's commands as the outcome `what` ("retry", "reply", ...,
 * static) of entry id, read from entry key `key`: written with the entry's
 * ack if that ack removes it from the pending list, or (ack false, for an
 * outcome that keeps the entry pending) only while it is still pending. */
void writer_outcome(writer *w, unsigned char key, const char *id, const char *what, bool ack);
/* Sends queued acks and outcomes now rather than at the next turn. */
void writer_flush(writer *w);
/* The shutdown deadline: acks and outcomes not sent yet are dropped (returns
 * how many), and from now on nothing is written or retried. */
size_t writer_abandon(writer *w);

/* Acks and outcomes queued and not sent (cut-off ones included). */
size_t writer_queued(const writer *w);
/* Commands sent and not answered. */
unsigned writer_pending(const writer *w);
/* Outcomes other than plain acks not written yet: sent and unanswered, or
 * waiting for the connection. */
size_t writer_unwritten(const writer *w);
const struct fault *writer_fault(const writer *w, enum writer_work work);

#endif
