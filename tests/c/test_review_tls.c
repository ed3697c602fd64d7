/* Review of the TLS transport: failures that retrying fixes must not be
 * reported as refusals (BK_FAULT_DENIED makes `run` give up at start). */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "broker.h"
#include "broker_fixture.h"
#include "metrics.h"
#include "tls_certs.h"
#include "url.h"

static char certs[96];

static void setup_tls_with(const char *const *args) {
  ASSERT_OK(tls_certs_make(certs, sizeof certs));
  snprintf(srv.tls, sizeof srv.tls, "%s", certs);
  setup(args);
}

static void teardown_tls(void) {
  teardown();
  tls_certs_remove(certs);
  metrics_reset();
}

static const char *mtls_url(void) {
  static char url[768];
  snprintf(url, sizeof url, "%s?tls_ca=%s/ca.pem&tls_cert=%s/client.pem&tls_key=%s/client.key",
           srv.url, certs, certs, certs);
  return url;
}

/* A TLS redis-server at maxclients drops a new connection before its
 * handshake (it cannot write "-ERR max number of clients" over TLS yet).
 * The broker calls a full server busy, not a refusal (classify_refusal);
 * over TLS it must stay so. */
static const char *const full_args[] = {"--tls-auth-clients", "yes", "--maxclients", "1", NULL};

TEST_IMPL(review_tls_maxclients_is_not_denied) {
  setup_tls_with(full_args);
  broker *b = make_broker(mtls_url());
  struct state first = {0};
  bk_conn *a = open_up(b, "first", &first);
  struct faults f = {0};
  struct state st = {.faults = &f, .b = b};
  bk_conn *c = bk_conn_open(b, "second", on_state, &st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, on_fault);
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
static const char *const mtls_args[] = {"--tls-auth-clients", "yes", NULL};

TEST_IMPL(review_tls_skip_verify_drop_is_not_denied) {
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
TEST_IMPL(review_tls_stalled_server_is_not_denied) {
  setup_tls_with(mtls_args);
  ASSERT_OK(kill(srv.pid, SIGSTOP));
  broker *b = make_broker(mtls_url());
  struct faults f = {0};
  struct state st = {.faults = &f, .b = b};
  bk_conn *c = bk_conn_open(b, "stalled", on_state, &st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, on_fault);
  WAIT(f.calls, 1, 8000);
  kill(srv.pid, SIGCONT);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a stalled TLS server is reported as a refusal: \"%s\"", f.why);
  close_and_free(b, c);
  teardown_tls();
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

TEST_IMPL(review_plain_accept_and_close_is_not_denied) {
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
  struct state st = {.faults = &f, .b = b};
  bk_conn *c = bk_conn_open(b, "proxied", on_state, &st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, on_fault);
  WAIT(f.calls, 1, 8000);
  if (f.last == BK_FAULT_DENIED)
    TEST_FAIL_("a server closing before any byte is reported as a refusal: \"%s\"", f.why);
  close_and_free(b, c);
  uv_close((uv_handle_t *)&lst, NULL);
  teardown();
}

/* A server that goes away after the TLS handshake, before it answered the
 * first command (paused by CLIENT PAUSE, then killed: a restart, a
 * failover): an ordinary loss, not "it refused the client certificate". */
TEST_IMPL(review_tls_loss_before_the_first_reply_is_not_denied) {
  setup_tls_with(mtls_args);
  redisContext *peer = redisConnectUnix(srv.sock);
  ASSERT(peer && !peer->err);
  redisReply *r = redisCommand(peer, "CLIENT PAUSE 20000 ALL");
  ASSERT(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  broker *b = make_broker(mtls_url());
  struct faults f = {0};
  struct state st = {.faults = &f, .b = b};
  bk_conn *c = bk_conn_open(b, "paused", on_state, &st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, on_fault);
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
