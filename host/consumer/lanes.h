/* lanes: per-key ordered scheduling of entries onto N workers.
 *
 * With by_key, entries that share a partition key run one at a time, in the
 * order they were pushed; a key is tied to a lane only while one of its
 * entries runs there, and its next entry may start on any free lane. Entries
 * without a key, and every entry without by_key, run on any free lane: up to N
 * at once, in any order. No I/O, no Lua, no time: callers push, pop runnable
 * work, and report completion. */
#ifndef LUASTREAM_LANES_H
#define LUASTREAM_LANES_H

#include <stdbool.h>
#include <stddef.h>

#include "key_table.h"

struct entry;

/* An entry in the lanes, with the key bytes it was pushed with (they belong to
 * the entry and live as long as it does). */
struct lane_job {
  struct entry *e;
  const char *key;
  size_t keylen;
  int key_id; /* in `keys`, or -1 for no key */
  int next;   /* the list the job is in, or the free list; -1 ends it */
};

/* The entries of one key waiting for the one now ready or running, and
 * how many of its entries run (more than one only through lanes_pop_follow). */
struct lane_key {
  int head, tail;
  int running;
};

struct lanes {
  int n; /* number of lanes (workers) */
  bool by_key;
  int *on_lane;         /* per lane: the job it runs, or -1 when free */
  struct lane_job *job; /* preallocated; grows only if ever short */
  size_t cap;           /* jobs (and key ids) allocated */
  int free_job;
  int ready_head, ready_tail; /* jobs that may start now, in the order they became ready */
  struct lane_key *waiting;   /* by key id */
  struct key_table keys;      /* keys with a job ready, running or waiting */
  size_t queued;              /* entries pushed and not yet popped */
  size_t running;             /* entries popped and not yet done */
  int next_free;              /* where the search for a free lane starts (fairness) */
};

/* `expected`: the most entries the caller holds in the lanes at once; jobs and
 * keys are allocated for that many up front, so push never allocates up to
 * there (beyond it, the tables double). Returns 0, or -1 when n < 1 or out of
 * memory (l is then zeroed). */
int lanes_init(struct lanes *l, int n, bool by_key, size_t expected);
void lanes_free(struct lanes *l); /* entries still queued are not freed */

/* Queues e. key may be NULL or empty for no key; with by_key, its bytes must
 * stay valid until e is done or drained (an entry's own header does). Returns
 * 0, or -1 out of memory (only when more than `expected` are held; e is then
 * not queued). */
int lanes_push(struct lanes *l, struct entry *e, const char *key, size_t keylen);

/* Takes the next entry that may run now and marks a free lane busy with it;
 * returns NULL when nothing can run. *lane_out receives the lane to pass to
 * lanes_done. */
struct entry *lanes_pop(struct lanes *l, int *lane_out);

/* With by_key, takes the next entry of the key of the entry running on
 * `lane`, which then runs beside it (a call of handle_batch holding several
 * entries of one key, in order), onto a free lane; NULL when the key has
 * none waiting, the entry no key, or no lane is free. The key's next entry
 * after these becomes ready only once all of them are done. */
struct entry *lanes_pop_follow(struct lanes *l, int lane, int *lane_out);

/* Reports that the entry popped for `lane` finished (the entry may already be
 * freed). Calling it for a lane that is not running is a caller bug (asserted;
 * ignored when NDEBUG). */
void lanes_done(struct lanes *l, int lane);

/* Entries pushed and not yet done (queued + running). */
static inline size_t lanes_in_flight(const struct lanes *l) { return l->queued + l->running; }

/* Removes and returns every queued entry (shutdown), linked through e->next;
 * running ones stay. Each key's entries keep push order in the list; order
 * across keys is not kept. */
struct entry *lanes_drain_queued(struct lanes *l);

#endif
