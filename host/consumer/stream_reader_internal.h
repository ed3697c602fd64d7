/* stream_reader_internal: what the files of a stream's reader share
 * (stream_reader.h): the reader itself and the calls between its files.
 * stream_reader.c: its life cycle (create, start: the consumer lease and
 * the group; stop, free); reader_loop.c: the read loop, starting entries
 * on the lanes and the job-done path; reader_pause.c: the group's pause and
 * the breaker as the reader applies them; reader_admit.c: an entry read on
 * its way to its lane; reader_handback.c: what it gives back;
 * reader_health.c: what it says of itself (readiness, its gauges);
 * reader_drain.c: what it has outstanding, when a stopping one has
 * drained, its log lines. Each calls only files after it in this list
 * (no circle of calls: tests/check_layers.lua). */
#ifndef LUASTREAM_STREAM_READER_INTERNAL_H
#define LUASTREAM_STREAM_READER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apply.h"
#include "batching.h"
#include "breaker.h"
#include "delivery_metrics.h"
#include "entry.h"
#include "fault.h"
#include "group_setup.h"
#include "heartbeat.h"
#include "held.h"
#include "inflight.h"
#include "key_gate.h"
#include "key_rate.h"
#include "key_slots.h"
#include "lanes.h"
#include "lease.h"
#include "log.h"
#include "pause.h"
#include "permits.h"
#include "prune.h"
#include "read_plan.h"
#include "stream_reader.h"
#include "sweeper.h"
#include "trimmer.h"
#include "writer.h"

#define ID_MAX PLAN_ID_MAX

enum sr_state { SR_IDLE, SR_LEASING, SR_CREATING, SR_READING, SR_STOPPING, SR_DRAINED };

struct stream_reader {
  handler *h;
  const struct handler_spec *spec;
  broker *b;
  bk_conn *cmd;    /* shared: outcomes and group commands */
  bk_conn *reader; /* ours: blocking reads */
  lclock *clock;
  sr_event_fn *on_event;
  void *data;

  enum sr_state state;
  struct lanes lanes;
  bool read_pending;         /* an XREADGROUP is outstanding */
  bool dispatching;          /* inside dispatch(): jobs finishing at once must not recurse */
  bool waiting;              /* retry_timer runs (backoff or reclaim poll): do not read before */
  bool read_failing;         /* the last read failed; failing_since_ms says since when */
  uint64_t read_sent_ms;     /* when the outstanding read went out (read_pending) */
  uint64_t failing_since_ms; /* first failure since the last good read or reconnect */
  bool started;              /* has read once: start_at is spent */
  /* What the next read is. A `new` subscription's own pending list is read
   * only with nothing in flight (sr_read_next), so nothing runs twice. */
  struct read_plan plan;
  bool was_down;          /* the read connection went down since it was up */
  struct held held;       /* with min_idle: entries in a lane or a handler here */
  heartbeat *heartbeat;   /* ... whose claim it keeps (NULL without min_idle) */
  inflight *inflight;     /* max_in_flight: entries start with a slot (NULL without) */
  struct entry *dropped;  /* shutdown deadline: entries whose handlers were abandoned */
  char last_read[ID_MAX]; /* the newest id a read has brought from the stream, "" before any */
  ltimer *retry_timer;    /* backoff before re-creating the group or reading again */
  ltimer *dispatch_timer; /* dispatch goes on after a slice (DISPATCH_SLICE_MS) */
  uint64_t backoff_ms;    /* the last backoff wait, 0 after a success (backoff.h) */
  /* Lease commands sent and not answered (the writer, the sweeper, the
   * group setup and the pruner count theirs: see sr_outstanding). */
  unsigned writes_pending;
  /* Writes outcomes and acks. Entries whose outcome is not written yet
   * (writer_unwritten) count toward the entries held here, so reading
   * waits for writing. */
  writer *w;
  sweeper *sweeper;                /* moves due entries of the delay set back */
  struct bk_args args;             /* builds the reads, reused */
  char *retry_key;                 /* the group's retry stream (outcome_retry_key) */
  group_setup *group;              /* creates the group, moves its cursor */
  applier *apply;                  /* carries out what the policy decides, counts retries */
  struct delivery_metrics metrics; /* this subscription's series (metrics.h) */
  trimmer *trimmer;                /* trim, trim_max_len: the stream's retention */
  lease *lease;                    /* the consumer name, held while this runs; NULL without */
  lease_keepalive *keepalive;      /* renews this process's leases; NULL: no lease */
  /* Entries wait, read or not, until the lease is confirmed again (see
   * name_held); logged once per wait. */
  bool lease_unconfirmed;
  bool lease_releasing;     /* drain: lease_release sent */
  bool lease_released;      /* drain: lease_release answered */
  bool name_lost;           /* another process holds the consumer name: its entries are its */
  pruner *pruner;           /* removes the group's idle consumers (with a lease only) */
  struct fault lease_fault; /* the consumer lease failing (readiness) */
  /* The group's pause as seen here, and the breaker (NULL without a lease:
   * never paused); the probe entry while one runs here. */
  pause *pause;
  struct breaker breaker;
  const struct entry *probe;
  bool probe_read;      /* the read out is the probe's (one entry) */
  char denied[1100];    /* SUB_EV_DENIED: what the ACL refused (sr_denied) */
  permits *permits;     /* rate: reads wait for permits (NULL without) */
  key_gate *gate;       /* rate_per_key: entries waiting for their key (NULL without) */
  key_rate *key_rate;   /* ... and what lets them through */
  key_gate *key_cap;    /* max_in_flight_per_key: entries waiting for their key's slot */
  key_slots *key_slots; /* ... and what lets them through */
  batching *batching;   /* handle_batch: entries started gather into calls (NULL: handle) */

