/* raw_client: the hand-written consumer luastream is measured against.
 *
 *   raw_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]
 *              [--read-ahead] [--hincrby KEY]
 *
 * What a careful C programmer would write for one consumer of a group, with
 * the same libraries and the same work per entry as luastream running
 * bench/handlers/ack_payment.lua:
 * - hiredis 0.14 async on libuv (the stock adapter), two connections as in
 *   luastream: one for the blocking reads, one for the acks, so an ack never
 *   waits behind a blocked read;
 * - XREADGROUP GROUP G C COUNT N BLOCK 2000 STREAMS S >, the next read sent as
 *   soon as a batch is done (luastream's handlers finish at once too, so its
 *   lanes are empty when it reads again: the same COUNT);
 * - each entry's `data` decoded as JSON into its fields (the small decoder
 *   of bench/small_json.h: objects, arrays, strings with escapes, numbers,
 *   literals), one field read (amount_cents), the entry acked after that work;
 * - acks coalesced per loop turn, as luastream does: ids collected while a
 *   reply is handled, one XACK for all of them from a 0-ms timer.
 * --read-ahead: the next read is sent, and written to the socket at once, before
 * the batch just read is handled, so Redis prepares it meanwhile (not what
 * luastream does at the time of writing; see bench/RESULTS.md).
 * --hincrby KEY: also HINCRBY KEY <account> <amount_cents> per entry on the
 * write connection, pipelined before its ack: the Redis work of
 * bench/handlers/write (ctx:write) without its guarantee (the write and the
 * ack are separate commands, so a crash between them or a second consumer
 * finishing the entry writes twice or not at all).
 * Runs until SIGTERM/SIGINT, or until --count entries are acked; prints
 * `handled=N acked=N checksum=N` on stderr. Exit status 0, or 1 on an error. */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "small_json.h"

#define ID_MAX 48
#define BLOCK_MS "2000"

/* ---- the consumer ---- */

static struct {
  uv_loop_t *loop;
  redisAsyncContext *rd, *wr;
  int up; /* connections up */
  const char *stream, *group, *consumer;
  char count_arg[24]; /* the COUNT of each read */
  long long want;     /* --count: stop once this many are acked; 0: never */
  long long handled, acked, bad;
  double checksum;      /* the field read from each payment */
  char (*acks)[ID_MAX]; /* ids handled, not yet in an XACK */
  size_t nacks, cap;
  const char **argv; /* the XACK being built */
  size_t *argvlen;
  uv_timer_t flush;
  bool flush_armed;
  uv_signal_t sigterm, sigint;
  bool stopping;
  bool read_ahead;     /* --read-ahead */
  const char *hincrby; /* --hincrby KEY, or NULL */
  int status;
  struct jdoc doc;
} C;

static void flush_acks(uv_timer_t *t);

/* Stops reading at once; acks already collected go out first, then the write
 * connection closes once its replies are in. */
static void stop(int status) {
  if (C.stopping) return;
  if (status) C.status = status;
  if (status == 0 && C.wr && C.nacks) flush_acks(NULL);
  C.stopping = true;
  uv_signal_stop(&C.sigterm);
  uv_signal_stop(&C.sigint);
  uv_timer_stop(&C.flush);
  if (C.rd) redisAsyncFree(C.rd); /* a blocked read is dropped */
  if (C.wr) redisAsyncDisconnect(C.wr);
}

static void read_next(void);

static void ack_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  if (reply == NULL) return; /* disconnecting */
  if (reply->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "raw_client: XACK failed: %s\n",
            reply->type == REDIS_REPLY_ERROR ? reply->str : "?");
    stop(1);
    return;
  }
  C.acked += reply->integer;
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
  /* hiredis formats the command now: the id buffer is free again at once. */
  if (redisAsyncCommandArgv(C.wr, ack_done, NULL, (int)argc, C.argv, C.argvlen) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send XACK\n");
    stop(1);
    return;
  }
  C.nacks = 0;
}

static void queue_ack(const char *id, size_t len) {
  if (C.nacks == C.cap) {
    size_t cap = C.cap ? C.cap * 2 : 1024;
    C.acks = realloc(C.acks, cap * sizeof *C.acks);
    C.argv = realloc(C.argv, (cap + 3) * sizeof *C.argv);
    C.argvlen = realloc(C.argvlen, (cap + 3) * sizeof *C.argvlen);
    if (!C.acks || !C.argv || !C.argvlen) {
      fprintf(stderr, "raw_client: out of memory\n");
      exit(1);
    }
    C.cap = cap;
  }
  if (len >= ID_MAX) len = ID_MAX - 1;
  memcpy(C.acks[C.nacks], id, len);
  C.acks[C.nacks][len] = '\0';
  C.nacks++;
  if (!C.flush_armed) {
    C.flush_armed = true;
    uv_timer_start(&C.flush, flush_acks, 0, 0);
  }
}

