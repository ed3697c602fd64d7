/* Tests for key_gate: entries waiting by partition key off the lanes, let
 * through in each key's order, keys by their bytes (binary ones too), the
 * key's bytes moving to the next entry as the one holding them passes, and
 * draining (stop) taking everything, oldest of each key first; and for
 * key_rate_name: the limiter keys of short and long keys. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "key_gate.h"
#include "key_rate.h"
#include "task.h"

static struct entry *make(const char *id, const char *key, size_t keylen) {
  const char *f[] = {"data", "{}", "partition-key", key};
  size_t len[] = {4, 2, 13, keylen};
  return entry_new(id, strlen(id), key ? 4 : 2, f, len);
}

static char passed[64][16];
static int npassed;

static void pass(void *data, struct entry *e) {
  (void)data;
  snprintf(passed[npassed++], sizeof passed[0], "%s", e->id);
  entry_free(e); /* the key's bytes the gate held go with it */
}

TEST_IMPL(key_gate_by_key_in_order) {
  npassed = 0;
  key_gate *g = gate_new(pass, NULL);
  ASSERT_NOT_NULL(g);
  struct entry *none = make("0-1", NULL, 0);
  ASSERT(!gate_hold(g, none)); /* no key: not the gate's */
  entry_free(none);
  const char bin[] = {'a', '\0', 'b'};
  ASSERT(gate_hold(g, make("1-1", "a", 1)));
  ASSERT(gate_hold(g, make("1-2", bin, 3))); /* "a\0b" is another key than "a" */
  ASSERT(gate_hold(g, make("1-3", "a", 1)));
  ASSERT(gate_hold(g, make("1-4", "a", 1)));
  ASSERT_INT_EQ(gate_waiting(g), 4);
  int a = gate_next_key(g, 0), b = gate_next_key(g, a + 1);
  ASSERT(a >= 0 && b >= 0 && gate_next_key(g, b + 1) == -1);
  if (gate_key_at(g, a)->len != 1) {
    int t = a;
    a = b;
    b = t;
  }
  ASSERT_INT_EQ(gate_key_at(g, a)->n, 3);
  ASSERT_INT_EQ(gate_key_at(g, b)->n, 1);
  gate_release(g, a, 2);
  ASSERT_INT_EQ(npassed, 2);
  ASSERT_STR_EQ(passed[0], "1-1");
  ASSERT_STR_EQ(passed[1], "1-3");
  /* the key now lives in 1-4's bytes: found again by them */
  ASSERT(gate_hold(g, make("1-5", "a", 1)));
  ASSERT_INT_EQ(gate_key_at(g, a)->n, 2);
  gate_release(g, a, 10); /* fewer waiting: all of them, and the key leaves */
  ASSERT_INT_EQ(npassed, 4);
  ASSERT_STR_EQ(passed[3], "1-5");
  ASSERT_INT_EQ(gate_waiting(g), 1);
  ASSERT_INT_EQ(gate_next_key(g, 0), b);
  gate_free(g); /* frees 1-2 */
  LEAK_CHECK();
}

TEST_IMPL(key_gate_drains_everything) {
  npassed = 0;
  key_gate *g = gate_new(pass, NULL);
  char id[16], key[16];
  for (int i = 0; i < 300; i++) { /* past the first table: it grows */
    snprintf(id, sizeof id, "%d-0", i);
    snprintf(key, sizeof key, "k%d", i % 150);
    ASSERT(gate_hold(g, make(id, key, strlen(key))));
  }
  ASSERT_INT_EQ(gate_waiting(g), 300);
  struct entry *first = make("x-0", NULL, 0);
  struct entry *list = gate_drain(g, first);
  ASSERT(list == first);
  ASSERT_INT_EQ(gate_waiting(g), 0);
  ASSERT_INT_EQ(gate_next_key(g, 0), -1);
  int n = 0;
  bool k0_in_order = true;
  long last_k0 = -1;
  while (list) {
    struct entry *e = list;
    list = e->next;
    size_t len;
    const char *k = entry_get(e, "partition-key", &len);
    if (k && len == 2 && memcmp(k, "k0", 2) == 0) {
      long at = strtol(e->id, NULL, 10);
      k0_in_order = k0_in_order && at > last_k0;
      last_k0 = at;
    }
    entry_free(e);
    n++;
  }
  ASSERT_INT_EQ(n, 301);
  ASSERT(k0_in_order);
  ASSERT(gate_hold(g, make("9-0", "k0", 2))); /* usable again */
  gate_free(g);
  LEAK_CHECK();
}

TEST_IMPL(key_rate_names) {
  const char *prefix = "luastream:rate:{jobs}:work";
  char out[512];
  ASSERT(key_rate_name_max(prefix) <= sizeof out);
  size_t n = key_rate_name(prefix, "a\0b", 3, out);
  ASSERT_INT_EQ(n, strlen(prefix) + 5 + 3);
  ASSERT(memcmp(out, "luastream:rate:{jobs}:work:key:a\0b", n) == 0);
  char longkey[KEY_RATE_RAW_MAX + 1];
  memset(longkey, 'x', sizeof longkey);
  n = key_rate_name(prefix, longkey, sizeof longkey, out);
  out[n] = '\0';
  ASSERT_INT_EQ(n, strlen(prefix) + 6 + 40);
  ASSERT(strncmp(out, "luastream:rate:{jobs}:work:keyh:", 32) == 0);
  /* KEY_RATE_RAW_MAX bytes still go as they are */
  n = key_rate_name(prefix, longkey, KEY_RATE_RAW_MAX, out);
  ASSERT_INT_EQ(n, strlen(prefix) + 5 + KEY_RATE_RAW_MAX);
}
