/* loadgen: publishes the benchmark's payments and times how long a consumer
 * takes to handle them.
 *
 *   loadgen run --port P --stream S --group G --count N [--blocked K] [--backlog]
 *               [--redis-pid PID] [--consumer-pid PID]... [--pipeline K] [--timeout SEC]
 *               [--body-bytes B]
 *   loadgen pace --port P --stream S --group G --count N --rate R --out PREFIX
 *   loadgen publish PORT STREAM N FIRST [B]   publishes payments FIRST.. FIRST+N-1, pipelined
 *   loadgen payload I [B]    prints payment I (data and partition-key)
 *
 * B (--body-bytes): every payment's JSON padded to B bytes (payment.h); 0,
 * the default, is the plain payment of about 60 bytes.
 *
 * run: waits until K clients (default 1) are blocked in a read (the consumers
 * attached to the fresh, empty stream), then publishes N payments (payment.h)
 * from a thread of its own, pipelined K at a time, while the main thread asks
 * XINFO GROUPS every 2 ms until the group has read all N and has nothing
 * pending. Prints one line of key=value pairs:
 *
 *   n elapsed_s rate publish_s redis_cpu consumer_cpu loadgen_cpu machine_busy
 *
 * elapsed_s runs from the first XADD to the poll that saw the group done;
 * rate = n / elapsed_s; the CPU figures are shares of one core over that time
 * (utime + stime of /proc/PID/stat; consumer_cpu sums every --consumer-pid);
 * machine_busy is the share of all cores busy (/proc/stat). With --backlog the
 * N entries are already in the stream (loadgen publish) and nothing is
 * published: the clock starts when the group's entries-read first moves (the
 * consumers have started) and rate counts the entries read from then on, so
 * start-up is left out and the consumers drain as fast as they and the server
 * can. Exit status 1 when
 * the group is not done within --timeout seconds (default 600) or a consumer
 * process has gone.
 *
 * pace: for bench/latency. Publishes payment i with the explicit id 0-i, in
 * bursts every millisecond at R entries per second, and from a second thread
 * asks, in a loop with 100 us pauses, for the group's last delivered id and
 * smallest pending id (XINFO GROUPS and XPENDING in one MULTI/EXEC): every id
 * below the smallest pending one, or up to the last delivered when nothing is
 * pending, has been acked by the time the reply arrives (an upper bound). Writes PREFIX.send and PREFIX.ack,
 * lines `i microseconds` on CLOCK_MONOTONIC (the handler of bench/latency
 * writes its own receipt times on the same clock), once the group has acked
 * all N. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "payment.h"

#define MAX_PIDS 16

static int port;
static const char *stream, *group;
static long count, pipeline_depth = 1000;
static long per_call = 1; /* payments per command: 1 = XADD, more = EVALSHA of xadd_script */
static double publish_s = -1;
static long publish_from = 1; /* the first payment's number */
static size_t body_bytes;     /* --body-bytes: 0 = the plain payment */

/* The capacity of one payment's body buffer. */
static size_t body_cap(void) {
  return body_bytes + 1 > PAYMENT_SMALL ? body_bytes + 1 : PAYMENT_SMALL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why) {
  fprintf(stderr, "loadgen: %s: %s\n", what, why);
  exit(1);
}

static redisContext *connect_redis(void) {
  struct timeval tv = {10, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == NULL || c->err) die("cannot connect", c ? c->errstr : "out of memory");
  return c;
}

/* CPU seconds (user + system) of a process; -1 when it is gone. */
static double proc_cpu(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  if (p == NULL) return -1;
  char state;
  unsigned long utime, stime;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt
   * cmajflt utime stime */
  if (sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &state, &utime, &stime) !=
      3)
    return -1;
  if (state == 'Z' || state == 'X') return -1;
  return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* Busy and total jiffies of all cores. */
static void machine_cpu(double *busy, double *total) {
  unsigned long long v[8] = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
    die("/proc/stat", "unreadable");
  fclose(f);
  double t = 0;
  for (int i = 0; i < 8; i++) t += (double)v[i];
  *total = t;
  *busy = t - (double)v[3] - (double)v[4]; /* idle, iowait */
}

static long long info_field(const char *info, const char *name) {
  const char *p = strstr(info, name);
  return p ? atoll(p + strlen(name)) : -1;
}

