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

/* 1994-11-06T08:49:37Z, the date RFC 9110 writes in its three forms. */
#define NOV_6_1994_MS 784111777000ull

static uint64_t wait_ms;

static int ra(const char *value, uint64_t wall_ms) {
  wait_ms = 12345; /* untouched on failure */
  return http_retry_after(value, strlen(value), wall_ms, &wait_ms);
}

TEST_IMPL(http_retry_after_reads_delta_seconds) {
  ASSERT_OK(ra("7", 0));
  ASSERT(wait_ms == 7000);
  ASSERT_OK(ra("0", 5));
  ASSERT(wait_ms == 0);
  ASSERT_OK(ra("  120\t", 0)); /* the spaces around a field value */
  ASSERT(wait_ms == 120000);
  ASSERT_OK(ra("007", 0));
  ASSERT(wait_ms == 7000);
  ASSERT_OK(ra("86400", 0));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
  /* past a day: capped, however many digits */
  ASSERT_OK(ra("86401", 0));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
  ASSERT_OK(ra("99999999999999999999999999999999999999", 0));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
}

TEST_IMPL(http_retry_after_refuses_what_is_not_delta_seconds_or_a_date) {
  const char *bad[] = {"",
                       "   ",
                       "-5",
                       "+5",
                       "1.5",
                       "1 0",
                       "5s",
                       "0x10",
                       "1e3",
                       "seven",
                       "Sun, 06 Nov 1994 08:49:37 UTC", /* GMT only */
                       "Sun, 06 Nov 1994 08:49:37 GMT extra",
                       "sun, 06 Nov 1994 08:49:37 GMT",
                       "Sun, 6 Nov 1994 08:49:37 GMT",
                       "Sun, 06 nov 1994 08:49:37 GMT",
                       "Sun, 06 Nov 94 08:49:37 GMT",
                       "Sun, 06 Nov 1994 8:49:37 GMT",
                       "Sun, 31 Nov 1994 08:49:37 GMT",
                       "Sun, 29 Feb 1995 08:49:37 GMT",
                       "Sun, 00 Nov 1994 08:49:37 GMT",
                       "Sun, 06 Nov 1994 24:00:00 GMT",
                       "Sun, 06 Nov 1994 08:60:37 GMT",
                       "Sun, 06 Nov 1994 08:49:61 GMT",
                       "Sun,  06 Nov 1994 08:49:37 GMT",
                       "Sunday, 06 Nov 1994 08:49:37 GMT",
                       "Sun, 06-Nov-94 08:49:37 GMT",
                       "Sun Nov 6 08:49:37 1994",
                       "Sun Nov  6 08:49:37 1994 GMT",
                       "Fooday, 06-Nov-94 08:49:37 GMT",
                       "7, 8"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (ra(bad[i], NOV_6_1994_MS - 60000) != -1) TEST_FAIL_("accepted \"%s\"", bad[i]);
    ASSERT(wait_ms == 12345);
  }
}

