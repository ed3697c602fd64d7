/* Tests for broker_cluster.c: the Redis Cluster router driven through scripted
 * nodes, with no server.
 *
 * broker_cluster_new_with makes each node's broker with the factory below: a
 * replay broker (replay_broker.h) per node address, answering from a model of
 * the cluster that each test changes as a cluster would (a slot moved, a slot
 * migrating, a master replaced by its replica). Every node answers
 * `SET key token` with "node key token" when it serves the key's slot, with
 * MOVED when it does not, and with ASK while the key has gone to a migration's
 * target, which answers it after ASKING; CLUSTER SLOTS is built from the
 * model. So each reply names the node that executed the command and echoes
 * the command, and every test checks each reply against the command that
 * asked for it. Everything runs on one libuv loop (the router's map refresh
 * timer, the replay brokers' delivery timers). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "broker.h"
#include "clock.h"
#include "keyslot.h"
#include "log.h"
#include "replay_broker.h"
#include "scripts.h"
#include "task.h"
#include "url.h"

#define MAX_NODES 16
#define NO_OWNER 0xff

/* ---- the model cluster and its nodes ---- */

struct node {
  char addr[32];        /* "127.0.0.1:7000" */
  replay_broker *rb;    /* its script; the router frees it once it was given */
  bool given;           /* to the router, by the factory */
  char asking_conn[64]; /* the connection whose last command was ASKING, "" if none */
  int executed;         /* SET commands it answered with a value */
};

struct cluster {
  uv_loop_t loop;
  lclock *clock;
  struct node nodes[MAX_NODES];
  int nnodes;
  uint8_t owner[KEYSLOT_COUNT];     /* node index serving each slot, or NO_OWNER */
  uint8_t importing[KEYSLOT_COUNT]; /* a migration's target, or NO_OWNER */
  bool gone[KEYSLOT_COUNT];         /* the migrating slot's keys have all moved */
  bool down;                        /* every node answers CLUSTERDOWN */
  int made;                         /* node brokers the factory made */
  broker *b;
};

static struct cluster *cl;

static int node_index(const char *addr) {
  for (int i = 0; i < cl->nnodes; i++)
    if (strcmp(cl->nodes[i].addr, addr) == 0) return i;
  return -1;
}

static char *respond(void *data, const char *conn, int argc, char **words);

static int add_node(int port) {
  ASSERT(cl->nnodes < MAX_NODES);
  struct node *n = &cl->nodes[cl->nnodes];
  snprintf(n->addr, sizeof n->addr, "127.0.0.1:%d", port);
  n->rb = replay_new(cl->clock);
  replay_respond(n->rb, respond, n);
  return cl->nnodes++;
}

static void serve(unsigned from, unsigned to, int node) {
  for (unsigned s = from; s <= to; s++) cl->owner[s] = (uint8_t)node;
}

static unsigned slot_of(const char *key) { return keyslot_of(key, strlen(key)); }

/* A reply in RESP, malloc'd (the replay broker frees it). */
static char *resp_bulk(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(n + 32);
  ASSERT_NOT_NULL(out);
  snprintf(out, n + 32, "$%zu\r\n%s\r\n", n, s);
  return out;
}

static char *resp_error(const char *fmt, unsigned slot, const char *addr) {
  char text[128];
  snprintf(text, sizeof text, fmt, slot, addr);
  char *out = malloc(strlen(text) + 4);
  ASSERT_NOT_NULL(out);
  sprintf(out, "-%s\r\n", text);
  return out;
}

/* CLUSTER SLOTS from the model: one range per run of slots of one node. */
static char *resp_slots(void) {
  size_t cap = 1 << 16, len = 0;
  char *body = malloc(cap);
  ASSERT_NOT_NULL(body);
  int ranges = 0;
  for (unsigned s = 0; s < KEYSLOT_COUNT;) {
    unsigned e = s;
    while (e + 1 < KEYSLOT_COUNT && cl->owner[e + 1] == cl->owner[s]) e++;
    if (cl->owner[s] != NO_OWNER) {
      const struct node *n = &cl->nodes[cl->owner[s]];
      const char *colon = strchr(n->addr, ':');
      ASSERT(len + 200 < cap);
      len += (size_t)snprintf(
          body + len, cap - len, "*3\r\n:%u\r\n:%u\r\n*3\r\n$%d\r\n%.*s\r\n:%s\r\n$4\r\nid%02d\r\n",
          s, e, (int)(colon - n->addr), (int)(colon - n->addr), n->addr, colon + 1, cl->owner[s]);
      ranges++;
    }
    s = e + 1;
  }
  char *out = malloc(len + 32);
  ASSERT_NOT_NULL(out);
  snprintf(out, len + 32, "*%d\r\n%s", ranges, body);
  free(body);
  return out;
}

