/* Tests for trust.c: handler code only the trusted users can change, as
 * sshd's StrictModes (owners and modes of the directory, its ancestors and
 * the opened file). Files owned by another user need root (chown). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task.h"
#include "trust.h"

#define NOBODY 65534

static char root[64];
static char err[2048];
static const struct trust plain = {0};

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
}

/* A fresh 0755 folder under /tmp (sticky, world-writable, root's). */
static const char *base(void) {
  snprintf(root, sizeof root, "/tmp/lstrust.XXXXXX");
  ASSERT_NOT_NULL(mkdtemp(root));
  ASSERT_OK(chmod(root, 0755));
  atexit(cleanup);
  return root;
}

static const char *path_in(const char *dir, const char *name) {
  static char paths[8][256];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", dir, name);
  return p;
}

static const char *make_dir(const char *dir, const char *name, mode_t mode) {
  const char *p = path_in(dir, name);
  ASSERT_OK(mkdir(p, 0700));
  ASSERT_OK(chmod(p, mode));
  return p;
}

static const char *make_file(const char *dir, const char *name, mode_t mode) {
  const char *p = path_in(dir, name);
  FILE *f = fopen(p, "w");
  ASSERT_NOT_NULL(f);
  fputs("return {}\n", f);
  ASSERT_OK(fclose(f));
  ASSERT_OK(chmod(p, mode));
  return p;
}

static int check_file(const struct trust *t, const char *path) {
  int fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  err[0] = '\0';
  int rc = trust_check_fd(t, path, fd, err, sizeof err);
  close(fd);
  return rc;
}

static int check_dir(const struct trust *t, const char *dir) {
  err[0] = '\0';
  return trust_check_dir(t, dir, err, sizeof err);
}

TEST_IMPL(trust_safe_dir_and_file) {
  const char *dir = make_dir(base(), "handlers", 0755);
  /* /tmp, its ancestor, is world-writable with the sticky bit: fine */
  ASSERT_OK(check_dir(&plain, dir));
  ASSERT_OK(check_file(&plain, make_file(dir, "a.lua", 0644)));
  ASSERT_OK(check_file(&plain, make_file(dir, "b.lua", 0400)));
  ASSERT_OK(check_dir(NULL, "/nonexistent")); /* no trust: no check */
}

TEST_IMPL(trust_writable_dir) {
  const char *dir = make_dir(base(), "handlers", 0777);
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  char want[512];
  snprintf(want, sizeof want,
           "%s: writable by its group and every user (mode 0777, owner root): they could "
           "change the code luastream runs; run `chmod go-w %s`",
           dir, dir);
  ASSERT_STR_EQ(err, want);
  ASSERT_OK(chmod(dir, 0775));
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  ASSERT_CONTAINS(err, "writable by its group (mode 0775, owner root)");
  ASSERT_OK(chmod(dir, 0757));
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  ASSERT_CONTAINS(err, "writable by every user (mode 0757");
  /* sticky is no help for the handler directory: anyone could add a file */
  ASSERT_OK(chmod(dir, 01777));
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  ASSERT_CONTAINS(err, "(mode 1777, owner root)");
}

TEST_IMPL(trust_writable_ancestor) {
  const char *top = make_dir(base(), "top", 0777);
  const char *dir = make_dir(top, "handlers", 0755);
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  char want[256];
  snprintf(want, sizeof want, "%s: writable by its group and every user (mode 0777", top);
  ASSERT_CONTAINS(err, want);
  /* and a file's check walks the same folders */
  ASSERT_INT_EQ(check_file(&plain, make_file(dir, "a.lua", 0644)), -1);
  ASSERT_CONTAINS(err, want);
  /* sticky and a trusted owner: no one else can rename what it holds */
  ASSERT_OK(chmod(top, 01777));
  ASSERT_OK(check_dir(&plain, dir));
  ASSERT_OK(check_file(&plain, path_in(dir, "a.lua")));
  /* but a file's own folder may not be sticky and writable */
  const char *shared = make_dir(top, "shared", 01777);
  ASSERT_INT_EQ(check_file(&plain, make_file(shared, "m.lua", 0644)), -1);
  ASSERT_CONTAINS(err, "(mode 1777, owner root)");
}

