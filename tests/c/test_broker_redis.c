/* Integration tests for broker_redis.c against a private redis-server
 * (redis_server.c): pipelining, reply shapes, AUTH and SELECT, unix sockets,
 * state callbacks, a server that dies and comes back, closing with commands
 * pending (also from inside callbacks), and a connect that gets refused or no
 * answer. Every test ends with all handles closed, uv_loop_close succeeding
 * and a leak check.
 *
 * Set TEST_LOG=1 to see the host's log lines on stderr. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "broker.h"
#include "broker_fixture.h"
#include "log.h"
#include "scripts.h"
#include "url.h"

/* ---- tests ---- */

/* Commands are refused before the connection is up; once up, 200 commands
 * sent without waiting complete in order, each exactly once. */
TEST_IMPL(broker_redis_pipeline_in_order) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  ASSERT_STR_EQ(b->name, srv.url);
  st.b = b;
  bk_conn *c = bk_conn_open(b, "main", on_state, &st);
  ASSERT_NOT_NULL(c);
  struct call early = {0};
  ASSERT_INT_EQ(cmdv(b, c, on_call, &early, "PING", NULL), -1); /* not up yet */
  ASSERT_INT_EQ(bk_connected(b, c), 0);
  ASSERT_INT_EQ(st.ups, 0); /* open never calls back synchronously */
  WAIT(st.ups, 1, 5000);
  ASSERT_INT_EQ(log_count("msg=\"redis connected\"", "conn=main attempts=1"), 1);
  char want[200];
  snprintf(want, sizeof want, "redis=%s", srv.url);
  ASSERT_INT_EQ(log_count("msg=\"redis connected\"", want), 1);

  const char *argv[] = {"INCR", "n"};
  const size_t len[] = {4, 1};
  for (int i = 0; i < 200; i++)
    ASSERT_OK(bk_command(b, c, 2, argv, len, on_incr, (void *)(intptr_t)i));
  WAIT(in_order_next, 200, 5000);
  ASSERT_INT_EQ(in_order_bad, 0);
  run_for(50);
  ASSERT_INT_EQ(in_order_next, 200);
  ASSERT_INT_EQ(early.calls, 0);

  close_and_free(b, c);
  ASSERT_INT_EQ(st.downs, 0); /* no state callback after close */
  teardown();
}

/* MULTI/EXEC, error, nil, status and INFO replies reach callbacks as the
 * server sent them. */
static int shapes_done;
static void on_exec(void *data, const bk_reply *r, const char *err) {
  (void)data;
  ASSERT_NULL(err);
  ASSERT_INT_EQ(r->type, BK_ARRAY);
  ASSERT_INT_EQ(r->elements, 3);
  ASSERT_INT_EQ(r->element[0]->type, BK_STATUS);
  ASSERT_MEM_EQ(r->element[0]->str, r->element[0]->len, "OK");
  ASSERT_INT_EQ(r->element[1]->type, BK_INTEGER);
  ASSERT_INT_EQ(r->element[1]->integer, 1);
  ASSERT_INT_EQ(r->element[2]->type, BK_INTEGER);
  ASSERT_INT_EQ(r->element[2]->integer, 2);
  shapes_done++;
}
static void on_info(void *data, const bk_reply *r, const char *err) {
  char v[32];
  (void)data;
  ASSERT_NULL(err);
  ASSERT_INT_EQ(r->type, BK_STRING);
  long version = bk_info_version(r, v, sizeof v);
  if (version < 50000) TEST_FAIL_("INFO version %ld (\"%s\")", version, v);
  ASSERT_INT_EQ(bk_version_parse(v, strlen(v)), version);
  shapes_done++;
}
static void on_busygroup(void *data, const bk_reply *r, const char *err) {
  (void)data;
  ASSERT_NULL(err);
  ASSERT_INT_EQ(bk_reply_is_error(r, "BUSYGROUP"), 1);
  shapes_done++;
}

