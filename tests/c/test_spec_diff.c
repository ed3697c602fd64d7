/* handler_spec_diff on literal specs: which fields of a handler file it
 * names as changed (every subscription field, in one fixed order), and
 * which it leaves out (start_at, applied once at start-up; memory, which
 * the reload's new state takes without a restart). */
#include <stdbool.h>
#include <string.h>

#include "runtime.h"
#include "task.h"

static struct handler_spec base(void) {
  struct handler_spec s;
  memset(&s, 0, sizeof s);
  s.path = "h/pay.lua";
  s.name = "pay";
  s.stream = "payments";
  s.group = "ledger";
  s.start = "new";
  s.read = READ_NEW;
  s.min_idle_ms = -1;
  s.batch = 100;
  s.workers = 1;
  s.max_body = 1048576;
  s.max_deliveries = 10;
  s.memory = 256u * 1024 * 1024;
  return s;
}

TEST_IMPL(spec_diff_same) {
  struct handler_spec a = base(), b = base();
  char stream[] = "payments"; /* equal strings at other addresses */
  b.stream = stream;
  char out[256] = "x";
  ASSERT_STR_EQ(handler_spec_diff(&a, &b, out, sizeof out), "");
  ASSERT_STR_EQ(out, "");
}

TEST_IMPL(spec_diff_each_field) {
  struct handler_spec a = base();
  char out[256];
  struct handler_spec b;
#define EXPECT(stmt, want)                                           \
  do {                                                               \
    b = base();                                                      \
    stmt;                                                            \
    ASSERT_STR_EQ(handler_spec_diff(&a, &b, out, sizeof out), want); \
    ASSERT_STR_EQ(handler_spec_diff(&b, &a, out, sizeof out), want); \
  } while (0)
  EXPECT(b.stream = "orders", "stream");
  EXPECT(b.group = "audit", "group");
  EXPECT(b.read = READ_CLAIMING, "read");
  EXPECT(b.min_idle_ms = 30000, "min_idle");
  EXPECT(b.consumer = "me", "consumer"); /* NULL on one side */
  EXPECT(b.start = "beginning", "start");
  EXPECT(b.workers = 4, "workers");
  EXPECT(b.max_in_flight = 3, "max_in_flight"); /* the slots are made at start */
  EXPECT(b.max_in_flight_per_key = 1, "max_in_flight_per_key");
  EXPECT(b.by_key = true, "by_key");
  EXPECT(b.batch = 10, "batch");
  EXPECT(b.batch_max = 10, "batch_max"); /* also handle to handle_batch */
  EXPECT(b.batch_wait_ms = 500, "batch_wait");
  EXPECT(b.claim_fallback = true, "claim_fallback");
  EXPECT(b.reply_to = "out", "reply_to");
  EXPECT(b.dead_letter = "dead", "dead_letter");
  EXPECT(b.max_deliveries = 0, "max_deliveries");
  EXPECT(b.max_body = 10, "max_body");
  EXPECT(b.rate = ((struct spec_rate){5000, 1}), "rate");
  EXPECT(b.rate = ((struct spec_rate){0, 0}), "");
  /* start_at applies at start-up only; path and name are not fields. */
  EXPECT(b.start_at = "0", "");
  /* memory is the state's: the reload's new state has the new limit. */
  EXPECT(b.memory = 8u * 1024 * 1024, "");
  EXPECT((b.path = "other/pay.lua", b.name = "other"), "");
#undef EXPECT
}

TEST_IMPL(spec_diff_several_in_order) {
  struct handler_spec a = base(), b = base();
  b.max_body = 1;
  b.workers = 8;
  b.stream = "orders";
  b.start_at = "5-0";
  char out[256];
  ASSERT_STR_EQ(handler_spec_diff(&a, &b, out, sizeof out), "stream,workers,max_body");
  /* Too small for all: ends at the last name that fits. */
  char small[16];
  ASSERT_STR_EQ(handler_spec_diff(&a, &b, small, sizeof small), "stream,workers");
}
