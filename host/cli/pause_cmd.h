/* pause_cmd: `luastream pause STREAM GROUP [--for DURATION] [--reason TEXT]`
 * and `luastream resume STREAM GROUP`: an operator's pause of a group on
 * every host (consumer/pause.h says how hosts see it), written with
 * SCRIPT_PAUSE on the group's pause key (flow_keys.h) in one call that has
 * been answered when the command returns: the hosts' guarantee (no handler
 * starts more than PAUSE_FRESH_MS later) counts from then. */
#ifndef LUASTREAM_PAUSE_CMD_H
#define LUASTREAM_PAUSE_CMD_H

#include <stddef.h>

/* The longest --reason kept (the hosts keep 255 bytes of it). */
#define PAUSE_REASON_MAX 200

/* Who ran the command, for the pause's `by`: "luastream pause by USER@HOST". */
void pause_cmd_by(char *out, size_t len);

/* argv: what follows "pause" or "resume". Returns the exit status: 0 done,
 * 1 when the server could not be used or refused it, 2 on a usage error. */
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);

#endif
