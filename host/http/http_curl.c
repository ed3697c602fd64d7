/* http_curl: libcurl multi on libuv; see http_curl.h. The only file in the
 * project that includes libcurl.
 *
 * libcurl rules this code leans on (libcurl-multi(3), CURLMOPT_SOCKETFUNCTION,
 * CURLMOPT_TIMERFUNCTION):
 * - the socket callback says which sockets to watch for what; CURL_POLL_REMOVE
 *   comes before libcurl closes one, so its uv_poll stops while the fd is
 *   still that socket;
 * - the timer callback only arms or stops our timer: libcurl must not be
 *   called back from inside it, so a 0 ms timeout fires from the loop;
 * - a finished transfer is read with curl_multi_info_read after
 *   curl_multi_socket_action, and its message is gone once the handle is
 *   removed: the result is taken first. */
#include "http_curl.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define SPARE_KEPT 64            /* finished transfers kept for reuse */
#define HEADERS_MAX (256 * 1024) /* a response's header lines, all of them */
#define BUFFER_KEPT (64 * 1024)  /* a kept transfer's buffers above this are freed */

struct curl_client;

/* One request: its easy handle and what libcurl writes into. */
struct transfer {
  struct curl_client *cc;
  CURL *easy;
  struct curl_slist *headers;
  char *out; /* the request body: libcurl reads it while it runs */
  size_t out_cap;
  char *body; /* the response body */
  size_t body_len, body_cap;
  char *head; /* the last response's header lines */
  size_t head_len, head_cap;
  size_t max_body;
  bool too_large; /* the body passed max_body */
  bool headers_too_large;
  uint64_t timeout_ms;
  http_done_fn *done;
  void *data;
  char errbuf[CURL_ERROR_SIZE];
  struct transfer *prev, *next; /* the running list, or the spare list (next) */
};

/* A socket libcurl asked us to watch. Between transfers a kept connection's
 * socket is not watched, but its uv_poll stays (stopped): making one costs
 * libuv three system calls, and a connection is reused many times. Only
 * sockets libcurl opened and closes through our callbacks are kept so (its
 * connections'): the uv_poll is closed when libcurl closes the socket, while
 * the fd is still that socket (closing a uv_poll removes its fd number from
 * epoll, which by then could be another handle's). Any other socket libcurl
 * watches (its resolver's) loses its uv_poll as soon as it is not watched. */
struct sock {
  uv_poll_t poll;
  curl_socket_t fd;
  struct curl_client *cc;
};

struct curl_client {
  http_client base;
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  char *ca_file;
  struct transfer *running;
  struct transfer *spare;
  size_t nspare;
  struct fd_slot {
    struct sock *s; /* its uv_poll, or NULL */
    bool ours;      /* opened by on_open_socket, to be closed by on_close_socket */
  } * fds;          /* by fd */
  size_t nfd;
  int open_handles; /* the timer and the polls, until their close callbacks ran */
  bool closed;
  bool free_wanted; /* http_free came while handles were still closing */
};

static int clients; /* curl_global_init is counted */

const char *http_curl_version(void) { return curl_version(); }

/* ---- buffers ---- */

static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t want = *cap ? *cap : 4096;
    while (want < *len + n + 1) want *= 2;
    char *b = realloc(*buf, want);
    if (b == NULL) return -1;
    *buf = b;
    *cap = want;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

static void shrink(char **buf, size_t *cap) {
  if (*cap > BUFFER_KEPT) {
    free(*buf);
    *buf = NULL;
    *cap = 0;
  }
}

/* ---- transfers ---- */

static size_t on_body(char *p, size_t size, size_t n, void *ud);
static size_t on_header(char *p, size_t size, size_t n, void *ud);
static int on_close_socket(void *clientp, curl_socket_t fd);
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a);

static bool header_named(const char *line, const char *name) {
  size_t n = strlen(name);
  return strncasecmp(line, name, n) == 0 && line[n] == ':';
}

#define SET(opt, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, v)

