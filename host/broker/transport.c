/* transport: sockets of Redis connections, plaintext or TLS (transport.h).
 *
 * With TLS, OpenSSL reads and writes the non-blocking socket itself; a call
 * that cannot go on says which readiness it waits for (WANT_READ,
 * WANT_WRITE), and the poll handle watches that. A read may need the socket
 * writable and a write may need it readable (a TLS 1.3 key update), so
 * both are tried on any readiness once the stream is open.
 *
 * libuv stops a poll handle on POLLERR and calls back with an error
 * status; the reads and writes made then find the socket's error and
 * report it. */
#include "transport.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "grow.h"
#include "tls.h"

/* Bytes read in one loop turn before other handles get theirs; a TLS
 * record already decrypted is read on regardless (no readiness would
 * report it). */
#define READ_TURN_MAX (1u << 20)
/* How long the first command waits for the server's word after a TLS 1.3
 * handshake in which it asked for a client certificate there was none to
 * give (see opened). */
#define CERT_VERDICT_WAIT_MS 300
/* The output buffer kept once empty; a larger one (a rare huge command)
 * is let go. */
#define OUT_KEEP_MAX (2u << 20)

enum stage { CONNECTING, HANDSHAKING, OPEN, DOWN };

struct transport {
  uv_poll_t poll;
  uv_prepare_t flusher;          /* writes what a loop turn queued, before the loop waits */
  uv_timer_t verdict;            /* ends the wait of `quiet` */
  int quiet;                     /* nothing written yet: waiting for the server's word (opened) */
  unsigned long handshake_bytes; /* read by the end of the handshake */
  int fd;
  int handles; /* handles still to close before the memory goes */
  enum stage stage;
  int closed;     /* transport_close was called: no more events */
  int events;     /* UV_READABLE | UV_WRITABLE watched */
  SSL *ssl;       /* NULL for plaintext */
  int read_wants; /* TLS: the readiness a read waits for, 0 if none */
  int write_wants;
  size_t write_retry; /* TLS: a write that wanted readiness is retried with this length */
  unsigned long long nread;
  char *out; /* queued bytes: [out_off, out_len) still to write */
  size_t out_off, out_len, out_cap;
  int failed; /* a write failed inside transport_flush: reported from the loop */
  char why[512];
  enum transport_end how; /* of a TLS failure (tls_explain) */
  char server[80];        /* "ip:port" or the socket path, for the metrics */
  struct transport_events ev;
  void *data;
};

static void on_poll(uv_poll_t *h, int status, int events);

static void watch(struct transport *t, int events) {
  if (t->stage == DOWN || t->closed) events = 0;
  if (events == t->events && uv_is_active((uv_handle_t *)&t->poll) == (events != 0)) return;
  t->events = events;
  if (events)
    uv_poll_start(&t->poll, events, on_poll);
  else
    uv_poll_stop(&t->poll);
}

/* The stream is over: the owner hears it once. */
static void fail(struct transport *t, const char *why, enum transport_end how) {
  if (t->stage == DOWN || t->closed) return;
  t->stage = DOWN;
  watch(t, 0);
  uv_prepare_stop(&t->flusher);
  t->ev.down(t->data, why, how);
}

/* Whether the server has sent any byte yet. */
static int transport_received(const struct transport *t) {
  if (t->ssl) return BIO_number_read(SSL_get_rbio(t->ssl)) > 0;
  return t->nread > 0;
}

/* An SSL call failed for good: what it means, in t->why. */
static void tls_failed(struct transport *t, int ssl_error) {
  int after_handshake = t->stage == OPEN, denied;
  tls_explain(t->ssl, ssl_error, after_handshake,
              after_handshake ? t->nread > 0 : transport_received(t), t->why, sizeof t->why,
              &denied);
  t->how = denied ? TRANSPORT_REFUSED : TRANSPORT_LOST;
}

/* ---- writing ---- */

