/* http: what every HTTP client checks the same way; see http.h. */
#include "http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool has_scheme(const char *url, const char *scheme) {
  size_t n = strlen(scheme);
  return strncasecmp(url, scheme, n) == 0 && url[n] != '\0';
}

/* No control characters and no spaces: what a URL or a header name may not
 * hold (libcurl would send some of them as they are). */
static bool plain(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || *s == 0x7f) return false;
  return true;
}

int http_request_check(const struct http_request *req, char *err, size_t errlen) {
  const char *m = req->method;
  if (m == NULL || *m == '\0' || strlen(m) > 16) {
    snprintf(err, errlen, "the method must be a word such as GET or POST");
    return -1;
  }
  for (const char *p = m; *p; p++)
    if (*p < 'A' || *p > 'Z') {
      snprintf(err, errlen, "the method must be upper-case letters, got \"%.16s\"", m);
      return -1;
    }
  if (strcmp(m, "HEAD") == 0 && req->body) {
    snprintf(err, errlen, "a HEAD request has no body");
    return -1;
  }
  if (req->url == NULL || !(has_scheme(req->url, "http://") || has_scheme(req->url, "https://"))) {
    snprintf(err, errlen, "the URL must start with http:// or https://");
    return -1;
  }
  if (!plain(req->url)) {
    snprintf(err, errlen, "the URL holds a space or a control character (encode it)");
    return -1;
  }
  for (size_t i = 0; i < req->nheaders; i++) {
    const char *h = req->headers[i], *colon = strchr(h, ':');
    if (colon == NULL || colon == h) {
      snprintf(err, errlen, "header line %zu is not \"Name: value\"", i + 1);
      return -1;
    }
    for (const char *p = h; p < colon; p++)
      if ((unsigned char)*p <= ' ' || *p == 0x7f) {
        snprintf(err, errlen, "header name \"%.*s\" holds a space or a control character",
                 (int)(colon - h < 64 ? colon - h : 64), h);
        return -1;
      }
    for (const char *p = colon + 1; *p; p++)
      if (*p == '\r' || *p == '\n') {
        snprintf(err, errlen, "the value of header \"%.*s\" holds a line break",
                 (int)(colon - h < 64 ? colon - h : 64), h);
        return -1;
      }
  }
  return 0;
}

const char *http_redact_url(const char *url, char *out, size_t len) {
  if (len == 0) return out;
  const char *start = strstr(url, "://");
  const char *host = start ? start + 3 : url;
  size_t hostpart = strcspn(host, "/?#");
  const char *at = NULL; /* the last '@' of the authority ends the userinfo */
  for (const char *p = host; p < host + hostpart; p++)
    if (*p == '@') at = p;
  const char *colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
  if (colon == NULL)
    snprintf(out, len, "%s", url);
  else
    snprintf(out, len, "%.*s***%s", (int)(colon + 1 - url), url, at);
  return out;
}
