/* asyncapi: the AsyncAPI 3.0.0 document of loaded handlers (`luastream
 * asyncapi`). Their validated specs are copied into a Lua state of its own,
 * where luastream.asyncapi (lua/luastream/asyncapi.lua) builds the document
 * and writes it as JSON or YAML. */
#ifndef LUASTREAM_ASYNCAPI_H
#define LUASTREAM_ASYNCAPI_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"

/* The server the handlers run against, without its credentials. */
struct rt_asyncapi_server {
  const char *host;    /* "host:port"; sentinels "a:26379,b:26379"; a unix socket "localhost" */
  const char *socket;  /* a unix socket's path, else NULL */
  const char *service; /* a Sentinel service, else NULL */
  int db;
  bool tls;         /* rediss:// */
  bool password;    /* the URL has one (AUTH) */
  bool client_cert; /* a TLS client certificate is given */
};

struct rt_asyncapi {
  const char *title;                       /* info.title */
  const char *version;                     /* info.version */
  const char *dir;                         /* the handler directory, as given */
  const struct rt_asyncapi_server *server; /* NULL: no servers */
  bool yaml;                               /* YAML, else JSON */
};

/* The document of the n handlers hs (loaded, not bound: handler_spec_push),
 * in the order given, into *out (malloc'd, NUL-terminated, *len bytes).
 * Returns 0, or -1 with a message naming the file at fault in err. */
int rt_asyncapi(handler *const *hs, size_t n, const struct rt_asyncapi *o, char **out, size_t *len,
                char *err, size_t errlen);

#endif
