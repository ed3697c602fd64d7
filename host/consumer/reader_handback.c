/* reader_handback: what a stream's reader (stream_reader_internal.h) gives
 * back (handback.h): the entries read and not started, at a stop or the
 * group seen paused, and those whose handlers the shutdown deadline
 * abandoned; never once the consumer name may be another process's. */
#include <stdint.h>
#include <stdio.h>

#include "handback.h"
#include "stream_reader_internal.h"

/* A hand-back answered: the drain may have waited for it. */
static void handed_back(void *data) {
  stream_reader *s = data;
  s->writes_pending--;
  sr_maybe_drained(s);
}

/* Gives back the entries of list (handback.h), unless the consumer name
 * went to another process, or may have (the lease not confirmed lately: a
 * pause past it): they are its entries now, and it may be running them; the
 * script's owner check cannot tell, the name being the same. Whether it
 * went out. */
bool sr_hand_back(stream_reader *s, const struct entry *list, bool started) {
  if (s->name_lost || (s->lease && !lease_valid(s->lease))) return false;
  bool sent = handback_send(s->b, s->cmd, s->spec, s->retry_key, list, started, handed_back, s);
  if (sent) s->writes_pending++;
  return sent;
}

/* Entries read but not started: given back at once (handback.h), for
 * another host's read to take now, uncounted. The heartbeat lets them go and
 * goes on for those running, which stay this host's until they finish (or
 * the shutdown deadline abandons them). */
void sr_give_back_queued(stream_reader *s, bool give_back) {
  struct entry *left = lanes_drain_queued(&s->lanes);
  for (struct entry *e = left; e && s->key_slots; e = e->next)
    key_slots_done(s->key_slots, e); /* past its key's cap: its slot goes back */
  /* handle_batch: the forming call's entries have their lanes and slots,
   * and have not started. */
  struct entry *forming = s->batching ? batching_take(s->batching) : NULL, *last = NULL;
  for (struct entry *f = forming; f; last = f, f = f->next) {
    lanes_done(&s->lanes, (int)(intptr_t)f->owner_data);
    if (s->key_slots) key_slots_done(s->key_slots, f);
    if (s->inflight) inflight_done(s->inflight);
    if (s->probe == f) {
      s->probe = NULL;
      pause_probe_dropped(s->pause);
    }
  }
  if (last) { /* read before the queued ones: first */
    last->next = left;
    left = forming;
  }
  for (struct entry *w = s->inflight ? inflight_take_waiting(s->inflight) : NULL, *n; w; w = n) {
    n = w->next; /* waiting for a slot on its lane: not started either */
    lanes_done(&s->lanes, (int)(intptr_t)w->owner_data);
    if (s->key_slots) key_slots_done(s->key_slots, w);
    if (s->probe == w) { /* it never ran: the probe goes to the next look */
      s->probe = NULL;
      pause_probe_dropped(s->pause);
    }
    w->next = left;
    left = w;
  }
  if (s->gate) left = gate_drain(s->gate, left); /* waiting for their key: never started */
  if (s->key_cap) left = gate_drain(s->key_cap, left);
  bool given = left && give_back && sr_hand_back(s, left, false);
  size_t n = 0;
  while (left) {
    struct entry *e = left;
    left = e->next;
    held_remove(&s->held, e);
    entry_free(e);
    n++;
  }
  if (n && !given) { /* else logged when Redis answers (handback.c) */
    char count[24];
    snprintf(count, sizeof count, "%zu", n);
    sr_log(s, LOG_INFO, "entries read but not started stay pending", "entries", count, NULL, NULL);
  }
}

/* rt_abandon_fn: an entry whose handler was dropped at the deadline. It was
 * never acked: sr_give_back_dropped gives it back. */
void sr_drop_job(void *data, struct entry *e) {
  stream_reader *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  e->next = s->dropped;
  s->dropped = e;
  lanes_done(&s->lanes, lane);
}

bool sr_give_back_dropped(stream_reader *s, bool give_back) {
  bool given = s->dropped && give_back && sr_hand_back(s, s->dropped, true);
  while (s->dropped) {
    struct entry *e = s->dropped;
    s->dropped = e->next;
    entry_free(e);
  }
  return given;
}
