/* memstream: the data model and commands of the in-memory Redis server
 * behind broker_memory (see /work/shared/redis-streams.md, the spec).
 *
 * A memdb is a keyspace of streams, sorted sets and strings; one key name
 * holds one type (streams in db->keys, sorted sets in db->zsets, strings in
 * db->strs, never two of them), and a
 * command on a key of the other type answers WRONGTYPE. A stream keeps its
 * entries in an array sorted by ID, its groups sorted by name; a group keeps
 * its PEL as an array of NACKs sorted by ID (a consumer's own PEL is the
 * NACKs it owns) and its consumers sorted by name. A sorted set keeps its
 * members in an array sorted by score, then by member bytes. Everything is
 * O(n) and simple on purpose: this serves tests, not traffic.
 *
 * Commands are functions of (db, call) returning an owned reply tree
 * (memreply.h). The stream-level commands live in memstream.c, the consumer
 * group commands in memgroup.c, XREADGROUP in memread.c, the sorted-set
 * commands in memzset.c. Behaviour that differs between Redis 7.0 and 8.4
 * follows db->version. */
#ifndef LUASTREAM_MEMSTREAM_H
#define LUASTREAM_MEMSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "broker.h"

typedef struct {
  uint64_t ms, seq;
} msid;

struct ms_entry {
  msid id;
  uint64_t node; /* the ms_node it was appended to */
  size_t nvals;  /* field, value, field, value ...: always even */
  char **val;    /* NUL-terminated copies */
  size_t *vlen;
};

/* A node of the radix tree of listpacks a Redis stream lives in, as far as
 * `~` trimming and XINFO STREAM can tell: XADD appends to the last node until
 * it has taken MS_NODE_ENTRIES entries (deleted ones count), and a node goes
 * when its last live entry goes. Redis also closes a node at 4 KB of
 * listpack; that is not modelled, so with big entries the memory broker's
 * nodes hold more than a server's. */
#define MS_NODE_ENTRIES 100
struct ms_node {
  uint64_t no;   /* ms_entry.node of its entries */
  msid last;     /* the last id appended to it, deleted or not */
  size_t fill;   /* entries appended to it, deleted ones included */
};

struct ms_consumer {
  char *name;
  size_t len;
  uint64_t seen_time;   /* last read or claim attempt (7.0: last one served) */
  int64_t active_time;  /* last read or claim that delivered something; -1 never */
};

struct ms_nack {
  msid id;
  struct ms_consumer *owner;
  uint64_t delivery_time; /* Unix ms */
  uint64_t delivery_count;
};

struct ms_group {
  char *name;
  size_t len;
  msid last_id;
  long long entries_read;  /* -1: invalid (shown as nil) */
  struct ms_nack *pel;     /* sorted by id */
  size_t npel, pelcap;
  struct ms_consumer **cons; /* sorted by name */
  size_t ncons, conscap;
};

struct ms_stream {
  char *key;
  size_t keylen;
  struct ms_entry **e;     /* sorted by id */
  size_t n, cap;
  struct ms_node *nodes;   /* the nodes holding live entries, oldest first */
  size_t nnodes, nodecap;
  uint64_t node_seq;       /* the last node number given out */
  msid last_id;            /* highest id ever generated */
  msid max_deleted;        /* highest id removed by XDEL (not by trimming) */
  uint64_t entries_added;
  struct ms_group **groups; /* sorted by name */
  size_t ngroups, gcap;
};

/* A sorted-set member: binary-safe bytes and a score (never NaN). */
struct ms_zmember {
  double score;
  char *m;   /* NUL-terminated copy */
  size_t len;
};

struct ms_zset {
  char *key;
  size_t keylen;
  struct ms_zmember *v; /* sorted by score, then member (memcmp, shorter first) */
  size_t n, cap;        /* n > 0: a set that empties is deleted */
};

