/* broker_cluster: the broker seam on a redis:// server that may be a Redis
 * Cluster, on top of broker_redis (one broker_redis per node; unit tests
 * give broker_cluster_new_with a factory of scripted node brokers instead).
 *
 * The first caller's connection to the server given (the seed) asks `INFO
 * cluster` once it is up, before the caller hears of it (so a refusal is
 * logged under that connection's name: no connection of the broker's own
 * exists yet). A server without cluster mode makes this broker a thin
 * pass-through: each
 * bk_conn is one broker_redis connection to the seed, and commands go to it
 * with the caller's callback, as if broker_redis were used directly. A
 * cluster node makes it route: it learns the slot map (CLUSTER SLOTS), each
 * bk_conn holds one broker_redis connection per master, and each command
 * goes to the master serving the slot of its first key (command_keys.h),
 * keyless ones to the first master. Commands of one slot keep their order;
 * replies come back as each node answers, interleaved across masters, each
 * to its own command's callback (broker.h).
 *
 * Redirections: MOVED (a slot has moved) updates the slot, asks for a new
 * map, and takes the bk_conn down as a drop would (below): commands sent
 * after the redirected one may already be on the new node, so sending it
 * again there would break the order of its slot. ASK (a slot is moving, and
 * the key has gone) sends ASKING and the command to the node named, which
 * keeps the order of the commands on keys that have gone (the old node
 * answers in order, each ASK sends one on); such a reply comes after those
 * of commands sent behind it that the old node served. A node an ASK names
 * is connected to as a master is until it owns slots. A command is redirected
 * at most MAX_REDIRECTS times; past that its caller gets the error reply.
 *
 * A bk_conn is up when the map is known and its connection to every master
 * (and ASK target) is up: broker_redis keeps each one trying. When one of them fails (a
 * master died, a redirection names a node not connected yet), the whole
 * bk_conn goes down as a single connection would: every command it has in
 * flight completes at once with "connection lost" (replies that come later
 * are dropped: the caller already sends again what it must after a drop),
 * and it comes back up once the new map's masters are all connected. While
 * any bk_conn is down, the map is asked again every REFRESH_MS, so a
 * replica's promotion is seen as soon as the cluster has made it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "broker.h"
#include "command_keys.h"
#include "keyslot.h"
#include "log.h"
#include "scripts.h"
#include "url.h"

#define MAX_REDIRECTS 5
#define REFRESH_MS 1000
#define NO_NODE 0xffff
#define SPARE_CMDS_MAX 256

enum mode { MODE_UNKNOWN, MODE_SINGLE, MODE_CLUSTER };

struct cnode {
  char addr[300]; /* "host:port", as the cluster names it */
  struct redis_url url;
  broker *b;        /* NULL while the node serves no slot */
  bk_conn *control; /* asks INFO and CLUSTER SLOTS */
  bool owns;        /* serves slots in the current map */
  bool asked;       /* named by an ASK: a slot is moving to it; connected until it owns */
};

struct cinner {
  struct cconn *c;
  size_t node;
  bk_conn *conn;
};

struct cconn {
  struct cbroker *b;
  char name[64];
  bk_state_cb *state_cb;
  bk_fault_cb *fault_cb;
  void *data;
  struct cinner **inner; /* by node index; NULL where none is open */
  size_t ninner;
  bool up;
  bool closing;
  size_t bulk_max, reply_max; /* reply_limit, given to every node's connection */
  unsigned seen;              /* the map version conn_follow_map last applied */
  int busy;                   /* inside a callback to the caller: free later */
  struct ccmd *pending;       /* in flight (cluster mode), oldest first */
  struct ccmd *pending_tail;
  struct cconn *prev, *next;
};

/* A command in cluster mode, kept until its reply so that a redirection can
 * send it again. */
struct ccmd {
  struct cconn *c; /* NULL once orphaned: its caller was answered already */
  bk_reply_cb *cb;
  void *data;
  int redirects;
  size_t node; /* where it went last */
  int argc;
  const char **argv;
  size_t *argvlen;
  int argv_cap;
  char *bytes;
  size_t bytes_cap;
  struct ccmd *prev, *next;
};

struct cbroker {
  broker base;
  uv_loop_t *loop;
  struct redis_url url; /* the seed */
  enum mode mode;
  struct cnode **nodes; /* node 0 is the seed */
  size_t nnodes, cap;
  uint16_t *slots;     /* KEYSLOT_COUNT node indexes, NO_NODE when unserved */
  bool mapped;         /* slots holds a map */
  unsigned version;    /* of the map, for walks over the connections */
  size_t first_master; /* where keyless commands go */
  struct cconn *conns;
  bk_node_broker_fn *make_node; /* makes each node's broker: broker_redis_new in production */
  void *make_node_data;
  uv_timer_t refresh;
  bool asking_kind; /* an INFO cluster is in flight (on a caller's connection to the seed) */
  bool asking_map;  /* a CLUSTER SLOTS is in flight */
  size_t asked;     /* ... to this node */
  bool map_wanted;  /* ... and another is wanted after it */
  struct ccmd *spare;
  int nspare;
};

