/* key_slots: the handler field max_in_flight_per_key, the policy of a key
 * gate (key_gate.h): an entry with a partition key waits in the gate, off
 * the lanes, until its key holds one of at most N slots across every host
 * reading the group; entries without a key are not limited by it.
 *
 * Each key's slots are a leased semaphore in Redis, a sorted set under
 * flow_key("inflight", stream, group) ":key:" KEY (key_rate_name's naming:
 * the key's bytes, or its SHA-1 past KEY_RATE_RAW_MAX bytes; the base stream
 * for every partition of a partitioned handler), members "<holder>#<n>"
 * scored by when their lease ends, as max_in_flight's (inflight.h): the
 * same lease (INFLIGHT_TTL_MS, renewed every INFLIGHT_RENEW_MS while a
 * handler runs), the same exception (a host paused past it may finish what
 * it ran), idempotent grants (a member asked for again is granted again,
 * not counted twice). The key lapses with its last slot.
 *
 * One call (SCRIPT_INFLIGHT_KEYS) per loop turn for every key with
 * something to do (up to KEY_SLOTS_BATCH keys a call): the slots of
 * finished handlers given back, those of running ones renewed when due, and
 * as many asked for as entries of the key wait (at most min(N, workers) per
 * key here). A key refused is asked for again after INFLIGHT_POLL_MS. An
 * entry that passes the gate goes onto the lanes, where max_in_flight (if
 * set) still applies; its key's slot goes back when its handler finishes
 * (key_slots_done). */
#ifndef LUASTREAM_KEY_SLOTS_H
#define LUASTREAM_KEY_SLOTS_H

#include "broker.h"
#include "clock.h"
#include "entry.h"
#include "fault.h"
#include "key_gate.h"
#include "runtime.h"

#define KEY_SLOTS_BATCH 256

typedef struct key_slots key_slots;
/* A call was answered: entries may have passed the gate, or a drain waited. */
typedef void key_slots_ready_fn(void *data);

/* For spec->max_in_flight_per_key on the keys waiting in g, for the reader
 * of partition (-1: none) of base_stream. NULL when out of memory. */
key_slots *key_slots_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                         const char *base_stream, int partition, key_gate *g,
                         key_slots_ready_fn *ready, void *data);
/* An entry came to wait: ask at the end of this loop turn. */
void key_slots_kick(key_slots *ks);
/* The handler of e (which passed the gate) finished: its key's slot goes
 * back (nothing for an entry without a key). */
void key_slots_done(key_slots *ks, const struct entry *e);
/* Calls out, or releases still to send. */
unsigned key_slots_pending(const key_slots *ks);
/* Calls the server keeps refusing (readiness). */
const struct fault *key_slots_fault(const key_slots *ks);
void key_slots_set_spec(key_slots *ks, const struct handler_spec *spec);
/* Asks for nothing more; releases go out once, and lapse if that fails. */
void key_slots_stop(key_slots *ks);
void key_slots_free(key_slots *ks);

#endif