TEST_IMPL(broker_redis_reply_shapes) {
  struct state st = {0};
  struct call multi = {0}, set = {0}, queued = {0}, bad = {0}, nil = {0}, group = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "shapes", &st);

  ASSERT_OK(cmdv(b, c, on_call, &multi, "MULTI", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &set, "SET", "k", "v", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &queued, "INCR", "n", NULL));
  ASSERT_OK(cmdv(b, c, NULL, NULL, "INCR", "n", NULL)); /* no callback: fire and forget */
  ASSERT_OK(cmdv(b, c, on_exec, NULL, "EXEC", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &bad, "INCR", "k", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &nil, "GET", "missing", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &group, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", NULL));
  ASSERT_OK(cmdv(b, c, on_busygroup, NULL, "XGROUP", "CREATE", "s", "g", "$", NULL));
  ASSERT_OK(cmdv(b, c, on_info, NULL, "INFO", "server", NULL));
  WAIT(shapes_done, 3, 5000);

  ASSERT_INT_EQ(multi.type, BK_STATUS);
  ASSERT_STR_EQ(multi.str, "OK");
  ASSERT_INT_EQ(set.type, BK_STATUS);
  ASSERT_STR_EQ(set.str, "QUEUED");
  ASSERT_INT_EQ(queued.type, BK_STATUS);
  ASSERT_INT_EQ(bad.calls, 1);
  ASSERT_INT_EQ(bad.type, BK_ERROR);
  ASSERT_STR_EQ(bad.str, "ERR value is not an integer or out of range");
  ASSERT_STR_EQ(bad.err, ""); /* an error reply is a reply, not a failure */
  ASSERT_INT_EQ(nil.type, BK_NIL);
  ASSERT_INT_EQ(group.type, BK_STATUS);

  close_and_free(b, c);
  teardown();
}

/* Password only and user + password (percent-encoded in the URL); a missing
 * or wrong password is an authentication failure (BK_FAULT_DENIED), logged
 * at every attempt without the password, and retried. */
TEST_IMPL(broker_redis_password_auth) {
  static const char *const args[] = {"--requirepass", "s3c:r@t", NULL};
  struct state st1 = {0}, st2 = {0}, st3 = {0}, st4 = {0};
  struct call get = {0};
  char url[256];
  setup(args);

  snprintf(url, sizeof url, "redis://:s3c%%3Ar%%40t@127.0.0.1:%d", srv.port);
  broker *b1 = make_broker(url);
  ASSERT_CONTAINS(b1->name, "redis://:***@127.0.0.1:");
  bk_conn *c1 = open_up(b1, "pw", &st1);
  ASSERT_OK(cmdv(b1, c1, on_call, &get, "SET", "k", "v", NULL));
  WAIT(get.calls, 1, 5000);
  ASSERT_STR_EQ(get.str, "OK");

  snprintf(url, sizeof url, "redis://default:s3c%%3Ar%%40t@127.0.0.1:%d", srv.port);
  broker *b2 = make_broker(url);
  bk_conn *c2 = open_up(b2, "userpw", &st2);

  broker *b3 = make_broker(srv.url);
  st3.b = b3;
  bk_conn *c3 = bk_conn_open(b3, "nopw", on_state, &st3);
  snprintf(url, sizeof url, "redis://default:wrongpw@127.0.0.1:%d/2", srv.port);
  broker *b4 = make_broker(url);
  st4.b = b4;
  bk_conn *c4 = bk_conn_open(b4, "badpw", on_state, &st4);

  run_for(1500); /* several attempts each (100, 200, 400, 800 ms backoff) */
  ASSERT_INT_EQ(st3.ups, 0);
  ASSERT_INT_EQ(st4.ups, 0);
  ASSERT_INT_EQ(bk_connected(b4, c4), 0);
  ASSERT(log_count("level=error msg=\"redis authentication failed\"", "conn=nopw") >= 3);
  ASSERT(log_count("msg=\"redis authentication failed\"", "conn=badpw") >= 3);
  ASSERT(log_count("authentication failed\" redis=redis://127.0.0.1:",
                   "conn=nopw attempt=2 error=\"PING failed: NOAUTH") == 1);
  ASSERT(log_count("authentication failed\" redis=redis://default:***@127.0.0.1:",
                   "conn=badpw attempt=2 error=\"AUTH failed: WRONGPASS") == 1);
  ASSERT_INT_EQ(log_count("msg=\"redis connect attempt failed\"", "conn=badpw"), 0);
  char why[256];
  ASSERT_INT_EQ(bk_conn_fault(b4, c4, why, sizeof why), BK_FAULT_DENIED);
  ASSERT_STR_EQ(why,
                "authentication failed: WRONGPASS invalid username-password pair or user is "
                "disabled.");
  ASSERT_INT_EQ(bk_conn_fault(b3, c3, why, sizeof why), BK_FAULT_DENIED);
  ASSERT_STR_EQ(why, "authentication failed: NOAUTH Authentication required.");
  ASSERT_INT_EQ(bk_conn_fault(b1, c1, why, sizeof why), BK_FAULT_NONE);
  ASSERT_STR_EQ(why, "");
  ASSERT_INT_EQ(log_count("msg=\"cannot connect to redis, retrying\"", NULL), 0);
  ASSERT_INT_EQ(log_count("wrongpw", NULL), 0);
  ASSERT_INT_EQ(log_count("s3c", NULL), 0);

  close_and_free(b1, c1);
  close_and_free(b2, c2);
  close_and_free(b3, c3);
  close_and_free(b4, c4);
  teardown();
}

/* /db selects before the connection is up; unix sockets with ?db=N. */
TEST_IMPL(broker_redis_select_and_unix) {
  struct state st1 = {0}, st2 = {0}, st3 = {0};
  struct call set = {0}, get3 = {0}, get0 = {0};
  char url[256];
  setup(no_args);

  snprintf(url, sizeof url, "%s/3", srv.url);
  broker *b1 = make_broker(url);
  bk_conn *c1 = open_up(b1, "db3", &st1);
  ASSERT_OK(cmdv(b1, c1, on_call, &set, "SET", "where", "db3", NULL));
  WAIT(set.calls, 1, 5000);

  snprintf(url, sizeof url, "unix://%s?db=3", srv.sock);
  broker *b2 = make_broker(url);
  bk_conn *c2 = open_up(b2, "unix3", &st2);
  ASSERT_OK(cmdv(b2, c2, on_call, &get3, "GET", "where", NULL));

  snprintf(url, sizeof url, "unix://%s", srv.sock);
  broker *b3 = make_broker(url);
  bk_conn *c3 = open_up(b3, "unix0", &st3);
  ASSERT_OK(cmdv(b3, c3, on_call, &get0, "GET", "where", NULL));

  WAIT(get3.calls, 1, 5000);
  WAIT(get0.calls, 1, 5000);
  ASSERT_INT_EQ(get3.type, BK_STRING);
  ASSERT_STR_EQ(get3.str, "db3");
  ASSERT_INT_EQ(get0.type, BK_NIL);

  close_and_free(b1, c1);
  close_and_free(b2, c2);
  close_and_free(b3, c3);
  teardown();
}

/* The server dies: pending commands fail with "connection lost", the state
 * goes down, commands are refused, the failure is logged once however many
 * attempts fail; the server comes back on the same port: the connection
 * comes back by itself, logs how many attempts it took, and works. */
TEST_IMPL(broker_redis_server_restart) {
  struct state st = {0};
  struct call blpop = {0}, ping = {0}, after = {0}, back = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "flaky", &st);

  ASSERT_OK(cmdv(b, c, on_call, &blpop, "BLPOP", "nothing", "0", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &ping, "PING", NULL));
  run_for(100); /* sent; the server is now blocked on our BLPOP */
  ASSERT_INT_EQ(blpop.calls, 0);

  redis_server_kill(&srv);
  WAIT(ping.calls, 1, 5000);
  ASSERT_INT_EQ(blpop.calls, 1);
  ASSERT_INT_EQ(blpop.type, 0);
  ASSERT(strncmp(blpop.err, "connection lost: ", 17) == 0);
  ASSERT_STR_EQ(ping.err, blpop.err);
  ASSERT_INT_EQ(st.downs, 1);
  ASSERT_INT_EQ(bk_connected(b, c), 0);
  ASSERT_INT_EQ(cmdv(b, c, on_call, &after, "PING", NULL), -1);

  run_for(1000); /* refused attempts at ~100, 200, 400 ms ... */
  ASSERT_INT_EQ(log_count("level=error msg=\"redis connection lost, reconnecting\"",
                          "conn=flaky error=\"Server closed the connection\""),
                1);
  ASSERT_INT_EQ(log_count("level=error", NULL), 1);
  ASSERT(log_count("msg=\"redis connect attempt failed\"", "conn=flaky") >= 2);
  ASSERT_INT_EQ(st.downs, 1);
  ASSERT_INT_EQ(st.ups, 1);

  ASSERT_OK(redis_server_start(&srv, no_args));
  WAIT(st.ups, 2, 8000);
  ASSERT_INT_EQ(log_count("msg=\"redis connected\"", "conn=flaky"), 2);
  /* the reconnect took several attempts */
  ASSERT_INT_EQ(log_count("msg=\"redis connected\"", "attempts=1 "), 0);
  ASSERT_INT_EQ(log_count("msg=\"redis connected\"", "down_ms="), 1);
  ASSERT_OK(cmdv(b, c, on_call, &back, "PING", NULL));
  WAIT(back.calls, 1, 5000);
  ASSERT_STR_EQ(back.str, "PONG");
  ASSERT_INT_EQ(after.calls, 0);
  ASSERT_INT_EQ(blpop.calls, 1);

  close_and_free(b, c);
  teardown();
}

