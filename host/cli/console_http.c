/* console_http: the web console's HTTP server (console_http.h).
 *
 * Each connection reads into its own buffer and feeds http-parser from it;
 * when a request is whole the parser is paused (bytes behind it stay in the
 * buffer), reading stops, and the request goes to the console. Its answer
 * is written, then the parser resumes on what is left, and reading starts
 * again when nothing is. A connection whose request is unanswered when it
 * closes leaves the request behind, orphaned (conn NULL): the answer frees it. */
#include "console_http.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "health.h"
#include "log.h"

#define SWEEP_MS 5000
#define READ_CHUNK 16384

struct console_conn {
  uv_tcp_t tcp;
  struct console_http *server;
  struct console_conn *prev, *next;
  http_parser parser;
  char *in; /* bytes read, not yet parsed from `parsed` on */
  size_t in_len, in_cap, parsed;
  struct console_request *req; /* being parsed, or in flight */
  bool in_flight;              /* req is with the console */
  bool reading, closing, keep_alive;
  bool writing;   /* an answer is being written */
  char field[32]; /* the header being read, when it is one the console keeps */
  size_t field_len;
  bool field_done;             /* its value has started */
  char **value;                /* where its value goes, NULL: not kept */
  size_t head_bytes;           /* of the request line and headers */
  bool bad;                    /* a header kept twice, or too large */
  bool head_done;              /* the headers are in: what comes as headers now is a trailer */
  unsigned long long begun_ms; /* when the request being read began */
  int refuse;                  /* a status to refuse the request with, 0: none */
  unsigned long long last_ms;
};

struct console_http {
  uv_tcp_t listener;
  uv_timer_t sweep;
  int open_handles;
  struct console_conn *conns; /* most recent first */
  int nconns;
  console_http_fn *fn;
  void *data;
  int port;
  char addr[300];
  bool closing;
};

static http_parser_settings settings;

/* ---- connections ---- */

static void request_free(struct console_request *r) {
  if (r == NULL) return;
  free(r->path);
  free(r->query);
  free(r->host);
  free(r->origin);
  free(r->cookie);
  free(r->authorization);
  free(r->content_type);
  free(r->csrf);
  free(r->fetch_site);
  free(r->body);
  free(r);
}

static void unlink_conn(struct console_conn *c) {
  struct console_http *s = c->server;
  if (c->prev)
    c->prev->next = c->next;
  else if (s->conns == c)
    s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  s->nconns--;
}

static void server_handle_closed(uv_handle_t *h);

static void conn_closed(uv_handle_t *h) {
  struct console_conn *c = h->data;
  struct console_http *s = c->server;
  free(c->in);
  free(c);
  server_handle_closed((uv_handle_t *)&s->listener);
}

