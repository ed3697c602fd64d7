/* health: the /healthz and /readyz endpoints (see health.h).
 *
 * One listener and one sweep timer belong to the server, one uv_tcp_t to each
 * connection. Every handle is closed through close_handle-style functions
 * (server_close_handles, conn_close) and its memory freed in its close
 * callback: the server struct goes when both of its handles have closed, the
 * connection struct in its own callback, after libuv has cancelled a write
 * still in flight. A connection answers once and closes; one that has not
 * sent a whole request within HEALTH_IDLE_MS is dropped by the sweep, so a
 * silent client cannot pile up connections. */
#include "health.h"

#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "log.h"
#include "metrics.h"

#define HEALTH_IDLE_MS 5000  /* a connection without a whole request by then is dropped */
#define HEALTH_SWEEP_MS 1000 /* how often idle connections are looked for */
#define HEALTH_MAX_CONNS 64  /* open at once; more are closed on accept */
#define HOST_MAX 256
#define RESPONSE_MAX 768

/* ---- the pure part: request line, response, address ---- */

static bool is_tchar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The end of the header block: just past the empty line, or NULL. */
static const char *headers_end(const char *buf, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (buf[i] != '\n') continue;
    /* a line end; is the next line empty? */
    if (i + 1 < len && buf[i + 1] == '\n') return buf + i + 2;
    if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') return buf + i + 3;
  }
  return NULL;
}

enum health_route health_parse_request(const char *buf, size_t len) {
  if (headers_end(buf, len) == NULL) {
    /* A request line with no headers and no blank line yet is incomplete;
     * so is anything cut short. Bytes that can never start a request line
     * are refused at once. */
    if (len > 0 && !is_tchar(buf[0])) return HEALTH_BAD_REQUEST;
    return HEALTH_INCOMPLETE;
  }
  const char *end = memchr(buf, '\n', len); /* the request line ends here */
  size_t line = (size_t)(end - buf);
  if (line > 0 && buf[line - 1] == '\r') line--;
  size_t m = 0;
  while (m < line && is_tchar(buf[m])) m++;
  if (m == 0 || m == line || buf[m] != ' ') return HEALTH_BAD_REQUEST;
  const char *target = buf + m + 1;
  const char *sp = memchr(target, ' ', line - m - 1);
  if (sp == NULL || sp == target) return HEALTH_BAD_REQUEST;
  size_t tlen = (size_t)(sp - target);
  const char *version = sp + 1;
  size_t vlen = line - (size_t)(version - buf);
  if (vlen != 8 || memcmp(version, "HTTP/1.", 7) != 0 || version[7] < '0' || version[7] > '9')
    return HEALTH_BAD_REQUEST;
  for (size_t i = 0; i < tlen; i++)
    if ((unsigned char)target[i] <= ' ' || target[i] == 0x7f) return HEALTH_BAD_REQUEST;
  const char *q = memchr(target, '?', tlen);
  size_t plen = q ? (size_t)(q - target) : tlen;
  enum health_route found = HEALTH_NOT_FOUND;
  if (plen == 8 && memcmp(target, "/healthz", 8) == 0)
    found = HEALTH_LIVE;
  else if (plen == 7 && memcmp(target, "/readyz", 7) == 0)
    found = HEALTH_READY;
  else if (plen == 8 && memcmp(target, "/metrics", 8) == 0)
    found = HEALTH_METRICS;
  if (found != HEALTH_NOT_FOUND && !(m == 3 && memcmp(buf, "GET", 3) == 0))
    return HEALTH_NOT_ALLOWED;
  return found;
}

static const char *reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

