/* key_table: byte-compared keys to small stable ids, without allocating per
 * key (see key_table.h).
 *
 * Slots hold id + 1 so that zeroed memory is an empty table. A key's probe
 * starts at hash & mask and walks forward; removal shifts later entries of the
 * same run back (no tombstones), so a lookup stops at the first empty slot and
 * a table that sees keys come and go forever never degrades. The slot array
 * is at least twice the ids, so runs stay short. Stored hashes let a probe
 * skip most other keys without comparing bytes, and let removal and growth
 * place keys without reading their bytes. */
#include "key_table.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a over the key bytes, then a murmur3-style finalizer: FNV-1a's
 * multiply only carries upwards, so without it the low bits (those the mask
 * keeps) would depend only on the low bits of each byte. */
uint64_t key_table_hash(const char *key, size_t len) {
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)key[i];
    h *= 0x100000001b3u;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53u;
  h ^= h >> 33;
  return h;
}

static size_t slots_for(size_t cap) {
  size_t n = 8;
  while (n < cap * 2) n *= 2;
  return n;
}

/* Puts id in the first empty slot of its probe run. */
static void place(uint32_t *slot, size_t mask, const struct key_rec *rec, int id) {
  size_t i = (size_t)rec[id].hash & mask;
  while (slot[i]) i = (i + 1) & mask;
  slot[i] = (uint32_t)id + 1;
}

int key_table_init(struct key_table *t, size_t cap) {
  *t = (struct key_table){0};
  if (cap < 1 || cap > UINT32_MAX / 4) return -1;
  size_t nslots = slots_for(cap);
  t->rec = calloc(cap, sizeof *t->rec);
  t->slot = calloc(nslots, sizeof *t->slot);
  if (!t->rec || !t->slot) {
    free(t->rec);
    free(t->slot);
    *t = (struct key_table){0};
    return -1;
  }
  t->cap = cap;
  t->mask = nslots - 1;
  for (size_t i = 0; i < cap; i++) t->rec[i].next_free = i + 1 < cap ? (int)(i + 1) : -1;
  t->free_id = 0;
  return 0;
}

int key_table_grow(struct key_table *t, size_t cap) {
  if (cap <= t->cap || cap > UINT32_MAX / 4) return -1;
  size_t nslots = slots_for(cap);
  uint32_t *slot = calloc(nslots, sizeof *slot);
  struct key_rec *rec = slot ? realloc(t->rec, cap * sizeof *rec) : NULL;
  if (!rec) {
    free(slot);
    return -1;
  }
  t->rec = rec;
  /* New ids join the free list in front, in order. */
  for (size_t i = t->cap; i < cap; i++)
    rec[i] = (struct key_rec){.next_free = i + 1 < cap ? (int)(i + 1) : t->free_id};
  t->free_id = (int)t->cap;
  /* Rehash the keys in use: every old slot's id, found without its bytes. */
  for (size_t i = 0; i <= t->mask; i++)
    if (t->slot[i]) place(slot, nslots - 1, rec, (int)t->slot[i] - 1);
  free(t->slot);
  t->slot = slot;
  t->mask = nslots - 1;
  t->cap = cap;
  return 0;
}

void key_table_free(struct key_table *t) {
  free(t->rec);
  free(t->slot);
  *t = (struct key_table){0};
}

int key_table_find(const struct key_table *t, const char *key, size_t len) {
  if (!t->slot) return -1;
  uint64_t h = key_table_hash(key, len);
  for (size_t i = (size_t)h & t->mask; t->slot[i]; i = (i + 1) & t->mask) {
    const struct key_rec *r = &t->rec[t->slot[i] - 1];
    if (r->hash == h && r->len == len && memcmp(r->key, key, len) == 0) return (int)t->slot[i] - 1;
  }
  return -1;
}

int key_table_add(struct key_table *t, const char *key, size_t len) {
  int id = t->free_id;
  if (id < 0) return -1;
  t->free_id = t->rec[id].next_free;
  t->rec[id] =
      (struct key_rec){.key = key, .len = len, .hash = key_table_hash(key, len), .next_free = -1};
  place(t->slot, t->mask, t->rec, id);
  t->count++;
  return id;
}

void key_table_remove(struct key_table *t, int id) {
  size_t mask = t->mask, i = (size_t)t->rec[id].hash & mask, steps = 0;
  while (t->slot[i] != (uint32_t)id + 1) {
    /* An id not in the table is a caller bug: stop rather than loop forever. */
    assert(t->slot[i] && steps <= mask);
    if (!t->slot[i] || steps++ > mask) return;
    i = (i + 1) & mask;
  }
  /* Backward shift: a later entry of the run moves into the hole when the
   * hole lies on its probe path (between its home slot and where it is). */
  for (size_t j = (i + 1) & mask; t->slot[j]; j = (j + 1) & mask) {
    size_t home = (size_t)t->rec[t->slot[j] - 1].hash & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      t->slot[i] = t->slot[j];
      i = j;
    }
  }
  t->slot[i] = 0;
  t->rec[id] = (struct key_rec){.next_free = t->free_id};
  t->free_id = id;
  t->count--;
}
