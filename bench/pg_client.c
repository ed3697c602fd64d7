/* pg_client: the hand-written libpq client luastream's ctx:pg_once is measured
 * against.
 *
 *   pg_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]
 *             [--concurrency N] [--postgres CONNINFO] [--keys TABLE] [--ledger TABLE]
 *             [--no-pipeline]
 *
 * What a careful C programmer would write for one consumer of a group that
 * posts each payment into a PostgreSQL ledger exactly once, with the work per
 * entry of a luastream handler calling ctx:pg_once:
 * - Redis as in raw_client.c: hiredis async on libuv, one connection for the
 *   blocking XREADGROUP reads, one for the acks, acks coalesced per loop turn
 *   (one XACK from a 0-ms timer); a read is sent when fewer entries wait than
 *   there are PostgreSQL connections, so at most one batch is read ahead;
 * - --concurrency N (default 64) libpq connections in non-blocking mode, each
 *   socket watched by a uv_poll on the same loop, one transaction in flight
 *   per connection; statements prepared once per connection;
 * - per entry, in one transaction: INSERT the idempotency key (stream, group,
 *   entry id) ON CONFLICT DO NOTHING; when it was new, INSERT one ledger row
 *   (payment id, account, amount_cents from the entry's JSON `data`);
 *   COMMIT; then the entry is acked. A key already there (the entry was
 *   handled before a crash lost its ack) only commits and acks.
 * - libpq's pipeline mode: BEGIN and the key INSERT go out together, then
 *   the ledger INSERT and COMMIT: two round trips per entry, the fewest for
 *   "insert the row only when the key was new". --no-pipeline sends one
 *   statement per round trip (four).
 * The JSON fields are found by a scan for their keys (the payments of
 * bench/payment.h: no nesting, no escapes), not a full decode: the reference
 * does no more work than it must.
 *
 * The connection string comes from --postgres, else LUASTREAM_POSTGRES, else
 * libpq's own PG* variables (PGPASSWORD keeps the password out of ps). The
 * tables are created when missing:
 *   KEYS (stream text, grp text, id text, created_at timestamptz, PRIMARY KEY (stream, grp, id))
 *   LEDGER (payment_id bigint, account text, amount_cents bigint)
 * (defaults pg_client_keys and ledger).
 * All connections are made before the first read, so `loadgen run` (which
 * waits for a blocked reader) times the work alone. Runs until SIGTERM/SIGINT,
 * or until --count entries are acked; prints `handled=N acked=N posted=N
 * duplicates=N bad=N elapsed_s=S rate=R` on stderr (posted: ledger rows
 * written; duplicates: keys already there; elapsed_s: from the first entry
 * read to the last ack, rate = acked / elapsed_s). Exit status 0, or 1 on an
 * error. */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define ID_MAX 48
#define ACCOUNT_MAX 64
#define BLOCK_MS "2000"
#define MAX_SENT 8 /* statements of one round */

struct entry {
  char id[ID_MAX];
  char payment_id[24];
  char account[ACCOUNT_MAX];
  char amount[24];
};

enum stmt { S_BEGIN, S_KEY, S_LEDGER, S_COMMIT };

struct pgconn {
  PGconn *conn;
  uv_poll_t poll;
  int events;               /* the uv_poll events asked for */
  bool busy;                /* a transaction in flight */
  struct entry e;           /* its entry */
  enum stmt sent[MAX_SENT]; /* the statements of the round in flight, in order */
  int nsent, nresults;      /* how many were sent, how many results seen */
  bool key_new;             /* the key INSERT inserted a row */
  bool awaiting;            /* a round is in flight: its sync point not seen yet */
};

