/* clock: the generic timer verbs and the libuv backend.
 *
 * The generic helpers only dispatch through t->clock->ops, so business code
 * holds an ltimer without knowing which clock made it. The libuv backend reads
 * "now" from the loop's cached time (uv_now, refreshed once per loop turn, so
 * every callback of one turn sees the same instant) and wraps one uv_timer_t
 * per ltimer. Timer memory is released only in the uv_close callback, which is
 * what lets a timer free itself from inside its own callback. */
#include "clock.h"

#include <stdlib.h>
#include <time.h>
#include <uv.h>

void timer_start(ltimer *t, uint64_t after_ms) { t->clock->ops->timer_start(t, after_ms); }
void timer_stop(ltimer *t) { t->clock->ops->timer_stop(t); }
void timer_free(ltimer *t) { t->clock->ops->timer_free(t); }

/* ---- libuv backend ---- */

struct uv_clock {
  lclock base; /* first: the lclock pointer is the uv_clock pointer */
  uv_loop_t *loop;
};

struct uv_ltimer {
  ltimer base;       /* first: the ltimer pointer is the uv_ltimer pointer */
  uv_timer_t handle; /* handle.data points back here */
  ltimer_cb *cb;
  void *data;
};

static uint64_t uvc_now_ms(lclock *c) { return uv_now(((struct uv_clock *)c)->loop); }

/* uv_hrtime is the loop clock's monotonic source read precisely (uv_now
 * reads its coarse variant): the larger of the two keeps it never below
 * now_ms. The loop's cached time is left alone. */
static uint64_t uvc_fresh_ms(lclock *c) {
  uint64_t t = uv_hrtime() / 1000000u, n = uvc_now_ms(c);
  return t > n ? t : n;
}

static uint64_t uvc_wall_ms(lclock *c) {
  struct timespec ts;
  (void)c;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void uvt_fire(uv_timer_t *h) {
  struct uv_ltimer *t = h->data;
  /* Nothing touches t after the callback: it may have freed the timer. */
  t->cb(&t->base, t->data);
}

static ltimer *uvc_timer_new(lclock *c, ltimer_cb *cb, void *data) {
  struct uv_ltimer *t = malloc(sizeof *t);
  if (t == NULL) return NULL;
  t->base.clock = c;
  t->cb = cb;
  t->data = data;
  uv_timer_init(((struct uv_clock *)c)->loop, &t->handle); /* cannot fail */
  t->handle.data = t;
  return &t->base;
}

static void uvt_start(ltimer *lt, uint64_t after_ms) {
  struct uv_ltimer *t = (struct uv_ltimer *)lt;
  uv_timer_start(&t->handle, uvt_fire, after_ms, 0); /* restarts an armed timer */
}

static void uvt_stop(ltimer *lt) { uv_timer_stop(&((struct uv_ltimer *)lt)->handle); }

static void uvt_closed(uv_handle_t *h) { free(h->data); }

/* Closing also stops the timer, so a timer freed before it fires never fires. */
static void uvt_free(ltimer *lt) {
  struct uv_ltimer *t = (struct uv_ltimer *)lt;
  uv_close((uv_handle_t *)&t->handle, uvt_closed);
}

/* The loop is borrowed: freeing the clock leaves it alone. Timers must have
 * been freed first; their close callbacks do not touch the clock. */
static void uvc_free(lclock *c) { free(c); }

static const struct lclock_ops uv_clock_ops = {
    .now_ms = uvc_now_ms,
    .fresh_ms = uvc_fresh_ms,
    .wall_ms = uvc_wall_ms,
    .timer_new = uvc_timer_new,
    .timer_start = uvt_start,
    .timer_stop = uvt_stop,
    .timer_free = uvt_free,
    .free = uvc_free,
};

lclock *clock_uv_new(struct uv_loop_s *loop) {
  struct uv_clock *c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  c->base.ops = &uv_clock_ops;
  c->loop = loop;
  return &c->base;
}
