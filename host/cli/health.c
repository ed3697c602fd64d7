/* health: the /healthz and /readyz endpoints (see health.h).
 *
 * The listening socket is watched by a uv_poll_t and accepted here (not by
 * uv_listen) so that a flood of connections is taken in bounded batches and
 * running out of descriptors pauses accepting instead of spinning. Each
 * connection is one uv_tcp_t, in a health_pool (health_pool.h) that closes
 * the oldest idle one at the cap and any past its deadline (the sweep
 * timer). Every handle is closed through close_handle-style functions
 * (server_close_handles, conn_close) and its memory freed in its close
 * callback: the server struct goes when all of its handles have closed (the
 * listening socket with it), the connection struct in its own callback,
 * after libuv has cancelled a write still in flight. A connection answers
 * once and closes. */
#define _GNU_SOURCE /* accept4: non-blocking and close-on-exec in one call */
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "health_pool.h"
#include "log.h"
#include "metrics.h"

#define HEALTH_SWEEP_MS 250        /* how often deadlines are looked at */
#define HEALTH_ACCEPT_BATCH 64     /* connections accepted per turn of the loop, at most */
#define HEALTH_BACKLOG 4096        /* the listen backlog (the kernel may cap it) */
#define HEALTH_PAUSE_MS 100        /* no accepting after accept failed for want of resources */
#define HEALTH_WARN_EVERY_MS 60000 /* at most one such warning a minute */
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
  uv_poll_t listener; /* the listening socket is readable: connections to accept */
  uv_timer_t sweep;   /* closes connections past their deadline; runs while some are open */
  uv_timer_t resume;  /* accepting again after running out of descriptors */
  int open_handles;   /* of the three above: the struct goes when all have closed */
  int fd;             /* the listening socket, closed with the server */
  bool polling;       /* listener made */
  bool closing;
  int port;
  health_ready_fn *ready;
  void *ready_data;
  struct health_pool pool; /* open connections, oldest first */
  uint64_t out_of_fds;     /* times accepting paused, for the warning */
  uint64_t warned_ms;      /* when the warning was last logged (0: never) */
  health_defer_fn *defer;  /* health_set_defer, or NULL */
  void *defer_data;
};

/* The request as it comes in, then the response: only a connection that has
 * sent something has one, so an idle connection costs its handle alone. */
struct hbuf {
  uv_write_t wr;
  char data[HEALTH_REQUEST_MAX];
};

struct hconn {
  uv_tcp_t tcp; /* tcp.data points back here */
  health *hs;
  struct health_slot slot; /* in hs->pool while open */
  struct hbuf *buf;        /* NULL until the first bytes */
  size_t len;
  char *page;    /* /metrics: the body, freed with the connection */
  bool answered; /* the response is on its way: reading has stopped */
  bool deferred; /* handed to hs->defer, not replied to yet */
  bool closed;   /* the handle has closed: the reply frees c */
};

/* A deferred request is its connection. */
struct health_request {
  struct hconn c;
};

static struct hconn *slot_conn(struct health_slot *s) {
  return (struct hconn *)(void *)((char *)s - offsetof(struct hconn, slot));
}

static void conn_free(struct hconn *c) {
  free(c->page);
  free(c->buf);
  free(c);
}

static void conn_closed(uv_handle_t *handle) {
  struct hconn *c = handle->data;
  if (c->deferred) { /* the deferred reply still holds c */
    c->closed = true;
    return;
  }
  conn_free(c);
}

/* The one way a connection ends. Safe to call twice. */
static void conn_close(struct hconn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  health *hs = c->hs;
  health_pool_remove(&hs->pool, &c->slot);
  if (hs->pool.n == 0 && !hs->closing) uv_timer_stop(&hs->sweep);
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *req, int status) {
  (void)status; /* sent or not, the connection is done */
  conn_close(req->data);
}

/* Reading stops; the answer has HEALTH_ANSWER_MS to be taken. false when
 * there is no memory for it (c is then closed). */
static bool start_answer(struct hconn *c) {
  c->answered = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  health_pool_answering(&c->slot, uv_now(c->tcp.loop));
  if (c->buf == NULL && (c->buf = malloc(sizeof *c->buf)) == NULL) {
    conn_close(c);
    return false;
  }
  c->buf->wr.data = c;
  return true;
}

