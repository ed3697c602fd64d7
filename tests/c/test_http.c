/* Tests for http.c: what every HTTP client refuses before sending (so a
 * handler cannot smuggle a header or reach another scheme), and the URL as
 * messages show it (never the password). */
#include "http.h"
#include "task.h"

static char err[256];

static int check(const char *method, const char *url, const char *header) {
  const char *headers[] = {header};
  struct http_request req = {.method = method,
                             .url = url,
                             .headers = headers,
                             .nheaders = header ? 1 : 0,
                             .timeout_ms = 1000,
                             .max_body = 10};
  err[0] = '\0';
  return http_request_check(&req, err, sizeof err);
}

TEST_IMPL(http_check_accepts_plain_requests) {
  ASSERT_INT_EQ(check("GET", "http://127.0.0.1:8080/x?y=1", NULL), 0);
  ASSERT_INT_EQ(check("POST", "HTTPS://hooks.example.com/p", "Idempotency-Key: a/b/1-0"), 0);
  ASSERT_INT_EQ(check("PATCH", "https://h/", "X-Empty:"), 0);
}

TEST_IMPL(http_check_refuses_what_could_smuggle_or_escape) {
  ASSERT_INT_EQ(check("get", "http://h/", NULL), -1);
  ASSERT_STR_EQ(err, "the method must be upper-case letters, got \"get\"");
  ASSERT_INT_EQ(check("GET\r\nX", "http://h/", NULL), -1);
  ASSERT_INT_EQ(check("", "http://h/", NULL), -1);
  const char *no_headers[] = {NULL};
  struct http_request head = {
      .method = "HEAD", .url = "http://h/", .headers = no_headers, .body = "x", .body_len = 1};
  ASSERT_INT_EQ(http_request_check(&head, err, sizeof err), -1);
  ASSERT_STR_EQ(err, "a HEAD request has no body");
  ASSERT_INT_EQ(check("GET", "file:///etc/passwd", NULL), -1);
  ASSERT_STR_EQ(err, "the URL must start with http:// or https://");
  ASSERT_INT_EQ(check("GET", "http://", NULL), -1);
  ASSERT_INT_EQ(check("GET", "http://h/a b", NULL), -1);
  ASSERT_STR_EQ(err, "the URL holds a space or a control character (encode it)");
  ASSERT_INT_EQ(check("GET", "http://h/\r\nHost: evil", NULL), -1);
  ASSERT_INT_EQ(check("GET", "http://h/", "X-A: 1\r\nX-Injected: 2"), -1);
  ASSERT_STR_EQ(err, "the value of header \"X-A\" holds a line break");
  ASSERT_INT_EQ(check("GET", "http://h/", "Bad Name: 1"), -1);
  ASSERT_STR_EQ(err, "header name \"Bad Name\" holds a space or a control character");
  ASSERT_INT_EQ(check("GET", "http://h/", "no colon"), -1);
  ASSERT_STR_EQ(err, "header line 1 is not \"Name: value\"");
  ASSERT_INT_EQ(check("GET", "http://h/", ": no name"), -1);
}

TEST_IMPL(http_redact_url_hides_the_password_only) {
  char out[128];
  ASSERT_STR_EQ(http_redact_url("https://user:secret@h:443/p?q=1", out, sizeof out),
                "https://user:***@h:443/p?q=1");
  ASSERT_STR_EQ(http_redact_url("https://user@h/p", out, sizeof out), "https://user@h/p");
  ASSERT_STR_EQ(http_redact_url("http://h/p@q:r", out, sizeof out), "http://h/p@q:r");
  ASSERT_STR_EQ(http_redact_url("http://a:b@c:d@h/", out, sizeof out), "http://a:***@h/");
  ASSERT_STR_EQ(http_redact_url("http://h:80", out, sizeof out), "http://h:80");
  char small[12];
  ASSERT_STR_EQ(http_redact_url("http://example.com/", small, sizeof small), "http://exam");
}
