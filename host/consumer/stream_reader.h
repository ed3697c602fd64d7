/* stream_reader: one stream's consumer in its group, the part of a
 * subscription (subscription.h) that reads one key: the whole stream of an
 * unpartitioned handler, or one partition's.
 *
 * It takes the consumer lease (when there is a keepalive), creates the
 * group when missing and runs the read loop of its mode on a connection of
 * its own, over two keys: the stream and the group's retry stream. Entries
 * go onto its lanes and run on the handler it shares with the other
 * partitions; what they come to is written on the shared command connection
 * (writer.h). It keeps its claim on the entries it holds (heartbeat.h) and,
 * stopping, gives back those it read and never started. */
#ifndef LUASTREAM_STREAM_READER_H
#define LUASTREAM_STREAM_READER_H

#include <stdbool.h>
#include <stddef.h>

#include "broker.h"
#include "clock.h"
#include "entry.h"
#include "lease.h"
#include "runtime.h"

typedef struct stream_reader stream_reader;

enum sub_event {
  SUB_EV_READING, /* the group exists and the read loop runs (again) */
  SUB_EV_DRAINED, /* stopped: nothing left running or unwritten; sent once */
  SUB_EV_REFUSED, /* the consumer name is held by a live process: stopping */
  SUB_EV_LOST,    /* the consumer lease went to another process: stopping */
  SUB_EV_DENIED,  /* before it ever read, the server's ACL refused a command it
                     needs (the lease, the group): sr_denied() says which */
};
typedef void sr_event_fn(void *data, stream_reader *r, enum sub_event ev);

/* The first server version with XREADGROUP ... CLAIM (8.4.0, as packed by
 * bk_version_parse). */
#define SUB_CLAIM_VERSION 80400

/* Reads h's stream (partition < 0) or its partition's keys (partition.h).
 * h is borrowed: the subscription owns it. NULL when out of memory. */
stream_reader *sr_new(handler *h, int partition, broker *b, bk_conn *cmd, lclock *clock,
                      lease_keepalive *keepalive, sr_event_fn *on_event, void *data);
/* See sub_start. */
void sr_start(stream_reader *r, long server_version);
/* Stops reading; running handlers finish and their outcomes are written,
 * then SUB_EV_DRAINED. Entries read and not started are given back when
 * give_back and the consumer name is still this process's, its lease
 * confirmed (see sub_stop). */
void sr_stop(stream_reader *r, bool give_back);
/* The shutdown deadline (sub_abandon), for a stopping reader: the heartbeat
 * stops and the acks not yet sent are dropped (their number returned);
 * then the handler's running jobs come back through sr_drop_job (an
 * rt_abandon_fn whose data is the reader), sr_give_back_dropped gives them
 * back, and sr_settle lets it drain. */
size_t sr_abandon(stream_reader *r);
void sr_drop_job(void *data, struct entry *e);
/* Gives back the entries sr_drop_job kept, as having run (their handlers
 * did: handback.h), on the same terms as sr_stop; frees them. Whether they
 * went out. */
bool sr_give_back_dropped(stream_reader *r, bool give_back);
void sr_settle(stream_reader *r);
bool sr_reading(const stream_reader *r);
bool sr_stopping(const stream_reader *r);
bool sr_drained(const stream_reader *r);
/* The consumer name went to another process (LEASE_REFUSED, LEASE_LOST). */
bool sr_name_lost(const stream_reader *r);
/* After SUB_EV_DENIED: "<command> on <key>: <Redis's error>". */
const char *sr_denied(const stream_reader *r);
/* See sub_keep_cursor and sub_swap_handler. */
void sr_keep_cursor(stream_reader *r);
void sr_swap_handler(stream_reader *r, handler *h);
/* See sub_healthy: why it is not, without naming the partition. */
bool sr_healthy(const stream_reader *r, char *why, size_t len);
/* See sub_note: the group's pause as this reader last saw it. */
bool sr_note(const stream_reader *r, char *why, size_t len);
bool sr_idle(const stream_reader *r);
const char *sr_last_read(const stream_reader *r);
/* The spec it reads with (a partition's keys when partitioned). */
const struct handler_spec *sr_spec(const stream_reader *r);
/* -1 when unpartitioned. */
int sr_partition(const stream_reader *r);
/* See sub_collect_metrics. */
void sr_collect_metrics(stream_reader *r, bool add);
/* Only after drained (or before start). */
void sr_free(stream_reader *r);

#endif
