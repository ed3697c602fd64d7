/* health_pool: the health endpoint's connection cap, deadlines and eviction
 * (see health_pool.h). */
#include "health_pool.h"

#include <stddef.h>

int health_pool_cap(uint64_t nofile) {
  uint64_t share = nofile / 4;
  if (share < HEALTH_CONNS_MIN) return HEALTH_CONNS_MIN;
  if (share > HEALTH_CONNS_MAX) return HEALTH_CONNS_MAX;
  return (int)share;
}

void health_pool_init(struct health_pool *p, int cap) {
  *p = (struct health_pool){.cap = cap > 0 ? cap : 1};
}

struct health_slot *health_pool_add(struct health_pool *p, struct health_slot *s, uint64_t now,
                                    bool sent) {
  s->deadline_ms = now + HEALTH_REQUEST_MS;
  s->answering = false;
  s->next = NULL;
  s->prev = p->newest;
  if (p->newest)
    p->newest->next = s;
  else
    p->oldest = s;
  p->newest = s;
  if (++p->n <= p->cap) return NULL;
  if (!sent) return s;
  /* The oldest still waiting for its request: idle or slow, it has had
   * the longest to send it. */
  for (struct health_slot *o = p->oldest; o != s; o = o->next)
    if (!o->answering) return o;
  return s;
}

void health_pool_answering(struct health_slot *s, uint64_t now) {
  s->answering = true;
  s->deadline_ms = now + HEALTH_ANSWER_MS;
}

void health_pool_remove(struct health_pool *p, struct health_slot *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    p->oldest = s->next;
  if (s->next)
    s->next->prev = s->prev;
  else
    p->newest = s->prev;
  s->prev = s->next = NULL;
  p->n--;
}

bool health_slot_expired(const struct health_slot *s, uint64_t now) {
  return now >= s->deadline_ms;
}