/* One node's answers (replay_respond_fn). */
static char *respond(void *data, const char *conn, int argc, char **words) {
  struct node *n = data;
  int self = (int)(n - cl->nodes);
  bool asking = strcmp(n->asking_conn, conn) == 0;
  n->asking_conn[0] = '\0';
  if (argc == 1 && strcmp(words[0], "ASKING") == 0) {
    snprintf(n->asking_conn, sizeof n->asking_conn, "%s", conn);
    return strdup("+OK\r\n");
  }
  if (argc == 2 && strcmp(words[0], "INFO") == 0)
    return resp_bulk("# Cluster\r\ncluster_enabled:1");
  if (argc == 2 && strcmp(words[0], "CLUSTER") == 0) return resp_slots();
  if (argc == 1 && strcmp(words[0], "PING") == 0) {
    char text[48];
    snprintf(text, sizeof text, "%d PING -", self);
    return resp_bulk(text);
  }
  /* SET key token, or EVAL <script> 1 key token */
  const char *key, *token;
  if (argc == 3 && strcmp(words[0], "SET") == 0) {
    key = words[1];
    token = words[2];
  } else if (argc == 5 && strcmp(words[0], "EVAL") == 0 && strcmp(words[2], "1") == 0) {
    key = words[3];
    token = words[4];
  } else {
    return NULL;
  }
  if (cl->down) return strdup("-CLUSTERDOWN The cluster is down\r\n");
  unsigned slot = slot_of(key);
  int owner = cl->owner[slot], target = cl->importing[slot];
  bool serves =
      (owner == self && !(target != NO_OWNER && cl->gone[slot])) || (target == self && asking);
  if (serves) {
    char text[160];
    snprintf(text, sizeof text, "%d %s %s", self, key, token);
    n->executed++;
    return resp_bulk(text);
  }
  if (owner == self) return resp_error("ASK %u %s", slot, cl->nodes[target].addr);
  if (owner == NO_OWNER) return strdup("-CLUSTERDOWN Hash slot not served\r\n");
  return resp_error("MOVED %u %s", slot, cl->nodes[owner].addr);
}

/* The router's factory (bk_node_broker_fn): a replay broker per address of
 * the model; an address the model does not have is a test failure. */
static broker *make_node(void *data, const struct redis_url *url) {
  ASSERT(data == cl);
  char addr[300];
  snprintf(addr, sizeof addr, "%s:%d", url->host, url->port);
  int i = node_index(addr);
  if (i < 0) TEST_FAIL_("the router asked for a node the cluster does not have: %s", addr);
  struct node *n = &cl->nodes[i];
  ASSERT(!n->given); /* one broker per node */
  n->given = true;
  cl->made++;
  return replay_base(n->rb);
}

/* Three masters: 0-5460, 5461-10922, 10923-16383, the seed on 7000. */
static void cluster_start(void) {
  cl = calloc(1, sizeof *cl);
  ASSERT_NOT_NULL(cl);
  ASSERT_OK(uv_loop_init(&cl->loop));
  cl->clock = clock_uv_new(&cl->loop);
  ASSERT_NOT_NULL(cl->clock);
  memset(cl->owner, NO_OWNER, sizeof cl->owner);
  memset(cl->importing, NO_OWNER, sizeof cl->importing);
  serve(0, 5460, add_node(7000));
  serve(5461, 10922, add_node(7001));
  serve(10923, 16383, add_node(7002));
  struct redis_url u;
  char err[256];
  ASSERT_OK(url_parse("redis://127.0.0.1:7000", &u, err, sizeof err));
  cl->b = broker_cluster_new_with(&cl->loop, &u, make_node, cl);
  ASSERT_NOT_NULL(cl->b);
  log_set_level(getenv("CLUSTER_DEBUG") ? LOG_DEBUG : LOG_WARN);
}

static void cluster_stop(void) {
  broker_free(cl->b); /* frees the node brokers: every connection is closed */
  for (int i = 0; i < cl->nnodes; i++)
    if (!cl->nodes[i].given) broker_free(replay_base(cl->nodes[i].rb));
  uv_run(&cl->loop, UV_RUN_DEFAULT); /* the timers' close callbacks */
  ASSERT_OK(uv_loop_close(&cl->loop));
  cl->clock->ops->free(cl->clock);
  free(cl);
  cl = NULL;
}

/* Turns the loop until cond holds; fails after 5 s. It waits for a timer
 * (the router's map refresh) only when nothing else is due: a UV_RUN_ONCE
 * would wait for that timer after what made cond true. */
#define RUN_UNTIL(cond)                                                                    \
  do {                                                                                     \
    uint64_t deadline_ = uv_now(&cl->loop) + 5000;                                         \
    while (!(cond)) {                                                                      \
      if (uv_now(&cl->loop) > deadline_) TEST_FAIL_("never true: %s", #cond);              \
      uv_run(&cl->loop, uv_backend_timeout(&cl->loop) == 0 ? UV_RUN_NOWAIT : UV_RUN_ONCE); \
      uv_update_time(&cl->loop);                                                           \
    }                                                                                      \
  } while (0)

/* Runs the loop until nothing is due now. */
static void settle(void) {
  for (int i = 0; i < 50; i++) uv_run(&cl->loop, UV_RUN_NOWAIT);
}

/* ---- a caller of the router ---- */

struct caller {
  bk_conn *conn;
  int ups, downs;
  bool up;
  int faults;      /* fault callbacks */
  char fault[128]; /* the last one's why */
};

static void on_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why) {
  struct caller *c = data;
  ASSERT(conn == c->conn);
  ASSERT_INT_EQ(fault, BK_FAULT_DOWN);
  c->faults++;
  snprintf(c->fault, sizeof c->fault, "%s", why);
}

static void on_state(void *data, bk_conn *conn, int up) {
  struct caller *c = data;
  ASSERT(conn == c->conn || c->conn == NULL);
  if (up) {
    ASSERT(!c->up);
    c->ups++;
  } else {
    c->downs++;
  }
  c->up = up;
}

struct call {
  char key[48];
  char token[16];
  int done;         /* callbacks: exactly one */
  int node;         /* the node that executed it; -1 if it failed */
  bool error_reply; /* an error reply (text in err) */
  char err[160];
  int order;  /* when its callback ran, counted from 1 */
  int expect; /* the node the model said serves its key when the reply came */
};

static int calls_done;

