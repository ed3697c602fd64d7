/* stop_signal: what a SIGTERM or SIGINT means to `run` and its supervisor.
 *
 * The first one stops gracefully (drain, ack, exit 0). The same signal again
 * within STOP_SIGNAL_SAME_MS of it is the same stop, not a second one: GNU
 * `timeout` signals its child and then the whole process group, and a
 * service manager may signal the main process and every process of the
 * service. Any other signal after the first (a different one, or the same
 * one later) means "exit now". */
#ifndef LUASTREAM_STOP_SIGNAL_H
#define LUASTREAM_STOP_SIGNAL_H

#include <stdint.h>

#define STOP_SIGNAL_SAME_MS 1000

enum stop_signal_kind {
  STOP_FIRST, /* stop gracefully */
  STOP_AGAIN, /* the first one repeated: nothing more to do */
  STOP_NOW,   /* a second stop: exit at once */
};

struct stop_signals {
  int first;         /* the first signal, 0 for none yet */
  uint64_t first_ms; /* when it came */
  int count;         /* stops taken (STOP_FIRST or STOP_NOW) */
};

/* Takes signum, received at now_ms (a monotonic clock). */
enum stop_signal_kind stop_signal_take(struct stop_signals *s, int signum, uint64_t now_ms);

/* A stop begun without a signal (the process stops itself): any signal
 * from here on is a second stop. */
void stop_signal_begun(struct stop_signals *s);

#endif
