/* lease: one consumer name of one group held by one live process.
 *
 * The key luastream:consumer:{<stream>}:<group>:<consumer> (in the stream's
 * Redis Cluster slot, lease_key) holds the
 * process's identity (lease_identity: a random token, the pid, the machine
 * and the hostname) with a time to live of LEASE_TTL_MS; the running host
 * renews it every LEASE_RENEW_MS and deletes it on a clean stop, each step
 * comparing the value in one script (SCRIPT_LEASE), so no process ever
 * extends or deletes another's.
 *
 * Renewal is the process's keepalive (lease_keepalive): every LEASE_RENEW_MS
 * it renews all of the process's held leases in one script call
 * (SCRIPT_KEEPALIVE) per Redis Cluster slot (one call in all on a single
 * server), and hands each lease its own answer, so a lost lease is still
 * seen per consumer. Riders (lease_ride: the heartbeats) go in the same
 * calls: a rider says how often its section must go, and at each turn the
 * keepalive sends, per slot, one call renewing that slot's leases with the
 * sections of its riders that are due, so a host sends one call per slot per
 * turn, whatever its number of leases and subscriptions.
 *
 * Known valid (lease_valid): the time to live counts from Redis applying a
 * take or renewal, which is after this process sent it, so the lease is
 * surely still this process's until the send time of the last successful
 * one plus the time to live. A handler is only started while it is known
 * valid for LEASE_VALID_MS more: one that then holds the loop for the
 * longest the watchdog allows (LEASE_STALL_MAX_MS) still ends, or the
 * watchdog ends the process, before the key can expire.
 * After a pause or a stalled loop it is not known valid, whatever the
 * timers have done yet: lease_confirm sends a renewal at once and reports
 * LEASE_CONFIRMED when one succeeds (or LEASE_LOST).
 *
 * Taking it: a free key (or one this process holds) is taken at once. A key
 * held by a process on this machine that no longer exists (same machine and
 * pid namespace, no such pid) is taken over at once; one held by a live
 * process of this machine is refused at once (LEASE_REFUSED). Otherwise the holder
 * may have crashed and stopped renewing: the lease waits (LEASE_WAITING,
 * logged by the caller) for the key's remaining time to live and a margin,
 * polling; if the key is still held then, it is being renewed by a live
 * process and the lease is refused (LEASE_REFUSED with the holder).
 *
 * Renewal that finds another value (the key expired during a long pause and
 * another process took the name) reports LEASE_LOST once and stops
 * renewing; one that finds the key gone takes it again (logged). Commands
 * that fail (connection down, or an error: LEASE_FAILED) are retried at the
 * next renewal. */
#ifndef LUASTREAM_LEASE_H
#define LUASTREAM_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"

#define LEASE_TTL_MS 20000
#define LEASE_RENEW_MS 5000 /* how often the running host renews */
/* The longest a handler may hold the loop: run --watchdog at most. */
#define LEASE_STALL_MAX_MS (LEASE_TTL_MS / 2)
/* Known valid after the send of the last accepted take or renewal: the time
 * to live less the longest stall and 2 s for the watchdog's own lateness
 * (8 s, above the 5 s between renewals). */
#define LEASE_VALID_MS (LEASE_TTL_MS - LEASE_STALL_MAX_MS - 2000)
#define LEASE_MARGIN_MS 1000 /* waited past a holder's time to live */
#define LEASE_POLL_MS 1000   /* while waiting: how often the key is tried */
#define LEASE_PREFIX "luastream:consumer:"
#define LEASE_IDENTITY_MAX 512

typedef struct lease lease;
typedef struct lease_keepalive lease_keepalive;

enum lease_event {
  LEASE_TAKEN,     /* held: reading may start */
  LEASE_WAITING,   /* held by another process that may have crashed: waiting */
  LEASE_REFUSED,   /* held by a live process */
  LEASE_LOST,      /* another process holds it now: stop reading */
  LEASE_TAKEOVER,  /* the holder's process is gone (this machine): taking it over */
  LEASE_RETAKEN,   /* a renewal found the key gone (expired) and took it again */
  LEASE_CONFIRMED, /* after lease_confirm: a renewal succeeded, valid again */
  LEASE_RENEWED,   /* a renewal worked */
  LEASE_FAILED,    /* the server answered a take or renewal with an error (a
                    NOPERM, say): tried again as after a lost connection */
};
/* holder: who holds it ("host pid N"), for WAITING, REFUSED, LOST and TAKEOVER;
 * the server's error for FAILED; wait_ms: LEASE_WAITING's longest wait. */
typedef void lease_fn(void *data, enum lease_event ev, const char *holder, long long wait_ms);