TEST_IMPL(trust_writable_file) {
  const char *dir = make_dir(base(), "handlers", 0755);
  const char *file = make_file(dir, "a.lua", 0664);
  ASSERT_INT_EQ(check_file(&plain, file), -1);
  char want[512];
  snprintf(want, sizeof want,
           "%s: writable by its group (mode 0664, owner root): they could change the code "
           "luastream runs; run `chmod go-w %s`",
           file, file);
  ASSERT_STR_EQ(err, want);
}

/* What is read is what was checked: the descriptor, not the path. */
TEST_IMPL(trust_checks_the_open_file) {
  const char *dir = make_dir(base(), "handlers", 0755);
  const char *file = make_file(dir, "a.lua", 0666);
  int fd = open(file, O_RDONLY);
  ASSERT(fd >= 0);
  const char *good = make_file(dir, "b.lua", 0644);
  ASSERT_OK(rename(good, file)); /* the path is now a safe file; fd is not */
  ASSERT_INT_EQ(trust_check_fd(&plain, file, fd, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "(mode 0666, owner root)");
  close(fd);
  ASSERT_OK(check_file(&plain, file));
}

TEST_IMPL(trust_other_owner) {
  if (geteuid() != 0) TEST_SKIP("needs root to give a file to nobody");
  const char *dir = make_dir(base(), "handlers", 0755);
  const char *file = make_file(dir, "a.lua", 0644);
  ASSERT_OK(chown(file, NOBODY, (gid_t)-1));
  ASSERT_INT_EQ(check_file(&plain, file), -1);
  char want[512];
  snprintf(want, sizeof want,
           "%s: owned by nobody (mode 0644), not by root or a --trust-owner: that user could "
           "change the code luastream runs; run `chown root %s`, or start with --trust-owner "
           "nobody if nobody deploys the handlers",
           file, file);
  ASSERT_STR_EQ(err, want);
  ASSERT_OK(chown(dir, NOBODY, (gid_t)-1)); /* the folder too */
  ASSERT_INT_EQ(check_dir(&plain, dir), -1);
  ASSERT_CONTAINS(err, "owned by nobody (mode 0755)");
  struct trust deploy = {0};
  ASSERT_OK(trust_add_owner(&deploy, "nobody", err, sizeof err));
  ASSERT_OK(check_dir(&deploy, dir));
  ASSERT_OK(check_file(&deploy, file));
  struct trust by_uid = {0};
  ASSERT_OK(trust_add_owner(&by_uid, "65534", err, sizeof err));
  ASSERT_OK(check_file(&by_uid, file));
}

TEST_IMPL(trust_owner_names) {
  struct trust t = {0};
  ASSERT_INT_EQ(trust_add_owner(&t, "no-such-user-here", err, sizeof err), -1);
  ASSERT_STR_EQ(err, "--trust-owner no-such-user-here: no such user");
  for (int i = 0; i < TRUST_OWNERS_MAX; i++)
    ASSERT_OK(trust_add_owner(&t, "root", err, sizeof err));
  ASSERT_INT_EQ(trust_add_owner(&t, "root", err, sizeof err), -1);
  ASSERT_STR_EQ(err, "--trust-owner: at most 8 users");
}

/* A symlink is followed: the folders of where it leads are checked. */
TEST_IMPL(trust_follows_symlinks) {
  const char *b = base();
  const char *open_top = make_dir(b, "open", 0777);
  const char *real = make_dir(open_top, "handlers", 0755);
  const char *file = make_file(real, "a.lua", 0644);
  const char *safe = make_dir(b, "safe", 0755);
  const char *link = path_in(safe, "handlers");
  ASSERT_OK(symlink(real, link));
  ASSERT_INT_EQ(check_dir(&plain, link), -1);
  ASSERT_CONTAINS(err, open_top);
  const char *flink = path_in(safe, "a.lua");
  ASSERT_OK(symlink(file, flink));
  ASSERT_INT_EQ(check_file(&plain, flink), -1);
  ASSERT_CONTAINS(err, open_top);
  /* a relative link from a safe folder into a safe one */
  ASSERT_OK(chmod(open_top, 0755));
  const char *rel = path_in(safe, "rel");
  ASSERT_OK(symlink("../open/handlers", rel));
  ASSERT_OK(check_dir(&plain, rel));
}

/* --allow-writable-dir: the finding is a warning, the load goes on. */
TEST_IMPL(trust_allow_writable) {
  const char *dir = make_dir(base(), "handlers", 0777);
  struct trust t = {.allow_writable = true};
  ASSERT_OK(check_dir(&t, dir));
  ASSERT_OK(check_file(&t, make_file(dir, "a.lua", 0666)));
}
