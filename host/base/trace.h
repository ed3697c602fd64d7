/* trace: W3C Trace Context (traceparent) as luastream carries it.
 *
 * An entry's `traceparent` header is a producer's data: it is believed only
 * in the exact form of version 00 (`00-<32 hex trace id>-<16 hex parent
 * id>-<2 hex flags>`, lower-case, ids not all zero); anything else is
 * ignored, neither logged nor carried on as a trace (a copy keeps it as
 * data). What is written because of an entry (its replies, ctx:publish
 * entries, retry copies, delayed entries, dead letters) gets a child: the
 * same trace id and flags, a new parent id. */
#ifndef LUASTREAM_TRACE_H
#define LUASTREAM_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#define HDR_TRACEPARENT "traceparent"
#define TRACE_ID_LEN 32
#define TRACEPARENT_LEN 55

/* The trace id of a valid traceparent (v, len) into id (TRACE_ID_LEN + 1
 * bytes); false when v is not one. */
bool trace_id_of(const char *v, size_t len, char *id);
/* A child of the valid traceparent (v, len) into out (TRACEPARENT_LEN + 1
 * bytes): a fresh parent id; false when v is not one. */
bool trace_child(const char *v, size_t len, char *out);

#endif