static struct {
  uv_loop_t *loop;
  redisAsyncContext *rd, *wr;
  int up;
  bool reading; /* an XREADGROUP is in flight */
  const char *stream, *group, *consumer;
  char count_arg[24];
  long long want;
  long long handled, acked, posted, duplicates, bad;
  uint64_t first_read_ns, last_ack_ns; /* uv_hrtime: the first entry read, the last ack */
  struct entry *queue;                 /* entries read, not yet given to a connection (a ring) */
  size_t qhead, qlen, qcap;
  struct pgconn *pg;
  int npg;
  bool pipeline;
  char (*acks)[ID_MAX];
  size_t nacks, cap;
  const char **argv;
  size_t *argvlen;
  uv_timer_t flush;
  bool flush_armed;
  uv_signal_t sigterm, sigint;
  bool stopping;
  int status;
} C;

static void flush_acks(uv_timer_t *t);
static void read_next(void);
static void dispatch(void);
static void pg_ready(uv_poll_t *h, int status, int events);

/* Stops at once: acks collected go out first; transactions in flight are
 * dropped with their connections (rolled back: the entries stay pending). */
static void stop(int status) {
  if (C.stopping) return;
  if (status) C.status = status;
  if (status == 0 && C.wr && C.nacks) flush_acks(NULL);
  C.stopping = true;
  uv_signal_stop(&C.sigterm);
  uv_signal_stop(&C.sigint);
  uv_timer_stop(&C.flush);
  if (C.rd) redisAsyncFree(C.rd);
  if (C.wr) redisAsyncDisconnect(C.wr);
  for (int i = 0; i < C.npg; i++) {
    if (uv_is_active((uv_handle_t *)&C.pg[i].poll)) uv_poll_stop(&C.pg[i].poll);
    if (!uv_is_closing((uv_handle_t *)&C.pg[i].poll)) uv_close((uv_handle_t *)&C.pg[i].poll, NULL);
  }
}

/* ---- acks (as raw_client.c) ---- */

static void ack_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  if (reply == NULL) return;
  if (reply->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "pg_client: XACK failed: %s\n",
            reply->type == REDIS_REPLY_ERROR ? reply->str : "?");
    stop(1);
    return;
  }
  C.acked += reply->integer;
  C.last_ack_ns = uv_hrtime();
  if (C.want && C.acked >= C.want) stop(0);
}

static void flush_acks(uv_timer_t *t) {
  (void)t;
  C.flush_armed = false;
  if (C.nacks == 0 || C.stopping) return;
  size_t argc = C.nacks + 3;
  C.argv[0] = "XACK";
  C.argvlen[0] = 4;
  C.argv[1] = C.stream;
  C.argvlen[1] = strlen(C.stream);
  C.argv[2] = C.group;
  C.argvlen[2] = strlen(C.group);
  for (size_t i = 0; i < C.nacks; i++) {
    C.argv[i + 3] = C.acks[i];
    C.argvlen[i + 3] = strlen(C.acks[i]);
  }
  if (redisAsyncCommandArgv(C.wr, ack_done, NULL, (int)argc, C.argv, C.argvlen) != REDIS_OK) {
    fprintf(stderr, "pg_client: cannot send XACK\n");
    stop(1);
    return;
  }
  C.nacks = 0;
}

static void *grow(void *p, size_t n, size_t size) {
  p = realloc(p, n * size);
  if (p == NULL) {
    fprintf(stderr, "pg_client: out of memory\n");
    exit(1);
  }
  return p;
}

static void queue_ack(const char *id) {
  if (C.nacks == C.cap) {
    C.cap = C.cap ? C.cap * 2 : 1024;
    C.acks = grow(C.acks, C.cap, sizeof *C.acks);
    C.argv = grow(C.argv, C.cap + 3, sizeof *C.argv);
    C.argvlen = grow(C.argvlen, C.cap + 3, sizeof *C.argvlen);
  }
  memcpy(C.acks[C.nacks++], id, ID_MAX);
  if (!C.flush_armed) {
    C.flush_armed = true;
    uv_timer_start(&C.flush, flush_acks, 0, 0);
  }
}

/* ---- PostgreSQL ---- */

