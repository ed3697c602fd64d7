/* asyncapi_cmd: `luastream asyncapi [--yaml] [--redis URL | --redis-file PATH] DIR`, the
 * AsyncAPI document of the handlers of DIR on stdout (runtime/asyncapi.h builds
 * it), without connecting. */
#ifndef LUASTREAM_ASYNCAPI_CMD_H
#define LUASTREAM_ASYNCAPI_CMD_H

/* argv: what follows "asyncapi". Returns the exit status: 0 when the
 * document was written, 1 when a handler file has a problem (said on stderr,
 * as by `luastream check`) or the document could not be written, 2 on a
 * usage error. */
int cmd_asyncapi(int argc, char **argv);

#endif
