/* broker_redis over TLS against a private redis-server with a TLS port and
 * a throwaway CA (tls_certs.c): replies matched to their commands through
 * the reply queue, values larger than a socket or a TLS record takes at
 * once, a restart that renegotiates, reply limits, and each refusal a
 * person must fix said as such. Handshakes are counted per connection. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "broker_fixture.h"
#include "metrics.h"
#include "tls.h"
#include "tls_certs.h"
#include "url.h"

static char certs[96];

/* A TLS server whose clients must show a certificate. */
static const char *const mtls_args[] = {"--tls-auth-clients", "yes", NULL};

static void setup_tls_with(const char *const *args) {
  ASSERT_OK(tls_certs_make(certs, sizeof certs));
  snprintf(srv.tls, sizeof srv.tls, "%s", certs);
  setup(args);
}

static void setup_tls(void) { setup_tls_with(mtls_args); }

static void teardown_tls(void) {
  teardown();
  tls_certs_remove(certs);
  metrics_reset();
}

/* srv's URL with query parameters: "" for none. */
static const char *url_with(const char *params) {
  static char url[768];
  snprintf(url, sizeof url, "%s%s%s", srv.url, params[0] ? "?" : "", params);
  return url;
}

/* The client certificate and the CA: what every working connection gives. */
static const char *mtls_url(void) {
  char params[512];
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem&tls_cert=%s/client.pem&tls_key=%s/client.key",
           certs, certs, certs);
  return url_with(params);
}

