/* Tests for lanes: per-key order, one running entry per key, keys on any free
 * lane, keys compared by their bytes and only while those bytes live, keyless
 * entries on any free lane, the shared-only mode, fairness, growth, counters
 * and drain, plus a randomized run checked against a simple model of the
 * rules. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

static void counters(const struct lanes *l, size_t queued, size_t running) {
  ASSERT_INT_EQ(l->queued, queued);
  ASSERT_INT_EQ(l->running, running);
  ASSERT_INT_EQ(lanes_in_flight(l), queued + running);
}

TEST_IMPL(lanes_init_rejects_no_lanes) {
  struct lanes l;
  ASSERT_INT_EQ(lanes_init(&l, 0, true, 8), -1);
  ASSERT_INT_EQ(lanes_init(&l, -3, false, 8), -1);
  ASSERT_OK(lanes_init(&l, 1, false, 0));
  counters(&l, 0, 0);
  pop_none(&l);
  lanes_free(&l);
  lanes_free(&l); /* a freed lanes is zeroed: freeing again is harmless */
}

TEST_IMPL(lanes_by_key_keeps_order_per_key) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 4, true, 16));
  /* a: 0 1 2, b: 3 4, pushed interleaved. */
  push(&l, 0, "a");
  push(&l, 3, "b");
  push(&l, 1, "a");
  push(&l, 4, "b");
  push(&l, 2, "a");
  counters(&l, 5, 0);

  int la = pop_expect(&l, 0, -1);
  int lb = pop_expect(&l, 3, -1);
  ASSERT(la != lb);
  pop_none(&l); /* both keys are running: their next entries wait, lanes free or not */
  counters(&l, 3, 2);

  lanes_done(&l, lb);
  lb = pop_expect(&l, 4, -1);
  pop_none(&l);
  lanes_done(&l, la);
  counters(&l, 2, 1);
  la = pop_expect(&l, 1, -1);
  lanes_done(&l, lb);
  pop_none(&l); /* b is drained; a's entry 1 still runs */
  lanes_done(&l, la);
  la = pop_expect(&l, 2, -1);
  lanes_done(&l, la);
  counters(&l, 0, 0);
  pop_none(&l);
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_spreads_keys_over_every_lane) {
  /* As many keys as lanes: every key runs at once, whatever their hashes (a
   * fixed hash % n would put some keys on one lane and leave lanes idle). */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 8, true, 64));
  char keys[8][8];
  for (int k = 0; k < 8; k++) snprintf(keys[k], sizeof keys[k], "k%d", k);
  for (size_t i = 0; i < 16; i++) push(&l, i, keys[i % 8]);
  bool used[8] = {false};
  int lane_of[8];
  for (size_t i = 0; i < 8; i++) {
    lane_of[i] = pop_expect(&l, i, -1);
    ASSERT(!used[lane_of[i]]);
    used[lane_of[i]] = true;
  }
  pop_none(&l);
  counters(&l, 8, 8);
  /* A key's next entry starts on whichever lane frees first, not its own. */
  lanes_done(&l, lane_of[5]);
  lanes_done(&l, lane_of[2]);
  int l2 = pop_expect(&l, 13, -1); /* key 5 became ready first */
  int l3 = pop_expect(&l, 10, -1);
  ASSERT((l2 == lane_of[5] && l3 == lane_of[2]) || (l2 == lane_of[2] && l3 == lane_of[5]));
  lanes_drain_queued(&l);
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_key_waits_but_others_run) {
  /* Two lanes, one key with a backlog: the other keys are not stuck behind it. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 2, true, 16));
  push(&l, 0, "hot");
  push(&l, 1, "hot");
  push(&l, 2, "hot");
  push(&l, 3, "cold");
  push(&l, 4, "other");
  int lh = pop_expect(&l, 0, -1);
  int lc = pop_expect(&l, 3, -1);
  pop_none(&l);
  lanes_done(&l, lc);
  lc = pop_expect(&l, 4, -1); /* not hot's entry 1: hot still runs */
  lanes_done(&l, lh);
  lh = pop_expect(&l, 1, -1);
  lanes_done(&l, lc);
  pop_none(&l); /* only hot is left and it runs */
  lanes_done(&l, lh);
  lh = pop_expect(&l, 2, -1);
  lanes_done(&l, lh);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_compares_key_bytes) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 5, true, 16));
  /* Only keylen bytes count, and they may include a NUL. */
  lanes_push(&l, &ent[0], "acme-and-more", 4);
  lanes_push(&l, &ent[1], "acme", 4);
  lanes_push(&l, &ent[2], "a\0b", 3);
  lanes_push(&l, &ent[3], "a\0c", 3);
  lanes_push(&l, &ent[4], "a", 1);
  pop_expect(&l, 0, -1);
  pop_expect(&l, 2, -1);
  pop_expect(&l, 3, -1);
  pop_expect(&l, 4, -1);
  pop_none(&l); /* a lane is free, but entry 1 is acme's second */
  lanes_free(&l);
}

