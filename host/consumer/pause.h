/* pause: a group's pause as one subscription (one reader) sees it, and the
 * breaker's trips.
 *
 * The pause lives in Redis, in the hash flow_key("pause", stream, group)
 * (SCRIPT_PAUSE writes it: `luastream pause` and `resume`, ls.pause, the
 * breaker rule), so it holds for every host and survives restarts. Each
 * reader looks at it with its consumer lease's keepalive (a rider, lease.h:
 * one call per Redis Cluster slot for all of a host's subscriptions) every
 * PAUSE_LOOK_MS while entries ask to start or the group is paused, and a
 * handler starts only while the last look that answered was sent at most
 * PAUSE_FRESH_MS ago and said the group runs: so no handler starts more
 * than PAUSE_FRESH_MS after a pause was written, on any host, even one whose
 * looks stopped being answered (fail closed). An idle subscription's look
 * goes only with its lease's renewal (every LEASE_RENEW_MS, a call that goes
 * anyway); its next entry waits for a look of its own.
 * A look the ACL refuses is the exception: the subscription runs as if
 * never paused, and says so once (the ACL recipes allow the key).
 *
 * The breaker: a handler that returns ls.pause(delay, reason), or the
 * breaker rule (breaker.h), trips it: the group pauses for delay (capped),
 * on every host. When that pause is over, one host (the first to look)
 * holds the probe and runs one entry (half-open) while the others stay
 * paused: if the probe succeeds the pause ends for everyone (close), if it
 * fails the breaker trips again, for twice as long (capped). A prober that
 * stops looking hands the probe on after PAUSE_PROBE_MS. An operator's pause
 * replaces the breaker's and ends only when resumed or at its --for. */
#ifndef LUASTREAM_PAUSE_H
#define LUASTREAM_PAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"
#include "delivery_metrics.h"
#include "lease.h"
#include "runtime.h"

#define PAUSE_LOOK_MS 400
#define PAUSE_FRESH_MS 1000
#define PAUSE_PROBE_MS 10000

typedef struct pause pause;

/* What may start now. */
enum pause_gate {
  PAUSE_GO,    /* running */
  PAUSE_PROBE, /* half-open, this reader holds the probe: one entry may start */
  PAUSE_WAIT,  /* paused, a probe running, or not looked at lately */
};

/* The group was seen paused (paused true: entries read and not started are
 * to be given back) or running again (the reader goes on). */
typedef void pause_changed_fn(void *data, bool paused);

/* The pause of spec's group for the reader of partition (-1: none) of
 * process identity, its looks riding the keepalive of lease_start's lease.
 * spec is the handler's (its stream the base stream), borrowed until
 * pause_set_spec or pause_free. NULL when out of memory. */
pause *pause_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec,
                 const char *identity, int partition, struct delivery_metrics *metrics,
                 pause_changed_fn *changed, void *data);
/* Looks ride l's keepalive from now on (the first at once). */
void pause_start(pause *p, lease *l);
/* No more looks; a trip or close outstanding is still answered. */
void pause_stop(pause *p);
void pause_free(pause *p);
void pause_set_spec(pause *p, const struct handler_spec *spec);
/* Trip or close calls sent and not answered. */
unsigned pause_pending(const pause *p);

/* Whether an entry may start now; asks for a look at once when the last is
 * not fresh. After PAUSE_PROBE, pause_probe_started before the next call. */
enum pause_gate pause_gate(pause *p);
/* Whether to read: not while seen paused (what is read would wait); one
 * entry for the probe; otherwise yes, however old the last look (reading
 * starts nothing). */
enum pause_gate pause_read_gate(const pause *p);
/* The probe entry started: nothing else starts until pause_probe_done. */
void pause_probe_started(pause *p);
/* Whether a probe entry is running here. */
bool pause_probing(const pause *p);
/* The probe entry's outcome: ok closes the breaker for every host; a
 * failure (why) trips it again. */
void pause_probe_done(pause *p, bool ok, const char *why);
/* Whether the probe admitted earlier (pause_probe_started) may still start
 * now: still half-open and holding the probe by a look under
 * PAUSE_FRESH_MS old (it may have waited for a max_in_flight slot). */
bool pause_probe_fresh(pause *p);
/* The read for the probe found nothing (this partition, or the whole group,
 * is idle): the probe is left to other readers, which take it once this one
 * stops renewing it (PAUSE_PROBE_MS); this one only looks for twice that. */
void pause_probe_idle(pause *p);
/* The probe entry never ran (handed back, out of memory): neither success
 * nor failure; the next look may give the probe again. */
void pause_probe_dropped(pause *p);
/* Trips the breaker for delay_ms (capped at the handler's breaker max; < 0:
 * the breaker rule's pause) with reason: logged and counted once, by the
 * host whose call opened it. */
void pause_trip(pause *p, int64_t delay_ms, const char *reason, size_t reason_len);

/* Whether the group was last seen paused (or half-open), and then why:
 * "paused by NAME: REASON" with its kind and time left, for readiness. */
bool pause_seen(const pause *p, char *why, size_t len);

#endif