/* ---- publishing ---- */

/* K payments in one call: the server parses and answers one command instead
 * of K, so that it has more of its time for the consumers. */
static const char xadd_script[] =
    "for i = 1, #ARGV, 2 do "
    "redis.call('XADD', KEYS[1], '*', 'data', ARGV[i], 'partition-key', ARGV[i + 1]) "
    "end return #ARGV / 2";

static void *publish(void *arg) {
  (void)arg;
  redisContext *c = connect_redis();
  char sha[41] = "";
  if (per_call > 1) {
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", xadd_script);
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40)
      die("SCRIPT LOAD", r ? r->str : c->errstr);
    memcpy(sha, r->str, 40);
    freeReplyObject(r);
  }
  /* one call's arguments: XADD's 7, or EVALSHA sha 1 stream and a pair per payment */
  size_t cap = per_call > 1 ? 4 + 2 * (size_t)per_call : 7;
  const char **argv = calloc(cap, sizeof *argv);
  size_t *argvlen = calloc(cap, sizeof *argvlen);
  size_t bodycap = body_cap();
  char *body = calloc((size_t)per_call, bodycap);
  char(*key)[16] = calloc((size_t)per_call, sizeof *key);
  if (!argv || !argvlen || !body || !key) die("publish", "out of memory");
  double t0 = now_s();
  /* Large bodies: fewer in flight, so that a round is a few MB at most. */
  long depth = pipeline_depth;
  if (body_bytes > 0 && depth > (long)((8u << 20) / body_cap()))
    depth = (long)((8u << 20) / body_cap());
  if (depth < per_call) depth = per_call;
  long calls_per_round = (depth + per_call - 1) / per_call;
  for (long i = 0; i < count;) {
    long calls = 0;
    for (; calls < calls_per_round && i < count; calls++) {
      long k = per_call < count - i ? per_call : count - i;
      int argc = 0;
      if (per_call > 1) {
        argv[argc] = "EVALSHA", argvlen[argc++] = 7;
        argv[argc] = sha, argvlen[argc++] = 40;
        argv[argc] = "1", argvlen[argc++] = 1;
        argv[argc] = stream, argvlen[argc++] = strlen(stream);
      } else {
        argv[argc] = "XADD", argvlen[argc++] = 4;
        argv[argc] = stream, argvlen[argc++] = strlen(stream);
        argv[argc] = "*", argvlen[argc++] = 1;
      }
      for (long j = 0; j < k; j++, i++) {
        int keylen;
        char *b = body + (size_t)j * bodycap;
        int len = payment_format_sized(publish_from + i, body_bytes, b, bodycap, key[j],
                                       sizeof key[j], &keylen);
        if (per_call == 1) argv[argc] = "data", argvlen[argc++] = 4;
        argv[argc] = b, argvlen[argc++] = (size_t)len;
        if (per_call == 1) argv[argc] = "partition-key", argvlen[argc++] = 13;
        argv[argc] = key[j], argvlen[argc++] = (size_t)keylen;
      }
      redisAppendCommandArgv(c, argc, argv, argvlen);
    }
    for (long n = 0; n < calls; n++) {
      void *r;
      if (redisGetReply(c, &r) != REDIS_OK) die("XADD", c->errstr);
      redisReply *reply = r;
      if (reply->type != (per_call > 1 ? REDIS_REPLY_INTEGER : REDIS_REPLY_STRING))
        die(per_call > 1 ? "EVALSHA" : "XADD",
            reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
      freeReplyObject(reply);
    }
  }
  publish_s = now_s() - t0;
  free(argv);
  free(argvlen);
  free(body);
  free(key);
  redisFree(c);
  return NULL;
}

/* ---- watching the group ---- */

/* entries-read and pending of the group, from XINFO GROUPS; false when the
 * group is not there yet. */
