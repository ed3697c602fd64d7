/* dead_letters_replay: `luastream dead-letters replay DIR STREAM (--id
 * ID... | --all)` hands dead letters back to the group that gave up on them,
 * on its retry stream, one server-side script per batch (SCRIPT_REPLAY).
 * What may be replayed comes from the handler files of DIR, never from the
 * entries alone: STREAM must be the dead_letter of some of them, and an entry
 * goes back only to the retry stream of one of those handlers' stream and
 * group, so an entry someone else wrote on STREAM cannot address another
 * stream or group. */
#ifndef LUASTREAM_DEAD_LETTERS_REPLAY_H
#define LUASTREAM_DEAD_LETTERS_REPLAY_H

/* argv: what follows "dead-letters replay". Returns the exit status: 0, 1
 * when something was refused or left on STREAM (said on stderr) or the
 * server could not be used, 2 on a usage error. */
int cmd_dl_replay(int argc, char **argv);

#endif
