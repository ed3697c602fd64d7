/* The C test runner: runs each registered test (TEST_IMPL in task.h) in its own child process
 * with a time limit, so a crash or a hang fails only that test, and prints one
 * line per test and the closing tally `N passed, N failed`.
 *
 *   unit_tests            run every test
 *   unit_tests NAME...    run the named tests only */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "task.h"

#define TEST_TIMEOUT_S 30
#define MAX_TESTS 512

struct test {
  const char *name;
  void (*fn)(void);
};

static struct test tests[MAX_TESTS];
static size_t ntests;

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

static int run_one(const struct test *t) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    alarm(TEST_TIMEOUT_S);
    t->fn();
    exit(0); /* not _exit: LeakSanitizer checks at exit */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? 0 : -1;
  if (WIFSIGNALED(status))
    fprintf(stderr, "  %s: killed by signal %d%s\n", t->name, WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
  return -1;
}

static int selected(const char *name, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int passed = 0, failed = 0;
  qsort(tests, ntests, sizeof tests[0], by_name);
  for (size_t i = 0; i < ntests; i++) {
    if (!selected(tests[i].name, argc, argv)) continue;
    if (run_one(&tests[i]) == 0) {
      printf("ok %s\n", tests[i].name);
      passed++;
    } else {
      printf("FAILED %s\n", tests[i].name);
      failed++;
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
