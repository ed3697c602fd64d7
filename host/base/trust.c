/* trust: the owners and modes of handler code (see trust.h). */
#include "trust.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define LINKS_MAX 40 /* symlinks followed in one path, as the kernel's ELOOP */
#ifndef S_ISVTX
#define S_ISVTX 01000 /* XSI, not in _POSIX_C_SOURCE: the sticky bit */
#endif

int trust_add_owner(struct trust *t, const char *user, char *err, size_t errlen) {
  if (t->n_owners == TRUST_OWNERS_MAX) {
    snprintf(err, errlen, "--trust-owner: at most %d users", TRUST_OWNERS_MAX);
    return -1;
  }
  struct passwd pw, *found = NULL;
  char buf[4096];
  int rc = getpwnam_r(user, &pw, buf, sizeof buf, &found);
  if (found) {
    t->owners[t->n_owners++] = pw.pw_uid;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long uid = strtoul(user, &end, 10);
  if (*user >= '0' && *user <= '9' && *end == '\0' && errno == 0 && uid < (uid_t)-1) {
    t->owners[t->n_owners++] = (uid_t)uid;
    return 0;
  }
  snprintf(err, errlen, "--trust-owner %s: no such user%s%s", user, rc ? ": " : "",
           rc ? strerror(rc) : "");
  return -1;
}

static bool trusted(const struct trust *t, uid_t uid) {
  if (uid == 0 || uid == geteuid()) return true;
  for (size_t i = 0; i < t->n_owners; i++)
    if (t->owners[i] == uid) return true;
  return false;
}

static void user_name(uid_t uid, char *out, size_t len) {
  struct passwd pw, *found = NULL;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
    snprintf(out, len, "%s", pw.pw_name);
  else
    snprintf(out, len, "%lu", (unsigned long)uid);
}

/* Whether st, at path, is only trusted users' to change; else why into err.
 * strict: not even a sticky world-writable directory will do (the handler
 * directory, a file's own folder, the file). */
static int check_stat(const struct trust *t, const char *path, const struct stat *st, bool strict,
                      char *err, size_t errlen) {
  unsigned mode = (unsigned)st->st_mode & 07777;
  char owner[64];
  user_name(st->st_uid, owner, sizeof owner);
  if (!trusted(t, st->st_uid)) {
    char self[64], also[80] = "";
    user_name(geteuid(), self, sizeof self);
    if (geteuid() != 0) snprintf(also, sizeof also, ", %s", self);
    snprintf(err, errlen,
             "%s: owned by %s (mode %04o), not by root%s or a --trust-owner: that user could "
             "change the code luastream runs; run `chown %s %s`, or start with --trust-owner %s "
             "if %s deploys the handlers",
             path, owner, mode, also, self, path, owner, owner);
    return -1;
  }
  if ((mode & 022) == 0) return 0;
  if (!strict && S_ISDIR(st->st_mode) && (mode & S_ISVTX)) return 0;
  snprintf(err, errlen,
           "%s: writable by %s (mode %04o, owner %s): they could change the code luastream "
           "runs; run `chmod go-w %s`",
           path,
           (mode & 022) == 022 ? "its group and every user"
           : (mode & 002)      ? "every user"
                               : "its group",
           mode, owner, path);
  return -1;
}

/* A finding: refused, or with --allow-writable-dir a warning. */
static int finding(const struct trust *t, char *err) {
  if (!t->allow_writable) return -1;
  log_line(LOG_WARN, NULL, "loading code other users can change (--allow-writable-dir)", "problem",
           err, NULL);
  return 0;
}

/* Walks path from / as the kernel resolves it, following each symlink, and
 * checks every directory it passes and the node it ends at. file: path names
 * a file, whose own folder is held to the strict rule too. */
static int check_path(const struct trust *t, const char *path, bool file, char *err,
                      size_t errlen) {
  char cur[PATH_MAX] = "", todo[2 * PATH_MAX];
  if (path[0] == '/') {
    snprintf(todo, sizeof todo, "%s", path);
  } else {
    if (getcwd(cur, sizeof cur) == NULL) goto failed;
    snprintf(todo, sizeof todo, "%s/%s", cur, path);
    cur[0] = '\0';
  }
  struct stat st;
  if (lstat("/", &st) != 0) goto failed;
  bool flagged = check_stat(t, "/", &st, false, err, errlen) != 0; /* cur's finding, warned */
  if (flagged && finding(t, err) != 0) return -1;
  int links = 0;
  char *rest = todo;
  for (;;) {
    while (*rest == '/') rest++;
    if (*rest == '\0') break;
    char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    char name[NAME_MAX + 1];
    if (n > NAME_MAX) {
      errno = ENAMETOOLONG;
      goto failed;
    }
    memcpy(name, rest, n);
    name[n] = '\0';
    rest += n;
    if (strcmp(name, ".") == 0) continue;
    if (strcmp(name, "..") == 0) { /* cur is resolved: its parent is checked already */
      char *last = strrchr(cur, '/');
      if (last) *last = '\0';
      continue;
    }
    char next[PATH_MAX];
    if ((size_t)snprintf(next, sizeof next, "%s/%s", cur, name) >= sizeof next) {
      errno = ENAMETOOLONG;
      goto failed;
    }
    if (lstat(next, &st) != 0) goto failed;
    bool last = strspn(rest, "/") == strlen(rest);
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t len = readlink(next, target, sizeof target - 1);
      if (len < 0) goto failed;
      target[len] = '\0';
      if (++links > LINKS_MAX) {
        errno = ELOOP;
        goto failed;
      }
      char joined[2 * PATH_MAX];
      if ((size_t)snprintf(joined, sizeof joined, "%s/%s", target, rest) >= sizeof todo) {
        errno = ENAMETOOLONG;
        goto failed;
      }
      memcpy(todo, joined, strlen(joined) + 1);
      rest = todo;
      if (target[0] == '/') cur[0] = '\0';
      continue;
    }
    if (last && file) { /* the file itself is the caller's (fstat) */
      struct stat dir;  /* its own folder: no sticky exception */
      if (cur[0] == '\0' || flagged) break;
      if (stat(cur, &dir) != 0) goto failed;
      if (check_stat(t, cur, &dir, true, err, errlen) != 0 && finding(t, err) != 0) return -1;
      break;
    }
    flagged = check_stat(t, next, &st, last, err, errlen) != 0;
    if (flagged && finding(t, err) != 0) return -1;
    memcpy(cur, next, strlen(next) + 1);
  }
  return 0;
failed:
  snprintf(err, errlen, "%s: cannot check who can change it: %s", path, strerror(errno));
  return -1;
}

int trust_check_dir(const struct trust *t, const char *dir, char *err, size_t errlen) {
  if (t == NULL) return 0;
  return check_path(t, dir, false, err, errlen);
}

int trust_check_fd(const struct trust *t, const char *path, int fd, char *err, size_t errlen) {
  if (t == NULL) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "%s: cannot check who can change it: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s: not a regular file", path);
    return -1;
  }
  if (check_stat(t, path, &st, true, err, errlen) != 0 && finding(t, err) != 0) return -1;
  return check_path(t, path, true, err, errlen);
}
