/* tls_client: the hand-written TLS consumer luastream's rediss:// is measured
 * against (bench/tls).
 *
 *   tls_client --port P --stream S --group G [--host H] [--consumer C]
 *              [--batch N] [--count N] [--plain]
 *              [--ca FILE] [--cert FILE --key FILE] [--server-name NAME]
 *              [--no-read-ahead]
 *
 * What a careful C programmer would write for one consumer of a group over
 * TLS, with the libraries luastream uses, and the same work per entry as
 * bench/raw_client.c (and luastream running bench/handlers/ack_payment.lua):
 * - libuv: one uv_poll_t per socket; OpenSSL 3 on the socket fd, non-blocking
 *   SSL_connect / SSL_read / SSL_write, WANT_READ and WANT_WRITE handled either
 *   way round; the server verified against --ca (a file or a directory;
 *   default the system store) and its name or IP address (--server-name,
 *   default --host); TLS 1.2 or later; --cert/--key for mutual TLS;
 * - hiredis 0.14's reply parser only (redisReader), fed what SSL_read returns
 *   (hiredis async cannot do TLS); commands formatted by redisFormatCommandArgv
 *   (the XREADGROUP, always the same, once);
 * - two connections: blocking XREADGROUP GROUP G C COUNT N BLOCK 2000 STREAMS
 *   S > on one, the next read sent as soon as a batch is handled; one XACK of
 *   every id handled in a loop turn on the other;
 * - each entry's `data` decoded by bench/small_json.h, amount_cents read.
 * --plain: the same code over plain TCP (read/write on the fd instead of
 * SSL_read/SSL_write), so both transports are measured by one client.
 * Reads take up to 16 KB at a time (hiredis' own read size) and stop, without
 * asking again until the poll says so, once a read returns less and OpenSSL
 * holds nothing more (SSL_has_pending). OpenSSL's read-ahead is on (one
 * recv() per up to 16 KB of records rather than two per record);
 * --no-read-ahead turns it off.
 * Runs until SIGTERM/SIGINT, or until --count entries are acked; prints
 * `handled=N acked=N bad=N checksum=N handshakes=N read_calls=N bytes_in=N`
 * (and the TLS version and cipher) on stderr. Exit status 0, or 1 on an
 * error. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "small_json.h"

#define ID_MAX 48
#define BLOCK_MS "2000"
#define READ_SIZE 16384 /* what hiredis reads at a time */
#define CONNECT_TIMEOUT_MS 5000

struct conn {
  const char *name; /* "read" or "ack", for messages */
  int fd;
  SSL *ssl; /* NULL with --plain */
  uv_poll_t poll;
  int events; /* what the poll waits for */
  bool handshaking;
  bool read_wants_write; /* SSL_read said WANT_WRITE: retry it when writable */
  bool write_wants_read; /* SSL_write said WANT_READ: retry it when readable */
  redisReader *reader;
  void (*on_reply)(redisReply *r);
  char *out; /* formatted commands not yet taken by SSL_write/write */
  size_t outlen, outcap;
};

static struct {
  uv_loop_t *loop;
  SSL_CTX *ctx;
  struct conn rd, wr;
  int up; /* connections up */
  const char *host, *server_name, *stream, *group, *consumer;
  char *xread; /* the XREADGROUP, formatted once */
  int xread_len;
  long long want; /* --count: stop once this many are acked; 0: never */
  long long handled, acked, bad, handshakes, read_calls, bytes_in;
  double checksum;
  char (*acks)[ID_MAX]; /* ids handled, not yet in an XACK */
  size_t nacks, cap;
  const char **argv; /* the XACK being built */
  size_t *argvlen;
  uv_signal_t sigterm, sigint;
  uv_timer_t connect_timeout;
  bool stopping;
  struct jdoc doc;
} C;

