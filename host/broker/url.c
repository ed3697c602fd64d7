/* url: parses Redis server URLs and builds their redacted form.
 *
 * The redacted text is built first, from the raw input, so that every error
 * message can quote the URL as the user wrote it without ever showing the
 * secret: the password after "user:", credentials written without a colon
 * (a lone "secret@" is more likely a password than a user name), and the value
 * of any query parameter other than db (redis-py style "?password=..."). The
 * parse proper then walks the text left to right: scheme, credentials (up to
 * the last '@'), then host and port or socket path, then db; a sentinel URL
 * has a comma-separated list of host[:port] and the service before the db. */
#include "url.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Redaction may make the text a little longer than the input ("p@" becomes
 * "***@"), so the input stays well under the redacted buffer. */
#define URL_INPUT_MAX (URL_TEXT_MAX - 64)
/* sockaddr_un.sun_path holds 108 bytes including the NUL on Linux. */
#define SOCKET_PATH_MAX 107

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen,
                                                      const char *redacted, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (err && errlen) {
    if (redacted)
      snprintf(err, errlen, "redis URL \"%s\": %s", redacted, why);
    else
      snprintf(err, errlen, "redis URL: %s", why);
  }
  return -1;
}

/* ---- redaction ---- */

struct text {
  char *p;
  size_t len;
  size_t cap; /* including the NUL */
};

static void put(struct text *t, const char *s, size_t n) {
  if (t->len + n >= t->cap) n = t->cap - 1 - t->len; /* cut, never overflow */
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

static void puts0(struct text *t, const char *s) { put(t, s, strlen(s)); }

/* rest: text after "scheme://"; at: the '@' ending the credentials, or NULL. */
static void redact(const char *text, const char *rest, const char *at, char *out, size_t cap) {
  struct text t = {out, 0, cap};
  out[0] = '\0';
  put(&t, text, (size_t)(rest - text));
  const char *hp = rest;
  if (at) {
    const char *colon = memchr(rest, ':', (size_t)(at - rest));
    if (colon) {
      put(&t, rest, (size_t)(colon + 1 - rest)); /* "user:" as written */
      if (at > colon + 1) puts0(&t, "***");
    } else {
      puts0(&t, "***");
    }
    puts0(&t, "@");
    hp = at + 1;
  }
  const char *q = strchr(hp, '?');
  if (q == NULL) {
    puts0(&t, hp);
  } else {
    put(&t, hp, (size_t)(q + 1 - hp));
    const char *s = q + 1;
    while (*s && *s != '#') {
      size_t n = strcspn(s, "&#");
      const char *eq = memchr(s, '=', n);
      /* db and the tls_* paths are no secret, and name what a message is about */
      if (eq && !(eq - s == 2 && strncasecmp(s, "db", 2) == 0) && strncmp(s, "tls_", 4) != 0) {
        put(&t, s, (size_t)(eq + 1 - s));
        puts0(&t, "***");
      } else {
        put(&t, s, n);
      }
      s += n;
      if (*s == '&') {
        puts0(&t, "&");
        s++;
      }
    }
    /* a fragment here is most likely the rest of a password with a '#' */
    if (*s) puts0(&t, "#***");
  }
  /* Error messages are one line: a stray newline from a config file must not
   * split them. */
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < ' ' || *p == 0x7f) *p = '?';
}

/* ---- pieces ---- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into out (cap bytes with the NUL). Returns 0, -1 on
 * a bad escape (or %00, which a C string cannot hold), -2 when too long. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c == '%') {
      if (i + 2 >= n) return -1;
      int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
      if (hi < 0 || lo < 0) return -1;
      c = hi * 16 + lo;
      if (c == 0) return -1;
      i += 2;
    }
    if (o + 1 >= cap) return -2;
    out[o++] = (char)c;
  }
  out[o] = '\0';
  return 0;
}

/* A db number: decimal digits only, fitting an int. */
static int parse_db(const char *s, size_t n, int *db) {
  long long v = 0;
  if (n == 0) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
    if (v > INT_MAX) return -1;
  }
  *db = (int)v;
  return 0;
}

