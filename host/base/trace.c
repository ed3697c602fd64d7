/* trace: see trace.h. */
#include "trace.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool lower_hex(const char *s, size_t n) {
  bool nonzero = false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    nonzero = nonzero || c != '0';
  }
  return nonzero;
}

/* 00-TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT-PPPPPPPPPPPPPPPP-FF */
static bool valid(const char *v, size_t len) {
  return v && len == TRACEPARENT_LEN && memcmp(v, "00-", 3) == 0 && lower_hex(v + 3, 32) &&
         v[35] == '-' && lower_hex(v + 36, 16) && v[52] == '-' &&
         (lower_hex(v + 53, 2) || memcmp(v + 53, "00", 2) == 0);
}

bool trace_id_of(const char *v, size_t len, char *id) {
  if (!valid(v, len)) return false;
  memcpy(id, v + 3, TRACE_ID_LEN);
  id[TRACE_ID_LEN] = '\0';
  return true;
}

/* Parent ids need to be unique, not secret: xorshift64*, seeded once from
 * the clock and the process id. */
static uint64_t next_id(void) {
  static uint64_t x;
  if (x == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    if (x == 0) x = 0x9e3779b97f4a7c15u;
  }
  uint64_t r;
  do {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r = x * 0x2545f4914f6cdd1dULL;
  } while (r == 0); /* an all-zero parent id is invalid */
  return r;
}

bool trace_child(const char *v, size_t len, char *out) {
  if (!valid(v, len)) return false;
  snprintf(out, TRACEPARENT_LEN + 1, "00-%.32s-%016llx-%.2s", v + 3, (unsigned long long)next_id(),
           v + 53);
  return true;
}