static void on_call(void *data, const bk_reply *r, const char *err) {
  struct call *k = data;
  k->done++;
  if (k->done != 1) TEST_FAIL_("%s %s: called back %d times", k->key, k->token, k->done);
  k->order = ++calls_done;
  k->node = -1;
  if (r == NULL) {
    ASSERT_NOT_NULL(err);
    snprintf(k->err, sizeof k->err, "%s", err);
    return;
  }
  if (r->type == BK_ERROR) {
    k->error_reply = true;
    snprintf(k->err, sizeof k->err, "%.*s", (int)r->len, r->str);
    return;
  }
  ASSERT_INT_EQ(r->type, BK_STRING);
  /* "node key token": the reply to this call, not another's */
  char key[64], token[32];
  int node;
  char text[200];
  snprintf(text, sizeof text, "%.*s", (int)r->len, r->str);
  if (sscanf(text, "%d %63s %31s", &node, key, token) != 3)
    TEST_FAIL_("%s %s: unexpected reply \"%s\"", k->key, k->token, text);
  if (strcmp(key, k->key) != 0 || strcmp(token, k->token) != 0)
    TEST_FAIL_("%s %s: got the reply of %s %s", k->key, k->token, key, token);
  k->node = node;
  unsigned s = slot_of(k->key);
  k->expect = cl->importing[s] != NO_OWNER && cl->gone[s] ? cl->importing[s] : cl->owner[s];
}

static int send_set(struct caller *c, struct call *k, const char *key, int token) {
  snprintf(k->key, sizeof k->key, "%s", key);
  snprintf(k->token, sizeof k->token, "t%d", token);
  k->done = 0;
  k->err[0] = '\0';
  k->error_reply = false;
  const char *argv[] = {"SET", k->key, k->token};
  size_t len[] = {3, strlen(k->key), strlen(k->token)};
  return bk_command(cl->b, c->conn, 3, argv, len, on_call, k);
}

static void open_caller(struct caller *c, const char *name) {
  memset(c, 0, sizeof *c);
  c->conn = bk_conn_open(cl->b, name, on_state, c);
  ASSERT_NOT_NULL(c->conn);
  bk_conn_on_fault(cl->b, c->conn, on_fault);
  RUN_UNTIL(c->up);
}

/* A key of slot range [from, to] (a fresh one for each n). */
static void key_in(char *out, size_t len, unsigned from, unsigned to, int n) {
  for (int i = 0;; i++) {
    snprintf(out, len, "k%d.%d", n, i);
    unsigned s = slot_of(out);
    if (s >= from && s <= to) return;
  }
}

static size_t count_sent(int node, const char *prefix) {
  replay_broker *rb = cl->nodes[node].rb;
  size_t n = 0;
  for (size_t i = 0; i < replay_nsent(rb, NULL); i++) {
    const char *s = strchr(replay_sent(rb, NULL, i), ':') + 2;
    if (strncmp(s, prefix, strlen(prefix)) == 0) n++;
  }
  return n;
}

static size_t count_slots_asked(void) {
  size_t n = 0;
  for (int i = 0; i < cl->nnodes; i++) n += count_sent(i, "CLUSTER SLOTS");
  return n;
}

/* ---- routing ---- */

TEST_IMPL(cluster_routes_each_command_to_its_slots_master) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  ASSERT_INT_EQ(bk_is_cluster(cl->b), 1);
  ASSERT_INT_EQ(cl->made, 3);
  ASSERT_INT_EQ(c.ups, 1);
  /* the seed was asked what it is, then for the map */
  ASSERT_INT_EQ(count_sent(0, "INFO cluster"), 1);
  ASSERT(count_slots_asked() >= 1);

  enum { N = 60 };
  static struct call calls[N];
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof key, "user:%d", i);
    ASSERT_OK(send_set(&c, &calls[i], key, i));
  }
  /* hash tags: one slot, one node */
  static struct call tagged[2];
  ASSERT_OK(send_set(&c, &tagged[0], "{order:7}.items", 100));
  ASSERT_OK(send_set(&c, &tagged[1], "{order:7}.total", 101));
  RUN_UNTIL(calls_done == N + 2);
  for (int i = 0; i < N; i++) {
    ASSERT_INT_EQ(calls[i].done, 1);
    ASSERT_INT_EQ(calls[i].node, cl->owner[slot_of(calls[i].key)]);
  }
  ASSERT_INT_EQ(tagged[0].node, cl->owner[slot_of("order:7")]);
  ASSERT_INT_EQ(tagged[1].node, tagged[0].node);
  /* nothing was redirected: each node saw only its own keys */
  for (int i = 0; i < cl->nnodes; i++) ASSERT_INT_EQ(count_sent(i, "ASKING"), 0);
  ASSERT_INT_EQ(c.downs, 0);

  /* a command without a key goes to the first master */
  static struct call ping = {.key = "PING", .token = "-"};
  const char *argv[] = {"PING"};
  size_t len[] = {4};
  ASSERT_OK(bk_command(cl->b, c.conn, 1, argv, len, on_call, &ping));
  RUN_UNTIL(ping.done);
  ASSERT_INT_EQ(ping.node, 0);
  ASSERT_INT_EQ(count_sent(0, "PING"), 1);

  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* Replies whose node was held back arrive after later commands' replies from
 * other nodes: each still reaches the callback of the command it answers,
 * and one slot's replies keep their order. */
TEST_IMPL(cluster_interleaved_replies_reach_their_commands) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");

  enum { PER = 20 };
  static struct call calls[3][PER];
  replay_hold(cl->nodes[0].rb);
  replay_hold(cl->nodes[2].rb);
  /* round robin over the three nodes' slots, one key per command */
  for (int i = 0; i < PER; i++)
    for (int n = 0; n < 3; n++) {
      char key[32];
      unsigned from = n == 0   ? 0
                      : n == 1 ? 5461
                               : 10923,
               to = n == 0   ? 5460
                    : n == 1 ? 10922
                             : 16383;
      key_in(key, sizeof key, from, to, i * 3 + n);
      ASSERT_OK(send_set(&c, &calls[n][i], key, i * 3 + n));
    }
  /* node 1 answers first, then node 2, then node 0 (the first asked) */
  RUN_UNTIL(calls_done == PER);
  for (int i = 0; i < PER; i++) ASSERT_INT_EQ(calls[1][i].done, 1);
  replay_release(cl->nodes[2].rb);
  RUN_UNTIL(calls_done == 2 * PER);
  replay_release(cl->nodes[0].rb);
  RUN_UNTIL(calls_done == 3 * PER);
  const int first[3] = {2 * PER + 1, 1, PER + 1}; /* each node's first callback */
  for (int n = 0; n < 3; n++)
    for (int i = 0; i < PER; i++) {
      ASSERT_INT_EQ(calls[n][i].node, n);
      ASSERT_INT_EQ(calls[n][i].order, first[n] + i);
    }
  ASSERT_INT_EQ(c.downs, 0);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* Many commands on a few slots, pipelined before any reply: each node
 * receives its slots' commands in the order they were given. */
