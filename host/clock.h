/* clock: the only source of "now" and of timers in the host.
 *
 * Business code (subscriptions, runtime, brokers) reads time and arms timers
 * through this seam and never asks the OS. Production uses the libuv backend
 * (clock_uv_new); the test harness plugs in a virtual clock that moves only when
 * a test advances it. */
#ifndef LUASTREAM_CLOCK_H
#define LUASTREAM_CLOCK_H

#include <stdint.h>

typedef struct lclock lclock;
typedef struct ltimer ltimer;
typedef void ltimer_cb(ltimer *t, void *data);

struct lclock_ops {
  uint64_t (*now_ms)(lclock *c);                 /* monotonic ms, cached per loop turn */
  /* now_ms read at this instant, never below now_ms: for checks that a
   * pause in the middle of a turn (SIGSTOP, a long callback) must not fool */
  uint64_t (*fresh_ms)(lclock *c);
  uint64_t (*wall_ms)(lclock *c);                /* Unix ms, for log lines */
  ltimer *(*timer_new)(lclock *c, ltimer_cb *cb, void *data);
  void (*timer_start)(ltimer *t, uint64_t after_ms); /* re-arms if already armed */
  void (*timer_stop)(ltimer *t);
  void (*timer_free)(ltimer *t);                 /* stops; memory released by the backend;
                                                  * safe inside the timer's own callback */
  void (*free)(lclock *c);
};

struct lclock {
  const struct lclock_ops *ops;
};

static inline uint64_t clock_now(lclock *c) { return c->ops->now_ms(c); }
static inline uint64_t clock_fresh(lclock *c) { return c->ops->fresh_ms(c); }
static inline uint64_t clock_wall(lclock *c) { return c->ops->wall_ms(c); }
static inline ltimer *timer_new(lclock *c, ltimer_cb *cb, void *data) {
  return c->ops->timer_new(c, cb, data);
}
void timer_start(ltimer *t, uint64_t after_ms);
void timer_stop(ltimer *t);
void timer_free(ltimer *t);

/* libuv backend. The clock does not own the loop. Timers are uv_timer_t handles
 * on it: after timer_free the loop must run once more to release them (uv_close
 * callback), and clock->ops->free only frees the clock itself. */
struct uv_loop_s;
lclock *clock_uv_new(struct uv_loop_s *loop);

/* Virtual backend for the test harness: time moves only when told.
 * now_ms (and fresh_ms) starts at 0 and wall_ms is wall_start_ms + now_ms. Timers fire only
 * inside clock_virtual_advance / clock_virtual_settle, in (due time, arming
 * order) order, each with now_ms equal to its own due time. All timers must be
 * freed before the clock. Returns NULL when out of memory. */
lclock *clock_virtual_new(uint64_t wall_start_ms);
/* Moves now forward by ms, firing every timer that falls due up to the new
 * time, including timers armed by those callbacks within the window. Returns
 * the new now_ms. */
uint64_t clock_virtual_advance(lclock *c, uint64_t ms);
/* Moves now forward by ms without firing anything, as when the whole process
 * is stopped (SIGSTOP, a paused VM) or its loop stalls: the timers that fell
 * due fire late, at the next settle or advance, in (due time, arming order)
 * order, all at the new now. */
void clock_virtual_jump(lclock *c, uint64_t ms);
/* Fires everything due at the current time (0-ms timers, again and again,
 * until none is due). Aborts after a million firings: a 0-ms timer that keeps
 * re-arming itself would otherwise hang the test. */
void clock_virtual_settle(lclock *c);

/* Every ltimer starts with this header so the generic helpers can dispatch. */
struct ltimer {
  lclock *clock;
};

#endif
