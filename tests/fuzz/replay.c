/* replay: runs every file of the given corpus directories (or files) once
 * through the target's LLVMFuzzerTestOneInput, without libFuzzer: the seed
 * corpora as a regression check in the ordinary test build (gcc, ASan and
 * UBSan), as the ctest tests fuzz_replay_<target>. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs one file; returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, len = 0, n;
  uint8_t *buf = malloc(cap);
  if (buf == NULL) abort();
  while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      if ((buf = realloc(buf, cap)) == NULL) abort();
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    perror(path);
    free(buf);
    return -1;
  }
  /* an exact-size copy: a read past the input's end is caught */
  uint8_t *input = (uint8_t *)fuzz_copy(buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(input, len);
  free(input);
  return 0;
}

/* libFuzzer calls it when a target defines it; so does the replay. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

int main(int argc, char **argv) {
  int inputs = 0;
  int init_argc = 1;
  char **init_argv = argv; /* a copy: the target may add libFuzzer flags */
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&init_argc, &init_argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i]) != 0) return 1;
      inputs++;
      continue;
    }
    struct dirent **names;
    int n = scandir(argv[i], &names, NULL, alphasort);
    if (n < 0) {
      perror(argv[i]);
      return 1;
    }
    for (int j = 0; j < n; j++) {
      if (names[j]->d_name[0] != '.') {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
        if (replay_file(path) != 0) return 1;
        inputs++;
      }
      free(names[j]);
    }
    free(names);
  }
  printf("%d inputs replayed\n", inputs);
  if (inputs == 0) {
    fprintf(stderr, "no inputs: an empty corpus checks nothing\n");
    return 1;
  }
  return 0;
}
