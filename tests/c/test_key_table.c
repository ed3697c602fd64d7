/* Tests for key_table: keys found by their bytes, stable ids, removal that
 * keeps every other key findable (checked against a model over many random
 * adds and removes in a small, crowded table), growth, and the hash. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "key_table.h"
#include "task.h"

TEST_IMPL(key_table_finds_by_bytes) {
  struct key_table t;
  ASSERT_INT_EQ(key_table_init(&t, 0), -1);
  ASSERT_OK(key_table_init(&t, 4));
  ASSERT_INT_EQ(key_table_find(&t, "acme", 4), -1);
  int a = key_table_add(&t, "acme", 4);
  int b = key_table_add(&t, "a\0b", 3);
  int c = key_table_add(&t, "a\0c", 3);
  ASSERT(a >= 0 && b >= 0 && c >= 0 && a != b && b != c && a != c);
  /* Same bytes elsewhere, and only len bytes count. */
  char copy[] = "acme-and-more";
  ASSERT_INT_EQ(key_table_find(&t, copy, 4), a);
  ASSERT_INT_EQ(key_table_find(&t, copy, 5), -1);
  ASSERT_INT_EQ(key_table_find(&t, "acm", 3), -1);
  ASSERT_INT_EQ(key_table_find(&t, "a\0b", 3), b);
  ASSERT_INT_EQ(key_table_find(&t, "a\0c", 3), c);
  ASSERT_INT_EQ(key_table_find(&t, "a", 1), -1);
  int d = key_table_add(&t, "x", 1);
  ASSERT(d >= 0);
  ASSERT_INT_EQ(key_table_add(&t, "y", 1), -1); /* full */
  ASSERT_INT_EQ(t.count, 4);
  key_table_remove(&t, b);
  ASSERT_INT_EQ(key_table_find(&t, "a\0b", 3), -1);
  ASSERT_INT_EQ(key_table_find(&t, "a\0c", 3), c);
  ASSERT_INT_EQ(key_table_add(&t, "y", 1), b); /* the freed id is reused */
  /* Rebinding moves the pointer, not the key. */
  key_table_rebind(&t, a, copy);
  ASSERT(t.rec[a].key == copy);
  ASSERT_INT_EQ(key_table_find(&t, "acme", 4), a);
  key_table_free(&t);
  key_table_free(&t);
}

TEST_IMPL(key_table_hash_is_stable_and_spread) {
  /* Fixed constants: the same key hashes alike on every run and host. */
  ASSERT(key_table_hash("acme", 4) == key_table_hash("acme-and-more", 4));
  ASSERT(key_table_hash("a\0b", 3) != key_table_hash("a\0c", 3));
  /* Bytes that differ only in high bits still spread over the low bits. */
  int seen[8] = {0}, distinct = 0;
  for (int c = 0; c < 8; c++) {
    char key = (char)(0x01 + c * 0x10);
    int slot = (int)(key_table_hash(&key, 1) & 7);
    if (!seen[slot]++) distinct++;
  }
  ASSERT(distinct >= 4);
}

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

#define M_KEYS 40

TEST_IMPL(key_table_random_against_model) {
  /* 40 possible keys over a table of 16 ids (32 slots): long probe runs,
   * wrap-arounds and backward shifts all happen; every key in the model must
   * stay findable under its id, every other key absent. Then grow, twice. */
  static char names[M_KEYS][16];
  for (int k = 0; k < M_KEYS; k++) snprintf(names[k], sizeof names[k], "key-%d", k);
  int id_of[M_KEYS];
  for (int k = 0; k < M_KEYS; k++) id_of[k] = -1;
  struct key_table t;
  size_t cap = 16, present = 0;
  ASSERT_OK(key_table_init(&t, cap));
  for (int op = 0; op < 60000; op++) {
    if (op == 20000 || op == 40000) {
      cap *= 2;
      ASSERT_OK(key_table_grow(&t, cap));
      ASSERT_INT_EQ(key_table_grow(&t, cap), -1); /* not more than now */
    }
    int k = (int)(rng() % M_KEYS);
    if (id_of[k] >= 0) {
      key_table_remove(&t, id_of[k]);
      id_of[k] = -1;
      present--;
    } else if (present < cap) {
      id_of[k] = key_table_add(&t, names[k], strlen(names[k]));
      ASSERT(id_of[k] >= 0 && (size_t)id_of[k] < cap);
      present++;
    } else {
      ASSERT_INT_EQ(key_table_add(&t, names[k], strlen(names[k])), -1);
    }
    ASSERT_INT_EQ(t.count, present);
    for (int j = 0; j < M_KEYS; j++)
      ASSERT_INT_EQ(key_table_find(&t, names[j], strlen(names[j])), id_of[j]);
  }
  key_table_free(&t);
}