TEST_IMPL(lanes_by_key_reads_only_live_key_bytes) {
  /* Each push brings its own copy of the key; copies are freed as their
   * entries are (done, or drained). Under ASan a read of a freed copy fails. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true, 4));
  char *b0 = strdup("acme"), *b1 = strdup("acme");
  lanes_push(&l, &ent[0], b0, 4);
  int l0 = pop_expect(&l, 0, -1);
  lanes_push(&l, &ent[1], b1, 4); /* waits behind 0 */
  pop_none(&l);
  lanes_done(&l, l0);
  free(b0);
  int l1 = pop_expect(&l, 1, -1);
  char *b2 = strdup("acme");
  lanes_push(&l, &ent[2], b2, 4);
  struct entry *left = lanes_drain_queued(&l);
  ASSERT(left == &ent[2] && left->next == NULL);
  free(b2);
  char *b3 = strdup("acme");
  lanes_push(&l, &ent[3], b3, 4); /* compared with b1, the running entry's */
  pop_none(&l);                   /* and waits: acme still runs */
  free(b1);
  lanes_done(&l, l1);
  int l3 = pop_expect(&l, 3, -1);
  free(b3); /* the entry is freed before its done: done reads no key */
  lanes_done(&l, l3);
  counters(&l, 0, 0);
  ASSERT_INT_EQ(l.keys.count, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_grow_past_expected) {
  /* More entries than the caller said it would hold: the tables double. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 2, true, 2));
  for (size_t i = 0; i < NENT; i++) push(&l, i, (i % 3) ? "a" : (i % 2 ? "b" : "c"));
  counters(&l, NENT, 0);
  ASSERT(l.cap >= NENT);
  long last[3] = {-1, -1, -1};
  bool seen[NENT] = {false};
  for (size_t n = 0; n < NENT; n++) {
    int lane;
    struct entry *e = lanes_pop(&l, &lane);
    ASSERT_NOT_NULL(e);
    size_t i = idx(e);
    int k = (i % 3) ? 0 : (i % 2 ? 1 : 2);
    ASSERT(!seen[i] && (long)i > last[k]);
    seen[i] = true;
    last[k] = (long)i;
    lanes_done(&l, lane);
  }
  counters(&l, 0, 0);
  ASSERT_INT_EQ(l.keys.count, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_keyless_run_on_any_free_lane) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true, 16));
  push(&l, 0, "k");
  int lk = pop_expect(&l, 0, -1);
  /* Keyless (NULL or empty key) entries take the two other lanes, in order. */
  push(&l, 1, NULL);
  push(&l, 2, "");
  push(&l, 3, NULL);
  int l1 = pop_expect(&l, 1, -1);
  int l2 = pop_expect(&l, 2, -1);
  ASSERT(l1 != lk && l2 != lk && l1 != l2);
  pop_none(&l); /* every lane is busy */
  counters(&l, 1, 3);
  lanes_done(&l, lk);
  lk = pop_expect(&l, 3, lk); /* the freed lane runs keyless work */
  /* A keyed entry of a key that is not running starts at once. */
  push(&l, 4, "k");
  pop_none(&l); /* ... once a lane is free */
  lanes_done(&l, l1);
  pop_expect(&l, 4, l1);
  lanes_done(&l, l1);
  lanes_done(&l, l2);
  lanes_done(&l, lk);
  counters(&l, 0, 0);
  lanes_free(&l);
}

TEST_IMPL(lanes_shared_only_runs_up_to_n) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, false, 16));
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
  ASSERT_OK(lanes_init(&l, 4, false, 16));
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
  /* A key with a backlog takes its turn behind the keys that became ready
   * meanwhile: a hot key that is always ready does not starve a cold one. */
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 1, true, 64));
  size_t next = 0;
  int cold_runs = 0;
  for (int step = 0; step < 40; step++) {
    push(&l, next++ % NENT, "hot");
    if (step % 10 == 0) push(&l, next++ % NENT, "cold");
    int lane;
    struct entry *e = lanes_pop(&l, &lane);
    ASSERT_NOT_NULL(e);
    if (idx(e) % 11 == 1) cold_runs++; /* cold's entries: 1, 12, 23, 34 */
    lanes_done(&l, lane);
  }
  ASSERT_INT_EQ(cold_runs, 4);
  lanes_drain_queued(&l);
  lanes_free(&l);
}

