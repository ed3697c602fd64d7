/* outcome: the Redis commands that carry out one finished delivery.
 *
 * Builders only, no I/O: each appends commands to a txn, which the writer
 * (writer.h) writes in one step with the entry's ack, so an outcome is all
 * written or not at all (an entry is never acked without its reply, its
 * dead letter or its delayed copy, nor those written without the ack), and
 * only by the delivery whose ack removed the entry from the pending list.
 * The strings a builder makes (numbers, the delay-set member, header values)
 * are owned by the txn.
 *
 * Where they go: a retry copy, a delayed entry once due (the sweep,
 * scripts.h) and a replayed dead letter go to the group's own retry stream
 * "<stream>:retry:<group>", never to the shared stream: only luastream
 * writes there, so only there are its headers trusted. A retry copy or a
 * delayed entry carries delivery-count (deliveries so far) and original-id
 * (the entry's id on the source stream); a dead letter carries the original
 * fields plus the dead-letter-* provenance headers below, dead-letter-stream
 * naming the source stream and dead-letter-id the id there.
 *
 * The builders that act on one delivered entry take the key it was read
 * from (its stream or its retry stream): acks and re-stamps go there. */
#ifndef LUASTREAM_OUTCOME_H
#define LUASTREAM_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "runtime.h"
#include "trace.h"

struct entry;

#define TXN_MAX 32 /* commands of one outcome */

struct txn {
  int n;
  struct bk_args cmd[TXN_MAX];
  char *owned[TXN_MAX * 2]; /* strings the builders made */
  int nowned;
  bool delays; /* outcome_delay added to the delay set */
};

void outcome_txn_init(struct txn *t);
/* Empties t for the next transaction, keeping the builders' memory. */
void outcome_txn_reset(struct txn *t);
void outcome_txn_free(struct txn *t);

/* The commands of res: its ctx:write commands, its ctx:publish entries and
 * its reply, in the order the handler made them. Returns -1 when there are
 * more than fit in one outcome. */
int outcome_writes(struct txn *t, const struct rt_result *res);
/* XADD to retry_key of a copy of e for `new` reads: delivery-count =
 * deliveries so far, original-id = original_id (the id on the source stream). */
void outcome_retry_copy(struct txn *t, const char *retry_key, const struct entry *e,
                        long long deliveries, const char *original_id);
/* The field list of that copy, name and value by turns, onto a (for a
 * script that writes it: handback.h): delivery-count = count, original-id
 * = original_id, and a child of e's traceparent written into trace when e
 * has a valid one. count, original_id and trace must live until a is sent.
 * Returns the number of strings added. */
int outcome_retry_fields(struct bk_args *a, const struct entry *e, const char *count,
                         const char *original_id, char trace[TRACEPARENT_LEN + 1]);
/* XADD of e to spec->dead_letter with its provenance (dead-letter-id =
 * original_id). */
void outcome_dead_letter(struct txn *t, const struct handler_spec *spec, const struct entry *e,
                         const char *original_id, const char *reason, const char *error,
                         size_t error_len, long long deliveries, uint64_t wall_ms);
/* ZADD of e to the group's delay set, due at due_wall_ms (Unix ms). */
void outcome_delay(struct txn *t, const struct handler_spec *spec, const struct entry *e,
                   long long deliveries, const char *original_id, uint64_t due_wall_ms);
/* XCLAIM ... IDLE on key: e (still pending) becomes claimable after delay_ms. */
void outcome_restamp(struct txn *t, const struct handler_spec *spec, const char *key,
                     const struct entry *e, int64_t delay_ms);

/* The retry stream of a stream and group: "<stream>:retry:<group>". */
char *outcome_retry_key(const struct handler_spec *spec);
/* The delay set of a stream and group: "<stream>:delayed:<group>". */
char *outcome_delay_key(const struct handler_spec *spec);

#endif
