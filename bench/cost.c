/* cost: the host in process on the in-memory broker and the virtual clock, for
 * counting instructions with callgrind (bench/instructions runs it).
 *
 *   cost SCENARIO N      SCENARIO: ack | schema | reply | write | get | lanes | cold
 *
 * Publishes N payments (payment.h) to stream `bench` with the group `bench`
 * created at 0, before any host runs; then, inside cost_measured() only:
 *   ack, reply, write, get, lanes: starts the host already loaded from
 *     bench/handlers, bench/handlers/reply, bench/handlers/write (one
 *     ctx:write per entry), bench/handlers/get (one ls.redis.call GET per
 *     entry on 64 lanes), bench/handlers/lanes or bench/handlers/schema (the
 *     ack handler with the payments example's schema) (host_start) and settles
 *     the clock until all N are handled and their outcomes written;
 *   cold: the same with loading too (host_new: the Lua state, luastream's
 *     library, the handler file), for the cost of a first delivery.
 * `valgrind --tool=callgrind --toggle-collect=cost_measured` therefore counts
 * neither the publishing nor the teardown; the difference between two runs
 * (N = 2000 and N = 1000) is the cost of 1000 deliveries in steady state:
 * reads of full batches, handler calls, coalesced acks (and for reply and
 * write the outcome script, one call per loop turn). No socket is involved: the broker's replies are
 * built in memory by its command code (broker_memory.c's run() and the
 * mem*.c files), which bench/callgrind.awk counts as the server and
 * bench/instructions subtracts to get the host's own figure. Checks that every entry was handled (exit 1 if not) and prints
 * `scenario=... n=... ns=...` (native time of the measured part). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker.h"
#include "broker_memory.h"
#include "clock.h"
#include "clock_virtual.h"
#include "host.h"
#include "log.h"
#include "payment.h"

#ifndef COST_LUAJIT
#define COST_LUAJIT "shared"
#endif
#ifndef BENCH_DIR
#define BENCH_DIR "bench"
#endif
#define WALL_START_MS 1767225600000ULL

static lclock *clock_;
static broker *broker_;
static bk_conn *conn;

/* ---- talking to the broker ---- */

struct answer {
  bool done;
  int type;
  long long integer;
  char text[256];
  size_t elements;
  long long first; /* an array's first element, when an integer */
  long long read;  /* XINFO GROUPS: entries-read of the first group */
};

static void got(void *data, const bk_reply *r, const char *err) {
  struct answer *a = data;
  a->done = true;
  if (r == NULL) {
    a->type = BK_ERROR;
    snprintf(a->text, sizeof a->text, "%s", err ? err : "no reply");
    return;
  }
  a->type = r->type;
  a->integer = r->integer;
  a->elements = r->elements;
  a->first = -1;
  a->read = -1;
  if (r->type == BK_ARRAY && r->elements && r->element[0]->type == BK_INTEGER)
    a->first = r->element[0]->integer;
  if (r->type == BK_ARRAY && r->elements && r->element[0]->type == BK_ARRAY) {
    const bk_reply *g = r->element[0];
    for (size_t i = 0; i + 1 < g->elements; i += 2)
      if (g->element[i]->type == BK_STRING && !strcmp(g->element[i]->str, "entries-read") &&
          g->element[i + 1]->type == BK_INTEGER)
        a->read = g->element[i + 1]->integer;
  }
  if (r->str) snprintf(a->text, sizeof a->text, "%.*s", (int)r->len, r->str);
}

static void fail(const char *what, const char *why) {
  fprintf(stderr, "cost: %s: %s\n", what, why);
  exit(1);
}

/* Sends argv and settles: the reply. */
static struct answer command(int argc, const char **argv) {
  size_t len[16];
  for (int i = 0; i < argc; i++) len[i] = strlen(argv[i]);
  struct answer a = {0};
  if (bk_command(broker_, conn, argc, argv, len, got, &a) != 0) fail(argv[0], "not connected");
  clock_virtual_settle(clock_);
  if (!a.done) fail(argv[0], "no reply");
  if (a.type == BK_ERROR) fail(argv[0], a.text);
  return a;
}

static long long entries_read(void) {
  return command(3, (const char *[]){"XINFO", "GROUPS", "bench"}).read;
}

/* XADDs n payments, queued together, one settle. */
static void publish(long n) {
  static struct answer sink;
  for (long i = 1; i <= n; i++) {
    char body[96], key[16];
    int keylen;
    int blen = payment_format(i, body, sizeof body, key, sizeof key, &keylen);
    const char *argv[] = {"XADD", "bench", "*", "data", body, "partition-key", key};
    size_t len[] = {4, 5, 1, 4, (size_t)blen, 13, (size_t)keylen};
    if (bk_command(broker_, conn, 7, argv, len, got, &sink) != 0) fail("XADD", "not connected");
  }
  clock_virtual_settle(clock_);
  if (sink.type == BK_ERROR) fail("XADD", sink.text);
}

