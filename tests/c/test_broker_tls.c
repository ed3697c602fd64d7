/* broker_redis over TLS against a private redis-server with a TLS port and
 * a throwaway CA (tls_certs.c): replies matched to their commands through
 * the reply queue, values larger than a socket or a TLS record takes at
 * once, a restart that renegotiates, reply limits, and each refusal a
 * person must fix said as such. Handshakes are counted per connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "broker_fixture.h"
#include "metrics.h"
#include "tls.h"
#include "tls_certs.h"

static char certs[96];

/* A TLS server whose clients must show a certificate. */
static const char *const mtls_args[] = {"--tls-auth-clients", "yes", NULL};

static void setup_tls(void) {
  ASSERT_OK(tls_certs_make(certs, sizeof certs));
  snprintf(srv.tls, sizeof srv.tls, "%s", certs);
  setup(mtls_args);
}

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
  st.b = b;
  bk_conn *c = bk_conn_open(b, "refused", on_state, &st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, on_fault);
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
  refused(plain, "closed the connection before answering", "rediss://");
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
