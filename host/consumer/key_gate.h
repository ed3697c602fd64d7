/* key_gate: entries already read that must wait, by partition key, before
 * they go onto the lanes: off the lanes, so that a key that waits holds no
 * lane and other keys keep going. What lets a key's entries through is a
 * policy of its own (key_rate.h: rate_per_key's permits; a per-key cap on
 * entries in flight would be another), which walks the keys waiting
 * (gate_next_key), decides, and lets the first n of a key pass
 * (gate_release), in the order they came.
 *
 * An entry waiting here is still held by the reader (held.h: the heartbeat
 * keeps its claim), counts as in flight for reading, has not started (no
 * delivery is counted for it while it waits) and is handed back uncounted
 * on stop, as one queued on a lane (gate_drain). Keys are compared by their
 * bytes (key_table.h); a key leaves the gate with its last entry. No I/O. */
#ifndef LUASTREAM_KEY_GATE_H
#define LUASTREAM_KEY_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "entry.h"

/* A key with entries waiting: its queue and what its policy keeps. */
struct gate_key {
  struct entry *head, *tail; /* linked by next, oldest first */
  size_t n;
  const char *key; /* the head entry's bytes of its key */
  size_t len;
  bool asking;      /* the policy asked for it and has no answer yet */
  uint64_t next_at; /* the policy's: not to ask before then (clock ms) */
};

typedef struct key_gate key_gate;
/* An entry may go on (to the lanes). */
typedef void gate_pass_fn(void *data, struct entry *e);

key_gate *gate_new(gate_pass_fn *pass, void *data);
/* Whether e waits here: it has a partition key (header partition-key, not
 * empty); false, and e left to the caller, when it has none or out of
 * memory. */
bool gate_hold(key_gate *g, struct entry *e);
/* Entries waiting, over all keys. */
size_t gate_waiting(const key_gate *g);
/* The first key id at or after from with entries waiting, or -1. */
int gate_next_key(const key_gate *g, int from);
struct gate_key *gate_key_at(key_gate *g, int id);
/* Lets the first n entries of key id pass (fewer when it has fewer); the
 * key leaves the gate with its last entry. */
void gate_release(key_gate *g, int id, size_t n);
/* Takes every entry waiting, oldest of each key first, appended to list;
 * returns the list. The gate is empty after. */
struct entry *gate_drain(key_gate *g, struct entry *list);
void gate_free(key_gate *g); /* entries still waiting are freed */

#endif