/* A metric's value from the page ("name" or "name{labels}"), -1 if absent. */
static double metric_value(const char *series) {
  size_t len;
  char *page = metrics_page(&len);
  ASSERT_NOT_NULL(page);
  double v = -1;
  for (char *line = page; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (strncmp(line, series, strlen(series)) == 0 && line[strlen(series)] == ' ') {
      v = strtod(line + strlen(series) + 1, NULL);
      break;
    }
  free(page);
  return v;
}

/* A value's bytes as the server sent them back. */
struct value {
  int calls;
  char *bytes;
  size_t len;
};

static void on_value(void *data, const bk_reply *r, const char *err) {
  struct value *v = data;
  v->calls++;
  ASSERT_NULL(err);
  ASSERT_INT_EQ(r->type, BK_STRING);
  v->bytes = malloc(r->len);
  ASSERT_NOT_NULL(v->bytes);
  memcpy(v->bytes, r->str, r->len);
  v->len = r->len;
}

/* 3000 commands pipelined, each reply to its own command, then an 8 MB
 * value written and read back whole: the output queue is written as the
 * socket takes it (a TLS write that waits is retried), and the reply comes
 * in hundreds of TLS records. One connection, one handshake. */
TEST_IMPL(broker_tls_replies_match_commands) {
  struct state st = {0};
  setup_tls();
  broker *b = make_broker(mtls_url());
  bk_conn *c = open_up(b, "main", &st);
  ASSERT_INT_EQ(metric_value("luastream_redis_tls_handshakes_total"), 1);

  const char *incr[] = {"INCR", "n"};
  const size_t incr_len[] = {4, 1};
  for (int i = 0; i < 3000; i++)
    ASSERT_OK(bk_command(b, c, 2, incr, incr_len, on_incr, (void *)(intptr_t)i));
  WAIT(in_order_next, 3000, 10000);
  ASSERT_INT_EQ(in_order_bad, 0);

  size_t big = 8u << 20;
  char *body = malloc(big);
  ASSERT_NOT_NULL(body);
  for (size_t i = 0; i < big; i++) body[i] = (char)(i * 131 + (i >> 12));
  const char *set[] = {"SET", "big", body};
  const size_t set_len[] = {3, 3, big};
  struct call ok = {0};
  struct value got = {0};
  ASSERT_OK(bk_command(b, c, 3, set, set_len, on_call, &ok));
  const char *get[] = {"GET", "big"};
  const size_t get_len[] = {3, 3};
  ASSERT_OK(bk_command(b, c, 2, get, get_len, on_value, &got));
  WAIT(got.calls, 1, 20000);
  ASSERT_STR_EQ(ok.str, "OK");
  ASSERT(got.len == big && memcmp(got.bytes, body, big) == 0);
  free(got.bytes);
  free(body);

  ASSERT_INT_EQ(metric_value("luastream_redis_tls_handshakes_total"), 1);
  double days = metric_value(
      "luastream_redis_tls_certificate_expiry_days{certificate=\"client\",server=\"\"}");
  ASSERT(days > 1.9 && days <= 2.0);
  char series[160];
  snprintf(series, sizeof series,
           "luastream_redis_tls_certificate_expiry_days{certificate=\"server\",server=\"127.0.0.1:"
           "%d\"}",
           srv.port);
  days = metric_value(series);
  ASSERT(days > 1.9 && days <= 2.0);
  close_and_free(b, c);
  teardown_tls();
}

/* A server that dies and comes back: the connection is made again with a
 * new handshake, and commands work over it. */
TEST_IMPL(broker_tls_server_restart) {
  struct state st = {0};
  setup_tls();
  broker *b = make_broker(mtls_url());
  bk_conn *c = open_up(b, "flaky", &st);
  redis_server_kill(&srv);
  WAIT(st.downs, 1, 5000);
  ASSERT_OK(redis_server_start(&srv, mtls_args));
  WAIT(st.ups, 2, 10000);
  struct call k = {0};
  ASSERT_OK(cmdv(b, c, on_call, &k, "PING", NULL));
  WAIT(k.calls, 1, 5000);
  ASSERT_STR_EQ(k.str, "PONG");
  ASSERT_INT_EQ(metric_value("luastream_redis_tls_handshakes_total"), 2);
  close_and_free(b, c);
  teardown_tls();
}

/* Reply limits hold over TLS as over plaintext: the huge value is refused
 * as it arrives, and the connection comes back. */
TEST_IMPL(broker_tls_reply_too_large) {
  struct state st = {0};
  setup_tls();
  broker *b = make_broker(mtls_url());
  bk_conn *c = open_up(b, "limited", &st);
  size_t big = 4u << 20;
  char *body = calloc(1, big);
  ASSERT_NOT_NULL(body);
  const char *set[] = {"SET", "big", body};
  const size_t set_len[] = {3, 3, big};
  struct call ok = {0};
  ASSERT_OK(bk_command(b, c, 3, set, set_len, on_call, &ok));
  WAIT(ok.calls, 1, 10000);
  free(body);
  bk_conn_reply_limit(b, c, 65536, 0);
  struct call k = {0};
  ASSERT_OK(cmdv(b, c, on_call, &k, "GET", "big", NULL));
  WAIT(k.calls, 1, 5000);
  ASSERT(bk_error_is_too_large(k.err));
  WAIT(st.ups, 2, 5000);
  struct call len = {0};
  ASSERT_OK(cmdv(b, c, on_call, &len, "STRLEN", "big", NULL));
  WAIT(len.calls, 1, 5000);
  ASSERT_INT_EQ(len.integer, (long long)big);
  close_and_free(b, c);
  teardown_tls();
}

/* Connects with url and waits for the first fault: it must be a refusal
 * (BK_FAULT_DENIED) whose reason holds both a and b. */
static void refused(const char *url, const char *a, const char *b_text) {
  struct faults f = {0};
  struct state st = {.faults = &f};
  broker *b = make_broker(url);
  bk_conn *c = open_watched(b, "refused", &st, on_fault);
  WAIT(f.calls, 1, 8000);
  if (f.last != BK_FAULT_DENIED || !strstr(f.why, a) || !strstr(f.why, b_text))
    TEST_FAIL_("%s: fault %d \"%s\", wanted a refusal naming \"%s\" and \"%s\"", url, f.last, f.why,
               a, b_text);
  ASSERT_INT_EQ(st.ups, 0);
  close_and_free(b, c);
}

TEST_IMPL(broker_tls_refusals_say_what_to_fix) {
  char params[512];
  setup_tls();
  /* a server certificate from a CA not given */
  snprintf(params, sizeof params, "tls_ca=%s/other_ca.pem", certs);
  refused(url_with(params), "not trusted", "--tls-ca");
  /* a name the certificate does not hold */
  snprintf(params, sizeof params,
           "tls_ca=%s/ca.pem&tls_cert=%s/client.pem&tls_key=%s/client.key"
           "&tls_server_name=wrong.example",
           certs, certs, certs);
  refused(url_with(params), "does not match", "--tls-server-name");
  /* no client certificate for a server that wants one */
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem", certs);
  refused(url_with(params), "client certificate", "--tls-cert");
  /* plaintext to the TLS port */
  char plain[160];
  snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", srv.port);
  refused(plain, "speaks TLS on this port and closed the plaintext connection",
          "use rediss://, not redis://");
  /* still fine with everything given */
  struct state st = {0};
  broker *b = make_broker(mtls_url());
  bk_conn *c = open_up(b, "fine", &st);
  close_and_free(b, c);
  teardown_tls();
}

/* SIGHUP's tls_reload reads the files again: a client certificate renewed
 * in place is the one presented from then on (its expiry says so, and the
 * server takes it); files that no longer load keep the ones read before. */
TEST_IMPL(broker_tls_reload_reads_the_files_again) {
  char cmd[1024], params[512];
  setup_tls();
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp client.pem renewed.pem && cp client.key renewed.key && "
           "chmod 600 renewed.key",
           certs);
  ASSERT_OK(system(cmd));
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem&tls_cert=%s/renewed.pem&tls_key=%s/renewed.key",
           certs, certs, certs);
  struct state st = {0};
  broker *b = make_broker(url_with(params));
  bk_conn *c = open_up(b, "renewed", &st);
  const char *client =
      "luastream_redis_tls_certificate_expiry_days{certificate=\"client\",server=\"\"}";
  ASSERT(metric_value(client) > 1.9 && metric_value(client) <= 2.0);

  snprintf(cmd, sizeof cmd,
           "cd '%s' && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial 4242 "
           "-days 9 -extfile client.ext -out renewed.pem >/dev/null 2>&1",
           certs);
  ASSERT_OK(system(cmd));
  ASSERT_INT_EQ(tls_reload(), 0);
  ASSERT(metric_value(client) > 8.9 && metric_value(client) <= 9.0);
  ASSERT_INT_EQ(log_count("msg=\"TLS files re-read\"", "renewed.pem"), 1);
  /* the next connection presents it: the server still takes it */
  redis_server_kill(&srv);
  WAIT(st.downs, 1, 5000);
  ASSERT_OK(redis_server_start(&srv, mtls_args));
  WAIT(st.ups, 2, 10000);

  snprintf(cmd, sizeof cmd, "echo 'not a certificate' > '%s/renewed.pem'", certs);
  ASSERT_OK(system(cmd));
  ASSERT_INT_EQ(tls_reload(), 1);
  ASSERT_INT_EQ(log_count("msg=\"cannot re-read the TLS files: the ones read before stay in use\"",
                          "renewed.pem"),
                1);
  ASSERT(metric_value(client) > 8.9 && metric_value(client) <= 9.0);
  redis_server_kill(&srv);
  WAIT(st.downs, 2, 5000);
  ASSERT_OK(redis_server_start(&srv, mtls_args));
  WAIT(st.ups, 3, 10000);
  close_and_free(b, c);
  teardown_tls();
}

