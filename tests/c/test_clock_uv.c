/* Tests for clock.c's libuv backend: now and wall time, timers that fire,
 * re-arm, stop, and free themselves from inside their own callback, with every
 * handle closed at the end (uv_loop_close succeeds). */
#include <time.h>
#include <uv.h>

#include "clock.h"
#include "task.h"

static int fired;
static uint64_t fired_at;
static lclock *clk;

static void count(ltimer *t, void *data) {
  (void)t;
  ASSERT(data == &fired);
  fired++;
  fired_at = clock_now(clk);
}

static void free_self(ltimer *t, void *data) {
  (void)data;
  fired++;
  timer_free(t); /* memory goes in the close callback, after we return */
}

static void rearm_twice(ltimer *t, void *data) {
  (void)data;
  if (++fired < 3)
    timer_start(t, 1);
  else
    timer_free(t);
}

static void finish(uv_loop_t *loop) {
  clk->ops->free(clk);
  ASSERT_OK(uv_run(loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(loop));
  LEAK_CHECK();
}

TEST_IMPL(clock_uv_now_and_wall) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  clk = clock_uv_new(&loop);
  ASSERT_NOT_NULL(clk);
  ASSERT_INT_EQ(clock_now(clk), uv_now(&loop));
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t wall = clock_wall(clk);
  uint64_t sys = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
  ASSERT(wall >= sys && wall - sys < 1000);
  finish(&loop);
}

TEST_IMPL(clock_uv_timer_fires_once) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  clk = clock_uv_new(&loop);
  ltimer *t = timer_new(clk, count, &fired);
  ASSERT_NOT_NULL(t);
  ASSERT(t->clock == clk);
  uint64_t start = clock_now(clk);
  fired = 0;
  timer_start(t, 20);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT)); /* returns once nothing is armed */
  ASSERT_INT_EQ(fired, 1);
  ASSERT(fired_at - start >= 20);
  /* restarting an armed timer moves it rather than adding a second firing */
  timer_start(t, 500);
  timer_start(t, 5);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(fired, 2);
  timer_free(t);
  finish(&loop);
}

TEST_IMPL(clock_uv_timer_stop_and_free) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  clk = clock_uv_new(&loop);
  fired = 0;
  ltimer *stopped = timer_new(clk, count, &fired);
  ltimer *freed = timer_new(clk, count, &fired);
  timer_start(stopped, 1);
  timer_start(freed, 1);
  timer_stop(stopped);
  timer_stop(stopped); /* twice is fine */
  timer_free(freed);   /* armed, never fires */
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(fired, 0);
  timer_free(stopped);
  finish(&loop);
}

TEST_IMPL(clock_uv_timer_free_in_callback) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  clk = clock_uv_new(&loop);
  fired = 0;
  timer_start(timer_new(clk, free_self, NULL), 1);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(fired, 1);
  fired = 0;
  timer_start(timer_new(clk, rearm_twice, NULL), 1);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(fired, 3);
  finish(&loop);
}

/* A pause inside one turn (here a sleep) leaves now_ms where the turn began;
 * fresh_ms sees it. */
TEST_IMPL(clock_uv_fresh_sees_a_pause_within_the_turn) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  clk = clock_uv_new(&loop);
  ASSERT_NOT_NULL(clk);
  uint64_t before = clock_now(clk);
  ASSERT(clock_fresh(clk) >= before);
  struct timespec pause = {0, 120 * 1000000L};
  nanosleep(&pause, NULL);
  ASSERT_INT_EQ(clock_now(clk), before); /* cached for the turn */
  ASSERT(clock_fresh(clk) >= before + 100);
  finish(&loop);
}