static void answer(struct hconn *c, int status, const char *body) {
  if (!start_answer(c)) return;
  char *out = c->buf->data; /* the request is no longer needed */
  int n = health_format_response(out, RESPONSE_MAX, status, body);
  if (n < 0) n = health_format_response(out, RESPONSE_MAX, 500, "response too long");
  uv_buf_t b = uv_buf_init(out, (unsigned)n);
  if (uv_write(&c->buf->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) conn_close(c);
}

/* page (taken) as the body, in Prometheus' text format. */
static void answer_page(struct hconn *c, char *page, size_t len) {
  if (page == NULL) return answer(c, 500, "out of memory");
  if (!start_answer(c)) return free(page);
  c->page = page;
  char *out = c->buf->data;
  int n = snprintf(out, RESPONSE_MAX,
                   "HTTP/1.1 200 OK\r\n"
                   "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\n"
                   "Connection: close\r\n"
                   "Cache-Control: no-store\r\n"
                   "\r\n",
                   len);
  uv_buf_t b[2] = {uv_buf_init(out, (unsigned)n), uv_buf_init(page, (unsigned)len)};
  if (uv_write(&c->buf->wr, (uv_stream_t *)&c->tcp, b, 2, on_written) != 0) conn_close(c);
}

/* This process's metrics page. */
static void answer_metrics(struct hconn *c) {
  size_t len;
  char *page = metrics_page(&len);
  answer_page(c, page, len);
}

/* The request is answered later by hs->defer; reading stops now. Its
 * deadline starts now, so eviction leaves it alone while it waits. */
static void defer(struct hconn *c, enum health_route r) {
  c->answered = true;
  c->deferred = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  health_pool_answering(&c->slot, uv_now(c->tcp.loop));
  c->hs->defer(c->hs->defer_data, r, (health_request *)c);
}

/* The end of a deferred request: true when the connection is still there
 * to answer (else c is freed). */
static bool undefer(struct hconn *c) {
  c->deferred = false;
  if (!c->closed) return true;
  conn_free(c);
  return false;
}

void health_reply_text(health_request *req, int status, const char *line) {
  struct hconn *c = &req->c;
  if (undefer(c)) answer(c, status, line);
}

static void answer_ready(struct hconn *c, const char *notes);

void health_reply_ready(health_request *req, const char *notes) {
  struct hconn *c = &req->c;
  if (undefer(c)) answer_ready(c, notes);
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

/* "ready", and a line "note: ..." for each line of notes, as many whole
 * lines as the response holds (then "note: more: see luastream status"). */
static void answer_ready(struct hconn *c, const char *notes) {
  char body[RESPONSE_MAX - 200]; /* what the headers leave */
  const char *more = "\nnote: more: see luastream status";
  size_t n = (size_t)snprintf(body, sizeof body, "ready");
  while (*notes) {
    size_t line = strcspn(notes, "\r\n");
    if (line && n + 7 + line + strlen(more) >= sizeof body) {
      snprintf(body + n, sizeof body - n, "%s", more);
      break;
    }
    if (line) n += (size_t)snprintf(body + n, sizeof body - n, "\nnote: %.*s", (int)line, notes);
    notes += line;
    notes += strspn(notes, "\r\n");
  }
  answer(c, 200, body);
}

static void route(struct hconn *c, enum health_route r) {
  char why[1536];
  switch (r) {
    case HEALTH_INCOMPLETE:
      if (c->len == sizeof c->buf->data) answer(c, 431, "request too large");
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
      if (c->hs->ready(c->hs->ready_data, why, sizeof why)) return answer_ready(c, why);
      /* One line, whatever the reason holds. */
      for (char *p = why; *p; p++)
        if (*p == '\r' || *p == '\n') *p = ' ';
      return answer(c, 503, why[0] ? why : "not ready");
  }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct hconn *c = handle->data;
  if (c->buf == NULL) c->buf = malloc(sizeof *c->buf);
  /* No memory: a zero-length buffer, and on_read gets UV_ENOBUFS. */
  *buf = c->buf ? uv_buf_init(c->buf->data + c->len, (unsigned)(sizeof c->buf->data - c->len))
                : uv_buf_init(NULL, 0);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  struct hconn *c = stream->data;
  if (nread < 0) return conn_close(c); /* EOF before a whole request, or an error */
  if (nread == 0 || c->answered) return;
  c->len += (size_t)nread;
  route(c, health_parse_request(c->buf->data, c->len));
}

static void on_sweep(uv_timer_t *t) {
  health *hs = t->data;
  uint64_t now = uv_now(t->loop);
  for (struct health_slot *s = hs->pool.oldest, *next; s; s = next) {
    next = s->next;
    if (health_slot_expired(s, now)) conn_close(slot_conn(s));
  }
}

/* Serves fd, a connection just accepted. */
static void conn_open(health *hs, int fd) {
  /* At the cap, whether its client has sent anything decides (health_pool.h). */
  char first;
  ssize_t peeked = hs->pool.n < hs->pool.cap ? 0 : recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
  struct hconn *c =
      peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? NULL : calloc(1, sizeof *c);
  if (c == NULL) { /* gone already, or no memory */
    close(fd);
    return;
  }
  c->hs = hs;
  uv_tcp_init(hs->sweep.loop, &c->tcp);
  c->tcp.data = c;
  struct health_slot *victim =
      health_pool_add(&hs->pool, &c->slot, uv_now(hs->sweep.loop), peeked > 0);
  if (hs->pool.n == 1) uv_timer_start(&hs->sweep, on_sweep, HEALTH_SWEEP_MS, HEALTH_SWEEP_MS);
  if (uv_tcp_open(&c->tcp, fd) != 0) {
    close(fd); /* the handle did not take it */
    conn_close(c);
    return;
  }
  if (victim) conn_close(slot_conn(victim));
  if (victim != &c->slot && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
    conn_close(c);
}

static void on_listen(uv_poll_t *p, int status, int events);

static void on_resume(uv_timer_t *t) {
  health *hs = t->data;
  if (!hs->closing) uv_poll_start(&hs->listener, UV_READABLE, on_listen);
}

/* accept failed other than for want of connections (EMFILE, ENFILE,
 * ENOBUFS, ...): the listener stays readable, so stop watching it for
 * HEALTH_PAUSE_MS rather than spin, and close the oldest idle connection
 * to give a descriptor back. */
static void pause_accepting(health *hs, int err) {
  uv_poll_stop(&hs->listener);
  uv_timer_start(&hs->resume, on_resume, HEALTH_PAUSE_MS, 0);
  for (struct health_slot *s = hs->pool.oldest; s; s = s->next)
    if (!s->answering) {
      conn_close(slot_conn(s));
      break;
    }
  hs->out_of_fds++;
  uint64_t now = uv_now(hs->sweep.loop);
  if (hs->warned_ms != 0 && now - hs->warned_ms < HEALTH_WARN_EVERY_MS) return;
  hs->warned_ms = now;
  char times[24], open[16];
  snprintf(times, sizeof times, "%llu", (unsigned long long)hs->out_of_fds);
  snprintf(open, sizeof open, "%d", hs->pool.n);
  log_line(LOG_WARN, NULL, "health endpoint cannot accept: pausing", "error", strerror(err),
           LOG_NUMBER "times", times, LOG_NUMBER "open", open, NULL);
}

static void on_listen(uv_poll_t *p, int status, int events) {
  (void)events;
  health *hs = p->data;
  if (hs->closing) return;
  if (status < 0) return pause_accepting(hs, -status); /* an error on the socket */
  /* A bounded batch per turn of the loop: a flood of connections waits in
   * the backlog while the loop serves Redis too. A quarter of the cap at
   * most, so that two batches cannot push out a connection accepted with
   * its request before that request is read (on the next turn). */
  int batch = hs->pool.cap / 4;
  if (batch > HEALTH_ACCEPT_BATCH) batch = HEALTH_ACCEPT_BATCH;
  if (batch < 1) batch = 1;
  for (int i = 0; i < batch; i++) {
    int fd = accept4(hs->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      conn_open(hs, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) pause_accepting(hs, errno);
    return;
  }
}

static void server_handle_closed(uv_handle_t *handle) {
  health *hs = handle->data;
  if (--hs->open_handles > 0) return;
  if (hs->fd >= 0) close(hs->fd); /* no longer polled */
  free(hs);
}

/* The one way the server's own handles end. */
static void server_close_handles(health *hs) {
  hs->closing = true;
  uv_close((uv_handle_t *)&hs->sweep, server_handle_closed);
  uv_close((uv_handle_t *)&hs->resume, server_handle_closed);
  if (hs->polling) uv_close((uv_handle_t *)&hs->listener, server_handle_closed);
}

/* Polls fd, a listening socket, for connections. */
static int server_listen(health *hs, int fd) {
  hs->fd = fd;
  /* A deep backlog: a flood of connections waits there to be accepted
   * (and evicted) rather than making the kernel drop a probe's SYN. */
  int rc = listen(fd, HEALTH_BACKLOG) != 0 ? uv_translate_sys_error(errno) : 0;
  /* Linux: a connection is handed over once its first bytes are in (or
   * after a second), so idle ones wait in the kernel, not in the pool. */
  int defer_s = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof defer_s);
  if (rc == 0) rc = uv_poll_init_socket(hs->sweep.loop, &hs->listener, fd);
  if (rc == 0) {
    hs->listener.data = hs;
    hs->polling = true;
    hs->open_handles++;
    rc = uv_poll_start(&hs->listener, UV_READABLE, on_listen);
  }
  return rc;
}

/* Can this machine make IPv6 sockets at all? (A kernel without IPv6, or a
 * container with it switched off, cannot.) */
static bool ipv6_available(void) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

/* Binds the first address host:port resolves to and listens. No host
 * (":8080") means every interface, IPv4 and IPv6: one dual-stack socket on
 * "::", or 0.0.0.0 where IPv6 is unavailable. */
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
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int on = 1, off = 0;
  rc = fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
               (res->ai_family == AF_INET6 &&
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0) ||
               bind(fd, res->ai_addr, res->ai_addrlen) != 0
           ? uv_translate_sys_error(errno)
           : 0;
  freeaddrinfo(res);
  if (rc == 0) rc = server_listen(hs, fd);
  if (rc != 0) {
    if (fd >= 0 && hs->fd != fd) close(fd);
    snprintf(err, errlen,
             strchr(host, ':') ? "--http: cannot listen on [%s]:%d: %s"
                               : "--http: cannot listen on %s:%d: %s",
             host, port, uv_strerror(rc));
    return -1;
  }
  return 0;
}

/* A server with its timers made, not yet listening. Its connection cap is
 * a share of the open-file limit (health_pool.h). */
static health *server_new(struct uv_loop_s *loop, health_ready_fn *ready, void *data, char *err,
                          size_t errlen) {
  health *hs = calloc(1, sizeof *hs);
  if (hs == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  hs->ready = ready;
  hs->ready_data = data;
  hs->fd = -1;
  struct rlimit nofile;
  health_pool_init(&hs->pool,
                   health_pool_cap(getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 0));
  uv_timer_init(loop, &hs->sweep);
  uv_timer_init(loop, &hs->resume);
  hs->sweep.data = hs->resume.data = hs;
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
  struct sockaddr_storage name = {0};
  socklen_t namelen = sizeof name;
  char ip[64] = "?";
  if (getsockname(hs->fd, (struct sockaddr *)&name, &namelen) == 0) {
    if (name.ss_family == AF_INET6) {
      hs->port = ntohs(((struct sockaddr_in6 *)&name)->sin6_port);
      uv_ip6_name((struct sockaddr_in6 *)&name, ip, sizeof ip);
    } else {
      hs->port = ntohs(((struct sockaddr_in *)&name)->sin_port);
      uv_ip4_name((struct sockaddr_in *)&name, ip, sizeof ip);
    }
  }
  char where[96], pnum[8], cap[16];
  snprintf(where, sizeof where, name.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, hs->port);
  snprintf(pnum, sizeof pnum, "%d", hs->port);
  snprintf(cap, sizeof cap, "%d", hs->pool.cap);
  log_line(LOG_INFO, NULL, "health endpoint listening", "addr", where, LOG_NUMBER "port", pnum,
           LOG_NUMBER "max_connections", cap, NULL);
  return hs;
}

health *health_start_fd(struct uv_loop_s *loop, int fd, health_ready_fn *ready, void *data,
                        char *err, size_t errlen) {
  health *hs = server_new(loop, ready, data, err, errlen);
  if (hs == NULL) return NULL;
  int flags = fcntl(fd, F_GETFL);
  int rc = flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ? uv_translate_sys_error(errno)
                                                                    : server_listen(hs, fd);
  if (rc != 0) {
    snprintf(err, errlen, "cannot listen on the socket the supervisor gave: %s", uv_strerror(rc));
    if (hs->fd != fd) close(fd);
    server_close_handles(hs); /* freed once the loop runs */
    return NULL;
  }
  return hs;
}

int health_port(const health *hs) { return hs->port; }

void health_close(health *hs) {
  if (hs == NULL || hs->closing) return;
  while (hs->pool.oldest) conn_close(slot_conn(hs->pool.oldest));
  server_close_handles(hs);
}
