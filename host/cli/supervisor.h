/* supervisor: `luastream run --processes N` with N above 1.
 *
 * The supervisor runs no handler itself: it starts N worker processes, each
 * this same program with the same `run` command line (a whole host,
 * watching DIR and reloading on its own), told by the environment that it
 * is worker I. It starts a worker again when it exits (after 100 ms,
 * doubling to 5 s while it keeps dying young; back to 100 ms once one ran
 * for SUPERVISOR_STEADY_MS), logging the worker, its pid and its exit
 * status or signal. A worker's first process that exits with status 1 or 2
 * within SUPERVISOR_STEADY_MS (its handlers failed to load, the server
 * refused them) stops them all, and the supervisor exits with that status,
 * as `run` alone would. SIGTERM, SIGINT and SIGHUP are passed on to every
 * worker; after SIGTERM or SIGINT no worker is started again and the
 * supervisor exits once every worker has: 0 when all of them exited 0, else
 * 1; a second SIGTERM or SIGINT (stop_signal.h: not the same one again within
 * STOP_SIGNAL_SAME_MS) kills every worker (SIGKILL: a worker takes
 * any number of SIGTERM and SIGINT as one graceful stop, since a service
 * manager may signal every process of the service). Workers run in a session of their own, so a terminal's Ctrl-C reaches
 * them once, through the supervisor, and each asks the kernel for SIGTERM
 * when the supervisor dies (PR_SET_PDEATHSIG), so none outlives a
 * SIGKILLed supervisor.
 *
 * Names: worker I's consumer names are HOSTNAME-HANDLER-I, or, when a live
 * process of this machine holds those, the first free of I+N, I+2N, ...
 * (host.h, numbering); with --instance K, HOSTNAME-HANDLER-(K*N+I), so
 * supervisors with the same N and different K on one machine never share a
 * name; with --consumer NAME, NAME-I. The
 * same index gets the same names after a restart (the lease of the dead
 * worker's pid is taken over at once, lease.h).
 *
 * --http: the supervisor serves it. Each worker serves health.h on a
 * loopback socket the supervisor bound and handed down (kept across
 * restarts); /readyz and /metrics on the supervisor ask every worker
 * (scrape.h, SUPERVISOR_SCRAPE_MS each): ready when all are, and one
 * metrics page with a worker label. /healthz is the supervisor's own. */
#ifndef LUASTREAM_SUPERVISOR_H
#define LUASTREAM_SUPERVISOR_H

#include <stdbool.h>

#include <stdint.h>

#include "options.h"

#define SUPERVISOR_BACKOFF_MIN_MS 100
#define SUPERVISOR_BACKOFF_MAX_MS 5000
#define SUPERVISOR_STEADY_MS 10000 /* a worker that ran this long restarts at once again */
#define SUPERVISOR_SCRAPE_MS 2000  /* how long a worker may take to answer /readyz, /metrics */

/* The environment a worker is started with. */
#define SUPERVISOR_ENV_WORKER "LUASTREAM_WORKER"          /* its index */
#define SUPERVISOR_ENV_PARENT "LUASTREAM_SUPERVISOR_PID"  /* the supervisor's pid */
#define SUPERVISOR_ENV_HTTP_FD "LUASTREAM_WORKER_HTTP_FD" /* its health socket */

/* Runs the supervisor for the parsed `run` command line o, whose arguments
 * after "run" are argv (given again to every worker). Returns the exit
 * status. */
int supervisor_run(const struct cli_options *o, int argc, char **argv);

/* In a worker: what the supervisor said through the environment. */
struct supervisor_worker {
  int index;   /* 0..N-1 */
  int http_fd; /* the listening socket for health.h, or -1 */
};

/* Reads (and removes, so that handlers' child processes do not see it) the
 * worker's environment into *w, arranges for SIGTERM when the supervisor
 * dies, and holds SIGTERM, SIGINT and SIGHUP (supervisor_hold_signals) until
 * run catches them. Returns 1 in a worker, 0 when this process is no worker,
 * -1 when the supervisor is gone already or the environment is wrong (said
 * on stderr). */
int supervisor_worker_setup(struct supervisor_worker *w);
/* Blocks (hold) or unblocks SIGTERM, SIGINT and SIGHUP: one that comes while
 * held waits, rather than ending the process by its default action. */
void supervisor_hold_signals(bool hold);

/* Worker index of nprocs: its instance number, or its consumer name in
 * consumer (cap bytes) when base_consumer is set ("" otherwise).
 * base_instance: --instance, or -1. Returns the instance, or -1 with
 * --consumer. */
int supervisor_worker_names(int index, int nprocs, int base_instance, const char *base_consumer,
                            char *consumer, size_t cap);

/* The wait before starting a worker again: prev_ms the last wait (0 for
 * none yet), ran_ms how long the worker ran. */
uint64_t supervisor_backoff(uint64_t prev_ms, uint64_t ran_ms);

/* "SIGKILL", "SIGSEGV", ... or "signal N", in buf. */
const char *supervisor_signal_name(int sig, char *buf, size_t cap);

#endif
