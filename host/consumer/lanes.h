/* lanes: per-key ordered scheduling of entries onto N workers.
 *
 * With by_key, entries that share a partition key always go to the same lane
 * and run there one at a time in the order they were pushed; entries without a
 * key wait in a shared queue and run on whichever lane is free. Without by_key,
 * every entry goes to the shared queue: up to N run at once, in any order. No
 * I/O, no Lua, no time: callers push, pop runnable work, and report completion. */
#ifndef LUASTREAM_LANES_H
#define LUASTREAM_LANES_H

#include <stddef.h>
#include <stdbool.h>

struct entry;

struct lane {
  struct entry *head, *tail;   /* keyed entries waiting for this lane */
  bool busy;                   /* an entry of this lane is running */
};

struct lanes {
  int n;                       /* number of lanes (workers) */
  bool by_key;
  struct lane *lane;
  struct entry *shared_head, *shared_tail; /* entries any lane may run */
  size_t queued;               /* entries pushed and not yet popped */
  size_t running;              /* entries popped and not yet done */
  int next_free;               /* where the search for a free lane starts (fairness) */
};

/* Returns 0, or -1 when n < 1 or out of memory (l is then zeroed). */
int lanes_init(struct lanes *l, int n, bool by_key);
void lanes_free(struct lanes *l);  /* entries still queued are not freed */

/* Queues e (linked through e->next). key may be NULL or empty for no key. */
void lanes_push(struct lanes *l, struct entry *e, const char *key, size_t keylen);

/* Takes the next entry that may run now and marks its lane busy; returns NULL
 * when nothing can run. *lane_out receives the lane to pass to lanes_done. */
struct entry *lanes_pop(struct lanes *l, int *lane_out);

/* Reports that the entry popped for `lane` finished. Calling it for a lane that
 * is not running is a caller bug (asserted; ignored when NDEBUG). */
void lanes_done(struct lanes *l, int lane);

/* Entries pushed and not yet done (queued + running). */
static inline size_t lanes_in_flight(const struct lanes *l) { return l->queued + l->running; }

/* Removes and returns every queued entry (shutdown); running ones stay. Each
 * key's entries keep push order in the list; order across keys is not kept. */
struct entry *lanes_drain_queued(struct lanes *l);

/* The lane a key maps to: a stable hash modulo n; -1 for no key (NULL or
 * empty), which runs on any lane. */
int lanes_key_lane(const struct lanes *l, const char *key, size_t keylen);

#endif
