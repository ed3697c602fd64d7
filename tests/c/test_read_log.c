/* Tests for read_log.c: the log line of a failed read names the command the
 * read sent and, for a script, which script. */
#include <string.h>

#include "log.h"
#include "read_log.h"
#include "task.h"

static char cap[4096];

static void capture(void *data, enum log_level level, const char *line, size_t len) {
  (void)data;
  (void)level;
  ASSERT(len < sizeof cap);
  memcpy(cap, line, len + 1);
}

/* The line read_log_failed writes for a read of kind failing with a plain
 * ERR (not a vanished group: it is only retried). */
static const char *failed_line(enum read_kind kind) {
  struct handler_spec spec = {0};
  spec.name = "orders";
  spec.stream = "orders";
  spec.group = "g";
  spec.consumer = "c1";
  char msg[] = "ERR something broke";
  bk_reply r = {.type = BK_ERROR, .len = strlen(msg), .str = msg};
  cap[0] = '\0';
  log_set_sink(capture, NULL);
  ASSERT(!read_log_failed(&spec, "orders:retry:g", kind, &r, NULL));
  log_set_sink(NULL, NULL);
  return cap;
}

TEST_IMPL(read_log_names_the_own_pending_script) {
  const char *line = failed_line(READ_OWN);
  ASSERT_NOT_NULL(strstr(line, " command=EVAL "));
  ASSERT_NOT_NULL(strstr(line, " script=\"the own pending read\" "));
  ASSERT_NOT_NULL(strstr(line, " keys=\"orders orders:retry:g\" "));
}

TEST_IMPL(read_log_names_each_read_kind) {
  const char *line = failed_line(READ_PLAIN);
  ASSERT_NOT_NULL(strstr(line, " command=XREADGROUP "));
  ASSERT_NULL(strstr(line, "script="));
  line = failed_line(READ_CLAIM_NATIVE);
  ASSERT_NOT_NULL(strstr(line, " command=XREADGROUP "));
  ASSERT_NULL(strstr(line, "script="));
  line = failed_line(READ_CLAIM_SCRIPT);
  ASSERT_NOT_NULL(strstr(line, " command=EVAL "));
  ASSERT_NOT_NULL(strstr(line, " script=\"the claiming read (claim_fallback)\" "));
  line = failed_line(READ_RECLAIM_SCRIPT);
  ASSERT_NOT_NULL(strstr(line, " command=EVAL "));
  ASSERT_NOT_NULL(strstr(line, " script=\"the reclaim read\" "));
}
