/* Tests for lanes: per-key order, one running entry per key, keyless entries on
 * any free lane, the shared-only mode, fairness, counters and drain, plus a
 * randomized run checked against a simple model of the rules. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "entry.h"
#include "lanes.h"
#include "task.h"

#define NENT 64

static struct entry ent[NENT];

static size_t idx(const struct entry *e) { return (size_t)(e - ent); }

static void push(struct lanes *l, size_t i, const char *key) {
  lanes_push(l, &ent[i], key, key ? strlen(key) : 0);
}

/* Pops and checks which entry came out on which lane (lane < 0: any lane). */
static int pop_expect(struct lanes *l, size_t want, int want_lane) {
  int lane = -1;
  struct entry *e = lanes_pop(l, &lane);
  if (!e) TEST_FAIL_("pop: got nothing, expected entry %zu", want);
  ASSERT_INT_EQ(idx(e), want);
  ASSERT_NULL(e->next);
  ASSERT(lane >= 0 && lane < l->n);
  if (want_lane >= 0) ASSERT_INT_EQ(lane, want_lane);
  return lane;
}

static void pop_none(struct lanes *l) {
  int lane = -7;
  ASSERT_NULL(lanes_pop(l, &lane));
  ASSERT_INT_EQ(lane, -7); /* untouched when nothing runs */
}

/* Finds a key ("k<i>") on the given lane, so tests do not depend on the hash. */
static const char *key_on_lane(const struct lanes *l, int lane, int skip) {
  static char buf[8][16];
  static int next;
  char *k = buf[next++ % 8];
  for (int i = 0; i < 100000; i++) {
    snprintf(k, 16, "k%d", i);
    if (lanes_key_lane(l, k, strlen(k)) == lane && skip-- == 0) return k;
  }
  TEST_FAIL_("no key found for lane %d", lane);
}

static void counters(const struct lanes *l, size_t queued, size_t running) {
  ASSERT_INT_EQ(l->queued, queued);
  ASSERT_INT_EQ(l->running, running);
  ASSERT_INT_EQ(lanes_in_flight(l), queued + running);
}

TEST_IMPL(lanes_init_rejects_no_lanes) {
  struct lanes l;
  ASSERT_INT_EQ(lanes_init(&l, 0, true), -1);
  ASSERT_INT_EQ(lanes_init(&l, -3, false), -1);
  ASSERT_OK(lanes_init(&l, 1, false));
  counters(&l, 0, 0);
  pop_none(&l);
  lanes_free(&l);
  lanes_free(&l); /* a freed lanes is zeroed: freeing again is harmless */
}