static void pg_fail(struct pgconn *p, const char *what, const PGresult *r) {
  fprintf(stderr, "pg_client: %s: %s", what, r ? PQresultErrorMessage(r) : PQerrorMessage(p->conn));
  stop(1);
}

/* Asks for UV_WRITABLE while libpq has output it could not write. */
static void pg_flush(struct pgconn *p) {
  int r = PQflush(p->conn);
  if (r < 0) {
    pg_fail(p, "flush", NULL);
    return;
  }
  int events = UV_READABLE | (r == 1 ? UV_WRITABLE : 0);
  if (events != p->events) {
    p->events = events;
    uv_poll_start(&p->poll, events, pg_ready);
  }
}

static bool send_stmt(struct pgconn *p, enum stmt s) {
  const struct entry *e = &p->e;
  int ok = 0;
  switch (s) {
    case S_BEGIN: ok = PQsendQueryParams(p->conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 0); break;
    case S_COMMIT: ok = PQsendQueryParams(p->conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0); break;
    case S_KEY: {
      const char *v[3] = {C.stream, C.group, e->id};
      ok = PQsendQueryPrepared(p->conn, "key", 3, v, NULL, NULL, 0);
      break;
    }
    case S_LEDGER: {
      const char *v[3] = {e->payment_id, e->account, e->amount};
      ok = PQsendQueryPrepared(p->conn, "ledger", 3, v, NULL, NULL, 0);
      break;
    }
  }
  if (!ok) {
    pg_fail(p, "send", NULL);
    return false;
  }
  p->sent[p->nsent++] = s;
  return true;
}

/* Sends one round: the statements, then a sync point (one round trip). In
 * --no-pipeline mode a round is one statement. */
static void send_round(struct pgconn *p, const enum stmt *stmts, int n) {
  p->nsent = p->nresults = 0;
  for (int i = 0; i < n; i++)
    if (!send_stmt(p, stmts[i])) return;
  if (!PQpipelineSync(p->conn)) {
    pg_fail(p, "sync", NULL);
    return;
  }
  p->awaiting = true;
  pg_flush(p);
}

/* Sends the round that follows a finished one, or, after COMMIT, acks the
 * entry and frees the connection for the next one. */
static void next_round(struct pgconn *p) {
  enum stmt last = p->sent[p->nsent - 1];
  if (!C.pipeline) {
    enum stmt s;
    if (last == S_BEGIN)
      s = S_KEY;
    else if (last == S_KEY)
      s = p->key_new ? S_LEDGER : S_COMMIT;
    else if (last == S_LEDGER)
      s = S_COMMIT;
    else
      goto committed;
    send_round(p, &s, 1);
    return;
  }
  if (last == S_KEY) {
    static const enum stmt post[] = {S_LEDGER, S_COMMIT}, skip[] = {S_COMMIT};
    if (p->key_new)
      send_round(p, post, 2);
    else
      send_round(p, skip, 1);
    return;
  }
committed:
  p->busy = false;
  C.handled++;
  if (p->key_new)
    C.posted++;
  else
    C.duplicates++;
  queue_ack(p->e.id);
  dispatch();
}

/* Takes every result that has arrived. In pipeline mode PQgetResult gives
 * NULL after each statement's results; PQisBusy says whether the next one is
 * there yet. */
static void pg_results(struct pgconn *p) {
  while (!C.stopping && p->awaiting && !PQisBusy(p->conn)) {
    PGresult *r = PQgetResult(p->conn);
    if (r == NULL) continue; /* the end of one statement's results */
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      p->awaiting = false;
      next_round(p);
      continue;
    }
    if (st != PGRES_COMMAND_OK) {
      pg_fail(p, "query", r);
      PQclear(r);
      return;
    }
    if (p->nresults < p->nsent && p->sent[p->nresults] == S_KEY)
      p->key_new = strcmp(PQcmdTuples(r), "1") == 0;
    p->nresults++;
    PQclear(r);
  }
}

