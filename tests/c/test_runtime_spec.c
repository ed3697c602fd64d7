/* The validated spec of a handler file as the host reads it into struct
 * handler_spec (read_spec in runtime.c): luastream.handler's defaults and the
 * values a file gives, for every field. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "entry.h"
#include "fixtures.h"
#include "log.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

/* ==================================================================== spec */

TEST_IMPL(runtime_spec_defaults) {
  handler *h = NULL;
  const char *path = write_file("post_payment.lua",
                                "local ls = require \"luastream\"\n"
                                "return { stream = \"payments\", group = \"ledger\",\n"
                                "  handle = function() return ls.ack() end }\n");
  ASSERT_OK(handler_load(path, NULL, &h, load_error, sizeof load_error));
  const struct handler_spec *s = handler_spec(h);
  ASSERT_STR_EQ(s->path, path);
  ASSERT_STR_EQ(s->name, "post_payment");
  ASSERT_STR_EQ(s->stream, "payments");
  ASSERT_STR_EQ(s->group, "ledger");
  ASSERT_NULL(s->consumer);
  ASSERT_STR_EQ(s->start, "new");
  ASSERT_NULL(s->start_at);
  ASSERT_NULL(s->reply_to);
  ASSERT_INT_EQ(s->read, READ_NEW);
  ASSERT_INT_EQ(s->min_idle_ms, -1);
  ASSERT_INT_EQ(s->batch, 100);
  ASSERT_INT_EQ(s->workers, 1);
  ASSERT_INT_EQ(s->max_in_flight, 0); /* no cap */
  ASSERT(s->by_key == false);
  ASSERT_INT_EQ(s->max_body, 1048576);
  ASSERT(s->rate.interval_us == 0);     /* no rate limit */
  ASSERT_INT_EQ(s->max_deliveries, 10); /* the default cap */
  ASSERT_NULL(s->dead_letter);
  ASSERT_INT_EQ(handler_jobs(h), 0);
  ASSERT_OK(handler_bind(h, "luastream-0"));
  ASSERT_STR_EQ(handler_spec(h)->consumer, "luastream-0");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_spec_values) {
  handler *h = NULL;
  const char *path = write_file("given",
                                "return { stream = \"in\", group = \"grp\",\n"
                                "  consumer = \"me\", start = \"beginning\", start_at = \"5-0\",\n"
                                "  reply_to = \"out\", batch = 7, workers = 3, by_key = true,\n"
                                "  max_body = 10, rate = \"200/s burst 400\", max_in_flight = 2,\n"
                                "  handle = function() end }\n");
  ASSERT_OK(handler_load(path, NULL, &h, load_error, sizeof load_error));
  const struct handler_spec *s = handler_spec(h);
  ASSERT_STR_EQ(s->name, "given"); /* no ".lua" to strip */
  ASSERT_STR_EQ(s->stream, "in");
  ASSERT_STR_EQ(s->group, "grp");
  ASSERT_STR_EQ(s->consumer, "me");
  ASSERT_STR_EQ(s->start, "beginning");
  ASSERT_STR_EQ(s->start_at, "5-0");
  ASSERT_STR_EQ(s->reply_to, "out");
  ASSERT_INT_EQ(s->batch, 7);
  ASSERT_INT_EQ(s->workers, 3);
  ASSERT_INT_EQ(s->max_in_flight, 2);
  ASSERT(s->by_key == true);
  ASSERT_INT_EQ(s->max_body, 10);
  ASSERT(s->rate.interval_us == 5000 && s->rate.burst == 400);
  /* bind replaces the consumer named in the file */
  ASSERT_OK(handler_bind(h, "c-9"));
  ASSERT_STR_EQ(handler_spec(h)->consumer, "c-9");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_spec_recovery_modes) {
  handler *h = load_ok("claiming.lua",
                       "return {\n"
                       "  stream = \"s\", group = \"g\", handle = function() end,\n"
                       "  min_idle = \"30s\", claim_fallback = true,\n"
                       "  read = \"claiming\",\n"
                       "}\n",
                       NULL);
  ASSERT_INT_EQ(handler_spec(h)->read, READ_CLAIMING);
  ASSERT_INT_EQ(handler_spec(h)->min_idle_ms, 30000);
  ASSERT(handler_spec(h)->claim_fallback);
  handler_release(h);
  h = load_ok("reclaim.lua",
              "return { stream = \"s\", group = \"g\", handle = function() end,\n"
              "  read = \"reclaim\", min_idle = 500 }\n",
              NULL);
  ASSERT_INT_EQ(handler_spec(h)->read, READ_RECLAIM);
  ASSERT_INT_EQ(handler_spec(h)->min_idle_ms, 500);
  ASSERT(!handler_spec(h)->claim_fallback);
  handler_release(h);
  /* The messages of min_idle without a default, and of claim_fallback on
   * other read modes: tests/spec/validate_spec.lua. */
  LEAK_CHECK();
}

/* ============================================================ dead letters */

TEST_IMPL(runtime_spec_max_deliveries_dead_letter) {
  handler *h =
      load_ok("capped.lua",
              "return { stream = \"payments\", group = \"ledger\", handle = function() end,\n"
              "  max_deliveries = 3, dead_letter = \"payments.dead\" }\n",
              NULL);
  ASSERT_INT_EQ(handler_spec(h)->max_deliveries, 3);
  ASSERT_STR_EQ(handler_spec(h)->dead_letter, "payments.dead");
  handler_release(h);
  /* either without the other */
  h = load_ok(
      "capped2.lua",
      "return { stream = \"s\", group = \"g\", handle = function() end, max_deliveries = 1 }\n",
      NULL);
  ASSERT_INT_EQ(handler_spec(h)->max_deliveries, 1);
  ASSERT_NULL(handler_spec(h)->dead_letter);
  handler_release(h);
  h = load_ok(
      "capped3.lua",
      "return { stream = \"s\", group = \"g\", handle = function() end, dead_letter = \"d\" }\n",
      NULL);
  ASSERT_INT_EQ(handler_spec(h)->max_deliveries, 10); /* the default cap */
  ASSERT_STR_EQ(handler_spec(h)->dead_letter, "d");
  handler_release(h);
  h = load_ok(
      "uncapped.lua",
      "return { stream = \"s\", group = \"g\", handle = function() end, max_deliveries = false }\n",
      NULL);
  ASSERT_INT_EQ(handler_spec(h)->max_deliveries, 0); /* no cap */
  handler_release(h);

  /* Bad values of both: tests/spec/validate_spec.lua. */
  LEAK_CHECK();
}
