/* fuzz.h: what the fuzz targets of tests/fuzz/ share.
 *
 * Each target defines LLVMFuzzerTestOneInput for one parser of outside
 * input. It is built twice: with libFuzzer under clang (LUASTREAM_FUZZ,
 * `./dev fuzz`) and with replay.c under the test build, which runs its seed
 * corpus (corpus/<target>/) once as the ctest test fuzz_replay_<target>. A
 * sanitizer report or a failed FUZZ_CHECK aborts: both count as a crash. */
#ifndef LUASTREAM_FUZZ_H
#define LUASTREAM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time set-up before the first input (a Lua state): what it
 * allocates is not counted as an input's leak. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant of the parser under test; aborts (a crash to libFuzzer) when
 * it does not hold. */
#define FUZZ_CHECK(cond, ...)                                                       \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                 \
      fputc('\n', stderr);                                                          \
      abort();                                                                      \
    }                                                                               \
  } while (0)

/* A NUL-terminated heap copy of the input (the parser's text arguments);
 * free() it. */
static inline char *fuzz_strdup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (s == NULL) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* An exact-size heap copy, so that ASan catches a read past the end. */
static inline char *fuzz_copy(const uint8_t *data, size_t size) {
  /* calloc: an empty input is one zero byte nobody may read, not an
   * uninitialized one (gcc -O2 warns about passing that as const char *) */
  char *s = calloc(size ? size : 1, 1);
  if (s == NULL) abort();
  if (size) memcpy(s, data, size);
  return s;
}

/* For LLVMFuzzerInitialize of the targets that keep a Lua state: turns off
 * libFuzzer's leak check after each input (-detect_leaks=0 appended to
 * argv). LuaJIT keeps pointers where LeakSanitizer does not recognise them,
 * so a live Lua object can be reported mid-run; the state is closed at exit
 * (atexit), where LeakSanitizer still checks that nothing is left. */
static inline void fuzz_no_leak_check_per_input(int *argc, char ***argv) {
  static char *args[64];
  static char flag[] = "-detect_leaks=0";
  if (*argc < 1 || *argc > 62) return;
  memcpy(args, *argv, sizeof *args * (size_t)*argc);
  args[(*argc)++] = flag;
  args[*argc] = NULL;
  *argv = args;
}

/* The input split at each '\n' into NUL-terminated words (argv-like): a
 * heap copy with the separators replaced, *n words of len[i] bytes each
 * (a word may hold NUL bytes). At most max words, max >= 1, so there is
 * always one. Free word[0] (the copy), word and len. */
static inline char **fuzz_split(const uint8_t *data, size_t size, int max, int *n, size_t **len) {
  char *copy = fuzz_strdup(data, size);
  char **word = malloc(sizeof *word * (size_t)(max + 1));
  *len = malloc(sizeof **len * (size_t)(max + 1));
  if (word == NULL || *len == NULL) abort();
  int k = 0;
  char *start = copy;
  for (size_t i = 0; i <= size && k < max; i++) {
    if (i == size || copy[i] == '\n') {
      copy[i] = '\0';
      word[k] = start;
      (*len)[k++] = (size_t)(copy + i - start);
      start = copy + i + 1;
    }
  }
  word[k] = NULL; /* k >= 1 (max >= 1): word[0] is the copy, for free() */
  *n = k;
  return word;
}

#endif
