/* Tests for prune.c's schedule: a prune goes out once the subscription
 * reads and every PRUNE_EVERY_MS while it does; one that falls due while
 * it does not read (its group being made again) goes out as soon as it
 * reads again, and the answer reaches the subscription every time. */
#include "clock_virtual.h"
#include "prune.h"
#include "replay_broker.h"
#include "scripts.h"
#include "task.h"

struct probe {
  bool reading;
  int answered;
};

static bool reading(void *data) { return ((struct probe *)data)->reading; }
static void answered(void *data) { ((struct probe *)data)->answered++; }

TEST_IMPL(prune_due_while_not_reading_goes_out_when_reading_again) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_PRUNE, "<prune>");
  replay_default(rb, "EVAL <prune> 2 s s:retry:g g * **", "*0\r\n"); /* nothing removed */
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  ASSERT(bk_connected(b, c));
  struct handler_spec spec = {.name = "h", .stream = "s", .group = "g"};
  struct probe probe = {.reading = true};
  pruner *p = prune_new(b, c, clk, &spec, "s:retry:g", reading, answered, &probe);
  ASSERT_NOT_NULL(p);

  prune_start(p);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 1);
  ASSERT_INT_EQ(probe.answered, 1);
  clock_virtual_advance(clk, PRUNE_EVERY_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 2);

  /* The group is being made again when the next prune falls due. */
  probe.reading = false;
  clock_virtual_advance(clk, PRUNE_EVERY_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 2);
  /* cppcheck-suppress redundantAssignment ; false positive: the prune's callback read `false` while the clock advanced */
  probe.reading = true;
  prune_start(p);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 3);
  ASSERT_INT_EQ(probe.answered, 3);
  /* and on schedule from there */
  clock_virtual_advance(clk, PRUNE_EVERY_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 4);
  /* Reading again without a prune missed: nothing extra. */
  prune_start(p);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 4);

  prune_free(p);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
}