/* Writes as much as the socket takes. -1 with t->why set on an error. */
static int write_some(struct transport *t) {
  while (t->out_off < t->out_len) {
    size_t n = t->out_len - t->out_off;
    if (t->ssl) {
      if (t->write_retry) n = t->write_retry;
      if (n > INT32_MAX) n = INT32_MAX;
      ERR_clear_error();
      errno = 0; /* SSL_ERROR_SYSCALL: errno, if the socket failed, says why */
      int w = SSL_write(t->ssl, t->out + t->out_off, (int)n);
      if (w <= 0) {
        int e = SSL_get_error(t->ssl, w);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
          t->write_retry = n;
          t->write_wants = e == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE;
          return 0;
        }
        tls_failed(t, e);
        return -1;
      }
      t->write_retry = 0;
      t->write_wants = 0;
      t->out_off += (size_t)w;
    } else {
      ssize_t w = send(t->fd, t->out + t->out_off, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          t->write_wants = UV_WRITABLE;
          return 0;
        }
        if (errno == EINTR) continue;
        snprintf(t->why, sizeof t->why, "%s", strerror(errno));
        return -1;
      }
      t->write_wants = 0;
      t->out_off += (size_t)w;
    }
  }
  t->write_wants = 0;
  t->out_off = t->out_len = 0;
  if (t->out_cap > OUT_KEEP_MAX) {
    free(t->out);
    t->out = NULL;
    t->out_cap = 0;
  }
  return 0;
}

/* ---- reading ---- */

/* Reads what has arrived into the owner's room. -1 when the stream failed
 * (reported) or was closed from an event. */
static int read_some(struct transport *t) {
  size_t total = 0;
  for (;;) {
    size_t cap = 0;
    char *room = t->ev.room(t->data, &cap);
    if (room == NULL) {
      fail(t, "out of memory", TRANSPORT_LOST);
      return -1;
    }
    size_t n;
    if (t->ssl) {
      ERR_clear_error();
      errno = 0;
      int r = SSL_read(t->ssl, room, cap > INT32_MAX ? INT32_MAX : (int)cap);
      if (r <= 0) {
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
          t->read_wants = e == SSL_ERROR_WANT_WRITE ? UV_WRITABLE : 0;
          return 0;
        }
        if (e == SSL_ERROR_ZERO_RETURN && t->nread > 0) {
          fail(t, "Server closed the connection", TRANSPORT_LOST);
          return -1;
        }
        tls_failed(t, e);
        fail(t, t->why, t->how);
        return -1;
      }
      t->read_wants = 0;
      n = (size_t)r;
    } else {
      ssize_t r = recv(t->fd, room, cap, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
      if (r <= 0) {
        /* A TLS port closes (or resets, with our command unread) at once. */
        int unanswered = t->nread == 0 && (r == 0 || errno == ECONNRESET);
        if (unanswered)
          snprintf(t->why, sizeof t->why, "the server closed the connection before answering");
        else if (r < 0)
          snprintf(t->why, sizeof t->why, "%s", strerror(errno));
        else
          snprintf(t->why, sizeof t->why, "Server closed the connection");
        fail(t, t->why, unanswered ? TRANSPORT_UNANSWERED : TRANSPORT_LOST);
        return -1;
      }
      n = (size_t)r;
    }
    t->nread += n;
    total += n;
    t->ev.got(t->data, n);
    if (t->closed || t->stage == DOWN) return -1;
    int more = t->ssl ? SSL_has_pending(t->ssl) || total < READ_TURN_MAX
                      : n == cap && total < READ_TURN_MAX;
    if (!more) return 0;
  }
}

/* ---- connecting ---- */

static void on_verdict(uv_timer_t *h);

static void opened(struct transport *t) {
  t->stage = OPEN;
  if (t->ssl == NULL) return;
  tls_handshake_done(t->ssl, t->server);
  /* With TLS 1.3 a server that checks client certificates refuses one (or
   * its absence) after the handshake; a command written meanwhile makes it
   * close with a reset that loses its alert. When it asked for one, the
   * first command waits for its word: an alert, a session ticket (it took
   * the client), or a short silence. */
  if (tls_cert_requested(t->ssl) && SSL_version(t->ssl) >= TLS1_3_VERSION) {
    t->quiet = 1;
    t->handshake_bytes = BIO_number_read(SSL_get_rbio(t->ssl));
    uv_timer_start(&t->verdict, on_verdict, CERT_VERDICT_WAIT_MS, 0);
  }
}