/* SSL_get_error's code, and errno for SSL_ERROR_SYSCALL. */
static const char *ssl_why(int err) {
  static char why[128];
  snprintf(why, sizeof why, "SSL error %d%s%s", err, err == SSL_ERROR_SYSCALL ? ", " : "",
           err == SSL_ERROR_SYSCALL ? (errno ? strerror(errno) : "connection closed") : "");
  return why;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("tls_client: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  unsigned long e;
  while ((e = ERR_get_error()) != 0) fprintf(stderr, ": %s", ERR_error_string(e, NULL));
  fputc('\n', stderr);
  exit(1);
}

/* ---- one connection ---- */

static void poll_cb(uv_poll_t *h, int status, int events);

static void want(struct conn *c, int events) {
  if (events == c->events || C.stopping) return;
  c->events = events;
  uv_poll_start(&c->poll, events, poll_cb);
}

/* What the poll should wait for once the handshake is done. */
static void rearm(struct conn *c) {
  bool w = c->read_wants_write || (c->outlen > 0 && !c->write_wants_read);
  want(c, UV_READABLE | (w ? UV_WRITABLE : 0));
}

/* Writes what is buffered until done or the socket (or TLS) says wait. With
 * SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER a retried SSL_write may pass the buffer
 * at a new address and with more appended; it never shrinks before a retry. */
static void flush_out(struct conn *c) {
  c->write_wants_read = false;
  while (c->outlen > 0) {
    ssize_t n;
    if (c->ssl) {
      ERR_clear_error();
      errno = 0;
      int k = SSL_write(c->ssl, c->out, c->outlen > INT32_MAX ? INT32_MAX : (int)c->outlen);
      if (k <= 0) {
        int err = SSL_get_error(c->ssl, k);
        if (err == SSL_ERROR_WANT_WRITE) break;
        if (err == SSL_ERROR_WANT_READ) {
          c->write_wants_read = true;
          break;
        }
        die("%s connection: SSL_write failed (%s)", c->name, ssl_why(err));
      }
      n = k;
    } else {
      n = write(c->fd, c->out, c->outlen);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
        die("%s connection: write: %s", c->name, strerror(errno));
      }
    }
    c->outlen -= (size_t)n;
    if (c->outlen) memmove(c->out, c->out + n, c->outlen);
  }
}

/* Queues a formatted command and writes at once what the socket takes. */
static void send_cmd(struct conn *c, const char *cmd, size_t len) {
  if (c->outlen + len > c->outcap) {
    size_t cap = c->outcap ? c->outcap : 4096;
    while (cap < c->outlen + len) cap *= 2;
    c->out = realloc(c->out, cap);
    if (!c->out) die("out of memory");
    c->outcap = cap;
  }
  memcpy(c->out + c->outlen, cmd, len);
  c->outlen += len;
  if (!c->handshaking) {
    flush_out(c);
    rearm(c);
  }
}

/* Reads until the socket (or TLS) has nothing more, each read fed to the
 * parser and the replies it completes handled before the next read. */
static void read_some(struct conn *c) {
  char buf[READ_SIZE];
  c->read_wants_write = false;
  while (!C.stopping) {
    ssize_t n;
    C.read_calls++;
    if (c->ssl) {
      ERR_clear_error();
      errno = 0;
      int k = SSL_read(c->ssl, buf, sizeof buf);
      if (k <= 0) {
        int err = SSL_get_error(c->ssl, k);
        if (err == SSL_ERROR_WANT_READ) return;
        if (err == SSL_ERROR_WANT_WRITE) {
          c->read_wants_write = true;
          return;
        }
        if (err == SSL_ERROR_ZERO_RETURN) die("%s connection: closed by the server", c->name);
        die("%s connection: SSL_read failed (%s)", c->name, ssl_why(err));
      }
      n = k;
    } else {
      n = read(c->fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        die("%s connection: read: %s", c->name, strerror(errno));
      }
      if (n == 0) die("%s connection: closed by the server", c->name);
    }
    C.bytes_in += n;
    if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
      die("%s connection: %s", c->name, c->reader->errstr);
    for (;;) {
      void *r;
      if (redisReaderGetReply(c->reader, &r) != REDIS_OK)
        die("%s connection: protocol error: %s", c->name, c->reader->errstr);
      if (r == NULL) break;
      c->on_reply(r);
      freeReplyObject(r);
      if (C.stopping) return;
    }
    /* A short read emptied the socket, unless OpenSSL read ahead of it. */
    if ((size_t)n < sizeof buf && !(c->ssl && SSL_has_pending(c->ssl))) return;
  }
}

