/* console_http: the web console's HTTP/1.1 server (console.h), on the
 * caller's libuv loop. Requests are parsed by Node's http-parser (Debian's
 * libhttp-parser); one request per connection is handled at a time (a
 * pipelined one waits for the answer before it), connections are kept
 * alive, and these limits hold: CONSOLE_HTTP_CONNS connections (the oldest
 * idle one is closed for a new one, else the new one is refused), headers
 * of CONSOLE_HTTP_HEADERS_MAX bytes, a body of CONSOLE_HTTP_BODY_MAX bytes,
 * CONSOLE_HTTP_IDLE_MS without a request (or with an answer it does not
 * read), CONSOLE_HTTP_REQUEST_MS for a request to arrive. Every response carries the
 * security headers (no framing, no sniffing, no referrer, no caching, the
 * Content-Security-Policy of the pages). */
#ifndef LUASTREAM_CONSOLE_HTTP_H
#define LUASTREAM_CONSOLE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define CONSOLE_HTTP_CONNS 128
#define CONSOLE_HTTP_HEADERS_MAX 16384
#define CONSOLE_HTTP_BODY_MAX (1024 * 1024)
#define CONSOLE_HTTP_IDLE_MS 60000
#define CONSOLE_HTTP_REQUEST_MS 30000 /* for a request to arrive whole */

/* The policy of every page: scripts and styles of the console's own origin
 * only, no inline ones, no framing. */
#define CONSOLE_CSP                                                                 \
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

/* A request, whole. The header values kept are those the console looks at;
 * NULL when absent. A header of these given twice makes the request a 400. */
struct console_request {
  bool post;   /* else GET */
  char *path;  /* up to '?', as sent */
  char *query; /* after '?', "" when none */
  char *host, *origin, *cookie, *authorization, *content_type, *csrf;
  char *fetch_site; /* Sec-Fetch-Site, set by browsers only */
  char *body;       /* 0-terminated (the body may hold 0 bytes too) */
  size_t body_len;
  void *data;                  /* the caller's, for a deferred answer */
  char who[72];                /* the caller's: who asked */
  struct console_conn *conn;   /* NULL once the connection has gone */
  unsigned long long start_ns; /* when it was read whole (uv_hrtime) */
};

typedef struct console_http console_http;
/* A request to answer: with console_http_respond, now or later. */
typedef void console_http_fn(void *data, struct console_request *req);

struct uv_loop_s;
/* Listens on addr (ADDR:PORT, health_parse_addr). Returns NULL with why in
 * err when it cannot. */
console_http *console_http_start(struct uv_loop_s *loop, const char *addr, console_http_fn *fn,
                                 void *data, char *err, size_t errlen);
/* The port bound (for port 0). */
int console_http_port(const console_http *s);
/* The address given, as "ADDR:PORT" with the port bound. */
const char *console_http_addr(const console_http *s);

/* Answers req (and frees it): status, the Content-Type, more header lines
 * (each ending in \r\n; NULL for none) and the body. A request whose
 * connection has gone is only freed. */
void console_http_respond(struct console_request *req, int status, const char *content_type,
                          const char *headers, const char *body, size_t len);

/* Closes the listener and every connection; requests still unanswered are
 * answered into the void. The memory goes once libuv has closed the handles
 * (run the loop). */
void console_http_close(console_http *s);

#endif
