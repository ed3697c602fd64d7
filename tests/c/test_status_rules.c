/* Tests for status_rules.c: the durations `luastream status` prints and the
 * rules that decide what needs attention. */
#include "status_rules.h"
#include "task.h"

TEST_IMPL(status_format_ms) {
  static const struct {
    long long ms;
    const char *text;
  } cases[] = {
      {0, "0ms"},       {850, "850ms"},         {999, "999ms"},  {1000, "1s"},      {1234, "1.2s"},
      {9999, "9.9s"},   {10000, "10s"},         {59999, "59s"},  {60000, "1m"},     {90000, "1.5m"},
      {180000, "3m"},   {3599999, "59m"},       {3600000, "1h"}, {9000000, "2.5h"}, {7200000, "2h"},
      {86400000, "1d"}, {5 * 86400000LL, "5d"}, {-1, "-"}};
  char buf[32];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ASSERT_STR_EQ(status_format_ms(cases[i].ms, buf, sizeof buf), cases[i].text);
}

TEST_IMPL(status_stall_limit) {
  ASSERT_INT_EQ(status_stall_after(30000), 30000);
  ASSERT_INT_EQ(status_stall_after(-1), STATUS_STALL_DEFAULT_MS);
  ASSERT_INT_EQ(status_stall_after(0), STATUS_STALL_DEFAULT_MS);
}

/* Stalled by the consumer's lease, not its idle time (which an empty
 * blocking read does not reset on Redis 7.0). */
TEST_IMPL(status_consumer_stalled) {
  ASSERT_INT_EQ(status_lease_age(LEASE_TTL_MS), 0);
  ASSERT_INT_EQ(status_lease_age(LEASE_TTL_MS - 1200), 1200);
  ASSERT_INT_EQ(status_lease_age(STATUS_LEASE_NONE), -1);
  ASSERT_INT_EQ(status_lease_age(-1), 0); /* no time to live: never late */
  ASSERT(status_consumer_stalled(3, STATUS_LEASE_NONE));
  ASSERT(status_consumer_stalled(3, LEASE_TTL_MS - STATUS_LEASE_LATE_MS - 1));
  ASSERT(!status_consumer_stalled(3, LEASE_TTL_MS - STATUS_LEASE_LATE_MS)); /* at the limit */
  ASSERT(!status_consumer_stalled(3, LEASE_TTL_MS - LEASE_RENEW_MS - 500)); /* a renewal late */
  ASSERT(!status_consumer_stalled(0, STATUS_LEASE_NONE)); /* a stopped host holding nothing */
}

TEST_IMPL(status_pending_unretried) {
  ASSERT(status_pending_unretried(false, 60001, 60000));
  ASSERT(!status_pending_unretried(false, 60000, 60000)); /* at the limit: not yet */
  ASSERT(!status_pending_unretried(true, 999999, 60000)); /* a claiming read takes it */
  ASSERT(!status_pending_unretried(false, -1, 60000));    /* nothing pending */
}

TEST_IMPL(status_waiting_unread) {
  ASSERT(status_waiting_unread(5, -1, 60000)); /* no consumer at all */
  ASSERT(status_waiting_unread(5, 60001, 60000));
  ASSERT(!status_waiting_unread(5, 100, 60000)); /* someone reads: it may catch up */
  ASSERT(!status_waiting_unread(0, -1, 60000));  /* nothing waits */
}

TEST_IMPL(status_lag_growing) {
  long long rising[] = {0, 3, 7, 12};
  ASSERT(status_lag_growing(rising, 4));
  ASSERT(!status_lag_growing(rising, 3)); /* too few refreshes to tell */
  long long flat[] = {5, 6, 6, 7};
  ASSERT(!status_lag_growing(flat, 4));
  long long dip[] = {5, 9, 2, 4};
  ASSERT(!status_lag_growing(dip, 4));
  long long unknown[] = {-1, 3, 7, 12};
  ASSERT(!status_lag_growing(unknown, 4));
  long long older_unknown[] = {-1, 1, 3, 7, 12};
  ASSERT(status_lag_growing(older_unknown, 5)); /* only the newest four count */
}
