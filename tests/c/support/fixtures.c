/* fixtures: what several C tests build or compare the same way. */
#include <stdarg.h>
#include <string.h>

#include "entry.h"
#include "fixtures.h"
#include "task.h"

struct entry *mk_entry(const char *id, ...) {
  const char *field[32];
  size_t len[32];
  size_t n = 0;
  va_list ap;
  va_start(ap, id);
  for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
    ASSERT(n < 32);
    field[n] = s;
    len[n] = strlen(s);
    n++;
  }
  va_end(ap);
  struct entry *e = entry_new(id, strlen(id), n, field, len);
  ASSERT_NOT_NULL(e);
  return e;
}

size_t strip_versions(char *dst, const char *line, size_t len, char *last_version) {
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    if (len - i >= 17 && memcmp(line + i, " version=", 9) == 0 &&
        strspn(line + i + 9, "0123456789abcdef") >= 8 && (len - i == 17 || line[i + 17] == ' ')) {
      memcpy(last_version, line + i + 9, 8);
      last_version[8] = '\0';
      i += 17;
      continue;
    }
    dst[o++] = line[i++];
  }
  return o;
}
