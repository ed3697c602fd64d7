/* http_curl: the HTTP client of a running host (http.h's seam), libcurl's
 * multi interface driven by the host's libuv loop: a uv_poll per socket
 * libcurl opens and one uv_timer for libcurl's timeouts, the pairing
 * libcurl documents for curl_multi_socket_action. Nothing blocks the loop:
 * name lookups run in libcurl's resolver thread, TLS and transfers on the
 * loop's sockets.
 *
 * One multi handle for the whole host, so connections are kept and reused
 * per host (keep-alive) by every handler, at most max_per_host at once (more
 * requests queue inside libcurl, their timeout running). Easy handles and
 * their buffers are kept for the next request. Only http:// and https://
 * are spoken; redirects only when a request asks; proxies from the usual
 * environment variables (http_proxy, https_proxy, no_proxy), as libcurl
 * reads them; certificates checked against the system's CA store or
 * ca_file. */
#ifndef LUASTREAM_HTTP_CURL_H
#define LUASTREAM_HTTP_CURL_H

#include <stddef.h>
#include <uv.h>

#include "http.h"

struct http_curl_options {
  long max_per_host;   /* connections to one host at once; 0: libcurl's (no limit) */
  const char *ca_file; /* NULL: the system's CA store */
};

/* A client on loop; NULL with a reason in err. Close it (http_close) before
 * the loop's last run: its handles close there, and http_free then (or
 * before: it is freed once they have) releases the rest. */
http_client *http_curl_new(uv_loop_t *loop, const struct http_curl_options *o, char *err,
                           size_t errlen);

/* libcurl's version line ("libcurl/7.88.1 OpenSSL/3.0.15 ..."), for logs. */
const char *http_curl_version(void);

#endif
