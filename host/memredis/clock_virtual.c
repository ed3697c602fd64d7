/* clock_virtual: the virtual clock backend for the test harness.
 *
 * Time stands still until a test calls clock_virtual_advance or
 * clock_virtual_settle. Armed timers sit in a binary min-heap ordered by (due
 * time, arming sequence), so equal deadlines fire in the order they were armed,
 * as libuv does. Timers are popped one at a time rather than collected first:
 * a callback that arms another timer due inside the same advance window must
 * see it fire in order, at its own due time. A timer freed from inside its own
 * callback is only marked; its memory goes when the callback returns. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock_virtual.h"

/* A 0-ms timer re-armed this many times within one settle is a livelock. */
#define SETTLE_CAP 1000000

struct vview;

struct vtimer {
  ltimer base; /* first: the ltimer pointer is the vtimer pointer */
  ltimer_cb *cb;
  void *data;
  struct vview *view;  /* made through a view (clock_virtual_view), else NULL */
  struct vtimer *late; /* next of its stalled view's late list */
  bool is_late;        /* fell due while its view was stalled: on the late list */
  uint64_t due;        /* now_ms at which it fires */
  uint64_t seq;        /* arming order: breaks ties between equal due times */
  size_t slot;         /* index in the heap; NOT_ARMED when not armed */
  int firing;          /* inside its own callback */
  int freed;           /* timer_free was called while firing */
};

#define NOT_ARMED ((size_t)-1)

struct vclock {
  lclock base; /* first: the lclock pointer is the vclock pointer */
  uint64_t now;
  uint64_t wall_start;
  uint64_t seq;
  struct vtimer **heap;
  size_t n, cap;
  struct vview *views; /* freed with the clock: a timer may outlive its host */
};

/* One host's view of the clock: the same time and heap; while stalled, its
 * timers that fall due wait on the late list, in the order they fell due. */
struct vview {
  lclock base; /* first */
  struct vclock *c;
  bool stalled;
  struct vtimer *late_head, *late_tail;
  struct vview *next;
};

/* ---- heap ---- */

static int earlier(const struct vtimer *a, const struct vtimer *b) {
  return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void place(struct vclock *c, size_t i, struct vtimer *t) {
  c->heap[i] = t;
  t->slot = i;
}

static void sift_up(struct vclock *c, size_t i) {
  struct vtimer *t = c->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!earlier(t, c->heap[parent])) break;
    place(c, i, c->heap[parent]);
    i = parent;
  }
  place(c, i, t);
}

static void sift_down(struct vclock *c, size_t i) {
  struct vtimer *t = c->heap[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const struct vtimer *best = t;
    if (l < c->n && earlier(c->heap[l], best)) m = l, best = c->heap[l];
    if (r < c->n && earlier(c->heap[r], best)) m = r;
    if (m == i) break;
    place(c, i, c->heap[m]);
    i = m;
  }
  place(c, i, t);
}

static void heap_remove(struct vclock *c, struct vtimer *t) {
  size_t i = t->slot;
  t->slot = NOT_ARMED;
  c->n--;
  if (i == c->n) return;
  struct vtimer *moved = c->heap[c->n];
  place(c, i, moved);
  sift_down(c, i);
  sift_up(c, moved->slot); /* it may belong above i instead */
}

/* ---- lclock_ops ---- */

static uint64_t vc_now(lclock *lc) { return ((struct vclock *)lc)->now; }

static uint64_t vc_wall(lclock *lc) {
  struct vclock *c = (struct vclock *)lc;
  return c->wall_start + c->now;
}

static ltimer *vc_timer_new(lclock *lc, ltimer_cb *cb, void *data) {
  struct vtimer *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->base.clock = lc;
  t->cb = cb;
  t->data = data;
  t->slot = NOT_ARMED;
  return &t->base;
}

/* Takes t off its view's late list. */
static void unlate(struct vtimer *t) {
  struct vview *v = t->view;
  struct vtimer **p = &v->late_head, *prev = NULL;
  while (*p != t) prev = *p, p = &(*p)->late;
  *p = t->late;
  if (v->late_tail == t) v->late_tail = prev;
  t->late = NULL;
  t->is_late = false;
}

static void vt_stop(ltimer *lt) {
  struct vtimer *t = (struct vtimer *)lt;
  if (t->slot != NOT_ARMED) heap_remove((struct vclock *)lt->clock, t);
  if (t->is_late) unlate(t);
}

static void vt_start(ltimer *lt, uint64_t after_ms) {
  struct vclock *c = (struct vclock *)lt->clock;
  struct vtimer *t = (struct vtimer *)lt;
  vt_stop(lt);
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    struct vtimer **h = realloc(c->heap, cap * sizeof *h);
    if (h == NULL) {
      fprintf(stderr, "vclock: out of memory arming a timer\n");
      abort();
    }
    c->heap = h;
    c->cap = cap;
  }
  t->due = c->now + after_ms;
  t->seq = c->seq++;
  place(c, c->n++, t);
  sift_up(c, t->slot);
}