static void pg_ready(uv_poll_t *h, int status, int events) {
  struct pgconn *p = h->data;
  if (C.stopping) return;
  if (status < 0) {
    fprintf(stderr, "pg_client: poll: %s\n", uv_strerror(status));
    stop(1);
    return;
  }
  if (events & UV_WRITABLE) pg_flush(p);
  if (events & UV_READABLE) {
    if (!PQconsumeInput(p->conn)) {
      pg_fail(p, "connection", NULL);
      return;
    }
    pg_results(p);
  }
}

static void start_tx(struct pgconn *p, const struct entry *e) {
  p->busy = true;
  p->e = *e;
  p->key_new = false;
  static const enum stmt first[] = {S_BEGIN, S_KEY};
  send_round(p, first, C.pipeline ? 2 : 1);
}

/* Gives waiting entries to idle connections; reads more when few wait. */
static void dispatch(void) {
  for (int i = 0; i < C.npg && C.qlen > 0 && !C.stopping; i++) {
    if (C.pg[i].busy) continue;
    struct entry e = C.queue[C.qhead];
    C.qhead = (C.qhead + 1) % C.qcap;
    C.qlen--;
    start_tx(&C.pg[i], &e);
  }
  if (!C.reading && C.up == 2 && C.qlen < (size_t)C.npg) read_next();
}

static void pg_open(struct pgconn *p, const char *conninfo, const char *keys, const char *ledger) {
  p->conn = PQconnectdb(conninfo);
  if (PQstatus(p->conn) != CONNECTION_OK) {
    fprintf(stderr, "pg_client: cannot connect to PostgreSQL: %s", PQerrorMessage(p->conn));
    exit(1);
  }
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO %s (stream, grp, id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", keys);
  PGresult *r = PQprepare(p->conn, "key", sql, 3, NULL);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    fprintf(stderr, "pg_client: prepare: %s", PQresultErrorMessage(r));
    exit(1);
  }
  PQclear(r);
  snprintf(sql, sizeof sql,
           "INSERT INTO %s (payment_id, account, amount_cents) VALUES ($1, $2, $3)", ledger);
  r = PQprepare(p->conn, "ledger", sql, 3, NULL);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    fprintf(stderr, "pg_client: prepare: %s", PQresultErrorMessage(r));
    exit(1);
  }
  PQclear(r);
  if (PQsetnonblocking(p->conn, 1) != 0 || !PQenterPipelineMode(p->conn)) {
    fprintf(stderr, "pg_client: cannot enter pipeline mode: %s", PQerrorMessage(p->conn));
    exit(1);
  }
  uv_poll_init(C.loop, &p->poll, PQsocket(p->conn));
  p->poll.data = p;
  p->events = UV_READABLE;
  uv_poll_start(&p->poll, UV_READABLE, pg_ready);
}

static void create_tables(const char *conninfo, const char *keys, const char *ledger) {
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "pg_client: cannot connect to PostgreSQL: %s", PQerrorMessage(c));
    exit(1);
  }
  char sql[1024];
  snprintf(
      sql, sizeof sql,
      "SET client_min_messages = warning;"
      "CREATE TABLE IF NOT EXISTS %s (stream text NOT NULL, grp text NOT NULL, id text NOT NULL,"
      " created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (stream, grp, id));"
      "CREATE TABLE IF NOT EXISTS %s (payment_id bigint NOT NULL, account text NOT NULL,"
      " amount_cents bigint NOT NULL)",
      keys, ledger);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    fprintf(stderr, "pg_client: cannot create the tables: %s", PQresultErrorMessage(r));
    exit(1);
  }
  PQclear(r);
  PQfinish(c);
}

/* ---- entries ---- */

/* The text after "key": in body (a number, or a string without its quotes),
 * copied into out; false when missing or too long. */
