/* stream_reader: one stream's consumer in its group (see stream_reader.h):
 * the read loops of the three modes, dispatching entries onto lanes, and
 * the life cycle. Which read comes next and its arguments are
 * read_plan.h's, what a failed read means read_log.h's, the entries held
 * here held.h's, creating the group group_setup.h's, carrying out what a
 * handler's delivery comes to apply.h's (the decision policy.h's, the
 * writing writer.h's), the delay set's sweep sweeper.h's.
 *
 * Every broker callback carries the reader (or a small request struct) and
 * fires exactly once, also on teardown, so counting outstanding requests is
 * enough to know when a stopping reader has drained. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "backoff.h"
#include "batching.h"
#include "breaker.h"
#include "delivery_metrics.h"
#include "entry.h"
#include "fault.h"
#include "group_setup.h"
#include "heartbeat.h"
#include "held.h"
#include "inflight.h"
#include "lanes.h"
#include "lease.h"
#include "log.h"
#include "outcome.h"
#include "partition.h"
#include "pause.h"
#include "permits.h"
#include "key_gate.h"
#include "key_rate.h"
#include "key_slots.h"
#include "prune.h"
#include "read_log.h"
#include "read_plan.h"
#include "read_reply.h"
#include "trimmer.h"
#include "stream_reader.h"
#include "stream_reader_internal.h"
#include "sweeper.h"
#include "wire.h"
#include "writer.h"

/* Copies an entry id (NUL-terminated, parsed as ms-seq so shorter than
 * ID_MAX) into dst: a plain copy, as this runs for every entry. */
static void copy_id(char dst[ID_MAX], const char *id) {
  size_t n = strlen(id);
  if (n >= ID_MAX) n = ID_MAX - 1;
  memcpy(dst, id, n);
  dst[n] = '\0';
}

static void progress(stream_reader *s);
static void job_done(void *data, struct entry *e, const struct rt_result *res);
static void read_next(stream_reader *s);
static void dispatch(stream_reader *s);
static void ensure_group(stream_reader *s);

/* ---- backoff ---- */

static void retry_fire(ltimer *t, void *data) {
  (void)t;
  stream_reader *s = data;
  s->waiting = false;
  if (s->state == SR_CREATING)
    ensure_group(s);
  else if (s->state == SR_READING)
    read_next(s);
}

