/* wire: the names luastream writes into Redis and logs, one list each. The
 * runtime exports both lists to Lua (luastream.core.headers and
 * luastream.core.reasons, read by lua/luastream.lua as ls.*_HEADER and by the
 * handler code), so C and Lua cannot disagree about a name. */
#ifndef LUASTREAM_WIRE_H
#define LUASTREAM_WIRE_H

/* Entry fields. `data` is the body; the others are headers. A header
 * luastream writes is believed only on the keys luastream writes (the
 * retry stream, dead letters); on the shared stream it is a producer's data. */
#define HDR_DATA "data"
#define HDR_PARTITION_KEY "partition-key"
#define HDR_DELIVERY_COUNT "delivery-count"
#define HDR_IDLE_MS "idle-ms"
#define HDR_RETRY_GROUP "retry-group"
#define HDR_ORIGINAL_ID "original-id"
#define HDR_CONTENT_TYPE "content-type"
#define HDR_HANDLER_VERSION "handler-version" /* on a reply: the script version that wrote it */
/* A dead letter's provenance (docs/retries-delays-dead-letters.md). */
#define HDR_DL_STREAM "dead-letter-stream"
#define HDR_DL_GROUP "dead-letter-group"
#define HDR_DL_ID "dead-letter-id"
#define HDR_DL_DELIVERIES "dead-letter-deliveries"
#define HDR_DL_HANDLER "dead-letter-handler"
#define HDR_DL_REASON "dead-letter-reason"
#define HDR_DL_ERROR "dead-letter-error"
#define HDR_DL_TIME "dead-letter-time"
/* On a dead letter of an entry too large to hold (entry.h): the size the
 * entry had in bytes; its fields there are cut. Replay reads the source. */
#define HDR_DL_CUT "dead-letter-cut"

/* Why an entry did not end in an ack: `reason=` in logs, and the
 * dead-letter-reason of a dead letter. Bad input (the handler was not
 * called) is one of the REASON_INPUT_* kinds. */
#define REASON_HANDLER_ERROR "handler-error"      /* raised, or a run that failed */
#define REASON_BAD_RETURN "bad-return"            /* handle returned no valid outcome */
#define REASON_REJECTED "rejected"                /* ls.reject(...) */
#define REASON_MAX_DELIVERIES "max-deliveries"    /* the delivery cap was reached */
#define REASON_MEMORY "memory"                    /* the Lua state went past `memory` */
#define REASON_INPUT_DECODE "decode-error"        /* the body is not JSON */
#define REASON_INPUT_TOO_LARGE "too-large"        /* the body is over max_body */
#define REASON_INPUT_NO_FIELDS "no-fields"        /* no data field and nothing else */
#define REASON_INPUT_NUMBER "number-out-of-range" /* a number no double holds */
#define REASON_INPUT_DUPLICATE "duplicate-data"   /* two data fields */
#define REASON_INPUT_SCHEMA "schema"              /* the body does not match the handler's schema */

/* The same reasons as codes: what Lua and C pass each other (the
 * dispatcher returns core.reasons.BAD_RETURN, which is WIRE_BAD_RETURN;
 * core.message returns WIRE_INPUT_DECODE), so that no text crosses the
 * boundary to be compared. The text (logs, dead letters, metric labels)
 * comes from the code through wire_reasons[], the one table of both. */
enum wire_reason {
  WIRE_HANDLER_ERROR,
  WIRE_BAD_RETURN,
  WIRE_REJECTED,
  WIRE_MAX_DELIVERIES,
  WIRE_INPUT_DECODE,
  WIRE_INPUT_TOO_LARGE,
  WIRE_INPUT_NO_FIELDS,
  WIRE_INPUT_NUMBER,
  WIRE_INPUT_DUPLICATE,
  WIRE_MEMORY,
  WIRE_INPUT_SCHEMA,
};
#define WIRE_REASONS (WIRE_INPUT_SCHEMA + 1)

/* The lists, for export and lookup: {lua name, text}, ended by {NULL, NULL}.
 * Lua names are the macro names without their prefix (PARTITION_KEY).
 * wire_reasons[code] is the reason of enum wire_reason code. */
struct wire_name {
  const char *name;
  const char *text;
};
extern const struct wire_name wire_headers[];
extern const struct wire_name wire_reasons[];
/* The text of reason code (a REASON_* string), or NULL when code is none. */
const char *wire_reason_text(long long code);
/* Whether reason names bad input (a REASON_INPUT_* kind). */
int wire_reason_is_bad_input(const char *reason);

#endif
