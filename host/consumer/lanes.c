/* lanes: per-key ordered scheduling of entries onto N workers.
 *
 * Every entry pushed becomes a job, taken from a preallocated array (sized
 * from the most entries the caller holds; doubled only if ever short), so
 * push, pop and done allocate nothing in steady state. Lists are of job
 * indices, linked through job->next.
 *
 * One ready FIFO holds the jobs that may start now. Without by_key, or
 * without a key, a job is ready at once. With by_key, at most one job per key
 * is ready or running: the key's later jobs wait in the key's own FIFO (found
 * through key_table, by the key's bytes) and the next one becomes ready, at
 * the ready FIFO's tail, when the one before it is done. That is what keeps
 * one key's entries in push order while leaving the key tied to no lane: its
 * next entry starts on whichever lane is free, and a key with a backlog takes
 * its turn behind the others instead of holding a lane. A key leaves the table
 * when its last job is done.
 *
 * The table points at the key bytes of the key's newest job (the one done
 * last); a drain, which lets the caller free queued entries, points it back at
 * the running job's.
 *
 * lanes_pop scans for a free lane starting at next_free and wrapping, so it is
 * O(n) in the worst case; after a pop the start moves past the chosen lane, so
 * work spreads over every lane in turn. */
#include "lanes.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "entry.h"

/* ---- job lists ---- */

static void list_append(struct lanes *l, int *head, int *tail, int j) {
  l->job[j].next = -1;
  if (*tail >= 0)
    l->job[*tail].next = j;
  else
    *head = j;
  *tail = j;
}

static int list_take(struct lanes *l, int *head, int *tail) {
  int j = *head;
  if (j < 0) return -1;
  *head = l->job[j].next;
  if (*head < 0) *tail = -1;
  l->job[j].next = -1;
  return j;
}

/* ---- the job array ---- */

/* Links jobs [from, to) into the free list, in order, in front of it. */
static void free_range(struct lanes *l, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    l->job[i] = (struct lane_job){.key_id = -1, .next = i + 1 < to ? (int)(i + 1) : l->free_job};
  if (from < to) l->free_job = (int)from;
}

/* Doubles the jobs, and the key ids with them (a key has at least one job).
 * Only a caller holding more than it said at init gets here. */
static int grow(struct lanes *l) {
  size_t cap = l->cap * 2;
  if (cap > INT32_MAX / 4) return -1;
  struct lane_job *job = realloc(l->job, cap * sizeof *job);
  if (!job) return -1;
  l->job = job;
  if (l->by_key) {
    struct lane_key *w = realloc(l->waiting, cap * sizeof *w);
    if (!w) return -1;
    l->waiting = w;
    if (key_table_grow(&l->keys, cap) != 0) return -1;
  }
  free_range(l, l->cap, cap);
  l->cap = cap;
  return 0;
}

static int job_new(struct lanes *l) {
  if (l->free_job < 0 && grow(l) != 0) return -1;
  int j = l->free_job;
  l->free_job = l->job[j].next;
  return j;
}

static void job_release(struct lanes *l, int j) {
  l->job[j] = (struct lane_job){.key_id = -1, .next = l->free_job};
  l->free_job = j;
}

/* ---- public API ---- */

int lanes_init(struct lanes *l, int n, bool by_key, size_t expected) {
  *l = (struct lanes){0};
  if (n <= 0) return -1;
  size_t cap = expected < (size_t)n ? (size_t)n : expected;
  if (cap > INT32_MAX / 4) return -1;
  l->n = n;
  l->by_key = by_key;
  l->free_job = l->ready_head = l->ready_tail = -1;
  l->on_lane = malloc((size_t)n * sizeof *l->on_lane);
  l->job = malloc(cap * sizeof *l->job);
  bool ok = l->on_lane && l->job;
  if (ok && by_key) {
    l->waiting = malloc(cap * sizeof *l->waiting);
    ok = l->waiting && key_table_init(&l->keys, cap) == 0;
  }
  if (!ok) {
    lanes_free(l);
    return -1;
  }
  for (int i = 0; i < n; i++) l->on_lane[i] = -1;
  l->cap = cap;
  free_range(l, 0, cap);
  return 0;
}

void lanes_free(struct lanes *l) {
  free(l->on_lane);
  free(l->job);
  free(l->waiting);
  key_table_free(&l->keys);
  *l = (struct lanes){0};
}

int lanes_push(struct lanes *l, struct entry *e, const char *key, size_t keylen) {
  int j = job_new(l);
  if (j < 0) return -1;
  struct lane_job *jb = &l->job[j];
  *jb = (struct lane_job){.e = e, .key = key, .keylen = keylen, .key_id = -1, .next = -1};
  l->queued++;
  if (l->by_key && key && keylen) {
    int k = key_table_find(&l->keys, key, keylen);
    if (k >= 0) {
      /* The key has a job ready or running: this one waits behind it. */
      jb->key_id = k;
      key_table_rebind(&l->keys, k, key);
      list_append(l, &l->waiting[k].head, &l->waiting[k].tail, j);
      return 0;
    }
    k = key_table_add(&l->keys, key, keylen); /* room: ids are as many as jobs */
    assert(k >= 0);
    jb->key_id = k;
    l->waiting[k] = (struct lane_key){-1, -1, 0};
  }
  list_append(l, &l->ready_head, &l->ready_tail, j);
  return 0;
}

