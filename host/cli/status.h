/* status: `luastream status [--json] [--watch] DIR | STREAM...`: each
 * stream and group at a glance (length, lag, pending entries, consumers,
 * retry stream, delay set, dead letters) and what needs attention
 * (status_rules.h). One refresh asks the server in two pipelined rounds
 * (the streams and their groups, then each group's details) and prints a
 * table or one JSON document; --watch repeats it every 2 s until SIGINT.
 * Returns the exit status: 0 when nothing needs attention, 1 when something
 * does or the server cannot be read, 2 on a usage error. */
#ifndef LUASTREAM_STATUS_H
#define LUASTREAM_STATUS_H

int cmd_status(int argc, char **argv);

#endif
