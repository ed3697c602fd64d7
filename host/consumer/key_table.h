/* key_table: the partition keys that have entries in the lanes, each given a
 * small id while it is there.
 *
 * Keys are compared by their bytes (length and memcmp), never by hash alone:
 * two keys whose hashes collide get two ids. The table does not copy keys: it
 * points at bytes the caller keeps alive while the key is in the table (in
 * the lanes, those of an entry with that key; key_table_rebind moves the
 * pointer to another copy of the same bytes). Ids are 0 .. cap-1 and stay put
 * while their key is in the table. Open addressing with linear probing over a
 * slot array at least twice the capacity, sized once (key_table_init, and
 * key_table_grow should more keys ever be needed): adding and removing never
 * allocate. No I/O; it calls nothing of the consumer layer. */
#ifndef LUASTREAM_KEY_TABLE_H
#define LUASTREAM_KEY_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct key_rec {
  const char *key; /* the caller's bytes, not a copy */
  size_t len;
  uint64_t hash;
  int next_free; /* the free list's link while the id is unused */
};

struct key_table {
  struct key_rec *rec; /* indexed by id */
  uint32_t *slot;      /* id + 1, or 0 for an empty slot */
  size_t cap;          /* ids available */
  size_t mask;         /* slot count - 1 (a power of two) */
  size_t count;        /* keys in the table */
  int free_id;         /* first unused id, or -1 */
};

/* Room for cap keys. Returns 0, or -1 when cap < 1 or out of memory (t is then
 * zeroed). */
int key_table_init(struct key_table *t, size_t cap);
/* Room for cap keys (more than now); ids in use keep their id. Returns 0, or -1
 * out of memory (the table is unchanged). */
int key_table_grow(struct key_table *t, size_t cap);
void key_table_free(struct key_table *t);

/* The id of key (len bytes), or -1 when it is not in the table. */
int key_table_find(const struct key_table *t, const char *key, size_t len);
/* Adds key, which must not be in the table yet; returns its id, or -1 when the
 * table is full. */
int key_table_add(struct key_table *t, const char *key, size_t len);
/* Removes the key with this id, which must be in the table (its bytes are not
 * read: they may be gone). */
void key_table_remove(struct key_table *t, int id);
/* The key of id now lives at `key` (the same bytes, another copy). */
static inline void key_table_rebind(struct key_table *t, int id, const char *key) {
  t->rec[id].key = key;
}

/* The hash the table uses: stable across runs and hosts. */
uint64_t key_table_hash(const char *key, size_t len);

#endif
