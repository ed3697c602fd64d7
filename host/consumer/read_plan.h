/* read_plan: which read a subscription sends next, and its arguments.
 *
 * It keeps what decides that for the three read modes (subscription.h): on
 * `new`, whether the consumer's own pending entries are being read again
 * (a history read, SCRIPT_OWN) and where that read of each key goes on; on
 * claiming, whether the claim script found nothing so the next read blocks
 * on `>`; on reclaim, where the next XAUTOCLAIM of each key starts. The
 * subscription owns the state, asks which read comes next, has the command
 * built, and reports what a good reply brought (plan_read_done).
 *
 * No I/O, no time: it uses only the argument builder of broker.h and the
 * script texts of scripts.h, nothing else of the consumer layer (the
 * subscription calls it, never the other way), so it is tested on literal
 * inputs. */
#ifndef LUASTREAM_READ_PLAN_H
#define LUASTREAM_READ_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "entry.h"
#include "runtime.h"

#define PLAN_ID_MAX 48 /* "ms-seq" of two 64-bit numbers, NUL included */

/* The two keys every read covers (struct entry's key says which one an
 * entry came from): the shared stream, and the group's retry stream
 * (outcome_retry_key), which only luastream writes and so the only key whose
 * luastream headers (delivery-count, original-id) are believed. */
enum { PLAN_KEY_STREAM = 0, PLAN_KEY_RETRY = ENTRY_KEY_RETRY, PLAN_NKEYS = 2 };

/* Bounds of plan_recovery_wait_ms: how long a claiming read blocks and how
 * often reclaim polls. */
#define PLAN_RECOVERY_WAIT_MAX_MS 1000
#define PLAN_RECOVERY_WAIT_MIN_MS 50
/* How long a `new` subscription's read of `>` blocks: what an idle
 * subscription costs (one read per PLAN_BLOCK_MS), and 3 times it (when a
 * read counts as stuck, sub_healthy) stays under the broker's command
 * timeout plus it (10 s + PLAN_BLOCK_MS), when the connection is remade. */
#define PLAN_BLOCK_MS 4000

/* Which command a read sends. READ_OWN (SCRIPT_OWN) is a history read that
 * reports what Redis counted, so max_deliveries ends a loop of crashes on
 * `new` as it does on claiming reads.
 *
 * A `new` subscription reads `>` with a plain blocking XREADGROUP
 * (READ_PLAIN), whose reply the broker refuses as it arrives once a string
 * in it is over what an entry may hold, or the reply over what count such
 * entries take (plan_reply_limits): the read fails with BK_ERR_TOO_LARGE,
 * before more than about one socket read of a huge entry is in memory. The
 * entries that read delivered are then this consumer's pending ones: they
 * are read again with SCRIPT_OWN (READ_OWN, plan_too_large), which sends
 * an entry over max_body cut, and `>` goes through SCRIPT_READ (READ_FRESH,
 * which cuts the same way) until one of its reads brings no cut entry
 * (plan_cut_seen); then plain reads again. The claim and reclaim scripts
 * cut such entries as well; Redis 8.4's XREADGROUP ... CLAIM
 * (READ_CLAIM_NATIVE) is a plain read, refused like `>` when too large,
 * after which the claim script reads for good: the refused read claimed its
 * entries all the same (their idle time starts again), so a native read
 * after min_idle would claim, and be refused on, the same ones again. */
enum read_kind {
  READ_PLAIN,
  READ_FRESH,
  READ_OWN,
  READ_CLAIM_NATIVE,
  READ_CLAIM_SCRIPT,
  READ_RECLAIM_SCRIPT
};

struct read_plan {
  const struct handler_spec *spec; /* borrowed: plan_set_spec replaces it */
  const char *retry_key;           /* borrowed: the group's retry stream */
  bool native_claim;               /* claiming: the server has XREADGROUP ... CLAIM (8.4+) */
  bool native_refused;             /* ... and a native read was refused as too large */
  bool block_next;                 /* claim script found nothing: next read blocks on `>` */
  /* A plain read's reply was too large (plan_too_large): reads go through
   * the scripts that cut until one brings no cut entry (plan_cut_seen). */
  bool cut;
  /* `new`: read this consumer's own pending entries before `>` again
   * (plan_recover_own). */
  bool recover;
  char cursor[PLAN_NKEYS][PLAN_ID_MAX]; /* reclaim: where each key's next XAUTOCLAIM starts */
  char own_cursor[PLAN_NKEYS]
                 [PLAN_ID_MAX]; /* `new`: the history read of each key goes on after this id */
};