TEST_IMPL(cluster_pipelined_commands_keep_their_slots_order) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  enum { N = 300 };
  static struct call calls[N];
  const char *keys[] = {"{a}", "{b}", "{c}", "{d}", "{e}", "{f}"};
  for (int i = 0; i < N; i++) ASSERT_OK(send_set(&c, &calls[i], keys[i % 6], i));
  RUN_UNTIL(calls_done == N);
  int last[6] = {0};
  for (int i = 0; i < N; i++) {
    ASSERT_INT_EQ(calls[i].node, cl->owner[slot_of(keys[i % 6])]);
    ASSERT(calls[i].order > last[i % 6]);
    last[i % 6] = calls[i].order;
  }
  for (int n = 0; n < 3; n++) {
    replay_broker *rb = cl->nodes[n].rb;
    int prev = -1;
    for (size_t i = 0; i < replay_nsent(rb, "app"); i++) {
      int token;
      char key[16];
      if (sscanf(replay_sent(rb, "app", i), "SET %15s t%d", key, &token) != 2) continue;
      ASSERT(token > prev);
      prev = token;
    }
  }
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* ---- redirections ---- */

/* MOVED: the router's map was stale. The connection goes down as after a drop
 * (commands sent after the redirected one may be at the new node already, so
 * sending it again could break its slot's order), every command in flight
 * fails once with "connection lost", the map is asked again, and once the
 * connection is back, the caller's command goes to the new master. */
TEST_IMPL(cluster_moved_refreshes_the_map) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  size_t asked = count_slots_asked();

  char moving[32], other[32];
  key_in(moving, sizeof moving, 0, 5460, 1);
  key_in(other, sizeof other, 10923, 16383, 2);
  cl->owner[slot_of(moving)] = 1; /* the cluster moved it; the router does not know */
  static struct call k1, k2;
  replay_hold(cl->nodes[2].rb); /* other's reply comes after the MOVED */
  ASSERT_OK(send_set(&c, &k1, moving, 1));
  ASSERT_OK(send_set(&c, &k2, other, 2));
  RUN_UNTIL(k1.done && k2.done);
  ASSERT_INT_EQ(k1.node, -1);
  ASSERT_CONTAINS(k1.err, "connection lost");
  ASSERT_INT_EQ(k2.node, -1);
  ASSERT_CONTAINS(k2.err, "connection lost");
  ASSERT_INT_EQ(c.downs, 1);
  replay_release(cl->nodes[2].rb); /* its late reply goes nowhere */
  RUN_UNTIL(c.up);
  ASSERT(count_slots_asked() > asked);
  ASSERT_INT_EQ(c.ups, 2);

  /* sent again, as the caller must: straight to the new master */
  ASSERT_OK(send_set(&c, &k1, moving, 3));
  ASSERT_OK(send_set(&c, &k2, other, 4));
  RUN_UNTIL(k1.done && k2.done);
  ASSERT_INT_EQ(k1.node, 1);
  ASSERT_INT_EQ(k2.node, 2);
  ASSERT_INT_EQ(count_sent(0, "SET"), 1); /* node 0 saw only the first */
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* MOVED to a node the map does not name yet (a master added to the cluster):
 * the router connects to it before the caller is up again. */
TEST_IMPL(cluster_moved_to_a_new_node) {
  cluster_start();
  int fresh = add_node(7003);
  struct caller c;
  open_caller(&c, "app");
  ASSERT_INT_EQ(cl->made, 3);
  char key[32];
  key_in(key, sizeof key, 5461, 10922, 5);
  serve(slot_of(key), slot_of(key), fresh);
  static struct call k;
  ASSERT_OK(send_set(&c, &k, key, 1));
  RUN_UNTIL(k.done);
  ASSERT_CONTAINS(k.err, "connection lost");
  RUN_UNTIL(c.up);
  ASSERT_INT_EQ(cl->made, 4);
  ASSERT_OK(send_set(&c, &k, key, 2));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, fresh);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* ASK: the slot is migrating and the key has gone. ASKING and the command go
 * to the target, the caller gets the target's reply, the map is not changed:
 * the slot's next command goes to the old master again. */
