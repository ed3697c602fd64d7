/* Tests for the supervisor's pure parts (supervisor.h: backoff, worker
 * names, signal names; scrape.h: the merged metrics page) and for a scrape
 * of a real health endpoint on a loop (health_start_fd, deferred answers).
 * The processes themselves are exercised by
 * tests/integration/processes_spec.lua. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "health.h"
#include "scrape.h"
#include "stop_signal.h"
#include "supervisor.h"
#include "task.h"

TEST_IMPL(supervisor_backoff_doubles_and_resets) {
  ASSERT_INT_EQ(supervisor_backoff(0, 0), 100);
  ASSERT_INT_EQ(supervisor_backoff(100, 50), 200);
  ASSERT_INT_EQ(supervisor_backoff(200, 50), 400);
  ASSERT_INT_EQ(supervisor_backoff(3200, 50), 5000);
  ASSERT_INT_EQ(supervisor_backoff(5000, 9999), 5000);
  /* a worker that ran a while starts again soon */
  ASSERT_INT_EQ(supervisor_backoff(5000, SUPERVISOR_STEADY_MS), 100);
}

TEST_IMPL(supervisor_worker_names_distinct) {
  char c[64];
  ASSERT_INT_EQ(supervisor_worker_names(0, 2, -1, NULL, c, sizeof c), 0);
  ASSERT_STR_EQ(c, "");
  ASSERT_INT_EQ(supervisor_worker_names(1, 2, -1, NULL, c, sizeof c), 1);
  /* --instance K: K*N+I, so K=0 and K=1 never overlap */
  ASSERT_INT_EQ(supervisor_worker_names(0, 3, 0, NULL, c, sizeof c), 0);
  ASSERT_INT_EQ(supervisor_worker_names(2, 3, 0, NULL, c, sizeof c), 2);
  ASSERT_INT_EQ(supervisor_worker_names(0, 3, 1, NULL, c, sizeof c), 3);
  ASSERT_INT_EQ(supervisor_worker_names(2, 3, 1, NULL, c, sizeof c), 5);
  ASSERT_INT_EQ(supervisor_worker_names(1, 2, 7, "billing", c, sizeof c), -1);
  ASSERT_STR_EQ(c, "billing-1");
}

TEST_IMPL(supervisor_signal_names) {
  char buf[24];
  ASSERT_STR_EQ(supervisor_signal_name(SIGKILL, buf, sizeof buf), "SIGKILL");
  ASSERT_STR_EQ(supervisor_signal_name(SIGSEGV, buf, sizeof buf), "SIGSEGV");
  ASSERT_STR_EQ(supervisor_signal_name(SIGTERM, buf, sizeof buf), "SIGTERM");
  ASSERT_STR_EQ(supervisor_signal_name(SIGRTMIN + 1, buf, sizeof buf) == buf ? "other" : "named",
                "other");
}

/* GNU timeout signals the child and then its group: one stop, not two. */
TEST_IMPL(stop_signal_same_one_again_is_the_same_stop) {
  struct stop_signals s = {0};
  ASSERT_INT_EQ(stop_signal_take(&s, SIGTERM, 5000), STOP_FIRST);
  ASSERT_INT_EQ(stop_signal_take(&s, SIGTERM, 5001), STOP_AGAIN);
  ASSERT_INT_EQ(stop_signal_take(&s, SIGTERM, 5000 + STOP_SIGNAL_SAME_MS - 1), STOP_AGAIN);
  ASSERT_INT_EQ(stop_signal_take(&s, SIGTERM, 5000 + STOP_SIGNAL_SAME_MS), STOP_NOW);
  ASSERT_INT_EQ(stop_signal_take(&s, SIGTERM, 5000 + STOP_SIGNAL_SAME_MS), STOP_NOW);
  /* a different signal is a second stop however soon it comes */
  struct stop_signals t = {0};
  ASSERT_INT_EQ(stop_signal_take(&t, SIGTERM, 0), STOP_FIRST);
  ASSERT_INT_EQ(stop_signal_take(&t, SIGINT, 1), STOP_NOW);
  /* a stop begun without a signal: any signal is the second one */
  struct stop_signals u = {0};
  stop_signal_begun(&u);
  ASSERT_INT_EQ(stop_signal_take(&u, SIGTERM, 0), STOP_NOW);
}