/* TLS: one step of the handshake. */
static void handshake(struct transport *t) {
  ERR_clear_error();
  errno = 0;
  int r = SSL_connect(t->ssl);
  if (r == 1) {
    opened(t);
    return;
  }
  int e = SSL_get_error(t->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    watch(t, e == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE);
    return;
  }
  tls_failed(t, e);
  fail(t, t->why, t->how);
}

/* The socket became writable while connecting: did connect(2) work? */
static void connected(struct transport *t) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    snprintf(t->why, sizeof t->why, "%s", strerror(err));
    fail(t, t->why, TRANSPORT_LOST);
    return;
  }
  if (t->ssl) {
    t->stage = HANDSHAKING;
    handshake(t);
  } else {
    opened(t);
  }
}

/* What an open stream waits for: always a reply, and the socket's room
 * while output is left or a TLS call asked for it. */
static int open_events(const struct transport *t) {
  int ev = UV_READABLE | t->read_wants;
  if (t->out_off < t->out_len && !t->quiet) ev |= t->write_wants ? t->write_wants : UV_WRITABLE;
  return ev;
}

/* The wait for the server's word is over: what is queued goes. */
static void speak(struct transport *t) {
  t->quiet = 0;
  uv_timer_stop(&t->verdict);
  if (t->out_off < t->out_len && write_some(t) != 0) {
    fail(t, t->why, t->how);
    return;
  }
  watch(t, open_events(t));
}

static void on_verdict(uv_timer_t *h) {
  struct transport *t = h->data;
  if (!t->closed && t->stage == OPEN && t->quiet) speak(t);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct transport *t = h->data;
  if (t->closed || t->stage == DOWN) return;
  if (status < 0) events = UV_READABLE | UV_WRITABLE; /* the calls find the error */
  if (t->stage == CONNECTING) {
    connected(t);
  } else if (t->stage == HANDSHAKING) {
    handshake(t);
  } else if (((events & UV_READABLE) || (t->read_wants && (events & t->read_wants))) &&
             read_some(t) != 0) {
    return;
  }
  if (t->stage != OPEN || t->closed) return;
  /* A record after the handshake (a session ticket) and no alert: taken. */
  if (t->quiet && BIO_number_read(SSL_get_rbio(t->ssl)) > t->handshake_bytes) {
    speak(t);
    return;
  }
  if (t->out_off < t->out_len && !t->quiet && write_some(t) != 0) {
    fail(t, t->why, t->how);
    return;
  }
  watch(t, open_events(t));
}

static void on_flush(uv_prepare_t *h) {
  struct transport *t = h->data;
  uv_prepare_stop(h);
  if (t->closed || t->stage == DOWN) return;
  if (t->failed) {
    fail(t, t->why, t->how);
    return;
  }
  if (t->stage != OPEN || t->quiet) return; /* written once connected, or once it spoke */
  if (write_some(t) != 0) {
    fail(t, t->why, t->how);
    return;
  }
  watch(t, open_events(t));
}

