/* reader_loop: a stream's reader (stream_reader_internal.h) at work: the
 * read loop of its mode (read_plan.h says what comes next) and its
 * replies, starting the entries on the lanes (dispatch, handle_batch's
 * calls, max_in_flight's slots) and what follows a finished job;
 * sr_progress ties them together, after every job, read and write. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backoff.h"
#include "read_log.h"
#include "read_reply.h"
#include "stream_reader_internal.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* The longest dispatch starts handlers in one go (measured on clock_fresh)
 * before it lets the loop turn (I/O, timers, the watchdog's beat) and goes
 * on 1 ms later: a large read of handlers that finish at once must not hold
 * the loop for as long as all of them take, past the watchdog's limit. */
#define DISPATCH_SLICE_MS 50

/* Copies an entry id (NUL-terminated, parsed as ms-seq so shorter than
 * ID_MAX) into dst: a plain copy, as this runs for every entry. */
static void copy_id(char dst[ID_MAX], const char *id) {
  size_t n = strlen(id);
  if (n >= ID_MAX) n = ID_MAX - 1;
  memcpy(dst, id, n);
  dst[n] = '\0';
}

static void job_done(void *data, struct entry *e, const struct rt_result *res);
static void dispatch(stream_reader *s);

/* ---- backoff ---- */

