/* broker: the seam between the host and a Redis-compatible server.
 *
 * The host speaks Redis commands (argv in, reply tree out) over named
 * connections. Two implementations fill the ops table: broker_redis (hiredis on
 * libuv, a real server) and, for the test harness, an in-memory broker on the
 * virtual clock. Speaking commands rather than verbs keeps the subscription code
 * identical on both and lets conformance tests compare replies directly.
 *
 * Rules every implementation keeps:
 * - a command accepted by bk_command (return 0) completes exactly once: its
 *   callback receives a reply, or reply == NULL with err set when the
 *   connection failed or was closed;
 * - a command refused by bk_command (return -1: not connected) never calls back;
 * - a reply is owned by the broker and valid only during the callback;
 * - commands on one connection are sent in order and pipelined: no call waits
 *   for an earlier reply (one exception: broker_redis sends the host's scripts
 *   by SHA, and a call the server answers NOSCRIPT, having run nothing, goes
 *   again as EVAL, after what was sent since);
 * - replies come back in the order sent only from one server: on Redis
 *   Cluster (broker_cluster) a connection's commands go to several masters,
 *   whose replies interleave, and a command redirected by ASK is answered
 *   after those sent behind it. A caller with several commands in flight
 *   gives each its own data and never pairs replies with commands by order. */
#ifndef LUASTREAM_BROKER_H
#define LUASTREAM_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reply types; the values equal hiredis' REDIS_REPLY_* so broker_redis can hand
 * over hiredis replies without copying (checked by static asserts there). */
enum bk_reply_type {
  BK_STRING = 1,
  BK_ARRAY = 2,
  BK_INTEGER = 3,
  BK_NIL = 4,
  BK_STATUS = 5,
  BK_ERROR = 6,
};

typedef struct bk_reply {
  int type;                  /* enum bk_reply_type */
  long long integer;         /* BK_INTEGER */
  size_t len;                /* length of str */
  char *str;                 /* BK_STRING, BK_STATUS, BK_ERROR */
  size_t elements;           /* BK_ARRAY; 0 for an empty array */
  struct bk_reply **element; /* BK_ARRAY */
} bk_reply;

typedef struct broker broker;
typedef struct bk_conn bk_conn;

/* reply: valid during the call only. err: NULL on a reply, else why it failed. */
typedef void bk_reply_cb(void *data, const bk_reply *reply, const char *err);
/* Called when a connection comes up (up = 1) or goes down (up = 0). */
typedef void bk_state_cb(void *data, bk_conn *conn, int up);

/* Why a connection is not up. */
enum bk_fault {
  BK_FAULT_NONE = 0, /* up, or no attempt has failed since it was last up */
  BK_FAULT_DOWN,     /* unreachable, refused, timed out, dropped, busy loading:
                        trying again may work by itself */
  BK_FAULT_DENIED,   /* the server refused the credentials or the rights
                        (WRONGPASS, NOAUTH, NOPERM, a db it does not have):
                        trying again cannot work until someone changes the
                        server or the configuration */
};
/* Called after every failed attempt to connect and when a live connection
 * drops, with what the connection's bk_conn_fault now says; why is valid
 * during the call only. Runs after the state callback of a drop. */
typedef void bk_fault_cb(void *data, bk_conn *conn, enum bk_fault fault, const char *why);

struct broker_ops {
  bk_conn *(*conn_open)(broker *b, const char *name, bk_state_cb *state_cb, void *data);
  int (*command)(bk_conn *c, int argc, const char **argv, const size_t *argvlen, bk_reply_cb *cb,
                 void *data);
  int (*connected)(bk_conn *c);
  /* Writes what bk_command queued on c now rather than when the loop next
   * turns (hiredis writes only then): a read sent before a batch runs then
   * reaches the server while the batch runs. Best effort: what cannot be
   * written now goes at the next turn, a write error is reported as usual
   * from the loop, never from here. Safe inside any callback. */
  void (*flush)(bk_conn *c);
  /* Pending callbacks fire with err "connection closed", possibly before this
   * returns (bk_command from them returns -1); the state callback does not
   * fire again. Safe inside any callback of the same connection. c must not
   * be used once this returns. */
  void (*conn_close)(bk_conn *c);
  void (*free)(broker *b); /* all connections must be closed first */
  /* Optional (NULL: never a fault). The last failure since c was last up:
   * its kind, and why in why (len bytes, "" for BK_FAULT_NONE), e.g.
   * "authentication failed: WRONGPASS invalid username-password pair ...". */
  enum bk_fault (*fault)(bk_conn *c, char *why, size_t len);
  /* Optional (NULL: faults are never reported). Sets c's fault callback; it
   * gets the data given to conn_open. Safe to close c from the callback. */
  void (*on_fault)(bk_conn *c, bk_fault_cb *cb);
  /* Optional (NULL: never). 1 when the server is a Redis Cluster: commands
   * go to the node of their key's slot, and every key one command (or
   * script) touches must be in one slot. Known once a connection was up. */
  int (*cluster)(broker *b);
  /* Optional (NULL: no limit). Bounds the replies read on c from now on: a
   * bulk string longer than bulk_max bytes, or a reply whose parsed part
   * takes more than reply_max bytes, is refused as it arrives (about one
   * socket read of it is ever held): the connection is dropped and made
   * again, and the commands in flight on it fail with an err starting
   * BK_ERR_TOO_LARGE. 0: no limit. */
  void (*reply_limit)(bk_conn *c, size_t bulk_max, size_t reply_max);
};

/* The start of err when a reply was refused for its size (reply_limit). */
#define BK_ERR_TOO_LARGE "reply too large"