/* A TLS redis-server at maxclients drops a new connection before its
 * handshake (it cannot write "-ERR max number of clients" over TLS yet).
 * The broker calls a full server busy, not a refusal (classify_refusal);
 * over TLS it must stay so. */
static const char *const full_args[] = {"--tls-auth-clients", "yes", "--maxclients", "1", NULL};

TEST_IMPL(broker_tls_full_server_is_not_a_refusal) {
  setup_tls_with(full_args);
  broker *b = make_broker(mtls_url());
  struct state first = {0};
  bk_conn *a = open_up(b, "first", &first);
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "second", &st, on_fault);
  WAIT(f.calls, 1, 8000);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a full TLS server is reported as a refusal: \"%s\"", f.why);
  bk_conn_close(b, c);
  close_and_free(b, a);
  teardown_tls();
}

/* --tls-skip-verify against a server whose certificate does not verify
 * (the point of the flag): a later drop is an ordinary loss, not "the
 * server's certificate is not trusted" as a refusal. */
TEST_IMPL(broker_tls_skip_verify_drop_is_not_a_refusal) {
  setup_tls_with(mtls_args);
  char text[768];
  snprintf(text, sizeof text, "%s?tls_cert=%s/client.pem&tls_key=%s/client.key", srv.url, certs,
           certs);
  struct redis_url u;
  char err[512];
  if (url_parse(text, &u, err, sizeof err) != 0) TEST_FAIL_("%s", err);
  u.tls.skip_verify = 1;
  broker *b = broker_redis_new(&loop, &u);
  ASSERT_NOT_NULL(b);
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_up(b, "unverified", &st);
  bk_conn_on_fault(b, c, on_fault);
  redis_server_kill(&srv);
  WAIT(f.calls, 1, 8000);
  if (f.last == BK_FAULT_DENIED || strstr(f.why, "certificate"))
    TEST_FAIL_("a dropped connection under --tls-skip-verify: fault %d \"%s\"", f.last, f.why);
  close_and_free(b, c);
  teardown_tls();
}