void sr_backoff(stream_reader *s) {
  s->backoff_ms = backoff_next(s->backoff_ms, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
  s->waiting = true;
  timer_start(s->retry_timer, s->backoff_ms);
}

/* reclaim: nothing idle long enough yet; look again in a while. */
static void poll_later(stream_reader *s) {
  s->waiting = true;
  timer_start(s->retry_timer, plan_recovery_wait_ms(&s->plan));
}

/* ---- the consumer name: known to be ours ---- */

/* Whether an entry may be handed to a handler, or a read go out, under the
 * consumer name now: only while the lease is known valid (lease_valid).
 * After a pause or a stalled loop longer than that, another process may
 * hold the name and run these same entries: they wait (pending in Redis),
 * a renewal goes out at once, and LEASE_CONFIRMED resumes; LEASE_LOST
 * stops the reader, leaving them to the new holder. */
static bool name_held(stream_reader *s) {
  if (s->lease == NULL || lease_valid(s->lease)) return true;
  if (!s->lease_unconfirmed) {
    s->lease_unconfirmed = true;
    char limit[32];
    snprintf(limit, sizeof limit, "%dms", LEASE_VALID_MS);
    sr_log(s, LOG_WARN,
           "consumer lease not confirmed recently (process paused or loop stalled): entries wait "
           "until it is renewed",
           "lease", lease_key_of(s->lease), "limit", limit);
  }
  lease_confirm(s->lease);
  return false;
}

/* ---- running entries on lanes ---- */

/* An entry popped onto its lane that could not start (out of memory): it
 * stays pending, and what it held goes back. */
static void start_failed(stream_reader *s, struct entry *e) {
  int lane = (int)(intptr_t)e->owner_data;
  sr_log(s, LOG_ERROR, "out of memory: entry left pending", "id", e->id, NULL, NULL);
  if (s->probe == e) {
    s->probe = NULL;
    pause_probe_dropped(s->pause);
  }
  if (s->key_slots) key_slots_done(s->key_slots, e);
  held_remove(&s->held, e);
  entry_free(e);
  if (s->inflight) inflight_done(s->inflight);
  lanes_done(&s->lanes, lane);
}

/* Runs e, popped onto the lane in its owner_data; for handle_batch, adds it
 * to the forming call (batching.h), which runs from sr_launch_call. */
static void start_entry(stream_reader *s, struct entry *e) {
  if (s->batching) {
    batching_add(s->batching, e);
    return;
  }
  e->started_ms = (uint32_t)clock_now(s->clock);
  held_started(&s->held, e, clock_now(s->clock)); /* max_run counts from here (heartbeat.h) */
  if (handler_run_partition(s->h, e, s->partition, job_done, s) != 0) start_failed(s, e);
}

/* batch_launch_fn: a call of handle_batch on entries, each on its lane;
 * their max_run counts from here. */
void sr_launch_call(void *data, struct entry *const *entries, size_t n) {
  stream_reader *s = data;
  uint64_t now = clock_now(s->clock);
  for (size_t i = 0; i < n; i++) {
    entries[i]->started_ms = (uint32_t)now;
    held_started(&s->held, entries[i], now);
  }
  if (handler_run_batch(s->h, entries, n, s->partition, job_done, s) == 0) return;
  for (size_t i = 0; i < n; i++) start_failed(s, entries[i]);
  batching_call_done(s->batching);
}

/* batch_may_fn: a formed call starts only as an entry would: while reading
 * and the consumer name is known held (after a stall, once a renewal has
 * confirmed it; batch_wait's timer may fire first). */
bool sr_call_may_go(void *data) {
  stream_reader *s = data;
  return s->state == SR_READING && name_held(s);
}

/* inflight_start_fn: a max_in_flight slot came for e, which waited on its
 * lane; it starts only while the consumer name is known held and, unless it
 * is the probe, the group known running (asked again: it may have waited). */
bool sr_slot_granted(void *data, struct entry *e) {
  stream_reader *s = data;
  bool probe;
  if (s->state != SR_READING || !name_held(s)) return false;
  if (s->probe == e && !pause_probe_fresh(s->pause)) { /* the look is old now: not the probe */
    s->probe = NULL;
    pause_probe_dropped(s->pause);
  }
  if (s->probe != e) {
    if (!sr_may_start(s, &probe)) return false;
    if (probe) {
      pause_probe_started(s->pause);
      s->probe = e;
    }
  }
  start_entry(s, e);
  return true;
}

/* handle_batch: whether one more entry may be taken for the forming call.
 * Those waiting for a max_in_flight slot count: each joins it when its slot
 * comes (sr_slot_granted), so the call never holds more than batch_max. */
static bool call_room(const stream_reader *s) {
  if (s->batching == NULL) return true;
  size_t waiting = s->inflight ? inflight_waiting(s->inflight) : 0;
  return batching_forming(s->batching) + waiting < (size_t)s->spec->batch_max;
}

/* handle_batch with by_key: the entries of the key of the one just popped
 * onto lane that wait behind it join the same call, in stream order
 * (lanes_pop_follow), while it has room. */
static void follow_key(stream_reader *s, int lane) {
  struct entry *e;
  int next;
  while (s->state == SR_READING && call_room(s) &&
         (e = lanes_pop_follow(&s->lanes, lane, &next)) != NULL) {
    e->owner_data = (void *)(intptr_t)next;
    start_entry(s, e);
  }
}

static void dispatch(stream_reader *s) {
  if (s->dispatching) return; /* re-entered from a job that finished at once */
  s->dispatching = true;
  struct entry *e;
  int lane;
  uint64_t began = clock_fresh(s->clock);
  bool probe, sliced = false;
  /* handle_batch: entries popped gather into the forming call; one that
   * goes may finish at once and leave room for more. */
  do {
    while (s->state == SR_READING && s->lanes.queued && call_room(s) && name_held(s) &&
           sr_may_start(s, &probe) && (e = lanes_pop(&s->lanes, &lane)) != NULL) {
      if (probe) {
        pause_probe_started(s->pause);
        s->probe = e;
      }
      e->owner_data = (void *)(intptr_t)lane;
      if (s->inflight)
        inflight_admit(s->inflight, e); /* starts with a slot (sr_slot_granted) */
      else
        start_entry(s, e);
      /* (not with max_in_flight: a slot that comes later would put the
       * key's next entry in a call of its own, beside this one) */
      if (s->batching && s->spec->by_key && !probe && !s->inflight) follow_key(s, lane);
      if (clock_fresh(s->clock) - began >= DISPATCH_SLICE_MS) {
        timer_start(s->dispatch_timer, 1);
        sliced = true;
        break;
      }
    }
  } while (s->batching && s->state == SR_READING && batching_go(s->batching) > 0 && !sliced);
  s->dispatching = false;
}

void sr_dispatch_fire(ltimer *t, void *data) {
  (void)t;
  sr_progress(data);
}

/* Runs what may run now and reads more when the lanes have room. Called
 * after every job (through the lanes), every read and every write. */
void sr_progress(stream_reader *s) {
  dispatch(s);
  sr_read_next(s);
  sr_maybe_drained(s);
}

/* ---- a job done ---- */

/* rt_done_fn of every job: carries out the outcome, frees e, frees its lane. */
static void job_done(void *data, struct entry *e, const struct rt_result *res) {
  stream_reader *s = data;
  int lane = (int)(intptr_t)e->owner_data;
  uint32_t ran_ms = (uint32_t)clock_now(s->clock) - e->started_ms;
  metrics_observe(s->metrics.duration, ran_ms / 1000.0);
  if (sr_breaker_saw(s, e, res)) apply_finished(s->apply, e, res);
  sr_retry_entry_done(s, e);
  if (s->key_slots) key_slots_done(s->key_slots, e); /* its key's slot goes back */
  held_remove(&s->held, e);
  entry_free(e);
  if (s->inflight) inflight_done(s->inflight); /* its slot goes back */
  lanes_done(&s->lanes, lane);
  if (s->batching && res->batch_left == 0) batching_call_done(s->batching); /* its call ended */
  sr_progress(s);
}

/* ---- reading ---- */

static void read_done(void *data, const bk_reply *r, const char *err) {
  stream_reader *s = data;
  s->read_pending = false;
  if (s->state != SR_READING) {
    sr_maybe_drained(s);
    return;
  }
  if (r == NULL || r->type == BK_ERROR) {
    if (!s->read_failing) {
      s->read_failing = true;
      s->failing_since_ms = clock_now(s->clock);
    }
    if (r == NULL && bk_error_is_too_large(err)) {
      /* Refused as it arrived: what it delivered is pending here, and is
       * read again, cut where over max_body, once the reader is back. */
      sr_log(s, LOG_WARN, "a read's reply was too large, reading its entries again cut", "error",
             err, NULL, NULL);
      plan_too_large(&s->plan);
    } else if (read_log_failed(s->spec, s->retry_key, plan_next(&s->plan), r, err)) {
      s->state = SR_CREATING;
      sweeper_stop(s->sweeper); /* started again once reading */
    }
    sr_backoff(s);
    return;
  }
  char why[256];
  enum read_kind kind = plan_next(&s->plan);
  struct entry *list = NULL;
  size_t count = 0;
  const bk_reply *deleted = NULL;
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  const char *keys[PLAN_NKEYS] = {s->spec->stream, s->retry_key};
  int rc = plan_replies_claimed(kind)
               ? read_reply_parse_claimed(r, keys, PLAN_NKEYS, s->spec->max_body, cursor[0],
                                          PLAN_ID_MAX, &list, &count, &deleted, why, sizeof why)
               : read_reply_parse_streams(r, keys, PLAN_NKEYS, s->spec->max_body, &list, &count,
                                          NULL, why, sizeof why);
  if (rc != 0) {
    sr_log(s, LOG_ERROR, "unreadable reply to a read, retrying", "error", why, NULL, NULL);
    sr_backoff(s);
    return;
  }
  s->backoff_ms = 0;
  s->read_failing = false;
  if (count) {
    metric_add(s->metrics.reads, 1);
    metric_add(s->metrics.entries_read, (double)count);
  }
  if (s->permits) permits_spend(s->permits, count);
  read_log_deleted(s->spec, deleted);
  if (plan_read_done(&s->plan, kind, count, cursor)) poll_later(s); /* nothing to reclaim yet */
  if (s->probe_read && count == 0 && s->pause) pause_probe_idle(s->pause);
  s->probe_read = false;
  size_t ncut = 0;
  for (const struct entry *e = list; e; e = e->next) ncut += e->entry_size != 0;
  plan_cut_seen(&s->plan, kind, ncut);
  if (kind == READ_OWN && count) {
    char n[24];
    snprintf(n, sizeof n, "%zu", count);
    sr_log(s, LOG_INFO, "entries delivered here earlier and never acked, handled now", "entries", n,
           NULL, NULL);
  }
  while (list) {
    struct entry *e = list;
    list = e->next;
    e->next = NULL;
    if (kind != READ_OWN && e->deliveries <= 0 && e->key == PLAN_KEY_STREAM)
      copy_id(s->last_read, e->id);
    if (plan_reads_new_only(&s->plan, kind)) {
      /* A claiming subscription's blocking `>` read: new entries, which the
       * claiming read reports as idle 0, delivered 0 times before. */
      e->deliveries = 0;
      e->idle_ms = 0;
    }
    sr_accept_entry(s, e);
  }
  /* A read that was out when the group was seen paused: what it brought
   * goes back as at the pause, not to wait here for its end. */
  if (count && s->pause && pause_read_gate(s->pause) == PAUSE_WAIT && !pause_probing(s->pause))
    sr_give_back_queued(s, true);
  /* Read ahead: the next read goes out, and leaves at once, before this
   * batch runs, so the server answers it while the handlers work. */
  if (plan_reads_ahead(&s->plan, kind)) sr_read_next(s);
  sr_progress(s);
}

void sr_read_next(stream_reader *s) {
  if (s->state != SR_READING || s->read_pending || s->waiting) return;
  /* On lanes or running; and, counted on its own, finished with an outcome
   * not yet written (plain acks aside: one small XACK per loop turn). */
  size_t in_flight = lanes_in_flight(&s->lanes) + (s->gate ? gate_waiting(s->gate) : 0) +
                     (s->key_cap ? gate_waiting(s->key_cap) : 0);
  size_t batch = (size_t)s->spec->batch;
  enum read_kind kind = plan_next(&s->plan);
  bool ahead = plan_reads_ahead(&s->plan, kind);
  /* Ahead: a batch more while at most one waits for the handlers and at
   * most one for its outcomes to be written, so at most 3 x batch are held
   * here; the outcomes of one batch are written while the next runs and the
   * one after it is read, which keeps the server busy when outcomes cost it
   * more than reads. Otherwise the lanes fill up to one batch and are read
   * again once half empty. Resumes when the lanes or the writes catch up.
   * COUNT is per key: a read that also finds entries on the retry stream
   * may bring up to one batch more from there. */
  if (in_flight > (ahead ? batch : batch / 2) || writer_unwritten(s->w) > batch) return;
  /* A read that claims waits until what finished here is written: an entry
   * handled in about min_idle would otherwise come back before its ack. */
  if (s->spec->read != READ_NEW && (writer_queued(s->w) || sr_outstanding(s))) return;
  /* The own pending list holds what runs here too: read it only once all
   * of that is finished and written. */
  if (kind == READ_OWN && (in_flight || writer_queued(s->w) || sr_outstanding(s))) return;
  if (!bk_connected(s->b, s->reader)) return; /* resumes from sr_reader_state */
  /* A read assigns entries to the name (and a claiming one takes them over). */
  if (!name_held(s)) return;
  /* Paused, nothing is read (it would only wait here); half-open, one entry
   * for the probe. */
  enum pause_gate gate = s->pause ? pause_read_gate(s->pause) : PAUSE_GO;
  bool probe = gate == PAUSE_PROBE;
  if (gate == PAUSE_WAIT || (probe && in_flight)) return;
  struct bk_args *a = &s->args;
  bk_args_reset(a);
  long long count = probe ? 1 : (long long)(ahead ? batch : batch - in_flight);
  s->probe_read = probe;
  if (s->permits) { /* rate: no more entries than permits (permits.h) */
    long long allowed = permits_count(s->permits, PLAN_NKEYS);
    if (allowed == 0) return; /* resumes from permitted */
    if (count > allowed) count = allowed;
  }
  plan_add_args(&s->plan, a, kind, count);
  size_t bulk_max, reply_max;
  plan_reply_limits(&s->plan, kind, count, &bulk_max, &reply_max);
  bk_conn_reply_limit(s->b, s->reader, bulk_max, reply_max);
  if (bk_command(s->b, s->reader, a->argc, a->argv, a->argvlen, read_done, s) == 0) {
    s->read_pending = true;
    s->read_sent_ms = clock_now(s->clock);
    /* hiredis writes only when the loop turns, which may be after a whole
     * batch of handlers: the read leaves now instead. */
    bk_flush(s->b, s->reader);
  }
}

void sr_reader_state(void *data, bk_conn *c, int up) {
  (void)c;
  stream_reader *s = data;
  /* Reads that failed because the connection went are not the server
   * refusing them: readiness starts counting afresh. */
  if (up) s->read_failing = false;
  if (up && s->was_down) plan_recover_own(&s->plan); /* a read reply may have been lost */
  s->was_down = !up;
  if (up) sr_read_next(s);
}