static void read_next(void);
static void flush_acks(void);

static void handshake(struct conn *c) {
  ERR_clear_error();
  errno = 0;
  int k = SSL_connect(c->ssl);
  if (k != 1) {
    int err = SSL_get_error(c->ssl, k);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      want(c, err == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE);
      return;
    }
    long v = SSL_get_verify_result(c->ssl);
    die("%s connection: TLS handshake failed%s%s", c->name, v != X509_V_OK ? ": " : "",
        v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
  }
  c->handshaking = false;
  C.handshakes++;
  if (C.handshakes == 1)
    fprintf(stderr, "tls_client: %s %s\n", SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
  flush_out(c);
  rearm(c);
  if (++C.up == 2) {
    uv_timer_stop(&C.connect_timeout);
    read_next();
  }
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  struct conn *c = h->data;
  if (status < 0) { /* libuv says EBADF for any socket error: a read names the real one */
    if (!c->handshaking) read_some(c);
    die("%s connection: poll: %s", c->name, uv_strerror(status));
  }
  if (c->handshaking) {
    handshake(c);
    return;
  }
  if ((events & UV_READABLE) || (c->read_wants_write && (events & UV_WRITABLE))) read_some(c);
  if (C.stopping) return;
  if (c->outlen && ((events & UV_WRITABLE) || (c->write_wants_read && (events & UV_READABLE))))
    flush_out(c);
  if (c == &C.rd) flush_acks(); /* one XACK per loop turn for what this read handled */
  rearm(c);
}

static void open_conn(struct conn *c, const char *name, int port, void (*on_reply)(redisReply *)) {
  c->name = name;
  c->on_reply = on_reply;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  int rc = getaddrinfo(C.host, service, &hints, &ai);
  if (rc != 0) die("%s: %s", C.host, gai_strerror(rc));
  c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
  if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0)
    die("connect to %s:%d: %s", C.host, port, strerror(errno));
  freeaddrinfo(ai);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* as hiredis does */
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->reader = redisReaderCreate();
  if (!c->reader) die("out of memory");
  uv_poll_init(C.loop, &c->poll, c->fd);
  c->poll.data = c;
  if (C.ctx) {
    c->ssl = SSL_new(C.ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) die("SSL_new");
    const char *name_checked = C.server_name ? C.server_name : C.host;
    unsigned char ip[16];
    if (inet_pton(AF_INET, name_checked, ip) == 1 || inet_pton(AF_INET6, name_checked, ip) == 1) {
      if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), name_checked) != 1)
        die("bad address %s", name_checked);
    } else if (SSL_set1_host(c->ssl, name_checked) != 1 ||
               SSL_set_tlsext_host_name(c->ssl, name_checked) != 1) {
      die("bad server name %s", name_checked);
    }
    SSL_set_connect_state(c->ssl);
    c->handshaking = true;
    handshake(c);
  } else {
    rearm(c);
    if (++C.up == 2) {
      uv_timer_stop(&C.connect_timeout);
      read_next();
    }
  }
}

static void close_conn(struct conn *c) {
  if (c->ssl) {
    if (!c->handshaking) SSL_shutdown(c->ssl); /* close_notify, not waiting for the peer's */
    SSL_free(c->ssl);
  }
  uv_poll_stop(&c->poll);
  uv_close((uv_handle_t *)&c->poll, NULL);
  close(c->fd);
  if (c->reader) redisReaderFree(c->reader);
  free(c->out);
}

/* ---- the consumer ---- */

static void stop(void) {
  if (C.stopping) return;
  C.stopping = true;
  uv_timer_stop(&C.connect_timeout);
  uv_signal_stop(&C.sigterm);
  uv_signal_stop(&C.sigint);
  close_conn(&C.rd);
  close_conn(&C.wr);
}