/* The work luastream's handler does: decode, read one field; then the ack. */
static void handle(const redisReply *id, const redisReply *fields) {
  const redisReply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const redisReply *k = fields->element[i];
    if (k->len == 4 && memcmp(k->str, "data", 4) == 0) data = fields->element[i + 1];
  }
  C.handled++;
  if (data == NULL || !decode(data->str, data->len, &C.doc)) {
    C.bad++; /* luastream leaves bad input pending; so does this */
    return;
  }
  const struct jfield *amount = doc_get(&C.doc, "amount_cents");
  if (amount && amount->type == J_NUMBER) C.checksum += amount->num;
  const struct jfield *account = doc_get(&C.doc, "account");
  if (C.hincrby && amount && amount->type == J_NUMBER && account && account->type == J_STRING &&
      redisAsyncCommand(C.wr, NULL, NULL, "HINCRBY %s %b %lld", C.hincrby, account->str,
                        account->len, (long long)amount->num) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send HINCRBY\n");
    stop(1);
    return;
  }
  queue_ack(id->str, id->len);
}

static void read_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  if (reply == NULL) return; /* disconnecting */
  if (reply->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "raw_client: XREADGROUP failed: %s\n", reply->str);
    stop(1);
    return;
  }
  if (C.read_ahead) {
    read_next();
    if (C.rd) redisAsyncHandleWrite(C.rd); /* on the wire now, not after this batch */
  }
  /* [[stream, [[id, [field, value, ...]], ...]]], or nil after BLOCK */
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t s = 0; s < reply->elements; s++) {
      const redisReply *entries = reply->element[s]->element[1];
      for (size_t e = 0; e < entries->elements; e++) {
        const redisReply *entry = entries->element[e];
        if (entry->element[1]->type == REDIS_REPLY_ARRAY)
          handle(entry->element[0], entry->element[1]);
      }
    }
  }
  if (!C.read_ahead) read_next();
}

static void read_next(void) {
  if (C.stopping) return;
  const char *argv[] = {"XREADGROUP", "GROUP",  C.group,   C.consumer, "COUNT", C.count_arg,
                        "BLOCK",      BLOCK_MS, "STREAMS", C.stream,   ">"};
  size_t len[11];
  for (int i = 0; i < 11; i++) len[i] = strlen(argv[i]);
  if (redisAsyncCommandArgv(C.rd, read_done, NULL, 11, argv, len) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send XREADGROUP\n");
    stop(1);
  }
}

static void connected(const redisAsyncContext *ac, int status) {
  if (status != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot connect: %s\n", ac->errstr);
    if (ac == C.rd) C.rd = NULL;
    if (ac == C.wr) C.wr = NULL;
    stop(1);
    return;
  }
  if (++C.up == 2) read_next();
}

static void disconnected(const redisAsyncContext *ac, int status) {
  if (ac == C.rd) C.rd = NULL;
  if (ac == C.wr) C.wr = NULL;
  if (!C.stopping) {
    fprintf(stderr, "raw_client: connection lost: %s\n",
            status == REDIS_OK ? "closed" : ac->errstr);
    stop(1);
  }
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)s, (void)sig;
  stop(0);
}

static redisAsyncContext *open_conn(int port) {
  redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
  if (ac == NULL || ac->err) {
    fprintf(stderr, "raw_client: cannot connect: %s\n", ac ? ac->errstr : "out of memory");
    exit(1);
  }
  redisLibuvAttach(ac, C.loop);
  redisAsyncSetConnectCallback(ac, connected);
  redisAsyncSetDisconnectCallback(ac, disconnected);
  return ac;
}

static void usage(void) {
  fprintf(stderr,
          "usage: raw_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]\n"
          "                  [--read-ahead] [--hincrby KEY]\n");
  exit(2);
}

int main(int argc, char **argv) {
  int port = 0;
  long batch = 100;
  C.consumer = "raw-0";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--read-ahead")) {
      C.read_ahead = true;
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
    else if (!strcmp(a, "--hincrby"))
      C.hincrby = v;
    else
      usage();
    i++;
  }
  if (port <= 0 || !C.stream || !C.group || batch < 1) usage();
  snprintf(C.count_arg, sizeof C.count_arg, "%ld", batch);
  C.loop = uv_default_loop();
  uv_timer_init(C.loop, &C.flush);
  uv_signal_init(C.loop, &C.sigterm);
  uv_signal_init(C.loop, &C.sigint);
  uv_signal_start(&C.sigterm, on_signal, SIGTERM);
  uv_signal_start(&C.sigint, on_signal, SIGINT);
  C.rd = open_conn(port);
  C.wr = open_conn(port);
  uv_run(C.loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&C.flush, NULL);
  uv_close((uv_handle_t *)&C.sigterm, NULL);
  uv_close((uv_handle_t *)&C.sigint, NULL);
  uv_run(C.loop, UV_RUN_DEFAULT);
  fprintf(stderr, "handled=%lld acked=%lld bad=%lld checksum=%.0f\n", C.handled, C.acked, C.bad,
          C.checksum);
  free(C.acks);
  free(C.argv);
  free(C.argvlen);
  return C.status;
}
