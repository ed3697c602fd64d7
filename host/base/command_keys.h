/* command_keys: which arguments of a Redis command are keys.
 *
 * Redis Cluster sends a command to the node that serves its keys' slot, and a
 * script or a transaction may only touch keys of one slot. Both the broker
 * (routing) and the runtime (refusing a handler's write to another slot)
 * need the key positions, for the commands luastream and handlers send. The
 * table covers the commands with no key or whose keys are not simply the
 * first argument; any other command's key is its first argument, which holds
 * for nearly all of the rest. */
#ifndef LUASTREAM_COMMAND_KEYS_H
#define LUASTREAM_COMMAND_KEYS_H

#include <stddef.h>

/* Writes the argv indexes of the keys of the command into keys (at most
 * max) and returns how many keys it has (which may exceed max; 0 for a
 * command without keys, such as PING or an EVAL with numkeys 0). A
 * malformed command (numkeys past the end, XREADGROUP without STREAMS)
 * counts the keys that are there. */
int command_keys(int argc, const char *const *argv, const size_t *argvlen, int *keys, int max);

#endif