static bool json_field(const char *body, const char *key, char *out, size_t cap) {
  char pat[40];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(body, pat);
  if (p == NULL) return false;
  p += strlen(pat);
  size_t n;
  if (*p == '"') {
    p++;
    n = strcspn(p, "\"\\");
    if (p[n] != '"') return false;
  } else {
    n = strspn(p, "-0123456789");
    if (n == 0) return false;
  }
  if (n >= cap) return false;
  memcpy(out, p, n);
  out[n] = '\0';
  return true;
}

static void handle(const redisReply *id, const redisReply *fields) {
  const redisReply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const redisReply *k = fields->element[i];
    if (k->len == 4 && memcmp(k->str, "data", 4) == 0) data = fields->element[i + 1];
  }
  if (C.qlen == C.qcap) { /* grow the ring, unrolled into the new array */
    size_t cap = C.qcap ? C.qcap * 2 : 1024;
    struct entry *q = grow(NULL, cap, sizeof *q);
    for (size_t i = 0; i < C.qlen; i++) q[i] = C.queue[(C.qhead + i) % C.qcap];
    free(C.queue);
    C.queue = q;
    C.qhead = 0;
    C.qcap = cap;
  }
  struct entry *e = &C.queue[(C.qhead + C.qlen) % C.qcap];
  if (id->len >= ID_MAX || data == NULL || data->type != REDIS_REPLY_STRING ||
      !json_field(data->str, "id", e->payment_id, sizeof e->payment_id) ||
      !json_field(data->str, "account", e->account, sizeof e->account) ||
      !json_field(data->str, "amount_cents", e->amount, sizeof e->amount)) {
    C.bad++; /* left pending, as luastream leaves bad input */
    return;
  }
  memset(e->id, 0, sizeof e->id);
  memcpy(e->id, id->str, id->len);
  C.qlen++;
}

static void read_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  C.reading = false;
  if (reply == NULL) return;
  if (reply->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "pg_client: XREADGROUP failed: %s\n", reply->str);
    stop(1);
    return;
  }
  if (reply->type == REDIS_REPLY_ARRAY) {
    if (C.first_read_ns == 0) C.first_read_ns = uv_hrtime();
    for (size_t s = 0; s < reply->elements; s++) {
      const redisReply *entries = reply->element[s]->element[1];
      for (size_t e = 0; e < entries->elements; e++) {
        const redisReply *entry = entries->element[e];
        if (entry->element[1]->type == REDIS_REPLY_ARRAY)
          handle(entry->element[0], entry->element[1]);
      }
    }
  }
  dispatch();
}

static void read_next(void) {
  if (C.stopping) return;
  const char *argv[] = {"XREADGROUP", "GROUP",  C.group,   C.consumer, "COUNT", C.count_arg,
                        "BLOCK",      BLOCK_MS, "STREAMS", C.stream,   ">"};
  size_t len[11];
  for (int i = 0; i < 11; i++) len[i] = strlen(argv[i]);
  if (redisAsyncCommandArgv(C.rd, read_done, NULL, 11, argv, len) != REDIS_OK) {
    fprintf(stderr, "pg_client: cannot send XREADGROUP\n");
    stop(1);
    return;
  }
  C.reading = true;
}

static void connected(const redisAsyncContext *ac, int status) {
  if (status != REDIS_OK) {
    fprintf(stderr, "pg_client: cannot connect to Redis: %s\n", ac->errstr);
    if (ac == C.rd) C.rd = NULL;
    if (ac == C.wr) C.wr = NULL;
    stop(1);
    return;
  }
  if (++C.up == 2) dispatch();
}

static void disconnected(const redisAsyncContext *ac, int status) {
  if (ac == C.rd) C.rd = NULL;
  if (ac == C.wr) C.wr = NULL;
  if (!C.stopping) {
    fprintf(stderr, "pg_client: Redis connection lost: %s\n",
            status == REDIS_OK ? "closed" : ac->errstr);
    stop(1);
  }
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)s, (void)sig;
  stop(0);
}

