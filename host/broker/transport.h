/* transport: one byte stream to a Redis server or sentinel on the libuv
 * loop: a TCP or unix socket connected without blocking, with TLS on it
 * when asked (OpenSSL on the socket itself, under the same poll handle:
 * no second buffer, no thread). The only code that reads and writes the
 * sockets of Redis connections.
 *
 * Bytes read go straight where the owner says (its parser's buffer), so
 * plaintext and TLS make the same single copy into user space. Bytes
 * written are queued in one buffer, formatted there by the owner
 * (transport_reserve), and written just before the loop next waits (or
 * when the owner flushes), so every command of a loop turn leaves in one
 * write. */
#ifndef LUASTREAM_TRANSPORT_H
#define LUASTREAM_TRANSPORT_H

#include <stddef.h>

struct uv_loop_s;
struct tls_ctx;
struct transport;

/* Where to connect: ip and port (ip a numeric address), or a unix socket
 * path. tls: NULL for plaintext; host: the name checked against the
 * server's certificate (the URL's host, or ip for a discovered node). */
struct transport_target {
  const char *ip;
  int port;
  const char *path;
  struct tls_ctx *tls;
  const char *host;
};

/* How a stream ended, as far as the transport can tell. */
enum transport_end {
  TRANSPORT_LOST,    /* failed or closed: trying again may work */
  TRANSPORT_REFUSED, /* retrying cannot help (a certificate that does not verify, ...) */
  /* Plaintext, closed before a byte came back: what a TLS port does with
   * plaintext, and also a server that goes at that moment. */
  TRANSPORT_UNANSWERED,
};

struct transport_events {
  /* The room for the next read: at least *cap bytes at the returned
   * pointer, NULL when out of memory. */
  char *(*room)(void *data, size_t *cap);
  /* n bytes arrived at the last room. It may close the transport. */
  void (*got)(void *data, size_t n);
  /* The stream failed or ended, once; never after transport_close. */
  void (*down)(void *data, const char *why, enum transport_end how);
};

/* Connects. NULL when it failed at once (a unix socket nobody listens on),
 * with the reason in err. Events never run before this returns. */
struct transport *transport_open(struct uv_loop_s *loop, const struct transport_target *to,
                                 const struct transport_events *ev, void *data, char *err,
                                 size_t errlen);
/* Room for need more bytes at the end of the output queue; NULL when out of
 * memory. transport_commit(t, n) then queues the first n of them. */
char *transport_reserve(struct transport *t, size_t need);
void transport_commit(struct transport *t, size_t n);
/* Writes what is queued now, as far as the socket takes it. A failure is
 * reported later, from the loop (never from inside this call). */
void transport_flush(struct transport *t);
/* Connected, a TLS handshake sent, and not a byte back yet. */
int transport_tls_unanswered(const struct transport *t);
/* Ends the stream; no event runs after this. The memory goes once the
 * poll handle is closed. */
void transport_close(struct transport *t);

#endif
