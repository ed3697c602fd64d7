/* db: the keyspace, its types, expiry and signals (see db.h). */
#include "db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "group.h"
#include "memreply.h"

void memdb_init(struct memdb *db, const char *version) {
  memset(db, 0, sizeof *db);
  memdb_set_version(db, version);
}

void memdb_set_version(struct memdb *db, const char *version) {
  if (version == NULL) version = "8.4.0";
  snprintf(db->version_text, sizeof db->version_text, "%s", version);
  db->version = bk_version_parse(version, strlen(version));
}

static void value_free(struct ms_key *k) {
  switch (k->type) {
    case MS_STREAM:
      ms_groups_free(k->v.stream);
      ms_stream_free(k->v.stream);
      break;
    case MS_ZSET: ms_zset_free(k->v.zset); break;
    case MS_STRING:
      free(k->v.str->val);
      free(k->v.str);
      break;
    case MS_HASH: ms_hash_free(k->v.hash); break;
    case MS_SET: ms_set_free(k->v.set); break;
    case MS_LIST: ms_list_free(k->v.list); break;
    case MS_NONE: break;
  }
  free(k->name);
}

void memdb_free(struct memdb *db) {
  for (size_t i = 0; i < db->nkeys; i++) value_free(&db->keys[i]);
  for (size_t i = 0; i < db->nsig; i++) free(db->sig[i]);
  free(db->keys);
  free(db->sig);
  free(db->siglen);
  memset(db, 0, sizeof *db);
}

/* Index of key, or of where it would go (*found = false). */
static size_t key_slot(const struct memdb *db, const char *key, size_t len, bool *found) {
  size_t lo = 0, hi = db->nkeys;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = ms_bytecmp(db->keys[mid].name, db->keys[mid].len, key, len);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

static struct ms_key *find(struct memdb *db, const char *key, size_t len) {
  bool found;
  size_t i = key_slot(db, key, len, &found);
  return found ? &db->keys[i] : NULL;
}

enum ms_type ms_key_type(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find(db, key, len);
  return k ? k->type : MS_NONE;
}

const char *ms_type_name(enum ms_type t) {
  static const char *const names[] = {"none", "stream", "zset", "string", "hash", "set", "list"};
  return names[t];
}

bk_reply *ms_check_type(struct memdb *db, const char *key, size_t len, enum ms_type want) {
  enum ms_type t = ms_key_type(db, key, len);
  return t == MS_NONE || t == want ? NULL : ms_err_wrongtype();
}

static struct ms_key *find_typed(struct memdb *db, const char *key, size_t len, enum ms_type want) {
  struct ms_key *k = find(db, key, len);
  return k && k->type == want ? k : NULL;
}

struct ms_stream *ms_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_STREAM);
  return k ? k->v.stream : NULL;
}

struct ms_zset *ms_zset_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_ZSET);
  return k ? k->v.zset : NULL;
}

struct ms_string *ms_string_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_STRING);
  return k ? k->v.str : NULL;
}

struct ms_hash *ms_hash_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_HASH);
  return k ? k->v.hash : NULL;
}

struct ms_set *ms_set_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_SET);
  return k ? k->v.set : NULL;
}

struct ms_list *ms_list_lookup(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find_typed(db, key, len, MS_LIST);
  return k ? k->v.list : NULL;
}

/* The key of that type, created empty if absent. */
static struct ms_key *create(struct memdb *db, const char *key, size_t len, enum ms_type type) {
  bool found;
  size_t i = key_slot(db, key, len, &found);
  if (found) {
    if (db->keys[i].type == type) return &db->keys[i];
    fprintf(stderr, "memredis: key '%.*s' created over another type\n", (int)len, key);
    abort();
  }
  if (db->nkeys == db->cap) {
    db->cap = db->cap ? db->cap * 2 : 8;
    db->keys = mr_realloc(db->keys, db->cap * sizeof *db->keys);
  }
  memmove(db->keys + i + 1, db->keys + i, (db->nkeys - i) * sizeof *db->keys);
  db->nkeys++;
  struct ms_key *k = &db->keys[i];
  k->name = mr_memdup(key, len);
  k->len = len;
  k->type = type;
  k->expire_at = 0;
  if (type == MS_STREAM)
    k->v.stream = ms_stream_new();
  else if (type == MS_ZSET)
    k->v.zset = ms_zset_new();
  else if (type == MS_HASH)
    k->v.hash = ms_hash_new();
  else if (type == MS_SET)
    k->v.set = ms_set_new();
  else if (type == MS_LIST)
    k->v.list = ms_list_new();
  else
    k->v.str = mr_alloc(sizeof *k->v.str);
  return k;
}