static void backoff(stream_reader *s) {
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
 * to the forming call (batching.h), which runs from launch_call. */
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
static void launch_call(void *data, struct entry *const *entries, size_t n) {
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
static bool call_may_go(void *data) {
  stream_reader *s = data;
  return s->state == SR_READING && name_held(s);
}

/* inflight_start_fn: a max_in_flight slot came for e, which waited on its
 * lane; it starts only while the consumer name is known held and, unless it
 * is the probe, the group known running (asked again: it may have waited). */
static bool slot_granted(void *data, struct entry *e) {
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
 * comes (slot_granted), so the call never holds more than batch_max. */
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
        inflight_admit(s->inflight, e); /* starts with a slot (slot_granted) */
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

static void dispatch_fire(ltimer *t, void *data) {
  (void)t;
  progress(data);
}

/* Runs what may run now and reads more when the lanes have room. Called
 * after every job (through the lanes), every read and every write. */
static void progress(stream_reader *s) {
  dispatch(s);
  read_next(s);
  sr_maybe_drained(s);
}

/* ---- reading ---- */

static void pause_changed(void *data, bool paused);

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
  progress(s);
}

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
    backoff(s);
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
    backoff(s);
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
  if (plan_reads_ahead(&s->plan, kind)) read_next(s);
  progress(s);
}

static void read_next(stream_reader *s) {
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
  if (!bk_connected(s->b, s->reader)) return; /* resumes from reader_state */
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

static void permitted(void *data) { progress(data); }
static void gate_pass(void *data, struct entry *e) { sr_cap_key(data, e); }
static void key_cap_pass(void *data, struct entry *e) { sr_to_lanes(data, e); }

/* inflight_answered_fn: the drain may have waited for it. */
static void slots_answered(void *data) { progress(data); }

static void reader_state(void *data, bk_conn *c, int up) {
  (void)c;
  stream_reader *s = data;
  /* Reads that failed because the connection went are not the server
   * refusing them: readiness starts counting afresh. */
  if (up) s->read_failing = false;
  if (up && s->was_down) plan_recover_own(&s->plan); /* a read reply may have been lost */
  s->was_down = !up;
  if (up) read_next(s);
}

/* ---- the consumer lease ---- */

static void on_lease(void *data, enum lease_event ev, const char *holder, long long wait_ms) {
  stream_reader *s = data;
  const char *key = lease_key_of(s->lease);
  char wait[32];
  switch (ev) {
    case LEASE_FAILED: { /* holder: Redis's error */
      char detail[1024];
      snprintf(detail, sizeof detail, "EVAL on %s: %s", key, holder);
      enum log_level level = fault_failed(&s->lease_fault, clock_now(s->clock), LOG_ERROR, detail);
      log_line(level, s->spec->name, "the consumer lease failed, retrying", "stream",
               s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer, "command",
               "EVAL", "script", "the consumer lease", "key", key, "error", holder, NULL);
      sr_acl_refused(s, "EVAL (the consumer lease)", key, holder);
      return;
    }
    case LEASE_RENEWED: fault_ok(&s->lease_fault, clock_now(s->clock), s->spec); return;
    case LEASE_TAKEN:
      fault_ok(&s->lease_fault, clock_now(s->clock), s->spec);
      if (s->state != SR_LEASING) return;
      sr_log(s, LOG_DEBUG, "consumer lease taken", "lease", key, NULL, NULL);
      return ensure_group(s);
    case LEASE_TAKEOVER:
      sr_log(s, LOG_WARN, "consumer lease taken over from a process that is gone", "holder", holder,
             "lease", key);
      return;
    case LEASE_RETAKEN:
      fault_ok(&s->lease_fault, clock_now(s->clock), s->spec);
      sr_log(s, LOG_WARN, "consumer lease had expired (paused or Redis unreachable); taken again",
             "lease", key, NULL, NULL);
      return;
    case LEASE_CONFIRMED:
      if (s->lease_unconfirmed)
        sr_log(s, LOG_INFO, "consumer lease renewed: entries run again", "lease", key, NULL, NULL);
      s->lease_unconfirmed = false;
      if (s->state == SR_READING) progress(s);
      return;
    case LEASE_WAITING:
      snprintf(wait, sizeof wait, "%lldms", wait_ms);
      sr_log(s, LOG_WARN,
             "consumer name held by another process: waiting for its lease to expire in case it "
             "crashed",
             "holder", holder, "wait", wait);
      return;
    case LEASE_REFUSED:
    case LEASE_LOST:
      if (s->state == SR_STOPPING || s->state == SR_DRAINED) return;
      log_line(LOG_ERROR, s->spec->name,
               ev == LEASE_REFUSED ? "consumer name in use by a live process"
                                   : "consumer lease lost to another process: stopped reading",
               "stream", s->spec->stream, "group", s->spec->group, "consumer", s->spec->consumer,
               "holder", holder, "lease", key, "hint",
               "give each process its own name: --instance N (one number per process on a machine) "
               "or --consumer NAME",
               NULL);
      s->name_lost = true;
      s->on_event(s->data, s, ev == LEASE_REFUSED ? SUB_EV_REFUSED : SUB_EV_LOST);
      sr_stop(s, false);
      return;
  }
}

/* ---- group creation ---- */

static void start_reading(stream_reader *s) {
  s->state = SR_READING;
  if (!s->started) plan_recover_own(&s->plan); /* a host back under the same name */
  s->started = true;
  s->backoff_ms = 0;
  const char *how = s->spec->read != READ_CLAIMING ? NULL
                    : s->plan.native_claim         ? "XREADGROUP CLAIM"
                                                   : "claim script (claim_fallback)";
  sr_log(s, LOG_INFO, "subscription reading", "read", rt_read_mode_name(s->spec->read), "via", how);
  s->on_event(s->data, s, SUB_EV_READING);
  sweeper_start(s->sweeper);
  if (s->pruner) prune_start(s->pruner);
  if (s->heartbeat) heartbeat_start(s->heartbeat, s->lease);
  if (s->pause) pause_start(s->pause, s->lease);
  progress(s); /* entries read before the group was lost run now */
}

/* group_event_fn: creating the group is done, failed, or goes on. */
static void group_event(void *data, enum group_event ev, const char *key, const char *why) {
  stream_reader *s = data;
  if (s->state != SR_CREATING) return sr_maybe_drained(s);
  switch (ev) {
    case GROUP_ANSWERED: return;
    case GROUP_READY: return start_reading(s);
    case GROUP_CREATE_REFUSED: sr_acl_refused(s, "XGROUP CREATE", key, why); break;
    case GROUP_FAILED: break;
  }
  backoff(s);
}

/* Creates the group where missing (group_setup.h), then reads. */
static void ensure_group(stream_reader *s) {
  s->state = SR_CREATING;
  /* A group created again has a new pending list: scan it from the start. */
  plan_group_new(&s->plan);
  if (group_create(s->group, s->started) != 0) backoff(s);
}

/* ---- life cycle ---- */

/* writer_written_fn: a write was answered: may run and read more; a delay
 * it wrote is swept when due (the sweep reports when that is). */
static void written(void *data, bool delays) {
  stream_reader *s = data;
  if (delays) sweeper_soon(s->sweeper, 0);
  trimmer_soon(s->trimmer); /* outcomes written: there may be more to trim */
  progress(s);
}

/* apply_reading_fn, prune_reading_fn. */
static bool still_reading(void *data) { return ((stream_reader *)data)->state == SR_READING; }

/* prune_answered_fn: the prune may have been the last thing outstanding,
 * for a claiming read as for the drain. */
static void pruned(void *data) { progress(data); }

/* heartbeat_answered_fn: the drain may have waited for it. */
static void beaten(void *data) { progress(data); }

/* sweeper_swept_fn: a claiming read may have waited for the sweep. */
static void swept(void *data) { progress(data); }

/* The most entries the lanes hold at once, as read_next bounds them: a read
 * goes out while at most one batch is held and asks for up to a batch from
 * each of the two streams. The lanes allocate for that many up front. */
static size_t lanes_expected(const struct handler_spec *spec) {
  return (size_t)spec->batch * 3 + (size_t)handler_spec_lanes(spec);
}

stream_reader *sr_new(handler *h, int partition, broker *b, bk_conn *cmd, lclock *clock,
                      lease_keepalive *keepalive, sr_event_fn *on_event, void *data) {
  stream_reader *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  bk_args_init(&s->args);
  s->h = h;
  s->partition = partition;
  s->spec = handler_spec(h);
  if (partition >= 0) {
    if (partition_spec(handler_spec(h), partition, &s->part_spec) != 0) {
      free(s);
      return NULL;
    }
    s->spec = &s->part_spec;
  }
  s->b = b;
  s->cmd = cmd;
  s->clock = clock;
  s->on_event = on_event;
  s->data = data;
  s->retry_timer = timer_new(clock, retry_fire, s);
  s->dispatch_timer = timer_new(clock, dispatch_fire, s);
  s->lease_fault.name = "the consumer lease";
  s->retry_key = outcome_retry_key(s->spec);
  plan_init(&s->plan, s->spec, s->retry_key);
  dm_init(&s->metrics, s->spec->name, s->spec->stream, s->spec->group,
          s->spec->dead_letter != NULL);
  if (s->retry_key) {
    s->w = writer_new(b, cmd, clock, s->spec, s->retry_key, written, s);
    s->sweeper = sweeper_new(b, cmd, clock, s->spec, s->retry_key, swept, s);
    s->group = group_new(b, cmd, s->spec, s->retry_key, group_event, s);
    if (s->w) {
      writer_set_metrics(s->w, &s->metrics);
      s->apply = apply_new(s->w, clock, s->spec, s->retry_key, &s->metrics, still_reading, s);
    }
  }
  bool trims = s->spec->trim || s->spec->trim_max_len > 0;
  if (trims) s->trimmer = trimmer_new(b, cmd, clock, s->spec);
  bool beats = s->spec->min_idle_ms > 0;
  if (beats && s->retry_key)
    s->heartbeat = heartbeat_new(b, cmd, clock, s->spec, s->retry_key, &s->held, beaten, s);
  bool limited = s->spec->rate.interval_us > 0;
  if (limited)
    s->permits = permits_new(b, cmd, clock, s->spec, handler_spec(h)->stream, permitted, s);
  bool keyed = s->spec->rate_per_key.interval_us > 0;
  if (keyed && (s->gate = gate_new(gate_pass, s)) != NULL)
    s->key_rate = key_rate_new(b, cmd, clock, s->spec, s->gate, permitted, s);
  bool capped = s->spec->max_in_flight > 0;
  if (capped && s->retry_key)
    s->inflight = inflight_new(b, cmd, clock, s->spec, handler_spec(h)->stream, partition,
                               slot_granted, slots_answered, s);
  bool key_capped = s->spec->max_in_flight_per_key > 0;
  if (key_capped && (s->key_cap = gate_new(key_cap_pass, s)) != NULL)
    s->key_slots = key_slots_new(b, cmd, clock, s->spec, handler_spec(h)->stream, partition,
                                 s->key_cap, permitted, s);
  bool leased_ok = true;
  if (keepalive) {
    s->keepalive = keepalive;
    if (s->retry_key)
      s->pruner = prune_new(b, cmd, clock, s->spec, s->retry_key, still_reading, pruned, s);
    s->pause = pause_new(b, cmd, clock, handler_spec(h), lease_keepalive_identity(keepalive),
                         partition, &s->metrics, pause_changed, s);
    leased_ok = s->pruner != NULL && s->pause != NULL;
  }
  breaker_init(&s->breaker);
  bool batched = s->spec->batch_max > 0;
  if (batched)
    s->batching = batching_new(clock, s->spec->batch_max, s->spec->batch_wait_ms, s->spec->workers,
                               launch_call, call_may_go, s);
  if ((batched && !s->batching) || !leased_ok || !s->retry_timer || !s->dispatch_timer ||
      !s->retry_key || !s->w || !s->sweeper || !s->apply || !s->group || (trims && !s->trimmer) ||
      (beats && !s->heartbeat) || (limited && !s->permits) || (keyed && !s->key_rate) ||
      (capped && !s->inflight) || (key_capped && !s->key_slots) ||
      lanes_init(&s->lanes, handler_spec_lanes(s->spec), s->spec->by_key,
                 lanes_expected(s->spec)) != 0) {
    sr_free(s);
    return NULL;
  }
  return s;
}

void sr_start(stream_reader *s, long server_version) {
  plan_set_native_claim(&s->plan, server_version >= SUB_CLAIM_VERSION);
  char name[300];
  if (s->partition >= 0)
    snprintf(name, sizeof name, "%s/read/%d", s->spec->name, s->partition);
  else
    snprintf(name, sizeof name, "%s/read", s->spec->name);
  s->reader = bk_conn_open(s->b, name, reader_state, s);
  if (s->keepalive == NULL) return ensure_group(s);
  s->lease =
      lease_new(s->keepalive, s->spec->stream, s->spec->group, s->spec->consumer, on_lease, s);
  if (s->lease == NULL) {
    sr_log(s, LOG_ERROR, "out of memory: subscription not started", NULL, NULL, NULL, NULL);
    s->on_event(s->data, s, SUB_EV_REFUSED);
    return sr_stop(s, false);
  }
  s->state = SR_LEASING;
  lease_take(s->lease);
}

/* pause_changed_fn: seen paused, what waits here goes back for the
 * pause's end (to whichever host reads it then); seen running, it goes on. */
static void pause_changed(void *data, bool paused) {
  stream_reader *s = data;
  if (s->state != SR_READING) return;
  if (paused) sr_give_back_queued(s, true);
  progress(s);
}

void sr_stop(stream_reader *s, bool give_back) {
  if (s->state == SR_STOPPING || s->state == SR_DRAINED) return;
  s->state = SR_STOPPING;
  timer_stop(s->retry_timer);
  timer_stop(s->dispatch_timer);
  sweeper_stop(s->sweeper);
  apply_stop(s->apply);
  group_stop(s->group);
  if (s->pruner) prune_stop(s->pruner);
  if (s->pause) pause_stop(s->pause);
  if (s->permits) permits_stop(s->permits);
  if (s->key_rate) key_rate_stop(s->key_rate);
  if (s->key_slots) key_slots_stop(s->key_slots);
  if (s->inflight) inflight_stop(s->inflight);
  sr_give_back_queued(s, give_back);
  if (s->reader) {
    bk_conn_close(s->b, s->reader); /* a blocked read completes with an error */
    s->reader = NULL;
  }
  /* Acks still queued go out now rather than at the next turn. */
  writer_flush(s->w);
  sr_maybe_drained(s);
}

size_t sr_abandon(stream_reader *s) {
  if (s->state != SR_STOPPING) return 0;
  if (s->heartbeat) heartbeat_stop(s->heartbeat); /* let them go */
  return writer_abandon(s->w);
}

void sr_settle(stream_reader *s) { sr_maybe_drained(s); }

void sr_keep_cursor(stream_reader *s) { s->started = true; }

void sr_swap_handler(stream_reader *s, handler *h) {
  s->h = h;
  s->spec = handler_spec(h);
  if (s->partition >= 0) {
    /* The keys are the same (a change to them restarts instead); the
     * other fields now borrow from h's spec. */
    struct handler_spec next;
    if (partition_spec(handler_spec(h), s->partition, &next) == 0) {
      partition_spec_free(&s->part_spec);
      s->part_spec = next;
    } else { /* out of memory: keep the keys, borrow the rest from h */
      struct handler_spec keep = s->part_spec;
      s->part_spec = *handler_spec(h);
      s->part_spec.stream = keep.stream;
      s->part_spec.reply_to = keep.reply_to;
      s->part_spec.dead_letter = keep.dead_letter;
    }
    s->spec = &s->part_spec;
  }
  writer_set_spec(s->w, s->spec);
  sweeper_set_spec(s->sweeper, s->spec);
  if (s->pruner) prune_set_spec(s->pruner, s->spec);
  if (s->pause) pause_set_spec(s->pause, handler_spec(h));
  if (s->heartbeat) heartbeat_set_spec(s->heartbeat, s->spec);
  if (s->permits) permits_set_spec(s->permits, s->spec);
  if (s->key_rate) key_rate_set_spec(s->key_rate, s->spec);
  if (s->inflight) inflight_set_spec(s->inflight, s->spec);
  if (s->key_slots) key_slots_set_spec(s->key_slots, s->spec);
  apply_set_spec(s->apply, s->spec);
  trimmer_set_spec(s->trimmer, s->spec);
  group_set_spec(s->group, s->spec);
  plan_set_spec(&s->plan, s->spec);
}

void sr_free(stream_reader *s) {
  if (s == NULL) return;
  metric_set(s->metrics.in_flight, 0); /* its series stay: a reloaded handler's go on */
  metric_set(s->metrics.lanes_busy, 0);
  if (s->reader) bk_conn_close(s->b, s->reader);
  if (s->retry_timer) timer_free(s->retry_timer);
  if (s->dispatch_timer) timer_free(s->dispatch_timer);
  prune_free(s->pruner);
  pause_free(s->pause);
  breaker_free(&s->breaker);
  permits_free(s->permits);
  key_rate_free(s->key_rate);
  gate_free(s->gate);
  key_slots_free(s->key_slots);
  gate_free(s->key_cap);
  heartbeat_free(s->heartbeat);
  inflight_free(s->inflight);
  lease_free(s->lease);
  struct entry *left = s->lanes.job ? lanes_drain_queued(&s->lanes) : NULL;
  while (left) {
    struct entry *e = left;
    left = e->next;
    entry_free(e);
  }
  for (struct entry *f = s->batching ? batching_take(s->batching) : NULL, *n; f; f = n) {
    n = f->next;
    entry_free(f);
  }
  batching_free(s->batching);
  lanes_free(&s->lanes);
  apply_free(s->apply);
  trimmer_free(s->trimmer);
  group_free(s->group);
  writer_free(s->w);
  sweeper_free(s->sweeper);
  bk_args_free(&s->args);
  held_free(&s->held);
  free(s->retry_key); /* after the parts above, which borrow it */
  dm_free(&s->metrics);
  if (s->partition >= 0) partition_spec_free(&s->part_spec);
  free(s);
}