/* Closing with a BLOCK 0 XREADGROUP pending: its callback fires once, with
 * "connection closed", and nothing fires afterwards. */
TEST_IMPL(broker_redis_close_pending_xreadgroup) {
  struct state st = {0};
  struct call group = {0}, read = {0}, ping = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "reader", &st);
  ASSERT_OK(cmdv(b, c, on_call, &group, "XGROUP", "CREATE", "orders", "g", "$", "MKSTREAM", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &read, "XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS",
                 "orders", ">", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &ping, "PING", NULL)); /* queued behind the read */
  WAIT(group.calls, 1, 5000);
  run_for(100);
  ASSERT_INT_EQ(read.calls, 0);

  bk_conn_close(b, c);
  ASSERT_INT_EQ(read.calls, 1);
  ASSERT_INT_EQ(read.type, 0);
  ASSERT_STR_EQ(read.err, "connection closed");
  ASSERT_INT_EQ(ping.calls, 1);
  ASSERT_STR_EQ(ping.err, "connection closed");
  broker_free(b);
  run_for(100);
  ASSERT_INT_EQ(read.calls, 1);
  ASSERT_INT_EQ(ping.calls, 1);
  ASSERT_INT_EQ(st.downs, 0);
  teardown();
}

/* bk_conn_close from inside a reply callback of the same connection (hiredis
 * defers the free): later pending callbacks fire once with "connection
 * closed", and commands they try to send are refused. */
struct closer {
  broker *b;
  bk_conn *c;
  int calls;
  int refused;
};
static void close_in_reply(void *data, const bk_reply *r, const char *err) {
  struct closer *k = data;
  k->calls++;
  ASSERT_NULL(err);
  ASSERT_NOT_NULL(r);
  ASSERT_INT_EQ(bk_connected(k->b, k->c), 1);
  bk_conn_close(k->b, k->c);
}
static void send_in_closed(void *data, const bk_reply *r, const char *err) {
  struct closer *k = data;
  k->calls++;
  ASSERT_NULL(r);
  ASSERT_STR_EQ(err, "connection closed");
  struct call x = {0};
  k->refused += cmdv(k->b, k->c, on_call, &x, "PING", NULL) == -1;
}

TEST_IMPL(broker_redis_close_inside_callback) {
  struct state st = {0};
  struct closer first = {0}, second = {0}, third = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "selfclose", &st);
  first.b = second.b = third.b = b;
  first.c = second.c = third.c = c;
  ASSERT_OK(cmdv(b, c, close_in_reply, &first, "PING", NULL));
  ASSERT_OK(cmdv(b, c, send_in_closed, &second, "INCR", "x", NULL));
  ASSERT_OK(cmdv(b, c, send_in_closed, &third, "BLPOP", "q", "0", NULL));
  WAIT(third.calls, 1, 5000);
  ASSERT_INT_EQ(first.calls, 1);
  ASSERT_INT_EQ(second.calls, 1);
  ASSERT_INT_EQ(second.refused + third.refused, 2);
  broker_free(b);
  run_for(100);
  ASSERT_INT_EQ(first.calls + second.calls + third.calls, 3);
  ASSERT_INT_EQ(st.downs, 0);
  teardown();
}

/* Closing from inside the state callback, going up and going down. */
TEST_IMPL(broker_redis_close_inside_state_callback) {
  struct state up = {0}, down = {0};
  setup(no_args);
  broker *b1 = make_broker(srv.url);
  up.b = b1;
  up.close_on_up = 1;
  bk_conn_open(b1, "close-on-up", on_state, &up);
  WAIT(up.ups, 1, 5000);
  broker_free(b1); /* the conn was closed in the callback */

  broker *b2 = make_broker(srv.url);
  down.close_on_down = 1;
  open_up(b2, "close-on-down", &down);
  redis_server_kill(&srv);
  WAIT(down.downs, 1, 5000);
  broker_free(b2);
  run_for(300); /* no reconnect attempt follows */
  ASSERT_INT_EQ(log_count("msg=\"redis connecting\"", "conn=close-on-down"), 1);
  ASSERT_INT_EQ(up.downs, 0);
  ASSERT_INT_EQ(down.ups, 1);
  teardown();
}

/* A port with nothing listening: the refusal is noticed (not a silent hang),
 * logged once, retried, and the loop keeps running meanwhile. */
static int ticks;
static void on_tick(uv_timer_t *t) {
  (void)t;
  ticks++;
}

static int unused_port(void) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof sa));
  ASSERT_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
  close(fd);
  return ntohs(sa.sin_port);
}

/* A refused connect does not block the loop; every failed attempt reaches
 * the fault callback as BK_FAULT_DOWN (it may work later by itself). */
