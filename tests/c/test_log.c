/* Tests for log.c: line layout, quoting and escaping, the level filter, long
 * lines through the heap, and the default sink's single write. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "log.h"
#include "task.h"


/* ---- capture sink ---- */

static char cap[65536];
static size_t cap_len;
static int cap_lines;
static enum log_level cap_level;

static void capture(void *data, enum log_level level, const char *line, size_t len) {
  ASSERT(data == &cap_lines);
  ASSERT(line[len] == '\n' && line[len + 1] == '\0');
  ASSERT(memchr(line, '\n', len) == NULL); /* one record, one line */
  ASSERT(cap_len + len + 1 < sizeof cap);
  memcpy(cap + cap_len, line, len + 1);
  cap_len += len + 1;
  cap[cap_len] = '\0';
  cap_lines++;
  cap_level = level;
}

static void cap_reset(void) {
  cap_len = 0;
  cap[0] = '\0';
  cap_lines = 0;
  log_set_sink(capture, &cap_lines);
  log_set_level(LOG_DEBUG);
}

/* The captured line without its "time=... " prefix. */
static const char *after_time(void) {
  ASSERT(strncmp(cap, "time=", 5) == 0);
  const char *sp = strchr(cap, ' ');
  ASSERT_NOT_NULL(sp);
  return sp + 1;
}

/* ---- tests ---- */