static int make_socket(const struct transport_target *to, int *fd, char *err, size_t errlen) {
  union {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr_un un;
  } addr;
  socklen_t len;
  memset(&addr, 0, sizeof addr);
  if (to->path) {
    addr.un.sun_family = AF_UNIX;
    snprintf(addr.un.sun_path, sizeof addr.un.sun_path, "%s", to->path);
    len = sizeof addr.un;
  } else if (uv_ip4_addr(to->ip, to->port, &addr.in4) == 0) {
    len = sizeof addr.in4;
  } else if (uv_ip6_addr(to->ip, to->port, &addr.in6) == 0) {
    len = sizeof addr.in6;
  } else {
    snprintf(err, errlen, "not an IP address: %s", to->ip);
    return -1;
  }
  *fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (*fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  if (!to->path) {
    int one = 1; /* a command must not wait for the previous one's ack */
    setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (connect(*fd, &addr.sa, len) != 0 && errno != EINPROGRESS) {
    snprintf(err, errlen, "%s", strerror(errno));
    close(*fd);
    return -1;
  }
  return 0;
}

struct transport *transport_open(uv_loop_t *loop, const struct transport_target *to,
                                 const struct transport_events *ev, void *data, char *err,
                                 size_t errlen) {
  struct transport *t = calloc(1, sizeof *t);
  if (t == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (to->tls && (t->ssl = tls_ctx_ssl(to->tls, to->host ? to->host : to->ip)) == NULL) {
    snprintf(err, errlen, "TLS: cannot set up the connection: out of memory or a bad name");
    free(t);
    return NULL;
  }
  if (make_socket(to, &t->fd, err, errlen) != 0) {
    SSL_free(t->ssl);
    free(t);
    return NULL;
  }
  if (t->ssl) SSL_set_fd(t->ssl, t->fd);
  if (uv_poll_init_socket(loop, &t->poll, t->fd) != 0) {
    snprintf(err, errlen, "cannot watch the socket");
    SSL_free(t->ssl);
    close(t->fd);
    free(t);
    return NULL;
  }
  uv_prepare_init(loop, &t->flusher); /* cannot fail */
  uv_timer_init(loop, &t->verdict);
  t->poll.data = t;
  t->flusher.data = t;
  t->verdict.data = t;
  t->ev = *ev;
  t->data = data;
  if (to->path)
    snprintf(t->server, sizeof t->server, "%s", to->path);
  else
    snprintf(t->server, sizeof t->server, strchr(to->ip, ':') ? "[%s]:%d" : "%s:%d", to->ip,
             to->port);
  t->stage = CONNECTING;
  watch(t, UV_WRITABLE);
  return t;
}

char *transport_reserve(struct transport *t, size_t need) {
  /* What was written goes before the queue grows: a queue the socket never
   * empties in one go must not keep everything ever sent. (A TLS write that
   * waits may see its bytes move: SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER.) */
  if (t->out_off > 0 && t->out_len + need > t->out_cap) {
    memmove(t->out, t->out + t->out_off, t->out_len - t->out_off);
    t->out_len -= t->out_off;
    t->out_off = 0;
  }
  char *grown = grow(t->out, &t->out_cap, t->out_len + need, 1, 4096);
  if (grown == NULL) return NULL;
  t->out = grown;
  return t->out + t->out_len;
}

void transport_commit(struct transport *t, size_t n) {
  t->out_len += n;
  if (t->stage == OPEN && !t->closed) uv_prepare_start(&t->flusher, on_flush); /* no-op if on */
}

void transport_flush(struct transport *t) {
  if (t->closed || t->stage != OPEN || t->quiet || t->failed || t->out_off == t->out_len) return;
  if (write_some(t) != 0) {
    t->failed = 1;
    uv_prepare_start(&t->flusher, on_flush);
    return;
  }
  if (t->out_off == t->out_len) uv_prepare_stop(&t->flusher);
  watch(t, open_events(t));
}

int transport_tls_unanswered(const struct transport *t) {
  return t->ssl && t->stage == HANDSHAKING && !transport_received(t);
}

static void on_closed(uv_handle_t *h) {
  struct transport *t = h->data;
  if (--t->handles > 0) return;
  close(t->fd);
  free(t->out);
  free(t);
}

void transport_close(struct transport *t) {
  if (t == NULL || t->closed) return;
  t->closed = 1;
  if (t->ssl) {
    /* close_notify, if the socket takes it now; the server would not wait */
    if (t->stage == OPEN) SSL_shutdown(t->ssl);
    SSL_free(t->ssl);
    t->ssl = NULL;
    ERR_clear_error();
  }
  t->handles = 3;
  uv_close((uv_handle_t *)&t->poll, on_closed);
  uv_close((uv_handle_t *)&t->flusher, on_closed);
  uv_close((uv_handle_t *)&t->verdict, on_closed);
}