static int host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

/* One host[:port] (or [v6]:port) in a[0..alen), into host and *port
 * (defport when not given). */
static int parse_authority(const char *a, size_t alen, char *host, size_t hostcap, int *port_out,
                           int defport, const char *red, char *err, size_t errlen) {
  const char *port = NULL; /* after ':' when a port is given */
  size_t plen = 0;

  if (a[0] == '[') {
    const char *close = memchr(a, ']', alen);
    if (close == NULL) return fail(err, errlen, red, "missing ']' after the IPv6 address");
    size_t hlen = (size_t)(close - a - 1);
    if (hlen == 0 || hlen >= hostcap)
      return fail(err, errlen, red, "invalid IPv6 address in brackets");
    memcpy(host, a + 1, hlen);
    host[hlen] = '\0';
    unsigned char addr[16];
    if (inet_pton(AF_INET6, host, addr) != 1)
      return fail(err, errlen, red, "invalid IPv6 address in brackets");
    if (close + 1 < a + alen) {
      if (close[1] != ':')
        return fail(err, errlen, red, "unexpected text after ']' (write [address]:port)");
      port = close + 2;
      plen = (size_t)(a + alen - port);
    }
  } else {
    const char *colon = memchr(a, ':', alen);
    size_t hlen = colon ? (size_t)(colon - a) : alen;
    if (colon) {
      port = colon + 1;
      plen = (size_t)(a + alen - port);
      if (memchr(port, ':', plen))
        return fail(err, errlen, red,
                    "an IPv6 address must be in brackets, e.g. redis://[::1]:6379");
    }
    if (hlen == 0) return fail(err, errlen, red, "missing host");
    if (hlen >= hostcap)
      return fail(err, errlen, red, "host is longer than %zu bytes", hostcap - 1);
    for (size_t i = 0; i < hlen; i++)
      if (!host_char(a[i]))
        return fail(err, errlen, red, "invalid character in host (letters, digits, '-', '.', '_')");
    memcpy(host, a, hlen);
    host[hlen] = '\0';
  }

  *port_out = defport;
  if (port) {
    long v = 0;
    if (plen == 0) return fail(err, errlen, red, "missing port after ':'");
    for (size_t i = 0; i < plen; i++) {
      if (port[i] < '0' || port[i] > '9' || v > 65535)
        return fail(err, errlen, red, "port must be 1-65535");
      v = v * 10 + (port[i] - '0');
    }
    if (v < 1 || v > 65535) return fail(err, errlen, red, "port must be 1-65535");
    *port_out = (int)v;
  }
  return 0;
}

static int parse_query(const char *q, struct redis_url *out, int sentinel, char *err,
                       size_t errlen);

/* hp: what follows the credentials in redis://. */
static int parse_tcp(const char *hp, struct redis_url *out, char *err, size_t errlen) {
  const char *red = out->redacted;
  size_t alen = strcspn(hp, "/?#"); /* the authority: host and port */
  if (parse_authority(hp, alen, out->host, sizeof out->host, &out->port, 6379, red, err, errlen) !=
      0)
    return -1;

  const char *p = hp + alen;
  if (*p == '/') {
    size_t dlen = strcspn(++p, "?#");
    if (dlen > 0 && parse_db(p, dlen, &out->db) != 0)
      return fail(err, errlen, red, "db must be a number 0 or more (redis://host:port/N)");
    p += dlen;
  }
  if (*p == '?') {
    if (!out->tls.on && p[1] != '\0' && p[1] != '#')
      return fail(err, errlen, red,
                  "query parameters are not supported in redis:// URLs "
                  "(the db goes in the path: redis://host:port/N; the tls_* parameters "
                  "need rediss://)");
    if (parse_query(p + 1, out, 0, err, errlen) != 0) return -1;
    p += strcspn(p, "#");
  }
  if (*p != '\0') return fail(err, errlen, red, "unexpected '#' fragment");
  return 0;
}

