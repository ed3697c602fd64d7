/* Tests for held: the set of (key, id) a subscription holds, checked against
 * a model over many random adds and removes through growth, the backward
 * shift of removal across the table's end, and ids that differ only by key. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "held.h"
#include "task.h"

static struct entry entry_of(char *id, unsigned char key) {
  struct entry e;
  memset(&e, 0, sizeof e);
  e.id = id;
  e.key = key;
  return e;
}

TEST_IMPL(held_by_key_and_id) {
  struct held h = {0};
  char a[] = "1-0", b[] = "2-0";
  struct entry a0 = entry_of(a, 0), a1 = entry_of(a, 1), b0 = entry_of(b, 0);
  ASSERT(!held_has(&h, &a0));
  held_remove(&h, &a0); /* nothing held: nothing happens */
  ASSERT(held_add(&h, &a0));
  ASSERT(held_add(&h, &a0)); /* twice is once */
  ASSERT_INT_EQ(h.n, 1);
  ASSERT(held_has(&h, &a0));
  ASSERT(!held_has(&h, &a1)); /* the same id on the retry stream is another entry */
  ASSERT(held_add(&h, &a1));
  ASSERT(held_add(&h, &b0));
  held_remove(&h, &a0);
  ASSERT(!held_has(&h, &a0));
  ASSERT(held_has(&h, &a1));
  ASSERT(held_has(&h, &b0));
  ASSERT_INT_EQ(h.n, 2);
  held_free(&h);
  ASSERT(!held_has(&h, &a1));
}

/* Random adds and removes of nids ids on two keys: the set says what a
 * plain array of flags says (checked every 1000 steps). */
static void check_against_model(int nids, int ops) {
  static bool model[2][3000];
  static char ids[3000][24];
  ASSERT(nids <= 3000);
  memset(model, 0, sizeof model);
  struct held h = {0};
  unsigned rng = 12345;
  size_t count = 0;
  for (int i = 0; i < nids; i++)
    snprintf(ids[i], sizeof ids[i], "%d-%d", 1700000000 + i / 7, i % 7);
  for (int op = 0; op < ops; op++) {
    rng = rng * 1103515245u + 12345u;
    int i = (int)((rng >> 8) % (unsigned)nids);
    unsigned char key = (unsigned char)((rng >> 4) & 1);
    struct entry e = entry_of(ids[i], key);
    /* adds outnumber removes early on, so the table grows, then even out */
    bool add = (rng >> 20) % 4 < (op < ops / 2 ? 3u : 2u);
    if (add) {
      ASSERT(held_add(&h, &e));
      if (!model[key][i]) count++;
      model[key][i] = true;
    } else {
      held_remove(&h, &e);
      if (model[key][i]) count--;
      model[key][i] = false;
    }
    ASSERT_INT_EQ(h.n, count);
    if (op % 1000 == 999) {
      for (int k = 0; k < 2; k++)
        for (int j = 0; j < nids; j++) {
          struct entry f = entry_of(ids[j], (unsigned char)k);
          ASSERT(held_has(&h, &f) == model[k][j]);
        }
    }
  }
  ASSERT(h.cap >= 2 * h.n);
  held_free(&h);
}

/* 20,000 steps over 3,000 ids: growth from 64 slots, removals all along. */
TEST_IMPL(held_matches_a_model) { check_against_model(3000, 20000); }

/* The slot an id alone takes in a fresh table of 64 slots: its home. */
static size_t home_of(char *id) {
  struct held h = {0};
  struct entry e = entry_of(id, 0);
  ASSERT(held_add(&h, &e));
  ASSERT_INT_EQ(h.cap, 64);
  size_t slot = 0;
  while (h.slots[slot].id[0] == '\0') slot++;
  held_free(&h);
  return slot;
}

/* A run of probes across the table's end: removing its first entry moves
 * back the ones that belong before the hole and leaves the one at its
 * home, on either side of the end. */
TEST_IMPL(held_removal_across_the_end) {
  static char ids[4000][24];
  char *last[2] = {NULL, NULL}, *first = NULL; /* two ids homed at 63, one at 0 */
  for (int i = 0; i < 4000 && !(last[1] && first); i++) {
    snprintf(ids[i], sizeof ids[i], "%d-0", i + 1);
    size_t home = home_of(ids[i]);
    if (home == 63 && !last[0])
      last[0] = ids[i];
    else if (home == 63 && !last[1])
      last[1] = ids[i];
    else if (home == 0 && !first)
      first = ids[i];
  }
  ASSERT(last[0] && last[1] && first);
  struct held h = {0};
  struct entry a = entry_of(last[0], 0), b = entry_of(last[1], 0), c = entry_of(first, 0);
  ASSERT(held_add(&h, &a)); /* slot 63 */
  ASSERT(held_add(&h, &c)); /* slot 0, its home */
  ASSERT(held_add(&h, &b)); /* homed at 63: past c, slot 1 */
  ASSERT(strcmp(h.slots[1].id, last[1]) == 0);
  held_remove(&h, &a);
  ASSERT(!held_has(&h, &a));
  ASSERT(held_has(&h, &b));
  ASSERT(held_has(&h, &c));
  ASSERT(strcmp(h.slots[0].id, first) == 0);    /* stayed at its home */
  ASSERT(strcmp(h.slots[63].id, last[1]) == 0); /* moved back across the end */
  held_free(&h);
}

/* held_started marks the one entry as running since a time, which stays
 * with it through growth and removals of others; a new entry waits (in a
 * lane) until it starts, and an entry not held is left alone. */
TEST_IMPL(held_started_stays_with_its_entry) {
  static char ids[200][24];
  struct held h = {0};
  for (int i = 0; i < 200; i++) snprintf(ids[i], sizeof ids[i], "%d-0", i + 1);
  struct entry first = entry_of(ids[0], 0), other = entry_of(ids[0], 1);
  ASSERT(held_add(&h, &first));
  held_started(&h, &other, 5); /* not held: nothing */
  held_started(&h, &first, 1234);
  for (int i = 1; i < 200; i++) { /* from 64 slots to 512: every id moved */
    struct entry e = entry_of(ids[i], 0);
    ASSERT(held_add(&h, &e));
  }
  for (int i = 1; i < 200; i += 2) {
    struct entry e = entry_of(ids[i], 0);
    held_remove(&h, &e);
  }
  int running = 0;
  for (size_t i = 0; i < h.cap; i++) {
    if (h.slots[i].id[0] == '\0' || !h.slots[i].running) continue;
    running++;
    ASSERT(strcmp(h.slots[i].id, ids[0]) == 0 && h.slots[i].key == 0);
    ASSERT(h.slots[i].started_ms == 1234 && !h.slots[i].overran);
  }
  ASSERT_INT_EQ(running, 1);
  held_remove(&h, &first);
  ASSERT(held_add(&h, &first)); /* taken on again: waiting, not running */
  for (size_t i = 0; i < h.cap; i++) ASSERT(!h.slots[i].running);
  held_free(&h);
}
