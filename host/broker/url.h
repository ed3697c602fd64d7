/* url: Redis server addresses as users write them.
 *
 *   redis://[[user]:password@]host[:port][/db]
 *   unix://[[user]:password@]/path/to/socket[?db=N]
 *   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/SERVICE[/db]
 *       [?sentinel_user=U&sentinel_password=P]
 *   rediss://... and rediss+sentinel://...: the same over TLS, with
 *       [?tls_ca=PATH&tls_cert=FILE&tls_key=FILE&tls_key_password_file=FILE
 *        &tls_server_name=NAME]
 *
 * A sentinel URL names the sentinels (port 26379 when not given) and the
 * service (the master's name in their configuration); the host asks them
 * where the master is. The credentials before '@' are the master's; the
 * sentinels get none unless sentinel_password (and sentinel_user) is given,
 * since sentinels usually run without requirepass.
 *
 * host may be a name, an IPv4 address or a bracketed IPv6 address
 * (redis://[::1]:6379). user and password may be percent-encoded (%40 for
 * '@'); an unencoded '@' or ':' inside the password also works, because the
 * credentials end at the last '@'. With rediss+sentinel:// both the sentinels
 * and the master are reached over TLS. The tls_* parameters are paths and a
 * name, never a way to skip verification (that is a command-line flag only,
 * so a handler's ls.redis.connect(url) cannot turn it off).
 *
 * The parsed form keeps the secret apart so the redacted text (password
 * replaced by "***") is what every log line and error message shows. */
#ifndef LUASTREAM_URL_H
#define LUASTREAM_URL_H

#include <stddef.h>

#define URL_TEXT_MAX 512
#define URL_SENTINELS_MAX 8

struct url_sentinel {
  char host[256]; /* IPv6 without brackets */
  int port;       /* 26379 when not given */
};

#define URL_PATH_MAX 256

/* TLS settings (tls.h): from the URL's tls_* parameters, or from the
 * command line (url_set_tls). Empty strings are "not given". */
struct url_tls {
  int on;                               /* rediss:// or rediss+sentinel:// */
  char ca[URL_PATH_MAX];                /* CA file or directory; empty: the system's store */
  char cert[URL_PATH_MAX];              /* client certificate (mTLS) */
  char key[URL_PATH_MAX];               /* ... and its key */
  char key_password_file[URL_PATH_MAX]; /* the key's password, first line of this file */
  char server_name[256];                /* SNI and the name verified, for every node */
  int skip_verify;                      /* --tls-skip-verify (tests): never from a URL */
};

struct redis_url {
  char host[256];     /* empty for unix sockets; IPv6 without brackets */
  int port;           /* 6379 when not given; 0 for unix sockets */
  char path[256];     /* unix socket path, empty for TCP */
  char user[128];     /* empty when not given (decoded) */
  char password[256]; /* empty when not given (decoded) */
  int db;             /* 0 when not given */
  /* redis+sentinel:// only (nsentinels > 0; host and port are then empty) */
  char service[128];
  int nsentinels;
  struct url_sentinel sentinels[URL_SENTINELS_MAX];
  char sentinel_user[128];     /* decoded; empty when not given */
  char sentinel_password[256]; /* decoded; empty when not given */
  struct url_tls tls;
  int cluster_node;            /* a node a cluster named (not parsed: set by broker_cluster) */
  char redacted[URL_TEXT_MAX]; /* the URL as written, password shown as "***" */
};

/* Parses text into *out. Returns 0, or -1 with a one-line reason in err
 * (`redis URL "<redacted>": <what is wrong>`) that never contains the
 * password. out is not meaningful after a failure. */
int url_parse(const char *text, struct redis_url *out, char *err, size_t errlen);

/* Whether host is an IPv4 or IPv6 address (not a name to resolve). */
int url_is_ip(const char *host);

#endif
