/* broker_fixture: what the tests of broker_redis.c on a real redis-server
 * share (test_broker_redis.c, test_broker_tls.c): a loop, the server, log
 * capture, waits bounded by a deadline, callbacks that record. Every test
 * starts with setup and ends with teardown, which closes every handle,
 * closes the loop, stops the server and checks for leaks. */
#ifndef LUASTREAM_TEST_BROKER_FIXTURE_H
#define LUASTREAM_TEST_BROKER_FIXTURE_H

#include <uv.h>

#include "broker.h"
#include "redis_server.h"
#include "task.h"

extern uv_loop_t loop;
extern struct redis_server srv;
extern const char *const no_args[]; /* a server without extra arguments */

/* Log lines (captured from setup on) holding both a and b (b may be NULL). */
int log_count(const char *a, const char *b);
/* Runs the loop until *counter reaches want or ms pass; returns 0 or -1. */
int run_until(const int *counter, int want, int ms);
void run_for(int ms);

#define WAIT(counter, want, ms)                                                                 \
  do {                                                                                          \
    if (run_until(&(counter), (want), (ms)) != 0)                                               \
      TEST_FAIL_("timed out after %d ms waiting for %s to reach %d (it is %d)", (ms), #counter, \
                 (want), (counter));                                                            \
  } while (0)

/* server_args: NULL for no server, else its extra arguments (no_args). */
void setup(const char *const *server_args);
void teardown(void);
broker *make_broker(const char *url);

struct state {
  int ups, downs;
  int close_on_up, close_on_down; /* close the conn from inside the callback */
  broker *b;
  struct faults *faults; /* on_fault's tally */
};

void on_state(void *data, bk_conn *c, int up);

/* What one command's callback saw. */
struct call {
  int calls;
  int type; /* 0 when reply was NULL */
  long long integer;
  char str[256];
  char err[256];
  size_t elements;
};

void on_call(void *data, const bk_reply *r, const char *err);

struct faults {
  int calls;
  enum bk_fault last;
  char why[512];
};

/* A bk_fault_cb whose data is a struct state with faults set. */
void on_fault(void *data, bk_conn *c, enum bk_fault fault, const char *why);

/* Sends a command given as strings ending with NULL. */
int cmdv(broker *b, bk_conn *c, bk_reply_cb *cb, void *data, ...);
/* Opens a connection and waits until it is up. */
bk_conn *open_up(broker *b, const char *name, struct state *st);
/* Opens a connection whose state changes go to st (st->faults set for
 * on_fault) and faults to fault; returns at once. */
bk_conn *open_watched(broker *b, const char *name, struct state *st, bk_fault_cb *fault);
void close_and_free(broker *b, bk_conn *c);

/* INCR n's callback, data the command's index (0, 1, ...): counts the
 * replies in in_order_next, and in in_order_bad those that are not the
 * next index's (n = index + 1, in send order). */
extern int in_order_next, in_order_bad;
void on_incr(void *data, const bk_reply *r, const char *err);

#endif
