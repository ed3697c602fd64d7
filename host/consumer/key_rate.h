/* key_rate: the handler field rate_per_key, the policy of a key gate
 * (key_gate.h): an entry with a partition key waits in the gate until its
 * key's limiter grants it a permit (SCRIPT_RATE, GCRA on the server's TIME:
 * every host reading the group shares a key's limit). The key of a
 * limiter is flow_key("rate", stream, group, "key:" KEY), the partition
 * key's bytes as they are; a key longer than KEY_RATE_RAW_MAX bytes is
 * named by its SHA-1 instead ("keyh:" HEX), so the names stay short. A
 * limiter's key expires once its key is idle.
 *
 * One call per loop turn asks for every key waiting (up to
 * KEY_RATE_BATCH keys a call): as many permits as the key has entries
 * waiting (at most its burst), the fewest worth a grant 1. A key refused
 * is asked for again when the script says its next permit is free. One
 * call is out at a time. */
#ifndef LUASTREAM_KEY_RATE_H
#define LUASTREAM_KEY_RATE_H

#include "broker.h"
#include "clock.h"
#include "fault.h"
#include "key_gate.h"
#include "runtime.h"

#define KEY_RATE_RAW_MAX 128
#define KEY_RATE_BATCH 256
/* After a failed call (server down, script refused), the next one. */
#define KEY_RATE_RETRY_MS 1000

typedef struct key_rate key_rate;
/* A call was answered: entries may have passed the gate. */
typedef void key_rate_ready_fn(void *data);

/* For spec->rate_per_key (interval_us > 0), on the keys waiting in g. NULL
 * when out of memory. */
key_rate *key_rate_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                       key_gate *g, key_rate_ready_fn *ready, void *data);
/* An entry came to wait: ask at the end of this loop turn. */
void key_rate_kick(key_rate *kr);
unsigned key_rate_pending(const key_rate *kr);
/* Calls the server keeps refusing (readiness). */
const struct fault *key_rate_fault(const key_rate *kr);
void key_rate_set_spec(key_rate *kr, const struct handler_spec *spec);
void key_rate_stop(key_rate *kr);
void key_rate_free(key_rate *kr);

/* The limiter's key of partition key k (len bytes) under prefix (the
 * group's flow_key("rate", ...)) into out (room for
 * key_rate_name_max(prefix) bytes); returns its length. Binary-safe. */
size_t key_rate_name(const char *prefix, const char *k, size_t len, char *out);
size_t key_rate_name_max(const char *prefix);

#endif
