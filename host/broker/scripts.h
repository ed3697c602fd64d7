/* scripts: server-side Lua scripts for what Redis has no single command for.
 * Each one's text is a file of scripts/ (SCRIPT_CLAIM is scripts/claim.lua,
 * and so on), compiled in as a 0-terminated string.
 *
 * The claim scripts run atomically on the server (EVAL), so two hosts never
 * claim the same entry. They read every key in KEYS (a subscription passes
 * its stream and its retry stream, outcome.h), each key on its own with
 * COUNT per key, and both answer in one shape (read_reply_parse_claimed in
 * entry.h):
 *
 *   [[cursor per key], [[key, [[id, fields, idle_ms, deliveries], ...]], ...],
 *    [[key, deleted id], ...]]
 *
 * with a [key, entries] pair only for the keys that gave entries.
 *
 * SCRIPT_CLAIM gives Redis 8.4's claiming read to older servers: per key,
 * pending entries idle at least min_idle (any consumer, longest idle first)
 * claimed with XCLAIM, then new entries with `>`, sharing COUNT. deliveries
 * is the count before this delivery (0 for new entries), as the 8.4 CLAIM
 * reply says. The cursors are all "0-0".
 *   KEYS: stream...   ARGV: group consumer min_idle count [limits]
 *
 * SCRIPT_RECLAIM is XAUTOCLAIM over several keys (one call per key, from the
 * key's own cursor) plus what it does not report: each entry's idle time
 * before the claim and its delivery count after it.
 *   KEYS: stream...   ARGV: group consumer min_idle count cursor-per-key... [limits]
 *
 * Every script read (these, SCRIPT_OWN, SCRIPT_READ) ends its arguments
 * with the host's limits: max_body max_entry keep keep_pairs; past them an
 * entry comes cut, as SCRIPT_READ says, with its sizes after the other
 * elements ([id, cut, idle, deliveries, [body bytes, entry bytes]]).
 * Without them nothing is cut. */
#ifndef LUASTREAM_SCRIPTS_H
#define LUASTREAM_SCRIPTS_H

/* The compiled-in scripts, numbered 0 .. SCRIPT_COUNT - 1, so that the
 * broker can send them by SHA (EVALSHA) rather than as text. */
#define SCRIPT_COUNT 19
/* Which script s is: one of the SCRIPT_* arrays below (the same pointer,
 * not an equal text), else -1. */
int script_index(const char *s);
/* The text of script i (0 <= i < SCRIPT_COUNT). */
const char *script_text(int i);

extern const char SCRIPT_CLAIM[];
extern const char SCRIPT_RECLAIM[];

/* SCRIPT_OWN is the history read of a `new` subscription (XREADGROUP with an
 * id per key: this consumer's own pending entries after it) plus what that
 * read does not report: each entry's idle time and the deliveries Redis
 * counted for it before this one (XPENDING of the same entries, just before
 * the read counts this delivery). Same reply shape as the claim scripts;
 * each cursor is the last id the read gave on that key (an entry deleted
 * from the stream included, though not returned), or the key's cursor as
 * given when it gave none: the own pending list is read to its end once
 * every cursor comes back unchanged. The deleted list is always empty (a
 * history read drops nothing from the pending list).
 *   KEYS: stream...   ARGV: group consumer count cursor-per-key... [limits] */
extern const char SCRIPT_OWN[];

/* SCRIPT_READ is a `new` subscription's read of `>` on both keys after a
 * plain read's reply was refused as too large (COUNT per key, no BLOCK: it
 * answers at once), which sends no entry too large for the
 * host whole: an entry whose `data` is over max_body, or whose names and
 * values in all are over max_entry, comes as [id, cut, [body bytes, entry
 * bytes]], cut being its first keep_pairs fields with each name and value
 * cut to its first keep bytes. Otherwise the reply is XREADGROUP's (nil when
 * there is nothing): so a read of many entries brings the host none over
 * those limits whole (read_plan.h).
 *   KEYS: stream, retry stream
 *   ARGV: group consumer count max_body max_entry keep keep_pairs */