TEST_IMPL(lanes_key_lane_is_stable_and_spread) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 8, true));
  ASSERT_INT_EQ(lanes_key_lane(&l, NULL, 0), -1);
  ASSERT_INT_EQ(lanes_key_lane(&l, "", 0), -1);
  /* Pinned values: a change of hash must be deliberate (it moves keys between
   * lanes, which a running host must never see mid-flight). */
  ASSERT_INT_EQ(lanes_key_lane(&l, "acme", 4), 6);
  ASSERT_INT_EQ(lanes_key_lane(&l, "globex", 6), 1);
  ASSERT_INT_EQ(lanes_key_lane(&l, "initech", 7), 2);
  struct lanes seven;
  ASSERT_OK(lanes_init(&seven, 7, true));
  ASSERT_INT_EQ(lanes_key_lane(&seven, "acme", 4), 2);
  ASSERT_INT_EQ(lanes_key_lane(&seven, "globex", 6), 4);
  ASSERT_INT_EQ(lanes_key_lane(&seven, "initech", 7), 6);
  lanes_free(&seven);
  /* Only `keylen` bytes count, and they may include a NUL. */
  ASSERT_INT_EQ(lanes_key_lane(&l, "acme-and-more", 4), lanes_key_lane(&l, "acme", 4));
  int a = lanes_key_lane(&l, "a\0b", 3), b = lanes_key_lane(&l, "a\0c", 3);
  ASSERT(a >= 0 && b >= 0);

  int hist[8] = {0};
  char k[32];
  for (int i = 0; i < 4000; i++) {
    snprintf(k, sizeof k, "account-%d", i);
    int lane = lanes_key_lane(&l, k, strlen(k));
    ASSERT(lane >= 0 && lane < 8);
    hist[lane]++;
  }
  for (int i = 0; i < 8; i++) ASSERT(hist[i] > 400 && hist[i] < 600); /* 500 expected */

  /* Single bytes that differ only in high bits: a bare FNV-1a modulo 8 would
   * put all of these on one lane. */
  int seen[8] = {0}, distinct = 0;
  for (int c = 0; c < 8; c++) {
    char key = (char)(0x01 + c * 0x10); /* 0x01, 0x11, ..., 0x71: equal low nibble */
    int lane = lanes_key_lane(&l, &key, 1);
    if (!seen[lane]++) distinct++;
  }
  ASSERT(distinct >= 4);
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_keeps_order_per_key) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 4, true));
  const char *a = key_on_lane(&l, 1, 0), *b = key_on_lane(&l, 2, 0);
  /* a: 0 1 2, b: 3 4, pushed interleaved. */
  push(&l, 0, a);
  push(&l, 3, b);
  push(&l, 1, a);
  push(&l, 4, b);
  push(&l, 2, a);
  counters(&l, 5, 0);

  int la = pop_expect(&l, 0, 1);
  int lb = pop_expect(&l, 3, 2);
  pop_none(&l); /* both keys are running: their next entries wait */
  counters(&l, 3, 2);

  lanes_done(&l, lb);
  pop_expect(&l, 4, 2);
  pop_none(&l);
  lanes_done(&l, la);
  counters(&l, 2, 1);
  pop_expect(&l, 1, 1);
  lanes_done(&l, 2);
  pop_none(&l); /* b is drained; a's entry 1 still runs */
  lanes_done(&l, 1);
  pop_expect(&l, 2, 1);
  lanes_done(&l, 1);
  counters(&l, 0, 0);
  pop_none(&l);
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_one_running_per_lane) {
  /* Two different keys on the same lane share it: never both at once, and
   * together they keep push order. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true));
  const char *a = key_on_lane(&l, 0, 0), *b = key_on_lane(&l, 0, 1);
  ASSERT(strcmp(a, b) != 0);
  push(&l, 0, a);
  push(&l, 1, b);
  push(&l, 2, a);
  pop_expect(&l, 0, 0);
  pop_none(&l);
  lanes_done(&l, 0);
  pop_expect(&l, 1, 0);
  pop_none(&l);
  lanes_done(&l, 0);
  pop_expect(&l, 2, 0);
  lanes_done(&l, 0);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_keyless_run_on_any_free_lane) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true));
  const char *k = key_on_lane(&l, 0, 0);
  push(&l, 0, k);
  pop_expect(&l, 0, 0);
  /* Keyless (NULL or empty key) entries take the two other lanes, in order. */
  push(&l, 1, NULL);
  push(&l, 2, "");
  push(&l, 3, NULL);
  int l1 = pop_expect(&l, 1, -1);
  int l2 = pop_expect(&l, 2, -1);
  ASSERT(l1 != 0 && l2 != 0 && l1 != l2);
  pop_none(&l); /* every lane is busy */
  counters(&l, 1, 3);
  lanes_done(&l, 0);
  pop_expect(&l, 3, 0); /* the keyed lane runs keyless work once free */
  /* Now a keyed entry waits behind the keyless one on its lane. */
  push(&l, 4, k);
  pop_none(&l);
  lanes_done(&l, 0);
  pop_expect(&l, 4, 0);
  lanes_done(&l, 0);
  lanes_done(&l, l1);
  lanes_done(&l, l2);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_own_queue_before_shared) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 2, true));
  const char *k0 = key_on_lane(&l, 0, 0);
  push(&l, 0, NULL); /* pushed first, but lane 0 has keyed work of its own */
  push(&l, 1, k0);
  pop_expect(&l, 1, 0);
  pop_expect(&l, 0, 1);
  pop_none(&l);
  lanes_done(&l, 0);
  lanes_done(&l, 1);
  lanes_free(&l);
}