struct broker {
  const struct broker_ops *ops;
  char name[512]; /* what messages call this server: the redacted URL */
};

static inline bk_conn *bk_conn_open(broker *b, const char *name, bk_state_cb *cb, void *data) {
  return b->ops->conn_open(b, name, cb, data);
}
static inline int bk_command(broker *b, bk_conn *c, int argc, const char **argv,
                             const size_t *argvlen, bk_reply_cb *cb, void *data) {
  return b->ops->command(c, argc, argv, argvlen, cb, data);
}
static inline int bk_connected(broker *b, bk_conn *c) { return b->ops->connected(c); }
static inline void bk_flush(broker *b, bk_conn *c) { b->ops->flush(c); }
static inline void bk_conn_close(broker *b, bk_conn *c) { b->ops->conn_close(c); }
static inline void broker_free(broker *b) { b->ops->free(b); }
static inline enum bk_fault bk_conn_fault(broker *b, bk_conn *c, char *why, size_t len) {
  if (len) why[0] = '\0';
  return b->ops->fault ? b->ops->fault(c, why, len) : BK_FAULT_NONE;
}
static inline void bk_conn_on_fault(broker *b, bk_conn *c, bk_fault_cb *cb) {
  if (b->ops->on_fault) b->ops->on_fault(c, cb);
}
static inline int bk_is_cluster(broker *b) { return b->ops->cluster ? b->ops->cluster(b) : 0; }
static inline void bk_conn_reply_limit(broker *b, bk_conn *c, size_t bulk_max, size_t reply_max) {
  if (b->ops->reply_limit) b->ops->reply_limit(c, bulk_max, reply_max);
}

/* ---- reply helpers (broker.c) ---- */

/* r is BK_ERROR whose first word is code ("BUSYGROUP", "NOGROUP"); a NULL code
 * matches any error. A NULL r is not an error. */
int bk_reply_is_error(const bk_reply *r, const char *code);
/* What a failed command says, into buf: the error reply's text, else err
 * (the broker's reason when there is no reply), else what came instead. */
void bk_reply_text(const bk_reply *r, const char *err, char *buf, size_t len);
/* An error text saying the user's ACL refused a command or a key: NOPERM,
 * or its form inside a script ("The user executing the script can't ..."). */
int bk_error_is_denied(const char *text);
/* err (a failed command's) says its reply was refused for its size. */
int bk_error_is_too_large(const char *err);
/* Parses "x.y.z" into one comparable number (x*10000 + y*100 + z); -1 if not a
 * version (anything else in the text, a missing part, y or z above 99). */
long bk_version_parse(const char *text, size_t len);
/* Finds the `redis_version:` line in an INFO reply; returns the parsed version
 * or -1, and copies the text form into out ("" when the line is missing). */
long bk_info_version(const bk_reply *info, char *out, size_t outlen);

/* ---- argv builder: a small growable list of (pointer, length) pairs ---- */

/* argv grows with realloc and is kept across bk_args_reset, so one builder can
 * be reused command after command without allocating. Numbers live inside the
 * struct: do not copy a bk_args that holds some (argv points into numbuf). */
struct bk_args {
  int argc;
  int cap;
  const char **argv;
  size_t *argvlen;
  char numbuf[8][24]; /* storage for numbers added with bk_args_num */
  int nnum;
};
void bk_args_init(struct bk_args *a);
void bk_args_reset(struct bk_args *a);
void bk_args_free(struct bk_args *a);
/* The string is borrowed: it must outlive the command call. */
void bk_args_add(struct bk_args *a, const char *s, size_t len);
void bk_args_str(struct bk_args *a, const char *s);
/* At most 8 numbers per command (until bk_args_reset); a 9th aborts. */
void bk_args_num(struct bk_args *a, long long n);

/* Redis on libuv. `url` is parsed by url_parse and copied. Each connection
 * connects at once, authenticates and selects the db before it reports up, and
 * reconnects on its own with capped exponential backoff (100 ms doubling to
 * 5 s, with jitter), logging once when it goes and once when it comes back;
 * a refusal (BK_FAULT_DENIED) is logged at every attempt: it needs a person.
 * Returns NULL when out of memory. */
struct uv_loop_s;
struct redis_url;
broker *broker_redis_new(struct uv_loop_s *loop, const struct redis_url *url);
/* A redis:// server that may be a Redis Cluster (broker_cluster.c): the
 * first connection asks; a standalone server is then used exactly as
 * broker_redis would, a cluster through one broker_redis per master, each
 * command sent to the master of its first key's slot, following MOVED and
 * ASK. A redis+sentinel:// URL gets broker_redis itself. Returns NULL when
 * out of memory. */
broker *broker_cluster_new(struct uv_loop_s *loop, const struct redis_url *url);
/* Makes the broker of one node of a cluster, at url (the seed's URL, or the
 * seed's with a node's host and port); data is what broker_cluster_new_with
 * was given. The cluster broker owns it and frees it with broker_free.
 * Returns NULL when out of memory. */
typedef broker *bk_node_broker_fn(void *data, const struct redis_url *url);
/* broker_cluster_new on node brokers made by make_node rather than
 * broker_redis_new (which broker_cluster_new uses), e.g. scripted brokers
 * in unit tests; the loop runs the map refresh timer. A sentinel URL is not
 * special here: url is the seed, asked whether it is a cluster. */
broker *broker_cluster_new_with(struct uv_loop_s *loop, const struct redis_url *url,
                                bk_node_broker_fn *make_node, void *data);
/* A command unanswered for ms (plus its BLOCK time) drops and remakes its
 * connection; pending commands fail with "connection lost". Default 10 s. */
void broker_redis_set_command_timeout(broker *b, uint64_t ms);

#endif