static void vt_free(ltimer *lt) {
  struct vtimer *t = (struct vtimer *)lt;
  vt_stop(lt);
  if (t->firing)
    t->freed = 1; /* fire() releases it once the callback returns */
  else
    free(t);
}

static void vc_free(lclock *lc) {
  struct vclock *c = (struct vclock *)lc;
  while (c->views) {
    struct vview *v = c->views;
    c->views = v->next;
    free(v);
  }
  free(c->heap);
  free(c);
}

static const struct lclock_ops vclock_ops = {
    .now_ms = vc_now,
    .fresh_ms = vc_now,
    .wall_ms = vc_wall,
    .timer_new = vc_timer_new,
    .timer_start = vt_start,
    .timer_stop = vt_stop,
    .timer_free = vt_free,
    .free = vc_free,
};

lclock *clock_virtual_new(uint64_t wall_start_ms) {
  struct vclock *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->base.ops = &vclock_ops;
  c->wall_start = wall_start_ms;
  return &c->base;
}

/* ---- moving time ---- */

/* Pops the earliest timer if it is due by `until` and runs it at its due time.
 * Returns 0 when nothing was due. */
static int fire_one(struct vclock *c, uint64_t until) {
  if (c->n == 0 || c->heap[0]->due > until) return 0;
  struct vtimer *t = c->heap[0];
  heap_remove(c, t);
  if (t->due > c->now) c->now = t->due;
  if (t->view && t->view->stalled) { /* its host does not run: it fires when the stall ends */
    struct vview *v = t->view;
    t->is_late = true;
    if (v->late_tail)
      v->late_tail->late = t;
    else
      v->late_head = t;
    v->late_tail = t;
    return 1;
  }
  t->firing = 1;
  t->cb(&t->base, t->data);
  t->firing = 0;
  if (t->freed) free(t);
  return 1;
}

uint64_t clock_virtual_advance(lclock *lc, uint64_t ms) {
  struct vclock *c = (struct vclock *)lc;
  uint64_t target = c->now + ms;
  unsigned long fired = 0;
  while (fire_one(c, target)) {
    if (++fired > SETTLE_CAP * 10UL) {
      fprintf(stderr, "vclock: over %d timers fired in one advance: a timer loop?\n",
              SETTLE_CAP * 10);
      abort();
    }
  }
  c->now = target;
  return c->now;
}

void clock_virtual_jump(lclock *lc, uint64_t ms) { ((struct vclock *)lc)->now += ms; }

void clock_virtual_settle(lclock *lc) {
  struct vclock *c = (struct vclock *)lc;
  unsigned long fired = 0;
  while (fire_one(c, c->now)) {
    if (++fired > SETTLE_CAP) {
      fprintf(stderr, "vclock: settle fired over %d timers at %llu ms: a 0-ms timer loop?\n",
              SETTLE_CAP, (unsigned long long)c->now);
      abort();
    }
  }
}

/* ---- views ---- */

static uint64_t vv_now(lclock *lc) { return vc_now(&((struct vview *)lc)->c->base); }
static uint64_t vv_wall(lclock *lc) { return vc_wall(&((struct vview *)lc)->c->base); }

static ltimer *vv_timer_new(lclock *lc, ltimer_cb *cb, void *data) {
  struct vview *v = (struct vview *)lc;
  ltimer *lt = vc_timer_new(&v->c->base, cb, data);
  if (lt) ((struct vtimer *)lt)->view = v;
  return lt;
}

static void vv_free(lclock *lc) { (void)lc; /* the clock frees its views */ }

static const struct lclock_ops vview_ops = {
    .now_ms = vv_now,
    .fresh_ms = vv_now,
    .wall_ms = vv_wall,
    .timer_new = vv_timer_new,
    .timer_start = vt_start,
    .timer_stop = vt_stop,
    .timer_free = vt_free,
    .free = vv_free,
};

lclock *clock_virtual_view(lclock *lc) {
  struct vclock *c = (struct vclock *)lc;
  struct vview *v = calloc(1, sizeof *v);
  if (v == NULL) return NULL;
  v->base.ops = &vview_ops;
  v->c = c;
  v->next = c->views;
  c->views = v;
  return &v->base;
}

void clock_virtual_stall(lclock *view, bool stalled) {
  struct vview *v = (struct vview *)view;
  v->stalled = stalled;
  if (stalled) return;
  /* Due now, in the order they fell due (arming order breaks the tie). */
  while (v->late_head) {
    struct vtimer *t = v->late_head;
    unlate(t);
    vt_start(&t->base, 0);
  }
}