/* This process's identity as a lease value: "<token> <pid> <machine>
 * <hostname>", the token random per call; machine: NULL for this machine's
 * (its boot id and pid namespace), else one made up (the test harness, whose
 * hosts are each a process of their own). -1 when it cannot be made. */
int lease_identity(const char *machine, const char *hostname, char *out, size_t len);
/* 1 when the lease value names a live process of this machine other than
 * this one (mine: this process's identity): its pid exists. */
int lease_holder_alive_here(const char *value, const char *mine);
/* "host pid N" of a lease value, for messages. */
void lease_holder_text(const char *value, char *out, size_t len);
/* The key of a consumer's lease (malloc'd): LEASE_PREFIX {stream}:group:consumer,
 * or, for a stream whose name has a hash tag, LEASE_PREFIX {tag}:stream:group:consumer:
 * in the stream's slot either way. */
char *lease_key(const char *stream, const char *group, const char *consumer);

/* The renewals of one process's leases, whose value is identity (copied);
 * commands go on cmd (shared). Free it after every lease made with it. NULL
 * when out of memory. */
lease_keepalive *lease_keepalive_new(broker *b, bk_conn *cmd, lclock *clock, const char *identity);
void lease_keepalive_free(lease_keepalive *ka);
/* The identity its leases hold. */
const char *lease_keepalive_identity(const lease_keepalive *ka);

/* Something sent with the keepalive's call of its lease's slot (a
 * heartbeat): set every_ms, add, answered and data, then lease_ride. */
struct lease_rider;
/* Fills r->keys and r->args (reset) with its section now; false: nothing to
 * send this time. */
typedef bool lease_rider_add_fn(void *data, struct lease_rider *r);
/* Its section's answer: the call's element for it (an array, or a string:
 * its error), or when the call failed as a whole its reply (an error, or
 * NULL: no answer) and err. */
typedef void lease_rider_answered_fn(void *data, const bk_reply *r, const char *err);
struct lease_rider {
  uint64_t every_ms; /* its section goes at least this often, while it has one */
  /* what its section is (SCRIPT_KEEPALIVE): "1" (lease_rider_init), a
   * heartbeat's, or "p", a pause's */
  const char *section;
  /* "p": the one key of its section, which decides its slot (else its
   * lease's key does, and goes first in its keys) */
  const char *slot_key;
  /* its add is also asked at each renewal of the leases (every
   * LEASE_RENEW_MS), with renewal set: a section that rides the call that
   * goes anyway */
  bool with_renewals;
  bool renewal;
  lease_rider_add_fn *add;
  lease_rider_answered_fn *answered;
  void *data;
  struct bk_args keys, args; /* the section add made: its keys, its ARGV */
  /* the keepalive's */
  lease *lease;            /* ridden, or NULL */
  uint64_t next_ms;        /* its section is due then */
  unsigned pending;        /* sections sent and not answered (0 or 1) */
  struct renew_call *call; /* the call its pending section is in */
  size_t call_index;
};
void lease_rider_init(struct lease_rider *r);
/* r's sections go with l's renewals from now on, the first within every_ms. */
void lease_ride(lease *l, struct lease_rider *r);
/* r's next section goes at once (at the next loop turn), unless one is out. */
void lease_rider_soon(struct lease_rider *r);
/* No more sections; one outstanding is still answered (pending). */
void lease_unride(struct lease_rider *r);
/* Unrides, and forgets an outstanding section (never answered then). */
void lease_rider_free(struct lease_rider *r);

/* A lease of ka's process, renewed by ka once held. NULL when out of memory. */
lease *lease_new(lease_keepalive *ka, const char *stream, const char *group, const char *consumer,
                 lease_fn *fn, void *data);
/* Takes the lease (events follow through fn) and keeps renewing it. */
void lease_take(lease *l);
/* Stops renewing and deletes the key if this process holds it; done is
 * called once that is answered (or at once when nothing is to be sent). */
void lease_release(lease *l, void (*done)(void *data), void *data);
/* Held: taken and not lost or released. */
int lease_held(const lease *l);
/* Held and confirmed by Redis within LEASE_VALID_MS of now (read afresh:
 * clock_fresh), so no other process can hold the name now. */
int lease_valid(const lease *l);
/* Not valid: renews at once (again and again, every LEASE_POLL_MS while
 * Redis cannot be reached) until a renewal succeeds (LEASE_CONFIRMED) or
 * finds another holder (LEASE_LOST). Nothing happens when not held. */
void lease_confirm(lease *l);
const char *lease_key_of(const lease *l);
/* Only with no release outstanding; its riders are unridden. */
void lease_free(lease *l);

#endif
