/* handler_name: a handler file's names (handler_name.h). */
#include "handler_name.h"

#include <string.h>

const char *handler_name_file(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

const char *handler_name_of(const char *path, size_t *len) {
  const char *file = handler_name_file(path);
  size_t n = strlen(file);
  if (n > 4 && strcmp(file + n - 4, ".lua") == 0) n -= 4;
  *len = n;
  return file;
}
