/* Tests for group_setup.c on Redis Cluster: the two XGROUP CREATE (the
 * stream and its retry stream, one hash slot) may be answered in either
 * order. While the slot migrates and the stream has already gone to the new
 * node, the old node answers the stream's with ASK and the retry stream's at
 * once; the stream's is answered by the new node afterwards. The group is
 * decided on both answers, whichever came first.
 *
 * The cluster is two scripted nodes (replay brokers, made by the router's
 * node-broker factory): 7000 serves the stream's slot, 7001 the others and
 * is the migration's target. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "broker.h"
#include "clock.h"
#include "group_setup.h"
#include "keyslot.h"
#include "log.h"
#include "replay_broker.h"
#include "task.h"
#include "url.h"

#define STREAM "{pay}"
#define RETRY "{pay}:retry:ledger"

struct fixture {
  uv_loop_t loop;
  lclock *clock;
  replay_broker *nodes[2];
  int given;
  broker *b;
  bk_conn *conn;
  bool up;
};

static struct fixture *fx;

static char logged[4096]; /* the log lines, kept to look for one */

static void keep_line(void *data, enum log_level level, const char *line, size_t len) {
  (void)data, (void)level;
  size_t used = strlen(logged);
  if (used + len < sizeof logged) memcpy(logged + used, line, len);
}

static void quiet(void) {
  logged[0] = '\0';
  log_set_sink(keep_line, NULL);
}

static broker *make_node(void *data, const struct redis_url *url) {
  (void)data;
  int i = url->port - 7000;
  ASSERT(i == 0 || i == 1);
  fx->given |= 1 << i;
  return replay_base(fx->nodes[i]);
}

static void on_state(void *data, bk_conn *conn, int up) {
  (void)data, (void)conn;
  fx->up = up;
}

static void turn_until(bool *cond) {
  uint64_t deadline = uv_now(&fx->loop) + 5000;
  while (!*cond) {
    if (uv_now(&fx->loop) > deadline) TEST_FAIL_("the cluster connection never came up");
    /* waits for a timer (the router's map refresh) only when nothing else is due */
    uv_run(&fx->loop, uv_backend_timeout(&fx->loop) == 0 ? UV_RUN_NOWAIT : UV_RUN_ONCE);
    uv_update_time(&fx->loop);
  }
}

static void settle(void) {
  for (int i = 0; i < 50; i++) uv_run(&fx->loop, UV_RUN_NOWAIT);
}

/* Node 7000 serves the stream's slot, 7001 every other; the stream's
 * XGROUP CREATE gets ASK to 7001 on 7000, and what 7001 then answers is
 * stream_reply; the retry stream's is answered by 7000 with retry_reply. */
static void start(const char *stream_reply, const char *retry_reply) {
  fx = calloc(1, sizeof *fx);
  ASSERT_NOT_NULL(fx);
  ASSERT_OK(uv_loop_init(&fx->loop));
  fx->clock = clock_uv_new(&fx->loop);
  ASSERT_NOT_NULL(fx->clock);
  unsigned slot = keyslot_of(STREAM, strlen(STREAM));
  ASSERT_INT_EQ(keyslot_of(RETRY, strlen(RETRY)), slot);
  ASSERT(slot > 0 && slot < KEYSLOT_COUNT - 1);
  char slots[512], ask[64];
  snprintf(slots, sizeof slots,
           "*3\r\n"
           "*3\r\n:0\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n"
           "*3\r\n:%u\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n"
           "*3\r\n:%u\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n",
           slot - 1, slot, slot, slot + 1);
  snprintf(ask, sizeof ask, "-ASK %u 127.0.0.1:7001\r\n", slot);
  for (int i = 0; i < 2; i++) {
    fx->nodes[i] = replay_new(fx->clock);
    replay_default(fx->nodes[i], "INFO cluster", "$17\r\ncluster_enabled:1\r\n");
    replay_default(fx->nodes[i], "CLUSTER SLOTS", slots);
    replay_default(fx->nodes[i], "ASKING", "+OK\r\n");
  }
  replay_expect(fx->nodes[0], "XGROUP CREATE " STREAM " ledger * MKSTREAM", ask);
  replay_expect(fx->nodes[0], "XGROUP CREATE " RETRY " ledger 0 MKSTREAM", retry_reply);
  replay_expect(fx->nodes[1], "XGROUP CREATE " STREAM " ledger * MKSTREAM", stream_reply);
  replay_default(fx->nodes[0], "XGROUP SETID " STREAM " ledger 0", ask);
  replay_default(fx->nodes[1], "XGROUP SETID " STREAM " ledger 0", "+OK\r\n");
  struct redis_url u;
  char err[256];
  ASSERT_OK(url_parse("redis://127.0.0.1:7000", &u, err, sizeof err));
  fx->b = broker_cluster_new_with(&fx->loop, &u, make_node, NULL);
  ASSERT_NOT_NULL(fx->b);
  fx->conn = bk_conn_open(fx->b, "command", on_state, NULL);
  ASSERT_NOT_NULL(fx->conn);
  turn_until(&fx->up);
}

