/* asyncapi_cmd: `luastream asyncapi` (asyncapi_cmd.h). */
#define _DEFAULT_SOURCE /* realpath */
#include "asyncapi_cmd.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asyncapi.h"
#include "host.h"
#include "options.h"
#include "trust.h"

/* What the document is made of beside the handlers. */
struct asyncapi_cmd {
  struct rt_asyncapi doc;
  struct rt_asyncapi_server server;
  char host[URL_SENTINELS_MAX * 270]; /* server.host */
  char title[PATH_MAX + 64];
  char dir[PATH_MAX];
};

/* "host:port", an IPv6 address in brackets, appended to out at *at. */
static void add_address(char *out, size_t cap, size_t *at, const char *name, int port) {
  int n = snprintf(out + *at, cap - *at, strchr(name, ':') ? "%s[%s]:%d" : "%s%s:%d",
                   *at ? "," : "", name, port);
  if (n > 0 && (size_t)n < cap - *at) *at += (size_t)n;
}

/* The server of the URL, its credentials left out: only whether it has
 * them. */
static void describe_server(const struct redis_url *u, struct asyncapi_cmd *c) {
  struct rt_asyncapi_server *s = &c->server;
  size_t at = 0;
  c->host[0] = '\0';
  if (u->nsentinels > 0) {
    for (int i = 0; i < u->nsentinels; i++)
      add_address(c->host, sizeof c->host, &at, u->sentinels[i].host, u->sentinels[i].port);
    s->service = u->service;
  } else if (u->path[0]) {
    snprintf(c->host, sizeof c->host, "localhost");
    s->socket = u->path;
  } else {
    add_address(c->host, sizeof c->host, &at, u->host, u->port);
  }
  s->host = c->host;
  s->db = u->db;
  s->tls = u->tls.on != 0;
  s->password = u->password[0] != '\0' || u->sentinel_password[0] != '\0';
  s->client_cert = u->tls.cert[0] != '\0';
}

/* DIR without trailing slashes into c->dir, and the default title from its
 * last folder name. */
static void describe_dir(const char *dir, struct asyncapi_cmd *c) {
  snprintf(c->dir, sizeof c->dir, "%s", dir);
  size_t n = strlen(c->dir);
  while (n > 1 && c->dir[n - 1] == '/') c->dir[--n] = '\0';
  const char *base = strrchr(c->dir, '/');
  base = base && base[1] ? base + 1 : c->dir;
  char real[PATH_MAX];
  if ((!strcmp(base, ".") || !strcmp(base, "..")) && realpath(c->dir, real)) {
    const char *slash = strrchr(real, '/');
    snprintf(c->title, sizeof c->title, "luastream handlers in %s",
             slash && slash[1] ? slash + 1 : real);
  } else {
    snprintf(c->title, sizeof c->title, "luastream handlers in %s", base);
  }
}

/* host_handlers_fn: the document of the loaded handlers, on stdout. */
static int write_document(void *data, handler *const *hs, size_t n) {
  const struct asyncapi_cmd *c = data;
  char *text = NULL, err[2048];
  size_t len = 0;
  if (rt_asyncapi(hs, n, &c->doc, &text, &len, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  size_t wrote = fwrite(text, 1, len, stdout);
  free(text);
  if (wrote != len || fflush(stdout) != 0) {
    fprintf(stderr, "luastream: asyncapi: cannot write the document to stdout\n");
    return 1;
  }
  return 0;
}

int cmd_asyncapi(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_ASYNCAPI, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct trust trust;
  if (cli_trust(&o, &trust, stderr) != 0) return 2;
  struct asyncapi_cmd *c = calloc(1, sizeof *c);
  if (c == NULL) {
    fprintf(stderr, "luastream: asyncapi: out of memory\n");
    return 1;
  }
  describe_server(&o.url, c);
  describe_dir(o.pos[0], c);
  c->doc =
      (struct rt_asyncapi){.title = cli_given(&o, OPT_TITLE) ? cli_text(&o, OPT_TITLE) : c->title,
                           .version = cli_text(&o, OPT_API_VERSION),
                           .dir = c->dir,
                           .server = &c->server,
                           .yaml = cli_given(&o, OPT_YAML)};
  int problems = host_check_all(o.pos[0], (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), &trust, stderr,
                                write_document, c);
  free(c);
  return problems ? 1 : 0;
}