static const char page0[] =
    "# HELP a_total Things.\n"
    "# TYPE a_total counter\n"
    "a_total{handler=\"x\"} 1\n"
    "a_total{handler=\"y\"} 2\n"
    "# HELP h Latency.\n"
    "# TYPE h histogram\n"
    "h_bucket{le=\"0.1\"} 1\n"
    "h_bucket{le=\"+Inf\"} 2\n"
    "h_sum 0.3\n"
    "h_count 2\n";
/* worker 1 has a family worker 0 lacks, and an empty label set */
static const char page1[] =
    "# HELP a_total Things.\n"
    "# TYPE a_total counter\n"
    "a_total{handler=\"x\"} 5\n"
    "# HELP only_one Seen by one.\n"
    "# TYPE only_one gauge\n"
    "only_one{} 7\n"
    "# HELP h Latency.\n"
    "# TYPE h histogram\n"
    "h_bucket{le=\"0.1\"} 0\n"
    "h_bucket{le=\"+Inf\"} 1\n"
    "h_sum 0.5\n"
    "h_count 1\n";

TEST_IMPL(supervisor_merge_labels_and_groups) {
  const char *pages[3] = {page0, page1, NULL};
  unsigned restarts[3] = {0, 2, 5};
  size_t len = 0;
  char *m = scrape_merge(pages, restarts, 3, &len);
  ASSERT_NOT_NULL(m);
  ASSERT_INT_EQ(len, strlen(m));
  const char *want =
      "# HELP a_total Things.\n"
      "# TYPE a_total counter\n"
      "a_total{worker=\"0\",handler=\"x\"} 1\n"
      "a_total{worker=\"0\",handler=\"y\"} 2\n"
      "a_total{worker=\"1\",handler=\"x\"} 5\n"
      "# HELP h Latency.\n"
      "# TYPE h histogram\n"
      "h_bucket{worker=\"0\",le=\"0.1\"} 1\n"
      "h_bucket{worker=\"0\",le=\"+Inf\"} 2\n"
      "h_sum{worker=\"0\"} 0.3\n"
      "h_count{worker=\"0\"} 2\n"
      "h_bucket{worker=\"1\",le=\"0.1\"} 0\n"
      "h_bucket{worker=\"1\",le=\"+Inf\"} 1\n"
      "h_sum{worker=\"1\"} 0.5\n"
      "h_count{worker=\"1\"} 1\n"
      "# HELP only_one Seen by one.\n"
      "# TYPE only_one gauge\n"
      "only_one{worker=\"1\"} 7\n"
      "# HELP luastream_workers";
  ASSERT_INT_EQ(strncmp(m, want, strlen(want)), 0);
  ASSERT_CONTAINS(m, "\nluastream_workers 3\n");
  ASSERT_CONTAINS(m,
                  "\nluastream_worker_up{worker=\"0\"} 1\n"
                  "luastream_worker_up{worker=\"1\"} 1\n"
                  "luastream_worker_up{worker=\"2\"} 0\n");
  ASSERT_CONTAINS(m,
                  "\nluastream_worker_restarts_total{worker=\"1\"} 2\n"
                  "luastream_worker_restarts_total{worker=\"2\"} 5\n");
  /* every family's HELP once */
  ASSERT(strstr(strstr(m, "# HELP h ") + 1, "# HELP h ") == NULL);
  free(m);
}

TEST_IMPL(supervisor_merge_no_worker_answered) {
  const char *pages[2] = {NULL, NULL};
  unsigned restarts[2] = {0, 0};
  size_t len;
  char *m = scrape_merge(pages, restarts, 2, &len);
  ASSERT_NOT_NULL(m);
  ASSERT_INT_EQ(strncmp(m, "# HELP luastream_workers ", 25), 0);
  ASSERT_CONTAINS(m, "luastream_worker_up{worker=\"1\"} 0\n");
  free(m);
}

/* /readyz notes of the workers: each subscription's once, the first
 * worker's, lines other than notes left out. */
