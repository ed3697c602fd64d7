/* Tests for http_stub.c, the harness's HTTP client: answers arrive after
 * their delay on the virtual clock and never inside http_request; failures
 * and faults are told apart (fatal); passed requests reach the real client;
 * close fails every request in flight exactly once and frees it (ASan sees
 * a leak otherwise), and refuses new ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock_virtual.h"
#include "http_stub.h"
#include "task.h"

/* What the answer function hands out next. */
struct next_answer {
  enum http_stub_kind kind;
  long status;
  const char *body, *error;
  uint64_t delay_ms;
  char url[128]; /* the request it was asked about */
};
static struct next_answer next;

static void answer(void *data, const struct http_request *req, struct http_stub_answer *out) {
  (void)data;
  snprintf(next.url, sizeof next.url, "%s %s", req->method, req->url);
  out->kind = next.kind;
  out->status = next.status;
  out->delay_ms = next.delay_ms;
  if (next.body) {
    out->body = strdup(next.body);
    out->body_len = strlen(next.body);
    out->headers = strdup("X-Stub: yes\r\n");
    out->headers_len = strlen(out->headers);
  }
  if (next.error) out->error = strdup(next.error);
}

/* What came back, per request. */
struct got {
  int calls;
  long status;
  char body[64], headers[64], err[128];
  bool fatal;
  uint64_t at;
};

static lclock *clk;

static void done(void *data, const struct http_response *res, const char *err, bool fatal) {
  struct got *g = data;
  g->calls++;
  g->at = clock_now(clk);
  g->fatal = fatal;
  if (res) {
    g->status = res->status;
    snprintf(g->body, sizeof g->body, "%.*s", (int)res->body_len, res->body);
    snprintf(g->headers, sizeof g->headers, "%.*s", (int)res->headers_len, res->headers);
  } else {
    snprintf(g->err, sizeof g->err, "%s", err);
  }
}

static const struct http_request REQ = {.method = "POST",
                                        .url = "https://provider.test/v1/charges",
                                        .body = "{}",
                                        .body_len = 2,
                                        .timeout_ms = 10000,
                                        .max_body = 1024};

TEST_IMPL(http_stub_answers_after_the_delay_on_the_clock) {
  clk = clock_virtual_new(0);
  http_client *c = http_stub_new(clk, answer, NULL);
  ASSERT_NOT_NULL(c);
  next = (struct next_answer){
      .kind = HTTP_STUB_RESPOND, .status = 201, .body = "ok", .delay_ms = 2000};
  struct got g = {0};
  ASSERT_OK(http_request(c, &REQ, done, &g));
  ASSERT_STR_EQ(next.url, "POST https://provider.test/v1/charges");
  ASSERT_INT_EQ(g.calls, 0); /* never inside http_request */
  clock_virtual_advance(clk, 1999);
  ASSERT_INT_EQ(g.calls, 0);
  clock_virtual_advance(clk, 1);
  ASSERT_INT_EQ(g.calls, 1);
  ASSERT_INT_EQ(g.status, 201);
  ASSERT_STR_EQ(g.body, "ok");
  ASSERT_STR_EQ(g.headers, "X-Stub: yes\r\n");
  ASSERT_INT_EQ(g.at, 2000);
  ASSERT(!g.fatal);

  /* no delay: still not inside http_request, but at the next settle */
  next.delay_ms = 0;
  struct got now = {0};
  ASSERT_OK(http_request(c, &REQ, done, &now));
  ASSERT_INT_EQ(now.calls, 0);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(now.calls, 1);
  http_free(c);
  clk->ops->free(clk);
}

TEST_IMPL(http_stub_tells_failures_from_faults) {
  clk = clock_virtual_new(0);
  http_client *c = http_stub_new(clk, answer, NULL);
  next = (struct next_answer){.kind = HTTP_STUB_FAIL, .error = "connection refused"};
  struct got fail = {0}, fault = {0}, pass = {0};
  ASSERT_OK(http_request(c, &REQ, done, &fail));
  next = (struct next_answer){.kind = HTTP_STUB_FAULT, .error = "no stub matches this request"};
  ASSERT_OK(http_request(c, &REQ, done, &fault));
  next = (struct next_answer){.kind = HTTP_STUB_PASS}; /* with no real client: a fault */
  ASSERT_OK(http_request(c, &REQ, done, &pass));
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(fail.calls, 1);
  ASSERT_STR_EQ(fail.err, "connection refused");
  ASSERT(!fail.fatal);
  ASSERT_INT_EQ(fault.calls, 1);
  ASSERT_STR_EQ(fault.err, "no stub matches this request");
  ASSERT(fault.fatal);
  ASSERT_INT_EQ(pass.calls, 1);
  ASSERT(pass.fatal);
  http_free(c);
  clk->ops->free(clk);
}

/* A real client stand-in: counts what it was given, answers at close. */
struct fake {
  http_client base;
  http_done_fn *done;
  void *data;
  int requests, closes;
  bool *freed;
};

static int fake_request(http_client *c, const struct http_request *req, http_done_fn *d,
                        void *data) {
  struct fake *f = (struct fake *)c;
  (void)req;
  f->requests++;
  f->done = d;
  f->data = data;
  return 0;
}
static void fake_close(http_client *c) {
  struct fake *f = (struct fake *)c;
  if (f->closes++ == 0 && f->done) f->done(f->data, NULL, "closed", false);
}
static void fake_free(http_client *c) {
  struct fake *f = (struct fake *)c;
  *f->freed = true;
  free(f);
}
static const struct http_ops fake_ops = {fake_request, fake_close, fake_free};

TEST_IMPL(http_stub_passes_to_the_real_client_and_closes_everything) {
  clk = clock_virtual_new(0);
  http_client *c = http_stub_new(clk, answer, NULL);
  struct fake *f = calloc(1, sizeof *f);
  bool freed = false;
  f->base.ops = &fake_ops;
  f->freed = &freed;
  http_stub_pass_to(c, &f->base);
  next = (struct next_answer){.kind = HTTP_STUB_PASS};
  struct got passed = {0}, slow = {0}, late = {0};
  ASSERT_OK(http_request(c, &REQ, done, &passed));
  ASSERT_INT_EQ(f->requests, 1);
  next = (struct next_answer){
      .kind = HTTP_STUB_RESPOND, .status = 200, .body = "x", .delay_ms = 60000};
  ASSERT_OK(http_request(c, &REQ, done, &slow));
  clock_virtual_advance(clk, 1000);
  ASSERT_INT_EQ(slow.calls, 0);

  http_close(c); /* both in flight fail once, the slow one's timer goes */
  ASSERT_INT_EQ(slow.calls, 1);
  ASSERT_STR_EQ(slow.err, "the HTTP client closed (the host is stopping)");
  ASSERT(!slow.fatal);
  ASSERT_INT_EQ(passed.calls, 1);
  ASSERT_STR_EQ(passed.err, "closed");
  ASSERT_INT_EQ(http_request(c, &REQ, done, &late), -1);
  http_close(c);
  clock_virtual_advance(clk, 120000);
  ASSERT_INT_EQ(slow.calls, 1);
  ASSERT_INT_EQ(late.calls, 0);
  ASSERT(!freed);
  http_free(c);
  ASSERT(freed);
  clk->ops->free(clk);
}
