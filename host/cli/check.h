/* check: `luastream check [--load-timeout DURATION] [--watchdog DURATION] DIR`, loads and validates
 * every handler file of DIR without connecting to Redis. */
#ifndef LUASTREAM_CHECK_H
#define LUASTREAM_CHECK_H

/* argv: what follows "check". Returns the exit status: 0 when every file is
 * valid, 1 when one is not (each problem said on stderr), 2 on a usage error. */
int cmd_check(int argc, char **argv);

#endif