/* spec and retry_key are borrowed. Reads as for a group just created
 * (plan_group_new), with no own-pending read due and no CLAIM. */
void plan_init(struct read_plan *p, const struct handler_spec *spec, const char *retry_key);
void plan_set_spec(struct read_plan *p, const struct handler_spec *spec);
/* The server has XREADGROUP ... CLAIM: a claiming read uses it, not the script. */
void plan_set_native_claim(struct read_plan *p, bool native);

/* The group was created (again): it has a new pending list, so the reclaim
 * pass starts over from 0-0 on both keys and a claiming read claims first. */
void plan_group_new(struct read_plan *p);
/* `new` only (else nothing): read this consumer's own pending entries from
 * the beginning before `>` again, at start-up (a host back under the same
 * name) and after the read connection was lost (a read reply lost with it
 * left entries delivered but never seen). */
void plan_recover_own(struct read_plan *p);

enum read_kind plan_next(const struct read_plan *p);
/* The reads sent as EVAL of a script. */
bool plan_is_script(enum read_kind kind);
/* The reads whose reply has the claim scripts' shape (read_reply_parse_claimed's);
 * the others' is XREADGROUP's (read_reply_parse_streams'). */
bool plan_replies_claimed(enum read_kind kind);
/* Whether this read may go out while the last batch still runs (read-ahead):
 * only a `new` subscription's read of `>`. Reads that claim wait for the acks
 * of what ran here, and the own pending list is read with nothing in flight. */
bool plan_reads_ahead(const struct read_plan *p, enum read_kind kind);
/* A read failed because the broker refused its reply as too large
 * (bk_error_is_too_large): read the own pending list, and `>`, with the
 * scripts that cut, until plan_cut_seen. */
void plan_too_large(struct read_plan *p);
/* A good reply to a read of kind brought ncut entries cut (entry_size set):
 * a script read of new or claimed entries with none ends plan_too_large's
 * detour. */
void plan_cut_seen(struct read_plan *p, enum read_kind kind, size_t ncut);
/* The reply limits (bk_conn_reply_limit) for a read of kind asking for
 * count entries per key: no string over what one entry may hold whole
 * (entry_max_size of max_body); a plain read's reply no larger than
 * PLAN_NKEYS x count entries of twice that (the reply's objects on top of
 * its bytes), a script's unbounded in all (it cuts what is over). */
void plan_reply_limits(const struct read_plan *p, enum read_kind kind, long long count,
                       size_t *bulk_max, size_t *reply_max);
/* A claiming subscription's blocking `>` read: it brings only new entries,
 * never delivered before and not idle (a claiming read would report 0 and 0). */
bool plan_reads_new_only(const struct read_plan *p, enum read_kind kind);

/* How long a recovering subscription may go without looking for idle
 * entries: half of min_idle, within the bounds above, so an abandoned entry
 * is back within min_idle plus a second. */
uint64_t plan_recovery_wait_ms(const struct read_plan *p);
/* How long a read may wait on the server: PLAN_BLOCK_MS on `new`, else the
 * recovery wait a claiming read blocks for and reclaim polls at. */
uint64_t plan_read_wait_ms(const struct read_plan *p);

/* Appends the command of a read of kind asking for count entries per key
 * (the scripts' limits from the spec's max_body, entry.h). */
void plan_add_args(const struct read_plan *p, struct bk_args *a, enum read_kind kind,
                   long long count);

/* A good reply to a read of kind brought count entries; cursor holds the
 * cursor of each key a script read returned (unused for the others).
 * Advances the state: the claim script found nothing (block on `>` next)
 * or a `>` read came back; the history read went on (it is done once a read
 * leaves both cursors where they were); the reclaim pass moved on. Returns
 * true when the subscription should wait plan_recovery_wait_ms before
 * reading again: a full reclaim pass of both keys found nothing claimable. */
bool plan_read_done(struct read_plan *p, enum read_kind kind, size_t count,
                    char cursor[PLAN_NKEYS][PLAN_ID_MAX]);

#endif