static void inner_state(void *data, bk_conn *conn, int up);
static void inner_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why);
static void ask_map(struct cbroker *b);
static void ask_kind(struct cbroker *b);

/* ---- nodes ---- */

/* Splits "host:port" (the host may be empty: the node asked) into u. */
static int node_url(struct cbroker *b, const char *addr, const char *asked_host,
                    struct redis_url *u) {
  const char *colon = strrchr(addr, ':');
  if (colon == NULL) return -1;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port <= 0 || port > 65535) return -1;
  *u = b->url;
  u->path[0] = '\0';
  u->port = (int)port;
  size_t hl = (size_t)(colon - addr);
  if (hl == 0) {
    snprintf(u->host, sizeof u->host, "%s", asked_host);
  } else {
    if (hl >= sizeof u->host) return -1;
    memcpy(u->host, addr, hl);
    u->host[hl] = '\0';
  }
  snprintf(u->redacted, sizeof u->redacted, "%s://%s:%d (cluster node)",
           u->tls.on ? "rediss" : "redis", u->host, u->port);
  u->cluster_node = 1;
  return 0;
}

/* The node at addr, added when new; NO_NODE when addr is not an address. */
static size_t node_find(struct cbroker *b, const char *addr, const char *asked_host) {
  struct redis_url u;
  if (node_url(b, addr, asked_host, &u) != 0) return NO_NODE;
  for (size_t i = 0; i < b->nnodes; i++)
    if (b->nodes[i]->url.port == u.port && strcmp(b->nodes[i]->url.host, u.host) == 0) return i;
  if (b->nnodes == NO_NODE) return NO_NODE;
  if (b->nnodes == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 8;
    struct cnode **v = realloc(b->nodes, cap * sizeof *v);
    if (v == NULL) return NO_NODE;
    b->nodes = v;
    b->cap = cap;
  }
  struct cnode *n = calloc(1, sizeof *n);
  if (n == NULL) return NO_NODE;
  n->url = u;
  snprintf(n->addr, sizeof n->addr, "%s:%d", u.host, u.port);
  b->nodes[b->nnodes] = n;
  return b->nnodes++;
}

static broker *node_broker(struct cbroker *b, size_t i) {
  struct cnode *n = b->nodes[i];
  if (n->b == NULL) n->b = b->make_node(b->make_node_data, &n->url);
  return n->b;
}

/* ---- caller-facing state ---- */

static struct cinner *inner_of(struct cconn *c, size_t node) {
  return node < c->ninner ? c->inner[node] : NULL;
}

static bool inner_up(struct cconn *c, size_t node) {
  struct cinner *in = inner_of(c, node);
  return in && bk_connected(c->b->nodes[node]->b, in->conn);
}

/* The nodes each bk_conn is connected to: the masters, and a node an ASK
 * named (the target of a migration that owns no slot yet). */
static bool wanted(const struct cnode *n) { return n->owns || n->asked; }

static bool all_up(struct cconn *c) {
  struct cbroker *b = c->b;
  if (b->mode == MODE_SINGLE) return inner_up(c, 0);
  if (b->mode != MODE_CLUSTER || !b->mapped || b->first_master == NO_NODE) return false;
  for (size_t i = 0; i < b->nnodes; i++)
    if (wanted(b->nodes[i]) && !inner_up(c, i)) return false;
  return true;
}

static void maybe_free_conn(struct cconn *c) {
  if (!c->closing || c->busy) return;
  free(c->inner);
  free(c);
}

static void ccmd_release(struct cbroker *b, struct ccmd *k) {
  if (b && b->nspare < SPARE_CMDS_MAX) {
    k->next = b->spare;
    b->spare = k;
    b->nspare++;
    return;
  }
  free(k->argv);
  free(k->argvlen);
  free(k->bytes);
  free(k);
}

static void unlink_cmd(struct cconn *c, struct ccmd *k) {
  if (k->prev)
    k->prev->next = k->next;
  else
    c->pending = k->next;
  if (k->next)
    k->next->prev = k->prev;
  else
    c->pending_tail = k->prev;
  k->prev = k->next = NULL;
}

/* c is down: every command in flight is answered with err now (their late
 * replies find them orphaned), then the caller hears of it. */
