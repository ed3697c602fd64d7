/* Tests for lease.c's keepalive (every held lease of a process renewed in one
 * script call, each lease told its own answer) and its validity: the lease is known valid for LEASE_VALID_MS
 * from the sending of the last successful take or renewal (the key's time to
 * live starts when Redis applies it, after that), judged by the clock alone,
 * not by whether the renewal timer has fired; lease_confirm renews at once
 * and again while the answer came too late to count. */
#include <stdlib.h>
#include <string.h>

#include "clock_virtual.h"
#include "keyslot.h"
#include "lease.h"
#include "replay_broker.h"
#include "scripts.h"
#include "task.h"

static char events[16];
static size_t nevents;

static void on_lease(void *data, enum lease_event ev, const char *holder, long long wait_ms) {
  (void)data, (void)holder, (void)wait_ms;
  if (ev == LEASE_RENEWED) return; /* every renewal: not what these tests count */
  static const char code[] = {
      [LEASE_TAKEN] = 'T',     [LEASE_WAITING] = 'W',  [LEASE_REFUSED] = 'R',
      [LEASE_LOST] = 'L',      [LEASE_TAKEOVER] = 'O', [LEASE_RETAKEN] = 'A',
      [LEASE_CONFIRMED] = 'C', [LEASE_RENEWED] = 'N',  [LEASE_FAILED] = 'F'};
  if (nevents + 1 < sizeof events) events[nevents++] = code[ev];
}

static void released(void *data) { *(int *)data = 1; }

TEST_IMPL(lease_valid_counts_from_the_send_of_the_last_renewal) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_LEASE, "<lease>");
  replay_default(rb, "EVAL <lease> 1 * **", "*1\r\n:1\r\n"); /* taken, renewed, dropped */
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  ASSERT(bk_connected(b, c));
  lease_keepalive *ka = lease_keepalive_new(b, c, clk, "tok 1 m h");
  lease *l = lease_new(ka, "s", "g", "c", on_lease, NULL);
  ASSERT_NOT_NULL(l);
  lease_take(l);
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(events, "T");
  ASSERT(lease_valid(l));
  clock_virtual_advance(clk, 12000); /* renewed at 5 s and 10 s */
  ASSERT(lease_valid(l));
  /* A pause: the renewal due at 15 s has not fired, and the lease is not
   * known valid any more (25 s >= 10 s + LEASE_VALID_MS). */
  clock_virtual_jump(clk, 13000);
  ASSERT(!lease_valid(l));
  size_t sent = replay_nsent(rb, "cmd");
  lease_confirm(l);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), sent + 1); /* at once, not at the timer */
  ASSERT_STR_EQ(events, "T");
  /* Another pause before its answer: it counts from 25 s, not yet valid at
   * 41 s, so one more renewal goes out before the lease is confirmed. */
  clock_virtual_jump(clk, 16000);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), sent + 2);
  ASSERT_STR_EQ(events, "TC");
  ASSERT(lease_valid(l));
  clock_virtual_advance(clk, 60000); /* renewed on its own again */
  ASSERT(lease_valid(l));
  ASSERT_STR_EQ(events, "TC");
  int done = 0;
  lease_release(l, released, &done);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(done, 1);
  ASSERT(!lease_valid(l));
  lease_free(l);
  lease_keepalive_free(ka);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
}

/* A renewal that finds another holder ends the wait with LEASE_LOST. */
TEST_IMPL(lease_confirm_finds_another_holder) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_LEASE, "<lease>");
  replay_expect(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 1 * renew **", "*1\r\n$16\r\nx 2 other/1 box2\r\n");
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  lease_keepalive *ka = lease_keepalive_new(b, c, clk, "tok 1 m h");
  lease *l = lease_new(ka, "s", "g", "c", on_lease, NULL);
  lease_take(l);
  clock_virtual_settle(clk);
  clock_virtual_jump(clk, 30000);
  ASSERT(!lease_valid(l));
  lease_confirm(l);
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(events, "TL");
  ASSERT(!lease_held(l));
  ASSERT(!lease_valid(l));
  int done = 0;
  lease_release(l, released, &done); /* nothing of ours to drop */
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(done, 1);
  lease_free(l);
  lease_keepalive_free(ka);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
}

TEST_IMPL(lease_key_shares_the_stream_slot) {
  char *k = lease_key("payments", "ledger", "c");
  ASSERT_STR_EQ(k, "luastream:consumer:{payments}:ledger:c");
  ASSERT_INT_EQ(keyslot_of(k, strlen(k)), keyslot_of("payments", 8));
  free(k);
  k = lease_key("payments:{3}", "ledger", "c");
  ASSERT_STR_EQ(k, "luastream:consumer:{3}:payments:{3}:ledger:c");
  ASSERT_INT_EQ(keyslot_of(k, strlen(k)), keyslot_of("payments:{3}", 12));
  free(k);
  k = lease_key("{orders}", "g", "");
  ASSERT_STR_EQ(k, "luastream:consumer:{orders}:{orders}:g:");
  free(k);
}

/* Renewals: one script call for all of a process's leases every
 * LEASE_RENEW_MS, whatever their number; a lease another process took is
 * lost on its own while the others are renewed. */
