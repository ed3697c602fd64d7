/* key_gate: see key_gate.h. */
#include <stdlib.h>
#include <string.h>

#include "key_gate.h"
#include "key_table.h"
#include "wire.h"

#define GATE_FIRST_KEYS 64

struct key_gate {
  struct key_table keys;
  struct gate_key *at; /* by key id, keys.cap of them */
  size_t waiting;
  gate_pass_fn *pass;
  void *data;
};

key_gate *gate_new(gate_pass_fn *pass, void *data) {
  key_gate *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->pass = pass;
  g->data = data;
  g->at = calloc(GATE_FIRST_KEYS, sizeof *g->at);
  if (g->at == NULL || key_table_init(&g->keys, GATE_FIRST_KEYS) != 0) {
    free(g->at);
    free(g);
    return NULL;
  }
  return g;
}

/* Room for one more key: the table and the array double together. */
static bool room(key_gate *g) {
  if (g->keys.count < g->keys.cap) return true;
  size_t cap = g->keys.cap * 2;
  struct gate_key *at = realloc(g->at, cap * sizeof *at);
  if (at == NULL) return false;
  memset(at + g->keys.cap, 0, (cap - g->keys.cap) * sizeof *at);
  g->at = at;
  return key_table_grow(&g->keys, cap) == 0;
}

bool gate_hold(key_gate *g, struct entry *e) {
  size_t len = 0;
  const char *key = entry_get(e, HDR_PARTITION_KEY, &len);
  if (key == NULL || len == 0) return false;
  int id = key_table_find(&g->keys, key, len);
  if (id < 0) {
    if (!room(g) || (id = key_table_add(&g->keys, key, len)) < 0) return false;
    g->at[id] = (struct gate_key){.key = key, .len = len};
  }
  struct gate_key *k = &g->at[id];
  e->next = NULL;
  if (k->tail)
    k->tail->next = e;
  else
    k->head = e;
  k->tail = e;
  k->n++;
  g->waiting++;
  return true;
}

size_t gate_waiting(const key_gate *g) { return g->waiting; }

int gate_next_key(const key_gate *g, int from) {
  for (size_t id = from < 0 ? 0 : (size_t)from; id < g->keys.cap; id++)
    if (g->at[id].head) return (int)id;
  return -1;
}

struct gate_key *gate_key_at(key_gate *g, int id) {
  return &g->at[id];
}

/* Takes the first entry of key id off its queue; the key leaves with its
 * last, and otherwise now points at the new head's bytes. */
static struct entry *shift(key_gate *g, int id) {
  struct gate_key *k = &g->at[id];
  struct entry *e = k->head;
  k->head = e->next;
  e->next = NULL;
  k->n--;
  g->waiting--;
  if (k->head == NULL) {
    key_table_remove(&g->keys, id);
    *k = (struct gate_key){0};
  } else {
    k->key = entry_get(k->head, HDR_PARTITION_KEY, &k->len);
    key_table_rebind(&g->keys, id, k->key);
  }
  return e;
}

void gate_release(key_gate *g, int id, size_t n) {
  /* The key's bytes belong to its head entry: the next head's are bound
   * before the entry passes (and may be freed). */
  while (n-- > 0 && g->at[id].head) g->pass(g->data, shift(g, id));
}

struct entry *gate_drain(key_gate *g, struct entry *list) {
  struct entry **end = &list;
  while (*end) end = &(*end)->next;
  for (int id = gate_next_key(g, 0); id >= 0; id = gate_next_key(g, id + 1)) {
    struct gate_key *k = &g->at[id];
    *end = k->head;
    end = &k->tail->next;
    g->waiting -= k->n;
    key_table_remove(&g->keys, id);
    *k = (struct gate_key){0};
  }
  return list;
}

void gate_free(key_gate *g) {
  if (g == NULL) return;
  struct entry *left = gate_drain(g, NULL);
  while (left) {
    struct entry *e = left;
    left = e->next;
    entry_free(e);
  }
  key_table_free(&g->keys);
  free(g->at);
  free(g);
}
