/* scripts: the text of the server-side scripts described in scripts.h, one
 * file each in scripts/, compiled in by the build (cmake/Embed.cmake) and
 * sent as they are, comments included: an error's "@user_script:N" is line N
 * of that file. */
#include "scripts.h"

const char SCRIPT_CLAIM[] = {
#include "host/broker/scripts/claim.lua.inc"
};

const char SCRIPT_RECLAIM[] = {
#include "host/broker/scripts/reclaim.lua.inc"
};

const char SCRIPT_OWN[] = {
#include "host/broker/scripts/own.lua.inc"
};

const char SCRIPT_READ[] = {
#include "host/broker/scripts/read.lua.inc"
};

const char SCRIPT_SWEEP[] = {
#include "host/broker/scripts/sweep.lua.inc"
};

const char SCRIPT_REPLAY[] = {
#include "host/broker/scripts/replay.lua.inc"
};

const char SCRIPT_OUTCOME[] = {
#include "host/broker/scripts/outcome.lua.inc"
};

const char SCRIPT_LEASE[] = {
#include "host/broker/scripts/lease.lua.inc"
};

const char SCRIPT_PRUNE[] = {
#include "host/broker/scripts/prune.lua.inc"
};

const char SCRIPT_TRIM[] = {
#include "host/broker/scripts/trim.lua.inc"
};

const char SCRIPT_KEEPALIVE[] = {
#include "host/broker/scripts/keepalive.lua.inc"
};

const char SCRIPT_HANDBACK[] = {
#include "host/broker/scripts/handback.lua.inc"
};

const char SCRIPT_HANDBACK_RETRY[] = {
#include "host/broker/scripts/handback_retry.lua.inc"
};

const char SCRIPT_PAUSE[] = {
#include "host/broker/scripts/pause.lua.inc"
};

const char SCRIPT_LAG[] = {
#include "host/broker/scripts/lag.lua.inc"
};

const char SCRIPT_INFLIGHT[] = {
#include "host/broker/scripts/inflight.lua.inc"
};

const char SCRIPT_INFLIGHT_KEYS[] = {
#include "host/broker/scripts/inflight_keys.lua.inc"
};

const char SCRIPT_RATE[] = {
#include "host/broker/scripts/rate.lua.inc"
};

const char SCRIPT_TICK[] = {
#include "host/broker/scripts/tick.lua.inc"
};

static const char *const all[SCRIPT_COUNT] = {
    SCRIPT_CLAIM,          SCRIPT_RECLAIM,       SCRIPT_OWN,       SCRIPT_READ,
    SCRIPT_SWEEP,          SCRIPT_REPLAY,        SCRIPT_OUTCOME,   SCRIPT_LEASE,
    SCRIPT_PRUNE,          SCRIPT_TRIM,          SCRIPT_KEEPALIVE, SCRIPT_HANDBACK,
    SCRIPT_HANDBACK_RETRY, SCRIPT_LAG,           SCRIPT_PAUSE,     SCRIPT_RATE,
    SCRIPT_INFLIGHT,       SCRIPT_INFLIGHT_KEYS, SCRIPT_TICK};

int script_index(const char *s) {
  for (int i = 0; i < SCRIPT_COUNT; i++)
    if (s == all[i]) return i;
  return -1;
}

const char *script_text(int i) { return all[i]; }
