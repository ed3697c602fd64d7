/* stream_reader: one stream's consumer in its group (see stream_reader.h):
 * its life cycle. Creating it and its parts, starting (the consumer lease,
 * then creating the group), stopping, the shutdown deadline, a handler's
 * swap and freeing; the callbacks its parts answer on. The files it is made
 * of share stream_reader_internal.h: the read loop, dispatching entries onto
 * lanes and the job-done path are reader_loop.c's, an entry read on its way
 * to its lane reader_admit.c's, the pause gate and the breaker
 * reader_pause.c's, giving back reader_handback.c's, the drain
 * reader_drain.c's, readiness reader_health.c's. Which read comes next and
 * its arguments are read_plan.h's, what a failed read means read_log.h's,
 * the entries held here held.h's, creating the group group_setup.h's,
 * carrying out what a handler's delivery comes to apply.h's (the decision
 * policy.h's, the writing writer.h's), the delay set's sweep sweeper.h's.
 *
 * Every broker callback carries the reader (or a small request struct) and
 * fires exactly once, also on teardown, so counting outstanding requests is
 * enough to know when a stopping reader has drained. */
#include <stdio.h>
#include <stdlib.h>

#include "outcome.h"
#include "partition.h"
#include "stream_reader_internal.h"

static void ensure_group(stream_reader *s);

/* ---- the retry timer (backoff, reclaim's poll) ---- */

static void retry_fire(ltimer *t, void *data) {
  (void)t;
  stream_reader *s = data;
  s->waiting = false;
  if (s->state == SR_CREATING)
    ensure_group(s);
  else if (s->state == SR_READING)
    sr_read_next(s);
}

/* ---- the parts' callbacks ---- */

static void pause_changed(void *data, bool paused);

static void permitted(void *data) { sr_progress(data); }
static void gate_pass(void *data, struct entry *e) { sr_cap_key(data, e); }
static void key_cap_pass(void *data, struct entry *e) { sr_to_lanes(data, e); }

/* inflight_answered_fn: the drain may have waited for it. */
static void slots_answered(void *data) { sr_progress(data); }

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
      if (s->state == SR_READING) sr_progress(s);
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
  sr_progress(s); /* entries read before the group was lost run now */
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
  sr_backoff(s);
}

/* Creates the group where missing (group_setup.h), then reads. */
static void ensure_group(stream_reader *s) {
  s->state = SR_CREATING;
  /* A group created again has a new pending list: scan it from the start. */
  plan_group_new(&s->plan);
  if (group_create(s->group, s->started) != 0) sr_backoff(s);
}

/* ---- life cycle ---- */

/* writer_written_fn: a write was answered: may run and read more; a delay
 * it wrote is swept when due (the sweep reports when that is). */
static void written(void *data, bool delays) {
  stream_reader *s = data;
  if (delays) sweeper_soon(s->sweeper, 0);
  trimmer_soon(s->trimmer); /* outcomes written: there may be more to trim */
  sr_progress(s);
}

/* apply_reading_fn, prune_reading_fn. */
static bool still_reading(void *data) { return ((stream_reader *)data)->state == SR_READING; }

/* prune_answered_fn: the prune may have been the last thing outstanding,
 * for a claiming read as for the drain. */
static void pruned(void *data) { sr_progress(data); }

/* heartbeat_answered_fn: the drain may have waited for it. */
static void beaten(void *data) { sr_progress(data); }

/* sweeper_swept_fn: a claiming read may have waited for the sweep. */
static void swept(void *data) { sr_progress(data); }

/* The most entries the lanes hold at once, as sr_read_next bounds them: a read
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
  s->dispatch_timer = timer_new(clock, sr_dispatch_fire, s);
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
                               sr_slot_granted, slots_answered, s);
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
                               sr_launch_call, sr_call_may_go, s);
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
  s->reader = bk_conn_open(s->b, name, sr_reader_state, s);
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
  sr_progress(s);
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