static void conn_down(struct cconn *c, const char *why) {
  if (c->closing) return;
  struct cbroker *b = c->b;
  bool was_up = c->up;
  c->up = false;
  c->busy++;
  char err[256];
  /* A reply refused for its size keeps its kind (bk_error_is_too_large). */
  snprintf(err, sizeof err, "%s%s", bk_error_is_too_large(why) ? "" : "connection lost: ", why);
  while (c->pending) {
    struct ccmd *k = c->pending;
    unlink_cmd(c, k);
    k->c = NULL;
    if (k->cb) k->cb(k->data, NULL, err);
  }
  /* No fault callback here: a node's own drop reaches the caller through
   * inner_fault, and the other causes are passing (cconn_fault says them). */
  if (was_up && c->state_cb && !c->closing) c->state_cb(c->data, (bk_conn *)c, 0);
  c->busy--;
  maybe_free_conn(c);
  if (b->mode == MODE_CLUSTER) ask_map(b);
}

/* Tells the caller c is up when it now is. The callback may close c: the
 * caller frees it afterwards (maybe_free_conn). */
static void conn_check_up(struct cconn *c) {
  if (c->closing || c->up || !all_up(c)) return;
  c->up = true;
  if (c->state_cb) {
    c->busy++;
    c->state_cb(c->data, (bk_conn *)c, 1);
    c->busy--;
  }
}

static int inner_open(struct cconn *c, size_t node) {
  if (inner_of(c, node)) return 0;
  if (node >= c->ninner) {
    size_t n = c->b->nnodes;
    struct cinner **v = realloc(c->inner, n * sizeof *v);
    if (v == NULL) return -1;
    for (size_t i = c->ninner; i < n; i++) v[i] = NULL;
    c->inner = v;
    c->ninner = n;
  }
  struct cinner *in = calloc(1, sizeof *in);
  broker *nb = node_broker(c->b, node);
  if (in == NULL || nb == NULL) {
    free(in);
    return -1;
  }
  in->c = c;
  in->node = node;
  c->inner[node] = in;
  in->conn = bk_conn_open(nb, c->name, inner_state, in);
  if (in->conn == NULL) {
    c->inner[node] = NULL;
    free(in);
    return -1;
  }
  bk_conn_on_fault(nb, in->conn, inner_fault);
  bk_conn_reply_limit(nb, in->conn, c->bulk_max, c->reply_max);
  return 0;
}

static void inner_close(struct cconn *c, size_t node) {
  struct cinner *in = inner_of(c, node);
  if (in == NULL) return;
  c->inner[node] = NULL;
  bk_conn_close(c->b->nodes[node]->b, in->conn);
  free(in);
}

/* Makes c's connections match the map: one to each master, none to any
 * other node (a command in flight there is cut off: c goes down first). */
static void conn_follow_map(struct cconn *c) {
  struct cbroker *b = c->b;
  c->seen = b->version;
  c->busy++; /* a caller's callback below may close c */
  for (size_t i = 0; b->mode == MODE_CLUSTER && i < b->nnodes && !c->closing; i++) {
    if (wanted(b->nodes[i])) {
      if (inner_open(c, i) != 0) conn_down(c, "out of memory");
    } else if (inner_of(c, i)) {
      if (c->pending) conn_down(c, "the cluster moved its slots");
      if (!c->closing) inner_close(c, i);
    }
  }
  if (!c->closing && c->up && !all_up(c)) conn_down(c, "waiting for a new cluster node");
  if (!c->closing) conn_check_up(c);
  c->busy--;
  maybe_free_conn(c);
}

/* conn_follow_map on every bk_conn, walking again from the start after each
 * one: a caller's callback may close any of them (or open one). */
static void follow_map_all(struct cbroker *b) {
  b->version++;
  for (struct cconn *c = b->conns; c;) {
    if (c->seen == b->version) {
      c = c->next;
      continue;
    }
    conn_follow_map(c);
    c = b->conns;
  }
}

static void inner_state(void *data, bk_conn *conn, int up) {
  struct cinner *in = data;
  struct cconn *c = in->c;
  (void)conn;
  if (up) {
    if (c->b->mode == MODE_UNKNOWN) return ask_kind(c->b); /* up once the answer says how */
    conn_check_up(c);
    maybe_free_conn(c);
  } else if (c->b->mode != MODE_CLUSTER || wanted(c->b->nodes[in->node])) {
    char why[256];
    bk_conn_fault(c->b->nodes[in->node]->b, in->conn, why, sizeof why);
    if (c->b->mode == MODE_CLUSTER)
      conn_down(c, why[0] ? why : "a cluster node's connection dropped");
    else if (c->up)
      conn_down(c, why[0] ? why : "disconnected");
  }
}

