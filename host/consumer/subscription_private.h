/* subscription_private.h: the state a subscription's two files share:
 * subscription.c (group creation, the read loops, dispatching onto lanes,
 * life cycle) and subscription_outcomes.c (applying what handlers decided:
 * coalesced acks, transactions, dead letters, delays, the delay-set sweeper).
 * Nothing else includes it. Cross-file functions are named sub__*. */
#ifndef LUASTREAM_SUBSCRIPTION_PRIVATE_H
#define LUASTREAM_SUBSCRIPTION_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "entry.h"
#include "lanes.h"
#include "lease.h"
#include "log.h"
#include "outcome.h"
#include "subscription.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define BLOCK_MS 2000
/* Bounds of recovery_wait_ms: how long a claiming read blocks and how often
 * reclaim polls. */
#define RECOVERY_WAIT_MAX_MS 1000
#define RECOVERY_WAIT_MIN_MS 50
#define ID_MAX 48 /* "ms-seq" of two 64-bit numbers, NUL included */
#define SWEEP_MS 1000   /* how often the delay set is looked at */
#define RETRY_LOG_MS 10000 /* retries after the first are logged as a count this often */
#define SWEEP_COUNT 100 /* most entries one sweep moves */
/* Appended to the delay set's key: where the sweep puts members it cannot read. */
#define UNREADABLE_SUFFIX ":unreadable"
/* Readiness (sub_healthy): a read outstanding, or reads failing on a live
 * connection, for STUCK_FACTOR times the read's own wait (BLOCK_MS, or
 * recovery_wait_ms) and at least STUCK_MIN_MS, means the subscription is stuck. */
#define STUCK_FACTOR 3
#define STUCK_MIN_MS 1000

/* Idle consumers (nothing pending, unseen this long, no live lease) are
 * removed from the group (SCRIPT_PRUNE) at start and every PRUNE_EVERY_MS. */
#define PRUNE_IDLE_MS (24ULL * 3600 * 1000)
#define PRUNE_EVERY_MS (3600ULL * 1000)

/* Removing idle consumers failed: tried again this soon, not an hour later,
 * so that readiness (sub_healthy) sees it work again once fixed. */
#define PRUNE_RETRY_MS 5000
/* A failure of periodic work that repeats unchanged is logged again at its
 * level this often (in between at debug). */
#define WORK_RELOG_MS 60000

/* Work a subscription repeats while it runs, whose failures readiness
 * watches (sub_healthy): a server error starts the clock, a success stops
 * it. A lost connection is not counted (readiness says so by itself). */
enum sub_work { WORK_ACKS, WORK_OUTCOMES, WORK_SWEEP, WORK_LEASE, WORK_PRUNE, NWORK };

struct work_fault {
  bool failing;
  uint64_t since_ms;  /* the first failure since the last success */
  uint64_t logged_ms; /* when it was last logged at its level */
  char detail[400];   /* what Redis refused: "COMMAND on KEY ...: error" */
};

enum sub_state { SUB_IDLE, SUB_LEASING, SUB_CREATING, SUB_READING, SUB_STOPPING, SUB_DRAINED };

/* The two keys every read covers (struct entry's key says which one an
 * entry came from): the shared stream, and the group's retry stream
 * (outcome_retry_key), which only luastream writes and so the only key whose
 * luastream headers (delivery-count, original-id) are believed. */
enum { KEY_STREAM = 0, KEY_RETRY = ENTRY_KEY_RETRY, NKEYS = 2 };

/* An id and the key it was read from. */
struct keyed_id {
  char id[ID_MAX];
  unsigned char key;
};

/* Ids finished and not yet in an XACK, for one key. */
struct ack_queue {
  char (*ids)[ID_MAX];
  size_t n, cap;
};

struct subscription {
  handler *h;
  const struct handler_spec *spec;
  broker *b;
  bk_conn *cmd;             /* shared: outcomes and group commands */
  bk_conn *reader;          /* ours: blocking reads */
  lclock *clock;
  sub_event_fn *on_event;
  void *data;

