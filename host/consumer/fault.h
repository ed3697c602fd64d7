/* fault: the failing clock of one piece of periodic work (acks, outcomes,
 * the delay-set sweep, the lease, the idle-consumer prune). A server error
 * starts it, a success stops it; readiness (sub_healthy) reports work that
 * keeps failing, and the log repeats an unchanged failure only now and then.
 * A lost connection is not counted (readiness says so by itself). */
#ifndef LUASTREAM_FAULT_H
#define LUASTREAM_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "runtime.h"

/* A failure that repeats unchanged is logged again at its level this often
 * (in between at debug). */
#define FAULT_RELOG_MS 60000

struct fault {
  const char *name; /* the work, for logs and readiness: "acks", ... (static) */
  bool failing;
  uint64_t since_ms;  /* the first failure since the last success */
  uint64_t logged_ms; /* when it was last logged at its level */
  char detail[400];   /* what Redis refused: "COMMAND on KEY ...: error" */
};

/* The work got a server error at now: detail says what was refused (the
 * command or script, its keys, Redis's text). Returns the level to log it
 * at: `level` for the first failure, a different error or one last logged
 * FAULT_RELOG_MS ago, else LOG_DEBUG. */
enum log_level fault_failed(struct fault *f, uint64_t now, enum log_level level,
                            const char *detail);
/* The work succeeded at now: stops the clock, and when it was failing logs
 * "<name> works again" under spec's names. */
void fault_ok(struct fault *f, uint64_t now, const struct handler_spec *spec);

#endif
