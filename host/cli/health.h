/* health: `luastream run --http ADDR:PORT`, the endpoints a container
 * orchestrator probes and Prometheus scrapes, over plain HTTP/1.1 on libuv
 * TCP.
 *
 *   GET /healthz   200 "ok" while the loop runs (liveness)
 *   GET /readyz    200 "ready", or 503 with one line saying why not (readiness,
 *                  asked of the caller through health_ready_fn on every request);
 *                  a 200 may go on with lines "note: ..." (a paused group)
 *   GET /metrics   200, the metrics page (metrics.h), built from the host's
 *                  counters: nothing is asked of Redis
 *
 * Other paths get 404, other methods on these paths 405. Every response
 * carries Connection: close: one request per connection, no keep-alive, no
 * chunking. Idle and slow clients cannot hold the port: connections have
 * deadlines and a cap, a share of the open-file limit (health_pool.h). The parser only reads the request line; headers are skipped up
 * to the blank line that ends them (read whole so that closing the socket
 * never resets a client still sending them). The request parser and the
 * response formatter are pure, for the unit tests; the rest is the libuv
 * server. The supervisor of worker processes (supervisor.h) serves the
 * same endpoints with /readyz and /metrics answered later, once its workers
 * have (health_set_defer), and each worker listens on a socket it was
 * handed (health_start_fd). */
#ifndef LUASTREAM_HEALTH_H
#define LUASTREAM_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

/* Most bytes of a request (request line and headers) the server reads; a
 * longer one gets 431. */
#define HEALTH_REQUEST_MAX 4096

enum health_route {
  HEALTH_INCOMPLETE,  /* no blank line after the headers yet: read more */
  HEALTH_BAD_REQUEST, /* not an HTTP/1.x request line: 400 */
  HEALTH_NOT_ALLOWED, /* /healthz or /readyz with a method other than GET: 405 */
  HEALTH_NOT_FOUND,   /* any other path: 404 */
  HEALTH_LIVE,        /* GET /healthz */
  HEALTH_READY,       /* GET /readyz */
  HEALTH_METRICS,     /* GET /metrics */
};

/* Routes the len bytes at buf, the start of a request: METHOD SP TARGET SP
 * HTTP/1.x, then headers (ignored) ending with an empty line (CRLF or bare
 * LF line ends both accepted). A query string does not change the route. */
enum health_route health_parse_request(const char *buf, size_t len);

/* Writes a whole response (status line, Content-Type text/plain,
 * Content-Length, Connection: close, Cache-Control: no-store, Allow: GET for
 * 405, then body and a newline) into out. Returns its length, or -1 when it
 * does not fit in cap. body is one line. */
int health_format_response(char *out, size_t cap, int status, const char *body);

/* Splits "HOST:PORT" ("127.0.0.1:8080", "[::1]:8080", "localhost:0", or
 * ":8080" for every interface, host then "") into host (brackets removed)
 * and port (0..65535; 0 picks a free one). Returns 0, or -1 with a reason. */
int health_parse_addr(const char *text, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen);

/* Asked on each GET /readyz: true when ready (with notes in why, one a line,
 * or ""), else false with one line in why. */
typedef bool health_ready_fn(void *data, char *why, size_t len);

typedef struct health health;
struct uv_loop_s;

/* Listens on addr (health_parse_addr) and logs `msg="health endpoint
 * listening" addr=... port=...` with the port actually bound. ready and data
 * are borrowed until health_close. Returns NULL with a reason in err when
 * the address is bad or cannot be bound. */
health *health_start(struct uv_loop_s *loop, const char *addr, health_ready_fn *ready, void *data,
                     char *err, size_t errlen);
/* The same on fd, a TCP socket already bound and listening (inherited from
 * the supervisor, supervisor.h); logs nothing. */
health *health_start_fd(struct uv_loop_s *loop, int fd, health_ready_fn *ready, void *data,
                        char *err, size_t errlen);

/* The port hs listens on. */
int health_port(const health *hs);

/* A request whose answer comes later (the supervisor asks its workers
 * first). health_set_defer: GET /readyz and GET /metrics go to fn instead of
 * being answered at once; fn must end each req with exactly one of
 * health_reply_text or health_reply_page, even after health_close (the
 * answer is then dropped). */
typedef struct health_request health_request;
typedef void health_defer_fn(void *data, enum health_route route, health_request *req);
void health_set_defer(health *hs, health_defer_fn *fn, void *data);
/* status with one line of text as the body. */
void health_reply_text(health_request *req, int status, const char *line);
/* 200 "ready" with notes (one a line, "" for none), as a ready host answers. */
void health_reply_ready(health_request *req, const char *notes);
/* 200 with page (malloc'd, len bytes, Prometheus' text format) as the body,
 * taken; NULL answers 500. */
void health_reply_page(health_request *req, char *page, size_t len);

/* Stops listening and closes every connection, answered or not. The memory
 * goes in the close callbacks: the loop must run once more. hs must not be
 * used after. */
void health_close(health *hs);

#endif
