/* prune: removing a group's idle consumers (see prune.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "log.h"
#include "prune.h"
#include "scripts.h"

struct pruner {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  const struct handler_spec *spec;
  const char *retry_key;
  prune_reading_fn *reading;
  prune_answered_fn *answered;
  void *data;
  ltimer *timer;
  bool started;       /* the first prune has been armed */
  bool skipped;       /* a prune fell due while not reading: due at the next start */
  unsigned pending;   /* prunes sent and not answered */
  char *lease_prefix; /* LEASE_PREFIX {stream}:group: (SCRIPT_PRUNE) */
  struct fault fault; /* the idle-consumer prune failing (readiness) */
};

static void prune_done(void *data, const bk_reply *r, const char *err) {
  pruner *p = data;
  p->pending--;
  bool ok = r && r->type == BK_ARRAY;
  if (p->reading(p->data))
    timer_start(p->timer, ok || !r ? PRUNE_EVERY_MS : PRUNE_RETRY_MS);
  else
    p->skipped = true;
  if (ok) {
    fault_ok(&p->fault, clock_now(p->clock), p->spec);
    for (size_t i = 0; i < r->elements; i++) {
      const bk_reply *e = r->element[i]; /* [key, name] */
      if (e->type != BK_ARRAY || e->elements != 2 || e->element[0]->type != BK_STRING ||
          e->element[1]->type != BK_STRING)
        continue;
      const char *name = e->element[1]->str;
      if (strcmp(e->element[0]->str, p->retry_key) == 0)
        log_line(LOG_INFO, p->spec->name, "idle consumer removed from the group", "stream",
                 p->spec->stream, "group", p->spec->group, "retry_stream", p->retry_key, "removed",
                 name, NULL);
      else
        log_line(LOG_INFO, p->spec->name, "idle consumer removed from the group", "stream",
                 p->spec->stream, "group", p->spec->group, "removed", name, NULL);
    }
  } else {
    char why[256], detail[1024];
    bk_reply_text(r, err, why, sizeof why);
    /* A lost connection: tried again in an hour, nothing to report. */
    enum log_level level = LOG_DEBUG;
    if (r) {
      snprintf(detail, sizeof detail,
               "EVAL on %s and %s (XINFO CONSUMERS, EXISTS %s*, XGROUP DELCONSUMER): %s",
               p->spec->stream, p->retry_key, p->lease_prefix, why);
      level = fault_failed(&p->fault, clock_now(p->clock), LOG_WARN, detail);
    }
    log_line(level, p->spec->name, "removing idle consumers failed, retrying", "stream",
             p->spec->stream, "group", p->spec->group, "command", "EVAL", "script",
             "the idle-consumer prune", "key", p->spec->stream, "lease_keys", p->lease_prefix,
             "error", why, NULL);
  }
  p->answered(p->data);
}

static void prune(ltimer *t, void *data) {
  (void)t;
  pruner *p = data;
  if (!p->reading(p->data)) {
    p->skipped = true;
    return;
  }
  char idle[24];
  snprintf(idle, sizeof idle, "%llu", (unsigned long long)PRUNE_IDLE_MS);
  const char *argv[] = {"EVAL",       SCRIPT_PRUNE,   "2",  p->spec->stream,
                        p->retry_key, p->spec->group, idle, p->lease_prefix};
  size_t len[8];
  for (int i = 0; i < 8; i++) len[i] = strlen(argv[i]);
  if (bk_command(p->b, p->cmd, 8, argv, len, prune_done, p) == 0)
    p->pending++;
  else
    timer_start(p->timer, PRUNE_EVERY_MS);
}

pruner *prune_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                  const char *retry_key, prune_reading_fn *reading, prune_answered_fn *answered,
                  void *data) {
  pruner *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->b = b;
  p->cmd = cmd;
  p->clock = clock;
  p->spec = spec;
  p->retry_key = retry_key;
  p->reading = reading;
  p->answered = answered;
  p->data = data;
  p->fault.name = "the idle-consumer prune";
  p->timer = timer_new(clock, prune, p);
  p->lease_prefix = lease_key(spec->stream, spec->group, "");
  if (p->timer == NULL || p->lease_prefix == NULL) {
    prune_free(p);
    return NULL;
  }
  return p;
}

void prune_set_spec(pruner *p, const struct handler_spec *spec) { p->spec = spec; }

void prune_start(pruner *p) {
  /* The first start prunes at once; a later one (reading again after the
   * group was made again) only when a prune fell due meanwhile, else the
   * armed timer keeps its hour. */
  if (p->started && !p->skipped) return;
  p->started = true;
  p->skipped = false;
  timer_start(p->timer, 0);
}

void prune_stop(pruner *p) { timer_stop(p->timer); }
unsigned prune_pending(const pruner *p) { return p->pending; }
const struct fault *prune_fault(const pruner *p) { return &p->fault; }

void prune_free(pruner *p) {
  if (p == NULL) return;
  if (p->timer) timer_free(p->timer);
  free(p->lease_prefix);
  free(p);
}