int health_format_response(char *out, size_t cap, int status, const char *body) {
  size_t blen = strlen(body) + 1; /* the newline */
  int n =
      snprintf(out, cap,
               "HTTP/1.1 %d %s\r\n"
               "Content-Type: text/plain; charset=utf-8\r\n"
               "Content-Length: %zu\r\n"
               "Connection: close\r\n"
               "Cache-Control: no-store\r\n"
               "%s"
               "\r\n"
               "%s\n",
               status, reason_phrase(status), blen, status == 405 ? "Allow: GET\r\n" : "", body);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

int health_parse_addr(const char *text, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen) {
  const char *colon = strrchr(text, ':');
  if (colon == NULL) {
    snprintf(err, errlen, "--http needs ADDR:PORT (e.g. 127.0.0.1:8080), got \"%s\"", text);
    return -1;
  }
  const char *h = text;
  size_t hlen = (size_t)(colon - text);
  if (hlen > 0 && h[0] == '[') { /* [v6]:port */
    if (hlen < 2 || h[hlen - 1] != ']') {
      snprintf(err, errlen, "--http: unbalanced brackets in \"%s\"", text);
      return -1;
    }
    h++;
    hlen -= 2;
  } else if (memchr(h, ':', hlen)) {
    snprintf(err, errlen, "--http: write an IPv6 address in brackets ([::1]:8080), got \"%s\"",
             text);
    return -1;
  }
  if (hlen >= hostlen) {
    snprintf(err, errlen, "--http: address too long in \"%s\"", text);
    return -1;
  }
  const char *p = colon + 1;
  size_t digits = strspn(p, "0123456789");
  long value = digits > 0 && digits <= 5 && p[digits] == '\0' ? strtol(p, NULL, 10) : -1;
  if (value < 0 || value > 65535) {
    snprintf(err, errlen, "--http: the port must be a number from 0 to 65535, got \"%s\"", p);
    return -1;
  }
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = (int)value;
  return 0;
}

/* ---- the server ---- */

struct hconn;

struct health {
  uv_tcp_t listener;
  uv_timer_t sweep; /* drops idle connections; runs while some are open */
  int open_handles; /* of the two above: the struct goes when both closed */
  bool closing;
  int port;
  health_ready_fn *ready;
  void *ready_data;
  struct hconn *conns; /* open connections, for the sweep and health_close */
  int nconns;
  health_defer_fn *defer; /* health_set_defer, or NULL */
  void *defer_data;
};

struct hconn {
  uv_tcp_t tcp; /* tcp.data points back here */
  health *hs;
  struct hconn *prev, *next; /* in hs->conns while open */
  uint64_t opened_ms;
  bool answered; /* the response is on its way: reading has stopped */
  size_t len;
  char buf[HEALTH_REQUEST_MAX];
  uv_write_t wr;
  char out[RESPONSE_MAX];
  char *page;    /* /metrics: the body, freed with the connection */
  bool deferred; /* handed to hs->defer, not replied to yet */
  bool closed;   /* the handle has closed: the reply frees c */
};

/* A deferred request is its connection. */
struct health_request {
  struct hconn c;
};

static void conn_closed(uv_handle_t *handle) {
  struct hconn *c = handle->data;
  if (c->deferred) { /* the deferred reply still holds c */
    c->closed = true;
    return;
  }
  free(c->page);
  free(c);
}

/* The one way a connection ends. Safe to call twice. */
static void conn_close(struct hconn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  health *hs = c->hs;
  if (c->prev)
    c->prev->next = c->next;
  else
    hs->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  hs->nconns--;
  if (hs->nconns == 0 && !hs->closing) uv_timer_stop(&hs->sweep);
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *req, int status) {
  (void)status; /* sent or not, the connection is done */
  conn_close(req->data);
}

static void answer(struct hconn *c, int status, const char *body) {
  c->answered = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  int n = health_format_response(c->out, sizeof c->out, status, body);
  if (n < 0) n = health_format_response(c->out, sizeof c->out, 500, "response too long");
  uv_buf_t b = uv_buf_init(c->out, (unsigned)n);
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) conn_close(c);
}

/* page (taken) as the body, in Prometheus' text format. */
static void answer_page(struct hconn *c, char *page, size_t len) {
  if (page == NULL) return answer(c, 500, "out of memory");
  c->answered = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->page = page;
  int n = snprintf(c->out, sizeof c->out,
                   "HTTP/1.1 200 OK\r\n"
                   "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\n"
                   "Connection: close\r\n"
                   "Cache-Control: no-store\r\n"
                   "\r\n",
                   len);
  uv_buf_t b[2] = {uv_buf_init(c->out, (unsigned)n), uv_buf_init(page, (unsigned)len)};
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, b, 2, on_written) != 0) conn_close(c);
}

