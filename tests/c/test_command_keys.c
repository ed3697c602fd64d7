/* Tests for command_keys.c: the key positions Redis' COMMAND INFO gives. */
#include <string.h>

#include "command_keys.h"
#include "task.h"

/* The keys of the command given as one space-separated string, joined by
 * spaces ("" when none). */
static const char *keys_of(const char *text) {
  static char copy[256], out[256];
  const char *argv[32];
  size_t argvlen[32];
  int argc = 0;
  snprintf(copy, sizeof copy, "%s", text);
  for (char *t = strtok(copy, " "); t && argc < 32; t = strtok(NULL, " ")) {
    argv[argc] = t;
    argvlen[argc++] = strlen(t);
  }
  int keys[8];
  int n = command_keys(argc, argv, argvlen, keys, 8);
  out[0] = '\0';
  for (int i = 0; i < n && i < 8; i++) {
    if (i) strcat(out, " ");
    strcat(out, argv[keys[i]]);
  }
  return out;
}

TEST_IMPL(command_keys_shapes) {
  ASSERT_STR_EQ(keys_of("PING"), "");
  ASSERT_STR_EQ(keys_of("INFO server"), "");
  ASSERT_STR_EQ(keys_of("GET a"), "a");
  ASSERT_STR_EQ(keys_of("hset h f v"), "h");
  ASSERT_STR_EQ(keys_of("XADD s * f v"), "s");
  ASSERT_STR_EQ(keys_of("XINFO GROUPS s"), "s");
  ASSERT_STR_EQ(keys_of("XGROUP CREATE s g $ MKSTREAM"), "s");
  ASSERT_STR_EQ(keys_of("XGROUP HELP"), "");
  ASSERT_STR_EQ(keys_of("DEL a b c"), "a b c");
  ASSERT_STR_EQ(keys_of("BLPOP a b 0"), "a b");
  ASSERT_STR_EQ(keys_of("MSET a 1 b 2"), "a b");
  ASSERT_STR_EQ(keys_of("LMOVE a b LEFT RIGHT"), "a b");
  ASSERT_STR_EQ(keys_of("EVAL script 2 k1 k2 a1"), "k1 k2");
  ASSERT_STR_EQ(keys_of("EVALSHA abc 0 a1"), "");
  ASSERT_STR_EQ(keys_of("EVAL script 5 k1"), "k1");
  ASSERT_STR_EQ(keys_of("EVAL script x k1"), "");
  ASSERT_STR_EQ(keys_of("ZUNIONSTORE d 2 a b WEIGHTS 1 2"), "d a b");
  ASSERT_STR_EQ(keys_of("ZUNION 2 a b"), "a b");
  ASSERT_STR_EQ(keys_of("XREADGROUP GROUP g c COUNT 10 BLOCK 0 STREAMS s r > >"), "s r");
  ASSERT_STR_EQ(keys_of("xread streams s 0"), "s");
  ASSERT_STR_EQ(keys_of("XREADGROUP GROUP g c"), "");
  ASSERT_STR_EQ(keys_of("XREADGROUP GROUP streams streams STREAMS s >"), "s");
}

TEST_IMPL(command_keys_counts_past_max) {
  const char *argv[] = {"DEL", "a", "b", "c"};
  size_t argvlen[] = {3, 1, 1, 1};
  int keys[2];
  ASSERT_INT_EQ(command_keys(4, argv, argvlen, keys, 2), 3);
  ASSERT_INT_EQ(keys[0], 1);
  ASSERT_INT_EQ(keys[1], 2);
}
