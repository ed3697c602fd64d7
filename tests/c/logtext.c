/* logtext: helpers for tests that compare captured log lines. */
#include <string.h>

#include "logtext.h"

size_t strip_versions(char *dst, const char *line, size_t len, char *last_version) {
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    if (len - i >= 17 && memcmp(line + i, " version=", 9) == 0 &&
        strspn(line + i + 9, "0123456789abcdef") >= 8 &&
        (len - i == 17 || line[i + 17] == ' ')) {
      memcpy(last_version, line + i + 9, 8);
      last_version[8] = '\0';
      i += 17;
      continue;
    }
    dst[o++] = line[i++];
  }
  return o;
}