TEST_IMPL(broker_redis_refused_does_not_block) {
  struct state st = {0};
  uv_timer_t tick;
  char url[128];
  setup(NULL);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", unused_port());
  broker *b = make_broker(url);
  uint64_t t0 = uv_hrtime();
  struct faults f = {0};
  st.faults = &f;
  bk_conn *c = open_watched(b, "nobody", &st, on_fault);
  ASSERT((uv_hrtime() - t0) / 1000000 < 100);
  uv_timer_init(&loop, &tick);
  uv_timer_start(&tick, on_tick, 10, 10);
  run_for(800);
  ASSERT(ticks >= 40);
  ASSERT_INT_EQ(st.ups, 0);
  ASSERT_INT_EQ(
      log_count("msg=\"cannot connect to redis, retrying\"", "error=\"Connection refused\""), 1);
  ASSERT(log_count("msg=\"redis connecting\"", "conn=nobody") >= 3);
  ASSERT(f.calls >= 3);
  ASSERT_INT_EQ(f.last, BK_FAULT_DOWN);
  ASSERT_STR_EQ(f.why, "Connection refused");
  char why[128];
  ASSERT_INT_EQ(bk_conn_fault(b, c, why, sizeof why), BK_FAULT_DOWN);
  ASSERT_STR_EQ(why, "Connection refused");
  uv_close((uv_handle_t *)&tick, NULL);
  close_and_free(b, c);
  teardown();
}

/* A unix socket path that does not exist fails inside connect itself. */
TEST_IMPL(broker_redis_unix_missing) {
  struct state st = {0};
  setup(NULL);
  broker *b = make_broker("unix:///nonexistent/luastream-test.sock");
  st.b = b;
  bk_conn *c = bk_conn_open(b, "nosock", on_state, &st);
  run_for(500);
  ASSERT_INT_EQ(st.ups, 0);
  ASSERT_INT_EQ(log_count("msg=\"cannot connect to redis, retrying\"", "conn=nosock"), 1);
  ASSERT_INT_EQ(log_count("level=error", "error=\"No such file or directory\""), 1);
  close_and_free(b, c);
  teardown();
}

/* A host name is resolved off the loop; closing during the lookup waits for
 * it before freeing. */
TEST_IMPL(broker_redis_hostname) {
  struct state st = {0}, st2 = {0};
  struct call ping = {0};
  char url[128];
  setup(no_args);
  snprintf(url, sizeof url, "redis://localhost:%d", srv.port);
  broker *b = make_broker(url);
  bk_conn *c = open_up(b, "byname", &st);
  ASSERT_OK(cmdv(b, c, on_call, &ping, "PING", NULL));
  WAIT(ping.calls, 1, 5000);
  ASSERT_STR_EQ(ping.str, "PONG");

  st2.b = b;
  bk_conn *c2 = bk_conn_open(b, "closed-resolving", on_state, &st2);
  bk_conn_close(b, c2);
  close_and_free(b, c);
  run_for(200);
  ASSERT_INT_EQ(st2.ups + st2.downs, 0);

  broker *bad = make_broker("redis://no-such-host.invalid:6379");
  struct state st3 = {0};
  st3.b = bad;
  bk_conn *c3 = bk_conn_open(bad, "badname", on_state, &st3);
  for (int i = 0;
       i < 100 && log_count("msg=\"cannot connect to redis, retrying\"", "conn=badname") == 0; i++)
    run_for(50);
  ASSERT_INT_EQ(
      log_count("level=error", "conn=badname error=\"cannot resolve no-such-host.invalid"), 1);
  close_and_free(bad, c3);
  teardown();
}

/* A server that accepts the TCP connection but never answers (here: a
 * listening socket nobody accepts from) is given up after the connect timeout
 * and retried. */
TEST_IMPL(broker_redis_handshake_timeout) {
  struct state st = {0};
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  char url[128];
  setup(NULL);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof sa));
  ASSERT_OK(listen(fd, 16));
  ASSERT_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
  broker *b = make_broker(url);
  st.b = b;
  bk_conn *c = bk_conn_open(b, "silent", on_state, &st);
  for (int i = 0;
       i < 140 && log_count("msg=\"cannot connect to redis, retrying\"", "conn=silent") == 0; i++)
    run_for(50);
  ASSERT_INT_EQ(log_count("error=\"no answer within 5000 ms\"", "conn=silent"), 1);
  ASSERT_INT_EQ(st.ups + st.downs, 0);
  close_and_free(b, c);
  close(fd);
  teardown();
}

/* Closing while the connect is still in flight (TCP and unix): the attempt is
 * dropped without any callback. */
TEST_IMPL(broker_redis_close_while_connecting) {
  struct state st1 = {0}, st2 = {0};
  char url[256];
  setup(no_args);
  broker *b1 = make_broker(srv.url);
  st1.b = b1;
  bk_conn *c1 = bk_conn_open(b1, "tcp", on_state, &st1);
  snprintf(url, sizeof url, "unix://%s", srv.sock);
  broker *b2 = make_broker(url);
  st2.b = b2;
  bk_conn *c2 = bk_conn_open(b2, "unix", on_state, &st2);
  close_and_free(b1, c1);
  close_and_free(b2, c2);
  run_for(200);
  ASSERT_INT_EQ(st1.ups + st1.downs + st2.ups + st2.downs, 0);
  ASSERT_INT_EQ(log_count("level=warn", NULL) + log_count("level=error", NULL), 0);
  teardown();
}

/* A command callback that learns of the drop closes the connection: the
 * other pending callbacks still fire once, no state callback and no reconnect
 * follow. */
struct lost_closer {
  broker *b;
  bk_conn *c;
  int calls;
  char err[128];
};
static void close_on_lost(void *data, const bk_reply *r, const char *err) {
  struct lost_closer *k = data;
  k->calls++;
  ASSERT_NULL(r);
  snprintf(k->err, sizeof k->err, "%s", err);
  bk_conn_close(k->b, k->c);
}

TEST_IMPL(broker_redis_close_in_lost_callback) {
  struct state st = {0};
  struct lost_closer k = {0};
  struct call later = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "lost-closer", &st);
  k.b = b;
  k.c = c;
  ASSERT_OK(cmdv(b, c, close_on_lost, &k, "BLPOP", "q", "0", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &later, "PING", NULL));
  run_for(100);
  redis_server_kill(&srv);
  WAIT(later.calls, 1, 5000);
  ASSERT_INT_EQ(k.calls, 1);
  ASSERT(strncmp(k.err, "connection lost: ", 17) == 0);
  ASSERT_STR_EQ(later.err, "connection closed"); /* it was closed by then */
  broker_free(b);
  run_for(300);
  ASSERT_INT_EQ(st.downs, 0);
  ASSERT_INT_EQ(log_count("msg=\"redis connecting\"", "conn=lost-closer"), 1);
  teardown();
}

