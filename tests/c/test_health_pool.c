/* Tests for health_pool.c: the health endpoint's connection cap (a share of
 * the open-file limit), the deadlines, and which connection goes at the cap:
 * the oldest still waiting for its request when the new one has sent
 * something, the new one when it has sent nothing or every other is being
 * answered. Times are given, not read from a clock. */
#include "health_pool.h"
#include "task.h"

#include <stdint.h>

#define N 6

static struct health_slot slots[N];

TEST_IMPL(health_pool_cap_is_a_share_of_the_file_limit) {
  ASSERT_INT_EQ(health_pool_cap(1024), 256);
  ASSERT_INT_EQ(health_pool_cap(20000), HEALTH_CONNS_MAX);
  ASSERT_INT_EQ(health_pool_cap(1048576), HEALTH_CONNS_MAX);
  ASSERT_INT_EQ(health_pool_cap(64), 16);
  ASSERT_INT_EQ(health_pool_cap(16), HEALTH_CONNS_MIN);
  ASSERT_INT_EQ(health_pool_cap(0), HEALTH_CONNS_MIN); /* unknown */
}

TEST_IMPL(health_pool_below_the_cap_keeps_everyone) {
  struct health_pool p;
  health_pool_init(&p, 3);
  for (int i = 0; i < 3; i++) ASSERT_NULL(health_pool_add(&p, &slots[i], 100 + i, false));
  ASSERT_INT_EQ(p.n, 3);
  ASSERT(p.oldest == &slots[0]);
  ASSERT(p.newest == &slots[2]);
  health_pool_remove(&p, &slots[1]); /* from the middle */
  ASSERT(slots[0].next == &slots[2] && slots[2].prev == &slots[0]);
  ASSERT_NULL(health_pool_add(&p, &slots[3], 200, false));
  ASSERT(p.newest == &slots[3]);
}

TEST_IMPL(health_pool_at_the_cap_a_request_evicts_the_oldest_idle) {
  struct health_pool p;
  health_pool_init(&p, 3);
  for (int i = 0; i < 3; i++) ASSERT_NULL(health_pool_add(&p, &slots[i], 100 + i, false));
  /* a probe with its request: the oldest idle one goes */
  ASSERT(health_pool_add(&p, &slots[3], 110, true) == &slots[0]);
  health_pool_remove(&p, &slots[0]);
  /* one being answered is never evicted: the next oldest idle is */
  health_pool_answering(&slots[1], 111);
  ASSERT(health_pool_add(&p, &slots[4], 112, true) == &slots[2]);
  health_pool_remove(&p, &slots[2]);
  ASSERT(p.oldest == &slots[1]);
  ASSERT_INT_EQ(p.n, 3);
}

TEST_IMPL(health_pool_at_the_cap_an_idle_newcomer_is_closed) {
  struct health_pool p;
  health_pool_init(&p, 2);
  ASSERT_NULL(health_pool_add(&p, &slots[0], 100, true));
  ASSERT_NULL(health_pool_add(&p, &slots[1], 101, false));
  /* nothing sent yet: a flood of these cannot push out a probe still
   * sending */
  ASSERT(health_pool_add(&p, &slots[2], 102, false) == &slots[2]);
  health_pool_remove(&p, &slots[2]);
  /* every other being answered: even one with a request waits its turn */
  health_pool_answering(&slots[0], 103);
  health_pool_answering(&slots[1], 103);
  ASSERT(health_pool_add(&p, &slots[3], 104, true) == &slots[3]);
  health_pool_remove(&p, &slots[3]);
  ASSERT_INT_EQ(p.n, 2);
}

TEST_IMPL(health_pool_deadlines) {
  struct health_pool p;
  health_pool_init(&p, 4);
  ASSERT_NULL(health_pool_add(&p, &slots[0], 1000, false));
  /* the request must be whole HEALTH_REQUEST_MS after accept, however it
   * trickles in */
  ASSERT(!health_slot_expired(&slots[0], 1000 + HEALTH_REQUEST_MS - 1));
  ASSERT(health_slot_expired(&slots[0], 1000 + HEALTH_REQUEST_MS));
  /* answering: HEALTH_ANSWER_MS from the request for the client to take it */
  health_pool_answering(&slots[0], 1500);
  ASSERT(!health_slot_expired(&slots[0], 1000 + HEALTH_REQUEST_MS));
  ASSERT(!health_slot_expired(&slots[0], 1500 + HEALTH_ANSWER_MS - 1));
  ASSERT(health_slot_expired(&slots[0], 1500 + HEALTH_ANSWER_MS));
  ASSERT(HEALTH_REQUEST_MS <= 2000); /* well inside a probe's period */
}

/* Random accepts (with or without bytes), requests and closes against a
 * model: the pool never holds more than the cap once the victim is closed,
 * a victim is never being answered unless it is the newcomer, and it is
 * the oldest connection still waiting. */
TEST_IMPL(health_pool_random_operations_keep_the_invariants) {
#define M 64
  static struct health_slot s[M];
  bool in[M] = {false};
  uint64_t order[M] = {0}; /* when each was added */
  struct health_pool p;
  health_pool_init(&p, 8);
  uint32_t seed = 12345;
  uint64_t now = 0;
  for (int step = 0; step < 20000; step++) {
    seed = seed * 1103515245u + 12345u;
    int i = (int)((seed >> 8) % M), op = (int)((seed >> 20) % 4);
    now++;
    if (!in[i]) {
      order[i] = now;
      in[i] = true;
      struct health_slot *v = health_pool_add(&p, &s[i], now, op & 1);
      if (v == NULL) {
        ASSERT(p.n <= p.cap);
        continue;
      }
      int vi = (int)(v - s);
      ASSERT(vi >= 0 && vi < M && in[vi]);
      if (vi != i) {
        ASSERT(op & 1); /* only a newcomer that has sent something evicts */
        ASSERT(!v->answering);
        for (int k = 0; k < M; k++) /* nothing waiting is older */
          ASSERT(!(in[k] && k != i && !s[k].answering && order[k] < order[vi]));
      }
      health_pool_remove(&p, v);
      in[vi] = false;
      ASSERT(p.n <= p.cap);
    } else if (op == 0 && !s[i].answering) {
      health_pool_answering(&s[i], now);
    } else if (op == 1) {
      health_pool_remove(&p, &s[i]);
      in[i] = false;
    }
    /* the list holds exactly the slots in the pool, oldest first */
    int n = 0;
    uint64_t last = 0;
    for (struct health_slot *x = p.oldest; x; x = x->next, n++) {
      int xi = (int)(x - s);
      ASSERT(in[xi] && order[xi] > last);
      last = order[xi];
      ASSERT(x->next ? x->next->prev == x : p.newest == x);
    }
    ASSERT_INT_EQ(n, p.n);
  }
#undef M
}