TEST_IMPL(cluster_ask_resends_once_without_changing_the_map) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  char key[32];
  key_in(key, sizeof key, 0, 5460, 7);
  unsigned slot = slot_of(key);
  cl->importing[slot] = 2;
  cl->gone[slot] = true;

  static struct call k[3];
  ASSERT_OK(send_set(&c, &k[0], key, 1));
  ASSERT_OK(send_set(&c, &k[1], key, 2));
  RUN_UNTIL(k[0].done && k[1].done);
  ASSERT_INT_EQ(k[0].node, 2);
  ASSERT_INT_EQ(k[1].node, 2);
  ASSERT_INT_EQ(c.downs, 0);
  /* each went to the old master first (the map still names it), then
   * with ASKING to the target */
  ASSERT_INT_EQ(count_sent(0, "SET"), 2);
  char log[128];
  snprintf(log, sizeof log, "ASKING\nSET %s t1\nASKING\nSET %s t2\n", key, key);
  ASSERT_STR_EQ(replay_log(cl->nodes[2].rb, "app"), log);

  /* migration over: the old master answers MOVED, the router learns the map */
  cl->owner[slot] = 2;
  cl->importing[slot] = NO_OWNER;
  cl->gone[slot] = false;
  ASSERT_OK(send_set(&c, &k[2], key, 3));
  RUN_UNTIL(k[2].done);
  ASSERT_CONTAINS(k[2].err, "connection lost");
  RUN_UNTIL(c.up);
  ASSERT_OK(send_set(&c, &k[2], key, 4));
  RUN_UNTIL(k[2].done);
  ASSERT_INT_EQ(k[2].node, 2);
  ASSERT_INT_EQ(count_sent(0, "SET"), 3);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* ASK naming a node the router has no connection to (a new node importing a
 * slot): it connects to it, going down meanwhile as a drop would. */
TEST_IMPL(cluster_ask_to_a_node_not_connected_yet) {
  cluster_start();
  int fresh = add_node(7004);
  struct caller c;
  open_caller(&c, "app");
  char key[32];
  key_in(key, sizeof key, 5461, 10922, 9);
  cl->importing[slot_of(key)] = (uint8_t)fresh;
  cl->gone[slot_of(key)] = true;
  static struct call k;
  ASSERT_OK(send_set(&c, &k, key, 1));
  RUN_UNTIL(k.done);
  ASSERT_CONTAINS(k.err, "connection lost");
  RUN_UNTIL(c.up);
  ASSERT_INT_EQ(cl->made, 4);
  ASSERT_OK(send_set(&c, &k, key, 2));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, fresh);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* Two nodes sending a key back and forth: after MAX_REDIRECTS (5) the caller
 * gets the last redirection as its error reply. */
TEST_IMPL(cluster_redirections_are_bounded) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  char key[32];
  key_in(key, sizeof key, 0, 5460, 11);
  unsigned slot = slot_of(key);
  /* node 0 says ASK 1, and node 1 (even after ASKING) says ASK 0 */
  char ask[64];
  snprintf(ask, sizeof ask, "SET %s t1", key);
  char to1[64], to0[64];
  snprintf(to1, sizeof to1, "-ASK %u 127.0.0.1:7001\r\n", slot);
  snprintf(to0, sizeof to0, "-ASK %u 127.0.0.1:7000\r\n", slot);
  for (int i = 0; i < 3; i++) {
    replay_expect(cl->nodes[0].rb, ask, to1);
    replay_expect(cl->nodes[1].rb, ask, to0);
  }
  static struct call k;
  ASSERT_OK(send_set(&c, &k, key, 1));
  RUN_UNTIL(k.done);
  ASSERT(k.error_reply);
  ASSERT_CONTAINS(k.err, "ASK");
  ASSERT_INT_EQ(count_sent(0, "SET") + count_sent(1, "SET"), 6); /* the first and 5 redirections */
  ASSERT_INT_EQ(c.downs, 0);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* ---- failures ---- */

/* A master dies: its commands in flight fail, the caller's connection goes
 * down, the map is asked of the masters still up, and once it names the
 * promoted replica (and the router connected to it), the caller is up again
 * and the dead master's slots go to the new one. */
TEST_IMPL(cluster_failover_to_a_promoted_replica) {
  cluster_start();
  int replica = add_node(7010);
  struct caller c;
  open_caller(&c, "app");
  char k0[32], k1[32];
  key_in(k0, sizeof k0, 0, 5460, 20);
  key_in(k1, sizeof k1, 5461, 10922, 21);
  static struct call a, b;
  replay_hold(cl->nodes[0].rb);
  ASSERT_OK(send_set(&c, &a, k0, 1));
  ASSERT_OK(send_set(&c, &b, k1, 2));
  RUN_UNTIL(b.done);
  ASSERT_INT_EQ(b.node, 1);
  /* the replica takes over before the router hears of the drop */
  serve(0, 5460, replica);
  replay_drop(cl->nodes[0].rb, "Connection reset by peer");
  ASSERT_INT_EQ(a.done, 1);
  ASSERT_CONTAINS(a.err, "connection lost");
  ASSERT_INT_EQ(c.downs, 1);
  ASSERT(!bk_connected(cl->b, c.conn));
  ASSERT_INT_EQ(bk_command(cl->b, c.conn, 1, (const char *[]){"PING"}, (size_t[]){4}, on_call, &a),
                -1);
  /* the caller hears why from the node that dropped */
  ASSERT_INT_EQ(c.faults, 1);
  ASSERT_STR_EQ(c.fault, "Connection reset by peer");
  char why[128];
  ASSERT_INT_EQ(bk_conn_fault(cl->b, c.conn, why, sizeof why), BK_FAULT_DOWN);
  ASSERT_STR_EQ(why, "Connection reset by peer");
  RUN_UNTIL(c.up);
  ASSERT_INT_EQ(cl->made, 4);
  ASSERT_OK(send_set(&c, &a, k0, 3));
  RUN_UNTIL(a.done);
  ASSERT_INT_EQ(a.node, replica);
  ASSERT_INT_EQ(bk_conn_fault(cl->b, c.conn, why, sizeof why), BK_FAULT_NONE);
  replay_release(cl->nodes[0].rb);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* A master drops and comes back with the same slots (a restart): the caller
 * is down meanwhile and up again after. */
TEST_IMPL(cluster_master_restart) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  replay_drop(cl->nodes[2].rb, "Connection refused");
  ASSERT_INT_EQ(c.downs, 1);
  settle();
  ASSERT(!c.up);
  replay_restore(cl->nodes[2].rb);
  RUN_UNTIL(c.up);
  char key[32];
  key_in(key, sizeof key, 10923, 16383, 30);
  static struct call k;
  ASSERT_OK(send_set(&c, &k, key, 1));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, 2);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* Reply limits reach every node's connection, and a reply a node refused
 * for its size fails the caller's command with that error, not as a lost
 * connection. */
