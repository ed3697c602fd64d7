/* tls: OpenSSL contexts for Redis connections (tls.h). */
#include "tls.h"

#include <errno.h>
#include <stdbool.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "metrics.h"
#include "url.h"

struct tls_ctx {
  struct url_tls settings;
  SSL_CTX *ctx;
  int refs;
  struct tls_ctx *next;
};

/* Every context in use, for tls_reload. The loop thread only. */
static struct tls_ctx *contexts;

/* ---- metrics ---- */

static struct metric *handshakes(void) {
  struct metric_family *f =
      metrics_family("luastream_redis_tls_handshakes_total",
                     "TLS handshakes completed with Redis servers and sentinels (one per "
                     "connection made, not per command)",
                     METRIC_COUNTER, 0, NULL, NULL, 0);
  return metrics_series(f, NULL);
}

/* Days from now until cert's notAfter, fractional; negative once expired. */
static int days_left(X509 *cert, double *days) {
  int d = 0, s = 0;
  if (cert == NULL || !ASN1_TIME_diff(&d, &s, NULL, X509_get0_notAfter(cert))) return -1;
  *days = d + s / 86400.0;
  return 0;
}

static void record_expiry(const char *which, const char *server, X509 *cert) {
  static const char *const labels[] = {"certificate", "server"};
  double days;
  if (days_left(cert, &days) != 0) return;
  struct metric_family *f =
      metrics_family("luastream_redis_tls_certificate_expiry_days",
                     "Days until a certificate expires: the client certificate luastream "
                     "presents, and each Redis server's (by address) at its last handshake",
                     METRIC_GAUGE, 2, labels, NULL, 0);
  const char *values[] = {which, server};
  metric_set(metrics_series(f, values), days);
}

/* ---- loading ---- */

/* The first error queued is the one that says what is wrong ("bad
 * decrypt"); the later ones say where it surfaced ("PEM lib"). */
static void ssl_reason(char *out, size_t len) {
  unsigned long first = ERR_get_error();
  const char *r = first ? ERR_reason_error_string(first) : NULL;
  snprintf(out, len, "%s", r ? r : "unknown OpenSSL error");
  ERR_clear_error();
}

/* The first line of path, for the key's password. */
static int read_password(const char *path, char *out, size_t len, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "tls key password file %s: %s", path, strerror(errno));
    return -1;
  }
  if (fgets(out, (int)len, f) == NULL) out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\r\n")] = '\0';
  return 0;
}

static int password_cb(char *buf, int size, int rwflag, void *data) {
  (void)rwflag;
  size_t n = strlen(data);
  if (size <= 0 || n >= (size_t)size) return 0;
  memcpy(buf, data, n);
  return (int)n;
}

static int key_private(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(err, errlen, "tls key %s: %s", path, strerror(errno));
    return -1;
  }
  if (st.st_mode & 077) {
    snprintf(err, errlen,
             "tls key %s can be read by %s (mode %03o): chmod 600 it (a client key must be "
             "private)",
             path, st.st_mode & 007 ? "others" : "its group", (unsigned)(st.st_mode & 0777));
    return -1;
  }
  return 0;
}

static void when(const ASN1_TIME *t, char *out, size_t len);

/* The dates of the certificate that failed verification last, for the
 * message: a failed handshake keeps no peer certificate. The loop thread
 * explains a failure right after the handshake call that made it. */
static char failed_not_before[64], failed_not_after[64];
static int failed_depth; /* 0: the server's own certificate; more: a CA above it */

static int note_failure(int ok, X509_STORE_CTX *store) {
  X509 *cert = X509_STORE_CTX_get_current_cert(store);
  if (!ok && cert) {
    failed_depth = X509_STORE_CTX_get_error_depth(store);
    when(X509_get0_notBefore(cert), failed_not_before, sizeof failed_not_before);
    when(X509_get0_notAfter(cert), failed_not_after, sizeof failed_not_after);
  }
  return ok;
}

/* The SSL's slot for "the server asked for a client certificate", given
 * or not: set by the message callback while the handshake runs. */
static int cert_requested_index(void) {
  static int index = -1;
  if (index < 0) index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
  return index;
}

static void on_message(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg) {
  (void)version;
  (void)arg;
  if (!write_p && content_type == SSL3_RT_HANDSHAKE && len > 0 &&
      ((const unsigned char *)buf)[0] == SSL3_MT_CERTIFICATE_REQUEST)
    SSL_set_ex_data(ssl, cert_requested_index(), ssl);
}