static bool group_state(redisContext *c, long long *read, long long *pending) {
  redisReply *r = redisCommand(c, "XINFO GROUPS %s", stream);
  if (r == NULL) die("XINFO GROUPS", c->errstr);
  bool found = false;
  for (size_t g = 0; r->type == REDIS_REPLY_ARRAY && g < r->elements && !found; g++) {
    redisReply *m = r->element[g];
    const char *name = NULL;
    long long rd = -1, pe = -1;
    for (size_t i = 0; m->type == REDIS_REPLY_ARRAY && i + 1 < m->elements; i += 2) {
      const char *k = m->element[i]->str;
      redisReply *v = m->element[i + 1];
      if (!strcmp(k, "name"))
        name = v->str;
      else if (!strcmp(k, "entries-read") && v->type == REDIS_REPLY_INTEGER)
        rd = v->integer;
      else if (!strcmp(k, "pending") && v->type == REDIS_REPLY_INTEGER)
        pe = v->integer;
    }
    if (name && !strcmp(name, group)) {
      *read = rd;
      *pending = pe;
      found = true;
    }
  }
  freeReplyObject(r);
  return found;
}

static void wait_blocked(redisContext *c, long want, double timeout) {
  double deadline = now_s() + timeout;
  for (;;) {
    redisReply *r = redisCommand(c, "INFO clients");
    if (r == NULL || r->type != REDIS_REPLY_STRING) die("INFO clients", c->errstr);
    long long blocked = info_field(r->str, "blocked_clients:");
    freeReplyObject(r);
    if (blocked >= want) return;
    if (now_s() > deadline) die("waiting for the consumer", "no client blocked in a read");
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: loadgen run --port P --stream S --group G --count N [--blocked K] [--backlog]\n"
      "                   [--redis-pid PID] [--consumer-pid PID]... [--pipeline K] [--per-call K]\n"
      "                   [--timeout SEC] [--body-bytes B]\n"
      "       loadgen pace --port P --stream S --group G --count N --rate R --out PREFIX\n"
      "       loadgen publish PORT STREAM N FIRST [B]\n"
      "       loadgen payload I [B]\n");
  exit(2);
}

static int cmd_run(int argc, char **argv) {
  long redis_pid = 0, consumer_pid[MAX_PIDS], nconsumers = 0, blocked = 1;
  double timeout = 600;
  bool backlog = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--backlog")) {
      backlog = true;
      continue;
    }
    if (v == NULL) usage();
    if (!strcmp(a, "--port"))
      port = atoi(v);
    else if (!strcmp(a, "--stream"))
      stream = v;
    else if (!strcmp(a, "--group"))
      group = v;
    else if (!strcmp(a, "--count"))
      count = atol(v);
    else if (!strcmp(a, "--blocked"))
      blocked = atol(v);
    else if (!strcmp(a, "--redis-pid"))
      redis_pid = atol(v);
    else if (!strcmp(a, "--consumer-pid") && nconsumers < MAX_PIDS)
      consumer_pid[nconsumers++] = atol(v);
    else if (!strcmp(a, "--pipeline"))
      pipeline_depth = atol(v);
    else if (!strcmp(a, "--per-call"))
      per_call = atol(v);
    else if (!strcmp(a, "--timeout"))
      timeout = atof(v);
    else if (!strcmp(a, "--body-bytes"))
      body_bytes = (size_t)atol(v);
    else
      usage();
    i++;
  }
  if (port <= 0 || !stream || !group || count < 1 || pipeline_depth < 1 || per_call < 1) usage();
  redisContext *c = connect_redis();
  long long read = 0, pending = 0, read0 = 0;
  if (backlog) { /* wait for the first read instead of a blocked consumer */
    double deadline = now_s() + 30;
    while (!group_state(c, &read0, &pending) || read0 == 0) {
      if (now_s() > deadline) die("waiting for the consumer", "nothing read from the backlog");
      struct timespec nap = {0, 200000};
      nanosleep(&nap, NULL);
    }
  } else {
    wait_blocked(c, blocked, 30);
  }

  double redis0 = redis_pid ? proc_cpu(redis_pid) : 0, cons0 = 0, busy0, total0;
  for (long i = 0; i < nconsumers; i++) cons0 += proc_cpu(consumer_pid[i]);
  double self0 = proc_cpu((long)getpid());
  machine_cpu(&busy0, &total0);
  double t0 = now_s();
  pthread_t publisher;
  if (!backlog && pthread_create(&publisher, NULL, publish, NULL) != 0)
    die("pthread_create", strerror(errno));

  double t1;
  for (;;) {
    t1 = now_s();
    if (group_state(c, &read, &pending) && read >= count && pending == 0) break;
    if (t1 - t0 > timeout) {
      fprintf(stderr, "loadgen: not done after %.0f s: entries-read=%lld pending=%lld of %ld\n",
              timeout, read, pending, count);
      return 1;
    }
    for (long i = 0; i < nconsumers; i++) {
      if (proc_cpu(consumer_pid[i]) < 0) {
        fprintf(stderr, "loadgen: consumer %ld has gone: entries-read=%lld pending=%lld of %ld\n",
                consumer_pid[i], read, pending, count);
        return 1;
      }
    }
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
  double redis1 = redis_pid ? proc_cpu(redis_pid) : 0, cons1 = 0, busy1, total1;
  for (long i = 0; i < nconsumers; i++) cons1 += proc_cpu(consumer_pid[i]);
  double self1 = proc_cpu((long)getpid());
  machine_cpu(&busy1, &total1);
  if (!backlog) pthread_join(publisher, NULL);
  double elapsed = t1 - t0;
  long measured = count - (long)read0;
  printf(
      "n=%ld elapsed_s=%.3f rate=%.0f publish_s=%.3f redis_cpu=%.3f consumer_cpu=%.3f "
      "loadgen_cpu=%.3f machine_busy=%.3f\n",
      measured, elapsed, (double)measured / elapsed, publish_s,
      redis_pid ? (redis1 - redis0) / elapsed : -1, nconsumers ? (cons1 - cons0) / elapsed : -1,
      (self1 - self0) / elapsed, total1 > total0 ? (busy1 - busy0) / (total1 - total0) : -1);
  redisFree(c);
  return 0;
}