TEST_IMPL(cluster_reply_limit_and_too_large) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  bk_conn_reply_limit(cl->b, c.conn, 100, 200);
  for (int i = 0; i < 3; i++) {
    size_t bulk = 0, reply = 0;
    ASSERT(replay_reply_limit(cl->nodes[i].rb, "app", &bulk, &reply));
    ASSERT_INT_EQ(bulk, 100);
    ASSERT_INT_EQ(reply, 200);
  }
  char key[32];
  key_in(key, sizeof key, 10923, 16383, 31);
  static struct call k;
  replay_hold(cl->nodes[2].rb);
  ASSERT_OK(send_set(&c, &k, key, 1));
  replay_drop(cl->nodes[2].rb,
              "reply too large: a string of at least 500 bytes, over this "
              "connection's limit of 100 (redis 127.0.0.1:7002)");
  ASSERT_INT_EQ(k.done, 1);
  ASSERT_STR_EQ(k.err,
                "reply too large: a string of at least 500 bytes, over this "
                "connection's limit of 100 (redis 127.0.0.1:7002)");
  replay_release(cl->nodes[2].rb);
  replay_restore(cl->nodes[2].rb);
  RUN_UNTIL(c.up);
  ASSERT_OK(send_set(&c, &k, key, 2));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, 2);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* CLUSTERDOWN is not a redirection: the caller gets it as its reply and the
 * connection stays up. */
TEST_IMPL(cluster_clusterdown_is_the_callers_reply) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  cl->down = true;
  static struct call k;
  ASSERT_OK(send_set(&c, &k, "somekey", 1));
  RUN_UNTIL(k.done);
  ASSERT(k.error_reply);
  ASSERT_CONTAINS(k.err, "CLUSTERDOWN");
  ASSERT_INT_EQ(c.downs, 0);
  cl->down = false;
  /* an error shaped like a redirection, which is none */
  replay_expect(cl->nodes[cl->owner[slot_of("somekey")]].rb, "SET somekey t2",
                "-ERR 12 127.0.0.1:7001\r\n");
  ASSERT_OK(send_set(&c, &k, "somekey", 2));
  RUN_UNTIL(k.done);
  ASSERT(k.error_reply);
  ASSERT_STR_EQ(k.err, "ERR 12 127.0.0.1:7001");
  ASSERT_OK(send_set(&c, &k, "somekey", 3));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, cl->owner[slot_of("somekey")]);
  ASSERT_INT_EQ(c.downs, 0);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* Closing the caller's connection answers what it has in flight once, with
 * "connection closed"; the nodes' late replies go nowhere. */
TEST_IMPL(cluster_close_answers_commands_in_flight) {
  cluster_start();
  struct caller c;
  open_caller(&c, "app");
  static struct call k[6];
  for (int n = 0; n < 3; n++) replay_hold(cl->nodes[n].rb);
  for (int i = 0; i < 6; i++) {
    char key[16];
    snprintf(key, sizeof key, "x%d", i);
    ASSERT_OK(send_set(&c, &k[i], key, i));
  }
  bk_conn_close(cl->b, c.conn);
  for (int i = 0; i < 6; i++) {
    ASSERT_INT_EQ(k[i].done, 1);
    ASSERT_STR_EQ(k[i].err, "connection closed");
  }
  for (int n = 0; n < 3; n++) replay_release(cl->nodes[n].rb);
  settle();
  cluster_stop();
}

/* A server without cluster mode: commands pass through to it unchanged.
 * The caller's own connection asked what the server is: the router opened
 * none of its own there (whose failures, a wrong password, would be logged
 * under a name of the router's). */
TEST_IMPL(cluster_standalone_server_passes_through) {
  cluster_start();
  replay_expect(cl->nodes[0].rb, "INFO cluster", "$17\r\ncluster_enabled:0\r\n");
  struct caller c;
  open_caller(&c, "app");
  ASSERT_INT_EQ(bk_is_cluster(cl->b), 0);
  ASSERT_INT_EQ(cl->made, 1);
  ASSERT_STR_EQ(replay_log(cl->nodes[0].rb, NULL), "app: INFO cluster\n");
  static struct call k;
  char key[32];
  key_in(key, sizeof key, 10923, 16383, 40); /* node 2's in the model: not asked here */
  cl->owner[slot_of(key)] = 0;
  ASSERT_OK(send_set(&c, &k, key, 1));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, 0);
  ASSERT_INT_EQ(count_slots_asked(), 0);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* A second connection opened once the map is known follows it at once;
 * each connection has its own connections to the nodes, closing one leaves
 * the other working, and a flush reaches every node. */
TEST_IMPL(cluster_second_connection) {
  cluster_start();
  struct caller a, b;
  open_caller(&a, "a");
  open_caller(&b, "b");
  static struct call ka, kb;
  ASSERT_OK(send_set(&a, &ka, "one", 1));
  ASSERT_OK(send_set(&b, &kb, "two", 2));
  bk_flush(cl->b, a.conn);
  RUN_UNTIL(ka.done && kb.done);
  ASSERT_INT_EQ(ka.node, cl->owner[slot_of("one")]);
  ASSERT_INT_EQ(kb.node, cl->owner[slot_of("two")]);
  ASSERT_INT_EQ(replay_nsent(cl->nodes[kb.node].rb, "b"), 1);
  bk_conn_close(cl->b, a.conn);
  ASSERT_INT_EQ(a.downs, 0); /* a close says nothing */
  ASSERT_OK(send_set(&b, &kb, "one", 3));
  RUN_UNTIL(kb.done);
  ASSERT_INT_EQ(kb.node, cl->owner[slot_of("one")]);
  bk_conn_close(cl->b, b.conn);
  cluster_stop();
}

