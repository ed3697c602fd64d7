/* lanes: per-key ordered scheduling of entries onto N workers.
 *
 * Every queue is an intrusive singly linked list through entry->next, so push,
 * pop and done never allocate and cannot fail. A lane is a worker slot with its
 * own FIFO of keyed entries; `busy` is the "one at a time" guarantee: a lane's
 * keyed queue only advances when its running entry is reported done, which is
 * what keeps one key's entries in push order. Keyless entries (and, without
 * by_key, every entry) wait in the shared FIFO and take whichever lane is free.
 *
 * lanes_pop scans the lanes once, starting at next_free and wrapping, so it is
 * O(n) in the worst case; after a pop the start moves past the chosen lane, so
 * a lane that is always ready cannot keep the others waiting. */
#include "lanes.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "entry.h"

/* ---- list helpers ---- */

static void list_append(struct entry **head, struct entry **tail, struct entry *e) {
  e->next = NULL;
  if (*tail)
    (*tail)->next = e;
  else
    *head = e;
  *tail = e;
}

static struct entry *list_take(struct entry **head, struct entry **tail) {
  struct entry *e = *head;
  if (!e) return NULL;
  *head = e->next;
  if (!*head) *tail = NULL;
  e->next = NULL;
  return e;
}

/* Moves all of src to the end of dst; src becomes empty. */
static void list_splice(struct entry **dhead, struct entry **dtail, struct entry **shead,
                        struct entry **stail) {
  if (!*shead) return;
  if (*dtail)
    (*dtail)->next = *shead;
  else
    *dhead = *shead;
  *dtail = *stail;
  *shead = *stail = NULL;
}

/* ---- key hashing ---- */

/* FNV-1a over the key bytes, then a murmur3-style finalizer. The finalizer
 * matters: FNV-1a's multiply only carries upwards, so the low bits of a plain
 * FNV hash depend only on the low bits of each byte, and `% 8` would send keys
 * that differ only in a byte's high bits ("a" vs "q") to the same lane. The
 * constants are fixed, so a key maps to the same lane on every run and host. */
static uint64_t key_hash(const char *key, size_t keylen) {
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < keylen; i++) {
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

int lanes_key_lane(const struct lanes *l, const char *key, size_t keylen) {
  if (!key || keylen == 0 || l->n <= 0) return -1;
  return (int)(key_hash(key, keylen) % (uint64_t)l->n);
}

/* ---- public API ---- */

int lanes_init(struct lanes *l, int n, bool by_key) {
  *l = (struct lanes){0};
  if (n <= 0) return -1;
  l->lane = calloc((size_t)n, sizeof *l->lane);
  if (!l->lane) return -1;
  l->n = n;
  l->by_key = by_key;
  return 0;
}

void lanes_free(struct lanes *l) {
  free(l->lane);
  *l = (struct lanes){0};
}

void lanes_push(struct lanes *l, struct entry *e, const char *key, size_t keylen) {
  int i = l->by_key ? lanes_key_lane(l, key, keylen) : -1;
  if (i >= 0)
    list_append(&l->lane[i].head, &l->lane[i].tail, e);
  else
    list_append(&l->shared_head, &l->shared_tail, e);
  l->queued++;
}

struct entry *lanes_pop(struct lanes *l, int *lane_out) {
  /* Cheap exits for the common "saturated" and "idle" cases; the scan below
   * would find nothing either way. */
  if (l->queued == 0 || l->running >= (size_t)l->n) return NULL;
  int start = l->next_free;
  for (int k = 0; k < l->n; k++) {
    int i = start + k;
    if (i >= l->n) i -= l->n;
    struct lane *ln = &l->lane[i];
    if (ln->busy) continue;
    /* Own keyed queue first: those entries can run nowhere else, while a
     * shared entry could be taken by any other free lane. */
    struct entry *e = list_take(&ln->head, &ln->tail);
    if (!e) e = list_take(&l->shared_head, &l->shared_tail);
    if (!e) continue;
    ln->busy = true;
    l->queued--;
    l->running++;
    l->next_free = i + 1 == l->n ? 0 : i + 1;
    if (lane_out) *lane_out = i;
    return e;
  }
  return NULL;
}

void lanes_done(struct lanes *l, int lane) {
  /* A done for a lane that is not running is a caller bug; ignoring it keeps
   * the counters exact instead of letting `running` wrap around. */
  assert(lane >= 0 && lane < l->n && l->lane[lane].busy);
  if (lane < 0 || lane >= l->n || !l->lane[lane].busy) return;
  l->lane[lane].busy = false;
  l->running--;
}

struct entry *lanes_drain_queued(struct lanes *l) {
  /* Lane queues in lane order, then the shared queue: each key's entries stay
   * in push order within the list; order across keys is not kept. */
  struct entry *head = NULL, *tail = NULL;
  for (int i = 0; i < l->n; i++) list_splice(&head, &tail, &l->lane[i].head, &l->lane[i].tail);
  list_splice(&head, &tail, &l->shared_head, &l->shared_tail);
  l->queued = 0;
  return head;
}
