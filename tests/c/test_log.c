/* Tests for log.c: line layout, quoting and escaping, the level filter, long
 * lines through the heap, the default sink's single write, and JSON lines
 * (escapes, invalid UTF-8, numbers, repeated keys, long and cut lines). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
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
  log_set_format(LOG_FORMAT_LOGFMT);
}

static void json_reset(void) {
  cap_reset();
  log_set_format(LOG_FORMAT_JSON);
}

/* The captured JSON line after its time field, which is checked for shape
 * ("YYYY-MM-DDTHH:MM:SS.mmmZ"); the line must parse as JSON. */
static const char *json_after_time(void) {
  char e[256];
  ASSERT(strncmp(cap, "{\"time\":\"", 9) == 0);
  const char *t = cap + 9;
  ASSERT(t[4] == '-' && t[7] == '-' && t[10] == 'T' && t[13] == ':' && t[16] == ':' &&
         t[19] == '.' && t[23] == 'Z' && t[24] == '"');
  size_t len = strlen(cap);
  ASSERT(len > 0 && cap[len - 1] == '\n' && cap[len - 2] == '}');
  if (!rt_json_valid(cap, len - 1, e, sizeof e)) TEST_FAIL_("not JSON (%s): %s", e, cap);
  return t + 25;
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
  log_line(LOG_INFO, "post_payment", "payment posted", "payment_id", "42", "account", "acme", NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  ASSERT_INT_EQ(cap_level, LOG_INFO);
  ASSERT_STR_EQ(after_time(),
                "level=info handler=post_payment msg=\"payment posted\" "
                "payment_id=42 account=acme\n");

  /* time=YYYY-MM-DDTHH:MM:SS.mmmZ */
  ASSERT_INT_EQ(strchr(cap, ' ') - cap, 5 + 24);
  ASSERT(cap[9] == '-' && cap[12] == '-' && cap[15] == 'T' && cap[18] == ':' && cap[21] == ':' &&
         cap[24] == '.' && cap[28] == 'Z');

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
  ASSERT_STR_EQ(after_time(),
                "level=info handler=h msg=\"from lua\" a=1 b=\"x y\" "
                "k_v_z=\"line\\nbreak\" bin=\"a\\u0000b\"\n");
  cap_reset();
  log_line_pairs(LOG_INFO, NULL, "m", 0, NULL, NULL, NULL);
  ASSERT_STR_EQ(after_time(), "level=info msg=m\n");
}

/* A traceback of about 20 KB: one frame again and again, each with a tab and
 * a newline; its length in *len, its frames in *frames. */
static const char *traceback_20k(size_t *len, size_t *frames) {
  static const char frame[] = "\thandler.lua:12: in function 'handle'\n";
  const size_t flen = sizeof frame - 1;
  static char tb[20001];
  size_t n = 0;
  while (n + flen < sizeof tb) {
    memcpy(tb + n, frame, flen);
    n += flen;
  }
  tb[n] = '\0';
  *len = n;
  *frames = n / flen;
  return tb;
}

/* A 20 KB traceback goes through the heap, whole and escaped. */
TEST_IMPL(log_long_line) {
  size_t n, frames;
  const char *tb = traceback_20k(&n, &frames);
  cap_reset();
  log_line(LOG_ERROR, "h", "handler failed", "traceback", tb, "after", "end", NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  const char *line = after_time();
  ASSERT(strncmp(line, "level=error handler=h msg=\"handler failed\" traceback=\"\\thandler.lua:12",
                 70) == 0);
  /* each frame has a tab and a newline, one extra byte each once escaped;
   * plus the two quotes */
  size_t want = strlen("level=error handler=h msg=\"handler failed\" traceback=") + n + 2 * frames +
                2 + strlen(" after=end\n");
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

/* ---- JSON lines ---- */

TEST_IMPL(log_format_names) {
  ASSERT_INT_EQ(log_format_parse("logfmt"), LOG_FORMAT_LOGFMT);
  ASSERT_INT_EQ(log_format_parse("JSON"), LOG_FORMAT_JSON);
  ASSERT_INT_EQ(log_format_parse("text"), -1);
  ASSERT_INT_EQ(log_format_parse(NULL), -1);
  ASSERT_STR_EQ(log_format_name(LOG_FORMAT_JSON), "json");
  ASSERT_INT_EQ(log_get_format(), LOG_FORMAT_LOGFMT); /* the default */
}

TEST_IMPL(log_json_layout) {
  json_reset();
  log_line(LOG_WARN, "post_payment", "payment posted", "payment_id", "42", LOG_NUMBER "attempt",
           "3", "skipped", NULL, "account", "acme", NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  ASSERT_INT_EQ(cap_level, LOG_WARN);
  /* a string that looks like a number stays a string: only marked fields are numbers */
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"warn\",\"handler\":\"post_payment\","
                "\"msg\":\"payment posted\",\"payment_id\":\"42\","
                "\"attempt\":3,\"account\":\"acme\"}\n");
  json_reset();
  log_line(LOG_INFO, NULL, NULL, NULL);
  ASSERT_STR_EQ(json_after_time(), ",\"level\":\"info\",\"msg\":\"\"}\n");
  /* the time is logfmt's, same clock, same text */
  char logfmt_time[32];
  cap_reset();
  log_line(LOG_INFO, NULL, "m", NULL);
  memcpy(logfmt_time, cap + 5, 24);
  json_reset();
  log_line(LOG_INFO, NULL, "m", NULL);
  ASSERT(memcmp(cap + 9, logfmt_time, 10) == 0); /* the same day, at least */
  log_set_format(LOG_FORMAT_LOGFMT);
}

/* LOG_NUMBER leaves logfmt lines as they were. */
TEST_IMPL(log_number_mark_in_logfmt) {
  cap_reset();
  log_line(LOG_INFO, NULL, "m", LOG_NUMBER "n", "5", "s", "x", NULL);
  ASSERT_STR_EQ(after_time(), "level=info msg=m n=5 s=x\n");
}

TEST_IMPL(log_json_escapes) {
  const char *kv[] = {
      "q", "say \"hi\"\\now", "ctl",  "a\nb\rc\td\be\ff\x01g\x7fh\0i",       "k\"e\ny", "v",
      "",  "empty key",       "utf8", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"};
  const size_t kvlen[] = {1, 12, 3, 17, 5, 1, 0, 9, 4, 9};
  json_reset();
  log_line_pairs(LOG_INFO, "h\"", "line\none", 5, kv, kvlen, NULL);
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"info\",\"handler\":\"h\\\"\",\"msg\":\"line\\none\","
                "\"q\":\"say \\\"hi\\\"\\\\now\","
                "\"ctl\":\"a\\nb\\rc\\td\\be\\ff\\u0001g\\u007fh\\u0000i\","
                "\"k\\\"e\\ny\":\"v\",\"_\":\"empty key\","
                "\"utf8\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}\n");
  log_set_format(LOG_FORMAT_LOGFMT);
}

/* Bytes that are not well-formed UTF-8 become U+FFFD, one per byte; the
 * line holds only well-formed UTF-8. */
TEST_IMPL(log_json_invalid_utf8) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"\xff", "\\ufffd"},
      {"a\xc3", "a\\ufffd"},                                /* cut at the end */
      {"\xc3(", "\\ufffd("},                                /* bad continuation */
      {"\xc0\xaf", "\\ufffd\\ufffd"},                       /* overlong '/' */
      {"\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"},            /* overlong, 3 bytes */
      {"\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"},            /* a surrogate */
      {"\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"}, /* above U+10FFFF */
      {"\x80\xc3\xa9", "\\ufffd\xc3\xa9"},                  /* stray continuation, then é */
      {"\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"},             /* U+10FFFF itself */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *kv[] = {"k\xfe", cases[i].in};
    const size_t kvlen[] = {2, strlen(cases[i].in)};
    json_reset();
    log_line_pairs(LOG_INFO, NULL, "m", 1, kv, kvlen, NULL);
    char want[128];
    snprintf(want, sizeof want, ",\"level\":\"info\",\"msg\":\"m\",\"k\\ufffd\":\"%s\"}\n",
             cases[i].out);
    ASSERT_STR_EQ(json_after_time(), want);
  }
  log_set_format(LOG_FORMAT_LOGFMT);
}