TEST_IMPL(log_line_layout) {
  cap_reset();
  log_line(LOG_INFO, "post_payment", "payment posted", "payment_id", "42", "account", "acme",
           NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  ASSERT_INT_EQ(cap_level, LOG_INFO);
  ASSERT_STR_EQ(after_time(), "level=info handler=post_payment msg=\"payment posted\" "
                              "payment_id=42 account=acme\n");

  /* time=YYYY-MM-DDTHH:MM:SS.mmmZ */
  ASSERT_INT_EQ(strchr(cap, ' ') - cap, 5 + 24);
  ASSERT(cap[9] == '-' && cap[12] == '-' && cap[15] == 'T' && cap[18] == ':' &&
         cap[21] == ':' && cap[24] == '.' && cap[28] == 'Z');

  cap_reset();
  log_line(LOG_WARN, NULL, "started", NULL);
  ASSERT_STR_EQ(after_time(), "level=warn msg=started\n");
}

TEST_IMPL(log_null_values_skipped) {
  cap_reset();
  log_line(LOG_ERROR, NULL, "x", "a", NULL, "b", "2", "c", NULL, NULL);
  ASSERT_STR_EQ(after_time(), "level=error msg=x b=2\n");
}

TEST_IMPL(log_quoting_and_escapes) {
  cap_reset();
  log_line(LOG_INFO, "h h", "m", "empty", "", "space", "a b", "eq", "a=b", "quote", "say \"hi\"",
           "bs", "c:\\tmp", "nl", "l1\nl2", "tab", "a\tb", "cr", "a\rb", "ctl", "a\x01z", "del",
           "\x7f", "utf8", "caf\xc3\xa9", "plain", "a-b_c.d/e:f", NULL);
  ASSERT_STR_EQ(after_time(),
                "level=info handler=\"h h\" msg=m empty=\"\" space=\"a b\" eq=\"a=b\" "
                "quote=\"say \\\"hi\\\"\" bs=\"c:\\\\tmp\" nl=\"l1\\nl2\" tab=\"a\\tb\" "
                "cr=\"a\\rb\" ctl=\"a\\u0001z\" del=\"\\u007f\" utf8=caf\xc3\xa9 "
                "plain=a-b_c.d/e:f\n");
}

TEST_IMPL(log_keys_sanitized) {
  cap_reset();
  log_line(LOG_INFO, NULL, "m", "a key", "1", "k=v", "2", "", "3", "q\"x", "4", NULL);
  ASSERT_STR_EQ(after_time(), "level=info msg=m a_key=1 k_v=2 _=3 q_x=4\n");
}

TEST_IMPL(log_level_filter) {
  cap_reset();
  log_set_level(LOG_WARN);
  ASSERT_INT_EQ(log_get_level(), LOG_WARN);
  log_line(LOG_DEBUG, NULL, "d", NULL);
  log_line(LOG_INFO, NULL, "i", NULL);
  const char *kv[] = {"a", "1"};
  const size_t kvlen[] = {1, 1};
  log_line_pairs(LOG_INFO, NULL, "i", 1, kv, kvlen, NULL);
  ASSERT_INT_EQ(cap_lines, 0);
  log_line(LOG_WARN, NULL, "w", NULL);
  log_line(LOG_ERROR, NULL, "e", NULL);
  ASSERT_INT_EQ(cap_lines, 2);
  ASSERT_CONTAINS(cap, "level=warn msg=w\n");
  ASSERT_CONTAINS(cap, "level=error msg=e\n");
}

TEST_IMPL(log_level_names) {
  ASSERT_INT_EQ(log_level_parse("debug"), LOG_DEBUG);
  ASSERT_INT_EQ(log_level_parse("info"), LOG_INFO);
  ASSERT_INT_EQ(log_level_parse("WARN"), LOG_WARN);
  ASSERT_INT_EQ(log_level_parse("warning"), LOG_WARN);
  ASSERT_INT_EQ(log_level_parse("Error"), LOG_ERROR);
  ASSERT_INT_EQ(log_level_parse("fatal"), -1);
  ASSERT_INT_EQ(log_level_parse(""), -1);
  ASSERT_INT_EQ(log_level_parse(NULL), -1);
  ASSERT_STR_EQ(log_level_name(LOG_DEBUG), "debug");
  ASSERT_STR_EQ(log_level_name(LOG_ERROR), "error");
  ASSERT_STR_EQ(log_level_name((enum log_level)9), "unknown");
}

TEST_IMPL(log_pairs) {
  const char *kv[] = {"a", "1", "b", "x y", "k=v z", "line\nbreak", "bin", "a\0b"};
  const size_t kvlen[] = {1, 1, 1, 3, 5, 10, 3, 3};
  cap_reset();
  log_line_pairs(LOG_INFO, "h", "from lua", 4, kv, kvlen, NULL);
  ASSERT_STR_EQ(after_time(), "level=info handler=h msg=\"from lua\" a=1 b=\"x y\" "
                              "k_v_z=\"line\\nbreak\" bin=\"a\\u0000b\"\n");
  cap_reset();
  log_line_pairs(LOG_INFO, NULL, "m", 0, NULL, NULL, NULL);
  ASSERT_STR_EQ(after_time(), "level=info msg=m\n");
}

/* A 20 KB traceback goes through the heap, whole and escaped. */
TEST_IMPL(log_long_line) {
  static const char frame[] = "\thandler.lua:12: in function 'handle'\n";
  const size_t flen = sizeof frame - 1;
  static char tb[20001];
  size_t n = 0;
  while (n + flen < sizeof tb) {
    memcpy(tb + n, frame, flen);
    n += flen;
  }
  tb[n] = '\0';
  cap_reset();
  log_line(LOG_ERROR, "h", "handler failed", "traceback", tb, "after", "end", NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  const char *line = after_time();
  ASSERT(strncmp(line, "level=error handler=h msg=\"handler failed\" traceback=\"\\thandler.lua:12",
                 70) == 0);
  /* each frame has a tab and a newline, one extra byte each once escaped;
   * plus the two quotes */
  size_t want = strlen("level=error handler=h msg=\"handler failed\" traceback=") + n +
                2 * (n / flen) + 2 + strlen(" after=end\n");
  ASSERT_INT_EQ(strlen(line), want);
  ASSERT_CONTAINS(line, "'handle'\\n\" after=end\n");
  LEAK_CHECK();
}

/* Lines right at the stack buffer's edge switch to the heap cleanly. */
TEST_IMPL(log_stack_edge) {
  static char v[5000];
  for (size_t len = 4000; len < 4200; len++) {
    memset(v, 'x', len);
    v[len] = '\0';
    cap_reset();
    log_line(LOG_INFO, NULL, "m", "v", v, NULL);
    ASSERT_INT_EQ(strlen(after_time()), strlen("level=info msg=m v=\n") + len);
  }
  LEAK_CHECK();
}

TEST_IMPL(log_format_value_bounds) {
  char buf[32];
  ASSERT_INT_EQ(log_format_value(buf, sizeof buf, "plain", 5), 5);
  ASSERT_STR_EQ(buf, "plain");
  ASSERT_INT_EQ(log_format_value(buf, sizeof buf, "", 0), 2);
  ASSERT_STR_EQ(buf, "\"\"");
  ASSERT_INT_EQ(log_format_value(buf, sizeof buf, "a\"b\n", 4), 8);
  ASSERT_STR_EQ(buf, "\"a\\\"b\\n\"");
  /* binary safe: an embedded NUL is escaped, not the end */
  ASSERT_INT_EQ(log_format_value(buf, sizeof buf, "a\0b", 3), 10);
  ASSERT_STR_EQ(buf, "\"a\\u0000b\"");
  /* cut like snprintf */
  ASSERT_INT_EQ(log_format_value(buf, 4, "a b c", 5), 7);
  ASSERT_STR_EQ(buf, "\"a ");
  ASSERT_INT_EQ(log_format_value(NULL, 0, "a b c", 5), 7);
  buf[0] = 'z';
  ASSERT_INT_EQ(log_format_value(buf, 1, "abc", 3), 3);
  ASSERT_STR_EQ(buf, "");
}

TEST_IMPL(log_preserves_errno) {
  cap_reset();
  errno = ENOENT;
  log_line(LOG_INFO, NULL, "m", NULL);
  ASSERT_INT_EQ(errno, ENOENT);
}

/* The default sink writes each line, newline included, with one write(2) on
 * stderr. */
TEST_IMPL(log_default_sink_stderr) {
  int fds[2];
  ASSERT_OK(pipe(fds));
  int saved = dup(STDERR_FILENO);
  ASSERT(saved >= 0);
  ASSERT(dup2(fds[1], STDERR_FILENO) >= 0);
  log_set_sink(NULL, NULL);
  log_set_level(LOG_INFO);
  log_line(LOG_INFO, NULL, "to stderr", "k", "v", NULL);
  log_line(LOG_DEBUG, NULL, "filtered", NULL);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  char buf[512];
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  ASSERT(n > 0);
  buf[n] = '\0';
  close(fds[0]);
  ASSERT_CONTAINS(buf, " level=info msg=\"to stderr\" k=v\n");
  ASSERT(strncmp(buf, "time=", 5) == 0);
  ASSERT_INT_EQ(strchr(buf, '\n') - buf + 1, n); /* exactly one line */
}