TEST_IMPL(http_retry_after_reads_the_three_date_forms) {
  const char *forms[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                         "Sun Nov  6 08:49:37 1994"};
  for (size_t i = 0; i < 3; i++) {
    /* the wall clock 30 s before it, then 2.5 s before it */
    ASSERT_OK(ra(forms[i], NOV_6_1994_MS - 30000));
    ASSERT(wait_ms == 30000);
    ASSERT_OK(ra(forms[i], NOV_6_1994_MS - 2500));
    ASSERT(wait_ms == 2500);
    /* at it, and after it: no wait */
    ASSERT_OK(ra(forms[i], NOV_6_1994_MS));
    ASSERT(wait_ms == 0);
    ASSERT_OK(ra(forms[i], NOV_6_1994_MS + 400));
    ASSERT(wait_ms == 0);
    ASSERT_OK(ra(forms[i], NOV_6_1994_MS + 86400000ull * 365 * 30));
    ASSERT(wait_ms == 0);
  }
  /* asctime's day may be two digits; a leap day; a leap second */
  ASSERT_OK(ra("Wed Nov 16 08:49:37 1994", NOV_6_1994_MS));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS); /* ten days ahead: capped */
  ASSERT_OK(ra("Thu, 29 Feb 2024 00:00:10 GMT", 1709164800000ull));
  ASSERT(wait_ms == 10000);
  ASSERT_OK(ra("Wed, 31 Dec 2025 23:59:60 GMT", 1767225600000ull - 1000));
  ASSERT(wait_ms == 1000);
  /* a date far ahead: a day at most */
  ASSERT_OK(ra("Fri, 31 Dec 9999 23:59:59 GMT", 1767225600000ull));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
  ASSERT_OK(ra("Fri, 02 Jan 2026 00:00:00 GMT", 1767225600000ull)); /* exactly a day */
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
  ASSERT_OK(ra("Thu, 01 Jan 2026 23:59:59 GMT", 1767225600000ull));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS - 1000);
}

TEST_IMPL(http_retry_after_rfc850_year_is_the_latest_within_50_years) {
  /* wall clock 2026-01-01: "94" is 1994, "26" 2026, "76" 2076 (50 years
   * ahead, capped at a day), "77" 1977 */
  const uint64_t jan_2026 = 1767225600000ull;
  ASSERT_OK(ra("Sunday, 06-Nov-94 08:49:37 GMT", jan_2026));
  ASSERT(wait_ms == 0);
  ASSERT_OK(ra("Thursday, 01-Jan-26 00:00:30 GMT", jan_2026));
  ASSERT(wait_ms == 30000);
  ASSERT_OK(ra("Wednesday, 01-Jan-76 00:00:00 GMT", jan_2026));
  ASSERT(wait_ms == HTTP_RETRY_AFTER_MAX_MS);
  ASSERT_OK(ra("Saturday, 01-Jan-77 00:00:00 GMT", jan_2026));
  ASSERT(wait_ms == 0);
}

static int ra_lines(const char *lines, uint64_t wall_ms) {
  wait_ms = 12345;
  return http_retry_after_lines(lines, strlen(lines), wall_ms, &wait_ms);
}

TEST_IMPL(http_retry_after_lines_takes_the_field_only_when_all_agree) {
  ASSERT_INT_EQ(ra_lines("", 0), 0);
  ASSERT_INT_EQ(ra_lines("Content-Type: text/plain\r\nX-Retry-After: 5\r\n", 0), 0);
  ASSERT(wait_ms == 12345);
  ASSERT_INT_EQ(ra_lines("Content-Type: text/plain\r\nretry-AFTER: 7\r\n", 0), 1);
  ASSERT(wait_ms == 7000);
  ASSERT_INT_EQ(ra_lines("Retry-After:7", 0), 1); /* no space, no line end */
  ASSERT(wait_ms == 7000);
  ASSERT_INT_EQ(ra_lines("Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\n", NOV_6_1994_MS - 5000),
                1);
  ASSERT(wait_ms == 5000);
  /* the same wait twice, in two forms */
  ASSERT_INT_EQ(ra_lines("Retry-After: 5\r\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
                         NOV_6_1994_MS - 5000),
                1);
  ASSERT(wait_ms == 5000);
  /* two that disagree, or one malformed beside a good one: none */
  ASSERT_INT_EQ(ra_lines("Retry-After: 5\r\nRetry-After: 6\r\n", 0), -1);
  ASSERT_INT_EQ(ra_lines("Retry-After: 5\r\nRetry-After: soon\r\n", 0), -1);
  ASSERT_INT_EQ(ra_lines("Retry-After: 5, 5\r\n", 0), -1);
  ASSERT_INT_EQ(ra_lines("Retry-After: \r\n", 0), -1);
  ASSERT(wait_ms == 12345);
}