/* Marked values are numbers when they are JSON numbers, strings otherwise;
 * unmarked values are always strings. */
TEST_IMPL(log_json_numbers) {
  const char *kv[] = {"int",   "42",    "neg",     "-7",  "frac",
                      "1.5",   "exp",   "-2.5e-3", "big", "18446744073709551615",
                      "unit",  "10ms",  "lead0",   "01",  "nan",
                      "nan",   "empty", "",        "dot", "1.",
                      "plain", "42",    "sp",      " 1"};
  size_t kvlen[24];
  for (int i = 0; i < 24; i++) kvlen[i] = strlen(kv[i]);
  const unsigned char numeric[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1};
  json_reset();
  log_line_pairs(LOG_INFO, NULL, "m", 12, kv, kvlen, numeric);
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"info\",\"msg\":\"m\",\"int\":42,\"neg\":-7,\"frac\":1.5,"
                "\"exp\":-2.5e-3,\"big\":18446744073709551615,\"unit\":\"10ms\","
                "\"lead0\":\"01\",\"nan\":\"nan\",\"empty\":\"\",\"dot\":\"1.\","
                "\"plain\":\"42\",\"sp\":\" 1\"}\n");
  log_set_format(LOG_FORMAT_LOGFMT);
}

/* A key is written once: the fixed fields keep theirs, the last pair with a
 * key keeps it, other repeats become fields.KEY, fields.KEY.2, ... */