/* What every request of a transfer's easy handle has: set when it is made,
 * so a kept handle is not reset and set up again per request. */
static int setup_once(struct curl_client *cc, struct transfer *t) {
  CURL *e = t->easy;
  CURLcode rc = CURLE_OK;
  SET(CURLOPT_PRIVATE, (void *)t);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, (void *)t);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, (void *)t);
  SET(CURLOPT_ERRORBUFFER, t->errbuf);
  SET(CURLOPT_NOSIGNAL, 1L);
  /* A transfer that ends while its name lookup runs must not wait for the
   * resolver thread (getaddrinfo may take many seconds): the loop would. */
  SET(CURLOPT_QUICK_EXIT, 1L);
  SET(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  SET(CURLOPT_OPENSOCKETDATA, (void *)cc);
  SET(CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
  SET(CURLOPT_CLOSESOCKETDATA, (void *)cc);
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_MAXREDIRS, (long)HTTP_MAX_REDIRECTS);
  SET(CURLOPT_USERAGENT, "luastream/" LUASTREAM_VERSION);
  if (cc->ca_file) SET(CURLOPT_CAINFO, cc->ca_file);
  return rc == CURLE_OK ? 0 : -1;
}

/* What this request sets; every option one request may set is set by each,
 * so nothing of the handle's last request is left over. */
static int add_header(struct transfer *t, const char *line) {
  struct curl_slist *l = curl_slist_append(t->headers, line);
  if (l == NULL) return -1;
  t->headers = l;
  return 0;
}

static int setup(struct transfer *t, const struct http_request *req) {
  CURL *e = t->easy;
  bool get = strcmp(req->method, "GET") == 0 && req->body == NULL;
  bool head = strcmp(req->method, "HEAD") == 0;
  bool post = strcmp(req->method, "POST") == 0;
  bool sends_body = !get && !head && (req->body != NULL || post);
  bool typed = false;
  char line[256];
  for (size_t i = 0; i < req->nheaders; i++) {
    const char *h = req->headers[i], *colon = strchr(h, ':'), *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    /* libcurl reads "Name:" as "do not send Name": an empty value goes as
     * "Name;", which it sends as "Name:". */
    if (*v == '\0' && (size_t)(colon - h) < sizeof line - 1) {
      snprintf(line, sizeof line, "%.*s;", (int)(colon - h), h);
      h = line;
    }
    if (add_header(t, h) != 0) return -1;
    typed = typed || header_named(req->headers[i], "content-type");
  }
  /* No "Expect: 100-continue" round trip before a larger body; no form
   * content type that the handler did not ask for. */
  if (add_header(t, "Expect:") != 0 ||
      (sends_body && !typed && add_header(t, "Content-Type:") != 0))
    return -1;
  t->max_body = req->max_body;
  t->timeout_ms = req->timeout_ms;
  CURLcode rc = CURLE_OK;
  SET(CURLOPT_URL, req->url);
  SET(CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
  SET(CURLOPT_FOLLOWLOCATION, req->follow_redirects ? 1L : 0L);
  SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_body);
  SET(CURLOPT_HTTPHEADER, t->headers);
  SET(CURLOPT_CUSTOMREQUEST, get || head || post ? NULL : req->method);
  if (head) {
    SET(CURLOPT_NOBODY, 1L); /* after HTTPGET would undo it: HTTPGET is not set */
  } else if (!sends_body) {
    SET(CURLOPT_NOBODY, 0L);
    SET(CURLOPT_HTTPGET, 1L); /* no body; CUSTOMREQUEST names another method */
  } else {
    SET(CURLOPT_NOBODY, 0L);
    /* our copy: libcurl reads POSTFIELDS while the transfer runs */
    size_t len = req->body ? req->body_len : 0;
    if (len + 1 > t->out_cap) {
      char *b = realloc(t->out, len + 1);
      if (b == NULL) return -1;
      t->out = b;
      t->out_cap = len + 1;
    }
    if (len) memcpy(t->out, req->body, len);
    t->out[len] = '\0';
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    SET(CURLOPT_POSTFIELDS, t->out);
  }
  return rc == CURLE_OK ? 0 : -1;
}