  enum sub_state state;
  struct lanes lanes;
  bool read_pending;        /* an XREADGROUP is outstanding */
  bool dispatching;         /* inside dispatch(): jobs finishing at once must not recurse */
  bool waiting;             /* retry_timer runs (backoff or reclaim poll): do not read before */
  bool native_claim;        /* claiming: the server has XREADGROUP ... CLAIM (8.4+) */
  bool block_next;          /* claim script found nothing: next read blocks on `>` */
  bool abandoned;           /* shutdown deadline: running jobs dropped, nothing more written */
  bool read_failing;        /* the last read failed; failing_since_ms says since when */
  uint64_t read_sent_ms;    /* when the outstanding read went out (read_pending) */
  uint64_t failing_since_ms; /* first failure since the last good read or reconnect */
  char cursor[NKEYS][ID_MAX]; /* reclaim: where the next XAUTOCLAIM of each key starts */
  bool started;             /* has read once: start_at is spent */
  /* `new`: read this consumer's own pending entries before `>` again: at
   * start-up (a host back under the same name) and after the read
   * connection was lost (a read reply lost with it left entries delivered
   * but never seen). Done only with nothing in flight, so nothing runs twice. */
  bool recover;
  bool was_down;            /* the read connection went down since it was up */
  char own_cursor[NKEYS][ID_MAX]; /* the history read of each key goes on after this id */
  /* claiming and reclaim: ids in a lane or a handler here. A claiming read
   * also returns this consumer's own entries once idle min_idle, and an
   * entry waiting behind others ages as if abandoned: it must still run once. */
  struct keyed_id *held;
  size_t nheld, held_cap;
  char last_read[ID_MAX];   /* the newest id a read has brought from the stream, "" before any */
  ltimer *retry_timer;      /* backoff before re-creating the group or reading again */
  uint64_t backoff_ms;
  unsigned writes_pending;  /* outcome commands sent and not answered */
  /* Entries whose handler returned an outcome other than a plain ack (reply,
   * publish, retry copy, delay, dead letter) that is not written yet: sent
   * and unanswered, or waiting for the connection. They count toward the
   * entries held here, so reading waits for writing. */
  size_t outcomes_unwritten;

  struct redo *redo, **redo_tail; /* outcomes cut off by a lost connection, to send again */
  struct redo *spare_redo;  /* answered outcome blocks, kept for reuse */
  size_t nspare_redo;
  struct txn txn;           /* builds each outcome's transaction, reused */
  struct ack_queue acks[NKEYS]; /* ids finished and not yet in an XACK, per key */
  size_t nacks;             /* of both keys */
  struct ack_batch *spare_batches; /* answered XACK batches, kept with their arrays */
  struct bk_args args;      /* builds the commands sent from here, reused */
  ltimer *flush_timer;      /* flushes acks at the next loop turn */
  ltimer *sweep_timer;      /* moves due entries of the delay set back */
  char *retry_key;          /* the group's retry stream (outcome_retry_key) */
  char *delay_key;          /* the group's delay set (outcome_delay_key) */
  /* Group creation: the stream's XGROUP CREATE answered before the retry
   * stream's (one connection, replies in order); its verdict waits here. */
  bool stream_created, stream_create_failed, create_alone;
  char create_error[256];
  char *unreadable_key;     /* where the sweep puts members it cannot read (SCRIPT_SWEEP) */
  bool flush_armed;
  ltimer *retry_log_timer;  /* ends the interval whose retries are counted (sub__log_retries) */
  bool retry_log_armed;
  uint64_t retries_unlogged; /* retries in this interval not logged yet */
  uint64_t retries_total;    /* retries since the subscription started */
  lease *lease;             /* the consumer name, held while this runs; NULL without */
  char *identity;           /* this process's lease value (lease_identity) */
  /* Entries wait, read or not, until the lease is confirmed again (see
   * name_held); logged once per wait. */
  bool lease_unconfirmed;
  bool lease_releasing;     /* drain: lease_release sent */
  bool lease_released;      /* drain: lease_release answered */
  ltimer *prune_timer;      /* removes the group's idle consumers (with a lease only) */
  bool pruned;              /* the first prune has been armed */
  char *lease_prefix;       /* LEASE_PREFIX {stream}:group: (SCRIPT_PRUNE) */
  struct work_fault work[NWORK]; /* periodic work failing (readiness) */
  char create_fault[400];   /* the last failure to create the group, "" when none */
  char denied[1100];        /* SUB_EV_DENIED: what the ACL refused (sub_denied) */
};