extern const char SCRIPT_READ[];

/* SCRIPT_SWEEP moves the entries of a delay set (outcome.h) that are due
 * onto the group's retry stream, each as a new entry, and removes them from
 * the set: in one step, so two hosts sweeping together never move one twice
 * and a host that dies mid-sweep loses nothing. A member that is not an id
 * and field pairs in netstrings (written by hand, or damaged) cannot become
 * an entry: it moves, with its score, to the third key, so that it never
 * stops the members due after it.
 *
 * First it trims the retry stream, written for `group`: an entry there that
 * every group on the key has acknowledged is needed by nobody. It keeps
 * everything from the oldest entry still needed (over every group on the
 * key: its oldest pending one, or the first after its last-delivered-id,
 * whichever is lower) and removes everything before it, exactly (XTRIM MINID, or MAXLEN 0 when
 * nothing is needed); so an acknowledged entry behind one still pending
 * waits until that one is acknowledged. Nothing is trimmed when the group
 * does not exist on the retry stream. Entries this sweep adds come after the
 * trim. The shared stream is never trimmed: it is not among the keys.
 * Replies [due members taken, of which unreadable, entries trimmed, next
 * due]: next due is the lowest score left in the delay set (Unix ms, 0 for
 * a score below 0, 9e15 for one above that), -1 when the set is empty.
 *   KEYS: delay set, retry stream, unreadable members
 *   ARGV: now (Unix ms) count group */
extern const char SCRIPT_SWEEP[];

/* SCRIPT_OUTCOME writes the outcomes of many entries read from one key, in
 * one step. Per entry: every command is checked first (redis.acl_check_cmd,
 * Redis 7.0 and later: the command exists and the ACL user may run it on its
 * keys); then an XACK
 * (or, for an outcome that leaves the entry pending, an XPENDING of it
 * among the consumer's own), and its commands only if the XACK removed the
 * entry from the pending list (the XPENDING found it pending for this
 * consumer). An entry already acknowledged (by another consumer that took it
 * over, or by this very call sent before a lost connection) gets none of its
 * commands: so sending the same call again is safe, and an outcome with an
 * ack is written at most once per entry and group. One without (the
 * re-stamp of a short retry_after, an XCLAIM ... IDLE) runs again when sent
 * again: it only sets the same idle time once more, and never takes an entry
 * another consumer has claimed meanwhile. A command refused by
 * the check writes nothing of its entry, which stays pending; one Redis
 * refuses as it runs (WRONGTYPE, arity, out of memory) does not stop the
 * others, the entry being acked. Reply: per entry, in order, 1 (written), 0
 * (no longer pending: nothing written), or "N error": N < 0 the check
 * refused command -N, nothing written; N = 0 the XACK or XPENDING itself
 * failed, nothing written; N > 0 command N failed as it ran, the entry
 * acked and the other commands written.
 *   KEYS: stream
 *   ARGV: group consumer, then per entry: id "ack"|"pending" ncmds, then per
 *         command: argc arg...
 * The commands' keys are not in KEYS (a handler names them): fine on one
 * server; Redis Cluster is not supported yet. */
extern const char SCRIPT_OUTCOME[];

