/* logtext: helpers for tests that compare captured log lines. */
#ifndef LUASTREAM_TEST_LOGTEXT_H
#define LUASTREAM_TEST_LOGTEXT_H

#include <stddef.h>

/* Copies line (len bytes) to dst without its ` version=xxxxxxxx` fields (the
 * script version every handler line and host delivery line carries), so
 * expected lines stay readable; the last version seen goes to last_version
 * (9 bytes). Returns the bytes written. */
size_t strip_versions(char *dst, const char *line, size_t len, char *last_version);

#endif