static void flush_acks(void) {
  if (C.nacks == 0 || C.stopping) return;
  size_t argc = C.nacks + 3;
  C.argv[0] = "XACK";
  C.argvlen[0] = 4;
  C.argv[1] = C.stream;
  C.argvlen[1] = strlen(C.stream);
  C.argv[2] = C.group;
  C.argvlen[2] = strlen(C.group);
  for (size_t i = 0; i < C.nacks; i++) {
    C.argv[i + 3] = C.acks[i];
    C.argvlen[i + 3] = strlen(C.acks[i]);
  }
  char *cmd;
  int len = redisFormatCommandArgv(&cmd, (int)argc, C.argv, C.argvlen);
  if (len < 0) die("out of memory");
  send_cmd(&C.wr, cmd, (size_t)len);
  free(cmd);
  C.nacks = 0;
}

static void queue_ack(const char *id, size_t len) {
  if (C.nacks == C.cap) {
    size_t cap = C.cap ? C.cap * 2 : 1024;
    C.acks = realloc(C.acks, cap * sizeof *C.acks);
    C.argv = realloc(C.argv, (cap + 3) * sizeof *C.argv);
    C.argvlen = realloc(C.argvlen, (cap + 3) * sizeof *C.argvlen);
    if (!C.acks || !C.argv || !C.argvlen) die("out of memory");
    C.cap = cap;
  }
  if (len >= ID_MAX) len = ID_MAX - 1;
  memcpy(C.acks[C.nacks], id, len);
  C.acks[C.nacks][len] = '\0';
  C.nacks++;
}

/* The work luastream's handler does: decode, read one field; then the ack. */
static void handle(const redisReply *id, const redisReply *fields) {
  const redisReply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const redisReply *k = fields->element[i];
    if (k->len == 4 && memcmp(k->str, "data", 4) == 0) data = fields->element[i + 1];
  }
  C.handled++;
  if (data == NULL || !decode(data->str, data->len, &C.doc)) {
    C.bad++; /* luastream leaves bad input pending; so does this */
    return;
  }
  const struct jfield *amount = doc_get(&C.doc, "amount_cents");
  if (amount && amount->type == J_NUMBER) C.checksum += amount->num;
  queue_ack(id->str, id->len);
}

static void on_ack(redisReply *reply) {
  if (reply->type != REDIS_REPLY_INTEGER)
    die("XACK failed: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "?");
  C.acked += reply->integer;
  if (C.want && C.acked >= C.want) stop();
}

static void on_read(redisReply *reply) {
  if (reply->type == REDIS_REPLY_ERROR) die("XREADGROUP failed: %s", reply->str);
  /* [[stream, [[id, [field, value, ...]], ...]]], or nil after BLOCK */
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t s = 0; s < reply->elements; s++) {
      const redisReply *entries = reply->element[s]->element[1];
      for (size_t e = 0; e < entries->elements; e++) {
        const redisReply *entry = entries->element[e];
        if (entry->element[1]->type == REDIS_REPLY_ARRAY)
          handle(entry->element[0], entry->element[1]);
      }
    }
  }
  read_next();
}

static void read_next(void) {
  if (!C.stopping) send_cmd(&C.rd, C.xread, (size_t)C.xread_len);
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)s, (void)sig;
  stop();
}

/* A TLS client on a plaintext port waits for an answer that never comes. */
static void connect_timed_out(uv_timer_t *t) {
  (void)t;
  die("no TLS handshake within %d ms (is the port a TLS port?)", CONNECT_TIMEOUT_MS);
}

static void usage(void) {
  fprintf(stderr,
          "usage: tls_client --port P --stream S --group G [--host H] [--consumer C]\n"
          "                  [--batch N] [--count N] [--plain] [--ca FILE|DIR]\n"
          "                  [--cert FILE --key FILE] [--server-name NAME] [--no-read-ahead]\n");
  exit(2);
}