/* An IPv6 literal in brackets, when this machine has ::1. */
TEST_IMPL(broker_redis_ipv6) {
  static const char *const args[] = {"--bind", "127.0.0.1", "-::1", NULL};
  struct sockaddr_in6 sa6;
  memset(&sa6, 0, sizeof sa6);
  sa6.sin6_family = AF_INET6;
  sa6.sin6_addr = in6addr_loopback;
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  int have_v6 = fd >= 0 && bind(fd, (struct sockaddr *)&sa6, sizeof sa6) == 0;
  if (fd >= 0) close(fd);
  if (!have_v6) {
    fprintf(stderr, "broker_redis_ipv6: no IPv6 loopback here, nothing to test\n");
    return;
  }
  struct state st = {0};
  struct call ping = {0};
  char url[128];
  setup(args);
  snprintf(url, sizeof url, "redis://[::1]:%d", srv.port);
  broker *b = make_broker(url);
  bk_conn *c = open_up(b, "v6", &st);
  ASSERT_OK(cmdv(b, c, on_call, &ping, "PING", NULL));
  WAIT(ping.calls, 1, 5000);
  ASSERT_STR_EQ(ping.str, "PONG");
  close_and_free(b, c);
  teardown();
}

/* A server that stops answering (SIGSTOP: the socket stays open, nothing
 * comes back) fails the command after the command timeout, drops the
 * connection and makes it again once the server answers. A blocking read is
 * given its BLOCK time on top. */
TEST_IMPL(broker_redis_command_timeout) {
  setup(no_args);
  broker *b = make_broker(srv.url);
  broker_redis_set_command_timeout(b, 300);
  struct state st = {0};
  bk_conn *c = open_up(b, "hung", &st);

  struct call quick = {0};
  ASSERT_OK(cmdv(b, c, on_call, &quick, "PING", NULL));
  WAIT(quick.calls, 1, 2000);
  ASSERT_STR_EQ(quick.str, "PONG");

  /* BLOCK 500 + 300 ms: still within its time after 600 ms */
  struct call blocked = {0};
  ASSERT_OK(
      cmdv(b, c, on_call, &blocked, "XREAD", "BLOCK", "500", "STREAMS", "nothing", "$", NULL));
  run_for(400);
  ASSERT_INT_EQ(blocked.calls, 0); /* past the command timeout, within BLOCK + it */
  WAIT(blocked.calls, 1, 2000);
  ASSERT_INT_EQ(blocked.type, BK_NIL); /* the server's own timeout: nil */

  ASSERT_OK(kill(srv.pid, SIGSTOP));
  struct call hung = {0};
  ASSERT_OK(cmdv(b, c, on_call, &hung, "PING", NULL));
  run_for(150);
  ASSERT_INT_EQ(hung.calls, 0); /* not yet overdue */
  WAIT(hung.calls, 1, 2000);
  ASSERT_INT_EQ(hung.type, 0);
  ASSERT_STR_EQ(hung.err, "connection lost: no reply to a command within 300 ms");
  ASSERT_INT_EQ(st.downs, 1);
  ASSERT_INT_EQ(log_count("msg=\"redis connection lost, reconnecting\"",
                          "error=\"no reply to a command within 300 ms\""),
                1);

  ASSERT_OK(kill(srv.pid, SIGCONT));
  WAIT(st.ups, 2, 5000);
  struct call again = {0};
  ASSERT_OK(cmdv(b, c, on_call, &again, "PING", NULL));
  WAIT(again.calls, 1, 2000);
  ASSERT_STR_EQ(again.str, "PONG");
  close_and_free(b, c);
  teardown();
}

/* bk_flush writes what is queued now, without the loop turning (hiredis alone
 * writes only when it turns), also from inside a reply callback of the same
 * connection; the replies still come once each. A second client, blocking,
 * watches the server. */
static int peer_sees(redisContext *peer, const char *key, int ms) {
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000;
  do {
    redisReply *r = redisCommand(peer, "EXISTS %s", key);
    ASSERT_NOT_NULL(r);
    long long n = r->integer;
    freeReplyObject(r);
    if (n == 1) return 1;
    uv_sleep(2);
  } while (uv_hrtime() < end);
  return 0;
}

struct flusher {
  broker *b;
  bk_conn *c;
  redisContext *peer;
  int calls, seen;
  struct call set;
};
static void flush_in_reply(void *data, const bk_reply *r, const char *err) {
  struct flusher *f = data;
  (void)r, (void)err;
  f->calls++;
  ASSERT_OK(cmdv(f->b, f->c, on_call, &f->set, "SET", "inside", "1", NULL));
  bk_flush(f->b, f->c);
  f->seen = peer_sees(f->peer, "inside", 2000);
}

TEST_IMPL(broker_redis_flush_writes_now) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "flush", &st);
  redisContext *peer = redisConnect("127.0.0.1", srv.port);
  ASSERT(peer && !peer->err);

  struct call set = {0};
  ASSERT_OK(cmdv(b, c, on_call, &set, "SET", "outside", "1", NULL));
  ASSERT_INT_EQ(peer_sees(peer, "outside", 100), 0); /* queued, not written */
  bk_flush(b, c);
  ASSERT_INT_EQ(peer_sees(peer, "outside", 2000), 1);
  WAIT(set.calls, 1, 5000);
  ASSERT_STR_EQ(set.str, "OK");

  struct flusher f = {.b = b, .c = c, .peer = peer};
  ASSERT_OK(cmdv(b, c, flush_in_reply, &f, "PING", NULL));
  WAIT(f.calls, 1, 5000);
  ASSERT_INT_EQ(f.seen, 1);
  WAIT(f.set.calls, 1, 5000);
  ASSERT_STR_EQ(f.set.str, "OK");
  bk_flush(b, c); /* nothing queued */
  run_for(50);
  ASSERT_INT_EQ(set.calls + f.calls + f.set.calls, 3);

  bk_conn *later = bk_conn_open(b, "later", NULL, NULL);
  bk_flush(b, later); /* not up yet: nothing to write */
  bk_conn_close(b, later);
  redisFree(peer);
  close_and_free(b, c);
  ASSERT_INT_EQ(st.downs, 0);
  teardown();
}