/* A TLS server stalled at start (paused, or busy with a slow disk) answers
 * no handshake within the connect timeout: that is a server to wait for,
 * not "not speaking TLS" as a refusal, which would end `run` at its start. */
TEST_IMPL(broker_tls_stalled_server_is_not_a_refusal) {
  setup_tls_with(mtls_args);
  ASSERT_OK(kill(srv.pid, SIGSTOP));
  broker *b = make_broker(mtls_url());
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "stalled", &st, on_fault);
  WAIT(f.calls, 1, 8000);
  kill(srv.pid, SIGCONT);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a stalled TLS server is reported as a refusal: \"%s\"", f.why);
  close_and_free(b, c);
  teardown_tls();
}

/* A server that goes away after the TLS handshake, before it answered the
 * first command (paused by CLIENT PAUSE, then killed: a restart, a
 * failover): an ordinary loss, not "it refused the client certificate". */
TEST_IMPL(broker_tls_loss_before_the_first_reply_is_not_a_refusal) {
  setup_tls_with(mtls_args);
  redisContext *peer = redisConnectUnix(srv.sock);
  ASSERT(peer && !peer->err);
  redisReply *r = redisCommand(peer, "CLIENT PAUSE 20000 ALL");
  ASSERT(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  broker *b = make_broker(mtls_url());
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "paused", &st, on_fault);
  run_for(1000); /* the handshake completes; PING waits */
  ASSERT_INT_EQ(f.calls, 0);
  redis_server_kill(&srv);
  WAIT(f.calls, 1, 8000);
  redisFree(peer);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a server lost before its first reply is reported as a refusal: \"%s\"", f.why);
  close_and_free(b, c);
  teardown_tls();
}

/* rediss:// to a plaintext Redis: the handshake gets no answer, the port
 * answers PING in plaintext when asked, and that is a refusal naming the
 * scheme to use. */
TEST_IMPL(broker_tls_plaintext_port_is_a_refusal) {
  static struct redis_server plain;
  setup_tls();
  ASSERT_OK(redis_server_start(&plain, no_args));
  char url[600];
  snprintf(url, sizeof url, "rediss://127.0.0.1:%d?tls_ca=%s/ca.pem", plain.port, certs);
  refused(url, "not speaking TLS (it answers in plaintext)", "takes redis://, not rediss://");
  redis_server_stop(&plain);
  teardown_tls();
}

/* A server that asks for a client certificate without requiring
 * one (tls-auth-clients optional, the fixture's default; a TLS proxy that
 * verifies certificates "if present" does the same) is lost after the
 * handshake, before its first reply, by a client that has no certificate:
 * being asked for one is no refusal, so this is an ordinary loss to retry,
 * not "the server requires a client certificate", which ends `run`. */
