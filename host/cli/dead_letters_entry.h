/* dead_letters_entry: what the dead-letters commands share about the
 * entries of a dead-letter stream: reading their fields and provenance (the
 * dead-letter-* fields luastream writes, wire.h), the shape of an XRANGE
 * reply, whether the stream exists, and text for a person to read. */
#ifndef LUASTREAM_DEAD_LETTERS_ENTRY_H
#define LUASTREAM_DEAD_LETTERS_ENTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "client.h"

/* Whether an entry's fields carry dead-letter provenance: a
 * dead-letter-stream field, which every dead letter luastream writes has and
 * no entry a producer adds through `luastream publish` can have. */
bool dl_has_provenance(const bk_reply *fields);

/* An XRANGE reply: [[id, [field, value, ...]], ...], every leaf a string. */
bool dl_is_range(const bk_reply *r);

/* Sends TYPE stream; cb gets the answer (data = the client). */
int dl_send_type(struct client *c, const char *stream, bk_reply_cb *cb);

enum dl_stream { DL_STREAM, DL_MISSING, DL_FAILED };
/* TYPE's answer for a dead-letter stream: DL_STREAM, DL_MISSING (no such
 * key: no dead letter yet), or DL_FAILED when it cannot be read or is
 * another type (said on stderr; the session has ended with status 1). */
enum dl_stream dl_stream_type(struct client *c, const char *stream, const bk_reply *r,
                              const char *err);

/* Writes n bytes of s for a person to read: control characters (but tab) as
 * \xNN, and each line after the first indented by `indent` spaces. Trailing
 * newlines are dropped. */
void dl_put_text(const char *s, size_t n, int indent);

/* "entry"/"entries", "letter"/"letters": n's plural. */
static inline const char *dl_plural(long long n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

#endif