TEST_IMPL(log_json_duplicates) {
  const char *kv[] = {"fields.msg", "c", "msg", "a", "version", "mine",    "level",
                      "b",          "x", "1",   "x", "2",       "version", "v7"};
  size_t kvlen[14];
  for (int i = 0; i < 14; i++) kvlen[i] = strlen(kv[i]);
  json_reset();
  log_line_pairs(LOG_INFO, "h", "m", 7, kv, kvlen, NULL);
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"info\",\"handler\":\"h\",\"msg\":\"m\",\"fields.msg\":\"c\","
                "\"fields.msg.2\":\"a\",\"fields.version\":\"mine\",\"fields.level\":\"b\","
                "\"fields.x\":\"1\",\"x\":\"2\",\"version\":\"v7\"}\n");
  /* logfmt writes every pair as given */
  cap_reset();
  log_line_pairs(LOG_INFO, "h", "m", 7, kv, kvlen, NULL);
  ASSERT_STR_EQ(after_time(),
                "level=info handler=h msg=m fields.msg=c msg=a version=mine "
                "level=b x=1 x=2 version=v7\n");
  /* a renamed key may meet a pair of that name: renamed again */
  const char *again[] = {"msg", "a", "fields.msg", "b"};
  const size_t againlen[] = {3, 1, 10, 1};
  json_reset();
  log_line_pairs(LOG_INFO, NULL, "m", 2, again, againlen, NULL);
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"info\",\"msg\":\"m\",\"fields.msg\":\"a\","
                "\"fields.fields.msg\":\"b\"}\n");
  /* keys that differ only in invalid bytes read the same once replaced: still unique */
  const char *bad[] = {"k\xff", "1", "k\xfe", "2"};
  const size_t badlen[] = {2, 1, 2, 1};
  json_reset();
  log_line_pairs(LOG_INFO, NULL, "m", 2, bad, badlen, NULL);
  ASSERT_STR_EQ(json_after_time(),
                ",\"level\":\"info\",\"msg\":\"m\",\"k\\ufffd\":\"1\","
                "\"fields.k\\ufffd\":\"2\"}\n");
  log_set_format(LOG_FORMAT_LOGFMT);
}

