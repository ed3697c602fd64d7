/* subscription: one handler file's consumer in its group.
 *
 * It creates the group when missing (BUSYGROUP means it exists and keeps its
 * cursor; start_at moves it), then runs the read loop of its mode on a
 * connection of its own, so a blocking read never delays anyone's writes.
 * Entries go onto lanes; finished entries become outcomes written on the
 * shared command connection (writer.h): acks coalesced into one XACK per
 * loop turn, other outcomes (a reply, ctx:write, a retry copy on `new`, ...)
 * written with their ack by the outcome script; a retry on claiming and
 * reclaim writes nothing at all, since the entry stays pending and is claimed
 * again after min_idle.
 *
 * Every read covers two keys (the group is created on both): the stream and
 * the group's retry stream "<stream>:retry:<group>" (outcome.h), where only
 * luastream writes and so the only key whose luastream headers are believed.
 *
 * Read modes: `new` reads `>`; `claiming` reads idle pending entries first,
 * then new ones (XREADGROUP CLAIM on 8.4+, the claim script before); `reclaim`
 * reads only idle pending entries (XAUTOCLAIM per key in a script), polled.
 * Reading pauses while the lanes hold more than half a batch.
 *
 * A partitioned handler (`partitions = N`, partition.h) is one subscription
 * to the host and N stream readers inside (stream_reader.h; one when
 * unpartitioned): one per partition, each with its own read connection,
 * read plan, lanes (`workers` apply per partition), writer, delay sweeper,
 * trimmer, consumer lease and pruner, on the partition's keys, all running
 * the one handler. XREADGROUP cannot read keys of two
 * Cluster slots at once, and this way an idle partition costs one blocking
 * read per wait on its own connection while a busy one cannot hold the
 * others back. Every call below covers all partitions: started, stopped,
 * drained, swapped and reported on together; readiness needs each one. */
#ifndef LUASTREAM_SUBSCRIPTION_H
#define LUASTREAM_SUBSCRIPTION_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "lease.h"
#include "runtime.h"
#include "stream_reader.h"

typedef struct subscription subscription;

typedef void sub_event_fn(void *data, subscription *s, enum sub_event ev);

/* h is owned by the subscription from here on (released with it). cmd is the
 * shared connection for writes; the subscription opens its own for reads.
 * keepalive: what takes and renews this process's consumer leases (lease.h,
 * outliving the subscription); NULL runs without a lease. */
subscription *sub_new(handler *h, broker *b, bk_conn *cmd, lclock *clock,
                      lease_keepalive *keepalive, sub_event_fn *on_event, void *data);
/* Takes the consumer lease (lease.h: waits for a crashed holder's to expire;
 * SUB_EV_REFUSED and a stop when a live process holds it), creates the group
 * when missing and starts reading; the lease is renewed while it runs (lost:
 * SUB_EV_LOST and a stop) and given back once drained. While reading, the
 * group's consumers with nothing pending, idle for PRUNE_IDLE_MS (24 h) and
 * without a live lease are removed, from the stream and from the retry
 * stream (each key on its own), at start and every hour; every sweep of the
 * delay set (sweeper.h: when due, else at least once a minute, and within
 * SWEEP_MS of an entry of the retry stream being done with) also trims what
 * the group has acknowledged from its retry stream (SCRIPT_SWEEP). server_version (from
 * bk_version_parse) decides how a claiming subscription reads: CLAIM on 8.4+,
 * else the claim script (the host refuses that unless claim_fallback is set). */
void sub_start(subscription *s, long server_version);
/* Stops reading; running handlers finish and their outcomes are written, then
 * SUB_EV_DRAINED is sent. Entries read but not started are given back on a
 * claiming or reclaim subscription (claimable at once, uncounted), else
 * stay pending in Redis; none when a consumer name went to another process. */
void sub_stop(subscription *s);
/* The shutdown deadline passed while s was stopping: its running handlers
 * are dropped where they wait (handler_abandon) and nothing is written for
 * them, so their entries stay pending for another consumer's claiming or
 * reclaim read; acks queued and not yet sent are dropped too (those entries
 * were handled and will be delivered again). Later replies to writes already
 * sent are only logged. SUB_EV_DRAINED follows once no write is outstanding
 * (closing the command connection ends them). Returns the number of running
 * entries dropped; *unacked gets the number of acks dropped. Does nothing
 * (returns 0) unless s is stopping. */
size_t sub_abandon(subscription *s, size_t *unacked);
bool sub_reading(const subscription *s);
/* After SUB_EV_DENIED: "<command> on <key>: <Redis's error>". */
const char *sub_denied(const subscription *s);
/* Stopped: SUB_EV_DRAINED has been sent (sub_free may follow, from a loop
 * callback other than the event's). */
bool sub_drained(const subscription *s);
/* Before sub_start: this subscription takes over from an earlier one of the
 * same file (a hot reload restart), so start_at does not move the cursor of a
 * group that exists again: it applied when the host started. */
void sub_keep_cursor(subscription *s);
/* Hot reload in place: entries dispatched from now on run h (loaded, bound to
 * the same consumer, same subscription fields); entries running finish on the
 * handler they started on, whose state closes after the last one
 * (handler_replace). h is owned by the subscription from here on. */
void sub_swap_handler(subscription *s, handler *h);
/* The script version of the handler new entries run on. */
const char *sub_version(const subscription *s);
/* Readiness: true when s is reading and not stuck; else false with a short
 * reason in why ("creating group", "read connection down", ...). Stuck: a
 * read has been outstanding, or reads have kept failing on a connected
 * reader, for more than 3 times the read's wait (4 s BLOCK for `new`, the
 * recovery wait for claiming and reclaim) and at least a second. Lanes full
 * of slow handlers are not stuck: reading pauses on purpose then. */
bool sub_healthy(const subscription *s, char *why, size_t len);
/* What readiness notes without being unready: true when the group was last
 * seen paused (pause.h), with why ("paused by NAME until resumed: REASON"). */
bool sub_note(const subscription *s, char *why, size_t len);
/* Reading, with nothing queued, running or unwritten. */
bool sub_idle(const subscription *s);
/* The id of the newest new (never delivered) entry a read brought (of
 * partition 0 when partitioned), "" before any: with the group's
 * last-delivered-id it tells whether a read is on its way (the test harness
 * settles on real servers with it). */
const char *sub_last_read(const subscription *s);
/* The handler's spec (for a partitioned one: the unpartitioned names). */
const struct handler_spec *sub_spec(const subscription *s);
/* The subscriptions inside: 1, or the partitions; and the spec each reads
 * with (the partition's keys: stream "<stream>:{p}", ...). */
size_t sub_parts(const subscription *s);
const struct handler_spec *sub_part_spec(const subscription *s, size_t i);
/* Only after drained (or before start). */
void sub_free(subscription *s);

/* Sets the subscription's gauges (entries in flight, lanes busy) from its
 * lanes, or adds to them (add: a subscription still draining shares its
 * successor's series): called when the metrics page is built. */
void sub_collect_metrics(subscription *s, bool add);
/* Before each page, ahead of the subscriptions' sub_collect_metrics: forgets
 * the gauges only running subscriptions set (a schedule's last and next
 * run), so a removed file's go with it. */
void sub_metrics_clear(void);

#endif