/* A write that fails inside a reply callback (the server is gone) does not
 * tear the connection down under the callback: the loop does, after it, as
 * for any lost connection. */
struct dead_flusher {
  broker *b;
  bk_conn *c;
  int calls;
  struct call sets[2];
};
static void kill_and_flush(void *data, const bk_reply *r, const char *err) {
  struct dead_flusher *f = data;
  (void)r, (void)err;
  f->calls++;
  redis_server_kill(&srv);
  for (int i = 0; i < 2; i++) { /* the second write meets the reset */
    ASSERT_OK(cmdv(f->b, f->c, on_call, &f->sets[i], "SET", "k", "v", NULL));
    bk_flush(f->b, f->c);
    uv_sleep(50);
  }
  ASSERT_INT_EQ(f->sets[0].calls + f->sets[1].calls, 0); /* not from inside */
}

TEST_IMPL(broker_redis_flush_error_inside_callback) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "doomed", &st);
  struct dead_flusher f = {.b = b, .c = c};
  ASSERT_OK(cmdv(b, c, kill_and_flush, &f, "PING", NULL));
  WAIT(f.calls, 1, 5000);
  WAIT(f.sets[1].calls, 1, 5000);
  for (int i = 0; i < 2; i++) {
    ASSERT_INT_EQ(f.sets[i].calls, 1);
    ASSERT_INT_EQ(f.sets[i].type, 0);
    if (strncmp(f.sets[i].err, "connection lost: ", 17) != 0)
      TEST_FAIL_("sets[%d] failed with \"%s\"", i, f.sets[i].err);
  }
  WAIT(st.downs, 1, 5000);
  close_and_free(b, c);
  teardown();
}

/* ---- scripts by SHA ---- */

/* calls=N of cmdstat_NAME in INFO commandstats, 0 when absent. */
static long long stat_calls(redisContext *peer, const char *name) {
  redisReply *r = redisCommand(peer, "INFO commandstats");
  ASSERT(r && r->type == REDIS_REPLY_STRING);
  char key[64];
  snprintf(key, sizeof key, "cmdstat_%s:calls=", name);
  const char *p = strstr(r->str, key);
  long long n = p ? strtoll(p + strlen(key), NULL, 10) : 0;
  freeReplyObject(r);
  return n;
}

static void peer_do(redisContext *peer, const char *cmd) {
  redisReply *r = redisCommand(peer, cmd);
  ASSERT(r && r->type != REDIS_REPLY_ERROR);
  freeReplyObject(r);
}

/* One lease renewal (SCRIPT_KEEPALIVE: a GET and a PEXPIRE on the server). */
static int renew(broker *b, bk_conn *c, struct call *k) {
  const char *argv[] = {"EVAL", SCRIPT_KEEPALIVE, "1", "lease", "me", "60000", "1", "0"};
  size_t len[8];
  for (int i = 0; i < 8; i++) len[i] = strlen(argv[i]);
  return bk_command(b, c, 8, argv, len, on_call, k);
}

/* A compiled-in script goes as EVAL once per connection, then as EVALSHA.
 * After SCRIPT FLUSH the EVALSHA gets NOSCRIPT: the broker sends the same
 * call as EVAL, the caller gets one reply (that EVAL's), and the script
 * ran once (one PEXPIRE); the next call goes by SHA again. A connection
 * made afresh starts with EVAL. */
TEST_IMPL(broker_redis_scripts_by_sha_survive_script_flush) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "sha", &st);
  redisContext *peer = redisConnect("127.0.0.1", srv.port);
  ASSERT(peer && !peer->err);
  peer_do(peer, "SET lease me");

  struct call k1 = {0}, k2 = {0}, k3 = {0}, k4 = {0};
  ASSERT_OK(renew(b, c, &k1));
  WAIT(k1.calls, 1, 5000);
  ASSERT_INT_EQ(k1.type, BK_ARRAY);
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 1);
  ASSERT_INT_EQ(stat_calls(peer, "evalsha"), 0);
  ASSERT_OK(renew(b, c, &k2));
  WAIT(k2.calls, 1, 5000);
  ASSERT_INT_EQ(k2.type, BK_ARRAY);
  ASSERT_INT_EQ(k2.elements, 2); /* {renewals, riders} */
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 1);
  ASSERT_INT_EQ(stat_calls(peer, "evalsha"), 1);
  ASSERT_INT_EQ(stat_calls(peer, "pexpire"), 2);

  peer_do(peer, "SCRIPT FLUSH");
  peer_do(peer, "CONFIG RESETSTAT");
  ASSERT_OK(renew(b, c, &k3));
  WAIT(k3.calls, 1, 5000);
  run_for(50);
  ASSERT_INT_EQ(k3.calls, 1);
  ASSERT_INT_EQ(k3.type, BK_ARRAY); /* the EVAL's reply, not NOSCRIPT */
  ASSERT_INT_EQ(k3.elements, 2);
  ASSERT_STR_EQ(k3.err, "");
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 1);
  ASSERT_INT_EQ(stat_calls(peer, "pexpire"), 1); /* the script ran once */
  ASSERT_OK(renew(b, c, &k4));
  WAIT(k4.calls, 1, 5000);
  ASSERT_INT_EQ(k4.elements, 2);
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 1);
  ASSERT_INT_EQ(stat_calls(peer, "pexpire"), 2);

  /* a new connection: EVAL first (the server may never have seen it) */
  struct state st2 = {0};
  bk_conn *c2 = open_up(b, "sha2", &st2);
  struct call k5 = {0};
  ASSERT_OK(renew(b, c2, &k5));
  WAIT(k5.calls, 1, 5000);
  ASSERT_INT_EQ(k5.elements, 2);
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 2);
  ASSERT_INT_EQ(log_count("EVALSHA", NULL), 0); /* nothing to say: NOSCRIPT is routine */

  redisFree(peer);
  bk_conn_close(b, c2);
  close_and_free(b, c);
  teardown();
}

/* A user whose ACL grants EVAL but not EVALSHA: the refused EVALSHA ran
 * nothing, so it goes again as EVAL, and from then on every script goes as
 * EVAL; said once in the log. */