/* This process's metrics page. */
static void answer_metrics(struct hconn *c) {
  size_t len;
  char *page = metrics_page(&len);
  answer_page(c, page, len);
}

/* The request is answered later by hs->defer; reading stops now. */
static void defer(struct hconn *c, enum health_route r) {
  c->answered = true;
  c->deferred = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->hs->defer(c->hs->defer_data, r, (health_request *)c);
}

/* The end of a deferred request: true when the connection is still there
 * to answer (else c is freed). */
static bool undefer(struct hconn *c) {
  c->deferred = false;
  if (!c->closed) return true;
  free(c->page);
  free(c);
  return false;
}

void health_reply_text(health_request *req, int status, const char *line) {
  struct hconn *c = &req->c;
  if (undefer(c)) answer(c, status, line);
}

void health_reply_page(health_request *req, char *page, size_t len) {
  struct hconn *c = &req->c;
  if (undefer(c))
    answer_page(c, page, len);
  else
    free(page);
}

void health_set_defer(health *hs, health_defer_fn *fn, void *data) {
  hs->defer = fn;
  hs->defer_data = data;
}

static void route(struct hconn *c, enum health_route r) {
  char why[512];
  switch (r) {
    case HEALTH_INCOMPLETE:
      if (c->len == sizeof c->buf) answer(c, 431, "request too large");
      return;
    case HEALTH_BAD_REQUEST: return answer(c, 400, "bad request");
    case HEALTH_NOT_ALLOWED: return answer(c, 405, "method not allowed: use GET");
    case HEALTH_NOT_FOUND: return answer(c, 404, "not found: try /healthz, /readyz or /metrics");
    case HEALTH_METRICS:
      if (c->hs->defer) return defer(c, r);
      return answer_metrics(c);
    case HEALTH_LIVE: return answer(c, 200, "ok");
    case HEALTH_READY:
      if (c->hs->defer) return defer(c, r);
      why[0] = '\0';
      if (c->hs->ready(c->hs->ready_data, why, sizeof why)) return answer(c, 200, "ready");
      /* One line, whatever the reason holds. */
      for (char *p = why; *p; p++)
        if (*p == '\r' || *p == '\n') *p = ' ';
      return answer(c, 503, why[0] ? why : "not ready");
  }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct hconn *c = handle->data;
  *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  struct hconn *c = stream->data;
  if (nread < 0) return conn_close(c); /* EOF before a whole request, or an error */
  if (nread == 0 || c->answered) return;
  c->len += (size_t)nread;
  route(c, health_parse_request(c->buf, c->len));
}

static void on_sweep(uv_timer_t *t) {
  health *hs = t->data;
  uint64_t now = uv_now(t->loop);
  for (struct hconn *c = hs->conns, *next; c; c = next) {
    next = c->next;
    if (!c->answered && now - c->opened_ms >= HEALTH_IDLE_MS) conn_close(c);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  health *hs = server->data;
  if (status < 0 || hs->closing) return;
  struct hconn *c = calloc(1, sizeof *c);
  if (c == NULL) return; /* the client waits in the backlog and retries */
  c->hs = hs;
  uv_tcp_init(server->loop, &c->tcp);
  c->tcp.data = c;
  c->opened_ms = uv_now(server->loop);
  c->next = hs->conns;
  if (hs->conns) hs->conns->prev = c;
  hs->conns = c;
  if (hs->nconns++ == 0) uv_timer_start(&hs->sweep, on_sweep, HEALTH_SWEEP_MS, HEALTH_SWEEP_MS);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || hs->nconns > HEALTH_MAX_CONNS ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
    conn_close(c);
}

static void server_handle_closed(uv_handle_t *handle) {
  health *hs = handle->data;
  if (--hs->open_handles == 0) free(hs);
}

/* The one way the server's own handles end. */
static void server_close_handles(health *hs) {
  hs->closing = true;
  uv_close((uv_handle_t *)&hs->sweep, server_handle_closed);
  uv_close((uv_handle_t *)&hs->listener, server_handle_closed);
}

/* Can this machine make IPv6 sockets at all? (A kernel without IPv6, or a
 * container with it switched off, cannot.) */
static bool ipv6_available(void) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

/* Binds the first address host:port resolves to. No host (":8080") means
 * every interface, IPv4 and IPv6: one dual-stack socket on "::" (libuv turns
 * IPV6_V6ONLY off unless asked), or 0.0.0.0 where IPv6 is unavailable. */
static int bind_addr(health *hs, const char *host, int port, char *err, size_t errlen) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%d", port);
  if (host[0] == '\0') host = ipv6_available() ? "::" : "0.0.0.0";
  /* Called once, before the loop runs: a blocking lookup is fine here. */
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "--http: cannot resolve \"%s\": %s", host, gai_strerror(rc));
    return -1;
  }
  rc = uv_tcp_bind(&hs->listener, res->ai_addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&hs->listener, 64, on_connection);
  freeaddrinfo(res);
  if (rc != 0) {
    snprintf(err, errlen,
             strchr(host, ':') ? "--http: cannot listen on [%s]:%d: %s"
                               : "--http: cannot listen on %s:%d: %s",
             host, port, uv_strerror(rc));
    return -1;
  }
  return 0;
}