/* A string key (memstring.c): the only type that can expire here. */
struct ms_string {
  char *key;
  size_t keylen;
  char *val;
  size_t vlen;
  uint64_t expire_at; /* Unix ms; 0: never */
};

enum ms_type { MS_NONE, MS_STREAM, MS_ZSET, MS_STRING };

struct memdb {
  struct ms_stream **keys; /* sorted by name */
  size_t nkeys, cap;
  struct ms_zset **zsets;  /* sorted by name; no name is in two arrays */
  size_t nzsets, zcap;
  struct ms_string **strs; /* sorted by name */
  size_t nstrs, strcap;
  long version;            /* bk_version_parse form: 80400 for 8.4.0 */
  char version_text[32];
  /* Keys whose blocked readers must look again (XADD, DEL, XGROUP DESTROY),
   * in signal order, no duplicates. broker_memory drains it. */
  char **sig;
  size_t *siglen;
  size_t nsig, sigcap;
};

#define MS_V72(db) ((db)->version >= 70200)
#define MS_V74(db) ((db)->version >= 70400)
#define MS_V80(db) ((db)->version >= 80000)
#define MS_V84(db) ((db)->version >= 80400)

/* What an XREADGROUP that wants to block leaves in the call. */
struct ms_block {
  long long timeout_ms;  /* 0: forever */
  long long claim_ms;    /* CLAIM min-idle-time (8.4), -1 without */
  int first_key, nkeys;  /* the keys it waits on: argv[first_key ...] */
};

/* One command invocation. */
struct ms_call {
  int argc;
  const char **argv;
  const size_t *argvlen;
  uint64_t now;          /* Unix ms, one reading per command */
  bool script;           /* from EVAL: never blocks */
  bool multi;            /* inside EXEC: never blocks */
  bool blocked;          /* out: XREADGROUP returned NULL to block */
  struct ms_block block; /* out: valid when blocked */
};

typedef bk_reply *ms_cmd_fn(struct memdb *db, struct ms_call *c);

void memdb_init(struct memdb *db, const char *version);
void memdb_set_version(struct memdb *db, const char *version);
void memdb_free(struct memdb *db);
/* Returns the oldest signaled key (owned by the caller, free it) or NULL. */
char *memdb_pop_signal(struct memdb *db, size_t *len);

/* ---- commands ---- */

ms_cmd_fn ms_cmd_xadd, ms_cmd_xlen, ms_cmd_xrange, ms_cmd_xrevrange, ms_cmd_xdel, ms_cmd_xtrim,
    ms_cmd_del, ms_cmd_exists, ms_cmd_flushall;
ms_cmd_fn ms_cmd_xgroup, ms_cmd_xack, ms_cmd_xpending, ms_cmd_xclaim, ms_cmd_xautoclaim,
    ms_cmd_xinfo;
ms_cmd_fn ms_cmd_xreadgroup;
ms_cmd_fn ms_cmd_type;
ms_cmd_fn ms_cmd_get, ms_cmd_set, ms_cmd_pexpire, ms_cmd_pttl;
ms_cmd_fn ms_cmd_zadd, ms_cmd_zrem, ms_cmd_zcard, ms_cmd_zscore, ms_cmd_zrange,
    ms_cmd_zrangebyscore;

/* XINFO STREAM (memstream.c; XINFO dispatches from memgroup.c). */
bk_reply *ms_xinfo_stream(struct memdb *db, struct ms_call *c);

/* A blocked XREADGROUP on 7.0 woken because `key` (argv index keyidx) was
 * signaled: serves only that stream, as 7.0 does. NULL: keep blocking. */
bk_reply *ms_xreadgroup_wake70(struct memdb *db, struct ms_call *c, int keyidx);
/* 8.4 CLAIM: the Unix ms at which the earliest pending entry of the call's
 * streams turns claimable, or -1 if none will. */
int64_t ms_xreadgroup_claim_due(struct memdb *db, struct ms_call *c, long long claim_ms);

/* ---- shared helpers (memstream.c) for the other command files ---- */