TEST_IMPL(lanes_shared_only_runs_up_to_n) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, false));
  /* Keys are ignored without by_key: one key can run on every lane at once. */
  for (size_t i = 0; i < 6; i++) push(&l, i, "same");
  counters(&l, 6, 0);
  int used[3] = {0};
  for (size_t i = 0; i < 3; i++) used[pop_expect(&l, i, -1)]++;
  ASSERT(used[0] == 1 && used[1] == 1 && used[2] == 1);
  pop_none(&l);
  counters(&l, 3, 3);
  lanes_done(&l, 1);
  pop_expect(&l, 3, 1); /* FIFO order, on the lane that freed up */
  pop_none(&l);
  lanes_done(&l, 0);
  lanes_done(&l, 2);
  int la = pop_expect(&l, 4, -1);
  int lb = pop_expect(&l, 5, -1);
  ASSERT(la != lb && la != 1 && lb != 1);
  counters(&l, 0, 3);
  lanes_done(&l, 1);
  lanes_done(&l, la);
  lanes_done(&l, lb);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_fair_rotation_shared) {
  /* One entry at a time: without rotation lane 0 would take every entry. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 4, false));
  for (size_t i = 0; i < 12; i++) push(&l, i, NULL);
  int count[4] = {0};
  for (size_t i = 0; i < 12; i++) {
    int lane = pop_expect(&l, i, (int)(i % 4));
    count[lane]++;
    lanes_done(&l, lane);
  }
  for (int i = 0; i < 4; i++) ASSERT_INT_EQ(count[i], 3);
  lanes_free(&l);
}

TEST_IMPL(lanes_fair_rotation_keyed) {
  /* Every lane has a backlog and the caller runs one entry at a time (as
   * under a global in-flight cap of 1): each lane gets its turn in rotation. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 4, true));
  for (size_t round = 0; round < 3; round++)
    for (int lane = 0; lane < 4; lane++)
      push(&l, round * 4 + (size_t)lane, key_on_lane(&l, lane, 0));
  for (size_t i = 0; i < 12; i++) {
    int lane = pop_expect(&l, i, (int)(i % 4));
    lanes_done(&l, lane);
  }
  counters(&l, 0, 0);

  /* A hot lane that is always ready does not starve a lane that is ready
   * only now and then. */
  const char *hot = key_on_lane(&l, 0, 0), *cold = key_on_lane(&l, 3, 0);
  size_t next = 0;
  int cold_runs = 0;
  for (int step = 0; step < 40; step++) {
    push(&l, next++ % NENT, hot);
    if (step % 10 == 0) push(&l, next++ % NENT, cold);
    int lane;
    struct entry *e = lanes_pop(&l, &lane);
    ASSERT_NOT_NULL(e);
    if (lane == 3) cold_runs++;
    lanes_done(&l, lane);
  }
  ASSERT_INT_EQ(cold_runs, 4);
  lanes_drain_queued(&l);
  lanes_free(&l);
}

TEST_IMPL(lanes_drain_returns_all_queued) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true));
  const char *a = key_on_lane(&l, 0, 0), *b = key_on_lane(&l, 2, 0);
  push(&l, 0, a);
  push(&l, 1, a);
  push(&l, 2, NULL);
  push(&l, 3, b);
  push(&l, 4, a);
  push(&l, 5, NULL);
  push(&l, 6, b);
  int la = pop_expect(&l, 0, 0);
  int lb = pop_expect(&l, 2, 1);
  counters(&l, 5, 2);

  struct entry *list = lanes_drain_queued(&l);
  counters(&l, 0, 2);
  bool seen[NENT] = {false};
  size_t n = 0, last_a = 0, last_b = 2;
  for (struct entry *e = list; e; e = e->next, n++) {
    size_t i = idx(e);
    ASSERT(i < 7 && !seen[i]);
    seen[i] = true;
    /* Per-key order survives in the drained list. */
    if (i == 1 || i == 4) {
      ASSERT(i > last_a);
      last_a = i;
    }
    if (i == 3 || i == 6) {
      ASSERT(i > last_b);
      last_b = i;
    }
  }
  ASSERT_INT_EQ(n, 5);
  ASSERT(!seen[0] && !seen[2]); /* running entries stay with their lanes */
  pop_none(&l);
  ASSERT_NULL(lanes_drain_queued(&l));

  lanes_done(&l, la);
  lanes_done(&l, lb);
  counters(&l, 0, 0);
  /* The lanes keep working after a drain. */
  push(&l, 7, a);
  pop_expect(&l, 7, 0);
  lanes_done(&l, 0);
  lanes_free(&l);
}

/* ---- randomized property test ---- */

#define P_ENTRIES 6000
#define P_KEYS 7