/* A server with its listener and sweep timer made, not yet bound. */
static health *server_new(struct uv_loop_s *loop, health_ready_fn *ready, void *data, char *err,
                          size_t errlen) {
  health *hs = calloc(1, sizeof *hs);
  if (hs == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  hs->ready = ready;
  hs->ready_data = data;
  uv_tcp_init(loop, &hs->listener);
  uv_timer_init(loop, &hs->sweep);
  hs->listener.data = hs->sweep.data = hs;
  hs->open_handles = 2;
  return hs;
}

health *health_start(struct uv_loop_s *loop, const char *addr, health_ready_fn *ready, void *data,
                     char *err, size_t errlen) {
  char host[HOST_MAX];
  int port;
  if (health_parse_addr(addr, host, sizeof host, &port, err, errlen) != 0) return NULL;
  health *hs = server_new(loop, ready, data, err, errlen);
  if (hs == NULL) return NULL;
  if (bind_addr(hs, host, port, err, errlen) != 0) {
    server_close_handles(hs); /* freed once the loop runs */
    return NULL;
  }
  struct sockaddr_storage name;
  int namelen = sizeof name;
  char ip[64] = "?";
  if (uv_tcp_getsockname(&hs->listener, (struct sockaddr *)&name, &namelen) == 0) {
    if (name.ss_family == AF_INET6) {
      hs->port = ntohs(((struct sockaddr_in6 *)&name)->sin6_port);
      uv_ip6_name((struct sockaddr_in6 *)&name, ip, sizeof ip);
    } else {
      hs->port = ntohs(((struct sockaddr_in *)&name)->sin_port);
      uv_ip4_name((struct sockaddr_in *)&name, ip, sizeof ip);
    }
  }
  char where[96], pnum[8];
  snprintf(where, sizeof where, name.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, hs->port);
  snprintf(pnum, sizeof pnum, "%d", hs->port);
  log_line(LOG_INFO, NULL, "health endpoint listening", "addr", where, LOG_NUMBER "port", pnum,
           NULL);
  return hs;
}

health *health_start_fd(struct uv_loop_s *loop, int fd, health_ready_fn *ready, void *data,
                        char *err, size_t errlen) {
  health *hs = server_new(loop, ready, data, err, errlen);
  if (hs == NULL) return NULL;
  int rc = uv_tcp_open(&hs->listener, fd);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&hs->listener, 64, on_connection);
  if (rc != 0) {
    snprintf(err, errlen, "cannot listen on the socket the supervisor gave: %s", uv_strerror(rc));
    server_close_handles(hs); /* freed once the loop runs */
    return NULL;
  }
  return hs;
}

void health_close(health *hs) {
  if (hs == NULL || hs->closing) return;
  while (hs->conns) conn_close(hs->conns);
  server_close_handles(hs);
}