/* A standalone server that drops: the connection goes down with it and comes
 * back with it. */
TEST_IMPL(cluster_standalone_server_drops) {
  cluster_start();
  replay_expect(cl->nodes[0].rb, "INFO cluster", "$17\r\ncluster_enabled:0\r\n");
  struct caller c;
  open_caller(&c, "app");
  replay_drop(cl->nodes[0].rb, "Connection refused");
  ASSERT_INT_EQ(c.downs, 1);
  ASSERT_INT_EQ(c.faults, 1);
  char why[128];
  ASSERT_INT_EQ(bk_conn_fault(cl->b, c.conn, why, sizeof why), BK_FAULT_DOWN);
  ASSERT_STR_EQ(why, "Connection refused");
  replay_restore(cl->nodes[0].rb);
  RUN_UNTIL(c.up);
  ASSERT_INT_EQ(bk_is_cluster(cl->b), 0);
  static struct call k;
  cl->owner[slot_of("anykey")] = 0;
  ASSERT_OK(send_set(&c, &k, "anykey", 1));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, 0);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* A slot map the router cannot read is logged and asked again a second
 * later; the connection is up once a good one came. */
TEST_IMPL(cluster_unreadable_slot_map_is_asked_again) {
  cluster_start();
  /* a range ending before it starts */
  replay_expect(cl->nodes[0].rb, "CLUSTER SLOTS",
                "*1\r\n*3\r\n:100\r\n:50\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n");
  struct caller c;
  memset(&c, 0, sizeof c);
  c.conn = bk_conn_open(cl->b, "app", on_state, &c);
  RUN_UNTIL(count_slots_asked() == 1);
  settle();
  ASSERT(!c.up);
  char why[128];
  ASSERT_INT_EQ(bk_conn_fault(cl->b, c.conn, why, sizeof why), BK_FAULT_DOWN);
  ASSERT_STR_EQ(why, "no cluster slot map yet");
  RUN_UNTIL(c.up); /* REFRESH_MS later */
  ASSERT(count_slots_asked() >= 2);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* CLUSTER SLOTS may name a node by port alone: an empty host, or a NULL one
 * (cluster-preferred-endpoint-type unknown-endpoint), is the host asked. */
TEST_IMPL(cluster_slot_map_without_hosts) {
  cluster_start();
  replay_expect(cl->nodes[0].rb, "CLUSTER SLOTS",
                "*3\r\n"
                "*3\r\n:0\r\n:5460\r\n*2\r\n$0\r\n\r\n:7000\r\n"
                "*3\r\n:5461\r\n:10922\r\n*2\r\n$-1\r\n:7001\r\n"
                "*3\r\n:10923\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$4\r\nid02\r\n");
  struct caller c;
  open_caller(&c, "app");
  ASSERT_INT_EQ(cl->made, 3); /* 127.0.0.1:7000, :7001, :7002 */
  static struct call k[3];
  const char *keys[] = {"{a}", "{b}", "{c}"};
  for (int i = 0; i < 3; i++) ASSERT_OK(send_set(&c, &k[i], keys[i], i));
  RUN_UNTIL(k[0].done && k[1].done && k[2].done);
  for (int i = 0; i < 3; i++) ASSERT_INT_EQ(k[i].node, cl->owner[slot_of(keys[i])]);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* A compiled-in script is kept by pointer, not copied: after an ASK it goes
 * to the target whole, with its key and arguments. */
TEST_IMPL(cluster_ask_resends_a_script) {
  cluster_start();
  for (int n = 0; n < cl->nnodes; n++) replay_alias(cl->nodes[n].rb, SCRIPT_CLAIM, "<claim>");
  struct caller c;
  open_caller(&c, "app");
  char key[32];
  key_in(key, sizeof key, 5461, 10922, 50);
  cl->importing[slot_of(key)] = 0;
  cl->gone[slot_of(key)] = true;
  static struct call k = {.token = "t1"};
  snprintf(k.key, sizeof k.key, "%s", key);
  const char *argv[] = {"EVAL", SCRIPT_CLAIM, "1", k.key, k.token};
  size_t len[] = {4, strlen(SCRIPT_CLAIM), 1, strlen(k.key), 2};
  ASSERT_OK(bk_command(cl->b, c.conn, 5, argv, len, on_call, &k));
  RUN_UNTIL(k.done);
  ASSERT_INT_EQ(k.node, 0);
  char log[128];
  snprintf(log, sizeof log, "INFO cluster\nASKING\nEVAL <claim> 1 %s t1\n", key);
  ASSERT_STR_EQ(replay_log(cl->nodes[0].rb, "app"), log);
  bk_conn_close(cl->b, c.conn);
  cluster_stop();
}

/* ---- many commands, many slots, redirections mixed in (seeded) ---- */

static uint64_t rng_state;
static unsigned rnd(unsigned n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state % n);
}

/* A live node chosen at random. */
static int live_node(const bool *dead) {
  for (;;) {
    int n = (int)rnd((unsigned)cl->nnodes);
    if (!dead[n]) return n;
  }
}

/* Master old dies for good, and a replica the router has not seen takes
 * its slots and the migrations to it. Returns 1, or 0 when the model has
 * no room for another node or the router does not know old yet. */
static int fail_over(int old, bool *dead) {
  if (cl->nnodes == MAX_NODES || dead[old] || !cl->nodes[old].given) return 0;
  int replica = add_node(7100 + cl->nnodes);
  for (unsigned s = 0; s < KEYSLOT_COUNT; s++) {
    if (cl->owner[s] == old) cl->owner[s] = (uint8_t)replica;
    if (cl->importing[s] == old) cl->importing[s] = (uint8_t)replica;
  }
  dead[old] = true;
  replay_drop(cl->nodes[old].rb, "Connection reset by peer"); /* and never back */
  return 1;
}

/* Rounds of pipelined SETs over 64 keys on 4 nodes (three masters and a
 * spare). Between rounds the cluster changes at random: a slot moved, a
 * migration started (ASK) or finished, a master failed over (it dies, and a
 * replica new to the router takes its slots and migrations), a node's
 * replies held back so that the others' overtake them; during a round, a
 * node may restart with commands in flight. Every callback runs once and
 * gets its own command's reply from the node the model says served it, or
 * "connection lost" when a MOVED, the ASK to the spare, a failover or a
 * restart took the connection down, in which case the caller sends it again
 * once up, as a real caller would. */
TEST_IMPL(cluster_randomized_redirections) {
  uint64_t seed =
      getenv("CLUSTER_SEED") ? strtoull(getenv("CLUSTER_SEED"), NULL, 10) : (uint64_t)uv_hrtime();
  if (seed == 0) seed = 1;
  rng_state = seed;
  fprintf(stderr, "cluster_randomized_redirections: CLUSTER_SEED=%llu\n", (unsigned long long)seed);
  cluster_start();
  add_node(7005);
  struct caller c;
  open_caller(&c, "app");

  enum { KEYS = 64, ROUNDS = 40, PER = 48 };
  char keys[KEYS][16];
  for (int i = 0; i < KEYS; i++) snprintf(keys[i], sizeof keys[i], "key%d", i);
  static struct call calls[PER];
  int token = 0, answered = 0, lost = 0, redirected_asks = 0, restarts = 0, failovers = 0;
  bool dead[MAX_NODES] = {false};
  for (int round = 0; round < ROUNDS; round++) {
    /* the cluster changes (the router learns it from the redirections) */
    unsigned slot = slot_of(keys[rnd(KEYS)]);
    switch (rnd(5)) {
      case 0: /* a slot moved */
        if (cl->importing[slot] == NO_OWNER) cl->owner[slot] = (uint8_t)live_node(dead);
        break;
      case 1: /* a migration started, its keys gone to the target */
        if (cl->importing[slot] == NO_OWNER) {
          uint8_t t = (uint8_t)live_node(dead);
          if (t != cl->owner[slot]) {
            cl->importing[slot] = t;
            cl->gone[slot] = true;
          }
        }
        break;
      case 2: /* every migration finished */
        for (unsigned s = 0; s < KEYSLOT_COUNT; s++)
          if (cl->importing[s] != NO_OWNER) {
            cl->owner[s] = cl->importing[s];
            cl->importing[s] = NO_OWNER;
            cl->gone[s] = false;
          }
        break;
      case 3: /* the master of a key fails over */
        failovers += fail_over(cl->owner[slot], dead);
        break;
      default: break;
    }
    /* a node whose replies come after the others' this round, or none */
    int held = (int)rnd((unsigned)cl->nnodes + 1) - 1;
    if (held >= 0 && dead[held]) held = -1;

    /* a round: every call sent, sent again after a loss, until answered */
    int left = PER;
    bool answered_yet[PER] = {false}, in_flight[PER] = {false};
    while (left > 0) {
      RUN_UNTIL(c.up); /* a held node could not come up: held only from here */
      if (held >= 0) replay_hold(cl->nodes[held].rb);
      calls_done = 0;
      int sent = 0;
      for (int i = 0; i < PER; i++) {
        if (answered_yet[i]) continue;
        if (send_set(&c, &calls[i], keys[(i * 7 + round) % KEYS], ++token) != 0) break;
        in_flight[i] = true;
        sent++;
      }
      if (held >= 0) {
        settle();
        replay_release(cl->nodes[held].rb);
        held = -1;
      }
      unsigned fault = rnd(16);
      if (fault < 2) { /* a node restarts with commands in flight */
        int n = live_node(dead);
        if (cl->nodes[n].given) {
          replay_drop(cl->nodes[n].rb, "Connection reset by peer");
          restarts++;
          settle();
          replay_restore(cl->nodes[n].rb);
        }
      } else if (fault == 2) { /* a master fails over with commands in flight */
        failovers += fail_over(cl->owner[slot_of(keys[rnd(KEYS)])], dead);
      }
      RUN_UNTIL(calls_done == sent);
      for (int i = 0; i < PER; i++) {
        if (!in_flight[i]) continue;
        in_flight[i] = false;
        ASSERT_INT_EQ(calls[i].done, 1);
        if (calls[i].node >= 0) {
          /* executed by the node serving its slot then (or the target, asked) */
          unsigned s = slot_of(calls[i].key);
          int expect = calls[i].expect;
          if (calls[i].node != expect)
            TEST_FAIL_("seed %llu: %s (slot %u) answered by node %d, not %d",
                       (unsigned long long)seed, calls[i].key, s, calls[i].node, expect);
          if (expect != cl->owner[s]) redirected_asks++;
          answered++;
          answered_yet[i] = true;
          left--;
        } else if (calls[i].error_reply) {
          TEST_FAIL_("seed %llu: %s: error reply %s", (unsigned long long)seed, calls[i].key,
                     calls[i].err);
        } else {
          if (strstr(calls[i].err, "connection lost") == NULL)
            TEST_FAIL_("seed %llu: %s: %s", (unsigned long long)seed, calls[i].key, calls[i].err);
          lost++; /* sent again */
        }
      }
    }
  }
  fprintf(stderr,
          "%d answered, %d lost and sent again, %d answered after ASK, %d downs, %d restarts, "
          "%d failovers\n",
          answered, lost, redirected_asks, c.downs, restarts, failovers);
  ASSERT_INT_EQ(answered, ROUNDS * PER);
  bk_conn_close(cl->b, c.conn);
  settle();
  cluster_stop();
}