TEST_IMPL(broker_redis_scripts_without_evalsha_right) {
  struct state st = {0};
  setup(no_args);
  redisContext *peer = redisConnect("127.0.0.1", srv.port);
  ASSERT(peer && !peer->err);
  peer_do(peer, "ACL SETUSER nosha on >pw -@all +eval +get +pexpire +set +ping ~*");
  peer_do(peer, "SET lease me");
  char url[256];
  snprintf(url, sizeof url, "redis://nosha:pw@127.0.0.1:%d", srv.port);
  broker *b = make_broker(url);
  bk_conn *c = open_up(b, "acl", &st);
  struct call k[4] = {{0}};
  for (int i = 0; i < 4; i++) {
    ASSERT_OK(renew(b, c, &k[i]));
    WAIT(k[i].calls, 1, 5000);
    ASSERT_INT_EQ(k[i].type, BK_ARRAY);
    ASSERT_INT_EQ(k[i].elements, 2);
  }
  ASSERT_INT_EQ(stat_calls(peer, "pexpire"), 4);
  ASSERT_INT_EQ(stat_calls(peer, "eval"), 4);
  ASSERT_INT_EQ(log_count("may not run EVALSHA", "hint=\"grant +evalsha"), 1);
  redisFree(peer);
  close_and_free(b, c);
  teardown();
}

/* reply_limit: a bulk string over the limit is refused as it arrives, the
 * command fails with BK_ERR_TOO_LARGE naming the sizes and the server, the
 * connection comes back, and a small reply still works; a reply whose parsed
 * part outgrows the total limit is refused the same way. */
TEST_IMPL(broker_redis_reply_too_large) {
  struct state st = {0};
  setup(no_args);
  redisContext *peer = redisConnect("127.0.0.1", srv.port);
  ASSERT(peer && !peer->err);
  size_t big = 8u << 20;
  char *body = malloc(big);
  ASSERT_NOT_NULL(body);
  memset(body, 'x', big);
  redisReply *set = redisCommand(peer, "SET big %b", body, big);
  ASSERT(set && set->type == REDIS_REPLY_STATUS);
  freeReplyObject(set);
  free(body);
  peer_do(peer, "SET small hello");
  for (int i = 0; i < 2000; i++)
    peer_do(peer, "RPUSH many aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");

  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "limited", &st);
  bk_conn_reply_limit(b, c, 65536, 4096);
  struct call k = {0};
  ASSERT_OK(cmdv(b, c, on_call, &k, "GET", "big", NULL));
  WAIT(k.calls, 1, 5000);
  ASSERT_INT_EQ(k.type, 0);
  ASSERT(bk_error_is_too_large(k.err));
  /* The length is read as its digits arrive: at least what came so far,
   * past the limit. */
  const char *prefix = "reply too large: a string of at least ";
  ASSERT(strncmp(k.err, prefix, strlen(prefix)) == 0);
  ASSERT(strtoull(k.err + strlen(prefix), NULL, 10) == big);
  ASSERT(strstr(k.err, "over this connection's limit of 65536 (redis ") != NULL);
  ASSERT_INT_EQ(st.downs, 1);
  ASSERT_INT_EQ(log_count("level=warn msg=\"redis reply refused as too large, reconnecting\"",
                          "error=\"reply too large: a string of at least 8388608 bytes"),
                1);
  ASSERT_INT_EQ(log_count("redis connection lost", NULL), 0);
  WAIT(st.ups, 2, 5000);

  struct call small = {0};
  ASSERT_OK(cmdv(b, c, on_call, &small, "GET", "small", NULL));
  WAIT(small.calls, 1, 5000);
  ASSERT_STR_EQ(small.str, "hello");

  /* 2000 elements of 48 bytes, read 16 KB at a time: over 4096 bytes parsed
   * before the end, no string over 65536 */
  struct call many = {0};
  ASSERT_OK(cmdv(b, c, on_call, &many, "LRANGE", "many", "0", "-1", NULL));
  WAIT(many.calls, 1, 5000);
  ASSERT_INT_EQ(many.type, 0);
  ASSERT(strncmp(many.err, "reply too large: a reply taking ", 32) == 0);
  WAIT(st.ups, 3, 5000);

  /* Without limits the same replies come whole. */
  bk_conn_reply_limit(b, c, 0, 0);
  struct call whole = {0};
  ASSERT_OK(cmdv(b, c, on_call, &whole, "STRLEN", "big", NULL));
  ASSERT_OK(cmdv(b, c, on_call, &many, "LRANGE", "many", "0", "-1", NULL));
  WAIT(many.calls, 2, 5000);
  ASSERT_INT_EQ(whole.integer, (long long)big);
  ASSERT_INT_EQ(many.elements, 2000);
  redisFree(peer);
  close_and_free(b, c);
  teardown();
}

/* A listener that takes the connection and closes it before any byte (a
 * proxy or sidecar whose Redis is not up yet): a plaintext attempt must be
 * retried, not refused as "a TLS port takes rediss://". */
static void on_accept(uv_stream_t *server, int status) {
  if (status < 0) return;
  uv_tcp_t *client = malloc(sizeof *client);
  ASSERT_NOT_NULL(client);
  uv_tcp_init(server->loop, client);
  if (uv_accept(server, (uv_stream_t *)client) == 0) {
    /* close at once, as a proxy without an upstream does */
  }
  uv_close((uv_handle_t *)client, (uv_close_cb)free);
}

TEST_IMPL(broker_redis_close_before_any_byte_is_not_a_refusal) {
  setup(NULL);
  uv_tcp_t lst;
  struct sockaddr_in addr;
  ASSERT_OK(uv_tcp_init(&loop, &lst));
  ASSERT_OK(uv_ip4_addr("127.0.0.1", 0, &addr));
  ASSERT_OK(uv_tcp_bind(&lst, (const struct sockaddr *)&addr, 0));
  ASSERT_OK(uv_listen((uv_stream_t *)&lst, 16, on_accept));
  struct sockaddr_in bound;
  int len = sizeof bound;
  ASSERT_OK(uv_tcp_getsockname(&lst, (struct sockaddr *)&bound, &len));
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(bound.sin_port));
  broker *b = make_broker(url);
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "proxied", &st, on_fault);
  WAIT(f.calls, 1, 8000);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a server closing before any byte is reported as a refusal: \"%s\"", f.why);
  close_and_free(b, c);
  uv_close((uv_handle_t *)&lst, NULL);
  teardown();
}