static void inner_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why) {
  struct cinner *in = data;
  struct cconn *c = in->c;
  (void)conn;
  if (c->closing || c->fault_cb == NULL) return;
  if (c->b->mode == MODE_CLUSTER && !wanted(c->b->nodes[in->node])) return;
  c->busy++;
  c->fault_cb(c->data, (bk_conn *)c, fault, why);
  c->busy--;
  maybe_free_conn(c);
}

/* ---- the map ---- */

static bool is_str(const bk_reply *r) {
  return r && (r->type == BK_STRING || r->type == BK_STATUS);
}

/* CLUSTER SLOTS: [[start, end, [host, port, id, ...], replicas...], ...]. */
static int read_map(struct cbroker *b, const bk_reply *r, const char *asked_host, uint16_t *slots) {
  if (r == NULL || r->type != BK_ARRAY) return -1;
  for (size_t s = 0; s < KEYSLOT_COUNT; s++) slots[s] = NO_NODE;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *range = r->element[i];
    if (range->type != BK_ARRAY || range->elements < 3) return -1;
    const bk_reply *from = range->element[0], *to = range->element[1], *m = range->element[2];
    /* a NULL endpoint (cluster-preferred-endpoint-type unknown-endpoint)
     * means the host asked, as "" does */
    if (from->type != BK_INTEGER || to->type != BK_INTEGER || m->type != BK_ARRAY ||
        m->elements < 2 || !(is_str(m->element[0]) || m->element[0]->type == BK_NIL) ||
        m->element[1]->type != BK_INTEGER)
      return -1;
    if (from->integer < 0 || to->integer >= KEYSLOT_COUNT || from->integer > to->integer) return -1;
    char addr[320];
    snprintf(addr, sizeof addr, "%.*s:%lld",
             m->element[0]->type == BK_NIL ? 0 : (int)m->element[0]->len,
             m->element[0]->type == BK_NIL ? "" : m->element[0]->str, m->element[1]->integer);
    size_t node = node_find(b, addr, asked_host);
    if (node == NO_NODE) return -1;
    for (long long s = from->integer; s <= to->integer; s++) slots[s] = (uint16_t)node;
  }
  return 0;
}

static void control_state(void *data, bk_conn *conn, int up);

/* The broker's own connections (CLUSTER SLOTS) live only while a caller has
 * a connection open, so that a loop with nothing else to do can end, and
 * only on a cluster: the seed's until a map names the masters, each
 * master's after. */
static void controls_open(struct cbroker *b) {
  for (size_t i = 0; i < b->nnodes; i++) {
    struct cnode *n = b->nodes[i];
    bool want = b->mode == MODE_CLUSTER && (b->mapped ? n->owns : i == 0);
    if (want && n->control == NULL && node_broker(b, i)) {
      n->control = bk_conn_open(n->b, "cluster map", control_state, b);
    } else if (!want && n->control && b->mapped) {
      /* a master that failed over or gave its slots away: no retries to it */
      bk_conn *control = n->control;
      n->control = NULL;
      bk_conn_close(n->b, control);
    }
  }
}

static void controls_close(struct cbroker *b) {
  b->asking_kind = false; /* the callers' connections are all closed */
  b->asking_map = false;  /* on_slots then ignores its "connection closed" */
  b->map_wanted = false;
  uv_timer_stop(&b->refresh);
  for (size_t i = 0; i < b->nnodes; i++) {
    struct cnode *n = b->nodes[i];
    bk_conn *control = n->control;
    n->control = NULL;
    if (control) bk_conn_close(n->b, control);
  }
}

static void apply_map(struct cbroker *b, const uint16_t *slots) {
  bool changed = !b->mapped || memcmp(b->slots, slots, KEYSLOT_COUNT * sizeof *slots) != 0;
  memcpy(b->slots, slots, KEYSLOT_COUNT * sizeof *slots);
  b->mapped = true;
  size_t masters = 0;
  b->first_master = NO_NODE;
  for (size_t i = 0; i < b->nnodes; i++) b->nodes[i]->owns = false;
  for (size_t s = 0; s < KEYSLOT_COUNT; s++)
    if (slots[s] != NO_NODE && !b->nodes[slots[s]]->owns) {
      b->nodes[slots[s]]->owns = true;
      b->nodes[slots[s]]->asked = false;
      masters++;
      if (b->first_master == NO_NODE) b->first_master = slots[s];
    }
  controls_open(b);
  if (changed) {
    char count[16];
    snprintf(count, sizeof count, "%zu", masters);
    log_line(LOG_INFO, NULL, "redis cluster slot map", "redis", b->base.name, LOG_NUMBER "masters",
             count, NULL);
  }
  follow_map_all(b);
}