static void conn_close(struct console_conn *c) {
  if (c->closing) return;
  c->closing = true;
  unlink_conn(c);
  if (c->req) {
    if (c->in_flight)
      c->req->conn = NULL; /* the console answers it later, into the void */
    else
      request_free(c->req);
    c->req = NULL;
  }
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct console_conn *c = h->data;
  if (c->in_cap - c->in_len < READ_CHUNK) {
    size_t cap = c->in_len + READ_CHUNK;
    char *in = realloc(c->in, cap);
    if (in == NULL) {
      *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
      return;
    }
    c->in = in;
    c->in_cap = cap;
  }
  *buf = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

struct write_req {
  uv_write_t w;
  struct console_conn *c;
  char *out;
};

static void parse(struct console_conn *c);
static void read_stop(struct console_conn *c);

/* A short answer the console never sees: a malformed or oversized request. */
static void refuse(struct console_conn *c, int status) {
  read_stop(c); /* nothing more is read: the connection closes once answered */
  struct console_request *r = c->req;
  if (r == NULL) {
    r = calloc(1, sizeof *r);
    if (r == NULL) {
      conn_close(c);
      return;
    }
    c->req = r;
  }
  r->conn = c;
  c->in_flight = true;
  c->keep_alive = false;
  char body[64];
  int n = snprintf(body, sizeof body, "{\"error\":\"%s\"}",
                   status == 413   ? "request too large"
                   : status == 431 ? "request headers too large"
                   : status == 405 ? "method not allowed"
                                   : "bad request");
  console_http_respond(r, status, "application/json", NULL, body, (size_t)n);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  struct console_conn *c = st->data;
  if (nread < 0) {
    conn_close(c);
    return;
  }
  c->in_len += (size_t)nread;
  c->last_ms = uv_now(st->loop);
  parse(c);
}

static void read_start(struct console_conn *c) {
  if (c->reading || c->closing) return;
  c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
  if (!c->reading) conn_close(c);
}

static void read_stop(struct console_conn *c) {
  if (!c->reading) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
}

/* Feeds the parser what is unparsed; a whole request goes to the console. */
static void parse(struct console_conn *c) {
  while (!c->closing && !c->in_flight && c->parsed < c->in_len) {
    size_t n = http_parser_execute(&c->parser, &settings, c->in + c->parsed, c->in_len - c->parsed);
    c->parsed += n;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (c->refuse) {
      refuse(c, c->refuse);
      return;
    }
    if (e == HPE_PAUSED) {
      http_parser_pause(&c->parser, 0);
      struct console_request *r = c->req;
      c->in_flight = true;
      c->keep_alive = http_should_keep_alive(&c->parser);
      r->conn = c;
      r->start_ns = uv_hrtime();
      read_stop(c);
      c->server->fn(c->server->data, r);
      return;
    }
    if (e != HPE_OK) {
      refuse(c, e == HPE_HEADER_OVERFLOW ? 431 : 400);
      return;
    }
  }
  if (c->closing || c->in_flight) return;
  /* all parsed: make room and read on */
  c->in_len = c->parsed = 0;
  read_start(c);
}

static void written(uv_write_t *w, int status) {
  struct write_req *wr = (struct write_req *)w;
  struct console_conn *c = wr->c;
  free(wr->out);
  free(wr);
  c->writing = false;
  if (c->closing) return;
  c->req = NULL;
  c->in_flight = false;
  c->last_ms = uv_now(c->tcp.loop);
  if (status != 0 || !c->keep_alive || c->server->closing) {
    conn_close(c);
    return;
  }
  if (c->parsed > 0) { /* keep what a pipelining client sent behind */
    memmove(c->in, c->in + c->parsed, c->in_len - c->parsed);
    c->in_len -= c->parsed;
    c->parsed = 0;
  }
  parse(c);
}

static const char *reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

void console_http_respond(struct console_request *req, int status, const char *content_type,
                          const char *headers, const char *body, size_t len) {
  struct console_conn *c = req->conn;
  if (c == NULL || c->closing) {
    request_free(req);
    return;
  }
  char head[2048];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\n"
                   "Content-Type: %s\r\n"
                   "Content-Length: %zu\r\n"
                   "Content-Security-Policy: " CONSOLE_CSP
                   "\r\n"
                   "X-Content-Type-Options: nosniff\r\n"
                   "X-Frame-Options: DENY\r\n"
                   "Referrer-Policy: no-referrer\r\n"
                   "Cross-Origin-Opener-Policy: same-origin\r\n"
                   "Cross-Origin-Resource-Policy: same-origin\r\n"
                   "Cache-Control: no-store\r\n"
                   "%s"
                   "Connection: %s\r\n\r\n",
                   status, reason_phrase(status), content_type, len, headers ? headers : "",
                   c->keep_alive ? "keep-alive" : "close");
  struct write_req *wr = malloc(sizeof *wr);
  char *out = n > 0 && (size_t)n < sizeof head ? malloc((size_t)n + len) : NULL;
  if (wr == NULL || out == NULL) {
    free(wr);
    free(out);
    c->req = NULL;
    c->in_flight = false;
    request_free(req);
    conn_close(c);
    return;
  }
  memcpy(out, head, (size_t)n);
  if (len) memcpy(out + n, body, len);
  request_free(req);
  c->req = NULL; /* freed; written() ends the exchange */
  wr->c = c;
  wr->out = out;
  uv_buf_t buf = uv_buf_init(out, (unsigned)((size_t)n + len));
  c->writing = true;
  c->last_ms = uv_now(c->tcp.loop);
  if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &buf, 1, written) != 0) {
    free(out);
    free(wr);
    c->in_flight = false;
    conn_close(c);
  }
}

/* ---- the parser's callbacks ---- */

static struct console_conn *conn_of(http_parser *p) { return p->data; }

static int append(char **dst, const char *at, size_t n) {
  size_t have = *dst ? strlen(*dst) : 0;
  char *s = realloc(*dst, have + n + 1);
  if (s == NULL) return -1;
  memcpy(s + have, at, n);
  s[have + n] = '\0';
  *dst = s;
  return 0;
}