TEST_IMPL(lanes_drain_returns_all_queued) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 3, true, 16));
  push(&l, 0, "a");
  push(&l, 1, "a");
  push(&l, 2, NULL);
  push(&l, 3, "b");
  push(&l, 4, "a");
  push(&l, 5, NULL);
  push(&l, 6, "b");
  int la = pop_expect(&l, 0, -1);
  int ln = pop_expect(&l, 2, -1);
  counters(&l, 5, 2);

  struct entry *list = lanes_drain_queued(&l);
  counters(&l, 0, 2);
  bool seen[NENT] = {false};
  size_t n = 0, last_a = 0, last_b = 0;
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
  ASSERT_INT_EQ(l.keys.count, 1); /* a: still running */

  /* The lanes keep working after a drain, and a still waits for its entry 0. */
  push(&l, 7, "a");
  push(&l, 8, "b");
  pop_expect(&l, 8, 3 - la - ln);
  pop_none(&l);
  lanes_done(&l, la);
  lanes_done(&l, ln);
  lanes_done(&l, 3 - la - ln);
  la = pop_expect(&l, 7, -1);
  lanes_done(&l, la);
  counters(&l, 0, 0);
  lanes_free(&l);
}

/* ---- randomized property test ---- */

#define P_ENTRIES 6000
#define P_KEYS 7