TEST_IMPL(broker_tls_optional_client_cert_loss_is_not_a_refusal) {
  setup_tls_with(no_args); /* tls-auth-clients optional */
  redisContext *peer = redisConnectUnix(srv.sock);
  ASSERT(peer && !peer->err);
  redisReply *r = redisCommand(peer, "CLIENT PAUSE 20000 ALL");
  ASSERT(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  char params[256];
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem", certs); /* no client certificate */
  broker *b = make_broker(url_with(params));
  struct faults f = {0};
  struct state st = {.faults = &f};
  bk_conn *c = open_watched(b, "optional", &st, on_fault);
  run_for(1000); /* the handshake completes; PING waits */
  ASSERT_INT_EQ(f.calls, 0);
  redis_server_kill(&srv);
  WAIT(f.calls, 1, 8000);
  redisFree(peer);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_(
        "a server asking for an optional certificate, lost before its first reply, is "
        "reported as a refusal: \"%s\"",
        f.why);
  close_and_free(b, c);
  teardown_tls();
}

/* The same server without the pause works for a client without a
 * certificate (the certificate is optional): a control for the test above. */
TEST_IMPL(broker_tls_optional_client_cert_works_without_one) {
  setup_tls_with(no_args);
  char params[256];
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem", certs);
  broker *b = make_broker(url_with(params));
  struct state st = {0};
  bk_conn *c = open_up(b, "optional", &st);
  close_and_free(b, c);
  teardown_tls();
}

/* The output queue is compacted (transport_reserve) while a TLS
 * write waits to be retried: the server is stopped so the socket fills
 * during an 8 MB SET, and a 9 MB SET queued then makes the queue move what
 * is left to its start and grow. Once the server runs again both values
 * must arrive intact, and the retried write must be taken by OpenSSL. */
TEST_IMPL(broker_tls_queue_compacted_under_a_waiting_write) {
  struct state st = {0};
  setup_tls();
  broker *b = make_broker(mtls_url());
  bk_conn *c = open_up(b, "queue", &st);
  size_t n1 = 8u << 20, n2 = 9u << 20;
  char *v1 = malloc(n1), *v2 = malloc(n2);
  ASSERT(v1 && v2);
  for (size_t i = 0; i < n1; i++) v1[i] = (char)(i * 131 + (i >> 12));
  for (size_t i = 0; i < n2; i++) v2[i] = (char)(i * 37 + (i >> 10) + 1);
  ASSERT_OK(kill(srv.pid, SIGSTOP));
  const char *set1[] = {"SET", "v1", v1};
  const size_t set1_len[] = {3, 2, n1};
  struct call ok1 = {0}, ok2 = {0};
  ASSERT_OK(bk_command(b, c, 3, set1, set1_len, on_call, &ok1));
  bk_flush(b, c);
  run_for(300); /* written until the socket is full: the last write waits */
  const char *set2[] = {"SET", "v2", v2};
  const size_t set2_len[] = {3, 2, n2};
  ASSERT_OK(bk_command(b, c, 3, set2, set2_len, on_call, &ok2));
  ASSERT_OK(kill(srv.pid, SIGCONT));
  struct value g1 = {0}, g2 = {0};
  const char *get1[] = {"GET", "v1"}, *get2[] = {"GET", "v2"};
  const size_t get_len[] = {3, 2};
  ASSERT_OK(bk_command(b, c, 2, get1, get_len, on_value, &g1));
  ASSERT_OK(bk_command(b, c, 2, get2, get_len, on_value, &g2));
  WAIT(g2.calls, 1, 20000);
  ASSERT_STR_EQ(ok1.str, "OK");
  ASSERT_STR_EQ(ok2.str, "OK");
  ASSERT(g1.len == n1 && memcmp(g1.bytes, v1, n1) == 0);
  ASSERT(g2.len == n2 && memcmp(g2.bytes, v2, n2) == 0);
  ASSERT_INT_EQ(st.ups, 1);
  free(g1.bytes);
  free(g2.bytes);
  free(v1);
  free(v2);
  close_and_free(b, c);
  teardown_tls();
}

/* The client expiry gauge is "the certificate that expires first,
 * of every context in use" (tls.c): once the context holding the sooner
 * one is let go (a handler's own URL, closed), the gauge must follow the
 * certificates still in use, not keep the one gone (an alert on it). */
TEST_IMPL(broker_tls_client_expiry_follows_contexts_let_go) {
  char cmd[1024], params[512];
  setup_tls();
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp client.key later.key && chmod 600 later.key && "
           "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial 4343 "
           "-days 9 -extfile client.ext -out later.pem >/dev/null 2>&1",
           certs);
  ASSERT_OK(system(cmd));
  snprintf(params, sizeof params, "tls_ca=%s/ca.pem&tls_cert=%s/later.pem&tls_key=%s/later.key",
           certs, certs, certs);
  broker *later = make_broker(url_with(params));
  const char *client =
      "luastream_redis_tls_certificate_expiry_days{certificate=\"client\",server=\"\"}";
  ASSERT(metric_value(client) > 8.9 && metric_value(client) <= 9.0);
  broker *sooner = make_broker(mtls_url());
  ASSERT(metric_value(client) > 1.9 && metric_value(client) <= 2.0);
  broker_free(sooner); /* its context, the only one with the 2-day certificate, goes */
  double days = metric_value(client);
  if (!(days > 8.9 && days <= 9.0))
    TEST_FAIL_("the client expiry gauge says %.2f days: the certificate in use expires in 9", days);
  broker_free(later);
  teardown_tls();
}
