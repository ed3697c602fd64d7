/* inflight: a subscription's max_in_flight, the most of its handlers running
 * at once across every host and process reading the group: a leased
 * semaphore in Redis (SCRIPT_INFLIGHT, scripts.h) under
 * flow_key("inflight", stream, group) (the base stream for every partition
 * of a partitioned handler, so all share it), beside it the readers waiting
 * ("...:waiting").
 *
 * An entry popped from its lane starts only with a slot (inflight_admit);
 * until one is granted it waits here, holding its lane, not started: it was
 * read but is not a delivery yet (no outcome, nothing counted; its claim
 * kept by the heartbeat when min_idle is set, held.h). Each stream reader
 * has its own slots, members "<holder>#<n>" (holder: the consumer name, the
 * partition and a token of this reader), at most min(workers, max_in_flight).
 *
 * One call per loop turn carries everything due: the slots of finished
 * handlers released, those of running ones renewed (at least every
 * INFLIGHT_RENEW_MS), and as many new ones asked for as entries wait. Each
 * slot's lease is INFLIGHT_TTL_MS on the server's clock, so a host that died
 * frees its slots within it. A reader denied a slot asks again every
 * INFLIGHT_POLL_MS, keeping its place in the queue of waiting readers
 * (free slots go to the longest waiting). A call whose answer was lost is
 * made again with the same members: a grant is never counted twice.
 *
 * The one exception to the cap: a host paused (SIGSTOP, a VM pause) or
 * stalled past the lease may still finish what it was running when it
 * resumes, while its slots went to others: briefly up to max + what it ran.
 * A grant answered more than INFLIGHT_GRANT_VALID_MS after its call went
 * out (a pause in between) starts nothing: it is asked for again. */
#ifndef LUASTREAM_INFLIGHT_H
#define LUASTREAM_INFLIGHT_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "entry.h"
#include "fault.h"
#include "lease.h"
#include "runtime.h"

#define INFLIGHT_TTL_MS LEASE_TTL_MS     /* a slot's lease (a watchdog stall fits in it) */
#define INFLIGHT_RENEW_MS LEASE_RENEW_MS /* running handlers' slots renewed this often */
#define INFLIGHT_POLL_MS 100             /* denied: asked again this often */
#define INFLIGHT_WAIT_TTL_MS 2000        /* a waiting reader's place lapses after this */
#define INFLIGHT_GRANT_VALID_MS (INFLIGHT_TTL_MS / 2)

typedef struct inflight inflight;

/* A slot was granted for e (waiting since inflight_admit): start it. false:
 * it cannot start now (the consumer lease is being confirmed): it waits
 * again, and its slot is asked for again in INFLIGHT_POLL_MS. */
typedef bool inflight_start_fn(void *data, struct entry *e);
/* A call was answered (a stopping reader may have waited for it). */
typedef void inflight_answered_fn(void *data);

/* The semaphore of spec (its name, consumer, group, max_in_flight, workers)
 * for the reader of partition (-1: none) of base_stream; spec is borrowed,
 * replaced by inflight_set_spec. NULL when out of memory. */
inflight *inflight_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                       const char *base_stream, int partition, inflight_start_fn *start,
                       inflight_answered_fn *answered, void *data);
void inflight_set_spec(inflight *f, const struct handler_spec *spec);
/* e waits here (linked through e->next) for a slot, asked for in this loop
 * turn's call, until inflight_start_fn. */
void inflight_admit(inflight *f, struct entry *e);
/* A handler that had a slot finished: its slot goes back. */
void inflight_done(inflight *f);
/* Removes and returns the entries waiting (linked through e->next, in the
 * order they came): the reader's stop, or a pause, hands them back. */
struct entry *inflight_take_waiting(inflight *f);
/* The reader stops: no slot is asked for from now on, and releases that
 * fail are not sent again (they lapse). */
void inflight_stop(inflight *f);
/* Calls outstanding or releases still to send (0 when nothing is). */
unsigned inflight_pending(const inflight *f);
/* Entries waiting for a slot; slots held here. */
size_t inflight_waiting(const inflight *f);
size_t inflight_held(const inflight *f);
/* The semaphore's calls failing (readiness). */
const struct fault *inflight_fault(const inflight *f);
const char *inflight_key(const inflight *f);
/* Only with nothing outstanding (inflight_pending 0), or at teardown; frees
 * the entries still waiting. */
void inflight_free(inflight *f);

#endif