  /* The handler (one Lua state) is shared by a partitioned handler's
   * readers: the subscription releases it. */
  int partition;                 /* -1: unpartitioned */
  struct handler_spec part_spec; /* partitioned: spec is this (partition.h) */
};

/* ---- reader_drain.c ---- */

/* A log line naming the reader's stream, group and consumer. */
void sr_log(stream_reader *s, enum log_level level, const char *msg, const char *k1, const char *v1,
            const char *k2, const char *v2);
/* Whether why is the ACL refusing a reader that never read what it needs
 * (then SUB_EV_DENIED is sent; sr_denied says what). */
bool sr_acl_refused(stream_reader *s, const char *command, const char *key, const char *why);
/* Commands sent and not answered, its parts' included. */
unsigned sr_outstanding(const stream_reader *s);
/* Sends SUB_EV_DRAINED once a stopping reader has nothing left. */
void sr_maybe_drained(stream_reader *s);

/* ---- reader_handback.c ---- */

/* Gives back the entries of list (handback.h), unless the consumer name
 * may be another process's. Whether it went out. */
bool sr_hand_back(stream_reader *s, const struct entry *list, bool started);
/* Entries read but not started: given back at once when give_back. */
void sr_give_back_queued(stream_reader *s, bool give_back);

/* ---- reader_admit.c ---- */

/* An entry of the retry stream is done with: the sweep comes soon. */
void sr_retry_entry_done(stream_reader *s, const struct entry *e);
/* An entry read: held, admitted, then to a key gate or its lane. */
void sr_accept_entry(stream_reader *s, struct entry *e);
/* max_in_flight_per_key's gate, then the lanes. */
void sr_cap_key(stream_reader *s, struct entry *e);
void sr_to_lanes(stream_reader *s, struct entry *e);

/* ---- reader_pause.c ---- */

/* Whether the next entry may start (the group's pause); *probe: it is the
 * half-open breaker's probe. */
bool sr_may_start(stream_reader *s, bool *probe);
/* The breaker's part in a finished delivery: whether its outcome is
 * applied as usual (not for ls.pause). */
bool sr_breaker_saw(stream_reader *s, const struct entry *e, const struct rt_result *res);

/* ---- reader_loop.c ---- */

/* Runs what may run now and reads more when the lanes have room; then
 * whether a stopping reader has drained. */
void sr_progress(stream_reader *s);
/* The next read, if one may go out now. */
void sr_read_next(stream_reader *s);
/* Backoff before re-creating the group or reading again (retry_timer). */
void sr_backoff(stream_reader *s);
/* The callbacks sr_new and sr_start give the parts: dispatch_timer's, the
 * read connection's state (bk_state_cb), max_in_flight's slot
 * (inflight_start_fn), handle_batch's calls (batch_launch_fn,
 * batch_may_fn). */
void sr_dispatch_fire(ltimer *t, void *data);
void sr_reader_state(void *data, bk_conn *c, int up);
bool sr_slot_granted(void *data, struct entry *e);
void sr_launch_call(void *data, struct entry *const *entries, size_t n);
bool sr_call_may_go(void *data);

#endif
