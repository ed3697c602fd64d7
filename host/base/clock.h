/* clock: the only source of "now" and of timers in the host.
 *
 * Business code (subscriptions, runtime, brokers) reads time and arms timers
 * through this seam and never asks the OS. Production uses the libuv backend
 * (clock_uv_new); the test harness plugs in a virtual clock (clock_virtual.h,
 * test-only) that moves only when
 * a test advances it. */
#ifndef LUASTREAM_CLOCK_H
#define LUASTREAM_CLOCK_H

#include <stdint.h>

typedef struct lclock lclock;
typedef struct ltimer ltimer;
typedef void ltimer_cb(ltimer *t, void *data);

struct lclock_ops {
  uint64_t (*now_ms)(lclock *c); /* monotonic ms, cached per loop turn */
  /* now_ms read at this instant, never below now_ms: for checks that a
   * pause in the middle of a turn (SIGSTOP, a long callback) must not fool */
  uint64_t (*fresh_ms)(lclock *c);
  uint64_t (*wall_ms)(lclock *c); /* Unix ms, for log lines */
  ltimer *(*timer_new)(lclock *c, ltimer_cb *cb, void *data);
  void (*timer_start)(ltimer *t, uint64_t after_ms); /* re-arms if already armed */
  void (*timer_stop)(ltimer *t);
  void (*timer_free)(ltimer *t); /* stops; memory released by the backend;
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

/* Every ltimer starts with this header so the generic helpers can dispatch. */
struct ltimer {
  lclock *clock;
};

#endif
