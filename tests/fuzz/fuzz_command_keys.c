/* fuzz_command_keys: command_keys on any command (one argument per line):
 * every key index it writes is an argument after the name, and a smaller
 * max gives the same count and a prefix of the same keys. */
#include "command_keys.h"
#include "fuzz.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int argc;
  size_t *len;
  char **argv = fuzz_split(data, size, MAX_ARGS, &argc, &len);
  int keys[MAX_ARGS], few[3];
  int n = command_keys(argc, (const char *const *)argv, len, keys, MAX_ARGS);
  FUZZ_CHECK(n >= 0 && n < (argc > 0 ? argc : 1), "%d keys of %d arguments", n, argc);
  for (int i = 0; i < n; i++)
    FUZZ_CHECK(keys[i] >= 1 && keys[i] < argc, "key %d at argument %d of %d", i, keys[i], argc);
  int m = command_keys(argc, (const char *const *)argv, len, few, 3);
  FUZZ_CHECK(m == n, "%d keys with max 3, %d with %d", m, n, MAX_ARGS);
  for (int i = 0; i < n && i < 3; i++) FUZZ_CHECK(few[i] == keys[i], "key %d", i);
  free(argv[0]);
  free(argv);
  free(len);
  return 0;
}
