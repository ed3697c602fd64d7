/* tls: the TLS settings of Redis connections on OpenSSL: one context per
 * distinct setting (a URL's tls_* parameters or the command line's --tls-*),
 * shared by every connection, node and sentinel reached with it; what a
 * failed handshake means for the person who has to fix it; the handshake
 * and certificate-expiry metrics.
 *
 * Certificates are verified by default: a host name against the server
 * certificate's DNS names, an IP address (as Sentinel and CLUSTER SLOTS name
 * nodes) against its IP addresses, or the server_name setting when given.
 * TLS 1.2 or later. A key file that group or others may read is refused. A
 * context's files are read when it is made and again on tls_reload (SIGHUP):
 * connections made after a reload use the new certificates, those open keep
 * theirs until they reconnect. */
#ifndef LUASTREAM_TLS_H
#define LUASTREAM_TLS_H

#include <stddef.h>

struct ssl_st;
struct url_tls;
struct tls_ctx;

/* The context for t (made, or shared with an earlier caller of the same
 * settings). NULL with a one-line reason in err (naming the file and what is
 * wrong with it). */
struct tls_ctx *tls_ctx_get(const struct url_tls *t, char *err, size_t errlen);
/* Gives back what tls_ctx_get returned. NULL is fine. */
void tls_ctx_put(struct tls_ctx *c);
/* An SSL for one connection to host (a name or an IP address, as
 * connected to). NULL when out of memory. */
struct ssl_st *tls_ctx_ssl(struct tls_ctx *c, const char *host);
/* Re-reads the files of every context in use; a context whose files fail
 * keeps its certificates (logged). Returns how many failed. */
int tls_reload(void);

/* Once the handshake is done: the server asked for a client certificate,
 * given or not (a server that checks it may then refuse it). */
int tls_cert_requested(struct ssl_st *ssl);
/* A handshake completed: counted, and the server certificate's expiry
 * recorded for server (its "ip:port"). */
void tls_handshake_done(struct ssl_st *ssl, const char *server);
/* Why an SSL call failed, for a person: what happened and what to pass.
 * ssl_error: SSL_get_error's answer (or SSL_ERROR_ZERO_RETURN for a
 * close); opened: the handshake had completed; received: whether the
 * server sent any byte yet (after the handshake: any byte of a reply).
 * Sets *denied when retrying cannot help (a certificate that does not
 * verify, a server that wants a client certificate or does not speak TLS).
 * Takes the thread's OpenSSL error queue. */
void tls_explain(struct ssl_st *ssl, int ssl_error, int opened, int received, char *why, size_t len,
                 int *denied);

#endif
