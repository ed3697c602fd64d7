/* db: the keyspace of the in-memory server. One array of keys sorted by
 * name, each {name, type, value, expire_at}: a stream (stream.h), a sorted
 * set (zset.h), a hash (hash.h), a set (set.h), a list (list.h) or a string
 * (here). Every command finds its keys here; a command on a key of another
 * type answers WRONGTYPE (ms_check_type). A key of any type may carry a time
 * to live, on the broker's (virtual) wall clock: ms_expire removes the keys
 * whose time has come, and broker_memory calls it before every command, so
 * an expired key is gone for every command from its expiry on, as on a
 * server. The db also carries the version the server behaves as and the
 * keys whose blocked readers must look again. */
#ifndef LUASTREAM_MEMREDIS_DB_H
#define LUASTREAM_MEMREDIS_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "hash.h"
#include "list.h"
#include "set.h"
#include "stream.h"
#include "zset.h"

enum ms_type { MS_NONE, MS_STREAM, MS_ZSET, MS_STRING, MS_HASH, MS_SET, MS_LIST };

/* A string value. */
struct ms_string {
  char *val;
  size_t vlen;
};

struct ms_key {
  char *name;
  size_t len;
  enum ms_type type;
  union {
    struct ms_stream *stream;
    struct ms_zset *zset;
    struct ms_string *str;
    struct ms_hash *hash;
    struct ms_set *set;
    struct ms_list *list;
  } v;
  uint64_t expire_at; /* Unix ms; 0: never. Whatever the type. */
};

struct memdb {
  struct ms_key *keys; /* sorted by name */
  size_t nkeys, cap;
  uint64_t next_expire; /* no key expires before this (Unix ms); 0: none does */
  long version;         /* bk_version_parse form: 80400 for 8.4.0 */
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

/* version: "x.y.z", NULL for "8.4.0". */
void memdb_init(struct memdb *db, const char *version);
void memdb_set_version(struct memdb *db, const char *version);
void memdb_free(struct memdb *db);

/* What key holds: MS_NONE, MS_STREAM, MS_ZSET, MS_STRING ... */
enum ms_type ms_key_type(struct memdb *db, const char *key, size_t len);
/* The type's name as TYPE replies it: "none", "stream", "hash" ... */
const char *ms_type_name(enum ms_type t);
/* NULL when key holds `want` or nothing, else the WRONGTYPE error. */
bk_reply *ms_check_type(struct memdb *db, const char *key, size_t len, enum ms_type want);

/* The value if key holds that type, else NULL. */
struct ms_stream *ms_lookup(struct memdb *db, const char *key, size_t len);
struct ms_zset *ms_zset_lookup(struct memdb *db, const char *key, size_t len);
struct ms_string *ms_string_lookup(struct memdb *db, const char *key, size_t len);
struct ms_hash *ms_hash_lookup(struct memdb *db, const char *key, size_t len);
struct ms_set *ms_set_lookup(struct memdb *db, const char *key, size_t len);
struct ms_list *ms_list_lookup(struct memdb *db, const char *key, size_t len);
/* Finds or creates the value. Abort if key holds another type: callers
 * check the type first. */
struct ms_stream *ms_create(struct memdb *db, const char *key, size_t len);
struct ms_zset *ms_zset_create(struct memdb *db, const char *key, size_t len);
struct ms_string *ms_string_create(struct memdb *db, const char *key, size_t len);
struct ms_hash *ms_hash_create(struct memdb *db, const char *key, size_t len);
struct ms_set *ms_set_create(struct memdb *db, const char *key, size_t len);
struct ms_list *ms_list_create(struct memdb *db, const char *key, size_t len);

/* Deletes key, whatever it holds: 1 if it was there. A stream's blocked
 * readers are signaled. */
int ms_key_delete(struct memdb *db, const char *key, size_t len);
/* FLUSHALL. */
void ms_flush(struct memdb *db);
/* Removes the keys whose time to live has run out at `now` (Unix ms). */
void ms_expire(struct memdb *db, uint64_t now);
/* The key's expiry (Unix ms), 0 when it has none or there is no key. */
uint64_t ms_key_expire_at(struct memdb *db, const char *key, size_t len);
/* Sets (at > 0) or clears (at == 0) the key's expiry: false if there is no
 * key. A new key, or one replaced through ms_key_delete, has none. */
bool ms_key_set_expire(struct memdb *db, const char *key, size_t len, uint64_t at);

void ms_signal(struct memdb *db, const char *key, size_t len);
/* Returns the oldest signaled key (owned by the caller, free it) or NULL. */
char *memdb_pop_signal(struct memdb *db, size_t *len);

#endif
