/* writer: how a subscription's outcomes reach Redis, on the shared command
 * connection.
 *
 * Plain acks are coalesced into one XACK per key per loop turn; a failed
 * XACK puts its ids back and goes out again shortly, never dropped. Any other
 * outcome (writes, replies, retry copies, dead letters, delays) is a
 * transaction the caller builds in writer_txn (outcome.h builders) and sends
 * with writer_send: one command alone, several as MULTI/EXEC. An outcome cut
 * off by a lost connection is kept as one SCRIPT_REDO call and sent again
 * once the connection is back; the script writes it only if the entry is
 * still pending, so nothing is written twice.
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

enum writer_event {
  /* A write was answered (or given up, or put back to go out again): the
   * subscription may run and read more. */
  WRITER_WRITTEN,
  /* Only a reply inside a transaction came back: nothing is finished, but
   * the count of outstanding commands went down. */
  WRITER_REPLY,
};
typedef void writer_event_fn(void *data, enum writer_event ev);

/* The work whose failures readiness watches (writer_fault). */
enum writer_work { WRITER_ACKS, WRITER_OUTCOMES, WRITER_NWORK };

/* Writes for the consumer of spec (its names for logs, its group) on cmd.
 * retry_key: the group's retry stream (copied), the key of entries whose
 * entry key is ENTRY_KEY_RETRY. spec is borrowed: writer_set_spec replaces it
 * when the handler is swapped. */
writer *writer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                   const char *retry_key, writer_event_fn *on_event, void *data);
void writer_set_spec(writer *w, const struct handler_spec *spec);
void writer_free(writer *w);

/* Adds id (read from entry key `key`) to the XACK that goes out at the next
 * loop turn. Nothing once abandoned: the entry stays pending. */
void writer_ack(writer *w, unsigned char key, const char *id);
/* The writer's transaction, emptied for the next outcome. */
struct txn *writer_txn(writer *w);
/* Sends writer_txn's commands as the outcome `what` ("retry", "reply", ...,
 * static) of entry id, read from entry key `key`. */
void writer_send(writer *w, unsigned char key, const char *id, const char *what);
/* Sends queued acks and cut-off outcomes now rather than at the next turn. */
void writer_flush(writer *w);
/* The shutdown deadline: acks not sent yet are dropped (returns how many),
 * and from now on nothing is written or retried. */
size_t writer_abandon(writer *w);

/* Acks queued and not sent. */
size_t writer_queued_acks(const writer *w);
/* Commands sent and not answered. */
unsigned writer_pending(const writer *w);
/* Outcomes other than plain acks not written yet: sent and unanswered, or
 * waiting for the connection. */
size_t writer_unwritten(const writer *w);
/* Outcomes cut off by a lost connection, waiting to be sent again. */
bool writer_has_redo(const writer *w);
const struct fault *writer_fault(const writer *w, enum writer_work work);

#endif