static struct entry pent[P_ENTRIES];
static int pkey[P_ENTRIES];      /* key index, or -1 for none */
static size_t pseq[P_ENTRIES];   /* order within its key, or within the shared queue */
static bool pshared[P_ENTRIES];  /* went to the shared queue */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void property_run(int n, bool by_key, uint64_t seed, int ops) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, n, by_key));
  rng_state = seed;
  static const char *keys[P_KEYS] = {"acme",  "globex", "initech", "umbrella",
                                     "hooli", "wayne",  "stark"};
  int key_lane[P_KEYS];
  for (int k = 0; k < P_KEYS; k++) key_lane[k] = lanes_key_lane(&l, keys[k], strlen(keys[k]));

  /* The model: what has been pushed and started per key and in the shared
   * queue, what each lane runs, and how many wait for each lane. */
  size_t pushed[P_KEYS] = {0}, started[P_KEYS] = {0};
  bool key_running[P_KEYS] = {false};
  size_t shared_pushed = 0, shared_started = 0;
  int running_on[8];
  size_t lane_waiting[8] = {0};
  for (int i = 0; i < 8; i++) running_on[i] = -1;
  size_t queued = 0, running = 0, used = 0;
  size_t pops = 0;

  for (int op = 0; op < ops; op++) {
    unsigned r = (unsigned)(rng() % 100);
    if (r < 45 && used < P_ENTRIES) {
      size_t i = used++;
      int k = (int)(rng() % (P_KEYS + 2)) - 2; /* -2: empty key, -1: NULL */
      const char *key = k >= 0 ? keys[k] : k == -2 ? "" : NULL;
      pkey[i] = k >= 0 ? k : -1;
      pshared[i] = !by_key || k < 0;
      if (pshared[i]) {
        pseq[i] = shared_pushed++;
      } else {
        pseq[i] = pushed[k]++;
        lane_waiting[key_lane[k]]++;
      }
      lanes_push(&l, &pent[i], key, key ? strlen(key) : 0);
      queued++;
    } else if (r < 80) {
      int lane = -1;
      struct entry *e = lanes_pop(&l, &lane);
      if (!e) {
        /* Nothing may be left that could run now. */
        for (int j = 0; j < n; j++) {
          if (running_on[j] >= 0) continue;
          ASSERT_INT_EQ(lane_waiting[j], 0);
          ASSERT_INT_EQ(shared_pushed - shared_started, 0);
        }
        continue;
      }
      size_t i = (size_t)(e - pent);
      ASSERT(i < used);
      ASSERT(lane >= 0 && lane < n);
      ASSERT_INT_EQ(running_on[lane], -1);
      running_on[lane] = (int)i;
      if (pshared[i]) {
        ASSERT_INT_EQ(lane_waiting[lane], 0); /* own queue first */
        ASSERT_INT_EQ(pseq[i], shared_started);
        shared_started++;
        if (by_key) ASSERT_INT_EQ(pkey[i], -1);
      } else {
        int k = pkey[i];
        ASSERT_INT_EQ(lane, key_lane[k]);
        ASSERT(!key_running[k]); /* at most one per key */
        ASSERT_INT_EQ(pseq[i], started[k]); /* push order per key */
        key_running[k] = true;
        started[k]++;
        lane_waiting[lane]--;
      }
      queued--;
      running++;
      pops++;
    } else if (r < 99) {
      if (running == 0) continue;
      int lane;
      do lane = (int)(rng() % (uint64_t)n);
      while (running_on[lane] < 0);
      size_t i = (size_t)running_on[lane];
      if (!pshared[i]) key_running[pkey[i]] = false;
      running_on[lane] = -1;
      running--;
      lanes_done(&l, lane);
    } else {
      /* Rarely, a shutdown-style drain: everything queued comes back once,
       * each key in push order. */
      size_t got = 0, kseen[P_KEYS], sseen = shared_started;
      for (int k = 0; k < P_KEYS; k++) kseen[k] = started[k];
      for (struct entry *e = lanes_drain_queued(&l); e; e = e->next, got++) {
        size_t i = (size_t)(e - pent);
        ASSERT(i < used);
        if (pshared[i])
          ASSERT_INT_EQ(pseq[i], sseen++);
        else
          ASSERT_INT_EQ(pseq[i], kseen[pkey[i]]++);
      }
      ASSERT_INT_EQ(got, queued);
      for (int k = 0; k < P_KEYS; k++) ASSERT_INT_EQ(kseen[k], pushed[k]);
      ASSERT_INT_EQ(sseen, shared_pushed);
      for (int k = 0; k < P_KEYS; k++) started[k] = pushed[k];
      shared_started = shared_pushed;
      for (int j = 0; j < 8; j++) lane_waiting[j] = 0;
      queued = 0;
    }
    ASSERT_INT_EQ(l.queued, queued);
    ASSERT_INT_EQ(l.running, running);
  }
  ASSERT(pops > (size_t)ops / 10); /* the run did exercise the lanes */

  for (int j = 0; j < n; j++)
    if (running_on[j] >= 0) lanes_done(&l, j);
  size_t left = 0;
  for (struct entry *e = lanes_drain_queued(&l); e; e = e->next) left++;
  ASSERT_INT_EQ(left, queued);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_property_random) {
  static const int ns[] = {1, 2, 3, 5, 8};
  uint64_t seed = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    property_run(ns[i], true, seed + i, 5000);
    property_run(ns[i], false, seed + 100 + i, 5000);
  }
}
