/* policy: what a finished delivery comes to, decided from plain values.
 *
 * Given the handler's result, the read mode, the deliveries so far and the
 * handler file's limits, policy_decide says what to write (ack, the result's
 * writes, a retry copy, a re-stamp, the delay set, a dead letter, or
 * nothing), with which reason and count, and what to log. policy_admit says
 * whether an entry just read may run at all. No I/O, no subscription: the
 * subscription carries the decision out (outcome.h builds the commands,
 * writer.h sends them).
 *
 * Retries by read mode: on `new` a copy goes to the retry stream with the
 * ack; on claiming and reclaim nothing is written, the entry stays pending
 * and is claimed again after min_idle. A retry after a delay re-stamps a
 * claimed entry that may wait pending (delay within min_idle), else moves it
 * to the group's delay set with its ack. The delivery that reaches
 * max_deliveries and still retries or fails is dead-lettered instead.
 * Without a dead-letter stream, a rejected entry is logged and acked and
 * anything else bound for it is logged and left pending: never lost
 * silently. */
#ifndef LUASTREAM_POLICY_H
#define LUASTREAM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

enum policy_action {
  POLICY_RUN,         /* policy_admit: hand it to the handler */
  POLICY_ACK,         /* a plain ack, coalesced with the others */
  POLICY_WRITE,       /* the result's writes (ctx:write, publish, reply) with the ack, one step */
  POLICY_RETRY_COPY,  /* `new`: a copy on the retry stream and the ack */
  POLICY_RESTAMP,     /* claimed: stays pending, claimable again after delay_ms */
  POLICY_DELAY,       /* onto the delay set, due after delay_ms, and the ack */
  POLICY_DEAD_LETTER, /* onto the dead-letter stream and the ack */
  POLICY_LEAVE,       /* nothing written: the entry stays pending */
};

/* The log line that goes with a decision (besides the writer's own). The
 * notes from POLICY_NOTE_DEAD_LETTERED on name the delivery count. */
enum policy_note {
  POLICY_NOTE_NONE,
  POLICY_NOTE_RETRIED,         /* a retry: counted and logged per interval */
  POLICY_NOTE_TOO_MANY_WRITES, /* more writes than one outcome holds: left pending */
  POLICY_NOTE_DEAD_LETTERED,   /* "entry dead-lettered" */
  POLICY_NOTE_REJECTED_ACKED,  /* rejected, no dead-letter stream: acked */
  POLICY_NOTE_BAD_INPUT_LEFT,  /* bad input, no dead-letter stream: left pending */
  POLICY_NOTE_LIMIT_LEFT,      /* at the delivery cap, no dead-letter stream: left pending */
};

struct policy_in {
  /* The handler's result (policy_decide only). */
  enum rt_outcome kind;
  const char *reason; /* RT_ERROR, RT_INVALID: a REASON_* kind */
  int64_t delay_ms;   /* RT_RETRY_AFTER */
  size_t nwrites;     /* RT_ACK, RT_REPLY */
  /* The delivery. */
  long long before; /* deliveries before this one (policy_deliveries_before) */
  /* The handler file. */
  enum read_mode read;
  int64_t min_idle_ms;
  int max_deliveries; /* 0: no cap */
  bool dead_letter;   /* a dead-letter stream is set */
};

struct policy_out {
  enum policy_action action;
  enum policy_note note;
  /* RT_ERROR: the handler failed; logged (with its error) before the note. */
  bool handler_failed;
  const char *reason;   /* dead letters and their notes: the REASON_* (static or the input's) */
  long long deliveries; /* this delivery included (the retry copy's and dead letter's count) */
  int64_t delay_ms;     /* POLICY_RESTAMP, POLICY_DELAY */
  /* The dead letter's error when the policy words it (the delivery cap);
   * "" means the handler's own text. */
  char why[64];
};

/* Deliveries of an entry before this one, whatever the read mode, from what
 * the read reported (entry.deliveries: -1 for a `>` read) and the count a
 * copy or delayed entry carries in its header (entry_carried_deliveries).
 * For claimed reads and the own pending list's the header is already folded
 * into `deliveries`. */
static inline long long policy_deliveries_before(enum read_mode read, long long deliveries,
                                                 long long carried) {
  /* `new`: a `>` read brings entries never delivered to this group (a copy
   * on the retry stream carries its count); the own pending list's read
   * (SCRIPT_OWN) reports, like claiming, the deliveries before this one. */
  if (read == READ_NEW) return deliveries >= 0 ? deliveries : carried;
  /* claiming reports deliveries before this one; reclaim Redis's count after
   * the claim, this one included. */
  return read == READ_RECLAIM ? deliveries - 1 : deliveries;
}
/* Whether a finished delivery is a plain ack (acknowledged, nothing to
 * write): policy_decide's most common answer, inline because a draining
 * host asks it for nearly every entry. */
static inline bool policy_plain_ack(enum rt_outcome kind, size_t nwrites) {
  return (kind == RT_ACK || kind == RT_REPLY) && nwrites == 0;
}
/* Whether an entry delivered `before` times may run: policy_admit's rule,
 * inline because it is asked for every entry read. */
static inline bool policy_may_run(long long before, int max_deliveries) {
  return max_deliveries == 0 || before < max_deliveries;
}
/* Whether an entry just read may run: POLICY_RUN, or (delivered
 * max_deliveries times without an ack) a dead letter as policy_decide words
 * it. Only the limits and `before` of in are read. */
void policy_admit(const struct policy_in *in, struct policy_out *out);
/* What the finished delivery described by in comes to. */
void policy_decide(const struct policy_in *in, struct policy_out *out);

#endif