#undef SET

static void transfer_destroy(struct transfer *t) {
  if (t->easy) curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->headers);
  free(t->out);
  free(t->body);
  free(t->head);
  free(t);
}

static struct transfer *transfer_get(struct curl_client *cc) {
  struct transfer *t = cc->spare;
  if (t) {
    cc->spare = t->next;
    cc->nspare--;
  } else {
    t = calloc(1, sizeof *t);
    if (t == NULL) return NULL;
    t->cc = cc;
    if ((t->easy = curl_easy_init()) == NULL || setup_once(cc, t) != 0) {
      if (t->easy) curl_easy_cleanup(t->easy);
      free(t);
      return NULL;
    }
  }
  curl_slist_free_all(t->headers);
  t->headers = NULL;
  t->body_len = t->head_len = 0;
  t->too_large = t->headers_too_large = false;
  t->errbuf[0] = '\0';
  t->prev = t->next = NULL;
  return t;
}

static void transfer_put(struct curl_client *cc, struct transfer *t) {
  if (cc->closed || cc->nspare >= SPARE_KEPT) {
    transfer_destroy(t);
    return;
  }
  shrink(&t->out, &t->out_cap);
  shrink(&t->body, &t->body_cap);
  shrink(&t->head, &t->head_cap);
  t->done = NULL;
  t->data = NULL;
  t->next = cc->spare;
  cc->spare = t;
  cc->nspare++;
}

static void running_add(struct curl_client *cc, struct transfer *t) {
  t->prev = NULL;
  t->next = cc->running;
  if (cc->running) cc->running->prev = t;
  cc->running = t;
}

static void running_remove(struct curl_client *cc, struct transfer *t) {
  if (t->prev)
    t->prev->next = t->next;
  else
    cc->running = t->next;
  if (t->next) t->next->prev = t->prev;
  t->prev = t->next = NULL;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  struct transfer *t = ud;
  size_t len = size * n;
  if (t->body_len + len > t->max_body) {
    t->too_large = true;
    return 0; /* not len: libcurl ends the transfer with CURLE_WRITE_ERROR */
  }
  return append(&t->body, &t->body_len, &t->body_cap, p, len) == 0 ? len : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  struct transfer *t = ud;
  size_t len = size * n;
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
    t->head_len = 0; /* a status line: a new response (after 100 Continue, a redirect) */
    return len;
  }
  if (len <= 2) return len; /* the empty line that ends the headers */
  if (t->head_len + len > HEADERS_MAX) {
    t->headers_too_large = true;
    return 0;
  }
  return append(&t->head, &t->head_len, &t->head_cap, p, len) == 0 ? len : 0;
}

/* Finished with rc: the caller's callback, then the transfer is kept. */
static void transfer_finish(struct curl_client *cc, struct transfer *t, CURLcode rc) {
  http_done_fn *done = t->done;
  void *data = t->data;
  if (rc == CURLE_OK) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    struct http_response res = {.status = status,
                                .headers = t->head ? t->head : "",
                                .headers_len = t->head_len,
                                .body = t->body ? t->body : "",
                                .body_len = t->body_len};
    done(data, &res, NULL, false);
  } else {
    char why[CURL_ERROR_SIZE + 96];
    if (t->headers_too_large)
      snprintf(why, sizeof why, "the response headers are larger than %d bytes", HEADERS_MAX);
    else if (t->too_large || rc == CURLE_FILESIZE_EXCEEDED)
      snprintf(why, sizeof why, "the response body is larger than %zu bytes (max_body)",
               t->max_body);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
      snprintf(why, sizeof why, "no response within %llums", (unsigned long long)t->timeout_ms);
    else
      snprintf(why, sizeof why, "%s", t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
    done(data, NULL, why, false);
  }
  transfer_put(cc, t);
}