/* A sentinel_user / sentinel_password value, percent-decoded. */
static int query_value(const char *v, size_t n, char *out, size_t cap, const char *name,
                       const char *red, char *err, size_t errlen) {
  int rc = pct_decode(v, n, out, cap);
  if (rc == -1) return fail(err, errlen, red, "bad %%-escape in %s", name);
  if (rc == -2) return fail(err, errlen, red, "%s is longer than %zu bytes", name, cap - 1);
  return 0;
}

/* The parameters a URL may carry: the TLS settings (rediss only) and the
 * sentinels' credentials (sentinel URLs only). q: after the '?'. */
static const struct {
  const char *name;
  size_t offset, cap;
  int sentinel; /* a sentinel URL's parameter, else a TLS one */
} PARAMS[] = {
    {"sentinel_user", offsetof(struct redis_url, sentinel_user), 128, 1},
    {"sentinel_password", offsetof(struct redis_url, sentinel_password), 256, 1},
    {"tls_ca", offsetof(struct redis_url, tls.ca), URL_PATH_MAX, 0},
    {"tls_cert", offsetof(struct redis_url, tls.cert), URL_PATH_MAX, 0},
    {"tls_key", offsetof(struct redis_url, tls.key), URL_PATH_MAX, 0},
    {"tls_key_password_file", offsetof(struct redis_url, tls.key_password_file), URL_PATH_MAX, 0},
    {"tls_server_name", offsetof(struct redis_url, tls.server_name), 256, 0},
};

static int parse_query(const char *q, struct redis_url *out, int sentinel, char *err,
                       size_t errlen) {
  const char *red = out->redacted;
  const char *known = sentinel ? (out->tls.on ? "sentinel_user, sentinel_password and tls_*"
                                              : "sentinel_user and sentinel_password")
                               : "tls_ca, tls_cert, tls_key, tls_key_password_file, "
                                 "tls_server_name";
  while (*q && *q != '#') {
    size_t n = strcspn(q, "&#");
    const char *eq = memchr(q, '=', n);
    size_t k = eq ? (size_t)(eq - q) : n;
    const char *v = eq ? eq + 1 : q + n;
    size_t vn = (size_t)(q + n - v);
    size_t i = 0, count = sizeof PARAMS / sizeof *PARAMS;
    while (i < count && !(strlen(PARAMS[i].name) == k && strncmp(q, PARAMS[i].name, k) == 0)) i++;
    if (i < count && (PARAMS[i].sentinel ? sentinel : out->tls.on)) {
      if (query_value(v, vn, (char *)out + PARAMS[i].offset, PARAMS[i].cap, PARAMS[i].name, red,
                      err, errlen) != 0)
        return -1;
    } else if (k == 15 && strncmp(q, "tls_skip_verify", 15) == 0) {
      return fail(err, errlen, red,
                  "tls_skip_verify cannot be set in a URL (the --tls-skip-verify flag, for "
                  "tests, is the only way)");
    } else if (i < count && !PARAMS[i].sentinel) {
      return fail(err, errlen, red, "%s needs a rediss:// URL", PARAMS[i].name);
    } else if (n > 0) {
      /* The name only: the value may be a secret. */
      int printable = 1;
      for (size_t j = 0; j < k; j++)
        if ((unsigned char)q[j] <= ' ' || q[j] == '"' || q[j] == 0x7f) printable = 0;
      if (printable && k > 0 && k <= 32)
        return fail(err, errlen, red, "unknown parameter \"%.*s\" (only %s are supported)", (int)k,
                    q, known);
      return fail(err, errlen, red, "unknown parameter (only %s are supported)", known);
    }
    q += n;
    if (*q == '&') q++;
  }
  return 0;
}