static bool any_down(struct cbroker *b) {
  for (struct cconn *c = b->conns; c; c = c->next)
    if (!c->up) return true;
  return false;
}

static void refresh_fired(uv_timer_t *t);

static void on_slots(void *data, const bk_reply *r, const char *err) {
  struct cbroker *b = data;
  if (!b->asking_map) return; /* closed with the control connections */
  b->asking_map = false;
  uint16_t *slots = malloc(KEYSLOT_COUNT * sizeof *slots);
  if (slots && r && r->type == BK_ARRAY &&
      read_map(b, r, b->nodes[b->asked]->url.host, slots) == 0) {
    apply_map(b, slots);
  } else {
    char why[256];
    if (slots && r && r->type == BK_ARRAY)
      snprintf(why, sizeof why, "a range, a node or an address in the reply is not valid");
    else
      bk_reply_text(r, err, why, sizeof why);
    log_line(LOG_WARN, NULL, "cannot read the redis cluster slot map", "redis", b->base.name,
             "error", why, NULL);
  }
  free(slots);
  if (b->map_wanted || any_down(b)) {
    b->map_wanted = false;
    uv_timer_start(&b->refresh, refresh_fired, REFRESH_MS, 0);
  }
}

/* Asks a node whose control connection is up for the slot map: a master of
 * the current map first, else the seed. */
static void ask_map(struct cbroker *b) {
  if (b->mode != MODE_CLUSTER || b->conns == NULL) return; /* nobody needs a map now */
  if (b->asking_map) {
    b->map_wanted = true;
    return;
  }
  for (size_t pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < b->nnodes; i++) {
      struct cnode *n = b->nodes[i];
      if ((pass == 0) != n->owns || n->control == NULL || !bk_connected(n->b, n->control)) continue;
      const char *argv[] = {"CLUSTER", "SLOTS"};
      const size_t len[] = {7, 5};
      if (bk_command(n->b, n->control, 2, argv, len, on_slots, b) == 0) {
        b->asking_map = true;
        b->asked = i;
        return;
      }
    }
  /* No node answers now: try again shortly. */
  if (!uv_is_active((uv_handle_t *)&b->refresh))
    uv_timer_start(&b->refresh, refresh_fired, REFRESH_MS, 0);
}

static void refresh_fired(uv_timer_t *t) { ask_map(t->data); }

static void on_info(void *data, const bk_reply *r, const char *err) {
  struct cbroker *b = data;
  (void)err;
  b->asking_kind = false;
  if (b->mode != MODE_UNKNOWN) return;
  if (r == NULL) return ask_kind(b); /* lost or closed: another caller's, or when back up */
  bool cluster = is_str(r) && strstr(r->str, "cluster_enabled:1") != NULL;
  if (!cluster) { /* a refused INFO too: the host reports that */
    b->mode = MODE_SINGLE;
    return follow_map_all(b); /* only tells each one it is up */
  }
  b->mode = MODE_CLUSTER;
  log_line(LOG_INFO, NULL, "redis is a cluster: commands go to the node of their key's slot",
           "redis", b->base.name, NULL);
  controls_open(b); /* the seed's, which asks for the map once up */
}

/* Asks whether the server is a cluster, on the first caller's connection to
 * the seed that is up (none up: asked when one comes up). */
static void ask_kind(struct cbroker *b) {
  if (b->mode != MODE_UNKNOWN || b->asking_kind) return;
  const char *argv[] = {"INFO", "cluster"};
  const size_t len[] = {4, 7};
  for (struct cconn *c = b->conns; c; c = c->next)
    if (!c->closing && inner_up(c, 0) &&
        bk_command(b->nodes[0]->b, c->inner[0]->conn, 2, argv, len, on_info, b) == 0) {
      b->asking_kind = true;
      return;
    }
}

static void control_state(void *data, bk_conn *conn, int up) {
  struct cbroker *b = data;
  (void)conn;
  if (b->mode == MODE_CLUSTER && (!up || !b->mapped || any_down(b))) ask_map(b);
}

/* ---- commands ---- */

static struct ccmd *ccmd_get(struct cbroker *b) {
  struct ccmd *k = b->spare;
  if (k) {
    b->spare = k->next;
    b->nspare--;
    k->next = NULL;
    return k;
  }
  return calloc(1, sizeof(struct ccmd));
}

/* Copies argv into k, so that it can go again after a redirection. The
 * compiled-in scripts' texts are static: only their pointer is kept. */
