/* Tests for cluster_keys.c: a subscription's keys in one hash slot. */
#include <string.h>

#include "cluster_keys.h"
#include "task.h"

static struct handler_spec spec(char *stream, char *reply_to, char *dead_letter) {
  struct handler_spec s = {
      .stream = stream, .group = "ledger", .reply_to = reply_to, .dead_letter = dead_letter};
  return s;
}

TEST_IMPL(cluster_keys_tagged_names_share_a_slot) {
  char why[1024] = "";
  struct handler_spec s = spec("{payments}", "{payments}.posted", "{payments}:dead");
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), 0);
  s = spec("payments:{3}", "payments.posted:{3}", NULL);
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), 0);
  /* a partitioned stream: partition p's keys all carry {p} */
  s = spec("payments", "payments.posted", "payments.dead");
  s.partitions = 16;
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), 0);
}

TEST_IMPL(cluster_keys_untagged_names_are_explained) {
  char why[1024] = "";
  struct handler_spec s = spec("payments", "payments.posted", NULL);
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), -1);
  /* slots as CLUSTER KEYSLOT gives them */
  ASSERT_STR_EQ(why,
                "in Redis Cluster the keys an outcome writes in one step must share a hash slot, "
                "and these do not: stream \"payments\" (slot 8507), retry stream "
                "\"payments:retry:ledger\" (slot 16331), delay set \"payments:delayed:ledger\" "
                "(slot 9752), reply_to \"payments.posted\" (slot 1806); give the names one hash "
                "tag, e.g. stream = \"{payments}\", reply_to = \"{payments}.posted\" (the retry "
                "stream and delay set follow the stream's name)");
  s = spec("orders", "payments.posted", "orders:dead");
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), -1);
  ASSERT_CONTAINS(why,
                  "e.g. stream = \"{orders}\", reply_to = \"{orders}:payments.posted\", "
                  "dead_letter = \"{orders}:dead\" (the retry");
  /* a '}' without a tag: the leases' braces around the name would not hash
   * to the name's slot */
  s = spec("a}b", NULL, NULL);
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), -1);
  ASSERT_CONTAINS(why, "consumer leases \"luastream:consumer:{a}b}:ledger:\"");
  s = spec("{payments}", "payments.posted", NULL);
  ASSERT_INT_EQ(cluster_keys_check(&s, why, sizeof why), -1);
  ASSERT_CONTAINS(why,
                  "reply_to \"payments.posted\" (slot 1806); put the stream's hash tag "
                  "{payments} in every name");
}
