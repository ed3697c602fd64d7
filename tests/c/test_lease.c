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
  replay_alias(rb, SCRIPT_KEEPALIVE, "<keepalive>");
  replay_default(rb, "EVAL <lease> 1 * **", "*1\r\n:1\r\n");               /* taken, dropped */
  replay_default(rb, "EVAL <keepalive> 1 **", "*2\r\n*1\r\n:1\r\n*0\r\n"); /* renewed */
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
  replay_alias(rb, SCRIPT_KEEPALIVE, "<keepalive>");
  replay_expect(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_default(rb, "EVAL <keepalive> 1 **", "*2\r\n*1\r\n$16\r\nx 2 other/1 box2\r\n*0\r\n");
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
  replay_alias(rb, SCRIPT_KEEPALIVE, "<keepalive>");
  replay_default(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_expect(rb, "EVAL <keepalive> 4 * * * * * * 4 0",
                "*2\r\n*4\r\n:1\r\n:1\r\n:2\r\n:1\r\n*0\r\n");
  /* then the third consumer's name is another process's */
  replay_expect(rb, "EVAL <keepalive> 4 * * * * * * 4 0",
                "*2\r\n*4\r\n:1\r\n:1\r\n$16\r\nx 2 other/1 box2\r\n:1\r\n*0\r\n");
  replay_default(rb, "EVAL <keepalive> 3 * * * * * 3 0", "*2\r\n*3\r\n:1\r\n:1\r\n:1\r\n*0\r\n");
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
  replay_alias(rb, SCRIPT_KEEPALIVE, "<keepalive>");
  replay_default(rb, "EVAL <lease> 1 * take **", "*1\r\n:1\r\n");
  replay_default(rb, "EVAL <keepalive> 2 **", "*2\r\n*2\r\n:1\r\n:1\r\n*0\r\n");
  replay_default(rb, "EVAL <keepalive> 1 **", "*2\r\n*1\r\n:1\r\n*0\r\n");
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
    if (strstr(sent, "<keepalive> 2 ")) {
      pair++;
      ASSERT_CONTAINS(sent, "{payments}:ledger:c luastream:consumer:{payments}:fraud:c tok 1 m h");
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

/* Riders (the heartbeats): their sections go in the keepalive's call of
 * their lease's slot, one call per slot per turn carrying the renewals and
 * every section due, each at least every_ms; a section's error is its own. */
struct ride {
  struct lease_rider r;
  uint64_t sent[32]; /* when each section went */
  size_t nsent;
  int ok, failed; /* answers: arrays, strings (its error) */
};

static void ride_answered(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct ride *rd = data;
  if (r && r->type == BK_ARRAY) rd->ok++;
  if (r && r->type == BK_STRING) rd->failed++;
}

/* Answers a keepalive call: every lease renewed; a rider whose section says
 * group "gone" fails with NOGROUP, the others re-stamp nothing. */
static lclock *ride_clock;
static struct ride *riders_seen[2];
static uint64_t call_at[64];
static size_t ncalls;

static char *ride_respond(void *data, const char *conn, int argc, char **words) {
  (void)data, (void)conn;
  if (argc < 3 || strcmp(words[1], "<keepalive>") != 0) return NULL;
  int numkeys = atoi(words[2]);
  int at = 3 + numkeys;
  int n = atoi(words[at + 2]), nr = atoi(words[at + 3]);
  if (ncalls < 64) call_at[ncalls++] = clock_now(ride_clock);
  char *out = malloc(1024);
  int len = snprintf(out, 1024, "*2\r\n*%d\r\n", n);
  for (int i = 0; i < n; i++) len += snprintf(out + len, 1024 - (size_t)len, ":1\r\n");
  len += snprintf(out + len, 1024 - (size_t)len, "*%d\r\n", nr);
  int arg = at + 4;
  for (int j = 0; j < nr; j++) {
    bool gone = strcmp(words[arg + 1], "gone") == 0;
    len +=
        snprintf(out + len, 1024 - (size_t)len, gone ? "$7\r\nNOGROUP\r\n" : "*2\r\n:0\r\n:0\r\n");
    arg += 2; /* leased, group: these riders' whole sections */
  }
  return out;
}

static bool ride_add(void *data, struct lease_rider *r) {
  struct ride *rd = data;
  bk_args_reset(&r->keys);
  bk_args_reset(&r->args);
  bk_args_str(&r->keys, "s");
  bk_args_str(&r->keys, "s-retry");
  bk_args_str(&r->args, rd == riders_seen[0] ? "gone" : "g");
  if (rd->nsent < 32) rd->sent[rd->nsent++] = clock_now(ride_clock);
  return true;
}

/* The riders' tests: a keepalive on a replay broker whose keepalive calls
 * respond answers (ops, when not NULL, stands in for the broker's own: a
 * cluster). */
struct ride_fx {
  lclock *clk;
  replay_broker *rb;
  broker *b;
  const struct broker_ops *own_ops;
  bk_conn *c;
  lease_keepalive *ka;
};

static void ride_fx_open(struct ride_fx *f, replay_respond_fn *respond, struct broker_ops *ops) {
  f->clk = clock_virtual_new(0);
  ride_clock = f->clk;
  ncalls = 0;
  replay_broker *rb = f->rb = replay_new(f->clk);
  f->b = replay_base(rb);
  f->own_ops = f->b->ops;
  if (ops) {
    *ops = *f->b->ops;
    ops->cluster = always_cluster;
    f->b->ops = ops;
  }
  replay_alias(rb, SCRIPT_LEASE, "<lease>");
  replay_alias(rb, SCRIPT_KEEPALIVE, "<keepalive>");
  replay_default(rb, "EVAL <lease> 1 **", "*1\r\n:1\r\n"); /* taken, dropped */
  replay_respond(rb, respond, NULL);
  f->c = bk_conn_open(f->b, "cmd", NULL, NULL);
  clock_virtual_settle(f->clk);
  f->ka = lease_keepalive_new(f->b, f->c, f->clk, "tok 1 m h");
}

static void ride_fx_close(struct ride_fx *f) {
  lease_keepalive_free(f->ka);
  bk_conn_close(f->b, f->c);
  f->b->ops = f->own_ops;
  broker_free(f->b);
  f->clk->ops->free(f->clk);
}

TEST_IMPL(lease_keepalive_carries_riders_in_one_call_per_slot_per_turn) {
  struct ride_fx f;
  ride_fx_open(&f, ride_respond, NULL);
  lclock *clk = f.clk;
  replay_broker *rb = f.rb;
  lease_keepalive *ka = f.ka;
  lease *l[2];
  int index[2] = {0, 1};
  memset(lost, 0, sizeof lost);
  l[0] = lease_new(ka, "s", "g1", "c", on_lease_n, &index[0]);
  l[1] = lease_new(ka, "s", "g2", "c", on_lease_n, &index[1]);
  for (int i = 0; i < 2; i++) lease_take(l[i]);
  clock_virtual_settle(clk);
  size_t taken = replay_nsent(rb, "cmd");
  struct ride rd[2];
  const uint64_t every[2] = {1000, 1500};
  for (int i = 0; i < 2; i++) {
    memset(&rd[i], 0, sizeof rd[i]);
    lease_rider_init(&rd[i].r);
    rd[i].r.every_ms = every[i];
    rd[i].r.add = ride_add;
    rd[i].r.answered = ride_answered;
    rd[i].r.data = &rd[i];
    riders_seen[i] = &rd[i];
    lease_ride(l[i], &rd[i].r);
  }
  for (int t = 0; t < 60; t++) clock_virtual_advance(clk, 100); /* 6 s */
  /* Every call renews both leases: the renewal needs no call of its own. */
  size_t calls = replay_nsent(rb, "cmd") - taken;
  ASSERT_INT_EQ(calls, ncalls);
  for (size_t i = taken; i < taken + calls; i++) {
    const char *sent = replay_sent(rb, "cmd", i);
    ASSERT_CONTAINS(sent, "luastream:consumer:{s}:g1:c luastream:consumer:{s}:g2:c");
  }
  /* One call per turn (a single server: one slot), fewer than the sections
   * and renewals sent on their own would take. */
  for (size_t i = 1; i < ncalls; i++) ASSERT(call_at[i] > call_at[i - 1]);
  ASSERT(calls < rd[0].nsent + rd[1].nsent + 1);
  /* each section at least every every_ms, the first within it */
  for (int i = 0; i < 2; i++) {
    ASSERT(rd[i].nsent >= 6000 / every[i]);
    ASSERT(rd[i].sent[0] <= every[i]);
    for (size_t k = 1; k < rd[i].nsent; k++) ASSERT(rd[i].sent[k] - rd[i].sent[k - 1] <= every[i]);
  }
  /* the first rider's group is gone: its error is its own */
  ASSERT_INT_EQ(rd[0].ok, 0);
  ASSERT_INT_EQ(rd[0].failed, (int)rd[0].nsent);
  ASSERT_INT_EQ(rd[1].ok, (int)rd[1].nsent);
  ASSERT_INT_EQ(rd[1].failed, 0);
  for (int i = 0; i < 2; i++) ASSERT(lease_valid(l[i]));
  ASSERT_INT_EQ(lost[0] + lost[1], 0);
  /* Unridden: an outstanding section is still answered; no more go. */
  replay_hold(rb);
  while (rd[0].r.pending == 0) clock_virtual_advance(clk, 100);
  lease_unride(&rd[0].r);
  int failed = rd[0].failed;
  replay_release(rb);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(rd[0].r.pending, 0);
  ASSERT_INT_EQ(rd[0].failed, failed + 1);
  size_t n0 = rd[0].nsent;
  clock_virtual_advance(clk, 3000);
  ASSERT_INT_EQ(rd[0].nsent, n0);
  ASSERT(rd[1].nsent > 0);
  for (int i = 0; i < 2; i++) {
    int done = 0;
    lease_release(l[i], released, &done);
    clock_virtual_settle(clk);
    ASSERT_INT_EQ(done, 1);
    lease_free(l[i]);
  }
  /* its lease gone, the second rider goes no more */
  size_t n1 = rd[1].nsent;
  clock_virtual_advance(clk, 3000);
  ASSERT_INT_EQ(rd[1].nsent, n1);
  for (int i = 0; i < 2; i++) lease_rider_free(&rd[i].r);
  ride_fx_close(&f);
}

/* On a Redis Cluster each rider goes in its lease's slot's call, with that
 * slot's renewals only. */
TEST_IMPL(lease_keepalive_carries_riders_in_their_lease_slot) {
  struct ride_fx f;
  struct broker_ops ops; /* the replay broker, saying it is a cluster */
  ride_fx_open(&f, ride_respond, &ops);
  lclock *clk = f.clk;
  replay_broker *rb = f.rb;
  lease_keepalive *ka = f.ka;
  const char *stream[2] = {"payments", "orders"}; /* two slots */
  lease *l[2];
  int index[2] = {0, 1};
  struct ride rd[2];
  for (int i = 0; i < 2; i++) {
    l[i] = lease_new(ka, stream[i], "g", "c", on_lease_n, &index[i]);
    lease_take(l[i]);
  }
  clock_virtual_settle(clk);
  size_t taken = replay_nsent(rb, "cmd");
  for (int i = 0; i < 2; i++) {
    memset(&rd[i], 0, sizeof rd[i]);
    lease_rider_init(&rd[i].r);
    rd[i].r.every_ms = 1000;
    rd[i].r.add = ride_add;
    rd[i].r.answered = ride_answered;
    rd[i].r.data = &rd[i];
    riders_seen[i] = NULL; /* neither fails */
    lease_ride(l[i], &rd[i].r);
  }
  clock_virtual_advance(clk, 1000);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), taken + 2); /* two slots, two calls */
  for (size_t i = taken; i < taken + 2; i++) {
    const char *sent = replay_sent(rb, "cmd", i);
    bool pay = strstr(sent, "{payments}") != NULL, ord = strstr(sent, "{orders}") != NULL;
    ASSERT(pay != ord);                               /* one slot's keys only */
    ASSERT_CONTAINS(sent, "tok 1 m h 20000 1 1 1 g"); /* its lease renewed, its rider */
  }
  for (int i = 0; i < 2; i++) {
    ASSERT_INT_EQ(rd[i].nsent, 1);
    ASSERT_INT_EQ(rd[i].ok, 1);
  }
  for (int i = 0; i < 2; i++) {
    int done = 0;
    lease_release(l[i], released, &done);
    clock_virtual_settle(clk);
    lease_free(l[i]);
    lease_rider_free(&rd[i].r);
  }
  ride_fx_close(&f);
}

/* Redis checks a script's declared KEYS against the caller's ACL before the
 * script runs, and refuses the whole call (NOPERM) when one is not the
 * user's: a rider whose keys the user lost must not take the renewal of
 * another consumer's lease with it (its answer alone is the error). */
static int refused_failed[2];
static void on_lease_refused(void *data, enum lease_event ev, const char *holder, long long w) {
  (void)holder, (void)w;
  if (ev == LEASE_FAILED) refused_failed[*(int *)data]++;
}

static char *acl_respond(void *data, const char *conn, int argc, char **words) {
  (void)data, (void)conn;
  if (argc < 3 || strcmp(words[1], "<keepalive>") != 0) return NULL;
  int numkeys = atoi(words[2]);
  for (int i = 3; i < 3 + numkeys && i < argc; i++)
    if (strcmp(words[i], "b") == 0 || strcmp(words[i], "b:retry:g") == 0)
      return strdup(
          "-NOPERM this user has no permissions to access one of the keys used as "
          "arguments\r\n");
  return ride_respond(data, conn, argc, words);
}

static bool acl_add(void *data, struct lease_rider *r) {
  (void)data;
  bk_args_reset(&r->keys);
  bk_args_reset(&r->args);
  bk_args_str(&r->keys, "b");
  bk_args_str(&r->keys, "b:retry:g");
  bk_args_str(&r->args, "g");
  return true;
}

TEST_IMPL(lease_keepalive_renews_when_a_riders_keys_are_refused) {
  struct ride_fx f;
  ride_fx_open(&f, acl_respond, NULL);
  lclock *clk = f.clk;
  lease_keepalive *ka = f.ka;
  int index[2] = {0, 1};
  memset(refused_failed, 0, sizeof refused_failed);
  lease *a = lease_new(ka, "a", "g", "c", on_lease_refused, &index[0]);
  lease *bl = lease_new(ka, "b", "g", "c", on_lease_refused, &index[1]);
  lease_take(a);
  lease_take(bl);
  clock_virtual_settle(clk);
  ASSERT(lease_held(a) && lease_held(bl));
  struct ride rd;
  memset(&rd, 0, sizeof rd);
  lease_rider_init(&rd.r);
  rd.r.every_ms = 1000; /* b's heartbeat: min_idle 3 s */
  rd.r.add = acl_add;
  rd.r.answered = ride_answered;
  rd.r.data = &rd;
  lease_ride(bl, &rd.r);
  for (int t = 0; t < 120; t++) clock_virtual_advance(clk, 100); /* 12 s */
  ASSERT(rd.r.pending == 0);
  /* a's lease was renewed all along: known valid, no renewal refused */
  ASSERT_INT_EQ(refused_failed[0], 0);
  ASSERT(lease_valid(a));
  int done = 0;
  lease_release(a, released, &done);
  clock_virtual_settle(clk);
  lease_release(bl, released, &done);
  clock_virtual_settle(clk);
  lease_free(a);
  lease_free(bl);
  lease_rider_free(&rd.r);
  ride_fx_close(&f);
}
