/* Tests for the helpers of base/ that several layers share: backoff.h
 * (doubling waits up to a cap), grow.h (doubling arrays) and handler_name.h
 * (a handler file's names). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "grow.h"
#include "handler_name.h"
#include "task.h"

TEST_IMPL(backoff_next_doubles_up_to_the_cap) {
  ASSERT_INT_EQ(backoff_next(0, 100, 5000), 100);
  ASSERT_INT_EQ(backoff_next(100, 100, 5000), 200);
  ASSERT_INT_EQ(backoff_next(1600, 100, 5000), 3200);
  ASSERT_INT_EQ(backoff_next(3200, 100, 5000), 5000);
  ASSERT_INT_EQ(backoff_next(5000, 100, 5000), 5000);
  ASSERT_INT_EQ(backoff_next(UINT64_MAX, 100, 5000), 5000); /* no overflow */
  ASSERT_INT_EQ(backoff_next(0, 9000, 5000), 5000);         /* the cap wins */
}

TEST_IMPL(backoff_nth_counts_failures) {
  ASSERT_INT_EQ(backoff_nth(0, 100, 5000), 100);
  ASSERT_INT_EQ(backoff_nth(1, 100, 5000), 100);
  ASSERT_INT_EQ(backoff_nth(2, 100, 5000), 200);
  ASSERT_INT_EQ(backoff_nth(6, 100, 5000), 3200);
  ASSERT_INT_EQ(backoff_nth(7, 100, 5000), 5000);
  ASSERT_INT_EQ(backoff_nth(1000000, 100, 5000), 5000);
}

TEST_IMPL(grow_doubles_and_keeps_what_it_holds) {
  int *v = NULL;
  size_t cap = 0;
  int *g = grow(v, &cap, 1, sizeof *v, 4);
  ASSERT_NOT_NULL(g);
  ASSERT_INT_EQ(cap, 4);
  v = g;
  for (int i = 0; i < 4; i++) v[i] = i;
  ASSERT(grow(v, &cap, 4, sizeof *v, 4) == v); /* room enough: the same array */
  ASSERT_INT_EQ(cap, 4);
  g = grow(v, &cap, 9, sizeof *v, 4);
  ASSERT_NOT_NULL(g);
  ASSERT_INT_EQ(cap, 16);
  v = g;
  for (int i = 0; i < 4; i++) ASSERT_INT_EQ(v[i], i);
  free(v);
}

TEST_IMPL(grow_refuses_what_cannot_be_counted) {
  char *b = NULL;
  size_t cap = 0;
  b = grow(b, &cap, 10, 1, 0); /* no first: starts at 1 */
  ASSERT_NOT_NULL(b);
  ASSERT_INT_EQ(cap, 16);
  ASSERT_NULL(grow(b, &cap, SIZE_MAX / 2 + 2, 1, 0));
  ASSERT_NULL(grow(b, &cap, SIZE_MAX / 4, 8, 0));
  ASSERT_INT_EQ(cap, 16); /* a refusal changes nothing */
  free(b);
}

static const char *name(const char *path) {
  static char out[64];
  size_t n;
  const char *s = handler_name_of(path, &n);
  memcpy(out, s, n);
  out[n] = '\0';
  return out;
}

TEST_IMPL(handler_name_from_a_path) {
  ASSERT_STR_EQ(handler_name_file("handlers/orders.lua"), "orders.lua");
  ASSERT_STR_EQ(handler_name_file("orders.lua"), "orders.lua");
  ASSERT_STR_EQ(handler_name_file("/a/b/"), "");
  ASSERT_STR_EQ(name("handlers/orders.lua"), "orders");
  ASSERT_STR_EQ(name("x.lua"), "x");
  ASSERT_STR_EQ(name("dir/.lua"), ".lua");
  ASSERT_STR_EQ(name("dir/readme"), "readme");
  ASSERT_STR_EQ(name("a.lua.bak"), "a.lua.bak");
}