/* ---- the measured part ---- */

static void stopped(void *data) { *(bool *)data = true; }

static host *load(const char *dir) {
  char *problems = NULL;
  host *h = host_new(dir, broker_, clock_, NULL, 0, NULL, &problems);
  if (h == NULL) fail(dir, problems ? problems : "cannot load");
  return h;
}

/* Everything callgrind counts (--toggle-collect=cost_measured). */
__attribute__((noinline)) host *cost_measured(const char *dir, host *h, bool *stop_flag) {
  if (h == NULL) h = load(dir);
  host_start(h, stopped, stop_flag);
  clock_virtual_settle(clock_);
  return h;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: cost ack|schema|reply|write|get|lanes|cold N\n");
    return 2;
  }
  const char *scenario = argv[1];
  long n = atol(argv[2]);
  const char *dir = !strcmp(scenario, "reply")    ? BENCH_DIR "/handlers/reply"
                    : !strcmp(scenario, "write")  ? BENCH_DIR "/handlers/write"
                    : !strcmp(scenario, "get")    ? BENCH_DIR "/handlers/get"
                    : !strcmp(scenario, "lanes")  ? BENCH_DIR "/handlers/lanes"
                    : !strcmp(scenario, "schema") ? BENCH_DIR "/handlers/schema"
                                                  : BENCH_DIR "/handlers";
  bool cold = !strcmp(scenario, "cold");
  if (!cold && strcmp(scenario, "ack") && strcmp(scenario, "reply") && strcmp(scenario, "write") &&
      strcmp(scenario, "get") && strcmp(scenario, "lanes") && strcmp(scenario, "schema")) {
    fprintf(stderr, "cost: unknown scenario %s\n", scenario);
    return 2;
  }
  if (n < 0) return 2;
  /* The handler files read these (bench/throughput sets them per run). */
  setenv("BENCH_STREAM", "bench", 1);
  setenv("BENCH_GROUP", "bench", 1);
  setenv("BENCH_BATCH", "100", 1);
  log_set_level(LOG_WARN);

  clock_ = clock_virtual_new(WALL_START_MS);
  broker_ = clock_ ? broker_memory_new(clock_, "7.0.15") : NULL;
  if (broker_ == NULL) fail("broker", "out of memory");
  conn = bk_conn_open(broker_, "bench", NULL, NULL);
  clock_virtual_settle(clock_);
  command(6, (const char *[]){"XGROUP", "CREATE", "bench", "bench", "0", "MKSTREAM"});
  if (n) publish(n);

  bool is_stopped = false;
  host *h = cold ? NULL : load(dir);
  double t0 = now_ns();
  h = cost_measured(dir, h, &is_stopped);
  double ns = now_ns() - t0;

  /* Every entry handled and acked; for reply, every reply written. */
  struct answer pending = command(3, (const char *[]){"XPENDING", "bench", "bench"});
  long long read = entries_read();
  if (pending.first != 0 || (n ? read != n : read > 0)) {
    fprintf(stderr, "cost: %s: entries-read %lld, pending %lld; want %ld and 0\n", scenario, read,
            pending.first, n);
    return 1;
  }
  if (!strcmp(scenario, "reply")) {
    struct answer replies = command(2, (const char *[]){"XLEN", "bench.out"});
    if (replies.integer != n) {
      fprintf(stderr, "cost: %lld replies on bench.out, want %ld\n", replies.integer, n);
      return 1;
    }
  }
  if (!strcmp(scenario, "write")) { /* one HINCRBY per entry, each written once */
    long long sum = 0, want = 0;
    for (long i = 1; i <= n; i++) want += (i * 7919) % 2000000 + 1; /* payment_format's cents */
    for (int i = 0; i < PAYMENT_ACCOUNTS; i++) {
      char account[32];
      snprintf(account, sizeof account, "acct-%03d", i);
      struct answer b = command(3, (const char *[]){"HGET", "balances", account});
      sum += b.type == BK_STRING ? atoll(b.text) : 0;
    }
    if (sum != want) {
      fprintf(stderr, "cost: balances sum to %lld, want %lld\n", sum, want);
      return 1;
    }
  }
  host_stop(h);
  clock_virtual_settle(clock_);
  if (!is_stopped) fail("stop", "the host did not stop");
  host_free(h);
  bk_conn_close(broker_, conn);
  clock_virtual_settle(clock_);
  broker_free(broker_);
  clock_->ops->free(clock_);
  printf("scenario=%s n=%ld ns=%.0f luajit=%s\n", scenario, n, ns, COST_LUAJIT);
  return 0;
}
