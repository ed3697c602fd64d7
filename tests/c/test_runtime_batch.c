/* handle_batch in the runtime (handler_run_batch, jobs.c's finish_batch):
 * one done per entry, in the call's order, batch_left counting down to 0;
 * each entry its own outcome and its own writes; a body that does not
 * decode reported as bad input without reaching the call; a raise or a
 * malformed return failing every entry alike; coroutines reused. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "entry.h"
#include "fixtures.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

#define N 4

static struct captured got[N];
static size_t left[N];
static struct entry *order[N];
static int ndone;

static void batch_done(void *data, struct entry *e, const struct rt_result *res) {
  (void)data;
  ASSERT(ndone < N);
  order[ndone] = e;
  left[ndone] = res->batch_left;
  on_done(&got[ndone], e, res);
  ndone++;
}

static const char BATCHER[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\", reply_to = \"r\", batch_max = 4,\n"
    "  handle_batch = function(entries, ctx)\n"
    "    assert(ctx.size == #entries and ctx.stream == \"s\")\n"
    "    if entries[1].msg.raise then error(\"boom\") end\n"
    "    if entries[1].msg.bad then return { ls.ack() } end\n"
    "    local out = {}\n"
    "    for i, e in ipairs(entries) do\n"
    "      e.ctx:write(\"SET\", \"k:\" .. e.ctx.id, tostring(e.msg.n))\n"
    "      out[i] = e.msg.n == 2 and ls.retry() or e.msg.n == 3 and ls.reply({n = 3}) or ls.ack()\n"
    "    end\n"
    "    return out\n"
    "  end }\n";

/* Runs entries of the given bodies as one call, which must finish at once. */
static void run_call(handler *h, const char *const *bodies, size_t n, struct entry **e) {
  memset(got, 0, sizeof got);
  ndone = 0;
  char id[32];
  for (size_t i = 0; i < n; i++) {
    snprintf(id, sizeof id, "1-%zu", i + 1);
    e[i] = mk_entry(id, "data", bodies[i], NULL);
  }
  ASSERT_OK(handler_run_batch(h, e, n, -1, batch_done, NULL));
  ASSERT_INT_EQ(ndone, (int)n);
  ASSERT_INT_EQ(handler_jobs(h), 0);
  for (size_t i = 0; i < n; i++) {
    ASSERT(order[i] == e[i]);
    ASSERT_INT_EQ(left[i], n - 1 - i);
  }
}

static void free_all(struct entry **e, size_t n) {
  for (size_t i = 0; i < n; i++) entry_free(e[i]);
}

TEST_IMPL(runtime_batch_outcomes_per_entry) {
  handler *h = load_ok("batcher.lua", BATCHER, NULL);
  struct entry *e[N];
  const char *bodies[] = {"{\"n\":1}", "{\"n\":2}", "not json", "{\"n\":3}"};
  for (int round = 0; round < 2; round++) { /* the second on a reused coroutine */
    run_call(h, bodies, 4, e);
    ASSERT_INT_EQ(got[0].kind, RT_ACK);
    ASSERT_INT_EQ(got[0].nwrites, 1);
    ASSERT_STR_EQ(got[0].writes[0].cmd, "SET");
    ASSERT_STR_EQ(got[0].writes[0].stream, "k:1-1");
    expect_plain(&got[1], RT_RETRY);
    ASSERT_INT_EQ(got[2].kind, RT_INVALID); /* never reached the call */
    ASSERT_INT_EQ(got[3].kind, RT_REPLY);
    ASSERT_INT_EQ(got[3].nwrites, 2); /* its SET, then the reply */
    ASSERT_STR_EQ(got[3].writes[0].stream, "k:1-4");
    ASSERT_STR_EQ(got[3].stream, "r");
    free_all(e, 4);
  }
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_batch_raise_fails_every_entry) {
  handler *h = load_ok("batcher.lua", BATCHER, NULL);
  struct entry *e[N];
  const char *bodies[] = {"{\"raise\":true}", "{\"n\":2}", "{\"n\":3}"};
  run_call(h, bodies, 3, e);
  for (int i = 0; i < 3; i++) {
    expect_fail(&got[i], RT_ERROR, "handler-error");
    ASSERT(strstr(got[i].text, "boom") != NULL);
    ASSERT_STR_EQ(got[i].text, got[0].text);
    ASSERT_INT_EQ(got[i].nwrites, 0);
  }
  free_all(e, 3);
  const char *bad[] = {"{\"bad\":true}", "{\"n\":2}"};
  run_call(h, bad, 2, e);
  for (int i = 0; i < 2; i++) {
    expect_fail(&got[i], RT_ERROR, "bad-return");
    ASSERT(strstr(got[i].text, "1 outcomes for 2 entries") != NULL);
  }
  free_all(e, 2);
  handler_release(h);
  LEAK_CHECK();
}