static struct entry pent[P_ENTRIES];
static int pkey[P_ENTRIES];     /* key index, or -1 for none */
static size_t pseq[P_ENTRIES];  /* order within its key, or within the shared queue */
static bool pshared[P_ENTRIES]; /* went to the shared queue */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void property_run(int n, bool by_key, uint64_t seed, int ops) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, n, by_key, 8)); /* small: the run also makes it grow */
  rng_state = seed;
  static const char *keys[P_KEYS] = {"acme",  "globex", "initech", "umbrella",
                                     "hooli", "wayne",  "stark"};

  /* The model: what has been pushed and started per key and among entries
   * that wait for no key, and what each lane runs. */
  size_t pushed[P_KEYS] = {0}, started[P_KEYS] = {0};
  bool key_running[P_KEYS] = {false};
  size_t shared_pushed = 0, shared_started = 0;
  int running_on[8];
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
      pseq[i] = pshared[i] ? shared_pushed++ : pushed[k]++;
      ASSERT_OK(lanes_push(&l, &pent[i], key, key ? strlen(key) : 0));
      queued++;
    } else if (r < 80) {
      int lane = -1;
      struct entry *e = lanes_pop(&l, &lane);
      if (!e) {
        /* Nothing may be left that could run now: lanes all busy, or every
         * queued entry waits for its key's running one. */
        if (running < (size_t)n) {
          ASSERT_INT_EQ(shared_pushed - shared_started, 0);
          for (int k = 0; k < P_KEYS; k++)
            if (pushed[k] > started[k]) ASSERT(key_running[k]);
        }
        continue;
      }
      size_t i = (size_t)(e - pent);
      ASSERT(i < used);
      ASSERT(lane >= 0 && lane < n);
      ASSERT_INT_EQ(running_on[lane], -1);
      running_on[lane] = (int)i;
      if (pshared[i]) {
        ASSERT_INT_EQ(pseq[i], shared_started); /* keyless entries start in push order */
        shared_started++;
        if (by_key) ASSERT_INT_EQ(pkey[i], -1);
      } else {
        int k = pkey[i];
        ASSERT(!key_running[k]);            /* at most one per key */
        ASSERT_INT_EQ(pseq[i], started[k]); /* push order per key */
        key_running[k] = true;
        started[k]++;
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
      queued = 0;
    }
    ASSERT_INT_EQ(l.queued, queued);
    ASSERT_INT_EQ(l.running, running);
    if (by_key) {
      size_t live = 0;
      for (int k = 0; k < P_KEYS; k++) live += key_running[k] || pushed[k] > started[k];
      ASSERT_INT_EQ(l.keys.count, live); /* a key leaves once nothing of it is left */
    }
  }
  ASSERT(pops > (size_t)ops / 10); /* the run did exercise the lanes */

  for (int j = 0; j < n; j++)
    if (running_on[j] >= 0) lanes_done(&l, j);
  size_t left = 0;
  for (struct entry *e = lanes_drain_queued(&l); e; e = e->next) left++;
  ASSERT_INT_EQ(left, queued);
  counters(&l, 0, 0);
  ASSERT_INT_EQ(l.keys.count, 0);
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

/* lanes_pop_follow: a key's waiting entries run beside the one popped, in
 * order, each on a lane of its own; the key's next entry becomes ready only
 * once every one of them is done, whatever the order they finish in; the key
 * is gone after. */
TEST_IMPL(lanes_follow_runs_a_key_beside_itself) {
  struct lanes l;
  ASSERT_OK(lanes_init(&l, 4, true, 16));
  push(&l, 0, "a");
  push(&l, 1, "b");
  push(&l, 2, "a");
  push(&l, 3, "a");
  int l0 = pop_expect(&l, 0, -1);
  int l2 = -1, l3 = -1;
  struct entry *e = lanes_pop_follow(&l, l0, &l2);
  ASSERT(e == &ent[2]);
  e = lanes_pop_follow(&l, l0, &l3);
  ASSERT(e == &ent[3]);
  ASSERT(l0 != l2 && l2 != l3 && l0 != l3);
  int none = -7;
  ASSERT_NULL(lanes_pop_follow(&l, l0, &none)); /* nothing of a waits */
  ASSERT_INT_EQ(none, -7);
  counters(&l, 1, 3);
  push(&l, 4, "a"); /* behind all three */
  int l1 = pop_expect(&l, 1, -1);
  ASSERT_NULL(lanes_pop_follow(&l, l1, &none)); /* b has none waiting */
  pop_none(&l);                                 /* no lane free, and a runs */
  lanes_done(&l, l3); /* the newest first: the key's bytes move to a running one */
  pop_none(&l);
  lanes_done(&l, l0);
  pop_none(&l);
  lanes_done(&l, l2);
  int l4 = pop_expect(&l, 4, -1);
  lanes_done(&l, l4);
  lanes_done(&l, l1);
  counters(&l, 0, 0);
  ASSERT_INT_EQ(l.keys.count, 0);
  lanes_free(&l);
}