#define SENTINEL_FORM "redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db]"

/* hp: what follows the credentials in redis+sentinel://: the sentinels,
 * then /SERVICE, then an optional /db and the sentinels' credentials. */
static int parse_sentinel(const char *hp, struct redis_url *out, char *err, size_t errlen) {
  const char *red = out->redacted;
  size_t alen = strcspn(hp, "/?#");
  if (alen == 0)
    return fail(err, errlen, red, "missing sentinel address (write " SENTINEL_FORM ")");
  const char *a = hp, *end = hp + alen;
  while (a <= end) {
    const char *comma = memchr(a, ',', (size_t)(end - a));
    size_t n = comma ? (size_t)(comma - a) : (size_t)(end - a);
    if (n == 0) return fail(err, errlen, red, "empty sentinel address in the list");
    if (out->nsentinels == URL_SENTINELS_MAX)
      return fail(err, errlen, red, "more than %d sentinels", URL_SENTINELS_MAX);
    struct url_sentinel *s = &out->sentinels[out->nsentinels++];
    if (parse_authority(a, n, s->host, sizeof s->host, &s->port, 26379, red, err, errlen) != 0)
      return -1;
    a += n + 1;
  }
  out->port = 0;

  const char *p = end;
  if (*p != '/' || p[1] == '\0' || p[1] == '/' || p[1] == '?' || p[1] == '#')
    return fail(err, errlen, red, "missing service name (write " SENTINEL_FORM ")");
  size_t slen = strcspn(++p, "/?#");
  if (slen >= sizeof out->service)
    return fail(err, errlen, red, "service name is longer than %zu bytes", sizeof out->service - 1);
  for (size_t i = 0; i < slen; i++)
    if ((unsigned char)p[i] <= ' ' || p[i] == 0x7f || p[i] == '%' || p[i] == ',')
      return fail(err, errlen, red, "invalid character in the service name");
  memcpy(out->service, p, slen);
  out->service[slen] = '\0';
  p += slen;
  if (*p == '/') {
    size_t dlen = strcspn(++p, "?#");
    if (dlen > 0 && parse_db(p, dlen, &out->db) != 0)
      return fail(err, errlen, red, "db must be a number 0 or more (" SENTINEL_FORM ")");
    p += dlen;
  }
  if (*p == '?' && parse_query(p + 1, out, 1, err, errlen) != 0) return -1;
  p += strcspn(p, "#");
  if (*p != '\0') return fail(err, errlen, red, "unexpected '#' fragment");
  if (out->sentinel_user[0] && !out->sentinel_password[0])
    return fail(err, errlen, red, "sentinel_user needs a sentinel_password");
  return 0;
}

/* hp: what follows the credentials in unix://, the socket path first. */
static int parse_unix(const char *hp, struct redis_url *out, char *err, size_t errlen) {
  const char *red = out->redacted;
  if (hp[0] != '/')
    return fail(err, errlen, red,
                "a unix socket URL needs an absolute path: unix:///path/to/socket");
  size_t plen = strcspn(hp, "?#");
  if (plen == 1) return fail(err, errlen, red, "missing socket path");
  if (plen > SOCKET_PATH_MAX)
    return fail(err, errlen, red, "socket path is longer than %d bytes", SOCKET_PATH_MAX);
  memcpy(out->path, hp, plen);
  out->path[plen] = '\0';
  out->port = 0;

  const char *q = hp + plen;
  if (*q == '?') {
    q++;
    while (*q && *q != '#') {
      size_t n = strcspn(q, "&#");
      if (n > 3 && strncmp(q, "db=", 3) == 0) {
        if (parse_db(q + 3, n - 3, &out->db) != 0)
          return fail(err, errlen, red, "db must be a number 0 or more (?db=N)");
      } else if (n > 0) {
        /* The name only: the value may be a secret. */
        size_t k = strcspn(q, "=&#");
        int printable = 1;
        for (size_t i = 0; i < k; i++)
          if ((unsigned char)q[i] <= ' ' || q[i] == '"' || q[i] == 0x7f) printable = 0;
        if (printable && k > 0 && k <= 32)
          return fail(err, errlen, red, "unknown parameter \"%.*s\" (only db=N is supported)",
                      (int)k, q);
        return fail(err, errlen, red, "unknown parameter (only db=N is supported)");
      }
      q += n;
      if (*q == '&') q++;
    }
  }
  if (*q != '\0') return fail(err, errlen, red, "unexpected '#' fragment");
  return 0;
}