int ms_idcmp(msid a, msid b);
bool ms_arg_is(const struct ms_call *c, int i, const char *word);
/* Redis' strict integer syntax (string2ll): no '+', no leading zeros. */
bool ms_parse_ll(const char *s, size_t len, long long *out);
/* Parses an ID. strict refuses "-" and "+"; a missing seq becomes
 * missing_seq. seq_star (may be NULL) accepts "ms-*" and reports it. */
bool ms_parse_id(const char *s, size_t len, msid *out, uint64_t missing_seq, bool strict,
                 bool *seq_star);
/* An interval bound: "(" makes it exclusive (then parsed strictly). */
bool ms_parse_range_id(const char *s, size_t len, msid *out, bool *excl, uint64_t missing_seq);
bool ms_id_incr(msid *id);
bool ms_id_decr(msid *id);

bk_reply *ms_err_syntax(void);
bk_reply *ms_err_int(void);
bk_reply *ms_err_badid(void);
bk_reply *ms_reply_id(msid id);
bk_reply *ms_reply_fields(const struct ms_entry *e);
bk_reply *ms_reply_entry(const struct ms_entry *e); /* [id, [f, v, ...]] */

/* memcmp order, a shorter string first on a common prefix. */
int ms_bytecmp(const char *a, size_t alen, const char *b, size_t blen);

/* What key holds: MS_NONE, MS_STREAM, MS_ZSET or MS_STRING. */
enum ms_type ms_key_type(struct memdb *db, const char *key, size_t len);
/* NULL when key holds `want` or nothing, else the WRONGTYPE error. */
bk_reply *ms_check_type(struct memdb *db, const char *key, size_t len, enum ms_type want);
bk_reply *ms_err_wrongtype(void);

struct ms_stream *ms_lookup(struct memdb *db, const char *key, size_t len);
/* Aborts if key holds a sorted set: callers check the type first. */
struct ms_stream *ms_create(struct memdb *db, const char *key, size_t len);
void ms_signal(struct memdb *db, const char *key, size_t len);
/* Index of the first entry whose id is >= id (s->n if none). */
size_t ms_lower_bound(const struct ms_stream *s, msid id);
struct ms_entry *ms_find_entry(const struct ms_stream *s, msid id);
msid ms_first_id(const struct ms_stream *s);     /* 0-0 when empty */
msid ms_last_valid_id(const struct ms_stream *s); /* 0-0 when empty */

/* The sorted-set keyspace (memzset.c). */
struct ms_zset *ms_zset_lookup(struct memdb *db, const char *key, size_t len);
int ms_zset_delete(struct memdb *db, const char *key, size_t len); /* 1 if it was there */

/* The string keyspace (memstring.c). */
struct ms_string *ms_string_lookup(struct memdb *db, const char *key, size_t len);
int ms_string_delete(struct memdb *db, const char *key, size_t len); /* 1 if it was there */
/* Removes the keys whose time to live has run out at `now` (Unix ms). */
void memstring_expire(struct memdb *db, uint64_t now);
void memstring_free_all(struct memdb *db);

/* Group internals shared by memgroup.c and memread.c (memgroup.c). */
struct ms_group *ms_group_find(struct ms_stream *s, const char *name, size_t len);
struct ms_consumer *ms_consumer_find(struct ms_group *g, const char *name, size_t len);
struct ms_consumer *ms_consumer_get(struct ms_group *g, const char *name, size_t len,
                                    uint64_t now); /* creates it */
struct ms_nack *ms_nack_find(struct ms_group *g, msid id);
struct ms_nack *ms_nack_add(struct ms_group *g, msid id); /* zeroed, owner NULL */
void ms_nack_del(struct ms_group *g, struct ms_nack *n);
void ms_group_free(struct ms_group *g);
/* Advances the group's last_id and entries_read past a delivered id. */
void ms_group_delivered(struct ms_stream *s, struct ms_group *g, msid id);

#endif
