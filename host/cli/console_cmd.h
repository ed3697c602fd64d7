/* console_cmd: `luastream console` (console.h), the web console without
 * handlers, until SIGTERM or SIGINT. */
#ifndef LUASTREAM_CONSOLE_CMD_H
#define LUASTREAM_CONSOLE_CMD_H

#include <stdbool.h>

/* argv: what follows "console". Returns the exit status: 0, 1 when the
 * console cannot start (said on stderr), 2 on a usage error. */
int cmd_console(int argc, char **argv);

struct cli_options;
/* --console and --console-tokens come together; required: the command
 * needs them. Returns 0, or 2 having said why on stderr. */
int console_options_check(const struct cli_options *o, bool required);

#endif