static int lost[4];
static void on_lease_n(void *data, enum lease_event ev, const char *holder, long long wait_ms) {
  (void)holder, (void)wait_ms;
  if (ev == LEASE_LOST) lost[*(int *)data]++;
}

TEST_IMPL(lease_keepalive_renews_every_lease_in_one_call) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_LEASE, "<lease>");
  replay_default(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_expect(rb, "EVAL <lease> 4 * * * * renew **", "*4\r\n:1\r\n:1\r\n:2\r\n:1\r\n");
  /* then the third consumer's name is another process's */
  replay_expect(rb, "EVAL <lease> 4 * * * * renew **",
                "*4\r\n:1\r\n:1\r\n$16\r\nx 2 other/1 box2\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 3 * * * renew **", "*3\r\n:1\r\n:1\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 1 * drop **", "*1\r\n:1\r\n");
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  lease_keepalive *ka = lease_keepalive_new(b, c, clk, "tok 1 m h");
  lease *l[4];
  int index[4];
  const char *consumer[4] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++) {
    index[i] = i;
    l[i] = lease_new(ka, "s", "g", consumer[i], on_lease_n, &index[i]);
    ASSERT_NOT_NULL(l[i]);
    lease_take(l[i]);
  }
  clock_virtual_settle(clk);
  for (int i = 0; i < 4; i++) ASSERT(lease_held(l[i]));
  size_t taken = replay_nsent(rb, "cmd");
  ASSERT_INT_EQ(taken, 4);
  clock_virtual_advance(clk, LEASE_RENEW_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), taken + 1); /* one call for the four */
  ASSERT_CONTAINS(replay_sent(rb, "cmd", taken),
                  "luastream:consumer:{s}:g:a luastream:consumer:{s}:g:b");
  for (int i = 0; i < 4; i++) ASSERT(lease_valid(l[i]));
  clock_virtual_advance(clk, LEASE_RENEW_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), taken + 2);
  ASSERT_INT_EQ(lost[0] + lost[1] + lost[3], 0);
  ASSERT_INT_EQ(lost[2], 1);
  ASSERT(!lease_held(l[2]));
  for (int i = 0; i < 4; i++)
    if (i != 2) ASSERT(lease_held(l[i]));
  /* the three left go on in one call each turn */
  clock_virtual_advance(clk, 3 * LEASE_RENEW_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), taken + 5);
  for (int i = 0; i < 4; i++)
    if (i != 2) ASSERT(lease_valid(l[i]));
  ASSERT_INT_EQ(lost[2], 1);
  for (int i = 0; i < 4; i++) {
    int done = 0;
    lease_release(l[i], released, &done);
    clock_virtual_settle(clk);
    ASSERT_INT_EQ(done, 1);
    lease_free(l[i]);
  }
  lease_keepalive_free(ka);
  ASSERT_INT_EQ(replay_unused(rb), 0);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
}

/* On a Redis Cluster a script's keys must share a slot: one call per slot. */
static int always_cluster(broker *b) {
  (void)b;
  return 1;
}

TEST_IMPL(lease_keepalive_renews_one_call_per_cluster_slot) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  struct broker_ops ops = *b->ops; /* the replay broker, saying it is a cluster */
  ops.cluster = always_cluster;
  const struct broker_ops *plain = b->ops;
  b->ops = &ops;
  replay_alias(rb, SCRIPT_LEASE, "<lease>");
  replay_default(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 2 * * renew **", "*2\r\n:1\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 1 * renew **", "*1\r\n:1\r\n");
  replay_default(rb, "EVAL <lease> 1 * drop **", "*1\r\n:1\r\n");
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  lease_keepalive *ka = lease_keepalive_new(b, c, clk, "tok 1 m h");
  /* payments (two groups: one slot), orders and orders:{7} (a slot each) */
  const char *stream[4] = {"payments", "payments", "orders", "orders:{7}"};
  const char *group[4] = {"ledger", "fraud", "g", "g"};
  lease *l[4];
  int index[4];
  for (int i = 0; i < 4; i++) {
    index[i] = i;
    l[i] = lease_new(ka, stream[i], group[i], "c", on_lease_n, &index[i]);
    lease_take(l[i]);
  }
  clock_virtual_settle(clk);
  size_t taken = replay_nsent(rb, "cmd");
  clock_virtual_advance(clk, LEASE_RENEW_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), taken + 3); /* three slots, three calls */
  int pair = 0;
  for (size_t i = taken; i < taken + 3; i++) {
    const char *sent = replay_sent(rb, "cmd", i);
    if (strstr(sent, "<lease> 2 ")) {
      pair++;
      ASSERT_CONTAINS(sent, "{payments}:ledger:c luastream:consumer:{payments}:fraud:c renew");
    }
  }
  ASSERT_INT_EQ(pair, 1);
  for (int i = 0; i < 4; i++) ASSERT(lease_valid(l[i]));
  for (int i = 0; i < 4; i++) {
    int done = 0;
    lease_release(l[i], released, &done);
    clock_virtual_settle(clk);
    lease_free(l[i]);
  }
  lease_keepalive_free(ka);
  bk_conn_close(b, c);
  b->ops = plain;
  broker_free(b);
  clk->ops->free(clk);
}
