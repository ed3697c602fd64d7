/* fault: the failing clock of periodic work (see fault.h). */
#include <stdio.h>
#include <string.h>

#include "fault.h"

enum log_level fault_failed(struct fault *f, uint64_t now, enum log_level level,
                            const char *detail) {
  bool news = !f->failing || strncmp(f->detail, detail, sizeof f->detail - 1) != 0 ||
              now - f->logged_ms >= FAULT_RELOG_MS;
  if (!f->failing) f->since_ms = now;
  f->failing = true;
  snprintf(f->detail, sizeof f->detail, "%s", detail);
  if (!news) return LOG_DEBUG;
  f->logged_ms = now;
  return level;
}

void fault_ok(struct fault *f, uint64_t now, const struct handler_spec *spec) {
  if (!f->failing) return;
  f->failing = false;
  char msg[64], ms[24];
  snprintf(msg, sizeof msg, "%s works again", f->name);
  snprintf(ms, sizeof ms, "%llu", (unsigned long long)(now - f->since_ms));
  log_line(LOG_INFO, spec->name, msg, "stream", spec->stream, "group", spec->group, "consumer",
           spec->consumer, LOG_NUMBER "failed_ms", ms, NULL);
}
