/* held: the entries held in a lane or a handler (see held.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "held.h"

static bool empty(const struct held_id *slot) { return slot->id[0] == '\0'; }

/* FNV-1a over the key and the id. */
static size_t hash(unsigned char key, const char *id) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ key) * 1099511628211ull;
  for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = (h ^ *p) * 1099511628211ull;
  return (size_t)h;
}

/* The slot holding key and id, or the empty slot where they would go. */
static size_t find(const struct held *h, unsigned char key, const char *id) {
  size_t mask = h->cap - 1, i = hash(key, id) & mask;
  while (!empty(&h->slots[i]) && (h->slots[i].key != key || strcmp(h->slots[i].id, id) != 0))
    i = (i + 1) & mask;
  return i;
}

/* The id as held: ids are parsed as ms-seq, so shorter than HELD_ID_MAX. */
static void held_id_set(struct held_id *dst, const struct entry *e) {
  size_t n = strlen(e->id);
  if (n >= HELD_ID_MAX) n = HELD_ID_MAX - 1;
  memcpy(dst->id, e->id, n);
  dst->id[n] = '\0';
  dst->key = e->key;
  dst->running = dst->overran = false;
  dst->started_ms = 0;
}

bool held_has(const struct held *h, const struct entry *e) {
  if (h->n == 0) return false;
  struct held_id want;
  held_id_set(&want, e);
  return !empty(&h->slots[find(h, want.key, want.id)]);
}

/* Twice the slots (64 at first), every held id moved to its place there. */
static bool rehash(struct held *h) {
  size_t cap = h->cap ? h->cap * 2 : 64;
  struct held_id *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return false;
  struct held bigger = {slots, 0, cap};
  for (size_t i = 0; i < h->cap; i++)
    if (!empty(&h->slots[i])) {
      bigger.slots[find(&bigger, h->slots[i].key, h->slots[i].id)] = h->slots[i];
      bigger.n++;
    }
  free(h->slots);
  *h = bigger;
  return true;
}

bool held_add(struct held *h, const struct entry *e) {
  /* at most half full, so that probes stay short */
  if ((h->n + 1) * 2 > h->cap && !rehash(h)) return false;
  struct held_id id;
  held_id_set(&id, e);
  struct held_id *slot = &h->slots[find(h, id.key, id.id)];
  if (empty(slot)) {
    *slot = id;
    h->n++;
  }
  return true;
}

void held_started(struct held *h, const struct entry *e, uint64_t now_ms) {
  if (h->n == 0) return;
  struct held_id id;
  held_id_set(&id, e);
  struct held_id *slot = &h->slots[find(h, id.key, id.id)];
  if (empty(slot)) return;
  slot->running = true;
  slot->started_ms = now_ms;
}

void held_remove(struct held *h, const struct entry *e) {
  if (h->n == 0) return;
  struct held_id id;
  held_id_set(&id, e);
  size_t mask = h->cap - 1, i = find(h, id.key, id.id);
  if (empty(&h->slots[i])) return;
  h->n--;
  /* Backward shift: move up each later entry of the run whose home slot
   * does not lie after the hole (cyclically), so every lookup still finds
   * it without tombstones. */
  for (size_t j = (i + 1) & mask; !empty(&h->slots[j]); j = (j + 1) & mask) {
    size_t home = hash(h->slots[j].key, h->slots[j].id) & mask;
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    h->slots[i] = h->slots[j];
    i = j;
  }
  h->slots[i].id[0] = '\0';
}

void held_free(struct held *h) {
  free(h->slots);
  h->slots = NULL;
  h->n = h->cap = 0;
}
