/* Tests for batching: calls go full at once, with batch_wait 0 at the end
 * of a turn, else once batch_wait has passed since the first entry (on the
 * virtual clock); no more than calls_max run at once, the next forming
 * meanwhile; a take gives back the forming entries in order. */
#include <stdint.h>
#include <string.h>

#include "batching.h"
#include "clock_virtual.h"
#include "entry.h"
#include "task.h"

static struct entry ent[16];

/* What each launch got: the indices of its entries, "0,1,2;3;..." */
struct seen {
  char calls[256];
  int launched;
};

static void launch(void *data, struct entry *const *entries, size_t n) {
  struct seen *s = data;
  size_t at = strlen(s->calls);
  if (at) s->calls[at++] = ';';
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(s->calls + at, sizeof s->calls - at, "%s%d", i ? "," : "",
                           (int)(entries[i] - ent));
  s->launched++;
}

TEST_IMPL(batching_full_call_goes_at_once) {
  lclock *clk = clock_virtual_new(0);
  struct seen s = {0};
  batching *b = batching_new(clk, 3, 1000, 1, launch, NULL, &s);
  ASSERT_NOT_NULL(b);
  for (int i = 0; i < 3; i++) {
    ASSERT(batching_room(b));
    batching_add(b, &ent[i]);
  }
  ASSERT(!batching_room(b));
  ASSERT_INT_EQ(batching_go(b), 1);
  ASSERT_STR_EQ(s.calls, "0,1,2");
  /* one call runs: the next one forms and waits, even full */
  for (int i = 3; i < 6; i++) batching_add(b, &ent[i]);
  ASSERT_INT_EQ(batching_go(b), 0);
  batching_call_done(b);
  ASSERT_INT_EQ(batching_go(b), 1);
  ASSERT_STR_EQ(s.calls, "0,1,2;3,4,5");
  batching_call_done(b);
  batching_free(b);
  clk->ops->free(clk);
}

TEST_IMPL(batching_wait_zero_takes_what_is_there) {
  lclock *clk = clock_virtual_new(0);
  struct seen s = {0};
  batching *b = batching_new(clk, 5, 0, 2, launch, NULL, &s);
  batching_add(b, &ent[0]);
  batching_add(b, &ent[1]);
  ASSERT_INT_EQ(batching_go(b), 1);
  batching_add(b, &ent[2]);
  ASSERT_INT_EQ(batching_go(b), 1); /* a second call: calls_max is 2 */
  batching_add(b, &ent[3]);
  ASSERT_INT_EQ(batching_go(b), 0);
  ASSERT_INT_EQ(batching_calls(b), 2);
  ASSERT_INT_EQ(batching_forming(b), 1);
  batching_call_done(b);
  ASSERT_INT_EQ(batching_go(b), 1);
  ASSERT_STR_EQ(s.calls, "0,1;2;3");
  batching_call_done(b);
  batching_call_done(b);
  batching_free(b);
  clk->ops->free(clk);
}

TEST_IMPL(batching_wait_runs_from_the_first_entry) {
  lclock *clk = clock_virtual_new(0);
  struct seen s = {0};
  batching *b = batching_new(clk, 4, 2000, 1, launch, NULL, &s);
  batching_add(b, &ent[0]);
  ASSERT_INT_EQ(batching_go(b), 0);
  clock_virtual_advance(clk, 1500);
  batching_add(b, &ent[1]);
  ASSERT_INT_EQ(batching_go(b), 0);
  clock_virtual_advance(clk, 499);
  ASSERT_INT_EQ(s.launched, 0);
  clock_virtual_advance(clk, 1); /* 2000 ms after entry 0 */
  ASSERT_STR_EQ(s.calls, "0,1");
  /* due while a call runs: it goes when the call is done */
  batching_add(b, &ent[2]);
  clock_virtual_advance(clk, 5000);
  ASSERT_INT_EQ(s.launched, 1);
  batching_call_done(b);
  ASSERT_INT_EQ(batching_go(b), 1);
  ASSERT_STR_EQ(s.calls, "0,1;2");
  batching_call_done(b);
  batching_free(b);
  clk->ops->free(clk);
}

static bool allowed;
static bool may(void *data) {
  (void)data;
  return allowed;
}

TEST_IMPL(batching_launches_only_when_may_says) {
  lclock *clk = clock_virtual_new(0);
  struct seen s = {0};
  allowed = false;
  batching *b = batching_new(clk, 2, 1000, 1, launch, may, &s);
  batching_add(b, &ent[0]);
  clock_virtual_advance(clk, 1000); /* due, but refused */
  ASSERT_INT_EQ(s.launched, 0);
  batching_add(b, &ent[1]);
  ASSERT_INT_EQ(batching_go(b), 0); /* full, still refused */
  allowed = true;
  ASSERT_INT_EQ(batching_go(b), 1);
  ASSERT_STR_EQ(s.calls, "0,1");
  batching_call_done(b);
  batching_free(b);
  clk->ops->free(clk);
}

TEST_IMPL(batching_take_gives_back_in_order) {
  lclock *clk = clock_virtual_new(0);
  struct seen s = {0};
  batching *b = batching_new(clk, 4, 1000, 1, launch, NULL, &s);
  for (int i = 0; i < 3; i++) batching_add(b, &ent[i]);
  struct entry *e = batching_take(b);
  for (int i = 0; i < 3; i++, e = e->next) ASSERT(e == &ent[i]);
  ASSERT_NULL(e);
  ASSERT_INT_EQ(batching_forming(b), 0);
  clock_virtual_advance(clk, 5000); /* its wait was stopped */
  ASSERT_INT_EQ(s.launched, 0);
  ASSERT_NULL(batching_new(clk, 0, 0, 1, launch, NULL, &s));
  batching_free(b);
  clk->ops->free(clk);
}
