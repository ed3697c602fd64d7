/* batching: a handle_batch subscription's calls; see batching.h.
 *
 * The forming call is an array of batch_max entries. Its timer (batch_wait)
 * runs from the first entry's arrival; when it fires the call is due, and
 * goes as soon as a call may start. */
#include "batching.h"

#include <assert.h>
#include <stdlib.h>

#include "entry.h"

struct batching {
  lclock *clock;
  ltimer *timer; /* batch_wait from the forming call's first entry */
  int max;
  int64_t wait_ms;
  int calls_max;
  int calls;              /* launched and not done */
  struct entry **forming; /* max of them */
  size_t n;
  bool due; /* batch_wait passed for the forming call */
  bool launching;
  batch_launch_fn *launch;
  batch_may_fn *may;
  void *data;
};

static void wait_over(ltimer *t, void *data) {
  (void)t;
  batching *b = data;
  b->due = true;
  batching_go(b);
}

batching *batching_new(lclock *clock, int max, int64_t wait_ms, int calls_max,
                       batch_launch_fn *launch, batch_may_fn *may, void *data) {
  if (max < 1 || calls_max < 1) return NULL;
  batching *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  *b = (struct batching){.clock = clock,
                         .max = max,
                         .wait_ms = wait_ms > 0 ? wait_ms : 0,
                         .calls_max = calls_max,
                         .launch = launch,
                         .may = may,
                         .data = data};
  b->forming = malloc((size_t)max * sizeof *b->forming);
  if (b->wait_ms) b->timer = timer_new(clock, wait_over, b);
  if (b->forming == NULL || (b->wait_ms && b->timer == NULL)) {
    batching_free(b);
    return NULL;
  }
  return b;
}

void batching_free(batching *b) {
  if (b == NULL) return;
  if (b->timer) timer_free(b->timer);
  free(b->forming);
  free(b);
}

bool batching_room(const batching *b) { return b->n < (size_t)b->max; }

void batching_add(batching *b, struct entry *e) {
  assert(b->n < (size_t)b->max); /* the caller asks batching_room */
  if (b->n == 0 && b->timer) timer_start(b->timer, (uint64_t)b->wait_ms);
  b->forming[b->n++] = e;
}

int batching_go(batching *b) {
  /* A launch's handler may finish at once and come back here through its
   * done: the loop below goes on with what that left. */
  if (b->launching) return 0;
  b->launching = true;
  int launched = 0;
  while (b->n && b->calls < b->calls_max && (b->n == (size_t)b->max || b->wait_ms == 0 || b->due) &&
         (b->may == NULL || b->may(b->data))) {
    size_t n = b->n;
    b->n = 0;
    b->due = false;
    if (b->timer) timer_stop(b->timer);
    b->calls++;
    launched++;
    b->launch(b->data, b->forming, n);
  }
  b->launching = false;
  return launched;
}

void batching_call_done(batching *b) {
  if (b->calls > 0) b->calls--;
}

size_t batching_forming(const batching *b) { return b->n; }
int batching_calls(const batching *b) { return b->calls; }

struct entry *batching_take(batching *b) {
  struct entry *head = NULL;
  for (size_t i = b->n; i > 0; i--) {
    b->forming[i - 1]->next = head;
    head = b->forming[i - 1];
  }
  b->n = 0;
  b->due = false;
  if (b->timer) timer_stop(b->timer);
  return head;
}