/* ---- pace ---- */

static double *sent_us, *acked_us;

static double mono_us(void) { return now_s() * 1e6; }

static void *watch_acks(void *arg) {
  (void)arg;
  redisContext *c = connect_redis();
  long done = 0; /* ids 1..done are known acked */
  while (done < count) {
    /* One transaction: the group's last delivered id and its smallest pending
     * one. Delivery is in id order, so every id below the smallest pending
     * one, or up to the last delivered when nothing is pending, is acked. */
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "XINFO GROUPS %s", stream);
    redisAppendCommand(c, "XPENDING %s %s", stream, group);
    redisAppendCommand(c, "EXEC");
    void *rr;
    for (int k = 0; k < 3; k++) {
      if (redisGetReply(c, &rr) != REDIS_OK) die("XPENDING", c->errstr);
      freeReplyObject(rr);
    }
    if (redisGetReply(c, &rr) != REDIS_OK) die("XPENDING", c->errstr);
    double t = mono_us();
    redisReply *r = rr;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) die("EXEC", "unexpected reply");
    long delivered = 0;
    redisReply *groups = r->element[0];
    for (size_t g = 0; groups->type == REDIS_REPLY_ARRAY && g < groups->elements; g++) {
      redisReply *m = groups->element[g];
      const char *name = NULL, *last = NULL;
      for (size_t i = 0; i + 1 < m->elements; i += 2) {
        if (!strcmp(m->element[i]->str, "name")) name = m->element[i + 1]->str;
        if (!strcmp(m->element[i]->str, "last-delivered-id")) last = m->element[i + 1]->str;
      }
      if (name && last && !strcmp(name, group) && strchr(last, '-'))
        delivered = atol(strchr(last, '-') + 1);
    }
    redisReply *p = r->element[1];
    long upto = delivered;
    if (p->type == REDIS_REPLY_ARRAY && p->elements >= 2 && p->element[0]->integer > 0 &&
        p->element[1]->type == REDIS_REPLY_STRING && strchr(p->element[1]->str, '-'))
      upto = atol(strchr(p->element[1]->str, '-') + 1) - 1;
    freeReplyObject(r);
    for (long i = done + 1; i <= upto && i <= count; i++) acked_us[i] = t;
    if (upto > done) done = upto;
    struct timespec nap = {0, 100000};
    nanosleep(&nap, NULL);
  }
  redisFree(c);
  return NULL;
}