/* A string of size bytes read whole, with a 4096-byte limit set just
 * before: refused however it arrives. warm: an unlimited read of it first
 * grows the read buffer (kept: under 4 MB), so that one read can take it. */
static void refused_whole(size_t size, bool warm) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "limited", &st);
  char *body = malloc(size);
  ASSERT_NOT_NULL(body);
  memset(body, 'x', size);
  const char *set[] = {"SET", "mid", body};
  const size_t set_len[] = {3, 3, size};
  struct call ok = {0};
  ASSERT_OK(bk_command(b, c, 3, set, set_len, on_call, &ok));
  WAIT(ok.calls, 1, 5000);
  free(body);
  if (warm) {
    struct call first = {0};
    ASSERT_OK(cmdv(b, c, on_call, &first, "GET", "mid", NULL));
    WAIT(first.calls, 1, 5000);
    ASSERT_INT_EQ(first.type, BK_STRING);
  }
  bk_conn_reply_limit(b, c, 4096, 0);
  struct call k = {0};
  ASSERT_OK(cmdv(b, c, on_call, &k, "GET", "mid", NULL));
  bk_flush(b, c);
  uv_sleep(200); /* the whole reply waits in the socket: one read takes it */
  WAIT(k.calls, 1, 5000);
  if (k.type != 0 || !bk_error_is_too_large(k.err))
    TEST_FAIL_("a %zu-byte string passed a 4096-byte bulk limit (type %d, err \"%s\")", size,
               k.type, k.err);
  close_and_free(b, c);
  teardown();
}

/* Past the 16 KB a read takes under limits, after a read grew the buffer. */
TEST_IMPL(broker_redis_reply_limit_holds_for_a_reply_read_at_once) { refused_whole(60000, true); }

/* Within one read of 16 KB: the whole reply is parsed before the limit is
 * looked at, and refused all the same. */
TEST_IMPL(broker_redis_reply_limit_holds_under_one_read) { refused_whole(10000, false); }

/* ---- the port probe's lifetime ---- */

/* A listener that closes its first connection at once (the plaintext
 * attempt: "closed before answering") and holds every later one without a
 * byte (the probe, and the attempts after it), until it is closed. */
struct holder {
  uv_tcp_t lst;
  int accepts;
  uv_tcp_t held[16];
  int nheld;
};

static void on_hold(uv_stream_t *server, int status) {
  struct holder *h = server->data;
  if (status < 0) return;
  if (h->accepts++ == 0 || h->nheld == 16) {
    uv_tcp_t *client = malloc(sizeof *client);
    ASSERT_NOT_NULL(client);
    uv_tcp_init(server->loop, client);
    uv_accept(server, (uv_stream_t *)client);
    uv_close((uv_handle_t *)client, (uv_close_cb)free);
    return;
  }
  uv_tcp_t *client = &h->held[h->nheld++];
  uv_tcp_init(server->loop, client);
  uv_accept(server, (uv_stream_t *)client);
}

static const char *holder_start(struct holder *h) {
  static char url[64];
  struct sockaddr_in addr, bound;
  int len = sizeof bound;
  memset(h, 0, sizeof *h);
  ASSERT_OK(uv_tcp_init(&loop, &h->lst));
  h->lst.data = h;
  ASSERT_OK(uv_ip4_addr("127.0.0.1", 0, &addr));
  ASSERT_OK(uv_tcp_bind(&h->lst, (const struct sockaddr *)&addr, 0));
  ASSERT_OK(uv_listen((uv_stream_t *)&h->lst, 16, on_hold));
  ASSERT_OK(uv_tcp_getsockname(&h->lst, (struct sockaddr *)&bound, &len));
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(bound.sin_port));
  return url;
}

static void holder_stop(struct holder *h) {
  for (int i = 0; i < h->nheld; i++) uv_close((uv_handle_t *)&h->held[i], NULL);
  uv_close((uv_handle_t *)&h->lst, NULL);
}

/* Closed while its probe waits: the probe is cancelled (its callback never
 * runs on the freed connection) and nothing leaks. */
TEST_IMPL(broker_redis_close_while_probing) {
  setup(NULL);
  struct holder h;
  broker *b = make_broker(holder_start(&h));
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "probed", &st, on_fault);
  WAIT(h.accepts, 2, 5000); /* the attempt closed; the probe connected */
  run_for(100);
  ASSERT_INT_EQ(f.calls, 0); /* the failure waits for the probe */
  close_and_free(b, c);
  run_for(1500); /* past the probe's deadline */
  ASSERT_INT_EQ(f.calls, 0);
  holder_stop(&h);
  teardown();
}

/* The fault that follows an unanswered probe closes the connection from
 * inside its callback (a host giving up at start): no use after free, no
 * retry armed on a closed connection. */
static void close_on_fault(void *data, bk_conn *c, enum bk_fault fault, const char *why) {
  struct state *st = data;
  on_fault(data, c, fault, why);
  bk_conn_close(st->b, c);
}

TEST_IMPL(broker_redis_close_from_the_fault_after_a_probe) {
  setup(NULL);
  struct holder h;
  broker *b = make_broker(holder_start(&h));
  struct faults f = {0};
  struct state st = {.faults = &f};
  open_watched(b, "probed", &st, close_on_fault); /* closed by its fault callback */
  WAIT(f.calls, 1, 5000);
  if (f.last == BK_FAULT_DENIED) TEST_FAIL_("an unanswered probe made a refusal: \"%s\"", f.why);
  run_for(1500);
  ASSERT_INT_EQ(f.calls, 1);
  ASSERT_INT_EQ(h.accepts, 2); /* no attempt after the close */
  broker_free(b);
  holder_stop(&h);
  teardown();
}

/* After an unanswered probe the backoff is armed: the next attempt comes,
 * and its failure (held, then the connect timeout) is reported again. */
TEST_IMPL(broker_redis_retry_after_an_unanswered_probe) {
  setup(NULL);
  struct holder h;
  broker *b = make_broker(holder_start(&h));
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "probed", &st, on_fault);
  WAIT(f.calls, 1, 5000);
  ASSERT_INT_EQ(f.last, BK_FAULT_DOWN);
  WAIT(h.accepts, 3, 5000); /* the attempt after the probe */
  close_and_free(b, c);
  holder_stop(&h);
  teardown();
}
