/* trust: whether the code in a handler directory is only the trusted users'
 * to change, checked as sshd checks its files (StrictModes).
 *
 * The trusted users are root, the process's effective user and those named
 * with --trust-owner (a deploy user). A directory, one of its ancestors, a
 * handler file or a module is refused when anyone else could write it: owned
 * by another user, or group- or world-writable. An ancestor may be
 * world-writable with the sticky bit (as /tmp is) when a trusted user owns
 * it: no one else can then rename or remove what it holds. The handler
 * directory itself may not: anyone could add a file to it. Files are checked
 * on the descriptor that is then read (trust_check_fd), so what is checked is
 * what loads; their directories by path, which only trusted users can
 * change once the check has passed. */
#ifndef LUASTREAM_TRUST_H
#define LUASTREAM_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TRUST_OWNERS_MAX 8

struct trust {
  uid_t owners[TRUST_OWNERS_MAX]; /* --trust-owner, beside root and the effective user */
  size_t n_owners;
  bool allow_writable; /* --allow-writable-dir: each finding is a warning, not a refusal */
};

/* Adds user (a name, or a numeric uid) to t's owners. Returns 0, or -1 with
 * why in err (no such user, too many). */
int trust_add_owner(struct trust *t, const char *user, char *err, size_t errlen);
/* Checks dir (its components as written and, where a symlink leads
 * elsewhere, the real path's) and every ancestor. Returns 0, or -1 with
 * "PATH: ..." in err naming the path, its mode and owner and the command that
 * fixes it. With t->allow_writable the finding is logged as a warning and 0
 * returned. t NULL: no check. */
int trust_check_dir(const struct trust *t, const char *dir, char *err, size_t errlen);
/* Checks the open file fd read as path: a regular file, owned by a trusted
 * user, not group- or world-writable; and the directories of its real path
 * (trust_check_dir), which covers a symlink to elsewhere and a module in a
 * subfolder. Returns as trust_check_dir. */
int trust_check_fd(const struct trust *t, const char *path, int fd, char *err, size_t errlen);

#endif