static int cmd_pace(int argc, char **argv) {
  double rate = 0;
  const char *prefix = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) usage();
    if (!strcmp(a, "--port"))
      port = atoi(v);
    else if (!strcmp(a, "--stream"))
      stream = v;
    else if (!strcmp(a, "--group"))
      group = v;
    else if (!strcmp(a, "--count"))
      count = atol(v);
    else if (!strcmp(a, "--rate"))
      rate = atof(v);
    else if (!strcmp(a, "--out"))
      prefix = v;
    else
      usage();
    i++;
  }
  if (port <= 0 || !stream || !group || count < 1 || rate <= 0 || !prefix) usage();
  sent_us = calloc((size_t)count + 1, sizeof *sent_us);
  acked_us = calloc((size_t)count + 1, sizeof *acked_us);
  if (!sent_us || !acked_us) die("pace", "out of memory");
  redisContext *c = connect_redis();
  wait_blocked(c, 1, 30);
  pthread_t watcher;
  if (pthread_create(&watcher, NULL, watch_acks, NULL) != 0) die("pthread_create", strerror(errno));
  struct timespec tick;
  clock_gettime(CLOCK_MONOTONIC, &tick);
  double start = now_s();
  long next = 1;
  char body[96], key[16], id[32];
  while (next <= count) {
    /* due by now: rate * elapsed, sent as one pipelined burst */
    long due = (long)((now_s() - start) * rate) + 1;
    if (due > count) due = count;
    long first = next;
    for (; next <= due; next++) {
      int keylen, len = payment_format(next, body, sizeof body, key, sizeof key, &keylen);
      int idlen = snprintf(id, sizeof id, "0-%ld", next);
      const char *av[] = {"XADD", stream, id, "data", body, "partition-key", key};
      size_t al[] = {4, strlen(stream), (size_t)idlen, 4, (size_t)len, 13, (size_t)keylen};
      redisAppendCommandArgv(c, 7, av, al);
    }
    if (next > first) {
      double t = mono_us();
      for (long i = first; i < next; i++) sent_us[i] = t;
      for (long i = first; i < next; i++) {
        void *r;
        if (redisGetReply(c, &r) != REDIS_OK) die("XADD", c->errstr);
        if (((redisReply *)r)->type != REDIS_REPLY_STRING) die("XADD", ((redisReply *)r)->str);
        freeReplyObject(r);
      }
    }
    tick.tv_nsec += 1000000;
    if (tick.tv_nsec >= 1000000000) tick.tv_sec++, tick.tv_nsec -= 1000000000;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
  }
  double publish_time = now_s() - start;
  pthread_join(watcher, NULL);
  char path[512];
  snprintf(path, sizeof path, "%s.send", prefix);
  FILE *fs = fopen(path, "w");
  snprintf(path, sizeof path, "%s.ack", prefix);
  FILE *fa = fopen(path, "w");
  if (!fs || !fa) die(path, strerror(errno));
  for (long i = 1; i <= count; i++) {
    fprintf(fs, "%ld %.0f\n", i, sent_us[i]);
    fprintf(fa, "%ld %.0f\n", i, acked_us[i]);
  }
  fclose(fs);
  fclose(fa);
  printf("n=%ld rate=%.0f publish_s=%.3f achieved_rate=%.0f\n", count, rate, publish_time,
         (double)count / publish_time);
  redisFree(c);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && !strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (argc >= 2 && !strcmp(argv[1], "pace")) return cmd_pace(argc - 2, argv + 2);
  if ((argc == 6 || argc == 7) && !strcmp(argv[1], "publish")) {
    port = atoi(argv[2]);
    stream = argv[3];
    count = atol(argv[4]);
    long first = atol(argv[5]);
    if (argc == 7) body_bytes = (size_t)atol(argv[6]);
    if (port <= 0 || count < 1) usage();
    publish_from = first;
    publish(NULL);
    return 0;
  }
  if ((argc == 3 || argc == 4) && !strcmp(argv[1], "payload")) {
    if (argc == 4) body_bytes = (size_t)atol(argv[3]);
    char *body = malloc(body_cap()), key[16];
    int keylen;
    if (body == NULL) die("payload", "out of memory");
    payment_format_sized(atol(argv[2]), body_bytes, body, body_cap(), key, sizeof key, &keylen);
    printf("data %s\npartition-key %s\n", body, key);
    free(body);
    return 0;
  }
  usage();
}
