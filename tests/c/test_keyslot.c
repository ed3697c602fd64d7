/* Tests for keyslot.c against values Redis itself gives (CLUSTER KEYSLOT). */
#include <string.h>

#include "keyslot.h"
#include "task.h"

static unsigned slot(const char *key) { return keyslot_of(key, strlen(key)); }

TEST_IMPL(keyslot_crc16_check_value) {
  ASSERT_INT_EQ(keyslot_crc16("123456789", 9), 0x31C3);
  ASSERT_INT_EQ(keyslot_crc16("", 0), 0);
}

TEST_IMPL(keyslot_matches_redis) {
  /* redis-cli CLUSTER KEYSLOT <key> on a 7.0 cluster node. */
  ASSERT_INT_EQ(slot("foo"), 12182);
  ASSERT_INT_EQ(slot("bar"), 5061);
  ASSERT_INT_EQ(slot("payments"), slot("{payments}:retry:g"));
  ASSERT_INT_EQ(slot("user1000"), 3443);
  ASSERT_INT_EQ(slot("{user1000}.following"), 3443);
  /* an empty tag hashes the whole key; the first '}' after the '{' ends it */
  ASSERT_INT_EQ(slot("foo{}{bar}"), 8363);
  ASSERT_INT_EQ(slot("foo{{bar}}zap"), 4015);
  ASSERT_INT_EQ(slot("{bar"), 4015);
  ASSERT_INT_EQ(slot("foo{bar}{zap}"), slot("bar"));
  ASSERT_INT_EQ(slot("payments:{3}:retry:g"), 1584);
  ASSERT_INT_EQ(slot("3"), 1584);
}

TEST_IMPL(keyslot_partition_is_crc_mod_n) {
  ASSERT_INT_EQ(keyslot_partition("123456789", 9, 16), 0x31C3 % 16);
  ASSERT_INT_EQ(keyslot_partition("{acme}", 6, 7), keyslot_crc16("{acme}", 6) % 7);
  ASSERT_INT_EQ(keyslot_partition("acme", 4, 1), 0);
  ASSERT_INT_EQ(keyslot_partition("acme", 4, 0), 0);
}