/* The transfers libcurl has finished. */
static void take_finished(struct curl_client *cc) {
  CURLMsg *msg;
  int left;
  while (!cc->closed && (msg = curl_multi_info_read(cc->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *easy = msg->easy_handle;
    CURLcode rc = msg->data.result;
    struct transfer *t = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
    curl_multi_remove_handle(cc->multi, easy);
    running_remove(cc, t);
    transfer_finish(cc, t, rc);
  }
}

/* ---- libcurl's sockets and timer on the loop ---- */

static void handle_closed(struct curl_client *cc) {
  if (--cc->open_handles == 0 && cc->free_wanted) {
    free(cc->ca_file);
    free(cc);
    if (--clients == 0) curl_global_cleanup();
  }
}

static void sock_closed(uv_handle_t *h) {
  struct sock *s = h->data;
  struct curl_client *cc = s->cc;
  free(s);
  handle_closed(cc);
}

static void timer_closed(uv_handle_t *h) { handle_closed(h->data); }

static void sock_close(struct curl_client *cc, struct sock *s) {
  cc->fds[s->fd].s = NULL;
  uv_close((uv_handle_t *)&s->poll, sock_closed);
}

/* The slot of fd, the table grown to hold it; NULL when out of memory. */
static struct fd_slot *fd_slot(struct curl_client *cc, curl_socket_t fd) {
  if (fd < 0) return NULL;
  if ((size_t)fd >= cc->nfd) {
    size_t n = cc->nfd ? cc->nfd : 64;
    while (n <= (size_t)fd) n *= 2;
    struct fd_slot *v = realloc(cc->fds, n * sizeof *v);
    if (v == NULL) return NULL;
    memset(v + cc->nfd, 0, (n - cc->nfd) * sizeof *v);
    cc->fds = v;
    cc->nfd = n;
  }
  return &cc->fds[fd];
}

static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
  (void)purpose;
  struct curl_client *cc = clientp;
  curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  if (fd < 0) return CURL_SOCKET_BAD;
  struct fd_slot *slot = fd_slot(cc, fd);
  if (slot == NULL) {
    close(fd);
    return CURL_SOCKET_BAD;
  }
  slot->ours = true;
  return fd;
}

static int on_close_socket(void *clientp, curl_socket_t fd) {
  struct curl_client *cc = clientp;
  if (fd >= 0 && (size_t)fd < cc->nfd) {
    if (cc->fds[fd].s) sock_close(cc, cc->fds[fd].s);
    cc->fds[fd].ours = false;
  }
  return close(fd);
}

/* The uv_poll of fd: the one kept from an earlier transfer, or a new one. */
static struct sock *sock_of(struct curl_client *cc, curl_socket_t fd) {
  struct fd_slot *slot = fd_slot(cc, fd);
  if (slot == NULL) return NULL;
  if (slot->s) return slot->s;
  struct sock *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  if (uv_poll_init_socket(cc->loop, &s->poll, fd) != 0) {
    free(s);
    return NULL;
  }
  s->fd = fd;
  s->cc = cc;
  s->poll.data = s;
  slot->s = s;
  cc->open_handles++;
  return s;
}

static void on_poll(uv_poll_t *p, int status, int events) {
  struct sock *s = p->data;
  struct curl_client *cc = s->cc;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running;
  /* may remove s (CURL_POLL_REMOVE): not touched after */
  curl_multi_socket_action(cc->multi, s->fd, flags, &running);
  take_finished(cc);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  struct curl_client *cc = userp;
  struct sock *s = socketp;
  if (cc->closed) return 0;
  if (what == CURL_POLL_REMOVE) {
    if (s && cc->fds[fd].ours)
      uv_poll_stop(&s->poll); /* kept until libcurl closes it */
    else if (s)
      sock_close(cc, s);
    curl_multi_assign(cc->multi, fd, NULL);
    return 0;
  }
  if (s == NULL) {
    /* -1 (out of memory) makes libcurl fail every transfer in flight */
    if ((s = sock_of(cc, fd)) == NULL) return -1;
    curl_multi_assign(cc->multi, fd, s);
  }
  int events =
      ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
  uv_poll_start(&s->poll, events, on_poll);
  return 0;
}

static void on_timeout(uv_timer_t *timer) {
  struct curl_client *cc = timer->data;
  int running;
  curl_multi_socket_action(cc->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  take_finished(cc);
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  struct curl_client *cc = userp;
  if (cc->closed) return 0;
  if (timeout_ms < 0)
    uv_timer_stop(&cc->timer);
  else
    uv_timer_start(&cc->timer, on_timeout, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- the seam ---- */

static int client_request(http_client *c, const struct http_request *req, http_done_fn *done,
                          void *data) {
  struct curl_client *cc = (struct curl_client *)c;
  if (cc->closed) return -1;
  struct transfer *t = transfer_get(cc);
  if (t == NULL) return -1;
  if (setup(t, req) != 0) {
    transfer_destroy(t);
    return -1;
  }
  t->done = done;
  t->data = data;
  if (curl_multi_add_handle(cc->multi, t->easy) != CURLM_OK) {
    transfer_destroy(t);
    return -1;
  }
  running_add(cc, t);
  return 0;
}

static void client_close(http_client *c) {
  struct curl_client *cc = (struct curl_client *)c;
  if (cc->closed) return;
  cc->closed = true;
  uv_timer_stop(&cc->timer);
  uv_close((uv_handle_t *)&cc->timer, timer_closed);
  /* Every request in flight fails; a callback that asks for another is refused. */
  while (cc->running) {
    struct transfer *t = cc->running;
    running_remove(cc, t);
    curl_multi_remove_handle(cc->multi, t->easy);
    t->done(t->data, NULL, "the HTTP client closed (the host is stopping)", false);
    transfer_destroy(t);
  }
  while (cc->spare) {
    struct transfer *t = cc->spare;
    cc->spare = t->next;
    transfer_destroy(t);
  }
  cc->nspare = 0;
  curl_multi_cleanup(cc->multi); /* closes the kept connections, and their uv_polls */
  cc->multi = NULL;
  for (size_t fd = 0; fd < cc->nfd; fd++) /* none, unless libcurl closed one unsaid */
    if (cc->fds[fd].s) sock_close(cc, cc->fds[fd].s);
  free(cc->fds);
  cc->fds = NULL;
  cc->nfd = 0;
}

static void client_free(http_client *c) {
  struct curl_client *cc = (struct curl_client *)c;
  client_close(c);
  cc->free_wanted = true;
  cc->open_handles++; /* so that handle_closed may free it now */
  handle_closed(cc);
}

static const struct http_ops curl_ops = {client_request, client_close, client_free};

http_client *http_curl_new(uv_loop_t *loop, const struct http_curl_options *o, char *err,
                           size_t errlen) {
  if (clients == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(err, errlen, "cannot start libcurl (curl_global_init failed)");
    return NULL;
  }
  clients++;
  struct curl_client *cc = calloc(1, sizeof *cc);
  if (cc == NULL || (o->ca_file && (cc->ca_file = strdup(o->ca_file)) == NULL) ||
      (cc->multi = curl_multi_init()) == NULL) {
    if (cc) free(cc->ca_file);
    free(cc);
    if (--clients == 0) curl_global_cleanup();
    snprintf(err, errlen, "cannot create the HTTP client: out of memory");
    return NULL;
  }
  cc->base.ops = &curl_ops;
  cc->loop = loop;
  uv_timer_init(loop, &cc->timer);
  cc->timer.data = cc;
  cc->open_handles = 1;
  curl_multi_setopt(cc->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(cc->multi, CURLMOPT_SOCKETDATA, cc);
  curl_multi_setopt(cc->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(cc->multi, CURLMOPT_TIMERDATA, cc);
  if (o->max_per_host > 0)
    curl_multi_setopt(cc->multi, CURLMOPT_MAX_HOST_CONNECTIONS, o->max_per_host);
  return &cc->base;
}
