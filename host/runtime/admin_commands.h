/* admin_commands: the server's administration, which handlers may not send,
 * neither with ls.redis (ls.redis.connect's clients too) nor with ctx:write:
 * the @admin category of Redis (`ACL CAT admin` on Redis 7.0.15) and the
 * commands that empty, swap or overwrite whole databases or move keys away
 * (FLUSHALL, FLUSHDB, SWAPDB, RESTORE, MIGRATE, SCRIPT FLUSH, FUNCTION
 * FLUSH, DELETE and RESTORE). A first line of defence: a script sent with
 * ls.redis (EVAL, FCALL) is not looked into and may run FLUSHALL, so the
 * Redis ACL of the host's user is the boundary (docs/operations.md). */
#ifndef LUASTREAM_ADMIN_COMMANDS_H
#define LUASTREAM_ADMIN_COMMANDS_H

#include <stddef.h>

/* The entries, lower case, "command" or "command|subcommand" as ACL CAT
 * names them, NULL-terminated; the first admin_commands_acl of them are the
 * server's @admin category, the rest luastream's additions. */
extern const char *const admin_commands[];
extern const size_t admin_commands_acl;

/* The entry the command cmd (with sub, its first argument, or NULL) is, as
 * "command" or "command|subcommand", compared without regard to case; NULL
 * when it is none. */
const char *admin_command(const char *cmd, size_t len, const char *sub, size_t sublen);

#endif