static SSL_CTX *load(const struct url_tls *t, char *err, size_t errlen) {
  char why[256], password[512] = "";
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    snprintf(err, errlen, "cannot make a TLS context: out of memory");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* The output queue is written as far as the socket takes it, and may
   * move (grow) before a write that had to wait is retried. */
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, t->skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, note_failure);
  int ok;
  struct stat st;
  if (t->ca[0] == '\0')
    ok = SSL_CTX_set_default_verify_paths(ctx);
  else if (stat(t->ca, &st) != 0)
    ok = (snprintf(why, sizeof why, "%s", strerror(errno)), -1);
  else
    ok = S_ISDIR(st.st_mode) ? SSL_CTX_load_verify_locations(ctx, NULL, t->ca)
                             : SSL_CTX_load_verify_locations(ctx, t->ca, NULL);
  if (ok != 1) {
    if (ok == 0) ssl_reason(why, sizeof why);
    snprintf(err, errlen, "tls CA %s: %s", t->ca[0] ? t->ca : "(the system's store)", why);
    goto fail;
  }
  if (t->cert[0] || t->key[0]) {
    if (!t->cert[0] || !t->key[0]) {
      snprintf(err, errlen, "a client certificate needs both its file and its key (%s)",
               t->cert[0] ? "the key is missing" : "the certificate is missing");
      goto fail;
    }
    if (key_private(t->key, err, errlen) != 0) goto fail;
    if (t->key_password_file[0] &&
        read_password(t->key_password_file, password, sizeof password, err, errlen) != 0)
      goto fail;
    /* A key without its password fails here, not at a prompt on stdin. */
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, password);
    if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
      ssl_reason(why, sizeof why);
      snprintf(err, errlen, "tls certificate %s: %s", t->cert, why);
      goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1) {
      ssl_reason(why, sizeof why);
      const char *hint = strstr(why, "mismatch")   ? " (the key of another certificate)"
                         : !strstr(why, "decrypt") ? ""
                         : t->key_password_file[0]
                             ? " (the password in the key password file does not open it)"
                             : " (an encrypted key needs --tls-key-password-file)";
      snprintf(err, errlen, "tls key %s: %s%s", t->key, why, hint);
      goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      snprintf(err, errlen, "tls key %s does not belong to the certificate %s", t->key, t->cert);
      goto fail;
    }
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    OPENSSL_cleanse(password, sizeof password);
  } else if (t->key_password_file[0]) {
    snprintf(err, errlen, "a key password file is given without a client key");
    goto fail;
  }
  return ctx;
fail:
  OPENSSL_cleanse(password, sizeof password);
  ERR_clear_error();
  SSL_CTX_free(ctx);
  return NULL;
}

/* The client certificate that expires first, of every context in use (the
 * host's and those of handlers' own URLs): what an alert must watch. */
static void record_client_expiry(void) {
  X509 *soonest = NULL;
  for (struct tls_ctx *c = contexts; c; c = c->next) {
    X509 *cert = SSL_CTX_get0_certificate(c->ctx);
    if (cert && (soonest == NULL ||
                 ASN1_TIME_compare(X509_get0_notAfter(cert), X509_get0_notAfter(soonest)) < 0))
      soonest = cert;
  }
  if (soonest) record_expiry("client", "", soonest);
}

struct tls_ctx *tls_ctx_get(const struct url_tls *t, char *err, size_t errlen) {
  for (struct tls_ctx *c = contexts; c; c = c->next)
    if (memcmp(&c->settings, t, sizeof *t) == 0) {
      c->refs++;
      return c;
    }
  struct tls_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if ((c->ctx = load(t, err, errlen)) == NULL) {
    free(c);
    return NULL;
  }
  c->settings = *t;
  c->refs = 1;
  c->next = contexts;
  contexts = c;
  record_client_expiry();
  return c;
}