TEST_IMPL(supervisor_ready_notes_once_each) {
  const char *bodies[] = {
      "ready\n",
      "ready\nnote: subscription a: paused by x until resumed: r\n",
      NULL,
      "ready\nnote: subscription a: paused by x for 5 ms more: r\nnote: subscription b: breaker "
      "half-open (y): one entry probes\n",
  };
  char out[512];
  scrape_ready_notes(bodies, 4, out, sizeof out);
  ASSERT_STR_EQ(out,
                "subscription a: paused by x until resumed: r (worker 1)\n"
                "subscription b: breaker half-open (y): one entry probes (worker 3)");
  scrape_ready_notes(bodies, 1, out, sizeof out);
  ASSERT_STR_EQ(out, "");
  /* what does not fit is left out whole */
  scrape_ready_notes(bodies, 4, out, 40);
  ASSERT_STR_EQ(out, "");
}

/* ---- a scrape of a real health endpoint ---- */

struct got {
  int n;
  int status[4];
  char *body[4];
};

static void on_got(void *data, int index, int status, char *body, size_t len) {
  (void)len;
  struct got *g = data;
  g->n++;
  g->status[index] = status;
  g->body[index] = body;
}

static bool ready_no(void *data, char *why, size_t len) {
  (void)data;
  snprintf(why, len, "not yet");
  return false;
}

static void defer_page(void *data, enum health_route route, health_request *req) {
  (void)data;
  if (route == HEALTH_METRICS)
    health_reply_page(req, strdup("x_total 1\n"), 10);
  else
    health_reply_text(req, 200, "deferred ready");
}

/* A loopback socket listening on a free port. */
static int listening(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  ASSERT(fd >= 0);
  ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof a));
  ASSERT_OK(listen(fd, 8));
  ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &alen));
  *port = ntohs(a.sin_port);
  return fd;
}

TEST_IMPL(supervisor_scrape_health_endpoint) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  int port, idle_port;
  char err[256];
  health *hs = health_start_fd(&loop, listening(&port), ready_no, NULL, err, sizeof err);
  ASSERT_NOT_NULL(hs);
  int idle = listening(&idle_port); /* never accepts: a worker that hangs */
  struct got g = {0};
  ASSERT_OK(scrape_get(&loop, port, "/readyz", 5000, on_got, &g, 0));
  ASSERT_OK(scrape_get(&loop, port, "/healthz", 5000, on_got, &g, 1));
  ASSERT_OK(scrape_get(&loop, idle_port, "/readyz", 50, on_got, &g, 2));
  ASSERT_INT_EQ(g.n, 0); /* never from inside the call */
  while (g.n < 3) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_INT_EQ(g.status[0], 503);
  ASSERT_STR_EQ(g.body[0], "not yet\n");
  ASSERT_INT_EQ(g.status[1], 200);
  ASSERT_STR_EQ(g.body[1], "ok\n");
  ASSERT_INT_EQ(g.status[2], 0);
  ASSERT_NULL(g.body[2]);

  /* deferred: the answers come from the defer function */
  health_set_defer(hs, defer_page, NULL);
  ASSERT_OK(scrape_get(&loop, port, "/metrics", 5000, on_got, &g, 3));
  while (g.n < 4) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_INT_EQ(g.status[3], 200);
  ASSERT_STR_EQ(g.body[3], "x_total 1\n");

  health_close(hs);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
  close(idle);
  for (int i = 0; i < 4; i++) free(g.body[i]);
}

static health_request *held;

static void defer_hold(void *data, enum health_route route, health_request *req) {
  (void)data, (void)route;
  held = req;
}

/* A deferred request whose connection closed (health_close) before the
 * answer: the answer is dropped and its memory freed (ASan would tell). */
TEST_IMPL(supervisor_deferred_answer_after_close) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  int port;
  char err[256];
  health *hs = health_start_fd(&loop, listening(&port), ready_no, NULL, err, sizeof err);
  ASSERT_NOT_NULL(hs);
  health_set_defer(hs, defer_hold, NULL);
  held = NULL;
  struct got g = {0};
  ASSERT_OK(scrape_get(&loop, port, "/readyz", 5000, on_got, &g, 0));
  while (held == NULL) uv_run(&loop, UV_RUN_ONCE);
  health_close(hs);
  while (g.n < 1) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_INT_EQ(g.status[0], 0); /* closed without an answer */
  health_reply_page(held, strdup("late 1\n"), 7);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}