/* SCRIPT_REPLAY puts dead letters (outcome.h) back where only the group that
 * gave up on them reads them: the retry stream of the dead-letter-stream and
 * dead-letter-group recorded in each (`<stream>:retry:<group>`), as new
 * entries, and deletes them from the dead-letter stream: each XADD and its
 * XDEL in the same script, so an entry is always on exactly one of the two
 * streams. Nothing is ever written to a source stream. Every entry of a call
 * is checked before anything is written, so a call that fails writes
 * nothing. An entry without all of dead-letter-stream, dead-letter-group and
 * dead-letter-id is not a dead letter luastream wrote and is refused (named);
 * so is one whose stream and group are not a pair the caller allows (the
 * handlers that write to this dead-letter stream), or whose dead-letter-id is
 * not an entry id: the refusal names the entry, the field, its value and
 * what was expected. A replayed entry keeps its fields but luastream's own
 * (dead-letter-*, delivery-count, retry-group, original-id), so its delivery
 * count starts afresh, and gets original-id = the dead-letter-id. A dead
 * letter with dead-letter-cut keeps its entry cut (too large to hold,
 * entry.h): it replays the source entry's fields instead (XRANGE of
 * dead-letter-stream at dead-letter-id), and is refused, saying so, once that
 * entry is gone.
 *   KEYS: dead-letter stream (missing: nothing to replay)
 *   ARGV: n, then n pairs: stream group      the pairs allowed
 *         then "ids" id...                   those entries; an unknown id or
 *                                            an entry that cannot be replayed
 *                                            is an error
 *     or  "all" after last count             up to count entries after
 *                                            `after` ("-" for the start) up
 *                                            to `last` ("+": the newest now);
 *                                            an entry that cannot be
 *                                            replayed is skipped and left in
 *                                            place
 *   Reply: [[[dead-letter id, retry stream, new id], ...], [[skipped id,
 *           why], ...], next, last]: "all" calls go on with after = next and
 *           last = last until next is "" (always "" for "ids"). An error
 *           reply names the stream and the entry; a refused XADD (the ACL)
 *           names its retry stream, the entry and how many moved before it
 *           (those stay moved: each XADD goes with its XDEL).
 * The retry streams are not in KEYS (they are named by the dead letters):
 * fine on one server; on Redis Cluster they share the dead-letter stream's
 * slot when the handler's keys do (`luastream check --cluster`). */
extern const char SCRIPT_REPLAY[];

/* SCRIPT_LEASE: the consumer lease (lease.h), a string key whose value names
 * the holding process, with a time to live. One step per call, so two
 * processes never both think they hold it.
 *   KEYS: lease key   ARGV: op value ttl_ms [old value]
 *   op "take":  set it to value (PX ttl) when free or already value's
 *   op "steal": the same, also when it holds `old value` (a holder known dead)
 *   op "drop":  delete it when it holds value
 * Reply: {1} done, or {0, holder, pttl}: another value holds it (pttl: ms
 * left, -1 when it never expires). Renewals go with SCRIPT_KEEPALIVE. */
extern const char SCRIPT_LEASE[];

/* SCRIPT_PRUNE removes, from the group on each key, the consumers that have
 * nothing pending on that key, have been idle there (XINFO CONSUMERS `idle`)
 * at least idle_ms and hold no live lease (the key prefix .. name does not
 * exist): the check and XGROUP DELCONSUMER in one step, so no entry
 * delivered in between is dropped with its consumer. Each key on its own: a
 * consumer with entries pending on one key keeps them there, and goes from
 * the other key if it has none there. A key, or a group on it, that does not
 * exist is skipped. Replies [[key, name removed], ...].
 *   KEYS: stream, retry stream   ARGV: group idle_ms lease-key-prefix
 * The lease keys are not in KEYS (their names come from XINFO CONSUMERS):
 * fine on one server; Redis Cluster is not supported yet. */
extern const char SCRIPT_PRUNE[];

/* SCRIPT_TRIM trims a stream: to its newest max_len entries when max_len > 0
 * (XTRIM MAXLEN: a loss, whatever the groups did), then, when finished is
 * "1", up to what every group reading it has finished with (XTRIM MINID): it
 * keeps every entry from the lowest id some group has not (its oldest
 * pending entry, else the one after its last-delivered-id). A stream
 * without groups is kept by the second; one that does not exist is left
 * alone. Replies the number of entries trimmed.
 *   KEYS: stream   ARGV: finished ("1" or "0"), max_len (0: none) */
