/* servers: the other Redis servers handlers talk to; see servers.h. */
#include "servers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"
#include "url.h"

static struct server *find(struct servers *s, const char *url) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i].url, url) == 0) return &s->v[i];
  return NULL;
}

/* Opens sv's connection; on failure it stays closed (calls say "not
 * connected") and the log says why. */
static void open_one(struct servers *s, struct server *sv) {
  if (sv->conn || s->backend.open == NULL) return;
  struct redis_url url;
  char err[URL_TEXT_MAX + 128];
  if (url_parse(sv->url, &url, err, sizeof err) != 0) return; /* checked when registered */
  if (sv->b == NULL) sv->b = s->backend.open(s->backend.data, &url);
  if (sv->b) sv->conn = bk_conn_open(sv->b, "handler calls", NULL, NULL);
  if (sv->conn == NULL) {
    /* out of memory, or TLS files that do not load (the broker said which) */
    log_line(LOG_ERROR, NULL, "no connection for handlers: their calls fail as not connected",
             "redis", sv->redacted, NULL);
    return;
  }
  log_line(LOG_INFO, NULL, "connecting for handlers", "redis", sv->redacted, NULL);
}

int servers_connect(void *data, const char *url, broker **b, bk_conn **conn, char *err,
                    size_t errlen) {
  struct servers *s = data;
  *b = NULL;
  *conn = NULL;
  if (errlen) err[0] = '\0';
  struct server *sv = find(s, url);
  if (sv == NULL) {
    struct redis_url parsed;
    if (url_parse(url, &parsed, err, errlen) != 0) return -1;
    struct server *v = grow(s->v, &s->cap, s->n + 1, sizeof *v, 4);
    if (v == NULL) goto oom;
    s->v = v;
    sv = &s->v[s->n];
    *sv = (struct server){.url = strdup(url), .redacted = strdup(parsed.redacted)};
    if (sv->url == NULL || sv->redacted == NULL) {
      free(sv->url);
      free(sv->redacted);
      goto oom;
    }
    s->n++;
  }
  if (s->running) open_one(s, sv);
  *b = sv->b;
  *conn = sv->conn;
  /* Why there is no connection, for a call that wants one. */
  if (sv->conn == NULL)
    snprintf(err, errlen, "%s",
             s->running ? "no connection could be set up for this server (the log says why: "
                          "TLS files that do not load, or memory)"
                        : "the host is not running");
  return 0;
oom:
  snprintf(err, errlen, "out of memory");
  return -1;
}

void servers_start(struct servers *s) {
  s->running = true;
  for (size_t i = 0; i < s->n; i++) open_one(s, &s->v[i]);
}

void servers_close(struct servers *s) {
  s->running = false;
  for (size_t i = 0; i < s->n; i++) {
    /* Taken first: the close fails the calls in flight, whose handlers run
     * on and may register another URL (s->v may move). */
    broker *b = s->v[i].b;
    bk_conn *conn = s->v[i].conn;
    s->v[i].b = NULL;
    s->v[i].conn = NULL;
    if (conn) bk_conn_close(b, conn);
    if (b && s->backend.release) s->backend.release(s->backend.data, b);
  }
}

void servers_free(struct servers *s) {
  servers_close(s);
  for (size_t i = 0; i < s->n; i++) {
    free(s->v[i].url);
    free(s->v[i].redacted);
  }
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}
