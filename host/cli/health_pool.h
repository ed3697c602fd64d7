/* health_pool: which of the health endpoint's connections to close, so that
 * idle or slow clients cannot hold the port (health.c serves it).
 *
 * Connections are kept in the order they were accepted, each with a
 * deadline: HEALTH_REQUEST_MS after it was accepted for its whole request,
 * however it trickles in (a client gains no time by sending bytes slowly),
 * then HEALTH_ANSWER_MS for the client to take its answer. At the cap a new
 * connection that has already sent something (a probe sends its request
 * with the connection) closes the oldest one still waiting for its request,
 * never one being answered; a new one that has sent nothing is closed
 * itself, so that a flood of idle connections cannot push out a probe whose
 * request is still on its way; so is a new one when every other is being
 * answered. The cap is a share of the open-file limit, so that a flood of
 * connections leaves descriptors for Redis and PostgreSQL.
 * Pure: the time is given, for the unit tests. */
#ifndef LUASTREAM_HEALTH_POOL_H
#define LUASTREAM_HEALTH_POOL_H

#include <stdbool.h>
#include <stdint.h>

#define HEALTH_REQUEST_MS 2000 /* from accept to the blank line after the headers */
#define HEALTH_ANSWER_MS 10000 /* from the request to the answer taken */
#define HEALTH_CONNS_MIN 8     /* the cap, whatever the open-file limit */
#define HEALTH_CONNS_MAX 1024

struct health_slot {
  struct health_slot *prev, *next; /* older, newer */
  uint64_t deadline_ms;
  bool answering;
};

struct health_pool {
  struct health_slot *oldest, *newest;
  int n, cap;
};

/* The cap for a process allowed nofile open descriptors: a quarter of them,
 * within HEALTH_CONNS_MIN..HEALTH_CONNS_MAX. */
int health_pool_cap(uint64_t nofile);

void health_pool_init(struct health_pool *p, int cap);

/* Adds s, accepted at now, as the newest; sent: bytes from its client are
 * already waiting. Returns the slot to close to stay within the cap (still
 * in the pool: the caller closes it, which removes it), possibly s itself,
 * or NULL. */
struct health_slot *health_pool_add(struct health_pool *p, struct health_slot *s, uint64_t now,
                                    bool sent);

/* s has its request: from now on it is being answered. */
void health_pool_answering(struct health_slot *s, uint64_t now);

/* Takes s out of the pool. */
void health_pool_remove(struct health_pool *p, struct health_slot *s);

/* Is s past its deadline at now? */
bool health_slot_expired(const struct health_slot *s, uint64_t now);

#endif
