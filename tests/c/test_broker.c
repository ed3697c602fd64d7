/* Tests for broker.c: reply predicates, version parsing and the argv builder.
 * Replies are built by hand here; test_broker_redis.c checks real ones. */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "task.h"

static bk_reply str_reply(int type, const char *s) {
  bk_reply r;
  memset(&r, 0, sizeof r);
  r.type = type;
  r.str = (char *)s;
  r.len = strlen(s);
  return r;
}

TEST_IMPL(broker_reply_is_error) {
  bk_reply busy = str_reply(BK_ERROR, "BUSYGROUP Consumer Group name already exists");
  bk_reply err = str_reply(BK_ERROR, "ERR");
  bk_reply errx = str_reply(BK_ERROR, "ERRX something");
  bk_reply status = str_reply(BK_STATUS, "BUSYGROUP");
  ASSERT_INT_EQ(bk_reply_is_error(&busy, "BUSYGROUP"), 1);
  ASSERT_INT_EQ(bk_reply_is_error(&busy, "BUSY"), 0); /* whole word only */
  ASSERT_INT_EQ(bk_reply_is_error(&busy, "NOGROUP"), 0);
  ASSERT_INT_EQ(bk_reply_is_error(&busy, NULL), 1);
  ASSERT_INT_EQ(bk_reply_is_error(&err, "ERR"), 1);
  ASSERT_INT_EQ(bk_reply_is_error(&errx, "ERR"), 0);
  ASSERT_INT_EQ(bk_reply_is_error(&status, "BUSYGROUP"), 0);
  ASSERT_INT_EQ(bk_reply_is_error(&status, NULL), 0);
  ASSERT_INT_EQ(bk_reply_is_error(NULL, "ERR"), 0);
}

TEST_IMPL(broker_version_parse) {
  ASSERT_INT_EQ(bk_version_parse("7.0.15", 6), 70015);
  ASSERT_INT_EQ(bk_version_parse("8.4.0", 5), 80400);
  ASSERT_INT_EQ(bk_version_parse("6.2.14", 6), 60214);
  ASSERT_INT_EQ(bk_version_parse("255.255.255", 11), -1); /* would collide */
  ASSERT_INT_EQ(bk_version_parse("10.99.99", 8), 109999);
  /* 8.4 release candidates report 8.3.2xx: below 8.4.0, above 8.3.x */
  ASSERT_INT_EQ(bk_version_parse("8.3.224", 7), 80399);
  ASSERT(bk_version_parse("8.3.224", 7) < bk_version_parse("8.4.0", 5));
  ASSERT(bk_version_parse("8.4.0", 5) > bk_version_parse("7.99.99", 7));
  /* len bounds the text: a version inside a longer buffer */
  ASSERT_INT_EQ(bk_version_parse("7.0.15\r\nredis_git_sha1", 6), 70015);

  const char *bad[] = {"",       "7",        "7.0",    "7.0.",      ".0.1",
                       "7..1",   "7.0.15.1", "v7.0.1", "7.0.1-rc1", "7.0.1 ",
                       " 7.0.1", "7.100.0",  "a.b.c",  "garbage",   "7,0,1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (bk_version_parse(bad[i], strlen(bad[i])) != -1)
      TEST_FAIL_("bk_version_parse(\"%s\") should be -1", bad[i]);
  ASSERT_INT_EQ(bk_version_parse(NULL, 0), -1);
}

TEST_IMPL(broker_info_version) {
  char v[32];
  bk_reply info = str_reply(BK_STRING,
                            "# Server\r\nmy_redis_version:1.1.1\r\nredis_version:7.0.15\r\n"
                            "redis_git_sha1:00000000\r\n");
  ASSERT_INT_EQ(bk_info_version(&info, v, sizeof v), 70015);
  ASSERT_STR_EQ(v, "7.0.15");

  /* first line, no \r, at the very end */
  bk_reply first = str_reply(BK_STRING, "redis_version:8.4.0");
  ASSERT_INT_EQ(bk_info_version(&first, v, sizeof v), 80400);
  ASSERT_STR_EQ(v, "8.4.0");

  /* a version we cannot parse: -1, but the text is still reported */
  bk_reply odd = str_reply(BK_STRING, "# Server\nredis_version:7.2.4-custom\n");
  ASSERT_INT_EQ(bk_info_version(&odd, v, sizeof v), -1);
  ASSERT_STR_EQ(v, "7.2.4-custom");

  char tiny[4];
  ASSERT_INT_EQ(bk_info_version(&info, tiny, sizeof tiny), 70015);
  ASSERT_STR_EQ(tiny, "7.0");

  bk_reply missing = str_reply(BK_STRING, "# Server\r\nredis_mode:standalone\r\n");
  strcpy(v, "junk");
  ASSERT_INT_EQ(bk_info_version(&missing, v, sizeof v), -1);
  ASSERT_STR_EQ(v, "");
  bk_reply error = str_reply(BK_ERROR, "redis_version:7.0.15");
  ASSERT_INT_EQ(bk_info_version(&error, v, sizeof v), -1);
  ASSERT_INT_EQ(bk_info_version(NULL, v, sizeof v), -1);
  ASSERT_INT_EQ(bk_info_version(&info, NULL, 0), 70015);
}

TEST_IMPL(broker_args_build) {
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XADD");
  bk_args_str(&a, "payments");
  bk_args_str(&a, "MAXLEN");
  bk_args_num(&a, 1000);
  bk_args_add(&a, "*ignored", 1);
  bk_args_add(&a, "a\0b", 3); /* binary safe */
  bk_args_num(&a, -9223372036854775807LL - 1);
  ASSERT_INT_EQ(a.argc, 7);
  ASSERT_MEM_EQ(a.argv[0], a.argvlen[0], "XADD");
  ASSERT_MEM_EQ(a.argv[3], a.argvlen[3], "1000");
  ASSERT_MEM_EQ(a.argv[4], a.argvlen[4], "*");
  ASSERT_INT_EQ(a.argvlen[5], 3);
  ASSERT(memcmp(a.argv[5], "a\0b", 3) == 0);
  ASSERT_MEM_EQ(a.argv[6], a.argvlen[6], "-9223372036854775808");

  /* growth keeps earlier entries */
  for (int i = 0; i < 1000; i++) bk_args_str(&a, "f");
  ASSERT_INT_EQ(a.argc, 1007);
  ASSERT(a.cap >= 1007);
  ASSERT_MEM_EQ(a.argv[3], a.argvlen[3], "1000");
  ASSERT_MEM_EQ(a.argv[1006], a.argvlen[1006], "f");

  /* reset keeps the arrays and frees the number slots */
  int cap = a.cap;
  bk_args_reset(&a);
  ASSERT_INT_EQ(a.argc, 0);
  ASSERT_INT_EQ(a.cap, cap);
  for (int i = 0; i < 8; i++) bk_args_num(&a, i);
  ASSERT_MEM_EQ(a.argv[7], a.argvlen[7], "7");
  ASSERT_MEM_EQ(a.argv[0], a.argvlen[0], "0");

  bk_args_free(&a);
  ASSERT_INT_EQ(a.argc, 0);
  ASSERT_NULL(a.argv);
  bk_args_free(&a); /* twice is fine */
  LEAK_CHECK();
}

/* A 9th number is a programming error: it stops the process. */
TEST_IMPL(broker_args_too_many_numbers) {
  fflush(NULL);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO); /* the expected complaint */
    struct bk_args a;
    bk_args_init(&a);
    for (int i = 0; i < 9; i++) bk_args_num(&a, i);
    _exit(0);
  }
  int status = 0;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}