static int ccmd_copy(struct ccmd *k, int argc, const char **argv, const size_t *argvlen) {
  if (argc > k->argv_cap) {
    const char **v = realloc(k->argv, (size_t)argc * sizeof *v);
    if (v) k->argv = v;
    size_t *l = realloc(k->argvlen, (size_t)argc * sizeof *l);
    if (l) k->argvlen = l;
    if (v == NULL || l == NULL) return -1;
    k->argv_cap = argc;
  }
  bool script = argc >= 2 && argvlen[0] == 4 && strncasecmp(argv[0], "EVAL", 4) == 0 &&
                script_index(argv[1]) >= 0;
  size_t bytes = 0;
  for (int i = 0; i < argc; i++)
    if (!(script && i == 1)) bytes += argvlen[i];
  if (bytes > k->bytes_cap) {
    char *p = realloc(k->bytes, bytes);
    if (p == NULL) return -1;
    k->bytes = p;
    k->bytes_cap = bytes;
  }
  char *p = k->bytes;
  for (int i = 0; i < argc; i++) {
    k->argvlen[i] = argvlen[i];
    if (script && i == 1) {
      k->argv[i] = argv[i];
      continue;
    }
    if (argvlen[i]) memcpy(p, argv[i], argvlen[i]);
    k->argv[i] = p;
    p += argvlen[i];
  }
  k->argc = argc;
  return 0;
}

static size_t route(struct cbroker *b, int argc, const char **argv, const size_t *argvlen) {
  int key;
  if (command_keys(argc, argv, argvlen, &key, 1) > 0) {
    size_t node = b->slots[keyslot_of(argv[key], argvlen[key])];
    if (node != NO_NODE) return node;
  }
  return b->first_master;
}

static void on_cmd_reply(void *data, const bk_reply *r, const char *err);