/* Job j runs on the free lane i now. */
static struct entry *run_on(struct lanes *l, int i, int j, int *lane_out) {
  l->on_lane[i] = j;
  l->queued--;
  l->running++;
  int k = l->job[j].key_id;
  if (k >= 0) l->waiting[k].running++;
  l->next_free = i + 1 == l->n ? 0 : i + 1;
  if (lane_out) *lane_out = i;
  struct entry *e = l->job[j].e;
  e->next = NULL;
  return e;
}

struct entry *lanes_pop(struct lanes *l, int *lane_out) {
  /* Cheap exits for the "saturated", "idle" and "every queued key is running"
   * cases; the scan below would find nothing either way. */
  if (l->ready_head < 0 || l->running >= (size_t)l->n) return NULL;
  int start = l->next_free;
  for (int k = 0; k < l->n; k++) {
    int i = start + k;
    if (i >= l->n) i -= l->n;
    if (l->on_lane[i] >= 0) continue;
    int j = list_take(l, &l->ready_head, &l->ready_tail);
    return run_on(l, i, j, lane_out);
  }
  return NULL;
}

struct entry *lanes_pop_follow(struct lanes *l, int lane, int *lane_out) {
  if (lane < 0 || lane >= l->n || l->on_lane[lane] < 0 || l->running >= (size_t)l->n) return NULL;
  int k = l->job[l->on_lane[lane]].key_id;
  if (k < 0 || l->waiting[k].head < 0) return NULL;
  int start = l->next_free;
  for (int d = 0; d < l->n; d++) {
    int i = start + d;
    if (i >= l->n) i -= l->n;
    if (l->on_lane[i] >= 0) continue;
    return run_on(l, i, list_take(l, &l->waiting[k].head, &l->waiting[k].tail), lane_out);
  }
  return NULL;
}

void lanes_done(struct lanes *l, int lane) {
  /* A done for a lane that is not running is a caller bug; ignoring it keeps
   * the counters exact instead of letting `running` wrap around. */
  assert(lane >= 0 && lane < l->n && l->on_lane[lane] >= 0);
  if (lane < 0 || lane >= l->n || l->on_lane[lane] < 0) return;
  int j = l->on_lane[lane];
  l->on_lane[lane] = -1;
  l->running--;
  int k = l->job[j].key_id;
  if (k >= 0 && --l->waiting[k].running > 0) {
    /* Others of the key run beside it (lanes_pop_follow): the key waits for
     * them, and its bytes must be a live entry's, a running one's. */
    if (l->keys.rec[k].key == l->job[j].key)
      for (int i = 0; i < l->n; i++)
        if (l->on_lane[i] >= 0 && l->job[l->on_lane[i]].key_id == k) {
          key_table_rebind(&l->keys, k, l->job[l->on_lane[i]].key);
          break;
        }
    k = -1;
  }
  if (k >= 0) {
    /* The key's next job may start now, on any lane; with none, the key is
     * done here (its bytes are not read: the entry may be freed already). */
    int w = list_take(l, &l->waiting[k].head, &l->waiting[k].tail);
    if (w >= 0)
      list_append(l, &l->ready_head, &l->ready_tail, w);
    else
      key_table_remove(&l->keys, k);
  }
  job_release(l, j);
}

/* Appends j's entry to the drained list and frees the job. */
static void drain_one(struct lanes *l, struct entry **head, struct entry **tail, int j) {
  struct entry *e = l->job[j].e;
  e->next = NULL;
  if (*tail)
    (*tail)->next = e;
  else
    *head = e;
  *tail = e;
  job_release(l, j);
}

static void drain_waiting(struct lanes *l, struct entry **head, struct entry **tail, int k) {
  int w;
  while ((w = list_take(l, &l->waiting[k].head, &l->waiting[k].tail)) >= 0)
    drain_one(l, head, tail, w);
}

struct entry *lanes_drain_queued(struct lanes *l) {
  struct entry *head = NULL, *tail = NULL;
  /* Keys with a running job: what waits behind it, in order. The key stays
   * (the running job is done later) and points at that job's bytes again,
   * since the drained entries are about to be freed. */
  for (int i = 0; i < l->n; i++) {
    int j = l->on_lane[i];
    if (j < 0 || l->job[j].key_id < 0) continue;
    int k = l->job[j].key_id;
    drain_waiting(l, &head, &tail, k);
    key_table_rebind(&l->keys, k, l->job[j].key);
  }
  /* Ready jobs in order, each followed by the jobs of its key behind it. */
  int j;
  while ((j = list_take(l, &l->ready_head, &l->ready_tail)) >= 0) {
    int k = l->job[j].key_id;
    drain_one(l, &head, &tail, j);
    if (k >= 0) {
      drain_waiting(l, &head, &tail, k);
      key_table_remove(&l->keys, k);
    }
  }
  l->queued = 0;
  return head;
}