static redisAsyncContext *open_redis(int port) {
  redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
  if (ac == NULL || ac->err) {
    fprintf(stderr, "pg_client: cannot connect to Redis: %s\n", ac ? ac->errstr : "out of memory");
    exit(1);
  }
  redisLibuvAttach(ac, C.loop);
  redisAsyncSetConnectCallback(ac, connected);
  redisAsyncSetDisconnectCallback(ac, disconnected);
  return ac;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: pg_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]\n"
      "                 [--concurrency N] [--postgres CONNINFO] [--keys TABLE] [--ledger TABLE]\n"
      "                 [--no-pipeline]\n");
  exit(2);
}

/* A table name is put into SQL as is: letters, digits, _ and . only. */
static bool plain_name(const char *s) {
  if (*s == '\0') return false;
  return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == strlen(s);
}

int main(int argc, char **argv) {
  int port = 0, concurrency = 64;
  long batch = 100;
  const char *conninfo = getenv("LUASTREAM_POSTGRES");
  const char *keys = "pg_client_keys", *ledger = "ledger";
  C.consumer = "pg-0";
  C.pipeline = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-pipeline")) {
      C.pipeline = false;
      continue;
    }
    if (v == NULL) usage();
    if (!strcmp(a, "--port"))
      port = atoi(v);
    else if (!strcmp(a, "--stream"))
      C.stream = v;
    else if (!strcmp(a, "--group"))
      C.group = v;
    else if (!strcmp(a, "--consumer"))
      C.consumer = v;
    else if (!strcmp(a, "--batch"))
      batch = atol(v);
    else if (!strcmp(a, "--count"))
      C.want = atoll(v);
    else if (!strcmp(a, "--concurrency"))
      concurrency = atoi(v);
    else if (!strcmp(a, "--postgres"))
      conninfo = v;
    else if (!strcmp(a, "--keys"))
      keys = v;
    else if (!strcmp(a, "--ledger"))
      ledger = v;
    else
      usage();
    i++;
  }
  if (port <= 0 || !C.stream || !C.group || batch < 1 || concurrency < 1 || !plain_name(keys) ||
      !plain_name(ledger))
    usage();
  if (conninfo == NULL) conninfo = ""; /* libpq's PG* variables and defaults */
  snprintf(C.count_arg, sizeof C.count_arg, "%ld", batch);
  C.loop = uv_default_loop();
  create_tables(conninfo, keys, ledger);
  C.npg = concurrency;
  C.pg = calloc((size_t)concurrency, sizeof *C.pg);
  if (C.pg == NULL) usage();
  for (int i = 0; i < concurrency; i++) pg_open(&C.pg[i], conninfo, keys, ledger);
  uv_timer_init(C.loop, &C.flush);
  uv_signal_init(C.loop, &C.sigterm);
  uv_signal_init(C.loop, &C.sigint);
  uv_signal_start(&C.sigterm, on_signal, SIGTERM);
  uv_signal_start(&C.sigint, on_signal, SIGINT);
  C.rd = open_redis(port);
  C.wr = open_redis(port);
  uv_run(C.loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&C.flush, NULL);
  uv_close((uv_handle_t *)&C.sigterm, NULL);
  uv_close((uv_handle_t *)&C.sigint, NULL);
  uv_run(C.loop, UV_RUN_DEFAULT);
  for (int i = 0; i < C.npg; i++) PQfinish(C.pg[i].conn);
  double elapsed =
      C.last_ack_ns > C.first_read_ns ? (double)(C.last_ack_ns - C.first_read_ns) / 1e9 : 0;
  fprintf(stderr,
          "handled=%lld acked=%lld posted=%lld duplicates=%lld bad=%lld elapsed_s=%.3f rate=%.0f\n",
          C.handled, C.acked, C.posted, C.duplicates, C.bad, elapsed,
          elapsed > 0 ? C.acked / elapsed : 0);
  free(C.pg);
  free(C.queue);
  free(C.acks);
  free(C.argv);
  free(C.argvlen);
  return C.status;
}