static SSL_CTX *make_ctx(const char *ca, const char *cert, const char *key, bool read_ahead) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) die("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  struct stat st;
  if (ca == NULL) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) die("the system's CA store");
  } else if (stat(ca, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (SSL_CTX_load_verify_locations(ctx, NULL, ca) != 1) die("CA directory %s", ca);
  } else if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
    die("CA file %s", ca);
  }
  if (cert && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) die("certificate %s", cert);
  if (key && (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
              SSL_CTX_check_private_key(ctx) != 1))
    die("key %s", key);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(ctx, read_ahead ? 1 : 0);
  return ctx;
}

int main(int argc, char **argv) {
  int port = 0;
  long batch = 100;
  bool plain = false, read_ahead = true;
  const char *ca = NULL, *cert = NULL, *key = NULL;
  C.host = "127.0.0.1";
  C.consumer = "tls-0";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--plain")) {
      plain = true;
      continue;
    }
    if (!strcmp(a, "--no-read-ahead")) {
      read_ahead = false;
      continue;
    }
    if (v == NULL) usage();
    if (!strcmp(a, "--port"))
      port = atoi(v);
    else if (!strcmp(a, "--host"))
      C.host = v;
    else if (!strcmp(a, "--stream"))
      C.stream = v;
    else if (!strcmp(a, "--group"))
      C.group = v;
    else if (!strcmp(a, "--consumer"))
      C.consumer = v;
    else if (!strcmp(a, "--batch"))
      batch = atol(v);
    else if (!strcmp(a, "--count"))
      C.want = atoll(v);
    else if (!strcmp(a, "--ca"))
      ca = v;
    else if (!strcmp(a, "--cert"))
      cert = v;
    else if (!strcmp(a, "--key"))
      key = v;
    else if (!strcmp(a, "--server-name"))
      C.server_name = v;
    else
      usage();
    i++;
  }
  if (port <= 0 || !C.stream || !C.group || batch < 1 || !cert != !key) usage();
  if (plain && (ca || cert || C.server_name)) usage();
  char count_arg[24];
  snprintf(count_arg, sizeof count_arg, "%ld", batch);
  const char *xa[] = {"XREADGROUP", "GROUP",  C.group,   C.consumer, "COUNT", count_arg,
                      "BLOCK",      BLOCK_MS, "STREAMS", C.stream,   ">"};
  size_t xl[11];
  for (int i = 0; i < 11; i++) xl[i] = strlen(xa[i]);
  C.xread_len = redisFormatCommandArgv(&C.xread, 11, xa, xl);
  if (C.xread_len < 0) die("out of memory");

  if (!plain) C.ctx = make_ctx(ca, cert, key, read_ahead);
  signal(SIGPIPE, SIG_IGN); /* a write to a closed connection is an error, not the end */
  C.loop = uv_default_loop();
  uv_signal_init(C.loop, &C.sigterm);
  uv_signal_init(C.loop, &C.sigint);
  uv_signal_start(&C.sigterm, on_signal, SIGTERM);
  uv_signal_start(&C.sigint, on_signal, SIGINT);
  uv_timer_init(C.loop, &C.connect_timeout);
  uv_timer_start(&C.connect_timeout, connect_timed_out, CONNECT_TIMEOUT_MS, 0);
  open_conn(&C.rd, "read", port, on_read);
  open_conn(&C.wr, "ack", port, on_ack);
  uv_run(C.loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&C.sigterm, NULL);
  uv_close((uv_handle_t *)&C.sigint, NULL);
  uv_close((uv_handle_t *)&C.connect_timeout, NULL);
  uv_run(C.loop, UV_RUN_DEFAULT);
  fprintf(stderr,
          "handled=%lld acked=%lld bad=%lld checksum=%.0f handshakes=%lld read_calls=%lld "
          "bytes_in=%lld\n",
          C.handled, C.acked, C.bad, C.checksum, C.handshakes, C.read_calls, C.bytes_in);
  if (C.ctx) SSL_CTX_free(C.ctx);
  free(C.xread);
  free(C.acks);
  free(C.argv);
  free(C.argvlen);
  return 0;
}
