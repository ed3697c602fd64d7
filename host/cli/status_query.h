/* status_query: what `luastream status` asks the server, and the rows its
 * answers fill (status.h). One refresh is three pipelined rounds: the
 * streams and their groups (XINFO STREAM, XINFO GROUPS), then each group's
 * details (its consumers, oldest pending entry, next entry to deliver,
 * retry stream, delay set and dead letters, and the server's TIME), then
 * the lease of each consumer (PTTL) and the next entry of each retry
 * stream. Phase 2 also reads each group's pause (HGETALL, status_pause.h). Under DIR, the
 * streams and groups are those its handlers read (status_query_add_handler),
 * else the streams named and all their groups.
 * Out of memory ends the program, as everywhere in this one-shot command. */
#ifndef LUASTREAM_STATUS_QUERY_H
#define LUASTREAM_STATUS_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#include "client.h"
#include "cron.h"
#include "runtime.h"
#include "status_pause.h"
#include "status_rules.h"

#define STATUS_ID_MAX 48 /* "ms-seq", two 20-digit numbers */

/* A group on one key: the stream itself or the group's retry stream. */
struct st_key {
  char *key;
  bool exists;       /* the key is a stream */
  bool group_exists; /* the group is on it */
  long long length;
  char last_id[STATUS_ID_MAX];   /* the stream's last-generated-id */
  char delivered[STATUS_ID_MAX]; /* the group's last-delivered-id */
  long long lag;                 /* -1: Redis cannot tell (nil) */
  long long pending;
  long long oldest_idle_ms;      /* the lowest pending id's idle time; -1: nothing pending */
  char oldest_id[STATUS_ID_MAX]; /* the lowest pending id; "": none */
  char next_id[STATUS_ID_MAX];   /* the first entry after delivered; "": none */
  bool next_unknown;             /* reading it failed (an ACL without XRANGE) */
  /* How long the entry at next_id and at oldest_id have waited by the
   * server's clock (TIME minus the id's ms part, 0 for none or an id ahead
   * of the clock); -1 when unknown (no group, TIME or XRANGE failed). */
  long long lag_age_ms, oldest_age_ms;
  char *error; /* reading it failed: the reason */
};

struct st_consumer {
  char *name;
  long long pending; /* on the stream and the retry stream together */
  long long idle_ms; /* the smaller of the two */
  /* The PTTL of its lease key (lease.h), STATUS_LEASE_NONE when there is
   * none; known when lease_read. */
  bool lease_read;
  long long lease_ttl_ms;
};

/* Something that needs attention (status_rules.h), found by status.c. */
struct st_attention {
  const char *kind;
  char *text;
};

struct st_group {
  char *stream, *group;  /* group NULL: a stream named without DIR that has no group */
  char *handlers;        /* "a.lua, b.lua" (DIR), else NULL */
  long long min_idle_ms; /* the smallest min_idle of its handlers; -1: none */
  bool claims;           /* one of its handlers claims pending entries (claiming, reclaim) */
  char *dead_letter;     /* the handlers' dead_letter stream, or NULL */
  struct st_key src, retry;
  long long delayed;      /* members of STREAM:delayed:GROUP */
  long long dead_letters; /* XLEN of dead_letter; -1 when there is none */
  char *side_error;       /* reading the delay set or the dead letters failed */
  struct st_consumer *consumers;
  size_t nconsumers;
  long long lags[STATUS_LAG_HISTORY]; /* the lag at the last refreshes, oldest first */
  int nlags;
  struct st_attention *att;
  size_t natt;
  struct st_pause pause; /* the group's pause (of the handler's base stream when partitioned) */
};

/* A scheduled handler's schedule (DIR only), from its hash
 * luastream:tick:{NAME} (SCRIPT_TICK). */
struct st_schedule {
  char *name, *key, *handlers;
  char *when; /* "every 300000ms" or "cron ... [tz]" */
  bool read, exists;
  long long last_tick, next_tick, last_at, runs, errors; /* Unix ms; -1: none */
  /* The lease of a tick running now: until when (server ms) and which tick;
   * -1: none. */
  long long lease_until, running;
  /* The schedule as DIR's file says (every_ms > 0, or cron in tz, NULL:
   * UTC; has_cron false when neither reads), for the tick due after the
   * last: the hash's next is the one its hosts computed, from the file
   * they ran before a change. */
  long long every_ms;
  bool has_cron;
  struct cron cron;
  struct tz *tz;
  char *last_outcome, *last_host, *last_error, *owner, *error;
  char *attention; /* what needs attention (status_judge_schedule), or NULL */
};

/* A stream as XINFO STREAM tells of it, before its groups are known. */
struct st_stream {
  struct st_key info;
};

struct st_command; /* a command sent and the row its reply fills */

struct status_query {
  bool dir_mode;
  const char *const *names; /* STREAM... */
  int nnames;
  struct st_group *specs; /* DIR: one per stream and group the handlers read */
  size_t nspecs;
  struct st_stream *streams;
  size_t nstreams;
  struct st_group *groups, *prev; /* this refresh's, the last one's (--watch) */
  size_t ngroups, nprev;
  long long server_ms;     /* the server's TIME (Unix ms) this refresh; -1: unknown */
  struct st_command *sent; /* this round's commands, by the index each reply is handed */
  size_t nsent, capsent, answered;
  int phase; /* 1: the streams and their groups; 2: each group's details; 3: leases */
  struct client *c;
  /* Called once a refresh has every reply (failed false: groups is
   * filled), or when the server could not answer (failed true, said on
   * stderr). */
  void (*done)(struct status_query *q, bool failed);
  void *data;                    /* the caller's */
  const char *adding_base;       /* status_query_add_handler's stream, for its partitions' rows */
  struct st_schedule *schedules; /* DIR's scheduled handlers, read at each refresh */
  size_t nschedules;
};

/* host_check_each's callback (data: the query): one row per stream and
 * group, merging the handlers that share one (a `new` and a `reclaim`
 * subscription); a partitioned handler has a row per partition; a
 * scheduled handler a row of schedules. */
void status_query_add_handler(void *data, const struct handler_spec *s);

/* Forgets the rows status_query_add_handler added (DIR is loaded again). */
void status_query_clear_specs(struct status_query *q);

/* Starts a refresh on q->c: this one's groups become q->prev. */
void status_query_refresh(struct status_query *q);

/* The row of stream and group in gs, or NULL. */
struct st_group *status_query_group_find(struct st_group *gs, size_t n, const char *stream,
                                         const char *group);

/* Adds what needs attention to g (text: from status_query_text, now g's). */
void status_query_attention(struct st_group *g, const char *kind, char *text);

/* printf into a new string; out of memory ends the program. */
char *status_query_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* When a scheduled handler ticks, as status says it: "every 300000ms",
 * "cron 0 3 * * * Europe/Berlin" (malloc'd). */
char *status_query_when(const struct handler_spec *s);

/* Frees what q holds (not q). */
void status_query_free(struct status_query *q);

#endif