static int send_to(struct cconn *c, size_t node, struct ccmd *k, bool asking) {
  struct cinner *in = inner_of(c, node);
  if (in == NULL || !inner_up(c, node)) return -1;
  broker *nb = c->b->nodes[node]->b;
  k->node = node;
  if (asking) {
    const char *argv[] = {"ASKING"};
    const size_t len[] = {6};
    if (bk_command(nb, in->conn, 1, argv, len, NULL, NULL) != 0) return -1;
  }
  return bk_command(nb, in->conn, k->argc, k->argv, k->argvlen, on_cmd_reply, k);
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the slot and the node. */
static bool redirection(struct cbroker *b, const bk_reply *r, bool *ask, size_t *node,
                        unsigned *slot, const char *asked_host) {
  if (r == NULL || r->type != BK_ERROR) return false;
  char text[360];
  snprintf(text, sizeof text, "%.*s", (int)r->len, r->str);
  char word[8], addr[320];
  if (sscanf(text, "%7s %u %319s", word, slot, addr) != 3 || *slot >= KEYSLOT_COUNT) return false;
  if (strcmp(word, "MOVED") == 0)
    *ask = false;
  else if (strcmp(word, "ASK") == 0)
    *ask = true;
  else
    return false;
  *node = node_find(b, addr, asked_host);
  return *node != NO_NODE;
}

/* Hands k's answer to its caller; k goes back to the pool first. */
static void answer(struct cconn *c, struct ccmd *k, const bk_reply *r, const char *err) {
  bk_reply_cb *cb = k->cb;
  void *cbdata = k->data;
  ccmd_release(c->b, k);
  if (cb) cb(cbdata, r, err);
}

static void link_cmd(struct cconn *c, struct ccmd *k) {
  k->prev = c->pending_tail;
  k->next = NULL;
  if (c->pending_tail)
    c->pending_tail->next = k;
  else
    c->pending = k;
  c->pending_tail = k;
}

/* MOVED: the slot is node's now. A node new to the map joins it at once
 * (every bk_conn connects to it, going down until it has), and the whole
 * map is asked again. */
static void moved(struct cbroker *b, unsigned slot, size_t node) {
  if (!b->nodes[node]->owns) {
    uint16_t *slots = malloc(KEYSLOT_COUNT * sizeof *slots);
    if (slots) {
      memcpy(slots, b->slots, KEYSLOT_COUNT * sizeof *slots);
      slots[slot] = (uint16_t)node;
      apply_map(b, slots);
      free(slots);
    }
  } else {
    b->slots[slot] = (uint16_t)node;
  }
  ask_map(b);
}

/* k stays on c's pending list until it is answered, so that conn_down and
 * cconn_close, run from any callback below, answer it once (orphaning it);
 * this being its last reply from the node, an orphaned k is freed here. */
static void on_cmd_reply(void *data, const bk_reply *r, const char *err) {
  struct ccmd *k = data;
  struct cconn *c = k->c;
  if (c == NULL) { /* orphaned: its caller got "connection lost" already */
    ccmd_release(NULL, k);
    return;
  }
  struct cbroker *b = c->b;
  c->busy++;
  bool ask;
  size_t node;
  unsigned slot;
  if (r == NULL) {
    const char *why = err && strncmp(err, "connection lost: ", 17) == 0 ? err + 17 : err;
    conn_down(c, why ? why : "disconnected");
  } else if (k->redirects < MAX_REDIRECTS &&
             redirection(b, r, &ask, &node, &slot, b->nodes[k->node]->url.host)) {
    k->redirects++;
    log_line(LOG_DEBUG, NULL, ask ? "redis cluster ASK" : "redis cluster MOVED", "redis",
             b->base.name, "node", b->nodes[node]->addr, NULL);
    if (!ask) {
      /* Commands sent after k may already be on their way to the new node:
       * going down, as after a drop, keeps one slot's commands in order (the
       * caller sends again what it must once the connection is back). */
      moved(b, slot, node);
      conn_down(c, "a slot moved to another cluster node");
    } else {
      if (!wanted(b->nodes[node])) { /* a migration's target: connect to it */
        b->nodes[node]->asked = true;
        follow_map_all(b);
      }
      if (k->c && (!c->up || send_to(c, node, k, true) != 0))
        conn_down(c, "redirected to a cluster node not connected yet");
    }
  } else {
    unlink_cmd(c, k);
    answer(c, k, r, NULL);
    k = NULL;
  }
  if (k && k->c == NULL) ccmd_release(NULL, k); /* answered by conn_down or a close */
  c->busy--;
  maybe_free_conn(c);
}

/* ---- the ops ---- */

static bk_conn *cconn_open(broker *bb, const char *name, bk_state_cb *state_cb, void *data) {
  struct cbroker *b = (struct cbroker *)bb;
  struct cconn *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->b = b;
  snprintf(c->name, sizeof c->name, "%s", name ? name : "");
  c->state_cb = state_cb;
  c->data = data;
  if (b->conns == NULL) controls_open(b);
  c->next = b->conns;
  if (b->conns) b->conns->prev = c;
  b->conns = c;
  if (b->mode == MODE_CLUSTER) {
    if (b->mapped) conn_follow_map(c); /* never up at once: up needs a reply */
  } else if (inner_open(c, 0) != 0) {
    b->conns = c->next;
    if (c->next) c->next->prev = NULL;
    free(c->inner);
    free(c);
    return NULL;
  }
  return (bk_conn *)c;
}

static int cconn_command(bk_conn *bc, int argc, const char **argv, const size_t *argvlen,
                         bk_reply_cb *cb, void *data) {
  struct cconn *c = (struct cconn *)bc;
  struct cbroker *b = c->b;
  if (!c->up || c->closing) return -1;
  if (b->mode == MODE_SINGLE)
    return bk_command(b->nodes[0]->b, c->inner[0]->conn, argc, argv, argvlen, cb, data);
  struct ccmd *k = ccmd_get(b);
  if (k == NULL) return -1;
  if (ccmd_copy(k, argc, argv, argvlen) != 0) {
    ccmd_release(NULL, k);
    return -1;
  }
  k->c = c;
  k->cb = cb;
  k->data = data;
  k->redirects = 0;
  if (send_to(c, route(b, argc, argv, argvlen), k, false) != 0) {
    ccmd_release(b, k);
    return -1;
  }
  link_cmd(c, k);
  return 0;
}

static int cconn_connected(bk_conn *bc) {
  struct cconn *c = (struct cconn *)bc;
  return c->up && !c->closing;
}

static void cconn_flush(bk_conn *bc) {
  struct cconn *c = (struct cconn *)bc;
  if (c->closing) return;
  for (size_t i = 0; i < c->ninner; i++)
    if (c->inner[i]) bk_flush(c->b->nodes[i]->b, c->inner[i]->conn);
}

static enum bk_fault cconn_fault(bk_conn *bc, char *why, size_t len) {
  struct cconn *c = (struct cconn *)bc;
  struct cbroker *b = c->b;
  if (c->up || c->closing) return BK_FAULT_NONE;
  for (size_t i = 0; i < c->ninner; i++) {
    if (c->inner[i] == NULL || (b->mode == MODE_CLUSTER && !b->nodes[i]->owns)) continue;
    enum bk_fault f = bk_conn_fault(b->nodes[i]->b, c->inner[i]->conn, why, len);
    if (f != BK_FAULT_NONE) return f;
  }
  if (b->mode == MODE_CLUSTER && len) {
    snprintf(why, len, "%s", b->mapped ? "waiting for a cluster node" : "no cluster slot map yet");
    return BK_FAULT_DOWN;
  }
  return BK_FAULT_NONE;
}

static void cconn_on_fault(bk_conn *bc, bk_fault_cb *cb) { ((struct cconn *)bc)->fault_cb = cb; }

static void cconn_reply_limit(bk_conn *bc, size_t bulk_max, size_t reply_max) {
  struct cconn *c = (struct cconn *)bc;
  c->bulk_max = bulk_max;
  c->reply_max = reply_max;
  for (size_t i = 0; i < c->ninner; i++)
    if (c->inner[i])
      bk_conn_reply_limit(node_broker(c->b, c->inner[i]->node), c->inner[i]->conn, bulk_max,
                          reply_max);
}

static void cconn_close(bk_conn *bc) {
  struct cconn *c = (struct cconn *)bc;
  if (c == NULL || c->closing) return;
  struct cbroker *b = c->b;
  c->busy++;
  c->closing = true; /* commands from the callbacks below are refused */
  c->up = false;
  while (c->pending) {
    struct ccmd *k = c->pending;
    unlink_cmd(c, k);
    k->c = NULL;
    if (k->cb) k->cb(k->data, NULL, "connection closed");
  }
  if (c->prev)
    c->prev->next = c->next;
  else
    b->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  for (size_t i = 0; i < c->ninner; i++) inner_close(c, i);
  if (b->conns == NULL) controls_close(b);
  c->busy--;
  maybe_free_conn(c);
}

static void refresh_closed(uv_handle_t *h) { free(h->data); }

static void cbroker_free(broker *bb) {
  struct cbroker *b = (struct cbroker *)bb;
  if (b == NULL) return;
  controls_close(b);
  for (size_t i = 0; i < b->nnodes; i++) {
    if (b->nodes[i]->b) broker_free(b->nodes[i]->b);
    free(b->nodes[i]);
  }
  free(b->nodes);
  free(b->slots);
  while (b->spare) {
    struct ccmd *k = b->spare;
    b->spare = k->next;
    b->nspare = 0;
    ccmd_release(NULL, k);
  }
  uv_close((uv_handle_t *)&b->refresh, refresh_closed); /* frees b */
}

static int cbroker_cluster(broker *bb) { return ((struct cbroker *)bb)->mode == MODE_CLUSTER; }

static const struct broker_ops cluster_ops = {
    .conn_open = cconn_open,
    .command = cconn_command,
    .connected = cconn_connected,
    .flush = cconn_flush,
    .conn_close = cconn_close,
    .free = cbroker_free,
    .fault = cconn_fault,
    .on_fault = cconn_on_fault,
    .cluster = cbroker_cluster,
    .reply_limit = cconn_reply_limit,
};

static broker *redis_node(void *loop, const struct redis_url *url) {
  return broker_redis_new(loop, url);
}

broker *broker_cluster_new(struct uv_loop_s *loop, const struct redis_url *url) {
  if (loop == NULL || url == NULL) return NULL;
  /* Sentinel watches a master and its replicas, never a cluster. */
  if (url->nsentinels > 0) return broker_redis_new(loop, url);
  return broker_cluster_new_with(loop, url, redis_node, loop);
}

broker *broker_cluster_new_with(struct uv_loop_s *loop, const struct redis_url *url,
                                bk_node_broker_fn *make_node, void *data) {
  if (loop == NULL || url == NULL || make_node == NULL) return NULL;
  struct cbroker *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->base.ops = &cluster_ops;
  snprintf(b->base.name, sizeof b->base.name, "%s", url->redacted);
  b->loop = loop;
  b->url = *url;
  b->make_node = make_node;
  b->make_node_data = data;
  b->slots = malloc(KEYSLOT_COUNT * sizeof *b->slots);
  b->nodes = calloc(1, sizeof *b->nodes);
  struct cnode *seed = calloc(1, sizeof *seed);
  if (b->slots == NULL || b->nodes == NULL || seed == NULL) {
    free(b->slots);
    free(b->nodes);
    free(seed);
    free(b);
    return NULL;
  }
  b->cap = b->nnodes = 1;
  b->nodes[0] = seed;
  seed->url = *url;
  snprintf(seed->addr, sizeof seed->addr, "%s:%d", url->host, url->port);
  b->first_master = 0;
  uv_timer_init(loop, &b->refresh);
  b->refresh.data = b;
  if (url->path[0]) b->mode = MODE_SINGLE; /* a unix socket: cluster nodes speak TCP */
  return &b->base;
}
