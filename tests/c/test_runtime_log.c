/* ls.log through the host's log sink (corelib.c core.log). */
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

/* ============================================================ logging */

static const char LOGGER[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\",\n"
    "  handle = function(msg, ctx)\n"
    "    if msg.odd then\n"
    "      ls.log.info(\"odd keys\", { [\"a b\"] = 1, [\"x=y\"] = 2 })\n"
    "      return\n"
    "    end\n"
    "    ls.log.info(\"payment posted\", { b = 1, a = 2, payment_id = 7, order_id = \"o-1\",\n"
    "      note = \"two words\", big = 1e15, ratio = 0.5, ok = true, list = { 1, 2 } })\n"
    "    ls.log.debug(\"hidden\")\n"
    "    ls.log.warn(\"no fields\")\n"
    "  end }\n";

TEST_IMPL(runtime_log_through_sink) {
  handler *h = load_ok("post_payment.lua", LOGGER, NULL);
  log_capture_start();
  log_set_level(LOG_INFO);
  struct captured c = run_json(h, "18-1", "{}");
  expect_plain(&c, RT_ACK);
  log_set_sink(NULL, NULL);
  ASSERT_INT_EQ(log_lines, 2);
  ASSERT(strncmp(logbuf, "time=", 5) == 0);
  /* ids first (alphabetically), then the rest alphabetically; integral numbers
   * without a fraction or exponent, strings with spaces quoted, tables as JSON */
  ASSERT_CONTAINS(logbuf,
                  " level=info handler=post_payment msg=\"payment posted\" order_id=o-1 "
                  "payment_id=7 a=2 b=1 big=1000000000000000 list=[1,2] note=\"two words\" "
                  "ok=true ratio=0.5\n");
  ASSERT_CONTAINS(logbuf, " level=warn handler=post_payment msg=\"no fields\"\n");
  ASSERT_NULL(strstr(logbuf, "hidden"));
  /* every line ends with the script version (taken out above) */
  ASSERT_INT_EQ(strlen(handler_version(h)), 8);
  ASSERT_STR_EQ(last_version, handler_version(h));
  handler_release(h);
  LEAK_CHECK();
}

/* Keys from Lua go through the log module like any other: a space or '='
 * in a key, which would split or forge logfmt fields (` a b=1`, ` x=y=2`),
 * becomes '_' (log.h). */
TEST_IMPL(runtime_log_keys_sanitized) {
  handler *h = load_ok("post_payment.lua", LOGGER, NULL);
  log_capture_start();
  log_set_level(LOG_INFO);
  struct captured c = run_json(h, "18-2", "{\"odd\":true}");
  expect_plain(&c, RT_ACK);
  log_set_sink(NULL, NULL);
  ASSERT_INT_EQ(log_lines, 1);
  ASSERT_CONTAINS(logbuf, " msg=\"odd keys\" a_b=1 x_y=2\n");
  handler_release(h);
  LEAK_CHECK();
}
