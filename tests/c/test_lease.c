/* Tests for lease.c's validity: the lease is known valid for LEASE_VALID_MS
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
  lease *l = lease_new(b, c, clk, "s", "g", "c", "tok 1 m h", on_lease, NULL);
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
  replay_default(rb, "EVAL <lease> 1 * renew **",
                 "*3\r\n:0\r\n$16\r\nx 2 other/1 box2\r\n:19000\r\n");
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  lease *l = lease_new(b, c, clk, "s", "g", "c", "tok 1 m h", on_lease, NULL);
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