/* More pairs than fit on the stack: still unique keys, no leak. */
TEST_IMPL(log_json_many_pairs) {
  enum { N = 300 };
  static char keys[N][8];
  const char *kv[2 * N];
  size_t kvlen[2 * N];
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "k%d", i % 150); /* each key twice */
    kv[2 * i] = keys[i];
    kvlen[2 * i] = strlen(keys[i]);
    kv[2 * i + 1] = "v";
    kvlen[2 * i + 1] = 1;
  }
  json_reset();
  log_line_pairs(LOG_INFO, NULL, "m", N, kv, kvlen, NULL);
  json_after_time();
  ASSERT_CONTAINS(cap, ",\"fields.k0\":\"v\",");
  ASSERT_CONTAINS(cap, ",\"k149\":\"v\"}\n");
  log_set_format(LOG_FORMAT_LOGFMT);
  LEAK_CHECK();
}

/* A 20 KB traceback goes through the heap as one JSON line. */
TEST_IMPL(log_json_long_line) {
  size_t n, frames;
  const char *tb = traceback_20k(&n, &frames);
  json_reset();
  log_line(LOG_ERROR, "h", "handler failed", "traceback", tb, LOG_NUMBER "n", "7", NULL);
  ASSERT_INT_EQ(cap_lines, 1);
  const char *line = json_after_time();
  size_t want = strlen(
                    ",\"level\":\"error\",\"handler\":\"h\",\"msg\":\"handler failed\","
                    "\"traceback\":\"\"") +
                n + 2 * frames + strlen(",\"n\":7}\n");
  ASSERT_INT_EQ(strlen(line), want);
  ASSERT_CONTAINS(line, "'handle'\\n\",\"n\":7}\n");
  log_set_format(LOG_FORMAT_LOGFMT);
  LEAK_CHECK();
}

/* log_format_line into a fixed buffer: whole when it fits; cut at a field
 * and marked (still one JSON object) when not. */
TEST_IMPL(log_format_line_fixed) {
  char buf[160], e[256];
  const char *kv[] = {
      "phase", "loop", "stalled_ms",
      "10500", "long", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
  size_t kvlen[] = {5, 4, 10, 5, 4, strlen(kv[5])};
  const unsigned char numeric[] = {0, 1, 0};
  log_set_format(LOG_FORMAT_JSON);
  size_t n = log_format_line(buf, sizeof buf, 0, LOG_ERROR, NULL, "stalled", 2, kv, kvlen, numeric);
  ASSERT_STR_EQ(buf,
                "{\"time\":\"1970-01-01T00:00:00.000Z\",\"level\":\"error\",\"msg\":\"stalled\","
                "\"phase\":\"loop\",\"stalled_ms\":10500}\n");
  ASSERT_INT_EQ(n, strlen(buf));
  n = log_format_line(buf, sizeof buf, 0, LOG_ERROR, NULL, "stalled", 3, kv, kvlen, numeric);
  ASSERT_STR_EQ(buf,
                "{\"time\":\"1970-01-01T00:00:00.000Z\",\"level\":\"error\",\"msg\":\"stalled\","
                "\"phase\":\"loop\",\"stalled_ms\":10500,\"log_truncated\":true}\n");
  ASSERT(rt_json_valid(buf, n - 1, e, sizeof e));
  log_set_format(LOG_FORMAT_LOGFMT);
  n = log_format_line(buf, sizeof buf, 0, LOG_ERROR, "h", "stalled", 2, kv, kvlen, numeric);
  ASSERT_STR_EQ(buf,
                "time=1970-01-01T00:00:00.000Z level=error handler=h msg=stalled phase=loop "
                "stalled_ms=10500\n");
  ASSERT_INT_EQ(n, strlen(buf));
  ASSERT_INT_EQ(log_format_line(buf, 8, 0, LOG_ERROR, NULL, "m", 0, NULL, NULL, NULL), 0);
}