extern const char SCRIPT_TRIM[];

/* SCRIPT_KEEPALIVE is one process's call for one slot (lease.h): it renews
 * the process's consumer leases there and carries the heartbeats riding them
 * (heartbeat.h), so a host sends one call per slot per beat, whatever its
 * number of leases and subscriptions.
 * Renewal: every lease key is extended when it holds value, taken again when
 * it is gone (PX ttl_ms).
 * A rider (a heartbeat) keeps a consumer's claim on the entries it holds (in
 * a lane or a handler), so that no claiming or reclaim read takes them while
 * the host that holds them runs, however long their handlers take: of the
 * ids given per key, those still pending for this consumer and still in the
 * stream get XCLAIM to itself with min-idle 0 and JUSTID (idle 0, the
 * delivery count unchanged); an id another consumer claimed meanwhile is
 * left to it, and a deleted one pending (XCLAIM would drop it). The ids of a
 * key come ascending: they are checked with one XPENDING over their range
 * (out of order, some may be missed, none taken from another consumer).
 * With leased "1" its first key is its consumer's lease key, and nothing is
 * re-stamped unless that holds value (after renewals): a name gone to
 * another process during a pause is not this process's to keep. Each rider
 * runs under pcall: an error (its group deleted, a command refused) is its
 * answer alone.
 *   KEYS: lease key... (nleases), then per rider: [its lease key] stream...,
 *         or a pause rider's pause key
 * A pause rider (pause.h) reads its group's pause instead: its section is
 * "p" prober probe_ms, its one key the pause key (no lease key); its answer
 * {state, reason, ms left, kind, by, trips} (SCRIPT_PAUSE).
 *   ARGV: value ttl_ms nleases nriders,
 *         then per rider: leased group consumer nkeys (count id...)-per-key,
 *         or "p" prober probe_ms
 * Reply: {renewals, riders}: renewals, one per lease key: 1 renewed, 2 found
 * gone and taken again, or the value of another holder; riders, one per
 * rider: the number of ids re-stamped per key, or a string: its error (or
 * that its lease is not this process's). */
extern const char SCRIPT_KEEPALIVE[];

/* SCRIPT_PAUSE writes a group's pause (a hash: kind "manual" or "breaker",
 * reason, by, since_ms, until_ms (absent: until resumed), and for the
 * breaker last_ms, trips, probe, probe_until_ms), on Redis's clock (TIME):
 *   "pause" for_ms reason by: an operator's pause (for_ms 0: until resumed),
 *     replacing a breaker's; replies {now_ms, until_ms or 0}
 *   "resume": deletes it; replies 1 when there was one
 *   "trip" prober want_ms cap_ms reason by: the breaker opens for want_ms
 *     (from half-open: at least twice its last pause), capped at cap_ms,
 *     unless the group is paused already; replies {1, pause_ms, trips}, or
 *     {0, kind} when it was paused already
 *   "close" prober: the breaker closes if prober holds its probe; 1 or 0
 *   KEYS: the pause key (pause.h) */
extern const char SCRIPT_PAUSE[];

/* SCRIPT_HANDBACK gives back the entries a stopping claiming or reclaim
 * consumer holds and will not finish: of the ids given per key, those still
 * pending for it get XCLAIM to itself with TIME 1 (idle since the epoch: any
 * claiming or reclaim read takes them at once), RETRYCOUNT its count, JUSTID.
 * started "0": read and never started, the delivery that never ran does not
 * count (one less); "1": abandoned at the shutdown deadline, it ran and
 * counts (unchanged). Returns how many were given back per key.
 *   KEYS: stream...   ARGV: group consumer started (count id...)-per-key */
extern const char SCRIPT_HANDBACK[];

