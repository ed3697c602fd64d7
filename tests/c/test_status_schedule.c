/* Tests for status_judge_schedule: when `luastream status` says a schedule
 * needs attention. */
#include <stdlib.h>
#include <string.h>

#include "status_judge.h"
#include "task.h"

/* A schedule as status_query reads it from its hash, nothing running. */
static struct st_schedule schedule(long long next_tick) {
  struct st_schedule s;
  memset(&s, 0, sizeof s);
  s.name = "nightly";
  s.handlers = "nightly.lua";
  s.read = s.exists = true;
  s.last_tick = next_tick - 60000;
  s.next_tick = next_tick;
  s.last_at = s.runs = s.errors = -1;
  s.lease_until = s.running = -1;
  return s;
}

TEST_IMPL(status_schedule_late_without_a_lease) {
  struct status_query q;
  memset(&q, 0, sizeof q);
  q.server_ms = 1800000000000LL;
  struct st_schedule s = schedule(q.server_ms - STATUS_TICK_LATE_MS - 1000);
  ASSERT(status_judge_schedule(&q, &s));
  ASSERT_CONTAINS(s.attention, "schedule nightly: its next tick was due at");
  ASSERT_CONTAINS(s.attention, "no host runs nightly.lua");
  free(s.attention);
  s = schedule(q.server_ms - 1000); /* due a second ago: the tick is being taken */
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_NULL(s.attention);
}

TEST_IMPL(status_schedule_running_long_tick_is_not_late) {
  /* A tick that runs longer than a minute holds the next one back; its host
   * holds the lease (renewed while it runs): busy, not abandoned. */
  struct status_query q;
  memset(&q, 0, sizeof q);
  q.server_ms = 1800000000000LL;
  struct st_schedule s = schedule(q.server_ms - 10 * 60000);
  s.running = s.next_tick;
  s.lease_until = q.server_ms + 3000;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_NULL(s.attention);
  /* The lease ran out and nobody took it: late again. */
  s.lease_until = q.server_ms - 1000;
  ASSERT(status_judge_schedule(&q, &s));
  ASSERT_CONTAINS(s.attention, "has not run: no host runs nightly.lua");
  free(s.attention);
}

TEST_IMPL(status_schedule_next_after_a_change_to_a_rarer_schedule) {
  /* The file went from hourly to daily: the hash's next is the hosts' old
   * hourly one, two hours gone; by the file the next tick is tomorrow. */
  struct status_query q;
  memset(&q, 0, sizeof q);
  long long day = 86400000;
  long long last = 20000 * day; /* a midnight, UTC */
  q.server_ms = last + 2 * 3600000 + 60000;
  struct st_schedule s = schedule(last + 3600000);
  s.last_tick = last;
  s.every_ms = day;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_NULL(s.attention);
  char why[128];
  ASSERT_INT_EQ(cron_parse("0 0 * * *", &s.cron, why, sizeof why), 0);
  s.every_ms = 0;
  s.has_cron = true;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_NULL(s.attention);
  /* A day and more later with nothing done: late by the file too. */
  q.server_ms = last + day + 2 * 60000;
  ASSERT(status_judge_schedule(&q, &s));
  ASSERT_CONTAINS(s.attention, "its next tick was due at");
  free(s.attention);
}

TEST_IMPL(status_schedule_next_before_any_tick_is_the_files) {
  /* No tick done yet (no hash, or one without next): the next tick is the
   * file's first after the server's now, and nothing can be late. */
  struct status_query q;
  memset(&q, 0, sizeof q);
  long long day = 86400000;
  q.server_ms = 20000 * day + 3600000 + 5;
  struct st_schedule s = schedule(-1);
  s.exists = false;
  s.last_tick = s.next_tick = -1;
  s.every_ms = 300000;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_INT_EQ(s.next_tick, 20000 * day + 3600000 + 300000);
  char why[128];
  ASSERT_INT_EQ(cron_parse("0 3 * * *", &s.cron, why, sizeof why), 0);
  s.every_ms = 0;
  s.has_cron = true;
  s.next_tick = -1;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_INT_EQ(s.next_tick, 20000 * day + 3 * 3600000);
  /* After a change to a rarer schedule the shown next is the file's. */
  s = schedule(20000 * day + 3600000);
  s.last_tick = 20000 * day;
  s.every_ms = day;
  q.server_ms = 20000 * day + 2 * 3600000;
  ASSERT(!status_judge_schedule(&q, &s));
  ASSERT_INT_EQ(s.next_tick, 20001 * day);
}
