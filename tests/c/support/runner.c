/* The C test runner: runs each registered test (TEST_IMPL in task.h) in its own child process
 * with a time limit, so a crash or a hang fails only that test, and prints one
 * line per test and the closing tally `N passed, N failed, N skipped`.
 *
 *   unit_tests            run every test
 *   unit_tests NAME...    run the named tests only (an unknown name is an error)
 *   unit_tests --list     print every test's name, one a line (ctest registers
 *                         each one from this list, see CMakeLists.txt)
 *
 * Exit status: 1 when a test failed, 2 on a usage error, TEST_SKIP_STATUS
 * when every selected test skipped (so ctest shows a lone skipped test as
 * skipped), else 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "task.h"

#define TEST_TIMEOUT_S 30
#define MAX_TESTS 2048

struct test {
  const char *name;
  void (*fn)(void);
};

static struct test tests[MAX_TESTS];
static size_t ntests;

enum result { PASSED, FAILED, SKIPPED };

void task_register(const char *name, void (*fn)(void)) {
  if (ntests == MAX_TESTS) {
    fprintf(stderr, "too many tests: raise MAX_TESTS in runner.c\n");
    exit(2);
  }
  tests[ntests].name = name;
  tests[ntests].fn = fn;
  ntests++;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const struct test *)a)->name, ((const struct test *)b)->name);
}

static enum result run_one(const struct test *t) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return FAILED;
  if (pid == 0) {
    alarm(TEST_TIMEOUT_S);
    t->fn();
    exit(0); /* not _exit: LeakSanitizer checks at exit */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {}
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return PASSED;
    return WEXITSTATUS(status) == TEST_SKIP_STATUS ? SKIPPED : FAILED;
  }
  if (WIFSIGNALED(status))
    fprintf(stderr, "  %s: killed by signal %d%s\n", t->name, WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
  return FAILED;
}

static const struct test *find(const char *name) {
  for (size_t i = 0; i < ntests; i++)
    if (strcmp(tests[i].name, name) == 0) return &tests[i];
  return NULL;
}

static int selected(const char *name, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int counts[3] = {0, 0, 0};
  qsort(tests, ntests, sizeof tests[0], by_name);
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  for (int i = 1; i < argc; i++) {
    if (find(argv[i]) == NULL) {
      fprintf(stderr, "unit_tests: no test named \"%s\" (unit_tests --list names them)\n", argv[i]);
      return 2;
    }
  }
  for (size_t i = 0; i < ntests; i++) {
    if (!selected(tests[i].name, argc, argv)) continue;
    enum result r = run_one(&tests[i]);
    static const char *const label[] = {"ok", "FAILED", "skipped"};
    printf("%s %s\n", label[r], tests[i].name);
    counts[r]++;
  }
  printf("%d passed, %d failed, %d skipped\n", counts[PASSED], counts[FAILED], counts[SKIPPED]);
  if (counts[FAILED]) return 1;
  return counts[PASSED] == 0 && counts[SKIPPED] > 0 ? TEST_SKIP_STATUS : 0;
}
