/* url: Redis server addresses as users write them.
 *
 *   redis://[[user]:password@]host[:port][/db]
 *   unix://[[user]:password@]/path/to/socket[?db=N]
 *
 * host may be a name, an IPv4 address or a bracketed IPv6 address
 * (redis://[::1]:6379). user and password may be percent-encoded (%40 for
 * '@'); an unencoded '@' or ':' inside the password also works, because the
 * credentials end at the last '@'. rediss:// (TLS) is recognised only to be
 * refused with a clear message: this build has no TLS.
 *
 * The parsed form keeps the secret apart so the redacted text (password
 * replaced by "***") is what every log line and error message shows. */
#ifndef LUASTREAM_URL_H
#define LUASTREAM_URL_H

#include <stddef.h>

#define URL_TEXT_MAX 512

struct redis_url {
  char host[256];        /* empty for unix sockets; IPv6 without brackets */
  int port;              /* 6379 when not given; 0 for unix sockets */
  char path[256];        /* unix socket path, empty for TCP */
  char user[128];        /* empty when not given (decoded) */
  char password[256];    /* empty when not given (decoded) */
  int db;                /* 0 when not given */
  char redacted[URL_TEXT_MAX]; /* the URL as written, password shown as "***" */
};

/* Parses text into *out. Returns 0, or -1 with a one-line reason in err
 * (`redis URL "<redacted>": <what is wrong>`) that never contains the
 * password. out is not meaningful after a failure. */
int url_parse(const char *text, struct redis_url *out, char *err, size_t errlen);

#endif
