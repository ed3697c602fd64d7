/* dead_letters: `luastream dead-letters list STREAM [--count N]` prints the
 * dead letters of a stream; `luastream dead-letters replay STREAM (--id
 * ID... | --all)` hands them back to the group that gave up on them, on its
 * retry stream, one server-side script per batch (SCRIPT_REPLAY). */
#ifndef LUASTREAM_DEAD_LETTERS_H
#define LUASTREAM_DEAD_LETTERS_H

/* argv: what follows "dead-letters" (list or replay, then its arguments).
 * Returns the exit status: 0, 1 when the server could not be used or
 * refused, 2 on a usage error. */
int cmd_dead_letters(int argc, char **argv);

#endif