void tls_ctx_put(struct tls_ctx *c) {
  if (c == NULL || --c->refs > 0) return;
  for (struct tls_ctx **p = &contexts; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  SSL_CTX_free(c->ctx);
  free(c);
  record_client_expiry(); /* the certificate let go may have been the soonest */
}

SSL *tls_ctx_ssl(struct tls_ctx *c, const char *host) {
  SSL *ssl = SSL_new(c->ctx);
  if (ssl == NULL) return NULL;
  const char *name = c->settings.server_name[0] ? c->settings.server_name : host;
  int ok = 1;
  if (url_is_ip(name)) {
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
  } else {
    ok = SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1;
  }
  if (!ok) {
    SSL_free(ssl);
    return NULL;
  }
  SSL_set_msg_callback(ssl, on_message); /* the handshake's only (tls_cert_requested) */
  return ssl;
}

int tls_reload(void) {
  int failed = 0;
  for (struct tls_ctx *c = contexts; c; c = c->next) {
    char err[512];
    SSL_CTX *fresh = load(&c->settings, err, sizeof err);
    if (fresh == NULL) {
      failed++;
      log_line(LOG_ERROR, NULL, "cannot re-read the TLS files: the ones read before stay in use",
               "error", err, NULL);
      continue;
    }
    SSL_CTX_free(c->ctx); /* open connections hold their own reference */
    c->ctx = fresh;
    log_line(LOG_INFO, NULL, "TLS files re-read", "ca", c->settings.ca[0] ? c->settings.ca : NULL,
             "cert", c->settings.cert[0] ? c->settings.cert : NULL, NULL);
  }
  record_client_expiry();
  return failed;
}

/* ---- handshakes ---- */

static bool cert_requested(const SSL *ssl) {
  return SSL_get_ex_data(ssl, cert_requested_index()) != NULL;
}

int tls_cert_requested(SSL *ssl) {
  SSL_set_msg_callback(ssl, NULL); /* the handshake is over: no call per record from here */
  return cert_requested(ssl);
}

void tls_handshake_done(SSL *ssl, const char *server) {
  metric_add(handshakes(), 1);
  record_expiry("server", server, SSL_get0_peer_certificate(ssl));
}

static void when(const ASN1_TIME *t, char *out, size_t len) {
  struct tm tm;
  if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1 ||
      strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(out, len, "(unknown date)");
}

/* A certificate that did not verify. */
static void explain_verify(long v, char *why, size_t len) {
  switch (v) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
      snprintf(why, len,
               "TLS: the server's certificate is not trusted (%s): pass the CA that signed it "
               "with --tls-ca or tls_ca=",
               X509_verify_cert_error_string(v));
      return;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      snprintf(why, len,
               "TLS: the server's certificate does not match the address connected to (%s): "
               "connect by a name or address it holds, or pass the name it holds with "
               "--tls-server-name or tls_server_name=",
               X509_verify_cert_error_string(v));
      return;
    case X509_V_ERR_CERT_HAS_EXPIRED:
      if (failed_depth == 0)
        snprintf(why, len, "TLS: the server's certificate expired on %s: renew it on the server",
                 failed_not_after);
      else
        snprintf(why, len,
                 "TLS: a CA certificate of the server's chain expired on %s: renew that CA (and "
                 "what it signed)",
                 failed_not_after);
      return;
    case X509_V_ERR_CERT_NOT_YET_VALID:
      snprintf(why, len, "TLS: the server's certificate is not valid before %s (check both clocks)",
               failed_not_before);
      return;
    default:
      snprintf(why, len, "TLS: the server's certificate did not verify: %s",
               X509_verify_cert_error_string(v));
  }
}

void tls_explain(SSL *ssl, int ssl_error, int opened, int received, char *why, size_t len,
                 int *denied) {
  *denied = 0;
  unsigned long e = 0, last;
  while ((last = ERR_get_error()) != 0) e = last;
  int reason = e ? ERR_GET_REASON(e) : 0;
  /* Asked for a client certificate while it had none to give. */
  bool cert_wanted = cert_requested(ssl) && SSL_get_certificate(ssl) == NULL;
  /* Only a handshake that was checking can fail on the certificate. */
  long v = !opened && (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) ? SSL_get_verify_result(ssl)
                                                                   : X509_V_OK;
  if (v != X509_V_OK) {
    *denied = 1;
    explain_verify(v, why, len);
  } else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
             (cert_wanted && reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)) {
    /* TLS 1.3: the server refuses after the client's handshake is done
     * (transport.c waits for its word before the first command, so that
     * the alert is not lost to a reset). */
    *denied = 1;
    snprintf(why, len,
             "TLS: the server requires a client certificate (tls-auth-clients): pass one with "
             "--tls-cert and --tls-key (or tls_cert= and tls_key=)");
  } else if (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
             reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
             reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
             reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN) {
    *denied = 1;
    snprintf(why, len,
             "TLS: the server refused the client certificate (%s): it must be signed by a CA "
             "the server trusts (its tls-ca-cert-file) and be valid",
             ERR_reason_error_string(e));
  } else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
             reason == SSL_R_RECORD_LENGTH_MISMATCH || reason == SSL_R_UNKNOWN_PROTOCOL) {
    /* It answered, and not in TLS. */
    *denied = 1;
    snprintf(why, len,
             "TLS: the server is not speaking TLS (%s): a plaintext port takes redis://, not "
             "rediss://",
             ERR_reason_error_string(e));
  } else if (reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION || reason == SSL_R_UNSUPPORTED_PROTOCOL) {
    *denied = 1;
    snprintf(why, len,
             "TLS: the server offers no TLS version luastream accepts (1.2 or later): enable "
             "TLS 1.2 or 1.3 on the server (tls-protocols)");
  } else if (opened && !received && (cert_wanted || SSL_get_certificate(ssl) != NULL)) {
    /* Maybe its alert was lost, maybe it just went: tried again. */
    snprintf(why, len,
             "TLS: the server closed the connection right after the handshake, before any "
             "reply (if this repeats, it may be refusing the client certificate%s)",
             cert_wanted ? ": it asked for one and none is given, see --tls-cert"
                         : ": not signed by a CA in its tls-ca-cert-file, or expired");
  } else if (!opened && !received) {
    snprintf(why, len,
             "TLS: the server closed the connection before answering the handshake (a server "
             "at maxclients does that)");
  } else if (ssl_error == SSL_ERROR_SYSCALL && errno != 0) {
    snprintf(why, len, "TLS: %s", strerror(errno));
  } else if (e == 0) {
    snprintf(why, len, "TLS: the server closed the connection");
  } else {
    snprintf(why, len, "TLS: %s", ERR_reason_error_string(e));
  }
  ERR_clear_error();
}
