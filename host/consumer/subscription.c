/* subscription: a handler file's readers, one per partition (see
 * subscription.h); every call covers them all. */
#include "subscription.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "schedule.h"

struct subscription {
  handler *h; /* shared by the readers; released with the subscription */
  stream_reader **parts;
  size_t nparts;   /* 1 when unpartitioned; 0 for a scheduled handler */
  schedule *sched; /* a scheduled handler's ticks (schedule.h), instead of readers */
  sub_event_fn *on_event;
  void *data;
  bool drained_told; /* SUB_EV_DRAINED went to the host */
  char denied[1100]; /* SUB_EV_DENIED: the refusal of whichever reader had it */
};

/* sr_event_fn of every reader: the host hears once for all partitions where
 * that matters. */
static void part_event(void *data, stream_reader *r, enum sub_event ev) {
  subscription *s = data;
  switch (ev) {
    case SUB_EV_READING: break;
    case SUB_EV_DRAINED:
      if (s->drained_told || !sub_drained(s)) return;
      s->drained_told = true;
      break;
    case SUB_EV_DENIED: snprintf(s->denied, sizeof s->denied, "%s", sr_denied(r)); break;
    case SUB_EV_REFUSED:
    case SUB_EV_LOST:
      /* The other partitions stop with it: the file runs whole or not at all. */
      s->on_event(s->data, s, ev);
      sub_stop(s);
      return;
  }
  s->on_event(s->data, s, ev);
}

/* sched_event_fn: a schedule's events as a subscription's. */
static void sched_event(void *data, schedule *sc, enum sched_event ev) {
  (void)sc;
  subscription *s = data;
  if (ev == SCHED_EV_DRAINED) {
    if (s->drained_told) return;
    s->drained_told = true;
  }
  s->on_event(s->data, s, ev == SCHED_EV_DRAINED ? SUB_EV_DRAINED : SUB_EV_READING);
}

/* A scheduled handler: its schedule, the lease's owner this process's
 * consumer name and lease identity (two processes never share it). */
static subscription *sub_new_scheduled(subscription *s, handler *h, broker *b, bk_conn *cmd,
                                       lclock *clock, lease_keepalive *keepalive) {
  const struct handler_spec *spec = handler_spec(h);
  const char *identity = keepalive ? lease_keepalive_identity(keepalive) : "";
  size_t n = strlen(spec->consumer ? spec->consumer : spec->name) + strlen(identity) + 2;
  char *owner = malloc(n);
  if (owner) snprintf(owner, n, "%s %s", spec->consumer ? spec->consumer : spec->name, identity);
  s->sched = owner ? sched_new(h, b, cmd, clock, owner, sched_event, s) : NULL;
  free(owner);
  if (s->sched == NULL) {
    sub_free(s);
    return NULL;
  }
  return s;
}

subscription *sub_new(handler *h, broker *b, bk_conn *cmd, lclock *clock,
                      lease_keepalive *keepalive, sub_event_fn *on_event, void *data) {
  int n = handler_spec(h)->partitions;
  subscription *s = calloc(1, sizeof *s);
  if (s) s->parts = calloc(n > 0 ? (size_t)n : 1, sizeof *s->parts);
  if (s == NULL || s->parts == NULL) {
    free(s);
    handler_release(h);
    return NULL;
  }
  s->h = h;
  s->on_event = on_event;
  s->data = data;
  if (spec_scheduled(handler_spec(h))) return sub_new_scheduled(s, h, b, cmd, clock, keepalive);
  for (int p = 0; p < (n > 0 ? n : 1); p++) {
    s->parts[p] = sr_new(h, n > 0 ? p : -1, b, cmd, clock, keepalive, part_event, s);
    if (s->parts[p] == NULL) {
      sub_free(s);
      return NULL;
    }
    s->nparts++;
  }
  return s;
}

void sub_start(subscription *s, long server_version) {
  if (s->sched) sched_start(s->sched);
  for (size_t i = 0; i < s->nparts; i++) sr_start(s->parts[i], server_version);
}

/* Whether the readers may give entries back: not when any reader's consumer
 * name went to another process, which may hold the others' soon: their
 * entries are left to it. */
static bool may_give_back(const subscription *s) {
  for (size_t i = 0; i < s->nparts; i++)
    if (sr_name_lost(s->parts[i])) return false;
  return true;
}

void sub_stop(subscription *s) {
  if (s->sched) sched_stop(s->sched);
  bool give_back = may_give_back(s);
  for (size_t i = 0; i < s->nparts; i++) sr_stop(s->parts[i], give_back);
}

