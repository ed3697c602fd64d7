/* fixtures: what several C tests build or compare the same way. */
#ifndef LUASTREAM_TEST_FIXTURES_H
#define LUASTREAM_TEST_FIXTURES_H

#include <stddef.h>

struct entry;

/* mk_entry(id, "name", "value", ..., NULL): an entry (free with entry_free);
 * at most 32 strings. */
struct entry *mk_entry(const char *id, ...);

/* Copies line (len bytes) to dst without its ` version=xxxxxxxx` fields (the
 * script version every handler line and host delivery line carries), so
 * expected lines stay readable; the last version seen goes to last_version
 * (9 bytes). Returns the bytes written. */
size_t strip_versions(char *dst, const char *line, size_t len, char *last_version);

#endif
