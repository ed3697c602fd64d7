/* sha1: the SHA-1 digest of a text in hex, the name Redis gives a script
 * (EVALSHA, SCRIPT LOAD). */
#ifndef LUASTREAM_SHA1_H
#define LUASTREAM_SHA1_H

#include <stddef.h>

/* out: 40 lowercase hex digits and a NUL. */
void sha1_hex(const char *s, size_t len, char out[41]);

#endif
