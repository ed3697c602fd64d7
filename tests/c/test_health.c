/* Tests for health.c's pure part: routing a request by its request line
 * (headers ignored, read up to the blank line), the response text, and the
 * --http address; and the server on a real loop running out of descriptors.
 * The server is exercised over real HTTP by tests/integration/health_spec.lua
 * and health_flood_spec.lua. */
#include "health.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "task.h"

static enum health_route route(const char *req) { return health_parse_request(req, strlen(req)); }

TEST_IMPL(health_routes_get_paths) {
  ASSERT_INT_EQ(route("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), HEALTH_LIVE);
  ASSERT_INT_EQ(route("GET /readyz HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"), HEALTH_READY);
  ASSERT_INT_EQ(route("GET /readyz HTTP/1.0\r\n\r\n"), HEALTH_READY);
  ASSERT_INT_EQ(route("GET /metrics HTTP/1.1\r\n\r\n"), HEALTH_METRICS);
  ASSERT_INT_EQ(route("POST /metrics HTTP/1.1\r\n\r\n"), HEALTH_NOT_ALLOWED);
  /* bare LF line ends, and a query string */
  ASSERT_INT_EQ(route("GET /healthz?verbose=1 HTTP/1.1\nHost: x\n\n"), HEALTH_LIVE);
  ASSERT_INT_EQ(route("GET / HTTP/1.1\r\n\r\n"), HEALTH_NOT_FOUND);
  ASSERT_INT_EQ(route("GET /healthz/ HTTP/1.1\r\n\r\n"), HEALTH_NOT_FOUND);
  ASSERT_INT_EQ(route("GET /readyzz HTTP/1.1\r\n\r\n"), HEALTH_NOT_FOUND);
  ASSERT_INT_EQ(route("GET /HEALTHZ HTTP/1.1\r\n\r\n"), HEALTH_NOT_FOUND);
}

TEST_IMPL(health_other_methods) {
  ASSERT_INT_EQ(route("POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), HEALTH_NOT_ALLOWED);
  ASSERT_INT_EQ(route("HEAD /healthz HTTP/1.1\r\n\r\n"), HEALTH_NOT_ALLOWED);
  ASSERT_INT_EQ(route("get /healthz HTTP/1.1\r\n\r\n"),
                HEALTH_NOT_ALLOWED); /* methods are case-sensitive */
  ASSERT_INT_EQ(route("DELETE /nothing HTTP/1.1\r\n\r\n"), HEALTH_NOT_FOUND);
}

TEST_IMPL(health_incomplete_until_blank_line) {
  ASSERT_INT_EQ(route(""), HEALTH_INCOMPLETE);
  ASSERT_INT_EQ(route("GET /hea"), HEALTH_INCOMPLETE);
  ASSERT_INT_EQ(route("GET /healthz HTTP/1.1\r\n"), HEALTH_INCOMPLETE);
  ASSERT_INT_EQ(route("GET /healthz HTTP/1.1\r\nHost: x\r\n"), HEALTH_INCOMPLETE);
  ASSERT_INT_EQ(route("GET /healthz HTTP/1.1\r\nHost: x\r\n\r"), HEALTH_INCOMPLETE);
  /* only the len bytes count, not what follows them */
  const char *req = "GET /healthz HTTP/1.1\r\n\r\n";
  ASSERT_INT_EQ(health_parse_request(req, strlen(req) - 1), HEALTH_INCOMPLETE);
  ASSERT_INT_EQ(health_parse_request(req, strlen(req)), HEALTH_LIVE);
}

TEST_IMPL(health_bad_requests) {
  ASSERT_INT_EQ(route("\x16\x03\x01\x02"), HEALTH_BAD_REQUEST); /* TLS hello: refused at once */
  ASSERT_INT_EQ(route(" GET /healthz HTTP/1.1\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("GET /healthz\r\n\r\n"), HEALTH_BAD_REQUEST); /* HTTP/0.9 */
  ASSERT_INT_EQ(route("GET  /healthz HTTP/1.1\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("GET /healthz HTTP/2.0\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("GET /healthz HTTP/1.1 x\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("GET /heal\x01thz HTTP/1.1\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("\r\n\r\n"), HEALTH_BAD_REQUEST);
  ASSERT_INT_EQ(route("GE(T /healthz HTTP/1.1\r\n\r\n"), HEALTH_BAD_REQUEST);
}

TEST_IMPL(health_response_text) {
  char out[512];
  int n = health_format_response(out, sizeof out, 200, "ok");
  ASSERT_STR_EQ(out,
                "HTTP/1.1 200 OK\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: 3\r\n"
                "Connection: close\r\n"
                "Cache-Control: no-store\r\n"
                "\r\n"
                "ok\n");
  ASSERT_INT_EQ(n, strlen(out));
  n = health_format_response(out, sizeof out, 503, "redis unreachable (redis://127.0.0.1:6379)");
  ASSERT(n > 0);
  ASSERT(strncmp(out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
  ASSERT_CONTAINS(out, "Content-Length: 43\r\n");
  ASSERT_CONTAINS(out, "\r\n\r\nredis unreachable (redis://127.0.0.1:6379)\n");
  health_format_response(out, sizeof out, 405, "use GET");
  ASSERT_CONTAINS(out, "\r\nAllow: GET\r\n");
  ASSERT_INT_EQ(health_format_response(out, 40, 200, "ok"), -1); /* does not fit */
}

TEST_IMPL(health_addresses) {
  char host[64], err[256];
  int port = -1;
  ASSERT_OK(health_parse_addr("127.0.0.1:8080", host, sizeof host, &port, err, sizeof err));
  ASSERT_STR_EQ(host, "127.0.0.1");
  ASSERT_INT_EQ(port, 8080);
  ASSERT_OK(health_parse_addr("[::1]:0", host, sizeof host, &port, err, sizeof err));
  ASSERT_STR_EQ(host, "::1");
  ASSERT_INT_EQ(port, 0);
  ASSERT_OK(health_parse_addr(":65535", host, sizeof host, &port, err, sizeof err));
  ASSERT_STR_EQ(host, "");
  ASSERT_INT_EQ(port, 65535);
  ASSERT_OK(health_parse_addr("localhost:9", host, sizeof host, &port, err, sizeof err));
  ASSERT_STR_EQ(host, "localhost");

  ASSERT_INT_EQ(health_parse_addr("8080", host, sizeof host, &port, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "ADDR:PORT");
  ASSERT_INT_EQ(health_parse_addr("127.0.0.1:65536", host, sizeof host, &port, err, sizeof err),
                -1);
  ASSERT_CONTAINS(err, "0 to 65535");
  ASSERT_INT_EQ(health_parse_addr("127.0.0.1:", host, sizeof host, &port, err, sizeof err), -1);
  ASSERT_INT_EQ(health_parse_addr("127.0.0.1:80x", host, sizeof host, &port, err, sizeof err), -1);
  ASSERT_INT_EQ(health_parse_addr("::1:8080", host, sizeof host, &port, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "brackets");
  ASSERT_INT_EQ(health_parse_addr("[::1:8080", host, sizeof host, &port, err, sizeof err), -1);
  ASSERT_INT_EQ(
      health_parse_addr("a-very-long-host-name-that-does-not-fit-in-sixty-four-bytes.example:1",
                        host, sizeof host, &port, err, sizeof err),
      -1);
}

/* ---- the server, on a real loop ---- */

static bool always_ready(void *data, char *why, size_t len) {
  (void)data, (void)why, (void)len;
  return true;
}

/* accept failing with EMFILE leaves the listener readable: the server must
 * stop watching it for a while rather than spin, and answer the connection
 * waiting in the backlog once a descriptor is free again. */
TEST_IMPL(health_out_of_descriptors_pauses_accepting) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  char err[256];
  health *hs = health_start(&loop, "127.0.0.1:0", always_ready, NULL, err, sizeof err);
  ASSERT_NOT_NULL(hs);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)health_port(hs)),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT_OK(connect(client, (struct sockaddr *)&sa, sizeof sa)); /* done by the kernel */
  const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_INT_EQ(write(client, req, strlen(req)), (ssize_t)strlen(req));

  /* No descriptor left: the soft limit at the lowest free one. */
  struct rlimit saved, none;
  ASSERT_OK(getrlimit(RLIMIT_NOFILE, &saved));
  int lowest = open("/dev/null", O_RDONLY);
  ASSERT(lowest >= 0);
  close(lowest);
  none = saved;
  none.rlim_cur = (rlim_t)lowest;
  ASSERT_OK(setrlimit(RLIMIT_NOFILE, &none));
  int turns = 0;
  for (uint64_t start = uv_hrtime(); uv_hrtime() - start < 300 * 1000000ULL; turns++)
    uv_run(&loop, UV_RUN_ONCE);
  ASSERT_OK(setrlimit(RLIMIT_NOFILE, &saved));
  /* paused 100 ms at a time: a few turns of the loop, not thousands */
  if (turns >= 50) TEST_FAIL_("the loop turned %d times in 300 ms: accept spins", turns);

  char answer[512];
  ssize_t got = 0;
  struct pollfd pfd = {.fd = client, .events = POLLIN};
  for (int i = 0; i < 500 && got <= 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (poll(&pfd, 1, 10) > 0) got = read(client, answer, sizeof answer - 1);
  }
  ASSERT(got > 0);
  answer[got] = '\0';
  ASSERT(strncmp(answer, "HTTP/1.1 200 OK\r\n", 17) == 0);
  close(client);
  health_close(hs);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}
