/* wire: the lists of wire.h. */
#include "wire.h"

#include <string.h>

#define NAME(prefix, n) \
  { #n, prefix##n }

const struct wire_name wire_headers[] = {
    NAME(HDR_, DATA),
    NAME(HDR_, PARTITION_KEY),
    NAME(HDR_, DELIVERY_COUNT),
    NAME(HDR_, IDLE_MS),
    NAME(HDR_, RETRY_GROUP),
    NAME(HDR_, ORIGINAL_ID),
    NAME(HDR_, CONTENT_TYPE),
    NAME(HDR_, HANDLER_VERSION),
    NAME(HDR_, DL_STREAM),
    NAME(HDR_, DL_GROUP),
    NAME(HDR_, DL_ID),
    NAME(HDR_, DL_DELIVERIES),
    NAME(HDR_, DL_HANDLER),
    NAME(HDR_, DL_REASON),
    NAME(HDR_, DL_ERROR),
    NAME(HDR_, DL_TIME),
    NAME(HDR_, DL_CUT), /* too-large dead letters: the entry is cut */
    {NULL, NULL},
};

/* Indexed by enum wire_reason: each code next to its text. */
#define REASON(n) [WIRE_##n] = NAME(REASON_, n)
const struct wire_name wire_reasons[] = {
    REASON(HANDLER_ERROR),
    REASON(BAD_RETURN),
    REASON(REJECTED),
    REASON(MAX_DELIVERIES),
    REASON(INPUT_DECODE),
    REASON(INPUT_TOO_LARGE),
    REASON(INPUT_NO_FIELDS),
    REASON(INPUT_NUMBER),
    REASON(INPUT_DUPLICATE),
    REASON(MEMORY),
    REASON(INPUT_SCHEMA), /* the body against the handler's schema */
    [WIRE_REASONS] = {NULL, NULL},
};

const char *wire_reason_text(long long code) {
  return code >= 0 && code < WIRE_REASONS ? wire_reasons[code].text : NULL;
}

int wire_reason_is_bad_input(const char *reason) {
  for (const struct wire_name *r = wire_reasons; r->name; r++)
    if (!strncmp(r->name, "INPUT_", 6) && !strcmp(r->text, reason)) return 1;
  return 0;
}
