/* codes: the names of the codes of codes.h. */
#include "codes.h"

#include <stddef.h>

static const char *const outcome_names[RT_OUTCOMES] = {
    [RT_ACK] = "ack",       [RT_RETRY] = "retry",     [RT_REPLY] = "reply",
    [RT_ERROR] = "error",   [RT_INVALID] = "invalid", [RT_RETRY_AFTER] = "retry_after",
    [RT_REJECT] = "reject", [RT_PAUSE] = "pause",
};

const char *rt_outcome_name(long long kind) {
  return kind >= 0 && kind < RT_OUTCOMES ? outcome_names[kind] : NULL;
}

static const char *const read_mode_names[READ_MODES] = {
    [READ_NEW] = "new", [READ_CLAIMING] = "claiming", [READ_RECLAIM] = "reclaim"};

const char *rt_read_mode_name(int mode) {
  return mode >= 0 && mode < READ_MODES ? read_mode_names[mode] : NULL;
}
