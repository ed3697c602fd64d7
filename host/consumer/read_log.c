/* read_log: failed reads and their log lines (see read_log.h). */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "read_log.h"

static bool group_gone(const bk_reply *r) {
  /* Plain replies start with the code; a script's error carries it inside.
   * Reply strings are NUL-terminated. */
  return r && r->type == BK_ERROR &&
         (bk_reply_is_error(r, "UNBLOCKED") || strstr(r->str, "NOGROUP") != NULL);
}

bool read_log_failed(const struct handler_spec *spec, const char *retry_key, enum read_kind kind,
                     const bk_reply *r, const char *err) {
  char why[256];
  bk_reply_text(r, err, why, sizeof why);
  if (group_gone(r)) {
    log_line(LOG_ERROR, spec->name, "group or stream disappeared, creating it again", "stream",
             spec->stream, "group", spec->group, "consumer", spec->consumer, "error", why, NULL);
    return true;
  }
  bool script = plan_is_script(kind);
  char keys[512];
  snprintf(keys, sizeof keys, "%s %s", spec->stream, retry_key);
  log_line(LOG_WARN, spec->name, "read failed, retrying", "stream", spec->stream, "group",
           spec->group, "consumer", spec->consumer, "command", script ? "EVAL" : "XREADGROUP",
           "script",
           kind == READ_CLAIM_SCRIPT     ? "the claiming read (claim_fallback)"
           : kind == READ_RECLAIM_SCRIPT ? "the reclaim read"
           : kind == READ_OWN            ? "the own pending read"
           : kind == READ_FRESH          ? "the read of new entries"
                                         : NULL,
           "keys", keys, "error", why, NULL);
  return false;
}

void read_log_deleted(const struct handler_spec *spec, const bk_reply *deleted) {
  for (size_t i = 0; deleted && i < deleted->elements; i++)
    log_line(LOG_WARN, spec->name, "pending entry no longer in the stream, dropped", "stream",
             deleted->element[i]->element[0]->str, "group", spec->group, "consumer", spec->consumer,
             "id", deleted->element[i]->element[1]->str, NULL);
}