int url_is_ip(const char *host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* ---- entry point ---- */

int url_parse(const char *text, struct redis_url *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (err && errlen) err[0] = '\0';
  if (text == NULL || text[0] == '\0')
    return fail(err, errlen, NULL,
                "empty (write redis://host[:port][/db] or unix:///path/to/socket)");
  if (strlen(text) > URL_INPUT_MAX)
    return fail(err, errlen, NULL, "longer than %d bytes", URL_INPUT_MAX);

  const char *sep = strstr(text, "://");
  const char *rest = sep ? sep + 3 : text;
  /* The credentials end at the last '@', so an unencoded '@' in a password
   * still parses. A unix path comes right after "//" when there are none. */
  const char *at = rest[0] != '/' ? strrchr(rest, '@') : NULL;
  redact(text, rest, at, out->redacted, sizeof out->redacted);
  const char *red = out->redacted;

  int is_unix, is_sentinel = 0;
  size_t slen = sep ? (size_t)(sep - text) : 0;
  if (sep == NULL)
    return fail(err, errlen, red,
                "missing scheme (write redis://host[:port][/db] or unix:///path/to/socket)");
  if (slen == 5 && strncasecmp(text, "redis", 5) == 0)
    is_unix = 0;
  else if (slen == 4 && strncasecmp(text, "unix", 4) == 0)
    is_unix = 1;
  else if (slen == 14 && strncasecmp(text, "redis+sentinel", 14) == 0)
    is_unix = 0, is_sentinel = 1;
  else if (slen == 6 && strncasecmp(text, "rediss", 6) == 0)
    is_unix = 0, out->tls.on = 1;
  else if (slen == 15 && strncasecmp(text, "rediss+sentinel", 15) == 0)
    is_unix = 0, is_sentinel = 1, out->tls.on = 1;
  else
    return fail(err, errlen, red,
                "unsupported scheme (use redis://, rediss://, unix://, redis+sentinel:// or "
                "rediss+sentinel://)");

  if (at) {
    size_t ilen = (size_t)(at - rest);
    const char *colon = memchr(rest, ':', ilen);
    if (colon == NULL)
      return fail(err, errlen, red, "credentials must be written user:password@ or :password@");
    size_t ulen = (size_t)(colon - rest);
    int rc = pct_decode(rest, ulen, out->user, sizeof out->user);
    if (rc == -1) return fail(err, errlen, red, "bad %%-escape in the user name");
    if (rc == -2)
      return fail(err, errlen, red, "user name is longer than %zu bytes", sizeof out->user - 1);
    rc = pct_decode(colon + 1, ilen - ulen - 1, out->password, sizeof out->password);
    if (rc == -1) return fail(err, errlen, red, "bad %%-escape in the password");
    if (rc == -2)
      return fail(err, errlen, red, "password is longer than %zu bytes", sizeof out->password - 1);
    if (out->user[0] && !out->password[0])
      return fail(err, errlen, red, "a user needs a password (user:password@)");
  }

  const char *hp = at ? at + 1 : rest;
  if (is_sentinel) return parse_sentinel(hp, out, err, errlen);
  return is_unix ? parse_unix(hp, out, err, errlen) : parse_tcp(hp, out, err, errlen);
}