/* Copies an entry id (NUL-terminated, parsed as ms-seq so shorter than
 * ID_MAX) into dst: a plain copy, as this runs for every entry. */
static inline void sub__copy_id(char dst[ID_MAX], const char *id) {
  size_t n = strlen(id);
  if (n >= ID_MAX) n = ID_MAX - 1;
  memcpy(dst, id, n);
  dst[n] = '\0';
}

/* The key an entry was read from. */
static inline const char *sub__key(const subscription *s, const struct entry *e) {
  return e->key == KEY_RETRY ? s->retry_key : s->spec->stream;
}

/* The entry's id on the source stream (entry_source_id). */
static inline const char *sub__original_id(const struct entry *e) { return entry_source_id(e); }

/* subscription.c */
void sub__log(subscription *s, enum log_level level, const char *msg, const char *k1,
              const char *v1, const char *k2, const char *v2);
/* The error text of a failed command: the reply's, or err. */
void sub__reply_text(const bk_reply *r, const char *err, char *buf, size_t len);
/* Work w got a server error: detail says what was refused (the command or
 * script, its keys, Redis's text). Starts w's failing clock. Returns the
 * level to log it at: `level` for the first failure, a different error or
 * one last logged WORK_RELOG_MS ago, else LOG_DEBUG. */
enum log_level sub__work_failed(subscription *s, enum sub_work w, enum log_level level,
                                const char *detail);
/* Work w succeeded: stops its failing clock (logged when it was failing). */
void sub__work_ok(subscription *s, enum sub_work w);
/* Sends SUB_EV_DRAINED once a stopping subscription has nothing left. */
void sub__maybe_drained(subscription *s);
/* Runs what may run now and reads more when the lanes have room. */
void sub__progress(subscription *s);
/* The entry is no longer held here (see struct subscription). */
void sub__held_remove(subscription *s, const struct entry *e);

/* subscription_outcomes.c */
struct redo;
struct ack_batch;
/* Frees the spare ack batches (sub_free). */
void sub__ack_batches_free(subscription *s);
/* Frees the outcomes still waiting to be written again and the spare
 * blocks (sub_free). */
void sub__redo_free(subscription *s);
/* rt_done_fn of every job: applies the outcome, frees e, frees its lane. */
void sub__job_done(void *data, struct entry *e, const struct rt_result *res);
/* Adds e's id to the XACK of its key that goes out at the next loop turn. */
void sub__queue_ack(subscription *s, const struct entry *e);
/* Timer callbacks: send the queued acks; move due delayed entries back. */
void sub__flush_acks(ltimer *t, void *data);
/* Logs how many entries were retried in the interval that ends (see there). */
void sub__log_retries(ltimer *t, void *data);
void sub__sweep(ltimer *t, void *data);
/* Deliveries of e before this one, whatever the read mode. */
long long sub__deliveries_before(const subscription *s, const struct entry *e);
/* Sets e aside on the dead-letter stream (see the function's comment). */
void sub__dead_letter(subscription *s, const struct entry *e, const char *reason,
                      const char *error, size_t error_len, long long deliveries,
                      const char *version);

#endif
