/* http: the seam between handlers (ls.http) and HTTP servers.
 *
 * A request goes in, a response or the reason there is none comes back.
 * Two implementations fill the ops table: http_curl (libcurl's multi
 * interface on the host's libuv loop: real servers) and, for the test
 * harness, stubs declared by a spec on the virtual clock.
 *
 * Rules every implementation keeps (the broker's, for HTTP):
 * - a request accepted by http_request (return 0) completes exactly once: its
 *   callback receives a response, or res == NULL with err set (refused, DNS,
 *   timeout, TLS, a body over max_body, the client closed);
 * - fatal is false for all of those; true only when the request itself is
 *   at fault rather than the exchange (the test harness was given no answer
 *   for it): the handler's call then raises err instead of returning nil,
 *   err, so the mistake fails the delivery instead of passing for an outage;
 * - the callback never runs inside http_request;
 * - a request refused by http_request (return -1) never calls back;
 * - http_request copies what it needs of the request before it returns;
 * - a response is the client's, valid only during the callback;
 * - http_close fails every request in flight ("the HTTP client closed") and
 *   accepts no more; the client is freed with http_free once closed. */
#ifndef LUASTREAM_HTTP_H
#define LUASTREAM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_request {
  const char *method;         /* "GET", "POST", ...: upper-case letters */
  const char *url;            /* http:// or https:// */
  const char *const *headers; /* "Name: value" lines, no CR or LF in them */
  size_t nheaders;
  const char *body; /* NULL: no body */
  size_t body_len;
  uint64_t timeout_ms;   /* the whole exchange, queueing for a connection included */
  size_t max_body;       /* a longer response body fails the request */
  bool follow_redirects; /* at most HTTP_MAX_REDIRECTS */
};

struct http_response {
  long status;
  const char *headers; /* the last response's header lines, "Name: value\r\n" each */
  size_t headers_len;
  const char *body;
  size_t body_len;
};

#define HTTP_MAX_REDIRECTS 10

/* res valid during the call only; err NULL on a response, else why none;
 * fatal: see the rules above (never set with a response). */
typedef void http_done_fn(void *data, const struct http_response *res, const char *err, bool fatal);

typedef struct http_client http_client;

struct http_ops {
  int (*request)(http_client *c, const struct http_request *req, http_done_fn *done, void *data);
  void (*close)(http_client *c);
  void (*free)(http_client *c);
};

struct http_client {
  const struct http_ops *ops;
};

static inline int http_request(http_client *c, const struct http_request *req, http_done_fn *done,
                               void *data) {
  return c->ops->request(c, req, done, data);
}
static inline void http_close(http_client *c) {
  if (c) c->ops->close(c);
}
static inline void http_free(http_client *c) {
  if (c) c->ops->free(c);
}

/* Checks a request before it is sent, whoever sends it: method, URL scheme,
 * header lines (no CR, LF or NUL: a header cannot smuggle another). Returns
 * 0, or -1 with a reason in err. */
int http_request_check(const struct http_request *req, char *err, size_t errlen);

/* url with the password of its userinfo as "***", into out (always
 * terminated; cut at len). What messages and logs show. */
const char *http_redact_url(const char *url, char *out, size_t len);

/* The longest wait a Retry-After yields: one day. A larger delta-seconds or
 * a date further ahead gives this; nothing waits longer on a server's word. */
#define HTTP_RETRY_AFTER_MAX_MS 86400000u

/* A Retry-After value (RFC 9110, 10.2.3) as the milliseconds to wait from
 * wall_ms (Unix ms): delta-seconds (digits only: no sign, fraction or inner
 * space), or an HTTP-date in any of its three forms (IMF-fixdate
 * "Sun, 06 Nov 1994 08:49:37 GMT", the obsolete RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT", whose two-digit year is the latest one
 * at most 50 years ahead of wall_ms, and asctime "Sun Nov  6 08:49:37 1994").
 * A date at or before wall_ms waits 0; every wait is capped at
 * HTTP_RETRY_AFTER_MAX_MS. Spaces and tabs around the value are ignored.
 * Returns 0 with *wait_ms set, or -1 (*wait_ms untouched) when malformed. */
int http_retry_after(const char *value, size_t len, uint64_t wall_ms, uint64_t *wait_ms);

/* The Retry-After fields among header lines ("Name: value\r\n" each, as in
 * struct http_response; the name in any case): 1 with *wait_ms set when
 * there is at least one and every one parses to the same wait, 0 when there
 * is none, -1 when one is malformed or two disagree (which to believe
 * cannot be known). */
int http_retry_after_lines(const char *lines, size_t len, uint64_t wall_ms, uint64_t *wait_ms);

#endif