static int count_head(struct console_conn *c, size_t n) {
  c->head_bytes += n;
  if (c->head_bytes > CONSOLE_HTTP_HEADERS_MAX) {
    c->refuse = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(http_parser *p) {
  struct console_conn *c = conn_of(p);
  c->req = calloc(1, sizeof *c->req);
  c->head_bytes = 0;
  c->bad = c->head_done = false;
  c->begun_ms = uv_now(c->tcp.loop);
  c->field_len = 0;
  c->field_done = false;
  c->value = NULL;
  return c->req ? 0 : -1;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  struct console_conn *c = conn_of(p);
  if (count_head(c, n)) return -1;
  return append(&c->req->path, at, n);
}

/* The value slot of the header just named, NULL when the console does not
 * look at it; a slot already filled makes the request a 400. */
static char **slot_of(struct console_conn *c) {
  struct console_request *r = c->req;
  static const struct {
    const char *name;
    size_t off;
  } kept[] = {
      {"host", offsetof(struct console_request, host)},
      {"origin", offsetof(struct console_request, origin)},
      {"cookie", offsetof(struct console_request, cookie)},
      {"authorization", offsetof(struct console_request, authorization)},
      {"content-type", offsetof(struct console_request, content_type)},
      {"x-csrf-token", offsetof(struct console_request, csrf)},
      {"sec-fetch-site", offsetof(struct console_request, fetch_site)},
  };
  if (c->field_len >= sizeof c->field) return NULL;
  c->field[c->field_len] = '\0';
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    if (strcasecmp(c->field, kept[i].name) != 0) continue;
    char **slot = (char **)((char *)r + kept[i].off);
    if (*slot != NULL) c->bad = true;
    return slot;
  }
  return NULL;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  struct console_conn *c = conn_of(p);
  if (count_head(c, n)) return -1;
  if (c->head_done) return 0; /* a chunked body's trailer: never a header of the request */
  if (c->field_done) {        /* a new header */
    c->field_len = 0;
    c->field_done = false;
    c->value = NULL;
  }
  if (c->field_len + n < sizeof c->field) memcpy(c->field + c->field_len, at, n);
  c->field_len += n;
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  struct console_conn *c = conn_of(p);
  if (count_head(c, n)) return -1;
  if (c->head_done) return 0;
  if (!c->field_done) {
    c->field_done = true;
    c->value = slot_of(c);
    if (c->value && *c->value == NULL && append(c->value, "", 0) != 0) return -1;
  }
  if (c->value == NULL || c->bad) return 0;
  return append(c->value, at, n);
}

static int on_headers_complete(http_parser *p) {
  struct console_conn *c = conn_of(p);
  struct console_request *r = c->req;
  c->head_done = true;
  if (c->bad) {
    c->refuse = 400;
    return -1;
  }
  if (p->method != HTTP_GET && p->method != HTTP_POST) {
    c->refuse = 405;
    return -1;
  }
  if (p->content_length != ULLONG_MAX && p->content_length > CONSOLE_HTTP_BODY_MAX) {
    c->refuse = 413;
    return -1;
  }
  r->post = p->method == HTTP_POST;
  if (r->path == NULL || r->path[0] != '/') {
    c->refuse = 400;
    return -1;
  }
  char *q = strchr(r->path, '?');
  r->query = strdup(q ? q + 1 : "");
  if (q) *q = '\0';
  char *hash = strchr(r->query ? r->query : "", '#');
  if (hash) *hash = '\0';
  return r->query ? 0 : -1;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  struct console_conn *c = conn_of(p);
  struct console_request *r = c->req;
  if (r->body_len + n > CONSOLE_HTTP_BODY_MAX) {
    c->refuse = 413;
    return -1;
  }
  char *b = realloc(r->body, r->body_len + n + 1);
  if (b == NULL) return -1;
  memcpy(b + r->body_len, at, n);
  r->body_len += n;
  b[r->body_len] = '\0';
  r->body = b;
  return 0;
}

static int on_message_complete(http_parser *p) {
  http_parser_pause(p, 1); /* parse() hands the request over */
  return 0;
}

/* ---- the listener ---- */

static void on_connection(uv_stream_t *l, int status) {
  struct console_http *s = l->data;
  if (status != 0 || s->closing) return;
  if (s->nconns >= CONSOLE_HTTP_CONNS) {
    /* room for the new one: the least recently used connection that waits
     * for a request */
    struct console_conn *oldest = NULL;
    for (struct console_conn *c = s->conns; c; c = c->next)
      if (!c->in_flight && (oldest == NULL || c->last_ms <= oldest->last_ms)) oldest = c;
    if (oldest) conn_close(oldest);
  }
  struct console_conn *c = calloc(1, sizeof *c);
  if (c == NULL || uv_tcp_init(l->loop, &c->tcp) != 0) {
    free(c);
    return;
  }
  c->server = s;
  c->tcp.data = c;
  s->open_handles++;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0 || s->nconns > CONSOLE_HTTP_CONNS) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->last_ms = uv_now(l->loop);
  read_start(c);
}

