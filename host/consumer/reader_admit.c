/* reader_admit: an entry a stream's reader (stream_reader_internal.h) has
 * read, on its way to its lane: the entries held here (held.h), the
 * applier's admission (apply.h), then the key gates of rate_per_key and
 * max_in_flight_per_key (key_gate.h) or the lanes. */
#include "stream_reader_internal.h"
#include "wire.h"

/* An entry of the retry stream is done with (acked, most likely): the next
 * sweep trims what the group acknowledged there, soon rather than at its
 * idle pace. */
void sr_retry_entry_done(stream_reader *s, const struct entry *e) {
  if (e->key == PLAN_KEY_RETRY) sweeper_soon(s->sweeper, SWEEP_MS);
}

void sr_accept_entry(stream_reader *s, struct entry *e) {
  /* Every mode with a min_idle (a `new` one only by choice) keeps what it
   * holds (heartbeat.h); a `new` read never brings back what is held. */
  if (s->spec->min_idle_ms > 0) {
    if (held_has(&s->held, e)) {
      /* Claimed back while this host still holds it: it aged past min_idle
       * waiting in a lane or running. It is not abandoned; it runs once. */
      entry_free(e);
      return;
    }
    if (!held_add(&s->held, e)) {
      sr_log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
      entry_free(e);
      return;
    }
  }
  /* A copy or delayed entry on the retry stream carries its earlier
   * deliveries; a claimed read counts only those of this id: together they
   * are the entry's count. On the shared stream luastream's header names are
   * a producer's data and change nothing here (entry_carried_deliveries). */
  if (e->deliveries >= 0) e->deliveries += entry_carried_deliveries(e);
  if (!apply_admit(s->apply, e, handler_version(s->h))) {
    sr_retry_entry_done(s, e);
    held_remove(&s->held, e);
    entry_free(e);
    return;
  }
  if (s->gate && gate_hold(s->gate, e)) return key_rate_kick(s->key_rate); /* off the lanes */
  sr_cap_key(s, e);
}

/* max_in_flight_per_key: a keyed entry waits off the lanes for its key's
 * slot (key_slots.h). */
void sr_cap_key(stream_reader *s, struct entry *e) {
  if (s->key_cap && gate_hold(s->key_cap, e)) return key_slots_kick(s->key_slots);
  sr_to_lanes(s, e);
}

void sr_to_lanes(stream_reader *s, struct entry *e) {
  size_t klen = 0;
  const char *key = s->spec->by_key ? entry_get(e, HDR_PARTITION_KEY, &klen) : NULL;
  if (lanes_push(&s->lanes, e, key, klen) != 0) {
    sr_log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
    if (s->key_slots) key_slots_done(s->key_slots, e);
    held_remove(&s->held, e);
    entry_free(e);
  }
}