size_t sub_abandon(subscription *s, size_t *unacked) {
  *unacked = 0;
  if (s->sched) {
    size_t n = sched_abandon(s->sched);
    if (n)
      log_line(LOG_WARN, handler_spec(s->h)->name,
               "shutdown deadline: tick abandoned, its lease ends and another host runs it", NULL);
    return n;
  }
  /* Any partition still stopping: partition 0 may have drained long ago. */
  bool stopping = false;
  for (size_t i = 0; i < s->nparts; i++) stopping |= sr_stopping(s->parts[i]);
  if (!stopping) return 0;
  for (size_t i = 0; i < s->nparts; i++) *unacked += sr_abandon(s->parts[i]);
  /* Every partition's jobs: each goes back to its own reader. */
  size_t n = handler_abandon(s->h, sr_drop_job);
  bool give_back = may_give_back(s), given = false;
  for (size_t i = 0; i < s->nparts; i++) given |= sr_give_back_dropped(s->parts[i], give_back);
  if (n || *unacked) {
    const struct handler_spec *spec = handler_spec(s->h);
    char running[24], acks[24];
    snprintf(running, sizeof running, "%zu", n);
    snprintf(acks, sizeof acks, "%zu", *unacked);
    log_line(LOG_WARN, spec->name,
             given ? "shutdown deadline: handlers abandoned, entries given back"
                   : "shutdown deadline: handlers abandoned, entries stay pending",
             "stream", spec->stream, "group", spec->group, "consumer", spec->consumer, "unfinished",
             running, "unacked", *unacked ? acks : NULL, NULL);
  }
  for (size_t i = 0; i < s->nparts; i++) sr_settle(s->parts[i]);
  return n;
}

bool sub_reading(const subscription *s) {
  if (s->sched) return sched_running(s->sched);
  for (size_t i = 0; i < s->nparts; i++)
    if (!sr_reading(s->parts[i])) return false;
  return true;
}

bool sub_drained(const subscription *s) {
  if (s->sched) return sched_drained(s->sched);
  for (size_t i = 0; i < s->nparts; i++)
    if (!sr_drained(s->parts[i])) return false;
  return true;
}

const char *sub_denied(const subscription *s) { return s->denied; }

void sub_keep_cursor(subscription *s) {
  for (size_t i = 0; i < s->nparts; i++) sr_keep_cursor(s->parts[i]);
}

void sub_swap_handler(subscription *s, handler *h) {
  handler_replace(s->h, h);
  s->h = h;
  if (s->sched) sched_swap_handler(s->sched, h);
  for (size_t i = 0; i < s->nparts; i++) sr_swap_handler(s->parts[i], h);
}

const char *sub_version(const subscription *s) { return handler_version(s->h); }

bool sub_healthy(const subscription *s, char *why, size_t len) {
  if (s->sched && !sched_running(s->sched)) {
    snprintf(why, len, "schedule stopped");
    return false;
  }
  for (size_t i = 0; i < s->nparts; i++) {
    const stream_reader *r = s->parts[i];
    if (sr_healthy(r, why, len)) continue;
    if (sr_partition(r) >= 0 && len) { /* say which partition */
      char reason[512];
      snprintf(reason, sizeof reason, "%s", why);
      snprintf(why, len, "partition %s: %s", sr_spec(r)->stream, reason);
    }
    return false;
  }
  return true;
}

bool sub_note(const subscription *s, char *why, size_t len) {
  for (size_t i = 0; i < s->nparts; i++) /* one pause for every partition */
    if (sr_note(s->parts[i], why, len)) return true;
  return false;
}

bool sub_idle(const subscription *s) {
  if (s->sched) return sched_idle(s->sched);
  for (size_t i = 0; i < s->nparts; i++)
    if (!sr_idle(s->parts[i])) return false;
  return true;
}

const char *sub_last_read(const subscription *s) {
  return s->nparts ? sr_last_read(s->parts[0]) : "";
}
const struct handler_spec *sub_spec(const subscription *s) { return handler_spec(s->h); }
size_t sub_parts(const subscription *s) { return s->nparts; }
const struct handler_spec *sub_part_spec(const subscription *s, size_t i) {
  return sr_spec(s->parts[i]);
}

void sub_metrics_clear(void) { sched_metrics_clear(); }

void sub_collect_metrics(subscription *s, bool add) {
  if (s->sched) sched_collect_metrics(s->sched);
  for (size_t i = 0; i < s->nparts; i++) sr_collect_metrics(s->parts[i], add);
}

void sub_free(subscription *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->nparts; i++) sr_free(s->parts[i]);
  sched_free(s->sched);
  free(s->parts);
  handler_release(s->h);
  free(s);
}