/* SCRIPT_HANDBACK_RETRY gives back the entries a stopping `new` consumer
 * holds and will not finish, through the retry path (nothing claims on a
 * `new` group): each entry still pending for it and still in its stream is
 * copied to the group's retry stream and acked there, both in this call, so
 * it is neither lost nor run twice; the next `>` read of the group runs the
 * copy. The host builds each copy's fields (outcome_retry_fields: its
 * delivery-count says how many deliveries count). An entry of more than
 * 7000 fields stays pending. Returns how many were given back.
 *   KEYS: stream retry_stream
 *   ARGV: group consumer (key-index id nfields field...)-per-entry
 *   (key-index: 1 the stream, 2 the retry stream) */
extern const char SCRIPT_HANDBACK_RETRY[];

/* SCRIPT_LAG tells how long a group's oldest waiting entries have waited, in
 * milliseconds of the server's clock (TIME): per key, the age of the first
 * entry after the group's last-delivered-id (the next one to deliver, as the
 * stream holds it now: deleted and trimmed entries are skipped) and the age
 * of its smallest pending id (not its idle time, which a redelivery or a
 * heartbeat resets). An age is the server's time minus the id's millisecond
 * part, 0 for an id ahead of the clock or when there is no such entry. Reads
 * only (TIME, XINFO GROUPS, XRANGE, XPENDING).
 *   KEYS: stream...   ARGV: group
 * Reply: per key, [lag_ms, oldest_pending_ms, next id, smallest pending id]
 * ("" for none), or [] when the key or the group does not exist. */
extern const char SCRIPT_LAG[];

/* SCRIPT_INFLIGHT is one stream reader's call to its subscription's
 * fleet-wide semaphore (max_in_flight, consumer/inflight.h): slots released,
 * slots renewed and slots wanted, in one step; lapsed slots (a host that died
 * or stalled past the lease) are dropped first, free slots go to the readers
 * that have waited longest, and a wanted slot already held (a call sent
 * again after its answer was lost) is granted again, not counted twice.
 *   KEYS: slots waiting   (flow_key "inflight" of the subscription's stream)
 *   ARGV: max ttl_ms wait_ttl_ms waiter holder nrelease nrenew nwant member...
 * Reply: [renewed per member (1, 2: lapsed and taken again, 0: lost),
 *         granted per member (1 or 0), waiter ("" when not waiting)] */
extern const char SCRIPT_INFLIGHT[];

/* SCRIPT_INFLIGHT_KEYS is one stream reader's call to the per-key
 * semaphores of max_in_flight_per_key (consumer/key_slots.h), one sorted set
 * per partition key, as SCRIPT_INFLIGHT's without the queue of readers.
 *   KEYS: a key's slots...   ARGV: max ttl_ms (nrelease nrenew nwant member...)-per-key
 * Reply, per key: [renewed per member (1, 2, 0), granted per member (1, 0)] */
extern const char SCRIPT_INFLIGHT_KEYS[];

/* SCRIPT_RATE takes permits of rate limiters (GCRA on the server's TIME):
 * the handler fields rate (permits.h) and rate_per_key (key_rate.h) and
 * ls.rate.take (luastream.core's rate_script is this text). One step per
 * call, so hosts sharing a limiter never grant one permit twice.
 *   KEYS: limiter key...   ARGV: interval_us tolerance_us (want least)-per-key
 * Reply, per key: granted, wait_ms, free: granted permits (0 when fewer than
 * least are free, then wait_ms until least are), and how many are still
 * free. */
extern const char SCRIPT_RATE[];

/* SCRIPT_TICK: a scheduled handler's ticks (schedule.h): the lease that
 * makes one host of the fleet run a tick, on the server's TIME, and the
 * tick's done mark written with its commands only while not done, so a
 * tick's writes apply once (the script's header says its operations).
 *   KEYS: luastream:tick:{NAME}   ARGV: take|done tick owner ... */
extern const char SCRIPT_TICK[];

#endif