static void stop(void) {
  bk_conn_close(fx->b, fx->conn);
  broker_free(fx->b);
  for (int i = 0; i < 2; i++)
    if (!(fx->given & (1 << i))) broker_free(replay_base(fx->nodes[i]));
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&fx->loop));
  fx->clock->ops->free(fx->clock);
  free(fx);
  fx = NULL;
}

struct events {
  int answered, ready, failed, refused;
  char key[64], why[160];
};

static void on_event(void *data, enum group_event ev, const char *key, const char *why) {
  struct events *e = data;
  switch (ev) {
    case GROUP_ANSWERED: e->answered++; break;
    case GROUP_READY: e->ready++; break;
    case GROUP_FAILED: e->failed++; break;
    case GROUP_CREATE_REFUSED:
      e->refused++;
      snprintf(e->key, sizeof e->key, "%s", key);
      snprintf(e->why, sizeof e->why, "%s", why);
      break;
  }
}

static struct handler_spec spec(const char *start_at) {
  return (struct handler_spec){.name = "post",
                               .stream = STREAM,
                               .group = "ledger",
                               .consumer = "c1",
                               .start = "new",
                               .start_at = (char *)start_at};
}

static void run_setup(const struct handler_spec *s, struct events *e) {
  group_setup *g = group_new(fx->b, fx->conn, s, RETRY, on_event, e);
  ASSERT_NOT_NULL(g);
  ASSERT_OK(group_create(g, false));
  settle();
  ASSERT_INT_EQ(group_pending(g), 0);
  group_free(g);
  /* the retry stream's answer came first: the stream's went round by ASK */
  ASSERT_STR_EQ(replay_log(fx->nodes[1], "command"),
                "ASKING\nXGROUP CREATE " STREAM " ledger $ MKSTREAM\n");
  ASSERT_INT_EQ(replay_unused(fx->nodes[0]), 0);
  ASSERT_INT_EQ(replay_unused(fx->nodes[1]), 0);
}

TEST_IMPL(group_setup_stream_refused_after_the_retry_streams_answer) {
  quiet();
  start("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "+OK\r\n");
  struct handler_spec s = spec(NULL);
  struct events e = {0};
  run_setup(&s, &e);
  ASSERT_INT_EQ(e.ready, 0); /* not ready on the retry stream's answer alone */
  ASSERT_INT_EQ(e.refused, 1);
  ASSERT_STR_EQ(e.key, STREAM);
  ASSERT_CONTAINS(e.why, "WRONGTYPE");
  ASSERT_INT_EQ(e.answered, 1);
  stop();
}

TEST_IMPL(group_setup_ready_once_both_answered_in_either_order) {
  quiet();
  start("+OK\r\n", "-BUSYGROUP Consumer Group name already exists\r\n");
  struct handler_spec s = spec(NULL);
  struct events e = {0};
  run_setup(&s, &e);
  ASSERT_INT_EQ(e.ready, 1);
  ASSERT_INT_EQ(e.answered, 1);
  ASSERT_INT_EQ(e.refused + e.failed, 0);
  ASSERT_CONTAINS(logged, "msg=\"group created\"");
  stop();
}

TEST_IMPL(group_setup_moves_an_existing_groups_cursor_answered_out_of_order) {
  quiet();
  start("-BUSYGROUP Consumer Group name already exists\r\n", "+OK\r\n");
  struct handler_spec s = spec("beginning");
  struct events e = {0};
  group_setup *g = group_new(fx->b, fx->conn, &s, RETRY, on_event, &e);
  ASSERT_NOT_NULL(g);
  ASSERT_OK(group_create(g, false));
  settle();
  ASSERT_INT_EQ(group_pending(g), 0);
  ASSERT_INT_EQ(e.ready, 1);
  /* the stream's group existed: its cursor moved, once */
  ASSERT_STR_EQ(replay_log(fx->nodes[1], "command"), "ASKING\nXGROUP CREATE " STREAM
                                                     " ledger 0 MKSTREAM\n"
                                                     "ASKING\nXGROUP SETID " STREAM " ledger 0\n");
  group_free(g);
  stop();
}