/* Closes a connection idle past CONSOLE_HTTP_IDLE_MS, one whose request
 * has taken CONSOLE_HTTP_REQUEST_MS to arrive (a byte at a time keeps no
 * connection), and one whose answer has not been taken for
 * CONSOLE_HTTP_IDLE_MS (a client that does not read). */
static void on_sweep(uv_timer_t *t) {
  struct console_http *s = t->data;
  uint64_t now = uv_now(t->loop);
  struct console_conn *next;
  for (struct console_conn *c = s->conns; c; c = next) {
    next = c->next;
    bool reading_one = c->req && !c->in_flight;
    if ((reading_one && now - c->begun_ms >= CONSOLE_HTTP_REQUEST_MS) ||
        (c->writing && now - c->last_ms >= CONSOLE_HTTP_IDLE_MS) ||
        (!c->in_flight && now - c->last_ms >= CONSOLE_HTTP_IDLE_MS))
      conn_close(c);
  }
}

static void server_handle_closed(uv_handle_t *h) {
  struct console_http *s = h->data;
  if (--s->open_handles == 0) free(s);
}

console_http *console_http_start(uv_loop_t *loop, const char *addr, console_http_fn *fn, void *data,
                                 char *err, size_t errlen) {
  settings = (http_parser_settings){.on_message_begin = on_message_begin,
                                    .on_url = on_url,
                                    .on_header_field = on_header_field,
                                    .on_header_value = on_header_value,
                                    .on_headers_complete = on_headers_complete,
                                    .on_body = on_body,
                                    .on_message_complete = on_message_complete};
  char host[256];
  int port;
  if (health_parse_addr(addr, host, sizeof host, &port, err, errlen) != 0) return NULL;
  if (host[0] == '\0') {
    snprintf(err, errlen,
             "--console %s: give the address to listen on, e.g. 127.0.0.1%s (0.0.0.0 for every "
             "address: see docs/operations.md, \"The web console\")",
             addr, addr);
    return NULL;
  }
  struct sockaddr_storage sa;
  int rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&sa);
  if (rc != 0) rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa);
  if (rc != 0) {
    snprintf(err, errlen, "--console %s: %s is not an IP address", addr, host);
    return NULL;
  }
  struct console_http *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(err, errlen, "--console %s: out of memory", addr);
    return NULL;
  }
  s->fn = fn;
  s->data = data;
  uv_tcp_init(loop, &s->listener);
  uv_timer_init(loop, &s->sweep);
  s->listener.data = s->sweep.data = s;
  s->open_handles = 2;
  rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
  if (rc != 0) {
    snprintf(err, errlen, "--console %s: cannot listen: %s", addr, uv_strerror(rc));
    s->closing = true;
    uv_close((uv_handle_t *)&s->listener, server_handle_closed);
    uv_close((uv_handle_t *)&s->sweep, server_handle_closed);
    return NULL;
  }
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
  s->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&bound)->sin_port);
  snprintf(s->addr, sizeof s->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, s->port);
  uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
  uv_unref((uv_handle_t *)&s->sweep);
  return s;
}

int console_http_port(const console_http *s) { return s->port; }
const char *console_http_addr(const console_http *s) { return s->addr; }

void console_http_close(console_http *s) {
  if (s == NULL || s->closing) return;
  s->closing = true;
  while (s->conns) conn_close(s->conns);
  uv_close((uv_handle_t *)&s->listener, server_handle_closed);
  uv_close((uv_handle_t *)&s->sweep, server_handle_closed);
}
