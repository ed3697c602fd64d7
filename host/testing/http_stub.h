/* http_stub: the test harness's HTTP client (a backend of http.h).
 *
 * No request leaves the process: each one is put to an answer function
 * (the spec's stubs) when it is made, and its answer (a response, a
 * transport failure, or a fault of the request itself) arrives after the
 * answer's delay on the given clock: the virtual one in memory, so slow
 * servers and timeouts take no real time. An answer may also pass the
 * request on to a real client (http_stub_pass_to), for specs against real
 * servers. */
#ifndef LUASTREAM_HTTP_STUB_H
#define LUASTREAM_HTTP_STUB_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "http.h"

enum http_stub_kind {
  HTTP_STUB_FAULT,   /* the request is at fault: error (the handler's call raises) */
  HTTP_STUB_RESPOND, /* a response: status, headers, body */
  HTTP_STUB_FAIL,    /* a transport failure: error (the handler gets nil, error) */
  HTTP_STUB_PASS,    /* to the real client, now (a fault when there is none) */
};

/* One answer, filled by the answer function. Strings are malloc'd and
 * become the client's (NULL: none). */
struct http_stub_answer {
  enum http_stub_kind kind;
  long status;
  char *headers; /* "Name: value\r\n" lines */
  size_t headers_len;
  char *body;
  size_t body_len;
  char *error;
  uint64_t delay_ms; /* after how long on the clock the answer arrives */
};

/* Called inside http_request, once per request, with out zeroed. */
typedef void http_stub_answer_fn(void *data, const struct http_request *req,
                                 struct http_stub_answer *out);

/* A client on clock (which must outlive it); NULL when out of memory. */
http_client *http_stub_new(lclock *clock, http_stub_answer_fn *answer, void *data);

/* Where HTTP_STUB_PASS answers send their request: real, which the stub
 * client now owns (closed and freed with it); it replaces any earlier one. */
void http_stub_pass_to(http_client *stub, http_client *real);

#endif