struct ms_stream *ms_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_STREAM)->v.stream;
}

struct ms_zset *ms_zset_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_ZSET)->v.zset;
}

struct ms_string *ms_string_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_STRING)->v.str;
}

struct ms_hash *ms_hash_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_HASH)->v.hash;
}

struct ms_set *ms_set_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_SET)->v.set;
}

struct ms_list *ms_list_create(struct memdb *db, const char *key, size_t len) {
  return create(db, key, len, MS_LIST)->v.list;
}

int ms_key_delete(struct memdb *db, const char *key, size_t len) {
  bool found;
  size_t i = key_slot(db, key, len, &found);
  if (!found) return 0;
  /* blocked readers learn the key is gone */
  if (db->keys[i].type == MS_STREAM) ms_signal(db, key, len);
  value_free(&db->keys[i]);
  memmove(db->keys + i, db->keys + i + 1, (db->nkeys - i - 1) * sizeof *db->keys);
  db->nkeys--;
  return 1;
}

void ms_flush(struct memdb *db) {
  while (db->nkeys) ms_key_delete(db, db->keys[0].name, db->keys[0].len); /* signals in key order */
}

void ms_expire(struct memdb *db, uint64_t now) {
  /* Runs before every command: the keyspace is walked only when a time to
   * live may have run out. */
  if (db->next_expire == 0 || now < db->next_expire) return;
  uint64_t next = 0;
  for (size_t i = 0; i < db->nkeys;) {
    struct ms_key *k = &db->keys[i];
    if (k->expire_at && k->expire_at <= now) {
      ms_key_delete(db, k->name, k->len);
      continue;
    }
    if (k->expire_at && (next == 0 || k->expire_at < next)) next = k->expire_at;
    i++;
  }
  db->next_expire = next;
}

uint64_t ms_key_expire_at(struct memdb *db, const char *key, size_t len) {
  struct ms_key *k = find(db, key, len);
  return k ? k->expire_at : 0;
}

bool ms_key_set_expire(struct memdb *db, const char *key, size_t len, uint64_t at) {
  struct ms_key *k = find(db, key, len);
  if (k == NULL) return false;
  k->expire_at = at;
  if (at && (db->next_expire == 0 || at < db->next_expire)) db->next_expire = at;
  return true;
}

void ms_signal(struct memdb *db, const char *key, size_t len) {
  for (size_t i = 0; i < db->nsig; i++)
    if (ms_bytecmp(db->sig[i], db->siglen[i], key, len) == 0) return;
  if (db->nsig == db->sigcap) {
    db->sigcap = db->sigcap ? db->sigcap * 2 : 8;
    db->sig = mr_realloc(db->sig, db->sigcap * sizeof *db->sig);
    db->siglen = mr_realloc(db->siglen, db->sigcap * sizeof *db->siglen);
  }
  db->sig[db->nsig] = mr_memdup(key, len);
  db->siglen[db->nsig++] = len;
}

char *memdb_pop_signal(struct memdb *db, size_t *len) {
  if (db->nsig == 0) return NULL;
  char *k = db->sig[0];
  *len = db->siglen[0];
  db->nsig--;
  memmove(db->sig, db->sig + 1, db->nsig * sizeof *db->sig);
  memmove(db->siglen, db->siglen + 1, db->nsig * sizeof *db->siglen);
  return k;
}
