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
    {NULL, NULL},
};

const struct wire_name wire_reasons[] = {
    NAME(REASON_, HANDLER_ERROR),   NAME(REASON_, BAD_RETURN),
    NAME(REASON_, REJECTED),        NAME(REASON_, MAX_DELIVERIES),
    NAME(REASON_, INPUT_DECODE),    NAME(REASON_, INPUT_TOO_LARGE),
    NAME(REASON_, INPUT_NO_FIELDS), NAME(REASON_, INPUT_NUMBER),
    NAME(REASON_, INPUT_DUPLICATE), {NULL, NULL},
};

int wire_reason_is_bad_input(const char *reason) {
  for (const struct wire_name *r = wire_reasons; r->name; r++)
    if (!strncmp(r->name, "INPUT_", 6) && !strcmp(r->text, reason)) return 1;
  return 0;
}
